/* Step times from a calibrated cost table: each component interpolated on its sweep grid
 * (piecewise linear, bilinear for the two-dimensional ones), summed over the step's batch:
 *   step = scale x [linear(batched tokens) + lm_head(sequences) + sample(sequences)
 *                   + sum over multi-token items of prefill_attn(new tokens, cached context)
 *                   + decode_attn(one-token items, their mean context)] + overhead
 * where the scale is the table's decode-only or with-prompt-tokens one.
 * Outside the grid it extrapolates from the nearest cell and warns once. */
#ifndef SERVESIM_SIM_TABLE_COST_H
#define SERVESIM_SIM_TABLE_COST_H

#include <stdbool.h>
#include <stddef.h>
#include "bench/costtab.h"
#include "engine/sched.h"

typedef struct grid {
    double *x, *y;       /* sorted distinct coordinates; y unused (ny = 1) for 1-D components */
    size_t nx, ny;
    double *s;           /* seconds, nx * ny, x-major */
} grid;

typedef struct table_cost {
    grid g[CT_COUNT];
    /* serving over isolated timings, for decode-like steps and for prompt-bound ones
     * (tc_prompt_bound; the table's serving_scale_decode and _prefill; 1 when absent) */
    double scale_decode, scale_prefill;
    char name[256];      /* for warnings */
    bool warned;
} table_cost;

/* One component's grid from its rows; -1 with a reason when they do not form a full grid. */
int tc_build_grid(grid *g, const ct_point *p, size_t n, bool two_d, const char *comp, char *err, size_t errlen);
/* Builds the grids; -1 with a reason when a component is missing or not a full grid. */
int tc_init(table_cost *tc, const cost_table *t, const char *name, char *err, size_t errlen);
void tc_free(table_cost *tc);
/* Seconds for component C at (X, Y); sets *OUTSIDE when it had to extrapolate. */
double tc_component(const table_cost *tc, ct_component c, double x, double y, bool *outside);
/* Which serving scale prices a step: a step is prompt-bound when it computes more prompt
 * tokens than it decodes sequences. A few prompt tokens riding along with many decodes cost
 * like a decode step, and fitting them into the prefill scale let decode-dominated steps
 * set the price of prompt-heavy ones. The calibration's fit classifies with the same rule. */
static inline bool tc_prompt_bound(int num_prefill_tokens, int num_decode_seqs)
{
    return num_prefill_tokens > num_decode_seqs;
}
/* CTX is a table_cost (the step_cost signature). */
double tc_step_time(const void *ctx, const sched_batch *b);

#endif
