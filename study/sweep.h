/* Sweeps: one scenario run at many points, each point the scenario with some keys changed.
 * Points are explicit lists (--point) crossed with the cartesian product of varied keys
 * (--vary); point i is the same settings whatever the shard, thread count or machine, so
 * results can be split (--shard) and merged back. The simulator keeps no global state: each
 * point runs on its own scenario copy, in any thread, with identical results. */
#ifndef SERVESIM_STUDY_SWEEP_H
#define SERVESIM_STUDY_SWEEP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "metrics/metrics.h"
#include "metrics/repeat.h"
#include "config/scenario.h"

enum { SWEEP_MAX_AXES = 8, SWEEP_MAX_VALUES = 256, SWEEP_MAX_LISTED = 256, SWEEP_MAX_ASSIGN = 16 };
/* The most runs one sweep may hold (points x repeats): each is a whole simulation, and the
 * point count must fit an int everywhere it is used (8 axes of 256 values would not). */
enum { SWEEP_MAX_RUNS = 1000000 };

typedef struct sweep_assign {
    int key;                 /* scenario_key */
    char value[256];
} sweep_assign;

typedef struct sweep_axis {
    int key;
    int n;
    char (*values)[256];
} sweep_axis;

typedef struct sweep_listed {
    char label[64];          /* "" when the --point gave none */
    int n;
    sweep_assign a[SWEEP_MAX_ASSIGN];
} sweep_listed;

typedef struct sweep_plan {
    scenario base;           /* file, --seed and --set applied */
    sweep_axis axes[SWEEP_MAX_AXES];
    int naxes;
    sweep_listed *listed;
    int nlisted;
    int columns[K_COUNT];    /* keys any point changes, in order of first mention */
    int ncolumns;
    int repeat;              /* runs per point, seeds run.seed, run.seed + 1, ... */
    int shard, num_shards;   /* this process runs points with index % num_shards == shard */
} sweep_plan;

void sweep_plan_init(sweep_plan *p, const scenario *base);
void sweep_plan_free(sweep_plan *p);
/* "SECTION.KEY=V1,V2,...": one more axis. -1 with "--vary ...: reason" in ERR. */
int sweep_add_vary(sweep_plan *p, const char *spec, char *err, size_t errlen);
/* "[LABEL:]SECTION.KEY=V,SECTION.KEY=V": one more explicit point. -1 with a reason in ERR. */
int sweep_add_point(sweep_plan *p, const char *spec, char *err, size_t errlen);
/* "K/N" with 1 <= K <= N. -1 with a reason in ERR. */
int sweep_set_shard(sweep_plan *p, const char *spec, char *err, size_t errlen);
int sweep_num_points(const sweep_plan *p);
/* Points of the product per listed point (the stride of the first axis' siblings). */
int sweep_grid_size(const sweep_plan *p);
bool sweep_in_shard(const sweep_plan *p, int index);
/* Point INDEX's scenario. -1 with a reason in ERR (only when out of range). */
int sweep_point_scenario(const sweep_plan *p, int index, scenario *out, char *err, size_t errlen);
/* The listed point's label (or its values joined by '/', as KEY=VALUE where another point's
 * values alone read the same), then each axis value, by spaces. */
void sweep_point_label(const sweep_plan *p, int index, char *buf, size_t len);
/* Whether SC's seeds run.seed .. run.seed + REPEAT - 1 stay within run.seed's range: -1 with a
 * reason naming where run.seed came from and --repeat. */
int sweep_check_seeds(const scenario *sc, int repeat, char *err, size_t errlen);
/* Resolves every point of this shard: -1 with "point N (LABEL): reason" for the first bad one,
 * or the reason alone when it is the base scenario's seed, which no point set. */
int sweep_check(const sweep_plan *p, char *err, size_t errlen);
/* -1 with "--out OUT: reason (point N, LABEL)" when a file a point names (a --vary of
 * workload.trace, say) is OUT or inside it, which the result would replace. */
