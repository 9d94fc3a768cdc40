/* The tiny model both backend test files open: one definition, so the CPU-vs-CUDA agreement
 * tests compare against exactly the model the CPU tests check. */
#ifndef SERVESIM_TESTS_KERNEL_FIXTURE_H
#define SERVESIM_TESTS_KERNEL_FIXTURE_H

#include <criterion/criterion.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <string.h>

#include "kernels/backend.h"

#define MAX_TOKENS 128
#define MAX_SEQS 8
#define MAX_BLOCKS_PER_SEQ 32
#define NUM_BLOCKS 64
#define VOCAB 512

/* max |a - ref| / max |ref|: one scale for the whole vector, so near-zero entries of a
 * correct result do not blow the error up; NaN anywhere fails. */
static inline double rel_err(const float *a, const float *ref, size_t n)
{
    double diff = 0.0, scale = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]))
            return INFINITY;
        diff = fmax(diff, fabs((double)a[i] - ref[i]));
        scale = fmax(scale, fabs((double)ref[i]));
    }
    return scale > 0.0 ? diff / scale : diff;
}

static inline void fill_uniform(float *x, size_t n, gsl_rng *rng)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(2.0 * gsl_rng_uniform(rng) - 1.0);
}

static inline kb_options fixture_options(kb_kind kind)
{
    return (kb_options){
        .kind = kind,
        .shape = {.num_layers = 2, .hidden = 128, .num_heads = 8, .num_kv_heads = 2,
                  .head_dim = 16, .intermediate = 256, .vocab = VOCAB, .rope_theta = 10000.0f,
                  .rms_eps = 1e-5f},
        .weight_seed = 42, .num_blocks = NUM_BLOCKS, .block_size = 4,
        .max_num_seqs = MAX_SEQS, .max_num_tokens = MAX_TOKENS,
        .max_blocks_per_seq = MAX_BLOCKS_PER_SEQ, .threads = 2, .sample_seed = 7,
    };
}

static inline kb_backend *fixture_open(const kb_options *o)
{
    char err[512];
    kb_backend *b = kb_open(o, err, sizeof err);
    cr_assert_not_null(b, "kb_open: %s", err);
    return b;
}

/* Token ids from a fixed LCG: the same prompt in every test run. */
static inline void fill_tokens(int32_t *t, int n, unsigned seed)
{
    for (int i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        t[i] = (int32_t)((seed >> 8) % VOCAB);
    }
}

/* N block ids starting at FIRST in a fixed scattered order of the pool (37 is coprime to 64),
 * so neighbouring logical blocks are never neighbours in memory. */
static inline void scattered_blocks(int32_t *blocks, int first, int n)
{
    for (int i = 0; i < n; i++)
        blocks[i] = ((first + i) * 37 + 11) % NUM_BLOCKS;
}

/* What one sequence does in a forward: computes N_NEW tokens after CACHED ones already in its
 * blocks; PAD marks its tokens as padding (slot -1, not counted in the context). */
typedef struct seq_step {
    const int32_t *tokens;
    const int32_t *blocks;
    int cached, n_new, pad;
} seq_step;



static inline void fixture_run(kb_backend *b, int bs, const seq_step *steps, int n, float *logits,
                      kb_timing *tm)
{
    int32_t ids[MAX_TOKENS], pos[MAX_TOKENS], slots[MAX_TOKENS], qs[MAX_SEQS + 1], ctx[MAX_SEQS],
        tables[MAX_SEQS * MAX_BLOCKS_PER_SEQ];
    int t = 0;
    for (int s = 0; s < n; s++) {
        const seq_step *st = &steps[s];
        qs[s] = t;
        ctx[s] = st->cached + (st->pad ? 0 : st->n_new);
        memcpy(tables + s * MAX_BLOCKS_PER_SEQ, st->blocks, MAX_BLOCKS_PER_SEQ * sizeof *tables);
        for (int i = 0; i < st->n_new; i++, t++) {
            int p = st->cached + i;
            ids[t] = st->tokens[p];
            pos[t] = p;
            slots[t] = st->pad ? -1 : st->blocks[p / bs] * bs + p % bs;
        }
    }
    qs[n] = t;
    kb_batch batch = {t, ids, pos, slots, n, qs, ctx, tables};
    cr_assert_eq(kb_forward(b, &batch, tm), 0, "kb_forward: %s", kb_error(b));
    if (logits)
        cr_assert_eq(kb_get_logits(b, logits), 0, "kb_get_logits: %s", kb_error(b));
}

#endif
