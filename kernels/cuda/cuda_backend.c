/* The CUDA backend: the CPU backend's Llama-shaped forward (same weights layout and draw
 * order, same rotary, KV-cache layout and attention spans) with bf16 weights and KV cache,
 * fp32 accumulation, cuBLAS for the linear layers and the kernels of kernels.cu for the rest.
 *
 * Precision: the residual stream x and the qkv projection are fp32; the inputs of every
 * GEMM (normed x, attention output, SiLU output) and the gate/up projection are bf16; GEMMs
 * accumulate in fp32 (CUBLAS_COMPUTE_32F). The projections back into the residual stream
 * (Wo, W_down) run with beta = 1 straight into x: the residual add is their epilogue.
 *
 * Weights: models of at most HOST_DRAW_MAX_PARAMS parameters are drawn on the host exactly as
 * the CPU backend draws them (GSL mt19937 from weight_seed, same order and distributions),
 * rounded to bf16 and uploaded in bounded chunks, so CPU and CUDA run the same model (the
 * agreement tests use such shapes). Larger models are drawn on the GPU by a counter-based hash
 * (cuda_draw_weights): same distributions and deterministic, but other values than the CPU's.
 *
 * Prefill attention runs on the tensor cores (cuda_attention_prefill, WMMA) when head_dim is a
 * multiple of 16; SERVESIM_CUDA_PREFILL=rows selects the CUDA-core row kernel instead (the one
 * decodes use), for comparison.
 *
 * Synchronization: kb_forward returns when the forward has finished on the GPU (so an
 * engine's wall clock around it is the forward's time and errors surface there); kb_sample
 * and kb_get_logits return with their results on the host.
 *
 * CUDA graphs: a forward whose sequences are all decodes (one query token each), with no
 * timing asked for, replays a graph captured for its bucket of num_seqs: 1, 2, 4, 8, then
 * multiples of 8 up to min(max_num_seqs, max_num_tokens, 512), and that cap itself. The batch
 * is padded up to the bucket with rows that attend to nothing (context 0, slot -1) and whose
 * logits are ignored. Every bucket's graph is captured when the backend opens (as vLLM does at
 * start-up), on a batch of padding rows only, so no capture lands inside a served step, and
 * kept until kb_close; a backend opened with timed_only captures none. The graph reads its
 * inputs from fixed device buffers that each forward fills before launching it. Each bucket
 * runs eagerly once before its capture (capture records, it does not run), so kernels and
 * cuBLAS's choices are loaded outside the capture. A capture that fails turns graphs off with
 * a warning on stderr: the eager run before it stands. Larger batches, mixed or prefill
 * batches, and timed forwards run eagerly. Setting SERVESIM_CUDA_GRAPHS=0 in the environment
 * turns graphs off.
 *
 * Timing (kb_timing): events recorded around each part and synchronized, the parts named as
 * the CPU backend's; total runs from the first event to the last, so it also holds the gaps
 * between parts. Timed forwards are eager, never graphs. */
#include "kernels/backend_impl.h"
#include "kernels/cuda/cuda_ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <gsl/gsl_rng.h>

#define GIB (1024.0 * 1024.0 * 1024.0)
#define HOST_DRAW_MAX_PARAMS 500000000ull
#define HOST_DRAW_CHUNK ((size_t)1 << 22)
#define BLAS_WORKSPACE_BYTES ((size_t)32 << 20)
#define RESERVE_BYTES ((size_t)256 << 20) /* cuBLAS handle, graphs, allocator slack */
#define MAX_GRAPH_SEQS 512

typedef struct layer_weights {
    uint16_t *attn_norm, *wqkv, *wo, *mlp_norm, *w_gate_up, *w_down;
} layer_weights;

typedef struct cuda_backend {
    kb_backend base;
    kb_options opt;
    int qkv_dim, q_dim, kv_dim, max_keys;
    cudaStream_t stream;
    cublasHandle_t blas;
    void *blas_ws;
    uint16_t *weights; /* one allocation; the pointers below point into it */
    uint16_t *embedding, *final_norm, *lm_head;
    layer_weights *layers;
    uint16_t *kv;      /* [layer][K, V][num_blocks][block_size][num_kv_heads][head_dim] */
    size_t kv_layer_elems;
    void *act;         /* one allocation for the activations below */
    float *x, *qkv, *logits, *partial;
    uint16_t *xn, *att, *gate_up, *mlp, *last;
    /* inputs: the same layout on the device and in pinned host memory */
    int32_t *d_in, *h_in;
    size_t in_ints;
    size_t off_ids, off_pos, off_slots, off_row_token, off_row_seq, off_qs, off_ctx, off_tables,
        off_out, off_tile_tok0, off_tile_count, off_tile_seq;
    int tile_capacity;
    int prefill_tiles; /* prefill attention on the tensor-core tile kernel */
    int num_logit_rows;
    uint64_t sample_step;
    cudaEvent_t ev_mark, ev_now, ev_start;
    int graphs_on;
    int num_buckets;
    int buckets[MAX_GRAPH_SEQS];
    cudaGraphExec_t graphs[MAX_GRAPH_SEQS];
} cuda_backend;

/* Every CUDA and cuBLAS call is checked; a failure becomes kb_error's text with the file and
 * line, and the call returns -1. */
static int cuda_fail(cuda_backend *b, const char *file, int line, const char *call,
                     const char *msg)
{
    const char *base = strrchr(file, '/');
    return kb_fail(&b->base, "CUDA error at %s:%d (%.60s): %s", base ? base + 1 : file, line,
                   call, msg);
}

