#include "core/sched.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Waiting requests: a ring buffer, FCFS at the back, preempted ones back in at the front. */
typedef struct req_deque {
    request **buf;
    size_t cap, head, len;
} req_deque;

struct sched {
    sched_config cfg;
    const sched_policy_caps *policy;
    int max_seqs;            /* 1 for the single-request policies */
    bm *bm;
    req_deque waiting;
    request **running;       /* sorted by (arrival_time, id): the tail is preempted first */
    int num_running;
    int num_static_done;     /* static: finished requests still holding a padding slot */
    int num_prefilling;      /* running requests whose prefill (or recompute) is not done */
    int64_t computed_tokens; /* sum of num_computed over running requests */
    bool static_active;
    sched_batch batch;
    request **finished;
    request **released;      /* finished requests the scheduler no longer refers to */
    int num_released;
    int64_t waiting_blocks;  /* KV blocks the waiting requests need for what they hold */
    int64_t steps_formed;    /* batches formed with any item: the index of the next one */
};

static const sched_policy_caps policies[] = {
#define X(id, name, single, recompute, reserve_max, whole_batch, paged, help) \
    [id] = {name, single, recompute, reserve_max, whole_batch, paged, help},
    SCHED_POLICIES(X)
#undef X
};

const sched_policy_caps *sched_policy_info(sched_policy p) { return &policies[p]; }
const char *sched_policy_name(sched_policy p) { return policies[p].name; }

int sched_policy_parse(const char *text, sched_policy *out)
{
    for (int i = 0; i < (int)(sizeof policies / sizeof policies[0]); i++)
        if (strcmp(text, policies[i].name) == 0) {
            *out = (sched_policy)i;
            return 0;
        }
    return -1;
}

int sched_config_check(const sched_config *c, char *err, size_t errlen)
{
    const struct { const char *name; int v; } positive[] = {
        {"kv.block_size", c->block_size}, {"kv.num_blocks", c->num_blocks},
        {"scheduler.max_model_len", c->max_model_len}, {"scheduler.max_num_seqs", c->max_num_seqs},
        {"scheduler.max_num_batched_tokens", c->max_num_batched_tokens},
    };
    for (size_t i = 0; i < sizeof positive / sizeof positive[0]; i++)
        if (positive[i].v <= 0) {
            snprintf(err, errlen, "%s must be positive (got %d)", positive[i].name, positive[i].v);
            return -1;
        }
    if (c->chunk_size < 0) {
        snprintf(err, errlen, "scheduler.chunk_size must be 0 or positive (got %d)", c->chunk_size);
        return -1;
    }
    if ((c->prefix_caching || c->chunked_prefill) && !sched_policy_info(c->policy)->paged) {
        snprintf(err, errlen, "scheduler.%s needs a paged policy such as scheduler.policy = paged (got %s)",
                 c->prefix_caching ? "prefix_caching" : "chunked_prefill", sched_policy_name(c->policy));
        return -1;
    }
    if (!c->chunked_prefill && c->max_num_batched_tokens < c->max_model_len) {
        snprintf(err, errlen,
                 "scheduler.max_num_batched_tokens (%d) is smaller than scheduler.max_model_len (%d): "
                 "a long prompt could never be scheduled; raise it or set chunked_prefill = on",
                 c->max_num_batched_tokens, c->max_model_len);
        return -1;
    }
    /* every policy can put max_num_seqs one-token decodes in a step */
    if (c->max_num_batched_tokens < c->max_num_seqs) {
        snprintf(err, errlen,
                 "scheduler.max_num_batched_tokens (%d) must be at least scheduler.max_num_seqs (%d)",
                 c->max_num_batched_tokens, c->max_num_seqs);
        return -1;
    }
    if (c->num_speculative_tokens < 0 || c->num_speculative_tokens > SCHED_MAX_SPECULATIVE) {
        snprintf(err, errlen, "speculative.num_tokens must be in [0, %d] (got %d)", SCHED_MAX_SPECULATIVE,
                 c->num_speculative_tokens);
        return -1;
    }
    if (c->num_speculative_tokens > 0 && !sched_policy_info(c->policy)->paged) {
        snprintf(err, errlen, "speculative.num_tokens needs scheduler.policy = paged (got %s)", sched_policy_name(c->policy));
        return -1;
    }
    if (sched_policy_info(c->policy)->reserve_max && bm_blocks_for(c->max_model_len, c->block_size) > c->num_blocks) {
        snprintf(err, errlen,
                 "policy %s reserves max_model_len (%d) slots per sequence, but the KV pool holds "
                 "only %d blocks x %d slots",
                 sched_policy_name(c->policy), c->max_model_len, c->num_blocks, c->block_size);
        return -1;
    }
    return 0;
}

