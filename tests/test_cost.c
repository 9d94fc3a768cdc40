/* Roofline cost model (sim/cost.c): step times computed by hand on a toy model whose every
 * term is a small integer, so that a wrong pair count or a forgotten cached context shows. */
#include <criterion/criterion.h>

#include "sim/cost.h"

/* 2 layers, hidden 4, 2 query heads and 1 KV head of dim 2, intermediate 8, vocab 10:
 *   linear params per layer = 4*(4+2*2) + 4*4 + 3*4*8 = 32 + 16 + 96 = 144; 288 in all
 *   KV bytes per token      = 2 (K,V) * 2 layers * 1 head * 2 dims * 2 bytes = 16
 *   attention FLOPs per pair = 4 * 2 layers * 2 heads * 2 dims = 32
 *   LM head                  = 10 * 4 = 40 weights: 80 FLOPs per row, 80 bytes */
static const model_shape toy = {.name = "toy", .num_layers = 2, .hidden = 4, .num_heads = 2,
                                .num_kv_heads = 1, .head_dim = 2, .intermediate = 8, .vocab = 10};

/* 1 FLOP/s and BYTES_PER_S; every efficiency 1, no overhead. */
static cost_model toy_cost(double bytes_per_s)
{
    hw_spec hw = {.name = "toy", .peak_tflops = 1e-12, .mem_bandwidth_gbs = bytes_per_s * 1e-9};
    roofline_params p = {1, 1, 1, 0};
    cost_model c;
    cost_roofline_init(&c, &toy, &hw, &p, 2, 1);
    return c;
}

/* One prefill chunk of 3 new tokens after 5 cached ones, emitting its first token. */
static sched_batch prefill_after_cache(sched_item *it)
{
    *it = (sched_item){.num_new_tokens = 3, .context_len = 5, .emits_token = true};
    return (sched_batch){.items = it, .num_items = 1, .num_batched_tokens = 3, .num_outputs = 1,
                         .num_prefill_seqs = 1, .num_prefill_tokens = 3, .num_multi_token_items = 1};
}

Test(cost, the_derived_constants_of_the_toy_model)
{
    cost_model c = toy_cost(1);
    cr_assert_eq(model_linear_params(&toy), 288);
    cr_assert_float_eq(c.kv_bytes_per_token, 16, 0);
    cr_assert_float_eq(c.attn_flops_per_pair, 32, 0);
    cr_assert_float_eq(c.lm_head_flops_per_row, 80, 0);
    cr_assert_float_eq(c.lm_head_bytes, 80, 0);
}

/* Compute-bound: linear max(2*288*3, 288*2) = 1728; LM head max(80, 80) = 80; attention
 * pairs = n c + n(n+1)/2 = 15 + 6 = 21 (each new token sees the cache and itself and those
 * before it), 32*21 = 672 FLOPs against (5+3)*16 = 128 bytes. 1728 + 80 + 672 = 2480 s. */
Test(cost, a_compute_bound_prefill_after_a_cached_context_by_hand)
{
    cost_model c = toy_cost(1);
    sched_item it;
    sched_batch b = prefill_after_cache(&it);
    cr_assert_float_eq(cost_step_time(&c, &b), 2480, 1e-9,
                       "got %g; n(n-1)/2 pairs would give 2384", cost_step_time(&c, &b));
}

/* At 0.1 B/s the weights and the KV dominate: linear 576/0.1 = 5760; LM head 80/0.1 = 800;
 * attention reads the 5 cached and 3 new tokens' KV, 128/0.1 = 1280. 7840 s in all. */
Test(cost, a_memory_bound_prefill_reads_the_cached_context_too)
{
    cost_model c = toy_cost(0.1);
    sched_item it;
    sched_batch b = prefill_after_cache(&it);
    cr_assert_float_eq(cost_step_time(&c, &b), 7840, 1e-6,
                       "got %g; forgetting the cached KV would give 7232", cost_step_time(&c, &b));
}

