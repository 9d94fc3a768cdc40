/* Scheduler: every policy over hand-built and randomized workloads, driven with a constant
 * step time. Invariants are checked at every step. */
#include <criterion/criterion.h>
#include <stdbool.h>
#include <stddef.h>
#include <math.h>
#include <stdlib.h>

#include "core/sched.h"

typedef struct workload_t {
    request *reqs;
    int32_t **prompts;
    int n;
} workload_t;

static workload_t make_workload(int n, const int *prompt_lens, const int *output_lens,
                                const double *arrivals)
{
    workload_t w = {calloc(n, sizeof(request)), calloc(n, sizeof(int32_t *)), n};
    for (int i = 0; i < n; i++) {
        w.prompts[i] = malloc(prompt_lens[i] * sizeof(int32_t));
        for (int j = 0; j < prompt_lens[i]; j++) w.prompts[i][j] = (i * 131 + j * 17) % 1000;
        req_init(&w.reqs[i], i, arrivals ? arrivals[i] : 0, w.prompts[i], prompt_lens[i],
                 output_lens[i]);
    }
    return w;
}

static void free_workload(workload_t *w)
{
    for (int i = 0; i < w->n; i++) free(w->prompts[i]);
    free(w->prompts);
    free(w->reqs);
}

typedef struct run_stats {
    int steps, max_items, max_batched, max_running, finished, rejected;
    int64_t preemptions, prefix_hits;
    int chunks_of_req0;            /* steps that computed tokens of request 0 */
    int naive_mismatch;            /* naive steps whose batched tokens != context length */
} run_stats;

/* With speculative decoding, how many of an item's drafts the target accepts (NULL: none;
 * the scheduler treats an item no one judged as rejecting all). */
static int (*accept_drafts)(const sched_item *it);

/* Runs W to the end with STEP seconds per step, checking invariants after every call. */
static run_stats drive(const sched_config *cfg, workload_t *w, double step)
{
    sched *s = sched_create(cfg);
    cr_assert_not_null(s);
    run_stats st = {0};
    double now = 0;
    int next = 0, ended = 0;
    /* released[i]: the scheduler let go of request i; it must never be seen again */
    bool *released = calloc((size_t)w->n, sizeof *released);
    cr_assert_not_null(released);
    while (ended < w->n) {
        cr_assert_lt(st.steps, 1000000, "scheduler does not make progress");
        while (next < w->n && w->reqs[next].arrival_time <= now) {
            if (!sched_add(s, &w->reqs[next], now)) {
                st.rejected++;
                ended++;
                released[next] = true;
            }
            next++;
        }
        const sched_batch *b;
        int k = sched_schedule(s, now, &b);
        const char *bad = sched_check(s);
        cr_assert_null(bad, "after schedule: %s", bad);
        if (k == 0) {
            cr_assert(next < w->n, "idle with requests left and none to arrive");
            now = w->reqs[next].arrival_time;
            continue;
        }
        st.steps++;
        if (k > st.max_items) st.max_items = k;
        if (b->num_batched_tokens > st.max_batched) st.max_batched = b->num_batched_tokens;
        if (sched_num_running(s) > st.max_running) st.max_running = sched_num_running(s);
        st.preemptions += b->num_preempted;
        st.prefix_hits += b->prefix_hits;
        for (int i = 0; i < k; i++) {
            const sched_item *it = &b->items[i];
            cr_assert(!released[it->req - w->reqs], "released request %td is in a batch", it->req - w->reqs);
            if (it->req == &w->reqs[0] && it->num_new_tokens > 0) st.chunks_of_req0++;
            if (cfg->policy == POLICY_NAIVE && it->num_new_tokens != req_num_tokens(it->req))
                st.naive_mismatch++;
        }
        for (int i = 0; accept_drafts && i < k; i++)
            if (b->items[i].num_draft_tokens > 0) sched_accept(s, i, accept_drafts(&b->items[i]));
        now += step;
        request **fin;
        int nf = sched_complete(s, now, &fin);
        st.finished += nf;
        ended += nf;
        int nr = sched_released(s, &fin);
        for (int i = 0; i < nr; i++) {
            ptrdiff_t id = fin[i] - w->reqs;
            cr_assert(req_is_finished(fin[i]), "request %td released before it finished", id);
            cr_assert(!released[id], "request %td released twice", id);
            released[id] = true;
        }
        bad = sched_check(s);
        cr_assert_null(bad, "after complete: %s", bad);
    }
    cr_assert(sched_idle(s));
    cr_assert_eq(bm_num_free(sched_bm(s)), cfg->num_blocks, "blocks leaked at the end");
    for (int i = 0; i < w->n; i++) cr_assert(released[i], "request %d never released", i);
    free(released);
    sched_free(s);
    for (int i = 0; i < w->n; i++) {
        request *r = &w->reqs[i];
        cr_assert_eq(r->state, REQ_FINISHED, "request %d not finished", i);
        cr_assert_neq(r->stop, STOP_NONE);
        if (r->stop == STOP_LENGTH) {
            cr_assert_eq(r->num_generated, r->output_len, "request %d has the wrong length", i);
            cr_assert(r->first_token_time <= r->finish_time);
            cr_assert(r->scheduled_time >= r->arrival_time);
        }
    }
    return st;
}

static sched_config base_config(sched_policy p)
{
    return (sched_config){.policy = p, .max_num_seqs = 8, .max_num_batched_tokens = 2048,
                          .block_size = 16, .num_blocks = 512, .max_model_len = 2048};
}

