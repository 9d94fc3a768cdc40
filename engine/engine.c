#include "engine/engine.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "workload/driver.h"
#include "engine/runner.h"

typedef struct engine {
    const engine_options *o;
    workload *w;
    recorder *rc;
    driver drv;
    sched *s;
    kb_backend *kb;
    runner rn;
    req_pool reqs;          /* the requests in flight */
    size_t ended;
    struct timespec t0;
    engine_stats stats;
} engine;

static double since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (t.tv_nsec - t0->tv_nsec) * 1e-9;
}

static double clock_now(const engine *e) { return since(&e->t0); }

void engine_backend_options(const sched_config *s, kb_options *kb)
{
    int per_seq = bm_blocks_for(s->max_model_len, s->block_size);
    kb->num_blocks = s->num_blocks;
    kb->block_size = s->block_size;
    kb->max_num_seqs = s->max_num_seqs;
    kb->max_num_tokens = s->max_num_batched_tokens;
    kb->max_blocks_per_seq = per_seq < s->num_blocks ? per_seq : s->num_blocks;
}

static void request_ended(engine *e, request *r, double now)
{
    rec_ended(e->rc, r);
    drv_on_done(&e->drv, now);
    e->ended++;
    if (e->o->progress) e->o->progress(e->o->progress_ctx, e->ended, e->w->n);
}

/* The scheduler no longer refers to R: its slot can serve another request. */
static void request_released(engine *e, request *r)
{
    free((void *)r->prompt);
    r->prompt = NULL;
    req_pool_put(&e->reqs, r);
}

/* Each request's buffer holds its prompt and then every token it will generate. */
static int send_due_requests(engine *e, double now)
{
    wl_request *wr;
    while ((wr = drv_release(&e->drv, now))) {
        request *r = req_pool_get(&e->reqs);
        int32_t *tokens = r ? malloc((size_t)(wr->prompt_len + wr->output_len) * sizeof *tokens) : NULL;
        if (!tokens) return -1;
        wl_fill_prompt(e->w, wr, tokens);
        req_from_workload(r, wr, tokens);
        rec_sent(e->rc, r);
        if (!sched_add(e->s, r, now)) {
            request_ended(e, r, now);
            request_released(e, r);
        }
    }
    return 0;
}

static void deliver_tokens(engine *e, const sched_batch *b, double now)
{
    for (int k = 0; k < b->num_items; k++) {
        request *r = b->items[k].req;
        if (!b->items[k].emits_token) continue;
        int32_t token = e->rn.sampled[k];
        ((int32_t *)r->prompt)[req_num_tokens(r)] = token;
        if (e->o->on_token) e->o->on_token(e->o->on_token_ctx, r, token, now);
    }
}

/* Schedules and runs one step. Returns 1 when it ran one, 0 when nothing could run, -1 on a
 * backend failure. */
static int run_step(engine *e, double start)
{
    const sched_batch *b;
    double t_a = clock_now(e);
    if (sched_schedule(e->s, start, &b) == 0) return 0;
    double t_b = clock_now(e);
    runner_prepare(&e->rn, b, sched_bm(e->s));
    double t_c = clock_now(e);
    if (runner_forward(&e->rn, NULL) != 0) return -1;
    double t_d = clock_now(e);
    if (runner_sample(&e->rn, &e->o->sampling, NULL) != 0) return -1;
    double t_e = clock_now(e);
    step_record st = {.step_id = e->stats.steps++, .start_time = start,
                      .schedule_time = t_b - t_a, .prepare_time = t_c - t_b,
                      .forward_time = t_d - t_c, .sample_time = t_e - t_d,
                      .predicted_time = e->o->predict ? e->o->predict(e->o->predict_ctx, b) : NAN};
    sched_fill_step(e->s, b, &st);
    double end = clock_now(e);
    deliver_tokens(e, b, end);
    rec_tokens(e->rc, b, end);
    request **fin;
    int nf = sched_complete(e->s, end, &fin);
    st.end_time = end;
    rec_step(e->rc, &st);
    for (int i = 0; i < nf; i++) request_ended(e, fin[i], end);
    int nr = sched_released(e->s, &fin);
    for (int i = 0; i < nr; i++) request_released(e, fin[i]);
    return 1;
}

/* Waits for the next arrival. Long waits sleep; the last millisecond is polled, because a
 * core woken from sleep runs the next steps measurably slower (caches and clocks cooled:
 * 14-40% on this project's 2-core VMs), which a serving loop under load never sees. */
static void wait_until(const engine *e, double t)
{
    double wait = t - clock_now(e) - 1e-3;
    if (wait > 0) {
        struct timespec ts = {(time_t)wait, (long)((wait - floor(wait)) * 1e9)};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
    }
    while (clock_now(e) < t) {}
}

