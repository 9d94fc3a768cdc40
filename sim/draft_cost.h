/* The price of drafting in speculative decoding with a draft model: what the draft model
 * computes for a target batch, priced by the draft model's own cost model. */
#ifndef SERVESIM_SIM_DRAFT_COST_H
#define SERVESIM_SIM_DRAFT_COST_H

#include "sim/sim.h"

typedef struct draft_cost {
    step_cost model;         /* the draft model's step price */
    double overhead;         /* the part of each price the target's step pays already */
    int k;                   /* sched.num_speculative_tokens */
    sched_item *items;       /* scratch for the batches the draft model runs */
    int cap;
} draft_cost;

/* MODEL prices the draft model's steps, of which OVERHEAD seconds each (the framework's
 * per-step work: scheduling, inputs, outputs) are the target step's own and not paid again
 * by drafting within it; K draft tokens a sequence. */
void draft_cost_init(draft_cost *d, step_cost model, double overhead, int k);
void draft_cost_free(draft_cost *d);
/* A step_cost function (CTX a draft_cost): the drafting that goes with target batch B, as the
 * engine's drafter (engine/drafter.c) runs it. The draft model keeps its own KV: one forward
 * over every token the target computes for real (prefill chunks, every decode's newest token,
 * drafting or not: speculative.disable_by_batch_size saves the verification, not this), plus
 * a verifying sequence's last draft after a full acceptance (never fed); then one-token steps
 * of the drafting sequences, up to K - 1, each a token further on. Its progress is kept in
 * each request's draft_computed (so a step is priced once, in order). A sequence's drafts are
 * priced in the step that verifies them, not the one before, where vLLM runs them: the same
 * steps, each its own tokens' price. */
double draft_cost_step_time(const void *ctx, const sched_batch *b);
step_cost draft_cost_fn(draft_cost *d);

#endif