Test(sched, the_policy_table_names_each_policy_once_with_its_capabilities)
{
    cr_assert_str_eq(SCHED_POLICY_CHOICES, "naive|kv_single|static|continuous|paged");
    const char *names[] = {"naive", "kv_single", "static", "continuous", "paged"};
    for (int i = 0; i < 5; i++) {
        sched_policy p;
        cr_assert_eq(sched_policy_parse(names[i], &p), 0, "%s", names[i]);
        cr_assert_eq((int)p, i);
        cr_assert_str_eq(sched_policy_name(p), names[i]);
    }
    sched_policy p;
    cr_assert_eq(sched_policy_parse("Paged", &p), -1);
    /* the rows the behaviour tests below rely on */
    cr_assert(sched_policy_info(POLICY_NAIVE)->single && sched_policy_info(POLICY_NAIVE)->recompute);
    cr_assert(sched_policy_info(POLICY_KV_SINGLE)->single && !sched_policy_info(POLICY_KV_SINGLE)->recompute);
    cr_assert(sched_policy_info(POLICY_STATIC)->whole_batch && sched_policy_info(POLICY_STATIC)->reserve_max);
    cr_assert(sched_policy_info(POLICY_CONTINUOUS)->reserve_max && !sched_policy_info(POLICY_CONTINUOUS)->whole_batch);
    cr_assert(sched_policy_info(POLICY_PAGED)->paged && !sched_policy_info(POLICY_PAGED)->reserve_max);
    for (int i = 0; i < 5; i++) cr_assert_eq(sched_policy_info((sched_policy)i)->paged, i == POLICY_PAGED);
}

Test(sched, single_request_constant_step_gives_exact_times)
{
    int pl[] = {100}, ol[] = {10};
    workload_t w = make_workload(1, pl, ol, NULL);
    sched_config c = base_config(POLICY_PAGED);
    drive(&c, &w, 0.5);
    cr_assert_float_eq(w.reqs[0].first_token_time, 0.5, 1e-12);
    cr_assert_float_eq(w.reqs[0].finish_time, 5.0, 1e-12, "prefill + 9 decode steps");
    free_workload(&w);
}

/* What a step's cost is computed from: a prefill of 100 tokens, then decodes that attend to
 * the cache and to their own new token (101, then 102 tokens). */
Test(sched, a_batch_reports_the_context_its_decodes_attend_to)
{
    int32_t prompt[100] = {0};
    request r;
    req_init(&r, 0, 0, prompt, 100, 3);
    sched_config c = base_config(POLICY_PAGED);
    sched *s = sched_create(&c);
    cr_assert(sched_add(s, &r, 0));
    const sched_batch *b;
    request **fin;
    cr_assert_eq(sched_schedule(s, 0, &b), 1);
    cr_assert_eq(b->num_prefill_tokens, 100);
    cr_assert_eq(b->num_multi_token_items, 1);
    cr_assert_eq(b->decode_context_sum, 0);
    sched_complete(s, 1, &fin);
    for (int step = 0; step < 2; step++) {
        cr_assert_eq(sched_schedule(s, 1 + step, &b), 1);
        cr_assert_eq(b->num_decode_seqs, 1);
        cr_assert_eq(b->items[0].context_len, 100 + step);
        cr_assert_eq(b->decode_context_sum, 101 + step, "step %d: %lld", step, (long long)b->decode_context_sum);
        sched_complete(s, 2 + step, &fin);
    }
    cr_assert(sched_idle(s));
    sched_free(s);
}

Test(sched, config_check_rejects_incompatible_settings)
{
    char err[256];
    sched_config c = base_config(POLICY_STATIC);
    c.prefix_caching = true;
    cr_assert_eq(sched_config_check(&c, err, sizeof err), -1);
    cr_assert(strstr(err, "policy = paged"));
    c = base_config(POLICY_PAGED);
    c.max_num_batched_tokens = 512;
    cr_assert_eq(sched_config_check(&c, err, sizeof err), -1);
    cr_assert(strstr(err, "chunked_prefill"));
    c.chunked_prefill = true;
    cr_assert_eq(sched_config_check(&c, err, sizeof err), 0);
    c = base_config(POLICY_PAGED);
    c.max_num_seqs = 4096; /* a decode step of 4096 sequences would exceed the 2048-token budget */
    cr_assert_eq(sched_config_check(&c, err, sizeof err), -1);
    cr_assert(strstr(err, "must be at least scheduler.max_num_seqs"), "%s", err);
    c = base_config(POLICY_CONTINUOUS);
    c.num_speculative_tokens = 2;
    cr_assert_eq(sched_config_check(&c, err, sizeof err), -1);
    cr_assert(strstr(err, "speculative.num_tokens needs scheduler.policy = paged"), "%s", err);
    c = base_config(POLICY_PAGED);
    c.num_speculative_tokens = SCHED_MAX_SPECULATIVE + 1;
    cr_assert_eq(sched_config_check(&c, err, sizeof err), -1);
    cr_assert(strstr(err, "speculative.num_tokens must be in [0, 16]"), "%s", err);
    c.num_speculative_tokens = SCHED_MAX_SPECULATIVE;
    cr_assert_eq(sched_config_check(&c, err, sizeof err), 0);
    c = base_config(POLICY_CONTINUOUS);
    c.num_blocks = 100; /* 1600 slots < 2048 */
    cr_assert_eq(sched_config_check(&c, err, sizeof err), -1);
    cr_assert(strstr(err, "reserves"));
}

/* sched_add_after by hand (paged, prefill first): A is added plainly and prefilled in step 0.
 * B comes with a skip of 1: step 1 decodes A alone, though B's prefill would have run first;
 * step 2 prefills B. B counts as waiting throughout. C, held for 2 steps by a scheduler with
 * nothing else to run, is taken at once: an idle engine does not wait. */
