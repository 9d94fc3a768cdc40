/* CPU backend: each op against a naive reference, and the whole model through the backend
 * interface against itself computed another way (chunked, prefix-cached, decoded, batched). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "kernels/backend.h"
#include "tests/file_fixture.h"
#include "tests/kernel_fixture.h"
#include "kernels/cpu/ops.h"

#define TOL 1e-4

/* Last logits of TOKENS[0..n) computed in one prefill in blocks from FIRST_BLOCK on. */
static void from_scratch(kb_backend *b, const kb_options *o, const int32_t *tokens, int n,
                         int first_block, float *logits)
{
    int32_t blocks[MAX_BLOCKS_PER_SEQ];
    scattered_blocks(blocks, first_block, MAX_BLOCKS_PER_SEQ);
    seq_step st = {tokens, blocks, 0, n, 0};
    fixture_run(b, o->block_size, &st, 1, logits, NULL);
}

static void put(const char *dir, const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    write_path(path, text);
}

/* A container's limit, less what its processes hold: memory.current counts the page cache,
 * which once made a container after a build look full and refused runs that fit */
Test(kernels_cpu, a_cgroups_page_cache_counts_as_free)
{
    char dir[] = "/tmp/ss-cgroup-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    size_t left = 7;
    cr_assert_eq(kb_cgroup_memory_left(dir, &left), 0, "no memory.max: no limit");
    put(dir, "memory.max", "max\n");
    cr_assert_eq(kb_cgroup_memory_left(dir, &left), 0, "\"max\": no limit");
    cr_assert_eq(left, 7);
    put(dir, "memory.max", "8589934592\n");       /* 8 GiB */
    put(dir, "memory.current", "8000000000\n");   /* nearly all of it, */
    put(dir, "memory.stat", "anon 1000000000\nfile 6000000000\nkernel 10\n"); /* most of it cache */
    cr_assert_eq(kb_cgroup_memory_left(dir, &left), 1);
    cr_assert_eq(left, 8589934592ull - 2000000000ull);
    put(dir, "memory.current", "9000000000\n");   /* past the limit, cache aside */
    put(dir, "memory.stat", "file 100\n");
    cr_assert_eq(kb_cgroup_memory_left(dir, &left), 1);
    cr_assert_eq(left, 0);
    char rm[64];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    system(rm);
}

/* SERVESIM_MEMORY_GIB caps the memory counted as available (a user's share of a shared
 * machine); anything but a size above 0 is refused, naming it, not read as no cap */
Test(kernels_cpu, servesim_memory_gib_caps_what_is_available)
{
    size_t cap = 7, avail;
    char err[256];
    unsetenv("SERVESIM_MEMORY_GIB");
    cr_assert_eq(kb_memory_cap(&cap, err, sizeof err), 0, "unset: no cap");
    cr_assert_eq(cap, 7);
    setenv("SERVESIM_MEMORY_GIB", "0.5", 1);
    cr_assert_eq(kb_memory_cap(&cap, err, sizeof err), 1);
    cr_assert_eq(cap, (size_t)1 << 29);
    cr_assert_eq(kb_host_memory_available(&avail, err, sizeof err), 0, "%s", err);
    cr_assert_leq(avail, (size_t)1 << 29, "no more than the cap");
    const char *bad[] = {"0", "-1", "abc", "1x", "nan", "inf", "1e30", "1e-12"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("SERVESIM_MEMORY_GIB", bad[i], 1);
        cr_assert_eq(kb_memory_cap(&cap, err, sizeof err), -1, "%s", bad[i]);
        cr_assert(strstr(err, "SERVESIM_MEMORY_GIB="), "%s", err);
        cr_assert_eq(kb_host_memory_available(&avail, err, sizeof err), -1, "%s", bad[i]);
    }
    unsetenv("SERVESIM_MEMORY_GIB");
}

