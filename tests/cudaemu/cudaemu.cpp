// cudaemu's runtime: device memory, streams, events, graphs and the launch of a kernel as
// blocks of fibers (include/cudaemu_device.h says what that checks).
#include <cuda_runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <atomic>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define ASAN_START(fake, bottom, size) __sanitizer_start_switch_fiber(fake, bottom, size)
#define ASAN_FINISH(fake, bottom, size) __sanitizer_finish_switch_fiber(fake, bottom, size)
static const size_t FIBER_STACK = 512 * 1024; // ASan's frames are several times larger
#else
#define ASAN_START(fake, bottom, size) ((void)(fake), (void)(bottom), (void)(size))
#define ASAN_FINISH(fake, bottom, size) ((void)(fake), (void)(bottom), (void)(size))
static const size_t FIBER_STACK = 128 * 1024;
#endif

typedef std::vector<std::function<void()>> work_list;

struct CUstream_st {
    work_list *capture; // non-null while capturing
    bool invalidated;
};
struct CUevent_st {
    double ms;
    bool recorded;
};
struct CUgraph_st {
    work_list work;
};
struct CUgraphExec_st {
    work_list work;
};

// The emulated device: an H100/H200-class part, with 16 GiB of "memory" so that tests that
// ask for too much are refused as on a GPU, without a host that has the memory.
static const size_t DEVICE_BYTES = (size_t)16 << 30;
static const size_t DEFAULT_SMEM = 48 * 1024, OPTIN_SMEM = 227 * 1024;

static cudaError_t last_error = cudaSuccess;
static std::map<const void *, size_t> allocations;
static size_t allocated;
static std::map<const void *, int> dynamic_smem_limit;
static cudaStream_t capturing; // the stream being captured, if any

static cudaError_t fail(cudaError_t e)
{
    last_error = e;
    return e;
}

[[noreturn]] static void fatal(const char *what)
{
    fprintf(stderr, "cudaemu: %s\n", what);
    abort();
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

// A synchronizing call while a stream captures: the toolkit refuses it and spoils the capture.
static bool refused_in_capture(void)
{
    if (!capturing)
        return false;
    capturing->invalidated = true;
    return true;
}

// Runs WORK on STREAM now, or records it when the stream captures. Work for the legacy
// stream during a capture is refused, as it would synchronize with the captured stream.
static cudaError_t enqueue(cudaStream_t stream, std::function<void()> work)
{
    if (stream && stream->capture) {
        stream->capture->push_back(std::move(work));
        return cudaSuccess;
    }
    if (!stream && refused_in_capture())
        return fail(cudaErrorStreamCaptureUnsupported);
    work();
    return cudaSuccess;
}

cudaError_t cudaemu_enqueue(cudaStream_t stream, std::function<void()> work)
{
    return enqueue(stream, std::move(work));
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
    return device == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice);
}

extern "C" cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device)
{
    if (device != 0)
        return fail(cudaErrorInvalidDevice);
    switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = 132; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor: *value = 9; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; return cudaSuccess;
    }
    return fail(cudaErrorInvalidValue);
}

extern "C" cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    if (device != 0)
        return fail(cudaErrorInvalidDevice);
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
    return refused_in_capture() ? fail(cudaErrorStreamCaptureUnsupported) : cudaSuccess;
}

// ---------------------------------------------------------------------------------------
// memory

extern "C" cudaError_t cudaMalloc(void **ptr, size_t size)
{
    *ptr = NULL;
    if (refused_in_capture())
        return fail(cudaErrorStreamCaptureUnsupported);
    if (size > DEVICE_BYTES - allocated)
        return fail(cudaErrorMemoryAllocation);
    void *p = aligned_alloc(256, (size + 255) / 256 * 256 + 256);
    if (!p)
        return fail(cudaErrorMemoryAllocation);
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
        return fail(cudaErrorStreamCaptureUnsupported);
    auto it = allocations.find(ptr);
    if (it == allocations.end())
        return fail(cudaErrorInvalidDevicePointer);
    allocated -= it->second;
    allocations.erase(it);
    free(ptr);
    return cudaSuccess;
}

