// The CUDA backend's own kernels (everything but the GEMMs, which go to cuBLAS), each with an
// extern "C" launcher declared in cuda_ops.h. Written for correctness first: plain loops, a
// comment with the thread mapping on every kernel, fp32 arithmetic on bf16 storage.
#include "kernels/cuda/cuda_ops.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

// KERNEL_LAUNCH(k, grid, block, smem, stream)(args) is k<<<grid, block, smem, stream>>>(args)
// and DYNAMIC_SHARED(T, name) a kernel's dynamic shared memory as T name[]. Written this way so
// that tools/cudaemu, which runs these kernels on the CPU, can give both its own meaning.
#ifndef KERNEL_LAUNCH
#define KERNEL_LAUNCH(kernel, grid, block, smem, stream)                                   \
    kernel<<<(grid), (block), (smem), (stream)>>>
#define DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#endif

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------------------
// helpers

static __device__ __forceinline__ float bf2f(uint16_t h)
{
    return __uint_as_float((uint32_t)h << 16);
}

static __device__ __forceinline__ uint16_t f2bf(float f)
{
    return __bfloat16_as_ushort(__float2bfloat16(f)); // round to nearest even
}

// 8 bf16 packed in 16 bytes (little-endian: the low half of each word comes first).
static __device__ __forceinline__ void unpack8(uint4 raw, float *f)
{
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        f[2 * i] = __uint_as_float(w[i] << 16);
        f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
}

static __device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

static __device__ __forceinline__ float warp_max(float v)
{
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

// Sum over the block (every thread gets it). Every thread of the block must call it.
static __device__ float block_sum(float v)
{
    __shared__ float part[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = warp_sum(v);
    if (lane == 0)
        part[warp] = v;
    __syncthreads();
    v = threadIdx.x < nw ? part[threadIdx.x] : 0.0f;
    if (warp == 0)
        v = warp_sum(v);
    if (threadIdx.x == 0)
        part[0] = v;
    __syncthreads();
    v = part[0];
    __syncthreads(); // part[] may be reused by the next call
    return v;
}

static __device__ float block_max(float v)
{
    __shared__ float part[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = warp_max(v);
    if (lane == 0)
        part[warp] = v;
    __syncthreads();
    v = threadIdx.x < nw ? part[threadIdx.x] : -INFINITY;
    if (warp == 0)
        v = warp_max(v);
    if (threadIdx.x == 0)
        part[0] = v;
    __syncthreads();
    v = part[0];
    __syncthreads();
    return v;
}

typedef unsigned long long u64;

// Exclusive prefix sum over the block in thread order; *TOTAL gets the block's sum.
static __device__ u64 block_excl_scan(u64 v, u64 *total)
{
    __shared__ u64 part[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    u64 incl = v;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
        u64 o = __shfl_up_sync(0xffffffffu, incl, off);
        if (lane >= off)
            incl += o;
    }
    if (lane == 31)
        part[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        u64 x = lane < nw ? part[lane] : 0;
#pragma unroll
        for (int off = 1; off < 32; off <<= 1) {
            u64 o = __shfl_up_sync(0xffffffffu, x, off);
            if (lane >= off)
                x += o;
        }
        part[lane] = x; // inclusive over warps
    }
    __syncthreads();
    u64 excl = incl - v + (warp > 0 ? part[warp - 1] : 0);
    *total = part[nw - 1];
    __syncthreads();
    return excl;
}

// splitmix64 finalizer: the counter-based generator of the weight draw and the sampler.
static __host__ __device__ __forceinline__ uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static __device__ __forceinline__ double uniform3(uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t h = mix64(mix64(mix64(a) ^ b) ^ c);
    return (double)(h >> 11) * (1.0 / 9007199254740992.0); // [0, 1)
}

static int launch_status(void)
{
    return (int)cudaGetLastError();
}

static unsigned grid_for(size_t n, unsigned threads)
{
    size_t blocks = (n + threads - 1) / threads;
    if (blocks > 65536u * 16u)
        blocks = 65536u * 16u; // grid-stride loops cover the rest
    return blocks ? (unsigned)blocks : 1u;
}

// ---------------------------------------------------------------------------------------
// host-side helpers

extern "C" const char *cuda_error_string(int code)
{
    return cudaGetErrorString((cudaError_t)code);
}

extern "C" int cuda_probe(char *err, size_t errlen)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        snprintf(err, errlen, "backend cuda: no CUDA device on this machine "
                 "(cudaGetDeviceCount: %s)", cudaGetErrorString(e));
        cudaGetLastError(); // clear it
        return -1;
    }
    if (count < 1) {
        snprintf(err, errlen, "backend cuda: no CUDA device on this machine "
                 "(cudaGetDeviceCount found none)");
        return -1;
    }
    int major = 0, minor = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
    if (major < 9) {
        snprintf(err, errlen, "backend cuda: the GPU is compute capability %d.%d, and this "
                 "build has code for 9.0 and later only (set CMAKE_CUDA_ARCHITECTURES)",
                 major, minor);
        return -1;
    }
    return 0;
}

extern "C" int cuda_attn_supported(int num_heads, int num_kv_heads, int head_dim, char *err,
                                   size_t errlen)
{
    int group = num_heads / num_kv_heads, lanes = head_dim / 8;
    if (head_dim % 8 != 0 || head_dim > CUDA_ATTN_MAX_HEAD_DIM || (lanes & (lanes - 1)) != 0) {
        snprintf(err, errlen, "backend cuda: head_dim %d is not supported by the attention "
                 "kernels (8, 16, 32, 64, 128 or 256)", head_dim);
        return -1;
    }
    if (group > CUDA_ATTN_MAX_GROUP) {
        snprintf(err, errlen, "backend cuda: %d query heads per KV head; the attention "
                 "kernels take at most %d", group, CUDA_ATTN_MAX_GROUP);
        return -1;
    }
    return 0;
}

extern "C" int cuda_attn_slots(int rows, int num_kv_heads)
{
    long blocks = (long)rows * num_kv_heads;
    if (blocks >= CUDA_ATTN_TARGET_BLOCKS)
        return 1;
    long s = (CUDA_ATTN_TARGET_BLOCKS + blocks - 1) / blocks;
    // rows * s < rows * (TARGET / blocks + 1) <= TARGET + rows < 2 * TARGET: the partials fit.
    return s < CUDA_ATTN_MAX_SLOTS ? (int)s : CUDA_ATTN_MAX_SLOTS;
}

extern "C" uint16_t cuda_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) // NaN: keep it a (quiet) NaN
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

