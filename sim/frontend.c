/* The API-server presets' table (sim/frontend.h). */
#include "sim/frontend.h"

#include <string.h>

static const frontend_preset presets[] = {
#define X(name, request_ms, step_ms, token_ms, help) {name, request_ms, step_ms, token_ms, help},
    SIM_FRONTENDS(X)
#undef X
};

const frontend_preset *frontend_preset_find(const char *name)
{
    for (size_t i = 0; i < sizeof presets / sizeof *presets; i++)
        if (strcmp(name, presets[i].name) == 0) return &presets[i];
    return NULL;
}
