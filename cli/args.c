#include <stdio.h>
#include <string.h>

#include "cli/commands.h"

bool wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return true;
    return false;
}

static int bad_usage(const char *usage, const char *fmt, const char *arg)
{
    fprintf(stderr, "servesim: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n%s", usage);
    return -1;
}

int parse_scenario_args(int argc, char **argv, const char *usage, scenario *sc, scenario_args *a)
{
    char err[1024];
    const char *file = NULL;
    scenario_defaults(sc);
    *a = (scenario_args){0};
    /* the file first, so --seed and --set override it whatever their position */
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-') {
            if (strcmp(argv[i], "--quiet") != 0) i++;
            continue;
        }
        if (file) return bad_usage(usage, "more than one scenario file (\"%s\")", argv[i]);
        file = argv[i];
    }
    if (file && scenario_load(sc, file, err, sizeof err) < 0) {
        fprintf(stderr, "servesim: %s\n", err);
        return -1;
    }
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i];
        if (opt[0] != '-') continue;
        if (strcmp(opt, "--quiet") == 0) {
            a->quiet = true;
            continue;
        }
        if (i + 1 >= argc) return bad_usage(usage, "%s needs a value", opt);
        const char *val = argv[++i];
        if (strcmp(opt, "--out") == 0) {
            if (!val[0]) return bad_usage(usage, "--out needs a directory name, got \"%s\"", val);
            a->out_dir = val;
        } else if (strcmp(opt, "--seed") == 0 || strcmp(opt, "--set") == 0 || strcmp(opt, "--backend") == 0) {
            char assignment[512];
            if (strcmp(opt, "--seed") == 0) snprintf(assignment, sizeof assignment, "run.seed=%s", val);
            else if (strcmp(opt, "--backend") == 0) snprintf(assignment, sizeof assignment, "engine.backend=%s", val);
            else snprintf(assignment, sizeof assignment, "%s", val);
            if (scenario_set(sc, assignment, err, sizeof err) < 0) {
                const char *why = strstr(err, ": ");
                if (strcmp(opt, "--seed") == 0) fprintf(stderr, "servesim: --seed %s%s\n", val, why ? why : "");
                else fprintf(stderr, "servesim: %s\n", err);
                return -1;
            }
        } else {
            return bad_usage(usage, "unknown option %s", opt);
        }
    }
    return 0;
}
