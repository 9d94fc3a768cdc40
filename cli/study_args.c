/* The scenario commands' command lines (study_args.h), three walks of cli_parse over one
 * table: the command's options plus --seed and --set. */
#include "cli/study_args.h"

#include <stdio.h>
#include <string.h>

#include "cli/options.h"

enum { MAX_OPTS = 64 };

static bool is_common(const char *flag)
{
    return strcmp(flag, "--seed") == 0 || strcmp(flag, "--set") == 0 || strcmp(flag, "--percentiles") == 0;
}

typedef struct walk {
    const char *usage;
    const char *file;        /* the scenario file, the one argument that is not an option's */
    scenario *sc;
    int (*on_opt)(void *ctx, const char *flag, const char *value);
    void *ctx;
} walk;

static int skip_opt(void *ctx, const char *flag, const char *value)
{
    (void)ctx, (void)flag, (void)value;
    return 0;
}

static int skip_arg(void *ctx, const char *arg)
{
    (void)ctx, (void)arg;
    return 0;
}

static int take_file(void *ctx, const char *arg)
{
    walk *w = ctx;
    if (w->file) {
        fprintf(stderr, "servesim: more than one scenario file: %s\n%s", arg, w->usage);
        return -1;
    }
    w->file = arg;
    return 0;
}

static int apply_common(void *ctx, const char *flag, const char *value)
{
    walk *w = ctx;
    if (!is_common(flag)) return 0;
    char assignment[600], err[1024];
    int key = -1; /* the key a flag of its own sets, which later messages name by that flag */
    if (strcmp(flag, "--seed") == 0) snprintf(assignment, sizeof assignment, "run.seed=%s", value), key = K_run_seed;
    else if (strcmp(flag, "--percentiles") == 0)
        snprintf(assignment, sizeof assignment, "run.percentiles=%s", value), key = K_run_percentiles;
    else snprintf(assignment, sizeof assignment, "%s", value);
    if (scenario_set(w->sc, assignment, err, sizeof err) == 0) {
        if (key >= 0) snprintf(w->sc->v[key].origin, sizeof w->sc->v[key].origin, "%s", flag);
        return 0;
    }
    /* named by the flag given, not the --set it stands for */
    const char *why = strstr(err, ": ");
    if (key >= 0) fprintf(stderr, "servesim: %s %s%s\n", flag, value, why ? why : "");
    else fprintf(stderr, "servesim: %s\n", err);
    return -1;
}

static int apply_own(void *ctx, const char *flag, const char *value)
{
    walk *w = ctx;
    return is_common(flag) ? 0 : w->on_opt(w->ctx, flag, value);
}

int study_parse_args(int argc, char **argv, const char *usage, const cli_opt *opts, int nopts, scenario *sc,
                     int (*on_opt)(void *ctx, const char *flag, const char *value), void *ctx)
{
    cli_opt all[MAX_OPTS] = {{"--seed", true}, {"--set", true}, {"--percentiles", true}};
    int n = 3;
    for (int i = 0; i < nopts && n < MAX_OPTS; i++) all[n++] = opts[i];
    walk w = {.usage = usage, .sc = sc, .on_opt = on_opt, .ctx = ctx};
    /* every option is checked, and the file found, before anything is loaded */
    if (cli_parse(argc, argv, usage, all, n, skip_opt, take_file, &w) < 0) return -1;
    scenario_defaults(sc);
    char err[1024];
    if (w.file && scenario_load(sc, w.file, err, sizeof err) < 0) {
        fprintf(stderr, "servesim: %s\n", err);
        return -1;
    }
    /* --seed and --set first, so the command's options see the final scenario */
    if (cli_parse(argc, argv, usage, all, n, apply_common, skip_arg, &w) < 0) return -1;
    return cli_parse(argc, argv, usage, all, n, apply_own, skip_arg, &w);
}
