// cudaemu itself: that it runs kernels the way a GPU would where servesim's kernels rely on
// it (barriers, shuffles, WMMA, atomics across blocks, graphs, cuBLAS's column-major GEMM),
// and that it stops a kernel that a GPU would hang on or run wrongly.
#include <criterion/criterion.h>
#include <signal.h>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <vector>

template <typename T> static T *device(size_t n)
{
    void *p = NULL;
    cr_assert_eq(cudaMalloc(&p, n * sizeof(T)), cudaSuccess);
    return (T *)p;
}

// Each thread reads its right neighbour's value, with or without a barrier in between. SALT
// makes every launch's values its own.
static __global__ void neighbour_kernel(int *out, bool barrier, int salt)
{
    __shared__ int v[64];
    v[threadIdx.x] = (int)(threadIdx.x * 10 + blockIdx.x) + salt;
    if (barrier)
        __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = v[(threadIdx.x + 1) % blockDim.x];
}

static int wrong_neighbours(bool barrier)
{
    int *d = device<int>(128), h[128];
    const int salt = barrier ? 1000 : 2000;
    KERNEL_LAUNCH(neighbour_kernel, 2, 64, 0, NULL)(d, barrier, salt);
    cr_assert_eq(cudaGetLastError(), cudaSuccess);
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    cudaFree(d);
    int wrong = 0;
    for (int b = 0; b < 2; b++)
        for (int t = 0; t < 64; t++)
            wrong += h[b * 64 + t] != ((t + 1) % 64) * 10 + b + salt;
    return wrong;
}

Test(cudaemu, a_missing_barrier_shows_in_the_results)
{
    cr_assert_eq(wrong_neighbours(true), 0);
    // Block 0 runs its threads in order, block 1 in reverse: one of the two reads stale data.
    cr_assert_gt(wrong_neighbours(false), 0);
}

static __global__ void scan_kernel(int *out)
{
    int x = (int)threadIdx.x + 1, incl = x;
    for (int off = 1; off < 32; off <<= 1) {
        int o = __shfl_up_sync(0xffffffffu, incl, off);
        if ((int)(threadIdx.x & 31) >= off)
            incl += o;
    }
    int swapped = __shfl_xor_sync(0xffffffffu, incl, 1);
    out[threadIdx.x] = incl * 1000 + swapped;
}

Test(cudaemu, shuffles_exchange_within_each_warp)
{
    int *d = device<int>(64), h[64];
    KERNEL_LAUNCH(scan_kernel, 1, 64, 0, NULL)(d);
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    for (int t = 0; t < 64; t++) {
        int lane = t & 31, base = t - lane;
        auto incl = [&](int l) { return (l + 1) * (l + 2) / 2 + (base + 0) * (l + 1); };
        cr_assert_eq(h[t], incl(lane) * 1000 + incl(lane ^ 1), "thread %d", t);
    }
    cudaFree(d);
}

static __global__ void count_kernel(unsigned long long *total)
{
    atomicAdd(total, 1ull);
}

Test(cudaemu, atomics_hold_across_blocks_on_several_os_threads)
{
    unsigned long long *d = device<unsigned long long>(1), h = 0;
    cudaMemset(d, 0, sizeof h);
    KERNEL_LAUNCH(count_kernel, 2000, 256, 0, NULL)(d);
    cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost);
    cr_assert_eq(h, 2000ull * 256);
    cudaFree(d);
}

static __global__ void wmma_kernel(float *c, const __nv_bfloat16 *a, const __nv_bfloat16 *b)
{
    using namespace nvcuda;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 1.0f);
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, b, 16);
    wmma::mma_sync(acc, fa, fb, acc);
    wmma::store_matrix_sync(c, acc, 16, wmma::mem_row_major);
}

Test(cudaemu, wmma_multiplies_tiles_in_their_layouts)
{
    __nv_bfloat16 a[256], b[256];
    for (int i = 0; i < 256; i++) {
        a[i] = __float2bfloat16((float)(i % 7 - 3)); // A[r][k] = a[r * 16 + k]
        b[i] = __float2bfloat16((float)(i % 5 - 2)); // B[k][n] = b[k + n * 16] (column-major)
    }
    __nv_bfloat16 *da = device<__nv_bfloat16>(256), *db = device<__nv_bfloat16>(256);
    float *dc = device<float>(256), c[256];
    cudaMemcpy(da, a, sizeof a, cudaMemcpyHostToDevice);
    cudaMemcpy(db, b, sizeof b, cudaMemcpyHostToDevice);
    KERNEL_LAUNCH(wmma_kernel, 1, 32, 0, NULL)(dc, da, db);
    cudaMemcpy(c, dc, sizeof c, cudaMemcpyDeviceToHost);
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 16; n++) {
            float s = 1.0f;
            for (int k = 0; k < 16; k++)
                s += (float)((r * 16 + k) % 7 - 3) * (float)((k + n * 16) % 5 - 2);
            cr_assert_eq(c[r * 16 + n], s, "C[%d][%d]", r, n);
        }
    cudaFree(da), cudaFree(db), cudaFree(dc);
}

