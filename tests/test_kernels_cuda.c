/* CUDA backend: each kernel against the CPU ops on fresh random inputs (outputs poisoned with
 * NaN before each run), the whole forward against the CPU backend on the same weights, CUDA
 * graphs against eager runs, and GPU sampling. With no GPU every GPU test reports itself
 * skipped with the reason; the host-side parts (the no-GPU message, bf16 rounding, the split
 * arithmetic) run everywhere. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "tests/kernel_fixture.h"

#ifndef SERVESIM_CUDA_BACKEND

Test(kernels_cuda, needs_a_cuda_build)
{
    cr_skip_test("no CUDA device: this build has no CUDA backend (nvcc was not found)");
}

#else

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "kernels/cpu/ops.h"
#include "kernels/cuda/cuda_ops.h"

#define BF16_TOL 1e-2

#define NEED_GPU()                                                                        \
    do {                                                                                  \
        char why_[256];                                                                   \
        if (cuda_probe(why_, sizeof why_))                                                \
            cr_skip_test("no CUDA device: %s", why_);                                     \
    } while (0)

#define CU(call)                                                                          \
    do {                                                                                  \
        int e_ = (call);                                                                  \
        cr_assert_eq(e_, 0, "%s: %s", #call, cuda_error_string(e_));                      \
    } while (0)

/* Rounds in place to what a bf16 upload keeps. */
static void round_bf16(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = cuda_bf16_to_f32(cuda_f32_to_bf16(x[i]));
}

static void *dev(size_t bytes)
{
    void *p = NULL;
    CU(cuda_malloc(&p, bytes));
    return p;
}

static float *dev_f32(const float *h, size_t n)
{
    float *d = dev(n * sizeof *d);
    CU(cuda_upload(d, h, n * sizeof *d));
    return d;
}

static uint16_t *dev_bf16(const float *h, size_t n)
{
    uint16_t *d = dev(n * sizeof *d);
    CU(cuda_upload_bf16(d, h, n));
    return d;
}

static int32_t *dev_i32(const int32_t *h, size_t n)
{
    int32_t *d = dev(n * sizeof *d);
    CU(cuda_upload(d, h, n * sizeof *d));
    return d;
}

/* ---------------------------------------------------------------------------------------
 * host-side parts: these run on every machine */

Test(kernels_cuda, open_without_a_gpu_says_so)
{
    char why[256];
    if (cuda_probe(why, sizeof why) == 0)
        cr_skip_test("a CUDA device is present: the no-GPU message cannot be checked here");
    cr_assert(strstr(why, "no CUDA device on this machine"), "probe: %s", why);
    kb_options o = {
        .kind = KB_CUDA,
        .shape = {.num_layers = 2, .hidden = 128, .num_heads = 8, .num_kv_heads = 2,
                  .head_dim = 16, .intermediate = 256, .vocab = 512, .rope_theta = 10000.0f,
                  .rms_eps = 1e-5f},
        .weight_seed = 42, .num_blocks = 64, .block_size = 4, .max_num_seqs = 8,
        .max_num_tokens = 128, .max_blocks_per_seq = 32, .sample_seed = 7,
    };
    char err[512] = "";
    cr_assert_null(kb_open(&o, err, sizeof err));
    cr_assert(strstr(err, "backend cuda: no CUDA device on this machine (cudaGetDeviceCount: "),
              "message: %s", err);
}

Test(kernels_cuda, bf16_rounding_is_nearest_even)
{
    cr_assert_eq(cuda_f32_to_bf16(1.0f), 0x3f80);
    cr_assert_eq(cuda_f32_to_bf16(-2.0f), 0xc000);
    /* 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1). */
    cr_assert_eq(cuda_f32_to_bf16(1.0f + 1.0f / 256), 0x3f80);
    cr_assert_eq(cuda_f32_to_bf16(1.0f + 3.0f / 256), 0x3f82);
    cr_assert(isnan(cuda_bf16_to_f32(cuda_f32_to_bf16(NAN))));
    cr_assert(isinf(cuda_bf16_to_f32(cuda_f32_to_bf16(INFINITY))));
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    for (int i = 0; i < 10000; i++) {
        float x = (float)gsl_ran_gaussian(rng, 100.0);
        float y = cuda_bf16_to_f32(cuda_f32_to_bf16(x));
        cr_assert_leq(fabsf(x - y), fabsf(x) / 256.0f, "%g -> %g", (double)x, (double)y);
    }
    gsl_rng_free(rng);
}

Test(kernels_cuda, split_slots_fit_the_partials)
{
    for (int kvh = 1; kvh <= 64; kvh *= 2)
        for (int rows = 1; rows <= 4096; rows++) {
            int s = cuda_attn_slots(rows, kvh);
            cr_assert(s >= 1 && s <= CUDA_ATTN_MAX_SLOTS);
            if (s > 1)
                cr_assert_lt(rows * s, CUDA_ATTN_PARTIAL_PAIRS, "rows %d kvh %d slots %d", rows,
                             kvh, s);
        }
    char err[256];
    cr_assert_eq(cuda_attn_supported(32, 8, 128, err, sizeof err), 0);
    cr_assert_eq(cuda_attn_supported(28, 4, 128, err, sizeof err), 0);
    cr_assert_neq(cuda_attn_supported(32, 8, 96, err, sizeof err), 0);
    cr_assert(strstr(err, "head_dim 96"), "%s", err);
    cr_assert_neq(cuda_attn_supported(64, 4, 128, err, sizeof err), 0);
}

/* ---------------------------------------------------------------------------------------
 * kernels against the CPU ops */