extern "C" float cuda_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

extern "C" int cuda_malloc(void **d_ptr, size_t bytes)
{
    return (int)cudaMalloc(d_ptr, bytes);
}

extern "C" int cuda_free(void *d_ptr)
{
    return (int)cudaFree(d_ptr);
}

extern "C" int cuda_upload(void *d_dst, const void *src, size_t bytes)
{
    return (int)cudaMemcpy(d_dst, src, bytes, cudaMemcpyHostToDevice);
}

extern "C" int cuda_download(void *dst, const void *d_src, size_t bytes)
{
    return (int)cudaMemcpy(dst, d_src, bytes, cudaMemcpyDeviceToHost);
}

static const size_t STAGE_ELEMS = (size_t)1 << 20;

extern "C" int cuda_upload_bf16(uint16_t *d_dst, const float *src, size_t n)
{
    uint16_t *stage = (uint16_t *)malloc(sizeof(uint16_t) * (n < STAGE_ELEMS ? n : STAGE_ELEMS));
    if (!stage)
        return (int)cudaErrorMemoryAllocation;
    cudaError_t e = cudaSuccess;
    for (size_t done = 0; done < n && e == cudaSuccess;) {
        size_t m = n - done < STAGE_ELEMS ? n - done : STAGE_ELEMS;
        for (size_t i = 0; i < m; i++)
            stage[i] = cuda_f32_to_bf16(src[done + i]);
        e = cudaMemcpy(d_dst + done, stage, m * sizeof(uint16_t), cudaMemcpyHostToDevice);
        done += m;
    }
    free(stage);
    return (int)e;
}

extern "C" int cuda_download_bf16(float *dst, const uint16_t *d_src, size_t n)
{
    uint16_t *stage = (uint16_t *)malloc(sizeof(uint16_t) * (n < STAGE_ELEMS ? n : STAGE_ELEMS));
    if (!stage)
        return (int)cudaErrorMemoryAllocation;
    cudaError_t e = cudaSuccess;
    for (size_t done = 0; done < n && e == cudaSuccess;) {
        size_t m = n - done < STAGE_ELEMS ? n - done : STAGE_ELEMS;
        e = cudaMemcpy(stage, d_src + done, m * sizeof(uint16_t), cudaMemcpyDeviceToHost);
        for (size_t i = 0; e == cudaSuccess && i < m; i++)
            dst[done + i] = cuda_bf16_to_f32(stage[i]);
        done += m;
    }
    free(stage);
    return (int)e;
}

// All-ones bytes are a NaN in fp32 and in bf16.
extern "C" int cuda_poison_f32(float *d_x, size_t n)
{
    return (int)cudaMemset(d_x, 0xff, n * sizeof(float));
}

extern "C" int cuda_poison_bf16(uint16_t *d_x, size_t n)
{
    return (int)cudaMemset(d_x, 0xff, n * sizeof(uint16_t));
}

extern "C" int cuda_sync(void)
{
    return (int)cudaDeviceSynchronize();
}

// ---------------------------------------------------------------------------------------
// weights: grid-stride, one element per thread per step.

static __global__ void draw_weights_kernel(uint16_t *w, size_t n, uint64_t seed, uint32_t tensor,
                                           float a, int norm)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        double u = uniform3(seed, tensor, i);
        w[i] = f2bf(norm ? (float)(1.0 + 0.2 * (u - 0.5)) : (float)((2.0 * u - 1.0) * a));
    }
}

extern "C" int cuda_draw_weights(uint16_t *d_w, size_t n, uint64_t seed, uint32_t tensor,
                                 double scale, int norm, cuda_stream stream)
{
    KERNEL_LAUNCH(draw_weights_kernel, grid_for(n, 256), 256, 0, stream)(d_w, n, seed, tensor,
                                                             (float)(sqrt(3.0) * scale), norm);
    return launch_status();
}

// ---------------------------------------------------------------------------------------
// embedding: one block per token, threads stride over the hidden dimension.

static __global__ void embedding_kernel(float *out, const uint16_t *table, const int32_t *ids,
                                        int hidden)
{
    const uint16_t *src = table + (size_t)ids[blockIdx.x] * hidden;
    float *dst = out + (size_t)blockIdx.x * hidden;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x)
        dst[i] = bf2f(src[i]);
}

extern "C" int cuda_embedding(float *d_out, const uint16_t *d_table, const int32_t *d_token_ids,
                              int n, int hidden, cuda_stream stream)
{
    KERNEL_LAUNCH(embedding_kernel, n, 256, 0, stream)(d_out, d_table, d_token_ids, hidden);
    return launch_status();
}

// ---------------------------------------------------------------------------------------
// RMSNorm: one block of 256 threads per output row; threads stride over the dimension, sum
// of squares reduced over the block, as the CPU: y = x * (1 / sqrt(mean(x^2) + eps)) * w.

static __global__ void rmsnorm_kernel(uint16_t *out, const float *inp, const uint16_t *weight,
                                      const int32_t *query_start, int dim, float eps)
{
    const int row = query_start ? query_start[blockIdx.x + 1] - 1 : (int)blockIdx.x;
    const float *x = inp + (size_t)row * dim;
    uint16_t *y = out + (size_t)blockIdx.x * dim;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x)
        ss += x[i] * x[i];
    ss = block_sum(ss);
    const float r = 1.0f / sqrtf(ss / dim + eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x)
        y[i] = f2bf(x[i] * r * bf2f(weight[i]));
}

extern "C" int cuda_rmsnorm(uint16_t *d_out, const float *d_inp, const uint16_t *d_weight,
                            const int32_t *d_query_start, int n, int dim, float eps,
                            cuda_stream stream)
{
    KERNEL_LAUNCH(rmsnorm_kernel, n, 256, 0, stream)(d_out, d_inp, d_weight, d_query_start, dim, eps);
    return launch_status();
}

// ---------------------------------------------------------------------------------------
// rotary (rotate-half): one block per token; thread i of the half-dimension computes its
// angle once (in double, as the CPU) and rotates pair (i, i + half) of every head.

