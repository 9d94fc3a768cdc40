/* The CUDA backend's kernels behind a plain C interface (the launchers are extern "C" in
 * kernels.cu), so the backend (cuda_backend.c), the tests and the kernel benchmark call them
 * from C. Every pointer named d_* is a device pointer. bf16 values are stored as uint16_t
 * (the upper half of an fp32, rounded to nearest even). Shapes and layouts are the CPU
 * backend's (kernels/cpu/ops.h): row-major, a linear weight is [out_dim x in_dim], a layer's
 * K and V caches are [num_blocks][block_size][num_kv_heads][head_dim].
 *
 * Every launcher returns 0 (cudaSuccess) or the CUDA error of its launch as an int;
 * cuda_error_string turns it into text. Launchers enqueue on STREAM and never synchronize. */
#ifndef SERVESIM_KERNELS_CUDA_OPS_H
#define SERVESIM_KERNELS_CUDA_OPS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct CUstream_st *cuda_stream; /* = cudaStream_t, without the CUDA headers */

/* Attention works on "rows": one query token each. Limits the kernels are built for. */
#define CUDA_ATTN_MAX_GROUP 8      /* query heads per KV head */
#define CUDA_ATTN_MAX_HEAD_DIM 256 /* and head_dim / 8 a power of two */
/* Attention blocks per launch the split over the context aims at, and the most slots (pieces
 * of one row's context handled by separate blocks). Fixed numbers, so that a launch's grid
 * depends only on the number of rows and KV heads (CUDA graphs replay fixed grids). */
#define CUDA_ATTN_TARGET_BLOCKS 1024
#define CUDA_ATTN_MAX_SLOTS 32
/* Capacity of the split partials, in (row, slot) pairs; always enough (see attn_slots). */
#define CUDA_ATTN_PARTIAL_PAIRS (2 * CUDA_ATTN_TARGET_BLOCKS)

/* 0 when this machine has a usable CUDA device; otherwise -1 and why in ERR. */
int cuda_probe(char *err, size_t errlen);
const char *cuda_error_string(int code);
/* Whether head_dim and the GQA group fit the attention kernels; -1 and why in ERR if not. */
int cuda_attn_supported(int num_heads, int num_kv_heads, int head_dim, char *err,
                        size_t errlen);
/* Number of context slots per row for ROWS rows (a function of ROWS and NUM_KV_HEADS only). */
int cuda_attn_slots(int rows, int num_kv_heads);

/* Host-side bf16 conversion (round to nearest even; NaN stays NaN). */
uint16_t cuda_f32_to_bf16(float f);
float cuda_bf16_to_f32(uint16_t h);

/* Synchronous helpers for tests and the benchmark: 0 or a CUDA error code. */
int cuda_malloc(void **d_ptr, size_t bytes);
int cuda_free(void *d_ptr);
int cuda_upload(void *d_dst, const void *src, size_t bytes);
int cuda_download(void *dst, const void *d_src, size_t bytes);
/* Converts N host floats to bf16 and uploads them (through a bounded staging buffer). */
int cuda_upload_bf16(uint16_t *d_dst, const float *src, size_t n);
int cuda_download_bf16(float *dst, const uint16_t *d_src, size_t n);
/* Fills N fp32 / bf16 values with NaN (to poison outputs before a run). */
int cuda_poison_f32(float *d_x, size_t n);
int cuda_poison_bf16(uint16_t *d_x, size_t n);
int cuda_sync(void);

/* --- weights ----------------------------------------------------------------------------- */
/* Deterministic device-side draw (a counter-based hash of SEED, TENSOR and the element index,
 * not the CPU's GSL stream): uniform in [-sqrt(3) scale, sqrt(3) scale], or for NORM = 1
 * uniform in [0.9, 1.1] as the CPU's draw_norm. */
int cuda_draw_weights(uint16_t *d_w, size_t n, uint64_t seed, uint32_t tensor, double scale,
                      int norm, cuda_stream stream);

/* --- layer kernels ------------------------------------------------------------------------ */
/* out[t] = table[token_ids[t]] (bf16 table, fp32 out). */
int cuda_embedding(float *d_out, const uint16_t *d_table, const int32_t *d_token_ids, int n,
                   int hidden, cuda_stream stream);
/* out (bf16) = rmsnorm(inp (fp32)) * weight (bf16), one row per token. With D_QUERY_START
 * (int32 [n + 1]), output row s normalizes input row query_start[s + 1] - 1 (each sequence's
 * last token, for the LM head). */
int cuda_rmsnorm(uint16_t *d_out, const float *d_inp, const uint16_t *d_weight,
                 const int32_t *d_query_start, int n, int dim, float eps, cuda_stream stream);
/* In place on fp32 rows of ROW_STRIDE: the first NUM_HEADS heads, rotate-half. */
int cuda_rotary(float *d_x, const int32_t *d_positions, int n, int row_stride, int num_heads,
                int head_dim, float theta, cuda_stream stream);