/* ---- waiting queue ---- */

/* The I-th waiting request from the front. */
static request **deque_at(const req_deque *q, size_t i) { return &q->buf[(q->head + i) % q->cap]; }

static bool deque_grow(req_deque *q)
{
    size_t cap = q->cap ? 2 * q->cap : 64;
    request **buf = malloc(cap * sizeof *buf);
    if (!buf) return false;
    for (size_t i = 0; i < q->len; i++) buf[i] = *deque_at(q, i);
    free(q->buf);
    q->buf = buf;
    q->cap = cap;
    q->head = 0;
    return true;
}

static bool deque_push_back(req_deque *q, request *r)
{
    if (q->len == q->cap && !deque_grow(q)) return false;
    q->buf[(q->head + q->len++) % q->cap] = r;
    return true;
}

/* Cannot fail: a preempted request left the running set, which is bounded by max_seqs, and
 * sched_create reserved that much room. */
static void deque_push_front(req_deque *q, request *r)
{
    q->head = (q->head + q->cap - 1) % q->cap;
    q->buf[q->head] = r;
    q->len++;
}

static request *deque_front(const req_deque *q) { return q->buf[q->head]; }


static void deque_pop_front(req_deque *q)
{
    q->head = (q->head + 1) % q->cap;
    q->len--;
}

/* ---- lifecycle ---- */

static int max_seqs_of(const sched_config *cfg)
{
    return sched_policy_info(cfg->policy)->single ? 1 : cfg->max_num_seqs;
}

static bm_config bm_config_of(const sched_config *cfg)
{
    int per_seq = bm_blocks_for(cfg->max_model_len, cfg->block_size);
    return (bm_config){
        .num_blocks = cfg->num_blocks,
        .block_size = cfg->block_size,
        .max_seqs = max_seqs_of(cfg),
        .max_blocks_per_seq = per_seq < cfg->num_blocks ? per_seq : cfg->num_blocks,
        .prefix_caching = cfg->prefix_caching,
    };
}

double sched_memory_bytes(const sched_config *cfg)
{
    bm_config bc = bm_config_of(cfg);
    /* running, finished, released, the batch's items and preempted, and the waiting queue */
    double per_seq = 4 * sizeof(request *) + sizeof(sched_item) + 2 * sizeof(request *);
    return sizeof(sched) + bm_memory_bytes(&bc) + (double)bc.max_seqs * per_seq;
}

sched *sched_create(const sched_config *cfg)
{
    sched *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->cfg = *cfg;
    s->policy = sched_policy_info(cfg->policy);
    s->max_seqs = max_seqs_of(cfg);
    bm_config bc = bm_config_of(cfg);
    s->bm = bm_create(&bc);
    s->running = malloc(s->max_seqs * sizeof *s->running);
    s->finished = malloc(s->max_seqs * sizeof *s->finished);
    s->released = malloc(s->max_seqs * sizeof *s->released);
    s->batch.items = malloc(s->max_seqs * sizeof *s->batch.items);
    s->batch.preempted = malloc(s->max_seqs * sizeof *s->batch.preempted);
    bool ok = s->bm && s->running && s->finished && s->released && s->batch.items && s->batch.preempted;
    while (ok && s->waiting.cap < (size_t)s->max_seqs + 1) ok = deque_grow(&s->waiting);
    if (!ok) {
        sched_free(s);
        return NULL;
    }
    return s;
}

