/* `servesim capacity`: the highest arrival rate meeting every SLO, the knee, where P99 TTFT
 * takes off and where free KV blocks run out (definitions in study/capacity.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/decimal.h"
#include "io/outdir.h"
#include "io/plot.h"
#include "metrics/sumfield.h"
#include "study/capacity.h"
#include "cli/commands.h"
#include "study/job.h"
#include "study/sweep.h"
#include "cli/study_args.h"

static const char capacity_usage[] =
    "usage: servesim capacity [SCENARIO.ini] [--slo METRIC=LIMIT,...] [--max-rate R] [--repeat N]\n"
    "                         [--out DIR] [--seed N] [--percentiles P,...] [--set SECTION.KEY=VALUE]...\n"
    "                         [--quiet]\n"
    "  Finds the highest arrival rate (workload.rate of poisson, gamma or constant arrivals; the\n"
    "  search starts there) that the scenario serves: every SLO met (METRIC is\n"
    "  ttft|tpot|itl|e2el _ mean|median|p90|p99 _ms,\n"
    "  e.g. ttft_p99_ms=500,tpot_p99_ms=50) and the service keeping up: once the system has\n"
    "  filled, the requests in it grow by less than 3% of those sent (summary's\n"
    "  keep_up >= 0.97) and at most 3% of the requests rejected. Each probe's arrivals span the\n"
    "  scenario's own span and at least 300 s (workload.num_requests grows with the rate), and\n"
    "  20 of its P90 E2E latencies (60 where KV ran out) where its requests stay long (it runs\n"
    "  again, longer, unless its keep_up is below 0.5 or an SLO already fails).\n"
    "  Doubling brackets it, bisection narrows it to 2%; then a profile at 1/8 .. 2x of it finds\n"
    "  the knee, where P99 TTFT takes off and where free KV blocks reach zero. Writes\n"
    "  DIR/capacity.csv, capacity.txt (the findings) and latency.png (default DIR:\n"
    "  results/runs/NAME-capacity).\n"
    "  --repeat N searches again with seeds seed+1 .. seed+N-1 (one seed's arrivals move a\n"
    "  capacity by several percent): the answer is then the seeds' median, with every seed's\n"
    "  answer and their range (and DIR/seeds.csv); the table, the knee and the plot stay the\n"
    "  first seed's.\n";

enum { MAX_POINTS = 128, MAX_REPEAT = 100 };

typedef struct capacity_cli {
    cap_slo slo[CAP_MAX_SLO];
    int nslo;
    double max_rate;
    long repeat;
    const char *out;
    bool quiet;
} capacity_cli;

typedef struct search_ctx {
    const scenario *base;
    const capacity_cli *cli;
    cap_point pts[MAX_POINTS];
    bool served[MAX_POINTS];
    int n;
    long long seed;          /* the probes' run.seed, named in the progress lines when repeating */
    char err[2048];
    int status;
} search_ctx;

/* One seed's search: --repeat N makes N of them. */
typedef struct seed_answer {
    long long seed;
    cap_search_result res;
    int probes;
} seed_answer;

static int on_capacity_opt(void *ctx, const char *flag, const char *value)
{
    capacity_cli *c = ctx;
    char err[1024], *end;
    if (strcmp(flag, "--slo") == 0) {
        if (cap_parse_slo(value, c->slo, &c->nslo, err, sizeof err) == 0) return 0;
        fprintf(stderr, "servesim: %s\n", err);
        return -1;
    }
    if (strcmp(flag, "--max-rate") == 0) {
        c->max_rate = decimal_strtod(value, &end);
        /* workload.rate's range: a --max-rate below its least was probed, and refused as a --set
         * nobody gave (bad-input campaign) */
        if (end != value && !*end && c->max_rate >= CAP_MIN_RATE && c->max_rate <= 1e7) return 0;
        fprintf(stderr, "servesim: --max-rate %s: expected a rate in [%g, 1e7] requests/s%s\n",
                value, CAP_MIN_RATE, decimal_hint(value, false));
        return -1;
    }
    if (strcmp(flag, "--repeat") == 0) return cli_parse_long(flag, value, 1, MAX_REPEAT, &c->repeat);
    if (strcmp(flag, "--out") == 0) c->out = value;
    else c->quiet = true;
    return 0;
}

