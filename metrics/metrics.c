/* Metrics. Statistics follow vLLM's `bench serve`: population std (ddof = 0), numpy's
 * linear percentiles, every latency computed in seconds and scaled to ms at the end, and
 * zeros for a metric with no samples. */
#include "metrics/metrics.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct itl_run {
    double gap;
    int64_t count;
} itl_run;

/* A finished measured request's latencies, seconds; tpot NAN when it has one token. Kept for
 * exact percentiles: 24 bytes a request is all a run's memory grows by. */
typedef struct req_latency {
    double ttft, tpot, e2el;
} req_latency;

/* When a measured request was sent and when it ended (finished or rejected): keep_up's
 * counts, 16 bytes a request more. */
typedef struct req_span {
    double arrival, end;
    bool finished;             /* not rejected: its stay sets how long the system takes to fill */
} req_span;

struct met_acc {
    double window_start;
    int num_percentiles;
    double percentiles[MET_MAX_PERCENTILES];

    bool keep_requests;
    req_record *reqs;          /* only when keep_requests */
    size_t num_reqs, reqs_cap;

    req_latency *lat;          /* measured requests that finished, in the order they ended */
    size_t num_lat, lat_cap;
    int rejected, failed;      /* refused by the scheduler; failed on a server (or aborted) */
    int rejected_by[STOP_HANDOFF + 1]; /* both, by stop reason */
    req_span *spans;           /* every measured request that ended, finished or not */
    size_t num_spans, spans_cap;
    double first_arrival, last_arrival, last_finish;
    int64_t input_tokens, output_tokens;

    itl_run *itl;
    size_t num_itl, itl_cap;
    bool itl_distinct;         /* a compaction kept most runs: compacting no longer pays */

    /* Step accumulators: sums in arrival order, so results are deterministic. */
    int64_t num_steps;
    double total_time;                      /* sum of step durations: the weight total */
    double waiting_time, running_time, free_blocks_time;   /* value x duration */
    double waiting_sum, running_sum, free_blocks_sum;      /* plain, if all durations are 0 */
    int min_free_blocks;
    int64_t batched_tokens, decode_seqs, prefill_tokens, padding_tokens;
    int64_t prefix_hits, prefix_queries;
    int64_t kv_allocated, kv_unused;
    int peak_running;
    int64_t preemptions, kv_delayed, prefix_evictions;
    int64_t spec_seqs, draft_tokens, accepted_tokens;
    double draft_time;
    int64_t spec_steps;                     /* steps that verified drafts */
    double spec_step_time, spec_draft_time; /* their durations, and their drafting */
};

/* Out of memory while accumulating has no sensible recovery: a run would lose records. */
static void *checked(void *p)
{
    if (!p) {
        fputs("servesim: out of memory in the metrics\n", stderr);
        abort();
    }
    return p;
}

static void *grow(void *p, size_t *cap, size_t elem)
{
    size_t n = *cap ? 2 * *cap : 256;
    p = checked(realloc(p, n * elem));
    *cap = n;
    return p;
}

static double lerp(double a, double b, double t)
{
    /* numpy's _lerp: interpolate from the nearer end, so results match it to the bit. */
    return t >= 0.5 ? b - (b - a) * (1 - t) : a + (b - a) * t;
}

double met_percentile_sorted(const double *v, size_t n, double q)
{
    double pos = (double)(n - 1) * (q / 100);
    double lo = floor(pos);
    size_t i = (size_t)lo;
    size_t j = i + 1 < n ? i + 1 : n - 1;
    return lerp(v[i], v[j], pos - lo);
}

/* The value at index K of the expanded array (each V[i] repeated W[i] times). */
static double weighted_at(const double *v, const int64_t *w, size_t n, int64_t k)
{
    size_t i = 0;
    for (int64_t seen = w[0]; seen <= k && i + 1 < n; seen += w[++i])
        ;
    return v[i];
}

static int64_t weight_total(const int64_t *w, size_t n)
{
    int64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += w[i];
    return total;
}