void sched_free(sched *s)
{
    if (!s) return;
    bm_free(s->bm);
    free(s->waiting.buf);
    free(s->running);
    free(s->finished);
    free(s->released);
    free(s->batch.items);
    free(s->batch.preempted);
    free(s);
}

static void end_request(request *r, double now, stop_reason why)
{
    r->state = REQ_FINISHED;
    r->finish_time = now;
    r->stop = why;
}

/* What a waiting request will take when admitted, for what it holds now; constant while it
 * waits (only running requests generate). */
static int64_t waiting_need(const sched *s, const request *r)
{
    return bm_blocks_for(req_num_tokens(r), s->cfg.block_size);
}

stop_reason sched_rejects(const sched_config *c, int prompt_len, int output_len)
{
    if (prompt_len + output_len > c->max_model_len) return STOP_TOO_LONG;
    /* its KV: the prompt and every output token but the last (whose KV is never needed) */
    if (bm_blocks_for(prompt_len + output_len - 1, c->block_size) > c->num_blocks) return STOP_KV_CAPACITY;
    return STOP_NONE;
}

bool sched_add_after(sched *s, request *r, double now, int skip)
{
    stop_reason why = sched_rejects(&s->cfg, r->prompt_len, r->output_len);
    if (why != STOP_NONE) {
        end_request(r, now, why);
        return false;
    }
    /* Keep room for every running request to be preempted back to the front. */
    if (s->waiting.len + s->max_seqs + 1 > s->waiting.cap && !deque_grow(&s->waiting)) return false;
    r->state = REQ_WAITING;
    r->num_computed = 0; /* no KV of it here yet (a handed-off request's arrives as kv_transferred) */
    r->first_step = s->steps_formed + (skip > 0 ? skip : 0);
    deque_push_back(&s->waiting, r);
    s->waiting_blocks += waiting_need(s, r);
    return true;
}

bool sched_add(sched *s, request *r, double now)
{
    return sched_add_after(s, r, now, 0);
}

/* Whether the step being formed may take waiting request R (sched_add_after). Requests come
 * in order, so one that may not be taken has none that may behind it. */
static bool may_take(const sched *s, const request *r)
{
    return r->first_step <= s->steps_formed;
}

/* With nothing to run, an engine takes the requests it holds back at once: their holds end.
 * Returns whether any was held. */
static bool end_holds(sched *s)
{
    bool any = false;
    for (size_t i = 0; i < s->waiting.len; i++) {
        request *r = *deque_at(&s->waiting, i);
        if (!may_take(s, r)) {
            r->first_step = s->steps_formed;
            any = true;
        }
    }
    return any;
}

/* ---- running set ---- */

static void set_computed(sched *s, request *r, int tokens)
{
    s->computed_tokens += tokens - r->num_computed;
    r->num_computed = tokens;
}

static void set_prefilling(sched *s, request *r, bool on)
{
    s->num_prefilling += (int)on - (int)r->prefilling;
    r->prefilling = on;
}

static bool runs_before(const request *a, const request *b)
{
    return a->arrival_time < b->arrival_time || (a->arrival_time == b->arrival_time && a->id < b->id);
}

static void running_insert(sched *s, request *r)
{
    int i = s->num_running;
    while (i > 0 && runs_before(r, s->running[i - 1])) {
        s->running[i] = s->running[i - 1];
        i--;
    }
    s->running[i] = r;
    s->num_running++;
    r->state = REQ_RUNNING;
}