#define CK(call)                                                                          \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess)                                                            \
            return cuda_fail(b, __FILE__, __LINE__, #call, cudaGetErrorString(e_));       \
    } while (0)
#define CKL(call)                                                                         \
    do {                                                                                  \
        int e_ = (call);                                                                  \
        if (e_)                                                                           \
            return cuda_fail(b, __FILE__, __LINE__, #call, cuda_error_string(e_));        \
    } while (0)
#define CB(call)                                                                          \
    do {                                                                                  \
        cublasStatus_t s_ = (call);                                                       \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                  \
            return cuda_fail(b, __FILE__, __LINE__, #call, cublasGetStatusString(s_));    \
    } while (0)

/* ------------------------------------------------------------------------------------------
 * memory check */

static int cuda_memory_available(size_t *bytes, char *err, size_t errlen)
{
    if (cuda_probe(err, errlen))
        return -1;
    size_t free_b = 0, total_b = 0;
    cudaError_t e = cudaSetDevice(0);
    if (e == cudaSuccess)
        e = cudaMemGetInfo(&free_b, &total_b);
    if (e != cudaSuccess) {
        snprintf(err, errlen, "backend cuda: cannot read the GPU's free memory "
                 "(cudaMemGetInfo: %s)", cudaGetErrorString(e));
        return -1;
    }
    *bytes = free_b;
    return 0;
}

typedef struct act_layout {
    size_t x, qkv, logits, partial, xn, att, gate_up, mlp, last, total;
} act_layout;

static size_t align256(size_t n)
{
    return (n + 255) & ~(size_t)255;
}

static act_layout layout_of(const kb_options *o)
{
    const kb_shape *s = &o->shape;
    size_t t = (size_t)o->max_num_tokens, seqs = (size_t)o->max_num_seqs;
    size_t d = (size_t)s->hidden, hd = (size_t)s->head_dim, inter = (size_t)s->intermediate;
    size_t qkv = ((size_t)s->num_heads + 2 * (size_t)s->num_kv_heads) * hd;
    size_t q_dim = (size_t)s->num_heads * hd;
    act_layout L;
    size_t off = 0;
#define PLACE(field, bytes) (L.field = off, off += align256(bytes))
    PLACE(x, t * d * 4);
    PLACE(qkv, t * qkv * 4);
    PLACE(logits, seqs * (size_t)s->vocab * 4);
    PLACE(partial, (size_t)CUDA_ATTN_PARTIAL_PAIRS * s->num_heads * (hd + 2) * 4);
    PLACE(xn, t * d * 2);
    PLACE(att, t * q_dim * 2);
    PLACE(gate_up, t * 2 * inter * 2);
    PLACE(mlp, t * inter * 2);
    PLACE(last, seqs * d * 2);
#undef PLACE
    L.total = off;
    return L;
}

static size_t input_ints(const kb_options *o)
{
    return 5 * (size_t)o->max_num_tokens + 3 * (size_t)o->max_num_seqs + 1
         + (size_t)o->max_num_seqs * o->max_blocks_per_seq
         + 3 * (size_t)cuda_prefill_tile_capacity(o->max_num_tokens, o->max_num_seqs);
}

static size_t cuda_workspace_bytes(const kb_options *o)
{
    return layout_of(o).total + input_ints(o) * 4 + BLAS_WORKSPACE_BYTES + RESERVE_BYTES;
}

/* ------------------------------------------------------------------------------------------
 * weights */

typedef struct tensor_spec {
    uint16_t **dst;
    size_t n;
    double scale; /* uniform with this standard deviation; 0 = a norm gain around 1 */
} tensor_spec;

/* The tensors in the CPU backend's draw (and layout) order; returns how many. */
static int weight_specs(cuda_backend *b, tensor_spec *out)
{
    const kb_shape *s = &b->opt.shape;
    size_t d = (size_t)s->hidden, inter = (size_t)s->intermediate;
    int k = 0;
    out[k++] = (tensor_spec){&b->embedding, (size_t)s->vocab * d, 1.0};
    for (int l = 0; l < s->num_layers; l++) {
        layer_weights *L = &b->layers[l];
        out[k++] = (tensor_spec){&L->attn_norm, d, 0.0};
        out[k++] = (tensor_spec){&L->wqkv, (size_t)b->qkv_dim * d, 1.0 / sqrt((double)d)};
        out[k++] = (tensor_spec){&L->wo, d * b->q_dim, 1.0 / sqrt((double)b->q_dim)};
        out[k++] = (tensor_spec){&L->mlp_norm, d, 0.0};
        out[k++] = (tensor_spec){&L->w_gate_up, 2 * inter * d, 1.0 / sqrt((double)d)};
        out[k++] = (tensor_spec){&L->w_down, d * inter, 1.0 / sqrt((double)inter)};
    }
    out[k++] = (tensor_spec){&b->final_norm, d, 0.0};
    out[k++] = (tensor_spec){&b->lm_head, (size_t)s->vocab * d, 1.0 / sqrt((double)d)};
    return k;
}

static int init_weights(cuda_backend *b)
{
    int n_specs = 3 + 6 * b->opt.shape.num_layers;
    tensor_spec *specs = malloc(sizeof *specs * (size_t)n_specs);
    if (!specs)
        return kb_fail(&b->base, "out of host memory listing the weights");
    n_specs = weight_specs(b, specs);
    uint16_t *w = b->weights;
    for (int i = 0; i < n_specs; i++) {
        *specs[i].dst = w;
        w += specs[i].n;
    }
    int host = kb_param_count(&b->opt.shape) <= HOST_DRAW_MAX_PARAMS;
    float *draw = NULL;
    uint16_t *stage = NULL;
    gsl_rng *rng = NULL;
    int rc = 0;
    if (host) {
        draw = malloc(HOST_DRAW_CHUNK * sizeof *draw);
        rng = gsl_rng_alloc(gsl_rng_mt19937);
        if (!draw || !rng || cudaMallocHost((void **)&stage, HOST_DRAW_CHUNK * 2) != cudaSuccess) {
            rc = kb_fail(&b->base, "out of host memory for the weight draw");
            goto done;
        }
        gsl_rng_set(rng, b->opt.weight_seed);
    }
    for (int i = 0; i < n_specs && rc == 0; i++) {
        const tensor_spec *t = &specs[i];
        if (!host) {
            int e = cuda_draw_weights(*t->dst, t->n, b->opt.weight_seed, (uint32_t)i, t->scale,
                                      t->scale == 0.0, b->stream);
            if (e)
                rc = cuda_fail(b, __FILE__, __LINE__, "cuda_draw_weights", cuda_error_string(e));
            continue;
        }
        /* Exactly the CPU backend's draw_uniform / draw_norm, then bf16. */
        double a = sqrt(3.0) * t->scale;
        for (size_t done = 0; done < t->n && rc == 0;) {
            size_t m = t->n - done < HOST_DRAW_CHUNK ? t->n - done : HOST_DRAW_CHUNK;
            for (size_t j = 0; j < m; j++)
                draw[j] = t->scale == 0.0
                              ? (float)(1.0 + 0.2 * (gsl_rng_uniform(rng) - 0.5))
                              : (float)((2.0 * gsl_rng_uniform(rng) - 1.0) * a);
            for (size_t j = 0; j < m; j++)
                stage[j] = cuda_f32_to_bf16(draw[j]);
            cudaError_t e = cudaMemcpy(*t->dst + done, stage, m * 2, cudaMemcpyHostToDevice);
            if (e != cudaSuccess)
                rc = cuda_fail(b, __FILE__, __LINE__, "cudaMemcpy(weights)", cudaGetErrorString(e));
            done += m;
        }
    }
    if (rc == 0) {
        cudaError_t e = cudaStreamSynchronize(b->stream);
        if (e != cudaSuccess)
            rc = cuda_fail(b, __FILE__, __LINE__, "weight draw", cudaGetErrorString(e));
    }
done:
    free(specs);
    free(draw);
    if (stage)
        cudaFreeHost(stage);
    if (rng)
        gsl_rng_free(rng);
    return rc;
}

/* ------------------------------------------------------------------------------------------
 * open / close */

static void cuda_close(kb_backend *base)
{
    cuda_backend *b = (cuda_backend *)base;
    if (b->stream)
        cudaStreamSynchronize(b->stream);
    for (int i = 0; i < b->num_buckets; i++)
        if (b->graphs[i])
            cudaGraphExecDestroy(b->graphs[i]);
    if (b->blas)
        cublasDestroy(b->blas);
    cudaFree(b->blas_ws);
    cudaFree(b->weights);
    cudaFree(b->kv);
    cudaFree(b->act);
    cudaFree(b->d_in);
    if (b->h_in)
        cudaFreeHost(b->h_in);
    if (b->ev_mark)
        cudaEventDestroy(b->ev_mark);
    if (b->ev_now)
        cudaEventDestroy(b->ev_now);
    if (b->ev_start)
        cudaEventDestroy(b->ev_start);
    if (b->stream)
        cudaStreamDestroy(b->stream);
    free(b->layers);
    free(b);
}

static void describe_gpu(cuda_backend *b)
{
    struct cudaDeviceProp prop;
    int driver = 0, runtime = 0, blas = 0, sms = 0;
    memset(&prop, 0, sizeof prop);
    cudaGetDeviceProperties(&prop, 0);
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    cublasGetVersion(b->blas, &blas);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    /* the name cut to 64 characters (a GPU's is about 30; the field holds 256) keeps the
     * numbers after it inside device_name */
    snprintf(b->base.device_name, sizeof b->base.device_name,
             "cuda: %.64s (sm_%d%d, %d SMs, %.0f GiB; driver %d.%d, runtime %d.%d, cuBLAS %d; bf16)",
             prop.name, prop.major, prop.minor, sms, prop.totalGlobalMem / GIB, driver / 1000,
             driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10, blas);
}

static void build_buckets(cuda_backend *b)
{
    int cap = b->opt.max_num_seqs < b->opt.max_num_tokens ? b->opt.max_num_seqs
                                                          : b->opt.max_num_tokens;
    if (cap > MAX_GRAPH_SEQS)
        cap = MAX_GRAPH_SEQS;
    int n = 0;
    for (int s = 1; s <= cap; s = s < 8 ? 2 * s : s + 8)
        b->buckets[n++] = s;
    if (n == 0 || b->buckets[n - 1] != cap)
        b->buckets[n++] = cap;
    b->num_buckets = n;
    const char *env = getenv("SERVESIM_CUDA_GRAPHS");
    b->graphs_on = !(env && strcmp(env, "0") == 0);
    env = getenv("SERVESIM_CUDA_PREFILL");
    b->prefill_tiles = cuda_prefill_uses_tensor_cores(b->opt.shape.head_dim)
                    && !(env && strcmp(env, "rows") == 0);
}

static const kb_ops cuda_ops;

#define OPEN_CK(call)                                                                     \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess) {                                                          \
            snprintf(err, errlen, "backend cuda: %s failed: %s", #call,                   \
                     cudaGetErrorString(e_));                                             \
            goto fail;                                                                    \
        }                                                                                 \
    } while (0)

