/* The backend interface: what the engine's model runner needs from a device.
 * The CPU backend (kernels/cpu) implements it in fp32 C; the CUDA backend (kernels/cuda)
 * will implement it in bf16. Batches are described the way vLLM describes them: a flat list
 * of query tokens with positions and KV slots, and per sequence a block table. */
#ifndef SERVESIM_KERNELS_BACKEND_H
#define SERVESIM_KERNELS_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Llama-shaped transformer. */
typedef struct kb_shape {
    int num_layers;
    int hidden;          /* model dimension */
    int num_heads;       /* query heads */
    int num_kv_heads;    /* GQA: num_heads % num_kv_heads == 0 */
    int head_dim;
    int intermediate;    /* SwiGLU inner dimension */
    int vocab;
    float rope_theta;
    float rms_eps;
} kb_shape;

typedef enum kb_kind { KB_CPU, KB_CUDA } kb_kind;

typedef struct kb_options {
    kb_kind kind;
    kb_shape shape;
    uint64_t weight_seed;   /* weights are drawn from a seeded generator */
    int num_blocks;         /* KV pool: num_blocks x block_size slots per layer, for K and V */
    int block_size;
    int max_num_seqs;       /* most sequences in one forward */
    int max_num_tokens;     /* most query tokens in one forward */
    int max_blocks_per_seq; /* width of the block table rows */
    int threads;            /* CPU: BLAS and kernel threads; 0 = all cores */
    uint64_t sample_seed;   /* the sampler's generator */
    bool timed_only;        /* every forward will be timed (calibration): no decode graphs */
} kb_options;

/* One forward. Sequence s owns query tokens [query_start[s], query_start[s+1]); its tokens sit
 * at positions[...] and are written to KV slots slot_mapping[...] (slot = block * block_size +
 * offset; -1 = padding, computed but never written). context_lens[s] = tokens of sequence s in
 * the cache once this step's tokens are written (its attention span), counting only real
 * tokens. Logits are produced for the last query token of each sequence. */
typedef struct kb_batch {
    int num_tokens;
    const int32_t *token_ids;
    const int32_t *positions;
    const int32_t *slot_mapping;
    int num_seqs;
    const int32_t *query_start;     /* [num_seqs + 1] */
    const int32_t *context_lens;    /* [num_seqs] */
    const int32_t *block_tables;    /* [num_seqs * max_blocks_per_seq] */
} kb_batch;

/* Seconds spent per part of a forward, filled when a caller passes one (each part is
 * synchronized on a device, so timing a forward slows it a little). */
typedef struct kb_timing {
    double embed, norm, linear, rope, kv_write, attn_prefill, attn_decode, mlp_act, lm_head, sample;
    double total;
} kb_timing;

typedef struct kb_sampling {
    float temperature;   /* 0 = greedy */
    int top_k;           /* 0 = off */
    float top_p;         /* 1 = off */
} kb_sampling;

typedef struct kb_backend kb_backend;

/* Opens a backend. Refuses, before allocating anything, a model or KV pool that does not fit
 * the device's memory (sizes in the message), and a kind this build or machine cannot run.
 * Returns NULL with a one-line reason in ERR. */
kb_backend *kb_open(const kb_options *opt, char *err, size_t errlen);
void kb_close(kb_backend *b);
const char *kb_device_name(const kb_backend *b);
/* Bytes the weights and the KV pool will take, for messages and records. */
/* The memory this machine (or its container's cgroup) can still give a process, in bytes:
 * what the CPU backend's weights and KV, and the simulator's block pools, must fit in; no
 * more than SERVESIM_MEMORY_GIB where it is set. -1 with a reason in ERR when it cannot be
 * read, or SERVESIM_MEMORY_GIB is malformed. */
int kb_host_memory_available(size_t *bytes, char *err, size_t errlen);
/* SERVESIM_MEMORY_GIB, a user's cap on the memory above (on a shared machine, what plan and
 * sweep may take): 1 with the bytes in *BYTES, 0 when unset, -1 with a message naming it in
 * ERR when it is not a number of GiB above 0. main refuses a malformed one before any command. */
int kb_memory_cap(size_t *bytes, char *err, size_t errlen);
/* What the cgroup (v2) at DIR lets its processes still take: memory.max less memory.current,
 * the page cache (memory.stat's file) counted free, since the kernel reclaims it. 0 when DIR
 * sets no limit (memory.max absent or "max"), else 1 with the bytes in *BYTES. */
int kb_cgroup_memory_left(const char *dir, size_t *bytes);
size_t kb_weight_bytes(const kb_shape *s, kb_kind kind);
size_t kb_kv_bytes(const kb_shape *s, kb_kind kind, int num_blocks, int block_size);
/* KV blocks of OPT's block size that fit in FRACTION of the memory OPT's device has available,
 * next to OPT's weights and activations (OPT's num_blocks is ignored). -1 with a reason in ERR
 * when the memory cannot be read or not even one block fits. */
long kb_blocks_that_fit(const kb_options *opt, double fraction, char *err, size_t errlen);

/* Runs the model over BATCH; keeps the logits of each sequence's last token inside. */
int kb_forward(kb_backend *b, const kb_batch *batch, kb_timing *t);
/* Copies the last forward's logits, [num_seqs x vocab], to host memory. */
int kb_get_logits(kb_backend *b, float *out);
/* Samples one token per sequence of the last forward, from the backend's seeded generator. */
int kb_sample(kb_backend *b, const kb_sampling *p, int32_t *out, kb_timing *t);
/* Why the last call on B that returned non-zero failed (a bad batch, bad sampling settings). */
const char *kb_error(const kb_backend *b);

#endif
