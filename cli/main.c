/* servesim: one binary, one subcommand per job. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/environment.h"
#include "cli/interrupt.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: servesim COMMAND [ARGS]\n\n"
            "commands:\n"
            "  run [SCENARIO.ini]   simulate a scenario (a built-in default without one)\n"
            "  engine [SCENARIO.ini] serve a scenario in real time on the real engine (CPU backend)\n"
            "  calibrate            time the real backend's kernels into a cost table\n"
            "  validate SCENARIO.ini run the same requests on the engine and the simulator, compare\n"
            "  keys                 list every scenario key with its type, default and meaning\n"
            "  presets              the model and hardware presets, fitted rooflines, measured tables\n"
            "  roofline-fit         fit each GPU's roofline to its measured tables, with its error\n"
            "  bench                measure the simulator's own speed\n"
            "  sweep SCENARIO.ini   run a scenario at many points (--vary, --point), in parallel\n"
            "  merge OUT SHARD...   join the sweep.csv of a sweep's shards\n"
            "  capacity SCENARIO.ini  the highest arrival rate meeting SLOs, the knee, KV exhaustion\n\n"
            "`servesim COMMAND --help` describes each command.\n");
}

static int dispatch(int argc, char **argv);

int main(int argc, char **argv)
{
    interrupt_install();
    int status = dispatch(argc, argv);
    /* a command stopped by Ctrl-C or SIGTERM has removed its partial output: say so the shell way */
    int sig = *interrupt_flag();
    return sig ? 128 + sig : status;
}

static int dispatch(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_BAD_INPUT;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "run") == 0) return cmd_run(argc - 1, argv + 1);
    if (strcmp(cmd, "engine") == 0) {
        env_fix_blas_core(argv);
        return cmd_engine(argc - 1, argv + 1);
    }
    if (strcmp(cmd, "calibrate") == 0) {
        env_fix_blas_core(argv);
        return cmd_calibrate(argc - 1, argv + 1);
    }
    if (strcmp(cmd, "validate") == 0) {
        env_fix_blas_core(argv);
        return cmd_validate(argc - 1, argv + 1);
    }
    if (strcmp(cmd, "keys") == 0) return cmd_keys(argc - 1, argv + 1);
    if (strcmp(cmd, "presets") == 0) return cmd_presets(argc - 1, argv + 1);
    if (strcmp(cmd, "roofline-fit") == 0) return cmd_roofline_fit(argc - 1, argv + 1);
    if (strcmp(cmd, "bench") == 0) {
        env_fix_blas_core(argv);
        return cmd_bench(argc - 1, argv + 1);
    }
    if (strcmp(cmd, "sweep") == 0) return cmd_sweep(argc - 1, argv + 1);
    if (strcmp(cmd, "merge") == 0) return cmd_merge(argc - 1, argv + 1);
    if (strcmp(cmd, "capacity") == 0) return cmd_capacity(argc - 1, argv + 1);
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return EXIT_OK;
    }
    fprintf(stderr, "servesim: unknown command \"%s\"\n", cmd);
    usage(stderr);
    return EXIT_BAD_INPUT;
}