Test(kernels_cuda, embedding_norm_rotary_silu_residual_match_cpu)
{
    NEED_GPU();
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 11);
    static const int shapes[][4] = {/* n, hidden, heads, head_dim */
                                    {1, 64, 4, 16}, {7, 256, 8, 32}, {33, 4096, 40, 128},
                                    {130, 1000, 2, 256}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int n = shapes[k][0], d = shapes[k][1], heads = shapes[k][2], hd = shapes[k][3];
        int vocab = 300, inter = d + 24;
        size_t nd = (size_t)n * d;
        float *table = malloc(sizeof(float) * vocab * d), *x = malloc(sizeof(float) * nd);
        float *w = malloc(sizeof(float) * d), *ref = malloc(sizeof(float) * nd);
        /* the gathering RMSNorm below reads back 2 rows, more than N = 1 has */
        float *got = malloc(sizeof(float) * (n > 1 ? nd : 2 * (size_t)d));
        int32_t *ids = malloc(sizeof(int32_t) * n), *pos = malloc(sizeof(int32_t) * n);
        int32_t qs[3] = {0, n / 2 + 1, n};
        fill_uniform(table, (size_t)vocab * d, rng);
        round_bf16(table, (size_t)vocab * d);
        fill_uniform(x, nd, rng);
        fill_uniform(w, d, rng);
        round_bf16(w, d);
        for (int i = 0; i < n; i++) {
            ids[i] = (int32_t)gsl_rng_uniform_int(rng, vocab);
            pos[i] = (int32_t)gsl_rng_uniform_int(rng, 100000);
        }
        float *d_out = dev(sizeof(float) * nd), *d_x = dev_f32(x, nd);
        uint16_t *d_table = dev_bf16(table, (size_t)vocab * d), *d_w = dev_bf16(w, d);
        uint16_t *d_bf = dev(sizeof(uint16_t) * nd * 2);
        int32_t *d_ids = dev_i32(ids, n), *d_pos = dev_i32(pos, n), *d_qs = dev_i32(qs, 3);

        /* embedding */
        CU(cuda_poison_f32(d_out, nd));
        CU(cuda_embedding(d_out, d_table, d_ids, n, d, NULL));
        CU(cuda_download(got, d_out, sizeof(float) * nd));
        embedding_forward(ref, table, ids, n, d);
        cr_assert_eq(rel_err(got, ref, nd), 0.0, "embedding n=%d d=%d", n, d);

        /* RMSNorm, then the gathering form (last token of 2 sequences) */
        CU(cuda_poison_bf16(d_bf, nd));
        CU(cuda_rmsnorm(d_bf, d_x, d_w, NULL, n, d, 1e-5f, NULL));
        CU(cuda_download_bf16(got, d_bf, nd));
        rmsnorm_forward(ref, x, w, n, d, 1e-5f);
        double e = rel_err(got, ref, nd);
        cr_assert_lt(e, BF16_TOL, "rmsnorm n=%d d=%d: %g", n, d, e);
        CU(cuda_poison_bf16(d_bf, nd));
        CU(cuda_rmsnorm(d_bf, d_x, d_w, d_qs, 2, d, 1e-5f, NULL));
        CU(cuda_download_bf16(got, d_bf, 2 * (size_t)d));
        e = rel_err(got, ref + (size_t)(qs[1] - 1) * d, d);
        cr_assert_lt(e, BF16_TOL, "rmsnorm gather, first: %g", e);
        e = rel_err(got + d, ref + (size_t)(n - 1) * d, d);
        cr_assert_lt(e, BF16_TOL, "rmsnorm gather, last: %g", e);

        /* rotary over rows of HEADS heads (stride a little wider, the tail untouched) */
        int stride = heads * hd + 8;
        size_t nr = (size_t)n * stride;
        float *rows = malloc(sizeof(float) * nr), *rref = malloc(sizeof(float) * nr);
        float *rgot = malloc(sizeof(float) * nr);
        fill_uniform(rows, nr, rng);
        memcpy(rref, rows, sizeof(float) * nr);
        float *d_rows = dev_f32(rows, nr);
        CU(cuda_rotary(d_rows, d_pos, n, stride, heads, hd, 500000.0f, NULL));
        CU(cuda_download(rgot, d_rows, sizeof(float) * nr));
        rotary_forward(rref, pos, n, stride, heads, hd, 500000.0f);
        e = rel_err(rgot, rref, nr);
        cr_assert_lt(e, 1e-5, "rotary n=%d heads=%d hd=%d: %g", n, heads, hd, e);

        /* SiLU-and-multiply on bf16 [gate | up] rows */
        size_t ni = (size_t)n * inter;
        float *gu = malloc(sizeof(float) * 2 * ni), *sref = malloc(sizeof(float) * ni);
        float *sgot = malloc(sizeof(float) * ni);
        fill_uniform(gu, 2 * ni, rng);
        for (size_t i = 0; i < 2 * ni; i++)
            gu[i] *= 4.0f;
        round_bf16(gu, 2 * ni);
        uint16_t *d_gu = dev_bf16(gu, 2 * ni), *d_s = dev(sizeof(uint16_t) * ni);
        CU(cuda_poison_bf16(d_s, ni));
        CU(cuda_silu_mul(d_s, d_gu, n, inter, NULL));
        CU(cuda_download_bf16(sgot, d_s, ni));
        silu_mul_forward(sref, gu, n, inter);
        e = rel_err(sgot, sref, ni);
        cr_assert_lt(e, BF16_TOL, "silu_mul n=%d inter=%d: %g", n, inter, e);

        /* residual add */
        float *delta = malloc(sizeof(float) * nd);
        fill_uniform(delta, nd, rng);
        float *d_delta = dev_f32(delta, nd);
        CU(cuda_residual_add(d_x, d_delta, (long)nd, NULL));
        CU(cuda_download(got, d_x, sizeof(float) * nd));
        memcpy(ref, x, sizeof(float) * nd);
        residual_add(ref, delta, (long)nd);
        cr_assert_eq(rel_err(got, ref, nd), 0.0, "residual add");

        CU(cuda_sync());
        cuda_free(d_out), cuda_free(d_x), cuda_free(d_table), cuda_free(d_w), cuda_free(d_bf);
        cuda_free(d_ids), cuda_free(d_pos), cuda_free(d_qs), cuda_free(d_rows);
        cuda_free(d_gu), cuda_free(d_s), cuda_free(d_delta);
        free(table), free(x), free(w), free(ref), free(got), free(ids), free(pos);
        free(rows), free(rref), free(rgot), free(gu), free(sref), free(sgot), free(delta);
    }
    gsl_rng_free(rng);
}

