#include "cli/study_args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/options.h"

static const cli_opt common_opts[] = {{"--seed", true}, {"--set", true}};

/* The command's options and --seed and --set, which every scenario command takes. */
static int take_opt(int argc, char **argv, int *i, const char *usage, const cli_opt *opts, int n,
                    const cli_opt **opt, const char **value)
{
    cli_opt all[64];
    int k = 0;
    for (int j = 0; j < 2; j++) all[k++] = common_opts[j];
    for (int j = 0; j < n && k < 64; j++) all[k++] = opts[j];
    if (cli_take_opt(argc, argv, i, usage, all, k, opt, value) < 0) return -1;
    /* point into the caller's table, which outlives ALL */
    const cli_opt *found = *opt;
    *opt = found - all < 2 ? &common_opts[found - all] : &opts[found - all - 2];
    return 0;
}

static int misuse(const char *usage, const char *what, const char *arg)
{
    fprintf(stderr, "servesim: %s%s\n%s", what, arg, usage);
    return -1;
}

/* The scenario file: the one argument that is neither an option nor an option's value. */
static int find_file(int argc, char **argv, const char *usage, const cli_opt *opts, int n, const char **file)
{
    *file = NULL;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1]) {
            const cli_opt *o;
            const char *value;
            if (take_opt(argc, argv, &i, usage, opts, n, &o, &value) < 0) return -1;
            continue;
        }
        if (*file) return misuse(usage, "more than one scenario file: ", argv[i]);
        *file = argv[i];
    }
    return 0;
}

static int apply_common(scenario *sc, const char *flag, const char *value)
{
    char assignment[600], err[1024];
    if (strcmp(flag, "--seed") == 0) snprintf(assignment, sizeof assignment, "run.seed=%s", value);
    else snprintf(assignment, sizeof assignment, "%s", value);
    if (scenario_set(sc, assignment, err, sizeof err) == 0) return 0;
    const char *why = strstr(err, ": ");
    if (strcmp(flag, "--seed") == 0) fprintf(stderr, "servesim: --seed %s%s\n", value, why ? why : "");
    else fprintf(stderr, "servesim: %s\n", err);
    return -1;
}

int study_parse_args(int argc, char **argv, const char *usage, const cli_opt *opts, int nopts, scenario *sc,
                     int (*on_opt)(void *ctx, const char *flag, const char *value), void *ctx)
{
    const char *file;
    char err[1024];
    if (find_file(argc, argv, usage, opts, nopts, &file) < 0) return -1;
    scenario_defaults(sc);
    if (file && scenario_load(sc, file, err, sizeof err) < 0) {
        fprintf(stderr, "servesim: %s\n", err);
        return -1;
    }
    /* --seed and --set first, so the command's options see the final scenario; every option
     * was checked by find_file */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 1; i < argc; i++) {
            if (argv[i][0] != '-' || !argv[i][1]) continue;
            const cli_opt *o;
            const char *value;
            take_opt(argc, argv, &i, usage, opts, nopts, &o, &value);
            bool common = strcmp(o->flag, "--seed") == 0 || strcmp(o->flag, "--set") == 0;
            if (pass == 0 && common && apply_common(sc, o->flag, value) < 0) return -1;
            if (pass == 1 && !common && on_opt(ctx, o->flag, value) < 0) return -1;
        }
    return 0;
}
