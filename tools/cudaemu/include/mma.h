/* cudaemu: the WMMA API (nvcuda::wmma) for 16x16x16 tiles, bf16 or fp32 in, fp32 accumulate.
 * Every lane holds the whole tile (the hardware spreads it over the warp in a layout code must
 * not rely on), and each call is a warp barrier first, as the _sync calls need the whole
 * warp: a lane that skips one stops the test. Elementwise work on x[] therefore sees every
 * element in each lane, which is right only for the same operation on all of them. A store
 * writes each element from one lane only. */
#ifndef CUDAEMU_MMA_H
#define CUDAEMU_MMA_H

#include "cuda_bf16.h"
#include "cuda_runtime.h"

#include <type_traits>

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void> struct fragment {
    static_assert(M == 16 && N == 16 && K == 16, "cudaemu emulates 16x16x16 tiles only");
    enum { num_elements = 256 };
    float x[256]; // row-major [row][col] of the tile this fragment stands for
};

// The rules of the _sync calls: a 256-bit aligned pointer, a leading dimension of a multiple
// of 16 bytes.
template <typename P> void cudaemu_check_tile(const P *p, unsigned ldm)
{
    if ((uintptr_t)p % 32 != 0 || (ldm * sizeof(P)) % 16 != 0)
        cudaemu_device_error("a WMMA load or store off 32-byte alignment or with a leading "
                             "dimension not a multiple of 16 bytes");
}

static inline float cudaemu_value(float v) { return v; }
static inline float cudaemu_value(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename Use, typename T, typename Layout, typename P>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout> &f, const P *p, unsigned ldm)
{
    cudaemu_barrier(CUDAEMU_WMMA);
    cudaemu_check_tile(p, ldm);
    const bool col = std::is_same<Layout, col_major>::value;
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++)
            f.x[r * 16 + c] = cudaemu_value(col ? p[r + (size_t)c * ldm] : p[(size_t)r * ldm + c]);
}

template <typename P>
void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f, const P *p, unsigned ldm,
                      layout_t layout)
{
    cudaemu_barrier(CUDAEMU_WMMA);
    cudaemu_check_tile(p, ldm);
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++)
            f.x[r * 16 + c] = layout == mem_col_major ? p[r + (size_t)c * ldm]
                                                      : p[(size_t)r * ldm + c];
}

// Each element is written by one lane (the hardware spreads the tile over the lanes too), so
// a lane that reads another lane's part without __syncwarp reads it before it is written in
// one of the two thread orders.
static inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f,
                                     unsigned ldm, layout_t layout)
{
    cudaemu_barrier(CUDAEMU_WMMA);
    cudaemu_check_tile(p, ldm);
    for (int i = cudaemu_lane(); i < 256; i += 32) {
        const int r = i / 16, c = i % 16;
        (layout == mem_col_major ? p[r + (size_t)c * ldm] : p[(size_t)r * ldm + c]) = f.x[i];
    }
}

template <typename Use, typename T, typename Layout>
void fill_fragment(fragment<Use, 16, 16, 16, T, Layout> &f, float v)
{
    for (int i = 0; i < 256; i++)
        f.x[i] = v;
}

template <typename TA, typename LA, typename TB, typename LB>
void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
              const fragment<matrix_a, 16, 16, 16, TA, LA> &a,
              const fragment<matrix_b, 16, 16, 16, TB, LB> &b,
              const fragment<accumulator, 16, 16, 16, float> &c)
{
    cudaemu_barrier(CUDAEMU_WMMA);
    float out[256];
    for (int r = 0; r < 16; r++)
        for (int col = 0; col < 16; col++) {
            float s = c.x[r * 16 + col];
            for (int k = 0; k < 16; k++)
                s += a.x[r * 16 + k] * b.x[k * 16 + col];
            out[r * 16 + col] = s;
        }
    memcpy(d.x, out, sizeof out);
}

} // namespace wmma
} // namespace nvcuda

#endif