Test(kernels_cuda, gemm_matches_cpu)
{
    NEED_GPU();
    static const int shapes[][3] = {{1, 64, 64}, {7, 128, 384}, {33, 256, 96}, {300, 4096, 1000}};
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int n = shapes[k][0], in = shapes[k][1], out = shapes[k][2];
        size_t nx = (size_t)n * in, nw = (size_t)out * in, ny = (size_t)n * out;
        float *x = malloc(sizeof(float) * nx), *w = malloc(sizeof(float) * nw);
        float *y = malloc(sizeof(float) * ny), *ref = malloc(sizeof(float) * ny);
        fill_uniform(x, nx, rng);
        fill_uniform(w, nw, rng);
        round_bf16(x, nx);
        round_bf16(w, nw);
        uint16_t *d_x = dev_bf16(x, nx), *d_w = dev_bf16(w, nw);
        float *d_y = dev(sizeof(float) * ny);
        CU(cuda_poison_f32(d_y, ny));
        char err[256];
        cr_assert_eq(cuda_gemm_bf16(d_y, d_x, d_w, n, in, out, err, sizeof err), 0, "%s", err);
        CU(cuda_download(y, d_y, sizeof(float) * ny));
        matmul_forward_naive(ref, x, w, n, in, out);
        double e = rel_err(y, ref, ny);
        cr_assert_lt(e, 1e-4, "gemm %dx%d -> %d: %g", n, in, out, e);
        cuda_free(d_x), cuda_free(d_w), cuda_free(d_y);
        free(x), free(w), free(y), free(ref);
    }
    gsl_rng_free(rng);
}

/* The kernel lab's sustained GEMM: windows of at least one GEMM until the time is spent, each
 * at a finite, positive rate, and no more windows than asked for. */
Test(kernels_cuda, a_sustained_gemm_reports_its_rate_window_by_window)
{
    NEED_GPU();
    double t[64], once = 0;
    int n = -1;
    char err[256];
    cr_assert_eq(cuda_gemm_bf16_sustained(32, 64, 48, 0.02, 0.005, &once, t, 64, &n, err, sizeof err), 0, "%s", err);
    cr_assert(once > 0 && isfinite(once), "one GEMM: %g", once);
    cr_assert_geq(n, 1);
    for (int i = 0; i < n; i++)
        cr_assert(t[i] > 0 && isfinite(t[i]), "window %d: %g", i, t[i]);
    cr_assert_eq(cuda_gemm_bf16_sustained(32, 64, 48, 10, 0.001, &once, t, 3, &n, err, sizeof err), 0, "%s", err);
    cr_assert_eq(n, 3, "stopped at the windows it had room for");
}

Test(kernels_cuda, kv_write_matches_cpu)
{
    NEED_GPU();
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    int n = 37, heads = 8, kvh = 2, hd = 64, slots = 64;
    int q_dim = heads * hd, kv_dim = kvh * hd, stride = q_dim + 2 * kv_dim;
    float *qkv = malloc(sizeof(float) * n * stride);
    float *kc = calloc((size_t)slots * kv_dim, sizeof(float)), *vc = calloc((size_t)slots * kv_dim, sizeof(float));
    float *kg = malloc(sizeof(float) * slots * kv_dim), *vg = malloc(sizeof(float) * slots * kv_dim);
    int32_t map[37];
    fill_uniform(qkv, (size_t)n * stride, rng);
    round_bf16(qkv, (size_t)n * stride);
    for (int i = 0; i < n; i++)
        map[i] = i % 5 == 3 ? -1 : (i * 7 + 3) % slots;
    float *d_qkv = dev_f32(qkv, (size_t)n * stride);
    uint16_t *d_k = dev(2 * (size_t)slots * kv_dim), *d_v = dev(2 * (size_t)slots * kv_dim);
    int32_t *d_map = dev_i32(map, n);
    CU(cuda_upload_bf16(d_k, kc, (size_t)slots * kv_dim)); /* zeros */
    CU(cuda_upload_bf16(d_v, vc, (size_t)slots * kv_dim));
    CU(cuda_kv_write(d_k, d_v, d_qkv, stride, d_map, n, heads, kvh, hd, NULL));
    CU(cuda_download_bf16(kg, d_k, (size_t)slots * kv_dim));
    CU(cuda_download_bf16(vg, d_v, (size_t)slots * kv_dim));
    kv_cache_write(kc, vc, qkv, stride, map, n, heads, kvh, hd);
    cr_assert_eq(rel_err(kg, kc, (size_t)slots * kv_dim), 0.0, "K cache");
    cr_assert_eq(rel_err(vg, vc, (size_t)slots * kv_dim), 0.0, "V cache");
    cuda_free(d_qkv), cuda_free(d_k), cuda_free(d_v), cuda_free(d_map);
    free(qkv), free(kc), free(vc), free(kg), free(vg);
    gsl_rng_free(rng);
}

/* Several sequences over one scattered pool (unused slots NaN): some decode (1 query token),
 * some prefill chunks over cached context; all rows in one launch, or decodes and prefills in
 * two, against the CPU's paged attention on the same bf16 values. */
