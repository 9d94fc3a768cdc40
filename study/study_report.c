/* report.md (and report.html, io/html.h) for each experiment of the study (docs/study.md): a table of every point, plots, and sentences
 * computed from the measured numbers (io/report.h picks each direction word by sign). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/csvcol.h"
#include "metrics/metrics.h"
#include "io/html.h"
#include "io/plot.h"
#include "io/report.h"
#include "study/capacity.h"
#include "study/job.h"
#include "study/study.h"

typedef struct report {
    const sweep_plan *p;
    const sweep_result *r;
    const char *dir;
    FILE *md;
    char term[32];           /* "" without gnuplot */
    char *err;
    size_t errlen;
} report;

typedef int (*report_fn)(report *rp);

static int report_classes(report *rp);
static int report_rate(report *rp);
static int report_versions(report *rp);
static int report_prefix(report *rp);
static int report_chunked(report *rp);
static int report_memory(report *rp);
static int report_speculative(report *rp);

static const struct {
    const char *name, *title;
    report_fn fn;
} experiments[] = {
    {"workload-classes", "The five workload classes", report_classes},
    {"arrival-rate", "Arrival rate and capacity", report_rate},
    {"seven-versions", "The seven versions", report_versions},
    {"prefix-caching", "Prefix caching", report_prefix},
    {"chunked-prefill", "Chunked prefill", report_chunked},
    {"memory", "KV memory: contiguous against paged, and block size", report_memory},
    {"speculative", "Speculative decoding: acceptance, draft length and load", report_speculative},
};
enum { NUM_EXPERIMENTS = sizeof experiments / sizeof *experiments };

bool study_report_known(const char *name)
{
    for (int i = 0; i < NUM_EXPERIMENTS; i++)
        if (strcmp(experiments[i].name, name) == 0) return true;
    return false;
}

const char *study_report_names(void)
{
    return "workload-classes, arrival-rate, seven-versions, prefix-caching, chunked-prefill, memory, speculative";
}

/* ---- what every report shares ---- */

static void point_scenario(const report *rp, int i, scenario *sc)
{
    char err[256];
    sweep_point_scenario(rp->p, i, sc, err, sizeof err);
}

/* A point's label as the plots' titles take it (plot_quote quotes it for gnuplot). */
static const char *plot_label_of(const report *rp, int i, char *buf, size_t len)
{
    sweep_point_label(rp->p, i, buf, len);
    return buf;
}

/* A point's label as report.md prints it: a '|' in a label the user gave (--point LABEL:...) would end a table
 * cell, so it is written as markdown's escape, which renders as the '|' itself in tables and prose alike. */
static const char *label_of(const report *rp, int i, char *buf, size_t len)
{
    char raw[256];
    sweep_point_label(rp->p, i, raw, sizeof raw);
    size_t o = 0;
    for (const char *c = raw; *c && o + 2 < len; c++) {
        if (*c == '|') buf[o++] = '\\';
        buf[o++] = *c;
    }
    buf[o] = 0;
    return buf;
}

static bool measured(const report *rp, int i) { return i >= 0 && rp->r[i].ran && rp->r[i].nruns > 0; }

static const summary *sum_of(const report *rp, int i) { return &rp->r[i].sum; }

static int num_points(const report *rp) { return sweep_num_points(rp->p); }

static void write_command(FILE *f, int argc, char **argv)
{
    fputs("servesim", f);
    for (int i = 0; i < argc; i++) {
        bool plain = strspn(argv[i], "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=,:") ==
                     strlen(argv[i]);
        if (plain) fprintf(f, " %s", argv[i]);
        else {
            fputs(" '", f);
            for (const char *c = argv[i]; *c; c++) fputs(*c == '\'' ? "'\\''" : (char[2]){*c, 0}, f);
            fputc('\'', f);
        }
    }
}

static void write_header(report *rp, const char *title, int argc, char **argv)
{
    const scenario *b = &rp->p->base;
    fprintf(rp->md, "# %s\n\nMade by:\n\n```sh\n", title);
    write_command(rp->md, argc, argv);
    char cost[1400];
    job_cost_describe(b, cost, sizeof cost);
    fprintf(rp->md, "\n```\n\nSimulated: model %s, hardware %s, scenario `%s`, seed %lld; cost model (of the scenario "
            "as written): %s",
            b->v[K_model_preset].s, b->v[K_hardware_preset].s, b->path[0] ? b->path : "built-in",
            b->v[K_run_seed].i, cost);
    if (rp->p->repeat > 1) fprintf(rp->md, ", %d seeds per point (means)", rp->p->repeat);
    fputs(". Times in ms, throughput per second of simulated time.\n\n", rp->md);
}

static void write_table(report *rp)
{
    FILE *f = rp->md;
    fputs("| point | label | done | req/s | out tok/s | mean TTFT | P50 TTFT | P99 TTFT | P50 TPOT | P99 TPOT "
          "| P99 E2EL | peak running | min free blocks | prefix hit rate |\n"
          "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
          f);
    for (int i = 0; i < num_points(rp); i++) {
        char label[256];
        if (!measured(rp, i)) {
            fprintf(f, "| %d | %s | 0 | no measured request finished |||||||||||\n", i, label_of(rp, i, label, sizeof label));
            continue;
        }
        const summary *s = sum_of(rp, i);
        fprintf(f, "| %d | %s | %d | %.2f | %.0f | %.1f | %.1f | %.1f | %.2f | %.2f | %.0f | %d | %d | %.1f%% |\n", i,
                label_of(rp, i, label, sizeof label), s->completed, s->request_throughput, s->output_throughput,
                s->ttft_ms.mean, s->ttft_ms.median, s->ttft_ms.p99, s->tpot_ms.median, s->tpot_ms.p99, s->e2el_ms.p99,
                s->peak_running, s->min_free_blocks, 100 * s->prefix_hit_rate);
    }
    fputs("\nEvery metric of every point is in `sweep.csv`.\n\n", f);
}

static bool file_exists(const report *rp, const char *name)
{
    char path[4400];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", rp->dir, name);
    return stat(path, &st) == 0;
}

static void embed(report *rp, const char *png, const char *caption)
{
    if (file_exists(rp, png)) fprintf(rp->md, "![%s](%s)\n\n", caption, png);
}

static void sweep_plots_section(report *rp)
{
    embed(rp, "bars.png", "throughput and tail latency of every point");
    embed(rp, "latency.png", "P50 and P99 TTFT and TPOT");
    embed(rp, "throughput.png", "throughput");
}

/* ---- plots from the points' own records ---- */

static void run_dir(int i, char *buf, size_t len)
{
    char name[32];
    sweep_run_name(i, name, sizeof name);
    snprintf(buf, len, "points/%s", name);
}