static const cli_opt capacity_opts[] = {
    {"--slo", true}, {"--max-rate", true}, {"--repeat", true}, {"--out", true}, {"--quiet", false},
};

static int find_point(const search_ctx *s, double rate)
{
    for (int i = 0; i < s->n; i++)
        if (s->pts[i].rate == rate) return i;
    return -1;
}

/* Runs the scenario at RATE, once; the point joins the table. */
static int measure(search_ctx *s, double rate)
{
    int i = find_point(s, rate);
    if (i >= 0) return i;
    if (s->n >= MAX_POINTS) {
        snprintf(s->err, sizeof s->err, "more than %d rates tried", MAX_POINTS);
        s->status = EXIT_FAILURE_OTHER;
        return -1;
    }
    scenario sc = *s->base;
    char rate_set[64], requests_set[64];
    snprintf(rate_set, sizeof rate_set, "workload.rate=%.17g", rate);
    snprintf(requests_set, sizeof requests_set, "workload.num_requests=%.0f",
             cap_probe_requests(s->base->v[K_workload_num_requests].d, s->base->v[K_workload_rate].d, rate));
    if (scenario_set(&sc, rate_set, s->err, sizeof s->err) < 0 ||
        scenario_set(&sc, requests_set, s->err, sizeof s->err) < 0) {
        s->status = EXIT_BAD_INPUT;
        return -1;
    }
    simjob j;
    if ((s->status = cap_run_probe(&sc, rate, s->cli->slo, s->cli->nslo, true, &j, s->err, sizeof s->err)) != EXIT_OK)
        return -1;
    /* rejections do not depend on the rate (a prompt too long for scheduler.max_model_len or
     * the KV pool): past the share a served rate allows at the first probe, every rate is
     * unserved, and a search halving to 1e-6 req/s would say so without saying why (review) */
    int ended = j.sum.completed + j.sum.rejected;
    if (s->n == 0 && ended > 0 && j.sum.rejected > (1 - CAP_KEEP_UP) * ended) {
        snprintf(s->err, sizeof s->err,
                 "%s: %d of %d requests (%.1f%%) are rejected at %.4g req/s, and a rate with more than %.0f%% "
                 "rejected is not served; rejections do not depend on the rate. %s",
                 s->base->path[0] ? s->base->path : "built-in scenario", j.sum.rejected, ended,
                 100.0 * j.sum.rejected / ended, rate, 100 * (1 - CAP_KEEP_UP), j.rejected);
        s->status = EXIT_BAD_INPUT;
        return -1;
    }
    s->pts[s->n] = (cap_point){rate, j.have_summary, j.sum};
    char why[256];
    s->served[s->n] = j.have_summary && cap_served(s->cli->slo, s->cli->nslo, &j.sum, why, sizeof why);
    /* a line per rate on a terminal: a search over a long trace takes minutes */
    char seed[48] = "";
    if (s->cli->repeat > 1) snprintf(seed, sizeof seed, "seed %lld, ", s->seed);
    if (!s->cli->quiet && isatty(2))
        fprintf(stderr, "capacity: %sprobe %d, %.4g req/s: %s\n", seed, s->n + 1, rate,
                !j.have_summary ? "no request finished" : s->served[s->n] ? "served" : why);
    return s->n++;
}

static int probe(void *ctx, double rate, bool *ok)
{
    search_ctx *s = ctx;
    int i = measure(s, rate);
    if (i < 0) return -1;
    *ok = s->served[i];
    return 0;
}

