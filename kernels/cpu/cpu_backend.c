/* The CPU backend: a Llama-shaped fp32 forward over a paged KV cache, built from the ops in
 * ops.c. Weights, KV pool and every activation buffer are allocated at open; a forward
 * allocates nothing. */
#include "kernels/backend_impl.h"
#include "kernels/cpu/ops.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h> /* openblas_set_num_threads, openblas_get_corename */

typedef struct layer_weights {
    float *attn_norm, *wqkv, *wo, *mlp_norm, *w_gate_up, *w_down;
} layer_weights;

typedef struct cpu_backend {
    kb_backend base;
    kb_options opt;
    int qkv_dim, max_keys;
    float *weights;           /* one allocation; the pointers below point into it */
    float *embedding, *final_norm, *lm_head;
    layer_weights *layers;
    float *kv;                /* [layer][K, V][num_blocks][block_size][num_kv_heads][head_dim] */
    size_t kv_layer_floats;   /* one of K or V for one layer */
    /* activations, sized for max_num_tokens rows */
    float *x, *xn, *qkv, *att, *proj, *gate_up, *mlp;
    /* per sequence: the last token's normed hidden state, then its logits */
    float *last, *logits;
    float *scores;
    logit_pair *pairs;
    int num_logit_rows;       /* sequences of the last successful forward; 0 before one */
    gsl_rng *rng;
} cpu_backend;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Seconds since *MARK, and moves the mark to now. */
static double lap(double *mark)
{
    double t = now(), d = t - *mark;
    *mark = t;
    return d;
}

static size_t activation_floats(const kb_options *o)
{
    const kb_shape *s = &o->shape;
    size_t t = (size_t)o->max_num_tokens;
    size_t qkv = ((size_t)s->num_heads + 2 * (size_t)s->num_kv_heads) * s->head_dim;
    return t * (3 * (size_t)s->hidden + qkv + (size_t)s->num_heads * s->head_dim
                + 3 * (size_t)s->intermediate)
         + (size_t)o->max_num_seqs * ((size_t)s->hidden + s->vocab)
         + (size_t)o->max_blocks_per_seq * o->block_size;
}

static size_t cpu_workspace_bytes(const kb_options *o)
{
    return activation_floats(o) * sizeof(float) + (size_t)o->shape.vocab * sizeof(logit_pair);
}

/* A number from the first line of DIR/NAME; false when it is not there or not a number (a
 * cgroup's memory.max reads "max" without a limit). */
static bool read_cgroup_number(const char *dir, const char *name, unsigned long long *v)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    bool ok = f && fscanf(f, "%llu", v) == 1;
    if (f) fclose(f);
    return ok;
}

int kb_cgroup_memory_left(const char *dir, size_t *bytes)
{
    unsigned long long max, cur = 0, file = 0;
    if (!read_cgroup_number(dir, "memory.max", &max)) return 0;
    read_cgroup_number(dir, "memory.current", &cur);
    /* memory.current counts the page cache, which the kernel gives back under pressure: after
     * a build it fills the limit, and the check refused what would have run */
    char path[4200], line[256];
    snprintf(path, sizeof path, "%s/memory.stat", dir);
    FILE *f = fopen(path, "r");
    for (bool found = false; f && !found && fgets(line, sizeof line, f);)
        found = sscanf(line, "file %llu", &file) == 1;
    if (f) fclose(f);
    unsigned long long used = cur > file ? cur - file : 0;
    *bytes = max > used ? (size_t)(max - used) : 0;
    return 1;
}

int kb_memory_cap(size_t *bytes, char *err, size_t errlen)
{
    const char *env = getenv("SERVESIM_MEMORY_GIB");
    if (!env || !env[0]) return 0;
    char *end;
    double gib = strtod(env, &end);
    /* a byte at least, and no more than size_t holds */
    if (end == env || *end || !(gib * 1073741824.0 >= 1) || !(gib * 1073741824.0 < 0x1p63)) {
        snprintf(err, errlen, "SERVESIM_MEMORY_GIB=%s: not a number of GiB above 0 (the memory servesim may count "
                 "as available; unset it for what the machine has)", env);
        return -1;
    }
    *bytes = (size_t)(gib * 1073741824.0);
    return 1;
}

