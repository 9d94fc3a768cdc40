/* Cost tables: reading, interpolation, extrapolation, the serving scales; a small real
 * calibration of the CPU backend end to end. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "calibrate/calibrate.h"
#include "cli/commands.h"
#include "core/model.h"
#include "sim/table_cost.h"

/* linear(T) = 1e-3 T; prefill(n, c) = 1e-6 n (c + 10); decode(b, c) = 1e-6 b c;
 * lm_head(R) = sample(R) = 1e-4 R; overhead 5e-4: all bilinear, so interpolation is exact. */
static void synthetic(cost_table *t)
{
    ct_init(t);
    double xs[] = {1, 2, 4, 8}, ys[] = {0, 16, 64};
    for (int i = 0; i < 4; i++) {
        ct_add(t, CT_LINEAR, xs[i], 0, 1e-3 * xs[i]);
        ct_add(t, CT_LM_HEAD, xs[i], 0, 1e-4 * xs[i]);
        ct_add(t, CT_SAMPLE, xs[i], 0, 1e-4 * xs[i]);
        for (int j = 0; j < 3; j++) {
            ct_add(t, CT_PREFILL_ATTN, xs[i], ys[j], 1e-6 * xs[i] * (ys[j] + 10));
            ct_add(t, CT_DECODE_ATTN, xs[i], ys[j] + 1, 1e-6 * xs[i] * (ys[j] + 1));
        }
    }
    ct_add(t, CT_OVERHEAD, 0, 0, 5e-4);
}

Test(table_cost, interpolates_exactly_on_bilinear_data_and_extrapolates)
{
    cost_table t;
    synthetic(&t);
    table_cost tc;
    char err[256];
    cr_assert_eq(tc_init(&tc, &t, "synthetic", err, sizeof err), 0, "%s", err);
    bool outside = false;
    cr_assert_float_eq(tc_component(&tc, CT_LINEAR, 3, 0, &outside), 3e-3, 1e-15);
    cr_assert_float_eq(tc_component(&tc, CT_PREFILL_ATTN, 6, 40, &outside), 1e-6 * 6 * 50, 1e-15);
    cr_assert_not(outside);
    cr_assert_float_eq(tc_component(&tc, CT_LINEAR, 16, 0, &outside), 16e-3, 1e-15);
    cr_assert(outside, "16 lies beyond the sweep");
    /* a step: 2 decodes at contexts 9 and 33 (mean 21) plus a 4-token chunk after 16 cached */
    request r[3];
    sched_item items[3] = {
        {.req = &r[0], .num_new_tokens = 1, .context_len = 8, .emits_token = true},
        {.req = &r[1], .num_new_tokens = 1, .context_len = 32, .emits_token = true},
        {.req = &r[2], .num_new_tokens = 4, .context_len = 16},
    };
    sched_batch b = {.items = items, .num_items = 3, .num_batched_tokens = 6, .num_prefill_tokens = 4,
                     .decode_context_sum = 9 + 33, .num_multi_token_items = 1};
    double want = 6e-3 + 2 * 3e-4 + 1e-6 * 4 * 26 + 1e-6 * 2 * 21 + 5e-4;
    cr_assert_float_eq(tc_step_time(&tc, &b), want, 1e-12);
    tc_free(&tc);
    /* serving scales multiply the components, not the overhead */
    ct_set_meta(&t, "serving_scale_prefill", "2");
    cr_assert_eq(tc_init(&tc, &t, "scaled", err, sizeof err), 0);
    cr_assert_float_eq(tc_step_time(&tc, &b), 2 * (want - 5e-4) + 5e-4, 1e-12);
    /* ...of prompt-bound steps only: a 2-token chunk riding with 4 decodes (all at context
     * 16 + 1) is priced as decode work, scale 1 */
    request q[5];
    sched_item ride[5];
    for (int i = 0; i < 4; i++) ride[i] = (sched_item){.req = &q[i], .num_new_tokens = 1, .context_len = 16, .emits_token = true};
    ride[4] = (sched_item){.req = &q[4], .num_new_tokens = 2, .context_len = 0};
    sched_batch d = {.items = ride, .num_items = 5, .num_batched_tokens = 6, .num_prefill_tokens = 2,
                     .num_prefill_seqs = 1, .num_decode_seqs = 4, .decode_context_sum = 4 * 17,
                     .num_multi_token_items = 1};
    double unscaled = 6e-3 + 2 * 5e-4 + 1e-6 * 2 * 10 + 1e-6 * 4 * 17 + 5e-4;
    cr_assert_float_eq(tc_step_time(&tc, &d), unscaled, 1e-12);
    cr_assert(tc_prompt_bound(5, 4) && !tc_prompt_bound(4, 4) && !tc_prompt_bound(0, 0));
    tc_free(&tc);
    const char *bad_scales[] = {"-1", "inf", "1e999", "2x", ""};
    for (size_t i = 0; i < sizeof bad_scales / sizeof bad_scales[0]; i++) {
        ct_set_meta(&t, "serving_scale_decode", bad_scales[i]);
        cr_assert_eq(tc_init(&tc, &t, "bad", err, sizeof err), -1, "\"%s\" was accepted", bad_scales[i]);
        cr_assert(strstr(err, "serving_scale_decode"), "%s", err);
    }
    ct_free(&t);
}