Test(sched, a_request_added_after_a_skip_waits_for_it_unless_nothing_else_runs)
{
    int pl[] = {32, 32, 32}, ol[] = {4, 4, 4};
    workload_t w = make_workload(3, pl, ol, NULL);
    sched_config c = base_config(POLICY_PAGED);
    sched *s = sched_create(&c);
    const sched_batch *b;
    cr_assert(sched_add(s, &w.reqs[0], 0));
    cr_assert_eq(sched_schedule(s, 0, &b), 1);
    cr_assert_eq(b->num_prefill_tokens, 32);
    request **fin;
    sched_complete(s, 1, &fin);
    cr_assert(sched_add_after(s, &w.reqs[1], 1, 1));
    cr_assert_eq(sched_num_waiting(s), 1);
    cr_assert_eq(sched_schedule(s, 1, &b), 1);
    cr_assert_eq(b->items[0].req, &w.reqs[0], "step 1 is A's decode alone");
    cr_assert_eq(b->num_prefill_tokens, 0);
    sched_complete(s, 2, &fin);
    cr_assert_eq(sched_schedule(s, 2, &b), 1);
    cr_assert_eq(b->items[0].req, &w.reqs[1], "step 2 prefills B (prefill first)");
    cr_assert_eq(b->num_prefill_tokens, 32);
    sched_free(s);

    s = sched_create(&c);
    cr_assert(sched_add_after(s, &w.reqs[2], 0, 2));
    cr_assert_eq(sched_schedule(s, 0, &b), 1, "nothing else to run: C at once");
    cr_assert_eq(b->items[0].req, &w.reqs[2]);
    sched_free(s);
    free_workload(&w);
}

Test(sched, requests_that_can_never_fit_end_with_a_reason)
{
    int pl[] = {2000, 300, 50}, ol[] = {100, 10, 5};
    workload_t w = make_workload(3, pl, ol, NULL);
    sched_config c = base_config(POLICY_PAGED);
    c.num_blocks = 16; /* 256 slots */
    run_stats st = drive(&c, &w, 0.01);
    cr_assert_eq(w.reqs[0].stop, STOP_TOO_LONG);
    cr_assert_eq(w.reqs[1].stop, STOP_KV_CAPACITY);
    cr_assert_eq(w.reqs[2].stop, STOP_LENGTH);
    cr_assert_eq(st.rejected, 2);
    free_workload(&w);
}

/* The limits are inclusive: prompt + output == max_model_len runs, one more token does not;
 * the KV holds prompt + output - 1 tokens (the last token is sampled, never fed back), so
 * 200 + 57 fills the 256 slots exactly and 200 + 58 cannot fit. */
Test(sched, a_request_exactly_at_a_limit_runs)
{
    int pl[] = {2000, 2000, 200, 200}, ol[] = {48, 49, 57, 58};
    workload_t w = make_workload(4, pl, ol, NULL);
    sched_config c = base_config(POLICY_PAGED);
    run_stats st = drive(&c, &w, 0.01);
    cr_assert_eq(w.reqs[0].stop, STOP_LENGTH, "2000 + 48 == max_model_len 2048");
    cr_assert_eq(w.reqs[1].stop, STOP_TOO_LONG);
    cr_assert_eq(st.rejected, 1);
    free_workload(&w);
    w = make_workload(4, pl, ol, NULL);
    c.num_blocks = 16; /* 256 slots */
    st = drive(&c, &w, 0.01);
    cr_assert_eq(w.reqs[2].stop, STOP_LENGTH, "256 KV tokens in 256 slots");
    cr_assert_eq(w.reqs[3].stop, STOP_KV_CAPACITY);
    free_workload(&w);
}

/* Out of blocks, vLLM preempts the running request that arrived last. Ids 7, 3, 5 arrive at
 * 0, 0.1, 0.2 (ids out of arrival order) with 16-token prompts in a pool of 4 blocks of 16.
 * The first step prefills all three (one block each). Each decode then needs a second block:
 * 7 takes the last free one, 3 finds none and preempts 5, the latest arrival, and takes its. */
Test(sched, preemption_takes_the_latest_arrival_by_hand)
{
    int32_t prompt[16] = {0};
    request r[3];
    const int ids[3] = {7, 3, 5};
    for (int i = 0; i < 3; i++) req_init(&r[i], ids[i], 0.1 * i, prompt, 16, 20);
    sched_config c = base_config(POLICY_PAGED);
    c.num_blocks = 4;
    c.max_model_len = 64;
    sched *s = sched_create(&c);
    for (int i = 0; i < 3; i++) cr_assert(sched_add(s, &r[i], 0.2));
    const sched_batch *b;
    cr_assert_eq(sched_schedule(s, 0.2, &b), 3);
    cr_assert_eq(b->num_preempted, 0);
    request **fin;
    sched_complete(s, 0.3, &fin);
    cr_assert_eq(sched_schedule(s, 0.3, &b), 2);
    cr_assert_eq(b->num_preempted, 1);
    cr_assert_eq(b->preempted[0]->id, 5, "preempted id %lld, not the latest arrival",
                 (long long)b->preempted[0]->id);
    cr_assert_eq(b->items[0].req->id, 7);
    cr_assert_eq(b->items[1].req->id, 3);
    cr_assert_null(sched_check(s));
    sched_free(s);
}

/* vLLM admits nothing new in a step that preempted: the pool just ran out. Chunks of 16 in a
 * pool of 5 blocks of 16: step 1 prefills A and B (16 tokens each) and C's first chunk (of
 * 32); step 2 decodes A and B, taking the last two blocks, and C's second chunk finds none:
 * C preempts itself. Its freed block must stay free this step; admitting the waiting head (C
 * again, from scratch) would undo the preemption at once. */
Test(sched, a_step_that_preempts_admits_nothing_new)
{
    int32_t prompt[32] = {0};
    request r[3];
    const int lens[3] = {16, 16, 32};
    for (int i = 0; i < 3; i++) req_init(&r[i], i, 0.1 * i, prompt, lens[i], 20);
    sched_config c = base_config(POLICY_PAGED);
    c.chunked_prefill = true;
    c.chunk_size = 16;
    c.num_blocks = 5;
    c.max_model_len = 64;
    sched *s = sched_create(&c);
    for (int i = 0; i < 3; i++) cr_assert(sched_add(s, &r[i], 0.2));
    const sched_batch *b;
    request **fin;
    cr_assert_eq(sched_schedule(s, 0.2, &b), 3);
    cr_assert_eq(b->num_batched_tokens, 48);
    sched_complete(s, 0.3, &fin);
    cr_assert_eq(sched_schedule(s, 0.3, &b), 2, "C was admitted again in the step that preempted it");
    cr_assert_eq(b->num_preempted, 1);
    cr_assert_eq(b->preempted[0], &r[2]);
    cr_assert_eq(bm_num_free(sched_bm(s)), 1);
    cr_assert_null(sched_check(s));
    sched_free(s);
}

