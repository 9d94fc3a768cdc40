/* The calibration probe: a backend opened for the sweeps' largest shapes, synthetic batches
 * laid out like a served pool, and timed forwards. */
#include "calibrate/calibrate.h"
#include "metrics/metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One synthetic batch: NSEQ sequences of Q query tokens after CTX cached ones, each in its own
 * blocks, so caches do not serve one sequence's KV to the next, and those blocks scattered
 * over the pool by a fixed permutation, as a served pool is after some churn. */
typedef struct synth {
    int32_t *ids, *pos, *slots, *qs, *ctx, *tables;
    int32_t *scatter;       /* block permutation */
    int num_blocks, block_size, table_width;
    unsigned seed;
} synth;

static kb_batch synth_batch(synth *s, int nseq, int q, int ctx, int vocab)
{
    int t = 0, bs = s->block_size, per_seq = (ctx + q + bs - 1) / bs;
    for (int i = 0; i < nseq; i++) {
        s->qs[i] = t;
        s->ctx[i] = ctx + q;
        for (int b = 0; b < per_seq; b++)
            s->tables[i * s->table_width + b] = s->scatter[((int64_t)i * per_seq + b) % s->num_blocks];
        for (int j = 0; j < q; j++, t++) {
            int p = ctx + j;
            s->seed = s->seed * 1103515245u + 12345u; /* fresh token ids each run */
            s->ids[t] = (int32_t)((s->seed >> 8) % (unsigned)vocab);
            s->pos[t] = p;
            s->slots[t] = s->tables[i * s->table_width + p / bs] * bs + p % bs;
        }
    }
    s->qs[nseq] = t;
    return (kb_batch){t, s->ids, s->pos, s->slots, nseq, s->qs, s->ctx, s->tables};
}

struct calib {
    calib_options opt;
    kb_backend *kb;
    synth s;
    double *glue;           /* forward total minus its parts, per timed forward */
    int num_glue, glue_cap;
};
typedef struct calib calib;

double calibrate_median(double *v, int n)
{
    return n > 0 ? met_median(v, (size_t)n) : NAN;
}

double calibrate_expected(double *v, int n)
{
    double median = calibrate_median(v, n), sum = 0;
    /* a difference of timings (the forward's glue) can have a median at or below zero */
    double limit = median > 0 ? STALL_FACTOR * median : INFINITY;
    int kept = 0;
    for (int i = 0; i < n && v[i] <= limit; i++, kept++) sum += v[i]; /* V is sorted now */
    return kept ? sum / kept : NAN;
}

static double non_attention(const kb_timing *t)
{
    return t->embed + t->norm + t->linear + t->rope + t->kv_write + t->mlp_act;
}

int calibrate_probe_runs(calib_probe *c, int nseq, int q, int ctx, int runs, calib_timed *out)
{
    kb_sampling greedy = {0, 0, 1};
    for (int r = -1; r < runs; r++) {
        kb_batch b = synth_batch(&c->s, nseq, q, ctx, c->opt.kb.shape.vocab);
        kb_timing t;
        int32_t *tokens = c->s.ids; /* sampled ids land in scratch we overwrite next run */
        if (kb_forward(c->kb, &b, &t) != 0 || kb_sample(c->kb, &greedy, tokens, &t) != 0) return -1;
        if (r < 0) continue; /* warm-up run */
        out[r] = (calib_timed){non_attention(&t), t.attn_prefill, t.attn_decode, t.lm_head, t.sample, t.total};
        if (c->num_glue < c->glue_cap) {
            double sum = non_attention(&t) + t.attn_prefill + t.attn_decode + t.lm_head + t.sample;
            c->glue[c->num_glue++] = t.total - sum;
        }
    }
    return 0;
}

void calibrate_timed_stat(const calib_timed *runs, int n, double (*stat)(double *, int), calib_timed *out)
{
    double v[CALIB_PARTS][256];
    if (n > 256) n = 256;
    for (int r = 0; r < n; r++)
        for (int k = 0; k < CALIB_PARTS; k++) v[k][r] = calibrate_timed_part(&runs[r], k);
    double m[CALIB_PARTS];
    for (int k = 0; k < CALIB_PARTS; k++) m[k] = stat(v[k], n);
    *out = (calib_timed){m[0], m[1], m[2], m[3], m[4], m[5]};
}

double calibrate_timed_part(const calib_timed *t, int k)
{
    const double parts[CALIB_PARTS] = {t->linear, t->prefill, t->decode, t->lm_head, t->sample, t->total};
    return parts[k];
}

double calibrate_probe_glue(calib_probe *c)
{
    return c->num_glue ? calibrate_median(c->glue, c->num_glue) : 0;
}

