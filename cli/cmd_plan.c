/* `servesim plan`: capacity answered in GPUs. Each layout (tensor parallelism x replicas x
 * router x the values of any --vary keys) is simulated on the scenario's traffic with the
 * shared scheduler; its capacity is the highest arrival rate meeting the SLOs (the capacity
 * search of study/capacity.h, over the whole deployment, so routing and load imbalance
 * count). With --gpus N every layout uses N GPUs and the table ranks them by capacity per
 * GPU; with --rate R each layout also gets the fewest replicas that serve R, and the plan
 * the fewest GPUs. Every probe is a point of the Pareto front of throughput per GPU against
 * each user's token rate. --shard K/N probes every N-th layout and keeps its results in
 * plan-shard.json; `servesim merge` joins the shards into what one run writes. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/study_args.h"
#include "io/decimal.h"
#include "io/json.h"
#include "io/outdir.h"
#include "io/plot.h"
#include "kernels/backend.h"
#include "metrics/sumfield.h"
#include "sim/router.h"
#include "study/capacity.h"
#include "study/job.h"
#include "study/simjob.h"
#include "study/sweep.h"
#include "workload/workload.h"

static const char plan_usage[] =
    "usage: servesim plan [SCENARIO.ini] (--gpus N | --rate R | both) [--slo METRIC=LIMIT,...]\n"
    "                     [--routers A,B] [--pd P:D,...] [--vary SECTION.KEY=V1,V2]... [--max-tp N]\n"
    "                     [--max-rate R] [--shard K/N]\n"
    "                     [--out DIR] [--seed N] [--percentiles P,...] [--set SECTION.KEY=VALUE]... [--quiet]\n"
    "  Searches deployments of the scenario's model on its GPU for its traffic: tensor\n"
    "  parallelism 1, 2, 4, 8 (up to --max-tp, where the model splits and fits, and its KV\n"
    "  pool holds one sequence of scheduler.max_model_len, as vLLM needs to start) x replicas x\n"
    "  router (--routers, default least_outstanding) x every combination of --vary values;\n"
    "  aggregated, and disaggregated at each --pd prefill:decode ratio (whole groups of P + D\n"
    "  instances, KV moved as deployment.kv_transfer_* say).\n"
    "  A layout's capacity is the highest arrival rate it serves: every SLO met (as for\n"
    "  `servesim capacity`) and the service keeping up (keep_up >= 0.97, at most 3% of the\n"
    "  requests rejected); a trace is replayed\n"
    "  faster or slower (workload.trace_time_scale) to probe rates; generated arrivals span the\n"
    "  scenario's own span and at least 300 s (workload.num_requests grows with the rate).\n"
    "  --gpus N: every layout on N GPUs (N / TP replicas), ranked by capacity per GPU.\n"
    "  --rate R: the fewest replicas (and GPUs) of each layout that serve R req/s, and the\n"
    "  fewest GPUs of all.\n"
    "  Writes DIR/plan.csv (one row per layout), points.csv (every probe), pareto.csv (output\n"
    "  tokens/s per GPU against tokens/s per user: the served probes no other served one beats\n"
    "  on both),\n"
    "  pareto.png and plan.txt (default DIR: results/runs/NAME-plan).\n"
    "  --shard K/N: only the layouts whose index % N == K-1, their results in DIR/plan-shard.json;\n"
    "  `servesim merge OUT SHARD_DIR...` (run where the shards ran) joins them into the files above.\n";

enum { MAX_VARY = 4, MAX_VALUES = 16, MAX_LAYOUTS = 512, MAX_POINTS = 16384, TP_CHOICES = 4, MAX_LEFT_OUT = 32 };

typedef struct vary_key {
    char key[128];
    char values[MAX_VALUES][128];
    int n;
} vary_key;

typedef struct plan_cli {
    cap_slo slo[CAP_MAX_SLO];
    int nslo;
    long gpus, max_tp;
    double target, max_rate;
    router_kind routers[ROUTER_COUNT];
    int nrouters;
    int pd[8][2];            /* --pd: prefill:decode ratios to try besides aggregated serving */
    int npd;
    vary_key vary[MAX_VARY];
    int nvary;
    const char *out;
    bool quiet;
    int shard, num_shards;   /* --shard K/N: this run probes the layouts with index % N == K - 1 */
    char **argv;             /* the command line, for a shard's plan-shard.json */
    int argc;
} plan_cli;

typedef struct layout {
    int tp;
    int replicas;            /* units: replicas aggregated; groups of ratio_p + ratio_d instances disaggregated */
    int ratio_p, ratio_d;    /* disaggregated: prefill to decode instances (0: aggregated) */
    router_kind router;
    int value[MAX_VARY];     /* index into each --vary key's values */
    /* --gpus: the capacity on those GPUs and the summary there */
    double capacity, fail;
    bool have;
    summary at;
    /* --rate: the fewest replicas serving it (0: none up to the limit) and the summary there */
    int min_replicas;
    int replica_limit;       /* the most the search tries: 4,096 GPUs, or what memory allows */
    bool memory_limited;     /* the limit is the block pools' memory, not the GPUs */
    summary at_target;
    char cost[16];           /* the cost model that prices it: "measured" or "roofline" */
} layout;

typedef struct point {
    int layout, replicas;
    double rate;
    bool served, have;
    double tok_per_gpu, tok_per_user;
    summary sum;
} point;

typedef struct plan {
    const scenario *base;
    const plan_cli *cli;
    double trace_rate;       /* a trace's own arrival rate (requests / its span); 0 for generated arrivals */
    double max_rate;         /* the highest rate a search probes: --max-rate, or less for a trace (trace_limit) */
    layout *lay;
    int nlay;
    point *pts;
    int npts;
    int cur, cur_replicas;   /* the layout being probed */
    double best_rate;        /* the highest rate it served so far, and the summary there */
    summary best_sum;
    char err[2048];
    int status;
    char left_name[MAX_LEFT_OUT][600]; /* layouts that cannot be built, for plan.txt */
    char left_why[MAX_LEFT_OUT][1100]; /* and why */
    int nleft_out;
} plan;

static int parse_routers(const char *v, plan_cli *c)
{
    if (cli_refuse_empty_items("--routers", v, v) < 0) return -1;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v);
    c->nrouters = 0;
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (c->nrouters == ROUTER_COUNT || router_parse(tok, &c->routers[c->nrouters]) < 0) {
            fprintf(stderr, "servesim: --routers %s: %s is not a router (%s)\n", v, tok,
                    c->nrouters == ROUTER_COUNT ? "named twice?" : ROUTER_CHOICES);
            return -1;
        }
        for (int i = 0; i < c->nrouters; i++)
            if (c->routers[i] == c->routers[c->nrouters]) {
                fprintf(stderr, "servesim: --routers %s: %s is named twice\n", v, tok);
                return -1;
            }
        c->nrouters++;
    }
    if (c->nrouters) return 0;
    fprintf(stderr, "servesim: --routers %s: name at least one router (%s)\n", v, ROUTER_CHOICES);
    return -1;
}

static int parse_pd(const char *v, plan_cli *c)
{
    if (cli_refuse_empty_items("--pd", v, v) < 0) return -1;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v);
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int a, b, n = 0;
        if (c->npd == 8 || sscanf(tok, "%d:%d%n", &a, &b, &n) != 2 || tok[n] || a < 1 || b < 1 || a > 64 || b > 64) {
            fprintf(stderr, "servesim: --pd %s: expected prefill:decode ratios such as 1:3,1:1 (at most 8, each 1..64)\n", v);
            return -1;
        }
        for (int i = 0; i < c->npd; i++)
            if (c->pd[i][0] == a && c->pd[i][1] == b) { /* each layout was planned twice */
                fprintf(stderr, "servesim: --pd %s: %d:%d is given twice\n", v, a, b);
                return -1;
            }
        c->pd[c->npd][0] = a;
        c->pd[c->npd++][1] = b;
    }
    return 0;
}

/* The deployment keys plan sets on every layout: --vary refuses them, and a scenario's value
 * of one is said to be unused. */
static const scenario_key plan_chosen[] = {K_deployment_tensor_parallel, K_deployment_replicas, K_deployment_router,
                                           K_deployment_prefill_instances, K_deployment_decode_instances};

/* Whether KEY prices the KV a disaggregated layout moves (deployment.kv_transfer_*), which an
 * aggregated one does not. */
static bool moves_kv(const char *key)
{
    static const char prefix[] = "deployment.kv_transfer_";
    return strncmp(key, prefix, sizeof prefix - 1) == 0;
}

