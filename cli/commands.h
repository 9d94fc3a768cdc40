/* The subcommands. Each takes its own argv (argv[0] is the command name) and returns an exit
 * status: 0 success, 2 bad input or usage, 1 any other failure. */
#ifndef SERVESIM_CLI_COMMANDS_H
#define SERVESIM_CLI_COMMANDS_H

#include "config/scenario.h"
#include "study/simjob.h"

int cmd_run(int argc, char **argv);
int cmd_engine(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_load(int argc, char **argv);

int cmd_calibrate(int argc, char **argv);
/* "\rcalibrating: DONE/TOTAL shapes" on a terminal: calib_options.progress of calibrate and validate */
void calibrate_show_progress(void *ctx, int done, int total);
int cmd_validate(int argc, char **argv);
int cmd_keys(int argc, char **argv);
int cmd_presets(int argc, char **argv);
int cmd_roofline_fit(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_capacity(int argc, char **argv);
int cmd_plan(int argc, char **argv);
/* `servesim merge OUT DIR...` of `plan --shard` outputs: what one plan run writes, in OUT. */
int plan_merge(const char *out, char **dirs, int ndirs);
struct sweep_plan;
/* The plan `servesim sweep ARGV` (ARGV[0] the command's name) makes, as merge makes it again
 * from a shard's sweep.json; -1 with a reason in ERR (the parser's own on stderr). Free it
 * with sweep_plan_free. */
int sweep_plan_from_args(int argc, char **argv, struct sweep_plan *p, char *err, size_t errlen);

/* Options every scenario command takes: [SCENARIO.ini] [--seed N] [--set K=V]... [--out DIR]
 * [--quiet] [--backend B], plus those EXTRAS names: run's --repeat and --jobs (SA_REPEAT),
 * validate's --cost-table (SA_COST_TABLE), serve's --host, --port, --served-model-name, --event-times and --event-log
 * (SA_SERVE), load's --url, --model, --endpoint, --timeout and --vllm-json (SA_LOAD). "--flag=value" works as "--flag value". */
enum { SA_REPEAT = 1, SA_COST_TABLE = 2, SA_SERVE = 4, SA_LOAD = 8, SA_MEASURED = 16 };
typedef struct scenario_args {
    const char *out_dir;
    bool quiet;
    long repeat, jobs;      /* 1 and one per CPU unless given */
    const char *cost_table; /* NULL unless given */
    const char *host;       /* serve: --host, 127.0.0.1 unless given */
    long port;              /* serve: --port, 8000 unless given */
    const char *model_name; /* serve: --served-model-name, NULL = the model preset's name */
    bool event_times;       /* serve: --event-times */
    const char *event_log;  /* serve: --event-log FILE */
    const char *url;        /* load: --url (required) */
    const char *model;      /* load: --model, NULL = ask the server */
    const char *endpoint;   /* load: --endpoint, "completions" unless given */
    long timeout_s;         /* load: --timeout, LOAD_DEFAULT_TIMEOUT_S unless given, 0 = none */
    bool vllm_json;         /* load: --vllm-json */
    const char *measured;   /* validate: --measured DIR_OR_JSON */
} scenario_args;

/* A request's limit when --timeout is not given: vllm bench serve's (aiohttp's total of 6 h),
 * so that a server that takes a request and never answers does not hold the run forever. */
#define LOAD_DEFAULT_TIMEOUT_S 21600

/* Parses ARGV into SC (defaults, then the file, then --seed and --set in order) and A.
 * Returns -1 after printing the problem and USAGE to stderr. */
int parse_scenario_args(int argc, char **argv, const char *usage, int extras, scenario *sc, scenario_args *a);
bool wants_help(int argc, char **argv);
/* validate --measured: A->measured simulated at its send times and compared; into OUT. */
int validate_measured(const scenario *sc, const scenario_args *a, const char *out);

#endif
