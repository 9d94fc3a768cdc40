#include "sim/sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "metrics/metrics.h"
#include "workload/driver.h"
#include "sim/heap.h"

typedef enum ev_kind { EV_ARRIVAL, EV_STEP_DONE, EV_WAKE, EV_KV_ARRIVED, EV_ADMITTED, EV_CLIENT_DONE } ev_kind;

typedef struct sim_event {
    heap_node node;          /* first: a heap_node* is a sim_event* */
    ev_kind kind;
    int replica;
    request *req;            /* EV_KV_ARRIVED: the request whose KV it is; EV_ADMITTED: the request
                              * the API server has handed over (these two and EV_CLIENT_DONE, a
                              * client seeing its last token, are malloc'd) */
} sim_event;

/* Seconds, one per request, for a mean and a P99 at the end. */
typedef struct samples {
    double *v;
    size_t n, cap;
} samples;

typedef struct replica {
    sched *s;
    sim_event done, wake;
    bool busy, waking;       /* a step in flight; a start deferred to step_cost.ready_time */
    bool touched;            /* in sim.touched: its scheduler changed since it last tried a step */
    double link_free_at;     /* disaggregated prefill instance: when its link finishes the KV it is sending */
    double frontend_free_at[FRONTEND_MAX_SERVERS]; /* when each API server's loop finishes its work */
    step_record step;        /* the step in flight */
    int64_t next_step_id;
    double last_end;         /* when its last step ended (-1: none yet) */
} replica;

typedef struct sim {
    const sim_options *o;
    workload *w;
    recorder *rc;
    heap events;
    driver drv;
    sim_event arrival;
    bool arrival_pending;
    req_pool reqs;           /* the requests in flight */
    bool keep_prompts;       /* prefix caching needs the token ids */
    replica *reps;
    sched **scheds;          /* the replicas' schedulers, for the router */
    router_state router;
    /* The replicas whose schedulers changed (a request routed to one, its step ended, its
     * deferred start came): only they can start a step, since a scheduler's choice depends on
     * its own state alone. Trying every idle replica after every event cost O(replicas) per
     * event, most of the time of a 64-replica run. */
    int *touched;
    int num_touched;
    router_state decode_router;  /* disaggregated: the decode side's router */
    samples transfer_s, decode_wait_s;
    size_t ended;
    bool failed;             /* out of memory in a step's aftermath */
    gsl_rng *beta_rng;       /* per-request acceptance rates (acceptance_spread), reseeded per request */
    sim_stats stats;
} sim;

static void arm_arrival(sim *m)
{
    double t = drv_next_time(&m->drv);
    if (m->arrival_pending || isinf(t)) return;
    heap_push(&m->events, &m->arrival.node, t);
    m->arrival_pending = true;
}

/* A malloc'd event of KIND at time AT (handle and teardown free it); false, with the run
 * marked failed, when out of memory. */
static bool push_owned(sim *m, ev_kind kind, int replica, request *r, double at)
{
    sim_event *ev = malloc(sizeof *ev);
    if (!ev) {
        m->failed = true;
        return false;
    }
    *ev = (sim_event){.kind = kind, .replica = replica, .req = r};
    heap_push(&m->events, &ev->node, at);
    return true;
}

static void request_ended(sim *m, request *r, double now)
{
    rec_ended(m->rc, r);
    if (r->finish_time > now) { /* its client sees the end later (the API server): its slot frees then */
        if (!push_owned(m, EV_CLIENT_DONE, -1, NULL, r->finish_time)) return;
    } else {
        drv_on_done(&m->drv, now);
    }
    m->ended++;
    if (m->o->progress && (m->ended & 0xffff) == 0) m->o->progress(m->o->progress_ctx, m->ended, m->w->n);
}

static void touch(sim *m, int i)
{
    if (m->reps[i].touched) return;
    m->reps[i].touched = true;
    m->touched[m->num_touched++] = i;
}

/* REP's API server K takes COST seconds of work that comes at NOW, after the work it has (one
 * event loop); returns when it is done. */
static double frontend_work(sim *m, replica *rep, int k, double now, double cost)
{
    m->stats.frontend_busy_s += cost;
    double start = rep->frontend_free_at[k] > now ? rep->frontend_free_at[k] : now;
    return rep->frontend_free_at[k] = start + cost;
}

