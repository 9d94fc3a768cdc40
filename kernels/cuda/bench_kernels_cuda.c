/* Kernel lab for the CUDA backend (built only with CUDA; scripts/device-check.sh runs it):
 *   1. the device copy bandwidth (a 1 GiB device-to-device copy, read + written bytes),
 *   2. paged decode attention at batch 64 x 2048-token contexts (Llama-3-8B heads: 32 query,
 *      8 KV, head_dim 128, blocks of 16): checked against the CPU on a few sequences, then
 *      timed with events after warm-up, rotating over 4 KV pools (1 GiB, past the L2), and
 *      its K/V read rate set against the copy bandwidth (target: 80 %),
 *   3. prefill attention over one 4096-token prompt: the tensor-core tile kernel and the
 *      CUDA-core row kernel, checked on 8 rows against the CPU, in TFLOP/s,
 *   4. a whole decode step of the llama-3-8b shape at batch 1 (graph replay, and eager),
 *      against the weight-read floor (bf16 weights but the embedding table, plus the KV read,
 *      over the copy bandwidth; target: within 1.25 x),
 *   5. an 8192-cubed bf16 GEMM timed once, then run back to back for 10 s, its rate in 0.1 s
 *      windows (the first and the last second compared, the wall-clock start and end printed
 *      for device-check's nvidia-smi samples): whether the GPU keeps the throughput of a short
 *      run once power and heat catch up (the kernel database times kernels in short runs; a
 *      server prefills for seconds on end).
 * Usage: bench_kernels_cuda [--quick]. Exit status 0 when every check passed (targets missed
 * are reported, not failures); 2 with no GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>
#include <gsl/gsl_rng.h>

#include "kernels/backend.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/cuda_ops.h"
#include "metrics/metrics.h"

#define CHECK(call)                                                                       \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess) {                                                          \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                 \
                    cudaGetErrorString(e_));                                              \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)
#define CHECKI(call)                                                                      \
    do {                                                                                  \
        int e_ = (call);                                                                  \
        if (e_) {                                                                         \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                 \
                    cuda_error_string(e_));                                               \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

static double median(double *v, int n) { return met_median(v, (size_t)n); }

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double copy_bandwidth(void)
{
    size_t bytes = (size_t)1 << 30;
    void *a, *b;
    CHECK(cudaMalloc(&a, bytes));
    CHECK(cudaMalloc(&b, bytes));
    CHECKI(cuda_draw_weights(a, bytes / 2, 1, 0, 1.0, 0, NULL)); /* never time zeros */
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    double t[10];
    for (int i = 0; i < 12; i++) {
        CHECK(cudaEventRecord(e0, NULL));
        CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, NULL));
        CHECK(cudaEventRecord(e1, NULL));
        CHECK(cudaEventSynchronize(e1));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        if (i >= 2)
            t[i - 2] = ms * 1e-3;
    }
    double bw = 2.0 * bytes / median(t, 10);
    cudaFree(a);
    cudaFree(b);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return bw;
}

