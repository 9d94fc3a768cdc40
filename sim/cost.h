/* Cost models: how long a scheduled batch takes. The roofline model needs only datasheet
 * figures; calibrated tables (measured on the real engine) come later. */
#ifndef SERVESIM_SIM_COST_H
#define SERVESIM_SIM_COST_H

#include <stdbool.h>

#include "core/model.h"
#include "core/sched.h"
#include "sim/hardware.h"

typedef struct roofline_params {
    double compute_efficiency;    /* fraction of peak FLOP/s GEMMs reach */
    double memory_efficiency;     /* fraction of peak bandwidth streaming reaches */
    double attention_efficiency;  /* fraction of peak FLOP/s prefill attention reaches */
    double step_overhead_s;       /* scheduling, launch and sampling cost per step */
} roofline_params;

typedef struct cost_model {
    model_shape model;
    hw_spec hw;
    roofline_params p;
    int dtype_bytes;
    /* derived once */
    double linear_flops_per_token, linear_bytes;
    /* a mixture of experts: linear_bytes is the attention projections', the router's weights
     * stay in model.dtype, and a step reads each expert its tokens were sent to once */
    double router_bytes, expert_bytes;   /* expert_bytes: one expert, all layers */
    int num_experts, experts_per_token;
    double lm_head_flops_per_row, lm_head_bytes;
    double attn_flops_per_pair;   /* per (query token, context token) pair, all layers */
    double kv_bytes_per_token;
    double flops_rate, attn_rate, byte_rate;
    double linear_rate;           /* FLOP/s of the linear layers: flops_rate, or FP8's (cost_roofline_quantize) */
    int tp;                       /* GPUs of the tensor-parallel group: the figures above are one GPU's */
    double allreduces;            /* all-reduces per step: 2 per layer and 1 after the embedding */
    double allreduce_bytes_per_token;
} cost_model;

/* The roofline of one GPU of a TP-way tensor-parallel group (model_shard's share of every
 * figure) plus the all-reduces that join them; TP 1 is the single GPU. */
void cost_roofline_init(cost_model *c, const model_shape *m, const hw_spec *hw,
                        const roofline_params *p, int dtype_bytes, int tp);
/* FP8 linear layers (one byte a weight, FP8 tensor cores where the GPU has them; the LM head
 * stays as it was) and/or an FP8 KV cache (one byte an element). */
void cost_roofline_quantize(cost_model *c, bool fp8_weights, bool fp8_kv);
/* Experts a step of TOKENS tokens reads, in expectation, when the router picks each token's
 * experts uniformly: E (1 - (1 - k / E)^T); 0 for a dense model. */
double cost_experts_touched(const cost_model *c, double tokens);
/* Seconds of one all-reduce of BYTES across C's group (0 when it has one GPU). */
double cost_allreduce_time(const cost_model *c, double bytes);
/* Seconds the batch takes. */
double cost_step_time(const cost_model *c, const sched_batch *b);

#endif
