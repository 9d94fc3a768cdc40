/* The capacity search (study/capacity.h): SLOs parsed from --slo, and the highest rate a
 * deployment serves within them. */
#include "study/capacity.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/decimal.h"
#include "metrics/sumfield.h"

/* The summary field an SLO of NAME[0..len) limits: a latency statistic, as METRIC_STAT_ms
 * ("ttft_p99_ms") or as the summary names it (STAT_METRIC_ms, "p99_ttft_ms"); -1 for
 * anything else: a statistic the summary does not keep ("ttft_p99.9_ms" once read as P99,
 * its ".9" dropped) or a field that is not a latency ("request_throughput" once passed as
 * an upper bound). */
static int slo_field(const char *name, size_t len)
{
    static const char *const latencies[] = {
#define S(name, type, csv, label, what)
#define L(name, title, abbrev, what) #name,
        SUMMARY_FIELDS(S, L)
#undef S
#undef L
    };
    char buf[64], a[16], b[16];
    int used = 0;
    if (len >= sizeof buf) return -1;
    snprintf(buf, sizeof buf, "%.*s", (int)len, name);
    if (sscanf(buf, "%15[a-z0-9]_%15[a-z0-9]_ms%n", a, b, &used) != 2 || (size_t)used != len) return -1;
    for (size_t i = 0; i < sizeof latencies / sizeof *latencies; i++) {
        char field[64];
        if (strcmp(a, latencies[i]) == 0) snprintf(field, sizeof field, "%s_%s_ms", b, a);
        else if (strcmp(b, latencies[i]) == 0) snprintf(field, sizeof field, "%s_%s_ms", a, b);
        else continue;
        return sumf_find(field);
    }
    return -1;
}

int cap_parse_slo(const char *spec, cap_slo *out, int *n, char *err, size_t errlen)
{
    if (!spec[0]) { /* it ran without a limit, as if --slo had not been given */
        snprintf(err, errlen, "--slo \"\": no objective; give METRIC=LIMIT, e.g. ttft_p99_ms=500, or leave --slo out");
        return -1;
    }
    for (const char *p = spec; *p;) {
        size_t len = strcspn(p, ","), klen = strcspn(p, "=");
        char *end;
        if (klen >= len) {
            snprintf(err, errlen, "--slo %s: expected METRIC=LIMIT, e.g. ttft_p99_ms=500", spec);
            return -1;
        }
        int f = slo_field(p, klen);
        double limit = decimal_strtod(p + klen + 1, &end);
        if (f < 0 || end != p + len || !(limit > 0) || !isfinite(limit)) {
            char limit_text[64];
            snprintf(limit_text, sizeof limit_text, "%.*s", (int)(len - klen - 1 < 63 ? len - klen - 1 : 63), p + klen + 1);
            snprintf(err, errlen, "--slo %s: \"%.*s\" %s%s", spec, (int)len, p,
                     f < 0 ? "is not an SLO (ttft|tpot|itl|e2el _ mean|median|p90|p99 _ms)"
                           : "needs a finite limit > 0",
                     f < 0 ? "" : decimal_hint(limit_text, false));
            return -1;
        }
        for (int i = 0; i < *n; i++)
            if (out[i].field == f) { /* two limits of one metric: which one was meant? */
                snprintf(err, errlen, "--slo %s: %.*s is limited twice", spec, (int)klen, p);
                return -1;
            }
        if (p[len] == ',' && !p[len + 1]) {
            snprintf(err, errlen, "--slo %s: a trailing ','", spec);
            return -1;
        }
        if (*n >= CAP_MAX_SLO) {
            snprintf(err, errlen, "--slo: more than %d objectives", CAP_MAX_SLO);
            return -1;
        }
        out[(*n)++] = (cap_slo){f, limit};
        p += len + (p[len] == ',');
    }
    return 0;
}

/* The first of SLO[0..n) that S fails, or -1 when every one holds. */
static int failed_slo(const cap_slo *slo, int n, const summary *s)
{
    for (int i = 0; i < n; i++) {
        /* a latency without a sample (no second token: no TPOT) breaks no objective; where
         * none finished, the rejections and keep_up say so (cap_served) */
        double v = sumf_get(sumf_at((size_t)slo[i].field), s);
        if (!isnan(v) && !(v <= slo[i].limit)) return i;
    }
    return -1;
}

bool cap_slos_hold(const cap_slo *slo, int n, const summary *s) { return failed_slo(slo, n, s) < 0; }