static void check_attention(int heads, int kvh, int hd, int bs, int nseq, const int *ctx,
                            const int *qlen, unsigned long seed)
{
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, seed);
    int q_dim = heads * hd, kv_dim = kvh * hd, stride = q_dim + 2 * kv_dim;
    int mbps = 0, ntok = 0;
    for (int s = 0; s < nseq; s++) {
        int nb = (ctx[s] + bs - 1) / bs;
        mbps = nb > mbps ? nb : mbps;
        ntok += qlen[s];
    }
    mbps += 1;
    int num_blocks = nseq * mbps + 3;
    size_t pool = (size_t)num_blocks * bs * kv_dim;
    float *kc = malloc(sizeof(float) * pool), *vc = malloc(sizeof(float) * pool);
    for (size_t i = 0; i < pool; i++)
        kc[i] = vc[i] = NAN;
    int32_t *perm = malloc(sizeof(int32_t) * num_blocks);
    for (int i = 0; i < num_blocks; i++)
        perm[i] = i;
    gsl_ran_shuffle(rng, perm, (size_t)num_blocks, sizeof *perm);
    int32_t *tables = malloc(sizeof(int32_t) * nseq * mbps), *qs = malloc(sizeof(int32_t) * (nseq + 1));
    int32_t *pos = malloc(sizeof(int32_t) * ntok), *row_tok = malloc(sizeof(int32_t) * ntok);
    int32_t *row_seq = malloc(sizeof(int32_t) * ntok);
    float *qkv = malloc(sizeof(float) * ntok * stride), *ref = malloc(sizeof(float) * ntok * q_dim);
    float *got = malloc(sizeof(float) * ntok * q_dim);
    float *scores = malloc(sizeof(float) * mbps * bs);
    fill_uniform(qkv, (size_t)ntok * stride, rng);
    for (int s = 0, t = 0; s < nseq; s++) {
        qs[s] = t;
        for (int i = 0; i < mbps; i++)
            tables[s * mbps + i] = perm[s * mbps + i];
        for (int j = 0; j < ctx[s]; j++) {
            size_t slot = (size_t)tables[s * mbps + j / bs] * bs + j % bs;
            for (int i = 0; i < kv_dim; i++) {
                kc[slot * kv_dim + i] = cuda_bf16_to_f32(cuda_f32_to_bf16((float)(2.0 * gsl_rng_uniform(rng) - 1.0)));
                vc[slot * kv_dim + i] = cuda_bf16_to_f32(cuda_f32_to_bf16((float)(2.0 * gsl_rng_uniform(rng) - 1.0)));
            }
        }
        for (int i = 0; i < qlen[s]; i++, t++)
            pos[t] = ctx[s] - qlen[s] + i;
    }
    qs[nseq] = ntok;
    /* rows: decodes first, then prefill tokens (as the backend orders them) */
    int ndec = 0, npre = 0;
    for (int s = 0; s < nseq; s++)
        if (qlen[s] == 1) {
            row_tok[ndec] = qs[s];
            row_seq[ndec++] = s;
        }
    for (int s = 0; s < nseq; s++)
        if (qlen[s] > 1)
            for (int t = qs[s]; t < qs[s + 1]; t++) {
                row_tok[ndec + npre] = t;
                row_seq[ndec + npre++] = s;
            }
    for (int s = 0; s < nseq; s++) {
        const float *q = qkv + (size_t)qs[s] * stride;
        if (qlen[s] == 1)
            attention_decode_paged(ref + (size_t)qs[s] * q_dim, q, kc, vc, tables + s * mbps, bs,
                                   pos[qs[s]], ctx[s], heads, kvh, hd, scores);
        else
            attention_prefill_paged(ref + (size_t)qs[s] * q_dim, q_dim, q, stride, kc, vc,
                                    tables + s * mbps, bs, pos + qs[s], qlen[s], ctx[s], heads,
                                    kvh, hd, scores);
    }
    float *d_qkv = dev_f32(qkv, (size_t)ntok * stride);
    uint16_t *d_k = dev_bf16(kc, pool), *d_v = dev_bf16(vc, pool);
    uint16_t *d_out = dev(sizeof(uint16_t) * ntok * q_dim);
    int32_t *d_pos = dev_i32(pos, ntok), *d_ctx = dev_i32(ctx, nseq);
    int32_t *d_tab = dev_i32(tables, (size_t)nseq * mbps), *d_rt = dev_i32(row_tok, ntok);
    int32_t *d_rs = dev_i32(row_seq, ntok);
    float *d_part = dev(sizeof(float) * CUDA_ATTN_PARTIAL_PAIRS * heads * (hd + 2));
    cuda_attn_args a = {.out = d_out, .qkv = d_qkv, .qkv_stride = stride, .k_cache = d_k,
                        .v_cache = d_v, .positions = d_pos, .context_lens = d_ctx,
                        .block_tables = d_tab, .max_blocks_per_seq = mbps, .block_size = bs,
                        .num_heads = heads, .num_kv_heads = kvh, .head_dim = hd,
                        .partial = d_part};
    int32_t *tok0 = malloc(sizeof(int32_t) * (ntok + nseq)), *cnt = malloc(sizeof(int32_t) * (ntok + nseq));
    int32_t *tseq = malloc(sizeof(int32_t) * (ntok + nseq));
    int ntiles = cuda_prefill_tiles(tok0, cnt, tseq, qs, nseq);
    cr_assert_leq(ntiles, cuda_prefill_tile_capacity(ntok, nseq));
    int32_t *d_t0 = dev_i32(tok0, ntiles + 1), *d_tc = dev_i32(cnt, ntiles + 1);
    int32_t *d_ts = dev_i32(tseq, ntiles + 1);
    static const char *const how[3] = {"one launch", "decode and prefill apart",
                                       "prefill on the tensor cores"};
    for (int split = 0; split < 3; split++) {
        if (split == 2 && !cuda_prefill_uses_tensor_cores(hd))
            break;
        CU(cuda_poison_bf16(d_out, (size_t)ntok * q_dim));
        a.row_token = d_rt;
        a.row_seq = d_rs;
        if (split == 2) {
            a.num_rows = ndec;
            CU(cuda_attention(&a, NULL));
            CU(cuda_attention_prefill(&a, d_t0, d_tc, d_ts, ntiles, NULL));
            a.num_rows = 0; /* done */
        } else if (split) { /* decodes, then prefills: other slot counts */
            a.num_rows = ndec;
            CU(cuda_attention(&a, NULL));
            a.row_token = d_rt + ndec;
            a.row_seq = d_rs + ndec;
            a.num_rows = npre;
        } else {
            a.num_rows = ntok;
        }
        CU(cuda_attention(&a, NULL));
        CU(cuda_sync());
        CU(cuda_download_bf16(got, d_out, (size_t)ntok * q_dim));
        for (int s = 0; s < nseq; s++) {
            size_t off = (size_t)qs[s] * q_dim, len = (size_t)qlen[s] * q_dim;
            double e = rel_err(got + off, ref + off, len);
            cr_assert_lt(e, BF16_TOL, "attention H=%d KVH=%d hd=%d bs=%d seq %d (ctx %d, q %d), "
                         "%s: rel err %g", heads, kvh, hd, bs, s, ctx[s], qlen[s],
                         how[split], e);
        }
    }
    cuda_free(d_t0), cuda_free(d_tc), cuda_free(d_ts);
    free(tok0), free(cnt), free(tseq);
    cuda_free(d_qkv), cuda_free(d_k), cuda_free(d_v), cuda_free(d_out), cuda_free(d_pos);
    cuda_free(d_ctx), cuda_free(d_tab), cuda_free(d_rt), cuda_free(d_rs), cuda_free(d_part);
    free(kc), free(vc), free(perm), free(tables), free(qs), free(pos), free(row_tok);
    free(row_seq), free(qkv), free(ref), free(got), free(scores);
    gsl_rng_free(rng);
}

