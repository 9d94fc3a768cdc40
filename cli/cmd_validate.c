/* `servesim validate`: the same requests through the real engine and the simulator (with a
 * cost table calibrated on that engine), and how far apart they are. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/compare.h"
#include "bench/outdir.h"
#include "bench/plot.h"
#include "calibrate/calibrate.h"
#include "cli/commands.h"
#include "cli/job.h"
#include "engine/engine.h"

static const char validate_usage[] =
    "usage: servesim validate SCENARIO.ini [--backend cpu|cuda] [--cost-table FILE] [--out DIR]\n"
    "                         [--seed N] [--set SECTION.KEY=VALUE]... [--quiet]\n"
    "  For each point of the [validate] section (rates x policies), builds the request list\n"
    "  once, serves it on the real engine, replays exactly the same requests through the\n"
    "  simulator with the cost table, and compares TTFT/TPOT/ITL/E2EL, throughput, batch size\n"
    "  and preemptions, and every executed step's predicted against measured time. Without a\n"
    "  table (--cost-table or hardware.cost_table) it calibrates the backend first. Writes\n"
    "  validation.json, report.md and plots to DIR (default results/runs/NAME-validate); exits\n"
    "  1 when an error exceeds the [validate] thresholds.\n";

enum { MAX_POINTS = 32 };

typedef struct point {
    char rate[32], policy[32];
    summary sim, real;
    cmp_result cmp;
    bool passed;
} point;

/* Splits a comma list into ITEMS; an empty list gives FALLBACK alone. */
static int split_list(const char *list, const char *fallback, char items[][32], int cap)
{
    int n = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list[0] ? list : fallback);
    for (char *save, *p = strtok_r(buf, ",", &save); p && n < cap; p = strtok_r(NULL, ",", &save)) {
        while (*p == ' ') p++;
        snprintf(items[n++], 32, "%s", p);
    }
    return n;
}

static int point_scenario(const scenario *base, const point *p, scenario *sc, char *err, size_t errlen)
{
    *sc = *base;
    char set[128];
    snprintf(set, sizeof set, "workload.rate=%s", p->rate);
    if (scenario_set(sc, set, err, errlen) < 0) return -1;
    snprintf(set, sizeof set, "scheduler.policy=%s", p->policy);
    return scenario_set(sc, set, err, errlen);
}

typedef struct run_side {
    met_acc *met;
    recorder rc;
    summary sum;
} run_side;

static void side_free(run_side *s)
{
    rec_free(&s->rc);
    met_free(s->met);
}

static int serve_real(const scenario_resolved *r, const kb_options *kb, const kb_sampling *sp, workload *w,
                      table_cost *tc, run_side *out, char *err, size_t errlen)
{
    engine_options o = {.sched = r->sched, .backend = *kb, .sampling = *sp, .predict = tc_step_time, .predict_ctx = tc};
    engine_backend_options(&r->sched, &o.backend);
    out->met = met_create();
    rec_init(&out->rc, out->met, NULL);
    out->rc.keep_steps = true;
    int status = engine_run(&o, w, &r->workload, &out->rc, NULL, err, errlen);
    if (status == 0 && met_summarize(out->met, &r->slo, &out->sum) < 0) {
        snprintf(err, errlen, "no measured request finished on the engine");
        status = 1;
    }
    return status;
}

static int simulate(const scenario_resolved *r, workload *w, table_cost *tc, run_side *out, char *err, size_t errlen)
{
    sim_options o = {.sched = r->sched, .cost = {tc_step_time, tc}, .num_replicas = 1};
    out->met = met_create();
    rec_init(&out->rc, out->met, NULL);
    out->rc.keep_steps = true;
    if (sim_run(&o, w, &r->workload, &out->rc, NULL, err, errlen) < 0) return 1;
    if (met_summarize(out->met, &r->slo, &out->sum) < 0) {
        snprintf(err, errlen, "no measured request finished in the simulator");
        return 1;
    }
    return 0;
}

static bool within(const cmp_result *c, const char *metric, double limit)
{
    const cmp_row *row = cmp_find(c, metric);
    return row && fabs(row->rel_error) <= limit;
}