static __global__ void rotary_kernel(float *x, const int32_t *positions, int row_stride,
                                     int num_heads, int head_dim, float theta)
{
    const int half = head_dim / 2;
    float *row = x + (size_t)blockIdx.x * row_stride;
    const int pos = positions[blockIdx.x];
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
        double angle = pos * pow((double)theta, -2.0 * i / head_dim);
        double sd, cd;
        sincos(angle, &sd, &cd);
        const float c = (float)cd, s = (float)sd;
        for (int h = 0; h < num_heads; h++) {
            float *v = row + (size_t)h * head_dim;
            const float a = v[i], b = v[i + half];
            v[i] = a * c - b * s;
            v[i + half] = b * c + a * s;
        }
    }
}

extern "C" int cuda_rotary(float *d_x, const int32_t *d_positions, int n, int row_stride,
                           int num_heads, int head_dim, float theta, cuda_stream stream)
{
    int threads = head_dim / 2 < 128 ? head_dim / 2 : 128;
    KERNEL_LAUNCH(rotary_kernel, n, threads, 0, stream)(d_x, d_positions, row_stride, num_heads, head_dim,
                                             theta);
    return launch_status();
}

// ---------------------------------------------------------------------------------------
// KV-cache write: one block per token; threads stride over num_kv_heads * head_dim and copy
// the K and V values of their index. Padding (slot -1) blocks return at once.

static __global__ void kv_write_kernel(uint16_t *k_cache, uint16_t *v_cache, const float *qkv,
                                       int row_stride, const int32_t *slot_mapping, int q_dim,
                                       int kv_dim)
{
    const int slot = slot_mapping[blockIdx.x];
    if (slot < 0)
        return;
    const float *k = qkv + (size_t)blockIdx.x * row_stride + q_dim, *v = k + kv_dim;
    uint16_t *kd = k_cache + (size_t)slot * kv_dim, *vd = v_cache + (size_t)slot * kv_dim;
    for (int i = threadIdx.x; i < kv_dim; i += blockDim.x) {
        kd[i] = f2bf(k[i]);
        vd[i] = f2bf(v[i]);
    }
}

extern "C" int cuda_kv_write(uint16_t *d_k_cache, uint16_t *d_v_cache, const float *d_qkv,
                             int row_stride, const int32_t *d_slot_mapping, int n, int num_heads,
                             int num_kv_heads, int head_dim, cuda_stream stream)
{
    KERNEL_LAUNCH(kv_write_kernel, n, 128, 0, stream)(d_k_cache, d_v_cache, d_qkv, row_stride,
                                           d_slot_mapping, num_heads * head_dim,
                                           num_kv_heads * head_dim);
    return launch_status();
}

// ---------------------------------------------------------------------------------------
// SiLU-and-multiply and residual add: grid-stride, one element per thread per step.

static __global__ void silu_mul_kernel(uint16_t *out, const uint16_t *gate_up, size_t total,
                                       int inter)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t t = i / inter, j = i % inter;
        const float g = bf2f(gate_up[t * 2 * inter + j]), u = bf2f(gate_up[t * 2 * inter + inter + j]);
        out[i] = f2bf(g / (1.0f + expf(-g)) * u);
    }
}

extern "C" int cuda_silu_mul(uint16_t *d_out, const uint16_t *d_gate_up, int n, int inter,
                             cuda_stream stream)
{
    size_t total = (size_t)n * inter;
    KERNEL_LAUNCH(silu_mul_kernel, grid_for(total, 256), 256, 0, stream)(d_out, d_gate_up, total, inter);
    return launch_status();
}

static __global__ void residual_add_kernel(float *x, const float *delta, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        x[i] += delta[i];
}

extern "C" int cuda_residual_add(float *d_x, const float *d_delta, long n, cuda_stream stream)
{
    KERNEL_LAUNCH(residual_add_kernel, grid_for((size_t)n, 256), 256, 0, stream)(d_x, d_delta, (size_t)n);
    return launch_status();
}

// ---------------------------------------------------------------------------------------
// Paged attention, split over the context (flash-decoding style), for decode and prefill rows
// alike: a row is one query token with its own span (causal: position + 1, capped by the
// sequence's context length).
//
// Grid (row, KV head, slot). A block of 4 warps takes one query row, one KV head and with it
// the GROUP query heads that share it (so each K/V vector is read once for the group), over
// the slot-th of SLOTS equal pieces of the row's span. It walks its piece in chunks of
// ATT_CHUNK keys with an online softmax across chunks:
//   phase 1: LPK = head_dim / 8 lanes hold one key (8 dims each, one 16-byte load); a warp
//            covers 32 / LPK keys per step, the 4 warps interleave, and each lane issues the
//            loads of ATT_UNROLL steps before using them. Partial dot products are
//            reduced over the LPK lanes with xor shuffles; scores go to shared memory.
//   stats:   warp w takes heads w, w + 4, ...: chunk max, running max, exp, running sum.
//   phase 2: the same lane mapping over V; each thread keeps acc[head][8] for its 8 dims over
//            its keys, rescaled when the running max moves.
// At the end the accumulators are summed over the lanes of a warp that hold the same dims,
// then over the warps in shared memory. With one slot the block writes the normalized output;
// otherwise it writes (unnormalized acc, max, sum) partials that attn_combine_kernel merges.

#define ATT_WARPS 4
#define ATT_THREADS (ATT_WARPS * 32)
#define ATT_CHUNK 128
#define ATT_UNROLL 4

static size_t attn_smem_bytes(int group, int head_dim)
{
    return sizeof(float) * ((size_t)group * head_dim              /* q */
                            + (size_t)group * ATT_CHUNK           /* scores / probabilities */
                            + (size_t)ATT_WARPS * group * head_dim /* cross-warp reduction */
                            + 3 * (size_t)group);                 /* max, sum, rescale */
}

