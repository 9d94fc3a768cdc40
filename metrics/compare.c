#include "metrics/compare.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double cmp_rel_error(double simulated, double measured)
{
    /* a latency with no sample is NAN: both without one agree, one without one does not */
    if (isnan(simulated) || isnan(measured)) return isnan(simulated) && isnan(measured) ? 0 : INFINITY;
    if (measured == 0) return simulated == 0 ? 0 : INFINITY;
    return (simulated - measured) / fabs(measured);
}

static void add_row(cmp_result *r, const char *metric, double sim, double real)
{
    if (r->num_rows == CMP_MAX_ROWS) return;
    cmp_row *row = &r->rows[r->num_rows++];
    snprintf(row->metric, sizeof row->metric, "%s", metric);
    row->simulated = sim;
    row->measured = real;
    row->rel_error = cmp_rel_error(sim, real);
    row->spread = 0;
}

static void add_latency(cmp_result *r, const char *name, const latency_stats *s, const latency_stats *m)
{
    char buf[40];
    const char *stat[] = {"mean", "p50", "p90", "p99"};
    double sv[] = {s->mean, s->p50, s->p90, s->p99}, mv[] = {m->mean, m->p50, m->p90, m->p99};
    for (int i = 0; i < 4; i++) {
        snprintf(buf, sizeof buf, "%s_%s_ms", stat[i], name);
        add_row(r, buf, sv[i], mv[i]);
    }
}

static int cmp_id(const void *a, const void *b)
{
    int64_t x = ((const req_record *)a)->request_id, y = ((const req_record *)b)->request_id;
    return (x > y) - (x < y);
}

static req_record *sorted_copy(const req_record *r, size_t n)
{
    req_record *c = malloc((n ? n : 1) * sizeof *c);
    if (!c) return NULL;
    memcpy(c, r, n * sizeof *c);
    qsort(c, n, sizeof *c, cmp_id);
    return c;
}

/* Both sides must hold exactly the same request ids. */
static int same_requests(const cmp_side *sim, const cmp_side *real, char *err, size_t errlen)
{
    size_t na = sim->num_reqs, nb = real->num_reqs, i = 0, j = 0;
    req_record *a = sorted_copy(sim->reqs, na), *b = sorted_copy(real->reqs, nb);
    int rc = 0;
    if (!a || !b) {
        snprintf(err, errlen, "out of memory comparing requests");
        rc = -1;
    }
    while (rc == 0 && (i < na || j < nb)) {
        if (i < na && j < nb && a[i].request_id == b[j].request_id) {
            i++, j++;
            continue;
        }
        bool only_sim = j >= nb || (i < na && a[i].request_id < b[j].request_id);
        snprintf(err, errlen, "request %lld is in the %s records but not in the %s ones",
                 (long long)(only_sim ? a[i].request_id : b[j].request_id),
                 only_sim ? "simulated" : "measured", only_sim ? "measured" : "simulated");
        rc = -1;
    }
    free(a);
    free(b);
    return rc;
}

static bool same_batch(const step_record *x, const step_record *y)
{
    return x->num_prefill_tokens == y->num_prefill_tokens && x->num_prefill_seqs == y->num_prefill_seqs &&
           x->num_decode_seqs == y->num_decode_seqs && x->num_batched_tokens == y->num_batched_tokens;
}

static void compare_steps(const cmp_side *sim, const cmp_side *real, cmp_result *out)
{
    out->first_divergence = -1;
    size_t n = sim->num_steps < real->num_steps ? sim->num_steps : real->num_steps;
    for (size_t i = 0; i < n && out->first_divergence < 0; i++)
        if (!same_batch(&sim->steps[i], &real->steps[i])) out->first_divergence = (int64_t)i;
    if (out->first_divergence < 0 && sim->num_steps != real->num_steps) out->first_divergence = (int64_t)n;
    double sum = 0;
    for (size_t i = 0; i < real->num_steps; i++) {
        const step_record *s = &real->steps[i];
        double measured = s->end_time - s->start_time;
        if (isnan(s->predicted_time) || measured <= 0) continue;
        sum += fabs(s->predicted_time - measured) / measured;
        out->steps_predicted++;
    }
    out->step_mape = out->steps_predicted ? sum / out->steps_predicted : NAN;
}

int cmp_runs(const cmp_side *sim, const cmp_side *real, cmp_result *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (same_requests(sim, real, err, errlen) < 0) return -1;
    const summary *s = sim->sum, *m = real->sum;
    add_latency(out, "ttft", &s->ttft_ms, &m->ttft_ms);
    add_latency(out, "tpot", &s->tpot_ms, &m->tpot_ms);
    add_latency(out, "itl", &s->itl_ms, &m->itl_ms);
    add_latency(out, "e2el", &s->e2el_ms, &m->e2el_ms);
    add_row(out, "request_throughput", s->request_throughput, m->request_throughput);
    add_row(out, "output_throughput", s->output_throughput, m->output_throughput);
    add_row(out, "mean_batched_tokens", s->mean_batched_tokens, m->mean_batched_tokens);
    add_row(out, "mean_decode_seqs", s->mean_decode_seqs, m->mean_decode_seqs);
    add_row(out, "mean_step_time_ms", s->mean_step_time_ms, m->mean_step_time_ms);
    add_row(out, "num_preemptions", (double)s->num_preemptions, (double)m->num_preemptions);
    compare_steps(sim, real, out);
    return 0;
}


static void combine_row(const cmp_result *runs, int n, int k, cmp_row *out)
{
    double sim[64], real[64];
    if (n > 64) n = 64;
    for (int i = 0; i < n; i++) {
        sim[i] = runs[i].rows[k].simulated;
        real[i] = runs[i].rows[k].measured;
    }
    *out = runs[0].rows[k];
    out->simulated = met_median(sim, (size_t)n);
    out->measured = met_median(real, (size_t)n); /* sorts REAL: its ends are the range */
    out->rel_error = cmp_rel_error(out->simulated, out->measured);
    double range = real[n - 1] - real[0];
    out->spread = range == 0 ? 0 : out->measured == 0 ? INFINITY : range / fabs(out->measured);
}

void cmp_combine(const cmp_result *runs, int n, cmp_result *out)
{
    memset(out, 0, sizeof *out);
    out->first_divergence = -1;
    out->step_mape = NAN;
    if (n < 1) return;
    *out = runs[0];
    double weighted = 0;
    out->steps_predicted = 0;
    for (int i = 0; i < n; i++) {
        if (runs[i].steps_predicted == 0) continue;
        weighted += runs[i].step_mape * (double)runs[i].steps_predicted;
        out->steps_predicted += runs[i].steps_predicted;
    }
    out->step_mape = out->steps_predicted ? weighted / (double)out->steps_predicted : NAN;
    for (int k = 0; k < out->num_rows; k++) combine_row(runs, n, k, &out->rows[k]);
}

const cmp_row *cmp_find(const cmp_result *r, const char *metric)
{
    for (int i = 0; i < r->num_rows; i++)
        if (strcmp(r->rows[i].metric, metric) == 0) return &r->rows[i];
    return NULL;
}
