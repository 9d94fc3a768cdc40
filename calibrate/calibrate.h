/* Calibration: times the real backend's parts over sweeps of shapes and writes a cost table
 * (io/costtab.h) that the simulator interpolates. */
#ifndef SERVESIM_CALIBRATE_CALIBRATE_H
#define SERVESIM_CALIBRATE_CALIBRATE_H

#include <signal.h>
#include <stdio.h>
#include "io/costtab.h"
#include "kernels/backend.h"

typedef struct calib_options {
    kb_options kb;         /* kind, shape, seeds, threads; the pool is sized here */
    const char *model_name;
    int block_size;
    int max_tokens;        /* largest batched token count and prefill chunk */
    int max_context;       /* largest context a sequence attends to */
    int max_seqs;          /* largest batch of sequences */
    int repeats;           /* timed runs per shape in all (calibrate_expected), spread over the rounds */
    int rounds;            /* passes over the sweeps, each followed by a serving segment (0: 3) */
    int max_pool_blocks;   /* caps the KV pool below what memory holds (0: no cap) */
    void (*progress)(void *ctx, int done, int total);
    void *progress_ctx;
    const volatile sig_atomic_t *stop; /* set (Ctrl-C): the calibration ends, failing; may be NULL */
} calib_options;

/* One shape's parts over its repeats (a median or expected value), in seconds. */
typedef struct calib_timed {
    double linear, prefill, decode, lm_head, sample, total;
} calib_timed;

enum { CALIB_PARTS = 6 }; /* the fields of calib_timed, in order */
double calibrate_timed_part(const calib_timed *t, int k);
/* STAT (calibrate_median or calibrate_expected) of each part over N runs (at most 256). */
void calibrate_timed_stat(const calib_timed *runs, int n, double (*stat)(double *, int), calib_timed *out);
/* The median of V[0..N) (sorts V); NAN when N is 0. */
double calibrate_median(double *v, int n);
/* What the simulator should charge for a cost sampled N times: the mean of V[0..N), leaving
 * out stalls above STALL_FACTOR x the median (sorts V; NAN when N is 0). Not the median: a
 * shared machine's interference only ever slows a step down, so timings are skewed to the
 * right, and their median picks the fast state while the engine spends part of its time in
 * the slow one (docs/validation.md). A stall that rare is dropped so that one of them in a
 * handful of runs cannot drag a shape. */
enum { STALL_FACTOR = 3 };
double calibrate_expected(double *v, int n);

/* A backend opened with a pool for the options' largest shapes, to time single shapes. */
typedef struct calib calib_probe;
/* Sizes O's KV pool for its largest shapes: a block table row for the longest sequence, blocks
 * for max_seqs sequences of max_context, or as many as fit in POOL_MEMORY_FRACTION of the
 * device's memory next to the weights, or max_pool_blocks, when that is fewer (never fewer than
 * one row). Returns
 * the row width in blocks. */
#define POOL_MEMORY_FRACTION 0.9
int calibrate_size_pool(calib_options *o);
/* NULL with *STATUS 2 (the backend refused) or 1, and a reason in ERR. */
calib_probe *calibrate_probe_open(const calib_options *o, int *status, char *err, size_t errlen);
/* Times NSEQ sequences of Q new tokens after CTX cached ones (forward and sampling): the
 * medians of the options' repeats, after one warm-up run. */
int calibrate_probe_measure(calib_probe *c, int nseq, int q, int ctx, calib_timed *out);
/* The same shape timed RUNS times after one warm-up, each run's parts into OUT[0..RUNS). */
int calibrate_probe_runs(calib_probe *c, int nseq, int q, int ctx, int runs, calib_timed *out);
/* The median of what the forwards timed so far spent outside their timed parts. */
double calibrate_probe_glue(calib_probe *c);
const char *calibrate_probe_device(const calib_probe *c);
const char *calibrate_probe_error(const calib_probe *c);
void calibrate_probe_close(calib_probe *c);

/* A calibration taken round by round, so a caller can interleave its own measurements with
 * the rounds (validation serves its engine runs between them). */
typedef struct calib_session calib_session;
calib_session *calibrate_begin(const calib_options *o, char *err, size_t errlen);
/* One round: every shape timed once more, then a serving segment. ROUND_OUT (NULL: not
 * wanted) gets a table from this round alone, its own serving fit included. 0, 2 when the
 * backend refuses, 1 on other failures. */
int calibrate_next_round(calib_session *s, cost_table *round_out, char *err, size_t errlen);
/* The table over every round so far: each shape's expected time, the fit over all segments. */
int calibrate_finish(calib_session *s, cost_table *out, char *err, size_t errlen);
void calibrate_end(calib_session *s);

/* Runs the sweeps into OUT (metadata included). Returns 0, 2 when the backend refuses (no
 * device, too large), 1 on other failures; a reason in ERR. */
int calibrate_run(const calib_options *o, cost_table *out, char *err, size_t errlen);
/* The serving_scale_decode_by_seqs list ("1:s 2:s 4:s ...") up to the tc_seq_bucket of
 * MAX_SEQS into BUF: each bucket K's SCALE[K] where it has CALIB_MIN_BUCKET_STEPS STEPS[K],
 * else the nearest such bucket's (the lower on a tie), else FALLBACK (the decode scale over
 * all steps). SCALE and STEPS have an entry per bucket up to MAX_SEQS's. */
enum { CALIB_MIN_BUCKET_STEPS = 20 };
void calibrate_seq_scales(const double *scale, const size_t *steps, double fallback, int max_seqs, char *buf,
                          size_t len);
/* Holds out every other interior point of each sweep, interpolates it from the rest, and
 * prints the error per component. Returns the largest relative error seen, or -1 when no
 * point could be held out and interpolated (a sweep of 3 sizes or more, whose rest makes a grid). */
double calibrate_check(const cost_table *t, FILE *report);
/* Shape metadata as written into tables, to check that a table fits a model. */
void calibrate_shape_string(const kb_shape *s, char *out, size_t len);

#endif