Test(sched, chunked_prefill_splits_a_10000_token_prompt)
{
    int pl[] = {10000}, ol[] = {1};
    workload_t w = make_workload(1, pl, ol, NULL);
    sched_config c = base_config(POLICY_PAGED);
    c.chunked_prefill = true;
    c.max_num_batched_tokens = 4096;
    c.chunk_size = 768;
    c.max_model_len = 16384;
    c.num_blocks = 1024;
    run_stats st = drive(&c, &w, 0.01);
    cr_assert_eq(st.chunks_of_req0, (10000 + 767) / 768);
    cr_assert_eq(st.steps, 14);
    free_workload(&w);
}

Test(sched, budget_and_max_num_seqs_are_never_exceeded)
{
    enum { N = 200 };
    int pl[N], ol[N];
    double at[N];
    srand(7);
    for (int i = 0; i < N; i++) {
        pl[i] = 1 + rand() % 1500;
        ol[i] = 1 + rand() % 200;
        at[i] = i * 0.02;
    }
    /* paged, paged with chunked prefill, and static batching (whose padded batch must fit
     * the budget too: a mutant admitting past it survived every test once) */
    for (int v = 0; v < 3; v++) {
        int chunked = v == 1;
        workload_t w = make_workload(N, pl, ol, at);
        sched_config c = base_config(v == 2 ? POLICY_STATIC : POLICY_PAGED);
        c.chunked_prefill = chunked;
        c.max_num_seqs = 16;
        c.max_num_batched_tokens = chunked ? 512 : 2048;
        run_stats st = drive(&c, &w, 0.01);
        cr_assert_leq(st.max_batched, c.max_num_batched_tokens);
        cr_assert_leq(st.max_items, 16);
        cr_assert_leq(st.max_running, 16);
        cr_assert_eq(st.finished, N);
        free_workload(&w);
    }
}

Test(sched, static_batching_pads_prompts_and_finished_slots)
{
    int pl[] = {10, 30, 20}, ol[] = {2, 5, 3};
    workload_t w = make_workload(3, pl, ol, NULL);
    sched_config c = base_config(POLICY_STATIC);
    sched *s = sched_create(&c);
    for (int i = 0; i < 3; i++) sched_add(s, &w.reqs[i], 0);
    const sched_batch *b;
    cr_assert_eq(sched_schedule(s, 0, &b), 3);
    cr_assert_eq(b->num_batched_tokens, 90, "three prompts padded to 30");
    cr_assert_eq(b->num_padding_tokens, 30);
    request **fin;
    double now = 1;
    sched_complete(s, now, &fin);
    int padded_steps = 0, steps = 1;
    while (!sched_idle(s)) {
        cr_assert_eq(sched_released(s, &fin), 0, "a member is released while the batch runs");
        cr_assert_eq(sched_schedule(s, now, &b), 3, "finished members stay as padding");
        cr_assert_eq(b->num_batched_tokens, 3);
        padded_steps += b->num_padding_tokens;
        sched_complete(s, ++now, &fin);
        steps++;
    }
    cr_assert_eq(sched_released(s, &fin), 3, "the whole batch is released when it ends");
    cr_assert_eq(steps, 5, "the batch runs until its longest output ends");
    /* request 0 is padding for steps 3..5 (3 steps), request 2 for steps 4..5 (2 steps) */
    cr_assert_eq(padded_steps, 5);
    cr_assert_float_eq(w.reqs[0].finish_time, 2.0, 1e-12);
    cr_assert_eq(bm_num_free(sched_bm(s)), c.num_blocks);
    sched_free(s);
    free_workload(&w);
}

Test(sched, naive_recomputes_the_whole_sequence_every_step)
{
    int pl[] = {40, 25}, ol[] = {6, 4};
    workload_t w = make_workload(2, pl, ol, NULL);
    sched_config c = base_config(POLICY_NAIVE);
    run_stats st = drive(&c, &w, 0.01);
    cr_assert_eq(st.naive_mismatch, 0);
    cr_assert_eq(st.max_items, 1);
    cr_assert_eq(st.steps, 10);
    cr_assert_eq(st.max_batched, 40 + 5, "last step recomputes prompt + 5 generated tokens");
    free_workload(&w);
}

Test(sched, kv_single_runs_one_request_at_a_time)
{
    int pl[] = {40, 25, 60}, ol[] = {6, 4, 3};
    workload_t w = make_workload(3, pl, ol, NULL);
    sched_config c = base_config(POLICY_KV_SINGLE);
    run_stats st = drive(&c, &w, 0.01);
    cr_assert_eq(st.max_items, 1);
    cr_assert_eq(st.steps, 13);
    cr_assert_eq(st.max_batched, 60);
    cr_assert(w.reqs[1].scheduled_time >= w.reqs[0].finish_time);
    free_workload(&w);
}

/* Two sequences of 20 and 33 tokens in 16-slot blocks: 2 + 3 blocks = 80 slots, of which
 * 12 + 15 = 27 are unused: fragmentation 27/80. */
Test(sched, fragmentation_on_a_hand_computed_example)
{
    int pl[] = {20, 33}, ol[] = {5, 5};
    workload_t w = make_workload(2, pl, ol, NULL);
    sched_config c = base_config(POLICY_PAGED);
    sched *s = sched_create(&c);
    sched_add(s, &w.reqs[0], 0);
    sched_add(s, &w.reqs[1], 0);
    const sched_batch *b;
    sched_schedule(s, 0, &b);
    step_record rec = {0};
    sched_fill_step(s, b, &rec);
    cr_assert_eq(rec.kv_allocated_slots, 80);
    cr_assert_eq(rec.kv_unused_slots, 27);
    cr_assert_eq(rec.num_free_blocks, 512 - 5);
    cr_assert_eq(rec.running, 2);
    cr_assert_eq(rec.num_prefill_tokens, 53);
    request **fin;
    sched_complete(s, 1, &fin);
    sched_schedule(s, 1, &b); /* decode: 21 and 34 tokens in the same blocks */
    sched_fill_step(s, b, &rec);
    cr_assert_eq(rec.kv_unused_slots, 80 - 21 - 34);
    cr_assert_eq(rec.num_decode_seqs, 2);
    sched_free(s);
    free_workload(&w);
}

