// cudaemu's runtime: the device, memory, streams, events and graphs.
//
// Each stream keeps a queue that runs only where the toolkit would make the host wait: a
// stream, event or device synchronization, a blocking cudaMemcpy, cudaFree, or an async copy
// that involves pageable host memory. So a host that reads a result, or rewrites a pinned
// buffer, before the work it depends on has run sees what it would on a GPU: stale data.
// The legacy stream (NULL) orders itself with every blocking stream, as the toolkit's does.
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <deque>
#include <map>
#include <memory>
#include <set>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#else
#define ASAN_POISON_MEMORY_REGION(p, n) ((void)(p), (void)(n))
#define ASAN_UNPOISON_MEMORY_REGION(p, n) ((void)(p), (void)(n))
#endif

typedef std::vector<std::function<void()>> work_list;

struct CUstream_st {
    bool blocking;                       // created without cudaStreamNonBlocking
    std::deque<std::function<void()>> queue;
    std::unique_ptr<work_list> capture; // set while capturing
    bool invalidated;
};
struct CUevent_st {
    double ms;
    bool done;          // its record has run
    CUstream_st *where; // the stream of its last record
};
struct CUgraph_st {
    work_list work;
};
struct CUgraphExec_st {
    work_list work;
};

// The emulated device: an H100/H200-class part with 16 GiB of "memory", so that tests that
// ask for too much are refused as on a GPU, without a host that has that much.
static const size_t DEVICE_BYTES = (size_t)16 << 30;
static const size_t DEFAULT_SMEM = 48 * 1024, OPTIN_SMEM = 227 * 1024;

static thread_local cudaError_t last_error = cudaSuccess;
static std::map<const void *, size_t> allocations; // device: base -> bytes asked for
static std::map<const char *, size_t> pinned;     // cudaMallocHost: base -> bytes
static size_t allocated;
static std::map<const void *, int> dynamic_smem;
static CUstream_st legacy_stream = {true, {}, nullptr, false};
static std::set<CUstream_st *> streams;
static cudaStream_t capturing; // the stream being captured, if any

cudaError_t cudaemu_fail(cudaError_t e)
{
    last_error = e;
    return e;
}

void cudaemu_fatal(const char *what)
{
    fprintf(stderr, "cudaemu: %s\n", what);
    abort();
}

size_t cudaemu_dynamic_smem_limit(const void *func)
{
    auto it = dynamic_smem.find(func);
    return it == dynamic_smem.end() ? DEFAULT_SMEM : (size_t)it->second;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

// A call that synchronizes while a stream captures: the toolkit refuses it and spoils the
// capture.
static bool refused_in_capture(void)
{
    if (!capturing)
        return false;
    capturing->invalidated = true;
    return true;
}

static CUstream_st *queue_of(cudaStream_t s)
{
    return s ? s : &legacy_stream;
}

static void drain(CUstream_st *s)
{
    while (!s->queue.empty()) {
        std::function<void()> w = std::move(s->queue.front());
        s->queue.pop_front();
        w();
    }
}

// Work on the legacy stream waits for every blocking stream, and the other way round.
static void drain_before(CUstream_st *s)
{
    if (s == &legacy_stream) {
        for (CUstream_st *b : streams)
            if (b->blocking)
                drain(b);
    } else if (s->blocking) {
        drain(&legacy_stream);
    }
}

// Runs S's work and what it waits for: what the host sees after synchronizing with S.
static void finish(CUstream_st *s)
{
    drain_before(s);
    drain(s);
}

static void drain_all(void)
{
    drain(&legacy_stream);
    for (CUstream_st *s : streams)
        drain(s);
}

cudaError_t cudaemu_enqueue(cudaStream_t stream, std::function<void()> work)
{
    if (stream && stream->capture) {
        stream->capture->push_back(std::move(work));
        return cudaSuccess;
    }
    if (!stream && refused_in_capture())
        return cudaemu_fail(cudaErrorStreamCaptureUnsupported);
    CUstream_st *s = queue_of(stream);
    drain_before(s);
    s->queue.push_back(std::move(work));
    return cudaSuccess;
}

// ---------------------------------------------------------------------------------------
// errors and the device

extern "C" const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureUnmatched: return "the capture was not initiated in this stream";
    case cudaErrorStreamCaptureWrongThread: return "attempt to terminate a thread-local capture sequence from another thread";
    }
    return "unrecognized error code";
}

extern "C" cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

extern "C" cudaError_t cudaPeekAtLastError(void) { return last_error; }

extern "C" cudaError_t cudaGetDeviceCount(int *count)
{
    *count = 1;
    return cudaSuccess;
}

extern "C" cudaError_t cudaSetDevice(int device)
{
    return device == 0 ? cudaSuccess : cudaemu_fail(cudaErrorInvalidDevice);
}

