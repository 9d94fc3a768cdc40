/* What every run command shares: the progress line, the scenario in summary.json, and the
 * final write of requests.csv and summary.json before the result directory is renamed. */
#ifndef SERVESIM_STUDY_JOB_H
#define SERVESIM_STUDY_JOB_H

#include <stdbool.h>
#include <stdio.h>
#include <time.h>

#include "metrics/metrics.h"
#include "io/results.h"
#include "config/scenario.h"
#include "sim/draft_cost.h"
#include "sim/sim.h"
#include "sim/table_cost.h"

typedef struct job_progress {
    struct timespec start;
    const char *verb;     /* "simulating", "serving" */
    bool shown;
} job_progress;

void job_progress_start(job_progress *p, const char *verb);
/* A progress callback: prints on stderr once the job has taken a second. */
void job_progress_show(void *ctx, size_t ended, size_t total);
void job_progress_end(job_progress *p);
double job_seconds_since(const struct timespec *t0);

/* vLLM's host work per sequence of a step, in seconds, where neither the scenario nor the
 * table says otherwise: EngineCore.step less the model's forward, logits and sampler, fitted
 * over pure decode steps of 1-256 sequences (scripts/vllm-step-host.py on vLLM 0.20.2's CPU
 * build; docs/data/vllm-step-host.json, docs/cost-model.md). The tables of the kernel
 * database carry it too (host_us_per_seq). */
#define JOB_VLLM_HOST_S_PER_SEQ 11.1e-6

/* Where the simulator's step times come from: a cost table (the scenario's own, or the
 * measured one for its GPU and model), or the roofline. */
typedef struct job_cost {
    cost_model roofline;
    table_cost table;
    bool use_table;
    /* vLLM's host work per sequence of a step (hardware.host_us_per_seq, else the table's, else
     * JOB_VLLM_HOST_S_PER_SEQ for the roofline) and whether it overlaps the GPU's work
     * (scheduler.async_scheduling): a step costs max(GPU, host) then, else GPU + host */
    double host_s_per_seq;
    bool async_scheduling;
    /* a draft model's forwards, which run on the GPU in the same step (job_spec_options), so
     * async scheduling's host work overlaps them too; and the last step's, for the simulator */
    draft_cost *draft;
    double drafted;
    const char *kind;    /* "measured", "table" (hardware.cost_table) or "roofline" */
    char device[256];    /* the table's device, or the roofline's hardware */
    char source[1024];   /* for people: which table or which roofline, and why */
} job_cost;

/* Chooses and reads the cost model: hardware.cost_table when given (its shape must be the
 * scenario's model), else with hardware.cost_model = measured the measured table for the
 * GPU and the model when there is one, else the roofline. -1 with "path: reason" in ERR. */
int job_cost_init(job_cost *c, const scenario_resolved *r, char *err, size_t errlen);
step_cost job_cost_fn(job_cost *c);
/* The fixed per-step part of C's price (the framework's overhead beside the kernels). */
double job_cost_step_overhead(const job_cost *c);
/* "measured, costs/..." or "roofline, ...": which cost model prices SC, for reports; "?"
 * with the reason when SC does not resolve. */
void job_cost_describe(const scenario *sc, char *out, size_t len);
/* Where SC's paged scheduler has chunked prefill or prefix caching off (vLLM's V1 engine, and
 * servesim by default, have both on), a note saying so; "" else. */
void job_scheduler_note(const scenario *sc, char *out, size_t len);
/* `"cost_model": ..., "cost_source": ...` as summary.json members (no trailing comma). */
int job_cost_json(json_t *obj, const job_cost *c);
void job_cost_free(job_cost *c);
/* The price of drafting: none for n-gram lookup (a CPU search of the sequence, between
 * steps); for a draft model, its forwards on the target's GPUs, priced as a run of that model
 * would be (its own measured table where there is one, else its roofline), in bf16. */
typedef struct job_spec {
    bool on;
    job_cost model;
    draft_cost draft;
} job_spec;

int job_spec_init(job_spec *sp, const scenario_resolved *r, char *err, size_t errlen);
void job_spec_free(job_spec *sp);
/* O's speculative fields from R and SP: the acceptance (rate, spread, seed) and drafting's
 * price, which C (O's cost) then computes with each step's own: a step costs
 * max(GPU + drafting, host) with async scheduling, GPU + drafting + host without. */
void job_spec_options(job_spec *sp, const scenario_resolved *r, job_cost *c, sim_options *o);

/* How a run speculates (summary.json's "speculative"): k, the method, disable_by_batch_size,
 * and prompt lookup's lengths or the draft model. NULL when out of memory. */
json_t *job_speculative_json(const scenario_resolved *r);

/* The scheduler as resolved (summary.json's "scheduler"): the scenario's keys record 0 where
 * vLLM's defaults for the GPU stood in, and *_source says which. ASYNC_SCHEDULING: whether the
 * run scheduled ahead (the real engine never does). NULL when out of memory. */
json_t *job_scheduler_json(const scenario_resolved *r, bool async_scheduling);
/* One instance's KV pool (summary.json's "kv_cache"), as vLLM logs its "GPU KV cache size":
 * blocks, block size, tokens, and what set it (kv.num_blocks; else derived from the GPU's
 * memory, whose GiB a GPU and reserve it adds, or, for the real ENGINE, engine.kv_gib). NULL
 * when out of memory. */
json_t *job_kv_cache_json(const scenario_resolved *r, bool engine);

/* -1 with why in ERR where R's scheduler rejects every measured (not warm-up) request of W on
 * arrival (each longer than scheduler.max_model_len, or needing more KV than the whole pool):
 * a run of it could finish none, so a command that must compare finished requests refuses it
 * before it runs. 0 otherwise, and where W has no measured request; *REJECTED (when not NULL)
 * counts the measured requests it rejects. */
int job_check_admission(const scenario_resolved *r, const workload *w, size_t *rejected, char *err, size_t errlen);

/* Writes `"scenario_file": ..., "scenario": {...}` as summary.json members. */
int job_scenario_json(json_t *obj, const scenario *sc);
/* summary.json (the summary, then EXTRA_JSON) beside the streamed steps.csv and requests.csv,
 * then renames the directory into place. -1 with a reason in ERR. */
int job_write_results(res_dir *dir, const summary *sum, const json_t *extra, char *err, size_t errlen);

#endif