/* Step timeline of the points PTS: prefill tokens, decode sequences and step time per step. */
static int plot_timeline(report *rp, const int *pts, int n, const char *png, const char *title)
{
    if (!rp->term[0]) return 0;
    plot pl;
    FILE *f = plot_begin(&pl, rp->term, png, title, 1200, 300 * 3);
    if (!f) return -1;
    static const struct { const char *title, *expr; } panels[] = {
        {"prefill tokens per step", "'num_prefill_tokens'"},
        {"decode sequences per step", "'num_decode_seqs'"},
        {"step time (ms)", "((column('end_time')-column('start_time'))*1000)"},
    };
    fputs("set multiplot layout 3,1\nset xlabel 'time (s)'\nset style data lines\n", f);
    for (size_t k = 0; k < 3; k++) {
        fprintf(f, "set title '%s'\nplot ", panels[k].title);
        for (int j = 0; j < n; j++) {
            char dir[64], label[256];
            run_dir(pts[j], dir, sizeof dir);
            fprintf(f, "%s'%s/steps.csv' using 'start_time':%s title ", j ? ", " : "", dir, panels[k].expr);
            plot_quote(f, plot_label_of(rp, pts[j], label, sizeof label));
        }
        fputc('\n', f);
    }
    fputs("unset multiplot\n", f);
    return plot_finish(&pl, rp->dir, rp->err, rp->errlen);
}

/* Queue lengths and free KV blocks over time of the points PTS. */
static int plot_queues(report *rp, const int *pts, int n, const char *png, const char *title)
{
    if (!rp->term[0]) return 0;
    plot pl;
    FILE *f = plot_begin(&pl, rp->term, png, title, 1200, 600);
    if (!f) return -1;
    fputs("set multiplot layout 2,1\nset xlabel 'time (s)'\nset style data lines\nset title 'waiting (dashed) "
          "and running requests'\nplot ",
          f);
    for (int j = 0; j < n; j++) {
        char dir[64], label[256];
        run_dir(pts[j], dir, sizeof dir);
        plot_label_of(rp, pts[j], label, sizeof label);
        fprintf(f, "%s'%s/steps.csv' using 'start_time':'waiting' dashtype 2 linecolor %d title ", j ? ", " : "", dir,
                j + 1);
        plot_quote(f, label);
        fprintf(f, ", '%s/steps.csv' using 'start_time':'running' linecolor %d notitle", dir, j + 1);
    }
    fputs("\nset title 'free KV blocks'\nplot ", f);
    for (int j = 0; j < n; j++) {
        char dir[64], label[256];
        run_dir(pts[j], dir, sizeof dir);
        fprintf(f, "%s'%s/steps.csv' using 'start_time':'num_free_blocks' title ", j ? ", " : "", dir);
        plot_quote(f, plot_label_of(rp, pts[j], label, sizeof label));
    }
    fputs("\nunset multiplot\n", f);
    return plot_finish(&pl, rp->dir, rp->err, rp->errlen);
}

/* CDFs of TTFT and E2E latency over the requests of the points PTS. */
static int plot_cdfs(report *rp, const int *pts, int n, const char *png, const char *title)
{
    if (!rp->term[0]) return 0;
    plot pl;
    FILE *f = plot_begin(&pl, rp->term, png, title, 1200, 500);
    if (!f) return -1;
    static const struct { const char *title, *expr; } panels[] = {
        {"TTFT (ms)", "((column('first_token_time')-column('arrival_time'))*1000)"},
        {"E2E latency (ms)", "((column('finish_time')-column('arrival_time'))*1000)"},
    };
    fputs("set multiplot layout 1,2\nset ylabel 'fraction of requests'\nset logscale x\nset style data lines\n", f);
    /* the scenario's objective on each, as a vertical line */
    double slo[2] = {rp->p->base.v[K_slo_ttft_ms].d, rp->p->base.v[K_slo_e2el_ms].d};
    for (size_t k = 0; k < 2; k++) {
        fprintf(f, "set title '%s'\nset xlabel '%s'\nunset arrow\nunset label\n", panels[k].title, panels[k].title);
        if (slo[k] > 0)
            fprintf(f, "set arrow from %.17g, graph 0 to %.17g, graph 1 nohead dashtype 3 linewidth 2 linecolor rgb "
                       "'#cc0000'\nset label 'SLO %g ms' at %.17g, graph 0.05 left offset 0.5,0 textcolor rgb '#cc0000'\n",
                    slo[k], slo[k], slo[k], slo[k]);
        fputs("plot ", f);
        for (int j = 0; j < n; j++) {
            char dir[64], label[256];
            run_dir(pts[j], dir, sizeof dir);
            fprintf(f, "%s'%s/requests.csv' using %s:(1) smooth cnormal title ", j ? ", " : "", dir, panels[k].expr);
            plot_quote(f, plot_label_of(rp, pts[j], label, sizeof label));
        }
        fputc('\n', f);
    }
    fputs("unset multiplot\n", f);
    return plot_finish(&pl, rp->dir, rp->err, rp->errlen);
}

static int all_points(const report *rp, int *pts, int max)
{
    int n = 0;
    for (int i = 0; i < num_points(rp) && n < max; i++)
        if (measured(rp, i)) pts[n++] = i;
    return n;
}

/* ---- per-request numbers the summary does not split ---- */

typedef struct class_stats {
    int n;
    double ttft_mean, ttft_p99, tpot_p90, tpot_p99;   /* ms */
} class_stats;

/* TTFT and per-request TPOT over the finished measured requests with LO <= prompt_len < HI. */
static int class_of(const sweep_result *r, int lo, int hi, class_stats *out)
{
    double *ttft = malloc((r->num_records + 1) * sizeof *ttft), *tpot = malloc((r->num_records + 1) * sizeof *tpot);
    size_t nt = 0, np = 0;
    if (!ttft || !tpot) {
        free(ttft), free(tpot);
        return -1;
    }
    double sum = 0;
    for (size_t i = 0; i < r->num_records; i++) {
        const req_record *q = &r->records[i];
        if (q->warmup || q->stop != STOP_LENGTH || q->prompt_len < lo || q->prompt_len >= hi) continue;
        double t = (q->first_token_time - q->arrival_time) * 1000;
        ttft[nt++] = t;
        sum += t;
        if (q->output_len > 1) tpot[np++] = (q->finish_time - q->first_token_time) * 1000 / (q->output_len - 1);
    }
    qsort(ttft, nt, sizeof *ttft, met_cmp_double);
    qsort(tpot, np, sizeof *tpot, met_cmp_double);
    *out = (class_stats){(int)nt, nt ? sum / (double)nt : NAN, nt ? met_percentile_sorted(ttft, nt, 99) : NAN,
                         np ? met_percentile_sorted(tpot, np, 90) : NAN, np ? met_percentile_sorted(tpot, np, 99) : NAN};
    free(ttft), free(tpot);
    return 0;
}

