/* Metrics: numpy-equal percentiles, a hand-computed run of four requests, warm-up
 * exclusion, the step window and the step internals. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdbool.h>

#include "metrics/metrics.h"

#define EPS 1e-9

Test(metrics, percentile_matches_numpy)
{
    /* numpy.percentile([1, 2, 3, 4, 10], q): pos = q/100 * 4.
     * q=50: pos 2 -> 3; q=90: pos 3.6 -> 4 + 0.6*6 = 7.6; q=99: pos 3.96 -> 4 + 0.96*6 = 9.76 */
    const double v[] = {1, 2, 3, 4, 10};
    cr_assert_float_eq(met_percentile_sorted(v, 5, 50), 3.0, EPS);
    cr_assert_float_eq(met_percentile_sorted(v, 5, 90), 7.6, EPS);
    cr_assert_float_eq(met_percentile_sorted(v, 5, 99), 9.76, EPS);
    cr_assert_eq(met_percentile_sorted(v, 5, 0), 1.0);
    cr_assert_eq(met_percentile_sorted(v, 5, 100), 10.0);
    cr_assert_float_eq(met_percentile_sorted(v, 5, 25), 2.0, EPS);
    const double one = 7;
    cr_assert_eq(met_percentile_sorted(&one, 1, 99), 7.0);
    /* Even count: [1, 2, 3, 4], q=50 -> pos 1.5 -> 2.5 */
    cr_assert_float_eq(met_percentile_sorted(v, 4, 50), 2.5, EPS);
}

Test(metrics, weighted_percentile_equals_expanded_array)
{
    /* [1, 2, 2, 2, 5, 9, 9] as runs. */
    const double v[] = {1, 2, 5, 9};
    const int64_t w[] = {1, 3, 1, 2};
    const double expanded[] = {1, 2, 2, 2, 5, 9, 9};
    for (double q = 0; q <= 100; q += 0.5) {
        double a = met_percentile_weighted(v, w, 4, q), b = met_percentile_sorted(expanded, 7, q);
        cr_assert_eq(a, b, "q=%g: weighted %.17g, expanded %.17g", q, a, b);
    }
    /* numpy.percentile(expanded, 90) = pos 5.4 -> 9; q=60: pos 3.6 -> 2 + 0.6*3 = 3.8 */
    cr_assert_float_eq(met_percentile_weighted(v, w, 4, 60), 3.8, EPS);
    const double u[] = {1, 2, 3, 4, 10};
    const int64_t ones[] = {1, 1, 1, 1, 1};
    cr_assert_float_eq(met_percentile_weighted(u, ones, 5, 99), 9.76, EPS);
}

static req_record req(int64_t id, double arrival, double first, double finish, int prompt,
                      int output, stop_reason stop, bool warmup)
{
    return (req_record){.request_id = id, .arrival_time = arrival, .scheduled_prefill_time = arrival,
                        .first_token_time = first, .finish_time = finish, .prompt_len = prompt,
                        .output_len = output, .stop = stop, .warmup = warmup};
}

/* Measured requests (times in s):
 *   A: arrival 1.0, first 1.2, finish 2.2, prompt 100, output 11 -> TTFT 0.2, E2EL 1.2, TPOT 0.1
 *   B: arrival 1.5, first 1.9, finish 2.9, prompt 200, output 6  -> TTFT 0.4, E2EL 1.4, TPOT 0.2
 *   C: arrival 2.0, first 2.1, finish 2.1, prompt 50,  output 1  -> TTFT 0.1, E2EL 0.1, no TPOT
 *   D: arrival 2.5, rejected (kv_capacity) at 3.0
 * plus a warm-up request W with absurd values that must not count.
 * completed 3, rejected 1; duration = max finish 3.0 - min arrival 1.0 = 2.0 s.
 * input 350, output 18 tokens -> 1.5 req/s, 9 tok/s, 184 tok/s.
 * TTFT {0.1, 0.2, 0.4} s: mean 233.33 ms, median 200, std = sqrt((133.33^2 + 33.33^2 +
 *   166.67^2)/3) = 124.72 ms, p90 = 200 + 0.8*200 = 360, p99 = 200 + 0.98*200 = 396.
 * E2EL {0.1, 1.2, 1.4}: mean 900 ms, median 1200, p90 = 1200 + 0.8*200 = 1360.
 * TPOT {0.1, 0.2}: mean 150 ms, median 150, std 50, p90 = 100 + 0.9*100 = 190.
 * Goodput with TTFT <= 300 ms and TPOT <= 150 ms: A passes (0.2, 0.1), B fails TTFT, C passes
 *   (0.1, no TPOT): 2 / 2.0 s = 1.0 req/s. */