double met_percentile_weighted(const double *v, const int64_t *w, size_t n, double q)
{
    int64_t total = weight_total(w, n);
    double pos = (double)(total - 1) * (q / 100);
    double lo = floor(pos);
    int64_t k = (int64_t)lo;
    double a = weighted_at(v, w, n, k);
    double b = k + 1 < total ? weighted_at(v, w, n, k + 1) : a;
    return lerp(a, b, pos - lo);
}

met_acc *met_create(void)
{
    met_acc *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->window_start = -INFINITY;
    m->first_arrival = INFINITY;
    m->last_arrival = -INFINITY;
    m->last_finish = -INFINITY;
    m->min_free_blocks = INT32_MAX;
    m->num_percentiles = 1;
    m->percentiles[0] = 99.9;
    return m;
}

void met_set_percentiles(met_acc *m, const double *q, int n)
{
    m->num_percentiles = n < MET_MAX_PERCENTILES ? n : MET_MAX_PERCENTILES;
    for (int i = 0; i < m->num_percentiles; i++) m->percentiles[i] = q[i];
}

void met_free(met_acc *m)
{
    if (!m)
        return;
    free(m->reqs);
    free(m->lat);
    free(m->spans);
    free(m->itl);
    free(m);
}

void met_set_window_start(met_acc *m, double t)
{
    m->window_start = t;
}

void met_on_step(met_acc *m, const step_record *s)
{
    if (!(s->start_time >= m->window_start))
        return;
    double dt = s->end_time - s->start_time;
    m->num_steps++;
    m->total_time += dt;
    m->waiting_time += s->waiting * dt;
    m->running_time += s->running * dt;
    m->free_blocks_time += s->num_free_blocks * dt;
    m->waiting_sum += s->waiting;
    m->running_sum += s->running;
    m->free_blocks_sum += s->num_free_blocks;
    if (s->num_free_blocks < m->min_free_blocks)
        m->min_free_blocks = s->num_free_blocks;
    m->batched_tokens += s->num_batched_tokens;
    m->decode_seqs += s->num_decode_seqs;
    m->prefill_tokens += s->num_prefill_tokens;
    m->padding_tokens += s->num_padding_tokens;
    m->prefix_hits += s->prefix_hits;
    m->prefix_queries += s->prefix_queries;
    m->kv_allocated += s->kv_allocated_slots;
    m->kv_unused += s->kv_unused_slots;
    if (s->running > m->peak_running)
        m->peak_running = s->running;
    m->preemptions += s->num_preempted;
    m->kv_delayed += s->num_kv_delayed;
    m->prefix_evictions += s->prefix_evictions;
    m->spec_seqs += s->num_spec_seqs;
    m->draft_tokens += s->num_draft_tokens;
    m->accepted_tokens += s->num_accepted_tokens;
    if (s->draft_time > 0) m->draft_time += s->draft_time;
    if (s->num_spec_seqs > 0) {
        m->spec_steps++;
        m->spec_step_time += s->end_time - s->start_time;
        if (s->draft_time > 0) m->spec_draft_time += s->draft_time;
    }
}

static int cmp_run(const void *a, const void *b);

/* Sorts the ITL runs by gap and merges equal gaps. A run's gaps recur (a step of the same
 * batch shape costs the same), so compacting whenever the array fills bounds its memory by
 * the number of distinct gaps, not by the number of steps. */
static void compact_itl(met_acc *m)
{
    qsort(m->itl, m->num_itl, sizeof *m->itl, cmp_run);
    size_t n = 0;
    for (size_t i = 0; i < m->num_itl; i++) {
        if (n > 0 && m->itl[n - 1].gap == m->itl[i].gap)
            m->itl[n - 1].count += m->itl[i].count;
        else
            m->itl[n++] = m->itl[i];
    }
    m->num_itl = n;
}