bool cap_served(const cap_slo *slo, int n, const summary *s, char *why, size_t len)
{
    int failed = failed_slo(slo, n, s);
    if (failed >= 0) {
        const sumf *f = sumf_at((size_t)slo[failed].field);
        snprintf(why, len, "%s = %.4g > %.4g", f->name, sumf_get(f, s), slo[failed].limit);
        return false;
    }
    /* rejected requests leave at once, so they never grow the queue: counted here instead, as
     * achieved throughput once counted them (a scenario rejecting 56% of its requests was
     * served at any rate) */
    int sent = s->completed + s->rejected;
    if (sent > 0 && s->rejected > (1 - CAP_KEEP_UP) * sent) {
        snprintf(why, len, "%d of %d requests rejected, more than %.0f%%: `servesim run` at this rate writes "
                 "requests.csv, whose stop_reason says why", s->rejected, sent, 100 * (1 - CAP_KEEP_UP));
        return false;
    }
    if (isnan(s->keep_up)) {
        snprintf(why, len, "no measured request finished");
        return false;
    }
    if (s->keep_up < CAP_KEEP_UP) {
        snprintf(why, len, "keep_up = %.3f < %.2f: its queue grows; %.4g req/s achieved", s->keep_up, CAP_KEEP_UP,
                 s->request_throughput);
        return false;
    }
    snprintf(why, len, "served");
    return true;
}

/* Doubling (or halving) from START until one rate is served and another is not. */
static int bracket(double start, double max_rate, cap_probe_fn probe, void *ctx, cap_search_result *out)
{
    double r = fmin(start, max_rate), floor_rate = fmax(r * 1e-6, CAP_MIN_RATE);
    bool ok;
    if (probe(ctx, r, &ok) < 0) return -1;
    *out = (cap_search_result){0, 0};
    if (ok) {
        out->best = r;
        while (out->best < max_rate) {
            double next = fmin(out->best * 2, max_rate);
            if (probe(ctx, next, &ok) < 0) return -1;
            if (!ok) {
                out->fail = next;
                return 0;
            }
            out->best = next;
        }
        return 0;
    }
    out->fail = r;
    while (out->fail > floor_rate) {
        double next = fmax(out->fail / 2, floor_rate);
        if (probe(ctx, next, &ok) < 0) return -1;
        if (ok) {
            out->best = next;
            return 0;
        }
        out->fail = next;
    }
    return 0;
}

int cap_search(double start, double max_rate, double rel_tol, cap_probe_fn probe, void *ctx,
               cap_search_result *out)
{
    if (bracket(start, max_rate, probe, ctx, out) < 0) return -1;
    while (out->best > 0 && out->fail > 0 && out->fail - out->best > rel_tol * out->best) {
        double mid = 0.5 * (out->best + out->fail);
        bool ok;
        if (probe(ctx, mid, &ok) < 0) return -1;
        *(ok ? &out->best : &out->fail) = mid;
    }
    return 0;
}

void cap_analyze(const cap_point *pts, int n, cap_findings *out)
{
    *out = (cap_findings){-1, -1, -1};
    double base = pts[0].have ? pts[0].sum.ttft_ms.p99 : NAN;
    for (int i = 0; i < n; i++) {
        const summary *s = &pts[i].sum;
        if (!pts[i].have) continue;
        if (out->knee < 0 && !(s->keep_up >= CAP_KEEP_UP)) out->knee = i;
        if (out->takeoff < 0 && s->ttft_ms.p99 > CAP_TAKEOFF * base) out->takeoff = i;
        if (out->kv_zero < 0 && s->min_free_blocks == 0) out->kv_zero = i;
    }
}

/* " (between A and B req/s)" when there is a lower tried rate. */
static void between(char *buf, size_t len, const cap_point *pts, int i)
{
    if (i > 0) snprintf(buf, len, ", so between %.4g and %.4g req/s", pts[i - 1].rate, pts[i].rate);
    else snprintf(buf, len, ", the lowest rate tried");
}

/* ", within the SLO's p99_ttft_ms <= 1000" where an SLO limits P99 TTFT (a take-off under
 * the limit read as a reason the capacity stopped there), else "". */
static void takeoff_slo(char *buf, size_t len, double p99_ttft, const cap_slo *slo, int nslo)
{
    int field = sumf_find("p99_ttft_ms");
    buf[0] = '\0';
    for (int i = 0; i < nslo; i++)
        if (slo[i].field == field)
            snprintf(buf, len, ", %s the SLO's p99_ttft_ms <= %g", p99_ttft <= slo[i].limit ? "within" : "past",
                     slo[i].limit);
}

