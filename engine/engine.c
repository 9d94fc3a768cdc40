#include "engine/engine.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "workload/driver.h"
#include "engine/runner.h"
#include "engine/drafter.h"
#include "engine/spec.h"

typedef struct engine {
    const engine_options *o;
    workload *w;               /* NULL when live: requests come from engine_submit */
    recorder *rc;              /* NULL when live */
    struct engine_live *live;
    driver drv;
    sched *s;
    kb_backend *kb;
    runner rn;
    req_pool reqs;          /* the requests in flight */
    size_t ended;
    struct timespec t0;
    engine_stats stats;
    step_record last_step;     /* live: the last step, for the gauges */
    /* speculative decoding: sampled verification's generator and the step's logits */
    spec_sampler spec;
    float *logits;
    drafter drafter;           /* speculative.method = draft: the draft model (kb NULL without) */
    bool draft_failed;         /* the last step failed in the draft model's backend */
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
    int drafts = s->num_speculative_tokens * s->max_num_seqs;
    if (drafts > s->max_num_batched_tokens) drafts = s->max_num_batched_tokens;
    kb->max_num_seqs = s->max_num_seqs + drafts;
    kb->max_num_tokens = s->max_num_batched_tokens;
    kb->max_blocks_per_seq = per_seq < s->num_blocks ? per_seq : s->num_blocks;
}

static void job_ended(engine *e, request *r);

static void request_ended(engine *e, request *r, double now)
{
    e->ended++;
    if (e->live) {
        job_ended(e, r);
        return;
    }
    rec_ended(e->rc, r);
    drv_on_done(&e->drv, now);
    if (e->o->progress) e->o->progress(e->o->progress_ctx, e->ended, e->w->n);
}

/* Every request the scheduler let go of since its last completion or abort: its slot can
 * serve another request. */
static void release_all(engine *e)
{
    request **rel;
    int n = sched_released(e->s, &rel);
    for (int i = 0; i < n; i++) req_pool_put(&e->reqs, rel[i]);
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
            req_pool_put(&e->reqs, r);
        }
    }
    return 0;
}

/* Speculation: each running sequence in its decode phase gets the drafts prompt lookup finds
 * in its tokens, written after them in its buffer (which holds its whole output), for the
 * scheduler to budget. */
static void propose_drafts(engine *e)
{
    int k = e->o->sched.num_speculative_tokens;
    if (k == 0 || e->drafter.kb) return; /* a draft model drafts once the step is scheduled */
    request *const *running;
    int n = sched_running(e->s, &running);
    for (int i = 0; i < n; i++) {
        request *r = running[i];
        int total = req_num_tokens(r), left = r->output_len - r->num_generated - 1;
        r->num_proposed = 0;
        if (r->num_generated == 0 || r->num_computed != total - 1 || left <= 0) continue;
        int32_t *tokens = (int32_t *)r->prompt;
        r->num_proposed = spec_ngram_propose(tokens, total, e->o->prompt_lookup_min, e->o->prompt_lookup_max,
                                             k < left ? k : left, tokens + total);
    }
}

/* The tokens of the step: one per emitting item, and for a verifying one the drafts the
 * target kept before it (told to the scheduler with sched_accept). */
static int deliver_tokens(engine *e, const sched_batch *b, double now)
{
    bool sampled = e->o->sampling.temperature > 0;
    if (sampled && b->num_spec_seqs > 0 && kb_get_logits(e->kb, e->logits) != 0) return -1;
    for (int k = 0; k < b->num_items; k++) {
        const sched_item *it = &b->items[k];
        request *r = it->req;
        if (!it->emits_token) continue;
        int32_t *tokens = (int32_t *)r->prompt, next;
        int at = req_num_tokens(r), seq = e->rn.item_seq[k], kept = 0;
        if (it->num_draft_tokens == 0) next = e->rn.sampled[seq];
        else if (!sampled) next = e->rn.sampled[seq + (kept = spec_accept_greedy(tokens + at, it->num_draft_tokens,
                                                                                    e->rn.sampled + seq))];
        else kept = spec_accept_sampled(&e->spec, e->logits + (size_t)seq * e->spec.vocab, tokens + at,
                                        it->num_draft_tokens, &e->o->sampling, &next);
        if (it->num_draft_tokens > 0) sched_accept(e->s, k, kept);
        tokens[at + kept] = next;
        for (int j = 0; e->o->on_token && j <= kept; j++) e->o->on_token(e->o->on_token_ctx, r, tokens[at + j], now);
    }
    return 0;
}

