/* One simulator run of a scenario: workload, scheduler, cost model, records, result files.
 * `run`, `bench` and the commands built on them share it. */
#ifndef SERVESIM_STUDY_SIMJOB_H
#define SERVESIM_STUDY_SIMJOB_H

#include "metrics/metrics.h"
#include "config/scenario.h"
#include "sim/sim.h"

/* Exit statuses every command uses. EXIT_PAST_LIMITS is validate's verdict: it ran and
 * compared, and some error is past its [validate] limit; a script tells it from a failure. */
enum { EXIT_OK = 0, EXIT_FAILURE_OTHER = 1, EXIT_BAD_INPUT = 2, EXIT_PAST_LIMITS = 3 };

typedef struct simjob {
    const scenario *sc;
    const char *out_dir;     /* NULL: statistics only, no files */
    bool progress;           /* a progress line on stderr when it is a terminal */
    bool timeline;           /* with OUT_DIR and several instances: OUT_DIR/timeline.png */
    summary sum;
    sim_stats stats;
    bool have_summary;       /* false when no measured request finished */
    bool keep_records;       /* keep a copy of the request records in RECORDS */
    req_record *records;     /* malloc'd when keep_records and the run succeeded; caller frees */
    size_t num_records;
    char cost_kind[16];      /* after the run: "measured", "table" or "roofline" */
    int64_t *replica_requests; /* during the run: requests per replica (deployment.replicas > 1) */
    struct sim_instance_stats *instances; /* during the run: each replica's steps, tokens, busy time */
    char cost_source[1024];  /* which table or roofline priced the steps */
    char frontend[160];      /* after the run: the API server it priced, "" for none */
    char kv_cache[SCENARIO_KV_CACHE_TEXT]; /* after the run: each instance's KV pool, in words */
    char scheduler[SCENARIO_SCHED_TEXT];   /* and its scheduler */
    char rejected[400];      /* after the run: why measured requests were rejected, "" for none */
} simjob;

/* Returns an exit status; on failure ERR says why. */
int simjob_run(simjob *j, char *err, size_t errlen);

/* The tokens R's KV pool holds, when they are fewer than one sequence of max_model_len:
 * vLLM refuses to start so (a run here rejects what cannot fit, and warns); -1 otherwise. */
long long simjob_short_pool(const scenario_resolved *r);
/* About the memory a run of R takes for its replicas' block pools (sched_memory_bytes each). */
double simjob_pool_bytes(const scenario_resolved *r);
/* -1, naming deployment.replicas and what it would take, when R's block pools alone pass the
 * memory this machine has available: simjob_run refuses such a run before any work, and sweep
 * and plan check their points with it before theirs. */
int simjob_check_pool_memory(const scenario_resolved *r, char *err, size_t errlen);

#endif