int kb_host_memory_available(size_t *bytes, char *err, size_t errlen)
{
    size_t cap;
    int capped = kb_memory_cap(&cap, err, errlen);
    if (capped < 0) return -1;
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) {
        snprintf(err, errlen, "cannot read /proc/meminfo to check what fits in memory");
        return -1;
    }
    char line[256];
    unsigned long long kib = 0;
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = sscanf(line, "MemAvailable: %llu kB", &kib) == 1;
    fclose(f);
    if (!found) {
        snprintf(err, errlen, "/proc/meminfo has no MemAvailable line");
        return -1;
    }
    *bytes = (size_t)kib * 1024;
    size_t left; /* a container's cgroup (v2) limit can be far below what the host has free */
    if (kb_cgroup_memory_left("/sys/fs/cgroup", &left) && left < *bytes) *bytes = left;
    if (capped && cap < *bytes) *bytes = cap;
    return 0;
}

/* Uniform with variance SCALE^2: for a matrix, scale 1/sqrt(fan_in) keeps each output O(1). */
static float *draw_uniform(float *w, size_t n, double scale, gsl_rng *rng)
{
    double a = sqrt(3.0) * scale;
    for (size_t i = 0; i < n; i++)
        w[i] = (float)((2.0 * gsl_rng_uniform(rng) - 1.0) * a);
    return w + n;
}

/* Norm weights around 1, as trained RMSNorm gains are. */
static float *draw_norm(float *w, size_t n, gsl_rng *rng)
{
    for (size_t i = 0; i < n; i++)
        w[i] = (float)(1.0 + 0.2 * (gsl_rng_uniform(rng) - 0.5));
    return w + n;
}

static void init_weights(cpu_backend *b)
{
    const kb_shape *s = &b->opt.shape;
    size_t d = s->hidden, q_dim = (size_t)s->num_heads * s->head_dim, inter = s->intermediate;
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, b->opt.weight_seed);
    float *w = b->weights;
    b->embedding = w;
    w = draw_uniform(w, (size_t)s->vocab * d, 1.0, rng);
    for (int l = 0; l < s->num_layers; l++) {
        layer_weights *L = &b->layers[l];
        L->attn_norm = w;
        w = draw_norm(w, d, rng);
        L->wqkv = w;
        w = draw_uniform(w, (size_t)b->qkv_dim * d, 1.0 / sqrt((double)d), rng);
        L->wo = w;
        w = draw_uniform(w, d * q_dim, 1.0 / sqrt((double)q_dim), rng);
        L->mlp_norm = w;
        w = draw_norm(w, d, rng);
        L->w_gate_up = w;
        w = draw_uniform(w, 2 * inter * d, 1.0 / sqrt((double)d), rng);
        L->w_down = w;
        w = draw_uniform(w, d * inter, 1.0 / sqrt((double)inter), rng);
    }
    b->final_norm = w;
    w = draw_norm(w, d, rng);
    b->lm_head = w;
    draw_uniform(w, (size_t)s->vocab * d, 1.0 / sqrt((double)d), rng);
    gsl_rng_free(rng);
}

static void cpu_close(kb_backend *base)
{
    cpu_backend *b = (cpu_backend *)base;
    free(b->weights);
    free(b->layers);
    free(b->kv);
    free(b->x);
    free(b->pairs);
    if (b->rng)
        gsl_rng_free(b->rng);
    free(b);
}

static void carve_activations(cpu_backend *b)
{
    const kb_shape *s = &b->opt.shape;
    size_t t = (size_t)b->opt.max_num_tokens, seqs = (size_t)b->opt.max_num_seqs;
    float *p = b->x;
    b->xn = p += t * s->hidden;
    b->qkv = p += t * s->hidden;
    b->att = p += t * b->qkv_dim;
    b->proj = p += t * s->num_heads * s->head_dim;
    b->gate_up = p += t * s->hidden;
    b->mlp = p += t * 2 * s->intermediate;
    b->last = p += t * s->intermediate;
    b->logits = p += seqs * s->hidden;
    b->scores = p += seqs * s->vocab;
}

/* The CPU's model name and the kernels OpenBLAS picked, for records: on a VM whose CPUID
 * OpenBLAS does not recognize it falls back to "Prescott" (SSE3) kernels, several times
 * slower than its AVX2/AVX-512 ones; OPENBLAS_CORETYPE=Haswell or SkylakeX overrides that. */
static void describe_cpu(char *out, size_t len, int threads)
{
    char model[128] = "unknown CPU", line[256];
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "model name : %127[^\n]", model) == 1)
                break;
        fclose(f);
    }
    snprintf(out, len, "cpu: %s (%d threads, fp32, OpenBLAS %s kernels)", model, threads,
             openblas_get_corename());
}

static const kb_ops cpu_ops;