/* The replica among FIRST .. FIRST + N - 1 the router picks for R. */
static replica *route(sim *m, router_state *st, int first, int n, const request *r)
{
    int i = first + router_pick(m->o->router, st, m->scheds + first, n, r);
    if (m->o->replica_requests) m->o->replica_requests[i]++;
    touch(m, i);
    return &m->reps[i];
}

static bool sample(samples *s, double v)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 1024;
        double *p = realloc(s->v, cap * sizeof *p);
        if (!p) return false;
        s->v = p;
        s->cap = cap;
    }
    s->v[s->n++] = v;
    return true;
}

/* Mean and P99 (nearest rank) of S, sorting it. */
static void summarize_samples(samples *s, double *mean, double *p99)
{
    *mean = *p99 = 0;
    if (s->n == 0) return;
    double sum = 0;
    for (size_t i = 0; i < s->n; i++) sum += s->v[i];
    qsort(s->v, s->n, sizeof *s->v, met_cmp_double);
    *mean = sum / (double)s->n;
    *p99 = s->v[(size_t)ceil(0.99 * (double)s->n) - 1];
}

/* A request's chance that each of its drafts is accepted: its own when the workload has one
 * (a trace's acceptance_rate column), else a draw from the Beta distribution with the
 * scenario's mean and spread (0: the mean itself), from the seed and the request's id alone
 * (the generator is reseeded for each request). A draw, not the inverse CDF of a hashed
 * uniform: GSL's Beta inverse fails to converge (and aborts) for shapes below about 1. */
static double acceptance_of(const sim *m, const wl_request *wr)
{
    const sim_options *o = m->o;
    if (wr->has_acceptance_rate) return wr->acceptance_rate;
    double mu = o->acceptance_rate, sd = o->acceptance_spread;
    if (!m->beta_rng) return mu;
    double nu = mu * (1 - mu) / (sd * sd) - 1; /* a + b */
    gsl_rng_set(m->beta_rng, o->acceptance_seed * 0xd1b54a32d192ed03ULL ^ (uint64_t)wr->id * 0x8cb92ba72f3d8dd7ULL);
    return gsl_ran_beta(m->beta_rng, mu * nu, (1 - mu) * nu);
}

/* The steps a request that reaches REP at NOW must let pass before one may take it. With
 * async scheduling vLLM's engine core schedules step N + 1 as soon as step N is launched, and
 * takes in new requests only once step N's output is processed, when it schedules N + 2. A
 * request that comes while a step runs therefore misses the step the engine has already
 * scheduled: it joins the one after, a step later than a synchronous engine would take it.
 * One that comes as a step ends (a closed-loop client's next request, sent on seeing that
 * step's last token), before or after the simulator has handled that end, comes after the
 * engine has scheduled the step after the next. An engine with nothing else to run takes it
 * at once: sched_add_after's holds end when a step would otherwise be empty, so requests
 * that come together to an idle engine go together. Only the paged policy is vLLM's own.
 * (vLLM V1's EngineCore.step_with_batch_queue, a batch queue of 2 under --async-scheduling.) */
static int steps_to_skip(const sim *m, const replica *rep, double now)
{
    if (!m->o->async_scheduling || m->o->sched.policy != POLICY_PAGED) return 0;
    if (rep->busy) return now == rep->step.end_time ? 2 : 1;
    return rep->last_end == now ? 2 : 0;
}

/* R reaches REP at NOW (from a client, or from a prefill instance with its KV): into its
 * scheduler's queue, or ended there when it can never run. */
static void admit(sim *m, replica *rep, request *r, double now)
{
    if (!sched_add_after(rep->s, r, now, steps_to_skip(m, rep, now))) {
        request_ended(m, r, now);
        req_pool_put(&m->reqs, r);
    }
}

