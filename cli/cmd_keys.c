#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "sim/frontend.h"
#include "sim/hardware.h"

static const char keys_usage[] = "usage: servesim keys\n  Lists every scenario key: section, type, default, range and meaning.\n";

int cmd_keys(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(keys_usage, stdout);
        return EXIT_OK;
    }
    if (cli_parse(argc, argv, keys_usage, NULL, 0, NULL, NULL, NULL) < 0) return EXIT_BAD_INPUT;
    printf("Scenario keys. Booleans take true/false, on/off, yes/no, 1/0; only ';' starts a comment.\n"
           "Model presets: %s.\nHardware presets: %s.\nServing policies (scheduler.policy):\n",
           model_preset_names(), hw_preset_names());
#define X(id, name, single, recompute, reserve_max, whole_batch, paged, help) printf("  %-12s %s\n", name, help);
    SCHED_POLICIES(X)
#undef X
    printf("API servers (frontend.preset: per request, per step with tokens, per streamed chunk):\n");
#define X(name, request_ms, step_ms, token_ms, help) \
    printf("  %-12s %g / %g / %g ms: %s\n", name, request_ms, step_ms, token_ms, help);
    SIM_FRONTENDS(X)
#undef X
    putchar('\n');
    scenario_print_keys(stdout);
    return EXIT_OK;
}
