#include "engine/runner.h"

#include <stdlib.h>
#include <string.h>

int runner_init(runner *rn, kb_backend *kb, int max_tokens, int max_seqs, int max_blocks_per_seq)
{
    memset(rn, 0, sizeof *rn);
    rn->kb = kb;
    rn->max_tokens = max_tokens;
    rn->max_seqs = max_seqs;
    rn->max_blocks_per_seq = max_blocks_per_seq;
    rn->token_ids = malloc(max_tokens * sizeof *rn->token_ids);
    rn->positions = malloc(max_tokens * sizeof *rn->positions);
    rn->slot_mapping = malloc(max_tokens * sizeof *rn->slot_mapping);
    rn->query_start = malloc((max_seqs + 1) * sizeof *rn->query_start);
    rn->context_lens = malloc(max_seqs * sizeof *rn->context_lens);
    rn->block_tables = malloc((size_t)max_seqs * max_blocks_per_seq * sizeof *rn->block_tables);
    rn->sampled = malloc(max_seqs * sizeof *rn->sampled);
    rn->item_seq = malloc((max_seqs + 1) * sizeof *rn->item_seq);
    if (!rn->token_ids || !rn->positions || !rn->slot_mapping || !rn->query_start ||
        !rn->context_lens || !rn->block_tables || !rn->sampled || !rn->item_seq) {
        runner_free(rn);
        return -1;
    }
    return 0;
}

void runner_free(runner *rn)
{
    free(rn->token_ids); free(rn->positions); free(rn->slot_mapping); free(rn->query_start);
    free(rn->context_lens); free(rn->block_tables); free(rn->sampled); free(rn->item_seq);
    memset(rn, 0, sizeof *rn);
}

/* Padding tokens: token 0, written nowhere, from the sequence's cached length on, so a padded
 * decode slot reads the whole context as a real decode would. */
static int put_padding(runner *rn, int t, const sched_item *it)
{
    for (int j = 0; j < it->num_pad_tokens; j++, t++) {
        rn->token_ids[t] = 0;
        rn->positions[t] = it->context_len + j;
        rn->slot_mapping[t] = -1;
    }
    return t;
}

static int put_tokens(runner *rn, int t, const sched_item *it, const int32_t *table, int bs,
                      const int32_t *ids)
{
    for (int j = 0; j < it->num_new_tokens; j++, t++) {
        int pos = it->context_len + j;
        rn->token_ids[t] = ids[pos];
        rn->positions[t] = pos;
        rn->slot_mapping[t] = table[pos / bs] * bs + pos % bs;
    }
    return t;
}

void runner_prepare(runner *rn, const sched_batch *b, const bm *m)
{
    int bs = bm_block_size(m), t = 0, seq = 0;
    size_t row = (size_t)rn->max_blocks_per_seq;
    for (int s = 0; s < b->num_items; s++) {
        const sched_item *it = &b->items[s];
        const int32_t *table = bm_block_table(m, it->req);
        rn->item_seq[s] = seq;
        if (it->num_draft_tokens > 0) { /* one decode-shaped query per position */
            sched_item one = *it;
            one.num_new_tokens = 1;
            for (int j = 0; j < it->num_new_tokens; j++, seq++, one.context_len++) {
                rn->query_start[seq] = t;
                t = put_tokens(rn, t, &one, table, bs, it->req->prompt);
                rn->context_lens[seq] = one.context_len + 1;
                memcpy(rn->block_tables + seq * row, table, it->req->num_blocks * sizeof *table);
            }
            continue;
        }
        rn->query_start[seq] = t;
        t = put_padding(rn, t, it);
        t = put_tokens(rn, t, it, table, bs, it->req->prompt);
        rn->context_lens[seq] = it->context_len + it->num_new_tokens;
        memcpy(rn->block_tables + seq * row, table, it->req->num_blocks * sizeof *table);
        seq++;
    }
    rn->item_seq[b->num_items] = seq;
    rn->query_start[seq] = t;
    rn->batch = (kb_batch){
        .num_tokens = t, .token_ids = rn->token_ids, .positions = rn->positions,
        .slot_mapping = rn->slot_mapping, .num_seqs = seq, .query_start = rn->query_start,
        .context_lens = rn->context_lens, .block_tables = rn->block_tables,
    };
}

int runner_forward(runner *rn, kb_timing *t) { return kb_forward(rn->kb, &rn->batch, t); }

int runner_sample(runner *rn, const kb_sampling *p, kb_timing *t)
{
    return kb_sample(rn->kb, p, rn->sampled, t);
}
