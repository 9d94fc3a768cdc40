/* The hardware presets, one row each. */
#include "sim/hardware.h"

#include <string.h>

/* Dense (not sparse) bf16 tensor-core TFLOP/s, memory bandwidth and memory from NVIDIA's
 * datasheets (Intel's for the Arc Pro B60), memory as nvidia-smi reports it where known
 * (H200 143,771 MiB, H100 81,559 MiB, A100 81,920 MiB on these machines; the others as
 * aiconfigurator-core 0.12.0's systems/<gpu>.yaml records them, Apache-2.0).
 * Link: one direction's GPU-to-GPU bandwidth within a node, as those same files record it
 * (NVLink 4 450 GB/s, NVLink 5 900, NVLink 3 300; PCIe for the L40S, RTX PRO 6000 and B60).
 * All-reduce: the database's fastest vLLM all-reduce on 2 GPUs (its smallest message, 128
 * elements; CUDA-graph custom all-reduce, eager on the B60), the fixed cost of each one.
 * FP8: dense FP8 tensor-core TFLOP/s as those files record them; 0 where the GPU has none
 * (the A100; the B60 runs FP8 models on its bf16 units, as its file notes). */
#define HW_PRESETS(X) \
    /* name           database system          TFLOP/s   GB/s    GiB               link GB/s  all-reduce us  fp8 TFLOP/s */ \
    X("h200",         "h200_sxm",              989.0,    4800.0, 143771.0 / 1024,  450.0,     4.4,  1978.0) \
    X("h100",         "h100_sxm",              989.0,    3350.0, 81559.0 / 1024,   450.0,     4.3,  1978.0) \
    X("a100",         "a100_sxm",              312.0,    2039.0, 81920.0 / 1024,   300.0,     4.9,     0.0) \
    X("b200",         "b200_sxm",              2250.0,   7700.0, 180.0,            900.0,     6.6,  4500.0) \
    X("b300",         "b300_sxm",              2250.0,   7750.0, 275040.0 / 1024,  900.0,     6.6,  4500.0) \
    X("gb200",        "gb200",                 2500.0,   8000.0, 189471.0 / 1024,  900.0,     5.0,  5000.0) \
    X("gb300",        "gb300",                 2500.0,   8000.0, 284208.0 / 1024,  900.0,     7.0,  5000.0) \
    X("l40s",         "l40s",                  362.05,   864.0,  46068.0 / 1024,   32.0,      5.4,   733.0) \
    X("rtx-pro-6000", "rtx_pro_6000_server",   467.8,    1792.0, 97887.0 / 1024,   64.0,      4.3,   935.6) \
    X("b60",          "b60",                   98.3,     456.0,  24.0,             28.4,      85.1,     0.0)

const hw_fit hw_unfitted = {0.8, 0.9, 0.5, 0.5, 0, 0, 0, 0};

/* FIT(name, compute, memory, attention, overhead_ms, median_error, max_error,
 * holdout_median_error, holdout_max_error) rows, written by `servesim roofline-fit --write`;
 * FIT8 rows the same, fitted to the FP8 tables */
typedef struct named_fit {
    const char *name;
    hw_fit fit;
} named_fit;
static const named_fit fits[] = {
#define FIT(name, c, m, a, o, med, max, hmed, hmax) {name, {c, m, a, o, med, max, hmed, hmax}},
#define FIT8(...)
#include "sim/roofline_fit.inc"
#undef FIT
#undef FIT8
    {"", {0, 0, 0, 0, 0, 0, 0, 0}}, /* keeps the array non-empty before the first fit */
};
static const named_fit fits_fp8[] = {
#define FIT(...)
#define FIT8(name, c, m, a, o, med, max, hmed, hmax) {name, {c, m, a, o, med, max, hmed, hmax}},
#include "sim/roofline_fit.inc"
#undef FIT
#undef FIT8
    {"", {0, 0, 0, 0, 0, 0, 0, 0}},
};

static const hw_spec presets[] = {
#define ROW(name, db, tflops, gbs, gib, link, ar_us, fp8) {name, db, tflops, gbs, gib, link, ar_us, fp8},
    HW_PRESETS(ROW)
#undef ROW
};
#define NAME(name, ...) ", " name
static const char preset_names[] = HW_PRESETS(NAME);
#undef NAME
enum { NUM_PRESETS = sizeof presets / sizeof presets[0] };

/* NAME's row of ROWS (N of them), or NULL; the placeholder row "" is no GPU's */
static const hw_fit *find_fit(const named_fit *rows, size_t n, const char *name)
{
    for (size_t i = 0; name[0] && i < n; i++)
        if (strcmp(rows[i].name, name) == 0) return &rows[i].fit;
    return NULL;
}

hw_fit hw_preset_fit(const char *name)
{
    const hw_fit *f = find_fit(fits, sizeof fits / sizeof fits[0], name);
    return f ? *f : hw_unfitted;
}

bool hw_preset_fit_fp8(const char *name, hw_fit *out)
{
    const hw_fit *f = find_fit(fits_fp8, sizeof fits_fp8 / sizeof fits_fp8[0], name);
    if (f) *out = *f;
    return f != NULL;
}

const hw_spec *hw_preset_at(size_t i)
{
    return i < NUM_PRESETS ? &presets[i] : NULL;
}

const hw_spec *hw_preset(const char *name)
{
    for (size_t i = 0; i < NUM_PRESETS; i++)
        if (strcmp(presets[i].name, name) == 0) return &presets[i];
    return NULL;
}

const char *hw_preset_names(void) { return preset_names + 2; /* past the first ", " */ }