static met_acc *four_requests(void)
{
    met_acc *m = met_create();
    cr_assert_not_null(m);
    met_keep_requests(m);
    req_record w = req(0, 0.0, 50.0, 100.0, 99999, 999, STOP_LENGTH, true);
    req_record a = req(1, 1.0, 1.2, 2.2, 100, 11, STOP_LENGTH, false);
    req_record b = req(2, 1.5, 1.9, 2.9, 200, 6, STOP_LENGTH, false);
    req_record c = req(3, 2.0, 2.1, 2.1, 50, 1, STOP_LENGTH, false);
    req_record d = req(4, 2.5, NAN, 3.0, 300, 0, STOP_KV_CAPACITY, false);
    d.scheduled_prefill_time = NAN;
    const req_record all[] = {w, a, b, c, d};
    for (size_t i = 0; i < 5; i++)
        met_on_request(m, &all[i]);
    return m;
}

/* A request exactly at each objective meets it, as vLLM's goodput counts (<=); a hair
 * below it misses. Times are exact in binary: TTFT 0.25 s, E2EL 0.75 s, TPOT 0.25 s. */
Test(metrics, a_request_exactly_at_its_slo_is_good)
{
    met_acc *m = met_create();
    req_record r = req(1, 1.0, 1.25, 1.75, 10, 3, STOP_LENGTH, false);
    met_on_request(m, &r);
    summary s;
    const slo_config at[] = {{.ttft_ms = 250}, {.tpot_ms = 250}, {.e2el_ms = 750}};
    const slo_config below[] = {{.ttft_ms = 249.999}, {.tpot_ms = 249.999}, {.e2el_ms = 749.999}};
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(met_summarize(m, &at[i], &s), 0);
        cr_assert_float_eq(s.request_goodput, 1 / 0.75, EPS, "objective %d exactly met", i);
        cr_assert_eq(met_summarize(m, &below[i], &s), 0);
        cr_assert_float_eq(s.request_goodput, 0, EPS, "objective %d missed by a microsecond", i);
    }
    met_free(m);
}

Test(metrics, hand_computed_requests)
{
    met_acc *m = four_requests();
    summary s;
    slo_config slo = {.ttft_ms = 300, .tpot_ms = 150};
    cr_assert_eq(met_summarize(m, &slo, &s), 0);
    cr_assert_eq(s.completed, 3);
    cr_assert_eq(s.rejected, 1);
    cr_assert_float_eq(s.duration, 2.0, EPS);
    cr_assert_eq(s.total_input_tokens, 350);
    cr_assert_eq(s.total_output_tokens, 18);
    cr_assert_float_eq(s.request_throughput, 1.5, EPS);
    cr_assert_float_eq(s.output_throughput, 9.0, EPS);
    cr_assert_float_eq(s.total_token_throughput, 184.0, EPS);
    cr_assert_float_eq(s.request_goodput, 1.0, EPS);

    cr_assert_float_eq(s.ttft_ms.mean, 700.0 / 3, 1e-6);
    cr_assert_float_eq(s.ttft_ms.median, 200.0, 1e-6);
    cr_assert_float_eq(s.ttft_ms.std, sqrt((pow(400.0 / 3, 2) + pow(100.0 / 3, 2) +
                                            pow(500.0 / 3, 2)) / 3), 1e-6);
    cr_assert_float_eq(s.ttft_ms.p50, 200.0, 1e-6);
    cr_assert_float_eq(s.ttft_ms.p90, 360.0, 1e-6);
    cr_assert_float_eq(s.ttft_ms.p99, 396.0, 1e-6);
    cr_assert_float_eq(s.ttft_ms.min, 100.0, 1e-6);
    cr_assert_float_eq(s.ttft_ms.max, 400.0, 1e-6);

    cr_assert_float_eq(s.e2el_ms.mean, 900.0, 1e-6);
    cr_assert_float_eq(s.e2el_ms.median, 1200.0, 1e-6);
    cr_assert_float_eq(s.e2el_ms.p90, 1360.0, 1e-6);

    cr_assert_float_eq(s.tpot_ms.mean, 150.0, 1e-6);
    cr_assert_float_eq(s.tpot_ms.median, 150.0, 1e-6);
    cr_assert_float_eq(s.tpot_ms.std, 50.0, 1e-6);
    cr_assert_float_eq(s.tpot_ms.p90, 190.0, 1e-6);

    /* Without SLOs every completed request is good. */
    cr_assert_eq(met_summarize(m, NULL, &s), 0);
    cr_assert_float_eq(s.request_goodput, 1.5, EPS);
    slo_config e2el_only = {.e2el_ms = 1300};
    met_summarize(m, &e2el_only, &s);
    cr_assert_float_eq(s.request_goodput, 1.0, EPS, "A and C end within 1.3 s, B does not");

    size_t n;
    const req_record *r = met_requests(m, &n);
    cr_assert_eq(n, 5, "warm-up records are kept when asked");
    cr_assert(r[0].warmup && r[0].request_id == 0 && r[4].request_id == 4);
    met_free(m);
}

