/* The real engine on the CPU backend: a short real-time run of the tiny model. */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <stdlib.h>

#include "engine/engine.h"
#include "tiny_engine.h"

typedef struct token_log {
    int32_t tokens[64][64];
    int count[64];
    double last_time[64];
    int out_of_order;
} token_log;

static void on_token(void *ctx, const request *r, int32_t token, double t)
{
    token_log *log = ctx;
    if (t < log->last_time[r->id]) log->out_of_order++;
    log->last_time[r->id] = t;
    log->tokens[r->id][log->count[r->id]++] = token;
}

static engine_options tiny_options(sched_policy policy, bool chunked, bool prefix)
{
    return tiny_engine_options((sched_config){.policy = policy, .chunked_prefill = chunked, .prefix_caching = prefix,
                                              .max_num_seqs = 16, .max_num_batched_tokens = chunked ? 128 : 1024,
                                              .block_size = 16, .num_blocks = 256, .max_model_len = 1024});
}

static wl_config tiny_workload(int n)
{
    wl_config c = {.num_requests = n, .arrival = ARRIVAL_POISSON, .rate = 200, .burstiness = 1,
                   .num_prefixes = 2, .shared_prefix_len = 48, .prefix_fraction = 0.5,
                   .trace_time_scale = 1, .vocab_size = 2048, .seed = 4};
    char err[200];
    dist_parse("uniform:10:120", &c.prompt_len, err, sizeof err);
    dist_parse("uniform:1:40", &c.output_len, err, sizeof err);
    return c;
}

static met_acc *serve(engine_options *o, wl_config *wc, token_log *log, summary *sum)
{
    workload w;
    char err[512];
    cr_assert_eq(wl_build(wc, &w, err, sizeof err), 0, "%s", err);
    o->on_token = on_token;
    o->on_token_ctx = log;
    met_acc *met = met_create();
    met_keep_requests(met);
    recorder rc;
    rec_init(&rc, met, NULL);
    engine_stats st;
    cr_assert_eq(engine_run(o, &w, wc, &rc, &st, err, sizeof err), 0, "%s", err);
    cr_assert_gt(st.steps, 0);
    cr_assert_eq(st.blocks_in_use_at_end, 0, "every KV block back in the pool");
    slo_config slo = {0};
    cr_assert_eq(met_summarize(met, &slo, sum), 0);
    size_t n;
    const req_record *recs = met_requests(met, &n);
    cr_assert_eq(n, w.n, "every request is recorded");
    for (size_t i = 0; i < n; i++) {
        const req_record *r = &recs[i];
        cr_assert_eq(r->stop, STOP_LENGTH);
        cr_assert_eq(r->output_len, w.reqs[r->request_id].output_len, "exact output length");
        cr_assert_eq(log->count[r->request_id], r->output_len, "every token streamed");
        cr_assert(r->arrival_time <= r->scheduled_prefill_time);
        cr_assert(r->scheduled_prefill_time <= r->first_token_time);
        cr_assert(r->first_token_time <= r->finish_time);
    }
    cr_assert_eq(log->out_of_order, 0);
    wl_free(&w);
    return met;
}

Test(engine, tiny_model_serves_every_request_to_its_exact_length)
{
    sched_policy pols[] = {POLICY_PAGED, POLICY_PAGED, POLICY_STATIC, POLICY_CONTINUOUS};
    bool chunked[] = {false, true, false, false}, prefix[] = {false, true, false, false};
    for (int p = 0; p < 4; p++) {
        engine_options o = tiny_options(pols[p], chunked[p], prefix[p]);
        wl_config wc = tiny_workload(24);
        token_log *log = calloc(1, sizeof *log);
        summary sum;
        met_acc *met = serve(&o, &wc, log, &sum);
        cr_assert_eq(sum.completed, 24);
        if (prefix[p]) cr_assert_gt(sum.prefix_hits, 0, "shared prefixes hit the cache");
        met_free(met);
        free(log);
    }
}

