/* Repeated runs (docs/method.md, pitfall 7): each metric's mean and spread over N summaries. Knows
 * nothing of where the summaries came from, so the simulator and the real engine share it. */
#ifndef SERVESIM_METRICS_REPEAT_H
#define SERVESIM_METRICS_REPEAT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "metrics/metrics.h"

typedef struct rep_stat {
    double mean, std, min, max;   /* std: sample standard deviation (n - 1), 0 for one run */
} rep_stat;

/* OUT[i] describes summary field i (metrics/sumfield.h order) over RUNS[0..n). n > 0. */
void rep_aggregate(const summary *runs, size_t n, rep_stat *out);
/* A summary holding every field's mean (integer fields rounded to the nearest). */
void rep_mean_summary(const rep_stat *st, summary *out);
/* repeats.csv: "repeat,seed,<every summary field>,<the latencies at run.percentiles>", one row
 * per run, repeat counted from 1. */
void rep_write_runs_csv(FILE *f, const summary *runs, const uint64_t *seeds, size_t n);
/* repeat_stats.csv: "metric,mean,std,min,max", one row per summary field, then one per latency
 * at run.percentiles (from RUNS[0..n), the runs ST describes). */
void rep_write_stats_csv(FILE *f, const rep_stat *st, const summary *runs, size_t n);
/* The headline metrics as "mean ± std [min, max]" over N runs. */
void rep_print_table(FILE *f, const rep_stat *st, size_t n);

#endif