Test(kernels_cuda, paged_attention_matches_cpu)
{
    NEED_GPU();
    { /* tiny model shapes: decodes, a whole prompt, a chunk over context, an empty context */
        int ctx[] = {61, 37, 50, 1, 0}, q[] = {1, 37, 13, 1, 1};
        check_attention(8, 2, 16, 4, 5, ctx, q, 1);
    }
    { /* 8B-like: long decodes split over many slots, a prefill chunk */
        int ctx[] = {2000, 700, 129, 300}, q[] = {1, 1, 1, 40};
        check_attention(32, 8, 128, 16, 4, ctx, q, 2);
    }
    { /* no GQA, head_dim 64, block 16, exactly one block */
        int ctx[] = {16, 5, 333}, q[] = {16, 1, 1};
        check_attention(4, 4, 64, 16, 3, ctx, q, 3);
    }
    { /* group 7 (qwen2.5-7b), and group 8 with head_dim 256 */
        int ctx[] = {517, 64}, q[] = {1, 9};
        check_attention(28, 4, 128, 16, 2, ctx, q, 4);
        check_attention(8, 1, 256, 8, 2, ctx, q, 5);
    }
    { /* many rows: one slot per row */
        enum { N = 300 };
        int ctx[N], q[N];
        for (int i = 0; i < N; i++) {
            ctx[i] = 1 + (i * 37) % 400;
            q[i] = 1;
        }
        check_attention(16, 4, 64, 16, N, ctx, q, 6);
    }
}

/* ---------------------------------------------------------------------------------------
 * sampling */

static void sample_rows(const float *logits, int rows, int vocab, kb_sampling p, uint64_t seed,
                        uint64_t step, int32_t *out)
{
    float *d_l = dev_f32(logits, (size_t)rows * vocab);
    int32_t *d_o = dev(sizeof(int32_t) * rows);
    CU(cuda_poison_f32((float *)d_o, rows));
    CU(cuda_sample(d_o, d_l, rows, vocab, p.temperature, p.top_k, p.top_p, seed, step, NULL));
    CU(cuda_download(out, d_o, sizeof(int32_t) * rows));
    cuda_free(d_l), cuda_free(d_o);
}

Test(kernels_cuda, greedy_matches_cpu_argmax)
{
    NEED_GPU();
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    static const int vocabs[] = {5, 1000, 32000, 128256, 152064};
    for (size_t k = 0; k < sizeof vocabs / sizeof vocabs[0]; k++) {
        int v = vocabs[k], rows = 9;
        float *l = malloc(sizeof(float) * rows * v);
        for (int i = 0; i < rows * v; i++)
            l[i] = (float)gsl_ran_gaussian(rng, 3.0);
        /* ties: row 1's max appears twice, row 2 is constant */
        l[v + v / 2] = l[v + v - 1] = 100.0f;
        for (int i = 0; i < v; i++)
            l[2 * v + i] = 0.5f;
        int32_t got[9], ref[9];
        logit_pair *scratch = malloc(sizeof *scratch * v);
        kb_sampling greedy = {0.0f, 0, 1.0f};
        sample_tokens(ref, l, rows, v, &greedy, rng, scratch);
        sample_rows(l, rows, v, greedy, 1, 0, got);
        cr_assert_arr_eq(got, ref, sizeof got, "greedy, vocab %d", v);
        free(l), free(scratch);
    }
    gsl_rng_free(rng);
}

/* On cudaemu every row is a block of 1024 fibers on the CPU: fewer rows, the same checks. */
#ifdef SERVESIM_CUDAEMU
#define SAMPLE_ROWS 600
#else
#define SAMPLE_ROWS 3000
#endif