static int parse_vary(const char *v, plan_cli *c)
{
    const char *eq = strchr(v, '=');
    if (c->nvary == MAX_VARY || !eq || eq == v || !eq[1]) {
        fprintf(stderr, "servesim: --vary %s: expected SECTION.KEY=V1,V2,... (at most %d keys)\n", v, MAX_VARY);
        return -1;
    }
    if (cli_refuse_empty_items("--vary", v, eq + 1) < 0) return -1;
    vary_key *k = &c->vary[c->nvary];
    snprintf(k->key, sizeof k->key, "%.*s", (int)(eq - v), v);
    for (int i = 0; i < c->nvary; i++)
        if (strcmp(c->vary[i].key, k->key) == 0) {
            fprintf(stderr, "servesim: --vary %s: %s is varied twice; give its values in one --vary\n", v, k->key);
            return -1;
        }
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", eq + 1);
    k->n = 0;
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (k->n == MAX_VALUES) {
            fprintf(stderr, "servesim: --vary %s: at most %d values\n", v, MAX_VALUES);
            return -1;
        }
        for (int i = 0; i < k->n; i++)
            if (strcmp(k->values[i], tok) == 0) { /* one layout twice: searched and ranked twice */
                fprintf(stderr, "servesim: --vary %s: %s is given twice\n", v, tok);
                return -1;
            }
        snprintf(k->values[k->n++], sizeof k->values[0], "%s", tok);
    }
    /* the deployment keys plan chooses itself; the others (the all-reduce fusion, the KV
     * transfer) vary like any scenario key */
    for (size_t i = 0; i < sizeof plan_chosen / sizeof *plan_chosen; i++)
        if (strcmp(k->key, sweep_key_name(plan_chosen[i])) == 0) {
            fprintf(stderr, "servesim: --vary %s: plan chooses %s itself (--max-tp, --routers, --pd, --gpus)\n", v,
                    k->key);
            return -1;
        }
    static const char *const own[] = {"workload.rate", "workload.arrival", "workload.trace_time_scale",
                                      "workload.num_requests"};
    for (size_t i = 0; i < sizeof own / sizeof *own; i++)
        if (strcmp(k->key, own[i]) == 0) {
            fprintf(stderr, "servesim: --vary %s: plan sets %s itself on every probe (the rate it searches); set the "
                            "arrival process with --set\n", v, own[i]);
            return -1;
        }
    c->nvary++;
    return 0;
}

static int on_plan_opt(void *ctx, const char *flag, const char *value)
{
    plan_cli *c = ctx;
    char err[1024], *end;
    if (strcmp(flag, "--slo") == 0) {
        if (cap_parse_slo(value, c->slo, &c->nslo, err, sizeof err) == 0) return 0;
        fprintf(stderr, "servesim: %s\n", err);
        return -1;
    }
    if (strcmp(flag, "--gpus") == 0) return cli_parse_long(flag, value, 1, 4096, &c->gpus);
    if (strcmp(flag, "--max-tp") == 0) return cli_parse_long(flag, value, 1, 8, &c->max_tp);
    if (strcmp(flag, "--rate") == 0 || strcmp(flag, "--max-rate") == 0) {
        double v = decimal_strtod(value, &end);
        /* workload.rate's range, as capacity's --max-rate: 1e-300 was taken, and the plan said
         * that no rate down to it was served (bad-input campaign) */
        if (end == value || *end || !(v >= CAP_MIN_RATE) || v > 1e7) {
            fprintf(stderr, "servesim: %s %s: expected a rate in [%g, 1e7] requests/s%s\n", flag, value, CAP_MIN_RATE,
                    decimal_hint(value, false));
            return -1;
        }
        *(strcmp(flag, "--rate") == 0 ? &c->target : &c->max_rate) = v;
        return 0;
    }
    if (strcmp(flag, "--routers") == 0) return parse_routers(value, c);
    if (strcmp(flag, "--vary") == 0) return parse_vary(value, c);
    if (strcmp(flag, "--pd") == 0) return parse_pd(value, c);
    if (strcmp(flag, "--shard") == 0) {
        long long k, n;
        int used = 0;
        if (sscanf(value, "%lld/%lld%n", &k, &n, &used) != 2 || value[used] || n < 1 || k < 1 || k > n ||
            n > MAX_LAYOUTS) {
            fprintf(stderr, "servesim: --shard %s: expected K/N with 1 <= K <= N <= %d (the K-th of N slices)\n", value,
                    MAX_LAYOUTS);
            return -1;
        }
        c->shard = (int)(k - 1);
        c->num_shards = (int)n;
        return 0;
    }
    if (strcmp(flag, "--out") == 0) c->out = value;
    else c->quiet = true;
    return 0;
}

static const cli_opt plan_opts[] = {
    {"--slo", true}, {"--gpus", true}, {"--rate", true}, {"--max-rate", true}, {"--max-tp", true},
    {"--routers", true}, {"--vary", true}, {"--pd", true}, {"--out", true}, {"--quiet", false}, {"--shard", true},
};

/* Sets a key of a layout's scenario; messages name plan's layout as the value's origin (a
 * tensor parallelism plan chose was once blamed on --set). */
static int set(scenario *sc, char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int set(scenario *sc, char *err, size_t errlen, const char *fmt, ...)
{
    char a[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a, sizeof a, fmt, ap);
    va_end(ap);
    return scenario_set_from(sc, a, "plan's layout", err, errlen);
}

/* GPUs of layout L at UNITS replicas (aggregated) or groups of ratio_p + ratio_d instances. */
static int gpus_of(const layout *l, int units)
{
    return units * (l->ratio_p ? l->ratio_p + l->ratio_d : 1) * l->tp;
}

/* The trace's time scale that offers RATE requests/s. At the fastest replay (trace_limit)
 * the division can come out an ulp under the key's least, 1e-6, and that probe counted as not
 * served (a trace of requests 7,491 s apart, whose limit is 133.49 req/s, planned 131.5 req/s;
 * a review's find): a scale that close is the least itself. */
static double trace_scale(const plan *p, double rate)
{
    double scale = p->base->v[K_workload_trace_time_scale].d * p->trace_rate / rate;
    return scale < 1e-6 && scale > 1e-6 * (1 - 1e-9) ? 1e-6 : scale;
}

/* The scenario of layout L at UNITS (replicas, or prefill:decode groups), offered RATE requests/s. */
static int layout_scenario(const plan *p, const layout *l, int replicas, double rate, scenario *sc, char *err,
                           size_t errlen)
{
    *sc = *p->base;
    if (set(sc, err, errlen, "deployment.tensor_parallel=%d", l->tp) < 0 ||
        set(sc, err, errlen, "deployment.router=%s", router_name(l->router)) < 0)
        return -1;
    if (l->ratio_p) {
        if (set(sc, err, errlen, "deployment.replicas=1") < 0 ||
            set(sc, err, errlen, "deployment.prefill_instances=%d", replicas * l->ratio_p) < 0 ||
            set(sc, err, errlen, "deployment.decode_instances=%d", replicas * l->ratio_d) < 0)
            return -1;
    } else if (set(sc, err, errlen, "deployment.replicas=%d", replicas) < 0 ||
               set(sc, err, errlen, "deployment.prefill_instances=0") < 0 ||
               set(sc, err, errlen, "deployment.decode_instances=0") < 0) {
        return -1;
    }
    for (int k = 0; k < p->cli->nvary; k++)
        if (set(sc, err, errlen, "%s=%s", p->cli->vary[k].key, p->cli->vary[k].values[l->value[k]]) < 0) return -1;
    if (rate <= 0) return 0;
    if (p->trace_rate > 0)
        return set(sc, err, errlen, "workload.trace_time_scale=%.17g", trace_scale(p, rate));
    double n = cap_probe_requests(p->base->v[K_workload_num_requests].d, p->base->v[K_workload_rate].d, rate);
    if (n > p->base->v[K_workload_num_requests].d && set(sc, err, errlen, "workload.num_requests=%.0f", n) < 0)
        return -1;
    return set(sc, err, errlen, "workload.rate=%.17g", rate);
}

/* Runs layout CUR at REPLICAS replicas and RATE; records the point. */
static int measure(plan *p, int replicas, double rate, bool *ok, summary *sum)
{
    const layout *l = &p->lay[p->cur];
    /* a search halving toward nothing leaves the keys' range: no rate that low is served; nor
     * is a trace replayed over a million times faster, past workload.trace_time_scale's 1e-6 */
    double scale = p->trace_rate > 0 ? trace_scale(p, rate) : 1;
    if (rate < 1e-6 || scale < 1e-6 || scale > 1e6) {
        *ok = false;
        *sum = (summary){0};
        return 0;
    }
    for (int i = 0; i < p->npts; i++) /* probed before: the same deterministic answer */
        if (p->pts[i].layout == p->cur && p->pts[i].replicas == replicas && p->pts[i].rate == rate) {
            *ok = p->pts[i].served;
            *sum = p->pts[i].sum;
            return 0;
        }
    scenario sc;
    if (layout_scenario(p, l, replicas, rate, &sc, p->err, sizeof p->err) < 0) {
        p->status = EXIT_BAD_INPUT;
        return -1;
    }
    simjob j;
    /* a trace is replayed whole: never again, longer */
    if ((p->status = cap_run_probe(&sc, rate, p->cli->slo, p->cli->nslo, p->trace_rate <= 0, &j, p->err,
                                   sizeof p->err)) != EXIT_OK)
        return -1;
    char why[256] = "no request finished";
    *ok = j.have_summary && cap_served(p->cli->slo, p->cli->nslo, &j.sum, why, sizeof why);
    *sum = j.sum;
    int gpus = gpus_of(l, replicas);
    if (p->npts < MAX_POINTS)
        p->pts[p->npts++] = (point){p->cur, replicas, rate, *ok, j.have_summary && j.sum.tpot_ms.median > 0,
                                    j.sum.output_throughput / gpus,
                                    j.sum.tpot_ms.median > 0 ? 1000.0 / j.sum.tpot_ms.median : 0, j.sum};
    if (!p->cli->quiet && isatty(2))
        fprintf(stderr, "plan: tp %d x %d %s (%s), %.4g req/s: %s\n", l->tp, replicas, l->ratio_p ? "P:D groups" : "replicas",
                router_name(l->router), rate, *ok ? "served" : why);
    return 0;
}

static int probe(void *ctx, double rate, bool *ok)
{
    plan *p = ctx;
    summary s;
    if (measure(p, p->cur_replicas, rate, ok, &s) < 0) return -1;
    if (*ok && rate > p->best_rate) {
        p->best_rate = rate;
        p->best_sum = s;
    }
    return 0;
}

/* The capacity of layout CUR at REPLICAS replicas: *BEST (0: none served), with its summary. */
static int capacity(plan *p, int replicas, double *best, double *fail, summary *at, bool *have)
{
    p->cur_replicas = replicas;
    p->best_rate = 0;
    cap_search_result res;
    double start = fmin(p->trace_rate > 0 ? p->trace_rate : p->base->v[K_workload_rate].d, p->max_rate);
    if (cap_search(start * replicas, p->max_rate, 0.02, probe, p, &res) < 0) return -1;
    *best = res.best;
    *fail = res.fail;
    *have = res.best > 0 && p->best_rate == res.best;
    if (*have) *at = p->best_sum;
    return 0;
}

/* The fewest replicas of layout CUR serving the target between LO (0, or a count that does
 * not) and HI (one that does, its summary in AT): down from HI by 1, 2, 4, ... to the first
 * that does not, then halving the gap. The first guess is usually right, and one probe below
 * it confirms it; a guess far too high (one replica's capacity cut short by --max-rate) took
 * a probe a replica, each of hundreds of thousands of requests, on the way down. */
static int shrink_to_fewest(plan *p, int lo, int hi, summary at)
{
    layout *l = &p->lay[p->cur];
    bool ok;
    summary s;
    for (int step = 1; hi - step > lo; step *= 2) {
        if (measure(p, hi - step, p->cli->target, &ok, &s) < 0) return -1;
        if (!ok) {
            lo = hi - step;
            break;
        }
        hi -= step;
        at = s;
    }
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        if (measure(p, mid, p->cli->target, &ok, &s) < 0) return -1;
        if (ok) {
            hi = mid;
            at = s;
        } else {
            lo = mid;
        }
    }
    l->min_replicas = hi;
    l->at_target = at;
    return 0;
}

