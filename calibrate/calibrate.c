#include "calibrate/calibrate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"
#include "sim/table_cost.h"
#include "metrics/metrics.h"

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

/* One timed shape of the sweeps and the table rows it gives. */
typedef struct shape {
    ct_component comp;     /* CT_LINEAR, CT_PREFILL_ATTN or CT_DECODE_ATTN */
    int nseq, q, ctx;      /* the batch timed */
    double x, y;           /* its table coordinates */
    bool seq_rows;         /* a decode at the shortest context also gives the LM head and sampling rows */
    calib_timed *runs;     /* every timed run, all rounds */
    int num_runs;
} shape;

typedef struct shape_list {
    shape *v;
    int n, runs_cap;
    size_t cap;
} shape_list;

/* V with room for one element of ELEM bytes past the N it holds: V itself while *CAP allows,
 * else V reallocated to twice *CAP (FIRST to begin with), *CAP updated. NULL, V untouched,
 * when memory runs out. */
static void *grow(void *v, size_t *cap, size_t n, size_t elem, size_t first)
{
    if (n < *cap) return v;
    size_t c = *cap ? 2 * *cap : first;
    void *p = realloc(v, c * elem);
    if (p) *cap = c;
    return p;
}

static int shape_add(shape_list *l, ct_component comp, int nseq, int q, int ctx, double x, double y, bool seq_rows)
{
    shape *v = grow(l->v, &l->cap, (size_t)l->n, sizeof *v, 256);
    if (!v) return -1;
    l->v = v;
    calib_timed *runs = malloc(l->runs_cap * sizeof *runs);
    if (!runs) return -1;
    l->v[l->n++] = (shape){comp, nseq, q, ctx, x, y, seq_rows, runs, 0};
    return 0;
}

static void shapes_free(shape_list *l)
{
    for (int i = 0; i < l->n; i++) free(l->v[i].runs);
    free(l->v);
}

/* Linear layers over batched tokens; prefill attention over (new tokens, cached context);
 * decode attention over (sequences, context), with the LM head and sampling per sequence. */
static int build_shapes(const calib_options *o, shape_list *l)
{
    int tok[64], seqs[64], dctx[64], pctx[64];
    int ntok = grid_points(1, o->max_tokens, tok, 64), nseqs = grid_points(1, o->max_seqs, seqs, 64);
    int ndctx = grid_points(1, o->max_context, dctx, 64);
    pctx[0] = 0;
    int npctx = 1 + (o->max_context >= 64 ? grid_points(64, o->max_context, pctx + 1, 63) : 0);
    int rc = 0;
    for (int i = 0; i < ntok; i++) rc |= shape_add(l, CT_LINEAR, 1, tok[i], 0, tok[i], 0, false);
    for (int i = 0; i < ntok; i++)
        for (int j = 0; j < npctx && tok[i] > 1; j++) /* a one-token step is a decode */
            rc |= shape_add(l, CT_PREFILL_ATTN, 1, tok[i], pctx[j], tok[i], pctx[j], false);
    for (int i = 0; i < nseqs; i++)
        for (int j = 0; j < ndctx; j++)
            rc |= shape_add(l, CT_DECODE_ATTN, seqs[i], 1, dctx[j] - 1, seqs[i], dctx[j], j == 0);
    return rc;
}

/* The table rows of SH from its runs [FROM, TO). */
static int add_rows(cost_table *t, const shape *sh, int from, int to)
{
    calib_timed m;
    calibrate_timed_stat(sh->runs + from, to - from, calibrate_expected, &m);
    double v = sh->comp == CT_LINEAR ? m.linear : sh->comp == CT_PREFILL_ATTN ? m.prefill : m.decode;
    if (ct_add(t, sh->comp, sh->x, sh->y, v) < 0) return -1;
    if (sh->seq_rows && (ct_add(t, CT_LM_HEAD, sh->x, 0, m.lm_head) < 0 || ct_add(t, CT_SAMPLE, sh->x, 0, m.sample) < 0))
        return -1;
    return 0;
}

