/* `servesim sweep`: a scenario at many points, in parallel threads; `--shard` for splitting a
 * sweep across machines (merged back by `servesim merge`); `--report` for an experiment's
 * report.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/csv.h"
#include "io/outdir.h"
#include "cli/commands.h"
#include "study/study.h"
#include "cli/study_args.h"
#include "study/sweep.h"

static const char sweep_usage[] =
    "usage: servesim sweep [SCENARIO.ini] [--vary SECTION.KEY=V1,V2,...]... [--point [LABEL:]K=V,K=V]...\n"
    "                      [--jobs N] [--repeat N] [--shard K/N] [--out DIR] [--keep-runs]\n"
    "                      [--report EXPERIMENT] [--seed N] [--percentiles P,...]\n"
    "                      [--set SECTION.KEY=VALUE]... [--quiet]\n"
    "  Runs the scenario at every point: each --point (in order) crossed with every combination\n"
    "  of the --vary values (the first --vary outermost), N threads at a time (default: one per\n"
    "  CPU; results do not depend on it). Writes DIR/sweep.csv (one row per point), sweep.json\n"
    "  and plots (default DIR: results/runs/NAME-sweep), and prints a table.\n"
    "  --repeat N     N seeds per point (run.seed, +1, ...): sweep.csv holds means, and each\n"
    "                 metric's _std, _min and _max; repeats.csv has every run\n"
    "  --shard K/N    only the points whose index % N == K-1 (K counts from 1); join the\n"
    "                 shards' directories with `servesim merge`\n"
    "  --keep-runs    also write each point's run (first seed) to DIR/points/NNN/\n"
    "  --report EXP   write DIR/report.md for an experiment: workload-classes, arrival-rate,\n"
    "                 seven-versions, prefix-caching, chunked-prefill, memory, speculative\n"
    "                 (docs/study.md)\n";

typedef struct sweep_cli {
    const char *vary[SWEEP_MAX_AXES + 1];
    int nvary;
    const char **points;
    int npoints;
    long jobs, repeat;
    const char *shard, *out, *report;
    bool keep_runs, quiet;
} sweep_cli;

static int on_sweep_opt(void *ctx, const char *flag, const char *value)
{
    sweep_cli *c = ctx;
    if (strcmp(flag, "--vary") == 0) {
        if (c->nvary > SWEEP_MAX_AXES) {
            fprintf(stderr, "servesim: --vary: at most %d\n", SWEEP_MAX_AXES);
            return -1;
        }
        c->vary[c->nvary++] = value;
    } else if (strcmp(flag, "--point") == 0) {
        const char **grown = realloc(c->points, (size_t)(c->npoints + 1) * sizeof *grown);
        if (!grown) return -1;
        c->points = grown;
        c->points[c->npoints++] = value;
    } else if (strcmp(flag, "--jobs") == 0) {
        return cli_parse_long(flag, value, 1, 1024, &c->jobs);
    } else if (strcmp(flag, "--repeat") == 0) {
        return cli_parse_long(flag, value, 1, 10000, &c->repeat);
    } else if (strcmp(flag, "--shard") == 0) {
        c->shard = value;
    } else if (strcmp(flag, "--out") == 0) {
        c->out = value;
    } else if (strcmp(flag, "--report") == 0) {
        if (!study_report_known(value)) {
            fprintf(stderr, "servesim: --report %s: unknown experiment (known: %s)\n", value, study_report_names());
            return -1;
        }
        c->report = value;
    } else {
        *(strcmp(flag, "--quiet") == 0 ? &c->quiet : &c->keep_runs) = true;
    }
    return 0;
}

static const cli_opt sweep_opts_table[] = {
    {"--vary", true}, {"--point", true}, {"--jobs", true},      {"--repeat", true}, {"--shard", true},
    {"--out", true},  {"--report", true}, {"--keep-runs", false}, {"--quiet", false},
};

/* The plan from the parsed options; -1 after printing the problem. */
static int build_plan(const sweep_cli *c, sweep_plan *p, char *err, size_t errlen)
{
    for (int i = 0; i < c->nvary; i++)
        if (sweep_add_vary(p, c->vary[i], err, errlen) < 0) return -1;
    for (int i = 0; i < c->npoints; i++)
        if (sweep_add_point(p, c->points[i], err, errlen) < 0) return -1;
    if (c->shard && sweep_set_shard(p, c->shard, err, errlen) < 0) return -1;
    p->repeat = (int)c->repeat;
    if (sweep_runs_wanted(p) > SWEEP_MAX_RUNS) {
        snprintf(err, errlen, "--repeat %ld: the sweep would be more than %d runs (points x repeats); split it",
                 c->repeat, SWEEP_MAX_RUNS);
        return -1;
    }
    if (c->report && p->num_shards > 1) {
        snprintf(err, errlen, "--report needs every point: it cannot be combined with --shard");
        return -1;
    }
    return sweep_check(p, err, errlen);
}