/* Equal, or both without a value (a latency with no sample is NAN). */
static bool same(double x, double y) { return x == y || (isnan(x) && isnan(y)); }

static bool same_latency(const latency_stats *x, const latency_stats *y)
{
    return same(x->mean, y->mean) && same(x->median, y->median) && same(x->std, y->std) && same(x->p50, y->p50) &&
           same(x->p90, y->p90) && same(x->p99, y->p99) && same(x->min, y->min) && same(x->max, y->max);
}

/* Every field equal, bit for bit (a memcmp would also compare padding). */
static bool same_summary(const summary *x, const summary *y)
{
    bool equal = true;
#define S(name, type, csv, label, what) equal = equal && same((double)x->name, (double)y->name);
#define L(name, title, abbrev, what) equal = equal && same_latency(&x->name##_ms, &y->name##_ms);
    SUMMARY_FIELDS(S, L)
#undef S
#undef L
    return equal;
}

/* Records are kept only on request: a long run's memory grows by its latencies alone. The
 * summary is the same either way, and does not depend on the order requests end in. */
Test(metrics, records_kept_only_when_asked_and_summary_independent_of_order)
{
    met_acc *kept = four_requests(), *lean = met_create(), *reversed = met_create();
    size_t n;
    const req_record *all = met_requests(kept, &n);
    for (size_t i = 0; i < n; i++) {
        met_on_request(lean, &all[i]);
        met_on_request(reversed, &all[n - 1 - i]);
    }
    size_t none = 99;
    met_requests(lean, &none);
    cr_assert_eq(none, 0, "no records without met_keep_requests");
    slo_config slo = {.ttft_ms = 300, .tpot_ms = 150};
    summary a, b, c;
    cr_assert_eq(met_summarize(kept, &slo, &a), 0);
    cr_assert_eq(met_summarize(lean, &slo, &b), 0);
    cr_assert_eq(met_summarize(reversed, &slo, &c), 0);
    cr_assert(same_summary(&a, &b), "kept and lean summaries differ");
    cr_assert(same_summary(&a, &c), "the order requests end in changed the summary");
    cr_assert_float_eq(c.request_goodput, 1.0, EPS);
    cr_assert_eq(c.rejected, 1);
    met_free(kept);
    met_free(lean);
    met_free(reversed);
}

