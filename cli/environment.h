/* What a measured result must say about where it was measured (docs/method.md, pitfall 6). */
#ifndef SERVESIM_CLI_ENVIRONMENT_H
#define SERVESIM_CLI_ENVIRONMENT_H

#include <stdio.h>

#include "io/json.h"

/* Writes `"environment": {...}` as a summary.json member: device, CPU, libraries, commit. */
/* Adds "environment": {...} to OBJ; -1 when out of memory. */
int env_json(json_t *obj, const char *backend, const char *device, int threads);
/* The source tree's short commit hash, or "unknown" outside a git checkout. */
void env_git_commit(char *out, size_t len);
/* Re-executes the program with OPENBLAS_CORETYPE set when OpenBLAS fell back to generic
 * kernels on a CPU it did not recognize. Returns only when no re-exec was needed or it failed. */
void env_fix_blas_core(char **argv);
/* Raises the open-file limit to its hard maximum: 1,000 concurrent streams (serve, load)
 * need more descriptors than the usual soft limit of 1,024. */
void env_raise_fd_limit(void);

#endif