/* Where the capacity search served its --max-rate, the capacity is only a bound below, and
 * target / capacity a count above the answer (63 replicas for 1,000 req/s at --max-rate 16,
 * where one served 2,000): doubles from one replica to below ESTIMATE, then narrows. 1 when
 * found, 0 when none below ESTIMATE serves, -1 when a probe failed. */
static int fewest_from_one(plan *p, int estimate)
{
    bool ok;
    summary s;
    for (int r = 1; r < estimate; r *= 2) {
        if (measure(p, r, p->cli->target, &ok, &s) < 0) return -1;
        if (ok) return shrink_to_fewest(p, r / 2, r, s) < 0 ? -1 : 1;
    }
    return 0;
}

/* The fewest replicas of layout CUR that serve the target, from ESTIMATE up or down. */
static int fewest_replicas(plan *p, int estimate, int limit)
{
    layout *l = &p->lay[p->cur];
    bool ok = false;
    summary s;
    int r = estimate < 1 ? 1 : estimate > limit ? limit : estimate;
    if (measure(p, r, p->cli->target, &ok, &s) < 0) return -1;
    if (ok) return shrink_to_fewest(p, 0, r, s);
    while (r < limit) {
        /* grow by a quarter at a time: imbalance needs a few, a bad estimate many */
        int below = r;
        r += r / 4 > 1 ? r / 4 : 1;
        if (r > limit) r = limit;
        if (measure(p, r, p->cli->target, &ok, &s) < 0) return -1;
        if (ok) return shrink_to_fewest(p, below, r, s);
    }
    l->min_replicas = 0;
    return 0;
}

static void layout_name(const plan *p, const layout *l, char *out, size_t len)
{
    int n = l->ratio_p ? snprintf(out, len, "tp%d disagg %d:%d %s", l->tp, l->ratio_p, l->ratio_d, router_name(l->router))
                       : snprintf(out, len, "tp%d %s", l->tp, router_name(l->router));
    for (int k = 0; k < p->cli->nvary && n > 0 && (size_t)n < len; k++)
        n += snprintf(out + n, len - (size_t)n, " %s=%s", p->cli->vary[k].key, p->cli->vary[k].values[l->value[k]]);
}

/* Records that layout L cannot be built, and why, for plan.txt (the first MAX_LEFT_OUT; a
 * count beyond); where none can, enumerate prints them all. */
static void leave_out(plan *p, const layout *l, const char *why)
{
    if (p->nleft_out < MAX_LEFT_OUT) {
        layout_name(p, l, p->left_name[p->nleft_out], sizeof p->left_name[0]);
        snprintf(p->left_why[p->nleft_out], sizeof p->left_why[0], "%s", why);
    }
    p->nleft_out++;
}

/* The layouts left out and why, a line a reason: a TP that does not fit takes every router,
 * --pd ratio and --vary value with it. */
static void write_left_out(FILE *f, const plan *p)
{
    int kept = p->nleft_out < MAX_LEFT_OUT ? p->nleft_out : MAX_LEFT_OUT;
    for (int i = 0; i < kept; i++) {
        bool said = false;
        for (int k = 0; k < i && !said; k++) said = strcmp(p->left_why[k], p->left_why[i]) == 0;
        if (said) continue;
        fprintf(f, "  %s", p->left_name[i]);
        for (int k = i + 1; k < kept; k++)
            if (strcmp(p->left_why[k], p->left_why[i]) == 0) fprintf(f, ", %s", p->left_name[k]);
        fprintf(f, ": %s\n", p->left_why[i]);
    }
    if (p->nleft_out > MAX_LEFT_OUT) fprintf(f, "  and %d more, their reasons not kept\n", p->nleft_out - MAX_LEFT_OUT);
}

/* vLLM refuses to start an instance whose KV pool cannot hold one sequence of max_model_len
 * ("To serve at least one request with the model's max seq len ..."), so plan does not rank
 * one: writes why to WHY and returns true. A pool the user sized (kv.num_blocks) is theirs
 * to try: vLLM checks the memory, not that override; a run warns. */
static bool pool_refused(const scenario_resolved *r, char *why, size_t len)
{
    long long tokens = simjob_short_pool(r);
    if (tokens < 0 || r->kv_blocks_set) return false;
    snprintf(why, len, "its KV pool holds %lld tokens, less than one sequence of scheduler.max_model_len (%d), and "
             "vLLM refuses to start so; a scheduler.max_model_len of at most %lld plans it", tokens,
             r->sched.max_model_len, tokens);
    return true;
}

/* The most units of layout L (replicas, or prefill:decode groups) whose block pools fit the
 * memory this machine has available; INT_MAX when it cannot tell. plan --rate grows the
 * replicas as it searches, and a run past that memory is refused: the search stopped there,
 * mid-plan, with exit 2. */
static int units_memory_allows(const plan *p, const layout *l)
{
    scenario sc;
    scenario_resolved r;
    char err[1024];
    size_t avail;
    if (kb_host_memory_available(&avail, err, sizeof err) < 0 || layout_scenario(p, l, 1, 0, &sc, err, sizeof err) < 0 ||
        scenario_resolve(&sc, &r, err, sizeof err) < 0)
        return INT_MAX;
    double each = simjob_pool_bytes(&r);
    return each > 0 && (double)avail / each < INT_MAX ? (int)((double)avail / each) : INT_MAX;
}

/* The layouts: every TP the model splits by and fits at, every router, every --vary
 * combination. Layouts that cannot be built say why (leave_out). */
static int enumerate(plan *p)
{
    const plan_cli *c = p->cli;
    static const int tps[TP_CHOICES] = {1, 2, 4, 8};
    int combos = 1;
    for (int k = 0; k < c->nvary; k++) combos *= c->vary[k].n;
    for (int t = 0; t < TP_CHOICES; t++) {
        int tp = tps[t];
        if (tp > c->max_tp || (c->gpus && tp > c->gpus)) continue;
        for (int pd = -1; pd < c->npd; pd++)
        for (int ri = 0; ri < c->nrouters; ri++)
            for (int combo = 0; combo < combos; combo++) {
                layout l = {.tp = tp, .replicas = c->gpus ? (int)(c->gpus / tp) : 1, .router = c->routers[ri]};
                bool same = false; /* an aggregated layout moves no KV: one kv_transfer_* value is enough */
                for (int k = 0, rest = combo; k < c->nvary; k++) {
                    l.value[k] = rest % c->vary[k].n;
                    rest /= c->vary[k].n;
                    same |= pd < 0 && l.value[k] > 0 && moves_kv(c->vary[k].key);
                }
                if (same) continue;
                if (pd >= 0) { /* as many whole prefill:decode groups as the GPUs hold */
                    l.ratio_p = c->pd[pd][0];
                    l.ratio_d = c->pd[pd][1];
                    l.replicas = c->gpus ? (int)(c->gpus / gpus_of(&l, 1)) : 1;
                    if (l.replicas < 1) { /* in plan.txt with the others: it was on stderr alone */
                        char why[160];
                        snprintf(why, sizeof why, "--pd %d:%d at tensor parallel %d needs %d GPUs, more than --gpus %ld",
                                 l.ratio_p, l.ratio_d, tp, gpus_of(&l, 1), c->gpus);
                        leave_out(p, &l, why);
                        continue;
                    }
                }
                scenario sc;
                scenario_resolved r;
                char err[1024];
                if (layout_scenario(p, &l, l.replicas, 0, &sc, err, sizeof err) < 0) {
                    snprintf(p->err, sizeof p->err, "%s", err);
                    return -1;
                }
                job_cost jc;
                if (scenario_resolve(&sc, &r, err, sizeof err) < 0 || pool_refused(&r, err, sizeof err) ||
                    simjob_check_pool_memory(&r, err, sizeof err) < 0 || job_cost_init(&jc, &r, err, sizeof err) < 0) {
                    leave_out(p, &l, err);
                    continue;
                }
                snprintf(l.cost, sizeof l.cost, "%s", jc.kind);
                job_cost_free(&jc);
                if (p->nlay == MAX_LAYOUTS) {
                    snprintf(p->err, sizeof p->err, "more than %d layouts; fewer --vary values", MAX_LAYOUTS);
                    return -1;
                }
                p->lay[p->nlay++] = l;
            }
    }
    if (p->nlay == 0) { /* every reason, --quiet or not: they are the answer */
        fputs("plan: every layout is left out:\n", stderr);
        write_left_out(stderr, p);
        snprintf(p->err, sizeof p->err, "no layout fits (the reasons above)");
    }
    return p->nlay ? 0 : -1;
}

