/* A request as the scheduler sees it: its prompt, its target length and its progress.
 * The scheduler never reads a clock: every time stamped here is a "now" it was told. */
#ifndef SERVESIM_ENGINE_REQUEST_H
#define SERVESIM_ENGINE_REQUEST_H

#include <stdbool.h>
#include <stdint.h>
#include "bench/records.h"

typedef enum req_state { REQ_WAITING, REQ_RUNNING, REQ_FINISHED } req_state;

typedef struct request {
    int64_t id;
    double arrival_time;
    const int32_t *prompt;     /* prompt token ids; may be NULL when prefix caching is off */
    int prompt_len;
    int output_len;            /* target: generation always runs to exactly this many tokens */

    /* Progress. The sequence holds num_tokens = prompt_len + num_generated tokens; the KV of
     * the first num_computed is in the cache. A step that computes up to num_tokens emits the
     * next token; one that stops short is a prefill chunk. */
    int num_computed;
    int num_generated;
    req_state state;

    double scheduled_time;     /* first step that computed any of its tokens; NAN before */
    double first_token_time;
    double last_token_time;
    double finish_time;
    int num_preemptions;
    int cached_prompt_len;     /* prefix-cache hit at its first schedule, in tokens */
    stop_reason stop;
    bool warmup;               /* left out of every statistic */

    /* Scheduler-private. */
    int seq_slot;              /* row of the block manager's block tables; -1 when none */
    int num_blocks;            /* blocks in its table */
    int num_hashed_blocks;     /* leading full prompt blocks registered in the prefix cache */
    uint64_t last_hash;        /* chained hash of its last hashed block */
    int static_batch;          /* static policy: still holds a padding slot after finishing */
    void *user;                /* the executor's own per-request state */
} request;

void req_init(request *r, int64_t id, double arrival, const int32_t *prompt, int prompt_len,
              int output_len);
static inline int req_num_tokens(const request *r) { return r->prompt_len + r->num_generated; }
static inline bool req_is_finished(const request *r) { return r->state == REQ_FINISHED; }

#endif
