/* Step times from a calibrated cost table: each component interpolated on its sweep grid
 * (piecewise linear, bilinear for the two-dimensional ones), summed over the step's batch:
 *   step = scale x [linear(batched tokens) + all-reduces(batched tokens)
 *                   + lm_head(sequences) + sample(sequences)
 *                   + sum over multi-token items of prefill_attn(new tokens, cached context)
 *                   + decode_attn(one-token items, their mean context)] + overhead
 * where a tensor-parallel table's all-reduces are allreduce_fused for steps of up to
 * fused_max_tokens (vLLM fuses them), allreduce otherwise (none in a table of one GPU)
 * where the scale is the table's prompt-bound one, or for a decode-like step the one for its
 * number of sequences (serving_scale_decode_by_seqs; serving_scale_decode when absent).
 * Outside the grid it extrapolates from the nearest cell and warns once. */
#ifndef SERVESIM_SIM_TABLE_COST_H
#define SERVESIM_SIM_TABLE_COST_H

#include <stdbool.h>
#include <stddef.h>
#include "io/costtab.h"
#include "core/sched.h"

typedef struct grid {
    double *x, *y;       /* sorted distinct coordinates; y unused (ny = 1) for 1-D components */
    size_t nx, ny;
    double *s;           /* seconds, nx * ny, x-major */
} grid;

enum { TC_SEQ_BUCKETS = 16 }; /* sequences 1, 2-3, 4-7, ... 32768-65535 */

typedef struct table_cost {
    grid g[CT_COUNT];
    /* serving over isolated timings, for decode-like steps and for prompt-bound ones
     * (tc_prompt_bound; the table's serving_scale_decode and _prefill; 1 when absent) */
    double scale_decode, scale_prefill;
    /* decode-like steps by tc_seq_bucket of their sequences, from serving_scale_decode_by_seqs
     * ("1:s0 2:s1 4:s2 ...", bounds from 1 doubling); buckets past the last take its scale */
    double scale_by_seqs[TC_SEQ_BUCKETS];
    int num_seq_buckets; /* 0: none given, scale_decode prices every decode-like step */
    /* steps of up to this many tokens take allreduce_fused, longer ones allreduce: vLLM fuses
     * the all-reduces whose message is at most its threshold (0: no fusion; set by the caller,
     * tc_init leaves it 0) */
    double fused_max_tokens;
    char name[256];      /* for warnings */
    bool warned;
} table_cost;

/* One component's grid from its rows; -1 with a reason when they do not form a full grid. */
int tc_build_grid(grid *g, const ct_point *p, size_t n, bool two_d, const char *comp, char *err, size_t errlen);
/* Builds the grids; -1 with a reason when a component is missing or not a full grid. */
int tc_init(table_cost *tc, const cost_table *t, const char *name, char *err, size_t errlen);
void tc_free(table_cost *tc);
/* Whether the table priced component C (the optional ones, CT_FIRST_OPTIONAL on, may be absent). */
static inline bool tc_has(const table_cost *tc, ct_component c)
{
    return tc->g[c].nx > 0;
}
/* Seconds for component C at (X, Y); sets *OUTSIDE when it had to extrapolate. 0 for an
 * optional component the table lacks. */
double tc_component(const table_cost *tc, ct_component c, double x, double y, bool *outside);
/* Which serving scale prices a step: a step is prompt-bound when it computes more prompt
 * tokens than it decodes sequences. A few prompt tokens riding along with many decodes cost
 * like a decode step, and fitting them into the prefill scale let decode-dominated steps
 * set the price of prompt-heavy ones. The calibration's fit classifies with the same rule. */
static inline bool tc_prompt_bound(int num_prefill_tokens, int num_decode_seqs)
{
    return num_prefill_tokens > num_decode_seqs;
}
/* The bucket of a step of SEQS sequences: floor(log2(SEQS)), at most TC_SEQ_BUCKETS - 1. A
 * decode step's cost grows with its batch differently in serving than in the sweeps (on the
 * GPU, graph replay saves a fixed launch cost that weighs most on small batches; on the CPU,
 * a few sequences keep their working set in cache), so one scale cannot price them all. */
static inline int tc_seq_bucket(int seqs)
{
    int k = 0;
    while (seqs > 1 && k < TC_SEQ_BUCKETS - 1) {
        seqs >>= 1;
        k++;
    }
    return k;
}
/* The serving scale of a decode-like step of SEQS sequences. */
double tc_decode_scale(const table_cost *tc, int seqs);
/* CTX is a table_cost (the step_cost signature). */
double tc_step_time(const void *ctx, const sched_batch *b);

#endif
