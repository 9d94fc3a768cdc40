/* Block manager: allocation, reference counts, prefix-cache hits and LRU eviction. */
#include <criterion/criterion.h>
#include <malloc.h>
#include <math.h>
#include <stdlib.h>

#include "core/bm.h"

static bm *make_bm(int num_blocks, int block_size, int max_seqs, bool prefix)
{
    bm_config c = {.num_blocks = num_blocks, .block_size = block_size, .max_seqs = max_seqs,
                   .max_blocks_per_seq = num_blocks, .prefix_caching = prefix};
    bm *m = bm_create(&c);
    cr_assert_not_null(m);
    return m;
}

static void start(bm *m, request *r, int32_t *prompt, int len, int64_t id)
{
    req_init(r, id, 0, prompt, len, 4);
    cr_assert(bm_seq_open(m, r));
}

static void expect_consistent(const bm *m)
{
    const char *bad = bm_check(m);
    cr_assert_null(bad, "block manager invariant broken: %s", bad);
}

/* What servesim checks a run's replicas against the machine's memory with (study/simjob.c):
 * by hand, 100 blocks of 16 tokens, 4 rows of 10 */
Test(bm, memory_estimate_counts_each_array)
{
    bm_config c = {.num_blocks = 100, .block_size = 16, .max_seqs = 4, .max_blocks_per_seq = 10};
    /* ref, prev, next: 12 bytes a block; free_slots, slot_len: 8 a row; the tables whole,
     * 4 x 10 x 4, being smaller than the blocks plus a page a row */
    cr_assert_float_eq(bm_memory_bytes(&c), 1200 + 32 + 160, 1e-9);
    c.prefix_caching = true;
    /* the hash table: 256 entries (the first power of two past 200) of 16 bytes; per block a
     * hash and a parent hash (16), a flag (1) and 16 token ids (64) */
    cr_assert_float_eq(bm_memory_bytes(&c), 1392 + 256 * 16 + 100 * 81, 1e-9);
    c.max_blocks_per_seq = 100000; /* wide rows: only the blocks and a page a row are touched */
    cr_assert_float_eq(bm_memory_bytes(&c), 1200 + 32 + (100 + 4 * 1024) * 4 + 4096 + 8100, 1e-9);
}

/* and what bm_create allocates: an array added there and not here fails it (review) */
Test(bm, memory_estimate_is_what_bm_create_allocates)
{
#if defined(__SANITIZE_ADDRESS__)
    cr_skip_test("ASan's allocator reports nothing to mallinfo2");
#endif
    for (int prefix = 0; prefix < 2; prefix++) {
        /* narrow rows: the tables are counted whole, as allocated */
        bm_config c = {.num_blocks = 100000, .block_size = 16, .max_seqs = 256, .max_blocks_per_seq = 64,
                       .prefix_caching = prefix};
        struct mallinfo2 before = mallinfo2();
        bm *m = bm_create(&c);
        struct mallinfo2 after = mallinfo2();
        cr_assert_not_null(m);
        double allocated = (double)(after.uordblks + after.hblkhd) - (double)(before.uordblks + before.hblkhd);
        double estimate = bm_memory_bytes(&c);
        cr_assert(fabs(allocated - estimate) < 0.01 * estimate, "prefix caching %d: allocated %.0f, estimated %.0f",
                  prefix, allocated, estimate);
        bm_free(m);
    }
}

Test(bm, allocates_blocks_by_tokens_and_frees_them)
{
    bm *m = make_bm(10, 16, 4, false);
    request r;
    start(m, &r, NULL, 40, 1);
    cr_assert(bm_allocate(m, &r, 0, 40));
    cr_assert_eq(r.num_blocks, 3);
    cr_assert_eq(bm_num_free(m), 7);
    cr_assert(bm_allocate(m, &r, 0, 48), "48 tokens still fit in 3 blocks");
    cr_assert_eq(r.num_blocks, 3);
    cr_assert(bm_allocate(m, &r, 0, 49));
    cr_assert_eq(r.num_blocks, 4);
    expect_consistent(m);
    bm_release(m, &r);
    cr_assert_eq(bm_num_free(m), 10);
    cr_assert_eq(r.seq_slot, -1);
    expect_consistent(m);
    bm_free(m);
}