/* K and V parts of each fp32 qkv row to its slot of the bf16 caches; slot -1 is skipped. */
int cuda_kv_write(uint16_t *d_k_cache, uint16_t *d_v_cache, const float *d_qkv, int row_stride,
                  const int32_t *d_slot_mapping, int n, int num_heads, int num_kv_heads,
                  int head_dim, cuda_stream stream);
/* out (bf16, [n x inter]) = SiLU(gate) * up of bf16 rows [gate | up]. */
int cuda_silu_mul(uint16_t *d_out, const uint16_t *d_gate_up, int n, int inter,
                  cuda_stream stream);
/* x += delta (fp32). The forward fuses this into the projections (cuBLAS beta = 1). */
int cuda_residual_add(float *d_x, const float *d_delta, long n, cuda_stream stream);

/* Paged attention over NUM_ROWS query rows. Row r is token d_row_token[r] of sequence
 * d_row_seq[r]; it attends to cache positions [0, min(positions[token] + 1,
 * context_lens[seq])) of that sequence's block table. Q comes from the fp32 qkv rows (after
 * rotary), OUT is bf16 [tokens x num_heads * head_dim], written only at the rows' tokens. A row
 * with an empty span gets zeros. D_PARTIAL holds CUDA_ATTN_PARTIAL_PAIRS * num_heads *
 * (head_dim + 2) floats (used when a row's context is split over several blocks). */
typedef struct cuda_attn_args {
    uint16_t *out;
    const float *qkv;
    int qkv_stride;
    const uint16_t *k_cache, *v_cache;
    const int32_t *row_token, *row_seq;
    int num_rows;
    const int32_t *positions, *context_lens, *block_tables;
    int max_blocks_per_seq, block_size;
    int num_heads, num_kv_heads, head_dim;
    float *partial;
} cuda_attn_args;
int cuda_attention(const cuda_attn_args *a, cuda_stream stream);

/* Prefill attention on the tensor cores (head_dim a multiple of 16, see
 * cuda_prefill_uses_tensor_cores): the same result as cuda_attention for the prefill tokens,
 * computed per tile of up to 64 consecutive query tokens of one sequence. A's row fields are
 * unused; the tiles come from cuda_prefill_tiles. */
int cuda_prefill_uses_tensor_cores(int head_dim);
/* Most tiles a batch of MAX_TOKENS tokens in MAX_SEQS sequences can need. */
int cuda_prefill_tile_capacity(int max_tokens, int max_seqs);
/* Fills the tiles (host arrays) of the sequences with more than one query token; returns
 * their number. */
int cuda_prefill_tiles(int32_t *tok0, int32_t *count, int32_t *seq, const int32_t *query_start,
                       int num_seqs);
int cuda_attention_prefill(const cuda_attn_args *a, const int32_t *d_tile_tok0,
                           const int32_t *d_tile_count, const int32_t *d_tile_seq,
                           int num_tiles, cuda_stream stream);

/* --- sampling ---------------------------------------------------------------------------- */
/* One token per row of LOGITS [num_rows x vocab] into D_OUT. TEMPERATURE 0: argmax, lowest
 * index on ties. Otherwise softmax(logits / temperature) restricted to the top_k largest
 * (0 = all; ties by lower index) and then to the smallest prefix of those, in order of
 * decreasing value, whose mass reaches top_p of theirs (CPU semantics), drawn with a uniform
 * from a counter-based hash of (SEED, STEP, row): deterministic, but not the CPU's draws. */
int cuda_sample(int32_t *d_out, const float *d_logits, int num_rows, int vocab,
                float temperature, int top_k, float top_p, uint64_t seed, uint64_t step,
                cuda_stream stream);

/* --- hooks into an open CUDA backend (cuda_backend.c), for tests and the benchmark --------- */
struct kb_backend;
/* Turns decode-step CUDA graphs on or off; returns the previous setting. */
int cuda_backend_set_graphs(struct kb_backend *b, int on);
/* Graphs captured so far. */
int cuda_backend_num_graphs(const struct kb_backend *b);
/* The backend's GEMM on its own handle: out (fp32) = inp (bf16) W^T (bf16), synchronized.
 * 0, or -1 and why in ERR. */
int cuda_gemm_bf16(float *d_out, const uint16_t *d_inp, const uint16_t *d_w, int n, int in_dim,
                   int out_dim, char *err, size_t errlen);
/* The same GEMM (M rows, K in, N out, random bf16 operands) run back to back for SECONDS:
 * whether the GPU keeps its throughput once power and heat catch up with it, which a
 * kernel timed in short runs (the kernel database's) does not show. *ONCE is the rate of one
 * GEMM after a warm-up one, as a short run times it; TFLOPS[i] is window i's rate, each window
 * about WINDOW_S long (at least one GEMM); *NUM the windows, at most MAX. 0, or -1 and why in ERR. */
int cuda_gemm_bf16_sustained(int m, int k, int n, double seconds, double window_s, double *once, double *tflops,
                             int max, int *num, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