Test(kernels_cuda, top_k_and_top_p_keep_the_cpu_sets)
{
    NEED_GPU();
    enum { V = 1000, K = 5, ROWS = SAMPLE_ROWS };
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    float *l = malloc(sizeof(float) * ROWS * V), sorted[V];
    for (int i = 0; i < V; i++)
        l[i] = sorted[i] = (float)gsl_ran_gaussian(rng, 2.0);
    for (int r = 1; r < ROWS; r++)
        memcpy(l + (size_t)r * V, l, sizeof(float) * V);
    for (int i = 0; i < K; i++)
        for (int j = i + 1; j < V; j++)
            if (sorted[j] > sorted[i]) {
                float t = sorted[i];
                sorted[i] = sorted[j];
                sorted[j] = t;
            }
    int32_t *tok = malloc(sizeof(int32_t) * ROWS), *again = malloc(sizeof(int32_t) * ROWS);
    kb_sampling p = {.temperature = 3.0f, .top_k = K, .top_p = 1.0f};
    sample_rows(l, ROWS, V, p, 5, 0, tok);
    int hits[V] = {0};
    for (int r = 0; r < ROWS; r++) {
        cr_assert(tok[r] >= 0 && tok[r] < V && l[tok[r]] >= sorted[K - 1],
                  "token %d is outside the top %d", tok[r], K);
        hits[tok[r]]++;
    }
    int used = 0;
    for (int i = 0; i < V; i++)
        used += hits[i] > 0;
    cr_assert_eq(used, K, "with temperature 3 every one of the top %d should come up", K);
    sample_rows(l, ROWS, V, p, 5, 0, again);
    cr_assert_arr_eq(tok, again, sizeof(int32_t) * ROWS, "same seed and step, other tokens");
    sample_rows(l, ROWS, V, p, 5, 1, again);
    cr_assert(memcmp(tok, again, sizeof(int32_t) * ROWS) != 0, "the step changes nothing");

    /* top-p: probabilities 0.04, 0.5, 0.06, 0.3, 0.1; p = 0.75 keeps {1, 3}; after top_k 3,
     * p = 0.6 keeps {1, 3} too (0.5 / 0.9 < 0.6). */
    static const double prob[5] = {0.04, 0.5, 0.06, 0.3, 0.1};
    for (int r = 0; r < ROWS; r++)
        for (int i = 0; i < 5; i++)
            l[r * 5 + i] = (float)log(prob[i]);
    static const kb_sampling nucleus[2] = {{1.0f, 0, 0.75f}, {1.0f, 3, 0.6f}};
    for (int c = 0; c < 2; c++) {
        sample_rows(l, ROWS, 5, nucleus[c], 9, 0, tok);
        int h[5] = {0};
        for (int r = 0; r < ROWS; r++) {
            cr_assert(tok[r] == 1 || tok[r] == 3, "case %d: token %d is outside the nucleus", c,
                      tok[r]);
            h[tok[r]]++;
        }
        /* 0.5 : 0.3, so token 1 takes 5/8 of the draws, within 5 standard deviations */
        double mean = ROWS * 0.625, sd = sqrt(ROWS * 0.625 * 0.375);
        cr_assert(fabs(h[1] - mean) < 5 * sd, "case %d: %d / %d draws do not follow 0.5:0.3",
                  c, h[1], h[3]);
    }
    free(l), free(tok), free(again);
    gsl_rng_free(rng);
}

/* ---------------------------------------------------------------------------------------
 * the whole backend against the CPU backend */



/* bf16 weights and activations against fp32: the logits agree to about 1e-2 of their scale. */
#define FORWARD_TOL 3e-2