Test(kernels_cpu, matmul_matches_naive)
{
    static const int shapes[][3] = {{1, 64, 64}, {7, 128, 384}, {33, 256, 96}, {128, 64, 1000}};
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int n = shapes[k][0], in = shapes[k][1], out = shapes[k][2];
        float *x = malloc(sizeof(float) * n * in), *w = malloc(sizeof(float) * out * in);
        float *y = malloc(sizeof(float) * n * out), *ref = malloc(sizeof(float) * n * out);
        fill_uniform(x, (size_t)n * in, rng);
        fill_uniform(w, (size_t)out * in, rng);
        matmul_forward(y, x, w, n, in, out);
        matmul_forward_naive(ref, x, w, n, in, out);
        double e = rel_err(y, ref, (size_t)n * out);
        cr_assert_lt(e, TOL, "matmul %dx%d -> %d: rel err %g", n, in, out, e);
        free(x), free(w), free(y), free(ref);
    }
    gsl_rng_free(rng);
}

/* Paged attention over a cache whose blocks are a random permutation of the pool, unused
 * slots NaN (a read outside the span would show), against the contiguous reference. */
static void check_paged_attention(int heads, int kv_heads, int head_dim, int block_size,
                                  int n_keys, int q_len, unsigned long seed)
{
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, seed);
    int num_blocks = (n_keys + block_size - 1) / block_size + 5;
    size_t q_dim = (size_t)heads * head_dim, kv_dim = (size_t)kv_heads * head_dim;
    size_t pool = (size_t)num_blocks * block_size * kv_dim;
    float *q = malloc(sizeof(float) * q_len * q_dim), *k = malloc(sizeof(float) * n_keys * kv_dim);
    float *v = malloc(sizeof(float) * n_keys * kv_dim);
    float *kc = malloc(sizeof(float) * pool), *vc = malloc(sizeof(float) * pool);
    float *out = malloc(sizeof(float) * q_len * q_dim), *ref = malloc(sizeof(float) * q_len * q_dim);
    float *scores = malloc(sizeof(float) * num_blocks * block_size);
    int32_t *table = malloc(sizeof(int32_t) * num_blocks), *positions = malloc(sizeof(int32_t) * q_len);
    fill_uniform(q, q_len * q_dim, rng);
    fill_uniform(k, n_keys * kv_dim, rng);
    fill_uniform(v, n_keys * kv_dim, rng);
    for (size_t i = 0; i < pool; i++)
        kc[i] = vc[i] = NAN;
    for (int i = 0; i < num_blocks; i++)
        table[i] = i;
    gsl_ran_shuffle(rng, table, (size_t)num_blocks, sizeof *table);
    for (int j = 0; j < n_keys; j++) {
        size_t slot = (size_t)table[j / block_size] * block_size + j % block_size;
        memcpy(kc + slot * kv_dim, k + j * kv_dim, kv_dim * sizeof(float));
        memcpy(vc + slot * kv_dim, v + j * kv_dim, kv_dim * sizeof(float));
    }
    for (int i = 0; i < q_len; i++)
        positions[i] = n_keys - q_len + i;
    if (q_len == 1)
        attention_decode_paged(out, q, kc, vc, table, block_size, positions[0], n_keys, heads,
                               kv_heads, head_dim, scores);
    else
        attention_prefill_paged(out, (int)q_dim, q, (int)q_dim, kc, vc, table, block_size,
                                positions, q_len, n_keys, heads, kv_heads, head_dim, scores);
    attention_reference(ref, q, k, v, q_len, n_keys, heads, kv_heads, head_dim);
    double e = rel_err(out, ref, q_len * q_dim);
    cr_assert_lt(e, TOL, "attention H=%d KVH=%d hd=%d bs=%d keys=%d q=%d: rel err %g", heads,
                 kv_heads, head_dim, block_size, n_keys, q_len, e);
    free(q), free(k), free(v), free(kc), free(vc), free(out), free(ref), free(scores);
    free(table), free(positions);
    gsl_rng_free(rng);
}