/* Recompute preemption of the latest-arrived running request. */
static request *preempt_last(sched *s)
{
    request *v = s->running[--s->num_running];
    bm_release(s->bm, v);
    set_computed(s, v, 0);
    v->kv_transferred = 0; /* its transferred KV is gone with its blocks: recomputed here */
    set_prefilling(s, v, false);
    v->num_preemptions++;
    v->state = REQ_WAITING;
    deque_push_front(&s->waiting, v);
    s->waiting_blocks += waiting_need(s, v);
    s->batch.preempted[s->batch.num_preempted++] = v;
    return v;
}

/* ---- batch building ---- */

static void batch_reset(sched_batch *b)
{
    sched_item *items = b->items;
    request **preempted = b->preempted;
    memset(b, 0, sizeof *b);
    b->items = items;
    b->preempted = preempted;
}

/* N tokens of R (and PAD padding tokens) in the batch. */
static inline void add_item(sched *s, request *r, int n, int pad, double now)
{
    sched_batch *b = &s->batch;
    sched_item *it = &b->items[b->num_items++];
    it->req = r;
    it->num_new_tokens = n;
    it->num_pad_tokens = pad;
    it->context_len = r->num_computed;
    it->num_draft_tokens = 0;
    it->num_accepted = 0;
    it->emits_token = n > 0 && r->num_computed + n == req_num_tokens(r);
    it->is_decode = it->emits_token && r->num_generated > 0 && (n == 1 || s->policy->recompute);
    if (it->is_decode) {
        b->num_decode_seqs++;
    } else if (n > 0) {
        b->num_prefill_seqs++;
        b->num_prefill_tokens += n;
        b->chunked |= !it->emits_token;
    }
    if (n + pad == 1) b->decode_context_sum += r->num_computed + 1;
    else b->num_multi_token_items++;
    b->num_batched_tokens += n + pad;
    b->num_padding_tokens += pad;
    b->num_outputs += it->emits_token;
    if (n > 0 && isnan(r->scheduled_time)) r->scheduled_time = now;
}

/* Running decode R's newest token and DRAFT draft tokens after it, to verify: a decode that
 * prices as a chunk of 1 + DRAFT tokens. Kept apart from add_item, whose few instructions
 * run for every sequence of every step. */
static void add_verification(sched *s, request *r, int draft)
{
    sched_batch *b = &s->batch;
    sched_item *it = &b->items[b->num_items++];
    *it = (sched_item){.req = r, .num_new_tokens = 1 + draft, .context_len = r->num_computed,
                       .num_draft_tokens = (int8_t)draft, .emits_token = true, .is_decode = true};
    b->num_spec_seqs++;
    b->num_draft_tokens += draft;
    b->num_decode_seqs++;
    b->num_multi_token_items++;
    b->num_batched_tokens += 1 + draft;
    b->num_outputs++;
}

_Static_assert(SCHED_MAX_SPECULATIVE <= INT8_MAX, "sched_item keeps draft counts in a byte");

/* Draft tokens running decode R may verify this step with BUDGET tokens left (its own one
 * included): up to num_speculative_tokens, never past the tokens it has left to generate (or
 * to hand off), so a step never computes a token no one will read. */
static int draft_tokens(const sched *s, const request *r, int budget)
{
    int k = s->cfg.num_speculative_tokens;
    if (k == 0 || r->num_generated == 0 || req_num_tokens(r) - r->num_computed != 1) return 0;
    if (s->cfg.spec_disable_by_batch_size > 0 && s->num_running >= s->cfg.spec_disable_by_batch_size) return 0;
    int target = r->stop_after > 0 && r->stop_after < r->output_len ? r->stop_after : r->output_len;
    int left = target - r->num_generated - 1;
    if (k > left) k = left;
    if (r->num_proposed >= 0 && k > r->num_proposed) k = r->num_proposed;
    if (k > budget - 1) k = budget - 1;
    return k > 0 ? k : 0;
}

