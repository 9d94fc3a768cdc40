#include "core/model.h"

#include <stdio.h>
#include <string.h>

/* Shapes from each model's published config.json, one row each; the preset list in help
 * and errors is made from the same rows. A mixture of experts' inter is one expert's
 * (moe_intermediate_size of Qwen3-MoE, intermediate_size of Mixtral). */
#define MODEL_PRESETS(X) \
    /*  name            L    hidden heads kv  hd   inter  vocab   theta      eps    maxpos  qk  tied experts topk */ \
    X("tiny",          2,   256,   8,    2,  32,  688,   2048,   10000.f,   1e-5f, 4096,   0,  0,  0,      0) \
    X("small",         8,   768,   12,   4,  64,  2048,  32000,  10000.f,   1e-5f, 4096,   0,  0,  0,      0) \
    X("llama-3.2-1b",  16,  2048,  32,   8,  64,  8192,  128256, 500000.f,  1e-5f, 131072, 0,  1,  0,      0) \
    X("llama-3.2-3b",  28,  3072,  24,   8,  128, 8192,  128256, 500000.f,  1e-5f, 131072, 0,  1,  0,      0) \
    X("llama-3-8b",    32,  4096,  32,   8,  128, 14336, 128256, 500000.f,  1e-5f, 8192,   0,  0,  0,      0) \
    X("llama-3.1-8b",  32,  4096,  32,   8,  128, 14336, 128256, 500000.f,  1e-5f, 131072, 0,  0,  0,      0) \
    X("mistral-7b",    32,  4096,  32,   8,  128, 14336, 32768,  1000000.f, 1e-5f, 32768,  0,  0,  0,      0) \
    X("qwen2.5-7b",    28,  3584,  28,   4,  128, 18944, 152064, 1000000.f, 1e-6f, 32768,  0,  0,  0,      0) \
    X("qwen3-8b",      36,  4096,  32,   8,  128, 12288, 151936, 1000000.f, 1e-6f, 40960,  1,  0,  0,      0) \
    X("qwen3-32b",     64,  5120,  64,   8,  128, 25600, 151936, 1000000.f, 1e-6f, 40960,  1,  0,  0,      0) \
    X("llama-3-70b",   80,  8192,  64,   8,  128, 28672, 128256, 500000.f,  1e-5f, 8192,   0,  0,  0,      0) \
    X("llama-3.1-70b", 80,  8192,  64,   8,  128, 28672, 128256, 500000.f,  1e-5f, 131072, 0,  0,  0,      0) \
    X("qwen3-30b-a3b", 48,  2048,  32,   4,  128, 768,   151936, 1000000.f, 1e-6f, 40960,  1,  0,  128,    8) \
    X("mixtral-8x7b",  32,  4096,  32,   8,  128, 14336, 32000,  1000000.f, 1e-5f, 32768,  0,  0,  8,      2)

#define ROW(name, ...) {name, __VA_ARGS__},
static const model_shape presets[] = {MODEL_PRESETS(ROW)};
#undef ROW
#define NAME(name, ...) ", " name
static const char preset_names[] = MODEL_PRESETS(NAME);
#undef NAME
enum { NUM_PRESETS = sizeof presets / sizeof presets[0] };

const model_shape *model_preset(const char *name)
{
    for (size_t i = 0; i < NUM_PRESETS; i++)
        if (strcmp(presets[i].name, name) == 0)
            return &presets[i];
    return NULL;
}

const model_shape *model_preset_at(size_t i) { return i < NUM_PRESETS ? &presets[i] : NULL; }

const char *model_preset_names(void) { return preset_names + 2; /* past the first ", " */ }

int64_t model_attn_params(const model_shape *m)
{
    int64_t h = m->hidden, q = (int64_t)m->num_heads * m->head_dim;
    int64_t kv = (int64_t)m->num_kv_heads * m->head_dim;
    return (h * (q + 2 * kv) + q * h) * m->num_layers;
}

int64_t model_mlp_params(const model_shape *m) { return 3LL * m->hidden * m->intermediate * m->num_layers; }

int64_t model_router_params(const model_shape *m) { return (int64_t)m->hidden * m->num_experts * m->num_layers; }

int64_t model_linear_params(const model_shape *m)
{
    int experts = m->num_experts > 0 ? m->num_experts : 1;
    return model_attn_params(m) + model_router_params(m) + experts * model_mlp_params(m);
}

int64_t model_active_linear_params(const model_shape *m)
{
    int experts = m->num_experts > 0 ? m->experts_per_token : 1;
    return model_attn_params(m) + model_router_params(m) + experts * model_mlp_params(m);
}