/* N one-token sequences at context 16 + 1, into B (ITEMS holds N). */
static sched_batch decodes(int n, sched_item *items, request *reqs)
{
    for (int i = 0; i < n; i++)
        items[i] = (sched_item){.req = &reqs[i], .num_new_tokens = 1, .context_len = 16, .emits_token = true};
    return (sched_batch){.items = items, .num_items = n, .num_batched_tokens = n, .num_decode_seqs = n,
                         .decode_context_sum = 17 * n};
}

/* Decode-like steps take the scale of their number of sequences' bucket (1, 2-3, 4-7, ...),
 * the last bucket's past the end; prompt-bound steps keep theirs. */
Test(table_cost, decode_steps_are_scaled_by_their_number_of_sequences)
{
    cr_assert_eq(tc_seq_bucket(1), 0);
    cr_assert_eq(tc_seq_bucket(2), 1);
    cr_assert_eq(tc_seq_bucket(3), 1);
    cr_assert_eq(tc_seq_bucket(4), 2);
    cr_assert_eq(tc_seq_bucket(7), 2);
    cr_assert_eq(tc_seq_bucket(8), 3);
    cr_assert_eq(tc_seq_bucket(1 << 20), TC_SEQ_BUCKETS - 1);
    cost_table t;
    synthetic(&t);
    ct_set_meta(&t, "serving_scale_decode", "7");
    ct_set_meta(&t, "serving_scale_prefill", "5");
    ct_set_meta(&t, "serving_scale_decode_by_seqs", "1:0.5 2:2 4:3");
    table_cost tc;
    char err[256];
    cr_assert_eq(tc_init(&tc, &t, "by-seqs", err, sizeof err), 0, "%s", err);
    sched_item items[12];
    request reqs[12];
    const struct { int n; double scale; } cases[] = {{1, 0.5}, {2, 2}, {3, 2}, {4, 3}, {7, 3}, {12, 3}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int n = cases[i].n;
        sched_batch b = decodes(n, items, reqs);
        double components = 1e-3 * n + 2e-4 * n + 1e-6 * n * 17;
        cr_assert_float_eq(tc_step_time(&tc, &b), cases[i].scale * components + 5e-4, 1e-12, "%d sequences", n);
    }
    /* a whole prompt of 8 tokens alone is prompt-bound: scale 5 */
    items[0] = (sched_item){.req = &reqs[0], .num_new_tokens = 8, .context_len = 0};
    sched_batch p = {.items = items, .num_items = 1, .num_batched_tokens = 8, .num_prefill_tokens = 8,
                     .num_prefill_seqs = 1, .num_multi_token_items = 1};
    cr_assert_float_eq(tc_step_time(&tc, &p), 5 * (8e-3 + 2e-4 + 1e-6 * 8 * 10) + 5e-4, 1e-12);
    tc_free(&tc);
    const char *bad[] = {"2:1", "1:0.5 4:2", "1:-1", "1:x", "1:0.5,2:1", "1:", "1:inf", "1:1e999", "1:nan"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ct_set_meta(&t, "serving_scale_decode_by_seqs", bad[i]);
        cr_assert_eq(tc_init(&tc, &t, "bad", err, sizeof err), -1, "\"%s\" was accepted", bad[i]);
        cr_assert(strstr(err, "serving_scale_decode_by_seqs") && strstr(err, bad[i]), "%s", err);
    }
    ct_free(&t);
}

