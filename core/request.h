/* A request as the scheduler sees it: its prompt, its target length and its progress.
 * The scheduler never reads a clock: every time stamped here is a "now" it was told. */
#ifndef SERVESIM_CORE_REQUEST_H
#define SERVESIM_CORE_REQUEST_H

#include <stdbool.h>
#include <stdint.h>
#include "metrics/records.h"
#include "workload/workload.h"

typedef enum req_state { REQ_WAITING, REQ_RUNNING, REQ_FINISHED } req_state;

typedef struct request {
    /* Fields the scheduler touches every step come first, in one cache line. */
    int num_computed;          /* KV of the first num_computed tokens is in the cache */
    int num_generated;
    int prompt_len;
    int output_len;            /* target: generation always runs to exactly this many tokens */
    req_state state;
    int num_blocks;            /* blocks in its block table (scheduler-private) */
    int seq_slot;              /* row of the block manager's block tables; -1 when none */
    bool warmup;               /* left out of every statistic */
    bool prefilling;           /* (re)admitted, its first token since not yet out */
    double last_token_time;
    double arrival_time;
    int64_t id;
    const int32_t *prompt;     /* prompt token ids; may be NULL when prefix caching is off */

    /* The sequence holds num_tokens = prompt_len + num_generated tokens. A step that computes
     * up to num_tokens emits the next token; one that stops short is a prefill chunk. */
    double scheduled_time;     /* first step that computed any of its tokens; NAN before */
    double first_token_time;
    double finish_time;
    int num_preemptions;
    bool kv_delayed;           /* once waited at the head of the queue for free KV blocks */
    int cached_prompt_len;     /* prefix-cache hit at its first schedule, in tokens */
    stop_reason stop;
    /* Disaggregated serving: a prefill instance hands the request off once it has generated
     * stop_after tokens (0: never, it runs to output_len); a decode instance admits it with
     * the KV of its first kv_transferred tokens already in place (0: none). */
    int stop_after;
    int kv_transferred;
    double handoff_time;       /* when it joined a decode instance's queue (the executor's; 0 once used) */
    /* Speculative decoding: draft tokens the executor's proposer wrote after the sequence's
     * tokens in prompt[] (the most the next step may verify); -1: any number (the simulator,
     * whose tokens are not real). */
    int num_proposed;
    int draft_computed;        /* the simulator's draft model: leading tokens it has in its own KV */
    double acceptance_rate;    /* the simulator: the chance each of its drafts is accepted */
    int draft_tokens, accepted_tokens; /* its drafts verified and kept so far */

    /* Scheduler-private. */
    int64_t first_step;        /* the first step (the scheduler's count) that may take it */
    int num_hashed_blocks;     /* leading full prompt blocks registered in the prefix cache */
    uint64_t last_hash;        /* chained hash of its last hashed block */
    void *user;                /* the executor's own per-request state */
} request;

void req_init(request *r, int64_t id, double arrival, const int32_t *prompt, int prompt_len,
              int output_len);
/* A request as the workload sent it; PROMPT holds its token ids or is NULL. */
void req_from_workload(request *r, const wl_request *wr, const int32_t *prompt);
/* The requests in flight, allocated in chunks that never move (the scheduler holds pointers)
 * and reused once ended, so an executor's memory follows the requests in flight, not the
 * length of the workload. */
typedef struct req_pool {
    request **chunks;
    size_t num_chunks, chunks_cap;
    request **free_list;       /* ended requests, ready for reuse */
    size_t num_free, free_cap;
    size_t used;               /* slots handed out of the newest chunk */
} req_pool;

void req_pool_init(req_pool *p);
/* A slot for a new request (contents undefined until req_init); NULL when out of memory. */
request *req_pool_get(req_pool *p);
/* The scheduler let go of R: its prompt buffer is freed and its slot may be handed out again. */
void req_pool_put(req_pool *p, request *r);
/* Frees the prompts of requests still in flight (an interrupted run), then every slot. */
void req_pool_free(req_pool *p);

static inline int req_num_tokens(const request *r) { return r->prompt_len + r->num_generated; }
static inline bool req_is_finished(const request *r) { return r->state == REQ_FINISHED; }

/* Speculative decoding with a draft model (the engine's drafter and the simulator's pricing
 * of it): where the draft model's next forward over R starts when the target's starts at
 * CONTEXT. Its own progress, at most a token behind (its last draft, never fed, after a full
 * acceptance); anything else (a request it never saw, or one preempted and back with
 * prefix-cache hits past where it was) starts where the target does, whose cached blocks
 * both models filled. So a draft forward holds at most a token a sequence past the target's. */
static inline int req_draft_start(const request *r, int context)
{
    int from = r->draft_computed;
    return from > context || from < context - 1 ? context : from;
}

#endif
