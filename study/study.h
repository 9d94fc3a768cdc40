/* The benchmark study on top of sweeps: plots of a sweep and the experiment reports of
 * the benchmark method (docs/method.md; docs/study.md describes each one). */
#ifndef SERVESIM_STUDY_STUDY_H
#define SERVESIM_STUDY_STUDY_H

#include <stdbool.h>
#include <stddef.h>

#include "study/sweep.h"

/* The plots of a finished sweep, from DIR/sweep.csv: latency and throughput against the first
 * --vary key when its values are numbers, bars per point otherwise. Prints a note and does
 * nothing without gnuplot. -1 with a reason in ERR when gnuplot fails. */
int study_sweep_plots(const sweep_plan *p, const char *dir, char *err, size_t errlen);

bool study_report_known(const char *experiment);
const char *study_report_names(void);
/* Whether the sweep plan P has the points EXPERIMENT's report needs, checked before the sweep
 * runs (arrival-rate: two Poisson rates; memory: two paged block sizes, or a continuous point
 * and a paged one of the same KV); -1 with what it needs in ERR. The report checks again,
 * with what ran. */
int study_report_check(const char *experiment, const sweep_plan *p, char *err, size_t errlen);
/* DIR/report.md for EXPERIMENT from a finished sweep whose runs are in DIR/points/ and whose
 * results hold the request records; ARGV is the command's arguments from its name on
 * ("sweep", ...), quoted at the top as a `servesim` command line. -1 on a failure, -2 when
 * the sweep lacks the points the experiment compares (the user's grid). */
int study_report(const char *experiment, const sweep_plan *p, const sweep_result *r, const char *dir, int argc,
                 char **argv, char *err, size_t errlen);

#endif