Test(metrics, itl_runs_are_merged_and_weighted)
{
    met_acc *m = met_create();
    met_on_request(m, &(req_record){.arrival_time = 0, .first_token_time = 0.1,
                                    .finish_time = 1, .output_len = 8, .stop = STOP_LENGTH});
    /* Gaps (s): 0.02 x3, 0.05, 0.02 x2, 0.01 -> sorted ms [10, 20 x5, 50]
     * mean = (10 + 100 + 50)/7 = 22.857; median = 20; p90: pos 5.4 -> 20 + 0.4*30 = 32;
     * p99: pos 5.94 -> 20 + 0.94*30 = 48.2; std = sqrt((12.857^2 + 5*2.857^2 + 27.143^2)/7) */
    const double gaps[] = {0.02, 0.02, 0.02, 0.05, 0.02, 0.02, 0.01};
    for (size_t i = 0; i < 7; i++)
        met_on_itl(m, gaps[i]);
    summary s;
    cr_assert_eq(met_summarize(m, NULL, &s), 0);
    double mean = 160.0 / 7;
    cr_assert_float_eq(s.itl_ms.mean, mean, 1e-6);
    cr_assert_float_eq(s.itl_ms.median, 20.0, 1e-6);
    cr_assert_float_eq(s.itl_ms.p90, 32.0, 1e-6);
    cr_assert_float_eq(s.itl_ms.p99, 48.2, 1e-6);
    cr_assert_float_eq(s.itl_ms.std, sqrt((pow(10 - mean, 2) + 5 * pow(20 - mean, 2) +
                                           pow(50 - mean, 2)) / 7), 1e-6);
    cr_assert_float_eq(s.itl_ms.min, 10.0, 1e-6);
    cr_assert_float_eq(s.itl_ms.max, 50.0, 1e-6);
    /* More gaps after a summary still count, and a second summary sees all of them:
     * [10, 20 x5, 50, 50] -> median = 20, max 50, mean = 210/8 */
    met_on_itl(m, 0.05);
    cr_assert_eq(met_summarize(m, NULL, &s), 0);
    cr_assert_float_eq(s.itl_ms.mean, 210.0 / 8, 1e-6);
    cr_assert_float_eq(s.itl_ms.median, 20.0, 1e-6);
    met_free(m);
}

Test(metrics, even_count_median_is_mean_of_middle_values)
{
    met_acc *m = met_create();
    /* TTFTs 0.1 and 0.4 s: median 250 ms */
    met_on_request(m, &(req_record){.arrival_time = 0, .first_token_time = 0.1,
                                    .finish_time = 1, .output_len = 2, .stop = STOP_LENGTH});
    met_on_request(m, &(req_record){.arrival_time = 0, .first_token_time = 0.4,
                                    .finish_time = 1, .output_len = 2, .stop = STOP_LENGTH});
    summary s;
    met_summarize(m, NULL, &s);
    cr_assert_float_eq(s.ttft_ms.median, 250.0, 1e-9);
    met_free(m);
}

Test(metrics, warmup_only_or_nothing_completed_returns_minus_one)
{
    met_acc *m = met_create();
    summary s;
    cr_assert_eq(met_summarize(m, NULL, &s), -1);
    cr_assert_eq(s.completed, 0);
    met_on_request(m, &(req_record){.arrival_time = 0, .first_token_time = 0.1,
                                    .finish_time = 1, .output_len = 2, .stop = STOP_LENGTH,
                                    .warmup = true});
    met_on_request(m, &(req_record){.arrival_time = 1, .first_token_time = NAN,
                                    .finish_time = 1.5, .stop = STOP_TOO_LONG});
    cr_assert_eq(met_summarize(m, NULL, &s), -1);
    cr_assert_eq(s.completed, 0);
    cr_assert_eq(s.rejected, 1);
    cr_assert_float_eq(s.duration, 0.5, EPS, "the warm-up request's times do not count");
    cr_assert_eq(s.request_throughput, 0.0);
    /* no sample: no figure (NAN: null in summary.json), where vLLM reports 0 and every request
     * rejected read a perfect 0.0 ms TTFT, and keep_up 1.0 (a new user's trial) */
    const latency_stats *none[] = {&s.ttft_ms, &s.tpot_ms, &s.itl_ms, &s.e2el_ms};
    for (size_t i = 0; i < sizeof none / sizeof *none; i++)
        cr_assert(isnan(none[i]->mean) && isnan(none[i]->p50) && isnan(none[i]->p99) && isnan(none[i]->max) &&
                  isnan(none[i]->std), "latency %zu", i);
    cr_assert(isnan(s.keep_up), "%g", s.keep_up);
    met_free(m);
}