/* Capacity per GPU, most first; a tie (layouts that all reach --max-rate) goes to more output
 * tokens/s per GPU there, then to the faster stream (lower median TPOT): the first in
 * enumeration order was once named best (new-user trial). */
static int by_capacity_per_gpu(const layout *x, const layout *y)
{
    int gx = gpus_of(x, x->replicas), gy = gpus_of(y, y->replicas);
    double u = x->capacity / gx, v = y->capacity / gy;
    if (u != v) return (u < v) - (u > v);
    double ox = x->at.output_throughput / gx, oy = y->at.output_throughput / gy;
    if (ox != oy) return (ox < oy) - (ox > oy);
    return (x->at.tpot_ms.median > y->at.tpot_ms.median) - (x->at.tpot_ms.median < y->at.tpot_ms.median);
}

/* Served points no other served point beats on both throughput per GPU and tokens per user. */
static bool on_front(const plan *p, int i)
{
    if (!p->pts[i].served || !p->pts[i].have) return false;
    for (int k = 0; k < p->npts; k++)
        if (k != i && p->pts[k].served && p->pts[k].have && p->pts[k].tok_per_gpu >= p->pts[i].tok_per_gpu && p->pts[k].tok_per_user >= p->pts[i].tok_per_user &&
            (p->pts[k].tok_per_gpu > p->pts[i].tok_per_gpu || p->pts[k].tok_per_user > p->pts[i].tok_per_user))
            return false;
    return true;
}

static void write_plan_csv(FILE *f, const plan *p, const int *order)
{
    fputs("layout,tensor_parallel,router", f);
    for (int k = 0; k < p->cli->nvary; k++) fprintf(f, ",%s", p->cli->vary[k].key);
    fputs(",prefill_to_decode,cost_model,gpus,replicas,capacity_rps,capacity_rps_per_gpu,output_tok_s_per_gpu,tok_s_per_user,p99_ttft_ms,p99_tpot_ms", f);
    if (p->cli->target > 0) fputs(",target_rps,min_replicas,min_gpus", f);
    fputc('\n', f);
    for (int o = 0; o < p->nlay; o++) {
        const layout *l = &p->lay[order[o]];
        char name[600];
        layout_name(p, l, name, sizeof name);
        fprintf(f, "\"%s\",%d,%s", name, l->tp, router_name(l->router));
        for (int k = 0; k < p->cli->nvary; k++) fprintf(f, ",%s", p->cli->vary[k].values[l->value[k]]);
        if (l->ratio_p) fprintf(f, ",%d:%d", l->ratio_p, l->ratio_d);
        else fputs(",aggregated", f);
        fprintf(f, ",%s", l->cost);
        int gpus = gpus_of(l, l->replicas);
        if (p->cli->gpus && l->have)
            fprintf(f, ",%d,%d,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g", gpus, l->replicas, l->capacity, l->capacity / gpus,
                    l->at.output_throughput / gpus, l->at.tpot_ms.median > 0 ? 1000.0 / l->at.tpot_ms.median : 0,
                    l->at.ttft_ms.p99, l->at.tpot_ms.p99);
        else if (p->cli->gpus)
            fprintf(f, ",%d,%d,0,0,,,,", gpus, l->replicas);
        else
            fputs(",,,,,,,,", f);
        if (p->cli->target > 0) {
            if (l->min_replicas)
                fprintf(f, ",%.6g,%d,%d", p->cli->target, l->min_replicas, gpus_of(l, l->min_replicas));
            else
                fprintf(f, ",%.6g,,", p->cli->target);
        }
        fputc('\n', f);
    }
}

static void write_points(FILE *f, const plan *p, bool front_only)
{
    fputs("layout,tensor_parallel,replicas,gpus,rate,served,output_tok_s_per_gpu,tok_s_per_user\n", f);
    for (int i = 0; i < p->npts; i++) {
        if (!p->pts[i].have || (front_only && !on_front(p, i))) continue;
        const point *pt = &p->pts[i];
        const layout *l = &p->lay[pt->layout];
        char name[600];
        layout_name(p, l, name, sizeof name);
        fprintf(f, "\"%s\",%d,%d,%d,%.6g,%d,%.6g,%.6g\n", name, l->tp, pt->replicas, gpus_of(l, pt->replicas), pt->rate,
                pt->served, pt->tok_per_gpu, pt->tok_per_user);
    }
}

static void write_answer(FILE *f, const plan *p, const int *order)
{
    const plan_cli *c = p->cli;
    cap_write_slo(f, c->slo, c->nslo);
    /* each tensor-parallel size its own table, or the roofline where none is measured; where
     * --vary changes the table at one size (a GPU, a precision), each with the values it took:
     * the first layout's table alone was named for all (new-user trial) */
    char(*costs)[1400] = calloc((size_t)p->nlay, sizeof *costs);
    for (int i = 0; costs && i < p->nlay; i++) {
        scenario sc;
        char err[1024];
        if (layout_scenario(p, &p->lay[i], 1, 0, &sc, err, sizeof err) < 0) snprintf(costs[i], sizeof costs[i], "? (%s)", err);
        else job_cost_describe(&sc, costs[i], sizeof costs[i]);
    }
    for (int i = 0; costs && i < p->nlay; i++) {
        bool seen = false, differs = false;
        for (int k = 0; k < p->nlay; k++)
            if (p->lay[k].tp == p->lay[i].tp) {
                bool same = strcmp(costs[k], costs[i]) == 0;
                seen |= k < i && same;
                differs |= !same;
            }
        if (seen) continue;
        fprintf(f, "Cost model at tensor parallel %d", p->lay[i].tp);
        /* the --vary keys that set this table apart: those whose values among its layouts are
         * fewer than among all layouts of this size ("hardware.preset=h100"), each with them */
        const char *lead = ", ";
        for (int k = 0; differs && k < c->nvary; k++) {
            bool in_group[MAX_VALUES] = {false}, at_tp[MAX_VALUES] = {false};
            for (int j = 0; j < p->nlay; j++)
                if (p->lay[j].tp == p->lay[i].tp) {
                    at_tp[p->lay[j].value[k]] = true;
                    if (strcmp(costs[j], costs[i]) == 0) in_group[p->lay[j].value[k]] = true;
                }
            bool fewer = false;
            for (int v = 0; v < c->vary[k].n; v++) fewer |= at_tp[v] && !in_group[v];
            if (!fewer) continue;
            fprintf(f, "%s%s=", lead, c->vary[k].key);
            lead = " ";
            for (int v = 0, first = 1; v < c->vary[k].n; v++)
                if (in_group[v]) {
                    fprintf(f, "%s%s", first ? "" : "|", c->vary[k].values[v]);
                    first = 0;
                }
        }
        fprintf(f, ": %s\n", costs[i]);
    }
    free(costs);
    char note[700] = "";
    bool varied = false; /* the base's scheduler is not every layout's */
    for (int k = 0; k < c->nvary; k++) varied |= strncmp(c->vary[k].key, "scheduler.", 10) == 0;
    if (!varied) job_scheduler_note(p->base, note, sizeof note);
    if (*note) fprintf(f, "%s\n", note);
    bool mixed = false;
    for (int i = 1; i < p->nlay; i++) mixed |= strcmp(p->lay[i].cost, p->lay[0].cost) != 0;
    if (mixed)
        fputs("Note: measured tables price some layouts and the roofline others; the roofline runs 10-50% fast at\n"
              "tensor parallel > 1 and with FP8 (docs/cost-model.md), so compare layouts of one cost model.\n", f);
    /* the layout column as wide as its longest label (--vary values lengthen them) */
    int w = 44;
    for (int i = 0; i < p->nlay; i++) {
        char name[600];
        layout_name(p, &p->lay[i], name, sizeof name);
        int n = (int)strlen(name) + 8; /* " x 4096" */
        if (n > w) w = n;
    }
    if (c->gpus) {
        fprintf(f, "\n%-*s %-9s %6s %10s %10s %12s %10s %10s %10s\n", w, "layout on all GPUs", "cost", "GPUs", "req/s",
                "req/s/GPU", "tok/s/GPU", "tok/s/user", "TTFT p99", "TPOT p99");
        for (int o = 0; o < p->nlay; o++) {
            const layout *l = &p->lay[order[o]];
            char name[600];
            layout_name(p, l, name, sizeof name);
            int gpus = gpus_of(l, l->replicas);
            char label[700];
            snprintf(label, sizeof label, "%s x %d", name, l->replicas);
            if (!l->have) {
                fprintf(f, "%-*s %-9s %6d %10s  none served down to %.3g req/s\n", w, label, l->cost, gpus, "-", l->fail);
                continue;
            }
            fprintf(f, "%-*s %-9s %6d %10.3g %10.3g %12.0f %10.1f %10.0f %10.1f\n", w, label, l->cost, gpus, l->capacity,
                    l->capacity / gpus, l->at.output_throughput / gpus,
                    l->at.tpot_ms.median > 0 ? 1000.0 / l->at.tpot_ms.median : 0, l->at.ttft_ms.p99,
                    l->at.tpot_ms.p99);
        }
        const layout *best = &p->lay[order[0]];
        if (best->have) {
            char name[600];
            layout_name(p, best, name, sizeof name);
            fprintf(f, "Best on %ld GPU%s: %s x %d, %.4g req/s (%.3g per GPU)%s\n", c->gpus, c->gpus == 1 ? "" : "s",
                    name, best->replicas,
                    best->capacity, best->capacity / gpus_of(best, best->replicas),
                    best->fail == 0 ? p->max_rate < c->max_rate ? ", the fastest the trace replays: it may serve more"
                                                                : ", the --max-rate bound: it may serve more"
                                    : "");
        } else {
            fprintf(f, "No layout on %ld GPU%s meets the SLOs at any rate tried.\n", c->gpus, c->gpus == 1 ? "" : "s");
        }
    }
    if (c->target > 0) {
        fprintf(f, "\nFewest GPUs serving %.4g req/s:\n", c->target);
        int best = -1;
        for (int i = 0; i < p->nlay; i++) {
            const layout *l = &p->lay[i];
            char name[600];
            layout_name(p, l, name, sizeof name);
            if (!l->min_replicas && !l->replica_limit) {
                fprintf(f, "  %-*s none: %s meets the SLOs at no rate, however low\n", w, name,
                        l->ratio_p ? "a group" : "a replica");
                continue;
            }
            if (!l->min_replicas) {
                fprintf(f, "  %-*s none up to %d %s = %d GPUs%s\n", w, name, l->replica_limit,
                        l->ratio_p ? (l->replica_limit == 1 ? "group" : "groups") : l->replica_limit == 1 ? "replica" : "replicas",
                        gpus_of(l, l->replica_limit),
                        l->memory_limited ? ", the most whose block pools fit this machine's memory" : "");
                continue;
            }
            fprintf(f, "  %-*s %4d %s = %4d GPUs (TTFT p99 %.0f ms, TPOT p99 %.1f ms)\n", w, name, l->min_replicas,
                    l->ratio_p ? "groups  " : "replicas", gpus_of(l, l->min_replicas), l->at_target.ttft_ms.p99,
                    l->at_target.tpot_ms.p99);
            if (best < 0 || gpus_of(l, l->min_replicas) < gpus_of(&p->lay[best], p->lay[best].min_replicas)) best = i;
        }
        if (best >= 0) {
            char name[600];
            layout_name(p, &p->lay[best], name, sizeof name);
            fprintf(f, "Smallest: %d GPUs (%s x %d)\n", gpus_of(&p->lay[best], p->lay[best].min_replicas), name,
                    p->lay[best].min_replicas);
        } else {
            fprintf(f, "No layout serves %.4g req/s within its replica limit.\n", c->target);
        }
    }
    if (p->nleft_out) fputs("\nLeft out:\n", f);
    write_left_out(f, p);
}

