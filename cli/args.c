#include <stdio.h>
#include <string.h>

#include <unistd.h>

#include "cli/commands.h"
#include "cli/study_args.h"

bool wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return true;
    return false;
}

typedef struct scenario_opt {
    cli_opt opt;
    int command_mask; /* 0: every scenario command; else the SA_* that take it */
} scenario_opt;

static const scenario_opt scenario_opts[] = {
    {{"--out", true}, 0},        {{"--quiet", false}, 0}, {{"--backend", true}, 0},
    {{"--repeat", true}, SA_REPEAT}, {{"--jobs", true}, SA_REPEAT}, {{"--cost-table", true}, SA_COST_TABLE},
    {{"--measured", true}, SA_MEASURED}, {{"--url", true}, SA_LOAD}, {{"--model", true}, SA_LOAD}, {{"--endpoint", true}, SA_LOAD},
    {{"--timeout", true}, SA_LOAD}, {{"--vllm-json", false}, SA_LOAD},
    {{"--host", true}, SA_SERVE}, {{"--event-times", false}, SA_SERVE}, {{"--event-log", true}, SA_SERVE}, {{"--port", true}, SA_SERVE}, {{"--served-model-name", true}, SA_SERVE},
};
enum { NUM_SCENARIO_OPTS = sizeof scenario_opts / sizeof scenario_opts[0] };

typedef struct parse_ctx {
    scenario *sc;
    scenario_args *a;
    const char *usage;
} parse_ctx;

static int on_scenario_opt(void *ctx, const char *flag, const char *value)
{
    parse_ctx *p = ctx;
    scenario_args *a = p->a;
    char err[1024], assignment[512];
    if (strcmp(flag, "--quiet") == 0) {
        a->quiet = true;
    } else if (strcmp(flag, "--out") == 0) {
        if (!value[0]) {
            fprintf(stderr, "servesim: --out needs a directory name, got \"\"\n%s", p->usage);
            return -1;
        }
        a->out_dir = value;
    } else if (strcmp(flag, "--backend") == 0) {
        snprintf(assignment, sizeof assignment, "engine.backend=%s", value);
        /* named by the flag given: "--set engine.backend=foo" was a flag the user never wrote
         * (a new user's trial) */
        if (scenario_set_from(p->sc, assignment, "--backend", err, sizeof err) < 0) {
            const char *why = strstr(err, ": ");
            fprintf(stderr, "servesim: --backend %s%s\n", value, why ? why : "");
            return -1;
        }
    } else if (strcmp(flag, "--repeat") == 0) {
        return cli_parse_long(flag, value, 1, 10000, &a->repeat);
    } else if (strcmp(flag, "--jobs") == 0) {
        return cli_parse_long(flag, value, 1, 1024, &a->jobs);
    } else if (strcmp(flag, "--cost-table") == 0) {
        a->cost_table = value;
    } else if (strcmp(flag, "--measured") == 0) {
        a->measured = value;
    } else if (strcmp(flag, "--url") == 0) {
        a->url = value;
    } else if (strcmp(flag, "--model") == 0) {
        if (!value[0] || strlen(value) > 255) {
            fprintf(stderr, "servesim: --model: a name of 1 to 255 bytes, got %zu\n%s", strlen(value), p->usage);
            return -1;
        }
        a->model = value;
    } else if (strcmp(flag, "--endpoint") == 0) {
        if (strcmp(value, "completions") != 0 && strcmp(value, "chat") != 0) {
            fprintf(stderr, "servesim: --endpoint %s: expected completions or chat\n%s", value, p->usage);
            return -1;
        }
        a->endpoint = value;
    } else if (strcmp(flag, "--timeout") == 0) {
        return cli_parse_long(flag, value, 0, 86400, &a->timeout_s);
    } else if (strcmp(flag, "--vllm-json") == 0) {
        a->vllm_json = true;
    } else if (strcmp(flag, "--event-times") == 0) {
        a->event_times = true;
    } else if (strcmp(flag, "--event-log") == 0) {
        a->event_log = value;
    } else if (strcmp(flag, "--host") == 0) {
        a->host = value;
    } else if (strcmp(flag, "--port") == 0) {
        return cli_parse_long(flag, value, 0, 65535, &a->port);
    } else if (strcmp(flag, "--served-model-name") == 0) {
        /* it appears in JSON and as a Prometheus label value: keep it to name characters */
        if (!value[0] || strlen(value) > 200 ||
            strspn(value, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/:") != strlen(value)) {
            fprintf(stderr, "servesim: --served-model-name %s: use up to 200 letters, digits and . _ - / : only\n%s", value,
                    p->usage);
            return -1;
        }
        a->model_name = value;
    }
    return 0;
}

int parse_scenario_args(int argc, char **argv, const char *usage, int extras, scenario *sc, scenario_args *a)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    *a = (scenario_args){.repeat = 1, .jobs = cpus > 0 ? cpus : 1, .host = "127.0.0.1", .port = 8000,
                         .endpoint = "completions", .timeout_s = LOAD_DEFAULT_TIMEOUT_S};
    cli_opt opts[NUM_SCENARIO_OPTS];
    int n = 0;
    for (int i = 0; i < NUM_SCENARIO_OPTS; i++)
        if (!scenario_opts[i].command_mask || (scenario_opts[i].command_mask & extras)) opts[n++] = scenario_opts[i].opt;
    parse_ctx ctx = {sc, a, usage};
    return study_parse_args(argc, argv, usage, opts, n, sc, on_scenario_opt, &ctx);
}