Test(kernels_cuda, forward_matches_cpu_backend)
{
    NEED_GPU();
    kb_options oc = fixture_options(KB_CPU), og = fixture_options(KB_CUDA);
    kb_backend *cpu = fixture_open(&oc), *gpu = fixture_open(&og);
    cr_assert(strstr(kb_device_name(gpu), "cuda: "), "%s", kb_device_name(gpu));
    /* the decode graphs are captured at open, before any step; a timed-only backend has none */
    cr_assert_gt(cuda_backend_num_graphs(gpu), 0, "open captured no decode graph");
    kb_options timed = og;
    timed.timed_only = true;
    kb_backend *probe = fixture_open(&timed);
    cr_assert_eq(cuda_backend_num_graphs(probe), 0);
    kb_close(probe);
    enum { NSEQ = 4 };
    static const int cached_len[NSEQ] = {0, 9, 8, 14}, new_len[NSEQ] = {17, 1, 5, 1};
    int32_t tokens[NSEQ][64], blocks[NSEQ][MAX_BLOCKS_PER_SEQ];
    seq_step steps[NSEQ + 1];
    kb_backend *both[2] = {cpu, gpu};
    for (int s = 0; s < NSEQ; s++) {
        fill_tokens(tokens[s], 64, 10 + s);
        scattered_blocks(blocks[s], 8 * s, MAX_BLOCKS_PER_SEQ);
        if (cached_len[s]) {
            seq_step prefix = {tokens[s], blocks[s], 0, cached_len[s], 0};
            for (int k = 0; k < 2; k++)
                fixture_run(both[k], og.block_size, &prefix, 1, NULL, NULL);
        }
        steps[s] = (seq_step){tokens[s], blocks[s], cached_len[s], new_len[s], 0};
    }
    steps[NSEQ] = (seq_step){tokens[0], blocks[3], 14, 3, 1}; /* padding rows */
    float ref[(NSEQ + 1) * VOCAB], got[(NSEQ + 1) * VOCAB];
    fixture_run(cpu, og.block_size, steps, NSEQ + 1, ref, NULL);
    fixture_run(gpu, og.block_size, steps, NSEQ + 1, got, NULL);
    for (int s = 0; s < NSEQ; s++) {
        double e = rel_err(got + s * VOCAB, ref + s * VOCAB, VOCAB);
        cr_assert_lt(e, FORWARD_TOL, "mixed batch, sequence %d: rel err %g", s, e);
    }
    for (int i = 0; i < VOCAB; i++)
        cr_assert(isfinite(got[NSEQ * VOCAB + i]), "padding logits are not finite");

    /* Decode steps of all four (pure decode: the graph path), then the same step eagerly. */
    for (int step = 0; step < 6; step++) {
        for (int s = 0; s < NSEQ; s++) {
            steps[s].cached += steps[s].n_new;
            steps[s].n_new = 1;
        }
        fixture_run(cpu, og.block_size, steps, NSEQ, ref, NULL);
        fixture_run(gpu, og.block_size, steps, NSEQ, got, NULL);
        for (int s = 0; s < NSEQ; s++) {
            double e = rel_err(got + s * VOCAB, ref + s * VOCAB, VOCAB);
            cr_assert_lt(e, FORWARD_TOL, "decode step %d, sequence %d: rel err %g", step, s, e);
        }
        /* greedy on the GPU = the CPU's argmax over the GPU's logits */
        int32_t tok[NSEQ], want[NSEQ];
        logit_pair scratch[VOCAB];
        kb_sampling greedy = {0.0f, 0, 1.0f};
        cr_assert_eq(kb_sample(gpu, &greedy, tok, NULL), 0, "%s", kb_error(gpu));
        sample_tokens(want, got, NSEQ, VOCAB, &greedy, NULL, scratch);
        cr_assert_arr_eq(tok, want, sizeof tok, "greedy token differs from the argmax");
    }
    float eager[NSEQ * VOCAB];
    cuda_backend_set_graphs(gpu, 0);
    fixture_run(gpu, og.block_size, steps, NSEQ, eager, NULL);
    cuda_backend_set_graphs(gpu, 1);
    fixture_run(gpu, og.block_size, steps, NSEQ, got, NULL);
    double e = rel_err(got, eager, NSEQ * VOCAB);
    cr_assert_lt(e, 1e-5, "graph replay differs from the eager forward: %g", e);
    /* a 3-sequence decode pads to the bucket of 4 */
    fixture_run(gpu, og.block_size, steps, 3, got, NULL);
    cuda_backend_set_graphs(gpu, 0);
    fixture_run(gpu, og.block_size, steps, 3, eager, NULL);
    /* GEMMs over 4 rows against 3 may take other cuBLAS algorithms, and a last-bit change
     * can flip a bf16 rounding of an activation: close, not bitwise equal. */
    e = rel_err(got, eager, 3 * VOCAB);
    cr_assert_lt(e, 1e-2, "padded graph replay differs from the eager forward: %g", e);

    kb_timing t;
    fixture_run(gpu, og.block_size, steps, NSEQ, NULL, &t);
    double parts = t.embed + t.norm + t.linear + t.rope + t.kv_write + t.attn_prefill
                 + t.attn_decode + t.mlp_act + t.lm_head;
    cr_assert_gt(t.total, 0.0);
    cr_assert_gt(t.attn_decode, 0.0);
    cr_assert_leq(parts, t.total * 1.001 + 1e-6, "parts %g exceed total %g", parts, t.total);
    kb_close(cpu);
    kb_close(gpu);
}

Test(kernels_cuda, chunked_prefill_and_prefix_hits_match_scratch)
{
    NEED_GPU();
    kb_options o = fixture_options(KB_CUDA);
    kb_backend *b = fixture_open(&o);
    int32_t tokens[37], blocks[MAX_BLOCKS_PER_SEQ], other[MAX_BLOCKS_PER_SEQ];
    fill_tokens(tokens, 37, 1);
    scattered_blocks(blocks, 0, MAX_BLOCKS_PER_SEQ);
    scattered_blocks(other, 20, MAX_BLOCKS_PER_SEQ);
    float whole[VOCAB], chunked[VOCAB];
    seq_step st = {tokens, blocks, 0, 37, 0};
    fixture_run(b, o.block_size, &st, 1, whole, NULL);
    static const int chunks[] = {13, 12, 12};
    for (int c = 0, done = 0; c < 3; done += chunks[c++]) {
        seq_step ch = {tokens, other, done, chunks[c], 0};
        fixture_run(b, o.block_size, &ch, 1, chunked, NULL);
    }
    double e = rel_err(chunked, whole, VOCAB);
    cr_assert_lt(e, FORWARD_TOL, "chunked prefill: rel err %g", e);
    /* B reuses A's first 3 blocks written in the same step, B first */
    int32_t bt[21], a_blocks[MAX_BLOCKS_PER_SEQ], b_blocks[MAX_BLOCKS_PER_SEQ];
    memcpy(bt, tokens, 12 * sizeof *bt);
    fill_tokens(bt + 12, 9, 3);
    float b_ref[VOCAB], logits[2 * VOCAB];
    scattered_blocks(b_blocks, 50, MAX_BLOCKS_PER_SEQ);
    seq_step sb = {bt, b_blocks, 0, 21, 0};
    fixture_run(b, o.block_size, &sb, 1, b_ref, NULL);
    scattered_blocks(a_blocks, 10, MAX_BLOCKS_PER_SEQ);
    memcpy(b_blocks, a_blocks, 3 * sizeof *b_blocks);
    scattered_blocks(b_blocks + 3, 40, 6);
    seq_step two[2] = {{bt, b_blocks, 12, 9, 0}, {tokens, a_blocks, 0, 20, 0}};
    fixture_run(b, o.block_size, two, 2, logits, NULL);
    e = rel_err(logits, b_ref, VOCAB);
    cr_assert_lt(e, FORWARD_TOL, "prefix hit within one step: rel err %g", e);
    kb_close(b);
}