/* cost_models.csv: which cost model priced each point (a sweep over GPUs or models can mix
 * measured tables and the roofline), and a line saying how many of each. */
static int write_cost_models(const sweep_cli *c, const sweep_plan *p, const sweep_result *r, outdir *od, char *err,
                             size_t errlen)
{
    FILE *f = od_fopen(od, "cost_models.csv", err, errlen);
    if (!f) return -1;
    fputs("point,label,cost_model,cost_source\n", f);
    int measured = 0, roofline = 0, table = 0;
    for (int i = 0; i < sweep_num_points(p); i++) {
        if (!r[i].ran) continue;
        char label[256];
        sweep_point_label(p, i, label, sizeof label);
        fprintf(f, "%d,", i);
        csv_write_field(f, label);
        fprintf(f, ",%s,", r[i].cost_kind);
        csv_write_field(f, r[i].cost_source);
        fputc('\n', f);
        if (strcmp(r[i].cost_kind, "measured") == 0) measured++;
        else if (strcmp(r[i].cost_kind, "roofline") == 0) roofline++;
        else table++;
    }
    /* how many by which where not all by measured tables: a roofline point beside measured
     * ones (an FP8 KV cache on a model with no such table) is priced by another yardstick
     * (new-user trial: the line said "by something else") */
    if (!c->quiet && roofline + table > 0) {
        printf("Cost models: %d point%s priced by measured tables", measured, measured == 1 ? "" : "s");
        if (roofline) printf(", %d by the fitted roofline", roofline);
        if (table) printf(", %d by a given cost table (hardware.cost_table)", table);
        printf("; cost_models.csv says which and why\n");
    }
    return od_fclose(f, "cost_models.csv", err, errlen);
}

static int write_outputs(const sweep_cli *c, const sweep_plan *p, const sweep_result *r, outdir *od, int argc,
                         char **argv, char *err, size_t errlen)
{
    if (write_cost_models(c, p, r, od, err, errlen) < 0) return -1;
    FILE *f = od_fopen(od, "sweep.csv", err, errlen);
    if (!f) return -1;
    sweep_write_csv(f, p, r);
    if (od_fclose(f, "sweep.csv", err, errlen) < 0) return -1;
    if (p->repeat > 1) {
        if (!(f = od_fopen(od, "repeats.csv", err, errlen))) return -1;
        sweep_write_repeats_csv(f, p, r);
        if (od_fclose(f, "repeats.csv", err, errlen) < 0) return -1;
    }
    if (!(f = od_fopen(od, "sweep.json", err, errlen))) return -1;
    bool written = sweep_write_json(f, p, argc, argv) == 0;
    if (od_fclose(f, "sweep.json", err, errlen) < 0) return -1;
    if (!written) {
        snprintf(err, errlen, "%.1024s/sweep.json: out of memory", od->final_path);
        return -1;
    }
    if (!c->quiet) sweep_print_table(stdout, p, r);
    /* a shard's rows are a sample of every series: its plots would mislead */
    if (p->num_shards == 1 && study_sweep_plots(p, od->tmp_path, err, errlen) < 0) return -1;
    return 0;
}

