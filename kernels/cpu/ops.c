/* Layer ops of the CPU backend: plain fp32 loops, and OpenBLAS for the matmuls. */
#include "kernels/cpu/ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <f77blas.h>

void embedding_forward(float *out, const float *table, const int32_t *token_ids, int n,
                       int hidden)
{
    for (int t = 0; t < n; t++)
        memcpy(out + (size_t)t * hidden, table + (size_t)token_ids[t] * hidden,
               (size_t)hidden * sizeof *out);
}

void rmsnorm_forward(float *out, const float *inp, const float *weight, int n, int dim,
                     float eps)
{
    for (int t = 0; t < n; t++) {
        const float *x = inp + (size_t)t * dim;
        float *y = out + (size_t)t * dim;
        float ss = 0.0f;
        for (int i = 0; i < dim; i++)
            ss += x[i] * x[i];
        float r = 1.0f / sqrtf(ss / dim + eps);
        for (int i = 0; i < dim; i++)
            y[i] = x[i] * r * weight[i];
    }
}

/* OpenBLAS through its Fortran entry point: GSL::gsl drags libgslcblas onto every link line,
 * and a cblas_sgemm call binds to whichever of the two comes first (the naive GSL one, in
 * practice); sgemm_ exists only in OpenBLAS. Read column-major, the row-major result is
 * out^T = W inp^T, and the row-major W [out_dim x in_dim] reads as W^T: hence "T", "N". */
void matmul_forward(float *out, const float *inp, const float *weight, int n, int in_dim,
                    int out_dim)
{
    char trans = 'T', no_trans = 'N';
    blasint m = out_dim, cols = n, k = in_dim, ldo = out_dim;
    float one = 1.0f, zero = 0.0f;
    sgemm_(&trans, &no_trans, &m, &cols, &k, &one, (float *)weight, &k, (float *)inp, &k, &zero,
           out, &ldo);
}

void matmul_forward_naive(float *out, const float *inp, const float *weight, int n, int in_dim,
                          int out_dim)
{
    for (int t = 0; t < n; t++)
        for (int o = 0; o < out_dim; o++) {
            double acc = 0.0;
            for (int i = 0; i < in_dim; i++)
                acc += (double)inp[(size_t)t * in_dim + i] * weight[(size_t)o * in_dim + i];
            out[(size_t)t * out_dim + o] = (float)acc;
        }
}

void rotary_forward(float *x, const int32_t *positions, int n, int row_stride, int num_heads,
                    int head_dim, float theta)
{
    int half = head_dim / 2;
    for (int t = 0; t < n; t++) {
        float *row = x + (size_t)t * row_stride;
        for (int i = 0; i < half; i++) {
            /* In double: at positions near 1e5 a float angle loses the low digits. */
            double angle = positions[t] * pow(theta, -2.0 * i / head_dim);
            float c = (float)cos(angle), s = (float)sin(angle);
            for (int h = 0; h < num_heads; h++) {
                float *v = row + (size_t)h * head_dim;
                float a = v[i], b = v[i + half];
                v[i] = a * c - b * s;
                v[i + half] = b * c + a * s;
            }
        }
    }
}

void kv_cache_write(float *k_cache, float *v_cache, const float *qkv, int row_stride,
                    const int32_t *slot_mapping, int n, int num_heads, int num_kv_heads,
                    int head_dim)
{
    size_t q_dim = (size_t)num_heads * head_dim, kv_dim = (size_t)num_kv_heads * head_dim;
    for (int t = 0; t < n; t++) {
        if (slot_mapping[t] < 0)
            continue;
        const float *row = qkv + (size_t)t * row_stride;
        memcpy(k_cache + (size_t)slot_mapping[t] * kv_dim, row + q_dim, kv_dim * sizeof(float));
        memcpy(v_cache + (size_t)slot_mapping[t] * kv_dim, row + q_dim + kv_dim,
               kv_dim * sizeof(float));
    }
}

/* One query token, all heads, over the first N_KEYS positions of a sequence's paged cache.
 * Two passes: scores and their max, then exp-normalized weights applied to V. */