void met_on_itl_n(met_acc *m, double gap, int64_t count)
{
    if (m->num_itl > 0 && m->itl[m->num_itl - 1].gap == gap) {
        m->itl[m->num_itl - 1].count += count;
        return;
    }
    if (m->num_itl == m->itl_cap && m->num_itl >= 4096 && !m->itl_distinct) {
        compact_itl(m);
        /* mostly distinct gaps (interpolated step costs): sorting again would cost time and
         * save little, so the array just grows from here */
        m->itl_distinct = m->num_itl > m->itl_cap / 2;
        if (m->num_itl > m->itl_cap / 2)
            m->itl = grow(m->itl, &m->itl_cap, sizeof *m->itl);
    } else if (m->num_itl == m->itl_cap) {
        m->itl = grow(m->itl, &m->itl_cap, sizeof *m->itl);
    }
    m->itl[m->num_itl++] = (itl_run){gap, count};
}

void met_on_itl(met_acc *m, double gap) { met_on_itl_n(m, gap, 1); }

void met_keep_requests(met_acc *m)
{
    m->keep_requests = true;
}

void met_on_request(met_acc *m, const req_record *r)
{
    if (m->keep_requests) {
        if (m->num_reqs == m->reqs_cap)
            m->reqs = grow(m->reqs, &m->reqs_cap, sizeof *m->reqs);
        m->reqs[m->num_reqs++] = *r;
    }
    if (r->warmup)
        return;
    m->first_arrival = fmin(m->first_arrival, r->arrival_time);
    m->last_arrival = fmax(m->last_arrival, r->arrival_time);
    m->last_finish = fmax(m->last_finish, r->finish_time);   /* fmax skips a NAN */
    if (m->num_spans == m->spans_cap)
        m->spans = grow(m->spans, &m->spans_cap, sizeof *m->spans);
    m->spans[m->num_spans++] = (req_span){r->arrival_time, r->finish_time, r->stop == STOP_LENGTH};
    if (r->stop != STOP_LENGTH) {
        /* a load's failures were counted as "Rejected requests" (a new user's trial) */
        if (r->stop == STOP_ERROR || r->stop == STOP_ABORTED) m->failed++;
        else m->rejected++;
        if ((unsigned)r->stop <= STOP_HANDOFF) m->rejected_by[r->stop]++;
        return;
    }
    double t = r->first_token_time - r->arrival_time;
    double e = r->finish_time - r->arrival_time;
    double p = r->output_len > 1 ? (e - t) / (r->output_len - 1) : NAN;
    if (m->num_lat == m->lat_cap)
        m->lat = grow(m->lat, &m->lat_cap, sizeof *m->lat);
    m->lat[m->num_lat++] = (req_latency){t, p, e};
    m->input_tokens += r->prompt_len;
    m->output_tokens += r->output_len;
}

const req_record *met_requests(const met_acc *m, size_t *n)
{
    *n = m->num_reqs;
    return m->reqs;
}