/* Rates around the capacity, for the knee and take-off: 1/8 .. 2x in steps of about 1.4x. */
static int profile(search_ctx *s, double capacity)
{
    static const double factors[] = {0.125, 0.25, 0.5, 0.71, 1.41, 2};
    for (size_t f = 0; f < sizeof factors / sizeof *factors; f++) {
        double rate = capacity * factors[f];
        if (rate > s->cli->max_rate) continue;
        if (measure(s, rate) < 0) return -1;
    }
    return 0;
}

static int by_rate(const void *a, const void *b)
{
    double x = ((const cap_point *)a)->rate, y = ((const cap_point *)b)->rate;
    return (x > y) - (x < y);
}

static void write_csv(FILE *f, const search_ctx *s, const cap_point *sorted)
{
    /* the latencies at run.percentiles after the fixed columns, as every probe's summary has them */
    const summary *named = NULL;
    for (int i = 0; !named && i < s->n; i++)
        if (sorted[i].have) named = &sorted[i].sum;
    int n = named ? named->num_percentiles : 0;
    fputs("rate,served,", f);
    sumf_write_header(f, "");
    if (named) sumf_write_extra_header(f, named);
    fputc('\n', f);
    for (int i = 0; i < s->n; i++) {
        fprintf(f, "%.6g,%d,", sorted[i].rate, s->served[find_point(s, sorted[i].rate)]);
        if (sorted[i].have) sumf_write_row(f, &sorted[i].sum);
        else
            for (size_t k = 1; k < sumf_count(); k++) fputc(',', f);
        sumf_write_extra_row(f, sorted[i].have ? &sorted[i].sum : NULL, n);
        fputc('\n', f);
    }
}

/* Each probe's requests and keep_up beside its latencies: probes differ in length (20 or 60
 * stays where requests stay long), and a longer one has a longer queue, so latencies need
 * not rise with the rate (new-user trial). */
static void print_table(const search_ctx *s, const cap_point *sorted)
{
    printf("%10s %6s %8s %7s %8s %9s %9s %9s %9s %9s %8s\n", "rate", "served", "requests", "keep_up", "req/s",
           "out tok/s", "TTFT p50", "TTFT p99", "TPOT p99", "E2EL p99", "min free");
    for (int i = 0; i < s->n; i++) {
        const summary *m = &sorted[i].sum;
        printf("%10.4g %6s %8d %7.3f %8.2f %9.0f %9.1f %9.1f %9.2f %9.0f %8d\n", sorted[i].rate,
               s->served[find_point(s, sorted[i].rate)] ? "yes" : "no", m->completed + m->rejected, m->keep_up,
               m->request_throughput, m->output_throughput, m->ttft_ms.median, m->ttft_ms.p99, m->tpot_ms.p99,
               m->e2el_ms.p99, m->min_free_blocks);
    }
}

/* "11.62" for a served rate, "none" where no rate was, ">= 8" where --max-rate was. */
static void seed_rate(char *buf, size_t len, const cap_search_result *r)
{
    if (r->best == 0) snprintf(buf, len, "none");
    else snprintf(buf, len, "%s%.4g", r->fail == 0 ? ">= " : "", r->best);
}

/* The line --repeat adds: every seed's answer, and the median and range of those bracketed
 * (a seed that served --max-rate, or no rate, has no answer to take a median of). */
static void write_seeds(FILE *f, const seed_answer *seeds, int n)
{
    double best[MAX_REPEAT], lo = INFINITY, hi = -INFINITY;
    int m = 0;
    for (int i = 0; i < n; i++)
        if (seeds[i].res.best > 0 && seeds[i].res.fail > 0) {
            best[m++] = seeds[i].res.best;
            lo = fmin(lo, seeds[i].res.best);
            hi = fmax(hi, seeds[i].res.best);
        }
    /* the median leads, as the answer to quote: one seed's arrivals move it by several percent */
    if (m > 0) fprintf(f, "Capacity: %.4g req/s, the median", met_median(best, (size_t)m));
    else fputs("Capacity", f);
    fprintf(f, " over %d seeds (%lld-%lld):", n, seeds[0].seed, seeds[n - 1].seed);
    for (int i = 0; i < n; i++) {
        char r[48];
        seed_rate(r, sizeof r, &seeds[i].res);
        fprintf(f, "%s %s", i == 0 ? "" : i == n - 1 ? " and" : ",", r);
    }
    fputs(" req/s served", f);
    if (m > 0) {
        fprintf(f, "; range %.4g-%.4g (%.0f%% of the median)", lo, hi,
                100 * (hi - lo) / met_median(best, (size_t)m));
        if (m == 1) fputs(", the one seed with an answer", f);
        else if (m < n) fprintf(f, ", the median of the %d seeds with an answer", m);
    }
    fputs(".\n", f);
}

