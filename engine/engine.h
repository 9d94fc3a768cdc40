/* The real engine: the shared scheduler driven in wall-clock time, each batch executed on a
 * backend (kernels/), writing the same records as the simulator. */
#ifndef SERVESIM_ENGINE_ENGINE_H
#define SERVESIM_ENGINE_ENGINE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include "workload/workload.h"
#include "core/recorder.h"
#include "core/sched.h"
#include "kernels/backend.h"

typedef struct engine_options {
    sched_config sched;
    kb_options backend;        /* shapes, pool and threads; the pool fields are filled from sched */
    kb_sampling sampling;
    /* Speculative decoding (sched.num_speculative_tokens > 0): drafts by prompt lookup of
     * suffixes of these lengths (vLLM's prompt_lookup_min and _max). */
    int prompt_lookup_min, prompt_lookup_max;
    /* ... or by a draft model of this shape (engine/drafter.h), with the backend's weight seed */
    bool spec_draft_model;
    kb_shape draft_shape;
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
    int blocks_in_use_at_end;  /* KV blocks still held once every request ended: 0, or a leak */
    char device[160];
    bool refused;              /* engine_start: the backend refused (no device, too large): a user's choice */
} engine_stats;

/* Fills the backend's pool fields (blocks, block size, table width, batch limits) from S; with
 * speculation a verifying sequence takes a backend sequence per position (engine/runner.h). */
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

/* ---- Live serving: requests submitted from other threads while the engine runs. ---- */

/* A request from outside. The submitter zeroes the job, fills the first block, and keeps the
 * job (and its prompt) alive until it is done: on_done was called, or engine_abort returned
 * (a no-op for a job never submitted). */
typedef struct engine_job {
    const int32_t *prompt;
    int prompt_len;
    int max_tokens;            /* generation runs to exactly this many tokens */
    /* Called on the engine thread: each token as the step that made it ends, then once, the
     * request's record (stop = length, too_long, kv_capacity or aborted). Keep them short. */
    void (*on_token)(void *ctx, int32_t token, double time);
    void (*on_done)(void *ctx, const req_record *rec);
    void *ctx;

    /* Set by the engine. */
    int64_t id;
    double arrival_time;       /* engine_now() when submitted */
    int phase;
    bool aborting;
    request *req;
    struct engine_job *next, *abort_next, *prev_live, *next_live;
} engine_job;

/* What /metrics shows; a consistent snapshot. */
typedef struct engine_gauges {
    int running, waiting;
    double kv_usage;           /* fraction of KV blocks in use */
    int64_t steps, finished, aborted;
    int64_t prompt_tokens, generation_tokens;
    int64_t prefix_hits, prefix_queries;   /* prompt tokens */
    int64_t spec_drafts, spec_draft_tokens, spec_accepted_tokens; /* speculative decoding */
    bool stopped;              /* the engine thread has ended (engine_stop, or a backend failure) */
} engine_gauges;

typedef struct engine_live engine_live;

/* Opens the backend, warms it up and starts the engine thread. NULL with a reason in ERR (and
 * STATS->refused when the backend refused the configuration, rather than failing).
 * O's on_token and predict are not used (each job has its own callbacks). */
engine_live *engine_start(const engine_options *o, engine_stats *stats, char *err, size_t errlen);
/* Seconds on the engine's clock (the clock of every time it reports). */
double engine_now(const engine_live *l);
/* Queues J (thread-safe). -1 when the engine is stopping. */
int engine_submit(engine_live *l, engine_job *j);
/* J's client went away (thread-safe): its request ends aborted and frees its blocks. Returns
 * once J is done; a no-op for a job already done. */
void engine_abort(engine_live *l, engine_job *j);
void engine_gauges_get(engine_live *l, engine_gauges *out);
/* Why the engine stopped by itself (a backend failure), or NULL. */
const char *engine_live_error(engine_live *l);
/* Aborts every job still running, ends the thread, frees everything. */
void engine_stop(engine_live *l);

#endif