static void attend_paged(float *out, const float *q, const float *k_cache, const float *v_cache,
                         const int32_t *block_table, int block_size, int n_keys, int num_heads,
                         int num_kv_heads, int head_dim, float *scores)
{
    if (n_keys <= 0) {
        memset(out, 0, (size_t)num_heads * head_dim * sizeof *out);
        return;
    }
    size_t slot_dim = (size_t)num_kv_heads * head_dim;
    int group = num_heads / num_kv_heads;
    float scale = 1.0f / sqrtf((float)head_dim);
    for (int h = 0; h < num_heads; h++) {
        const float *qh = q + (size_t)h * head_dim;
        float *oh = out + (size_t)h * head_dim;
        size_t head_off = (size_t)(h / group) * head_dim;
        float maxv = -INFINITY;
        for (int j = 0; j < n_keys; j += block_size) {
            const float *kb = k_cache + (size_t)block_table[j / block_size] * block_size * slot_dim
                            + head_off;
            int m = n_keys - j < block_size ? n_keys - j : block_size;
            for (int o = 0; o < m; o++) {
                const float *k = kb + (size_t)o * slot_dim;
                float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
                for (int d = 0; d < head_dim; d++)
                    dot += qh[d] * k[d];
                dot *= scale;
                scores[j + o] = dot;
                if (dot > maxv)
                    maxv = dot;
            }
        }
        float sum = 0.0f;
        for (int j = 0; j < n_keys; j++) {
            scores[j] = expf(scores[j] - maxv);
            sum += scores[j];
        }
        memset(oh, 0, (size_t)head_dim * sizeof *oh);
        for (int j = 0; j < n_keys; j += block_size) {
            const float *vb = v_cache + (size_t)block_table[j / block_size] * block_size * slot_dim
                            + head_off;
            int m = n_keys - j < block_size ? n_keys - j : block_size;
            for (int o = 0; o < m; o++) {
                const float *v = vb + (size_t)o * slot_dim;
                float w = scores[j + o];
#pragma omp simd
                for (int d = 0; d < head_dim; d++)
                    oh[d] += w * v[d];
            }
        }
        float inv = 1.0f / sum;
        for (int d = 0; d < head_dim; d++)
            oh[d] *= inv;
    }
}

static int attention_span(int position, int context_len)
{
    return position + 1 < context_len ? position + 1 : context_len;
}

void attention_prefill_paged(float *out, int out_stride, const float *q, int q_stride,
                             const float *k_cache, const float *v_cache,
                             const int32_t *block_table, int block_size,
                             const int32_t *positions, int q_len, int context_len,
                             int num_heads, int num_kv_heads, int head_dim, float *scores)
{
    for (int i = 0; i < q_len; i++)
        attend_paged(out + (size_t)i * out_stride, q + (size_t)i * q_stride, k_cache, v_cache,
                     block_table, block_size, attention_span(positions[i], context_len),
                     num_heads, num_kv_heads, head_dim, scores);
}

void attention_decode_paged(float *out, const float *q, const float *k_cache,
                            const float *v_cache, const int32_t *block_table, int block_size,
                            int position, int context_len, int num_heads, int num_kv_heads,
                            int head_dim, float *scores)
{
    attend_paged(out, q, k_cache, v_cache, block_table, block_size,
                 attention_span(position, context_len), num_heads, num_kv_heads, head_dim,
                 scores);
}