Test(table_cost, a_table_that_is_not_a_full_grid_is_refused)
{
    cost_table t;
    synthetic(&t);
    t.n[CT_DECODE_ATTN]--; /* drop (8, 65) */
    table_cost tc;
    char err[256];
    cr_assert_eq(tc_init(&tc, &t, "holey", err, sizeof err), -1);
    cr_assert(strstr(err, "decode_attn is not a full grid: no row for (8, 65)"), "%s", err);
    ct_free(&t);
}

/* A plan opens a table for every layout and point: "warned once" came a dozen times for one
 * table. Now once a table a process, however many copies price steps outside it. */
Test(table_cost, a_table_is_warned_about_once_a_process, .init = cr_redirect_stderr)
{
    cost_table t;
    synthetic(&t);
    table_cost a, b;
    char err[256];
    cr_assert_eq(tc_init(&a, &t, "once.csv", err, sizeof err), 0, "%s", err);
    cr_assert_eq(tc_init(&b, &t, "once.csv", err, sizeof err), 0, "%s", err);
    request r;
    sched_item it = {.req = &r, .num_new_tokens = 16, .context_len = 0};
    sched_batch big = {.items = &it, .num_items = 1, .num_batched_tokens = 16, .num_prefill_tokens = 16,
                       .num_multi_token_items = 1};
    tc_step_time(&a, &big);
    tc_step_time(&b, &big);
    tc_step_time(&a, &big);
    tc_free(&a);
    tc_free(&b);
    ct_free(&t);
    fflush(stderr);
    char text[1024];
    text[fread(text, 1, sizeof text - 1, cr_get_redirected_stderr())] = 0;
    /* it names what lies outside, and the sweep (it once said only "a step") */
    cr_assert_str_eq(text, "servesim: warning: cost table once.csv: a step's linear at 16 (its sweep 1-8) lies "
                           "outside the table; extrapolating (warned once)\n");
}

/* A table of zeros priced every run at 0 ms and exited 0 (bad-input campaign) */
/* A tensor-parallel table: allreduce(T) = 2e-4 T, allreduce_fused(T) = 1e-4 T + 1e-4; steps of up
 * to fused_max_tokens take the fused price, longer ones the other; none without the rows. */
Test(table_cost, all_reduces_are_fused_up_to_the_threshold)
{
    cost_table t;
    synthetic(&t);
    double xs[] = {1, 2, 4, 8};
    for (int i = 0; i < 4; i++) {
        ct_add(&t, CT_ALLREDUCE, xs[i], 0, 2e-4 * xs[i]);
        ct_add(&t, CT_ALLREDUCE_FUSED, xs[i], 0, 1e-4 * xs[i] + 1e-4);
    }
    table_cost tc;
    char err[256];
    cr_assert_eq(tc_init(&tc, &t, "tp", err, sizeof err), 0, "%s", err);
    cr_assert(tc_has(&tc, CT_ALLREDUCE) && tc_has(&tc, CT_ALLREDUCE_FUSED));
    request reqs[8];
    sched_item items[8];
    /* 4 decodes at context 17: linear 4e-3, lm_head + sample 8e-4, attention 4 x 17e-6, overhead 5e-4 */
    sched_batch b = decodes(4, items, reqs);
    double rest = 4e-3 + 8e-4 + 68e-6 + 5e-4;
    cr_assert_float_eq(tc_step_time(&tc, &b), rest + 8e-4, 1e-12, "no fusion (tc_init's default)");
    tc.fused_max_tokens = 4;
    cr_assert_float_eq(tc_step_time(&tc, &b), rest + 5e-4, 1e-12, "4 tokens, fused up to 4");
    tc.fused_max_tokens = 3;
    cr_assert_float_eq(tc_step_time(&tc, &b), rest + 8e-4, 1e-12, "4 tokens, fused up to 3");
    tc_free(&tc);
    /* fused rows alone cannot price a step too long to fuse */
    t.n[CT_ALLREDUCE] = 0;
    cr_assert_eq(tc_init(&tc, &t, "half", err, sizeof err), -1);
    cr_assert_str_eq(err, "cost table half: allreduce_fused rows without allreduce rows (the all-reduces of steps "
                          "too long to fuse)");
    /* a table of one GPU: neither, and the step is the rest */
    t.n[CT_ALLREDUCE_FUSED] = 0;
    cr_assert_eq(tc_init(&tc, &t, "one", err, sizeof err), 0, "%s", err);
    tc.fused_max_tokens = 8;
    cr_assert_not(tc_has(&tc, CT_ALLREDUCE));
    cr_assert_float_eq(tc_step_time(&tc, &b), rest, 1e-12);
    tc_free(&tc);
    t.n[CT_ALLREDUCE] = t.n[CT_ALLREDUCE_FUSED] = 4;
    ct_free(&t);
}

