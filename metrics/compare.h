/* Validation: the same requests through the simulator and the real engine, metric by metric.
 * rel_error = (simulated - measured) / |measured|; a metric measured as 0 has error 0 when
 * simulated as 0 too, and is infinite otherwise. */
#ifndef SERVESIM_METRICS_COMPARE_H
#define SERVESIM_METRICS_COMPARE_H

#include <stddef.h>
#include <stdint.h>
#include "metrics/metrics.h"
#include "metrics/records.h"

enum { CMP_MAX_ROWS = 48 };

typedef struct cmp_row {
    char metric[40];
    double simulated, measured, rel_error;
    /* Over several runs (cmp_combine): medians, and spread = (max - min) / |median| of the
     * measured values, the engine's own run-to-run disagreement; 0 for one run. */
    double spread;
} cmp_row;

typedef struct cmp_result {
    cmp_row rows[CMP_MAX_ROWS];
    int num_rows;
    /* Per step of the real run: the cost model's prediction for that very batch against the
     * measured duration (mean absolute percentage error), over steps that carry one. */
    double step_mape;
    int64_t steps_predicted;
    /* The first step whose batch differs between the two runs (-1: none within the shorter). */
    int64_t first_divergence;
} cmp_result;

typedef struct cmp_side {
    const summary *sum;
    const req_record *reqs;
    size_t num_reqs;
    const step_record *steps;
    size_t num_steps;
} cmp_side;

/* Compares SIM against REAL. -1 with a reason when the request sets differ (a request missing
 * on one side is an error, not a smaller sample). */
int cmp_runs(const cmp_side *sim, const cmp_side *real, cmp_result *out, char *err, size_t errlen);
double cmp_rel_error(double simulated, double measured);
/* N runs of the engine against their simulations (RUNS[i] from cmp_runs): per metric the
 * median simulated and measured values, the error between those medians, and the measured
 * runs' spread; the step error over all runs' steps; run 0's first divergence. N < 1 gives
 * no rows. */
void cmp_combine(const cmp_result *runs, int n, cmp_result *out);
/* The row named METRIC, or NULL. */
const cmp_row *cmp_find(const cmp_result *r, const char *metric);

#endif