static step_record step(double start, double end, int waiting, int running, int free_blocks)
{
    return (step_record){.start_time = start, .end_time = end, .waiting = waiting,
                         .running = running, .num_free_blocks = free_blocks};
}

/* Steps from t = 0.5 are measured (window start); the one at 0 is warm-up.
 *   s1: [0.5, 0.6) waiting 4, running 2, free 100, batched 300, decode 2, prefill 256,
 *       hits 64 / queries 256, kv 512 allocated / 20 unused, padding 0
 *   s2: [0.6, 0.9) waiting 0, running 6, free 40,  batched 6,   decode 6, prefill 0,
 *       kv 768 / 44, 1 preempted, padding 2
 * durations 0.1 and 0.3 (total 0.4):
 *   mean_waiting = (4*0.1 + 0*0.3)/0.4 = 1.0; mean_running = (0.2 + 1.8)/0.4 = 5.0
 *   mean_free_blocks = (10 + 12)/0.4 = 55; min_free_blocks 40
 *   mean_batched_tokens 153, mean_decode_seqs 4, mean_prefill_tokens 128
 *   mean_step_time_ms 200; hit rate 0.25; fragmentation 64/1280 = 0.05; peak_running 6 */
Test(metrics, step_internals_in_window)
{
    met_acc *m = met_create();
    met_set_window_start(m, 0.5);
    step_record warm = step(0.0, 0.5, 1000, 1000, 0);
    warm.num_preempted = 50;
    warm.prefix_queries = 1000;
    met_on_step(m, &warm);
    step_record s1 = step(0.5, 0.6, 4, 2, 100);
    s1.num_batched_tokens = 300;
    s1.num_decode_seqs = 2;
    s1.num_prefill_tokens = 256;
    s1.prefix_hits = 64;
    s1.prefix_queries = 256;
    s1.kv_allocated_slots = 512;
    s1.kv_unused_slots = 20;
    step_record s2 = step(0.6, 0.9, 0, 6, 40);
    s2.num_batched_tokens = 6;
    s2.num_decode_seqs = 6;
    s2.kv_allocated_slots = 768;
    s2.kv_unused_slots = 44;
    s2.num_preempted = 1;
    s2.num_padding_tokens = 2;
    met_on_step(m, &s1);
    met_on_step(m, &s2);
    met_on_request(m, &(req_record){.arrival_time = 0.5, .first_token_time = 0.6,
                                    .finish_time = 0.9, .output_len = 4, .stop = STOP_LENGTH});
    summary s;
    cr_assert_eq(met_summarize(m, NULL, &s), 0);
    cr_assert_eq(s.num_steps, 2);
    cr_assert_float_eq(s.mean_waiting, 1.0, EPS);
    cr_assert_float_eq(s.mean_running, 5.0, EPS);
    cr_assert_float_eq(s.mean_free_blocks, 55.0, EPS);
    cr_assert_eq(s.min_free_blocks, 40);
    cr_assert_float_eq(s.mean_batched_tokens, 153.0, EPS);
    cr_assert_float_eq(s.mean_decode_seqs, 4.0, EPS);
    cr_assert_float_eq(s.mean_prefill_tokens, 128.0, EPS);
    cr_assert_float_eq(s.mean_step_time_ms, 200.0, 1e-6);
    cr_assert_eq(s.prefix_hits, 64);
    cr_assert_eq(s.prefix_queries, 256);
    cr_assert_float_eq(s.prefix_hit_rate, 0.25, EPS);
    cr_assert_float_eq(s.kv_fragmentation, 0.05, EPS);
    cr_assert_eq(s.peak_running, 6);
    cr_assert_eq(s.num_preemptions, 1);
    cr_assert_eq(s.total_prefill_tokens, 256);
    cr_assert_eq(s.total_padding_tokens, 2);
    met_free(m);
}

