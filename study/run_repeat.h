/* `servesim run --repeat N`: the scenario with seeds run.seed, run.seed + 1, ... */
#ifndef SERVESIM_STUDY_RUN_REPEAT_H
#define SERVESIM_STUDY_RUN_REPEAT_H

#include <stdbool.h>

#include "config/scenario.h"

/* Writes OUT: the first seed's summary.json, requests.csv and steps.csv (as a plain run
 * would), repeats.csv (one row per seed) and repeat_stats.csv (each metric's mean, std, min,
 * max); prints the means ± std. JOBS threads. Returns an exit status. */
int run_repeats(const scenario *sc, const char *out, int repeat, int jobs, bool quiet);

#endif