/* Schedules and runs one step. Returns 1 when it ran one, 0 when nothing could run, -1 on a
 * backend failure. */
static int run_step(engine *e, double start)
{
    const sched_batch *b;
    double t_a = clock_now(e);
    propose_drafts(e);
    if (sched_schedule(e->s, start, &b) == 0) return 0;
    double t_draft = clock_now(e);
    e->draft_failed = e->drafter.kb && drafter_propose(&e->drafter, b, sched_bm(e->s)) != 0;
    if (e->draft_failed) return -1;
    double t_b = clock_now(e), drafting = t_b - t_draft;
    runner_prepare(&e->rn, b, sched_bm(e->s));
    double t_c = clock_now(e);
    if (runner_forward(&e->rn, NULL) != 0) return -1;
    double t_d = clock_now(e);
    if (runner_sample(&e->rn, &e->o->sampling, NULL) != 0) return -1;
    double t_e = clock_now(e);
    step_record st = {.step_id = e->stats.steps++, .start_time = start,
                      .schedule_time = t_draft - t_a, .prepare_time = t_c - t_b, .draft_time = drafting,
                      .forward_time = t_d - t_c, .sample_time = t_e - t_d,
                      .predicted_time = e->o->predict ? e->o->predict(e->o->predict_ctx, b) : NAN};
    sched_fill_step(e->s, b, &st);
    double end = clock_now(e);
    if (deliver_tokens(e, b, end) != 0) return -1;
    if (e->rc) rec_tokens(e->rc, b, end);
    request **fin;
    int nf = sched_complete(e->s, end, &fin);
    st.end_time = end;
    st.num_accepted_tokens = b->num_accepted_tokens;
    if (e->drafter.kb) drafter_settle(b);
    if (e->rc) rec_step(e->rc, &st);
    else e->last_step = st;
    for (int i = 0; i < nf; i++) request_ended(e, fin[i], end);
    release_all(e);
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
static int warm_up_backend(engine *e, kb_backend *backend)
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
        if (kb_forward(backend, &b, NULL) != 0 || kb_sample(backend, &e->o->sampling, &out, NULL) != 0) status = -1;
    }
    free(table);
    e->stats.warmup_seconds += since(&t0);
    return status;
}

static int warm_up(engine *e)
{
    if (warm_up_backend(e, e->kb) < 0) return -1;
    e->draft_failed = e->drafter.kb && warm_up_backend(e, e->drafter.kb) < 0;
    return e->draft_failed ? -1 : 0;
}

/* The backend whose failure ended the last call. */
static const char *backend_error(const engine *e)
{
    return e->draft_failed ? kb_error(e->drafter.kb) : kb_error(e->kb);
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
            snprintf(err, errlen, "backend%s: %s", e->draft_failed ? " (draft model)" : "", backend_error(e));
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
    e->stats.blocks_in_use_at_end = e->o->sched.num_blocks - bm_num_free(sched_bm(e->s));
    return 0;
}

/* The runner, with speculation the draft model, and with sampled speculation the verifier's
 * generator and logits. -1 with a reason in ERR; -2 when the draft model's backend refused it
 * (too large for the memory left: a user's choice). */
static int setup_runner(engine *e, char *err, size_t errlen)
{
    const engine_options *o = e->o;
    if (runner_init(&e->rn, e->kb, o->backend.max_num_tokens, o->backend.max_num_seqs,
                    o->backend.max_blocks_per_seq) < 0) {
        snprintf(err, errlen, "out of memory while setting up the engine");
        return -1;
    }
    if (o->sched.num_speculative_tokens == 0) return 0;
    if (o->spec_draft_model) {
        char why[512];
        int rc = drafter_open(&e->drafter, &o->backend, &o->draft_shape, &o->sched, why, sizeof why);
        if (rc < 0) {
            snprintf(err, errlen, "the draft model: %s", why);
            return rc;
        }
    }
    if (o->sampling.temperature == 0) return 0;
    e->logits = malloc((size_t)o->backend.max_num_seqs * o->backend.shape.vocab * sizeof *e->logits);
    if (!e->logits || spec_sampler_init(&e->spec, o->backend.shape.vocab, o->backend.sample_seed ^ 0x5eedULL) < 0) {
        snprintf(err, errlen, "out of memory for speculative sampling");
        return -1;
    }
    return 0;
}

static void free_runner(engine *e)
{
    runner_free(&e->rn);
    drafter_close(&e->drafter);
    spec_sampler_free(&e->spec);
    free(e->logits);
    e->logits = NULL;
}