void model_shape_string(const model_shape *m, char *out, size_t len)
{
    int n = snprintf(out, len, "layers=%d hidden=%d heads=%d kv_heads=%d head_dim=%d intermediate=%d vocab=%d",
                     m->num_layers, m->hidden, m->num_heads, m->num_kv_heads, m->head_dim, m->intermediate, m->vocab);
    if (m->num_experts > 0 && n >= 0 && (size_t)n < len)
        snprintf(out + n, len - n, " experts=%d topk=%d", m->num_experts, m->experts_per_token);
}

int64_t model_num_params(const model_shape *m)
{
    int64_t norms = (int64_t)m->hidden * (2 * m->num_layers + 1);
    return model_linear_params(m) + (m->tied_embeddings ? 1 : 2) * (int64_t)m->vocab * m->hidden + norms;
}

int64_t model_kv_bytes_per_token(const model_shape *m, int dtype_bytes)
{
    return 2LL * m->num_layers * m->num_kv_heads * m->head_dim * dtype_bytes;
}

model_shape model_shard(const model_shape *m, int tp)
{
    model_shape s = *m;
    if (tp <= 1) return s;
    s.num_heads = m->num_heads / tp;
    s.num_kv_heads = m->num_kv_heads >= tp ? m->num_kv_heads / tp : 1;
    s.intermediate = m->intermediate / tp;
    s.vocab = (m->vocab + tp - 1) / tp; /* vLLM pads the vocabulary to a multiple of TP */
    return s;
}

/* Why TP does not split M as vLLM requires (NULL: it does). */
static const char *tp_refusal(const model_shape *m, int tp, char *buf, size_t len)
{
    if (m->num_heads % tp)
        snprintf(buf, len, "its %d attention heads (model.num_heads) do not divide by %d", m->num_heads, tp);
    else if (m->intermediate % tp)
        snprintf(buf, len, "its MLP width %d (model.intermediate) does not divide by %d", m->intermediate, tp);
    else if (m->num_kv_heads >= tp ? m->num_kv_heads % tp : tp % m->num_kv_heads)
        snprintf(buf, len, "its %d KV heads (model.num_kv_heads) neither divide by %d nor divide it", m->num_kv_heads, tp);
    else
        return NULL;
    return buf;
}

int model_check_tp(const model_shape *m, int tp, char *err, size_t errlen)
{
    char why[160], fits[64] = "";
    if (!tp_refusal(m, tp, why, sizeof why)) return 0;
    /* the sizes up to 8 (one node) that do split it, which the user most likely wants */
    for (int t = 1, n = 0; t <= 8; t++)
        if (!tp_refusal(m, t, (char[160]){0}, 160))
            n += snprintf(fits + n, sizeof fits - (size_t)n, "%s%d", n ? ", " : "", t);
    snprintf(err, errlen, "deployment.tensor_parallel = %d does not split %s: %s, as vLLM requires; sizes that do: %s",
             tp, m->name ? m->name : "the model", why, fits);
    return -1;
}

int model_check(const model_shape *m, char *err, size_t errlen)
{
    const struct { const char *name; int v; } dims[] = {
        {"num_layers", m->num_layers}, {"hidden", m->hidden}, {"num_heads", m->num_heads},
        {"num_kv_heads", m->num_kv_heads}, {"head_dim", m->head_dim},
        {"intermediate", m->intermediate}, {"vocab", m->vocab},
    };
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i].v <= 0) {
            snprintf(err, errlen, "model.%s must be positive (got %d)", dims[i].name, dims[i].v);
            return -1;
        }
    if (m->num_heads % m->num_kv_heads != 0) {
        snprintf(err, errlen, "model.num_heads (%d) must be a multiple of model.num_kv_heads (%d)",
                 m->num_heads, m->num_kv_heads);
        return -1;
    }
    if (m->num_experts < 0 || (m->num_experts > 0 && (m->experts_per_token < 1 || m->experts_per_token > m->num_experts))
        || (m->num_experts == 0 && m->experts_per_token != 0)) {
        snprintf(err, errlen, "model.experts_per_token (%d) must be between 1 and model.num_experts (%d) for a mixture "
                 "of experts, and both 0 for a dense model", m->experts_per_token, m->num_experts);
        return -1;
    }
    if (m->head_dim % 2 != 0) {
        snprintf(err, errlen, "model.head_dim (%d) must be even for rotary embedding", m->head_dim);
        return -1;
    }
    return 0;
}