static bool point_passes(const point *p, const scenario *sc)
{
    double med = sc->v[K_validate_max_median_error].d, p99 = sc->v[K_validate_max_p99_error].d;
    double thr = sc->v[K_validate_max_throughput_error].d;
    const char *lat[] = {"ttft", "tpot", "itl", "e2el"};
    bool ok = within(&p->cmp, "request_throughput", thr) && within(&p->cmp, "output_throughput", thr);
    for (int i = 0; i < 4; i++) {
        char m[40];
        snprintf(m, sizeof m, "p50_%s_ms", lat[i]);
        ok = ok && within(&p->cmp, m, med);
        snprintf(m, sizeof m, "p99_%s_ms", lat[i]);
        ok = ok && within(&p->cmp, m, p99);
    }
    return ok;
}

/* Latency CDFs of one point, both sides, for the plot. */
static int write_cdf(const outdir *od, int index, const run_side *sim, const run_side *real, char *err, size_t errlen)
{
    char name[64];
    snprintf(name, sizeof name, "point%d-latency.csv", index);
    FILE *f = od_fopen(od, name, err, errlen);
    if (!f) return -1;
    fprintf(f, "side,e2el_ms,ttft_ms\n");
    const run_side *sides[2] = {sim, real};
    for (int s = 0; s < 2; s++) {
        size_t n;
        const req_record *r = met_requests(sides[s]->met, &n);
        for (size_t i = 0; i < n; i++)
            if (!r[i].warmup && r[i].stop == STOP_LENGTH)
                fprintf(f, "%d,%.6f,%.6f\n", s, 1e3 * (r[i].finish_time - r[i].arrival_time),
                        1e3 * (r[i].first_token_time - r[i].arrival_time));
    }
    return od_fclose(f, name, err, errlen);
}

static int run_point(const scenario *base, int index, point *p, const outdir *od, table_cost *tc,
                     char *err, size_t errlen)
{
    scenario sc;
    scenario_resolved r;
    kb_options kb;
    kb_sampling sp;
    if (point_scenario(base, p, &sc, err, errlen) < 0 || scenario_resolve(&sc, &r, err, errlen) < 0 ||
        scenario_resolve_engine(&sc, &r, &kb, &sp, err, errlen) < 0)
        return EXIT_BAD_INPUT;
    workload w;
    if (wl_build(&r.workload, &w, err, errlen) < 0) return EXIT_BAD_INPUT;
    run_side real = {0}, sim = {0};
    int status = serve_real(&r, &kb, &sp, &w, tc, &real, err, errlen);
    if (status == 0) status = simulate(&r, &w, tc, &sim, err, errlen);
    if (status == 0) {
        p->sim = sim.sum;
        p->real = real.sum;
        size_t ns, nr;
        const req_record *rs = met_requests(sim.met, &ns), *rr = met_requests(real.met, &nr);
        cmp_side a = {&sim.sum, rs, ns, sim.rc.steps, sim.rc.num_steps};
        cmp_side b = {&real.sum, rr, nr, real.rc.steps, real.rc.num_steps};
        status = cmp_runs(&a, &b, &p->cmp, err, errlen) == 0 ? 0 : 1;
    }
    if (status == 0) status = write_cdf(od, index, &sim, &real, err, errlen) == 0 ? 0 : 1;
    p->passed = status == 0 && point_passes(p, base);
    side_free(&real);
    side_free(&sim);
    wl_free(&w);
    return status;
}

static void json_number(FILE *f, double v)
{
    if (isfinite(v)) fprintf(f, "%.10g", v);
    else fputs("null", f);
}