Test(kernels_cpu, paged_prefill_attention_matches_reference)
{
    check_paged_attention(8, 2, 16, 4, 37, 37, 1);   /* whole prompt */
    check_paged_attention(8, 2, 32, 16, 50, 13, 2);  /* a chunk over cached context */
    check_paged_attention(4, 4, 16, 16, 16, 16, 3);  /* exactly one block, no GQA */
    check_paged_attention(8, 1, 16, 4, 23, 5, 4);    /* multi-query */
}

Test(kernels_cpu, paged_decode_attention_matches_reference)
{
    check_paged_attention(8, 2, 16, 4, 61, 1, 5);
    check_paged_attention(8, 2, 32, 16, 1, 1, 6);
    check_paged_attention(4, 2, 16, 16, 100, 1, 7);
}

Test(kernels_cpu, chunked_prefill_matches_whole_prefill)
{
    kb_options o = fixture_options(KB_CPU);
    kb_backend *b = fixture_open(&o);
    int32_t tokens[37], blocks[MAX_BLOCKS_PER_SEQ];
    fill_tokens(tokens, 37, 1);
    float whole[VOCAB], chunked[VOCAB];
    from_scratch(b, &o, tokens, 37, 0, whole);
    scattered_blocks(blocks, 20, MAX_BLOCKS_PER_SEQ);
    static const int chunks[] = {13, 12, 12};
    for (int c = 0, done = 0; c < 3; done += chunks[c++]) {
        seq_step st = {tokens, blocks, done, chunks[c], 0};
        fixture_run(b, o.block_size, &st, 1, chunked, NULL);
    }
    double e = rel_err(chunked, whole, VOCAB);
    cr_assert_lt(e, TOL, "chunked prefill: rel err %g", e);
    kb_close(b);
}

Test(kernels_cpu, prefix_cache_hit_matches_scratch)
{
    kb_options o = fixture_options(KB_CPU);
    kb_backend *b = fixture_open(&o);
    /* B shares A's first 12 tokens: 3 full blocks of 4. */
    int32_t a[20], bt[21];
    fill_tokens(a, 20, 2);
    memcpy(bt, a, 12 * sizeof *bt);
    fill_tokens(bt + 12, 9, 3);
    float a_ref[VOCAB], b_ref[VOCAB], logits[2 * VOCAB];
    from_scratch(b, &o, a, 20, 40, a_ref);
    from_scratch(b, &o, bt, 21, 50, b_ref);

    int32_t a_blocks[MAX_BLOCKS_PER_SEQ], b_blocks[MAX_BLOCKS_PER_SEQ];
    scattered_blocks(a_blocks, 0, MAX_BLOCKS_PER_SEQ);
    memcpy(b_blocks, a_blocks, 3 * sizeof *b_blocks);
    scattered_blocks(b_blocks + 3, 10, MAX_BLOCKS_PER_SEQ - 3);

    /* A in an earlier step, then B computes only its own tokens. */
    seq_step sa = {a, a_blocks, 0, 20, 0}, sb = {bt, b_blocks, 12, 9, 0};
    fixture_run(b, o.block_size, &sa, 1, NULL, NULL);
    fixture_run(b, o.block_size, &sb, 1, logits, NULL);
    double e = rel_err(logits, b_ref, VOCAB);
    cr_assert_lt(e, TOL, "prefix hit after A's step: rel err %g", e);

    /* A and B in one step, B first: B reads blocks that A writes in that same step. */
    scattered_blocks(a_blocks, 20, MAX_BLOCKS_PER_SEQ);
    memcpy(b_blocks, a_blocks, 3 * sizeof *b_blocks);
    scattered_blocks(b_blocks + 3, 30, 6);
    seq_step both[2] = {{bt, b_blocks, 12, 9, 0}, {a, a_blocks, 0, 20, 0}};
    fixture_run(b, o.block_size, both, 2, logits, NULL);
    e = rel_err(logits, b_ref, VOCAB);
    cr_assert_lt(e, TOL, "prefix hit within one step: rel err %g", e);
    e = rel_err(logits + VOCAB, a_ref, VOCAB);
    cr_assert_lt(e, TOL, "A in the shared step: rel err %g", e);
    kb_close(b);
}