static __global__ void __launch_bounds__(ATT_THREADS)
    attn_kernel(cuda_attn_args a, int slots, int lpk_log2)
{
    DYNAMIC_SHARED(float, smem);
    const int row = blockIdx.x, kvh = blockIdx.y, slot = blockIdx.z;
    const int hd = a.head_dim, group = a.num_heads / a.num_kv_heads;
    const int lpk = 1 << lpk_log2, kpi = 32 >> lpk_log2;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int kk = lane >> lpk_log2, c = lane & (lpk - 1); // key within step, dim chunk
    float *q_s = smem;
    float *p_s = q_s + group * hd;
    float *red_s = p_s + group * ATT_CHUNK;
    float *m_s = red_s + ATT_WARPS * group * hd;
    float *l_s = m_s + group;
    float *alpha_s = l_s + group;

    const int token = a.row_token[row], seq = a.row_seq[row];
    int span = a.positions[token] + 1;
    if (span > a.context_lens[seq])
        span = a.context_lens[seq];
    if (span < 0)
        span = 0;
    const int per = (span + slots - 1) / slots;
    const int k0 = slot * per, k1 = min(span, k0 + per);
    const int h0 = kvh * group; // first query head of the group

    const float *q = a.qkv + (size_t)token * a.qkv_stride + (size_t)h0 * hd;
    for (int i = threadIdx.x; i < group * hd; i += ATT_THREADS)
        q_s[i] = q[i];
    if (threadIdx.x < group) {
        m_s[threadIdx.x] = -INFINITY;
        l_s[threadIdx.x] = 0.0f;
    }
    __syncthreads();

    float acc[CUDA_ATTN_MAX_GROUP][8];
#pragma unroll
    for (int h = 0; h < CUDA_ATTN_MAX_GROUP; h++)
#pragma unroll
        for (int e = 0; e < 8; e++)
            acc[h][e] = 0.0f;

    const float scale = 1.0f / sqrtf((float)hd);
    const size_t kv_dim = (size_t)a.num_kv_heads * hd;
    const int bs = a.block_size;
    const int32_t *table = a.block_tables + (size_t)seq * a.max_blocks_per_seq;
    const size_t head_off = (size_t)kvh * hd + (size_t)c * 8;

    for (int c0 = k0; c0 < k1; c0 += ATT_CHUNK) {
        const int n = min(ATT_CHUNK, k1 - c0);
        // phase 1: scores. jb is uniform over a warp, so every lane reaches the shuffles.
        // ATT_UNROLL keys per lane are loaded before any is used (more loads in flight).
        for (int jb = warp * kpi; jb < n; jb += ATT_WARPS * kpi * ATT_UNROLL) {
            uint4 raw[ATT_UNROLL];
#pragma unroll
            for (int u = 0; u < ATT_UNROLL; u++) {
                const int j = jb + u * ATT_WARPS * kpi + kk;
                raw[u] = make_uint4(0u, 0u, 0u, 0u);
                if (j < n) {
                    const int pos = c0 + j;
                    const size_t s = (size_t)table[pos / bs] * bs + pos % bs;
                    raw[u] = *reinterpret_cast<const uint4 *>(a.k_cache + s * kv_dim + head_off);
                }
            }
#pragma unroll
            for (int u = 0; u < ATT_UNROLL; u++) {
                const int j = jb + u * ATT_WARPS * kpi + kk;
                float kf[8];
                unpack8(raw[u], kf);
                for (int h = 0; h < group; h++) {
                    const float *qh = q_s + h * hd + c * 8;
                    float d = 0.0f;
#pragma unroll
                    for (int e = 0; e < 8; e++)
                        d += qh[e] * kf[e];
                    for (int off = lpk >> 1; off > 0; off >>= 1)
                        d += __shfl_xor_sync(0xffffffffu, d, off);
                    if (j < n && c == 0)
                        p_s[h * ATT_CHUNK + j] = d * scale;
                }
            }
        }
        __syncthreads();
        // stats: online softmax per head
        for (int h = warp; h < group; h += ATT_WARPS) {
            float mx = -INFINITY;
            for (int j = lane; j < n; j += 32)
                mx = fmaxf(mx, p_s[h * ATT_CHUNK + j]);
            mx = warp_max(mx);
            const float m_old = m_s[h], m_new = fmaxf(m_old, mx);
            float sum = 0.0f;
            for (int j = lane; j < n; j += 32) {
                const float p = expf(p_s[h * ATT_CHUNK + j] - m_new);
                p_s[h * ATT_CHUNK + j] = p;
                sum += p;
            }
            sum = warp_sum(sum);
            __syncwarp(); // every lane has read m_s[h] before lane 0 rewrites it
            if (lane == 0) {
                const float alpha = expf(m_old - m_new); // 0 on the first chunk
                alpha_s[h] = alpha;
                l_s[h] = l_s[h] * alpha + sum;
                m_s[h] = m_new;
            }
        }
        __syncthreads();
        // phase 2: probabilities times V
#pragma unroll
        for (int h = 0; h < CUDA_ATTN_MAX_GROUP; h++)
            if (h < group) {
                const float alpha = alpha_s[h];
#pragma unroll
                for (int e = 0; e < 8; e++)
                    acc[h][e] *= alpha;
            }
        for (int jb = warp * kpi; jb < n; jb += ATT_WARPS * kpi * ATT_UNROLL) {
            uint4 raw[ATT_UNROLL];
#pragma unroll
            for (int u = 0; u < ATT_UNROLL; u++) {
                const int j = jb + u * ATT_WARPS * kpi + kk;
                raw[u] = make_uint4(0u, 0u, 0u, 0u);
                if (j < n) {
                    const int pos = c0 + j;
                    const size_t s = (size_t)table[pos / bs] * bs + pos % bs;
                    raw[u] = *reinterpret_cast<const uint4 *>(a.v_cache + s * kv_dim + head_off);
                }
            }
#pragma unroll
            for (int u = 0; u < ATT_UNROLL; u++) {
                const int j = jb + u * ATT_WARPS * kpi + kk;
                if (j >= n)
                    continue;
                float vf[8];
                unpack8(raw[u], vf);
#pragma unroll
                for (int h = 0; h < CUDA_ATTN_MAX_GROUP; h++)
                    if (h < group) {
                        const float p = p_s[h * ATT_CHUNK + j];
#pragma unroll
                        for (int e = 0; e < 8; e++)
                            acc[h][e] += p * vf[e];
                    }
            }
        }
        __syncthreads(); // p_s is rewritten by the next chunk
    }

    // Sum over the lanes of a warp holding the same dims (same c, other kk) ...
#pragma unroll
    for (int h = 0; h < CUDA_ATTN_MAX_GROUP; h++)
        if (h < group)
            for (int off = lpk; off < 32; off <<= 1)
#pragma unroll
                for (int e = 0; e < 8; e++)
                    acc[h][e] += __shfl_xor_sync(0xffffffffu, acc[h][e], off);
    // ... then over the warps.
    if (kk == 0) {
#pragma unroll
        for (int h = 0; h < CUDA_ATTN_MAX_GROUP; h++)
            if (h < group)
#pragma unroll
                for (int e = 0; e < 8; e++)
                    red_s[(warp * group + h) * hd + c * 8 + e] = acc[h][e];
    }
    __syncthreads();
    const int q_dim = a.num_heads * hd;
    for (int i = threadIdx.x; i < group * hd; i += ATT_THREADS) {
        float s = 0.0f;
        for (int w = 0; w < ATT_WARPS; w++)
            s += red_s[w * group * hd + i];
        const int h = i / hd, d = i % hd;
        if (slots == 1) {
            const float v = k1 > k0 ? s / l_s[h] : 0.0f;
            a.out[(size_t)token * q_dim + (size_t)(h0 + h) * hd + d] = f2bf(v);
        } else {
            float *part = a.partial
                        + ((size_t)(row * slots + slot) * a.num_heads + h0 + h) * (hd + 2);
            part[d] = s;
            if (d == 0) {
                part[hd] = m_s[h];     // -inf for an empty piece
                part[hd + 1] = l_s[h]; // 0 for an empty piece
            }
        }
    }
}