static int warm_graphs(cuda_backend *b);

static kb_backend *cuda_open(const kb_options *opt, char *err, size_t errlen)
{
    const kb_shape *s = &opt->shape;
    if (cuda_attn_supported(s->num_heads, s->num_kv_heads, s->head_dim, err, errlen))
        return NULL;
    cuda_backend *b = calloc(1, sizeof *b);
    if (!b || !(b->layers = calloc((size_t)s->num_layers, sizeof *b->layers))) {
        free(b);
        snprintf(err, errlen, "out of host memory opening the CUDA backend");
        return NULL;
    }
    b->base.ops = &cuda_ops;
    b->opt = *opt;
    b->q_dim = s->num_heads * s->head_dim;
    b->kv_dim = s->num_kv_heads * s->head_dim;
    b->qkv_dim = b->q_dim + 2 * b->kv_dim;
    b->max_keys = opt->max_blocks_per_seq * opt->block_size;
    b->kv_layer_elems = (size_t)opt->num_blocks * opt->block_size * b->kv_dim;

    OPEN_CK(cudaSetDevice(0));
    OPEN_CK(cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking));
    cublasStatus_t bs = cublasCreate(&b->blas);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        b->blas = NULL;
        snprintf(err, errlen, "backend cuda: cublasCreate failed: %s", cublasGetStatusString(bs));
        goto fail;
    }
    OPEN_CK(cudaMalloc(&b->blas_ws, BLAS_WORKSPACE_BYTES));
    if (cublasSetStream(b->blas, b->stream) != CUBLAS_STATUS_SUCCESS
        || cublasSetWorkspace(b->blas, b->blas_ws, BLAS_WORKSPACE_BYTES)
               != CUBLAS_STATUS_SUCCESS) {
        snprintf(err, errlen, "backend cuda: cannot set the cuBLAS stream and workspace");
        goto fail;
    }
    size_t wbytes = kb_weight_bytes(s, KB_CUDA), kvbytes = b->kv_layer_elems * 2 * 2 * s->num_layers;
    if (cudaMalloc((void **)&b->weights, wbytes) != cudaSuccess
        || cudaMalloc((void **)&b->kv, kvbytes) != cudaSuccess) {
        cudaGetLastError();
        snprintf(err, errlen, "backend cuda: cannot allocate %.1f GiB of bf16 weights and "
                 "%.1f GiB of KV pool on the GPU", wbytes / GIB, kvbytes / GIB);
        goto fail;
    }
    act_layout L = layout_of(opt);
    OPEN_CK(cudaMalloc(&b->act, L.total));
    char *act = b->act;
    b->x = (float *)(act + L.x);
    b->qkv = (float *)(act + L.qkv);
    b->logits = (float *)(act + L.logits);
    b->partial = (float *)(act + L.partial);
    b->xn = (uint16_t *)(act + L.xn);
    b->att = (uint16_t *)(act + L.att);
    b->gate_up = (uint16_t *)(act + L.gate_up);
    b->mlp = (uint16_t *)(act + L.mlp);
    b->last = (uint16_t *)(act + L.last);
    size_t t = (size_t)opt->max_num_tokens, seqs = (size_t)opt->max_num_seqs;
    b->off_ids = 0;
    b->off_pos = t;
    b->off_slots = 2 * t;
    b->off_row_token = 3 * t;
    b->off_row_seq = 4 * t;
    b->off_qs = 5 * t;
    b->off_ctx = b->off_qs + seqs + 1;
    b->off_out = b->off_ctx + seqs;
    b->off_tables = b->off_out + seqs;
    b->tile_capacity = cuda_prefill_tile_capacity(opt->max_num_tokens, opt->max_num_seqs);
    b->off_tile_tok0 = b->off_tables + seqs * (size_t)opt->max_blocks_per_seq;
    b->off_tile_count = b->off_tile_tok0 + b->tile_capacity;
    b->off_tile_seq = b->off_tile_count + b->tile_capacity;
    b->in_ints = input_ints(opt);
    OPEN_CK(cudaMalloc((void **)&b->d_in, b->in_ints * 4));
    OPEN_CK(cudaMallocHost((void **)&b->h_in, b->in_ints * 4));
    OPEN_CK(cudaEventCreate(&b->ev_mark));
    OPEN_CK(cudaEventCreate(&b->ev_now));
    OPEN_CK(cudaEventCreate(&b->ev_start));
    /* The pool is written once, as the CPU's is (there so that reads of never-written context
     * are not served from the zero page); nothing should read an unwritten slot. */
    OPEN_CK(cudaMemsetAsync(b->kv, 0, kvbytes, b->stream));
    OPEN_CK(cudaMemsetAsync(b->d_in, 0, b->in_ints * 4, b->stream));
    if (init_weights(b)) {
        snprintf(err, errlen, "backend cuda: drawing the weights failed: %s", b->base.error);
        goto fail;
    }
    build_buckets(b);
    if (opt->timed_only)
        b->graphs_on = 0; /* timed forwards never replay graphs: capturing them is wasted */
    describe_gpu(b);
    if (warm_graphs(b)) {
        snprintf(err, errlen, "backend cuda: the decode warm-up before the graph captures failed: %s",
                 b->base.error);
        goto fail;
    }
    b->base.error[0] = 0;
    return &b->base;