int sweep_check_inputs(const sweep_plan *p, const char *out, char *err, size_t errlen);
/* What makes two shards parts of one sweep: a hash (FNV-1a, 64 bits) of the base scenario's
 * every value, the axes, the listed points and the repeat count; not the shard. */
uint64_t sweep_identity(const sweep_plan *p);
/* The points times the repeats, counted in 64 bits (what SWEEP_MAX_RUNS bounds). */
int64_t sweep_runs_wanted(const sweep_plan *p);
/* The scenario key's "section.key" name. */
const char *sweep_key_name(int key);

typedef struct sweep_result {
    bool ran;                /* in this shard and run */
    int nruns;               /* repeats that measured something */
    summary sum;             /* the mean over those repeats (the run itself when repeat = 1) */
    rep_stat *stats;         /* sumf_count() entries, when nruns > 0 */
    summary *runs;           /* the nruns summaries, in seed order */
    uint64_t *seeds;         /* their seeds */
    req_record *records;     /* the first repeat's requests, when sweep_opts.keep_records */
    size_t num_records;
    char cost_kind[16];      /* the cost model that priced the point (simjob's) */
    char cost_source[1024];
} sweep_result;

typedef struct sweep_opts {
    int jobs;                /* threads */
    bool progress;           /* a progress bar on stderr when it is a terminal */
    const char *runs_dir;    /* non-NULL: each point's first repeat writes RUNS_DIR/NNN/ */
    bool keep_records;
} sweep_opts;

/* Runs this shard's points into RESULTS[0..sweep_num_points). Returns an exit status; on
 * failure ERR names the first failing point. Free RESULTS with sweep_results_free. */
int sweep_run(const sweep_plan *p, const sweep_opts *o, sweep_result *results, char *err, size_t errlen);
/* How many of JOBS threads may run at once when the N runs hold NEED bytes each (sorted here,
 * largest first) and AVAIL are free: as many of the largest as fit together, at least one (a
 * run too large alone is refused before, by sweep_check); JOBS when all fit. sweep_run lowers
 * its threads so, and says so: results do not depend on it. */
int sweep_threads_for_memory(double *need, int n, int jobs, double avail);
void sweep_results_free(sweep_result *r, int n);
/* Point INDEX's run directory name under runs_dir ("007"). */
void sweep_run_name(int index, char *buf, size_t len);

/* sweep.csv: point,label,<changed keys>,<summary fields>[,repeats,<field>_std,_min,_max...]. */
void sweep_write_csv(FILE *f, const sweep_plan *p, const sweep_result *r);
/* sweep.csv's header alone, as sweep_write_csv writes it (merge checks a shard's against it). */
void sweep_write_csv_header(FILE *f, const sweep_plan *p);
/* The start of point INDEX's row: "INDEX,LABEL" and, with VALUES, the value of every key any
 * point changes (sweep_plan.columns), each a CSV field, as sweep.csv's rows start; repeats.csv's
 * start with the first two. merge checks a shard's rows against it. */
void sweep_write_row_start(FILE *f, const sweep_plan *p, int index, bool values);
/* repeats.csv: point,label,repeat,seed,<summary fields>, one row per run (for --repeat > 1). */
void sweep_write_repeats_csv(FILE *f, const sweep_plan *p, const sweep_result *r);
/* repeats.csv's header alone (merge checks a shard's against it). */
void sweep_write_repeats_header(FILE *f, const sweep_plan *p);
/* sweep.json: the facts merge needs (total points, shard, repeat, the sweep's identity), and in
 * a shard the command line (ARGV after the command name) and the folder it ran in, from which
 * merge makes the plan again to draw the plots. */
int sweep_write_json(FILE *f, const sweep_plan *p, int argc, char **argv);
/* A compact table of the headline metrics, one line per point run. */
void sweep_print_table(FILE *f, const sweep_plan *p, const sweep_result *r);

#endif
