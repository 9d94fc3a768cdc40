#include "cli/study_args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const study_opt *find_opt(const study_opt *opts, int n, const char *flag)
{
    static const study_opt common[] = {{"--seed", true}, {"--set", true}};
    for (int i = 0; i < 2; i++)
        if (strcmp(common[i].flag, flag) == 0) return &common[i];
    for (int i = 0; i < n; i++)
        if (strcmp(opts[i].flag, flag) == 0) return &opts[i];
    return NULL;
}

static int misuse(const char *usage, const char *what, const char *arg)
{
    fprintf(stderr, "servesim: %s%s\n%s", what, arg, usage);
    return -1;
}

/* The scenario file: the one argument that is neither an option nor an option's value. */
static int find_file(int argc, char **argv, const char *usage, const study_opt *opts, int n, const char **file)
{
    *file = NULL;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-') {
            const study_opt *o = find_opt(opts, n, argv[i]);
            if (!o) return misuse(usage, "unknown option ", argv[i]);
            if (o->has_value && ++i >= argc) return misuse(usage, argv[i - 1], " needs a value");
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

int study_parse_args(int argc, char **argv, const char *usage, const study_opt *opts, int nopts, scenario *sc,
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
    /* --seed and --set first, so the command's options see the final scenario */
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] != '-') continue;
        const study_opt *o = find_opt(opts, nopts, argv[i]);
        const char *value = o->has_value ? argv[++i] : NULL;
        bool common = strcmp(o->flag, "--seed") == 0 || strcmp(o->flag, "--set") == 0;
        if (common && apply_common(sc, o->flag, value) < 0) return -1;
    }
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] != '-') continue;
        const study_opt *o = find_opt(opts, nopts, argv[i]);
        const char *value = o->has_value ? argv[++i] : NULL;
        bool common = strcmp(o->flag, "--seed") == 0 || strcmp(o->flag, "--set") == 0;
        if (!common && on_opt(ctx, o->flag, value) < 0) return -1;
    }
    return 0;
}

int study_parse_int(const char *flag, const char *value, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (end == value || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "servesim: %s %s: expected an integer in [%ld, %ld]\n", flag, value, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}
