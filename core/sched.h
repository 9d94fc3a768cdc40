/* One scheduler for every serving policy. It takes requests and "now" and returns the next
 * batch; it never reads a clock and never touches a tensor, so the real engine and the
 * simulator run exactly this code. */
#ifndef SERVESIM_CORE_SCHED_H
#define SERVESIM_CORE_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "metrics/records.h"
#include "core/bm.h"
#include "core/request.h"

/* Every serving policy, once, as a row of the capabilities the scheduler reads (as Vidur
 * registers its schedulers): adding a policy is a row here, its tests, and any new capability.
 *   single       at most one request in flight
 *   recompute    no KV reuse: every step recomputes the whole sequence
 *   reserve_max  admission reserves max_model_len KV slots (else what the step computes)
 *   whole_batch  a batch is formed only when idle, padded to its longest prompt, and runs until
 *                its last request ends (finished members decode padding)
 *   paged        KV in blocks: prefix caching and chunked prefill can be switched on
 * X(enum, name, single, recompute, reserve_max, whole_batch, paged, what it is) */
#define SCHED_POLICIES(X) \
    X(POLICY_NAIVE, "naive", true, true, false, false, false, \
      "one request at a time, every step recomputes the whole sequence") \
    X(POLICY_KV_SINGLE, "kv_single", true, false, false, false, false, \
      "one request at a time with a KV cache") \
    X(POLICY_STATIC, "static", false, false, true, true, false, \
      "a batch formed when idle runs until its last request ends") \
    X(POLICY_CONTINUOUS, "continuous", false, false, true, false, false, \
      "iteration-level batching, max_model_len slots reserved per sequence") \
    X(POLICY_PAGED, "paged", false, false, false, false, true, \
      "iteration-level batching over paged blocks (vLLM)")

typedef enum sched_policy {
#define X(id, name, single, recompute, reserve_max, whole_batch, paged, help) id,
    SCHED_POLICIES(X)
#undef X
} sched_policy;

typedef struct sched_policy_caps {
    const char *name;
    bool single, recompute, reserve_max, whole_batch, paged;
    const char *help;
} sched_policy_caps;

/* The policies' names joined by "|", for the scenario key's list of choices. */
#define SCHED_POLICY_NAME_(id, name, single, recompute, reserve_max, whole_batch, paged, help) "|" name
#define SCHED_POLICY_CHOICES (SCHED_POLICIES(SCHED_POLICY_NAME_) + 1)

const sched_policy_caps *sched_policy_info(sched_policy p);
const char *sched_policy_name(sched_policy p);
int sched_policy_parse(const char *text, sched_policy *out);

/* The most draft tokens a step verifies per sequence. */
#define SCHED_MAX_SPECULATIVE 16

typedef struct sched_config {
    sched_policy policy;
    bool prefix_caching;        /* paged policies only */
    bool chunked_prefill;       /* paged policies only: decodes first, prefill chunks fill the budget */
    int max_num_seqs;
    int max_num_batched_tokens; /* per-step token budget, padding included */
    int chunk_size;             /* largest prefill chunk; 0 = whatever budget is left */
    int block_size;
    int num_blocks;
    int max_model_len;
    /* Speculative decoding (paged policies): each running sequence's step also verifies up to
     * this many draft tokens, which count against the token budget and take KV slots; the
     * executor says how many were accepted (sched_accept). 0 = off. */
    int num_speculative_tokens;
    /* ... but not in a step that starts with at least this many running sequences, where
     * verifying drafts costs more than it saves (vLLM's disable_by_batch_size); 0 = always. */
    int spec_disable_by_batch_size;
} sched_config;

/* Rejects settings that cannot work together; writes a one-line reason. */
int sched_config_check(const sched_config *c, char *err, size_t errlen);

typedef struct sched_item {
    request *req;
    int num_new_tokens;   /* real tokens computed: [context_len, context_len + num_new_tokens) */
    int num_pad_tokens;   /* static batching: padding computed beside them, never cached */
    int context_len;      /* tokens already in the cache before this step */
    bool emits_token;     /* reaches the end of the sequence: samples its next token */
    bool is_decode;       /* emits a generated sequence's next token (else a prefill or padding) */
    /* speculative decoding: of the num_new_tokens, the last num_draft_tokens are drafts to
     * verify; num_accepted of them (a leading run) were right, as the executor says. At most
     * SCHED_MAX_SPECULATIVE: a byte each keeps an item in 24 bytes (two ints made the
     * simulator 8% slower without speculation) */
    int8_t num_draft_tokens, num_accepted;
} sched_item;