static int prefill_chunk(const sched *s, int remaining, int budget)
{
    if (remaining == 1) return budget > 0; /* a decode */
    int n = remaining;
    if (s->cfg.chunk_size > 0 && n > s->cfg.chunk_size) n = s->cfg.chunk_size;
    return n < budget ? n : budget;
}

/* Tries to start the request at the head of the waiting queue with at most BUDGET tokens.
 * Returns the tokens it will compute this step, or 0 when it cannot start now. */
static int admit_head(sched *s, int budget, double now)
{
    request *r = deque_front(&s->waiting);
    int bs = s->cfg.block_size;
    int hits = bm_count_hits(s->bm, r);
    /* KV that came from a prefill instance counts as computed (the prefix cache's share of it
     * as shared blocks) */
    int cached = hits * bs > r->kv_transferred ? hits * bs : r->kv_transferred;
    int remaining = req_num_tokens(r) - cached;
    int n = s->cfg.chunked_prefill ? prefill_chunk(s, remaining, budget) : remaining;
    if (n <= 0 || n > budget || !bm_seq_open(s->bm, r)) return 0;
    int reserve = s->policy->reserve_max ? s->cfg.max_model_len : cached + n;
    if (!bm_allocate(s->bm, r, hits, reserve)) {
        bm_release(s->bm, r);
        if (!r->kv_delayed) { /* the budget and a sequence slot were there; the blocks were not */
            r->kv_delayed = true;
            s->batch.num_kv_delayed++;
        }
        return 0;
    }
    if (r->kv_transferred == 0) { /* a handed-off request's prefill was counted where it ran */
        if (r->num_preemptions == 0) r->cached_prompt_len = cached;
        s->batch.prefix_queries += req_num_tokens(r);
        s->batch.prefix_hits += cached;
    }
    set_computed(s, r, cached);
    set_prefilling(s, r, r->kv_transferred == 0);
    deque_pop_front(&s->waiting);
    s->waiting_blocks -= waiting_need(s, r);
    running_insert(s, r);
    add_item(s, r, n, 0, now);
    return n;
}

static int admit_waiting(sched *s, int budget, double now)
{
    while (budget > 0 && s->waiting.len > 0 && s->num_running < s->max_seqs && may_take(s, deque_front(&s->waiting))) {
        int n = admit_head(s, budget, now);
        if (n == 0) break;
        budget -= n;
    }
    return budget;
}

/* Gives running request I its next N tokens, preempting from the tail when blocks run out.
 * Returns false when I itself was preempted. */
static inline bool grow_or_preempt(sched *s, int i, int n)
{
    request *r = s->running[i];
    while (!bm_allocate(s->bm, r, 0, r->num_computed + n))
        if (preempt_last(s) == r) return false;
    return true;
}

/* vLLM's classic order: new prefills first, as a prefill-only step; otherwise every running
 * sequence decodes one token. Also runs naive, kv_single and continuous. */
static void schedule_prefill_first(sched *s, double now)
{
    admit_waiting(s, s->cfg.max_num_batched_tokens, now);
    if (s->batch.num_items > 0) return;
    int budget = s->cfg.max_num_batched_tokens;
    for (int i = 0; i < s->num_running; i++) {
        request *r = s->running[i];
        if (s->policy->recompute) set_computed(s, r, 0);
        /* drafts only from what leaves every later sequence its one token */
        int draft = s->cfg.num_speculative_tokens == 0 || s->policy->recompute
                        ? 0 : draft_tokens(s, r, budget - (s->num_running - i - 1));
        int n = req_num_tokens(r) - r->num_computed + draft;
        if (!grow_or_preempt(s, i, n)) break;
        if (draft > 0) add_verification(s, r, draft);
        else add_item(s, r, n, 0, now);
        budget -= n;
    }
}