Test(metrics, no_steps_gives_zero_internals)
{
    met_acc *m = met_create();
    met_on_request(m, &(req_record){.arrival_time = 0, .first_token_time = 0.1,
                                    .finish_time = 1, .output_len = 2, .stop = STOP_LENGTH});
    summary s;
    met_summarize(m, NULL, &s);
    cr_assert_eq(s.num_steps, 0);
    cr_assert_eq(s.min_free_blocks, 0);
    cr_assert_eq(s.prefix_hit_rate, 0.0);
    cr_assert_eq(s.kv_fragmentation, 0.0);
    met_free(m);
}

/* A one-token request has no TPOT, also when its stream ends after its token (a load
 * client's record: the end is when [DONE] arrived): (E2EL - TTFT) / 0 must not enter the
 * statistics as infinity. */
Test(metrics, a_one_token_request_has_no_tpot_even_when_it_ends_after_its_token)
{
    met_acc *m = met_create();
    req_record one = req(0, 1.0, 1.2, 1.25, 10, 1, STOP_LENGTH, false);
    req_record two = req(1, 1.0, 1.2, 1.5, 10, 2, STOP_LENGTH, false);
    met_on_request(m, &one);
    met_on_request(m, &two);
    summary s;
    cr_assert_eq(met_summarize(m, NULL, &s), 0);
    cr_assert_float_eq(s.tpot_ms.mean, 300.0, 1e-9, "only the two-token request has a TPOT (0.3 s)");
    cr_assert_float_eq(s.tpot_ms.max, 300.0, 1e-9);
    met_free(m);
}

/* Percentiles asked for besides P50/P90/P99 (run.percentiles; 99.9 by default), by hand on
 * the ITL gaps above, sorted ms [10, 20 x5, 50] (positions 0..6): P99.9 at 5.994 -> 20 +
 * 0.994 x 30 = 49.82; P25 at 1.5 -> 20; P100 = 50. And on three TTFTs {100, 200, 400} ms:
 * P99.9 at 1.998 -> 200 + 0.998 x 200 = 399.6. summary.json names them p99.9_itl_ms. */
Test(metrics, percentiles_asked_for_by_hand)
{
    met_acc *m = met_create();
    met_on_request(m, &(req_record){.arrival_time = 0, .first_token_time = 0.1, .finish_time = 1, .output_len = 8,
                                    .stop = STOP_LENGTH});
    met_on_request(m, &(req_record){.arrival_time = 0, .first_token_time = 0.2, .finish_time = 1, .output_len = 8,
                                    .stop = STOP_LENGTH});
    met_on_request(m, &(req_record){.arrival_time = 0, .first_token_time = 0.4, .finish_time = 1, .output_len = 8,
                                    .stop = STOP_LENGTH});
    const double gaps[] = {0.02, 0.02, 0.02, 0.05, 0.02, 0.02, 0.01};
    for (size_t i = 0; i < 7; i++) met_on_itl(m, gaps[i]);
    summary s;
    cr_assert_eq(met_summarize(m, NULL, &s), 0);
    cr_assert_eq(s.num_percentiles, 1, "99.9 by default");
    cr_assert_float_eq(s.percentiles[0], 99.9, 0);
    cr_assert_float_eq(s.itl_ms.extra[0], 49.82, 1e-9);
    cr_assert_float_eq(s.ttft_ms.extra[0], 399.6, 1e-9);
    met_set_percentiles(m, (const double[]){25, 99.9, 100}, 3);
    cr_assert_eq(met_summarize(m, NULL, &s), 0);
    cr_assert_eq(s.num_percentiles, 3);
    cr_assert_float_eq(s.itl_ms.extra[0], 20, 1e-9);
    cr_assert_float_eq(s.itl_ms.extra[1], 49.82, 1e-9);
    cr_assert_float_eq(s.itl_ms.extra[2], 50, 1e-9);
    met_free(m);
}

/* A rejected request is said with its reason under the summary: "Rejected requests: 1" alone
 * left a newcomer of the README's CPU example (a 4,044-token prompt against tiny's 4,096-token
 * context) guessing (new-user trial). Reasons in the enum's order; warm-ups not counted. */
