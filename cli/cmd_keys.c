#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "sim/hardware.h"

int cmd_keys(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        puts("usage: servesim keys\n  Lists every scenario key: section, type, default, range and meaning.");
        return EXIT_OK;
    }
    if (argc > 1) {
        fprintf(stderr, "servesim: keys takes no arguments (got \"%s\")\n", argv[1]);
        return EXIT_BAD_INPUT;
    }
    printf("Scenario keys. Booleans take true/false, on/off, yes/no, 1/0; only ';' starts a comment.\n"
           "Model presets: %s.\nHardware presets: %s.\n\n", model_preset_names(), hw_preset_names());
    scenario_print_keys(stdout);
    return EXIT_OK;
}