// Merges the slots of a row: one block per (row, query head), one thread per dim.
static __global__ void attn_combine_kernel(cuda_attn_args a, int slots)
{
    const int row = blockIdx.x, h = blockIdx.y, d = threadIdx.x, hd = a.head_dim;
    const size_t stride = (size_t)a.num_heads * (hd + 2);
    const float *part = a.partial + ((size_t)row * slots * a.num_heads + h) * (hd + 2);
    float m = -INFINITY;
    for (int z = 0; z < slots; z++)
        m = fmaxf(m, part[z * stride + hd]);
    float num = 0.0f, den = 0.0f;
    if (m != -INFINITY)
        for (int z = 0; z < slots; z++) {
            const float mz = part[z * stride + hd];
            if (mz == -INFINITY)
                continue;
            const float w = expf(mz - m);
            num += part[z * stride + d] * w;
            den += part[z * stride + hd + 1] * w;
        }
    const int token = a.row_token[row];
    a.out[(size_t)token * a.num_heads * hd + (size_t)h * hd + d] = f2bf(den > 0.0f ? num / den : 0.0f);
}

extern "C" int cuda_attention(const cuda_attn_args *a, cuda_stream stream)
{
    if (a->num_rows <= 0)
        return 0;
    const int group = a->num_heads / a->num_kv_heads;
    int lpk_log2 = 0;
    while ((8 << lpk_log2) < a->head_dim)
        lpk_log2++;
    const int slots = cuda_attn_slots(a->num_rows, a->num_kv_heads);
    dim3 grid((unsigned)a->num_rows, (unsigned)a->num_kv_heads, (unsigned)slots);
    KERNEL_LAUNCH(attn_kernel, grid, ATT_THREADS, attn_smem_bytes(group, a->head_dim), stream)(*a, slots,
                                                                                    lpk_log2);
    int e = launch_status();
    if (e || slots == 1)
        return e;
    KERNEL_LAUNCH(attn_combine_kernel, dim3((unsigned)a->num_rows, (unsigned)a->num_heads), a->head_dim, 0,
                          stream)(*a, slots);
    return launch_status();
}

// ---------------------------------------------------------------------------------------
// Prefill attention on the tensor cores (WMMA, bf16 in, fp32 accumulate), flash-attention
// style, for head_dim a multiple of 16.
//
// Grid (tile, query head), 128 threads = 4 warps. A tile is up to PF_BQ = 64 consecutive query
// tokens of one sequence (tile_tok0, tile_count, tile_seq). The block stages the tile's queries
// (bf16) in shared memory, then walks the sequence's cache in key tiles of PF_BK = 64 up to the
// largest span of its rows: K and V tiles are gathered through the block table into shared
// memory (keys past that span are zero-filled, never read). Warp w owns query rows
// [16w, 16w + 16): it computes their 16 x 64 scores with WMMA (Q row-major times K read as a
// column-major K^T), then two lanes per row do the masked online softmax (row max, running
// max and sum, P = exp(S - max) in bf16, rescaling of the row's output), then O += P V with
// WMMA on the row's output tile kept in shared memory as fp32. Rows are warp-private, so only
// __syncwarp orders a warp's own shared-memory steps; __syncthreads guards the K/V tiles. At
// the end each row is divided by its sum and written as bf16 (zeros for an empty span).

#define PF_BQ 64
#define PF_BK 64
#define PF_THREADS 128

struct pf_layout {
    int ldq, lds, ldp, ldo; // leading dimensions (elements) of Q/K/V, S, P, O in shared memory
    size_t q, k, v, s, p, o, m, l, bytes; // byte offsets
};

static __host__ __device__ pf_layout pf_layout_of(int hd)
{
    pf_layout L;
    L.ldq = hd + 8;     // bf16: 16 bytes of padding per row
    L.lds = PF_BK + 4;  // fp32
    L.ldp = PF_BK + 8;  // bf16
    L.ldo = hd + 4;     // fp32
    size_t off = 0;
    L.q = off, off += (size_t)PF_BQ * L.ldq * 2;
    L.k = off, off += (size_t)PF_BK * L.ldq * 2;
    L.v = off, off += (size_t)PF_BK * L.ldq * 2;
    L.s = off, off += (size_t)PF_BQ * L.lds * 4;
    L.p = off, off += (size_t)PF_BQ * L.ldp * 2;
    L.o = off, off += (size_t)PF_BQ * L.ldo * 4;
    L.m = off, off += PF_BQ * 4;
    L.l = off, off += PF_BQ * 4;
    L.bytes = off + 32; // room to align the base to 32 bytes
    return L;
}

