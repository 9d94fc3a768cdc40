/* Scenarios: INI files read with inih, every key defined once in scenario_keys.h. */
#ifndef SERVESIM_CONFIG_SCENARIO_H
#define SERVESIM_CONFIG_SCENARIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "io/json.h"
#include "metrics/metrics.h"
#include "workload/workload.h"
#include "config/scenario_keys.h"
#include "core/model.h"
#include "core/sched.h"
#include "sim/router.h"
#include "sim/frontend.h"
#include "kernels/backend.h"
#include "sim/cost.h"

typedef enum scenario_key {
#define X(sec, key, type, def, lo, hi, help) K_##sec##_##key,
    SCENARIO_KEYS(X)
#undef X
    K_COUNT
} scenario_key;

typedef struct scenario_value {
    long long i;
    double d;
    bool b;
    char s[256];
    char origin[300];   /* "file:line", "--set", another command-line source, or "default" */
    bool in_file;       /* given by the scenario file: a relative path in it is from the file's folder */
} scenario_value;

typedef struct scenario {
    char path[1024];    /* "" for the built-in default */
    char dir[1024];     /* relative paths in the file are taken from here */
    scenario_value v[K_COUNT];
} scenario;

/* Everything a run needs, derived from a scenario. */
typedef struct scenario_resolved {
    model_shape model;
    hw_spec hw;
    roofline_params roofline;
    int dtype_bytes;
    bool fp8_weights, fp8_kv;   /* model.quantization = fp8, kv.cache_dtype = fp8 */
    bool roofline_fit_fp8;      /* the roofline's efficiencies left to the preset are its FP8 fit's */
    bool kv_blocks_set;         /* kv.num_blocks gave the KV pool (else it was derived) */
    bool seqs_from_vllm, budget_from_vllm; /* max_num_seqs, max_num_batched_tokens = 0: vLLM's for the GPU */
    double kv_reserve_gib;      /* kv.reserve_gib; < 0 = estimated (scenario_kv_reserve_bytes) */
    sched_config sched;
    wl_config workload;
    slo_config slo;
    int replicas;               /* deployment.replicas */
    int tensor_parallel;        /* deployment.tensor_parallel: GPUs per replica */
    int prefill_instances;      /* disaggregated: replicas 0 .. prefill_instances - 1 prefill (0: aggregated) */
    double kv_latency_s, kv_s_per_token; /* disaggregated: a request's KV transfer, per GPU */
    sim_frontend frontend;      /* frontend.*: the API server in front of the engine */
    const char *frontend_preset;/* frontend.preset's name, or "custom" when a time is set (static) */
    bool token_times;           /* run.token_times: write tokens.csv */
    int num_percentiles;        /* run.percentiles */
    double percentiles[8];
    router_kind router;         /* deployment.router */
    /* speculative decoding (sched.num_speculative_tokens > 0): the draft model when drafting
     * is by a model (else n-gram lookup), and the simulator's per-token acceptance */
    bool spec_draft_model;
    model_shape draft_model;
    kb_shape draft_kb_shape;    /* the draft model as the engine's backend takes it (scenario_resolve_engine) */
    double acceptance_rate, acceptance_spread;
    int prompt_lookup_min, prompt_lookup_max;
    char trace_path[1000];
    char cost_table_path[1000]; /* an explicit table (hardware.cost_table), or "" */
    bool measured;              /* hardware.cost_model = measured: costs/ table when one covers the model */
    char vllm_version[256];     /* the measured table's framework version, "" = newest (the key's
                                 * whole value: cut, it named another version) */
    double step_overhead_s;     /* hardware.step_overhead_ms given, in seconds; < 0 = not given */
    double host_s_per_seq;      /* hardware.host_us_per_seq given, in seconds; < 0 = not given */
    bool async_scheduling;      /* scheduler.async_scheduling: the host's work overlaps the GPU's */
    int allreduce_fusion;       /* deployment.allreduce_fusion: -1 auto, 0 off, 1 on */
    double fusion_max_mb;       /* deployment.allreduce_fusion_max_mb given; < 0 = the table's */
    int fusion_hidden;          /* the served model's hidden size: vLLM sizes the fused all-reduce by
                                 * it, for a draft model's forwards too */
    char roofline_keys_set[320];/* the roofline-only keys this scenario sets ("" = none): a table ignores them */
} scenario_resolved;

/* Bytes of one KV block on each GPU of an instance: its share of every layer's KV for
 * kv.block_size tokens (and a draft model's, which shares each block with the target). */
double scenario_kv_block_bytes(const scenario_resolved *r);
/* Bytes each GPU holds apart from the weights and the KV cache when the pool is derived
 * (kv.reserve_gib, or vLLM's profile estimated: docs/cost-model.md). */
double scenario_kv_reserve_bytes(const scenario_resolved *r);

