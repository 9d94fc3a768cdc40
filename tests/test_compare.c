/* The validation comparison itself. */
#include <criterion/criterion.h>
#include <math.h>

#include "metrics/compare.h"

static req_record reqs[3] = {
    {.request_id = 0}, {.request_id = 1}, {.request_id = 2},
};

static summary base(void)
{
    summary s = {0};
    s.ttft_ms = (latency_stats){.mean = 100, .p50 = 80, .p90 = 150, .p99 = 300};
    s.tpot_ms = (latency_stats){.mean = 10, .p50 = 9, .p90 = 12, .p99 = 20};
    s.itl_ms = s.tpot_ms;
    s.e2el_ms = (latency_stats){.mean = 1000, .p50 = 900, .p90 = 1500, .p99 = 2500};
    s.request_throughput = 5;
    s.output_throughput = 500;
    s.mean_batched_tokens = 40;
    s.num_preemptions = 0;
    return s;
}

static cmp_side side(const summary *s, const req_record *r, size_t n)
{
    return (cmp_side){.sum = s, .reqs = r, .num_reqs = n};
}

Test(compare, identical_records_give_zero_error)
{
    summary a = base(), b = base();
    cmp_side sa = side(&a, reqs, 3), sb = side(&b, reqs, 3);
    cmp_result r;
    char err[256];
    cr_assert_eq(cmp_runs(&sa, &sb, &r, err, sizeof err), 0, "%s", err);
    cr_assert_gt(r.num_rows, 16);
    for (int i = 0; i < r.num_rows; i++) cr_assert_eq(r.rows[i].rel_error, 0, "%s", r.rows[i].metric);
    cr_assert_eq(r.first_divergence, -1);
}

Test(compare, a_known_shift_gives_the_known_error)
{
    summary sim = base(), real = base();
    sim.ttft_ms.p99 = 330;      /* +10% */
    sim.tpot_ms.p50 = 8.1;      /* -10% */
    sim.num_preemptions = 2;    /* measured 0: infinite */
    cmp_side ss = side(&sim, reqs, 3), sr = side(&real, reqs, 3);
    cmp_result r;
    char err[256];
    cr_assert_eq(cmp_runs(&ss, &sr, &r, err, sizeof err), 0);
    cr_assert_float_eq(cmp_find(&r, "p99_ttft_ms")->rel_error, 0.10, 1e-12);
    cr_assert_float_eq(cmp_find(&r, "p50_tpot_ms")->rel_error, -0.10, 1e-12);
    cr_assert(isinf(cmp_find(&r, "num_preemptions")->rel_error));
    cr_assert_eq(cmp_find(&r, "p50_ttft_ms")->rel_error, 0);
}

Test(compare, a_request_missing_on_one_side_is_an_error)
{
    summary a = base(), b = base();
    req_record two[2] = {{.request_id = 0}, {.request_id = 2}};
    cmp_side full = side(&a, reqs, 3), partial = side(&b, two, 2);
    cmp_result r;
    char err[256];
    cr_assert_eq(cmp_runs(&full, &partial, &r, err, sizeof err), -1);
    cr_assert_str_eq(err, "request 1 is in the simulated records but not in the measured ones");
    cr_assert_eq(cmp_runs(&partial, &full, &r, err, sizeof err), -1);
    cr_assert_str_eq(err, "request 1 is in the measured records but not in the simulated ones");
}

Test(compare, steps_give_the_prediction_error_and_the_first_divergence)
{
    summary a = base(), b = base();
    step_record sim[3] = {{.num_batched_tokens = 10}, {.num_batched_tokens = 3}, {.num_batched_tokens = 3}};
    step_record real[3] = {
        {.num_batched_tokens = 10, .start_time = 0, .end_time = 1.0, .predicted_time = 1.1},
        {.num_batched_tokens = 3, .start_time = 1, .end_time = 1.5, .predicted_time = 0.4},
        {.num_batched_tokens = 4, .start_time = 1.5, .end_time = 2.0, .predicted_time = NAN},
    };
    cmp_side ss = side(&a, reqs, 3), sr = side(&b, reqs, 3);
    ss.steps = sim, ss.num_steps = 3;
    sr.steps = real, sr.num_steps = 3;
    cmp_result r;
    char err[256];
    cr_assert_eq(cmp_runs(&ss, &sr, &r, err, sizeof err), 0);
    cr_assert_eq(r.first_divergence, 2);
    cr_assert_eq(r.steps_predicted, 2);
    cr_assert_float_eq(r.step_mape, (0.1 + 0.2) / 2, 1e-12);
}