extern "C" cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    *ptr = malloc(size ? size : 1);
    return *ptr ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

extern "C" cudaError_t cudaFreeHost(void *ptr)
{
    free(ptr);
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, cudaMemcpyKind kind)
{
    (void)kind;
    if (refused_in_capture())
        return fail(cudaErrorStreamCaptureUnsupported);
    if (count)
        memmove(dst, src, count);
    return cudaSuccess;
}

// Like the toolkit, an async copy reads its source when the stream gets to it: a graph
// replays the copy from the same host address.
extern "C" cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
                                       cudaMemcpyKind kind, cudaStream_t stream)
{
    (void)kind;
    return enqueue(stream, [dst, src, count]() {
        if (count)
            memmove(dst, src, count);
    });
}

extern "C" cudaError_t cudaMemset(void *ptr, int value, size_t count)
{
    if (refused_in_capture())
        return fail(cudaErrorStreamCaptureUnsupported);
    memset(ptr, value, count);
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemsetAsync(void *ptr, int value, size_t count, cudaStream_t stream)
{
    return enqueue(stream, [ptr, value, count]() { memset(ptr, value, count); });
}

// ---------------------------------------------------------------------------------------
// streams, events, graphs

extern "C" cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags)
{
    (void)flags;
    *stream = new CUstream_st{NULL, false};
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    if (stream == capturing)
        capturing = NULL;
    if (stream)
        delete stream->capture;
    delete stream;
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    (void)stream;
    return refused_in_capture() ? fail(cudaErrorStreamCaptureUnsupported) : cudaSuccess;
}

extern "C" cudaError_t cudaEventCreate(cudaEvent_t *event)
{
    *event = new CUevent_st{0.0, false};
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
        return fail(cudaErrorInvalidResourceHandle);
    return enqueue(stream, [event]() {
        event->ms = now_ms();
        event->recorded = true;
    });
}

extern "C" cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    if (refused_in_capture())
        return fail(cudaErrorStreamCaptureUnsupported);
    return event ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}

extern "C" cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    if (!start || !end || !start->recorded || !end->recorded)
        return fail(cudaErrorInvalidResourceHandle);
    *ms = (float)(end->ms - start->ms);
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode)
{
    (void)mode;
    if (!stream || capturing) // the legacy stream cannot capture; one capture at a time here
        return fail(cudaErrorStreamCaptureUnsupported);
    stream->capture = new work_list();
    stream->invalidated = false;
    capturing = stream;
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph)
{
    *graph = NULL;
    if (!stream || stream != capturing)
        return fail(cudaErrorStreamCaptureUnmatched);
    capturing = NULL;
    std::unique_ptr<work_list> work(stream->capture);
    stream->capture = NULL;
    if (stream->invalidated)
        return fail(cudaErrorStreamCaptureInvalidated);
    *graph = new CUgraph_st{std::move(*work)};
    return cudaSuccess;
}

extern "C" cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph,
                                            unsigned long long flags)
{
    (void)flags;
    if (!graph)
        return fail(cudaErrorInvalidValue);
    *exec = new CUgraphExec_st{graph->work};
    return cudaSuccess;
}