Test(sched, contiguous_admits_fewer_concurrent_sequences_than_paged)
{
    enum { N = 40 };
    int pl[N], ol[N];
    for (int i = 0; i < N; i++) {
        pl[i] = 100 + 3 * i;
        ol[i] = 50;
    }
    int peak[2];
    sched_policy pols[2] = {POLICY_CONTINUOUS, POLICY_PAGED};
    for (int p = 0; p < 2; p++) {
        workload_t w = make_workload(N, pl, ol, NULL);
        sched_config c = base_config(pols[p]);
        c.num_blocks = 256; /* 4096 slots: 2 reservations of 2048, or ~20 real sequences */
        c.max_num_seqs = 64;
        run_stats st = drive(&c, &w, 0.01);
        peak[p] = st.max_running;
        free_workload(&w);
    }
    cr_assert_eq(peak[0], 2);
    cr_assert_gt(peak[1], 10);
}

Test(sched, overflowing_the_pool_preempts_and_still_finishes_exactly)
{
    enum { N = 30 };
    int pl[N], ol[N];
    for (int i = 0; i < N; i++) {
        pl[i] = 50 + 10 * i;
        ol[i] = 200 + 7 * i;
    }
    for (int chunked = 0; chunked < 2; chunked++) {
        workload_t w = make_workload(N, pl, ol, NULL);
        sched_config c = base_config(POLICY_PAGED);
        c.num_blocks = 64; /* 1024 slots for 30 sequences that grow to 250..700 tokens */
        c.max_num_seqs = 32;
        c.chunked_prefill = chunked;
        run_stats st = drive(&c, &w, 0.01);
        cr_assert_gt(st.preemptions, 0);
        int64_t counted = 0;
        for (int i = 0; i < N; i++) counted += w.reqs[i].num_preemptions;
        cr_assert_eq(counted, st.preemptions);
        cr_assert_eq(st.finished, N);
        free_workload(&w);
    }
}

Test(sched, prefix_caching_hits_a_shared_prefix_across_requests)
{
    enum { N = 4 };
    int pl[N] = {4096 + 64, 4096 + 10, 4096 + 33, 200}, ol[N] = {3, 3, 3, 3};
    double at[N] = {0, 1, 2, 3};
    workload_t w = make_workload(N, pl, ol, at);
    for (int i = 1; i < 3; i++)
        for (int j = 0; j < 4096; j++) w.prompts[i][j] = w.prompts[0][j];
    sched_config c = base_config(POLICY_PAGED);
    c.prefix_caching = true;
    c.max_model_len = 8192;
    c.max_num_batched_tokens = 8192;
    c.num_blocks = 1024;
    run_stats st = drive(&c, &w, 0.1);
    cr_assert_eq(w.reqs[0].cached_prompt_len, 0);
    cr_assert_eq(w.reqs[1].cached_prompt_len, 4096);
    cr_assert_eq(w.reqs[2].cached_prompt_len, 4096);
    cr_assert_eq(w.reqs[3].cached_prompt_len, 0);
    cr_assert_eq(st.prefix_hits, 2 * 4096);
    free_workload(&w);
}

/* Randomized mixed workloads under every policy: invariants hold at every step (drive checks
 * bm_check after every call), nothing leaks, every request ends. */
Test(sched, randomized_workloads_keep_every_invariant_under_every_policy)
{
    enum { N = 120 };
    sched_policy pols[] = {POLICY_NAIVE, POLICY_KV_SINGLE, POLICY_STATIC, POLICY_CONTINUOUS,
                           POLICY_PAGED, POLICY_PAGED, POLICY_PAGED, POLICY_PAGED};
    bool prefix[] = {0, 0, 0, 0, 0, 1, 0, 1}, chunked[] = {0, 0, 0, 0, 0, 0, 1, 1};
    for (int seed = 1; seed <= 3; seed++)
        for (size_t p = 0; p < sizeof pols / sizeof pols[0]; p++) {
            srand(seed * 100 + (int)p);
            int pl[N], ol[N];
            double at[N];
            double t = 0;
            for (int i = 0; i < N; i++) {
                pl[i] = 1 + rand() % 900;
                ol[i] = 1 + rand() % (pols[p] == POLICY_NAIVE ? 20 : 300);
                t += (rand() % 100) * 0.001;
                at[i] = t;
            }
            workload_t w = make_workload(N, pl, ol, at);
            for (int i = 1; i < N; i += 2) /* half share a prefix with request 0 */
                for (int j = 0; j < pl[i] && j < pl[0] && j < 256; j++) w.prompts[i][j] = w.prompts[0][j];
            sched_config c = base_config(pols[p]);
            c.prefix_caching = prefix[p];
            c.chunked_prefill = chunked[p];
            c.num_blocks = 160;
            c.max_model_len = 1280;
            c.max_num_batched_tokens = chunked[p] ? 256 : 1280;
            c.chunk_size = chunked[p] ? 100 : 0;
            c.max_num_seqs = 12;
            cr_assert_eq(sched_config_check(&c, (char[128]){0}, 128), 0);
            run_stats st = drive(&c, &w, 0.01);
            cr_assert_eq(st.finished + st.rejected, N);
            free_workload(&w);
        }
}

/* A client that goes away: waiting, running (paged) and static-batch requests end ABORTED,
 * give back their blocks and are released exactly when the scheduler lets go of them. */