/* A growing list of doubles. */
typedef struct samples {
    double *v;
    size_t n, cap;
} samples;

static int samples_push(samples *s, double x)
{
    double *v = grow(s->v, &s->cap, s->n, sizeof *v, 1024);
    if (!v) return -1;
    s->v = v;
    s->v[s->n++] = x;
    return 0;
}

/* Serving is not the sweeps: a step shares the caches with every running sequence's state,
 * and the engine schedules, prepares inputs and keeps records around each forward. So after
 * each round of sweeps the calibration serves a segment of a small workload on the real
 * engine, asking that round's table what each batch should cost, and the fit takes (1) the
 * overhead: the expected step time minus forward and sampling, plus the forwards' untimed
 * glue; (2) the scales: the expected ratio of measured forward + sampling to the components'
 * prediction, one for decode-only steps and one for prompt-bound steps (they inflate
 * differently). Each ratio pairs a serving step with sweeps timed seconds before it, so a
 * shared machine's drift in speed between the two cancels, and the rounds spread both over
 * the calibration's whole duration. Expected values (calibrate_expected), not a least-squares
 * fit: a few stalled steps would drag a fit. The simulator prices a step as scale x
 * components + overhead. */
enum { FIT_EXTRA, FIT_DECODE, FIT_PREFILL, FIT_GLUE, FIT_BY_SEQS, FIT_LISTS = FIT_BY_SEQS + TC_SEQ_BUCKETS };
typedef struct serving_fit {
    /* step time minus forward; decode and prefill ratios; forward glue; then the decode ratios
     * again, one list per tc_seq_bucket */
    samples s[FIT_LISTS];
} serving_fit;

static void fit_free(serving_fit *f)
{
    for (int k = 0; k < FIT_LISTS; k++) free(f->s[k].v);
}

static int fit_add_steps(void *ctx, const recorder *rc, char *err, size_t errlen)
{
    serving_fit *f = ctx;
    int bad = 0;
    for (size_t i = 0; i < rc->num_steps; i++) {
        const step_record *s = &rc->steps[i];
        double forward = s->forward_time + s->sample_time;
        bad |= samples_push(&f->s[FIT_EXTRA], (s->end_time - s->start_time) - forward);
        if (!(s->predicted_time > 0)) continue;
        double ratio = forward / s->predicted_time;
        if (tc_prompt_bound(s->num_prefill_tokens, s->num_decode_seqs)) {
            bad |= samples_push(&f->s[FIT_PREFILL], ratio);
        } else {
            bad |= samples_push(&f->s[FIT_DECODE], ratio);
            bad |= samples_push(&f->s[FIT_BY_SEQS + tc_seq_bucket(s->num_decode_seqs + s->num_prefill_seqs)], ratio);
        }
    }
    if (bad) snprintf(err, errlen, "out of memory");
    return bad ? 1 : 0;
}

/* The segment serves its requests at three loads, so that every batch size the decode scales
 * are fitted for has steps: one request at a time, a few, and half the batch. */
enum { SEGMENT_PHASES = 3 };
static const int segment_requests[SEGMENT_PHASES] = {24, 24, 48};

