/* Cost tables: step-time components measured on a real backend over sweeps of shapes.
 * A CSV with `# key: value` metadata lines, then `component,x,y,seconds` rows:
 *   linear       x = batched tokens                 (embedding, norms, GEMMs, rotary, activation)
 *   prefill_attn x = new tokens, y = cached context  (one sequence)
 *   decode_attn  x = sequences, y = context length   (one token each)
 *   lm_head      x = sequences                       (final norm and logits of last tokens)
 *   sample       x = sequences
 *   overhead     fixed per step (scheduling, input preparation, bookkeeping)
 * and, in tables of tensor-parallel GPUs (optional: a table of one GPU has no all-reduce):
 *   allreduce       x = batched tokens  (the step's all-reduces, each with the norm after it)
 *   allreduce_fused x = batched tokens  (the same as fused kernels: vLLM's fuse_allreduce_rms) */
#ifndef SERVESIM_IO_COSTTAB_H
#define SERVESIM_IO_COSTTAB_H

#include <stddef.h>

/* The first line ct_write writes: calibrate --out replaces only a file that starts with it. */
#define CT_FIRST_LINE "# servesim cost table"

typedef enum ct_component {
    CT_LINEAR, CT_PREFILL_ATTN, CT_DECODE_ATTN, CT_LM_HEAD, CT_SAMPLE, CT_OVERHEAD,
    CT_ALLREDUCE, CT_ALLREDUCE_FUSED, CT_COUNT,
    CT_FIRST_OPTIONAL = CT_ALLREDUCE /* every table has the components before it */
} ct_component;

const char *ct_component_name(ct_component c);

typedef struct ct_point {
    double x, y, seconds;
} ct_point;

enum { CT_MAX_META = 32 };
/* The largest price a row may hold: a day for one component of one step. */
#define CT_MAX_SECONDS 86400.0

typedef struct cost_table {
    char meta_key[CT_MAX_META][64];
    char meta_value[CT_MAX_META][256];
    int num_meta;
    ct_point *points[CT_COUNT];
    size_t n[CT_COUNT], cap[CT_COUNT];
} cost_table;

void ct_init(cost_table *t);
void ct_free(cost_table *t);
int ct_set_meta(cost_table *t, const char *key, const char *value);
const char *ct_meta(const cost_table *t, const char *key);
int ct_add(cost_table *t, ct_component c, double x, double y, double seconds);
/* Writes under a temporary name, then renames. -1 with "path: reason". */
int ct_write(const cost_table *t, const char *path, char *err, size_t errlen);
/* -1 with "path:line: reason" for a malformed row, "path: reason" otherwise. */
int ct_read(cost_table *t, const char *path, char *err, size_t errlen);
/* Only the `# key: value` lines before the header row (no rows): for choosing among tables. */
int ct_read_meta(cost_table *t, const char *path, char *err, size_t errlen);

#endif
