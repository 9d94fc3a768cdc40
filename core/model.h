/* Model shapes and presets: plain data, no tensors. */
#ifndef SERVESIM_CORE_MODEL_H
#define SERVESIM_CORE_MODEL_H

#include <stddef.h>
#include <stdint.h>

typedef struct model_shape {
    const char *name;
    int num_layers, hidden, num_heads, num_kv_heads, head_dim, intermediate, vocab;
    float rope_theta, rms_eps;
    int max_position;   /* the model's own context limit */
    /* Qwen3 normalizes q and k per head before rotary. Measured cost tables price it; the
     * real engine's random-weight forward leaves it out (two small norms per layer). */
    int qk_norm;
    int tied_embeddings; /* the LM head reuses the embedding matrix (Llama 3.2 1B and 3B) */
    /* Mixture of experts: every layer's MLP is NUM_EXPERTS experts of INTERMEDIATE columns,
     * and a router sends each token to EXPERTS_PER_TOKEN of them (Qwen3-MoE, Mixtral); 0 for
     * a dense MLP. */
    int num_experts, experts_per_token;
} model_shape;

/* NULL when NAME is not a preset. */
const model_shape *model_preset(const char *name);
/* Comma-separated preset names, for help and error messages. */
const char *model_preset_names(void);
/* The I-th preset (in the table's order), or NULL past the last. */
const model_shape *model_preset_at(size_t i);
/* Parameters: every weight matrix, the embedding, and the LM head unless it is tied to it. */
int64_t model_num_params(const model_shape *m);
/* Parameters of the per-token linear layers (QKV, O, gate/up, down, all layers; every
 * expert and the router of a mixture of experts). */
int64_t model_linear_params(const model_shape *m);
/* QKV and O projections, all layers. */
int64_t model_attn_params(const model_shape *m);
/* One MLP (of a mixture of experts: one expert) in every layer: gate, up and down. */
int64_t model_mlp_params(const model_shape *m);
/* The router of a mixture of experts, all layers (0 for a dense model). */
int64_t model_router_params(const model_shape *m);
/* Linear parameters one token passes through: the attention projections, the router and its
 * EXPERTS_PER_TOKEN experts (all of them for a dense model). */
int64_t model_active_linear_params(const model_shape *m);
/* "layers=.. hidden=.. ... vocab=.." (and " experts=.. topk=.." for a mixture of experts): the
 * shape a measured cost table's header names, which picks the table for a model. */
void model_shape_string(const model_shape *m, char *out, size_t len);
/* KV bytes per token at DTYPE_BYTES per element, all layers, K and V. */
int64_t model_kv_bytes_per_token(const model_shape *m, int dtype_bytes);
/* What one GPU of a tensor-parallel group of TP holds and computes, as vLLM splits a model
 * (Megatron style): query heads, MLP columns and the vocabulary (embedding and LM head)
 * divided by TP, KV heads divided too until each GPU has one, then replicated; the hidden
 * size, the norms and the layer count whole. TP = 1 is the model itself. */
model_shape model_shard(const model_shape *m, int tp);
/* Rejects a TP the model cannot be split by, as vLLM does; writes a one-line reason. */
int model_check_tp(const model_shape *m, int tp, char *err, size_t errlen);
/* Rejects shapes that cannot run; writes a one-line reason. */
int model_check(const model_shape *m, char *err, size_t errlen);

#endif