static void teardown(engine *e)
{
    req_pool_free(&e->reqs);
    drv_free(&e->drv);
    free_runner(e);
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
    int status = 1, setup = driving && e.s ? setup_runner(&e, err, errlen) : -1;
    if (!driving || !e.s)
        snprintf(err, errlen, "out of memory while setting up the engine");
    else if (setup == -2)
        status = 2; /* the draft model's backend refused it, as kb_open above may */
    else if (setup == 0 && warm_up(&e) < 0)
        snprintf(err, errlen, "backend%s warm-up failed: %s", e.draft_failed ? " (draft model)" : "", backend_error(&e));
    else if (setup == 0)
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

/* ---- live serving: requests from other threads (the HTTP server) ----
 *
 * Who touches a job: the submitting thread until engine_submit; then the engine thread,
 * which reaches it only through the lists below (under the lock) or as a request's user
 * pointer while the scheduler holds it; the submitter again once the job is JOB_DONE, a
 * state the engine sets last, after the job has left every list. engine_abort waits for it. */

/* JOB_NEW (0, a zeroed job) until engine_submit: engine_abort leaves such a job alone. */
enum { JOB_NEW, JOB_QUEUED, JOB_RUNNING, JOB_DONE };

struct engine_live {
    engine e;
    engine_options o;          /* the caller's, with on_token routed to each job */
    pthread_t thread;
    bool started;
    pthread_mutex_t lock;
    pthread_cond_t wake;       /* the engine thread: work arrived, or stop */
    pthread_cond_t done;       /* engine_abort's callers: a job ended */
    engine_job *inbox, *inbox_tail;
    engine_job *aborts;        /* jobs whose client went away, linked by abort_next */
    engine_job *live;          /* jobs taken from the inbox and not yet done */
    bool stopping;
    int64_t next_id;
    engine_gauges gauges;
    char error[256];           /* a backend failure: the engine stopped serving */
};

static void live_on_token(void *ctx, const request *r, int32_t token, double time)
{
    (void)ctx;
    engine_job *j = r->user;
    if (j->on_token) j->on_token(j->ctx, token, time);
}

/* Under the lock. */
static void unlink_job(engine_live *l, engine_job *j)
{
    if (j->prev_live) j->prev_live->next_live = j->next_live;
    else if (l->live == j) l->live = j->next_live;
    if (j->next_live) j->next_live->prev_live = j->prev_live;
    j->prev_live = j->next_live = NULL;
    for (engine_job **p = &l->aborts; *p; p = &(*p)->abort_next)
        if (*p == j) {
            *p = j->abort_next;
            break;
        }
}

/* Under the lock: the job leaves every list and belongs to its submitter again. */
static void mark_done(engine_live *l, engine_job *j)
{
    unlink_job(l, j);
    j->req = NULL;
    j->phase = JOB_DONE;
    pthread_cond_broadcast(&l->done);
}

/* Under the lock, on the engine thread (the only one that changes the scheduler). */
static void update_counts(engine_live *l)
{
    engine *e = &l->e;
    l->gauges.running = sched_num_running(e->s);
    l->gauges.waiting = sched_num_waiting(e->s);
    l->gauges.kv_usage = 1 - (double)bm_num_free(sched_bm(e->s)) / e->o->sched.num_blocks;
}

/* The engine thread, once R's request has ended: the job's last callback, then done. */
static void job_ended(engine *e, request *r)
{
    engine_live *l = e->live;
    engine_job *j = r->user;
    req_record rec;
    req_to_record(r, &rec);
    /* the counters first: a client that has its last token may read /metrics at once */
    pthread_mutex_lock(&l->lock);
    l->gauges.finished += rec.stop == STOP_LENGTH;
    l->gauges.aborted += rec.stop == STOP_ABORTED;
    l->gauges.prompt_tokens += rec.prompt_len;
    l->gauges.generation_tokens += rec.output_len;
    update_counts(l);
    pthread_mutex_unlock(&l->lock);
    if (j->on_done) j->on_done(j->ctx, &rec);
    pthread_mutex_lock(&l->lock);
    mark_done(l, j);
    pthread_mutex_unlock(&l->lock);
}

/* Jobs taken from the inbox join the scheduler (engine thread, lock not held). */
static void admit_jobs(engine_live *l, engine_job *jobs, double now)
{
    engine *e = &l->e;
    for (engine_job *j = jobs, *next; j; j = next) {
        next = j->next;
        request *r = req_pool_get(&e->reqs);
        int32_t *tokens = r ? malloc((size_t)(j->prompt_len + j->max_tokens) * sizeof *tokens) : NULL;
        if (!tokens) {
            if (r) req_pool_put(&e->reqs, r);
            /* out of memory: it ends at once, as a request too large for the pool does */
            request none;
            req_init(&none, j->id, j->arrival_time, NULL, j->prompt_len, j->max_tokens);
            none.state = REQ_FINISHED;
            none.stop = STOP_KV_CAPACITY;
            none.finish_time = now;
            none.user = j;
            job_ended(e, &none);
            continue;
        }
        memcpy(tokens, j->prompt, (size_t)j->prompt_len * sizeof *tokens);
        req_init(r, j->id, j->arrival_time, tokens, j->prompt_len, j->max_tokens);
        r->user = j;
        pthread_mutex_lock(&l->lock);
        j->req = r;
        pthread_mutex_unlock(&l->lock);
        if (!sched_add(e->s, r, now)) {
            request_ended(e, r, now);
            req_pool_put(&e->reqs, r);
        }
    }
}

/* Ends J's request as aborted, if the scheduler still runs it (engine thread). */
static void abort_request(engine_live *l, engine_job *j, double now)
{
    engine *e = &l->e;
    request *r = j->req;
    if (r && sched_abort(e->s, r, now)) {
        request_ended(e, r, now);
        release_all(e);
        return;
    }
    /* already ended (a static batch's padding member): nothing left to stop */
    pthread_mutex_lock(&l->lock);
    if (j->phase != JOB_DONE) mark_done(l, j);
    pthread_mutex_unlock(&l->lock);
}

/* Aborts of jobs already in the scheduler; one still queued waits for its admission. */
static void process_aborts(engine_live *l, double now)
{
    for (;;) {
        pthread_mutex_lock(&l->lock);
        engine_job **p = &l->aborts;
        while (*p && (*p)->phase == JOB_QUEUED) p = &(*p)->abort_next;
        engine_job *j = *p;
        if (j) *p = j->abort_next;   /* off the abort list, still live */
        pthread_mutex_unlock(&l->lock);
        if (!j) return;
        abort_request(l, j, now);
    }
}

/* The server is stopping: every job taken ends aborted. */
static void abort_everything(engine_live *l, double now)
{
    for (;;) {
        pthread_mutex_lock(&l->lock);
        engine_job *j = l->live;
        pthread_mutex_unlock(&l->lock);
        if (!j) return;
        abort_request(l, j, now);
    }
}

static void update_gauges(engine_live *l)
{
    engine *e = &l->e;
    engine_gauges *g = &l->gauges;
    update_counts(l);
    g->steps = e->stats.steps;
    g->prefix_hits += e->last_step.prefix_hits;
    g->prefix_queries += e->last_step.prefix_queries;
    g->spec_drafts += e->last_step.num_spec_seqs;
    g->spec_draft_tokens += e->last_step.num_draft_tokens;
    g->spec_accepted_tokens += e->last_step.num_accepted_tokens;
    e->last_step = (step_record){0};
}

/* Takes the inbox (under the lock): its jobs go on the live list. */
static engine_job *take_inbox(engine_live *l)
{
    engine_job *jobs = l->inbox;
    l->inbox = l->inbox_tail = NULL;
    for (engine_job *j = jobs; j; j = j->next) {
        j->phase = JOB_RUNNING;
        j->prev_live = NULL;
        j->next_live = l->live;
        if (l->live) l->live->prev_live = j;
        l->live = j;
    }
    return jobs;
}

static void *live_main(void *arg)
{
    engine_live *l = arg;
    engine *e = &l->e;
    pthread_mutex_lock(&l->lock);
    for (;;) {
        engine_job *jobs = take_inbox(l);
        bool stopping = l->stopping;
        if (!jobs && !l->aborts && !stopping && sched_idle(e->s)) {
            pthread_cond_wait(&l->wake, &l->lock);
            continue;
        }
        pthread_mutex_unlock(&l->lock);
        double now = clock_now(e);
        admit_jobs(l, jobs, now);
        process_aborts(l, now);
        int ran = stopping ? 0 : run_step(e, now);
        if (ran < 0) {
            /* the engine stops: jobs submitted during the failed step end too, aborted */
            pthread_mutex_lock(&l->lock);
            snprintf(l->error, sizeof l->error, "backend%s: %s", e->draft_failed ? " (draft model)" : "", backend_error(e));
            l->stopping = stopping = true;
            engine_job *late = take_inbox(l);
            pthread_mutex_unlock(&l->lock);
            admit_jobs(l, late, clock_now(e));
        }
        if (stopping) {
            abort_everything(l, clock_now(e));
            pthread_mutex_lock(&l->lock);
            break;
        }
        pthread_mutex_lock(&l->lock);
        update_gauges(l);
    }
    l->gauges.stopped = true;
    pthread_cond_broadcast(&l->done);
    pthread_mutex_unlock(&l->lock);
    return NULL;
}

engine_live *engine_start(const engine_options *o, engine_stats *stats, char *err, size_t errlen)
{
    engine_live *l = calloc(1, sizeof *l);
    if (!l) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    l->o = *o;
    l->o.on_token = live_on_token;
    l->o.predict = NULL;
    l->e = (engine){.o = &l->o, .live = l};
    engine *e = &l->e;
    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->wake, NULL);
    pthread_cond_init(&l->done, NULL);
    req_pool_init(&e->reqs);
    e->kb = kb_open(&o->backend, err, errlen);   /* ERR says why when it fails */
    bool refused = !e->kb;
    if (e->kb) {
        snprintf(e->stats.device, sizeof e->stats.device, "%s", kb_device_name(e->kb));
        e->s = sched_create(&o->sched);
        int setup = e->s ? setup_runner(e, err, errlen) : -1;
        if (!e->s)
            snprintf(err, errlen, "out of memory while setting up the engine");
        else if (setup < 0)
            refused = setup == -2;
        else if (warm_up(e) < 0)
            snprintf(err, errlen, "backend%s warm-up failed: %s", e->draft_failed ? " (draft model)" : "", backend_error(e));
        else {
            clock_gettime(CLOCK_MONOTONIC, &e->t0);
            l->started = pthread_create(&l->thread, NULL, live_main, l) == 0;
            if (!l->started) snprintf(err, errlen, "cannot start the engine thread");
        }
    }
    if (!l->started) {
        if (stats) *stats = (engine_stats){.refused = refused};
        engine_stop(l);
        return NULL;
    }
    if (stats) *stats = e->stats;
    return l;
}

