/* The layer ops of the CPU backend, one plain fp32 function each, named as the CUDA kernels
 * are. Row-major throughout. A linear layer's weight is [out_dim x in_dim] (each output's
 * weights contiguous), so y = x W^T. The KV cache of a layer is one K and one V array of
 * [num_blocks][block_size][num_kv_heads][head_dim]: a token's heads are contiguous, so a write
 * is one copy per token and a block is one contiguous run for the attention loop. */
#ifndef SERVESIM_KERNELS_CPU_OPS_H
#define SERVESIM_KERNELS_CPU_OPS_H

#include <stdint.h>

#include <gsl/gsl_rng.h>

#include "kernels/backend.h"

void embedding_forward(float *out, const float *table, const int32_t *token_ids, int n,
                       int hidden);
void rmsnorm_forward(float *out, const float *inp, const float *weight, int n, int dim,
                     float eps);
void matmul_forward(float *out, const float *inp, const float *weight, int n, int in_dim,
                    int out_dim);
void matmul_forward_naive(float *out, const float *inp, const float *weight, int n, int in_dim,
                          int out_dim);
/* Rotates the first NUM_HEADS heads of each row in place (the q heads then the k heads of a
 * fused qkv row), Llama/NeoX rotate-half style: dims i and i + head_dim/2 form a pair. */
void rotary_forward(float *x, const int32_t *positions, int n, int row_stride, int num_heads,
                    int head_dim, float theta);
/* Copies the k and v parts of each qkv row to its slot; slot -1 (padding) is skipped. */
void kv_cache_write(float *k_cache, float *v_cache, const float *qkv, int row_stride,
                    const int32_t *slot_mapping, int n, int num_heads, int num_kv_heads,
                    int head_dim);
/* Causal attention of Q_LEN query tokens of one sequence over its paged cache: the token at
 * position p sees cache positions [0, min(p, context_len - 1)]. SCORES holds one row of
 * attention weights (max_blocks_per_seq * block_size floats). */
void attention_prefill_paged(float *out, int out_stride, const float *q, int q_stride,
                             const float *k_cache, const float *v_cache,
                             const int32_t *block_table, int block_size,
                             const int32_t *positions, int q_len, int context_len,
                             int num_heads, int num_kv_heads, int head_dim, float *scores);
void attention_decode_paged(float *out, const float *q, const float *k_cache,
                            const float *v_cache, const int32_t *block_table, int block_size,
                            int position, int context_len, int num_heads, int num_kv_heads,
                            int head_dim, float *scores);
/* Reference over contiguous K/V [n_keys x num_kv_heads * head_dim]: query i sits at position
 * n_keys - q_len + i. Accumulates in double. */
void attention_reference(float *out, const float *q, const float *k, const float *v, int q_len,
                         int n_keys, int num_heads, int num_kv_heads, int head_dim);
/* GATE_UP rows are [gate (inter) | up (inter)]; out = SiLU(gate) * up. */
void silu_mul_forward(float *out, const float *gate_up, int n, int inter);
void residual_add(float *x, const float *delta, long n);

typedef struct logit_pair {
    float value;
    int32_t id;
} logit_pair;

/* One token per row of LOGITS [num_seqs x vocab]; SCRATCH holds vocab pairs. */
void sample_tokens(int32_t *out, const float *logits, int num_seqs, int vocab,
                   const kb_sampling *p, gsl_rng *rng, logit_pair *scratch);

#endif