void cap_write_findings(FILE *f, const cap_point *pts, int n, const cap_findings *fd, const cap_slo *slo, int nslo,
                        bool bullets)
{
    const char *b = bullets ? "- " : "";
    char where[128];
    if (fd->knee >= 0) {
        between(where, sizeof where, pts, fd->knee);
        /* a sweep of 100 requests at 10 req/s read a knee that capacity's 300-s probes put
         * past 26 req/s (a new user's trial): a short sending is said */
        const summary *k = &pts[fd->knee].sum;
        double span = (k->completed + k->rejected) / pts[fd->knee].rate;
        char noisy[160] = "";
        if (span < CAP_MIN_SPAN_S)
            snprintf(noisy, sizeof noisy, ", over a sending of %.0f s, where keep_up is noisy (capacity's probes send "
                     "for at least %.0f s)", span, CAP_MIN_SPAN_S);
        fprintf(f, "%sThe queue starts to grow: keep_up first fell below %.2f at %.4g req/s (%.3f; %.4g req/s "
                   "achieved, %.0f output tokens/s)%s%s.\n",
                b, CAP_KEEP_UP, pts[fd->knee].rate, k->keep_up, k->request_throughput, k->output_throughput, where,
                noisy);
    } else {
        fprintf(f, "%sThe service kept up with the offered rate at every rate tried (up to %.4g req/s).\n", b,
                pts[n - 1].rate);
    }
    if (fd->takeoff >= 0) {
        between(where, sizeof where, pts, fd->takeoff);
        char limit[96];
        takeoff_slo(limit, sizeof limit, pts[fd->takeoff].sum.ttft_ms.p99, slo, nslo);
        fprintf(f, "%sP99 TTFT takes off at %.4g req/s: %.4g ms, more than %.0f× the %.4g ms at %.4g req/s%s%s.\n", b,
                pts[fd->takeoff].rate, pts[fd->takeoff].sum.ttft_ms.p99, CAP_TAKEOFF, pts[0].sum.ttft_ms.p99,
                pts[0].rate, limit, where);
    } else {
        fprintf(f, "%sP99 TTFT stayed within %.0f× its value at the lowest rate (%.4g ms) at every rate tried.\n", b,
                CAP_TAKEOFF, pts[0].sum.ttft_ms.p99);
    }
    if (fd->kv_zero >= 0) {
        between(where, sizeof where, pts, fd->kv_zero);
        fprintf(f, "%sFree KV blocks first reached zero at %.4g req/s%s.\n", b, pts[fd->kv_zero].rate, where);
    } else {
        int lowest = 0;
        for (int i = 1; i < n; i++)
            if (pts[i].sum.min_free_blocks < pts[lowest].sum.min_free_blocks) lowest = i;
        fprintf(f, "%sFree KV blocks never reached zero: the fewest were %d, at %.4g req/s.\n", b,
                pts[lowest].sum.min_free_blocks, pts[lowest].rate);
    }
}

void cap_write_slo(FILE *f, const cap_slo *slo, int n)
{
    fputs("SLO:", f);
    for (int i = 0; i < n; i++) fprintf(f, " %s <= %g,", sumf_at((size_t)slo[i].field)->name, slo[i].limit);
    fprintf(f, " kept up (keep_up >= %.2f), at most %.0f%% of the requests rejected\n", CAP_KEEP_UP,
            100 * (1 - CAP_KEEP_UP));
    if (!n) /* a capacity whatever the latency: say so, lest it read as a served one */
        fputs("No latency limit was given (--slo ttft_p99_ms=...,tpot_p99_ms=...): capacity is the highest rate\n"
              "kept up with, whatever its latency ([slo] keys set goodput's objectives, not these).\n", f);
}

double cap_reprobe_requests(const summary *s, double rate, double sent)
{
    double stays = s->num_preemptions > 0 ? CAP_SETTLE_STAYS_PREEMPTED : CAP_SETTLE_STAYS;
    double need = fmin(fmin(ceil(rate * stays * s->e2el_ms.p90 / 1000), CAP_REPROBE_MAX * sent), 1e7);
    return s->keep_up >= CAP_REPROBE_BELOW && need > sent ? need : 0;
}

int cap_run_probe(scenario *sc, double rate, const cap_slo *slo, int n, bool again, simjob *j, char *err,
                  size_t errlen)
{
    *j = (simjob){.sc = sc};
    int status = simjob_run(j, err, errlen);
    if (status != EXIT_OK || !again || !j->have_summary || !cap_slos_hold(slo, n, &j->sum)) return status;
    double more = cap_reprobe_requests(&j->sum, rate, (double)sc->v[K_workload_num_requests].i);
    if (more == 0) return status;
    char set[64];
    snprintf(set, sizeof set, "workload.num_requests=%.0f", more);
    if (scenario_set(sc, set, err, errlen) < 0) return EXIT_BAD_INPUT;
    *j = (simjob){.sc = sc};
    return simjob_run(j, err, errlen);
}

double cap_probe_requests(double num_requests, double base_rate, double rate)
{
    double span = fmax(num_requests / base_rate, CAP_MIN_SPAN_S);
    return fmax(num_requests, fmin(ceil(rate * span), 1e7));
}