/* Standard deviation and P99 of the step times in the point's steps.csv, in ms. */
static int step_spread(report *rp, int i, double *std, double *p99)
{
    char path[4400], dir[64];
    run_dir(i, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/%s/steps.csv", rp->dir, dir);
    static const char *const names[] = {"start_time", "end_time"};
    double *cols[2];
    size_t n;
    if (csv_columns(path, names, 2, cols, &n, rp->err, rp->errlen) < 0) return -1;
    double mean = 0, sq = 0;
    for (size_t k = 0; k < n; k++) cols[0][k] = (cols[1][k] - cols[0][k]) * 1000, mean += cols[0][k] / (double)n;
    for (size_t k = 0; k < n; k++) sq += (cols[0][k] - mean) * (cols[0][k] - mean);
    qsort(cols[0], n, sizeof *cols[0], met_cmp_double);
    *std = n > 1 ? sqrt(sq / (double)(n - 1)) : 0;
    *p99 = n ? met_percentile_sorted(cols[0], n, 99) : NAN;
    free(cols[0]), free(cols[1]);
    return 0;
}

/* The most blocks the prefix cache held at once, from the point's steps.csv. */
static int max_cached_blocks(report *rp, int i, double *out)
{
    char path[4400], dir[64];
    run_dir(i, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/%s/steps.csv", rp->dir, dir);
    static const char *const names[] = {"num_prefix_cached_blocks"};
    double *col;
    size_t n;
    if (csv_columns(path, names, 1, &col, &n, rp->err, rp->errlen) < 0) return -1;
    *out = 0;
    for (size_t k = 0; k < n; k++) *out = fmax(*out, col[k]);
    free(col);
    return 0;
}

/* ---- sentence helpers ---- */

/* The measured point with the largest (SIGN 1) or smallest (SIGN -1) value of GET. */
static int extreme(const report *rp, double (*get)(const summary *), int sign)
{
    int best = -1;
    for (int i = 0; i < num_points(rp); i++)
        if (measured(rp, i) && (best < 0 || sign * get(sum_of(rp, i)) > sign * get(sum_of(rp, best)))) best = i;
    return best;
}

static double get_ttft_p99(const summary *s) { return s->ttft_ms.p99; }
static double get_tpot_p99(const summary *s) { return s->tpot_ms.p99; }
static double get_prefill(const summary *s) { return s->mean_prefill_tokens; }
static double get_running(const summary *s) { return s->mean_running; }
static double get_output(const summary *s) { return s->output_throughput; }

/* "- <hi label> had the highest WHAT, X UNIT, R× that of <lo label> (Y UNIT), the lowest." */
static void compare_extremes(report *rp, double (*get)(const summary *), const char *what, const char *unit)
{
    int hi = extreme(rp, get, 1), lo = extreme(rp, get, -1);
    if (hi < 0 || hi == lo) return;
    char a[256], b[256], x[32], y[32], ratio[32];
    rpt_num(x, sizeof x, get(sum_of(rp, hi)));
    rpt_num(y, sizeof y, get(sum_of(rp, lo)));
    rpt_ratio(ratio, sizeof ratio, get(sum_of(rp, hi)), get(sum_of(rp, lo)));
    fprintf(rp->md, "- **%s** had the highest %s, %s%s%s, %s that of **%s** (%s%s%s), the lowest.\n",
            label_of(rp, hi, a, sizeof a), what, x, unit[0] ? " " : "", unit, ratio, label_of(rp, lo, b, sizeof b), y,
            unit[0] ? " " : "", unit);
}

static bool same_point_scenario(const scenario *a, const char *policy, int prefix, int chunked)
{
    return strcmp(a->v[K_scheduler_policy].s, policy) == 0 &&
           (prefix < 0 || a->v[K_scheduler_prefix_caching].b == prefix) &&
           (chunked < 0 || a->v[K_scheduler_chunked_prefill].b == chunked);
}

/* The first measured point with POLICY (and the flags, -1 = either). */
static int find_version(const report *rp, const char *policy, int prefix, int chunked)
{
    for (int i = 0; i < num_points(rp); i++) {
        scenario sc;
        point_scenario(rp, i, &sc);
        if (measured(rp, i) && same_point_scenario(&sc, policy, prefix, chunked)) return i;
    }
    return -1;
}

/* ---- 1. workload classes ---- */

static int report_classes(report *rp)
{
    int pts[64], n = all_points(rp, pts, 64);
    if (plot_cdfs(rp, pts, n, "cdf.png", "latency CDFs per workload class") < 0) return -1;
    fputs("## What the numbers say\n\n", rp->md);
    compare_extremes(rp, get_ttft_p99, "P99 TTFT", "ms");
    compare_extremes(rp, get_tpot_p99, "P99 TPOT", "ms");
    compare_extremes(rp, get_prefill, "mean prompt tokens computed per step", "");
    compare_extremes(rp, get_running, "mean number of running requests", "");
    compare_extremes(rp, get_output, "output token throughput", "tokens/s");
    int ttft = extreme(rp, get_ttft_p99, 1), prefill = extreme(rp, get_prefill, 1);
    char a[256], b[256];
    if (ttft >= 0 && ttft == prefill)
        fprintf(rp->md, "- The class with the worst P99 TTFT is also the one computing the most prompt tokens per "
                        "step: prefill pressure drives its TTFT.\n");
    else if (ttft >= 0 && prefill >= 0)
        fprintf(rp->md, "- The class with the worst P99 TTFT (**%s**) is not the one computing the most prompt tokens "
                        "per step (**%s**): queueing behind other work, not its own prefill, drives its TTFT.\n",
                label_of(rp, ttft, a, sizeof a), label_of(rp, prefill, b, sizeof b));
    for (int i = 0; i < num_points(rp); i++) {
        if (!measured(rp, i) || !strstr(label_of(rp, i, a, sizeof a), "mixed")) continue;
        char ratio[32], p99[32], p50[32];
        rpt_ratio(ratio, sizeof ratio, sum_of(rp, i)->ttft_ms.p99, sum_of(rp, i)->ttft_ms.median);
        rpt_num(p99, sizeof p99, sum_of(rp, i)->ttft_ms.p99);
        rpt_num(p50, sizeof p50, sum_of(rp, i)->ttft_ms.median);
        fprintf(rp->md, "- In **%s**, P99 TTFT was %s the median (%s against %s ms): the mean hides how differently "
                        "the requests of one mix are served.\n", a, ratio, p99, p50);
    }
    fputs("\n## Plots\n\n", rp->md);
    sweep_plots_section(rp);
    embed(rp, "cdf.png", "TTFT and E2E latency CDFs");
    return 0;
}

/* ---- 2. arrival rate ---- */

static int rate_points(const report *rp, cap_point *cp, int *idx, int max)
{
    int n = 0;
    for (int i = 0; i < num_points(rp) && n < max; i++) {
        scenario sc;
        point_scenario(rp, i, &sc);
        if (!rp->r[i].ran || strcmp(sc.v[K_workload_arrival].s, "poisson") != 0) continue;
        int at = n++;
        while (at > 0 && cp[at - 1].rate > sc.v[K_workload_rate].d) cp[at] = cp[at - 1], idx[at] = idx[at - 1], at--;
        cp[at] = (cap_point){sc.v[K_workload_rate].d, measured(rp, i), rp->r[i].sum};
        idx[at] = i;
    }
    return n;
}

static int plot_rate(report *rp)
{
    if (!rp->term[0]) return 0;
    plot pl;
    FILE *f = plot_begin(&pl, rp->term, "rate.png", "latency and throughput against arrival rate", 1500, 450);
    if (!f) return -1;
    /* sweep.csv has a column for each key some point changes: workload.arrival only when the
     * points mix arrivals (gnuplot stopped at the missing column) */
    bool mixed = false;
    scenario a, b;
    point_scenario(rp, 0, &a);
    for (int i = 1; i < num_points(rp) && !mixed; i++) {
        point_scenario(rp, i, &b);
        mixed = strcmp(a.v[K_workload_arrival].s, b.v[K_workload_arrival].s) != 0;
    }
    const char *x = mixed ? "(strcol('workload.arrival') eq 'poisson' ? column('workload.rate') : NaN)"
                          : "(column('workload.rate'))";
    double slo_ttft = rp->p->base.v[K_slo_ttft_ms].d, slo_tpot = rp->p->base.v[K_slo_tpot_ms].d;
    fprintf(f, "set multiplot layout 1,3\nset xlabel 'offered rate (requests/s)'\nset logscale x\nset key inside top left\n"
               "set title 'TTFT (ms)'\nset logscale y\n"
               "plot 'sweep.csv' using %s:'median_ttft_ms' title 'P50', '' using %s:'p99_ttft_ms' title 'P99'",
            x, x);
    plot_slo_line(f, "slo.ttft_ms", slo_ttft);
    fprintf(f, "\nset title 'TPOT (ms)'\n"
               "plot 'sweep.csv' using %s:'median_tpot_ms' title 'P50', '' using %s:'p99_tpot_ms' title 'P99'", x, x);
    plot_slo_line(f, "slo.tpot_ms", slo_tpot);
    fprintf(f, "\nunset logscale y\nset title 'requests/s'\n"
               "plot 'sweep.csv' using %s:'request_throughput' title 'achieved', '' using %s:%s title 'offered' "
               "dashtype 2\nunset multiplot\n",
            x, x, x);
    return plot_finish(&pl, rp->dir, rp->err, rp->errlen);
}

static const char need_rates[] = "arrival-rate report: needs Poisson points at two or more workload.rate values "
                                 "(e.g. --vary workload.rate=2,4,8); it plots against the rate";
static const char need_block_sizes[] = "memory report: needs paged points at two or more kv.block_size values (e.g. "
                                       "--vary kv.block_size=8,16,32), which it plots against the block size, or a "
                                       "continuous point and a paged one of the same kv.block_size and kv.num_blocks, "
                                       "which it compares";

/* Whether A (scheduler.policy continuous) and B (paged) hold the same KV: the memory report's pair. */
static bool same_kv_capacity(const scenario *a, const scenario *b)
{
    return strcmp(a->v[K_scheduler_policy].s, "continuous") == 0 && strcmp(b->v[K_scheduler_policy].s, "paged") == 0 &&
           a->v[K_kv_block_size].i == b->v[K_kv_block_size].i && a->v[K_kv_num_blocks].i == b->v[K_kv_num_blocks].i;
}

static int report_rate(report *rp)
{
    cap_point cp[256];
    int idx[256], n = rate_points(rp, cp, idx, 256);
    if (n < 2 || cp[0].rate == cp[n - 1].rate) {
        snprintf(rp->err, rp->errlen, "%s", need_rates);
        return -2;
    }
    if (plot_rate(rp) < 0) return -1;
    int queues[2] = {idx[n > 0 ? n - 1 : 0], -1}, nq = n > 0;
    cap_findings fd;
    if (n > 0) cap_analyze(cp, n, &fd);
    if (n > 0 && fd.knee >= 0 && idx[fd.knee] != queues[0]) queues[nq++] = idx[fd.knee];
    if (nq && plot_queues(rp, queues, nq, "queues.png", "queues and free blocks: the highest rate and the knee") < 0)
        return -1;
    fputs("## What the numbers say\n\n", rp->md);
    if (n > 0) cap_write_findings(rp->md, cp, n, &fd, NULL, 0, true);
    int all = -1;
    for (int i = 0; i < num_points(rp); i++) {
        scenario sc;
        point_scenario(rp, i, &sc);
        if (measured(rp, i) && strcmp(sc.v[K_workload_arrival].s, "all_at_once") == 0) all = i;
    }
    if (all >= 0 && n > 0 && cp[n - 1].have) {
        char a[32], pct[32];
        rpt_num(a, sizeof a, sum_of(rp, all)->output_throughput);
        rpt_percent(pct, sizeof pct, cp[n - 1].sum.output_throughput / sum_of(rp, all)->output_throughput);
        fprintf(rp->md, "- All requests at once (offline batch) reached %s output tokens/s; the highest offered rate "
                        "(%.4g req/s) reached %s of that.\n", a, cp[n - 1].rate, pct);
    }
    fprintf(rp->md, "\nDefinitions (`servesim capacity` uses the same): the knee is the lowest rate whose "
                    "keep_up (1 - the growth of the mean number of requests in the system from the first half of the "
                    "sending, once filled, to the second / the requests sent in the second) is below %.2f; P99 TTFT "
                    "takes off at the lowest rate whose P99 TTFT is more than %.0f× that at the lowest rate.\n\n## Plots\n\n",
            CAP_KEEP_UP, CAP_TAKEOFF);
    embed(rp, "rate.png", "latency and throughput against rate");
    embed(rp, "queues.png", "queues and free KV blocks");
    sweep_plots_section(rp);
    return 0;
}

/* ---- 3. the seven versions ---- */

static void version_sentence(report *rp, int from, int to, const char *change, const char *what)
{
    if (from < 0 || to < 0) return;
    const summary *a = sum_of(rp, from), *b = sum_of(rp, to);
    char ratio[32], tpot[256], ttft[256];
    rpt_ratio(ratio, sizeof ratio, b->output_throughput, a->output_throughput);
    rpt_change(tpot, sizeof tpot, "mean TPOT", a->tpot_ms.mean, b->tpot_ms.mean, "ms");
    rpt_change(ttft, sizeof ttft, "mean TTFT", a->ttft_ms.mean, b->ttft_ms.mean, "ms");
    fprintf(rp->md, "- %s served %s the output throughput of %s; it %s and %s.\n", change, ratio, what, ttft, tpot);
}

static int report_versions(report *rp)
{
    int naive = find_version(rp, "naive", -1, -1), kv = find_version(rp, "kv_single", -1, -1),
        stat = find_version(rp, "static", -1, -1), cont = find_version(rp, "continuous", -1, -1),
        paged = find_version(rp, "paged", 0, 0), prefix = find_version(rp, "paged", 1, 0),
        chunked = find_version(rp, "paged", 1, 1);
    int pts[64], n = all_points(rp, pts, 64);
    if (plot_cdfs(rp, pts, n, "cdf.png", "latency CDFs per version") < 0) return -1;
    fputs("## What the numbers say\n\n", rp->md);
    version_sentence(rp, naive, kv, "A KV cache (kv_single against naive)", "recomputing every token");
    version_sentence(rp, kv, stat, "Static batching", "one request at a time with a KV cache");
    version_sentence(rp, stat, cont, "Continuous batching", "static batching");
    if (stat >= 0) {
        const summary *s = sum_of(rp, stat);
        char pct[32];
        rpt_percent(pct, sizeof pct, (double)s->total_padding_tokens / fmax(1, (double)(s->total_padding_tokens + s->total_prefill_tokens)));
        fprintf(rp->md, "- Static batching computed %lld padding tokens, %s of its prompt work.\n",
                (long long)s->total_padding_tokens, pct);
    }
    if (cont >= 0 && paged >= 0) {
        char peak[256];
        rpt_change(peak, sizeof peak, "the peak of concurrent sequences", sum_of(rp, cont)->peak_running,
                   sum_of(rp, paged)->peak_running, "");
        version_sentence(rp, cont, paged, "Paged KV", "contiguous reservation (continuous)");
        fprintf(rp->md, "- Against contiguous reservation, paged KV %s.\n", peak);
    }
    if (paged >= 0 && prefix >= 0) {
        const summary *a = sum_of(rp, paged), *b = sum_of(rp, prefix);
        char ttft[256], tokens[256], hit[32];
        rpt_change(ttft, sizeof ttft, "mean TTFT", a->ttft_ms.mean, b->ttft_ms.mean, "ms");
        rpt_change(tokens, sizeof tokens, "the prompt tokens computed", (double)a->total_prefill_tokens,
                   (double)b->total_prefill_tokens, "");
        rpt_percent(hit, sizeof hit, b->prefix_hit_rate);
        fprintf(rp->md, "- Prefix caching %s at a hit rate of %s; it %s.\n", ttft, hit, tokens);
    }
    if (prefix >= 0 && chunked >= 0) {
        const summary *a = sum_of(rp, prefix), *b = sum_of(rp, chunked);
        char tpot[256], ttft[256];
        rpt_change(tpot, sizeof tpot, "P99 TPOT", a->tpot_ms.p99, b->tpot_ms.p99, "ms");
        rpt_change(ttft, sizeof ttft, "P99 TTFT", a->ttft_ms.p99, b->ttft_ms.p99, "ms");
        fprintf(rp->md, "- Chunked prefill (on top of prefix caching) %s and %s.\n", tpot, ttft);
    }
    fputs("\n## Plots\n\n", rp->md);
    sweep_plots_section(rp);
    embed(rp, "cdf.png", "TTFT and E2E latency CDFs");
    return 0;
}

/* ---- 4. prefix caching ---- */

static int partner(const report *rp, int i, bool prefix)
{
    int grid = sweep_grid_size(rp->p), block = i / grid;
    for (int j = block * grid; j < (block + 1) * grid; j++) {
        scenario sc;
        point_scenario(rp, j, &sc);
        if (measured(rp, j) && sc.v[K_scheduler_prefix_caching].b == prefix) return j;
    }
    return -1;
}

static int report_prefix(report *rp)
{
    fputs("## What the numbers say\n\n", rp->md);
    int last_off = -1, last_on = -1;
    for (int i = 0; i < num_points(rp); i += sweep_grid_size(rp->p)) {
        int off = partner(rp, i, false), on = partner(rp, i, true);
        if (off < 0 || on < 0) continue;
        const summary *a = sum_of(rp, off), *b = sum_of(rp, on);
        char name[256], ttft[256], p99[256], tokens[256], freeb[256], hit[32], *sp;
        double cached;
        if (max_cached_blocks(rp, on, &cached) < 0) return -1;
        label_of(rp, off, name, sizeof name);
        if ((sp = strrchr(name, ' '))) *sp = 0;   /* drop the off/on value */
        rpt_change(ttft, sizeof ttft, "mean TTFT", a->ttft_ms.mean, b->ttft_ms.mean, "ms");
        rpt_change(p99, sizeof p99, "P99 TTFT", a->ttft_ms.p99, b->ttft_ms.p99, "ms");
        rpt_change(tokens, sizeof tokens, "the prompt tokens computed", (double)a->total_prefill_tokens,
                   (double)b->total_prefill_tokens, "");
        rpt_change(freeb, sizeof freeb, "the fewest free KV blocks", a->min_free_blocks, b->min_free_blocks, "");
        rpt_percent(hit, sizeof hit, b->prefix_hit_rate);
        /* the cost side: room the cache keeps from new requests, and the blocks it had to give up */
        fprintf(rp->md, "- **%s**: at a hit rate of %s, prefix caching %s, %s and %s; the cache held up to %.0f "
                        "blocks and %s; %lld cached blocks were evicted to make room, and %lld requests waited "
                        "at the head of the queue for free blocks (%lld without the cache).\n",
                name, hit, tokens, ttft, p99, cached, freeb, (long long)b->prefix_evictions,
                (long long)b->kv_delayed_requests, (long long)a->kv_delayed_requests);
        last_off = off, last_on = on;
    }
    int pair[2] = {last_off, last_on};
    if (last_off >= 0 && plot_queues(rp, pair, 2, "queues.png", "queues and free blocks of the last workload") < 0)
        return -1;
    fputs("\n## Plots\n\n", rp->md);
    sweep_plots_section(rp);
    embed(rp, "queues.png", "queues and free KV blocks, last workload, caching off and on");
    return 0;
}

/* ---- 5. chunked prefill ---- */

/* Long prompts: above the geometric mean of the shortest and longest prompt. */
static int long_prompt_threshold(const sweep_result *r)
{
    int lo = 0, hi = 0;
    for (size_t i = 0; i < r->num_records; i++) {
        int p = r->records[i].prompt_len;
        if (!lo || p < lo) lo = p;
        if (p > hi) hi = p;
    }
    return (int)ceil(sqrt((double)lo * hi));
}

/* The summary's P99.9 of ITL (run.percentiles has it by default), or NAN. */
static double itl_p999(const summary *s)
{
    for (int i = 0; i < s->num_percentiles; i++)
        if (s->percentiles[i] == 99.9) return s->itl_ms.extra[i];
    return NAN;
}

static int report_chunked(report *rp)
{
    int off = find_version(rp, "paged", -1, 0), on = find_version(rp, "paged", -1, 1);
    if (off < 0 || on < 0) {
        snprintf(rp->err, rp->errlen, "chunked-prefill report: needs a point with scheduler.chunked_prefill off and one "
                                      "with it on (paged)");
        return -2;
    }
    int pair[2] = {off, on}, cut = long_prompt_threshold(&rp->r[off]);
    if (plot_timeline(rp, pair, 2, "timeline.png", "step timeline, chunked prefill off and on") < 0 ||
        plot_queues(rp, pair, 2, "queues.png", "queues and free blocks, chunked prefill off and on") < 0)
        return -1;
    class_stats s_off, s_on, l_off, l_on;
    double std_off, std_on, p99_off, p99_on;
    if (class_of(&rp->r[off], 0, cut, &s_off) < 0 || class_of(&rp->r[on], 0, cut, &s_on) < 0 ||
        class_of(&rp->r[off], cut, 1 << 30, &l_off) < 0 || class_of(&rp->r[on], cut, 1 << 30, &l_on) < 0) {
        snprintf(rp->err, rp->errlen, "out of memory");
        return -1;
    }
    if (step_spread(rp, off, &std_off, &p99_off) < 0 || step_spread(rp, on, &std_on, &p99_on) < 0) return -1;
    char a[256], b[256], c[256], d[256], e[256], f[256];
    fprintf(rp->md, "Requests with prompts of at least %d tokens count as long (%d of them; %d short ones).\n\n"
                    "| | short: P90 TPOT | short: P99 TPOT | P99 ITL | P99.9 ITL | longest stall | long: mean TTFT | "
                    "long: P99 TTFT | step time std | step time P99 | out tok/s |\n"
                    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
            cut, l_off.n, s_off.n);
    const struct { const char *name; class_stats *s, *l; double std, p99; int i; } rows[] = {
        {"off", &s_off, &l_off, std_off, p99_off, off}, {"on", &s_on, &l_on, std_on, p99_on, on}};
    for (int k = 0; k < 2; k++) {
        const summary *sk = sum_of(rp, rows[k].i);
        fprintf(rp->md, "| chunked prefill %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f | %.1f | %.2f | %.2f | %.0f |\n",
                rows[k].name, rows[k].s->tpot_p90, rows[k].s->tpot_p99, sk->itl_ms.p99, itl_p999(sk), sk->itl_ms.max,
                rows[k].l->ttft_mean, rows[k].l->ttft_p99, rows[k].std, rows[k].p99, sk->output_throughput);
    }
    rpt_change(a, sizeof a, "the running (short-prompt) requests' P99 TPOT", s_off.tpot_p99, s_on.tpot_p99, "ms");
    rpt_change(b, sizeof b, "the long prompts' mean TTFT", l_off.ttft_mean, l_on.ttft_mean, "ms");
    rpt_change(c, sizeof c, "their P90 TPOT", s_off.tpot_p90, s_on.tpot_p90, "ms");
    rpt_change(d, sizeof d, "the spread (std) of step times", std_off, std_on, "ms");
    rpt_change(e, sizeof e, "output throughput", sum_of(rp, off)->output_throughput, sum_of(rp, on)->output_throughput,
               "tokens/s");
    rpt_change(f, sizeof f, "the long prompts' P99 TTFT", l_off.ttft_p99, l_on.ttft_p99, "ms");
    char g[256], h[256], k2[256];
    const summary *so = sum_of(rp, off), *sn = sum_of(rp, on);
    rpt_change(g, sizeof g, "P99 ITL", so->itl_ms.p99, sn->itl_ms.p99, "ms");
    rpt_change(h, sizeof h, "P99.9 ITL", itl_p999(so), itl_p999(sn), "ms");
    rpt_change(k2, sizeof k2, "the longest stall between two tokens", so->itl_ms.max, sn->itl_ms.max, "ms");
    fprintf(rp->md, "\n## What the numbers say\n\n- Chunked prefill %s and %s.\n- It %s and %s; it %s.\n- It %s.\n"
                    "- Over every request's token gaps it %s, %s and %s.\n",
            a, b, c, d, e, f, g, h, k2);
    fputs("\n## Plots\n\n", rp->md);
    embed(rp, "timeline.png", "prefill tokens, decode sequences and step time per step");
    embed(rp, "queues.png", "queues and free KV blocks");
    sweep_plots_section(rp);
    return 0;
}

/* ---- 6. memory ---- */

/* Unused share of allocated slots and peak concurrency against block size, paged points only. */
static int plot_block_size(report *rp)
{
    if (!rp->term[0]) return 0;
    plot pl;
    FILE *f = plot_begin(&pl, rp->term, "block_size.png", "paged KV against block size", 1200, 450);
    if (!f) return -1;
    fputs("set multiplot layout 1,2\nset xlabel 'block size (tokens)'\nset logscale x 2\nset key off\n"
          "paged(c) = strcol('scheduler.policy') eq 'paged' ? column(c) : NaN\n"
          "set title 'unused share of allocated KV slots (%)'\n"
          "plot 'sweep.csv' using (paged('kv.block_size')):(100 * paged('kv_fragmentation')) smooth unique with linespoints pt 7\n"
          "set title 'peak concurrent sequences'\n"
          "plot 'sweep.csv' using (paged('kv.block_size')):(paged('peak_running')) smooth unique with linespoints pt 7\n"
          "unset multiplot\n",
          f);
    return plot_finish(&pl, rp->dir, rp->err, rp->errlen);
}

static int report_memory(report *rp)
{
    int cont = find_version(rp, "continuous", -1, -1), paged = -1, small = -1, big = -1;
    scenario cs, sc;
    if (cont >= 0) point_scenario(rp, cont, &cs);
    for (int i = 0; i < num_points(rp); i++) {
        point_scenario(rp, i, &sc);
        if (!measured(rp, i) || strcmp(sc.v[K_scheduler_policy].s, "paged") != 0) continue;
        long long bs = sc.v[K_kv_block_size].i;
        if (cont >= 0 && paged < 0 && same_kv_capacity(&cs, &sc)) paged = i;
        scenario t;
        if (small >= 0) point_scenario(rp, small, &t);
        if (small < 0 || bs < t.v[K_kv_block_size].i) small = i;
        if (big >= 0) point_scenario(rp, big, &t);
        if (big < 0 || bs > t.v[K_kv_block_size].i) big = i;
    }
    scenario t, u;
    if (small >= 0) point_scenario(rp, small, &t);
    if (big >= 0) point_scenario(rp, big, &u);
    /* the block sizes' part, the pair's part, or both; a sweep with neither has nothing to show */
    bool sizes = small >= 0 && t.v[K_kv_block_size].i != u.v[K_kv_block_size].i;
    if (!sizes && !(cont >= 0 && paged >= 0)) {
        snprintf(rp->err, rp->errlen, "%s", need_block_sizes);
        return -2;
    }
    int pair[2] = {cont, paged};
    if (cont >= 0 && paged >= 0 && plot_queues(rp, pair, 2, "queues.png", "contiguous against paged at the same KV capacity") < 0)
        return -1;
    fputs("## What the numbers say\n\n", rp->md);
    if (cont >= 0 && paged >= 0) {
        const summary *a = sum_of(rp, cont), *b = sum_of(rp, paged);
        char peak[256], wait[256], ratio[32], ttft[256];
        rpt_change(peak, sizeof peak, "the peak of concurrent sequences", a->peak_running, b->peak_running, "");
        rpt_change(wait, sizeof wait, "the mean waiting queue", a->mean_waiting, b->mean_waiting, "requests");
        rpt_change(ttft, sizeof ttft, "mean TTFT", a->ttft_ms.mean, b->ttft_ms.mean, "ms");
        rpt_ratio(ratio, sizeof ratio, b->output_throughput, a->output_throughput);
        fprintf(rp->md, "- At the same KV capacity (%lld blocks of %lld tokens), paged KV against contiguous "
                        "reservation of max_model_len per sequence %s, %s and %s, and served %s the output "
                        "throughput.\n",
                cs.v[K_kv_num_blocks].i, cs.v[K_kv_block_size].i, peak, wait, ttft, ratio);
    }
    if (sizes) { /* t and u: the smallest and the largest block size */
        const summary *a = sum_of(rp, small), *b = sum_of(rp, big);
        char frag[256], peak[256];
        rpt_change(frag, sizeof frag, "the unused share of allocated KV slots", 100 * a->kv_fragmentation,
                   100 * b->kv_fragmentation, "%");
        rpt_change(peak, sizeof peak, "the peak of concurrent sequences", a->peak_running, b->peak_running, "");
        fprintf(rp->md, "- Going from %lld-token to %lld-token blocks (paged) %s and %s.\n", t.v[K_kv_block_size].i,
                u.v[K_kv_block_size].i, frag, peak);
        char step[256];
        rpt_change(step, sizeof step, "the mean step time", a->mean_step_time_ms, b->mean_step_time_ms, "ms");
        fprintf(rp->md, "- It %s: one cost model priced every point, whatever its block size, so that is the "
                        "batches' doing. What small blocks cost inside the attention kernel only a table timed at "
                        "that block size carries (docs/cost-model.md, Block size: on servesim's CPU engine, "
                        "decode attention at one token a block costs 2-3x what it does at 16).\n",
                step);
    }
    fputs("\n| point | label | block size | blocks | peak running | mean running | mean waiting | unused slots | "
          "min free blocks |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|\n",
          rp->md);
    for (int i = 0; i < num_points(rp); i++) {
        if (!measured(rp, i)) continue;
        char label[256];
        point_scenario(rp, i, &sc);
        const summary *s = sum_of(rp, i);
        fprintf(rp->md, "| %d | %s | %lld | %lld | %d | %.1f | %.1f | %.2f%% | %d |\n", i, label_of(rp, i, label, sizeof label),
                sc.v[K_kv_block_size].i, sc.v[K_kv_num_blocks].i, s->peak_running, s->mean_running, s->mean_waiting,
                100 * s->kv_fragmentation, s->min_free_blocks);
    }
    if (sizes && plot_block_size(rp) < 0) return -1;
    fputs("\n## Plots\n\n", rp->md);
    embed(rp, "queues.png", "queues and free KV blocks, contiguous and paged");
    if (sizes) embed(rp, "block_size.png", "fragmentation and peak concurrency against block size (paged)");
    sweep_plots_section(rp);
    return 0;
}

/* ---- 7. speculative decoding ---- */

/* A point's load: its clients in a closed loop, else its offered rate. */
static double spec_load(const scenario *sc)
{
    return strcmp(sc->v[K_workload_arrival].s, "closed") == 0 ? (double)sc->v[K_workload_concurrency].i
                                                              : sc->v[K_workload_rate].d;
}

/* The measured point without speculation at I's load (and I's other workload keys). */
static int spec_baseline(const report *rp, int i)
{
    scenario a, b;
    point_scenario(rp, i, &a);
    for (int j = 0; j < num_points(rp); j++) {
        point_scenario(rp, j, &b);
        if (measured(rp, j) && b.v[K_speculative_num_tokens].i == 0 && spec_load(&a) == spec_load(&b) &&
            strcmp(a.v[K_workload_arrival].s, b.v[K_workload_arrival].s) == 0 &&
            a.v[K_workload_max_concurrency].i == b.v[K_workload_max_concurrency].i)
            return j;
    }
    return -1;
}

/* "at concurrency 4" or "at 2.5 requests/s" */
static void spec_load_phrase(char *buf, size_t len, double load, bool closed)
{
    if (closed) snprintf(buf, len, "at concurrency %g", load);
    else snprintf(buf, len, "at %g requests/s", load);
}

typedef struct spec_row {
    double alpha, load;
    int k, point, base;
    double tpot_speedup, throughput_ratio;
} spec_row;

static int cmp_spec_row(const void *x, const void *y)
{
    const spec_row *a = x, *b = y;
    if (a->alpha != b->alpha) return a->alpha < b->alpha ? -1 : 1;
    if (a->load != b->load) return a->load < b->load ? -1 : 1;
    return a->k - b->k;
}

/* speedup.png from speedup.csv: per acceptance rate (a panel each, at most 4), the median
 * TPOT speedup and the output throughput ratio against load, a line per draft length. */
static int plot_speculative(report *rp, const double *alphas, int na, const int *ks, int nk, bool closed)
{
    if (!rp->term[0] || na == 0) return 0;
    if (na > 4) na = 4;
    plot pl;
    FILE *f = plot_begin(&pl, rp->term, "speedup.png", "speculative decoding against no speculation at the same load",
                         450 * na, 800);
    if (!f) return -1;
    fprintf(f, "set datafile missing NaN\nset multiplot layout 2,%d\nset xlabel '%s'\nset logscale x 2\nset key inside top right\n", na,
            closed ? "concurrent clients (closed loop)" : "offered rate (requests/s)");
    for (int row = 0; row < 2; row++)
        for (int a = 0; a < na; a++) {
            fprintf(f, "set title '%s, acceptance %g'\nplot ", row ? "output throughput ratio" : "median TPOT speedup",
                    alphas[a]);
            for (int k = 0; k < nk; k++)
                fprintf(f, "'speedup.csv' using (column('acceptance_rate') == %.17g && column('num_tokens') == %d ? "
                           "column('load') : NaN):'%s' with linespoints pt 7 linecolor %d title 'k = %d', ",
                        alphas[a], ks[k], row ? "throughput_ratio" : "tpot_speedup", k + 1, ks[k]);
            fputs("1 with lines dashtype 2 linecolor 'black' title 'no speculation'\n", f);
        }
    fputs("unset multiplot\n", f);
    return plot_finish(&pl, rp->dir, rp->err, rp->errlen);
}

static int report_speculative(report *rp)
{
    int n = num_points(rp), nr = 0, na = 0, nk = 0;
    spec_row *rows = calloc((size_t)(n ? n : 1), sizeof *rows);
    double *alphas = calloc((size_t)(n ? n : 1), sizeof *alphas);
    int *ks = calloc((size_t)(n ? n : 1), sizeof *ks);
    if (!rows || !alphas || !ks) {
        free(rows), free(alphas), free(ks);
        snprintf(rp->err, rp->errlen, "out of memory");
        return -1;
    }
    scenario sc;
    bool closed = strcmp(rp->p->base.v[K_workload_arrival].s, "closed") == 0;
    for (int i = 0; i < n; i++) {
        point_scenario(rp, i, &sc);
        int k = (int)sc.v[K_speculative_num_tokens].i, base = spec_baseline(rp, i);
        if (!measured(rp, i) || k == 0 || base < 0) continue;
        const summary *s = sum_of(rp, i), *b = sum_of(rp, base);
        rows[nr++] = (spec_row){sc.v[K_speculative_acceptance_rate].d, spec_load(&sc), k, i, base,
                                b->tpot_ms.median / s->tpot_ms.median, s->output_throughput / b->output_throughput};
        int a = 0, j = 0;
        while (a < na && alphas[a] != sc.v[K_speculative_acceptance_rate].d) a++;
        if (a == na) alphas[na++] = sc.v[K_speculative_acceptance_rate].d;
        while (j < nk && ks[j] != k) j++;
        if (j == nk) ks[nk++] = k;
    }
    int status = 0;
    if (nr == 0) {
        snprintf(rp->err, rp->errlen, "speculative report: needs points with speculative.num_tokens > 0 and, at the "
                                      "same load, one with speculative.num_tokens = 0");
        status = -2;
    }
    qsort(rows, (size_t)nr, sizeof *rows, cmp_spec_row);
    for (int a = 1; a < na; a++) /* ascending, for the panels */
        for (int b = a; b > 0 && alphas[b] < alphas[b - 1]; b--) {
            double t = alphas[b]; alphas[b] = alphas[b - 1]; alphas[b - 1] = t;
        }
    for (int a = 1; a < nk; a++)
        for (int b = a; b > 0 && ks[b] < ks[b - 1]; b--) {
            int t = ks[b]; ks[b] = ks[b - 1]; ks[b - 1] = t;
        }
    char path[4400];
    snprintf(path, sizeof path, "%s/speedup.csv", rp->dir);
    FILE *csv = status == 0 ? fopen(path, "w") : NULL;
    if (status == 0 && !csv) {
        snprintf(rp->err, rp->errlen, "%s: cannot create", path);
        status = -1;
    }
    if (csv) {
        fputs("acceptance_rate,num_tokens,load,point,baseline_point,tpot_speedup,throughput_ratio,median_tpot_ms,"
              "output_throughput,spec_mean_accepted_length,spec_draft_time_share\n", csv);
        for (int i = 0; i < nr; i++) {
            const summary *s = sum_of(rp, rows[i].point);
            fprintf(csv, "%.17g,%d,%.17g,%d,%d,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f\n", rows[i].alpha, rows[i].k, rows[i].load,
                    rows[i].point, rows[i].base, rows[i].tpot_speedup, rows[i].throughput_ratio, s->tpot_ms.median,
                    s->output_throughput, s->spec_mean_accepted_length, s->spec_draft_time_share);
        }
        if (fclose(csv) != 0) {
            snprintf(rp->err, rp->errlen, "%s: write error", path);
            status = -1;
        }
    }
    if (status == 0) status = plot_speculative(rp, alphas, na, ks, nk, closed);
    if (status == 0) {
        fputs("## What the numbers say\n\nSpeedup: median TPOT without speculation over median TPOT with it, at the "
              "same load; throughput ratio: output tokens/s with over without.\n\n", rp->md);
        for (int a = 0; a < na; a++) {
            /* per acceptance rate: the best draft length at the lowest and the highest load,
             * and the lowest load at which no draft length pays any more */
            int lo = -1, hi = -1;
            double lo_load = INFINITY, hi_load = -INFINITY, stops = NAN;
            for (int i = 0; i < nr; i++) {
                if (rows[i].alpha != alphas[a]) continue;
                if (rows[i].load < lo_load) lo_load = rows[i].load;
                if (rows[i].load > hi_load) hi_load = rows[i].load;
            }
            for (int i = 0; i < nr; i++) {
                if (rows[i].alpha != alphas[a]) continue;
                if (rows[i].load == lo_load && (lo < 0 || rows[i].tpot_speedup > rows[lo].tpot_speedup)) lo = i;
                if (rows[i].load == hi_load && (hi < 0 || rows[i].tpot_speedup > rows[hi].tpot_speedup)) hi = i;
            }
            for (int i = 0; i < nr && isnan(stops); i++) {
                if (rows[i].alpha != alphas[a]) continue;
                bool pays = false;
                for (int j = 0; j < nr; j++)
                    if (rows[j].alpha == alphas[a] && rows[j].load == rows[i].load && rows[j].tpot_speedup > 1) pays = true;
                if (!pays) stops = rows[i].load;
            }
            const summary *l = sum_of(rp, rows[lo].point);
            char at_lo[64], at_hi[64];
            spec_load_phrase(at_lo, sizeof at_lo, lo_load, closed);
            spec_load_phrase(at_hi, sizeof at_hi, hi_load, closed);
            fprintf(rp->md, "- Acceptance %g: %s the best draft length, k = %d, gave a %.2f× TPOT speedup "
                            "(%.2f → %.2f ms, %.2f tokens a verifying step, drafting %.0f%% of step time) and %.2f× the "
                            "output throughput; %s the best, k = %d, gave %.2f× (throughput %.2f×). ",
                    alphas[a], at_lo, rows[lo].k, rows[lo].tpot_speedup, sum_of(rp, rows[lo].base)->tpot_ms.median,
                    l->tpot_ms.median, l->spec_mean_accepted_length, 100 * l->spec_draft_time_share,
                    rows[lo].throughput_ratio, at_hi, rows[hi].k, rows[hi].tpot_speedup, rows[hi].throughput_ratio);
            char at_stop[64];
            spec_load_phrase(at_stop, sizeof at_stop, stops, closed);
            if (isnan(stops)) fprintf(rp->md, "Some draft length paid at every load measured.\n");
            else fprintf(rp->md, "From %s on, no draft length paid.\n", at_stop + 3);
        }
        fputs("\n| acceptance | load | k | median TPOT (ms) | TPOT speedup | out tok/s | throughput ratio | "
              "accepted length | drafting share |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n", rp->md);
        for (int i = 0; i < nr; i++) {
            const summary *s = sum_of(rp, rows[i].point);
            fprintf(rp->md, "| %g | %g | %d | %.2f | %.2f× | %.0f | %.2f× | %.2f | %.0f%% |\n", rows[i].alpha, rows[i].load,
                    rows[i].k, s->tpot_ms.median, rows[i].tpot_speedup, s->output_throughput, rows[i].throughput_ratio,
                    s->spec_mean_accepted_length, 100 * s->spec_draft_time_share);
        }
        fputs("\n## Plots\n\n", rp->md);
        embed(rp, "speedup.png", "TPOT speedup and throughput ratio against load, per acceptance rate and draft length");
        sweep_plots_section(rp);
    }
    free(rows);
    free(alphas);
    free(ks);
    return status;
}

int study_report_check(const char *experiment, const sweep_plan *p, char *err, size_t errlen)
{
    bool rate = strcmp(experiment, "arrival-rate") == 0, memory = strcmp(experiment, "memory") == 0;
    if (!rate && !memory) return 0;
    /* two points that differ in the plotted key, among those the report plots; for the
     * memory report, or a continuous point and a paged one of the same KV */
    double first = NAN;
    scenario cont;
    bool have_cont = false;
    for (int i = 0; memory && !have_cont && i < sweep_num_points(p); i++) {
        char why[256];
        have_cont = sweep_point_scenario(p, i, &cont, why, sizeof why) == 0 &&
                    strcmp(cont.v[K_scheduler_policy].s, "continuous") == 0;
    }
    for (int i = 0; i < sweep_num_points(p); i++) {
        scenario sc;
        char why[256];
        if (sweep_point_scenario(p, i, &sc, why, sizeof why) < 0) continue;
        if (memory && have_cont && same_kv_capacity(&cont, &sc)) return 0;
        double v;
        if (rate && strcmp(sc.v[K_workload_arrival].s, "poisson") == 0) v = sc.v[K_workload_rate].d;
        else if (memory && strcmp(sc.v[K_scheduler_policy].s, "paged") == 0) v = (double)sc.v[K_kv_block_size].i;
        else continue;
        if (isnan(first)) first = v;
        else if (v != first) return 0;
    }
    snprintf(err, errlen, "%s", rate ? need_rates : need_block_sizes);
    return -1;
}

int study_report(const char *experiment, const sweep_plan *p, const sweep_result *r, const char *dir, int argc,
                 char **argv, char *err, size_t errlen)
{
    int e = 0;
    while (e < NUM_EXPERIMENTS && strcmp(experiments[e].name, experiment) != 0) e++;
    char path[4400];
    snprintf(path, sizeof path, "%s/report.md", dir);
    report rp = {.p = p, .r = r, .dir = dir, .err = err, .errlen = errlen};
    if (!plot_available(rp.term, sizeof rp.term)) rp.term[0] = 0;
    if (!(rp.md = fopen(path, "w"))) {
        snprintf(err, errlen, "%s: cannot create", path);
        return -1;
    }
    write_header(&rp, experiments[e].title, argc, argv);
    fputs("## Every point\n\n", rp.md);
    write_table(&rp);
    int status = experiments[e].fn(&rp);
    if (!rp.term[0]) fputs("(gnuplot was not found: no plots.)\n", rp.md);
    if (fclose(rp.md) != 0 && status == 0) {
        snprintf(err, errlen, "%s: write error", path);
        status = -1;
    }
    if (status == 0) status = html_write_report(dir, experiments[e].title, p->base.path, err, errlen);
    return status;
}