/* Sarathi-style stall-free batching: running sequences (decodes and unfinished prefills)
 * first, then new prefill chunks fill what is left of the token budget. */
/* The running sequences' share of a decode-first step; returns the budget left. SPEC is a
 * constant at each call: the compiler builds a copy without drafting for the runs that do
 * not speculate (the per-sequence checks cost the simulator 10% of its speed). */
static inline __attribute__((always_inline)) int schedule_running(sched *s, double now, bool spec)
{
    int budget = s->cfg.max_num_batched_tokens;
    for (int i = 0; i < s->num_running && budget > 0; i++) {
        request *r = s->running[i];
        int draft = spec ? draft_tokens(s, r, budget - (s->num_running - i - 1)) : 0;
        int n = prefill_chunk(s, req_num_tokens(r) - r->num_computed, budget) + draft;
        if (!grow_or_preempt(s, i, n)) break;
        if (draft > 0) add_verification(s, r, draft);
        else add_item(s, r, n, 0, now);
        budget -= n;
    }
    return budget;
}

static void schedule_decode_first(sched *s, double now)
{
    int budget = s->cfg.num_speculative_tokens > 0 ? schedule_running(s, now, true) : schedule_running(s, now, false);
    if (s->batch.num_preempted == 0) admit_waiting(s, budget, now);
}

/* A static batch is formed only when the last one has ended: prompts padded to the longest,
 * then every member decodes (finished ones as padding) until the longest output ends. */
static void form_static_batch(sched *s, double now)
{
    int longest = 0, count = 0;
    while (s->waiting.len > 0 && count < s->max_seqs && may_take(s, deque_front(&s->waiting))) {
        request *r = deque_front(&s->waiting);
        int len = req_num_tokens(r);
        int next_longest = len > longest ? len : longest;
        /* 64-bit: 65536 sequences of 16M tokens overflowed an int and passed the check */
        if ((int64_t)(count + 1) * next_longest > s->cfg.max_num_batched_tokens) break;
        if (!bm_seq_open(s->bm, r)) break;
        if (!bm_allocate(s->bm, r, 0, s->cfg.max_model_len)) {
            bm_release(s->bm, r);
            if (!r->kv_delayed) {
                r->kv_delayed = true;
                s->batch.num_kv_delayed++;
            }
            break;
        }
        deque_pop_front(&s->waiting);
        s->waiting_blocks -= waiting_need(s, r);
        running_insert(s, r);
        set_prefilling(s, r, true);
        longest = next_longest;
        count++;
    }
    s->static_active = count > 0;
    s->num_static_done = 0;
    for (int i = 0; i < s->num_running; i++) {
        request *r = s->running[i];
        add_item(s, r, req_num_tokens(r), longest - req_num_tokens(r), now);
    }
}

static void schedule_static(sched *s, double now)
{
    if (!s->static_active) {
        form_static_batch(s, now);
        return;
    }
    for (int i = 0; i < s->num_running; i++) {
        request *r = s->running[i];
        if (req_is_finished(r)) add_item(s, r, 0, 1, now);
        else add_item(s, r, 1, 0, now);
    }
}

static void form_batch(sched *s, double now)
{
    batch_reset(&s->batch);
    if (s->policy->whole_batch) schedule_static(s, now);
    else if (s->cfg.chunked_prefill) schedule_decode_first(s, now);
    else schedule_prefill_first(s, now);
}

int sched_schedule(sched *s, double now, const sched_batch **out)
{
    int64_t evicted = bm_evictions(s->bm);
    form_batch(s, now);
    if (s->batch.num_items == 0 && s->waiting.len > 0 && end_holds(s)) form_batch(s, now);
    s->batch.prefix_evictions = bm_evictions(s->bm) - evicted;
    if (s->batch.num_items > 0) s->steps_formed++;
    *out = &s->batch;
    return s->batch.num_items;
}

/* ---- completion ---- */