Test(bm, refuses_without_changing_anything_when_short)
{
    bm *m = make_bm(4, 16, 4, false);
    request a, b;
    start(m, &a, NULL, 48, 1);
    start(m, &b, NULL, 48, 2);
    cr_assert(bm_allocate(m, &a, 0, 48));
    cr_assert_not(bm_allocate(m, &b, 0, 48), "2 blocks left, 3 needed");
    cr_assert_eq(b.num_blocks, 0);
    cr_assert_eq(bm_num_free(m), 1);
    expect_consistent(m);
    bm_release(m, &a);
    bm_release(m, &b);
    bm_free(m);
}

static int32_t *tokens(int n, int salt)
{
    int32_t *t = malloc(n * sizeof *t);
    for (int i = 0; i < n; i++) t[i] = (i * 7919 + salt * 104729) % 32000;
    return t;
}

Test(bm, shared_4096_token_prefix_is_a_hit_of_4096_tokens)
{
    bm *m = make_bm(1024, 16, 4, true);
    int32_t *a_prompt = tokens(4096 + 100, 1);
    int32_t *b_prompt = tokens(4096 + 50, 2);
    for (int i = 0; i < 4096; i++) b_prompt[i] = a_prompt[i];
    request a, b;
    start(m, &a, a_prompt, 4196, 1);
    cr_assert_eq(bm_count_hits(m, &a), 0);
    cr_assert(bm_allocate(m, &a, 0, 4196));
    cr_assert_eq(bm_num_cached(m), 4196 / 16, "every full prompt block is registered");
    start(m, &b, b_prompt, 4146, 2);
    int hits = bm_count_hits(m, &b);
    cr_assert_eq(hits * 16, 4096);
    int free_before = bm_num_free(m);
    cr_assert(bm_allocate(m, &b, hits, 4146));
    cr_assert_eq(free_before - bm_num_free(m), 4, "only the 50-token tail needs new blocks");
    const int32_t *ta = bm_block_table(m, &a), *tb = bm_block_table(m, &b);
    for (int i = 0; i < 256; i++) {
        cr_assert_eq(ta[i], tb[i]);
        cr_assert_eq(bm_ref_count(m, ta[i]), 2);
    }
    expect_consistent(m);
    bm_release(m, &a);
    bm_release(m, &b);
    cr_assert_eq(bm_num_free(m), 1024);
    expect_consistent(m);
    free(a_prompt);
    free(b_prompt);
    bm_free(m);
}

Test(bm, a_block_differing_in_its_last_token_misses)
{
    bm *m = make_bm(64, 16, 4, true);
    int32_t *a_prompt = tokens(100, 3), *b_prompt = tokens(100, 3);
    b_prompt[3 * 16 - 1] += 1; /* last token of the third block */
    request a, b;
    start(m, &a, a_prompt, 100, 1);
    cr_assert(bm_allocate(m, &a, 0, 100));
    start(m, &b, b_prompt, 100, 2);
    cr_assert_eq(bm_count_hits(m, &b), 2, "blocks 0 and 1 hit, block 2 differs");
    /* everything after the differing block misses too: the chain is broken */
    bm_release(m, &a);
    bm_release(m, &b);
    free(a_prompt);
    free(b_prompt);
    bm_free(m);
}

Test(bm, whole_prompt_hit_still_leaves_a_token_to_compute)
{
    bm *m = make_bm(64, 16, 4, true);
    int32_t *p = tokens(64, 4);
    request a, b;
    start(m, &a, p, 64, 1);
    cr_assert(bm_allocate(m, &a, 0, 64));
    start(m, &b, p, 64, 2);
    cr_assert_eq(bm_count_hits(m, &b), 3, "63 tokens could hit; 3 full blocks of them");
    bm_release(m, &a);
    bm_release(m, &b);
    free(p);
    bm_free(m);
}

/* A 64-token prompt is exactly four blocks of 16: all four are cached, the fourth too, and a
 * longer prompt starting with it hits all 64 tokens. */