// Each lane reads back an element another lane stored, with or without __syncwarp.
static __global__ void wmma_readback_kernel(float *tile, float *out, bool sync, float fill)
{
    using namespace nvcuda;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, fill);
    wmma::store_matrix_sync(tile, acc, 16, wmma::mem_row_major);
    if (sync)
        __syncwarp();
    out[threadIdx.x] = tile[(threadIdx.x + 1) % 32];
}

static int stale_readbacks(bool sync, float fill)
{
    float *tile = device<float>(256), *out = device<float>(32), h[32];
    cudaMemset(tile, 0, 256 * sizeof(float));
    KERNEL_LAUNCH(wmma_readback_kernel, 1, 32, 0, NULL)(tile, out, sync, fill);
    cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost);
    cudaFree(tile), cudaFree(out);
    int stale = 0;
    for (int i = 0; i < 32; i++)
        stale += h[i] != fill;
    return stale;
}

Test(cudaemu, a_wmma_store_read_back_without_syncwarp_shows)
{
    // One launch runs its block forward, the next in reverse: one of the two reads early.
    int unsynced = stale_readbacks(false, 3.0f) + stale_readbacks(false, 4.0f);
    cr_assert_gt(unsynced, 0);
    cr_assert_eq(stale_readbacks(true, 5.0f) + stale_readbacks(true, 6.0f), 0);
}

// 2 x 3 times 3 x 2, column-major, with A given transposed: C = alpha A B + beta C.
Test(cudaemu, gemm_ex_is_column_major_with_transposes)
{
    const float at[6] = {1, 2, 3, 4, 5, 6}; // A^T (3 x 2, lda 3): A = [1 2 3; 4 5 6]
    const float bm[6] = {1, 0, 2, 0, 1, 1}; // B (3 x 2, ldb 3): columns (1,0,2), (0,1,1)
    float c[4] = {1, 1, 1, 1};
    float *dA = device<float>(6), *dB = device<float>(6), *dC = device<float>(4);
    cudaMemcpy(dA, at, sizeof at, cudaMemcpyHostToDevice);
    cudaMemcpy(dB, bm, sizeof bm, cudaMemcpyHostToDevice);
    cudaMemcpy(dC, c, sizeof c, cudaMemcpyHostToDevice);
    cublasHandle_t h;
    cublasCreate(&h);
    const float alpha = 2.0f, beta = 10.0f;
    cr_assert_eq(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, 2, 2, 3, &alpha, dA, CUDA_R_32F, 3,
                              dB, CUDA_R_32F, 3, &beta, dC, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT),
                 CUBLAS_STATUS_SUCCESS);
    cudaMemcpy(c, dC, sizeof c, cudaMemcpyDeviceToHost);
    // A B = [7 5; 16 11]; times 2, plus 10
    const float want[4] = {24, 42, 20, 32};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(c[i], want[i], "C[%d] = %g", i, c[i]);
    cublasDestroy(h);
    cudaFree(dA), cudaFree(dB), cudaFree(dC);
}

static __global__ void add_kernel(int *x, int k)
{
    x[threadIdx.x] += k;
}

Test(cudaemu, a_graph_keeps_launch_arguments_and_copies_from_the_host_at_replay)
{
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    int *d = device<int>(4), *h = NULL, out[4];
    cr_assert_eq(cudaMallocHost((void **)&h, 4 * sizeof *h), cudaSuccess); // pinned
    h[0] = 1, h[1] = 2, h[2] = 3, h[3] = 4;
    int k = 100;
    cr_assert_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    cudaMemcpyAsync(d, h, 4 * sizeof *h, cudaMemcpyHostToDevice, s);
    KERNEL_LAUNCH(add_kernel, 1, 4, 0, s)(d, k);
    cudaGraph_t g;
    cr_assert_eq(cudaStreamEndCapture(s, &g), cudaSuccess);
    cudaGraphExec_t e;
    cr_assert_eq(cudaGraphInstantiate(&e, g, 0), cudaSuccess);
    h[0] = 50, k = 7; // the copy sees the new host values, the kernel its captured k
    cudaGraphLaunch(e, s);
    cudaStreamSynchronize(s);
    cudaMemcpy(out, d, sizeof out, cudaMemcpyDeviceToHost);
    cr_assert(out[0] == 150 && out[1] == 102 && out[3] == 104, "%d %d %d", out[0], out[1], out[3]);
    cudaGraphExecDestroy(e), cudaGraphDestroy(g), cudaStreamDestroy(s), cudaFree(d);
    cudaFreeHost(h);
}

