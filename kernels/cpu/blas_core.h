/* OpenBLAS picks its kernels when it loads, from the CPU it recognizes; 0.3.21 does not know
 * some recent CPUs and falls back to its SSE3 ("Prescott") kernels, about 9x slower here. */
#ifndef SERVESIM_KERNELS_CPU_BLAS_CORE_H
#define SERVESIM_KERNELS_CPU_BLAS_CORE_H

/* The kernel family OpenBLAS chose. */
const char *kb_cpu_blas_core(void);
/* The family this CPU supports when OpenBLAS fell back to a generic one, else NULL:
 * the value OPENBLAS_CORETYPE should take before the library loads. */
const char *kb_cpu_blas_better_core(void);

#endif