Test(engine, a_fixed_seed_gives_the_same_tokens_twice)
{
    token_log *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    for (int run = 0; run < 2; run++) {
        engine_options o = tiny_options(POLICY_PAGED, true, true);
        o.sampling = (kb_sampling){.temperature = 0.8f, .top_k = 50, .top_p = 0.9f};
        /* all at once: the batches, and so the order of draws, do not depend on timing */
        wl_config wc = tiny_workload(12);
        wc.arrival = ARRIVAL_ALL_AT_ONCE;
        summary sum;
        met_free(serve(&o, &wc, run ? b : a, &sum));
    }
    int distinct = 0;
    for (int r = 0; r < 12; r++)
        for (int i = 0; i < a->count[r]; i++) {
            cr_assert_eq(a->tokens[r][i], b->tokens[r][i], "request %d token %d", r, i);
            distinct += i > 0 && a->tokens[r][i] != a->tokens[r][i - 1];
        }
    cr_assert_gt(distinct, 10, "sampling is not stuck on one token");
    free(a);
    free(b);
}

Test(engine, a_model_too_large_for_memory_is_refused_with_sizes)
{
    engine_options o = tiny_options(POLICY_PAGED, false, false);
    const model_shape *m = model_preset("llama-3-70b");
    o.backend.shape = (kb_shape){m->num_layers, m->hidden, m->num_heads, m->num_kv_heads, m->head_dim,
                                 m->intermediate, m->vocab, m->rope_theta, m->rms_eps};
    wl_config wc = tiny_workload(2);
    workload w;
    char err[512];
    cr_assert_eq(wl_build(&wc, &w, err, sizeof err), 0);
    met_acc *met = met_create();
    recorder rc;
    rec_init(&rc, met, NULL);
    cr_assert_eq(engine_run(&o, &w, &wc, &rc, NULL, err, sizeof err), 2);
    cr_assert(strstr(err, "GiB"), "%s", err);
    met_free(met);
    wl_free(&w);
}

/* ---- live serving ---- */

typedef struct live_job {
    engine_job job;
    int32_t prompt[200];
    int tokens;
    double last_time;
    int out_of_order, done_calls;
    req_record rec;
    pthread_mutex_t *lock;
    pthread_cond_t *cond;
} live_job;

static void live_token(void *ctx, int32_t token, double t)
{
    live_job *lj = ctx;
    pthread_mutex_lock(lj->lock);
    lj->out_of_order += t < lj->last_time || token < 0 || token >= 2048;
    lj->last_time = t;
    lj->tokens++;
    pthread_cond_broadcast(lj->cond);
    pthread_mutex_unlock(lj->lock);
}

static void live_done(void *ctx, const req_record *rec)
{
    live_job *lj = ctx;
    pthread_mutex_lock(lj->lock);
    lj->rec = *rec;
    lj->done_calls++;
    pthread_cond_broadcast(lj->cond);
    pthread_mutex_unlock(lj->lock);
}

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t live_cond = PTHREAD_COND_INITIALIZER;

static void live_submit(engine_live *l, live_job *lj, int prompt_len, int max_tokens, int seed)
{
    *lj = (live_job){.lock = &live_lock, .cond = &live_cond};
    for (int i = 0; i < prompt_len; i++) lj->prompt[i] = (seed * 131 + i * 17) % 2048;
    lj->job = (engine_job){.prompt = lj->prompt, .prompt_len = prompt_len, .max_tokens = max_tokens,
                           .on_token = live_token, .on_done = live_done, .ctx = lj};
    cr_assert_eq(engine_submit(l, &lj->job), 0);
}

/* Waits until COND(lj) holds for LJ (the engine thread signals every change). */
#define WAIT_FOR(lj, cond)                                                  \
    do {                                                                    \
        pthread_mutex_lock(&live_lock);                                     \
        while (!(cond)) pthread_cond_wait(&live_cond, &live_lock);          \
        pthread_mutex_unlock(&live_lock);                                   \
    } while (0)

