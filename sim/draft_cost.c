/* Drafting priced as the draft model's own steps (sim/draft_cost.h). */
#include "sim/draft_cost.h"

#include <stdlib.h>

void draft_cost_init(draft_cost *d, step_cost model, double overhead, int k)
{
    *d = (draft_cost){.model = model, .overhead = overhead, .k = k};
}

/* One forward of the draft model over S: its kernels, without the framework's step. */
static double forward(const draft_cost *d, const sched_batch *s)
{
    double t = d->model.step_time(d->model.ctx, s) - d->overhead;
    return t > 0 ? t : 0;
}

void draft_cost_free(draft_cost *d)
{
    free(d->items);
    d->items = NULL;
    d->cap = 0;
}

static void add(sched_batch *s, const sched_item *it, int n, int context)
{
    sched_item *o = &s->items[s->num_items++];
    *o = *it;
    o->num_new_tokens = n;
    o->num_pad_tokens = 0;
    o->num_draft_tokens = o->num_accepted = 0;
    o->context_len = context;
    s->num_batched_tokens += n;
    if (n == 1) {
        s->decode_context_sum += context + 1;
        s->num_decode_seqs += it->is_decode;
    } else {
        s->num_multi_token_items++;
        s->num_prefill_seqs++;
        s->num_prefill_tokens += n;
    }
    s->num_outputs += o->emits_token;
}

double draft_cost_step_time(const void *ctx, const sched_batch *b)
{
    draft_cost *d = (draft_cost *)ctx;
    if (d->k == 0) return 0;
    if (d->cap < b->num_items) {
        sched_item *grown = realloc(d->items, (size_t)b->num_items * sizeof *grown);
        if (!grown) abort(); /* a few hundred bytes a sequence: never in practice */
        d->items = grown;
        d->cap = b->num_items;
    }
    /* first pass, as the engine's drafter runs it (engine/drafter.c): every token the target
     * computes for real, and a verifying sequence's last draft when the target kept them all
     * (the draft model never fed it); the draft model's own progress is kept on the request */
    sched_batch s = {.items = d->items};
    for (int i = 0; i < b->num_items; i++) {
        const sched_item *it = &b->items[i];
        request *r = it->req;
        int real = it->num_new_tokens - it->num_draft_tokens, end = it->context_len + real;
        int from = req_draft_start(r, it->context_len);
        if (real > 0) add(&s, it, end - from, from);
        /* a drafting sequence feeds its own first k - 1 drafts; what the target rejects of
         * them the next step's clamp above redoes */
        r->draft_computed = it->num_draft_tokens > 0 ? it->context_len + it->num_draft_tokens : end;
    }
    double t = s.num_items > 0 ? forward(d, &s) : 0;
    /* then one token at a time for the sequences that draft */
    for (int j = 1; j < d->k; j++) {
        s = (sched_batch){.items = d->items};
        for (int i = 0; i < b->num_items; i++) {
            const sched_item *it = &b->items[i];
            if (it->num_draft_tokens > j) add(&s, it, 1, it->context_len + j);
        }
        if (s.num_items > 0) t += forward(d, &s);
    }
    return t;
}

step_cost draft_cost_fn(draft_cost *d)
{
    return (step_cost){.step_time = draft_cost_step_time, .ctx = d};
}