/* Two decodes attending to 10 and 30 tokens (S = 40), no prefill, at 1 B/s: linear
 * max(2*288*2, 576) = 1152; LM head max(160, 80) = 160; attention max(32*40, 40*16) = 1280.
 * Overhead 0.5 s on top. 2592.5 s. */
Test(cost, decodes_are_priced_by_their_summed_context)
{
    cost_model c = toy_cost(1);
    c.p.step_overhead_s = 0.5;
    sched_item items[2] = {{.num_new_tokens = 1, .context_len = 9, .emits_token = true, .is_decode = true},
                           {.num_new_tokens = 1, .context_len = 29, .emits_token = true, .is_decode = true}};
    sched_batch b = {.items = items, .num_items = 2, .num_batched_tokens = 2, .num_outputs = 2,
                     .num_decode_seqs = 2, .decode_context_sum = 40};
    cr_assert_float_eq(cost_step_time(&c, &b), 2592.5, 1e-9, "got %g", cost_step_time(&c, &b));
}

/* The toy over 2 GPUs: each has 1 query head, the 1 KV head (replicated: it cannot split),
 * 4 MLP columns and 5 vocabulary rows: linear 2 x (4 x (2 + 2 x 2) + 2 x 4 + 3 x 4 x 4) = 160
 * params, LM head 20, attention 4 x 2 x 1 x 2 = 16 FLOPs a pair, KV 16 bytes a token. The
 * prefill of 3 after 5 at 1 FLOP/s and 1 B/s: linear max(960, 320) + LM head max(40, 40) +
 * attention max(16 x 21, 128) = 960 + 40 + 336; then 2 x 2 + 1 all-reduces of 3 tokens x
 * hidden 4 x 2 bytes over a 2 B/s link with a 1 s fixed cost: 5 x (1 + 2 x 1/2 x 24 / 2) =
 * 65; and the gather of one row of 10 logits, an all-reduce of half of its 20 bytes:
 * 1 + 10 / 2 = 6. 1407 s. */
Test(cost, tensor_parallel_prices_one_gpus_share_and_the_all_reduces_by_hand)
{
    hw_spec hw = {.name = "toy", .peak_tflops = 1e-12, .mem_bandwidth_gbs = 1e-9, .link_gbs = 2e-9, .allreduce_us = 1e6};
    roofline_params p = {1, 1, 1, 0};
    cost_model c;
    cost_roofline_init(&c, &toy, &hw, &p, 2, 2);
    cr_assert_float_eq(c.linear_flops_per_token, 320, 0);
    cr_assert_float_eq(c.kv_bytes_per_token, 16, 0);
    cr_assert_float_eq(c.attn_flops_per_pair, 16, 0);
    cr_assert_float_eq(c.allreduces, 5, 0);
    sched_item it;
    sched_batch b = prefill_after_cache(&it);
    cr_assert_float_eq(cost_step_time(&c, &b), 1407, 1e-9, "got %g", cost_step_time(&c, &b));
    cost_roofline_init(&c, &toy, &hw, &p, 2, 1); /* one GPU: no all-reduce at any price */
    cr_assert_float_eq(cost_step_time(&c, &b), 2480, 1e-9);
}

/* The toy as a mixture of 4 experts of 8 columns, 2 a token: per layer QKV and O 48, one
 * expert 96, the router 4 x 4 = 16. A token uses 2 x (48 + 16 + 2 x 96) = 512 parameters,
 * 1024 FLOPs; a step of T tokens reads the projections and the router (2 x 64 x 2 = 256
 * bytes) and the experts touched, 4 (1 - (1 - 2/4)^T) of 2 x 96 x 2 = 384 bytes each. At
 * 0.1 B/s one decode at context 10: linear max(1024, (256 + 2 x 384) / 0.1) = 10240, LM head
 * 800, attention max(320, 160 / 0.1) = 1600: 12640 s. Three decodes (contexts summing to 30)
 * touch 3.5 experts: max(3072, 1600 / 0.1) + 800 + max(960, 4800) = 21600 s. */