/* Returns 0 if the check passed. */
static int bench_decode_attention(double copy_bw, int quick)
{
    enum { HEADS = 32, KVH = 8, HD = 128, BS = 16, POOLS = 4, CHECK_SEQS = 3 };
    const int batch = 64, ctx = 2048, reps = quick ? 5 : 20;
    const int q_dim = HEADS * HD, kv_dim = KVH * HD, stride = q_dim + 2 * kv_dim;
    const int blocks_per_seq = ctx / BS, num_blocks = batch * blocks_per_seq;
    const size_t pool = (size_t)num_blocks * BS * kv_dim;
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);

    int32_t *tables = malloc(sizeof(int32_t) * num_blocks), pos[64], ctxs[64], rows[64];
    for (int i = 0; i < num_blocks; i++)
        tables[i] = i;
    for (int i = num_blocks - 1; i > 0; i--) { /* scatter the blocks over the pool */
        int j = (int)gsl_rng_uniform_int(rng, (unsigned long)i + 1);
        int32_t t = tables[i];
        tables[i] = tables[j];
        tables[j] = t;
    }
    for (int s = 0; s < batch; s++) {
        pos[s] = ctx - 1;
        ctxs[s] = ctx;
        rows[s] = s;
    }
    float *qkv = malloc(sizeof(float) * batch * stride);
    for (int i = 0; i < batch * stride; i++)
        qkv[i] = (float)(2.0 * gsl_rng_uniform(rng) - 1.0);

    uint16_t *d_k[POOLS], *d_v[POOLS];
    for (int p = 0; p < POOLS; p++) {
        CHECK(cudaMalloc((void **)&d_k[p], pool * 2));
        CHECK(cudaMalloc((void **)&d_v[p], pool * 2));
        CHECKI(cuda_draw_weights(d_k[p], pool, 100 + p, 0, 0.5, 0, NULL));
        CHECKI(cuda_draw_weights(d_v[p], pool, 100 + p, 1, 0.5, 0, NULL));
    }
    float *d_qkv, *d_part;
    uint16_t *d_out;
    int32_t *d_tab, *d_pos, *d_ctx, *d_rows;
    CHECK(cudaMalloc((void **)&d_qkv, sizeof(float) * batch * stride));
    CHECK(cudaMalloc((void **)&d_part, sizeof(float) * CUDA_ATTN_PARTIAL_PAIRS * HEADS * (HD + 2)));
    CHECK(cudaMalloc((void **)&d_out, 2 * (size_t)batch * q_dim));
    CHECK(cudaMalloc((void **)&d_tab, sizeof(int32_t) * num_blocks));
    CHECK(cudaMalloc((void **)&d_pos, sizeof pos));
    CHECK(cudaMalloc((void **)&d_ctx, sizeof ctxs));
    CHECK(cudaMalloc((void **)&d_rows, sizeof rows));
    CHECK(cudaMemcpy(d_qkv, qkv, sizeof(float) * batch * stride, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_tab, tables, sizeof(int32_t) * num_blocks, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_pos, pos, sizeof pos, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_ctx, ctxs, sizeof ctxs, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_rows, rows, sizeof rows, cudaMemcpyHostToDevice));
    cuda_attn_args a = {.out = d_out, .qkv = d_qkv, .qkv_stride = stride, .k_cache = d_k[0],
                        .v_cache = d_v[0], .row_token = d_rows, .row_seq = d_rows,
                        .num_rows = batch, .positions = d_pos, .context_lens = d_ctx,
                        .block_tables = d_tab, .max_blocks_per_seq = blocks_per_seq,
                        .block_size = BS, .num_heads = HEADS, .num_kv_heads = KVH,
                        .head_dim = HD, .partial = d_part};

    /* check pool 0 against the CPU on a few sequences */
    CHECKI(cuda_poison_bf16(d_out, (size_t)batch * q_dim));
    CHECKI(cuda_attention(&a, NULL));
    CHECK(cudaDeviceSynchronize());
    float *kc = malloc(sizeof(float) * pool), *vc = malloc(sizeof(float) * pool);
    float *got = malloc(sizeof(float) * batch * q_dim), *ref = malloc(sizeof(float) * q_dim);
    float *scores = malloc(sizeof(float) * ctx);
    CHECKI(cuda_download_bf16(kc, d_k[0], pool));
    CHECKI(cuda_download_bf16(vc, d_v[0], pool));
    CHECKI(cuda_download_bf16(got, d_out, (size_t)batch * q_dim));
    double worst = 0.0;
    for (int c = 0; c < CHECK_SEQS; c++) {
        int s = c * (batch - 1) / (CHECK_SEQS - 1);
        attention_decode_paged(ref, qkv + (size_t)s * stride, kc, vc,
                               tables + (size_t)s * blocks_per_seq, BS, pos[s], ctx, HEADS, KVH,
                               HD, scores);
        double diff = 0.0, scale = 0.0;
        for (int i = 0; i < q_dim; i++) {
            double g = got[(size_t)s * q_dim + i];
            diff = isfinite(g) ? fmax(diff, fabs(g - ref[i])) : INFINITY;
            scale = fmax(scale, fabs(ref[i]));
        }
        worst = fmax(worst, diff / scale);
    }
    int ok = worst < 1e-2;
    printf("decode attention check (3 of 64 sequences vs CPU): rel err %.2e %s\n", worst,
           ok ? "ok" : "FAILED");

    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    double *t = malloc(sizeof(double) * reps * POOLS);
    for (int w = 0; w < 3; w++) /* warm-up */
        CHECKI(cuda_attention(&a, NULL));
    int n = 0;
    for (int r = 0; r < reps; r++)
        for (int p = 0; p < POOLS; p++) {
            a.k_cache = d_k[p];
            a.v_cache = d_v[p];
            CHECK(cudaEventRecord(e0, NULL));
            CHECKI(cuda_attention(&a, NULL));
            CHECK(cudaEventRecord(e1, NULL));
            CHECK(cudaEventSynchronize(e1));
            float ms;
            CHECK(cudaEventElapsedTime(&ms, e0, e1));
            t[n++] = ms * 1e-3;
        }
    double sec = median(t, n);
    double bytes = 2.0 * batch * ctx * kv_dim * 2; /* K and V, bf16 */
    printf("decode attention, batch %d x context %d (32/8 heads, hd 128, block 16): "
           "%.1f us, %.0f GB/s of K/V = %.0f %% of the copy bandwidth (target 80 %%), "
           "%d context slots per row\n",
           batch, ctx, sec * 1e6, bytes / sec / 1e9, 100.0 * bytes / sec / copy_bw,
           cuda_attn_slots(batch, KVH));
    for (int p = 0; p < POOLS; p++) {
        cudaFree(d_k[p]);
        cudaFree(d_v[p]);
    }
    cudaFree(d_qkv), cudaFree(d_part), cudaFree(d_out), cudaFree(d_tab), cudaFree(d_pos);
    cudaFree(d_ctx), cudaFree(d_rows);
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    free(tables), free(qkv), free(kc), free(vc), free(got), free(ref), free(scores), free(t);
    gsl_rng_free(rng);
    return ok ? 0 : 1;
}