double engine_now(const engine_live *l) { return clock_now(&l->e); }

int engine_submit(engine_live *l, engine_job *j)
{
    pthread_mutex_lock(&l->lock);
    int ok = !l->stopping;
    if (ok) {
        j->id = l->next_id++;
        j->arrival_time = clock_now(&l->e);
        j->phase = JOB_QUEUED;
        j->req = NULL;
        j->next = j->abort_next = j->prev_live = j->next_live = NULL;
        j->aborting = false;
        if (l->inbox_tail) l->inbox_tail->next = j;
        else l->inbox = j;
        l->inbox_tail = j;
        pthread_cond_signal(&l->wake);
    }
    pthread_mutex_unlock(&l->lock);
    return ok ? 0 : -1;
}

void engine_abort(engine_live *l, engine_job *j)
{
    pthread_mutex_lock(&l->lock);
    if (j->phase == JOB_NEW) {   /* never submitted: nothing of it is the engine's */
        pthread_mutex_unlock(&l->lock);
        return;
    }
    if (j->phase != JOB_DONE && !j->aborting && !l->gauges.stopped) {
        j->aborting = true;
        j->abort_next = l->aborts;
        l->aborts = j;
        pthread_cond_signal(&l->wake);
    }
    while (j->phase != JOB_DONE && !l->gauges.stopped) pthread_cond_wait(&l->done, &l->lock);
    pthread_mutex_unlock(&l->lock);
}

void engine_gauges_get(engine_live *l, engine_gauges *out)
{
    pthread_mutex_lock(&l->lock);
    *out = l->gauges;
    pthread_mutex_unlock(&l->lock);
}

const char *engine_live_error(engine_live *l)
{
    pthread_mutex_lock(&l->lock);
    const char *e = l->error[0] ? l->error : NULL;
    pthread_mutex_unlock(&l->lock);
    return e;
}

void engine_stop(engine_live *l)
{
    if (!l) return;
    if (l->started) {
        pthread_mutex_lock(&l->lock);
        l->stopping = true;
        pthread_cond_signal(&l->wake);
        pthread_mutex_unlock(&l->lock);
        pthread_join(l->thread, NULL);
    }
    engine *e = &l->e;
    req_pool_free(&e->reqs);
    if (e->kb) free_runner(e);
    sched_free(e->s);
    kb_close(e->kb);
    pthread_mutex_destroy(&l->lock);
    pthread_cond_destroy(&l->wake);
    pthread_cond_destroy(&l->done);
    free(l);
}