static void end_static_batch(sched *s)
{
    for (int i = 0; i < s->num_running; i++) {
        s->computed_tokens -= s->running[i]->num_computed;
        bm_release(s->bm, s->running[i]);
        s->released[s->num_released++] = s->running[i];
    }
    s->num_running = 0;
    s->num_static_done = 0;
    s->static_active = false;
}

void sched_accept(sched *s, int item, int accepted)
{
    if (item < 0 || item >= s->batch.num_items) return;
    sched_item *it = &s->batch.items[item];
    it->num_accepted = accepted < 0 ? 0 : accepted > it->num_draft_tokens ? it->num_draft_tokens : accepted;
}

/* sched_complete's pass over the batch; SPEC constant at each call, as in schedule_running. */
static inline __attribute__((always_inline)) int complete_items(sched *s, double now, bool spec)
{
    int num_finished = 0;
    sched_batch *b = &s->batch;
    for (int k = 0; k < b->num_items; k++) {
        const sched_item *it = &b->items[k];
        request *r = it->req;
        r->num_computed += it->num_new_tokens;
        if (spec && it->num_draft_tokens > 0) {
            /* the rejected drafts' KV is discarded, and blocks that held only them freed; the
             * accepted ones are tokens of the sequence, and the token the verification
             * sampled after them is its next one */
            int rejected = it->num_draft_tokens - it->num_accepted;
            r->num_computed -= rejected;
            s->computed_tokens -= rejected;
            r->num_generated += it->num_accepted;
            r->draft_tokens += it->num_draft_tokens;
            r->accepted_tokens += it->num_accepted;
            b->num_accepted_tokens += it->num_accepted;
            bm_truncate(s->bm, r, r->num_computed + 1);
        }
        if (!it->emits_token) continue;
        if (r->prefilling) set_prefilling(s, r, false);
        if (r->num_generated++ == 0) r->first_token_time = now;
        r->last_token_time = now;
        bool handoff = r->stop_after > 0 && r->num_generated >= r->stop_after && r->num_generated < r->output_len;
        if (r->num_generated < r->output_len && !handoff) continue;
        end_request(r, now, handoff ? STOP_HANDOFF : STOP_LENGTH);
        s->finished[num_finished++] = r;
        if (s->policy->whole_batch) {
            s->num_static_done++;
        } else {
            s->computed_tokens -= r->num_computed;
            bm_release(s->bm, r);
            s->released[s->num_released++] = r;
        }
    }
    return num_finished;
}

int sched_complete(sched *s, double now, request ***finished)
{
    sched_batch *b = &s->batch;
    s->num_released = 0;
    s->computed_tokens += b->num_batched_tokens - b->num_padding_tokens;
    b->num_accepted_tokens = 0;
    int num_finished = b->num_spec_seqs > 0 ? complete_items(s, now, true) : complete_items(s, now, false);
    if (s->policy->whole_batch) {
        if (s->static_active && s->num_static_done == s->num_running) end_static_batch(s);
    } else if (num_finished > 0) {
        int kept = 0;
        for (int i = 0; i < s->num_running; i++)
            if (!req_is_finished(s->running[i])) s->running[kept++] = s->running[i];
        s->num_running = kept;
    }
    *finished = s->finished;
    return num_finished;
}

/* ---- observation ---- */

bool sched_abort(sched *s, request *r, double now)
{
    s->num_released = 0;
    if (req_is_finished(r)) return false;
    if (r->state == REQ_WAITING) {
        size_t kept = 0;
        for (size_t i = 0; i < s->waiting.len; i++) {
            request *q = *deque_at(&s->waiting, i);
            if (q != r) *deque_at(&s->waiting, kept++) = q;
        }
        s->waiting.len = kept;
        s->waiting_blocks -= waiting_need(s, r);
        end_request(r, now, STOP_ABORTED);
        s->released[s->num_released++] = r;
        return true;
    }
    end_request(r, now, STOP_ABORTED);
    set_prefilling(s, r, false);
    if (s->policy->whole_batch) {
        /* it stays a padding member until the batch ends, like one that finished */
        if (++s->num_static_done == s->num_running) end_static_batch(s);
        return true;
    }
    int kept = 0;
    for (int i = 0; i < s->num_running; i++)
        if (s->running[i] != r) s->running[kept++] = s->running[i];
    s->num_running = kept;
    s->computed_tokens -= r->num_computed;
    bm_release(s->bm, r);
    s->released[s->num_released++] = r;
    return true;
}

