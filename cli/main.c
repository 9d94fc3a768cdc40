/* servesim: one binary, one subcommand per job. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/environment.h"
#include "io/interrupt.h"
#include "kernels/backend.h"

/* One row per command: name, arguments shown in the usage, whether it runs the CPU kernels
 * (their BLAS is pinned to one core per thread first), entry point, what it does. */
#define SERVESIM_COMMANDS(X)                                                                        \
    X("run", "[SCENARIO.ini]", false, cmd_run, "simulate a scenario (a built-in default without one)") \
    X("engine", "[SCENARIO.ini]", true, cmd_engine,                                                 \
      "serve a scenario in real time on the real engine (CPU backend)")                             \
    X("serve", "[SCENARIO.ini]", true, cmd_serve,                                                   \
      "the real engine behind an OpenAI-compatible HTTP API (/v1/completions, /metrics)")           \
    X("load", "[SCENARIO.ini] --url URL", false, cmd_load,                                          \
      "send a scenario's workload to any OpenAI-compatible server, measure it like a run")         \
    X("calibrate", "", true, cmd_calibrate, "time the real backend's kernels into a cost table")     \
    X("validate", "SCENARIO.ini", true, cmd_validate,                                               \
      "run the same requests on the engine and the simulator, compare")                             \
    X("keys", "", false, cmd_keys, "list every scenario key with its type, default and meaning")     \
    X("presets", "", false, cmd_presets, "the model and hardware presets, fitted rooflines, measured tables") \
    X("roofline-fit", "", false, cmd_roofline_fit, "fit each GPU's roofline to its measured tables, with its error") \
    X("bench", "", true, cmd_bench, "measure the simulator's own speed")                             \
    X("sweep", "[SCENARIO.ini]", false, cmd_sweep, "run a scenario at many points (--vary, --point), in parallel") \
    X("merge", "OUT SHARD...", false, cmd_merge, "join the shards of a sweep or a plan")           \
    X("capacity", "[SCENARIO.ini]", false, cmd_capacity,                                              \
      "the highest arrival rate meeting SLOs, the knee, KV exhaustion")                             \
    X("plan", "[SCENARIO.ini]", false, cmd_plan,                                                      \
      "deployments (tensor parallel x replicas x router) answered in GPUs under SLOs")

typedef struct command {
    const char *name, *args;
    bool pins_blas;
    int (*run)(int argc, char **argv);
    const char *help;
} command;

#define COMMAND_ROW(name, args, pins_blas, fn, help) {name, args, pins_blas, fn, help},
static const command commands[] = {SERVESIM_COMMANDS(COMMAND_ROW)};
#undef COMMAND_ROW

static void usage(FILE *f)
{
    fprintf(f, "usage: servesim COMMAND [ARGS]\n       servesim --version\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        char head[64];
        snprintf(head, sizeof head, "%s %s", commands[i].name, commands[i].args);
        fprintf(f, "  %-26s %s\n", head, commands[i].help);
    }
    fprintf(f, "\n`servesim COMMAND --help` describes each command.\n");
}

static int dispatch(int argc, char **argv);

int main(int argc, char **argv)
{
    interrupt_install();
    /* what a command printed and could not write was lost with exit 0: `servesim presets --csv
     * models > f` on a full disk left f short (bad-input campaign) */
    int status = cli_finish_stdout(dispatch(argc, argv));
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
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(cmd, commands[i].name) != 0) continue;
        /* checked once here: the memory checks that read it take a bad value as "cannot tell" */
        size_t cap;
        char err[256];
        if (kb_memory_cap(&cap, err, sizeof err) < 0) {
            fprintf(stderr, "servesim: %s\n", err);
            return EXIT_BAD_INPUT;
        }
        if (commands[i].pins_blas) env_fix_blas_core(argv);
        return commands[i].run(argc - 1, argv + 1);
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        char commit[64];
        env_git_commit(commit, sizeof commit);
        if (strcmp(commit, "unknown") == 0) printf("servesim %s\n", SERVESIM_VERSION);
        else printf("servesim %s (commit %s)\n", SERVESIM_VERSION, commit);
        return EXIT_OK;
    }
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return EXIT_OK;
    }
    fprintf(stderr, "servesim: unknown command \"%s\"\n", cmd);
    usage(stderr);
    return EXIT_BAD_INPUT;
}
