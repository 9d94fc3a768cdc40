/* Accelerators for the roofline cost model, from vendor datasheets. */
#ifndef SERVESIM_SIM_HARDWARE_H
#define SERVESIM_SIM_HARDWARE_H

typedef struct hw_spec {
    const char *name;
    double peak_tflops;      /* dense bf16 tensor-core TFLOP/s */
    double mem_bandwidth_gbs;/* HBM GB/s */
    double mem_gib;          /* device memory, GiB */
} hw_spec;

const hw_spec *hw_preset(const char *name);
const char *hw_preset_names(void);

#endif
