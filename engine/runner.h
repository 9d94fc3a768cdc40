/* The model runner: turns the scheduler's batch into backend inputs (token ids, positions,
 * KV slots, block tables), runs the forward and samples the next tokens. */
#ifndef SERVESIM_ENGINE_RUNNER_H
#define SERVESIM_ENGINE_RUNNER_H

#include "core/sched.h"
#include "kernels/backend.h"

typedef struct runner {
    kb_backend *kb;
    int max_tokens, max_seqs, max_blocks_per_seq;
    int32_t *token_ids, *positions, *slot_mapping;
    int32_t *query_start, *context_lens, *block_tables;
    int32_t *sampled;          /* one token per backend sequence */
    int32_t *item_seq;         /* [items + 1]: each batch item's first backend sequence */
    kb_batch batch;
} runner;

/* MAX_TOKENS: the most query tokens a step can carry (the token budget, padding included). */
int runner_init(runner *rn, kb_backend *kb, int max_tokens, int max_seqs, int max_blocks_per_seq);
void runner_free(runner *rn);
/* Fills the backend batch for B. Each request's `prompt` must hold its prompt and then every
 * token generated so far (and, when it verifies drafts, the drafts after them). Static padding
 * goes before a sequence's real tokens, never cached, so the last query token of each
 * sequence is a real one. An item that verifies D drafts becomes D + 1 backend sequences of
 * one query each, at consecutive positions over the same block table: the backend gives
 * logits, and a sample, for each position, computed exactly as D + 1 plain decodes would be
 * (each token's KV is written before any attention reads it). item_seq maps items to them;
 * MAX_SEQS in runner_init counts backend sequences. */
void runner_prepare(runner *rn, const sched_batch *b, const bm *m);
int runner_forward(runner *rn, kb_timing *t);
/* Samples one token per backend sequence into rn->sampled. */
int runner_sample(runner *rn, const kb_sampling *p, kb_timing *t);

#endif