static int write_seeds_csv(FILE *f, const seed_answer *seeds, int n)
{
    fputs("seed,served_rate,unserved_rate,probes\n", f);
    for (int i = 0; i < n; i++) {
        const cap_search_result *r = &seeds[i].res;
        fprintf(f, "%lld,", seeds[i].seed);
        if (r->best > 0) fprintf(f, "%.6g", r->best);
        fputc(',', f);
        if (r->fail > 0) fprintf(f, "%.6g", r->fail);
        fprintf(f, ",%d\n", seeds[i].probes);
    }
    return 0;
}

static void write_answer(FILE *f, const search_ctx *s, const cap_search_result *res, const seed_answer *seeds,
                         int nseeds)
{
    cap_write_slo(f, s->cli->slo, s->cli->nslo);
    char cost[1400];
    job_cost_describe(s->base, cost, sizeof cost);
    fprintf(f, "Cost model: %s\n", cost);
    char note[700];
    job_scheduler_note(s->base, note, sizeof note);
    if (*note) fprintf(f, "%s\n", note);
    /* with --repeat the seeds' median is the answer; the first seed's, below it, is the table's */
    char lead[64] = "Capacity";
    if (nseeds > 1) {
        write_seeds(f, seeds, nseeds);
        snprintf(lead, sizeof lead, "Seed %lld (the table's)", seeds[0].seed);
    }
    if (res->best == 0) {
        char why[256] = "no request finished";
        int i = find_point(s, res->fail);
        if (i >= 0 && s->pts[i].have) cap_served(s->cli->slo, s->cli->nslo, &s->pts[i].sum, why, sizeof why);
        fprintf(f, "%s: no rate down to %.4g req/s is served (there: %s).\n", lead, res->fail, why);
    } else if (res->fail == 0) fprintf(f, "%s: at least %.4g req/s (--max-rate) is served.\n", lead, res->best);
    else {
        char why[256];
        int i = find_point(s, res->fail);
        cap_served(s->cli->slo, s->cli->nslo, &s->pts[i].sum, why, sizeof why);
        fprintf(f, "%s: %.4g req/s is served; %.4g req/s is not (%s).\n", lead, res->best, res->fail, why);
    }
}

/* One panel of latency.png: P50 and P99 of METRIC ("ttft") against rate, on a log scale where
 * they span 20x (a queue's TTFT runs from tens of ms to minutes), with each --slo limit on it. */
static bool slo_limits(const cap_slo *slo, const char *tail)
{
    const char *name = sumf_at((size_t)slo->field)->name;
    size_t n = strlen(name), t = strlen(tail);
    return n > t && strcmp(name + n - t, tail) == 0;
}

static void plot_panel(FILE *f, const char *metric, const char *title, const cap_slo *slo, int nslo)
{
    char p50[32], p99[32], tail[16];
    snprintf(p50, sizeof p50, "median_%s_ms", metric);
    snprintf(p99, sizeof p99, "p99_%s_ms", metric);
    snprintf(tail, sizeof tail, "_%s_ms", metric);
    double limit = 0; /* the axis reaches the highest limit */
    for (int i = 0; i < nslo; i++)
        if (slo_limits(&slo[i], tail)) limit = fmax(limit, slo[i].limit);
    fprintf(f, "set title '%s (ms)'\n", title);
    plot_log_y_if_wide(f, "capacity.csv", p50, p99, limit, false);
    fprintf(f, "plot 'capacity.csv' using 'rate':'%s' title 'P50', '' using 'rate':'%s' title 'P99'", p50, p99);
    for (int i = 0; i < nslo; i++)
        if (slo_limits(&slo[i], tail)) plot_slo_line(f, sumf_at((size_t)slo[i].field)->name, slo[i].limit);
    fputc('\n', f);
}

