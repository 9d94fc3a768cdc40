/* What every run command shares: the progress line, the scenario in summary.json, and the
 * final write of requests.csv and summary.json before the result directory is renamed. */
#ifndef SERVESIM_CLI_JOB_H
#define SERVESIM_CLI_JOB_H

#include <stdbool.h>
#include <stdio.h>
#include <time.h>

#include "bench/metrics.h"
#include "bench/results.h"
#include "cli/scenario.h"

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

/* Writes `"scenario_file": ..., "scenario": {...}` as summary.json members. */
void job_scenario_json(FILE *f, const scenario *sc);
/* requests.csv and summary.json (the summary, then EXTRA_JSON), then renames the directory
 * into place. -1 with a reason in ERR. */
int job_write_results(res_dir *dir, met_acc *met, const summary *sum, const char *extra_json,
                      char *err, size_t errlen);

#endif