static __global__ void __launch_bounds__(PF_THREADS)
    prefill_attn_kernel(cuda_attn_args a, const int32_t *tile_tok0, const int32_t *tile_count,
                        const int32_t *tile_seq)
{
    using namespace nvcuda;
    DYNAMIC_SHARED(unsigned char, pf_raw);
    unsigned char *base = (unsigned char *)(((uintptr_t)pf_raw + 31) & ~(uintptr_t)31);
    const int hd = a.head_dim;
    const pf_layout L = pf_layout_of(hd);
    __nv_bfloat16 *q_s = (__nv_bfloat16 *)(base + L.q);
    __nv_bfloat16 *k_s = (__nv_bfloat16 *)(base + L.k);
    __nv_bfloat16 *v_s = (__nv_bfloat16 *)(base + L.v);
    float *s_s = (float *)(base + L.s);
    __nv_bfloat16 *p_s = (__nv_bfloat16 *)(base + L.p);
    float *o_s = (float *)(base + L.o);
    float *m_s = (float *)(base + L.m);
    float *l_s = (float *)(base + L.l);
    __shared__ int span_s[PF_BQ];
    __shared__ int max_span_s;

    const int tile = blockIdx.x, h = blockIdx.y;
    const int tok0 = tile_tok0[tile], count = tile_count[tile], seq = tile_seq[tile];
    const int group = a.num_heads / a.num_kv_heads, kvh = h / group;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const size_t kv_dim = (size_t)a.num_kv_heads * hd;
    const int32_t *table = a.block_tables + (size_t)seq * a.max_blocks_per_seq;
    const int ctx = a.context_lens[seq], bs = a.block_size;

    if (threadIdx.x == 0)
        max_span_s = 0;
    __syncthreads();
    for (int r = threadIdx.x; r < PF_BQ; r += PF_THREADS) {
        int span = 0;
        if (r < count) {
            span = a.positions[tok0 + r] + 1;
            span = span < ctx ? span : ctx;
            span = span > 0 ? span : 0;
        }
        span_s[r] = span;
        m_s[r] = -INFINITY;
        l_s[r] = 0.0f;
        atomicMax(&max_span_s, span);
    }
    // queries (fp32 after rotary) to bf16; rows past COUNT are zeros; output starts at zero
    for (int i = threadIdx.x; i < PF_BQ * hd; i += PF_THREADS) {
        const int r = i / hd, d = i % hd;
        const float x = r < count ? a.qkv[(size_t)(tok0 + r) * a.qkv_stride + (size_t)h * hd + d] : 0.0f;
        q_s[r * L.ldq + d] = __float2bfloat16(x);
        o_s[r * L.ldo + d] = 0.0f;
    }
    __syncthreads();
    const int max_span = max_span_s;
    const float scale = 1.0f / sqrtf((float)hd);
    const int chunks = hd / 8; // 16-byte pieces of a key's head slice
    const int row = warp * 16 + (lane >> 1), half = lane & 1;

    for (int kt = 0; kt < max_span; kt += PF_BK) {
        // K and V tiles: thread i copies 16-byte pieces
        for (int i = threadIdx.x; i < PF_BK * chunks; i += PF_THREADS) {
            const int j = i / chunks, c = i % chunks, pos = kt + j;
            uint4 kraw = make_uint4(0u, 0u, 0u, 0u), vraw = kraw;
            if (pos < max_span) {
                const size_t slot = (size_t)table[pos / bs] * bs + pos % bs;
                const size_t off = slot * kv_dim + (size_t)kvh * hd + (size_t)c * 8;
                kraw = *reinterpret_cast<const uint4 *>(a.k_cache + off);
                vraw = *reinterpret_cast<const uint4 *>(a.v_cache + off);
            }
            *reinterpret_cast<uint4 *>(k_s + j * L.ldq + c * 8) = kraw;
            *reinterpret_cast<uint4 *>(v_s + j * L.ldq + c * 8) = vraw;
        }
        __syncthreads();

        // S = Q K^T for this warp's 16 rows
        {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[PF_BK / 16];
#pragma unroll
            for (int n = 0; n < PF_BK / 16; n++)
                wmma::fill_fragment(acc[n], 0.0f);
            for (int d0 = 0; d0 < hd; d0 += 16) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
                wmma::load_matrix_sync(fa, q_s + warp * 16 * L.ldq + d0, L.ldq);
#pragma unroll
                for (int n = 0; n < PF_BK / 16; n++) {
                    wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
                    wmma::load_matrix_sync(fb, k_s + n * 16 * L.ldq + d0, L.ldq);
                    wmma::mma_sync(acc[n], fa, fb, acc[n]);
                }
            }
#pragma unroll
            for (int n = 0; n < PF_BK / 16; n++)
                wmma::store_matrix_sync(s_s + warp * 16 * L.lds + n * 16, acc[n], L.lds,
                                        wmma::mem_row_major);
        }
        __syncwarp();

        // masked online softmax: lanes 2r, 2r + 1 take row r's two halves of the key tile
        {
            const int span = span_s[row];
            float *srow = s_s + row * L.lds;
            float mx = -INFINITY;
            for (int j = half * (PF_BK / 2); j < (half + 1) * (PF_BK / 2); j++)
                if (kt + j < span)
                    mx = fmaxf(mx, srow[j] * scale);
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            const float m_old = m_s[row];
            const float m_new = fmaxf(m_old, mx);
            float sum = 0.0f;
            for (int j = half * (PF_BK / 2); j < (half + 1) * (PF_BK / 2); j++) {
                float p = 0.0f;
                if (kt + j < span) {
                    p = expf(srow[j] * scale - m_new);
                    sum += p;
                }
                p_s[row * L.ldp + j] = __float2bfloat16(p);
            }
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            // no key of this tile for the row: nothing changes (alpha 1)
            const float alpha = mx == -INFINITY ? 1.0f : expf(m_old - m_new);
            for (int d = half * (hd / 2); d < (half + 1) * (hd / 2); d++)
                o_s[row * L.ldo + d] *= alpha;
            __syncwarp();
            if (half == 0) {
                l_s[row] = l_s[row] * alpha + sum;
                m_s[row] = m_new;
            }
        }
        __syncwarp();

        // O += P V for this warp's rows
        for (int n = 0; n < hd / 16; n++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            float *o_tile = o_s + warp * 16 * L.ldo + n * 16;
            wmma::load_matrix_sync(acc, o_tile, L.ldo, wmma::mem_row_major);
#pragma unroll
            for (int k0 = 0; k0 < PF_BK; k0 += 16) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
                wmma::load_matrix_sync(fa, p_s + warp * 16 * L.ldp + k0, L.ldp);
                wmma::load_matrix_sync(fb, v_s + k0 * L.ldq + n * 16, L.ldq);
                wmma::mma_sync(acc, fa, fb, acc);
            }
            wmma::store_matrix_sync(o_tile, acc, L.ldo, wmma::mem_row_major);
        }
        __syncthreads(); // K/V tiles are overwritten next
    }

    const int q_dim = a.num_heads * hd;
    for (int i = threadIdx.x; i < PF_BQ * hd; i += PF_THREADS) {
        const int r = i / hd, d = i % hd;
        if (r >= count)
            continue;
        const float l = l_s[r];
        const float v = span_s[r] > 0 && l > 0.0f ? o_s[r * L.ldo + d] / l : 0.0f;
        a.out[(size_t)(tok0 + r) * q_dim + (size_t)h * hd + d] = f2bf(v);
    }
}