/* One 4096-token prompt of the 8B shape (causal over itself): the tensor-core tile kernel and
 * the CUDA-core row kernel, checked on 8 rows against the CPU, timed (median of events). */
static int bench_prefill_attention(int quick)
{
    enum { HEADS = 32, KVH = 8, HD = 128, BS = 16, N = 4096, CHECK_ROWS = 8 };
    const int q_dim = HEADS * HD, kv_dim = KVH * HD, stride = q_dim + 2 * kv_dim;
    const int nb = N / BS, reps = quick ? 3 : 10;
    const size_t pool = (size_t)nb * BS * kv_dim;
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    int32_t *table = malloc(sizeof(int32_t) * nb), *pos = malloc(sizeof(int32_t) * N);
    int32_t qs[2] = {0, N}, ctx = N;
    for (int i = 0; i < nb; i++)
        table[i] = (int32_t)((i * 37 + 3) % nb); /* 37 is coprime to 256 */
    for (int i = 0; i < N; i++)
        pos[i] = i;
    float *qkv = malloc(sizeof(float) * (size_t)N * stride);
    for (size_t i = 0; i < (size_t)N * stride; i++)
        qkv[i] = (float)(2.0 * gsl_rng_uniform(rng) - 1.0);
    int32_t tok0[N / 64 + 2], cnt[N / 64 + 2], tseq[N / 64 + 2];
    int ntiles = cuda_prefill_tiles(tok0, cnt, tseq, qs, 1);
    int32_t *rows = malloc(sizeof(int32_t) * N), *rseq = calloc(N, sizeof(int32_t));
    for (int i = 0; i < N; i++)
        rows[i] = i;
    float *d_qkv, *d_part;
    uint16_t *d_k, *d_v, *d_out;
    int32_t *d_tab, *d_pos, *d_ctx, *d_rows, *d_rseq, *d_t0, *d_tc, *d_ts;
    CHECK(cudaMalloc((void **)&d_qkv, sizeof(float) * (size_t)N * stride));
    CHECK(cudaMalloc((void **)&d_part, sizeof(float) * CUDA_ATTN_PARTIAL_PAIRS * HEADS * (HD + 2)));
    CHECK(cudaMalloc((void **)&d_k, pool * 2));
    CHECK(cudaMalloc((void **)&d_v, pool * 2));
    CHECK(cudaMalloc((void **)&d_out, 2 * (size_t)N * q_dim));
    CHECK(cudaMalloc((void **)&d_tab, sizeof(int32_t) * nb));
    CHECK(cudaMalloc((void **)&d_pos, sizeof(int32_t) * N));
    CHECK(cudaMalloc((void **)&d_ctx, sizeof(int32_t)));
    CHECK(cudaMalloc((void **)&d_rows, sizeof(int32_t) * N));
    CHECK(cudaMalloc((void **)&d_rseq, sizeof(int32_t) * N));
    CHECK(cudaMalloc((void **)&d_t0, sizeof tok0));
    CHECK(cudaMalloc((void **)&d_tc, sizeof cnt));
    CHECK(cudaMalloc((void **)&d_ts, sizeof tseq));
    CHECKI(cuda_draw_weights(d_k, pool, 7, 0, 0.5, 0, NULL));
    CHECKI(cuda_draw_weights(d_v, pool, 7, 1, 0.5, 0, NULL));
    CHECK(cudaMemcpy(d_qkv, qkv, sizeof(float) * (size_t)N * stride, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_tab, table, sizeof(int32_t) * nb, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_pos, pos, sizeof(int32_t) * N, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_ctx, &ctx, sizeof ctx, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_rows, rows, sizeof(int32_t) * N, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_rseq, rseq, sizeof(int32_t) * N, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_t0, tok0, sizeof tok0, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_tc, cnt, sizeof cnt, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_ts, tseq, sizeof tseq, cudaMemcpyHostToDevice));
    cuda_attn_args a = {.out = d_out, .qkv = d_qkv, .qkv_stride = stride, .k_cache = d_k,
                        .v_cache = d_v, .row_token = d_rows, .row_seq = d_rseq, .num_rows = N,
                        .positions = d_pos, .context_lens = d_ctx, .block_tables = d_tab,
                        .max_blocks_per_seq = nb, .block_size = BS, .num_heads = HEADS,
                        .num_kv_heads = KVH, .head_dim = HD, .partial = d_part};
    float *kc = malloc(sizeof(float) * pool), *vc = malloc(sizeof(float) * pool);
    float *got = malloc(sizeof(float) * (size_t)N * q_dim), ref[HEADS * HD];
    float *scores = malloc(sizeof(float) * N);
    CHECKI(cuda_download_bf16(kc, d_k, pool));
    CHECKI(cuda_download_bf16(vc, d_v, pool));
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    double flops = 0.0;
    for (int i = 0; i < N; i++)
        flops += 4.0 * (i + 1) * HD * HEADS;
    int rc = 0;
    for (int kind = 0; kind < 2; kind++) {
        CHECKI(cuda_poison_bf16(d_out, (size_t)N * q_dim));
        double t[10];
        for (int r = -1; r < reps; r++) {
            CHECK(cudaEventRecord(e0, NULL));
            if (kind == 0)
                CHECKI(cuda_attention_prefill(&a, d_t0, d_tc, d_ts, ntiles, NULL));
            else
                CHECKI(cuda_attention(&a, NULL));
            CHECK(cudaEventRecord(e1, NULL));
            CHECK(cudaEventSynchronize(e1));
            float ms;
            CHECK(cudaEventElapsedTime(&ms, e0, e1));
            if (r >= 0)
                t[r] = ms * 1e-3;
        }
        CHECKI(cuda_download_bf16(got, d_out, (size_t)N * q_dim));
        double worst = 0.0;
        for (int c = 0; c < CHECK_ROWS; c++) {
            int i = c == 0 ? 0 : (int)((long)c * (N - 1) / (CHECK_ROWS - 1));
            attention_prefill_paged(ref, q_dim, qkv + (size_t)i * stride, stride, kc, vc, table,
                                    BS, &pos[i], 1, N, HEADS, KVH, HD, scores);
            double diff = 0.0, scale = 0.0;
            for (int d = 0; d < q_dim; d++) {
                double g = got[(size_t)i * q_dim + d];
                diff = isfinite(g) ? fmax(diff, fabs(g - ref[d])) : INFINITY;
                scale = fmax(scale, fabs(ref[d]));
            }
            worst = fmax(worst, diff / scale);
        }
        double sec = median(t, reps);
        printf("prefill attention, one %d-token prompt (32/8 heads, hd 128), %s: %.3f ms, "
               "%.1f TFLOP/s; check on %d rows: rel err %.2e %s\n",
               N, kind == 0 ? "tensor-core tiles" : "CUDA-core rows", sec * 1e3,
               flops / sec / 1e12, CHECK_ROWS, worst, worst < 1e-2 ? "ok" : "FAILED");
        rc |= worst >= 1e-2;
    }
    cudaFree(d_qkv), cudaFree(d_part), cudaFree(d_k), cudaFree(d_v), cudaFree(d_out);
    cudaFree(d_tab), cudaFree(d_pos), cudaFree(d_ctx), cudaFree(d_rows), cudaFree(d_rseq);
    cudaFree(d_t0), cudaFree(d_tc), cudaFree(d_ts);
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    free(table), free(pos), free(qkv), free(rows), free(rseq), free(kc), free(vc), free(got);
    free(scores);
    gsl_rng_free(rng);
    return rc;
}