Test(sched, aborts_free_blocks_and_release_at_the_right_time)
{
    int pl[] = {40, 40, 40}, ol[] = {10, 10, 10};
    workload_t w = make_workload(3, pl, ol, NULL);
    sched_config c = base_config(POLICY_PAGED);
    c.max_num_seqs = 2;
    sched *s = sched_create(&c);
    for (int i = 0; i < 3; i++) cr_assert(sched_add(s, &w.reqs[i], 0));
    const sched_batch *b;
    request **rel;
    cr_assert_eq(sched_schedule(s, 0, &b), 2, "two run, request 2 waits");
    sched_complete(s, 1, &rel);
    cr_assert(sched_abort(s, &w.reqs[2], 1));
    cr_assert_eq(sched_released(s, &rel), 1);
    cr_assert_eq(rel[0], &w.reqs[2]);
    cr_assert_eq(w.reqs[2].stop, STOP_ABORTED);
    cr_assert_eq(sched_num_waiting(s), 0);
    cr_assert(sched_abort(s, &w.reqs[0], 1));
    cr_assert_eq(sched_released(s, &rel), 1);
    cr_assert_null(sched_check(s));
    cr_assert_eq(sched_num_running(s), 1);
    cr_assert(!sched_abort(s, &w.reqs[0], 2), "an ended request cannot be aborted again");
    while (!sched_idle(s)) {
        cr_assert_eq(sched_schedule(s, 2, &b), 1);
        cr_assert_eq(b->items[0].req, &w.reqs[1]);
        sched_complete(s, 3, &rel);
    }
    cr_assert_eq(w.reqs[1].stop, STOP_LENGTH);
    cr_assert_eq(bm_num_free(sched_bm(s)), c.num_blocks, "an abort leaked blocks");
    sched_free(s);
    free_workload(&w);

    workload_t v = make_workload(2, pl, ol, NULL);
    c = base_config(POLICY_STATIC);
    s = sched_create(&c);
    for (int i = 0; i < 2; i++) sched_add(s, &v.reqs[i], 0);
    cr_assert_eq(sched_schedule(s, 0, &b), 2);
    sched_complete(s, 1, &rel);
    cr_assert(sched_abort(s, &v.reqs[0], 1));
    cr_assert_eq(sched_released(s, &rel), 0, "a static member stays as padding");
    cr_assert_eq(sched_schedule(s, 1, &b), 2);
    cr_assert_eq(b->num_padding_tokens, 1);
    sched_complete(s, 2, &rel);
    cr_assert(sched_abort(s, &v.reqs[1], 2));
    cr_assert_eq(sched_released(s, &rel), 2, "the last live member's abort ends the batch");
    cr_assert(sched_idle(s));
    cr_assert_null(sched_check(s));
    cr_assert_eq(bm_num_free(sched_bm(s)), c.num_blocks);
    sched_free(s);
    free_workload(&v);
}

/* Disaggregated serving by hand: on the prefill side a request with stop_after = 1 ends
 * with STOP_HANDOFF after its prefill step (blocks freed, released); the decode side admits
 * it with its prompt's KV in place: a one-token decode at context 40 in its first step, no
 * prefill tokens, no prefix-cache query counted twice; it runs to its 10 tokens, and a
 * preemption there recomputes the prompt (the transferred KV went with its blocks). */
Test(sched, a_handoff_leaves_the_prefill_side_and_decodes_on_the_other)
{
    int pl[] = {40}, ol[] = {10};
    workload_t w = make_workload(1, pl, ol, NULL);
    request *r = &w.reqs[0];
    sched_config c = base_config(POLICY_PAGED);
    sched *pre = sched_create(&c), *dec = sched_create(&c);
    r->stop_after = 1;
    cr_assert(sched_add(pre, r, 0));
    const sched_batch *b;
    request **fin;
    cr_assert_eq(sched_schedule(pre, 0, &b), 1);
    cr_assert_eq(b->num_prefill_tokens, 40);
    cr_assert_eq(sched_complete(pre, 1, &fin), 1);
    cr_assert_eq(fin[0], r);
    cr_assert_eq(r->stop, STOP_HANDOFF);
    cr_assert_eq(r->num_generated, 1);
    cr_assert_float_eq(r->first_token_time, 1, 0);
    cr_assert_eq(sched_released(pre, &fin), 1);
    cr_assert(sched_idle(pre));
    cr_assert_eq(bm_num_free(sched_bm(pre)), c.num_blocks, "the prefill side keeps no block");

    r->stop = STOP_NONE;
    r->stop_after = 0;
    r->kv_transferred = r->num_computed;
    cr_assert_eq(r->kv_transferred, 40);
    cr_assert(sched_add(dec, r, 2));
    cr_assert_eq(sched_schedule(dec, 2, &b), 1);
    cr_assert_eq(b->num_prefill_tokens, 0, "the prompt is not computed again");
    cr_assert_eq(b->num_decode_seqs, 1);
    cr_assert_eq(b->items[0].num_new_tokens, 1);
    cr_assert_eq(b->items[0].context_len, 40);
    cr_assert_eq(b->prefix_queries, 0, "the prefill side counted its prefix queries");
    int steps = 1;
    double t = 3;
    sched_complete(dec, t, &fin);
    while (!sched_idle(dec)) {
        cr_assert_eq(sched_schedule(dec, t, &b), 1);
        cr_assert_eq(b->num_decode_seqs, 1);
        sched_complete(dec, ++t, &fin);
        steps++;
    }
    cr_assert_eq(steps, 9, "tokens 2 to 10 on the decode side");
    cr_assert_eq(r->stop, STOP_LENGTH);
    cr_assert_eq(r->num_generated, 10);
    cr_assert_float_eq(r->first_token_time, 1, 0, "the first token is the prefill side's");
    cr_assert_null(sched_check(dec));
    cr_assert_eq(bm_num_free(sched_bm(dec)), c.num_blocks);
    sched_free(pre);
    sched_free(dec);
    free_workload(&w);
}

/* A request held at the head of the queue for lack of KV blocks is counted once, in the step
 * where it first could not start: 10 blocks of 16 slots; request 0 (100 + 50 tokens) takes 7
 * for its prompt and grows; request 1 (60 prompt tokens, 4 blocks) arrives while 0 decodes
 * and cannot start until 0 ends and frees its blocks. */