Test(metrics, rejections_are_said_with_their_reasons)
{
    met_acc *m = met_create();
    char buf[400];
    met_describe_rejected(m, 4096, buf, sizeof buf);
    cr_assert_str_eq(buf, "", "nothing rejected, nothing said");
    req_record ok = req(1, 1.0, 1.25, 1.75, 10, 3, STOP_LENGTH, false);
    req_record kv = req(2, 1.0, NAN, 1.0, 10, 0, STOP_KV_CAPACITY, false);
    req_record too_long = req(3, 1.0, NAN, 1.0, 5000, 0, STOP_TOO_LONG, false);
    req_record too_long2 = req(4, 2.0, NAN, 2.0, 5000, 0, STOP_TOO_LONG, false);
    req_record warm = req(5, 0.5, NAN, 0.5, 5000, 0, STOP_TOO_LONG, true);
    met_on_request(m, &ok);
    met_on_request(m, &kv);
    met_on_request(m, &too_long);
    met_on_request(m, &too_long2);
    met_on_request(m, &warm);
    met_describe_rejected(m, 4096, buf, sizeof buf);
    cr_assert_str_eq(buf, "Rejected: 2 longer than scheduler.max_model_len (4096 tokens) in prompt + output, as vLLM "
                          "rejects them; 1 needing more KV than the whole pool holds (requests.csv's stop_reason)");
    met_free(m);
}

/* `servesim load` counted the requests its server failed (HTTP errors, refused connections)
 * as "Rejected requests", the scheduler's word (a new user's trial): a failed or aborted
 * request is counted as failed, said apart, after the rejections. */
Test(metrics, failed_requests_are_counted_apart_from_rejected_ones)
{
    met_acc *m = met_create();
    req_record ok = req(1, 1.0, 1.25, 1.75, 10, 3, STOP_LENGTH, false);
    req_record error = req(2, 1.0, NAN, 1.5, 10, 0, STOP_ERROR, false);
    req_record error2 = req(3, 1.1, NAN, 1.2, 10, 0, STOP_ERROR, false);
    req_record aborted = req(4, 1.2, 1.3, 1.4, 10, 1, STOP_ABORTED, false);
    req_record too_long = req(5, 2.0, NAN, 2.0, 5000, 0, STOP_TOO_LONG, false);
    met_on_request(m, &ok);
    met_on_request(m, &error);
    met_on_request(m, &error2);
    met_on_request(m, &aborted);
    summary s;
    slo_config none = {0};
    cr_assert_eq(met_summarize(m, &none, &s), 0);
    cr_assert(s.completed == 1 && s.failed == 3 && s.rejected == 0, "%d %d %d", s.completed, s.failed, s.rejected);
    char buf[400];
    met_describe_rejected(m, 4096, buf, sizeof buf);
    cr_assert_str_eq(buf, "Failed: 1 aborted by their client; 2 answered with an error or not at all (requests.csv's "
                          "stop_reason)");
    met_on_request(m, &too_long);
    cr_assert_eq(met_summarize(m, &none, &s), 0);
    cr_assert(s.failed == 3 && s.rejected == 1);
    met_describe_rejected(m, 4096, buf, sizeof buf);
    cr_assert_str_eq(buf, "Rejected: 1 longer than scheduler.max_model_len (4096 tokens) in prompt + output, as vLLM "
                          "rejects them. Failed: 1 aborted by their client; 2 answered with an error or not at all "
                          "(requests.csv's stop_reason)");
    met_free(m);
}

/* keep_up by hand. The first P90 of the times in the system (at most a third of the sending)
 * is left out, the rest of the sending split in halves.
 *   steady: five requests sent at 0-4 s, each in the system 0.5 s: P90 0.5, from 0.5, halves
 *   [0.5, 2.25] and [2.25, 4] hold 0.75 request-seconds each -> 1;
 *   growing: seven sent at 0-6 s, request i ending at 2i + 1 (one ends every 2 s, one comes
 *   every second): the P90 stay, 6.4 s, is cut to a third of the 6 s, from 2; halves [2, 4]
 *   and [4, 6] hold 1 + 2 + 1 = 4 and 1 + 2 + 2 + 1 = 6, two sent in the second (at 5 and 6):
 *   1 - (6 - 4) / 2 / 2 = 0.5, the served rate over the offered one;
 *   every request sent at once: 0.
 * Without the fill left out, a steady run of requests that stay long reads as growing: ten
 * sent at 0-9 s, each staying 3 s, would be 1 - ((13.5 - 10.5) / 4.5) / 5 = 0.867 over halves
 * of the whole sending; from the P90 stay, 3 s, halves [3, 6] and [6, 9] hold 9 and 9 -> 1. */