static int bench_decode_step(double copy_bw, int quick)
{
    const int ctx = 512, bs = 16, steps = quick ? 10 : 40;
    kb_options o = {
        .kind = KB_CUDA,
        .shape = {.num_layers = 32, .hidden = 4096, .num_heads = 32, .num_kv_heads = 8,
                  .head_dim = 128, .intermediate = 14336, .vocab = 128256,
                  .rope_theta = 500000.0f, .rms_eps = 1e-5f},
        .weight_seed = 1, .num_blocks = 256, .block_size = bs, .max_num_seqs = 8,
        .max_num_tokens = 1024, .max_blocks_per_seq = 128, .sample_seed = 1,
    };
    char err[512];
    double t0 = now();
    kb_backend *b = kb_open(&o, err, sizeof err);
    if (!b) {
        printf("8B decode step: kb_open failed: %s\n", err);
        return 1;
    }
    printf("8B-shaped model opened in %.1f s (weights drawn on the GPU): %s\n", now() - t0,
           kb_device_name(b));
    int32_t ids[1024], posv[1024], slots[1024], qs[2], ctxv[1], table[128];
    for (int i = 0; i < 128; i++)
        table[i] = (i * 37 + 5) % 256;
    for (int i = 0; i < ctx; i++) {
        ids[i] = (i * 7919) % o.shape.vocab;
        posv[i] = i;
        slots[i] = table[i / bs] * bs + i % bs;
    }
    qs[0] = 0;
    qs[1] = ctx;
    ctxv[0] = ctx;
    kb_batch prefill = {ctx, ids, posv, slots, 1, qs, ctxv, table};
    if (kb_forward(b, &prefill, NULL)) {
        printf("8B prefill failed: %s\n", kb_error(b));
        kb_close(b);
        return 1;
    }
    double *t = malloc(sizeof(double) * steps);
    int rc = 0;
    for (int graphs = 1; graphs >= 0 && rc == 0; graphs--) {
        cuda_backend_set_graphs(b, graphs);
        for (int i = -3; i < steps; i++) { /* 3 warm-up steps */
            int p = ctx + (i + 3) % 64;
            int32_t id = (p * 31) % o.shape.vocab, pp = p, sl = table[p / bs] * bs + p % bs;
            int32_t q1[2] = {0, 1}, c1 = p + 1;
            kb_batch dec = {1, &id, &pp, &sl, 1, q1, &c1, table};
            double s0 = now();
            if (kb_forward(b, &dec, NULL)) {
                printf("8B decode failed: %s\n", kb_error(b));
                rc = 1;
                break;
            }
            if (i >= 0)
                t[i] = now() - s0;
        }
        if (rc)
            break;
        double sec = median(t, steps);
        double weight_bytes = (double)kb_weight_bytes(&o.shape, KB_CUDA)
                            - 2.0 * o.shape.vocab * o.shape.hidden; /* one embedding row */
        double kv_bytes = 2.0 * o.shape.num_layers * (ctx + 32) * o.shape.num_kv_heads
                        * o.shape.head_dim * 2;
        double floor = (weight_bytes + kv_bytes) / copy_bw;
        printf("8B decode step, batch 1, context ~%d, %s: %.3f ms (wall, median of %d), "
               "weight-read floor %.3f ms: %.2f x the floor (target 1.25 x)\n",
               ctx, graphs ? "CUDA graph" : "eager", sec * 1e3, steps, floor * 1e3, sec / floor);
    }
    if (rc == 0) {
        kb_timing tm;
        int32_t id = 1, pp = ctx, sl = table[ctx / bs] * bs + ctx % bs, q1[2] = {0, 1}, c1 = ctx + 1;
        kb_batch dec = {1, &id, &pp, &sl, 1, q1, &c1, table};
        if (kb_forward(b, &dec, &tm) == 0)
            printf("8B decode step parts (timed, synchronized per part, ms): embed %.3f norm %.3f "
                   "linear %.3f rope %.3f kv_write %.3f attn_decode %.3f mlp_act %.3f "
                   "lm_head %.3f total %.3f\n",
                   tm.embed * 1e3, tm.norm * 1e3, tm.linear * 1e3, tm.rope * 1e3,
                   tm.kv_write * 1e3, tm.attn_decode * 1e3, tm.mlp_act * 1e3, tm.lm_head * 1e3,
                   tm.total * 1e3);
    }
    free(t);
    kb_close(b);
    return rc;
}