static int32_t argmax_of(const float *x, int n)
{
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* Speculative decoding's verification layout (engine/runner.h) on this backend, against the
 * CPU backend's plain decoding: a 20-token prompt decoded greedily four steps, one token a
 * forward, on the CPU; then, on this backend, the same prompt and one forward of five
 * one-query sequences at positions 19..23 over one block table, holding the prompt's last
 * token and the four greedy tokens as drafts (each writes its KV before any attention reads
 * it). Each position's argmax is the token plain greedy decoding chose there, so every draft
 * is kept and the fifth gives the next token, and each position's logits match the CPU's. */
Test(kernels_cuda, a_verification_forward_gives_the_tokens_of_plain_greedy_decoding)
{
    NEED_GPU();
    kb_options oc = fixture_options(KB_CPU), og = fixture_options(KB_CUDA);
    kb_backend *cpu = fixture_open(&oc), *gpu = fixture_open(&og);
    enum { P = 20, D = 4 };
    int32_t tokens[P + D + 1], blocks[MAX_BLOCKS_PER_SEQ], other[MAX_BLOCKS_PER_SEQ];
    fill_tokens(tokens, P, 7);
    scattered_blocks(blocks, 0, MAX_BLOCKS_PER_SEQ);
    scattered_blocks(other, 30, MAX_BLOCKS_PER_SEQ);
    static float plain[D + 1][VOCAB], verify[(D + 1) * VOCAB];
    seq_step prompt = {tokens, blocks, 0, P, 0};
    fixture_run(cpu, oc.block_size, &prompt, 1, plain[0], NULL);
    for (int j = 0; j < D; j++) { /* plain greedy: each token from the last step's logits */
        tokens[P + j] = argmax_of(plain[j], VOCAB);
        seq_step one = {tokens, blocks, P + j, 1, 0};
        fixture_run(cpu, oc.block_size, &one, 1, plain[j + 1], NULL);
    }
    tokens[P + D] = argmax_of(plain[D], VOCAB);
    seq_step prefill = {tokens, other, 0, P - 1, 0};
    fixture_run(gpu, og.block_size, &prefill, 1, NULL, NULL);
    seq_step positions[D + 1];
    for (int j = 0; j <= D; j++) positions[j] = (seq_step){tokens, other, P - 1 + j, 1, 0};
    fixture_run(gpu, og.block_size, positions, D + 1, verify, NULL);
    for (int j = 0; j <= D; j++) {
        cr_assert_eq(argmax_of(verify + (size_t)j * VOCAB, VOCAB), tokens[P + j], "position %d", P + j);
        double e = rel_err(verify + (size_t)j * VOCAB, plain[j], VOCAB);
        cr_assert_lt(e, FORWARD_TOL, "position %d: rel err %g", P + j, e);
    }
    kb_close(cpu);
    kb_close(gpu);
}

Test(kernels_cuda, open_refuses_what_does_not_fit_and_bad_batches)
{
    NEED_GPU();
    kb_options o = fixture_options(KB_CUDA);
    o.shape = (kb_shape){.num_layers = 80, .hidden = 8192, .num_heads = 64, .num_kv_heads = 8,
                         .head_dim = 128, .intermediate = 28672, .vocab = 128256,
                         .rope_theta = 500000.0f, .rms_eps = 1e-5f};
    o.num_blocks = 1 << 20;
    o.block_size = 16;
    char err[512] = "";
    cr_assert_null(kb_open(&o, err, sizeof err));
    cr_assert(strstr(err, "GiB of bf16 weights") && strstr(err, "this GPU"), "message: %s", err);

    o = fixture_options(KB_CUDA);
    kb_backend *b = fixture_open(&o);
    int32_t ids[2] = {1, VOCAB}, pos[2] = {0, 1}, slots[2] = {0, 1}, qs[2] = {0, 2},
            ctx[1] = {2}, table[MAX_BLOCKS_PER_SEQ] = {0};
    kb_batch batch = {2, ids, pos, slots, 1, qs, ctx, table};
    cr_assert_neq(kb_forward(b, &batch, NULL), 0);
    cr_assert(strstr(kb_error(b), "vocabulary"), "error: %s", kb_error(b));
    float logits[VOCAB];
    cr_assert_neq(kb_get_logits(b, logits), 0, "no forward has succeeded yet");
    kb_sampling bad = {-1.0f, 0, 1.0f};
    int32_t tok;
    cr_assert_neq(kb_sample(b, &bad, &tok, NULL), 0);
    kb_close(b);
}

Test(kernels_cuda, sampling_is_reproducible_from_its_seed)
{
    NEED_GPU();
    kb_options o = fixture_options(KB_CUDA);
    int32_t runs[3][40];
    for (int k = 0; k < 3; k++) {
        o.sample_seed = k == 2 ? 8 : 7;
        kb_backend *b = fixture_open(&o);
        int32_t t1[9], b1[MAX_BLOCKS_PER_SEQ], t2[5], b2[MAX_BLOCKS_PER_SEQ];
        fill_tokens(t1, 9, 20);
        fill_tokens(t2, 5, 21);
        scattered_blocks(b1, 0, MAX_BLOCKS_PER_SEQ);
        scattered_blocks(b2, 10, MAX_BLOCKS_PER_SEQ);
        seq_step st[2] = {{t1, b1, 0, 9, 0}, {t2, b2, 0, 5, 0}};
        fixture_run(b, o.block_size, st, 2, NULL, NULL);
        kb_sampling p = {.temperature = 0.9f, .top_k = 50, .top_p = 0.9f};
        for (int r = 0; r < 20; r++)
            cr_assert_eq(kb_sample(b, &p, runs[k] + 2 * r, NULL), 0, "%s", kb_error(b));
        kb_close(b);
    }
    cr_assert_arr_eq(runs[0], runs[1], sizeof runs[0], "same seed, different tokens");
    cr_assert(memcmp(runs[0], runs[2], sizeof runs[0]) != 0, "another seed, the same tokens");
}

#endif