int met_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double met_median(double *v, size_t n)
{
    if (n == 0) return NAN;
    qsort(v, n, sizeof *v, met_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int cmp_run(const void *a, const void *b)
{
    return met_cmp_double(&((const itl_run *)a)->gap, &((const itl_run *)b)->gap);
}

static double percentile(const double *v, const int64_t *w, size_t n, double q)
{
    return w ? met_percentile_weighted(v, w, n, q) : met_percentile_sorted(v, n, q);
}

/* Statistics of sorted values V with weights W (NULL = 1 each), in seconds, reported in ms.
 * The median is numpy's: the mean of the two middle values when their count is even. */
/* No sample (no request finished, or none had a second token): every stat NAN, null in
 * summary.json and an empty CSV field. They read 0.0 ms, a perfect latency, where every
 * request was rejected (a new user's trial); vLLM's benchmark writes 0 there too. */
static latency_stats no_samples(void)
{
    latency_stats st = {NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, {0}};
    for (int i = 0; i < MET_MAX_PERCENTILES; i++) st.extra[i] = NAN;
    return st;
}

static latency_stats stats_ms(const met_acc *m, const double *v, const int64_t *w, size_t n)
{
    latency_stats st = {0};
    if (n == 0)
        return no_samples();
    int64_t total = w ? weight_total(w, n) : (int64_t)n;
    double sum = 0, sq = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i] * (double)(w ? w[i] : 1);
    double mean = sum / (double)total;
    for (size_t i = 0; i < n; i++)
        sq += (v[i] - mean) * (v[i] - mean) * (double)(w ? w[i] : 1);
    double mid_lo = w ? weighted_at(v, w, n, (total - 1) / 2) : v[(n - 1) / 2];
    double mid_hi = w ? weighted_at(v, w, n, total / 2) : v[n / 2];
    st.mean = mean * 1000;
    st.std = sqrt(sq / (double)total) * 1000;
    st.median = (total % 2 ? mid_lo : (mid_lo + mid_hi) / 2) * 1000;
    st.p50 = percentile(v, w, n, 50) * 1000;
    st.p90 = percentile(v, w, n, 90) * 1000;
    st.p99 = percentile(v, w, n, 99) * 1000;
    st.min = v[0] * 1000;
    st.max = v[n - 1] * 1000;
    for (int i = 0; i < m->num_percentiles; i++) st.extra[i] = percentile(v, w, n, m->percentiles[i]) * 1000;
    return st;
}

static latency_stats sorted_stats_ms(const met_acc *m, double *v, size_t n)
{
    qsort(v, n, sizeof *v, met_cmp_double);
    return stats_ms(m, v, NULL, n);
}

static latency_stats itl_stats_ms(met_acc *m)
{
    if (m->num_itl == 0)
        return no_samples();
    compact_itl(m);
    size_t n = m->num_itl;
    double *v = checked(malloc(n * sizeof *v));
    int64_t *w = checked(malloc(n * sizeof *w));
    for (size_t i = 0; i < n; i++) {
        v[i] = m->itl[i].gap;
        w[i] = m->itl[i].count;
    }
    latency_stats st = stats_ms(m, v, w, n);
    free(v);
    free(w);
    return st;
}

/* When request R left the system: finished or rejected; a record without a time (none of
 * servesim's own has one) as if at once. */
static double span_end(const req_span *r) { return isnan(r->end) ? r->arrival : r->end; }

/* Seconds request R spent in the system during [A, B]. */
static double overlap(const req_span *r, double a, double b)
{
    double from = fmax(r->arrival, a), to = fmin(span_end(r), b);
    return to > from ? to - from : 0;
}

/* Whether the service kept up with its arrivals. The measured requests in the system start
 * from none and fill for about as long as a request stays, so the first KEEP_UP_SETTLE (P90)
 * of the finished ones' times in the system, at most a third of the sending, is left out: a
 * steady run whose requests stay 37 s read 0.97 over 300 s without it. What is left of the
 * sending, up to the last arrival, splits in halves of H seconds: the mean number of requests in the
 * system grows from the first half to the second by (offered - served rate) x H when the
 * queue grows, and not at all when it holds steady. keep_up = 1 - that growth / the
 * requests sent in the second half: about 1 when steady, the served rate over the offered
 * one when not. Means over halves, not counts at two instants: the counts move by a few
 * percent with the arrivals' bursts, the means by a tenth of that. Achieved throughput
 * cannot tell: it counts the drain after the last arrival, so a run overloaded by 10% for
 * 300 s still achieves 91% of its offered rate. 0 when every request was sent at one time,
 * and at worst; NAN when none finished. */
#define KEEP_UP_SETTLE 90
static double keep_up(const met_acc *m)
{
    double t0 = m->first_arrival, t1 = m->last_arrival;
    bool any_finished = false;
    for (size_t i = 0; i < m->num_spans && !any_finished; i++) any_finished = m->spans[i].finished;
    /* nothing served, nothing to measure: it read 1.0 where every request was rejected, as
     * rejections leave at once and grow no queue (a new user's trial) */
    if (!any_finished) return NAN;
    if (!(t1 > t0)) return 0;
    /* the finished requests' stays: a share of rejections, which leave at once, lowered it */
    double *stay = checked(malloc(m->num_spans * sizeof *stay));
    size_t n = 0;
    for (size_t i = 0; i < m->num_spans; i++)
        if (m->spans[i].finished) stay[n++] = span_end(&m->spans[i]) - m->spans[i].arrival;
    qsort(stay, n, sizeof *stay, met_cmp_double);
    double settle = n ? fmin(met_percentile_sorted(stay, n, KEEP_UP_SETTLE), (t1 - t0) / 3) : 0;
    free(stay);
    double from = t0 + settle, mid = 0.5 * (from + t1), first = 0, second = 0;
    size_t sent_late = 0;
    for (size_t i = 0; i < m->num_spans; i++) {
        first += overlap(&m->spans[i], from, mid);
        second += overlap(&m->spans[i], mid, t1);
        sent_late += m->spans[i].arrival > mid;
    }
    /* a served rate that falls as the queue grows (longer contexts, preemptions) gains the
     * second half more than was sent in it: below 0, which no served-over-offered rate is */
    return sent_late ? fmax(0, 1 - (second - first) / (mid - from) / (double)sent_late) : 0;
}

static int meets_slo(const slo_config *slo, double ttft, double tpot, int has_tpot, double e2el)
{
    if (!slo)
        return 1;
    return (slo->ttft_ms <= 0 || ttft <= slo->ttft_ms / 1000) &&
           (slo->tpot_ms <= 0 || !has_tpot || tpot <= slo->tpot_ms / 1000) &&
           (slo->e2el_ms <= 0 || e2el <= slo->e2el_ms / 1000);
}

static void summarize_requests(const met_acc *m, const slo_config *slo, summary *s)
{
    int good = 0;
    for (size_t i = 0; i < m->num_lat; i++) {
        const req_latency *l = &m->lat[i];
        good += meets_slo(slo, l->ttft, l->tpot, !isnan(l->tpot), l->e2el);
    }
    s->completed = (int)m->num_lat;
    s->rejected = m->rejected;
    s->failed = m->failed;
    s->total_input_tokens = m->input_tokens;
    s->total_output_tokens = m->output_tokens;
    s->duration = m->last_finish > m->first_arrival ? m->last_finish - m->first_arrival : 0;
    if (s->duration > 0) {
        s->request_throughput = s->completed / s->duration;
        s->request_goodput = good / s->duration;
        s->output_throughput = (double)s->total_output_tokens / s->duration;
        s->total_token_throughput =
            (double)(s->total_input_tokens + s->total_output_tokens) / s->duration;
    }
    s->keep_up = keep_up(m);
}

/* Statistics of one latency of the finished requests (OFFSET into req_latency), NANs left
 * out, sorted in SCRATCH. */
static latency_stats latency_of(const met_acc *m, size_t offset, double *scratch)
{
    size_t n = 0;
    for (size_t i = 0; i < m->num_lat; i++) {
        double v = *(const double *)((const char *)&m->lat[i] + offset);
        if (!isnan(v)) scratch[n++] = v;
    }
    return sorted_stats_ms(m, scratch, n);
}

static void summarize_steps(const met_acc *m, summary *s)
{
    s->num_steps = m->num_steps;
    if (m->num_steps > 0) {
        double steps = (double)m->num_steps;
        /* Time-weighted; plain means only if every step took no time at all. */
        int timed = m->total_time > 0;
        s->mean_waiting = timed ? m->waiting_time / m->total_time : m->waiting_sum / steps;
        s->mean_running = timed ? m->running_time / m->total_time : m->running_sum / steps;
        s->mean_free_blocks =
            timed ? m->free_blocks_time / m->total_time : m->free_blocks_sum / steps;
        s->min_free_blocks = m->min_free_blocks;
        s->mean_batched_tokens = (double)m->batched_tokens / steps;
        s->mean_decode_seqs = (double)m->decode_seqs / steps;
        s->mean_prefill_tokens = (double)m->prefill_tokens / steps;
        s->mean_step_time_ms = m->total_time / steps * 1000;
    }
    s->prefix_hits = m->prefix_hits;
    s->prefix_queries = m->prefix_queries;
    s->prefix_hit_rate = m->prefix_queries ? (double)m->prefix_hits / m->prefix_queries : 0;
    s->kv_fragmentation = m->kv_allocated ? (double)m->kv_unused / m->kv_allocated : 0;
    s->peak_running = m->peak_running;
    s->num_preemptions = m->preemptions;
    s->kv_delayed_requests = m->kv_delayed;
    s->prefix_evictions = m->prefix_evictions;
    s->total_prefill_tokens = m->prefill_tokens;
    s->total_padding_tokens = m->padding_tokens;
    s->spec_draft_tokens = m->draft_tokens;
    s->spec_accepted_tokens = m->accepted_tokens;
    s->spec_acceptance_rate = m->draft_tokens ? (double)m->accepted_tokens / m->draft_tokens : 0;
    s->spec_mean_accepted_length = m->spec_seqs ? 1 + (double)m->accepted_tokens / m->spec_seqs : 0;
    s->spec_draft_time_share = m->total_time > 0 ? m->draft_time / m->total_time : 0;
    s->spec_steps = m->spec_steps;
    s->spec_mean_draft_ms = m->spec_steps ? 1e3 * m->spec_draft_time / m->spec_steps : 0;
    s->spec_mean_verify_ms = m->spec_steps ? 1e3 * (m->spec_step_time - m->spec_draft_time) / m->spec_steps : 0;
}

int met_summarize(met_acc *m, const slo_config *slo, summary *out)
{
    summary s = {.num_percentiles = m->num_percentiles};
    for (int i = 0; i < m->num_percentiles; i++) s.percentiles[i] = m->percentiles[i];
    double *scratch = checked(malloc((m->num_lat ? m->num_lat : 1) * sizeof *scratch));
    summarize_requests(m, slo, &s);
    s.ttft_ms = latency_of(m, offsetof(req_latency, ttft), scratch);
    s.tpot_ms = latency_of(m, offsetof(req_latency, tpot), scratch);
    s.e2el_ms = latency_of(m, offsetof(req_latency, e2el), scratch);
    s.itl_ms = itl_stats_ms(m);
    summarize_steps(m, &s);
    free(scratch);
    *out = s;
    return s.completed > 0 ? 0 : -1;
}

void met_describe_rejected(const met_acc *m, int max_model_len, char *buf, size_t len)
{
    static const char *const why[STOP_HANDOFF + 1] = {
        [STOP_NONE] = "unfinished",
        [STOP_TOO_LONG] = "longer than scheduler.max_model_len (%d tokens) in prompt + output, as vLLM rejects them",
        [STOP_KV_CAPACITY] = "needing more KV than the whole pool holds",
        [STOP_ABORTED] = "aborted by their client",
        [STOP_ERROR] = "answered with an error or not at all",
        [STOP_HANDOFF] = "handed off and never finished",
    };
    size_t used = 0;
    buf[0] = 0;
    for (int failed = 0; failed < 2; failed++) {
        const char *head = failed ? "Failed: " : "Rejected: ";
        for (int k = 0; k <= STOP_HANDOFF && used < len; k++) {
            if (!m->rejected_by[k] || !why[k] || (k == STOP_ERROR || k == STOP_ABORTED) != failed) continue;
            char reason[160];
            snprintf(reason, sizeof reason, why[k], max_model_len);
            int n = snprintf(buf + used, len - used, "%s%s%d %s", head == NULL ? "; " : used ? ". " : "",
                             head ? head : "", m->rejected_by[k], reason);
            if (n < 0) break;
            used += (size_t)n;
            head = NULL;
        }
    }
    if (used && used < len) snprintf(buf + used, len - used, " (requests.csv's stop_reason)");
}

/* "%.10g" labelled 99.999999999 "p100" (bad-input campaign) */
void met_percentile_label(double q, char *out, size_t len)
{
    /* nowhere to write: strtod below would read what snprintf never wrote (and GCC's
     * sanitizer build, its null check hoisted, warned of a null destination) */
    if (!out || !len) return;
    /* the fewest decimals that do (in (0, 100], never an exponent: %g wrote 50 as 5e+01) */
    for (int decimals = 0; decimals <= 20; decimals++) {
        snprintf(out, len, "%.*f", decimals, q);
        if (strtod(out, NULL) == q) return;
    }
    snprintf(out, len, "%.17g", q); /* below 1e-20: twenty zeros would name them all alike */
}