/* First runs include one-time costs (page faults, thread start, lazy initialization):
 * run a small prefill and a decode through every kernel before the clock starts. */
static int warm_up(engine *e)
{
    const kb_options *kb = &e->o->backend;
    int n = 16;
    if (n > kb->max_num_tokens) n = kb->max_num_tokens;
    if (n > kb->num_blocks * kb->block_size) n = kb->num_blocks * kb->block_size;
    if (n > kb->max_blocks_per_seq * kb->block_size) n = kb->max_blocks_per_seq * kb->block_size;
    int32_t ids[16], pos[16], slots[16], qs[2] = {0, n}, ctx[1] = {n};
    /* a backend may copy a whole block-table row */
    int32_t *table = calloc(kb->max_blocks_per_seq, sizeof *table);
    if (!table) return -1;
    for (int i = 0; i < n; i++) ids[i] = pos[i] = slots[i] = i;
    for (int i = 0; i < kb->max_blocks_per_seq && i < kb->num_blocks; i++) table[i] = i;
    kb_batch b = {n, ids, pos, slots, 1, qs, ctx, table};
    int32_t out;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int status = 0;
    for (int len = n; len >= 1 && status == 0; len = len > 1 ? 1 : 0) {
        b.num_tokens = len;
        qs[1] = len;
        if (kb_forward(e->kb, &b, NULL) != 0 || kb_sample(e->kb, &e->o->sampling, &out, NULL) != 0) status = -1;
    }
    free(table);
    e->stats.warmup_seconds = since(&t0);
    return status;
}

static int loop(engine *e, char *err, size_t errlen)
{
    clock_gettime(CLOCK_MONOTONIC, &e->t0);
    while (e->ended < e->w->n) {
        if (e->o->stop && *e->o->stop) {
            snprintf(err, errlen, "interrupted");
            return 1;
        }
        double now = clock_now(e);
        if (send_due_requests(e, now) < 0) {
            snprintf(err, errlen, "out of memory for request tokens");
            return 1;
        }
        if (e->ended == e->w->n) break;
        int ran = run_step(e, now);
        if (ran < 0) {
            snprintf(err, errlen, "backend: %s", kb_error(e->kb));
            return 1;
        }
        if (ran) continue;
        double next = drv_next_time(&e->drv);
        if (isinf(next)) {
            snprintf(err, errlen, "internal error: nothing can run and nothing will arrive");
            return 1;
        }
        wait_until(e, next);
    }
    e->stats.end_time = clock_now(e);
    return 0;
}

static void teardown(engine *e)
{
    req_pool_free(&e->reqs);
    drv_free(&e->drv);
    runner_free(&e->rn);
    sched_free(e->s);
    kb_close(e->kb);
}

int engine_run(const engine_options *o, workload *w, const wl_config *cfg, recorder *rc,
               engine_stats *stats, char *err, size_t errlen)
{
    engine e = {.o = o, .w = w, .rc = rc};
    e.kb = kb_open(&o->backend, err, errlen);
    if (!e.kb) return 2;
    snprintf(e.stats.device, sizeof e.stats.device, "%s", kb_device_name(e.kb));
    bool driving = drv_init(&e.drv, w, cfg) == 0;
    e.s = sched_create(&o->sched);
    req_pool_init(&e.reqs);
    int status = 1;
    if (!driving || !e.s || runner_init(&e.rn, e.kb, o->backend.max_num_tokens, o->backend.max_num_seqs,
                                       o->backend.max_blocks_per_seq) < 0)
        snprintf(err, errlen, "out of memory while setting up the engine");
    else if (warm_up(&e) < 0)
        snprintf(err, errlen, "backend warm-up failed: %s", kb_error(e.kb));
    else
        status = loop(&e, err, errlen);
    if (stats) *stats = e.stats;
    teardown(&e);
    return status;
}

int engine_run_steps(const engine_options *o, const wl_config *cfg,
                     int (*each)(void *ctx, const recorder *rc, char *err, size_t errlen), void *ctx,
                     char *err, size_t errlen)
{
    workload w;
    if (wl_open(cfg, &w, err, errlen) < 0) return 1;
    met_acc *met = met_create();
    recorder rc;
    rec_init(&rc, met, NULL);
    rc.keep_steps = true;
    int status = engine_run(o, &w, cfg, &rc, NULL, err, errlen);
    if (status == 0) status = each(ctx, &rc, err, errlen);
    rec_free(&rc);
    met_free(met);
    wl_free(&w);
    return status;
}