Test(table_cost, a_table_that_prices_nothing_is_refused)
{
    cost_table t;
    synthetic(&t);
    for (size_t i = 0; i < t.n[CT_LINEAR]; i++) t.points[CT_LINEAR][i].seconds = 0;
    table_cost tc;
    char err[256];
    cr_assert_eq(tc_init(&tc, &t, "zeros", err, sizeof err), -1);
    cr_assert_str_eq(err, "cost table zeros: every linear price is 0 s; a table holds the seconds each step takes");
    ct_free(&t);
}

/* A second overhead row was read past, unused, and priced nothing (bad-input campaign). */
Test(table_cost, a_second_overhead_row_is_refused)
{
    cost_table t;
    synthetic(&t);
    ct_add(&t, CT_OVERHEAD, 1, 0, 5e-3);
    table_cost tc;
    char err[256];
    cr_assert_eq(tc_init(&tc, &t, "two", err, sizeof err), -1);
    cr_assert_str_eq(err, "cost table two: 2 overhead rows; a table holds one, the fixed cost of a step");
    ct_free(&t);
}

Test(table_cost, files_round_trip_and_bad_rows_name_their_line)
{
    cost_table t, back;
    synthetic(&t);
    ct_add(&t, CT_ALLREDUCE, 1, 0, 1e-5);
    ct_add(&t, CT_ALLREDUCE_FUSED, 1, 0, 5e-6);
    ct_set_meta(&t, "model", "synthetic");
    char path[64], err[512];
    snprintf(path, sizeof path, "/tmp/servesim-test-table-%d.csv", (int)getpid());
    cr_assert_eq(ct_write(&t, path, err, sizeof err), 0, "%s", err);
    cr_assert_eq(ct_read(&back, path, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(ct_meta(&back, "model"), "synthetic");
    for (int c = 0; c < CT_COUNT; c++) cr_assert_eq(back.n[c], t.n[c], "%s", ct_component_name(c));
    cr_assert_float_eq(back.points[CT_ALLREDUCE_FUSED][0].seconds, 5e-6, 1e-18);
    ct_free(&back);
    FILE *f = fopen(path, "w");
    fputs("# servesim cost table\ncomponent,x,y,seconds\nlinear,1,0,0.001\nlinear,2,zero,0.002\n", f);
    fclose(f);
    cr_assert_eq(ct_read(&back, path, err, sizeof err), -1);
    char want[128];
    snprintf(want, sizeof want, "%s:4: \"zero\" is not a non-negative number", path);
    cr_assert_str_eq(err, want);
    /* an empty file, and a directory, are not tables (the empty file once read as a table
     * with no rows: its missing header was reported at line 0, which counted as no error) */
    fclose(fopen(path, "w"));
    cr_assert_eq(ct_read(&back, path, err, sizeof err), -1);
    cr_assert(strstr(err, "not a cost table"), "%s", err);
    cr_assert_eq(ct_read_meta(&back, path, err, sizeof err), -1);
    cr_assert_eq(ct_read(&back, "/tmp", err, sizeof err), -1);
    cr_assert(strstr(err, "is a directory"), "%s", err);
    /* 1e308 s is finite, and priced steps into an infinite clock with exit 0 */
    f = fopen(path, "w");
    fputs("component,x,y,seconds\nlinear,1,0,1e308\n", f);
    fclose(f);
    cr_assert_eq(ct_read(&back, path, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s:2: seconds 1e308 is past 86400", path);
    cr_assert_str_eq(err, want);
    unlink(path);
    ct_free(&t);
}

static calib_options small_calibration(void)
{
    const model_shape *m = model_preset("tiny");
    return (calib_options){.kb = {.kind = KB_CPU, .weight_seed = 1, .sample_seed = 1, .threads = 1,
                                  .shape = {m->num_layers, m->hidden, m->num_heads, m->num_kv_heads, m->head_dim,
                                            m->intermediate, m->vocab, m->rope_theta, m->rms_eps}},
                           .model_name = "tiny", .block_size = 16, .max_tokens = 64, .max_context = 128,
                           .max_seqs = 8, .repeats = 1};
}

/* A real, small calibration of the tiny model: every component present, the table usable,
 * the held-out check finite, and the serving scales fitted from real engine steps. */
Test(calibrate, a_small_cpu_calibration_gives_a_usable_table, .timeout = 120)
{
    calib_options o = small_calibration();
    cost_table t;
    char err[512];
    cr_assert_eq(calibrate_run(&o, &t, err, sizeof err), 0, "%s", err);
    for (int c = 0; c < CT_FIRST_OPTIONAL; c++) cr_assert_gt(t.n[c], 0, "no %s rows", ct_component_name(c));
    /* one process, no tensor parallelism: no all-reduces */
    for (int c = CT_FIRST_OPTIONAL; c < CT_COUNT; c++) cr_assert_eq(t.n[c], 0, "%s rows", ct_component_name(c));
    cr_assert_gt(atof(ct_meta(&t, "serving_scale_decode")), 0);
    cr_assert_gt(atof(ct_meta(&t, "serving_scale_prefill")), 0);
    /* one decode scale per bucket up to 8 sequences, each positive */
    const char *by = ct_meta(&t, "serving_scale_decode_by_seqs");
    double s1, s2, s4, s8;
    cr_assert(by && sscanf(by, "1:%lf 2:%lf 4:%lf 8:%lf", &s1, &s2, &s4, &s8) == 4, "%s", by);
    cr_assert(s1 > 0 && s2 > 0 && s4 > 0 && s8 > 0, "%s", by);
    cr_assert_str_eq(ct_meta(&t, "model"), "tiny");
    table_cost tc;
    cr_assert_eq(tc_init(&tc, &t, "calibrated", err, sizeof err), 0, "%s", err);
    /* every price a real, positive time; which of two is larger is a timing, which a loaded
     * machine can turn round (a check that 64 tokens cost more than 1 failed under load) */
    bool outside = false;
    for (int tokens = 1; tokens <= 64; tokens *= 4) {
        double s = tc_component(&tc, CT_LINEAR, tokens, 0, &outside);
        cr_assert(isfinite(s) && s > 0, "linear at %d tokens: %g s", tokens, s);
    }
    cr_assert_not(outside, "1-64 tokens lie within the calibrated sweep");
    tc_free(&tc);
    FILE *devnull = fopen("/dev/null", "w");
    cr_assert_geq(calibrate_check(&t, devnull), 0, "a table of sweeps checks something");
    fclose(devnull);
    ct_free(&t);
}

/* The serving segment's requests (prompts up to 256 tokens, outputs 4 to 64) did not fit a
 * small context: --max-tokens 2 --max-context 2 (or 2 and 1, or 4 and 1 with one sequence)
 * had every one rejected, and calibrate failed after its sweeps, "the serving measurement ran
 * too few steps" (bad-input campaign). Its requests now fit the context: the least flags
 * calibrate, their serving fit from decode and prompt steps alike. */
Test(calibrate, the_least_flags_serve_steps_to_fit, .timeout = 120)
{
    const int flags[][3] = {{2, 1, 1}, {2, 2, 8}, {4, 1, 1}}; /* max_tokens, max_context, max_seqs */
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++) {
        calib_options o = small_calibration();
        o.max_tokens = flags[i][0], o.max_context = flags[i][1], o.max_seqs = flags[i][2], o.rounds = 1;
        cost_table t;
        char err[512];
        cr_assert_eq(calibrate_run(&o, &t, err, sizeof err), 0, "%d tokens, %d context: %s", o.max_tokens,
                     o.max_context, err);
        long decode = 0, prompt = 0;
        cr_assert_eq(sscanf(ct_meta(&t, "serving_steps"), "%ld decode-only, %ld with prompt tokens", &decode, &prompt),
                     2);
        cr_assert(decode > 0 && prompt > 0, "%d tokens, %d context: %s", o.max_tokens, o.max_context,
                  ct_meta(&t, "serving_steps"));
        ct_free(&t);
    }
}

/* The pool holds the largest decode batch, or what it is capped at, never less than one row. */
Test(calibrate, the_pool_holds_the_largest_shapes_or_its_cap)
{
    calib_options o = small_calibration(); /* 8 sequences x 128 tokens, rows of 64 + 128 tokens */
    cr_assert_eq(calibrate_size_pool(&o), 12);
    cr_assert_eq(o.kb.num_blocks, 64);
    o.max_pool_blocks = 20;
    calibrate_size_pool(&o);
    cr_assert_eq(o.kb.num_blocks, 20);
    o.max_pool_blocks = 5;
    calibrate_size_pool(&o);
    cr_assert_eq(o.kb.num_blocks, 12);
}

/* Decode shapes that want more blocks than the pool holds share blocks and are still timed. */
Test(calibrate, a_capped_pool_still_gives_a_full_table, .timeout = 120)
{
    calib_options o = small_calibration();
    o.max_pool_blocks = 20; /* the largest decode shape wants 64 */
    cost_table t;
    char err[512];
    cr_assert_eq(calibrate_run(&o, &t, err, sizeof err), 0, "%s", err);
    table_cost tc;
    cr_assert_eq(tc_init(&tc, &t, "capped", err, sizeof err), 0, "%s", err);
    bool outside = false;
    /* the shapes past the pool priced too (positive, finite: which is larger is a timing) */
    double small = tc_component(&tc, CT_DECODE_ATTN, 1, 16, &outside);
    double large = tc_component(&tc, CT_DECODE_ATTN, 8, 128, &outside);
    cr_assert(isfinite(small) && small > 0 && isfinite(large) && large > 0, "%g and %g s", small, large);
    cr_assert(!outside);
    tc_free(&tc);
    ct_free(&t);
}

/* A bucket with too few steps takes the nearest bucket's scale that has enough, the lower on
 * a tie; with none, the decode scale over all steps. */
Test(calibrate, decode_scales_by_batch_size_fill_thin_buckets_from_their_neighbours)
{
    const double scale[] = {0.8, 0.9, 1.0, 1.1, 1.2};
    const size_t steps[] = {30, 5, 25, 0, 19};
    char buf[256];
    calibrate_seq_scales(scale, steps, 7, 16, buf, sizeof buf);
    cr_assert_str_eq(buf, "1:0.8 2:0.8 4:1 8:1 16:1");
    calibrate_seq_scales(scale, steps, 7, 5, buf, sizeof buf); /* 5 sequences: buckets up to 4-7 */
    cr_assert_str_eq(buf, "1:0.8 2:0.8 4:1");
    const size_t none[] = {0, 0, 0};
    calibrate_seq_scales(scale, none, 7, 4, buf, sizeof buf);
    cr_assert_str_eq(buf, "1:7 2:7 4:7");
    calibrate_seq_scales(scale, steps, 7, 1, buf, sizeof buf);
    cr_assert_str_eq(buf, "1:0.8");
}

/* The expected cost: the mean, so a slower state the machine spends part of its time in
 * counts, but not a stall far beyond the median. */
Test(calibrate, the_expected_cost_keeps_slow_states_and_drops_stalls)
{
    double bimodal[] = {16, 25.5, 16, 16};           /* median 16: the slow run is kept */
    cr_assert_float_eq(calibrate_expected(bimodal, 4), 18.375, 1e-12);
    double stalled[] = {3, 1, 100, 2};               /* median 2.5, 100 > 7.5 is a stall */
    cr_assert_float_eq(calibrate_expected(stalled, 4), 2.0, 1e-12);
    double edge[] = {1, 3, 1};                       /* exactly 3x the median is kept */
    cr_assert_float_eq(calibrate_expected(edge, 3), 5.0 / 3, 1e-12);
    double glue[] = {-2e-6, -1e-6, 5e-6};            /* median below zero: nothing is a stall */
    cr_assert_float_eq(calibrate_expected(glue, 3), 2e-6 / 3, 1e-18);
    double one[] = {0.25};
    cr_assert_float_eq(calibrate_expected(one, 1), 0.25, 1e-12);
    cr_assert(isnan(calibrate_expected(one, 0)));
}

/* The expected value of three numbers, computed apart from calibrate_expected. */
static double expected_of_three(const double v[3])
{
    double lo = fmin(v[0], fmin(v[1], v[2])), hi = fmax(v[0], fmax(v[1], v[2]));
    double mid = v[0] + v[1] + v[2] - lo - hi;
    return hi > 3 * mid ? (lo + mid) / 2 : (lo + mid + hi) / 3;
}

/* Round by round: each round gives a complete table of its own, with its own serving fit;
 * the final table has every shape once, its time the expected value over the rounds; a round
 * past the planned ones is refused. */
Test(calibrate, rounds_give_their_own_tables_and_the_expected_value_over_them, .timeout = 120)
{
    calib_options o = small_calibration();
    o.rounds = 3;
    o.repeats = 3; /* one timed run per shape per round */
    char err[512];
    calib_session *s = calibrate_begin(&o, err, sizeof err);
    cr_assert(s, "%s", err);
    cost_table round[3], all;
    for (int r = 0; r < 3; r++) {
        cr_assert_eq(calibrate_next_round(s, &round[r], err, sizeof err), 0, "%s", err);
        for (int c = 0; c < CT_FIRST_OPTIONAL; c++)
            cr_assert_gt(round[r].n[c], 0, "round %d: no %s rows", r, ct_component_name(c));
        cr_assert_gt(atof(ct_meta(&round[r], "serving_scale_decode")), 0);
        cr_assert_eq(round[r].n[CT_OVERHEAD], 1);
    }
    cr_assert_neq(calibrate_next_round(s, NULL, err, sizeof err), 0);
    cr_assert_str_eq(err, "all 3 calibration rounds are done");
    cr_assert_eq(calibrate_finish(s, &all, err, sizeof err), 0, "%s", err);
    cr_assert(strstr(ct_meta(&all, "method"), "mean of 3 rounds x 1 runs, stalls over 3x the median left out"),
              "%s", ct_meta(&all, "method"));
    for (int c = 0; c < CT_OVERHEAD; c++) {
        cr_assert_eq(all.n[c], round[0].n[c], "%s", ct_component_name(c));
        for (size_t i = 0; i < all.n[c]; i++) {
            double v[3];
            for (int r = 0; r < 3; r++) v[r] = round[r].points[c][i].seconds;
            double want = expected_of_three(v);
            cr_assert_float_eq(all.points[c][i].seconds, want, 1e-12 * want + 1e-18,
                               "%s row %zu: %g is not the expected value of %g %g %g", ct_component_name(c), i,
                               all.points[c][i].seconds, v[0], v[1], v[2]);
        }
    }
    for (int r = 0; r < 3; r++) ct_free(&round[r]);
    ct_free(&all);
    calibrate_end(s);
}

/* An output that cannot be written is refused before calibrating (it was found only after
 * the calibration, and the table leaked); the default's folder is created. */
Test(calibrate, an_unwritable_output_is_refused_before_any_timing)
{
    const char *args[] = {"calibrate", "--backend", "cpu", "--model", "tiny", "--out", "/proc/servesim/x.csv"};
    cr_assert_eq(cmd_calibrate(7, (char **)args), 2);
}

/* A set stop flag (Ctrl-C, SIGTERM) ends a calibration at once, failing: `validate`, which
 * calibrates first, once ran on for twelve minutes after a SIGTERM. */
Test(calibrate, a_set_stop_flag_ends_the_calibration)
{
    calib_options o = small_calibration();
    static volatile sig_atomic_t stop = SIGTERM;
    o.stop = &stop;
    cost_table t;
    char err[256];
    cr_assert_neq(calibrate_run(&o, &t, err, sizeof err), 0);
    cr_assert_str_eq(err, "interrupted");
}