void scenario_defaults(scenario *sc);
/* Reads PATH over the defaults. -1 with "path:line: reason" in ERR. */
int scenario_load(scenario *sc, const char *path, char *err, size_t errlen);
/* vLLM V1's defaults for the OpenAI server on HW (EngineArgs.get_batch_defaults, vLLM 0.10-0.20):
 * larger on GPUs of 70 GiB or more, but the A100, where a larger budget lowered throughput.
 * scheduler.max_num_batched_tokens and max_num_seqs = 0 take them. */
int scenario_vllm_budget(const hw_spec *hw);
int scenario_vllm_max_seqs(const hw_spec *hw);
/* Applies "section.key=value" from the command line. -1 with "--set ...: reason" in ERR. */
int scenario_set(scenario *sc, const char *assignment, char *err, size_t errlen);
/* scenario_set with the value's ORIGIN named otherwise than "--set" (a sweep's point, plan's
 * layout): messages say where a value came from. */
int scenario_set_from(scenario *sc, const char *assignment, const char *origin, char *err, size_t errlen);
/* Whether A and B, both valid values of key K, mean one setting: numbers compare by value
 * ("1" and "1.0"), booleans by truth ("on" and "true"), lengths by their canonical form ("8"
 * and "fixed:8"), other values as written. */
bool scenario_same_value(scenario_key k, const char *a, const char *b);
/* "SECTION.KEY" of the key that models vLLM's option NAME ("--max-num-seqs", "max_num_seqs"),
 * written to BUF; NULL when NAME is none of VLLM_OPTIONS. */
const char *scenario_vllm_key(const char *name, char *buf, size_t len);
/* Checks the keys together and derives the run's settings. -1 with a reason naming the keys. */
int scenario_resolve(const scenario *sc, scenario_resolved *out, char *err, size_t errlen);
/* The real engine's settings: backend options and sampling; when kv.num_blocks is 0 the pool
 * is engine.kv_gib of the backend's KV precision (its own memory, not hardware.*), and
 * R->sched.num_blocks is updated to match. -1 with a reason. */
int scenario_resolve_engine(const scenario *sc, scenario_resolved *r, kb_options *kb, kb_sampling *sp,
                            char *err, size_t errlen);
/* The frontend.* key that puts an API server in front of the engine, for messages: the first
 * time given > 0, else frontend.preset; K_COUNT when there is none. */
scenario_key scenario_frontend_key(const scenario *sc);
/* The API server R prices, for a line of output ("vllm (1.8 ms a request, ...)"); "" for none. */
void scenario_frontend_describe(const scenario_resolved *r, char *out, size_t len);
/* Each instance's KV pool, for a line of output ("901808 tokens (56363 blocks of 16), ...");
 * SCENARIO_KV_CACHE_TEXT holds the longest. */
#define SCENARIO_KV_CACHE_TEXT 256
void scenario_kv_cache_describe(const scenario_resolved *r, char *out, size_t len);
/* The scheduler a run had, in words: "paged, chunked prefill on, prefix caching on, 1024
 * sequences and 8192 tokens a step (vLLM's defaults for h200)"; SCENARIO_SCHED_TEXT holds it. */
#define SCENARIO_SCHED_TEXT 384
void scenario_scheduler_describe(const scenario_resolved *r, char *out, size_t len);
/* Whether K was given on the command line (--set, --seed, ...), not by a file or the default. */
bool scenario_from_command_line(const scenario *sc, scenario_key k);
/* "section.key (origin)" of K in SC. */
void scenario_key_label(const scenario *sc, scenario_key k, char *out, size_t len);
/* Every key with its value, as JSON members ("model.preset": "llama-3-8b", ...). */
json_t *scenario_json(const scenario *sc);
/* The key table for `servesim keys`. */
void scenario_print_keys(FILE *f);
const char *scenario_name(const scenario *sc);
/* The file name without its .ini ending ("default" for the built-in scenario). */
void scenario_stem_into(const scenario *sc, char *out, size_t len);
/* A command's output directory: FLAG (its --out) when given, else results/runs/STEM-SUFFIX,
 * checked before the command's work (io/outdir.h, od_check: its name fits, and it is new,
 * empty or a result servesim wrote and nobody added to). -1 with "--out DIR: reason" in ERR. */
int scenario_out_dir(const scenario *sc, const char *flag, const char *suffix, char *out, size_t len, char *err,
                     size_t errlen);
/* -1 with "OUT: reason" in WHY when a file SC names (workload.trace, hardware.cost_table) is
 * OUT or inside it: the result replacing OUT would delete it (io/outdir.h, od_check_input).
 * scenario_out_dir checks its own scenario; a command that sets such keys per point checks
 * each point's. */
int scenario_check_inputs(const scenario *sc, const char *out, char *why, size_t len);

#endif