static int serve_phase(const calib_options *o, engine_options *eo, int phase, int round, serving_fit *fit,
                       char *err, size_t errlen)
{
    int concurrency[SEGMENT_PHASES] = {1, 4, eo->sched.max_num_seqs / 2 + 1};
    int longest = o->max_tokens < 256 ? o->max_tokens : 256;
    /* every request fits the context (max_tokens + max_context), the prompt giving way first
     * so that outputs of 4 still decode: a longer one is rejected and serves no step, and with
     * small flags (--max-tokens 2 --max-context 2) every one was, and calibrate failed after
     * its sweeps with too few serving steps to fit (bad-input campaign) */
    int context = eo->sched.max_model_len;
    if (longest > context - 4) longest = context - 4 > 1 ? context - 4 : 1;
    int out_max = context - longest < 64 ? context - longest : 64, out_min = out_max < 4 ? out_max : 4;
    /* a closed loop keeps prompts arriving while others decode, as steady serving does */
    wl_config wc = {.num_requests = segment_requests[phase], .arrival = ARRIVAL_CLOSED,
                    .concurrency = concurrency[phase], .num_prefixes = 1, .trace_time_scale = 1,
                    .vocab_size = o->kb.shape.vocab, .seed = 1 + (uint64_t)(SEGMENT_PHASES * round + phase)};
    wc.prompt_len = (len_dist){DIST_UNIFORM, 1, longest, 0};
    wc.output_len = (len_dist){DIST_UNIFORM, out_min, out_max, 0};
    return engine_run_steps(eo, &wc, fit_add_steps, fit, err, errlen);
}

/* Serves segment ROUND of the calibration workload, each step priced by the components of
 * ROUND_TABLE alone (scale 1, no overhead). */
static int serve_segment(const calib_options *o, cost_table *round_table, int round, serving_fit *fit,
                         char *err, size_t errlen)
{
    table_cost components;
    if (ct_add(round_table, CT_OVERHEAD, 0, 0, 0) < 0 ||
        tc_init(&components, round_table, "(being calibrated)", err, errlen) < 0)
        return 1;
    round_table->n[CT_OVERHEAD] = 0; /* components holds its own copy; the fit adds the real row */
    engine_options eo = {.backend = o->kb, .sampling = {0, 0, 1}, .predict = tc_step_time, .predict_ctx = &components,
                         .stop = o->stop};
    eo.sched = (sched_config){.policy = POLICY_PAGED, .max_num_seqs = o->max_seqs < 64 ? o->max_seqs : 64,
                              .max_num_batched_tokens = o->max_tokens, .chunked_prefill = true,
                              .block_size = o->block_size, .num_blocks = o->kb.num_blocks,
                              .max_model_len = o->max_tokens + o->max_context};
    if (eo.sched.max_num_batched_tokens < eo.sched.max_num_seqs) eo.sched.max_num_batched_tokens = eo.sched.max_num_seqs;
    engine_backend_options(&eo.sched, &eo.backend);
    int status = 0;
    for (int phase = 0; phase < SEGMENT_PHASES && status == 0; phase++)
        status = serve_phase(o, &eo, phase, round, fit, err, errlen);
    tc_free(&components);
    return status;
}

typedef struct progress {
    int done, total; /* shapes timed, over all rounds */
} progress;

/* One pass over every shape, RUNS timed runs each, on a probe opened for it; the round's own
 * table (this pass alone) into ROUND_TABLE. */
static int sweep_round(const calib_options *o, shape_list *l, int runs, progress *pr, cost_table *round_table,
                       serving_fit *fit, char *device, size_t devlen, char *err, size_t errlen)
{
    int status;
    calib_probe *p = calibrate_probe_open(o, &status, err, errlen);
    if (!p) return status;
    snprintf(device, devlen, "%s", calibrate_probe_device(p));
    status = 0;
    for (int i = 0; i < l->n && status == 0; i++) {
        shape *sh = &l->v[i];
        if (o->stop && *o->stop) {
            snprintf(err, errlen, "interrupted");
            status = 1;
            break;
        }
        if (calibrate_probe_runs(p, sh->nseq, sh->q, sh->ctx, runs, sh->runs + sh->num_runs) < 0) {
            snprintf(err, errlen, "backend: %s", calibrate_probe_error(p));
            status = 1;
            break;
        }
        sh->num_runs += runs;
        if (add_rows(round_table, sh, sh->num_runs - runs, sh->num_runs) < 0) {
            snprintf(err, errlen, "out of memory");
            status = 1;
        }
        if (o->progress) o->progress(o->progress_ctx, ++pr->done, pr->total);
    }
    if (status == 0 && samples_push(&fit->s[FIT_GLUE], calibrate_probe_glue(p)) < 0) {
        snprintf(err, errlen, "out of memory");
        status = 1;
    }
    calibrate_probe_close(p);
    return status;
}

