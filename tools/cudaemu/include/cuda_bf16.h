/* cudaemu: the bf16 type and the conversions servesim's kernels use (round to nearest even,
 * NaN kept a quiet NaN, as the toolkit's __float2bfloat16). */
#ifndef CUDAEMU_CUDA_BF16_H
#define CUDAEMU_CUDA_BF16_H

#include <stdint.h>
#include <string.h>

struct __nv_bfloat16 {
    unsigned short x;
};

static inline __nv_bfloat16 __float2bfloat16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    __nv_bfloat16 h;
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu))
        h.x = (unsigned short)((u >> 16) | 0x40u);
    else
        h.x = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    return h;
}

static inline float __bfloat162float(__nv_bfloat16 h)
{
    uint32_t u = (uint32_t)h.x << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.x; }

#endif
