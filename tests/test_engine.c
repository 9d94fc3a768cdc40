/* The real engine on the CPU backend: a short real-time run of the tiny model. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "engine/engine.h"
#include "core/model.h"

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
    const model_shape *m = model_preset("tiny");
    engine_options o = {0};
    o.sched = (sched_config){.policy = policy, .chunked_prefill = chunked, .prefix_caching = prefix,
                             .max_num_seqs = 16, .max_num_batched_tokens = chunked ? 128 : 1024,
                             .block_size = 16, .num_blocks = 256, .max_model_len = 1024};
    o.backend = (kb_options){.kind = KB_CPU, .weight_seed = 5, .sample_seed = 9, .threads = 1,
                             .shape = {m->num_layers, m->hidden, m->num_heads, m->num_kv_heads,
                                       m->head_dim, m->intermediate, m->vocab, m->rope_theta, m->rms_eps}};
    engine_backend_options(&o.sched, &o.backend);
    o.sampling = (kb_sampling){.temperature = 0, .top_k = 0, .top_p = 1};
    return o;
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