Test(cudaemu, a_synchronizing_call_or_a_pageable_copy_spoils_the_capture)
{
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    int *d = device<int>(4), h[4] = {0, 0, 0, 0};
    cudaGraph_t g;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    cr_assert_eq(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice),
                 cudaErrorStreamCaptureUnsupported);
    cr_assert_eq(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
    cr_assert_null(g);
    cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    cr_assert_eq(cudaMemcpyAsync(d, h, sizeof h, cudaMemcpyHostToDevice, s),
                 cudaErrorStreamCaptureUnsupported);
    cr_assert_eq(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
    cudaGetLastError();
    cudaStreamDestroy(s), cudaFree(d);
}

// The host sees a stream's results only after it synchronizes, as on a GPU: reading a pinned
// buffer an async copy will fill, before the stream ran, gives what was there.
Test(cudaemu, stream_work_lands_when_the_host_synchronizes)
{
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    int *d = device<int>(4), *h = NULL, src[4] = {5, 6, 7, 8};
    cudaMallocHost((void **)&h, 4 * sizeof *h);
    h[0] = -1;
    cudaMemcpy(d, src, sizeof src, cudaMemcpyHostToDevice);
    KERNEL_LAUNCH(add_kernel, 1, 4, 0, s)(d, 10);
    cudaMemcpyAsync(h, d, 4 * sizeof *h, cudaMemcpyDeviceToHost, s);
    cr_assert_eq(h[0], -1, "the copy landed before the stream was synchronized");
    cudaStreamSynchronize(s);
    cr_assert_eq(h[0], 15);
    cudaStreamDestroy(s), cudaFree(d), cudaFreeHost(h);
}

static __global__ void smem_kernel(float *out)
{
    DYNAMIC_SHARED(float, buf);
    buf[threadIdx.x] = 1.0f;
    out[threadIdx.x] = buf[threadIdx.x];
}

Test(cudaemu, launches_are_refused_as_on_a_gpu)
{
    float *d = device<float>(2048);
    KERNEL_LAUNCH(smem_kernel, 1, 1025, 0, NULL)(d);
    cr_assert_eq(cudaGetLastError(), cudaErrorInvalidConfiguration);
    KERNEL_LAUNCH(smem_kernel, 0, 32, 0, NULL)(d);
    cr_assert_eq(cudaGetLastError(), cudaErrorInvalidConfiguration);
    KERNEL_LAUNCH(smem_kernel, 1, 32, 64 * 1024, NULL)(d); // over 48 KiB, not allowed yet
    cr_assert_neq(cudaGetLastError(), cudaSuccess);
    cr_assert_neq(cudaFuncSetAttribute(smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       228 * 1024),
                  cudaSuccess);
    cudaGetLastError();
    cr_assert_eq(cudaFuncSetAttribute(smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      64 * 1024),
                 cudaSuccess);
    KERNEL_LAUNCH(smem_kernel, 1, 32, 64 * 1024, NULL)(d);
    cr_assert_eq(cudaGetLastError(), cudaSuccess);
    void *big = NULL;
    cr_assert_eq(cudaMalloc(&big, (size_t)1 << 40), cudaErrorMemoryAllocation);
    cudaGetLastError();
    cudaFree(d);
}

static __global__ void returns_before_shuffle_kernel(int *out)
{
    if (threadIdx.x == 5)
        return;
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, (int)threadIdx.x, 1);
}

Test(cudaemu, a_shuffle_missing_a_returned_lane_stops_the_kernel, .signal = SIGABRT)
{
    int *d = device<int>(32);
    KERNEL_LAUNCH(returns_before_shuffle_kernel, 1, 32, 0, NULL)(d);
    cudaDeviceSynchronize(); // a kernel runs when the host waits for it
}

Test(cudaemu, a_full_mask_shuffle_in_a_partial_warp_stops_the_kernel, .signal = SIGABRT)
{
    int *d = device<int>(48);
    KERNEL_LAUNCH(scan_kernel, 1, 48, 0, NULL)(d);
    cudaDeviceSynchronize(); // a kernel runs when the host waits for it
}

static __global__ void split_barrier_kernel(int *out)
{
    if (threadIdx.x == 0)
        __syncthreads(); // the rest of the warp waits in the shuffle for lane 0: a hang
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, (int)threadIdx.x, 1);
}

Test(cudaemu, threads_at_barriers_that_never_open_stop_the_kernel, .signal = SIGABRT)
{
    int *d = device<int>(64);
    KERNEL_LAUNCH(split_barrier_kernel, 1, 64, 0, NULL)(d);
    cudaDeviceSynchronize(); // a kernel runs when the host waits for it
}