static int plot_pareto(const char *dir, char *err, size_t errlen)
{
    return plot_script(dir, "pareto.png", "throughput per GPU against each user's token rate", 900, 600,
                       "set xlabel 'tokens/s per user (1000 / median TPOT)'\nset ylabel 'output tokens/s per GPU'\n"
                       "plot 'points.csv' using 'tok_s_per_user':'output_tok_s_per_gpu' with points pt 7 ps 0.6 "
                       "lc rgb '#bbbbbb' title 'probes', 'pareto.csv' using 'tok_s_per_user':'output_tok_s_per_gpu' "
                       "with linespoints pt 7 lw 2 title 'Pareto front (served)'\n",
                       err, errlen);
}

static int by_user_rate(const void *a, const void *b)
{
    const point *x = a, *y = b;
    return (x->tok_per_user > y->tok_per_user) - (x->tok_per_user < y->tok_per_user);
}

static int write_outputs(plan *p, const char *out, char *err, size_t errlen)
{
    int order[MAX_LAYOUTS];
    for (int i = 0; i < p->nlay; i++) order[i] = i;
    /* rank by capacity per GPU, stably (ties keep the enumeration's order) */
    for (int i = 1; p->cli->gpus && i < p->nlay; i++)
        for (int j = i; j > 0 && by_capacity_per_gpu(&p->lay[order[j - 1]], &p->lay[order[j]]) > 0; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    /* the front's points in order of user rate, so the plot draws a line */
    qsort(p->pts, (size_t)p->npts, sizeof *p->pts, by_user_rate);
    outdir od;
    if (od_open(&od, out, err, errlen) < 0) return -1;
    const struct { const char *name; int what; } files[] = {{"plan.csv", 0}, {"points.csv", 1}, {"pareto.csv", 2}, {"plan.txt", 3}};
    int status = 0;
    for (size_t i = 0; i < sizeof files / sizeof *files && status == 0; i++) {
        FILE *f = od_fopen(&od, files[i].name, err, errlen);
        if (!f) {
            status = -1;
            break;
        }
        if (files[i].what == 0) write_plan_csv(f, p, order);
        else if (files[i].what == 3) write_answer(f, p, order);
        else write_points(f, p, files[i].what == 2);
        status = od_fclose(f, files[i].name, err, errlen);
    }
    bool any = false;
    for (int i = 0; i < p->npts; i++) any |= p->pts[i].have;
    if (status == 0 && any) status = plot_pareto(od.tmp_path, err, errlen);
    if (status == 0) status = od_commit(&od, err, errlen);
    if (status < 0) {
        od_abort(&od);
        return -1;
    }
    if (!p->cli->quiet) {
        write_answer(stdout, p, order);
        printf("Results in %s/\n", out);
    }
    return 0;
}

/* ---- shards: --shard K/N writes plan-shard.json; plan_merge joins them ---- */

/* What makes two plan runs one search: the scenario after every --set, each search option and
 * the layouts they give (FNV-1a of their text). Shards of another search are refused. */
static uint64_t plan_identity(const plan *p)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return 0;
    json_t *base = scenario_json(p->base);
    if (base) json_write(f, base);
    json_decref(base);
    const plan_cli *c = p->cli;
    fprintf(f, "gpus %ld rate %.17g max_tp %ld max_rate %.17g\n", c->gpus, c->target, c->max_tp, c->max_rate);
    for (int i = 0; i < c->nslo; i++) fprintf(f, "slo %d %.17g\n", c->slo[i].field, c->slo[i].limit);
    for (int i = 0; i < c->nrouters; i++) fprintf(f, "router %s\n", router_name(c->routers[i]));
    for (int i = 0; i < c->npd; i++) fprintf(f, "pd %d:%d\n", c->pd[i][0], c->pd[i][1]);
    for (int k = 0; k < c->nvary; k++) {
        fprintf(f, "vary %s", c->vary[k].key);
        for (int v = 0; v < c->vary[k].n; v++) fprintf(f, ",%s", c->vary[k].values[v]);
        fputc('\n', f);
    }
    for (int i = 0; i < p->nlay; i++) {
        char name[600];
        layout_name(p, &p->lay[i], name, sizeof name);
        fprintf(f, "layout %s x %d %s\n", name, p->lay[i].replicas, p->lay[i].cost);
    }
    fclose(f);
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)buf[i]) * 1099511628211ULL;
    free(buf);
    return h;
}

/* Doubles travel as "%.17g" strings: json_write keeps 10 digits, and the merge must rank and
 * print exactly what one run would. */
static json_t *exact(double v)
{
    char b[40];
    snprintf(b, sizeof b, "%.17g", v);
    return json_string(b);
}

static int read_exact(const json_t *v, double *out)
{
    const char *s = json_string_value(v);
    char *end;
    if (!s) return -1;
    errno = 0;
    *out = strtod(s, &end);
    /* every number a shard records is a rate, a throughput or a latency: "nan" or "-1" in an
     * edited shard went into plan.csv and the answer */
    return end == s || *end || errno || !isfinite(*out) || *out < 0 ? -1 : 0;
}

/* A latency may have no sample (one-token outputs have no TPOT): "nan", written as exact()
 * writes NAN; a shard with one could not be merged (a review's find). */
static int read_latency(const json_t *v, double *out)
{
    const char *s = json_string_value(v);
    if (s && (strcmp(s, "nan") == 0 || strcmp(s, "-nan") == 0)) {
        *out = NAN;
        return 0;
    }
    return read_exact(v, out);
}

/* The shard's command line without --shard, --out and --quiet: what the merge re-parses. */
static int put_args(json_t *doc, const plan_cli *c)
{
    json_t *a = json_put_array(doc, "args");
    if (!a) return -1;
    for (int i = 1; i < c->argc; i++) {
        const char *s = c->argv[i];
        if (strcmp(s, "--quiet") == 0 || strcmp(s, "-q") == 0 || strncmp(s, "--shard=", 8) == 0 ||
            strncmp(s, "--out=", 6) == 0)
            continue;
        if (strcmp(s, "--shard") == 0 || strcmp(s, "--out") == 0) {
            i++;
            continue;
        }
        if (json_array_append_new(a, json_text(s)) < 0) return -1;
    }
    return 0;
}