extern "C" int cuda_prefill_tiles(int32_t *tok0, int32_t *count, int32_t *seq,
                                  const int32_t *query_start, int num_seqs)
{
    int n = 0;
    for (int s = 0; s < num_seqs; s++) {
        const int q_len = query_start[s + 1] - query_start[s];
        if (q_len <= 1)
            continue;
        for (int t = 0; t < q_len; t += PF_BQ) {
            tok0[n] = query_start[s] + t;
            count[n] = q_len - t < PF_BQ ? q_len - t : PF_BQ;
            seq[n++] = s;
        }
    }
    return n;
}

extern "C" int cuda_prefill_tile_capacity(int max_tokens, int max_seqs)
{
    return max_tokens / PF_BQ + max_seqs + 1;
}

extern "C" int cuda_prefill_uses_tensor_cores(int head_dim)
{
    return head_dim % 16 == 0 && head_dim >= 16 && head_dim <= CUDA_ATTN_MAX_HEAD_DIM;
}

extern "C" int cuda_attention_prefill(const cuda_attn_args *a, const int32_t *d_tile_tok0,
                                      const int32_t *d_tile_count, const int32_t *d_tile_seq,
                                      int num_tiles, cuda_stream stream)
{
    if (num_tiles <= 0)
        return 0;
    const size_t smem = pf_layout_of(a->head_dim).bytes;
    cudaError_t e = cudaFuncSetAttribute(prefill_attn_kernel,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess)
        return (int)e;
    KERNEL_LAUNCH(prefill_attn_kernel, dim3((unsigned)num_tiles, (unsigned)a->num_heads), PF_THREADS, smem,
                          stream)(*a, d_tile_tok0, d_tile_count, d_tile_seq);
    return launch_status();
}

// ---------------------------------------------------------------------------------------
// Sampling.
//
// Greedy: one block of 1024 threads per row; thread-strided argmax, then a block reduction
// that prefers the larger value and on ties the lower index.

#define SAMPLE_THREADS 1024

static __global__ void __launch_bounds__(SAMPLE_THREADS)
    argmax_kernel(int32_t *out, const float *logits, int vocab)
{
    __shared__ float best_v[32];
    __shared__ int best_i[32];
    const float *x = logits + (size_t)blockIdx.x * vocab;
    float bv = -INFINITY;
    int bi = INT_MAX;
    for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
        const float v = x[i];
        if (v > bv || (v == bv && i < bi)) {
            bv = v;
            bi = i;
        }
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, off);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, off);
        if (ov > bv || (ov == bv && oi < bi)) {
            bv = ov;
            bi = oi;
        }
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        best_v[warp] = bv;
        best_i[warp] = bi;
    }
    __syncthreads();
    if (warp == 0) {
        const int nw = blockDim.x >> 5;
        bv = lane < nw ? best_v[lane] : -INFINITY;
        bi = lane < nw ? best_i[lane] : INT_MAX;
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, bv, off);
            const int oi = __shfl_xor_sync(0xffffffffu, bi, off);
            if (ov > bv || (ov == bv && oi < bi)) {
                bv = ov;
                bi = oi;
            }
        }
        if (lane == 0)
            out[blockIdx.x] = bi == INT_MAX ? 0 : bi; // all NaN: token 0, as the CPU
    }
}

// Temperature sampling: one block of 1024 threads per row, thread t owning the contiguous
// index range [t * per, (t + 1) * per) so that "in index order" is thread order, then order
// within a thread. Everything that decides membership is integer (counts, and masses in
// units of 2^-32 of the largest probability), so a row and a seed always give one token.
//  1. M = max logit; mass_i = round_down(exp((l_i - M) / T) * 2^32).
//  2. top-k (0 < k < vocab): radix select (4 passes of 8 bits over order-preserving keys) of
//     the k-th largest key K; kept: key > K, and ties at K by lower index while fewer than k.
//  3. top-p (< 1): among the kept, radix select on mass the key P where the mass of larger
//     keys is < ceil(top_p * kept mass) <= that of keys >= P; kept: key > P, and ties at P by
//     lower index while the mass before them is below the bound (CPU: "while cum < p * sum").
//  4. u = hash(seed, step, row) in [0, 1); the token is the first kept index (index order)
//     whose cumulative mass exceeds u * kept mass.

static __device__ __forceinline__ uint32_t order_key(float f)
{
    const uint32_t u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u); // larger float, larger key
}

struct sample_state {
    const float *x;
    int lo, hi;       // this thread's index range
    float m, inv_t;   // max logit, 1 / temperature
    // top-k: keys > k_key kept, ties kept while their rank < k_ties; k_on = 0: all kept
    int k_on;
    uint32_t k_key;
    u64 k_ties, k_tie_base; // k_tie_base: ties at k_key in earlier threads
    // top-p: same with masses
    int p_on;
    uint32_t p_key;
    u64 p_room, p_tie_base; // p_room = bound - mass of keys > p_key
};

static __device__ __forceinline__ u64 mass_of(const sample_state &s, float v)
{
    return (u64)((double)expf((v - s.m) * s.inv_t) * 4294967296.0);
}

