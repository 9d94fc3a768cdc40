/* cudaemu's device side: what a .cu file of servesim's needs to compile as C++ and run its
 * kernels on the CPU.
 *
 * A launch runs its blocks on a pool of OS threads, one per core, one block at a time on
 * each. The threads of a block are fibers on one OS thread: each runs until it reaches a
 * barrier (__syncthreads, __syncwarp, a shuffle, a WMMA call), and a barrier lets its fibers
 * go on when every thread it waits for has arrived. So the emulator finds, and stops the test
 * with the kernel and block named:
 *  - threads that can never go on: some at __syncthreads while others of their warp wait at
 *    a warp operation, or lanes of one warp at different warp operations;
 *  - a shuffle or WMMA call in a warp of fewer than 32 threads or after a lane returned, and
 *    masks other than the full warp (the only ones modelled);
 *  - WMMA on a pointer that is not 32-byte aligned, or with a leading dimension that is not a
 *    multiple of 16 bytes;
 *  - a launch with more threads than a block takes, an empty grid, or more dynamic shared
 *    memory than the kernel was allowed (48 KiB, or what cudaFuncSetAttribute raised it to)
 *    are refused with the toolkit's error;
 *  - with AddressSanitizer, any access past a device allocation or past the dynamic shared
 *    memory launched with; with UBSan, a misaligned vector (uint4) load.
 * Blocks run their threads in index order or in reverse, alternating from block to block and
 * from launch to launch, and a WMMA store writes each element from one lane only, so a read
 * that misses a barrier sees the wrong data in one of the orders. Dynamic shared memory is
 * filled with NaN bytes before each block. What it cannot see: timing; the memory model
 * beyond barriers (a fiber runs alone between two barriers, so unsynchronized read-modify-
 * writes in a block never race here); static shared memory left unwritten (it keeps the
 * values of the block the same OS thread ran before). Arithmetic is the host's (no fused
 * multiply-add, glibc's expf): tolerances must hold for the GPU's rounding too. */
#ifndef CUDAEMU_DEVICE_H
#define CUDAEMU_DEVICE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <functional>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
// An OS thread runs one block at a time, so one thread_local per declaration is the shared
// memory of the block that thread runs.
#define __shared__ static thread_local

struct uint3 {
    unsigned int x, y, z;
};

struct dim3 {
    unsigned int x, y, z;
    dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
};

// The running fiber's coordinates.
struct cudaemu_coords {
    uint3 thread_idx, block_idx;
    dim3 block_dim, grid_dim;
};
// __thread, not thread_local: an extern thread_local is reached through a TLS wrapper that
// calls a weak init function when one exists, and GCC 12's -fsanitize=null check of that
// wrapper's address reuses the flags of the "is there an init function" test: with none, it
// reported "load of null pointer" on every kernel (a false report, fatal under halt_on_error).
// A pointer needs no dynamic initialization, so __thread is exact and has no wrapper.
extern __thread const cudaemu_coords *cudaemu_here;
#define threadIdx (cudaemu_here->thread_idx)
#define blockIdx (cudaemu_here->block_idx)
#define blockDim (cudaemu_here->block_dim)
#define gridDim (cudaemu_here->grid_dim)

enum cudaemu_barrier_kind { CUDAEMU_SYNCTHREADS, CUDAEMU_SYNCWARP, CUDAEMU_SHUFFLE, CUDAEMU_WMMA };

// Waits at a barrier of the block (CUDAEMU_SYNCTHREADS) or of the calling thread's warp.
void cudaemu_barrier(cudaemu_barrier_kind kind);
void cudaemu_syncwarp(unsigned mask);
// Stops the test: device code did something a GPU leaves undefined.
[[noreturn]] void cudaemu_device_error(const char *what);
// Warp shuffle: every lane in MASK gives VALUE and gets SRC_LANE's (its own when out of range).
void cudaemu_shuffle(unsigned mask, const void *value, void *out, size_t size, int src_lane);
int cudaemu_lane(void);
void *cudaemu_dynamic_shared(void);
void cudaemu_launch(const char *name, const void *func, dim3 grid, dim3 block, size_t smem,
                    struct CUstream_st *stream, std::function<void()> body);

// What KERNEL_LAUNCH(k, grid, block, smem, stream)(args...) builds: the arguments are taken
// by value at the launch, as a graph captures them.
template <typename Kernel> struct cudaemu_launcher {
    const char *name;
    Kernel *kernel;
    dim3 grid, block;
    size_t smem;
    struct CUstream_st *stream;
    template <typename... Args> void operator()(Args... args) const
    {
        Kernel *k = kernel;
        cudaemu_launch(name, (const void *)k, grid, block, smem, stream,
                       [k, args...]() { k(args...); });
    }
};

template <typename Kernel>
cudaemu_launcher<Kernel> cudaemu_launch_of(const char *name, Kernel *kernel, dim3 grid,
                                           dim3 block, size_t smem, struct CUstream_st *stream)
{
    return cudaemu_launcher<Kernel>{name, kernel, grid, block, smem, stream};
}

#define KERNEL_LAUNCH(kernel, grid, block, smem, stream)                                  \
    cudaemu_launch_of(#kernel, kernel, dim3(grid), dim3(block), (size_t)(smem), (stream))
#define DYNAMIC_SHARED(type, name) type *name = (type *)cudaemu_dynamic_shared()

template <typename T>
cudaError_t cudaFuncSetAttribute(T *func, cudaFuncAttribute attr, int value)
{
    return cudaFuncSetAttribute((const void *)func, attr, value);
}

static inline void __syncthreads(void) { cudaemu_barrier(CUDAEMU_SYNCTHREADS); }
static inline void __syncwarp(unsigned mask = 0xffffffffu) { cudaemu_syncwarp(mask); }

template <typename T> T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32)
{
    static_assert(sizeof(T) <= 8, "a shuffle moves at most 8 bytes");
    if (width != 32)
        cudaemu_device_error("a shuffle with a width other than 32 (not modelled)");
    T out;
    cudaemu_shuffle(mask, &v, &out, sizeof(T), cudaemu_lane() ^ lane_mask);
    return out;
}

template <typename T> T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
    static_assert(sizeof(T) <= 8, "a shuffle moves at most 8 bytes");
    if (width != 32)
        cudaemu_device_error("a shuffle with a width other than 32 (not modelled)");
    T out;
    cudaemu_shuffle(mask, &v, &out, sizeof(T), cudaemu_lane() - (int)delta);
    return out;
}

// Blocks of one launch run on several OS threads at once: updates are atomic for real.
template <typename T, typename F> T cudaemu_atomic_update(T *p, F f)
{
    T old, want;
    __atomic_load(p, &old, __ATOMIC_RELAXED);
    do
        want = f(old);
    while (!__atomic_compare_exchange(p, &old, &want, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    return old;
}

template <typename T> T atomicAdd(T *p, T v)
{
    return cudaemu_atomic_update(p, [v](T x) { return x + v; });
}

template <typename T> T atomicMax(T *p, T v)
{
    return cudaemu_atomic_update(p, [v](T x) { return v > x ? v : x; });
}

static inline float __uint_as_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t __float_as_uint(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }

#endif
