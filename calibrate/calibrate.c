#include "calibrate/calibrate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"
#include "sim/table_cost.h"

/* The grids: powers of two and the points halfway between (1, 2, 3, 4, 6, 8, 12, ...) up to
 * MAX, which is always included. */
static int grid_points(int lo, int max, int *out, int cap)
{
    int n = 0;
    for (int p = lo; p <= max && n < cap; p *= 2) {
        out[n++] = p;
        if (p + p / 2 <= max && p / 2 > 0 && p + p / 2 != 2 * p && n < cap) out[n++] = p + p / 2;
    }
    if (n == 0 || (out[n - 1] != max && n < cap)) out[n++] = max;
    return n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* One synthetic batch: NSEQ sequences of Q query tokens after CTX cached ones, each in its own
 * blocks, so caches do not serve one sequence's KV to the next, and those blocks scattered
 * over the pool by a fixed permutation, as a served pool is after some churn. */
typedef struct synth {
    int32_t *ids, *pos, *slots, *qs, *ctx, *tables;
    int32_t *scatter;       /* block permutation */
    int block_size, table_width;
    unsigned seed;
} synth;

static kb_batch synth_batch(synth *s, int nseq, int q, int ctx, int vocab)
{
    int t = 0, bs = s->block_size, per_seq = (ctx + q + bs - 1) / bs;
    for (int i = 0; i < nseq; i++) {
        s->qs[i] = t;
        s->ctx[i] = ctx + q;
        for (int b = 0; b < per_seq; b++) s->tables[i * s->table_width + b] = s->scatter[i * per_seq + b];
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
    const calib_options *o; /* &opt */
    kb_backend *kb;
    synth s;
    cost_table *t;
    double *glue;           /* forward total minus its parts, per timed forward */
    int num_glue, glue_cap;
    int done, total;
};
typedef calib_timed timed;
typedef struct calib calib;

static double non_attention(const kb_timing *t)
{
    return t->embed + t->norm + t->linear + t->rope + t->kv_write + t->mlp_act;
}

static int measure(calib *c, int nseq, int q, int ctx, timed *out)
{
    int reps = c->o->repeats;
    double v[6][64];
    kb_sampling greedy = {0, 0, 1};
    for (int r = -1; r < reps; r++) {
        kb_batch b = synth_batch(&c->s, nseq, q, ctx, c->o->kb.shape.vocab);
        kb_timing t;
        int32_t *tokens = c->s.ids; /* sampled ids land in scratch we overwrite next run */
        if (kb_forward(c->kb, &b, &t) != 0 || kb_sample(c->kb, &greedy, tokens, &t) != 0) return -1;
        if (r < 0) continue; /* warm-up run */
        double parts[] = {non_attention(&t), t.attn_prefill, t.attn_decode, t.lm_head, t.sample, t.total};
        for (int k = 0; k < 6; k++) v[k][r] = parts[k];
        if (c->num_glue < c->glue_cap) {
            double sum = non_attention(&t) + t.attn_prefill + t.attn_decode + t.lm_head + t.sample;
            c->glue[c->num_glue++] = t.total - sum;
        }
    }
    *out = (timed){median(v[0], reps), median(v[1], reps), median(v[2], reps), median(v[3], reps),
                   median(v[4], reps), median(v[5], reps)};
    c->done++;
    if (c->o->progress) c->o->progress(c->o->progress_ctx, c->done, c->total);
    return 0;
}

static int sweep_linear(calib *c, const int *tok, int ntok)
{
    for (int i = 0; i < ntok; i++) {
        timed m;
        if (measure(c, 1, tok[i], 0, &m) < 0 || ct_add(c->t, CT_LINEAR, tok[i], 0, m.linear) < 0) return -1;
    }
    return 0;
}

static int sweep_prefill(calib *c, const int *tok, int ntok, const int *ctx, int nctx)
{
    for (int i = 0; i < ntok; i++)
        for (int j = 0; j < nctx; j++) {
            if (tok[i] == 1) continue; /* a one-token step is a decode */
            timed m;
            if (measure(c, 1, tok[i], ctx[j], &m) < 0 || ct_add(c->t, CT_PREFILL_ATTN, tok[i], ctx[j], m.prefill) < 0)
                return -1;
        }
    return 0;
}

static int sweep_decode(calib *c, const int *seqs, int nseqs, const int *ctx, int nctx)
{
    for (int i = 0; i < nseqs; i++)
        for (int j = 0; j < nctx; j++) {
            timed m;
            if (measure(c, seqs[i], 1, ctx[j] - 1, &m) < 0 || ct_add(c->t, CT_DECODE_ATTN, seqs[i], ctx[j], m.decode) < 0)
                return -1;
            if (j == 0 && (ct_add(c->t, CT_LM_HEAD, seqs[i], 0, m.lm_head) < 0 ||
                           ct_add(c->t, CT_SAMPLE, seqs[i], 0, m.sample) < 0))
                return -1;
        }
    return 0;
}

/* Serving is not the sweeps: a step shares the caches with every running sequence's state,
 * and the engine schedules, prepares inputs and keeps records around each forward. So the
 * calibration serves a small workload on the real engine, asking the table built so far what
 * each batch should cost, and measures (1) the overhead: the median of step time minus
 * forward and sampling, plus the forward's untimed glue; (2) the scales: the median ratio of
 * measured forward + sampling to the components' prediction, one for decode-only steps and
 * one for steps that carry prompt tokens (they inflate differently). A median, not a least-
 * squares fit: on a shared machine a few stalled steps would drag a fit, not a median. The simulator prices a step as scale x components + overhead. */
typedef struct serving_fit {
    double overhead, scale_decode, scale_prefill;
    size_t decode_steps, prefill_steps;
} serving_fit;

/* The median of measured over predicted over the steps whose class is WANT_PREFILL (RATIO is
 * scratch); 1 when there are none. */
static double fit_class(const recorder *rc, bool want_prefill, double *ratio, size_t *used)
{
    size_t n = 0;
    for (size_t i = 0; i < rc->num_steps; i++) {
        const step_record *s = &rc->steps[i];
        if ((s->num_prefill_tokens > 0) != want_prefill || !(s->predicted_time > 0)) continue;
        ratio[n++] = (s->forward_time + s->sample_time) / s->predicted_time;
    }
    *used = n;
    return n > 0 ? median(ratio, (int)n) : 1;
}

static int fit_steps(const recorder *rc, double glue, serving_fit *fit, char *err, size_t errlen)
{
    size_t n = rc->num_steps;
    double *extra = malloc((n ? n : 1) * sizeof *extra), *ratio = malloc((n ? n : 1) * sizeof *ratio);
    int status = extra && ratio && n > 1 ? 0 : 1;
    if (status) snprintf(err, errlen, n > 1 ? "out of memory" : "the serving measurement ran too few steps");
    for (size_t i = 0; status == 0 && i < n; i++) {
        const step_record *s = &rc->steps[i];
        extra[i] = (s->end_time - s->start_time) - s->forward_time - s->sample_time;
    }
    if (status == 0) {
        fit->overhead = median(extra, (int)n) + glue;
        fit->scale_decode = fit_class(rc, false, ratio, &fit->decode_steps);
        fit->scale_prefill = fit_class(rc, true, ratio, &fit->prefill_steps);
    }
    free(extra);
    free(ratio);
    return status;
}

static int measure_serving(const calib_options *o, cost_table *t, double glue, serving_fit *fit, char *err,
                           size_t errlen)
{
    table_cost components;
    if (ct_add(t, CT_OVERHEAD, 0, 0, 0) < 0 || tc_init(&components, t, "(being calibrated)", err, errlen) < 0)
        return 1;
    engine_options eo = {.backend = o->kb, .sampling = {0, 0, 1}, .predict = tc_step_time, .predict_ctx = &components};
    eo.sched = (sched_config){.policy = POLICY_PAGED, .max_num_seqs = o->max_seqs < 16 ? o->max_seqs : 16,
                              .max_num_batched_tokens = o->max_tokens, .chunked_prefill = true,
                              .block_size = o->block_size, .num_blocks = o->kb.num_blocks,
                              .max_model_len = o->max_tokens + o->max_context};
    if (eo.sched.max_num_batched_tokens < eo.sched.max_num_seqs) eo.sched.max_num_batched_tokens = eo.sched.max_num_seqs;
    engine_backend_options(&eo.sched, &eo.backend);
    int longest = o->max_tokens < 256 ? o->max_tokens : 256;
    /* a closed loop keeps prompts arriving while others decode, as steady serving does */
    wl_config wc = {.num_requests = 192, .arrival = ARRIVAL_CLOSED, .concurrency = eo.sched.max_num_seqs / 2 + 1,
                    .num_prefixes = 1, .trace_time_scale = 1, .vocab_size = o->kb.shape.vocab, .seed = 1};
    wc.prompt_len = (len_dist){DIST_UNIFORM, 1, longest, 0};
    wc.output_len = (len_dist){DIST_UNIFORM, 4, 64, 0};
    workload w;
    if (wl_build(&wc, &w, err, errlen) < 0) {
        tc_free(&components);
        return 1;
    }
    met_acc *met = met_create();
    recorder rc;
    rec_init(&rc, met, NULL);
    rc.keep_steps = true;
    int status = engine_run(&eo, &w, &wc, &rc, NULL, err, errlen);
    if (status == 0) status = fit_steps(&rc, glue, fit, err, errlen);
    rec_free(&rc);
    met_free(met);
    wl_free(&w);
    tc_free(&components);
    return status;
}

static void add_metadata(cost_table *t, const calib_options *o, const char *device)
{
    char buf[256], date[64];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", gmtime(&now));
    ct_set_meta(t, "device", device);
    ct_set_meta(t, "backend", o->kb.kind == KB_CUDA ? "cuda" : "cpu");
    ct_set_meta(t, "dtype", o->kb.kind == KB_CUDA ? "bf16" : "fp32");
    ct_set_meta(t, "model", o->model_name);
    calibrate_shape_string(&o->kb.shape, buf, sizeof buf);
    ct_set_meta(t, "shape", buf);
    snprintf(buf, sizeof buf, "%d", o->block_size);
    ct_set_meta(t, "block_size", buf);
    snprintf(buf, sizeof buf, "%d", o->kb.threads);
    ct_set_meta(t, "threads", buf);
    snprintf(buf, sizeof buf, "median of %d runs after one warm-up, fresh token ids each run", o->repeats);
    ct_set_meta(t, "method", buf);
    ct_set_meta(t, "date", date);
}

void calibrate_shape_string(const kb_shape *s, char *out, size_t len)
{
    snprintf(out, len, "layers=%d hidden=%d heads=%d kv_heads=%d head_dim=%d intermediate=%d vocab=%d",
             s->num_layers, s->hidden, s->num_heads, s->num_kv_heads, s->head_dim, s->intermediate, s->vocab);
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
    *s = (synth){.block_size = o->block_size, .table_width = table_width, .seed = 12345};
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

static int sweeps(calib *c)
{
    const calib_options *o = c->o;
    int tok[64], seqs[64], dctx[64], pctx[64];
    int ntok = grid_points(1, o->max_tokens, tok, 64), nseqs = grid_points(1, o->max_seqs, seqs, 64);
    int ndctx = grid_points(16 < o->max_context ? 16 : o->max_context, o->max_context, dctx, 64);
    pctx[0] = 0;
    int npctx = 1 + (o->max_context >= 64 ? grid_points(64, o->max_context, pctx + 1, 63) : 0);
    c->total = ntok + (ntok - 1) * npctx + nseqs * ndctx;
    if (sweep_linear(c, tok, ntok) < 0 || sweep_prefill(c, tok, ntok, pctx, npctx) < 0 ||
        sweep_decode(c, seqs, nseqs, dctx, ndctx) < 0)
        return -1;
    return 0;
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
    c->o = &c->opt;
    int bs = o->block_size;
    int width = (o->max_tokens + o->max_context + bs - 1) / bs;
    int decode_blocks = o->max_seqs * ((o->max_context + bs - 1) / bs);
    kb_options *kb = &c->opt.kb;
    kb->block_size = bs;
    kb->num_blocks = decode_blocks > width ? decode_blocks : width;
    kb->max_num_seqs = o->max_seqs;
    kb->max_num_tokens = o->max_tokens > o->max_seqs ? o->max_tokens : o->max_seqs;
    kb->max_blocks_per_seq = width;
    c->glue_cap = 4096;
    c->kb = kb_open(kb, err, errlen);
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
    return measure(c, nseq, q, ctx, out);
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

int calibrate_run(const calib_options *o, cost_table *out, char *err, size_t errlen)
{
    int status;
    calib *c = calibrate_probe_open(o, &status, err, errlen);
    if (!c) return status;
    c->t = out;
    ct_init(out);
    add_metadata(out, &c->opt, kb_device_name(c->kb));
    status = sweeps(c) < 0 ? 1 : 0;
    if (status) snprintf(err, errlen, "backend: %s", kb_error(c->kb));
    double glue = c->num_glue ? median(c->glue, c->num_glue) : 0;
    calib_options opt = c->opt;
    calibrate_probe_close(c);
    serving_fit fit;
    if (status == 0) status = measure_serving(&opt, out, glue, &fit, err, errlen);
    if (status == 0) {
        char buf[64];
        out->points[CT_OVERHEAD][0].seconds = fit.overhead;
        snprintf(buf, sizeof buf, "%.4f", fit.scale_decode);
        ct_set_meta(out, "serving_scale_decode", buf);
        snprintf(buf, sizeof buf, "%.4f", fit.scale_prefill);
        ct_set_meta(out, "serving_scale_prefill", buf);
        snprintf(buf, sizeof buf, "%zu decode-only, %zu with prompt tokens", fit.decode_steps, fit.prefill_steps);
        ct_set_meta(out, "serving_steps", buf);
    }
    if (status != 0) ct_free(out);
    return status;
}

/* ---- holding out points ---- */

typedef struct check_stats {
    int n;
    double sum, max;
} check_stats;

static void check_add(check_stats *st, double predicted, double measured)
{
    if (measured <= 0) return;
    double e = fabs(predicted - measured) / measured;
    st->n++;
    st->sum += e;
    if (e > st->max) st->max = e;
}

/* Points of component C whose x is an interior grid value at an odd index are held out;
 * a table of the remaining points predicts them. */
double calibrate_check(const cost_table *t, FILE *report)
{
    double worst = 0;
    fprintf(report, "%-13s %9s %14s %14s\n", "component", "held out", "mean |error|", "max |error|");
    for (int c = 0; c < CT_OVERHEAD; c++) {
        const ct_point *p = t->points[c];
        size_t n = t->n[c];
        double *xs = malloc((n ? n : 1) * sizeof *xs);
        size_t nx = 0;
        for (size_t i = 0; i < n; i++) xs[nx++] = p[i].x;
        qsort(xs, nx, sizeof *xs, cmp_double);
        size_t k = 0;
        for (size_t i = 0; i < nx; i++)
            if (k == 0 || xs[i] != xs[k - 1]) xs[k++] = xs[i];
        nx = k;
        cost_table kept, held;
        ct_init(&kept);
        ct_init(&held);
        for (size_t i = 0; i < n; i++) {
            size_t idx = 0;
            while (xs[idx] != p[i].x) idx++;
            bool hold = idx % 2 == 1 && idx + 1 < nx;
            ct_add(hold ? &held : &kept, (ct_component)c, p[i].x, p[i].y, p[i].seconds);
        }
        check_stats st = {0};
        bool two_d = c == CT_PREFILL_ATTN || c == CT_DECODE_ATTN;
        grid g = {0};
        table_cost tc = {0};
        char why[256];
        if (tc_build_grid(&g, kept.points[c], kept.n[c], two_d, ct_component_name(c), why, sizeof why) == 0) {
            tc.g[c] = g;
            for (size_t i = 0; i < held.n[c]; i++) {
                bool outside = false;
                const ct_point *h = &held.points[c][i];
                check_add(&st, tc_component(&tc, (ct_component)c, h->x, h->y, &outside), h->seconds);
            }
        }
        free(g.x); free(g.y); free(g.s);
        ct_free(&kept);
        ct_free(&held);
        free(xs);
        fprintf(report, "%-13s %9d %13.1f%% %13.1f%%\n", ct_component_name(c), st.n,
                st.n ? 100 * st.sum / st.n : 0.0, 100 * st.max);
        if (st.max > worst) worst = st.max;
    }
    return worst;
}