int sched_cached_prefix_blocks(sched *s, const request *r)
{
    return s->cfg.prefix_caching && r->prompt ? bm_count_hits(s->bm, r) : 0;
}

int64_t sched_waiting_blocks(const sched *s) { return s->waiting_blocks; }

int sched_released(const sched *s, request ***released)
{
    *released = s->released;
    return s->num_released;
}

int sched_running(const sched *s, request *const **out)
{
    *out = s->running;
    return s->num_running;
}

const sched_batch *sched_last_batch(const sched *s) { return &s->batch; }
int sched_num_waiting(const sched *s) { return (int)s->waiting.len; }
int sched_num_running(const sched *s) { return s->num_running - s->num_static_done; }
bool sched_idle(const sched *s) { return s->waiting.len == 0 && s->num_running == 0; }
const bm *sched_bm(const sched *s) { return s->bm; }

void sched_fill_step(const sched *s, const sched_batch *b, step_record *rec)
{
    rec->num_prefill_tokens = b->num_prefill_tokens;
    rec->num_prefill_seqs = b->num_prefill_seqs;
    rec->num_decode_seqs = b->num_decode_seqs;
    rec->num_outputs = b->num_outputs;
    rec->num_batched_tokens = b->num_batched_tokens;
    rec->num_padding_tokens = b->num_padding_tokens;
    rec->chunked = b->chunked;
    rec->num_preempted = b->num_preempted;
    rec->num_kv_delayed = b->num_kv_delayed;
    rec->num_spec_seqs = b->num_spec_seqs;
    rec->num_draft_tokens = b->num_draft_tokens;
    rec->num_accepted_tokens = b->num_accepted_tokens;
    rec->prefix_evictions = b->prefix_evictions;
    rec->prefix_hits = b->prefix_hits;
    rec->prefix_queries = b->prefix_queries;
    rec->num_free_blocks = bm_num_free(s->bm);
    rec->num_prefix_cached_blocks = bm_num_cached(s->bm);
    rec->waiting = sched_num_waiting(s);
    rec->running = sched_num_running(s);
    int64_t allocated = bm_table_entries(s->bm) * s->cfg.block_size;
    int64_t used = s->computed_tokens + b->num_batched_tokens - b->num_padding_tokens;
    rec->prefilling = s->num_prefilling;
    rec->kv_allocated_slots = allocated;
    rec->kv_unused_slots = allocated - used;
}

const char *sched_check(const sched *s)
{
    int64_t computed = 0;
    int prefilling = 0;
    for (int i = 0; i < s->num_running; i++) {
        computed += s->running[i]->num_computed;
        prefilling += s->running[i]->prefilling;
        if (i > 0 && runs_before(s->running[i], s->running[i - 1])) return "running set is out of order";
    }
    if (computed != s->computed_tokens) return "computed token count differs from the running set";
    int64_t waiting = 0;
    for (size_t i = 0; i < s->waiting.len; i++) waiting += waiting_need(s, *deque_at(&s->waiting, i));
    if (waiting != s->waiting_blocks) return "waiting block count differs from the queue";
    if (prefilling != s->num_prefilling) return "prefilling count differs from the running set";
    if (s->num_running > s->max_seqs) return "more running requests than max_num_seqs";
    return bm_check(s->bm);
}
