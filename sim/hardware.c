#include "sim/hardware.h"

#include <string.h>

/* NVIDIA datasheets, SXM parts, dense (not sparse) bf16; memory as nvidia-smi reports it
 * (H200 143,771 MiB, H100 81,559 MiB, A100 81,920 MiB). */
static const hw_spec presets[] = {
    {"h200", 989.0, 4800.0, 143771.0 / 1024},
    {"h100", 989.0, 3350.0, 81559.0 / 1024},
    {"a100", 312.0, 2039.0, 81920.0 / 1024},
};

const hw_spec *hw_preset(const char *name)
{
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(presets[i].name, name) == 0) return &presets[i];
    return NULL;
}

const char *hw_preset_names(void) { return "h200, h100, a100"; }
