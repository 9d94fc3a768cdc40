#include "sim/cost.h"

#include <math.h>

/* Roofline step time (docs/cost-model.md has the derivation):
 *   linear  = max(2 P T / (F e_c), P d / (B e_m))        P linear params, T batched tokens
 *             (a mixture of experts: P in the FLOPs counts the k experts a token uses, and
 *             the bytes the attention projections, the router and the experts touched,
 *             E (1 - (1 - k/E)^T) of them under uniform routing)
 *   lm_head = max(2 V h R / (F e_c), V h d / (B e_m))    R rows sampled (outputs)
 *   prefill attention, per sequence with n new tokens after c cached:
 *             max(4 L H D (n c + n (n+1)/2) / (F e_a), (c + n) k / (B e_m))
 *   decode attention, all decodes together:
 *             max(4 L H D S / (F e_a), S k / (B e_m))    S = sum of context lengths
 *   all-reduce (tensor parallel, TP > 1): (2 L + 1) x [a + 2 (TP - 1) / TP x T h d / W]
 *   step    = linear + lm_head + attention + all-reduce + overhead
 * with F peak FLOP/s, B bandwidth, d bytes per element, k KV bytes per token, W the link's
 * bandwidth and a one all-reduce's fixed time; P, V, H and k are one GPU's share
 * (model_shard) when TP > 1. */

void cost_roofline_init(cost_model *c, const model_shape *full, const hw_spec *hw,
                        const roofline_params *p, int dtype_bytes, int tp)
{
    model_shape shard = model_shard(full, tp), *m = &shard;
    c->model = *full;
    c->tp = tp < 1 ? 1 : tp;
    c->allreduces = c->tp > 1 ? 2.0 * m->num_layers + 1 : 0;
    c->allreduce_bytes_per_token = (double)m->hidden * dtype_bytes;
    c->hw = *hw;
    c->p = *p;
    c->dtype_bytes = dtype_bytes;
    c->linear_flops_per_token = 2.0 * (double)model_active_linear_params(m);
    c->num_experts = m->num_experts;
    c->experts_per_token = m->experts_per_token;
    if (m->num_experts > 0) {
        c->linear_bytes = (double)model_attn_params(m) * dtype_bytes;
        c->router_bytes = (double)model_router_params(m) * dtype_bytes;
        c->expert_bytes = (double)model_mlp_params(m) * dtype_bytes;
    } else {
        c->linear_bytes = (double)model_linear_params(m) * dtype_bytes;
        c->router_bytes = c->expert_bytes = 0;
    }
    c->lm_head_flops_per_row = 2.0 * m->vocab * m->hidden;
    c->lm_head_bytes = (double)m->vocab * m->hidden * dtype_bytes;
    c->attn_flops_per_pair = 4.0 * m->num_layers * m->num_heads * m->head_dim;
    c->kv_bytes_per_token = (double)model_kv_bytes_per_token(m, dtype_bytes);
    c->flops_rate = hw->peak_tflops * 1e12 * p->compute_efficiency;
    c->attn_rate = hw->peak_tflops * 1e12 * p->attention_efficiency;
    c->byte_rate = hw->mem_bandwidth_gbs * 1e9 * p->memory_efficiency;
    c->linear_rate = c->flops_rate;
}

void cost_roofline_quantize(cost_model *c, bool fp8_weights, bool fp8_kv)
{
    if (fp8_weights) {
        c->linear_bytes /= c->dtype_bytes;
        c->expert_bytes /= c->dtype_bytes;
        if (c->hw.fp8_tflops > 0) c->linear_rate = c->hw.fp8_tflops * 1e12 * c->p.compute_efficiency;
    }
    if (fp8_kv) c->kv_bytes_per_token /= c->dtype_bytes;
}

static double max2(double a, double b) { return a > b ? a : b; }

double cost_experts_touched(const cost_model *c, double tokens)
{
    if (c->num_experts <= 0) return 0;
    double e = c->num_experts;
    return e * (1 - pow(1 - c->experts_per_token / e, tokens));
}

double cost_allreduce_time(const cost_model *c, double bytes)
{
    if (c->tp <= 1) return 0;
    return c->hw.allreduce_us * 1e-6 + 2.0 * (c->tp - 1) / c->tp * bytes / (c->hw.link_gbs * 1e9);
}

double cost_step_time(const cost_model *c, const sched_batch *b)
{
    double tokens = b->num_batched_tokens;
    double weights = c->linear_bytes;
    if (c->num_experts > 0) weights += c->router_bytes + c->expert_bytes * cost_experts_touched(c, tokens);
    double t = max2(c->linear_flops_per_token * tokens / c->linear_rate, weights / c->byte_rate);
    /* a row of logits per emitting sequence, and one per draft token a verification checks */
    double rows = b->num_outputs + b->num_draft_tokens;
    if (rows > 0) {
        t += max2(c->lm_head_flops_per_row * rows / c->flops_rate, c->lm_head_bytes / c->byte_rate);
        /* each GPU's slice of the logits gathered to the first: about the traffic of an
         * all-reduce of half of them */
        if (c->tp > 1) t += cost_allreduce_time(c, 0.5 * rows * c->model.vocab * c->dtype_bytes);
    }
    for (int i = 0, left = b->num_multi_token_items; left > 0; i++) {
        const sched_item *it = &b->items[i];
        double n = it->num_new_tokens + it->num_pad_tokens, ctx = it->context_len;
        if (n == 1) continue;
        left--;
        double pairs = n * ctx + n * (n + 1) / 2;
        t += max2(c->attn_flops_per_pair * pairs / c->attn_rate, (ctx + n) * c->kv_bytes_per_token / c->byte_rate);
    }
    double decode_ctx = (double)b->decode_context_sum;
    if (decode_ctx > 0)
        t += max2(c->attn_flops_per_pair * decode_ctx / c->attn_rate, decode_ctx * c->kv_bytes_per_token / c->byte_rate);
    if (c->allreduces > 0) t += c->allreduces * cost_allreduce_time(c, tokens * c->allreduce_bytes_per_token);
    return t + c->p.step_overhead_s;
}