fail:
    cuda_close(&b->base);
    return NULL;
}

/* ------------------------------------------------------------------------------------------
 * forward */

/* Adds the time since the last mark to *PART (synchronizing), when timing. */
static int lap(cuda_backend *b, kb_timing *tm, double *part)
{
    if (!tm)
        return 0;
    CK(cudaEventRecord(b->ev_now, b->stream));
    CK(cudaEventSynchronize(b->ev_now));
    float ms = 0.0f;
    CK(cudaEventElapsedTime(&ms, b->ev_mark, b->ev_now));
    *part += ms * 1e-3;
    cudaEvent_t e = b->ev_mark;
    b->ev_mark = b->ev_now;
    b->ev_now = e;
    return 0;
}

#define LAP(field)                                                                        \
    do {                                                                                  \
        if (lap(b, tm, tm ? &tm->field : NULL))                                           \
            return -1;                                                                    \
    } while (0)

/* out [n x out_dim] (OUT_TYPE) = inp [n x in_dim] (bf16) W^T + beta out, W [out_dim x in_dim]
 * (bf16), fp32 accumulation. Column-major, that is out^T = W^T' inp^T: "T", "N" as on the
 * CPU. */
static int gemm(cuda_backend *b, void *out, cudaDataType out_type, const uint16_t *inp,
                const uint16_t *w, int n, int in_dim, int out_dim, float beta)
{
    const float alpha = 1.0f;
    CB(cublasGemmEx(b->blas, CUBLAS_OP_T, CUBLAS_OP_N, out_dim, n, in_dim, &alpha, w,
                    CUDA_R_16BF, in_dim, inp, CUDA_R_16BF, in_dim, &beta, out, out_type,
                    out_dim, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return 0;
}

/* Enqueues a whole forward over the inputs already in d_in: N_TOK tokens, N_SEQ sequences,
 * attention rows [0, N_DEC) decode and [N_DEC, N_DEC + N_PRE) prefill (or N_TILES prefill
 * tiles for the tensor-core kernel). */
static int enqueue_forward(cuda_backend *b, int n_tok, int n_seq, int n_dec, int n_pre,
                           int n_tiles, kb_timing *tm)
{
    const kb_shape *s = &b->opt.shape;
    const int d = s->hidden, inter = s->intermediate;
    cudaStream_t st = b->stream;
    const int32_t *in = b->d_in;
    if (tm) {
        memset(tm, 0, sizeof *tm);
        CK(cudaEventRecord(b->ev_start, st));
        CK(cudaEventRecord(b->ev_mark, st));
    }
    CKL(cuda_embedding(b->x, b->embedding, in + b->off_ids, n_tok, d, st));
    LAP(embed);
    cuda_attn_args a = {
        .out = b->att, .qkv = b->qkv, .qkv_stride = b->qkv_dim,
        .positions = in + b->off_pos, .context_lens = in + b->off_ctx,
        .block_tables = in + b->off_tables, .max_blocks_per_seq = b->opt.max_blocks_per_seq,
        .block_size = b->opt.block_size, .num_heads = s->num_heads,
        .num_kv_heads = s->num_kv_heads, .head_dim = s->head_dim, .partial = b->partial,
    };
    for (int l = 0; l < s->num_layers; l++) {
        const layer_weights *L = &b->layers[l];
        uint16_t *k_cache = b->kv + 2 * (size_t)l * b->kv_layer_elems;
        uint16_t *v_cache = k_cache + b->kv_layer_elems;

        CKL(cuda_rmsnorm(b->xn, b->x, L->attn_norm, NULL, n_tok, d, s->rms_eps, st));
        LAP(norm);
        if (gemm(b, b->qkv, CUDA_R_32F, b->xn, L->wqkv, n_tok, d, b->qkv_dim, 0.0f))
            return -1;
        LAP(linear);
        CKL(cuda_rotary(b->qkv, in + b->off_pos, n_tok, b->qkv_dim,
                        s->num_heads + s->num_kv_heads, s->head_dim, s->rope_theta, st));
        LAP(rope);
        /* Every token's K/V is in the cache before any attention reads it: through the
         * prefix cache a sequence may read blocks another one of this batch writes now. */
        CKL(cuda_kv_write(k_cache, v_cache, b->qkv, b->qkv_dim, in + b->off_slots, n_tok,
                          s->num_heads, s->num_kv_heads, s->head_dim, st));
        LAP(kv_write);
        a.k_cache = k_cache;
        a.v_cache = v_cache;
        a.row_token = in + b->off_row_token;
        a.row_seq = in + b->off_row_seq;
        a.num_rows = n_dec;
        CKL(cuda_attention(&a, st));
        LAP(attn_decode);
        a.row_token += n_dec;
        a.row_seq += n_dec;
        a.num_rows = n_pre;
        if (b->prefill_tiles)
            CKL(cuda_attention_prefill(&a, in + b->off_tile_tok0, in + b->off_tile_count,
                                       in + b->off_tile_seq, n_tiles, st));
        else
            CKL(cuda_attention(&a, st));
        LAP(attn_prefill);
        if (gemm(b, b->x, CUDA_R_32F, b->att, L->wo, n_tok, b->q_dim, d, 1.0f))
            return -1;
        LAP(linear);

        CKL(cuda_rmsnorm(b->xn, b->x, L->mlp_norm, NULL, n_tok, d, s->rms_eps, st));
        LAP(norm);
        if (gemm(b, b->gate_up, CUDA_R_16BF, b->xn, L->w_gate_up, n_tok, d, 2 * inter, 0.0f))
            return -1;
        LAP(linear);
        CKL(cuda_silu_mul(b->mlp, b->gate_up, n_tok, inter, st));
        LAP(mlp_act);
        if (gemm(b, b->x, CUDA_R_32F, b->mlp, L->w_down, n_tok, inter, d, 1.0f))
            return -1;
        LAP(linear);
    }
    CKL(cuda_rmsnorm(b->last, b->x, b->final_norm, in + b->off_qs, n_seq, d, s->rms_eps, st));
    LAP(norm);
    if (gemm(b, b->logits, CUDA_R_32F, b->last, b->lm_head, n_seq, d, s->vocab, 0.0f))
        return -1;
    LAP(lm_head);
    if (tm) {
        float ms = 0.0f;
        CK(cudaEventElapsedTime(&ms, b->ev_start, b->ev_mark));
        tm->total = ms * 1e-3;
    }
    return 0;
}

/* Copies the first N ints of the input array at OFF to the device. */
static int upload(cuda_backend *b, size_t off, size_t n)
{
    if (n)
        CK(cudaMemcpyAsync(b->d_in + off, b->h_in + off, n * 4, cudaMemcpyHostToDevice,
                           b->stream));
    return 0;
}

static int upload_inputs(cuda_backend *b, int n_tok, int n_seq, int n_tables)
{
    const size_t mb = (size_t)b->opt.max_blocks_per_seq;
    if (upload(b, b->off_ids, n_tok) || upload(b, b->off_pos, n_tok)
        || upload(b, b->off_slots, n_tok) || upload(b, b->off_row_token, n_tok)
        || upload(b, b->off_row_seq, n_tok) || upload(b, b->off_qs, (size_t)n_seq + 1)
        || upload(b, b->off_ctx, n_seq) || upload(b, b->off_tables, (size_t)n_tables * mb))
        return -1;
    return 0;
}

static int bucket_of(const cuda_backend *b, int n_seqs)
{
    for (int i = 0; i < b->num_buckets; i++)
        if (b->buckets[i] >= n_seqs)
            return i;
    return -1;
}

static int capture(cuda_backend *b, int bi)
{
    int n = b->buckets[bi];
    cudaGraph_t graph = NULL;
    CK(cudaStreamBeginCapture(b->stream, cudaStreamCaptureModeThreadLocal));
    int rc = enqueue_forward(b, n, n, n, 0, 0, NULL);
    cudaError_t e = cudaStreamEndCapture(b->stream, &graph);
    if (rc) {
        if (graph)
            cudaGraphDestroy(graph);
        return -1; /* the error is already recorded */
    }
    CK(e);
    e = cudaGraphInstantiate(&b->graphs[bi], graph, 0);
    cudaGraphDestroy(graph);
    if (e != cudaSuccess) {
        b->graphs[bi] = NULL;
        CK(e);
    }
    return 0;
}

/* Host inputs of rows [FROM, TO) as padding: rows that attend to nothing (context 0) and
 * write nothing (slot -1), one query token each. */
static void pad_rows(cuda_backend *b, int from, int to)
{
    int32_t *h = b->h_in;
    for (int r = from; r < to; r++) {
        h[b->off_ids + r] = 0;
        h[b->off_pos + r] = 0;
        h[b->off_slots + r] = -1;
        h[b->off_qs + r + 1] = r + 1;
        h[b->off_ctx + r] = 0;
    }
}

/* Graphs only save launches: a capture that fails leaves the eager run that preceded it
 * standing and turns graphs off, rather than failing this and every later decode step. */
static void capture_or_go_eager(cuda_backend *b, int bi)
{
    if (capture(b, bi) == 0)
        return;
    cudaGetLastError();
    b->graphs_on = 0;
    fprintf(stderr, "servesim: warning: CUDA graph capture failed (%s); decode steps run "
            "eagerly from now on\n", b->base.error);
    b->base.error[0] = 0;
}

/* Captures every decode bucket's graph at open, on batches of padding rows only, as vLLM
 * captures its graphs at start-up: a first use is an eager run plus the capture and
 * instantiation of a graph of every layer, which would otherwise land inside the first served
 * step of each batch size, and inside the latencies a validation measures. */
static int warm_graphs(cuda_backend *b)
{
    int32_t *h = b->h_in;
    for (int bi = 0; bi < b->num_buckets && b->graphs_on; bi++) {
        int n = b->buckets[bi];
        h[b->off_qs] = 0;
        pad_rows(b, 0, n);
        for (int r = 0; r < n; r++) {
            h[b->off_row_token + r] = r;
            h[b->off_row_seq + r] = r;
        }
        if (upload_inputs(b, n, n, 0) || enqueue_forward(b, n, n, n, 0, 0, NULL))
            return -1;
        capture_or_go_eager(b, bi);
        CK(cudaStreamSynchronize(b->stream)); /* before the next bucket rewrites h */
    }
    return 0;
}

static int cuda_forward(kb_backend *base, const kb_batch *bt, kb_timing *t)
{
    cuda_backend *b = (cuda_backend *)base;
    b->num_logit_rows = 0;
    if (kb_check_batch(&b->base, &b->opt, bt))
        return -1;
    /* The pinned input buffer may still feed an earlier copy only if a call failed midway. */
    CK(cudaStreamSynchronize(b->stream));
    const int n_tok = bt->num_tokens, n_seq = bt->num_seqs;
    const size_t mb = (size_t)b->opt.max_blocks_per_seq;
    int32_t *h = b->h_in;
    int pure_decode = n_tok == n_seq;
    int bi = pure_decode && b->graphs_on && !t ? bucket_of(b, n_seq) : -1;
    int rows = bi >= 0 ? b->buckets[bi] : n_tok, seqs = bi >= 0 ? rows : n_seq;

    memcpy(h + b->off_ids, bt->token_ids, (size_t)n_tok * 4);
    memcpy(h + b->off_pos, bt->positions, (size_t)n_tok * 4);
    memcpy(h + b->off_slots, bt->slot_mapping, (size_t)n_tok * 4);
    memcpy(h + b->off_qs, bt->query_start, ((size_t)n_seq + 1) * 4);
    memcpy(h + b->off_ctx, bt->context_lens, (size_t)n_seq * 4);
    memcpy(h + b->off_tables, bt->block_tables, (size_t)n_seq * mb * 4);
    pad_rows(b, n_seq, seqs); /* up to the graph's bucket */
    /* Attention rows: the decode sequences' tokens, then every prefill token. */
    int n_dec = 0, n_pre = 0;
    int32_t *row_token = h + b->off_row_token, *row_seq = h + b->off_row_seq;
    for (int s = 0; s < seqs; s++)
        if (s >= n_seq || bt->query_start[s + 1] - bt->query_start[s] == 1) {
            row_token[n_dec] = s < n_seq ? bt->query_start[s] : s;
            row_seq[n_dec++] = s;
        }
    for (int s = 0; s < n_seq; s++)
        if (bt->query_start[s + 1] - bt->query_start[s] > 1)
            for (int tk = bt->query_start[s]; tk < bt->query_start[s + 1]; tk++) {
                row_token[n_dec + n_pre] = tk;
                row_seq[n_dec + n_pre++] = s;
            }
    int n_tiles = cuda_prefill_tiles(h + b->off_tile_tok0, h + b->off_tile_count,
                                     h + b->off_tile_seq, bt->query_start, n_seq);
    if (upload_inputs(b, rows, seqs, n_seq) || upload(b, b->off_tile_tok0, n_tiles)
        || upload(b, b->off_tile_count, n_tiles) || upload(b, b->off_tile_seq, n_tiles))
        return -1;

    if (bi >= 0 && b->graphs[bi]) {
        CK(cudaGraphLaunch(b->graphs[bi], b->stream));
    } else if (bi >= 0) {
        /* First use of the bucket: run it eagerly (which also loads every kernel and lets
         * cuBLAS settle its choices outside the capture), then capture it for next time. */
        if (enqueue_forward(b, rows, seqs, rows, 0, 0, NULL))
            return -1;
        capture_or_go_eager(b, bi);
    } else if (enqueue_forward(b, n_tok, n_seq, n_dec, n_pre, n_tiles, t)) {
        return -1;
    }
    CK(cudaStreamSynchronize(b->stream));
    b->num_logit_rows = n_seq;
    return 0;
}

static int cuda_get_logits(kb_backend *base, float *out)
{
    cuda_backend *b = (cuda_backend *)base;
    if (!b->num_logit_rows)
        return kb_fail(base, "no logits: no forward has run yet");
    CK(cudaMemcpyAsync(out, b->logits, (size_t)b->num_logit_rows * b->opt.shape.vocab * 4,
                       cudaMemcpyDeviceToHost, b->stream));
    CK(cudaStreamSynchronize(b->stream));
    return 0;
}

/* T, when given, gets the sampling time (events around the kernel and the copy of the tokens
 * back) in t->sample, added to t->total, as on the CPU. */
static int cuda_sample_tokens(kb_backend *base, const kb_sampling *p, int32_t *out,
                              kb_timing *t)
{
    cuda_backend *b = (cuda_backend *)base;
    if (!b->num_logit_rows)
        return kb_fail(base, "nothing to sample: no forward has run yet");
    if (!(p->temperature >= 0.0f) || p->top_k < 0 || !(p->top_p > 0.0f && p->top_p <= 1.0f))
        return kb_fail(base, "sampling needs temperature >= 0, top_k >= 0 and top_p in (0, 1]; "
                       "got %g, %d, %g", (double)p->temperature, p->top_k, (double)p->top_p);
    int32_t *d_out = b->d_in + b->off_out, *h_out = b->h_in + b->off_out;
    if (t)
        CK(cudaEventRecord(b->ev_start, b->stream));
    CKL(cuda_sample(d_out, b->logits, b->num_logit_rows, b->opt.shape.vocab, p->temperature,
                    p->top_k, p->top_p, b->opt.sample_seed, b->sample_step++, b->stream));
    CK(cudaMemcpyAsync(h_out, d_out, (size_t)b->num_logit_rows * 4, cudaMemcpyDeviceToHost,
                       b->stream));
    if (t)
        CK(cudaEventRecord(b->ev_now, b->stream));
    CK(cudaStreamSynchronize(b->stream));
    memcpy(out, h_out, (size_t)b->num_logit_rows * 4);
    if (t) {
        float ms = 0.0f;
        CK(cudaEventElapsedTime(&ms, b->ev_start, b->ev_now));
        t->sample = ms * 1e-3;
        t->total += t->sample;
    }
    return 0;
}

static const kb_ops cuda_ops = {
    .close = cuda_close,
    .forward = cuda_forward,
    .get_logits = cuda_get_logits,
    .sample = cuda_sample_tokens,
};

const kb_device kb_cuda_device = {
    .memory_name = "this GPU",
    .dtype = "bf16",
    .memory_available = cuda_memory_available,
    .workspace_bytes = cuda_workspace_bytes,
    .open = cuda_open,
};

/* ------------------------------------------------------------------------------------------
 * hooks for tests and the kernel benchmark (cuda_ops.h) */

int cuda_backend_set_graphs(kb_backend *base, int on)
{
    cuda_backend *b = (cuda_backend *)base;
    int was = b->graphs_on;
    b->graphs_on = on;
    return was;
}

int cuda_backend_num_graphs(const kb_backend *base)
{
    const cuda_backend *b = (const cuda_backend *)base;
    int n = 0;
    for (int i = 0; i < b->num_buckets; i++)
        n += b->graphs[i] != NULL;
    return n;
}

int cuda_gemm_bf16(float *d_out, const uint16_t *d_inp, const uint16_t *d_w, int n, int in_dim,
                   int out_dim, char *err, size_t errlen)
{
    cuda_backend tmp;
    memset(&tmp, 0, sizeof tmp);
    cuda_backend *b = &tmp;
    if (cublasCreate(&b->blas) != CUBLAS_STATUS_SUCCESS) {
        snprintf(err, errlen, "cublasCreate failed");
        return -1;
    }
    int rc = gemm(b, d_out, CUDA_R_32F, d_inp, d_w, n, in_dim, out_dim, 0.0f);
    if (rc == 0 && cudaDeviceSynchronize() != cudaSuccess)
        rc = kb_fail(&b->base, "cudaDeviceSynchronize after the GEMM failed");
    if (rc)
        snprintf(err, errlen, "%s", b->base.error);
    cublasDestroy(b->blas);
    return rc;
}

/* COUNT GEMMs of A (M x K) by W (N x K) into C, timed by events E0 and E1 on the default
 * stream: their milliseconds in *MS; 0, or non-zero when a call failed. */
static int timed_gemms(cuda_backend *b, float *d_c, const uint16_t *d_a, const uint16_t *d_w, int m, int k, int n,
                       int count, cudaEvent_t e0, cudaEvent_t e1, float *ms)
{
    if (cudaEventRecord(e0, NULL) != cudaSuccess) return -1;
    for (int i = 0; i < count; i++)
        if (gemm(b, d_c, CUDA_R_32F, d_a, d_w, m, k, n, 0.0f)) return -1;
    return cudaEventRecord(e1, NULL) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
           cudaEventElapsedTime(ms, e0, e1) != cudaSuccess;
}

int cuda_gemm_bf16_sustained(int m, int k, int n, double seconds, double window_s, double *once, double *tflops,
                             int max, int *num, char *err, size_t errlen)
{
    cuda_backend tmp;
    memset(&tmp, 0, sizeof tmp);
    cuda_backend *b = &tmp;
    uint16_t *d_a = NULL, *d_w = NULL;
    float *d_c = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    *num = 0;
    int rc = 0;
    if (cublasCreate(&b->blas) != CUBLAS_STATUS_SUCCESS) {
        snprintf(err, errlen, "cublasCreate failed");
        return -1;
    }
    if (cudaMalloc((void **)&d_a, (size_t)m * k * 2) != cudaSuccess ||
        cudaMalloc((void **)&d_w, (size_t)n * k * 2) != cudaSuccess ||
        cudaMalloc((void **)&d_c, (size_t)m * n * 4) != cudaSuccess || cudaEventCreate(&e0) != cudaSuccess ||
        cudaEventCreate(&e1) != cudaSuccess)
        rc = kb_fail(&b->base, "out of device memory for a %d x %d x %d GEMM", m, k, n);
    /* random operands: a tensor core's power, and so its clock, depends on the bits it flips */
    if (rc == 0 && (cuda_draw_weights(d_a, (size_t)m * k, 1, 0, 0.5, 0, NULL) ||
                    cuda_draw_weights(d_w, (size_t)n * k, 1, 1, 0.5, 0, NULL)))
        rc = kb_fail(&b->base, "drawing the GEMM's operands failed");
    /* one GEMM, timed, sets how many make a window */
    float ms = 0;
    if (rc == 0 && (gemm(b, d_c, CUDA_R_32F, d_a, d_w, m, k, n, 0.0f) ||
                    timed_gemms(b, d_c, d_a, d_w, m, k, n, 1, e0, e1, &ms)))
        rc = kb_fail(&b->base, "the first GEMMs failed");
    int per = rc == 0 && ms > 0 ? (int)fmax(1, window_s * 1e3 / ms) : 1;
    double flop = 2.0 * m * k * n, spent = 0;
    *once = rc == 0 && ms > 0 ? flop / (ms * 1e-3) / 1e12 : 0;
    while (rc == 0 && *num < max && spent < seconds) {
        if (timed_gemms(b, d_c, d_a, d_w, m, k, n, per, e0, e1, &ms) || !(ms > 0)) /* a GEMM's own error stays */
            rc = b->base.error[0] ? -1 : kb_fail(&b->base, "timing a window of GEMMs failed");
        if (rc == 0) {
            tflops[(*num)++] = flop * per / (ms * 1e-3) / 1e12;
            spent += ms * 1e-3;
        }
    }
    if (rc)
        snprintf(err, errlen, "%s", b->base.error);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    cudaFree(d_a);
    cudaFree(d_w);
    cudaFree(d_c);
    cublasDestroy(b->blas);
    return rc ? -1 : 0;
}