/* Writes every slot of the KV pool once. Until then each page of it is the kernel's shared
 * zero page, which any read finds in cache: calibration's sweeps read context no forward has
 * written, and timed attention over it far below its cost over a served pool, whose every
 * read slot was written (decode attention of 32 sequences x 1024 tokens: 10.3 ms over
 * untouched pages, 21.7 ms over written ones; docs/validation.md). A served step also no
 * longer pays the page faults of first writes. The value is not zero so that the compiler
 * cannot fold this into calloc's lazy zero pages. */
static void touch_pool(cpu_backend *b)
{
    size_t n = 2 * (size_t)b->opt.shape.num_layers * b->kv_layer_floats;
    for (size_t i = 0; i < n; i++) b->kv[i] = 1.0f / 64;
}

static kb_backend *cpu_open(const kb_options *opt, char *err, size_t errlen)
{
    cpu_backend *b = calloc(1, sizeof *b);
    if (!b) {
        snprintf(err, errlen, "out of memory allocating the CPU backend");
        return NULL;
    }
    const kb_shape *s = &opt->shape;
    b->base.ops = &cpu_ops;
    b->opt = *opt;
    b->qkv_dim = (s->num_heads + 2 * s->num_kv_heads) * s->head_dim;
    b->max_keys = opt->max_blocks_per_seq * opt->block_size;
    b->kv_layer_floats = (size_t)opt->num_blocks * opt->block_size * s->num_kv_heads
                       * s->head_dim;
    b->weights = malloc(kb_param_count(s) * sizeof(float));
    b->layers = calloc((size_t)s->num_layers, sizeof *b->layers);
    b->kv = malloc(2 * (size_t)s->num_layers * b->kv_layer_floats * sizeof(float));
    b->x = malloc(activation_floats(opt) * sizeof(float));
    b->pairs = malloc((size_t)s->vocab * sizeof *b->pairs);
    b->rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!b->weights || !b->layers || !b->kv || !b->x || !b->pairs || !b->rng) {
        cpu_close(&b->base);
        snprintf(err, errlen, "out of memory allocating %.1f GiB of weights and KV pool",
                 (kb_weight_bytes(s, KB_CPU)
                  + kb_kv_bytes(s, KB_CPU, opt->num_blocks, opt->block_size))
                     / (1024.0 * 1024.0 * 1024.0));
        return NULL;
    }
    gsl_rng_set(b->rng, opt->sample_seed);
    touch_pool(b);
    carve_activations(b);
    init_weights(b);
    int threads = opt->threads ? opt->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    openblas_set_num_threads(threads);
    describe_cpu(b->base.device_name, sizeof b->base.device_name, threads);
    return &b->base;
}

/* Attention of every sequence of the batch for one layer; decodes and prefills timed apart. */
static void attention_forward(cpu_backend *b, const kb_batch *bt, const float *k_cache,
                              const float *v_cache, kb_timing *tm, double *mark)
{
    const kb_shape *s = &b->opt.shape;
    int q_dim = s->num_heads * s->head_dim;
    for (int pass = 0; pass < 2; pass++) {
        int decode = pass == 0;
        for (int i = 0; i < bt->num_seqs; i++) {
            int t0 = bt->query_start[i], q_len = bt->query_start[i + 1] - t0;
            if ((q_len == 1) != decode)
                continue;
            const int32_t *table = bt->block_tables + (size_t)i * b->opt.max_blocks_per_seq;
            if (decode)
                attention_decode_paged(b->att + (size_t)t0 * q_dim,
                                       b->qkv + (size_t)t0 * b->qkv_dim, k_cache, v_cache,
                                       table, b->opt.block_size, bt->positions[t0],
                                       bt->context_lens[i], s->num_heads, s->num_kv_heads,
                                       s->head_dim, b->scores);
            else
                attention_prefill_paged(b->att + (size_t)t0 * q_dim, q_dim,
                                        b->qkv + (size_t)t0 * b->qkv_dim, b->qkv_dim, k_cache,
                                        v_cache, table, b->opt.block_size, bt->positions + t0,
                                        q_len, bt->context_lens[i], s->num_heads,
                                        s->num_kv_heads, s->head_dim, b->scores);
        }
        *(decode ? &tm->attn_decode : &tm->attn_prefill) += lap(mark);
    }
}