extern "C" cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream)
{
    if (!exec)
        return fail(cudaErrorInvalidValue);
    return enqueue(stream, [exec]() {
        for (auto &w : exec->work)
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
        return fail(cudaErrorInvalidValue);
    dynamic_smem_limit[func] = value;
    return cudaSuccess;
}

// ---------------------------------------------------------------------------------------
// kernels: a block's threads as fibers

// A fiber switch saves the callee-saved registers on the old stack and restores them from the
// new one: a few nanoseconds, where ucontext's swapcontext makes a system call (sigprocmask)
// each time, and a decode attention block switches some 10^5 times.
#if defined(__x86_64__)
extern "C" void cudaemu_switch(void **save_sp, void *load_sp);
asm(".text\n"
    ".globl cudaemu_switch\n"
    ".type cudaemu_switch,@function\n"
    "cudaemu_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n"
    ".size cudaemu_switch, .-cudaemu_switch\n");

struct context {
    void *sp;
};

static void switch_to(context *from, context *to)
{
    cudaemu_switch(&from->sp, to->sp);
}

// A new fiber's stack as cudaemu_switch leaves a suspended one: six saved registers, then
// ENTRY as the return address, then a slot that leaves the stack 16-byte aligned the way a
// call would at ENTRY's first instruction.
static void start_context(context *c, char *stack, size_t size, void (*entry)(void))
{
    uintptr_t top = ((uintptr_t)(stack + size)) & ~(uintptr_t)15;
    void **sp = (void **)top;
    *--sp = NULL;
    *--sp = (void *)entry;
    for (int i = 0; i < 6; i++)
        *--sp = NULL;
    c->sp = sp;
}
#else
#include <ucontext.h>
struct context {
    ucontext_t uc;
};

static void switch_to(context *from, context *to)
{
    swapcontext(&from->uc, &to->uc);
}

static void start_context(context *c, char *stack, size_t size, void (*entry)(void))
{
    getcontext(&c->uc);
    c->uc.uc_stack.ss_sp = stack;
    c->uc.uc_stack.ss_size = size;
    c->uc.uc_link = NULL;
    makecontext(&c->uc, entry, 0);
}
#endif

enum fiber_state { READY, WAITING, DONE };

struct fiber {
    context ctx;
    unsigned shuffles; // shuffles so far: their parity picks the exchange buffer
    fiber_state state;
    cudaemu_barrier_kind kind;
    cudaemu_coords coords;
};

struct block_run {
    const char *kernel;
    const std::function<void()> *body;
    int n, live, cur;
    int at_syncthreads;                    // threads waiting at __syncthreads
    std::vector<int> warp_live, warp_wait; // per warp: lanes not returned, lanes at a warp op
    uint3 block;
    std::vector<fiber> fibers;
    std::vector<uint64_t> slots[2]; // shuffle exchange, one per thread, used in turns
    context sched;
};

// Per OS thread: each runs whole blocks, one at a time (run_grid).
thread_local const cudaemu_coords *cudaemu_here;
static thread_local block_run *run;
static thread_local std::vector<std::unique_ptr<char[]>> stacks;
static thread_local const void *sched_stack_bottom;
static thread_local size_t sched_stack_size;
static thread_local std::vector<unsigned char> dynamic_shared;

[[noreturn]] static void fatal_in_block(const char *what)
{
    char msg[512];
    snprintf(msg, sizeof msg, "kernel %s, block (%u, %u, %u): %s", run->kernel, run->block.x,
             run->block.y, run->block.z, what);
    fatal(msg);
}

static void to_scheduler(fiber &f, bool done)
{
    void *fake = NULL;
    ASAN_START(done ? NULL : &fake, sched_stack_bottom, sched_stack_size);
    switch_to(&f.ctx, &run->sched);
    ASAN_FINISH(fake, NULL, NULL);
    cudaemu_here = &f.coords;
}

static void fiber_main(void)
{
    ASAN_FINISH(NULL, &sched_stack_bottom, &sched_stack_size);
    (*run->body)();
    fiber &f = run->fibers[run->cur];
    f.state = DONE;
    run->live--;
    run->warp_live[run->cur >> 5]--;
    to_scheduler(f, true);
    fatal("a finished thread was resumed");
}

static void to_fiber(int t)
{
    void *fake = NULL;
    run->cur = t;
    cudaemu_here = &run->fibers[t].coords;
    ASAN_START(&fake, stacks[t].get(), FIBER_STACK);
    switch_to(&run->sched, &run->fibers[t].ctx);
    ASAN_FINISH(fake, NULL, NULL);
}

void cudaemu_barrier(cudaemu_barrier_kind kind)
{
    fiber &f = run->fibers[run->cur];
    f.state = WAITING;
    f.kind = kind;
    if (kind == CUDAEMU_SYNCTHREADS)
        run->at_syncthreads++;
    else
        run->warp_wait[run->cur >> 5]++;
    to_scheduler(f, false);
}

int cudaemu_lane(void)
{
    return run->cur & 31;
}

void *cudaemu_dynamic_shared(void)
{
    return dynamic_shared.data();
}

void cudaemu_shuffle(unsigned mask, const void *value, void *out, size_t size, int src_lane)
{
    const int t = run->cur, warp0 = t & ~31, lanes = run->n - warp0 < 32 ? run->n - warp0 : 32;
    if (mask != 0xffffffffu || lanes < 32) {
        char what[128];
        snprintf(what, sizeof what, "a shuffle with mask %#x in a warp of %d threads", mask, lanes);
        fatal_in_block(what);
    }
    // One barrier a shuffle: a lane can write this buffer again only two shuffles later,
    // past the next shuffle's barrier, which every lane reaches after reading this one.
    std::vector<uint64_t> &slots = run->slots[run->fibers[t].shuffles++ & 1];
    memcpy(&slots[t], value, size);
    cudaemu_barrier(CUDAEMU_SHUFFLE); // release() checks that no lane has returned
    const int src = src_lane >= 0 && src_lane < 32 ? src_lane : t - warp0;
    memcpy(out, &slots[warp0 + src], size);
}

static int first_live(int w0, int end)
{
    for (int t = w0; t < end; t++)
        if (run->fibers[t].state != DONE)
            return t - w0;
    return 0;
}

// Lets go every warp whose live lanes all wait at a warp operation, then the block when
// every live thread waits at __syncthreads. False when nothing could go on.
static bool release(void)
{
    bool any = false;
    for (int w = 0, w0 = 0; w0 < run->n; w++, w0 += 32) {
        const int live = run->warp_live[w], end = w0 + 32 < run->n ? w0 + 32 : run->n;
        if (!live || run->warp_wait[w] != live)
            continue;
        const cudaemu_barrier_kind k = run->fibers[w0 + first_live(w0, end)].kind;
        for (int t = w0; t < end; t++)
            if (run->fibers[t].state == WAITING) {
                if (run->fibers[t].kind != k)
                    fatal_in_block("lanes of one warp wait at different warp operations");
                run->fibers[t].state = READY;
            }
        if (k == CUDAEMU_SHUFFLE && live < end - w0)
            fatal_in_block("a shuffle after a lane of its warp returned");
        run->warp_wait[w] = 0;
        any = true;
    }
    if (any)
        return true;
    if (run->at_syncthreads != run->live)
        return false;
    for (auto &f : run->fibers)
        if (f.state == WAITING)
            f.state = READY;
    run->at_syncthreads = 0;
    return true;
}

static void run_block(uint3 block, dim3 grid, dim3 dims, bool reverse)
{
    const int n = run->n;
    run->block = block;
    run->live = n;
    run->at_syncthreads = 0;
    for (int w = 0; w * 32 < n; w++) {
        run->warp_live[w] = n - w * 32 < 32 ? n - w * 32 : 32;
        run->warp_wait[w] = 0;
    }
    for (int t = 0; t < n; t++) {
        fiber &f = run->fibers[t];
        f.state = READY;
        f.shuffles = 0;
        f.coords.thread_idx = {t % dims.x, t / dims.x % dims.y, t / (dims.x * dims.y)};
        f.coords.block_idx = block;
        f.coords.block_dim = dims;
        f.coords.grid_dim = grid;
        start_context(&f.ctx, stacks[t].get(), FIBER_STACK, fiber_main);
    }
    memset(dynamic_shared.data(), 0xff, dynamic_shared.size());
    while (run->live > 0) {
        for (int k = 0; k < n; k++) {
            int t = reverse ? n - 1 - k : k;
            if (run->fibers[t].state == READY)
                to_fiber(t);
        }
        if (run->live > 0 && !release()) {
            int at_block = 0, at_warp = 0;
            for (auto &f : run->fibers)
                if (f.state == WAITING)
                    (f.kind == CUDAEMU_SYNCTHREADS ? at_block : at_warp)++;
            char what[160];
            snprintf(what, sizeof what, "threads wait at barriers that will never open: "
                     "%d at __syncthreads, %d at warp operations, %d returned",
                     at_block, at_warp, n - run->live);
            fatal_in_block(what);
        }
    }
}

// Runs blocks [next, total) as they come, on this OS thread.
static void run_blocks(const char *name, dim3 grid, dim3 block, size_t smem,
                       const std::function<void()> &body, std::atomic<unsigned long long> &next)
{
    if (run)
        fatal("a kernel launched from inside a kernel");
    const int n = (int)(block.x * block.y * block.z);
    while ((int)stacks.size() < n)
        stacks.emplace_back(new char[FIBER_STACK]);
    dynamic_shared.assign(smem ? smem : 16, 0xff);
    block_run r;
    r.kernel = name;
    r.body = &body;
    r.n = n;
    r.cur = 0;
    r.fibers.resize(n);
    r.warp_live.assign((n + 31) / 32, 0);
    r.warp_wait.assign((n + 31) / 32, 0);
    r.slots[0].assign(n, 0);
    r.slots[1].assign(n, 0);
    run = &r;
    const unsigned long long total = (unsigned long long)grid.x * grid.y * grid.z;
    for (unsigned long long i; (i = next++) < total;) {
        uint3 b = {(unsigned)(i % grid.x), (unsigned)(i / grid.x % grid.y),
                   (unsigned)(i / ((unsigned long long)grid.x * grid.y))};
        run_block(b, grid, block, (i & 1) != 0);
    }
    run = NULL;
    cudaemu_here = NULL;
}

// Blocks are independent (a kernel that makes one wait for another is wrong on a GPU too), so
// they spread over the machine's cores; __shared__ is thread_local for that reason.
static void run_grid(const char *name, dim3 grid, dim3 block, size_t smem,
                     const std::function<void()> &body)
{
    const unsigned long long total = (unsigned long long)grid.x * grid.y * grid.z;
    unsigned helpers = std::thread::hardware_concurrency();
    helpers = helpers > 1 ? helpers - 1 : 0;
    if (helpers > total - 1)
        helpers = (unsigned)(total - 1);
    std::atomic<unsigned long long> next(0);
    std::vector<std::thread> pool;
    for (unsigned h = 0; h < helpers; h++)
        pool.emplace_back([&]() { run_blocks(name, grid, block, smem, body, next); });
    run_blocks(name, grid, block, smem, body, next);
    for (auto &t : pool)
        t.join();
}

void cudaemu_launch(const char *name, const void *func, dim3 grid, dim3 block, size_t smem,
                    struct CUstream_st *stream, std::function<void()> body)
{
    const unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
    if (!threads || threads > 1024 || !grid.x || !grid.y || !grid.z || grid.y > 65535
        || grid.z > 65535) {
        fail(cudaErrorInvalidConfiguration);
        return;
    }
    auto lim = dynamic_smem_limit.find(func);
    size_t limit = lim == dynamic_smem_limit.end() ? DEFAULT_SMEM : (size_t)lim->second;
    if (smem > limit) {
        fail(cudaErrorInvalidValue);
        return;
    }
    enqueue(stream, [name, grid, block, smem, body]() { run_grid(name, grid, block, smem, body); });
}