static int send_due_requests(sim *m, double now)
{
    wl_request *wr;
    while ((wr = drv_release(&m->drv, now))) {
        request *r = req_pool_get(&m->reqs);
        int32_t *prompt = NULL;
        if (!r) return -1;
        if (m->keep_prompts) {
            prompt = malloc((size_t)wr->prompt_len * sizeof *prompt);
            if (!prompt) return -1;
            wl_fill_prompt(m->w, wr, prompt);
        }
        req_from_workload(r, wr, prompt);
        r->acceptance_rate = acceptance_of(m, wr);
        rec_sent(m->rc, r);
        int first_side = m->o->num_prefill > 0 ? m->o->num_prefill : m->o->num_replicas;
        if (m->o->num_prefill > 0) r->stop_after = 1;
        replica *rep = route(m, &m->router, 0, first_side, r);
        if (sim_frontend_on(&m->o->frontend)) { /* the scheduler sees it once the API server has taken it in */
            int k = (int)(r->id % sim_frontend_servers(&m->o->frontend));
            if (!push_owned(m, EV_ADMITTED, (int)(rep - m->reps), r, frontend_work(m, rep, k, now, m->o->frontend.request_s)))
                return -1;
        } else {
            admit(m, rep, r, now);
        }
    }
    return 0;
}

static void start_step(sim *m, replica *rep, double now)
{
    const sched_batch *b;
    if (sched_schedule(rep->s, now, &b) == 0) return;
    if (m->o->cost.now) *m->o->cost.now = now;
    double dt = m->o->cost.step_time(m->o->cost.ctx, b);
    /* drafting runs before the verification: the step takes both */
    double draft = m->o->draft.step_time ? m->o->draft.step_time(m->o->draft.ctx, b) : 0;
    dt += draft;
    step_record *st = &rep->step;
    *st = (step_record){.step_id = rep->next_step_id++, .start_time = now, .end_time = now + dt,
                        .schedule_time = NAN, .prepare_time = NAN, .forward_time = NAN,
                        .sample_time = NAN, .predicted_time = dt, .instance = (int)(rep - m->reps),
                        .draft_time = draft};
    sched_fill_step(rep->s, b, st);
    for (int i = 0; m->o->num_prefill > 0 && i < b->num_items; i++) {
        request *r = b->items[i].req;
        if (r->handoff_time > 0) { /* its first step on the decode side */
            sample(&m->decode_wait_s, now - r->handoff_time);
            r->handoff_time = 0;
        }
    }
    rep->busy = true;
    heap_push(&m->events, &rep->done.node, now + dt);
}

/* R's prefill is done and its first token out: its KV leaves REP for the decode side, after
 * the KV its link is still sending (one link per instance: transfers queue, they do not
 * overlap; 1 GB/s cannot carry 2.6 GB/s of KV however many requests share it). */
static void send_kv(sim *m, replica *rep, request *r, double now)
{
    double start = rep->link_free_at > now ? rep->link_free_at : now;
    rep->link_free_at = start + r->num_computed * m->o->kv_s_per_token;
    double dt = rep->link_free_at + m->o->kv_latency_s - now;
    if (!sample(&m->transfer_s, dt)) {
        m->failed = true;
        return;
    }
    if (push_owned(m, EV_KV_ARRIVED, -1, r, now + dt)) m->stats.kv_transfers++;
}

/* R's KV is on the decode side: a decode instance takes it, its KV already in place. */
static void kv_arrived(sim *m, request *r, double now)
{
    r->stop = STOP_NONE;
    r->stop_after = 0;
    r->kv_transferred = r->num_computed;
    r->handoff_time = now;
    int first = m->o->num_prefill;
    /* vLLM's decode side learns that KV has landed from a step's output, as it learns of a
     * new request: the same hold */
    admit(m, route(m, &m->decode_router, first, m->o->num_replicas - first, r), r, now);
}

/* How many of the batch's draft tokens the target accepts: for each verifying sequence, the
 * leading run of drafts whose draw falls under the acceptance rate. A draft's draw depends
 * on the request and the position it would take, nothing else. */
static void accept_drafts(sim *m, replica *rep)
{
    const sched_batch *b = sched_last_batch(rep->s);
    for (int i = 0; b->num_spec_seqs > 0 && i < b->num_items; i++) {
        const sched_item *it = &b->items[i];
        int a = 0;
        uint64_t base = m->o->acceptance_seed * 0x100000001b3ULL ^ (uint64_t)it->req->id * 0x9e3779b97f4a7c15ULL;
        while (a < it->num_draft_tokens &&
               wl_mix_unit(base + (uint64_t)(it->req->num_generated + a)) < it->req->acceptance_rate)
            a++;
        sched_accept(rep->s, i, a);
    }
}