Test(bm, a_prompt_of_whole_blocks_caches_its_last_block)
{
    bm *m = make_bm(64, 16, 4, true);
    int32_t *a_prompt = tokens(64, 5), *b_prompt = tokens(80, 6);
    for (int i = 0; i < 64; i++) b_prompt[i] = a_prompt[i];
    request a, b;
    start(m, &a, a_prompt, 64, 1);
    cr_assert(bm_allocate(m, &a, 0, 64));
    cr_assert_eq(bm_num_cached(m), 4, "the fourth, last full block is cached too");
    start(m, &b, b_prompt, 80, 2);
    cr_assert_eq(bm_count_hits(m, &b), 4, "all 64 shared tokens hit");
    cr_assert(bm_allocate(m, &b, 4, 80));
    cr_assert_eq(bm_block_table(m, &b)[3], bm_block_table(m, &a)[3]);
    expect_consistent(m);
    bm_release(m, &a);
    bm_release(m, &b);
    free(a_prompt);
    free(b_prompt);
    bm_free(m);
}

/* Four blocks of two slots. A fills blocks 0,1,2 (two full prompt blocks cached), is freed:
 * the free queue becomes 3, 2, 1, 0 (tail block first). B needs three fresh blocks and takes
 * 3, 2 and 1, evicting A's second cached block but not its first. */
Test(bm, lru_evicts_the_longest_free_block_and_a_prefix_last)
{
    bm *m = make_bm(4, 2, 4, true);
    int32_t pa[] = {1, 2, 3, 4, 5}, pb[] = {7, 8, 9, 10, 11}, pc[] = {1, 2, 3, 4, 6};
    request a, b, c;
    start(m, &a, pa, 5, 1);
    cr_assert(bm_allocate(m, &a, 0, 5));
    cr_assert_eq(bm_num_cached(m), 2);
    bm_release(m, &a);
    cr_assert_eq(bm_num_cached(m), 2, "freed blocks stay cached");
    start(m, &b, pb, 5, 2);
    cr_assert(bm_allocate(m, &b, 0, 5));
    const int32_t *tb = bm_block_table(m, &b);
    cr_assert_eq(tb[0], 3);
    cr_assert_eq(tb[1], 2);
    cr_assert_eq(tb[2], 1);
    /* B registered its own two full blocks; A's [3,4] block was evicted, [1,2] survives */
    cr_assert_eq(bm_num_cached(m), 3);
    cr_assert_eq(bm_evictions(m), 1, "one cached block handed out for other content");
    start(m, &c, pc, 5, 3);
    cr_assert_eq(bm_count_hits(m, &c), 1);
    expect_consistent(m);
    bm_release(m, &b);
    /* C reuses the free cached block 0 and needs two fresh ones: 2 free blocks besides it
     * (1 and 3 after B's release) suffice, and the hit block is not double-counted */
    cr_assert(bm_allocate(m, &c, 1, 5));
    cr_assert_eq(bm_block_table(m, &c)[0], 0);
    cr_assert_eq(bm_num_free(m), 1);
    expect_consistent(m);
    bm_release(m, &c);
    bm_free(m);
}

Test(bm, a_free_hit_block_is_not_counted_as_a_fresh_one)
{
    bm *m = make_bm(2, 2, 4, true);
    int32_t p[] = {1, 2, 3, 4, 5};
    request a, b;
    start(m, &a, p, 3, 1);
    cr_assert(bm_allocate(m, &a, 0, 3));
    bm_release(m, &a);
    start(m, &b, p, 5, 2);
    cr_assert_eq(bm_count_hits(m, &b), 1);
    cr_assert_not(bm_allocate(m, &b, 1, 5), "needs the hit block plus 2 fresh; only 1 other is free");
    cr_assert_eq(bm_num_free(m), 2);
    expect_consistent(m);
    bm_release(m, &b);
    bm_free(m);
}

Test(bm, block_table_rows_run_out)
{
    bm *m = make_bm(8, 4, 2, false);
    request a, b, c;
    req_init(&a, 1, 0, NULL, 4, 1);
    req_init(&b, 2, 0, NULL, 4, 1);
    req_init(&c, 3, 0, NULL, 4, 1);
    cr_assert(bm_seq_open(m, &a));
    cr_assert(bm_seq_open(m, &b));
    cr_assert_not(bm_seq_open(m, &c));
    bm_release(m, &a);
    cr_assert(bm_seq_open(m, &c));
    bm_release(m, &b);
    bm_release(m, &c);
    bm_free(m);
}
