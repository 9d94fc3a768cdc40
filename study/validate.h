/* `servesim validate`'s points and what it writes about them: validation.json, report.md,
 * the latency plots and the line printed per point. */
#ifndef SERVESIM_STUDY_VALIDATE_H
#define SERVESIM_STUDY_VALIDATE_H

#include <stdbool.h>
#include "metrics/compare.h"
#include "io/outdir.h"
#include "config/scenario.h"

enum { MAX_POINTS = 32, MAX_ENGINE_RUNS = 9 };

typedef struct point {
    char rate[32], policy[32];
    cmp_result runs[MAX_ENGINE_RUNS]; /* engine run K against its own simulation */
    int num_runs;
    cmp_result cmp;                   /* over the runs (cmp_combine) */
    /* Each run replayed: simulated with that run's own measured step times (sim/replay.h). */
    cmp_result replays[MAX_ENGINE_RUNS], replay;
    int64_t replay_mismatch[MAX_ENGINE_RUNS]; /* first step whose batch differed; -1: none */
    int64_t replay_steps[MAX_ENGINE_RUNS];    /* steps the engine ran */
    bool passed;
    /* the judged errors past their limits, "p99_itl_ms -40.2% (limit 25%), ...": a FAIL named
     * none, and the stdout line has no ITL (a new user's trial) */
    char failed[400];
} point;

/* What priced the runs, for the report's header. */
typedef struct validation_info {
    const char *table;        /* the cost table as the report names it */
    const char *device;
    bool per_round;           /* each engine run priced by the calibration round just before it */
} validation_info;

int validate_write_json(const outdir *od, const point *pts, int n, const validation_info *vi, char *err,
                        size_t errlen);
int validate_write_report(const outdir *od, const point *pts, int n, const scenario *sc, const validation_info *vi,
                          bool plotted, char *err, size_t errlen);
/* pointN-latency.png from the run directories' requests.csv. */
int validate_plot_point(const outdir *od, int index, const point *p, const char *term, char *err, size_t errlen);
void validate_print_point(const point *p);

#endif