Test(sched, a_request_waiting_for_kv_blocks_is_counted_once)
{
    int pl[] = {100, 60}, ol[] = {50, 2};
    workload_t w = make_workload(2, pl, ol, NULL);
    sched_config c = base_config(POLICY_PAGED);
    c.num_blocks = 10;
    c.max_model_len = 160;
    c.max_num_batched_tokens = 160;
    sched *s = sched_create(&c);
    cr_assert(sched_add(s, &w.reqs[0], 0));
    const sched_batch *b;
    request **fin;
    cr_assert_eq(sched_schedule(s, 0, &b), 1);
    cr_assert_eq(b->num_kv_delayed, 0);
    sched_complete(s, 1, &fin);
    cr_assert(sched_add(s, &w.reqs[1], 1));
    int delayed = 0, steps_with = 0;
    double t = 1;
    while (!sched_idle(s)) {
        cr_assert_gt(sched_schedule(s, t, &b), 0);
        delayed += b->num_kv_delayed;
        steps_with += b->num_kv_delayed > 0;
        sched_complete(s, ++t, &fin);
    }
    cr_assert_eq(delayed, 1, "counted once however long it waits");
    cr_assert_eq(steps_with, 1);
    cr_assert(w.reqs[1].kv_delayed);
    cr_assert(!w.reqs[0].kv_delayed);
    cr_assert_eq(w.reqs[1].stop, STOP_LENGTH);
    sched_free(s);
    free_workload(&w);
}

/* A step that hands cached prefix blocks out for other content says how many: 6 blocks of
 * 16; A (64 prompt tokens, 1 output) leaves its 4 full prompt blocks cached and free; B (80
 * other tokens) needs 5 blocks: the 2 never used and 3 of A's, evicted in B's first step. */
Test(sched, prefix_evictions_are_counted_in_the_step_that_makes_them)
{
    int pl[] = {64, 80}, ol[] = {1, 1};
    workload_t w = make_workload(2, pl, ol, NULL);
    sched_config c = base_config(POLICY_PAGED);
    c.num_blocks = 6;
    c.max_model_len = 96;
    c.max_num_batched_tokens = 96;
    c.prefix_caching = true;
    sched *s = sched_create(&c);
    const sched_batch *b;
    request **fin;
    cr_assert(sched_add(s, &w.reqs[0], 0));
    cr_assert_eq(sched_schedule(s, 0, &b), 1);
    cr_assert_eq(b->prefix_evictions, 0);
    sched_complete(s, 1, &fin);
    cr_assert(sched_add(s, &w.reqs[1], 1));
    cr_assert_eq(sched_schedule(s, 1, &b), 1);
    cr_assert_eq(b->prefix_evictions, 3, "got %lld", (long long)b->prefix_evictions);
    sched_complete(s, 2, &fin);
    cr_assert_null(sched_check(s));
    sched_free(s);
    free_workload(&w);
}

static int accept_all(const sched_item *it) { return it->num_draft_tokens; }
static int accept_none(const sched_item *it) { (void)it; return 0; }
/* a fixed pseudo-random share, from the request and the position */
static int accept_some(const sched_item *it)
{
    unsigned h = (unsigned)(it->req->id * 2654435761u) ^ (unsigned)(it->req->num_generated * 40503u);
    return (int)(h >> 7) % (it->num_draft_tokens + 1);
}

/* k = 3, every draft accepted: the prefill emits token 1; each decode then verifies 3 drafts
 * and emits 4 tokens (5, then 9), drafting never past the last token: the 10th comes alone.
 * 4 steps of 0.5 s where plain decoding takes 10. */
Test(sched, speculation_accepted_in_full_emits_k_plus_one_tokens_a_step)
{
    int pl[] = {100}, ol[] = {10};
    workload_t w = make_workload(1, pl, ol, NULL);
    sched_config c = base_config(POLICY_PAGED);
    c.num_speculative_tokens = 3;
    sched *s = sched_create(&c);
    cr_assert(sched_add(s, &w.reqs[0], 0));
    const sched_batch *b;
    request **fin;
    const int batched[] = {100, 4, 4, 1}, generated[] = {1, 5, 9, 10}, drafts[] = {0, 3, 3, 0};
    for (int step = 0; step < 4; step++) {
        cr_assert_eq(sched_schedule(s, step * 0.5, &b), 1);
        cr_assert_eq(b->num_batched_tokens, batched[step], "step %d: %d tokens", step, b->num_batched_tokens);
        cr_assert_eq(b->num_draft_tokens, drafts[step]);
        cr_assert_eq(b->num_spec_seqs, drafts[step] > 0);
        cr_assert_eq(b->items[0].emits_token, true);
        sched_accept(s, 0, 99); /* clamped to the drafts there are */
        int nf = sched_complete(s, (step + 1) * 0.5, &fin);
        cr_assert_eq(b->num_accepted_tokens, drafts[step]);
        cr_assert_eq(w.reqs[0].num_generated, generated[step]);
        cr_assert_eq(nf, step == 3);
        cr_assert_null(sched_check(s));
    }
    cr_assert_float_eq(w.reqs[0].finish_time, 2.0, 1e-12);
    cr_assert_eq(w.reqs[0].stop, STOP_LENGTH);
    sched_free(s);
    free_workload(&w);
}

/* Every draft rejected: the same tokens at the same times as plain decoding (one a step),
 * and the KV of the rejected drafts given back. Prompt 14, blocks of 16: the first decode
 * verifies 3 drafts at positions 15-17, which takes a second block; all rejected, the
 * sequence keeps 15 tokens and the slot for its next, one block: the second is free again. */
