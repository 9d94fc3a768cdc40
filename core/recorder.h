/* The records a run keeps, fed the same way by the real engine and the simulator: every step,
 * every token gap, every request that ends. Streams steps.csv and requests.csv when a result
 * directory is open, so memory grows by the 24 bytes of latencies a request keeps for exact
 * percentiles, not with steps or tokens. */
#ifndef SERVESIM_CORE_RECORDER_H
#define SERVESIM_CORE_RECORDER_H

#include "metrics/metrics.h"
#include "io/results.h"
#include "core/sched.h"

typedef struct recorder {
    met_acc *met;
    res_dir *dir;          /* NULL: keep statistics only */
    bool window_started;
    bool keep_steps;       /* also keep every step in memory (validation compares them) */
    step_record *steps;
    size_t num_steps, steps_cap;
} recorder;

void rec_init(recorder *rc, met_acc *met, res_dir *dir);
/* Frees the kept steps. */
void rec_free(recorder *rc);
/* R was sent at NOW; the first measured request opens the measurement window. */
void rec_sent(recorder *rc, const request *r);
/* Call before sched_complete (after sched_accept): the gap since each emitting request's
 * previous token, one per request and step (several tokens of an accepted draft arrive as one
 * chunk, as vLLM's benchmark counts them). */
void rec_tokens(recorder *rc, const sched_batch *b, double now);
void rec_step(recorder *rc, const step_record *s);
void rec_ended(recorder *rc, const request *r);
void req_to_record(const request *r, req_record *out);

#endif