Test(kernels_cpu, cached_decode_matches_recompute)
{
    kb_options o = fixture_options(KB_CPU);
    kb_backend *b = fixture_open(&o);
    enum { PROMPT = 10, TOTAL = 26 };
    int32_t tokens[TOTAL], blocks[MAX_BLOCKS_PER_SEQ];
    fill_tokens(tokens, PROMPT, 4);
    scattered_blocks(blocks, 0, MAX_BLOCKS_PER_SEQ);
    float cached[VOCAB], naive[VOCAB];
    seq_step st = {tokens, blocks, 0, PROMPT, 0};
    fixture_run(b, o.block_size, &st, 1, cached, NULL);
    kb_sampling greedy = {.temperature = 0.0f, .top_k = 0, .top_p = 1.0f};
    int distinct = 0;
    for (int p = PROMPT; p < TOTAL; p++) {
        cr_assert_eq(kb_sample(b, &greedy, &tokens[p], NULL), 0, "%s", kb_error(b));
        int seen = 0;
        for (int i = PROMPT; i < p; i++)
            seen |= tokens[i] == tokens[p];
        distinct += !seen;
        st = (seq_step){tokens, blocks, p, 1, 0};
        fixture_run(b, o.block_size, &st, 1, cached, NULL);
        from_scratch(b, &o, tokens, p + 1, 30, naive);
        double e = rel_err(cached, naive, VOCAB);
        cr_assert_lt(e, TOL, "decode at position %d: rel err %g", p, e);
        /* Sampling reads the last forward: run the cached one again. */
        fixture_run(b, o.block_size, &st, 1, NULL, NULL);
    }
    cr_assert_gt(distinct, 3, "greedy decoding of random weights repeats itself: %d distinct "
                 "tokens in %d", distinct, TOTAL - PROMPT);
    kb_close(b);
}

Test(kernels_cpu, mixed_batch_matches_each_sequence_alone)
{
    kb_options o = fixture_options(KB_CPU);
    kb_backend *b = fixture_open(&o);
    enum { NSEQ = 4 };
    static const int cached_len[NSEQ] = {0, 9, 8, 14}, new_len[NSEQ] = {17, 1, 5, 1};
    int32_t tokens[NSEQ][32], blocks[NSEQ][MAX_BLOCKS_PER_SEQ];
    seq_step steps[NSEQ + 1];
    for (int s = 0; s < NSEQ; s++) {
        fill_tokens(tokens[s], cached_len[s] + new_len[s], 10 + s);
        scattered_blocks(blocks[s], 8 * s, MAX_BLOCKS_PER_SEQ);
        if (cached_len[s]) {
            seq_step prefix = {tokens[s], blocks[s], 0, cached_len[s], 0};
            fixture_run(b, o.block_size, &prefix, 1, NULL, NULL);
        }
        steps[s] = (seq_step){tokens[s], blocks[s], cached_len[s], new_len[s], 0};
    }
    /* Padding rows over the last sequence's cache: computed, never written. */
    steps[NSEQ] = (seq_step){tokens[0], blocks[3], 14, 3, 1};
    float logits[(NSEQ + 1) * VOCAB], alone[VOCAB];
    fixture_run(b, o.block_size, steps, NSEQ + 1, logits, NULL);
    for (int i = 0; i < VOCAB; i++)
        cr_assert(isfinite(logits[NSEQ * VOCAB + i]), "padding logits are not finite");
    for (int s = 0; s < NSEQ; s++) {
        from_scratch(b, &o, tokens[s], cached_len[s] + new_len[s], 40, alone);
        double e = rel_err(logits + s * VOCAB, alone, VOCAB);
        cr_assert_lt(e, TOL, "sequence %d in a mixed batch: rel err %g", s, e);
    }
    kb_close(b);
}