extern "C" cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device)
{
    if (device != 0)
        return cudaemu_fail(cudaErrorInvalidDevice);
    switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = 132; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor: *value = 9; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; return cudaSuccess;
    }
    return cudaemu_fail(cudaErrorInvalidValue);
}

extern "C" cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    if (device != 0)
        return cudaemu_fail(cudaErrorInvalidDevice);
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "cudaemu (sm_90 emulated on the CPU)");
    prop->totalGlobalMem = DEVICE_BYTES;
    prop->sharedMemPerBlock = DEFAULT_SMEM;
    prop->sharedMemPerBlockOptin = OPTIN_SMEM;
    prop->maxThreadsPerBlock = 1024;
    prop->multiProcessorCount = 132;
    prop->major = 9;
    prop->minor = 0;
    return cudaSuccess;
}

extern "C" cudaError_t cudaDriverGetVersion(int *v)
{
    *v = 13000;
    return cudaSuccess;
}

extern "C" cudaError_t cudaRuntimeGetVersion(int *v)
{
    *v = 13000;
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    *free_bytes = DEVICE_BYTES - allocated;
    *total_bytes = DEVICE_BYTES;
    return cudaSuccess;
}

extern "C" cudaError_t cudaDeviceSynchronize(void)
{
    if (refused_in_capture())
        return cudaemu_fail(cudaErrorStreamCaptureUnsupported);
    drain_all();
    return cudaSuccess;
}

// ---------------------------------------------------------------------------------------
// memory

// The allocation is rounded up to 256 bytes; under ASan the bytes past what was asked for are
// poisoned, so a kernel that reads or writes past its buffer is reported.
extern "C" cudaError_t cudaMalloc(void **ptr, size_t size)
{
    *ptr = NULL;
    if (refused_in_capture())
        return cudaemu_fail(cudaErrorStreamCaptureUnsupported);
    if (size > DEVICE_BYTES - allocated)
        return cudaemu_fail(cudaErrorMemoryAllocation);
    const size_t padded = (size + 255) / 256 * 256 + 256;
    char *p = (char *)aligned_alloc(256, padded);
    if (!p)
        return cudaemu_fail(cudaErrorMemoryAllocation);
    ASAN_POISON_MEMORY_REGION(p + size, padded - size);
    allocations[p] = size;
    allocated += size;
    *ptr = p;
    return cudaSuccess;
}

extern "C" cudaError_t cudaFree(void *ptr)
{
    if (!ptr)
        return cudaSuccess;
    if (refused_in_capture())
        return cudaemu_fail(cudaErrorStreamCaptureUnsupported);
    drain_all(); // cudaFree waits for the device
    auto it = allocations.find(ptr);
    if (it == allocations.end())
        return cudaemu_fail(cudaErrorInvalidDevicePointer);
    const size_t padded = (it->second + 255) / 256 * 256 + 256;
    ASAN_UNPOISON_MEMORY_REGION(ptr, padded);
    allocated -= it->second;
    allocations.erase(it);
    free(ptr);
    return cudaSuccess;
}

extern "C" cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    *ptr = malloc(size ? size : 1);
    if (!*ptr)
        return cudaemu_fail(cudaErrorMemoryAllocation);
    pinned[(const char *)*ptr] = size;
    return cudaSuccess;
}

extern "C" cudaError_t cudaFreeHost(void *ptr)
{
    if (ptr && !pinned.erase((const char *)ptr))
        return cudaemu_fail(cudaErrorInvalidValue);
    free(ptr);
    return cudaSuccess;
}

static bool is_pinned(const void *p, size_t count)
{
    auto it = pinned.upper_bound((const char *)p);
    if (it == pinned.begin())
        return false;
    --it;
    return (const char *)p + count <= it->first + it->second;
}

static bool is_device(const void *p)
{
    auto it = allocations.upper_bound(p);
    if (it == allocations.begin())
        return false;
    --it;
    return (const char *)p < (const char *)it->first + it->second + 256;
}

// Blocking copies run on the legacy stream, after what precedes them there.
extern "C" cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, cudaMemcpyKind kind)
{
    (void)kind;
    if (refused_in_capture())
        return cudaemu_fail(cudaErrorStreamCaptureUnsupported);
    finish(&legacy_stream);
    if (count)
        memmove(dst, src, count);
    return cudaSuccess;
}