static int write_json(const outdir *od, const point *pts, int n, const char *table, char *err, size_t errlen)
{
    FILE *f = od_fopen(od, "validation.json", err, errlen);
    if (!f) return -1;
    fprintf(f, "{\n  \"cost_table\": \"%s\",\n  \"points\": [\n", table);
    for (int i = 0; i < n; i++) {
        const point *p = &pts[i];
        fprintf(f, "    {\n      \"rate\": %s,\n      \"policy\": \"%s\",\n      \"passed\": %s,\n", p->rate,
                p->policy, p->passed ? "true" : "false");
        fprintf(f, "      \"step_time_mape\": ");
        json_number(f, p->cmp.step_mape);
        fprintf(f, ",\n      \"steps_predicted\": %lld,\n      \"first_divergent_step\": %lld,\n      \"metrics\": [\n",
                (long long)p->cmp.steps_predicted, (long long)p->cmp.first_divergence);
        for (int k = 0; k < p->cmp.num_rows; k++) {
            const cmp_row *r = &p->cmp.rows[k];
            fprintf(f, "        {\"metric\": \"%s\", \"simulated\": ", r->metric);
            json_number(f, r->simulated);
            fprintf(f, ", \"measured\": ");
            json_number(f, r->measured);
            fprintf(f, ", \"rel_error\": ");
            json_number(f, r->rel_error);
            fprintf(f, "}%s\n", k + 1 < p->cmp.num_rows ? "," : "");
        }
        fprintf(f, "      ]\n    }%s\n", i + 1 < n ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    return od_fclose(f, "validation.json", err, errlen);
}

static int plot_point(const outdir *od, int index, const point *p, const char *term, char *err, size_t errlen)
{
    plot pl;
    char png[64], title[160];
    snprintf(png, sizeof png, "point%d-latency.png", index);
    snprintf(title, sizeof title, "Latency CDF, %s at %s req/s: simulated vs measured", p->policy, p->rate);
    FILE *f = plot_begin(&pl, term, png, title, 900, 500);
    if (!f) {
        snprintf(err, errlen, "out of memory building a plot");
        return -1;
    }
    fprintf(f, "set xlabel 'latency (ms)'\nset ylabel 'fraction of requests'\nset logscale x\n"
               "file = 'point%d-latency.csv'\n"
               "plot file using ($1==0?$2:1/0):(1) smooth cnormal lw 2 title 'E2EL simulated', \\\n"
               "     file using ($1==1?$2:1/0):(1) smooth cnormal lw 2 dt 2 title 'E2EL measured', \\\n"
               "     file using ($1==0?$3:1/0):(1) smooth cnormal lw 2 title 'TTFT simulated', \\\n"
               "     file using ($1==1?$3:1/0):(1) smooth cnormal lw 2 dt 2 title 'TTFT measured'\n",
            index);
    return plot_finish(&pl, od->tmp_path, err, errlen);
}

static void report_point(FILE *f, int index, const point *p, bool plotted)
{
    fprintf(f, "## %s at %s req/s: %s\n\n", p->policy, p->rate, p->passed ? "within the thresholds" : "OUTSIDE the thresholds");
    if (isfinite(p->cmp.step_mape))
        fprintf(f, "The cost table predicted the %lld steps the engine ran with a mean absolute error of "
                   "%.1f%%. ", (long long)p->cmp.steps_predicted, 100 * p->cmp.step_mape);
    if (p->cmp.first_divergence < 0) fprintf(f, "Both runs scheduled identical batches throughout.\n\n");
    else fprintf(f, "The two schedules first differ at step %lld (different step times move arrivals "
                    "into other batches).\n\n", (long long)p->cmp.first_divergence);
    fprintf(f, "| metric | simulated | measured | error |\n|---|---:|---:|---:|\n");
    for (int k = 0; k < p->cmp.num_rows; k++) {
        const cmp_row *r = &p->cmp.rows[k];
        fprintf(f, "| %s | %.4g | %.4g | ", r->metric, r->simulated, r->measured);
        if (isfinite(r->rel_error)) fprintf(f, "%+.1f%% |\n", 100 * r->rel_error);
        else fprintf(f, "n/a |\n");
    }
    if (plotted) fprintf(f, "\n![latency CDFs](point%d-latency.png)\n", index);
    fprintf(f, "\n");
}

static int write_report(const outdir *od, const point *pts, int n, const scenario *sc, const char *table,
                        const char *device, bool plotted, char *err, size_t errlen)
{
    FILE *f = od_fopen(od, "report.md", err, errlen);
    if (!f) return -1;
    fprintf(f, "# Validation: %s\n\nDevice: %s. Cost table: `%s`. Thresholds: P50 %.0f%%, P99 %.0f%%, "
               "throughput %.0f%%.\n\n",
            scenario_name(sc), device, table, 100 * sc->v[K_validate_max_median_error].d,
            100 * sc->v[K_validate_max_p99_error].d, 100 * sc->v[K_validate_max_throughput_error].d);
    for (int i = 0; i < n; i++) report_point(f, i, &pts[i], plotted);
    return od_fclose(f, "report.md", err, errlen);
}

/* The table the scenario or flag names, or one calibrated now on the engine's own backend. */
static int load_or_calibrate(const scenario *sc, const char *flag_table, const outdir *od, table_cost *tc,
                             char *path, size_t pathlen, char *device, size_t devlen, bool quiet, char *err,
                             size_t errlen)
{
    scenario_resolved r;
    kb_options kb;
    kb_sampling sp;
    if (scenario_resolve(sc, &r, err, errlen) < 0 || scenario_resolve_engine(sc, &r, &kb, &sp, err, errlen) < 0)
        return EXIT_BAD_INPUT;
    if (flag_table) snprintf(r.cost_table_path, sizeof r.cost_table_path, "%s", flag_table);
    if (!r.cost_table_path[0]) {
        if (!quiet) fprintf(stderr, "servesim: no cost table given for %s on %s: calibrating first\n",
                            r.model.name, kb.kind == KB_CUDA ? "cuda" : "cpu");
        calib_options o = {.kb = kb, .model_name = r.model.name, .block_size = r.sched.block_size,
                           .max_tokens = r.sched.max_num_batched_tokens, .max_context = r.sched.max_model_len,
                           .max_seqs = r.sched.max_num_seqs, .repeats = 5};
        cost_table t;
        int status = calibrate_run(&o, &t, err, errlen);
        if (status != 0) return status == 2 ? EXIT_BAD_INPUT : EXIT_FAILURE_OTHER;
        if (od_path(od, "cost-table.csv", r.cost_table_path, sizeof r.cost_table_path) < 0 ||
            ct_write(&t, r.cost_table_path, err, errlen) < 0) {
            ct_free(&t);
            return EXIT_FAILURE_OTHER;
        }
        ct_free(&t);
    }
    job_cost jc;
    if (job_cost_init(&jc, &r, err, errlen) < 0) return EXIT_BAD_INPUT;
    *tc = jc.table;
    snprintf(path, pathlen, "%s", r.cost_table_path);
    snprintf(device, devlen, "%s", jc.device);
    return EXIT_OK;
}

static int build_points(const scenario *sc, point *pts)
{
    char rates[MAX_POINTS][32], pols[MAX_POINTS][32], rate[32];
    snprintf(rate, sizeof rate, "%g", sc->v[K_workload_rate].d);
    int nr = split_list(sc->v[K_validate_rates].s, rate, rates, MAX_POINTS);
    int np = split_list(sc->v[K_validate_policies].s, sc->v[K_scheduler_policy].s, pols, MAX_POINTS);
    int n = 0;
    for (int i = 0; i < np; i++)
        for (int j = 0; j < nr && n < MAX_POINTS; j++, n++) {
            memset(&pts[n], 0, sizeof pts[n]);
            snprintf(pts[n].policy, sizeof pts[n].policy, "%s", pols[i]);
            snprintf(pts[n].rate, sizeof pts[n].rate, "%s", rates[j]);
        }
    return n;
}

static void print_point(const point *p)
{
    const char *m[] = {"p50_ttft_ms", "p99_ttft_ms", "p50_tpot_ms", "p99_tpot_ms", "p50_e2el_ms", "p99_e2el_ms",
                       "output_throughput"};
    printf("%-10s %8s %s  step MAPE %5.1f%%", p->policy, p->rate, p->passed ? "ok  " : "FAIL", 100 * p->cmp.step_mape);
    for (int i = 0; i < 7; i++) {
        const cmp_row *r = cmp_find(&p->cmp, m[i]);
        printf("  %s %+.1f%%", m[i], 100 * r->rel_error);
    }
    printf("\n");
}

static int validate(const scenario *sc, const scenario_args *a, const char *flag_table, const char *out)
{
    char err[1024];
    point *pts = calloc(MAX_POINTS, sizeof *pts);
    outdir od;
    if (!pts || od_open(&od, out, err, sizeof err) < 0) {
        fprintf(stderr, "servesim: %s\n", pts ? err : "out of memory");
        free(pts);
        return EXIT_FAILURE_OTHER;
    }
    table_cost tc;
    char table[1100], device[256] = "";
    int status = load_or_calibrate(sc, flag_table, &od, &tc, table, sizeof table, device, sizeof device, a->quiet,
                                   err, sizeof err);
    bool have_table = status == EXIT_OK;
    int n = have_table ? build_points(sc, pts) : 0;
    if (have_table && n == 0) {
        snprintf(err, sizeof err, "%s: [validate] rates and policies give no point to validate", sc->path);
        status = EXIT_BAD_INPUT;
    }
    for (int i = 0; i < n && status == EXIT_OK; i++) {
        if (!a->quiet && isatty(2)) fprintf(stderr, "validating %s at %s req/s (%d/%d)\n", pts[i].policy, pts[i].rate, i + 1, n);
        status = run_point(sc, i, &pts[i], &od, &tc, err, sizeof err);
        if (status == EXIT_OK && !a->quiet) print_point(&pts[i]);
    }
    char term[32];
    bool plotted = status == EXIT_OK && plot_available(term, sizeof term);
    for (int i = 0; plotted && i < n; i++)
        if (plot_point(&od, i, &pts[i], term, err, sizeof err) < 0) plotted = false, status = EXIT_FAILURE_OTHER;
    const char *shown = flag_table || sc->v[K_hardware_cost_table].s[0] ? table : "cost-table.csv (calibrated by this run)";
    if (status == EXIT_OK && (write_json(&od, pts, n, shown, err, sizeof err) < 0 ||
                              write_report(&od, pts, n, sc, shown, device, plotted, err, sizeof err) < 0 ||
                              od_commit(&od, err, sizeof err) < 0))
        status = EXIT_FAILURE_OTHER;
    if (status != EXIT_OK) {
        od_abort(&od);
        fprintf(stderr, "servesim: %s\n", err);
    }
    bool all_passed = true;
    for (int i = 0; i < n; i++) all_passed = all_passed && pts[i].passed;
    if (status == EXIT_OK && !a->quiet) printf("Validation %s; report in %s/report.md\n", all_passed ? "passed" : "FAILED", out);
    if (have_table) tc_free(&tc);
    free(pts);
    return status != EXIT_OK ? status : all_passed ? EXIT_OK : EXIT_FAILURE_OTHER;
}

int cmd_validate(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(validate_usage, stdout);
        return EXIT_OK;
    }
    /* --cost-table is ours; everything else is a scenario argument */
    const char *table = NULL;
    char *rest[256];
    int nrest = 0;
    for (int i = 0; i < argc && nrest < 255; i++) {
        if (strcmp(argv[i], "--cost-table") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "servesim: --cost-table needs a value\n%s", validate_usage);
                return EXIT_BAD_INPUT;
            }
            table = argv[++i];
        } else {
            rest[nrest++] = argv[i];
        }
    }
    scenario sc;
    scenario_args a;
    if (parse_scenario_args(nrest, rest, validate_usage, &sc, &a) < 0) return EXIT_BAD_INPUT;
    if (!sc.path[0]) {
        fprintf(stderr, "servesim: validate needs a scenario file\n%s", validate_usage);
        return EXIT_BAD_INPUT;
    }
    char out[1200], stem[300];
    scenario_stem_into(&sc, stem, sizeof stem);
    if (a.out_dir) snprintf(out, sizeof out, "%s", a.out_dir);
    else snprintf(out, sizeof out, "results/runs/%s-validate", stem);
    return validate(&sc, &a, table, out);
}