static int write_shard(plan *p, const char *out, char *err, size_t errlen)
{
    const plan_cli *c = p->cli;
    char id[32], cwd[4096];
    snprintf(id, sizeof id, "%016llx", (unsigned long long)plan_identity(p));
    if (!getcwd(cwd, sizeof cwd)) snprintf(cwd, sizeof cwd, "(unknown)");
    json_t *doc = json_object(), *lays = NULL, *pts = NULL;
    int bad = !doc || json_put(doc, "plan_id", json_string(id)) | json_put(doc, "shard", json_integer(c->shard + 1)) |
              json_put(doc, "num_shards", json_integer(c->num_shards)) |
              json_put(doc, "layouts_total", json_integer(p->nlay)) | json_put(doc, "cwd", json_text(cwd)) |
              put_args(doc, c) | !(lays = json_put_array(doc, "layouts")) | !(pts = json_put_array(doc, "points"));
    for (int i = 0; !bad && i < p->nlay; i++) {
        if (i % c->num_shards != c->shard) continue;
        const layout *l = &p->lay[i];
        json_t *o = json_object(), *at = json_array(), *tg = json_array();
        bad = !o || !at || !tg || json_put(o, "index", json_integer(i)) | json_put(o, "capacity", exact(l->capacity)) |
              json_put(o, "fail", exact(l->fail)) | json_put(o, "have", json_boolean(l->have)) |
              json_put(o, "min_replicas", json_integer(l->min_replicas)) |
              json_put(o, "replica_limit", json_integer(l->replica_limit)) |
              json_put(o, "memory_limited", json_boolean(l->memory_limited)) |
              json_array_append_new(at, exact(l->at.output_throughput)) | json_array_append_new(at, exact(l->at.tpot_ms.median)) |
              json_array_append_new(at, exact(l->at.ttft_ms.p99)) | json_array_append_new(at, exact(l->at.tpot_ms.p99)) |
              json_array_append_new(tg, exact(l->at_target.ttft_ms.p99)) |
              json_array_append_new(tg, exact(l->at_target.tpot_ms.p99)) | json_put(o, "at", at) |
              json_put(o, "at_target", tg) | json_array_append_new(lays, o);
    }
    for (int i = 0; !bad && i < p->npts; i++) {
        const point *pt = &p->pts[i];
        json_t *o = json_object();
        bad = !o || json_put(o, "layout", json_integer(pt->layout)) | json_put(o, "replicas", json_integer(pt->replicas)) |
              json_put(o, "rate", exact(pt->rate)) | json_put(o, "served", json_boolean(pt->served)) |
              json_put(o, "have", json_boolean(pt->have)) | json_put(o, "tok_per_gpu", exact(pt->tok_per_gpu)) |
              json_put(o, "tok_per_user", exact(pt->tok_per_user)) | json_array_append_new(pts, o);
    }
    if (bad) {
        json_decref(doc);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    outdir od;
    if (od_open(&od, out, err, errlen) < 0) {
        json_decref(doc);
        return -1;
    }
    FILE *f = od_fopen(&od, "plan-shard.json", err, errlen);
    int status = f ? 0 : -1;
    if (f && json_write(f, doc) < 0) status = -1;
    if (f && od_fclose(f, "plan-shard.json", err, errlen) < 0) status = -1;
    json_decref(doc);
    if (status == 0) status = od_commit(&od, err, errlen);
    if (status < 0) {
        od_abort(&od);
        return -1;
    }
    if (!c->quiet) {
        int mine = (p->nlay - c->shard + c->num_shards - 1) / c->num_shards;
        printf("%d of %d layouts in %s/plan-shard.json; join the %d shards with `servesim merge OUT DIR...`\n", mine,
               p->nlay, out, c->num_shards);
    }
    return 0;
}

/* The fastest a trace replays: workload.trace_time_scale goes down to 1e-6, a million times
 * faster than its file's times. A sparse trace searched past it was a rate no probe could serve,
 * which capped its capacity just below, with no word (stop 34's leftover). */
static double trace_limit(const plan *p)
{
    return p->trace_rate / 1e-6 * p->base->v[K_workload_trace_time_scale].d;
}

/* A trace's own rate: its requests over the span of their arrivals (as scaled by the scenario). */
static int trace_rate(const scenario *sc, double *rate, char *err, size_t errlen)
{
    scenario_resolved r;
    workload w;
    if (scenario_resolve(sc, &r, err, errlen) < 0 || wl_build(&r.workload, &w, err, errlen) < 0) return -1;
    double span = w.n > 1 ? w.reqs[w.n - 1].arrival_time - w.reqs[0].arrival_time : 0;
    *rate = span > 0 ? (double)(w.n - 1) / span : 0;
    wl_free(&w);
    if (*rate > 0) return 0;
    snprintf(err, errlen, "%s: the trace's requests all arrive at once: no rate to scale", sc->path);
    return -1;
}

static int run_plan(plan *p)
{
    if (enumerate(p) < 0) return -1;
    const plan_cli *c = p->cli;
    for (p->cur = 0; p->cur < p->nlay; p->cur++) {
        layout *l = &p->lay[p->cur];
        if (p->cur % c->num_shards != c->shard) continue;
        double per_replica = 0, fail = 0;
        if (c->gpus) {
            if (capacity(p, l->replicas, &l->capacity, &l->fail, &l->at, &l->have) < 0) return -1;
            per_replica = l->capacity / l->replicas;
            fail = l->fail;
        }
        if (c->target > 0) {
            if (!c->gpus) { /* one replica's capacity guesses how many the target needs */
                summary s;
                bool have;
                if (capacity(p, 1, &per_replica, &fail, &s, &have) < 0) return -1;
            }
            int limit = 4096 / gpus_of(l, 1), fit = units_memory_allows(p, l);
            l->memory_limited = fit < limit;
            if (fit < limit) limit = fit > 1 ? fit : 1; /* enumerate checked one unit's pools */
            l->replica_limit = limit;
            if (per_replica <= 0) {
                /* a replica that meets the SLOs at no rate, however low, fails them on requests
                 * alone, which no number of replicas changes: searched, it ran up to the limit */
                l->replica_limit = 0;
                l->min_replicas = 0;
                continue;
            }
            int estimate = (int)fmin(ceil(c->target / per_replica), limit);
            if (fail == 0) { /* --max-rate served: a capacity that low bound, an estimate too high */
                int found;
                if ((found = fewest_from_one(p, estimate)) < 0) return -1;
                if (found) continue;
            }
            if (fewest_replicas(p, estimate, limit) < 0) return -1;
        }
    }
    return 0;
}

/* Parses a plan command line into SC and C, and checks what needs no run; EXIT_OK or the
 * status to exit with (the message printed). */
/* An API server in front (frontend.*) is modelled for one instance: layouts with replicas
 * would each be refused, and the plan would quietly leave them all out. */
static int plan_refuses_frontend(const scenario *sc, const char *vary_key, const char *vary_value)
{
    scenario_key k = scenario_frontend_key(sc);
    if (k == K_COUNT && sc->v[K_frontend_servers].i > 1) k = K_frontend_servers;
    if (k == K_COUNT) return 0;
    char label[400];
    if (vary_key) snprintf(label, sizeof label, "--vary %s=%s", vary_key, vary_value);
    else scenario_key_label(sc, k, label, sizeof label);
    fprintf(stderr, "servesim: %s: an API server in front (frontend.*) is modelled for one instance, and plan varies "
                    "the replicas; leave the frontend out of plan\n", label);
    return -1;
}

static int plan_parse(int argc, char **argv, scenario *sc, plan_cli *c)
{
    *c = (plan_cli){.max_rate = 100000, .max_tp = 8, .routers = {ROUTER_LEAST_OUTSTANDING}, .nrouters = 1,
                    .num_shards = 1, .argc = argc, .argv = argv};
    if (study_parse_args(argc, argv, plan_usage, plan_opts, sizeof plan_opts / sizeof *plan_opts, sc, on_plan_opt, c) < 0)
        return EXIT_BAD_INPUT;
    if (!c->gpus && !(c->target > 0)) {
        fprintf(stderr, "servesim: plan needs --gpus N (the best layout on N GPUs), --rate R (the fewest GPUs for R "
                        "req/s), or both\n%s", plan_usage);
        return EXIT_BAD_INPUT;
    }
    /* a key also given on the command line (--set) was replaced by the --vary values without a
     * word, as sweep's was (a new user's trial); a scenario file's value is there to vary */
    for (int k = 0; k < c->nvary; k++)
        for (int key = 0; key < K_COUNT; key++)
            if (strcmp(sweep_key_name(key), c->vary[k].key) == 0 && scenario_from_command_line(sc, (scenario_key)key)) {
                fprintf(stderr, "servesim: --vary %s=", c->vary[k].key);
                for (int v = 0; v < c->vary[k].n; v++) fprintf(stderr, "%s%s", v ? "," : "", c->vary[k].values[v]);
                fprintf(stderr, ": %s is also set by %s, whose value the --vary values would replace; give it once\n",
                        c->vary[k].key, sc->v[key].origin);
                return EXIT_BAD_INPUT;
            }
    for (int k = 0; k < c->nvary; k++) /* every value a scenario takes, before any run */
        for (int v = 0; v < c->vary[k].n; v++) {
            scenario probe = *sc;
            char err[1024];
            if (set(&probe, err, sizeof err, "%s=%s", c->vary[k].key, c->vary[k].values[v]) < 0) {
                const char *why = strstr(err, ": ");
                fprintf(stderr, "servesim: --vary %s=%s: %s\n", c->vary[k].key, c->vary[k].values[v], why ? why + 2 : err);
                return EXIT_BAD_INPUT;
            }
            if (plan_refuses_frontend(&probe, c->vary[k].key, c->vary[k].values[v]) < 0) return EXIT_BAD_INPUT;
        }
    if (plan_refuses_frontend(sc, NULL, NULL) < 0) return EXIT_BAD_INPUT;
    for (int k = 0; k < c->nvary; k++)
        if (!c->npd && moves_kv(c->vary[k].key)) {
            fprintf(stderr, "servesim: --vary %s: only disaggregated layouts (--pd) move KV; without --pd every value "
                            "gives the same layouts\n", c->vary[k].key);
            return EXIT_BAD_INPUT;
        }
    /* the deployment plan chooses itself: a value the scenario gives is not used, and said so */
    for (size_t i = 0; i < sizeof plan_chosen / sizeof *plan_chosen && !c->quiet; i++)
        if (strcmp(sc->v[plan_chosen[i]].origin, "default") != 0) {
            char label[400];
            scenario_key_label(sc, plan_chosen[i], label, sizeof label);
            fprintf(stderr, "plan: %s is not used: plan chooses the deployment itself (--max-tp, --gpus, --rate, "
                            "--routers, --pd)\n", label);
        }
    const char *arrival = sc->v[K_workload_arrival].s;
    if (strcmp(arrival, "closed") == 0 || strcmp(arrival, "all_at_once") == 0) {
        fprintf(stderr, "servesim: plan varies the arrival rate, but workload.arrival is %s (%s): use poisson, gamma, "
                        "constant or a trace\n", arrival, sc->v[K_workload_arrival].origin);
        return EXIT_BAD_INPUT;
    }
    return EXIT_OK;
}

static void plan_free(plan *p)
{
    if (!p) return;
    free(p->pts);
    free(p->lay);
    free(p);
}

/* A plan of SC and C with room for every layout and point, its trace's rate read; NULL with
 * the message printed and *STATUS set. */
static plan *plan_new(const scenario *sc, const plan_cli *c, int *status)
{
    plan *p = calloc(1, sizeof *p);
    layout *lay = calloc(MAX_LAYOUTS, sizeof *lay);
    point *pts = calloc(MAX_POINTS, sizeof *pts);
    if (!p || !lay || !pts) {
        free(p);
        free(lay);
        free(pts);
        fprintf(stderr, "servesim: out of memory\n");
        *status = EXIT_FAILURE_OTHER;
        return NULL;
    }
    *p = (plan){.base = sc, .cli = c, .lay = lay, .pts = pts, .status = EXIT_OK, .max_rate = c->max_rate};
    if (strcmp(sc->v[K_workload_arrival].s, "trace") == 0 && trace_rate(sc, &p->trace_rate, p->err, sizeof p->err) < 0) {
        fprintf(stderr, "servesim: %s\n", p->err);
        *status = EXIT_BAD_INPUT;
        plan_free(p);
        return NULL;
    }
    if (p->trace_rate > 0 && trace_limit(p) < p->max_rate) p->max_rate = trace_limit(p);
    if (p->trace_rate > 0 && c->target > trace_limit(p)) {
        fprintf(stderr, "servesim: --rate %.6g: the trace replays at %.6g req/s at most (%.4g req/s as written, up to a "
                        "million times faster: workload.trace_time_scale's least, 0.000001)\n", c->target, trace_limit(p),
                p->trace_rate * p->base->v[K_workload_trace_time_scale].d);
        *status = EXIT_BAD_INPUT;
        plan_free(p);
        return NULL;
    }
    return p;
}

/* A file a --vary value names (workload.trace, hardware.cost_table) inside OUT: the result
 * replacing OUT would delete it. A value the scenario refuses is plan_new's to name. */
static int check_vary_inputs(const scenario *base, const plan_cli *c, const char *out, char *err, size_t errlen)
{
    for (int k = 0; k < c->nvary; k++)
        for (int v = 0; v < c->vary[k].n; v++) {
            scenario sc = *base;
            char why[1600];
            if (set(&sc, why, sizeof why, "%s=%s", c->vary[k].key, c->vary[k].values[v]) < 0 ||
                scenario_check_inputs(&sc, out, why, sizeof why) == 0)
                continue;
            snprintf(err, errlen, "--out %s (--vary %s)", why, c->vary[k].key);
            return -1;
        }
    return 0;
}

int cmd_plan(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(plan_usage, stdout);
        return EXIT_OK;
    }
    plan_cli c;
    scenario sc;
    int status = plan_parse(argc, argv, &sc, &c);
    char out[1200], err[2048];
    if (status == EXIT_OK &&
        (scenario_out_dir(&sc, c.out, c.num_shards > 1 ? "plan-shard" : "plan", out, sizeof out, err, sizeof err) < 0 ||
         check_vary_inputs(&sc, &c, out, err, sizeof err) < 0)) {
        fprintf(stderr, "servesim: %s\n", err);
        status = EXIT_BAD_INPUT;
    }
    plan *p = status == EXIT_OK ? plan_new(&sc, &c, &status) : NULL;
    if (!p) return status;
    if (run_plan(p) < 0) {
        fprintf(stderr, "servesim: %s\n", p->err);
        status = p->status != EXIT_OK ? p->status : EXIT_BAD_INPUT;
    }
    if (status == EXIT_OK &&
        (c.num_shards > 1 ? write_shard(p, out, err, sizeof err) : write_outputs(p, out, err, sizeof err)) < 0) {
        fprintf(stderr, "servesim: %s\n", err);
        status = EXIT_FAILURE_OTHER;
    }
    plan_free(p);
    return status;
}