typedef struct sched_batch {
    sched_item *items;
    int num_items;
    int num_prefill_tokens, num_prefill_seqs, num_decode_seqs;
    int num_batched_tokens, num_padding_tokens, num_outputs;
    int64_t decode_context_sum;   /* sum over one-token items of the tokens they attend to */
    int num_multi_token_items;    /* items computing more than one token (padding included) */
    int num_spec_seqs, num_draft_tokens; /* decodes verifying drafts, and their drafts */
    int num_accepted_tokens;      /* drafts accepted: known after sched_accept, counted by sched_complete */
    bool chunked;
    request **preempted;
    int num_preempted;
    int num_kv_delayed;            /* requests first held at the head of the queue for KV blocks this step */
    int64_t prefix_evictions;      /* cached prefix blocks handed out for other content this step */
    int64_t prefix_hits, prefix_queries;
} sched_batch;

typedef struct sched sched;

sched *sched_create(const sched_config *cfg);
/* About the memory a scheduler of CFG comes to hold, in bytes (its block manager's and its
 * per-sequence arrays; the requests themselves are the workload's). */
double sched_memory_bytes(const sched_config *cfg);
void sched_free(sched *s);

/* Why a request of PROMPT_LEN and OUTPUT_LEN tokens can never run under CFG (STOP_TOO_LONG,
 * STOP_KV_CAPACITY), or STOP_NONE: sched_add's rule, for a command that checks its requests
 * before it runs them. */
stop_reason sched_rejects(const sched_config *cfg, int prompt_len, int output_len);
/* R arrives at NOW. Returns false when R can never run (too long, or more KV than the pool):
 * it is then finished at NOW with its stop_reason, and the scheduler keeps nothing of it. */
bool sched_add(sched *s, request *r, double now);
/* sched_add, but the next SKIP steps formed do not take R unless they would otherwise be
 * empty: an engine that schedules ahead (vLLM's async scheduling, sim/sim.c) sees a new
 * request only after the steps it has already scheduled. R counts as waiting meanwhile. */
bool sched_add_after(sched *s, request *r, double now, int skip);
/* Picks the next batch; the batch lives until the next call. Returns its item count,
 * 0 when nothing can run. Stamps scheduled_time of requests computed for the first time. */
int sched_schedule(sched *s, double now, const sched_batch **out);
/* Speculative decoding: of item I of the last batch, ACCEPTED draft tokens (a leading run,
 * clamped to its drafts) were right. Call between sched_schedule and sched_complete; an item
 * never told accepts none (plain decoding's one token). */
void sched_accept(sched *s, int item, int accepted);
/* The last batch's tokens are done at NOW: advances progress, stamps token times, frees the
 * blocks of finished requests (and of a sequence's rejected drafts). Returns how many
 * finished; *FINISHED lists them. A request
 * with stop_after set finishes here with STOP_HANDOFF once it has that many tokens (and
 * more to come): the executor moves it on to a decode instance. */
int sched_complete(sched *s, double now, request ***finished);
/* The requests the last sched_complete let go of: finished, and no longer in any batch (a
 * static batch keeps its finished members as padding until the whole batch ends). Their
 * memory may be reused from here on. */
int sched_released(const sched *s, request ***released);
/* R's client went away. Between steps (after sched_complete, before the next schedule): R
 * ends with STOP_ABORTED and gives back its blocks; false when it had already ended. Like
 * sched_complete, it resets sched_released's list to what it let go of: R, or nothing while
 * R stays a padding member of a static batch, or the whole batch when R was its last live
 * member. */
bool sched_abort(sched *s, request *r, double now);

/* The batch of the last sched_schedule call: the step in flight. */
const sched_batch *sched_last_batch(const sched *s);
int sched_num_waiting(const sched *s);
int sched_num_running(const sched *s);
/* The running requests, in the order the scheduler serves them (valid until the next call
 * that changes the running set): an executor's proposer drafts for them between steps. */
int sched_running(const sched *s, request *const **out);
bool sched_idle(const sched *s);      /* nothing waiting, nothing running */
const bm *sched_bm(const sched *s);
/* How many leading full prompt blocks of R (not yet added) this scheduler's prefix cache
 * holds; 0 without prefix caching. Changes nothing (a router's question). */
int sched_cached_prefix_blocks(sched *s, const request *r);
/* KV blocks the waiting requests will need for what they hold now (prompt, and output so far
 * when preempted): what a KV-aware router adds to the blocks in use. */
int64_t sched_waiting_blocks(const sched *s);
/* Recounts every incrementally kept total and checks the block manager; NULL when all agree. */
const char *sched_check(const sched *s);
/* Fills the scheduling fields of a step record (times are the caller's). */
void sched_fill_step(const sched *s, const sched_batch *b, step_record *rec);

#endif
