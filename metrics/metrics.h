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

enum { MET_MAX_PERCENTILES = 8 };

typedef struct latency_stats {
    double mean, median, std, p50, p90, p99, min, max;
    double extra[MET_MAX_PERCENTILES]; /* at summary.percentiles, the ones asked for besides */
} latency_stats;

/* Every field of a run's summary, once, in the order of summary.json, the printed table and
 * the CSV columns of sweeps, capacity searches and repeats:
 *   S(name, type, csv, label, what)  a number (INT, I64 or DBL); csv 1: a CSV column too;
 *                                    label: its line in the printed table ("" = not printed)
 *   L(name, title, abbrev, what)     a latency in ms, as name_ms (latency_stats): summary.json
 *                                    has mean, median, std, p50, p90, p99, min and max; the
 *                                    CSVs and the printed table (under TITLE) mean, median,
 *                                    p90 and p99. Keys: STAT_NAME_ms, e.g. p99_ttft_ms. */
#define SUMMARY_FIELDS(S, L) \
    S(completed, INT, 1, "Successful requests:", "measured requests that finished (STOP_LENGTH)") \
    S(rejected, INT, 1, "Rejected requests:", "measured requests the scheduler refused: longer than max_model_len, or than the KV pool") \
    S(failed, INT, 0, "Failed requests:", "measured requests the server answered with an error or not at all, or whose client went away (a served run's)") \
    S(duration, DBL, 1, "Benchmark duration (s):", "last measured finish - first measured arrival, s") \
    S(total_input_tokens, I64, 1, "Total input tokens:", "prompt tokens of the finished measured requests") \
    S(total_output_tokens, I64, 1, "Total generated tokens:", "output tokens of the finished measured requests") \
    S(request_throughput, DBL, 1, "Request throughput (req/s):", "completed / duration") \
    S(request_goodput, DBL, 1, "Request goodput (req/s):", "requests within every SLO / duration") \
    S(output_throughput, DBL, 1, "Output token throughput (tok/s):", "total_output_tokens / duration") \
    S(total_token_throughput, DBL, 1, "Total Token throughput (tok/s):", "(input + output tokens) / duration") \
    S(keep_up, DBL, 1, "", "1 - growth of the mean number of requests in the system over the sending (once filled) / the requests sent in its second half: about 1 when the queue holds steady, the served over the offered rate when it grows (0 at worst); 0 when sent at once; null when none finished") \
    L(ttft, "Time to First Token", "TTFT", "first token - arrival") \
    L(tpot, "Time per Output Token (excl. 1st token)", "TPOT", "(E2EL - TTFT) / (output_len - 1), per request") \
    L(itl, "Inter-token Latency", "ITL", "every gap between consecutive tokens, pooled") \
    L(e2el, "End-to-end Latency", "E2EL", "finish - arrival") \
    S(num_steps, I64, 1, "", "steps that start at or after the first measured arrival (the internals below)") \
    S(mean_waiting, DBL, 1, "", "requests waiting, time-weighted") \
    S(mean_running, DBL, 1, "", "requests running, time-weighted") \
    S(mean_free_blocks, DBL, 1, "", "free KV blocks, time-weighted") \
    S(min_free_blocks, INT, 1, "", "fewest free KV blocks in a step") \
    S(mean_batched_tokens, DBL, 1, "", "tokens per step, padding included") \
    S(mean_decode_seqs, DBL, 1, "", "decoding sequences per step") \
    S(mean_prefill_tokens, DBL, 1, "", "prompt tokens per step") \
    S(mean_step_time_ms, DBL, 1, "", "step duration") \
    S(prefix_hits, I64, 0, "", "prompt tokens found in the prefix cache") \
    S(prefix_queries, I64, 0, "", "prompt tokens looked up in the prefix cache") \
    S(prefix_hit_rate, DBL, 1, "", "prefix_hits / prefix_queries") \
    S(kv_fragmentation, DBL, 1, "", "unused / allocated KV slots, summed over steps") \
    S(peak_running, INT, 1, "", "most requests running in one step") \
    S(num_preemptions, I64, 1, "", "recompute preemptions") \
    S(kv_delayed_requests, I64, 1, "", "requests held at the head of the queue for lack of free KV blocks (each once)") \
    S(prefix_evictions, I64, 1, "", "cached prefix blocks evicted to make room") \
    S(total_prefill_tokens, I64, 1, "", "prompt tokens computed (recomputation included)") \
    S(total_padding_tokens, I64, 1, "", "padding tokens computed (static batching)") \
    S(spec_draft_tokens, I64, 1, "", "speculative decoding: draft tokens verified") \
    S(spec_accepted_tokens, I64, 1, "", "speculative decoding: draft tokens accepted") \
    S(spec_acceptance_rate, DBL, 1, "", "spec_accepted_tokens / spec_draft_tokens") \
    S(spec_mean_accepted_length, DBL, 1, "", "tokens a verifying sequence emits per step: 1 + accepted drafts, mean") \
    S(spec_draft_time_share, DBL, 1, "", "drafting's share of step time") \
    S(spec_steps, I64, 1, "", "speculative decoding: steps that verified drafts") \
    S(spec_mean_draft_ms, DBL, 1, "", "their mean drafting time (ms)") \
    S(spec_mean_verify_ms, DBL, 1, "", "their mean time besides drafting: the verifying forward, sampling and the step's overhead (ms)")

#define SUMMARY_CTYPE_INT int
#define SUMMARY_CTYPE_I64 int64_t
#define SUMMARY_CTYPE_DBL double
typedef struct summary {
#define S(name, type, csv, label, what) SUMMARY_CTYPE_##type name;
#define L(name, title, abbrev, what) latency_stats name##_ms;
    SUMMARY_FIELDS(S, L)
#undef S
#undef L
    /* the percentiles every latency_stats.extra holds (run.percentiles, vLLM's
     * --metric-percentiles): summary.json's pQ_NAME_ms keys, e.g. p99.9_itl_ms */
    int num_percentiles;
    double percentiles[MET_MAX_PERCENTILES];
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
/* A request that ended. Only its latencies are kept (24 bytes, for exact percentiles), the
 * record itself only after met_keep_requests. */
void met_on_request(met_acc *m, const req_record *r);
/* The percentiles (each in (0, 100]) met_summarize reports besides P50, P90 and P99; 99.9
 * until told otherwise. N <= MET_MAX_PERCENTILES. */
void met_set_percentiles(met_acc *m, const double *q, int n);
/* "99.9" for 99.9, "50" for 50: a percentile as vLLM spells it in its keys (Python's shortest
 * repr: the fewest decimals that read back as Q), in OUT. */
void met_percentile_label(double q, char *out, size_t len);
/* Keep every request record for met_requests (validation and tests compare them). */
void met_keep_requests(met_acc *m);
/* Fills OUT from everything seen. Returns 0, or -1 when no measured request finished. */
int met_summarize(met_acc *m, const slo_config *slo, summary *out);
/* Why measured requests did not finish, in words, into BUF ("" when every one did): "Rejected:
 * 3 longer than scheduler.max_model_len (4096 tokens) in prompt + output, as vLLM rejects
 * them; ..." (MAX_MODEL_LEN names the limit), then "Failed: 2 answered with an error or not
 * at all" for a served run's; requests.csv's stop_reason says which. A run prints it under its
 * summary, whose "Rejected requests:" line alone left a newcomer guessing. */
void met_describe_rejected(const met_acc *m, int max_model_len, char *buf, size_t len);
/* The request records in the order they ended; none unless met_keep_requests was called. */
const req_record *met_requests(const met_acc *m, size_t *n);

#endif
