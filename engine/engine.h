/* The real engine: the shared scheduler driven in wall-clock time, each batch executed on a
 * backend (kernels/), writing the same records as the simulator. */
#ifndef SERVESIM_ENGINE_ENGINE_H
#define SERVESIM_ENGINE_ENGINE_H

#include <signal.h>
#include <stddef.h>
#include "workload/workload.h"
#include "core/recorder.h"
#include "core/sched.h"
#include "kernels/backend.h"

typedef struct engine_options {
    sched_config sched;
    kb_options backend;        /* shapes, pool and threads; the pool fields are filled from sched */
    kb_sampling sampling;
    /* The streaming path: every token as it is produced, with its time; may be NULL. */
    void (*on_token)(void *ctx, const request *r, int32_t token, double time);
    void *on_token_ctx;
    void (*progress)(void *ctx, size_t ended, size_t total);
    void *progress_ctx;
    /* A cost model to ask what each executed batch should cost (validation); may be NULL. */
    double (*predict)(const void *ctx, const sched_batch *b);
    const void *predict_ctx;
    /* Set (by a signal handler) to stop serving early; may be NULL. */
    const volatile sig_atomic_t *stop;
} engine_options;

typedef struct engine_stats {
    int64_t steps;
    double end_time;           /* seconds from the start of the measured clock */
    double warmup_seconds;     /* backend warm-up before the clock starts */
    char device[160];
} engine_stats;

/* Fills the backend's pool fields (blocks, block size, table width, batch limits) from S. */
void engine_backend_options(const sched_config *s, kb_options *kb);
/* Runs every request of W in real time. Returns 0, 2 when the backend refuses (no device, too
 * large for memory: a user's choice), or 1 on any other failure, with a reason in ERR. */
int engine_run(const engine_options *o, workload *w, const wl_config *cfg, recorder *rc,
               engine_stats *stats, char *err, size_t errlen);
/* Builds CFG's workload, serves it with every step kept, and hands the steps to EACH before
 * freeing them: for callers that only read the steps (calibration, benchmarks). engine_run's
 * status, 1 when the workload cannot be built (reason in ERR), or EACH's non-zero return. */
int engine_run_steps(const engine_options *o, const wl_config *cfg,
                     int (*each)(void *ctx, const recorder *rc, char *err, size_t errlen), void *ctx,
                     char *err, size_t errlen);

#endif