Test(kernels_cpu, timing_parts_add_up)
{
    kb_options o = fixture_options(KB_CPU);
    kb_backend *b = fixture_open(&o);
    int32_t ids[3] = {1, 2, 3}, pos[3] = {0, 1, 2}, slots[3] = {0, 1, 2}, qs[2] = {0, 3},
            ctx[1] = {3}, table[MAX_BLOCKS_PER_SEQ] = {0};
    kb_batch batch = {3, ids, pos, slots, 1, qs, ctx, table};
    kb_timing t;
    cr_assert_eq(kb_forward(b, &batch, &t), 0, "%s", kb_error(b));
    double parts = t.embed + t.norm + t.linear + t.rope + t.kv_write + t.attn_prefill
                 + t.attn_decode + t.mlp_act + t.lm_head;
    cr_assert_gt(t.total, 0.0);
    cr_assert_gt(t.attn_prefill, 0.0);
    cr_assert_leq(parts, t.total * 1.001 + 1e-6, "parts %g exceed total %g", parts, t.total);
    int32_t tok;
    kb_sampling greedy = {0.0f, 0, 1.0f};
    double before = t.total;
    cr_assert_eq(kb_sample(b, &greedy, &tok, &t), 0);
    cr_assert_geq(t.sample, 0.0);
    cr_assert_geq(t.total, before);
    cr_assert_str_neq(kb_device_name(b), "");
    kb_close(b);
}

static void forward_two_seqs(kb_backend *b, const kb_options *o)
{
    int32_t t1[9], t2[5], b1[MAX_BLOCKS_PER_SEQ], b2[MAX_BLOCKS_PER_SEQ];
    fill_tokens(t1, 9, 20);
    fill_tokens(t2, 5, 21);
    scattered_blocks(b1, 0, MAX_BLOCKS_PER_SEQ);
    scattered_blocks(b2, 10, MAX_BLOCKS_PER_SEQ);
    seq_step steps[2] = {{t1, b1, 0, 9, 0}, {t2, b2, 0, 5, 0}};
    fixture_run(b, o->block_size, steps, 2, NULL, NULL);
}

static void sample_rounds(kb_backend *b, int rounds, int32_t *out)
{
    kb_sampling p = {.temperature = 0.9f, .top_k = 50, .top_p = 0.9f};
    for (int r = 0; r < rounds; r++)
        cr_assert_eq(kb_sample(b, &p, out + 2 * r, NULL), 0, "%s", kb_error(b));
}

Test(kernels_cpu, sampling_is_reproducible_from_its_seed)
{
    kb_options o = fixture_options(KB_CPU);
    int32_t first[60], second[60], other[60];
    kb_backend *b = fixture_open(&o);
    forward_two_seqs(b, &o);
    sample_rounds(b, 30, first);
    kb_close(b);
    b = fixture_open(&o);
    forward_two_seqs(b, &o);
    sample_rounds(b, 30, second);
    kb_close(b);
    o.sample_seed = 8;
    b = fixture_open(&o);
    forward_two_seqs(b, &o);
    sample_rounds(b, 30, other);
    kb_close(b);
    cr_assert_arr_eq(first, second, sizeof first, "same seed, different tokens");
    cr_assert(memcmp(first, other, sizeof first) != 0, "another seed gave the same 60 tokens");
}

