/* Command lines of the study commands (sweep, capacity, run --repeat): the scenario file,
 * --seed and --set as every scenario command takes them, plus the command's own options. */
#ifndef SERVESIM_CLI_STUDY_ARGS_H
#define SERVESIM_CLI_STUDY_ARGS_H

#include "cli/options.h"
#include "config/scenario.h"

/* Loads SC (defaults, the file, then --seed and --set in order) and calls ON_OPT(CTX, flag,
 * value or NULL) for each of OPTS' options in command-line order. ON_OPT returns -1 after
 * printing its own message. Returns -1 after printing the problem (and USAGE for misuse). */
int study_parse_args(int argc, char **argv, const char *usage, const cli_opt *opts, int nopts, scenario *sc,
                     int (*on_opt)(void *ctx, const char *flag, const char *value), void *ctx);

#endif