Test(metrics, keep_up_by_hand)
{
    const struct { int n; double gap, stay, grow, want; } cases[] = {
        {5, 1, 0.5, 0, 1.0},
        {7, 1, 1, 1, 0.5},
        {10, 1, 3, 0, 1.0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        met_acc *m = met_create();
        for (int i = 0; i < cases[k].n; i++) {
            double sent = i * cases[k].gap, end = sent + cases[k].stay + cases[k].grow * i;
            met_on_request(m, &(req_record){.arrival_time = sent, .first_token_time = end, .finish_time = end,
                                            .output_len = 1, .stop = STOP_LENGTH});
        }
        summary s;
        cr_assert_eq(met_summarize(m, NULL, &s), 0);
        cr_assert_float_eq(s.keep_up, cases[k].want, EPS, "case %zu: %.17g", k, s.keep_up);
        met_free(m);
    }
    met_acc *m = met_create();
    for (int i = 0; i < 3; i++)
        met_on_request(m, &(req_record){.arrival_time = 1, .first_token_time = 2, .finish_time = 2,
                                        .output_len = 1, .stop = STOP_LENGTH});
    summary s;
    cr_assert_eq(met_summarize(m, NULL, &s), 0);
    cr_assert_eq(s.keep_up, 0.0, "sent at once");
    met_free(m);
    /* a rejected request is in the system until its rejection, and its stay does not set the
     * fill: sent at 0-4 s, staying 0.5 s but the one sent at 1, rejected at 2.5. The finished
     * ones' P90 stay is 0.5: from 0.5, halves [0.5, 2.25] and [2.25, 4] hold 1.25 + 0.25 and
     * 0.25 + 0.25 + 0.5: 1 + 0.5 / 1.75 / 2 = 1.142857. Left out, the rejection would make it
     * 0.857; kept in the system to the end, 0.714; its stay in the P90 (1.1), 1.483. */
    m = met_create();
    for (int i = 0; i < 5; i++) {
        bool rejected = i == 1;
        double end = rejected ? 2.5 : i + 0.5;
        met_on_request(m, &(req_record){.arrival_time = i, .first_token_time = rejected ? NAN : end,
                                        .finish_time = end, .output_len = rejected ? 0 : 1,
                                        .stop = rejected ? STOP_KV_CAPACITY : STOP_LENGTH});
    }
    cr_assert_eq(met_summarize(m, NULL, &s), 0);
    cr_assert_float_eq(s.keep_up, 1 + 0.5 / 1.75 / 2, 1e-12, "%.17g", s.keep_up);
    met_free(m);
    /* a served rate that falls as the queue grows gains the second half more than was sent in
     * it, and keep_up read -0.026 at 48 req/s in the arrival-rate report (a new user's trial),
     * where it means served over offered: 0 at worst. Sent at 0-3 s staying 0.1 s, five at 4 s
     * and one each at 5 and 6 staying 100 s: the P90 stay (100 s) is cut to 2 s; halves [2, 4]
     * and [4, 6] hold 0.2 and 5 x 2 + 1 = 11 request-seconds, two sent in the second (at 5 and
     * 6): 1 - 10.8 / 2 / 2 = -1.7, read as 0. */
    m = met_create();
    const double at[] = {0, 1, 2, 3, 4, 4, 4, 4, 4, 5, 6};
    for (size_t i = 0; i < sizeof at / sizeof *at; i++) {
        double end = at[i] + (at[i] < 4 ? 0.1 : 100);
        met_on_request(m, &(req_record){.arrival_time = at[i], .first_token_time = end, .finish_time = end,
                                        .output_len = 1, .stop = STOP_LENGTH});
    }
    cr_assert_eq(met_summarize(m, NULL, &s), 0);
    cr_assert_eq(s.keep_up, 0.0, "%.17g", s.keep_up);
    met_free(m);
}
