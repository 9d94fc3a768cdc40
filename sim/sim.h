/* The discrete-event simulator: the shared scheduler, driven in virtual time, with step times
 * from a cost model. Same scenario and seed, same records, byte for byte. */
#ifndef SERVESIM_SIM_SIM_H
#define SERVESIM_SIM_SIM_H

#include <signal.h>

#include <stddef.h>
#include "workload/workload.h"
#include "core/recorder.h"
#include "core/sched.h"
#include "sim/router.h"
#include "sim/frontend.h"

/* How long a batch takes, in seconds: a roofline, or a calibrated table. */
typedef struct step_cost {
    double (*step_time)(const void *ctx, const sched_batch *b);
    const void *ctx;
    /* Where the simulator writes each step's start time before pricing it (NULL: not
     * wanted); a replay of measured times needs it to stay on the engine's clock. */
    double *now;
    /* The earliest time an idle replica with work may start its next step (NULL: at once).
     * A replay returns when the engine started it: the engine spends time between steps
     * (records, waking up from a wait, a loaded machine), and requests arrive meanwhile. */
    double (*ready_time)(const void *ctx);
} step_cost;

typedef struct sim_options {
    sched_config sched;
    step_cost cost;
    int num_replicas;          /* instances, each its own scheduler and KV pool, one arrival stream */
    router_kind router;        /* which replica a request goes to (0: least outstanding) */
    /* Requests routed to each replica (NULL: not wanted; else num_replicas counters, zeroed
     * by the caller). */
    int64_t *replica_requests;
    /* Each replica's work (NULL: not wanted; else num_replicas entries, zeroed by the caller). */
    struct sim_instance_stats *instances;
    /* Disaggregated prefill and decode (num_prefill > 0): replicas 0 .. num_prefill - 1
     * prefill each request and emit its first token; its KV then moves, taking kv_latency_s
     * + prompt tokens x kv_s_per_token, to one of the other num_replicas - num_prefill
     * replicas, which decode the rest. The router picks on each side. 0: aggregated. */
    int num_prefill;
    double kv_latency_s, kv_s_per_token;
    /* The API server (the scenario's frontend.*; all 0: none). One event loop in front of the
     * instance does, in the order they come, each request's intake (request_s, after which
     * the scheduler sees it) and each step's output (step_s, plus token_s per request with a
     * token in it, after which those tokens reach their clients). The engine does not wait
     * for it, as vLLM V1's engine core does not. With servers > 1, request i is taken in and
     * streamed by server i mod servers, each its own loop; a step's tokens are seen when
     * the last server with some of them is done. Aggregated, one instance. */
    sim_frontend frontend;
    /* vLLM's async scheduling: the engine schedules step N + 1 while step N runs, so a new
     * request joins a step later than a synchronous engine's (sim.c, admit). The price of a
     * step is the cost model's; this is only when a request is first seen. */
    bool async_scheduling;
    /* Speculative decoding (sched.num_speculative_tokens > 0): each draft token is accepted
     * with its request's rate once those before it were (the workload's, else drawn from a
     * Beta distribution of mean ACCEPTANCE_RATE and std ACCEPTANCE_SPREAD, per request), drawn from a hash of (ACCEPTANCE_SEED,
     * request, position), so a token's fate does not depend on the batch it ran in; DRAFT
     * prices the drafting of a batch (step_time NULL: free, as n-gram lookup on the CPU). */
    double acceptance_rate, acceptance_spread; /* the mean and std of requests' own rates */
    uint64_t acceptance_seed;
    step_cost draft;
    /* Called now and then with the requests ended so far; may be NULL. */
    void (*progress)(void *ctx, size_t ended, size_t total);
    void *progress_ctx;
    /* Set (by a signal handler) to stop the run early; may be NULL. */
    const volatile sig_atomic_t *stop;
} sim_options;

/* One instance's share of the run. */
typedef struct sim_instance_stats {
    int64_t steps, output_tokens;
    double busy_s;             /* seconds spent in steps */
} sim_instance_stats;

typedef struct sim_stats {
    size_t events;
    int64_t steps;
    double end_time;
    /* disaggregated: KV transfers, and seconds in transfer and waiting on the decode side
     * (from the transfer's end to the request's first decode step) */
    int64_t kv_transfers;
    double frontend_busy_s;  /* the API servers' work, all of them together */
    double kv_transfer_mean_s, kv_transfer_p99_s, decode_wait_mean_s, decode_wait_p99_s;
} sim_stats;

/* Runs every request of W (sent as CFG's arrival settings say) to its end. Returns 0, or -1
 * with a reason in ERR (out of memory, or "interrupted" when *O->stop was set). */
int sim_run(const sim_options *o, workload *w, const wl_config *cfg, recorder *rc,
            sim_stats *stats, char *err, size_t errlen);

#endif
