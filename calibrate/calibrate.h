/* Calibration: times the real backend's parts over sweeps of shapes and writes a cost table
 * (bench/costtab.h) that the simulator interpolates. */
#ifndef SERVESIM_CALIBRATE_CALIBRATE_H
#define SERVESIM_CALIBRATE_CALIBRATE_H

#include <stdio.h>
#include "bench/costtab.h"
#include "kernels/backend.h"

typedef struct calib_options {
    kb_options kb;         /* kind, shape, seeds, threads; the pool is sized here */
    const char *model_name;
    int block_size;
    int max_tokens;        /* largest batched token count and prefill chunk */
    int max_context;       /* largest context a sequence attends to */
    int max_seqs;          /* largest batch of sequences */
    int repeats;           /* timed runs per shape (median), after one warm-up run */
    void (*progress)(void *ctx, int done, int total);
    void *progress_ctx;
} calib_options;

/* Medians of one shape's parts over the repeats, in seconds. */
typedef struct calib_timed {
    double linear, prefill, decode, lm_head, sample, total;
} calib_timed;

/* A backend opened with a pool for the options' largest shapes, to time single shapes. */
typedef struct calib calib_probe;
/* NULL with *STATUS 2 (the backend refused) or 1, and a reason in ERR. */
calib_probe *calibrate_probe_open(const calib_options *o, int *status, char *err, size_t errlen);
/* Times NSEQ sequences of Q new tokens after CTX cached ones (forward and sampling). */
int calibrate_probe_measure(calib_probe *c, int nseq, int q, int ctx, calib_timed *out);
const char *calibrate_probe_device(const calib_probe *c);
const char *calibrate_probe_error(const calib_probe *c);
void calibrate_probe_close(calib_probe *c);

/* Runs the sweeps into OUT (metadata included). Returns 0, 2 when the backend refuses (no
 * device, too large), 1 on other failures; a reason in ERR. */
int calibrate_run(const calib_options *o, cost_table *out, char *err, size_t errlen);
/* Holds out every other interior point of each sweep, interpolates it from the rest, and
 * prints the error per component. Returns the largest relative error seen. */
double calibrate_check(const cost_table *t, FILE *report);
/* Shape metadata as written into tables, to check that a table fits a model. */
void calibrate_shape_string(const kb_shape *s, char *out, size_t len);

#endif