// Visits this thread's kept elements in index order: f(index, key, mass). STAGE 1: top-k
// membership only; STAGE 2: top-k and top-p.
template <typename F>
static __device__ void for_kept(const sample_state &s, int stage, F f)
{
    u64 k_rank = s.k_tie_base, p_before = s.p_tie_base;
    for (int i = s.lo; i < s.hi; i++) {
        const float v = s.x[i];
        if (v != v)
            continue; // NaN: never sampled
        const uint32_t key = order_key(v);
        if (s.k_on) {
            if (key < s.k_key)
                continue;
            if (key == s.k_key && k_rank++ >= s.k_ties)
                continue;
        }
        const u64 mass = mass_of(s, v);
        if (stage == 2 && s.p_on) {
            if (key < s.p_key)
                continue;
            if (key == s.p_key) {
                const u64 before = p_before;
                p_before += mass;
                if (before >= s.p_room)
                    continue;
            }
        }
        f(i, key, mass);
    }
}

// Radix select among the elements F visits (weight W each): the key K with
// weight(key > K) < target <= weight(key >= K); *ABOVE = weight(key > K).
template <typename Visit>
static __device__ uint32_t radix_select(Visit visit, u64 target, u64 *above_out, u64 *hist,
                                        uint32_t *shared_prefix, u64 *shared_above)
{
    uint32_t prefix = 0;
    u64 above = 0;
    for (int shift = 24; shift >= 0; shift -= 8) {
        const uint32_t high = shift == 24 ? 0u : ~0u << (shift + 8);
        for (int b = threadIdx.x; b < 256; b += blockDim.x)
            hist[b] = 0;
        __syncthreads();
        visit([&](uint32_t key, u64 w) {
            if ((key & high) == (prefix & high))
                atomicAdd(&hist[(key >> shift) & 255u], w);
        });
        __syncthreads();
        if (threadIdx.x == 0) {
            int b = 255;
            for (; b > 0; b--) {
                if (above + hist[b] >= target)
                    break;
                above += hist[b];
            }
            *shared_prefix = prefix | ((uint32_t)b << shift);
            *shared_above = above;
        }
        __syncthreads();
        prefix = *shared_prefix;
        above = *shared_above;
        __syncthreads();
    }
    *above_out = above;
    return prefix;
}

static __global__ void __launch_bounds__(SAMPLE_THREADS)
    sample_kernel(int32_t *out, const float *logits, int vocab, float temperature, int top_k,
                  float top_p, uint64_t seed, uint64_t step)
{
    __shared__ u64 hist[256];
    __shared__ uint32_t sh_prefix;
    __shared__ u64 sh_above;
    sample_state s;
    s.x = logits + (size_t)blockIdx.x * vocab;
    const int per = (vocab + blockDim.x - 1) / blockDim.x;
    s.lo = min(vocab, (int)threadIdx.x * per);
    s.hi = min(vocab, s.lo + per);
    s.inv_t = 1.0f / temperature;
    s.k_on = s.p_on = 0;
    s.k_key = s.p_key = 0;
    s.k_ties = s.k_tie_base = s.p_room = s.p_tie_base = 0;

    float m = -INFINITY;
    for (int i = s.lo; i < s.hi; i++)
        m = fmaxf(m, s.x[i]);
    s.m = block_max(m);
    u64 total;

    if (top_k > 0 && top_k < vocab) {
        u64 above;
        s.k_key = radix_select(
            [&](auto add) {
                for (int i = s.lo; i < s.hi; i++)
                    if (s.x[i] == s.x[i])
                        add(order_key(s.x[i]), 1ull);
            },
            (u64)top_k, &above, hist, &sh_prefix, &sh_above);
        s.k_ties = (u64)top_k - above;
        u64 ties = 0;
        for (int i = s.lo; i < s.hi; i++)
            ties += s.x[i] == s.x[i] && order_key(s.x[i]) == s.k_key;
        s.k_tie_base = block_excl_scan(ties, &total);
        s.k_on = 1;
    }

    if (top_p < 1.0f) {
        u64 kept = 0;
        for_kept(s, 1, [&](int, uint32_t, u64 w) { kept += w; });
        block_excl_scan(kept, &total);
        u64 bound = (u64)ceil((double)top_p * (double)total);
        if (bound < 1)
            bound = 1;
        u64 above;
        s.p_key = radix_select(
            [&](auto add) { for_kept(s, 1, [&](int, uint32_t key, u64 w) { add(key, w); }); },
            bound, &above, hist, &sh_prefix, &sh_above);
        s.p_room = bound - above;
        u64 tie_mass = 0;
        for_kept(s, 1, [&](int, uint32_t key, u64 w) { tie_mass += key == s.p_key ? w : 0; });
        s.p_tie_base = block_excl_scan(tie_mass, &total);
        s.p_on = 1;
    }

    u64 mine = 0;
    for_kept(s, 2, [&](int, uint32_t, u64 w) { mine += w; });
    const u64 before = block_excl_scan(mine, &total);
    if (total == 0) { // cannot happen with finite logits: the max has mass 2^32
        if (threadIdx.x == 0)
            out[blockIdx.x] = 0;
        return;
    }
    const double u = uniform3(seed, step, blockIdx.x);
    u64 target = (u64)(u * (double)total);
    if (target >= total)
        target = total - 1;
    if (target >= before && target < before + mine) {
        u64 cum = before;
        int chosen = -1;
        for_kept(s, 2, [&](int i, uint32_t, u64 w) {
            cum += w;
            if (chosen < 0 && cum > target)
                chosen = i;
        });
        out[blockIdx.x] = chosen;
    }
}

extern "C" int cuda_sample(int32_t *d_out, const float *d_logits, int num_rows, int vocab,
                           float temperature, int top_k, float top_p, uint64_t seed,
                           uint64_t step, cuda_stream stream)
{
    if (temperature == 0.0f)
        KERNEL_LAUNCH(argmax_kernel, num_rows, SAMPLE_THREADS, 0, stream)(d_out, d_logits, vocab);
    else
        KERNEL_LAUNCH(sample_kernel, num_rows, SAMPLE_THREADS, 0, stream)(d_out, d_logits, vocab,
                                                               temperature, top_k, top_p, seed,
                                                               step);
    return launch_status();
}