Test(kernels_cpu, greedy_picks_the_argmax)
{
    kb_options o = fixture_options(KB_CPU);
    kb_backend *b = fixture_open(&o);
    forward_two_seqs(b, &o);
    float logits[2 * VOCAB];
    int32_t tok[2];
    kb_sampling greedy = {0.0f, 0, 1.0f};
    cr_assert_eq(kb_get_logits(b, logits), 0);
    cr_assert_eq(kb_sample(b, &greedy, tok, NULL), 0);
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < VOCAB; i++)
            cr_assert_geq(logits[s * VOCAB + tok[s]], logits[s * VOCAB + i]);
    kb_close(b);

    float ties[5] = {1.0f, 3.0f, -2.0f, 3.0f, 2.0f};
    logit_pair scratch[5];
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    sample_tokens(tok, ties, 1, 5, &greedy, rng, scratch);
    cr_assert_eq(tok[0], 1, "ties go to the lowest index");
    gsl_rng_free(rng);
}

Test(kernels_cpu, top_k_stays_in_the_k_largest)
{
    enum { V = 1000, K = 5, DRAWS = 4000 };
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    float logits[V], sorted[V];
    for (int i = 0; i < V; i++)
        logits[i] = sorted[i] = (float)gsl_ran_gaussian(rng, 2.0);
    /* The K-th largest value is the threshold. */
    for (int i = 0; i < K; i++)
        for (int j = i + 1; j < V; j++)
            if (sorted[j] > sorted[i]) {
                float t = sorted[i];
                sorted[i] = sorted[j];
                sorted[j] = t;
            }
    logit_pair scratch[V];
    kb_sampling p = {.temperature = 3.0f, .top_k = K, .top_p = 1.0f};
    int hits[V] = {0};
    for (int d = 0; d < DRAWS; d++) {
        int32_t tok;
        sample_tokens(&tok, logits, 1, V, &p, rng, scratch);
        cr_assert(logits[tok] >= sorted[K - 1], "token %d is outside the top %d", tok, K);
        hits[tok]++;
    }
    int used = 0;
    for (int i = 0; i < V; i++)
        used += hits[i] > 0;
    cr_assert_eq(used, K, "with temperature 3 every one of the top %d should come up", K);
    gsl_rng_free(rng);
}

Test(kernels_cpu, top_p_stays_in_the_nucleus)
{
    /* Probabilities 0.04, 0.5, 0.06, 0.3, 0.1: for p = 0.75 the nucleus is {1, 3}. */
    static const double prob[5] = {0.04, 0.5, 0.06, 0.3, 0.1};
    float logits[5];
    for (int i = 0; i < 5; i++)
        logits[i] = (float)log(prob[i]);
    logit_pair scratch[5];
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    kb_sampling p = {.temperature = 1.0f, .top_k = 0, .top_p = 0.75f};
    int hits[5] = {0};
    for (int d = 0; d < 3000; d++) {
        int32_t tok;
        sample_tokens(&tok, logits, 1, 5, &p, rng, scratch);
        cr_assert(tok == 1 || tok == 3, "token %d is outside the nucleus", tok);
        hits[tok]++;
    }
    cr_assert(hits[1] > hits[3] && hits[3] > 0, "draws %d/%d do not follow 0.5:0.3", hits[1],
              hits[3]);
    /* top-p applies to what top-k kept: after top_k = 3 (0.5, 0.3, 0.1 renormalized) p = 0.6
     * keeps 0.5/0.9 = 0.56 < 0.6, so the nucleus is again {1, 3}. */
    p = (kb_sampling){.temperature = 1.0f, .top_k = 3, .top_p = 0.6f};
    for (int d = 0; d < 1000; d++) {
        int32_t tok;
        sample_tokens(&tok, logits, 1, 5, &p, rng, scratch);
        cr_assert(tok == 1 || tok == 3, "token %d is outside top-k then top-p", tok);
    }
    gsl_rng_free(rng);
}