void calibrate_seq_scales(const double *scale, const size_t *steps, double fallback, int max_seqs, char *buf,
                          size_t len)
{
    int last = tc_seq_bucket(max_seqs);
    size_t used = 0;
    buf[0] = '\0';
    for (int k = 0; k <= last && used < len; k++) {
        double s = fallback;
        for (int d = 0; d <= last; d++) {
            int lo = k - d, hi = k + d;
            if (lo >= 0 && steps[lo] >= CALIB_MIN_BUCKET_STEPS) { s = scale[lo]; break; }
            if (hi <= last && steps[hi] >= CALIB_MIN_BUCKET_STEPS) { s = scale[hi]; break; }
        }
        used += (size_t)snprintf(buf + used, len - used, "%s%ld:%.6g", k ? " " : "", 1L << k, s);
    }
}

/* The fit over each list's samples from FROM[list] on, as T's overhead row and metadata. */
static int write_fit(cost_table *t, serving_fit *f, const size_t *from, int max_seqs)
{
    double m[FIT_LISTS];
    size_t n[FIT_LISTS];
    for (int k = 0; k < FIT_LISTS; k++) {
        n[k] = f->s[k].n - from[k];
        m[k] = n[k] ? calibrate_expected(f->s[k].v + from[k], (int)n[k]) : k == FIT_DECODE || k == FIT_PREFILL;
    }
    char buf[TC_SEQ_BUCKETS * 24];
    int rc = ct_add(t, CT_OVERHEAD, 0, 0, m[FIT_EXTRA] + m[FIT_GLUE]);
    snprintf(buf, sizeof buf, "%.6g", m[FIT_DECODE]);
    rc |= ct_set_meta(t, "serving_scale_decode", buf);
    calibrate_seq_scales(m + FIT_BY_SEQS, n + FIT_BY_SEQS, m[FIT_DECODE], max_seqs, buf, sizeof buf);
    rc |= ct_set_meta(t, "serving_scale_decode_by_seqs", buf);
    snprintf(buf, sizeof buf, "%.6g", m[FIT_PREFILL]);
    rc |= ct_set_meta(t, "serving_scale_prefill", buf);
    snprintf(buf, sizeof buf, "%zu decode-only, %zu with prompt tokens", n[FIT_DECODE], n[FIT_PREFILL]);
    rc |= ct_set_meta(t, "serving_steps", buf);
    return rc;
}

struct calib_session {
    calib_options opt;
    shape_list shapes;
    serving_fit fit;
    int rounds, runs, done;  /* rounds planned, timed runs per shape per round, rounds done */
    bool failed;             /* a round broke off: its partial samples would skew the table */
    progress pr;
    char device[256];
};

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
    int rounds = o->rounds > 0 ? o->rounds : 3;
    snprintf(buf, sizeof buf, "mean of %d rounds x %d runs, stalls over %dx the median left out (each after a "
                              "warm-up, fresh token ids each run); a serving segment after each round", rounds, (o->repeats + rounds - 1) / rounds,
             STALL_FACTOR);
    ct_set_meta(t, "method", buf);
    ct_set_meta(t, "date", date);
}

void calibrate_shape_string(const kb_shape *s, char *out, size_t len)
{
    snprintf(out, len, "layers=%d hidden=%d heads=%d kv_heads=%d head_dim=%d intermediate=%d vocab=%d",
             s->num_layers, s->hidden, s->num_heads, s->num_kv_heads, s->head_dim, s->intermediate, s->vocab);
}