static int plot_latency(const char *dir, const cap_slo *slo, int nslo, char *err, size_t errlen)
{
    char term[32];
    if (!plot_available(term, sizeof term)) {
        printf("note: gnuplot not found, no plots\n");
        return 0;
    }
    plot pl;
    FILE *f = plot_begin(&pl, term, "latency.png", "latency against arrival rate", 1200, 500);
    if (!f) return -1;
    fputs("set multiplot layout 1,2\nset xlabel 'arrival rate (requests/s)'\nset logscale x\n", f);
    plot_panel(f, "ttft", "TTFT", slo, nslo);
    plot_panel(f, "tpot", "TPOT", slo, nslo);
    fputs("unset multiplot\n", f);
    return plot_finish(&pl, dir, err, errlen);
}

static int write_outputs(const search_ctx *s, const cap_search_result *res, const seed_answer *seeds, int nseeds,
                         const char *out, char *err, size_t errlen)
{
    cap_point sorted[MAX_POINTS];
    memcpy(sorted, s->pts, (size_t)s->n * sizeof *sorted);
    qsort(sorted, (size_t)s->n, sizeof *sorted, by_rate);
    cap_findings fd;
    cap_analyze(sorted, s->n, &fd);
    outdir od;
    if (od_open(&od, out, err, errlen) < 0) return -1;
    FILE *f = od_fopen(&od, "capacity.csv", err, errlen);
    int status = f ? 0 : -1;
    if (f) {
        write_csv(f, s, sorted);
        status = od_fclose(f, "capacity.csv", err, errlen);
    }
    if (status == 0 && nseeds > 1) {
        if ((f = od_fopen(&od, "seeds.csv", err, errlen))) {
            write_seeds_csv(f, seeds, nseeds);
            status = od_fclose(f, "seeds.csv", err, errlen);
        } else {
            status = -1;
        }
    }
    if (status == 0 && (f = od_fopen(&od, "capacity.txt", err, errlen))) {
        write_answer(f, s, res, seeds, nseeds);
        cap_write_findings(f, sorted, s->n, &fd, s->cli->slo, s->cli->nslo, false);
        status = od_fclose(f, "capacity.txt", err, errlen);
    } else {
        status = -1;
    }
    if (status == 0) status = plot_latency(od.tmp_path, s->cli->slo, s->cli->nslo, err, errlen);
    if (status == 0) status = od_commit(&od, err, errlen);
    if (status < 0) {
        od_abort(&od);
        return -1;
    }
    if (!s->cli->quiet) {
        print_table(s, sorted);
        write_answer(stdout, s, res, seeds, nseeds);
        cap_write_findings(stdout, sorted, s->n, &fd, s->cli->slo, s->cli->nslo, false);
        printf("Results in %s/\n", out);
    }
    return 0;
}