/* When the clients see the tokens of REP's step that ended at NOW: then, or once its API
 * servers have handled the step's output, each its own requests' chunks (one per request with
 * a token; accepted drafts come in the same chunk). */
static double tokens_seen_at(sim *m, replica *rep, double now)
{
    if (!sim_frontend_on(&m->o->frontend)) return now;
    const sched_batch *b = sched_last_batch(rep->s);
    int n = sim_frontend_servers(&m->o->frontend), chunks[FRONTEND_MAX_SERVERS] = {0};
    for (int i = 0; i < b->num_items; i++)
        if (b->items[i].emits_token) chunks[b->items[i].req->id % n]++;
    double seen = now;
    for (int k = 0; k < n; k++)
        if (chunks[k] > 0) {
            double done = frontend_work(m, rep, k, now, m->o->frontend.step_s + chunks[k] * m->o->frontend.token_s);
            if (done > seen) seen = done;
        }
    return seen;
}

static void finish_step(sim *m, replica *rep, double now)
{
    request **fin;
    rep->busy = false;
    rep->last_end = now;
    accept_drafts(m, rep);
    /* the engine goes on at NOW; its tokens' times (first, last, gaps, ends) are the clients' */
    double seen = tokens_seen_at(m, rep, now);
    rec_tokens(m->rc, sched_last_batch(rep->s), seen);
    int nf = sched_complete(rep->s, seen, &fin);
    rep->step.num_accepted_tokens = sched_last_batch(rep->s)->num_accepted_tokens;
    rec_step(m->rc, &rep->step);
    m->stats.steps++;
    if (m->o->instances) {
        sim_instance_stats *is = &m->o->instances[rep - m->reps];
        is->steps++;
        is->output_tokens += rep->step.num_outputs + rep->step.num_accepted_tokens;
        is->busy_s += rep->step.end_time - rep->step.start_time;
    }
    for (int i = 0; i < nf; i++)
        if (fin[i]->stop == STOP_HANDOFF) send_kv(m, rep, fin[i], now);
        else request_ended(m, fin[i], now);
    int nr = sched_released(rep->s, &fin);
    for (int i = 0; i < nr; i++)
        if (fin[i]->stop != STOP_HANDOFF) req_pool_put(&m->reqs, fin[i]); /* a handed-off one lives on */
}

static int handle(sim *m, sim_event *ev, double now)
{
    if (ev->kind == EV_ARRIVAL) {
        m->arrival_pending = false;
        if (send_due_requests(m, now) < 0) return -1;
    } else if (ev->kind == EV_KV_ARRIVED) {
        kv_arrived(m, ev->req, now);
        free(ev);
    } else if (ev->kind == EV_ADMITTED) {
        admit(m, &m->reps[ev->replica], ev->req, now);
        touch(m, ev->replica);
        free(ev);
    } else if (ev->kind == EV_CLIENT_DONE) {
        drv_on_done(&m->drv, now);
        free(ev);
    } else if (ev->kind == EV_WAKE) {
        m->reps[ev->replica].waking = false;
        touch(m, ev->replica);
    } else {
        finish_step(m, &m->reps[ev->replica], now);
        touch(m, ev->replica);
    }
    arm_arrival(m);
    return 0;
}

enum { INTERRUPTED = -2, STOP_CHECK = 4096 /* events between looks at the stop flag */ };

static int loop(sim *m)
{
    arm_arrival(m);
    while (!heap_empty(&m->events)) {
        if (m->o->stop && m->stats.events % STOP_CHECK == 0 && *m->o->stop) return INTERRUPTED;
        sim_event *ev = (sim_event *)heap_pop(&m->events);
        double now = ev->node.time;
        m->stats.events++;
        m->stats.end_time = now;
        if (handle(m, ev, now) < 0 || m->failed) return -1;
        /* Start steps only once every event of this instant is handled, so requests that
         * arrive as a step ends join the next batch. */
        heap_node *next = heap_peek(&m->events);
        if (next && next->time == now) continue;
        /* in replica order, as a scan of all of them would (steps ending at one instant pop
         * in the order they were pushed) */
        for (int i = 1; i < m->num_touched; i++)
            for (int j = i; j > 0 && m->touched[j - 1] > m->touched[j]; j--) {
                int t = m->touched[j];
                m->touched[j] = m->touched[j - 1];
                m->touched[j - 1] = t;
            }
        for (int k = 0; k < m->num_touched; k++) {
            replica *rep = &m->reps[m->touched[k]];
            rep->touched = false;
            if (rep->busy || rep->waking) continue;
            double ready = m->o->cost.ready_time && !sched_idle(rep->s) ? m->o->cost.ready_time(m->o->cost.ctx) : now;
            if (ready > now) {
                rep->waking = true;
                heap_push(&m->events, &rep->wake.node, ready);
            } else {
                start_step(m, rep, now);
            }
        }
        m->num_touched = 0;
    }
    return 0;
}