calib_session *calibrate_begin(const calib_options *o, char *err, size_t errlen)
{
    calib_session *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->opt = *o;
    calibrate_size_pool(&s->opt);
    s->rounds = o->rounds > 0 ? o->rounds : 3;
    s->runs = o->repeats > s->rounds ? (o->repeats + s->rounds - 1) / s->rounds : 1;
    s->shapes.runs_cap = s->rounds * s->runs;
    if (build_shapes(&s->opt, &s->shapes) < 0) {
        snprintf(err, errlen, "out of memory");
        calibrate_end(s);
        return NULL;
    }
    s->pr = (progress){0, s->rounds * s->shapes.n};
    return s;
}

int calibrate_next_round(calib_session *s, cost_table *round_out, char *err, size_t errlen)
{
    if (s->failed || s->done == s->rounds) {
        snprintf(err, errlen, s->failed ? "an earlier calibration round failed"
                                        : "all %d calibration rounds are done", s->rounds);
        return 1;
    }
    size_t from[FIT_LISTS];
    for (int k = 0; k < FIT_LISTS; k++) from[k] = s->fit.s[k].n;
    cost_table round;
    ct_init(&round);
    err[0] = '\0';
    int status = sweep_round(&s->opt, &s->shapes, s->runs, &s->pr, &round, &s->fit, s->device, sizeof s->device,
                             err, errlen);
    if (status == 0) status = serve_segment(&s->opt, &round, s->done, &s->fit, err, errlen);
    if (status == 0 && round_out) {
        *round_out = round;
        ct_init(&round);
        add_metadata(round_out, &s->opt, s->device);
        if (write_fit(round_out, &s->fit, from, s->opt.max_seqs) != 0) {
            snprintf(err, errlen, "out of memory");
            status = 1;
            ct_free(round_out);
        }
    }
    ct_free(&round);
    if (status == 0) s->done++;
    else s->failed = true;
    return status;
}

int calibrate_finish(calib_session *s, cost_table *out, char *err, size_t errlen)
{
    const size_t from[FIT_LISTS] = {0};
    ct_init(out);
    if (s->failed || s->done == 0 || s->fit.s[FIT_EXTRA].n < 2) {
        snprintf(err, errlen, s->failed ? "an earlier calibration round failed"
                              : s->done ? "the serving measurement ran too few steps" : "no calibration round ran");
        return 1;
    }
    int bad = 0;
    for (int i = 0; i < s->shapes.n; i++) bad |= add_rows(out, &s->shapes.v[i], 0, s->shapes.v[i].num_runs);
    add_metadata(out, &s->opt, s->device);
    if (bad || write_fit(out, &s->fit, from, s->opt.max_seqs) != 0) {
        snprintf(err, errlen, "out of memory");
        ct_free(out);
        return 1;
    }
    return 0;
}

void calibrate_end(calib_session *s)
{
    if (!s) return;
    shapes_free(&s->shapes);
    fit_free(&s->fit);
    free(s);
}

int calibrate_run(const calib_options *o, cost_table *out, char *err, size_t errlen)
{
    calib_session *s = calibrate_begin(o, err, errlen);
    if (!s) return 1;
    int status = 0;
    for (int r = 0; r < s->rounds && status == 0; r++) status = calibrate_next_round(s, NULL, err, errlen);
    if (status == 0) status = calibrate_finish(s, out, err, errlen);
    calibrate_end(s);
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
    int held_total = 0;
    fprintf(report, "%-13s %9s %14s %14s\n", "component", "held out", "mean |error|", "max |error|");
    for (int c = 0; c < CT_OVERHEAD; c++) {
        const ct_point *p = t->points[c];
        size_t n = t->n[c];
        double *xs = malloc((n ? n : 1) * sizeof *xs);
        size_t nx = 0;
        for (size_t i = 0; i < n; i++) xs[nx++] = p[i].x;
        qsort(xs, nx, sizeof *xs, met_cmp_double);
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
        held_total += st.n;
    }
    return held_total ? worst : -1;
}