static int search(const scenario *sc, const capacity_cli *c)
{
    char out[1200], err[2048];
    if (scenario_out_dir(sc, c->out, "capacity", out, sizeof out, err, sizeof err) < 0) {
        fprintf(stderr, "servesim: %s\n", err);
        return EXIT_BAD_INPUT;
    }
    search_ctx *s = calloc(1, sizeof *s);
    if (!s) {
        fprintf(stderr, "servesim: out of memory\n");
        return EXIT_FAILURE_OTHER;
    }
    long long seed0 = sc->v[K_run_seed].i;
    *s = (search_ctx){.base = sc, .cli = c, .seed = seed0, .status = EXIT_OK};
    cap_search_result res;
    seed_answer seeds[MAX_REPEAT];
    int status = EXIT_OK, nseeds = 0;
    double start = fmin(sc->v[K_workload_rate].d, c->max_rate);
    if (cap_search(start, c->max_rate, 0.02, probe, s, &res) < 0) {
        fprintf(stderr, "servesim: %s\n", s->err);
        status = s->status;
    } else {
        seeds[nseeds++] = (seed_answer){seed0, res, s->n};
    }
    /* the other seeds' searches, each from the same start: their answers only */
    for (int k = 1; status == EXIT_OK && k < c->repeat; k++) {
        scenario sk = *sc;
        char set[64];
        snprintf(set, sizeof set, "run.seed=%lld", seed0 + k);
        search_ctx *t = calloc(1, sizeof *t);
        if (!t) {
            fprintf(stderr, "servesim: out of memory\n");
            status = EXIT_FAILURE_OTHER;
            break;
        }
        *t = (search_ctx){.base = &sk, .cli = c, .seed = seed0 + k, .status = EXIT_OK};
        cap_search_result rk;
        if (scenario_set(&sk, set, t->err, sizeof t->err) < 0 ||
            cap_search(start, c->max_rate, 0.02, probe, t, &rk) < 0) {
            fprintf(stderr, "servesim: %s\n", t->err);
            status = t->status == EXIT_OK ? EXIT_BAD_INPUT : t->status;
        } else {
            seeds[nseeds++] = (seed_answer){seed0 + k, rk, t->n};
        }
        free(t);
    }
    if (status == EXIT_OK && res.best > 0 && profile(s, res.best) < 0) {
        fprintf(stderr, "servesim: %s\n", s->err);
        status = s->status;
    }
    bool any = false;
    for (int i = 0; i < s->n; i++) any |= s->pts[i].have;
    if (status == EXIT_OK && !any) {
        /* there is no capacity to find, and nothing to plot (gnuplot died on the empty range) */
        fprintf(stderr, "servesim: %s: no request finished at any of the %d rates tried (down to %.4g req/s): every "
                        "one was rejected; `servesim run` shows why in requests.csv's stop_reason (a prompt longer "
                        "than scheduler.max_model_len, or than the KV pool?)\n",
                sc->path[0] ? sc->path : "built-in scenario", s->n, res.fail);
        status = EXIT_BAD_INPUT;
    }
    if (status == EXIT_OK && write_outputs(s, &res, seeds, nseeds, out, err, sizeof err) < 0) {
        fprintf(stderr, "servesim: %s\n", err);
        status = EXIT_FAILURE_OTHER;
    }
    free(s);
    return status;
}

int cmd_capacity(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(capacity_usage, stdout);
        return EXIT_OK;
    }
    capacity_cli c = {.max_rate = 10000, .repeat = 1};
    scenario sc;
    if (study_parse_args(argc, argv, capacity_usage, capacity_opts, sizeof capacity_opts / sizeof *capacity_opts,
                         &sc, on_capacity_opt, &c) < 0)
        return EXIT_BAD_INPUT;
    char err[2048];
    scenario_resolved r;
    /* the arrival processes whose rate is workload.rate, as plan probes them (it refused gamma
     * and constant, which plan searched) */
    const char *arrival = sc.v[K_workload_arrival].s;
    if (strcmp(arrival, "poisson") != 0 && strcmp(arrival, "gamma") != 0 && strcmp(arrival, "constant") != 0) {
        fprintf(stderr, "servesim: capacity searches the rate of poisson, gamma or constant arrivals, but "
                        "workload.arrival is %s (%s)\n", arrival, sc.v[K_workload_arrival].origin);
        return EXIT_BAD_INPUT;
    }
    if (scenario_resolve(&sc, &r, err, sizeof err) < 0 || sweep_check_seeds(&sc, (int)c.repeat, err, sizeof err) < 0) {
        fprintf(stderr, "servesim: %s\n", err);
        return EXIT_BAD_INPUT;
    }
    return search(&sc, &c);
}