/* Wall-clock time with milliseconds, as nvidia-smi's timestamps read (local time), so that
 * device-check's samples of the clocks line up with the windows. */
static void wall_clock(char *out, size_t len)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    localtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(out, len, "%Y/%m/%d %H:%M:%S", &tm);
    snprintf(out + n, len - n, ".%03ld", ts.tv_nsec / 1000000);
}

/* The rate over windows [from, to) of equal work each: the harmonic mean of their rates. */
static double mean_rate(const double *t, int from, int to)
{
    double inv = 0;
    for (int i = from; i < to; i++)
        inv += 1 / t[i];
    return (to - from) / inv;
}

static int bench_sustained_gemm(int quick)
{
    const int size = quick ? 256 : 8192;
    const double seconds = quick ? 0.5 : 10, window = quick ? 0.05 : 0.1;
    enum { MAX_WINDOWS = 1024 };
    static double t[MAX_WINDOWS];
    int n = 0;
    double once = 0;
    char err[512], start[64], end[64];
    wall_clock(start, sizeof start);
    int rc = cuda_gemm_bf16_sustained(size, size, size, seconds, window, &once, t, MAX_WINDOWS, &n, err, sizeof err);
    wall_clock(end, sizeof end);
    if (rc) {
        printf("sustained bf16 GEMM: FAILED: %s\n", err);
        return 1;
    }
    /* the first and the last second's windows (at least one each) */
    int per_second = (int)fmax(1, round(1.0 / window)), k = per_second < n ? per_second : n;
    double first = mean_rate(t, 0, k), last = mean_rate(t, n - k, n), low = INFINITY;
    for (int i = 0; i < n; i++)
        low = fmin(low, t[i]);
    printf("sustained bf16 GEMM %d x %d x %d from %s to %s: one GEMM %.0f TFLOP/s; %d windows of ~%.2f s: first "
           "second %.0f, last second %.0f (%.1f%% of the first), lowest window %.0f\n",
           size, size, size, start, end, once, n, window, first, last, 100 * last / first, low);
    printf("sustained bf16 GEMM windows (TFLOP/s, in order):");
    for (int i = 0; i < n; i++)
        printf(" %.0f", t[i]);
    printf("\n");
    return 0;
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    /* Line by line: device-check.sh writes this into a file under a timeout, and a run cut
     * short must keep the results it had already printed. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    char why[256];
    if (cuda_probe(why, sizeof why)) {
        fprintf(stderr, "bench_kernels_cuda: %s\n", why);
        return 2;
    }
    double bw = copy_bandwidth();
    printf("device copy bandwidth (1 GiB device-to-device, read + write): %.0f GB/s\n", bw / 1e9);
    int rc = bench_decode_attention(bw, quick);
    rc |= bench_prefill_attention(quick);
    rc |= bench_decode_step(bw, quick);
    rc |= bench_sustained_gemm(quick);
    printf("bench_kernels_cuda: %s\n", rc ? "a check FAILED" : "all checks passed");
    return rc;
}
