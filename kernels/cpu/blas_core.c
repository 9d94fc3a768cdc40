#include "kernels/cpu/blas_core.h"

#include <cblas.h>
#include <string.h>

const char *kb_cpu_blas_core(void) { return openblas_get_corename(); }

const char *kb_cpu_blas_better_core(void)
{
    const char *core = openblas_get_corename();
    if (strcmp(core, "Prescott") != 0 && strcmp(core, "Core2") != 0) return NULL;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return "SkylakeX";
    if (__builtin_cpu_supports("avx2")) return "Haswell";
    return NULL;
}
