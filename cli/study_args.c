#include "cli/study_args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const study_opt *find_opt(const study_opt *opts, int n, const char *flag, size_t len)
{
    static const study_opt common[] = {{"--seed", true}, {"--set", true}};
    for (int i = 0; i < 2; i++)
        if (strlen(common[i].flag) == len && strncmp(common[i].flag, flag, len) == 0) return &common[i];
    for (int i = 0; i < n; i++)
        if (strlen(opts[i].flag) == len && strncmp(opts[i].flag, flag, len) == 0) return &opts[i];
    return NULL;
}

static int misuse(const char *usage, const char *what, const char *arg)
{
    fprintf(stderr, "servesim: %s%s\n%s", what, arg, usage);
    return -1;
}

/* The option at ARGV[*I], as "--flag value" or "--flag=value": its table row and value (NULL
 * for a flag without one). Advances *I past a separate value. Returns -1 after printing the
 * misuse. */
static int take_opt(int argc, char **argv, int *i, const char *usage, const study_opt *opts, int n,
                    const study_opt **opt, const char **value)
{
    const char *arg = argv[*i], *eq = strchr(arg, '=');
    size_t len = eq && arg[1] == '-' ? (size_t)(eq - arg) : strlen(arg);
    *opt = find_opt(opts, n, arg, len);
    *value = NULL;
    if (!*opt) {
        fprintf(stderr, "servesim: unknown option %.*s\n%s", (int)len, arg, usage);
        return -1;
    }
    if (!(*opt)->has_value) return arg[len] ? misuse(usage, (*opt)->flag, " takes no value") : 0;
    if (arg[len]) {
        *value = arg + len + 1;
        return 0;
    }
    if (*i + 1 >= argc) return misuse(usage, arg, " needs a value");
    *value = argv[++*i];
    return 0;
}

/* The scenario file: the one argument that is neither an option nor an option's value. */
static int find_file(int argc, char **argv, const char *usage, const study_opt *opts, int n, const char **file)
{
    *file = NULL;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1]) {
            const study_opt *o;
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
    /* --seed and --set first, so the command's options see the final scenario; every option
     * was checked by find_file */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 1; i < argc; i++) {
            if (argv[i][0] != '-' || !argv[i][1]) continue;
            const study_opt *o;
            const char *value;
            take_opt(argc, argv, &i, usage, opts, nopts, &o, &value);
            bool common = strcmp(o->flag, "--seed") == 0 || strcmp(o->flag, "--set") == 0;
            if (pass == 0 && common && apply_common(sc, o->flag, value) < 0) return -1;
            if (pass == 1 && !common && on_opt(ctx, o->flag, value) < 0) return -1;
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