/* DIR/plan-shard.json as a JSON object, or NULL with the reason in ERR. */
static json_t *read_shard(const char *dir, char *err, size_t errlen)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/plan-shard.json", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open (is %s a `plan --shard` output directory?)", path, dir);
        return NULL;
    }
    json_error_t je;
    json_t *doc = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
    fclose(f);
    if (!doc) snprintf(err, errlen, "%s:%d: not valid JSON: %s", path, je.line, je.text);
    else if (!json_is_object(doc) || !json_is_array(json_object_get(doc, "args")) ||
             !json_is_array(json_object_get(doc, "layouts")) || !json_is_array(json_object_get(doc, "points")) ||
             !json_string_value(json_object_get(doc, "plan_id")) || !json_is_integer(json_object_get(doc, "shard")) ||
             !json_is_integer(json_object_get(doc, "num_shards"))) {
        snprintf(err, errlen, "%s: not a plan shard (plan_id, shard, num_shards, args, layouts and points expected)", path);
        json_decref(doc);
        doc = NULL;
    }
    return doc;
}

/* One shard's layouts into P (each exactly once, in its slice) and its points onto TMP. */
static int load_shard(plan *p, const json_t *doc, const char *dir, bool *loaded, point *tmp, int *ntmp, char *err,
                      size_t errlen)
{
    int k = (int)json_integer_value(json_object_get(doc, "shard")) - 1;
    int n = (int)json_integer_value(json_object_get(doc, "num_shards"));
    size_t i;
    json_t *o;
    if (json_integer_value(json_object_get(doc, "layouts_total")) != p->nlay) {
        snprintf(err, errlen, "%s/plan-shard.json: layouts_total is not the %d layouts its command line makes", dir,
                 p->nlay);
        return -1;
    }
    json_array_foreach(json_object_get(doc, "layouts"), i, o) {
        json_t *idx = json_object_get(o, "index"), *at = json_object_get(o, "at"), *tg = json_object_get(o, "at_target");
        int x = json_is_integer(idx) ? (int)json_integer_value(idx) : -1;
        if (x < 0 || x >= p->nlay || x % n != k || json_array_size(at) != 4 || json_array_size(tg) != 2) {
            snprintf(err, errlen, "%s/plan-shard.json: layout entry %zu is not one of shard %d/%d's", dir, i, k + 1, n);
            return -1;
        }
        if (loaded[x]) {
            snprintf(err, errlen, "%s/plan-shard.json: layout %d is in two shards", dir, x);
            return -1;
        }
        layout *l = &p->lay[x];
        l->at = (summary){0};
        l->at_target = (summary){0};
        if (read_exact(json_object_get(o, "capacity"), &l->capacity) < 0 || read_exact(json_object_get(o, "fail"), &l->fail) < 0 ||
            read_exact(json_array_get(at, 0), &l->at.output_throughput) < 0 ||
            read_latency(json_array_get(at, 1), &l->at.tpot_ms.median) < 0 ||
            read_latency(json_array_get(at, 2), &l->at.ttft_ms.p99) < 0 ||
            read_latency(json_array_get(at, 3), &l->at.tpot_ms.p99) < 0 ||
            read_latency(json_array_get(tg, 0), &l->at_target.ttft_ms.p99) < 0 ||
            read_latency(json_array_get(tg, 1), &l->at_target.tpot_ms.p99) < 0 ||
            !json_is_boolean(json_object_get(o, "have")) || !json_is_integer(json_object_get(o, "min_replicas")) ||
            !json_is_integer(json_object_get(o, "replica_limit")) || !json_is_boolean(json_object_get(o, "memory_limited"))) {
            snprintf(err, errlen, "%s/plan-shard.json: layout %d: a number is missing or malformed", dir, x);
            return -1;
        }
        l->have = json_is_true(json_object_get(o, "have"));
        json_int_t min = json_integer_value(json_object_get(o, "min_replicas"));
        json_int_t limit = json_integer_value(json_object_get(o, "replica_limit"));
        l->memory_limited = json_is_true(json_object_get(o, "memory_limited"));
        /* what a search can give: a capacity up to --max-rate, replicas up to the limit */
        if (l->capacity > p->cli->max_rate || limit < 0 || limit > 4096 / gpus_of(l, 1) || min < 0 || min > limit ||
            (p->cli->gpus == 0 && l->capacity > 0) || (p->cli->target <= 0 && (min || limit))) {
            snprintf(err, errlen, "%s/plan-shard.json: layout %d: a capacity or replica count no search of this plan "
                     "gives", dir, x);
            return -1;
        }
        l->min_replicas = (int)min;
        l->replica_limit = (int)limit;
        loaded[x] = true;
    }
    json_array_foreach(json_object_get(doc, "points"), i, o) {
        point pt = {0};
        json_t *lx = json_object_get(o, "layout"), *r = json_object_get(o, "replicas");
        if (*ntmp == MAX_POINTS || !json_is_integer(lx) || !json_is_integer(r) ||
            read_exact(json_object_get(o, "rate"), &pt.rate) < 0 || read_exact(json_object_get(o, "tok_per_gpu"), &pt.tok_per_gpu) < 0 ||
            read_exact(json_object_get(o, "tok_per_user"), &pt.tok_per_user) < 0 || !json_is_boolean(json_object_get(o, "served")) ||
            !json_is_boolean(json_object_get(o, "have"))) {
            snprintf(err, errlen, "%s/plan-shard.json: point %zu is malformed (or more than %d points)", dir, i, MAX_POINTS);
            return -1;
        }
        pt.layout = (int)json_integer_value(lx);
        pt.replicas = (int)json_integer_value(r);
        pt.served = json_is_true(json_object_get(o, "served"));
        pt.have = json_is_true(json_object_get(o, "have"));
        if (pt.layout < 0 || pt.layout >= p->nlay || pt.layout % n != k) {
            snprintf(err, errlen, "%s/plan-shard.json: point %zu belongs to no layout of shard %d/%d", dir, i, k + 1, n);
            return -1;
        }
        if (pt.replicas < 1 || pt.replicas > 4096 / gpus_of(&p->lay[pt.layout], 1) || pt.rate <= 0 ||
            pt.rate > fmax(p->cli->max_rate, p->cli->target)) {
            snprintf(err, errlen, "%s/plan-shard.json: point %zu: a rate or replica count no search of this plan "
                     "probes", dir, i);
            return -1;
        }
        tmp[(*ntmp)++] = pt;
    }
    /* every layout is probed at least once: one without a probe was emptied by hand (unless
     * the plan's store of probes filled up, and later ones went unrecorded) */
    for (int x = k; x < p->nlay && json_array_size(json_object_get(doc, "points")) < MAX_POINTS; x += n) {
        bool probed = false;
        for (int j = 0; j < *ntmp && !probed; j++) probed = tmp[j].layout == x;
        if (!probed && loaded[x]) {
            snprintf(err, errlen, "%s/plan-shard.json: layout %d has no probe; every search probes", dir, x);
            return -1;
        }
    }
    return 0;
}