static int run_sweep(const sweep_cli *c, const sweep_plan *p, const char *out, int argc, char **argv)
{
    char err[2048];
    outdir od;
    if (od_open(&od, out, err, sizeof err) < 0) {
        fprintf(stderr, "servesim: %s\n", err);
        return EXIT_FAILURE_OTHER;
    }
    char runs[4200];
    snprintf(runs, sizeof runs, "%s/points", od.tmp_path);
    bool need_runs = c->keep_runs || c->report;
    sweep_opts o = {.jobs = (int)c->jobs, .progress = !c->quiet, .runs_dir = need_runs ? runs : NULL,
                    .keep_records = c->report != NULL};
    int n = sweep_num_points(p);
    sweep_result *r = calloc((size_t)n, sizeof *r);
    int status = r ? sweep_run(p, &o, r, err, sizeof err) : EXIT_FAILURE_OTHER;
    if (!r) snprintf(err, sizeof err, "out of memory");
    if (status == EXIT_OK && write_outputs(c, p, r, &od, argc, argv, err, sizeof err) < 0) status = EXIT_FAILURE_OTHER;
    if (status == EXIT_OK && c->report) {
        int rs = study_report(c->report, p, r, od.tmp_path, argc, argv, err, sizeof err);
        if (rs < 0) status = rs == -2 ? EXIT_BAD_INPUT : EXIT_FAILURE_OTHER;
    }
    if (status == EXIT_OK && need_runs && !c->keep_runs) od_remove_tree(runs);
    if (status == EXIT_OK && od_commit(&od, err, sizeof err) < 0) status = EXIT_FAILURE_OTHER;
    if (status != EXIT_OK) {
        od_abort(&od);
        fprintf(stderr, "servesim: %s\n", err);
    } else if (!c->quiet) {
        printf("%d of %d points in %s/\n", p->num_shards > 1 ? (n - p->shard + p->num_shards - 1) / p->num_shards : n,
               n, out);
    }
    if (r) sweep_results_free(r, n);
    free(r);
    return status;
}

int sweep_plan_from_args(int argc, char **argv, sweep_plan *p, char *err, size_t errlen)
{
    scenario sc;
    sweep_cli c = {.jobs = 1, .repeat = 1};
    memset(p, 0, sizeof *p);
    if (study_parse_args(argc, argv, sweep_usage, sweep_opts_table, sizeof sweep_opts_table / sizeof *sweep_opts_table,
                         &sc, on_sweep_opt, &c) < 0) {
        snprintf(err, errlen, "its command line is refused here (above)");
        free(c.points);
        return -1;
    }
    sweep_plan_init(p, &sc);
    int rc = build_plan(&c, p, err, errlen);
    free(c.points);
    return rc;
}

int cmd_sweep(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(sweep_usage, stdout);
        return EXIT_OK;
    }
    sweep_plan plan = {0};
    scenario sc;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    sweep_cli c = {.jobs = cpus > 0 ? cpus : 1, .repeat = 1};
    char err[2048];
    int status = EXIT_BAD_INPUT;
    if (study_parse_args(argc, argv, sweep_usage, sweep_opts_table, sizeof sweep_opts_table / sizeof *sweep_opts_table,
                         &sc, on_sweep_opt, &c) < 0)
        goto done;
    sweep_plan_init(&plan, &sc);
    if (build_plan(&c, &plan, err, sizeof err) < 0) {
        fprintf(stderr, "servesim: %s\n", err);
        goto done;
    }
    if (c.report && study_report_check(c.report, &plan, err, sizeof err) < 0) {
        fprintf(stderr, "servesim: %s\n", err);
        goto done;
    }
    char out[1200];
    char out_err[2048];
    if (scenario_out_dir(&sc, c.out, "sweep", out, sizeof out, out_err, sizeof out_err) < 0 ||
        sweep_check_inputs(&plan, out, out_err, sizeof out_err) < 0) {
        fprintf(stderr, "servesim: %s\n", out_err);
        status = EXIT_BAD_INPUT;
        goto done;
    }
    status = run_sweep(&c, &plan, out, argc, argv);
done:
    sweep_plan_free(&plan);
    free(c.points);
    return status;
}