static int setup(sim *m, const sim_options *o, workload *w, const wl_config *cfg, recorder *rc)
{
    *m = (sim){.o = o, .w = w, .rc = rc, .keep_prompts = o->sched.prefix_caching};
    heap_init(&m->events);
    m->arrival.kind = EV_ARRIVAL;
    req_pool_init(&m->reqs);
    m->reps = calloc(o->num_replicas, sizeof *m->reps);
    m->scheds = calloc(o->num_replicas, sizeof *m->scheds);
    m->touched = calloc(o->num_replicas, sizeof *m->touched);
    if (drv_init(&m->drv, w, cfg) < 0 || !m->reps || !m->scheds || !m->touched) return -1;
    if (o->sched.num_speculative_tokens > 0 && o->acceptance_spread > 0 && o->acceptance_rate > 0 &&
        o->acceptance_rate < 1 && !(m->beta_rng = gsl_rng_alloc(gsl_rng_mt19937)))
        return -1;
    /* a decode instance puts its running decodes first and admits arriving KV into what is
     * left of the step (vLLM V1's order); prefill-first would spend a step on each arrival,
     * apart from the decodes, as it does for a new prompt */
    sched_config decode_side = o->sched;
    decode_side.chunked_prefill = true;
    for (int i = 0; i < o->num_replicas; i++) {
        m->reps[i].s = m->scheds[i] = sched_create(o->num_prefill > 0 && i >= o->num_prefill ? &decode_side : &o->sched);
        m->reps[i].done = (sim_event){.kind = EV_STEP_DONE, .replica = i};
        m->reps[i].wake = (sim_event){.kind = EV_WAKE, .replica = i};
        m->reps[i].last_end = -1;
        if (!m->reps[i].s) return -1;
    }
    return 0;
}

static void teardown(sim *m)
{
    /* an interrupted run may leave transfers, hand-overs and clients' ends in flight */
    for (heap_node *n; (n = heap_pop(&m->events));) {
        ev_kind k = ((sim_event *)n)->kind;
        if (k == EV_KV_ARRIVED || k == EV_ADMITTED || k == EV_CLIENT_DONE) free(n);
    }
    free(m->transfer_s.v);
    free(m->decode_wait_s.v);
    for (int i = 0; m->reps && i < m->o->num_replicas; i++) sched_free(m->reps[i].s);
    free(m->reps);
    free(m->scheds);
    free(m->touched);
    req_pool_free(&m->reqs);
    drv_free(&m->drv);
    heap_free(&m->events);
    if (m->beta_rng) gsl_rng_free(m->beta_rng);
}

int sim_run(const sim_options *o, workload *w, const wl_config *cfg, recorder *rc,
            sim_stats *stats, char *err, size_t errlen)
{
    sim m;
    int rc_code = setup(&m, o, w, cfg, rc);
    if (rc_code == 0) rc_code = loop(&m);
    if (rc_code == INTERRUPTED) snprintf(err, errlen, "interrupted");
    else if (rc_code < 0) snprintf(err, errlen, "out of memory while simulating %zu requests", w->n);
    else if (m.ended != w->n) {
        snprintf(err, errlen, "internal error: %zu of %zu requests ended", m.ended, w->n);
        rc_code = -1;
    }
    summarize_samples(&m.transfer_s, &m.stats.kv_transfer_mean_s, &m.stats.kv_transfer_p99_s);
    summarize_samples(&m.decode_wait_s, &m.stats.decode_wait_mean_s, &m.stats.decode_wait_p99_s);
    if (stats) *stats = m.stats;
    teardown(&m);
    return rc_code < 0 ? -1 : rc_code;
}
