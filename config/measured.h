/* Measured cost tables: costs/<gpu>/<model>.vllm-<version>.csv in servesim's data directory,
 * each composed from vLLM's kernels timed on that GPU (scripts/aic-import writes them), and
 * the choice of the one that prices a scenario. */
#ifndef SERVESIM_CONFIG_MEASURED_H
#define SERVESIM_CONFIG_MEASURED_H

#include <stddef.h>

/* servesim's data directory (with costs/, scenarios/, traces/), with a trailing '/':
 * $SERVESIM_DATA_DIR when set, else the first of the folders around the executable that has
 * costs/ (a build tree's source folder, an install's share/servesim), else the source tree
 * the binary was built from. -1 when none has costs/. */
int measured_data_dir(char *out, size_t len);

/* The measured table for GPU (a hardware preset name) and SHAPE (calibrate_shape_string's
 * form), of vLLM VERSION ("" = the newest there is). 1 with its path in PATH (and the data
 * directory in DATA_DIR) when one exists, 0 with the reason in WHY when none does. */
int measured_find(const char *gpu, const char *shape, const char *version, char *path, size_t pathlen,
                  char *why, size_t whylen);

/* The models measured tables exist for on GPU, as "model (vllm V), ..." in OUT ("" when none). */
void measured_list(const char *gpu, char *out, size_t len);

#endif
