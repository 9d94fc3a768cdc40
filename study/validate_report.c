#include "study/validate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/plot.h"

/* Metric K of point P: its simulated and measured value, error, spread, and each run's. */
static json_t *metric_json(const point *p, int k)
{
    const cmp_row *r = &p->cmp.rows[k];
    json_t *m = json_object(), *runs = NULL;
    int bad = !m || json_put(m, "metric", json_text(r->metric)) | json_put(m, "simulated", json_num(r->simulated)) |
                        json_put(m, "measured", json_num(r->measured)) | json_put(m, "rel_error", json_num(r->rel_error)) |
                        json_put(m, "spread", json_num(r->spread)) || !(runs = json_put_array(m, "measured_runs"));
    for (int j = 0; !bad && j < p->num_runs; j++) bad = json_array_append_new(runs, json_num(p->runs[j].rows[k].measured));
    if (bad) {
        json_decref(m);
        return NULL;
    }
    return m;
}

/* The replay of point P: where each run's schedule parted (-1: never) and its errors. */
static json_t *replay_json(const point *p)
{
    json_t *replay = json_object(), *mismatch = NULL, *metrics = NULL;
    int bad = !replay || !(mismatch = json_put_array(replay, "first_mismatch")) ||
              !(metrics = json_put_array(replay, "metrics"));
    for (int k = 0; !bad && k < p->num_runs; k++) bad = json_array_append_new(mismatch, json_integer(p->replay_mismatch[k]));
    for (int k = 0; !bad && k < p->replay.num_rows; k++) {
        json_t *m = json_object();
        bad = !m || json_array_append_new(metrics, m) || json_put(m, "metric", json_text(p->replay.rows[k].metric)) |
                                                             json_put(m, "rel_error", json_num(p->replay.rows[k].rel_error));
    }
    if (bad) {
        json_decref(replay);
        return NULL;
    }
    return replay;
}