Test(compare, several_measured_runs_give_the_median_and_the_spread)
{
    /* Measured P99 TTFT 300, 360 and 240 across three runs: median 300, spread (360 - 240) / 300
     * = 40%; simulated 330 is +10% off the median. */
    double p99[3] = {300, 360, 240};
    summary sim = base(), real[3];
    sim.ttft_ms.p99 = 330;
    cmp_result runs[3], all;
    char err[256];
    for (int i = 0; i < 3; i++) {
        real[i] = base();
        real[i].ttft_ms.p99 = p99[i];
        cmp_side ss = side(&sim, reqs, 3), sr = side(&real[i], reqs, 3);
        cr_assert_eq(cmp_runs(&ss, &sr, &runs[i], err, sizeof err), 0, "%s", err);
        runs[i].step_mape = 0.1 * (i + 1); /* 10%, 20%, 30% over 100, 100 and 200 steps: 22.5% */
        runs[i].steps_predicted = i == 2 ? 200 : 100;
    }
    cmp_combine(runs, 3, &all);
    const cmp_row *row = cmp_find(&all, "p99_ttft_ms");
    cr_assert_float_eq(row->measured, 300, 1e-12);
    cr_assert_float_eq(row->rel_error, 0.10, 1e-12);
    cr_assert_float_eq(row->spread, 0.40, 1e-12);
    cr_assert_eq(cmp_find(&all, "p50_ttft_ms")->spread, 0, "identical runs have no spread");
    cr_assert_float_eq(all.step_mape, 0.225, 1e-12);
    cr_assert_eq(all.steps_predicted, 400);
}

Test(compare, differing_simulations_give_the_error_between_the_medians)
{
    /* Simulated P50 TPOT 9.9 / 8.1 / 11 against measured 9 / 9 / 10: medians 9.9 and 9, error
     * +10%, spread (10 - 9) / 9. */
    double sim_v[3] = {9.9, 8.1, 11}, real_v[3] = {9, 9, 10};
    cmp_result runs[3], all, none;
    char err[256];
    for (int i = 0; i < 3; i++) {
        summary s = base(), m = base();
        s.tpot_ms.p50 = sim_v[i];
        m.tpot_ms.p50 = real_v[i];
        cmp_side ss = side(&s, reqs, 3), sm = side(&m, reqs, 3);
        cr_assert_eq(cmp_runs(&ss, &sm, &runs[i], err, sizeof err), 0, "%s", err);
    }
    cmp_combine(runs, 3, &all);
    const cmp_row *row = cmp_find(&all, "p50_tpot_ms");
    cmp_combine(runs, 0, &none);
    cr_assert_eq(none.num_rows, 0, "no runs, no rows");
    cr_assert_float_eq(row->rel_error, 0.10, 1e-12);
    cr_assert_float_eq(row->simulated, 9.9, 1e-12);
    cr_assert_float_eq(row->measured, 9, 1e-12);
    cr_assert_float_eq(row->spread, 1.0 / 9, 1e-12);
}

/* A latency with no sample is NAN (every request's output one token: no TPOT). Two sides
 * without one agree; one without one is infinitely off, never a pass: the comparisons are
 * `!(|error| <= limit)`, and NAN was read as 0 ms on both sides before. */
Test(compare, a_figure_without_samples_agrees_only_with_another_without)
{
    cr_assert_eq(cmp_rel_error(NAN, NAN), 0.0);
    cr_assert(isinf(cmp_rel_error(NAN, 12.5)));
    cr_assert(isinf(cmp_rel_error(12.5, NAN)));
    cr_assert_float_eq(cmp_rel_error(11, 10), 0.1, 1e-12);
    cr_assert_eq(cmp_rel_error(0, 0), 0.0);
    cr_assert(isinf(cmp_rel_error(1, 0)));
}
