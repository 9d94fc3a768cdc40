/* Measured cost tables: costs/<gpu>/<model>.vllm-<version>.csv in servesim's data directory,
 * each composed from vLLM's kernels timed on that GPU (scripts/aic-import writes them), and
 * the choice of the one that prices a scenario. */
#ifndef SERVESIM_CONFIG_MEASURED_H
#define SERVESIM_CONFIG_MEASURED_H

#include <stdbool.h>
#include <stddef.h>

struct cost_table;

/* servesim's data directory (with costs/, scenarios/, traces/), with a trailing '/':
 * $SERVESIM_DATA_DIR when set, else the first of the folders around the executable that has
 * costs/ (a build tree's source folder, an install's share/servesim), else the source tree
 * the binary was built from. -1 when none has costs/. */
int measured_data_dir(char *out, size_t len);

/* The measured table for GPU (a hardware preset name), SHAPE (calibrate_shape_string's
 * form), tensor parallelism TP (a table's `tensor_parallel` header; 1 when it has none) and
 * precision (FP8_WEIGHTS: FP8 linear layers, its `quantization` header; FP8_KV: an FP8 KV
 * cache, its `kv_cache_dtype` header; else bf16), of vLLM VERSION ("" = the newest there
 * is). 1 with its path in PATH when one exists, 0 with the reason in WHY when none does. */
int measured_find(const char *gpu, const char *shape, int tp, bool fp8_weights, bool fp8_kv, const char *version,
                  char *path, size_t pathlen, char *why, size_t whylen);

/* A table's tensor parallelism: its `tensor_parallel` header, 1 when it has none, 0 when
 * the header is not a positive number. */
int measured_table_tp(const struct cost_table *t);
/* Whether a table prices FP8 linear layers (its `quantization` header), and an FP8 KV cache
 * (its `kv_cache_dtype` header saying fp8; none, or another, is the model's bf16). */
bool measured_table_fp8_weights(const struct cost_table *t);
bool measured_table_fp8_kv(const struct cost_table *t);
/* A precision in words: "with FP8 weights and KV cache", "with FP8 weights and a bf16 KV
 * cache" or "in bf16". */
const char *measured_precision_words(bool fp8_weights, bool fp8_kv);

/* The models measured tables exist for on GPU, as "model (vllm V), model (vllm V; bf16 tp 1, 2,
 * 4; fp8 tp 1), ..." in OUT ("" when none): bf16 at tp 1 alone goes unsaid. */
void measured_list(const char *gpu, char *out, size_t len);

#endif
