/* Block manager: a fixed pool of KV blocks, a block table per sequence, reference counts,
 * and (optionally) a prefix cache of full prompt blocks keyed by a chained hash, with
 * least-recently-freed eviction. O(1) per block; no allocation after bm_create. */
#ifndef SERVESIM_CORE_BM_H
#define SERVESIM_CORE_BM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "core/request.h"

typedef struct bm_config {
    int num_blocks;
    int block_size;
    int max_seqs;            /* rows of block tables */
    int max_blocks_per_seq;  /* columns */
    bool prefix_caching;
} bm_config;

typedef struct bm bm;

bm *bm_create(const bm_config *cfg);
/* The memory a block manager of CFG comes to hold, in bytes: its per-block arrays, which
 * bm_create fills, and its block tables, whose pages fill as sequences grow (counted as the
 * blocks plus a page a row, not the rows' full width, which untouched pages never cost). */
double bm_memory_bytes(const bm_config *cfg);
void bm_free(bm *m);

int bm_num_free(const bm *m);       /* blocks no sequence holds (cached ones included) */
int bm_num_cached(const bm *m);     /* blocks carrying a prefix-cache hash */
int64_t bm_evictions(const bm *m);  /* cached blocks handed out for other content, so far */
int64_t bm_table_entries(const bm *m);  /* blocks in all block tables (shared counted per table) */
int bm_block_size(const bm *m);
static inline int bm_blocks_for(int tokens, int block_size) { return (tokens + block_size - 1) / block_size; }

/* Gives R a block-table row. False when every row is taken. */
bool bm_seq_open(bm *m, request *r);
/* Counts the leading full prompt blocks of R (which holds no blocks yet) found in the prefix
 * cache, leaving at least one prompt token to compute. Takes nothing. */
int bm_count_hits(bm *m, const request *r);
/* Makes R's table cover NUM_TOKENS slots, first sharing NUM_HIT_BLOCKS cached blocks (found by
 * bm_count_hits just before) when R holds none. Registers the prompt blocks that these tokens
 * fill in the prefix cache. False, changing nothing, when the pool is short. */
bool bm_allocate_blocks(bm *m, request *r, int num_hit_blocks, int num_tokens);
void bm_register_blocks(bm *m, request *r, int num_tokens);
bool bm_prefix_caching(const bm *m);
static inline bool bm_allocate(bm *m, request *r, int num_hit_blocks, int num_tokens)
{
    /* the common case, a decode inside its last block: no call, no division */
    if (r->num_blocks > 0 && num_tokens <= r->num_blocks * bm_block_size(m)) {
        if (r->num_computed < r->prompt_len && r->prompt && bm_prefix_caching(m))
            bm_register_blocks(m, r, num_tokens);
        return true;
    }
    return bm_allocate_blocks(m, r, num_hit_blocks, num_tokens);
}
/* Drops R's blocks past the first NUM_TOKENS slots (rejected speculative tokens' blocks). */
void bm_truncate(bm *m, request *r, int num_tokens);
/* Drops every block of R (finish or preemption) and frees its row. */
void bm_release(bm *m, request *r);
const int32_t *bm_block_table(const bm *m, const request *r);

/* Reference count of block B (tests and invariant checks). */
int bm_ref_count(const bm *m, int b);
/* Verifies every internal invariant; returns NULL or a description of the first broken one. */
const char *bm_check(const bm *m);

#endif