static int cpu_forward(kb_backend *base, const kb_batch *bt, kb_timing *t)
{
    cpu_backend *b = (cpu_backend *)base;
    if (kb_check_batch(&b->base, &b->opt, bt)) {
        b->num_logit_rows = 0;
        return -1;
    }
    const kb_shape *s = &b->opt.shape;
    int n = bt->num_tokens, d = s->hidden, inter = s->intermediate;
    int q_dim = s->num_heads * s->head_dim;
    kb_timing tm = {0};
    double start = now(), mark = start;

    embedding_forward(b->x, b->embedding, bt->token_ids, n, d);
    tm.embed += lap(&mark);
    for (int l = 0; l < s->num_layers; l++) {
        const layer_weights *L = &b->layers[l];
        float *k_cache = b->kv + 2 * (size_t)l * b->kv_layer_floats;
        float *v_cache = k_cache + b->kv_layer_floats;

        rmsnorm_forward(b->xn, b->x, L->attn_norm, n, d, s->rms_eps);
        tm.norm += lap(&mark);
        matmul_forward(b->qkv, b->xn, L->wqkv, n, d, b->qkv_dim);
        tm.linear += lap(&mark);
        rotary_forward(b->qkv, bt->positions, n, b->qkv_dim, s->num_heads + s->num_kv_heads,
                       s->head_dim, s->rope_theta);
        tm.rope += lap(&mark);
        /* Every token's K/V is in the cache before any attention: through the prefix cache a
         * sequence may read blocks that another sequence of this batch writes now. */
        kv_cache_write(k_cache, v_cache, b->qkv, b->qkv_dim, bt->slot_mapping, n,
                       s->num_heads, s->num_kv_heads, s->head_dim);
        tm.kv_write += lap(&mark);
        attention_forward(b, bt, k_cache, v_cache, &tm, &mark);
        /* The residual adds are the epilogue of their projection (cuBLAS fuses them). */
        matmul_forward(b->proj, b->att, L->wo, n, q_dim, d);
        residual_add(b->x, b->proj, (long)n * d);
        tm.linear += lap(&mark);

        rmsnorm_forward(b->xn, b->x, L->mlp_norm, n, d, s->rms_eps);
        tm.norm += lap(&mark);
        matmul_forward(b->gate_up, b->xn, L->w_gate_up, n, d, 2 * inter);
        tm.linear += lap(&mark);
        silu_mul_forward(b->mlp, b->gate_up, n, inter);
        tm.mlp_act += lap(&mark);
        matmul_forward(b->proj, b->mlp, L->w_down, n, inter, d);
        residual_add(b->x, b->proj, (long)n * d);
        tm.linear += lap(&mark);
    }
    for (int i = 0; i < bt->num_seqs; i++)
        rmsnorm_forward(b->last + (size_t)i * d, b->x + (size_t)(bt->query_start[i + 1] - 1) * d,
                        b->final_norm, 1, d, s->rms_eps);
    tm.norm += lap(&mark);
    matmul_forward(b->logits, b->last, b->lm_head, bt->num_seqs, d, s->vocab);
    tm.lm_head += lap(&mark);
    tm.total = now() - start;
    b->num_logit_rows = bt->num_seqs;
    if (t)
        *t = tm;
    return 0;
}

static int cpu_get_logits(kb_backend *base, float *out)
{
    cpu_backend *b = (cpu_backend *)base;
    if (!b->num_logit_rows)
        return kb_fail(base, "no logits: no forward has run yet");
    memcpy(out, b->logits, (size_t)b->num_logit_rows * b->opt.shape.vocab * sizeof *out);
    return 0;
}

/* T, when given, gets the sampling time in t->sample and added to t->total, so one kb_timing
 * can follow a forward and its sampling. */
static int cpu_sample(kb_backend *base, const kb_sampling *p, int32_t *out, kb_timing *t)
{
    cpu_backend *b = (cpu_backend *)base;
    if (!b->num_logit_rows)
        return kb_fail(base, "nothing to sample: no forward has run yet");
    if (!(p->temperature >= 0.0f) || p->top_k < 0 || !(p->top_p > 0.0f && p->top_p <= 1.0f))
        return kb_fail(base, "sampling needs temperature >= 0, top_k >= 0 and top_p in (0, 1]; "
                       "got %g, %d, %g", (double)p->temperature, p->top_k, (double)p->top_p);
    double start = now();
    sample_tokens(out, b->logits, b->num_logit_rows, b->opt.shape.vocab, p, b->rng, b->pairs);
    if (t) {
        t->sample = now() - start;
        t->total += t->sample;
    }
    return 0;
}

static const kb_ops cpu_ops = {
    .close = cpu_close,
    .forward = cpu_forward,
    .get_logits = cpu_get_logits,
    .sample = cpu_sample,
};

const kb_device kb_cpu_device = {
    .memory_name = "this machine",
    .dtype = "fp32",
    .memory_available = kb_host_memory_available,
    .workspace_bytes = cpu_workspace_bytes,
    .open = cpu_open,
};
