/* Accelerators: datasheet figures for the roofline, the name of each in the public kernel
 * database its measured cost tables come from, and the roofline efficiencies fitted to
 * those tables. */
#ifndef SERVESIM_SIM_HARDWARE_H
#define SERVESIM_SIM_HARDWARE_H

#include <stdbool.h>
#include <stddef.h>

/* The roofline's efficiencies and fixed step cost, fitted per GPU to its measured tables
 * (`servesim roofline-fit`, sim/roofline_fit.inc) so that a GPU without tables, or a model
 * the tables do not cover, gets a roofline whose error against measurements is known. */
typedef struct hw_fit {
    double compute_efficiency, memory_efficiency, attention_efficiency, step_overhead_ms;
    double median_error, max_error; /* |roofline / measured - 1| over the fit's steps; 0 = not fitted */
    /* the same for models the fit did not see: each model's steps priced by the roofline
     * fitted to the GPU's other models (what a model without a table gets); 0 = not known */
    double holdout_median_error, holdout_max_error;
} hw_fit;

typedef struct hw_spec {
    const char *name;
    const char *db_system;   /* aiconfigurator-core's name for it ("h200_sxm") */
    double peak_tflops;      /* dense bf16 tensor-core TFLOP/s */
    double mem_bandwidth_gbs;/* HBM GB/s */
    double mem_gib;          /* device memory, GiB */
    /* tensor parallelism's all-reduce: t = latency + 2 (tp - 1) / tp x bytes / link */
    double link_gbs;         /* GPU-to-GPU bandwidth, GB/s, one direction (NVLink, else PCIe) */
    double allreduce_us;     /* the smallest all-reduce's time */
    double fp8_tflops;       /* dense FP8 tensor-core TFLOP/s; 0: none (FP8 weights computed in bf16) */
} hw_spec;

const hw_spec *hw_preset(const char *name);
/* The I-th preset, or NULL past the last. */
const hw_spec *hw_preset_at(size_t i);
const char *hw_preset_names(void);
/* The roofline fitted to the measured tables of the preset named NAME, or hw_unfitted. */
hw_fit hw_preset_fit(const char *name);
/* The roofline fitted to the preset's tables of FP8 weights and KV cache (FP8 GEMMs reach a
 * smaller share of their peak than bf16 ones of theirs): true with it in OUT, false (OUT
 * untouched) where the GPU has no such tables. */
bool hw_preset_fit_fp8(const char *name, hw_fit *out);
/* What the roofline assumes for hardware that no fit covers: an H200's measured GEMM and
 * copy efficiencies (0.8, 0.9), half of peak for attention, 0.5 ms per step. */
extern const hw_fit hw_unfitted;

#endif
