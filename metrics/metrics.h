/* Metrics: streaming accumulators over steps and requests, and the summary a run reports.
 * Definitions (docs/method.md section 2): TTFT = first_token - arrival; E2EL = finish - arrival;
 * TPOT per request = (E2EL - TTFT) / (output_len - 1) for output_len > 1; ITL = every gap
 * between consecutive tokens of a request, pooled; percentiles interpolate linearly between
 * closest ranks (numpy's default). What GenAI-Perf/AIPerf call "ITL" is TPOT here. */
#ifndef SERVESIM_METRICS_METRICS_H
#define SERVESIM_METRICS_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include "metrics/records.h"

typedef struct slo_config {
    double ttft_ms, tpot_ms, e2el_ms;   /* 0 = no objective on that metric */
} slo_config;

typedef struct latency_stats {
    double mean, median, std, p50, p90, p99, min, max;
} latency_stats;

typedef struct summary {
    int completed;                    /* measured requests that finished (STOP_LENGTH) */
    int rejected;                     /* measured requests that ended any other way */
    double duration;                  /* last measured finish - first measured arrival, s */
    int64_t total_input_tokens, total_output_tokens;
    double request_throughput, output_throughput, total_token_throughput, request_goodput;
    latency_stats ttft_ms, tpot_ms, itl_ms, e2el_ms;
    /* internals, over steps that start at or after the first measured arrival */
    int64_t num_steps;
    double mean_waiting, mean_running;          /* time-weighted */
    double mean_free_blocks; int min_free_blocks;
    double mean_batched_tokens, mean_decode_seqs, mean_prefill_tokens; /* per step */
    double mean_step_time_ms;
    int64_t prefix_hits, prefix_queries; double prefix_hit_rate;
    double kv_fragmentation;          /* unused / allocated slots, summed over steps */
    int peak_running;
    int64_t num_preemptions;
    int64_t total_prefill_tokens, total_padding_tokens;
} summary;

/* Percentile Q (0..100) of sorted V[0..n), linear between closest ranks. n > 0. */
double met_percentile_sorted(const double *v, size_t n, double q);
/* qsort's comparison of doubles, ascending: the one every module sorts with. */
int met_cmp_double(const void *a, const void *b);
/* The median of V[0..n), sorting V in place; NAN when N is 0. */
double met_median(double *v, size_t n);
/* The same for values with integer weights (each value counted W[i] times), sorted by value. */
double met_percentile_weighted(const double *v, const int64_t *w, size_t n, double q);

typedef struct met_acc met_acc;

met_acc *met_create(void);
void met_free(met_acc *m);
/* Start of the measurement window: the send time of the first measured request. */
void met_set_window_start(met_acc *m, double t);
void met_on_step(met_acc *m, const step_record *s);
/* One inter-token gap of a measured request; equal consecutive gaps are run-length merged,
 * so memory grows with steps, never with tokens. */
void met_on_itl(met_acc *m, double gap);
/* COUNT gaps of the same length. */
void met_on_itl_n(met_acc *m, double gap, int64_t count);
void met_on_request(met_acc *m, const req_record *r);
/* Fills OUT from everything seen. Returns 0, or -1 when no measured request finished. */
int met_summarize(met_acc *m, const slo_config *slo, summary *out);
/* The request records in the order they were added (for requests.csv and comparisons). */
const req_record *met_requests(const met_acc *m, size_t *n);

#endif