Test(cost, a_mixture_of_experts_computes_k_experts_and_reads_those_touched_by_hand)
{
    model_shape moe = toy;
    moe.num_experts = 4;
    moe.experts_per_token = 2;
    hw_spec hw = {.name = "toy", .peak_tflops = 1e-12, .mem_bandwidth_gbs = 0.1e-9};
    roofline_params p = {1, 1, 1, 0};
    cost_model c;
    cost_roofline_init(&c, &moe, &hw, &p, 2, 1);
    cr_assert_eq(model_linear_params(&moe), 896);
    cr_assert_float_eq(c.linear_flops_per_token, 1024, 0);
    cr_assert_float_eq(cost_experts_touched(&c, 1), 2, 1e-12);
    cr_assert_float_eq(cost_experts_touched(&c, 3), 3.5, 1e-12);
    sched_item one = {.num_new_tokens = 1, .context_len = 9, .emits_token = true, .is_decode = true};
    sched_batch b = {.items = &one, .num_items = 1, .num_batched_tokens = 1, .num_outputs = 1,
                     .num_decode_seqs = 1, .decode_context_sum = 10};
    cr_assert_float_eq(cost_step_time(&c, &b), 12640, 1e-6, "got %g", cost_step_time(&c, &b));
    sched_item three[3] = {{.num_new_tokens = 1, .context_len = 9, .emits_token = true, .is_decode = true},
                           {.num_new_tokens = 1, .context_len = 9, .emits_token = true, .is_decode = true},
                           {.num_new_tokens = 1, .context_len = 9, .emits_token = true, .is_decode = true}};
    b = (sched_batch){.items = three, .num_items = 3, .num_batched_tokens = 3, .num_outputs = 3,
                      .num_decode_seqs = 3, .decode_context_sum = 30};
    cr_assert_float_eq(cost_step_time(&c, &b), 21600, 1e-6, "got %g", cost_step_time(&c, &b));
    cr_assert_float_eq(cost_experts_touched(&(cost_model){.num_experts = 0}, 5), 0, 0); /* dense */
}

/* FP8 linear layers and KV on the toy (1 FLOP/s bf16, 2 FP8): the prefill of 3 after 5 at
 * 1 B/s: linear max(2 x 288 x 3 / 2, 288 x 1) = 864, LM head (still bf16) max(80, 80) = 80,
 * attention max(32 x 21, 8 x 8) = 672: 1616 s. A GPU without FP8 units computes them in bf16:
 * max(1728, 288) + 80 + 672 = 2480. Memory-bound at 0.1 B/s: linear 288 / 0.1 = 2880, LM head
 * 80 / 0.1 = 800, attention max(672, 64 / 0.1) = 672: 4352 s. */
Test(cost, fp8_halves_the_linear_bytes_and_kv_and_doubles_the_linear_rate_by_hand)
{
    hw_spec hw = {.name = "toy", .peak_tflops = 1e-12, .mem_bandwidth_gbs = 1e-9, .fp8_tflops = 2e-12};
    roofline_params p = {1, 1, 1, 0};
    cost_model c;
    sched_item it;
    sched_batch b = prefill_after_cache(&it);
    cost_roofline_init(&c, &toy, &hw, &p, 2, 1);
    cost_roofline_quantize(&c, true, true);
    cr_assert_float_eq(c.linear_bytes, 288, 0);
    cr_assert_float_eq(c.kv_bytes_per_token, 8, 0);
    cr_assert_float_eq(cost_step_time(&c, &b), 1616, 1e-9, "got %g", cost_step_time(&c, &b));
    hw.fp8_tflops = 0;
    cost_roofline_init(&c, &toy, &hw, &p, 2, 1);
    cost_roofline_quantize(&c, true, true);
    cr_assert_float_eq(cost_step_time(&c, &b), 2480, 1e-9, "got %g", cost_step_time(&c, &b));
    hw.mem_bandwidth_gbs = 0.1e-9;
    hw.fp8_tflops = 2e-12;
    cost_roofline_init(&c, &toy, &hw, &p, 2, 1);
    cost_roofline_quantize(&c, true, true);
    cr_assert_float_eq(cost_step_time(&c, &b), 4352, 1e-6, "got %g", cost_step_time(&c, &b));
}