int plan_merge(const char *out, char **dirs, int ndirs)
{
    char err[2048];
    json_t *first = read_shard(dirs[0], err, sizeof err);
    if (!first) {
        fprintf(stderr, "servesim: %s\n", err);
        return EXIT_BAD_INPUT;
    }
    /* the first shard's command line, parsed again: the same enumeration of layouts */
    json_t *args = json_object_get(first, "args");
    int argc = (int)json_array_size(args) + 1;
    char **argv = calloc((size_t)argc + 1, sizeof *argv);
    bool *loaded = calloc(MAX_LAYOUTS, sizeof *loaded), *seen = calloc(MAX_LAYOUTS + 1, sizeof *seen);
    point *tmp = calloc(MAX_POINTS, sizeof *tmp);
    int status = EXIT_OK, ntmp = 0;
    plan *p = NULL;
    plan_cli c;
    scenario sc;
    if (!argv || !loaded || !seen || !tmp) {
        fprintf(stderr, "servesim: out of memory\n");
        status = EXIT_FAILURE_OTHER;
        goto done;
    }
    argv[0] = "plan";
    for (int i = 1; i < argc; i++) argv[i] = (char *)json_string_value(json_array_get(args, (size_t)i - 1));
    for (int i = 1; i < argc; i++)
        if (!argv[i]) {
            fprintf(stderr, "servesim: %s/plan-shard.json: args must be strings\n", dirs[0]);
            status = EXIT_BAD_INPUT;
            goto done;
        }
    status = plan_parse(argc, argv, &sc, &c);
    if (status == EXIT_OK) p = plan_new(&sc, &c, &status);
    if (!p) {
        fprintf(stderr, "servesim: merge: %s/plan-shard.json's command line (run in %s) failed as above\n", dirs[0],
                json_string_value(json_object_get(first, "cwd")) ? json_string_value(json_object_get(first, "cwd")) : "?");
        goto done;
    }
    c.quiet = true; /* the shards said what they left out */
    if (enumerate(p) < 0) {
        fprintf(stderr, "servesim: %s\n", p->err);
        status = EXIT_BAD_INPUT;
        goto done;
    }
    c.quiet = false;
    char id[32];
    snprintf(id, sizeof id, "%016llx", (unsigned long long)plan_identity(p));
    int n = (int)json_integer_value(json_object_get(first, "num_shards"));
    for (int d = 0; d < ndirs && status == EXIT_OK; d++) {
        json_t *doc = d == 0 ? json_incref(first) : read_shard(dirs[d], err, sizeof err);
        int k = doc ? (int)json_integer_value(json_object_get(doc, "shard")) : 0;
        if (!doc) {
            status = EXIT_BAD_INPUT;
        } else if (strcmp(json_string_value(json_object_get(doc, "plan_id")), id) != 0) {
            if (d == 0)
                snprintf(err, sizeof err, "%s/plan-shard.json: plan %s, but its command line makes plan %s here: the "
                         "scenario (or a file it names) changed since the shard ran, or this is not where it ran",
                         dirs[d], json_string_value(json_object_get(doc, "plan_id")), id);
            else
                snprintf(err, sizeof err, "%s/plan-shard.json: plan %s, but %s is of plan %s: shards of two searches "
                         "(another scenario, --set, --gpus, --rate, --slo, --routers, --pd or --vary)", dirs[d],
                         json_string_value(json_object_get(doc, "plan_id")), dirs[0], id);
            status = EXIT_BAD_INPUT;
        } else if (json_integer_value(json_object_get(doc, "num_shards")) != n || k < 1 || k > n || n > MAX_LAYOUTS) {
            snprintf(err, sizeof err, "%s/plan-shard.json: shard %d of %lld, but the first is one of %d", dirs[d], k,
                     (long long)json_integer_value(json_object_get(doc, "num_shards")), n);
            status = EXIT_BAD_INPUT;
        } else if (seen[k]) {
            snprintf(err, sizeof err, "%s/plan-shard.json: shard %d/%d given twice", dirs[d], k, n);
            status = EXIT_BAD_INPUT;
        } else if (load_shard(p, doc, dirs[d], loaded, tmp, &ntmp, err, sizeof err) < 0) {
            status = EXIT_BAD_INPUT;
        }
        if (doc) seen[k > 0 && k <= MAX_LAYOUTS ? k : 0] = true;
        json_decref(doc);
    }
    for (int k = 1; status == EXIT_OK && k <= n; k++)
        if (!seen[k] && k - 1 < p->nlay) {
            /* the layouts it holds, as many as there are (a list of two named a layout past the last) */
            int len = snprintf(err, sizeof err, "shard %d/%d is missing (layout%s", k, n, k - 1 + n < p->nlay ? "s" : "");
            for (int i = k - 1, said = 0; i < p->nlay; i += n, said++) {
                if (said == 3) {
                    len += snprintf(err + len, sizeof err - (size_t)len, ", ...");
                    break;
                }
                len += snprintf(err + len, sizeof err - (size_t)len, "%s %d", said ? "," : "", i);
            }
            snprintf(err + len, sizeof err - (size_t)len, ")");
            status = EXIT_BAD_INPUT;
        }
    for (int i = 0; status == EXIT_OK && i < p->nlay; i++)
        if (!loaded[i]) {
            snprintf(err, sizeof err, "layout %d is in no shard", i);
            status = EXIT_BAD_INPUT;
        }
    if (status != EXIT_OK) {
        if (status == EXIT_BAD_INPUT) fprintf(stderr, "servesim: merge: %s\n", err);
        goto done;
    }
    /* the points in the order one run makes them: layout by layout, each in probe order */
    for (int l = 0; l < p->nlay; l++)
        for (int i = 0; i < ntmp; i++)
            if (tmp[i].layout == l) p->pts[p->npts++] = tmp[i];
    if (write_outputs(p, out, err, sizeof err) < 0) {
        fprintf(stderr, "servesim: %s\n", err);
        status = EXIT_FAILURE_OTHER;
    }
done:
    plan_free(p);
    free(tmp);
    free(seen);
    free(loaded);
    free(argv);
    json_decref(first);
    return status;
}