// Pinned host memory is read or written when the stream gets to the copy (a graph replays the
// copy from the same address); pageable host memory makes the copy synchronous, as in the
// toolkit, and cannot be captured.
extern "C" cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
                                       cudaMemcpyKind kind, cudaStream_t stream)
{
    (void)kind;
    const void *host = is_device(dst) ? (is_device(src) ? NULL : src) : dst;
    if (host && !is_pinned(host, count)) {
        if (stream && stream->capture) {
            stream->invalidated = true;
            return cudaemu_fail(cudaErrorStreamCaptureUnsupported);
        }
        finish(queue_of(stream));
        if (count)
            memmove(dst, src, count);
        return cudaSuccess;
    }
    return cudaemu_enqueue(stream, [dst, src, count]() {
        if (count)
            memmove(dst, src, count);
    });
}

// Like the toolkit's, asynchronous on device memory: it runs on the legacy stream.
extern "C" cudaError_t cudaMemset(void *ptr, int value, size_t count)
{
    return cudaemu_enqueue(NULL, [ptr, value, count]() { memset(ptr, value, count); });
}

extern "C" cudaError_t cudaMemsetAsync(void *ptr, int value, size_t count, cudaStream_t stream)
{
    return cudaemu_enqueue(stream, [ptr, value, count]() { memset(ptr, value, count); });
}

// ---------------------------------------------------------------------------------------
// streams and events

extern "C" cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags)
{
    *stream = new CUstream_st{!(flags & cudaStreamNonBlocking), {}, nullptr, false};
    streams.insert(*stream);
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    if (!stream || !streams.count(stream))
        return cudaemu_fail(cudaErrorInvalidResourceHandle);
    if (stream == capturing)
        capturing = NULL;
    drain(stream); // its work still completes
    streams.erase(stream);
    delete stream;
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    if (refused_in_capture())
        return cudaemu_fail(cudaErrorStreamCaptureUnsupported);
    finish(queue_of(stream));
    return cudaSuccess;
}

extern "C" cudaError_t cudaEventCreate(cudaEvent_t *event)
{
    *event = new CUevent_st{0.0, false, NULL};
    return cudaSuccess;
}

extern "C" cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    delete event;
    return cudaSuccess;
}

extern "C" cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    if (!event)
        return cudaemu_fail(cudaErrorInvalidResourceHandle);
    event->done = false;
    event->where = queue_of(stream);
    return cudaemu_enqueue(stream, [event]() {
        event->ms = now_ms();
        event->done = true;
    });
}

extern "C" cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    if (refused_in_capture())
        return cudaemu_fail(cudaErrorStreamCaptureUnsupported);
    if (!event)
        return cudaemu_fail(cudaErrorInvalidResourceHandle);
    if (event->where)
        drain(event->where);
    return cudaSuccess;
}

// Events whose record has not run yet are not ready, as on a GPU.
extern "C" cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    if (!start || !end || !start->where || !end->where)
        return cudaemu_fail(cudaErrorInvalidResourceHandle);
    if (!start->done || !end->done)
        return cudaemu_fail(cudaErrorNotReady);
    *ms = (float)(end->ms - start->ms);
    return cudaSuccess;
}

// ---------------------------------------------------------------------------------------
// graphs

extern "C" cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode)
{
    (void)mode;
    if (!stream || capturing) // the legacy stream cannot capture; one capture at a time here
        return cudaemu_fail(cudaErrorStreamCaptureUnsupported);
    stream->capture.reset(new work_list());
    stream->invalidated = false;
    capturing = stream;
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph)
{
    *graph = NULL;
    if (!stream || stream != capturing)
        return cudaemu_fail(cudaErrorStreamCaptureUnmatched);
    capturing = NULL;
    std::unique_ptr<work_list> work = std::move(stream->capture);
    if (stream->invalidated)
        return cudaemu_fail(cudaErrorStreamCaptureInvalidated);
    *graph = new CUgraph_st{std::move(*work)};
    return cudaSuccess;
}

extern "C" cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph,
                                            unsigned long long flags)
{
    (void)flags;
    if (!graph)
        return cudaemu_fail(cudaErrorInvalidValue);
    *exec = new CUgraphExec_st{graph->work};
    return cudaSuccess;
}

extern "C" cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream)
{
    if (!exec)
        return cudaemu_fail(cudaErrorInvalidValue);
    std::shared_ptr<work_list> work(new work_list(exec->work)); // exec may be destroyed first
    return cudaemu_enqueue(stream, [work]() {
        for (auto &w : *work)
            w();
    });
}

extern "C" cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
    delete graph;
    return cudaSuccess;
}

extern "C" cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec)
{
    delete exec;
    return cudaSuccess;
}

extern "C" cudaError_t cudaFuncSetAttribute(const void *func, cudaFuncAttribute attr, int value)
{
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0
        || (size_t)value > OPTIN_SMEM)
        return cudaemu_fail(cudaErrorInvalidValue);
    dynamic_smem[func] = value;
    return cudaSuccess;
}
