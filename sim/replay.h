/* A cost model that replays measured step times: the simulator's step I costs what the real
 * engine's step I took, while the two schedules agree. Fed the engine's own timings, the
 * simulator must reproduce the engine's latencies; what remains is the simulation's own
 * error (event handling, arrivals, metrics), apart from the cost model's. */
#ifndef SERVESIM_SIM_REPLAY_H
#define SERVESIM_SIM_REPLAY_H

#include <stddef.h>
#include <stdint.h>
#include "metrics/records.h"
#include "sim/sim.h"

typedef struct replay_cost {
    const step_record *steps;   /* the engine's, in order */
    size_t num_steps, next;
    step_cost fallback;         /* prices every step from the first that differs */
    int64_t first_mismatch;     /* -1 while the schedules agree */
    double now;                 /* the step's start in the simulator (step_cost.now) */
} replay_cost;

void replay_init(replay_cost *r, const step_record *steps, size_t num_steps, step_cost fallback);
/* A step_cost function; CTX is a replay_cost. */
double replay_step_time(const void *ctx, const sched_batch *b);
/* A step_cost ready_time function: when the engine started its next step. */
double replay_ready_time(const void *ctx);
/* The step_cost that replays R (its now field included). */
step_cost replay_step_cost(replay_cost *r);

#endif