static json_t *point_json(const point *p)
{
    json_t *o = json_object(), *metrics = NULL;
    int bad = !o || json_put(o, "rate", json_num(strtod(p->rate, NULL))) | json_put(o, "policy", json_text(p->policy)) |
                        json_put(o, "passed", json_boolean(p->passed)) | json_put(o, "past_limits", json_text(p->failed)) |
                        json_put(o, "engine_runs", json_integer(p->num_runs)) |
                        json_put(o, "step_time_mape", json_num(p->cmp.step_mape)) |
                        json_put(o, "steps_predicted", json_integer(p->cmp.steps_predicted)) |
                        json_put(o, "first_divergent_step", json_integer(p->cmp.first_divergence)) ||
              !(metrics = json_put_array(o, "metrics"));
    for (int k = 0; !bad && k < p->cmp.num_rows; k++) bad = json_array_append_new(metrics, metric_json(p, k));
    if (bad || json_put(o, "replay", replay_json(p)) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int validate_write_json(const outdir *od, const point *pts, int n, const validation_info *vi, char *err,
                        size_t errlen)
{
    json_t *doc = json_object(), *points = NULL;
    int bad = !doc || json_put(doc, "cost_table", json_text(vi->table)) |
                          json_put(doc, "calibrated_between_runs", json_boolean(vi->per_round)) ||
              !(points = json_put_array(doc, "points"));
    for (int i = 0; !bad && i < n; i++) bad = json_array_append_new(points, point_json(&pts[i]));
    FILE *f = bad ? NULL : od_fopen(od, "validation.json", err, errlen);
    if (bad) snprintf(err, errlen, "%.1024s/validation.json: out of memory", od->final_path);
    if (f && json_write(f, doc) < 0) bad = 1;
    json_decref(doc);
    if (!f) return -1;
    return od_fclose(f, "validation.json", err, errlen) < 0 || bad ? -1 : 0;
}

int validate_plot_point(const outdir *od, int index, const point *p, const char *term, char *err, size_t errlen)
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
    /* measured requests that finished, from the simulation's and each engine run's requests.csv */
    fprintf(f, "set xlabel 'latency (ms)'\nset ylabel 'fraction of requests'\nset logscale x\n"
               "sim = 'point%d-sim/requests.csv'\n"
               "run(k) = sprintf('point%d-engine-run%%d/requests.csv', k)\n"
               "ok = \"(column('warmup')==0 && strcol('stop_reason') eq 'length')\"\n"
               "e2el = \"(@ok ? 1000*(column('finish_time')-column('arrival_time')) : 1/0)\"\n"
               "ttft = \"(@ok ? 1000*(column('first_token_time')-column('arrival_time')) : 1/0)\"\n"
               "plot sim using @e2el:(1) smooth cnormal lw 2 lc 1 title 'E2EL simulated', \\\n"
               "     for [k=1:%d] run(k) using @e2el:(1) smooth cnormal lw 1 dt 2 lc 1 "
               "title (k==1?'E2EL measured':''), \\\n"
               "     sim using @ttft:(1) smooth cnormal lw 2 lc 2 title 'TTFT simulated', \\\n"
               "     for [k=1:%d] run(k) using @ttft:(1) smooth cnormal lw 1 dt 2 lc 2 "
               "title (k==1?'TTFT measured':'')\n",
            index, index, p->num_runs, p->num_runs);
    return plot_finish(&pl, od->tmp_path, err, errlen);
}

static void report_table(FILE *f, const point *p)
{
    bool many = p->num_runs > 1;
    fprintf(f, many ? "| metric | simulated | measured | error | engine spread |\n|---|---:|---:|---:|---:|\n"
                    : "| metric | simulated | measured | error |\n|---|---:|---:|---:|\n");
    for (int k = 0; k < p->cmp.num_rows; k++) {
        const cmp_row *r = &p->cmp.rows[k];
        fprintf(f, "| %s | %.4g | %.4g | ", r->metric, r->simulated, r->measured);
        if (isfinite(r->rel_error)) fprintf(f, "%+.1f%% |", 100 * r->rel_error);
        else fprintf(f, "n/a |");
        if (many && isfinite(r->spread)) fprintf(f, " %.1f%% |", 100 * r->spread);
        else if (many) fprintf(f, " n/a |");
        fprintf(f, "\n");
    }
}

/* How many of the latency percentiles' simulated values fall between the fastest and the
 * slowest engine run, out of how many. */
static int inside_engine_range(const point *p, int *total)
{
    int inside = 0;
    *total = 0;
    for (int k = 0; k < p->cmp.num_rows; k++) {
        const char *m = p->cmp.rows[k].metric;
        if (strncmp(m, "p", 1) != 0 || !strstr(m, "_ms")) continue;
        double lo = p->runs[0].rows[k].measured, hi = lo;
        for (int j = 1; j < p->num_runs; j++) {
            lo = fmin(lo, p->runs[j].rows[k].measured);
            hi = fmax(hi, p->runs[j].rows[k].measured);
        }
        double sim = p->cmp.rows[k].simulated;
        inside += sim >= lo && sim <= hi;
        ++*total;
    }
    return inside;
}

/* The replay: each run simulated with its own measured step times. */
static void report_replay(FILE *f, const point *p)
{
    int agreed = 0;
    for (int k = 0; k < p->num_runs; k++) agreed += p->replay_mismatch[k] < 0;
    fprintf(f, "Replay: fed each engine run's own measured step times instead of the table's, the simulator "
               "reproduces the run with these errors (%s); the schedules stayed identical throughout in %d of "
               "%d run%s",
            p->num_runs > 1 ? "medians over the runs" : "one run", agreed, p->num_runs, p->num_runs > 1 ? "s" : "");
    for (int k = 0; k < p->num_runs; k++)
        if (p->replay_mismatch[k] >= 0)
            fprintf(f, "; run %d parted at step %lld of %lld", k + 1, (long long)p->replay_mismatch[k],
                    (long long)p->replay_steps[k]);
    fprintf(f, ". What the replay misses is the simulation's own error; the rest of the error above is "
               "the cost table's.\n\n| replay | TTFT | TPOT | ITL | E2EL |\n|---|---:|---:|---:|---:|\n");
    const char *stat[] = {"p50", "p99"}, *lat[] = {"ttft", "tpot", "itl", "e2el"};
    for (int i = 0; i < 2; i++) {
        fprintf(f, "| %s |", stat[i]);
        for (int j = 0; j < 4; j++) {
            char m[40];
            snprintf(m, sizeof m, "%s_%s_ms", stat[i], lat[j]);
            const cmp_row *r = cmp_find(&p->replay, m);
            if (r && isfinite(r->rel_error)) fprintf(f, " %+.2f%% |", 100 * r->rel_error);
            else fprintf(f, " n/a |");
        }
        fprintf(f, "\n");
    }
    fprintf(f, "\n");
}

static void report_point(FILE *f, int index, const point *p, bool plotted)
{
    fprintf(f, "## %s at %s req/s: %s\n\n", p->policy, p->rate, p->passed ? "within the thresholds" : "OUTSIDE the thresholds");
    if (!p->passed) fprintf(f, "Past its limit: %s.\n\n", p->failed);
    if (isfinite(p->cmp.step_mape))
        fprintf(f, "The cost table predicted the %lld steps the engine ran with a mean absolute error of "
                   "%.1f%%. ", (long long)p->cmp.steps_predicted, 100 * p->cmp.step_mape);
    const char *who = p->num_runs > 1 ? "The simulation and engine run 1" : "The simulation and the engine";
    if (p->cmp.first_divergence < 0) fprintf(f, "%s scheduled identical batches throughout.\n\n", who);
    else fprintf(f, "%s first schedule different batches at step %lld (different step times move arrivals "
                    "into other batches).\n\n", who, (long long)p->cmp.first_divergence);
    if (p->num_runs > 1) {
        int total, inside = inside_engine_range(p, &total);
        fprintf(f, "%d of the %d latency percentiles simulated lie between the fastest and the slowest engine "
                   "run.\n\n", inside, total);
    }
    report_table(f, p);
    fprintf(f, "\n");
    report_replay(f, p);
    if (plotted) fprintf(f, "\n![latency CDFs](point%d-latency.png)\n", index);
    fprintf(f, "\n");
}

int validate_write_report(const outdir *od, const point *pts, int n, const scenario *sc, const validation_info *vi,
                          bool plotted, char *err, size_t errlen)
{
    FILE *f = od_fopen(od, "report.md", err, errlen);
    if (!f) return -1;
    fprintf(f, "# Validation: %s\n\nDevice: %s. Cost table: `%s`. Thresholds: P50 %.0f%%, P99 %.0f%%, "
               "throughput %.0f%%, replay %.1f%%.\n\n",
            scenario_name(sc), vi->device, vi->table, 100 * sc->v[K_validate_max_median_error].d,
            100 * sc->v[K_validate_max_p99_error].d, 100 * sc->v[K_validate_max_throughput_error].d,
            100 * sc->v[K_validate_max_replay_error].d);
    int runs = n > 0 ? pts[0].num_runs : 1;
    if (vi->per_round)
        fprintf(f, "Calibration ran in %d round%s, round K just before engine run K, so the table the "
                   "simulation used (`cost-table.csv`, the expected value over the rounds) was measured over the same "
                   "minutes as the runs it predicts. Each engine step's predicted time, behind the step "
                   "error, comes from the round just before its run (`cost-table-roundK.csv`).\n\n",
                runs, runs > 1 ? "s" : "");
    if (runs > 1)
        fprintf(f, "Each point was served %d times on the engine, the same requests each time. Measured is "
                   "the median run, error is the simulation's against it, and engine spread is how far the "
                   "engine's own runs disagree ((max - min) / median): an error inside the spread is inside "
                   "this machine's noise.\n\n", runs);
    for (int i = 0; i < n; i++) report_point(f, i, &pts[i], plotted);
    return od_fclose(f, "report.md", err, errlen);
}

void validate_print_point(const point *p)
{
    const char *m[] = {"p50_ttft_ms", "p99_ttft_ms", "p50_tpot_ms", "p99_tpot_ms", "p50_e2el_ms", "p99_e2el_ms",
                       "output_throughput"};
    printf("%-10s %8s %s  step MAPE %5.1f%%", p->policy, p->rate, p->passed ? "ok  " : "FAIL", 100 * p->cmp.step_mape);
    for (int i = 0; i < 7; i++) {
        const cmp_row *r = cmp_find(&p->cmp, m[i]);
        printf("  %s %+.1f%%", m[i], 100 * r->rel_error);
        if (p->num_runs > 1) printf(" (spread %.0f%%)", 100 * r->spread);
    }
    const cmp_row *replay = cmp_find(&p->replay, "p50_e2el_ms"), *replay99 = cmp_find(&p->replay, "p99_e2el_ms");
    if (replay && replay99) printf("  replay: p50_e2el_ms %+.2f%% p99_e2el_ms %+.2f%%", 100 * replay->rel_error, 100 * replay99->rel_error);
    printf("\n");
    if (!p->passed) printf("%-10s %8s past its limit: %s\n", "", "", p->failed);
}