/* A Fisher-Yates shuffle of the pool's blocks with a fixed LCG: the same layout every run. */
static int32_t *scatter_blocks(int num_blocks)
{
    int32_t *p = malloc((num_blocks ? num_blocks : 1) * sizeof *p);
    if (!p) return NULL;
    unsigned x = 2463534242u;
    for (int i = 0; i < num_blocks; i++) p[i] = i;
    for (int i = num_blocks - 1; i > 0; i--) {
        x = x * 1664525u + 1013904223u;
        int j = (int)((x >> 8) % (unsigned)(i + 1));
        int32_t t = p[i];
        p[i] = p[j];
        p[j] = t;
    }
    return p;
}

static int alloc_synth(synth *s, const calib_options *o, int table_width)
{
    int tokens = o->max_tokens > o->max_seqs ? o->max_tokens : o->max_seqs;
    *s = (synth){.num_blocks = o->kb.num_blocks, .block_size = o->block_size, .table_width = table_width,
                 .seed = 12345};
    s->ids = malloc(tokens * sizeof *s->ids);
    s->pos = malloc(tokens * sizeof *s->pos);
    s->slots = malloc(tokens * sizeof *s->slots);
    s->qs = malloc((o->max_seqs + 1) * sizeof *s->qs);
    s->ctx = malloc(o->max_seqs * sizeof *s->ctx);
    s->tables = malloc((size_t)o->max_seqs * table_width * sizeof *s->tables);
    s->scatter = scatter_blocks(o->kb.num_blocks);
    return s->ids && s->pos && s->slots && s->qs && s->ctx && s->tables && s->scatter ? 0 : -1;
}

static void free_synth(synth *s)
{
    free(s->ids); free(s->pos); free(s->slots); free(s->qs); free(s->ctx); free(s->tables); free(s->scatter);
}

int calibrate_size_pool(calib_options *o)
{
    int bs = o->block_size;
    int width = (o->max_tokens + o->max_context + bs - 1) / bs;
    int64_t decode_blocks = (int64_t)o->max_seqs * ((o->max_context + bs - 1) / bs);
    kb_options *kb = &o->kb;
    kb->block_size = bs;
    /* more than INT32_MAX is refused by kb_open unless memory caps it below */
    kb->num_blocks = decode_blocks > INT32_MAX ? INT32_MAX : decode_blocks > width ? (int)decode_blocks : width;
    kb->max_num_seqs = o->max_seqs;
    kb->max_num_tokens = o->max_tokens > o->max_seqs ? o->max_tokens : o->max_seqs;
    kb->max_blocks_per_seq = width;
    /* The largest decode shapes can want more KV than the device holds (1024 sequences of 8192
     * tokens of an 8B model: 1 TiB). Their sequences then share blocks (synth_batch wraps),
     * and still read far more than any cache holds. Unreadable memory is left to kb_open. */
    char why[256];
    long fit = kb_blocks_that_fit(kb, POOL_MEMORY_FRACTION, why, sizeof why);
    if (o->max_pool_blocks > 0 && (fit < 0 || o->max_pool_blocks < fit)) fit = o->max_pool_blocks;
    if (fit > 0 && fit < kb->num_blocks) kb->num_blocks = fit > width ? (int)fit : width;
    return width;
}

calib_probe *calibrate_probe_open(const calib_options *o, int *status, char *err, size_t errlen)
{
    calib *c = calloc(1, sizeof *c);
    *status = 1;
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->opt = *o;
    c->opt.kb.timed_only = true;
    int width = calibrate_size_pool(&c->opt);
    c->glue_cap = 4096;
    c->kb = kb_open(&c->opt.kb, err, errlen);
    if (!c->kb) *status = 2;
    else if (!(c->glue = malloc(c->glue_cap * sizeof *c->glue)) || alloc_synth(&c->s, &c->opt, width) < 0)
        snprintf(err, errlen, "out of memory");
    else
        return c;
    calibrate_probe_close(c);
    return NULL;
}

int calibrate_probe_measure(calib_probe *c, int nseq, int q, int ctx, calib_timed *out)
{
    calib_timed runs[64];
    int n = c->opt.repeats < 1 ? 1 : c->opt.repeats > 64 ? 64 : c->opt.repeats;
    if (calibrate_probe_runs(c, nseq, q, ctx, n, runs) < 0) return -1;
    calibrate_timed_stat(runs, n, calibrate_median, out);
    return 0;
}

const char *calibrate_probe_device(const calib_probe *c) { return kb_device_name(c->kb); }
const char *calibrate_probe_error(const calib_probe *c) { return kb_error(c->kb); }

void calibrate_probe_close(calib_probe *c)
{
    if (!c) return;
    free_synth(&c->s);
    free(c->glue);
    if (c->kb) kb_close(c->kb);
    free(c);
}