Test(sched, speculation_rejected_in_full_decodes_as_before_and_frees_the_drafts_blocks)
{
    int pl[] = {14}, ol[] = {10};
    workload_t w = make_workload(1, pl, ol, NULL);
    sched_config c = base_config(POLICY_PAGED);
    c.num_speculative_tokens = 3;
    sched *s = sched_create(&c);
    cr_assert(sched_add(s, &w.reqs[0], 0));
    const sched_batch *b;
    request **fin;
    cr_assert_eq(sched_schedule(s, 0, &b), 1);
    sched_complete(s, 1, &fin);
    cr_assert_eq(bm_num_free(sched_bm(s)), c.num_blocks - 1);
    cr_assert_eq(sched_schedule(s, 1, &b), 1);
    cr_assert_eq(b->num_batched_tokens, 4);
    cr_assert_eq(bm_num_free(sched_bm(s)), c.num_blocks - 2, "the drafts need a second block");
    sched_complete(s, 2, &fin);
    cr_assert_eq(w.reqs[0].num_computed, 15);
    cr_assert_eq(w.reqs[0].num_generated, 2);
    cr_assert_eq(bm_num_free(sched_bm(s)), c.num_blocks - 1, "the rejected drafts' block is free");
    cr_assert_null(sched_check(s));
    sched_free(s);
    free_workload(&w);
    /* the whole run: finish time exactly plain decoding's */
    w = make_workload(1, pl, ol, NULL);
    accept_drafts = accept_none;
    drive(&c, &w, 0.5);
    accept_drafts = NULL;
    cr_assert_float_eq(w.reqs[0].finish_time, 5.0, 1e-12);
    free_workload(&w);
}

/* Drafts count against the token budget: with 2 running sequences and a budget of 6, the
 * first may draft only what leaves the second its one token (k = 8 asked for: 4 drafts, 5
 * tokens, then 1), and a budget step never holds more than the budget. */
Test(sched, drafts_fit_the_token_budget_and_leave_each_sequence_its_token)
{
    int pl[] = {3, 3}, ol[] = {50, 50};
    workload_t w = make_workload(2, pl, ol, NULL);
    sched_config c = base_config(POLICY_PAGED);
    c.num_speculative_tokens = 8;
    c.max_num_batched_tokens = 6;
    c.max_num_seqs = 2;
    c.max_model_len = 64;
    sched *s = sched_create(&c);
    cr_assert(sched_add(s, &w.reqs[0], 0));
    cr_assert(sched_add(s, &w.reqs[1], 0));
    const sched_batch *b;
    request **fin;
    cr_assert_eq(sched_schedule(s, 0, &b), 2); /* the prompts, 3 + 3 */
    sched_complete(s, 1, &fin);
    cr_assert_eq(sched_schedule(s, 1, &b), 2);
    cr_assert_eq(b->items[0].num_new_tokens, 5);
    cr_assert_eq(b->items[0].num_draft_tokens, 4);
    cr_assert_eq(b->items[1].num_new_tokens, 1);
    cr_assert_eq(b->items[1].num_draft_tokens, 0);
    cr_assert_eq(b->num_batched_tokens, 6);
    cr_assert_eq(b->num_decode_seqs, 2, "a verifying sequence is a decode");
    sched_complete(s, 2, &fin);
    sched_free(s);
    free_workload(&w);
}

/* Randomized traffic with speculation, every acceptance pattern, with and without chunked
 * prefill and prefix caching, and a pool small enough to preempt: the budget holds in every
 * step, no block leaks (drive checks at every call), every request ends at its exact length. */
Test(sched, speculation_keeps_every_invariant_on_randomized_workloads)
{
    enum { N = 120 };
    int (*accepts[])(const sched_item *) = {accept_all, accept_none, accept_some};
    int64_t preemptions = 0;
    for (int a = 0; a < 3; a++)
        for (int v = 0; v < 4; v++) {
            srand(a * 10 + v + 1);
            int pl[N], ol[N];
            double at[N], t = 0;
            for (int i = 0; i < N; i++) {
                pl[i] = 1 + rand() % 900;
                ol[i] = 1 + rand() % 300;
                t += (rand() % 100) * 0.001;
                at[i] = t;
            }
            workload_t w = make_workload(N, pl, ol, at);
            for (int i = 1; i < N; i += 2)
                for (int j = 0; j < pl[i] && j < pl[0] && j < 256; j++) w.prompts[i][j] = w.prompts[0][j];
            sched_config c = base_config(POLICY_PAGED);
            c.chunked_prefill = v & 1;
            c.prefix_caching = v & 2;
            c.num_blocks = 160;
            c.max_model_len = 1280;
            c.max_num_batched_tokens = c.chunked_prefill ? 256 : 1280;
            c.max_num_seqs = 12;
            c.num_speculative_tokens = 1 + (a + v) % 5;
            cr_assert_eq(sched_config_check(&c, (char[128]){0}, 128), 0);
            accept_drafts = accepts[a];
            run_stats st = drive(&c, &w, 0.01);
            accept_drafts = NULL;
            cr_assert_leq(st.max_batched, c.max_num_batched_tokens);
            cr_assert_eq(st.finished + st.rejected, N);
            preemptions += st.preemptions;
            free_workload(&w);
        }
    cr_assert_gt(preemptions, 0, "the pool is small enough to preempt");
}

/* disable_by_batch_size: with 2 running sequences and a threshold of 2, no step drafts; with
 * 3, both draft 3 each (4 + 4 tokens); once one finishes, the other drafts again at 2. */
Test(sched, speculation_stops_from_the_batch_size_it_is_disabled_at)
{
    for (int limit = 2; limit <= 3; limit++) {
        int pl[] = {3, 3}, ol[] = {20, 20};
        workload_t w = make_workload(2, pl, ol, NULL);
        sched_config c = base_config(POLICY_PAGED);
        c.num_speculative_tokens = 3;
        c.spec_disable_by_batch_size = limit;
        sched *s = sched_create(&c);
        cr_assert(sched_add(s, &w.reqs[0], 0));
        cr_assert(sched_add(s, &w.reqs[1], 0));
        const sched_batch *b;
        request **fin;
        sched_schedule(s, 0, &b);
        sched_complete(s, 1, &fin);
        cr_assert_eq(sched_schedule(s, 1, &b), 2);
        cr_assert_eq(b->num_draft_tokens, limit == 2 ? 0 : 6, "limit %d", limit);
        cr_assert_eq(b->num_batched_tokens, limit == 2 ? 2 : 8);
        sched_complete(s, 2, &fin);
        sched_free(s);
        free_workload(&w);
    }
}
