/* The draft model's forwards for speculative decoding (engine/drafter.h). */
#include "engine/drafter.h"

#include <stdlib.h>
#include <string.h>

int drafter_open(drafter *d, const kb_options *target, const kb_shape *draft, const sched_config *s, char *err,
                 size_t errlen)
{
    memset(d, 0, sizeof *d);
    kb_options o = *target;
    o.shape = *draft;
    /* a sequence's catch-up adds at most one token to the target's real ones (its unfed
     * last draft), so a pass holds the budget plus a token a sequence */
    o.max_num_seqs = s->max_num_seqs;
    o.max_num_tokens = s->max_num_batched_tokens + s->max_num_seqs;
    d->kb = kb_open(&o, err, errlen);
    if (!d->kb) return -2;
    d->items = malloc((size_t)s->max_num_seqs * sizeof *d->items);
    if (!d->items || runner_init(&d->rn, d->kb, o.max_num_tokens, o.max_num_seqs, o.max_blocks_per_seq) < 0) {
        snprintf(err, errlen, "out of memory for the draft model's runner");
        drafter_close(d);
        return -1;
    }
    return 0;
}

void drafter_close(drafter *d)
{
    if (d->kb) runner_free(&d->rn);
    kb_close(d->kb);
    free(d->items);
    memset(d, 0, sizeof *d);
}

static void add(drafter *d, const sched_item *it, int from, int n)
{
    sched_item *o = &d->items[d->batch.num_items++];
    *o = *it;
    o->context_len = from;
    o->num_new_tokens = n;
    o->num_pad_tokens = 0;
    o->num_draft_tokens = 0;
    d->batch.num_batched_tokens += n;
}

static int forward(drafter *d, const bm *m)
{
    static const kb_sampling greedy = {.temperature = 0, .top_k = 0, .top_p = 1};
    runner_prepare(&d->rn, &d->batch, m);
    return runner_forward(&d->rn, NULL) != 0 || runner_sample(&d->rn, &greedy, NULL) != 0 ? -1 : 0;
}

int drafter_propose(drafter *d, const sched_batch *b, const bm *m)
{
    int most = 0;
    d->batch = (sched_batch){.items = d->items};
    for (int i = 0; i < b->num_items; i++) {
        const sched_item *it = &b->items[i];
        request *r = it->req;
        int real = it->num_new_tokens - it->num_draft_tokens, end = it->context_len + real;
        int from = req_draft_start(r, it->context_len);
        if (real > 0) add(d, it, from, end - from);
        r->draft_computed = end;
        if (it->num_draft_tokens > most) most = it->num_draft_tokens;
    }
    if (d->batch.num_items == 0) return 0; /* a verifying sequence always has its newest token */
    if (forward(d, m) < 0) return -1;
    /* the first pass's last logits of each verifying sequence: its first draft */
    for (int i = 0, at = 0; i < b->num_items; i++) {
        const sched_item *it = &b->items[i];
        if (it->num_new_tokens - it->num_draft_tokens <= 0) continue;
        int32_t *tokens = (int32_t *)it->req->prompt;
        if (it->num_draft_tokens > 0) tokens[it->context_len + 1] = d->rn.sampled[at];
        at++;
    }
    for (int j = 1; j < most; j++) { /* draft j feeds in, draft j + 1 comes out */
        d->batch = (sched_batch){.items = d->items};
        for (int i = 0; i < b->num_items; i++) {
            const sched_item *it = &b->items[i];
            if (it->num_draft_tokens <= j) continue;
            add(d, it, it->context_len + j, 1);
            it->req->draft_computed = it->context_len + j + 1;
        }
        if (forward(d, m) < 0) return -1;
        for (int i = 0, at = 0; i < b->num_items; i++) {
            const sched_item *it = &b->items[i];
            if (it->num_draft_tokens <= j) continue;
            ((int32_t *)it->req->prompt)[it->context_len + j + 1] = d->rn.sampled[at++];
        }
    }
    return 0;
}

void drafter_settle(const sched_batch *b)
{
    for (int i = 0; i < b->num_items; i++) {
        request *r = b->items[i].req;
        if (r->draft_computed > r->num_computed) r->draft_computed = r->num_computed;
    }
}
