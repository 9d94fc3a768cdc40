/* Speculative decoding's draft model in the real engine: a second, smaller model on its own
 * backend, whose KV pool mirrors the target's (same blocks, same block tables: what the
 * target's scheduler allocates holds both models' KV for the same tokens), drafting each
 * verifying sequence's tokens greedily just before the target's forward verifies them. */
#ifndef SERVESIM_ENGINE_DRAFTER_H
#define SERVESIM_ENGINE_DRAFTER_H

#include "core/sched.h"
#include "engine/runner.h"
#include "kernels/backend.h"

typedef struct drafter {
    kb_backend *kb;
    runner rn;
    sched_item *items;      /* the passes' batches */
    sched_batch batch;
} drafter;

/* Opens the draft model DRAFT on the target's kind of backend, with TARGET's pool geometry
 * and seeds, for steps scheduled under S. -2 with the reason in ERR when the backend refuses
 * it (kb_open: too large, no device), -1 when out of memory. */
int drafter_open(drafter *d, const kb_options *target, const kb_shape *draft, const sched_config *s, char *err,
                 size_t errlen);
void drafter_close(drafter *d);
/* Drafts for the scheduled batch B (its blocks in M): first one forward over every token the
 * target computes for real this step, and over the tokens of a verifying sequence the draft
 * model has not seen (request.draft_computed: its last draft, unfed, after a full acceptance),
 * whose last logits give each verifying sequence its first draft; then one-token forwards
 * for the rest, each draft written after the sequence's tokens in its buffer, where the
 * target's forward reads them. -1 on a backend failure (kb_error(d->kb)). */
int drafter_propose(drafter *d, const sched_batch *b, const bm *m);
/* After the step is complete: the draft model's KV of a sequence is good only up to what the
 * target kept (rejected drafts are redone). */
void drafter_settle(const sched_batch *b);

#endif