static void wait_idle(engine_live *l, int64_t ended)
{
    engine_gauges g;
    for (;;) {
        engine_gauges_get(l, &g);
        if (g.finished + g.aborted == ended && g.running == 0 && g.waiting == 0) break;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
}

Test(engine, live_jobs_get_every_token_and_one_end)
{
    engine_options o = tiny_options(POLICY_PAGED, true, true);
    char err[512];
    engine_live *l = engine_start(&o, NULL, err, sizeof err);
    cr_assert_not_null(l, "%s", err);
    enum { N = 12 };
    live_job *jobs = calloc(N, sizeof *jobs);
    for (int i = 0; i < N; i++) live_submit(l, &jobs[i], 20 + 10 * i, 1 + 3 * i, i % 3);
    for (int i = 0; i < N; i++) WAIT_FOR(&jobs[i], jobs[i].done_calls > 0);
    wait_idle(l, N);
    engine_gauges g;
    engine_gauges_get(l, &g);
    cr_assert_eq(g.finished, N);
    cr_assert_eq(g.kv_usage, 0, "blocks held after every job ended");
    cr_assert_gt(g.prefix_hits, 0, "the shared prompt starts hit the cache");
    for (int i = 0; i < N; i++) {
        cr_assert_eq(jobs[i].done_calls, 1);
        cr_assert_eq(jobs[i].rec.stop, STOP_LENGTH);
        cr_assert_eq(jobs[i].tokens, 1 + 3 * i, "job %d", i);
        cr_assert_eq(jobs[i].rec.output_len, 1 + 3 * i);
        cr_assert_eq(jobs[i].out_of_order, 0);
        cr_assert(jobs[i].rec.arrival_time <= jobs[i].rec.first_token_time);
    }
    engine_stop(l);
    free(jobs);
}

Test(engine, aborted_and_stopped_live_jobs_end_once_and_free_their_blocks)
{
    engine_options o = tiny_options(POLICY_PAGED, true, false);
    char err[512];
    engine_live *l = engine_start(&o, NULL, err, sizeof err);
    cr_assert_not_null(l, "%s", err);
    enum { N = 6 };
    live_job *jobs = calloc(N, sizeof *jobs);
    for (int i = 0; i < N; i++) live_submit(l, &jobs[i], 30, 500, i);
    /* abort the even ones once they stream */
    for (int i = 0; i < N; i += 2) {
        WAIT_FOR(&jobs[i], jobs[i].tokens >= 2);
        engine_abort(l, &jobs[i].job);
        cr_assert_eq(jobs[i].done_calls, 1, "engine_abort returns once the job is done");
        cr_assert_eq(jobs[i].rec.stop, STOP_ABORTED);
        cr_assert_lt(jobs[i].rec.output_len, 500);
    }
    engine_abort(l, &jobs[0].job);   /* again: a no-op */
    cr_assert_eq(jobs[0].done_calls, 1);
    engine_job never = {0};
    engine_abort(l, &never);         /* never submitted: returns at once */
    engine_gauges g;
    engine_gauges_get(l, &g);
    cr_assert_eq(g.aborted, N / 2);
    cr_assert_lt(g.kv_usage, 0.5);
    /* stopping ends the others, aborted */
    engine_stop(l);
    for (int i = 1; i < N; i += 2) {
        cr_assert_eq(jobs[i].done_calls, 1, "job %d", i);
        cr_assert_eq(jobs[i].rec.stop, STOP_ABORTED);
    }
    free(jobs);
}

/* Speculative decoding with prompt lookup, greedy: every request gets exactly the tokens plain
 * greedy decoding gives it (the verifier keeps a draft only where it is the target's own
 * choice, and each position is computed as a plain decode would compute it), drafts are
 * proposed and some kept, and no KV block leaks (serve checks every record and the pool at
 * the end). All at once, so both runs see the same requests. */
Test(engine, greedy_speculation_gives_exactly_the_tokens_of_plain_decoding)
{
    token_log *plain = calloc(1, sizeof *plain), *spec = calloc(1, sizeof *spec);
    summary sp, sn;
    for (int run = 0; run < 2; run++) {
        engine_options o = tiny_options(POLICY_PAGED, run == 1, true);
        o.sched.num_speculative_tokens = run ? 4 : 0;
        o.prompt_lookup_min = 1;
        o.prompt_lookup_max = 3;
        engine_backend_options(&o.sched, &o.backend);
        wl_config wc = tiny_workload(24);
        wc.arrival = ARRIVAL_ALL_AT_ONCE;
        char err[200];
        dist_parse("uniform:20:60", &wc.output_len, err, sizeof err);
        met_acc *met = serve(&o, &wc, run ? spec : plain, run ? &sp : &sn);
        size_t n;
        const req_record *recs = met_requests(met, &n);
        int64_t drafted = 0, kept = 0;
        for (size_t i = 0; i < n; i++) {
            cr_assert_leq(recs[i].accepted_tokens, recs[i].draft_tokens);
            drafted += recs[i].draft_tokens;
            kept += recs[i].accepted_tokens;
        }
        cr_assert_eq(drafted, (run ? sp : sn).spec_draft_tokens, "each request's drafts add up to the run's");
        cr_assert_eq(kept, (run ? sp : sn).spec_accepted_tokens);
        met_free(met);
    }
    for (int r = 0; r < 24; r++) {
        cr_assert_eq(spec->count[r], plain->count[r]);
        for (int i = 0; i < plain->count[r]; i++)
            cr_assert_eq(spec->tokens[r][i], plain->tokens[r][i], "request %d token %d", r, i);
    }
    cr_assert_gt(sp.spec_draft_tokens, 20, "prompt lookup found drafts (%lld)", (long long)sp.spec_draft_tokens);
    cr_assert_gt(sp.spec_accepted_tokens, 0, "some drafts were kept");
    cr_assert_eq(sn.spec_draft_tokens, 0);
    cr_assert_eq(sp.total_output_tokens, sn.total_output_tokens);
    free(plain);
    free(spec);
}

/* With temperature, top-k and top-p the verifier samples (rejection sampling, tested
 * statistically in test_spec.c): every request still ends at its exact length, the same seed
 * gives the same tokens, and drafts are kept at a rate between none and all. */
Test(engine, sampled_speculation_serves_exact_lengths_reproducibly)
{
    token_log *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    summary sa, sb;
    for (int run = 0; run < 2; run++) {
        engine_options o = tiny_options(POLICY_PAGED, false, false);
        o.sched.num_speculative_tokens = 3;
        o.prompt_lookup_min = 1;
        o.prompt_lookup_max = 3;
        engine_backend_options(&o.sched, &o.backend);
        o.sampling = (kb_sampling){.temperature = 0.3f, .top_k = 20, .top_p = 0.95f};
        wl_config wc = tiny_workload(12);
        wc.arrival = ARRIVAL_ALL_AT_ONCE;
        met_free(serve(&o, &wc, run ? b : a, run ? &sb : &sa));
    }
    for (int r = 0; r < 12; r++)
        for (int i = 0; i < a->count[r]; i++) cr_assert_eq(a->tokens[r][i], b->tokens[r][i], "request %d token %d", r, i);
    cr_assert_gt(sa.spec_draft_tokens, 0);
    cr_assert_eq(sa.spec_accepted_tokens, sb.spec_accepted_tokens);
    cr_assert_lt(sa.spec_accepted_tokens, sa.spec_draft_tokens, "a sampled target rejects some drafts");
    free(a);
    free(b);
}

/* A draft model in the engine, greedy. Drafting with the target itself (the same shape and
 * weights) proposes exactly the target's choices: every draft is kept. A one-layer model of
 * the same vocabulary drafts worse: fewer kept. Either way every request gets exactly the
 * tokens plain greedy decoding gives it and every KV block comes back (serve checks). */
Test(engine, a_draft_model_keeps_greedy_decoding_exact_and_its_own_drafts_all_kept)
{
    token_log *plain = calloc(1, sizeof *plain);
    summary s0;
    engine_options o = tiny_options(POLICY_PAGED, true, true);
    wl_config wc = tiny_workload(16);
    wc.arrival = ARRIVAL_ALL_AT_ONCE;
    char err[200];
    dist_parse("uniform:10:40", &wc.output_len, err, sizeof err);
    met_free(serve(&o, &wc, plain, &s0));
    for (int v = 0; v < 2; v++) {
        token_log *spec = calloc(1, sizeof *spec);
        summary s;
        engine_options d = tiny_options(POLICY_PAGED, true, true);
        d.sched.num_speculative_tokens = 3;
        d.spec_draft_model = true;
        d.draft_shape = d.backend.shape;
        if (v == 1) d.draft_shape.num_layers = 1;
        engine_backend_options(&d.sched, &d.backend);
        met_free(serve(&d, &wc, spec, &s));
        for (int r = 0; r < 16; r++)
            for (int i = 0; i < plain->count[r]; i++)
                cr_assert_eq(spec->tokens[r][i], plain->tokens[r][i], "draft %d: request %d token %d", v, r, i);
        cr_assert_gt(s.spec_draft_tokens, 50, "draft %d: %lld drafted", v, (long long)s.spec_draft_tokens);
        if (v == 0) cr_assert_eq(s.spec_accepted_tokens, s.spec_draft_tokens, "the target drafting for itself");
        else cr_assert_lt(s.spec_accepted_tokens, s.spec_draft_tokens, "a one-layer draft is wrong sometimes");
        cr_assert_gt(s.spec_draft_time_share, 0, "drafting takes time");
        free(spec);
    }
    free(plain);
}

/* A draft model with sampling: exact lengths, the same tokens from the same seed, and the
 * target's greedy choices as drafts kept with the target's probability of them: some, not all. */
Test(engine, a_draft_model_with_sampling_serves_exact_lengths_reproducibly)
{
    token_log *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    for (int run = 0; run < 2; run++) {
        engine_options o = tiny_options(POLICY_PAGED, false, false);
        o.sched.num_speculative_tokens = 2;
        o.spec_draft_model = true;
        o.draft_shape = o.backend.shape; /* the target's own greedy choices, as drafts */
        engine_backend_options(&o.sched, &o.backend);
        o.sampling = (kb_sampling){.temperature = 0.5f, .top_k = 0, .top_p = 1};
        wl_config wc = tiny_workload(8);
        wc.arrival = ARRIVAL_ALL_AT_ONCE;
        summary s;
        met_free(serve(&o, &wc, run ? b : a, &s));
        cr_assert_gt(s.spec_accepted_tokens, 0);
        cr_assert_lt(s.spec_accepted_tokens, s.spec_draft_tokens, "a sampled target keeps its argmax only sometimes");
    }
    for (int r = 0; r < 8; r++)
        for (int i = 0; i < a->count[r]; i++) cr_assert_eq(a->tokens[r][i], b->tokens[r][i], "request %d token %d", r, i);
    free(a);
    free(b);
}

/* A draft model over a small pool with shared prefixes: requests are preempted and come back
 * with prefix-cache hits past where the draft model had got to. It once restarted from there,
 * overrunning its runner's buffers (heap corruption; a reviewer's ASan run showed the write);
 * it now starts where the target does, whose cached blocks both models filled. Greedy tokens
 * stay exactly plain decoding's and nothing leaks. */
Test(engine, a_draft_model_survives_preemption_and_prefix_hits)
{
    enum { N = 12 };   /* with the old start, 8 requests already crash; 60 took 33 s here */
    token_log *plain = calloc(1, sizeof *plain), *spec = calloc(1, sizeof *spec);
    summary s0, s1;
    for (int run = 0; run < 2; run++) {
        engine_options o = tiny_engine_options((sched_config){
            .policy = POLICY_PAGED, .chunked_prefill = true, .prefix_caching = true, .max_num_seqs = 8,
            .max_num_batched_tokens = 48, .chunk_size = 16, .block_size = 16, .num_blocks = 50,
            .max_model_len = 1024, .num_speculative_tokens = run ? 3 : 0});
        o.spec_draft_model = run == 1;
        o.draft_shape = o.backend.shape;
        o.draft_shape.num_layers = 1;
        engine_backend_options(&o.sched, &o.backend);
        wl_config c = {.num_requests = N, .arrival = ARRIVAL_ALL_AT_ONCE, .burstiness = 1, .num_prefixes = 2,
                       .shared_prefix_len = 240, .prefix_fraction = 1, .trace_time_scale = 1, .vocab_size = 2048,
                       .seed = 1};
        char err[200];
        dist_parse("uniform:250:400", &c.prompt_len, err, sizeof err);
        dist_parse("uniform:2:40", &c.output_len, err, sizeof err);
        met_free(serve(&o, &c, run ? spec : plain, run ? &s1 : &s0));
    }
    cr_assert_gt(s1.num_preemptions, 0, "the pool must preempt the speculating run");
    for (int r = 0; r < N; r++)
        for (int i = 0; i < plain->count[r]; i++)
            cr_assert_eq(spec->tokens[r][i], plain->tokens[r][i], "request %d token %d", r, i);
    free(plain);
    free(spec);
}