Test(kernels_cpu, open_refuses_what_does_not_fit)
{
    kb_options o = fixture_options(KB_CPU);
    o.shape = (kb_shape){.num_layers = 80, .hidden = 8192, .num_heads = 64, .num_kv_heads = 8,
                         .head_dim = 128, .intermediate = 28672, .vocab = 128256,
                         .rope_theta = 500000.0f, .rms_eps = 1e-5f};
    o.max_blocks_per_seq = 64;
    char err[512] = "";
    cr_assert_null(kb_open(&o, err, sizeof err));
    cr_assert(strstr(err, "GiB") && strstr(err, "available"), "message: %s", err);
    /* 70.55e9 parameters at 4 bytes */
    cr_assert(strstr(err, "262.8 GiB of fp32 weights"), "message: %s", err);
}

/* The pool that fits grows with the share of memory it may take, and a share too small for the
 * weights leaves no room, said so. */
Test(kernels_cpu, blocks_that_fit_follow_the_memory_share)
{
    kb_options o = fixture_options(KB_CPU);
    char err[512] = "";
    long half = kb_blocks_that_fit(&o, 0.5, err, sizeof err), quarter = kb_blocks_that_fit(&o, 0.25, err, sizeof err);
    cr_assert_gt(quarter, 0, "%s", err);
    cr_assert_gt(half, quarter);
    cr_assert_eq(kb_blocks_that_fit(&o, 1e-12, err, sizeof err), -1);
    cr_assert(strstr(err, "no room for a KV pool"), "message: %s", err);
}

Test(kernels_cpu, open_refuses_bad_shapes_and_missing_cuda)
{
    static const struct { const char *field; int layers, heads, kv_heads, head_dim, hidden; }
        bad[] = {
            {"num_kv_heads", 2, 6, 4, 16, 128},
            {"head_dim", 2, 8, 2, 15, 128},
            {"hidden", 2, 8, 2, 16, 0},
            {"num_layers", -1, 8, 2, 16, 128},
        };
    char err[512];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kb_options o = fixture_options(KB_CPU);
        o.shape.num_layers = bad[i].layers;
        o.shape.num_heads = bad[i].heads;
        o.shape.num_kv_heads = bad[i].kv_heads;
        o.shape.head_dim = bad[i].head_dim;
        o.shape.hidden = bad[i].hidden;
        err[0] = 0;
        cr_assert_null(kb_open(&o, err, sizeof err));
        cr_assert(strstr(err, bad[i].field), "expected %s in: %s", bad[i].field, err);
    }
    kb_options o = fixture_options(KB_CPU);
    o.kind = KB_CUDA;
    err[0] = 0;
    kb_backend *gpu = kb_open(&o, err, sizeof err);
    if (gpu) kb_close(gpu); /* a machine with a GPU and a CUDA build opens it */
    else cr_assert(strstr(err, "CUDA"), "message: %s", err);
    cr_assert_eq(kb_weight_bytes(&o.shape, KB_CUDA) * 2, kb_weight_bytes(&o.shape, KB_CPU));
}

Test(kernels_cpu, forward_rejects_a_bad_batch)
{
    kb_options o = fixture_options(KB_CPU);
    kb_backend *b = fixture_open(&o);
    int32_t ids[2] = {1, VOCAB}, pos[2] = {0, 1}, slots[2] = {0, 1}, qs[2] = {0, 2},
            ctx[1] = {2}, table[MAX_BLOCKS_PER_SEQ] = {0};
    kb_batch batch = {2, ids, pos, slots, 1, qs, ctx, table};
    cr_assert_neq(kb_forward(b, &batch, NULL), 0);
    cr_assert(strstr(kb_error(b), "vocabulary"), "error: %s", kb_error(b));
    ids[1] = 2;
    table[0] = NUM_BLOCKS;
    cr_assert_neq(kb_forward(b, &batch, NULL), 0);
    cr_assert(strstr(kb_error(b), "block"), "error: %s", kb_error(b));
    float logits[VOCAB];
    cr_assert_neq(kb_get_logits(b, logits), 0, "no forward has succeeded yet");
    kb_close(b);
}