void attention_reference(float *out, const float *q, const float *k, const float *v, int q_len,
                         int n_keys, int num_heads, int num_kv_heads, int head_dim)
{
    size_t q_dim = (size_t)num_heads * head_dim, kv_dim = (size_t)num_kv_heads * head_dim;
    int group = num_heads / num_kv_heads;
    double scale = 1.0 / sqrt((double)head_dim);
    for (int i = 0; i < q_len; i++) {
        int span = n_keys - q_len + i + 1;
        for (int h = 0; h < num_heads; h++) {
            const float *qh = q + i * q_dim + (size_t)h * head_dim;
            size_t kv_off = (size_t)(h / group) * head_dim;
            double maxv = -INFINITY, sum = 0.0;
            for (int j = 0; j < span; j++) {
                double dot = 0.0;
                for (int d = 0; d < head_dim; d++)
                    dot += (double)qh[d] * k[j * kv_dim + kv_off + d];
                if (dot * scale > maxv)
                    maxv = dot * scale;
            }
            double acc[head_dim];
            memset(acc, 0, sizeof acc);
            for (int j = 0; j < span; j++) {
                double dot = 0.0;
                for (int d = 0; d < head_dim; d++)
                    dot += (double)qh[d] * k[j * kv_dim + kv_off + d];
                double w = exp(dot * scale - maxv);
                sum += w;
                for (int d = 0; d < head_dim; d++)
                    acc[d] += w * v[j * kv_dim + kv_off + d];
            }
            for (int d = 0; d < head_dim; d++)
                out[i * q_dim + (size_t)h * head_dim + d] = (float)(acc[d] / sum);
        }
    }
}

void silu_mul_forward(float *out, const float *gate_up, int n, int inter)
{
    for (int t = 0; t < n; t++) {
        const float *g = gate_up + (size_t)t * 2 * inter, *u = g + inter;
        float *y = out + (size_t)t * inter;
        for (int i = 0; i < inter; i++)
            y[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
    }
}

void residual_add(float *x, const float *delta, long n)
{
    for (long i = 0; i < n; i++)
        x[i] += delta[i];
}

/* Sampling order: larger value first, lower id on ties, so every selection is deterministic. */
static int pair_before(const logit_pair *a, const logit_pair *b)
{
    return a->value > b->value || (a->value == b->value && a->id < b->id);
}

static int pair_cmp(const void *a, const void *b)
{
    return pair_before(a, b) ? -1 : pair_before(b, a) ? 1 : 0;
}

/* Hoare quickselect: afterwards v[0..k) are the k first pairs in sampling order. */
static void select_first_k(logit_pair *v, int n, int k)
{
    int lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        logit_pair pivot = v[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (pair_before(&v[i], &pivot))
                i++;
            while (pair_before(&pivot, &v[j]))
                j--;
            if (i <= j) {
                logit_pair tmp = v[i];
                v[i++] = v[j];
                v[j--] = tmp;
            }
        }
        if (want <= j)
            hi = j;
        else if (want >= i)
            lo = i;
        else
            break;
    }
}

static int32_t argmax(const float *logits, int vocab)
{
    int32_t best = 0;
    for (int i = 1; i < vocab; i++)
        if (logits[i] > logits[best])
            best = i;
    return best;
}

static int32_t sample_one(const float *logits, int vocab, const kb_sampling *p, gsl_rng *rng,
                          logit_pair *v)
{
    if (p->temperature == 0.0f)
        return argmax(logits, vocab);
    for (int i = 0; i < vocab; i++)
        v[i] = (logit_pair){logits[i], i};
    int n = vocab;
    if (p->top_k > 0 && p->top_k < vocab) {
        select_first_k(v, vocab, p->top_k);
        n = p->top_k;
    }
    int nucleus = p->top_p < 1.0f;
    if (nucleus)
        qsort(v, (size_t)n, sizeof *v, pair_cmp);
    float maxv = v[0].value;
    for (int i = 1; i < n; i++)
        if (v[i].value > maxv)
            maxv = v[i].value;
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        v[i].value = expf((v[i].value - maxv) / p->temperature);
        sum += v[i].value;
    }
    if (nucleus) {
        double cum = 0.0;
        int m = 0;
        while (m < n && cum < p->top_p * sum)
            cum += v[m++].value;
        n = m;
        sum = cum;
    }
    double u = gsl_rng_uniform(rng) * sum, acc = 0.0;
    for (int i = 0; i < n; i++) {
        acc += v[i].value;
        if (u < acc)
            return v[i].id;
    }
    return v[n - 1].id;
}

void sample_tokens(int32_t *out, const float *logits, int num_seqs, int vocab,
                   const kb_sampling *p, gsl_rng *rng, logit_pair *scratch)
{
    for (int s = 0; s < num_seqs; s++)
        out[s] = sample_one(logits + (size_t)s * vocab, vocab, p, rng, scratch);
}
