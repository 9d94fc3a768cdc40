#include "sim/table_cost.h"

#include <gsl/gsl_interp.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/decimal.h"
#include "metrics/metrics.h"

/* Sorted distinct values of V[0..n) (stride STRIDE doubles) into a new array. */
static double *distinct(const ct_point *p, size_t n, bool use_y, size_t *out_n)
{
    double *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return NULL;
    for (size_t i = 0; i < n; i++) v[i] = use_y ? p[i].y : p[i].x;
    qsort(v, n, sizeof *v, met_cmp_double);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (k == 0 || v[i] != v[k - 1]) v[k++] = v[i];
    *out_n = k;
    return v;
}

/* The last I with V[I] <= Q (the search never reads V[n]). */
static size_t index_of(const double *v, size_t n, double q)
{
    return gsl_interp_bsearch(v, q, 0, n);
}

int tc_build_grid(grid *g, const ct_point *p, size_t n, bool two_d, const char *comp,
                      char *err, size_t errlen)
{
    if (n == 0) {
        snprintf(err, errlen, "no %s rows", comp);
        return -1;
    }
    g->x = distinct(p, n, false, &g->nx);
    g->y = two_d ? distinct(p, n, true, &g->ny) : NULL;
    if (!two_d) g->ny = 1;
    g->s = malloc(g->nx * g->ny * sizeof *g->s);
    char *seen = calloc(g->nx * g->ny, 1);
    if (!g->x || (two_d && !g->y) || !g->s || !seen) {
        free(seen);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        size_t cell = index_of(g->x, g->nx, p[i].x) * g->ny + (two_d ? index_of(g->y, g->ny, p[i].y) : 0);
        if (seen[cell]++) {
            snprintf(err, errlen, "%s has two rows for (%g, %g)", comp, p[i].x, p[i].y);
            rc = -1;
        }
        g->s[cell] = p[i].seconds;
    }
    for (size_t c = 0; c < g->nx * g->ny && rc == 0; c++)
        if (!seen[c]) {
            snprintf(err, errlen, "%s is not a full grid: no row for (%g, %g)", comp, g->x[c / g->ny],
                     two_d ? g->y[c % g->ny] : 0.0);
            rc = -1;
        }
    free(seen);
    return rc;
}

/* "1:s0 2:s1 4:s2 ..." into TC's per-bucket decode scales. */
static int parse_seq_scales(table_cost *tc, const char *v, char *err, size_t errlen)
{
    tc->num_seq_buckets = 0;
    if (!v) return 0;
    const char *p = v;
    while (*p) {
        char *end;
        long bound = strtol(p, &end, 10);
        double scale = 0;
        bool ok = end != p && *end == ':' && tc->num_seq_buckets < TC_SEQ_BUCKETS &&
                  bound == 1L << tc->num_seq_buckets;
        if (ok) {
            p = end + 1;
            scale = decimal_strtod(p, &end);
            ok = end != p && isfinite(scale) && scale > 0 && (*end == ' ' || *end == '\0');
        }
        if (!ok) {
            snprintf(err, errlen, "cost table %s: serving_scale_decode_by_seqs must read \"1:S 2:S 4:S ...\" "
                     "(sequences from 1, doubling, each with a positive scale), got \"%s\"", tc->name, v);
            return -1;
        }
        tc->scale_by_seqs[tc->num_seq_buckets++] = scale;
        p = end;
        while (*p == ' ') p++;
    }
    return 0;
}

double tc_decode_scale(const table_cost *tc, int seqs)
{
    if (tc->num_seq_buckets == 0) return tc->scale_decode;
    int k = tc_seq_bucket(seqs);
    return tc->scale_by_seqs[k < tc->num_seq_buckets ? k : tc->num_seq_buckets - 1];
}

int tc_init(table_cost *tc, const cost_table *t, const char *name, char *err, size_t errlen)
{
    memset(tc, 0, sizeof *tc);
    snprintf(tc->name, sizeof tc->name, "%s", name);
    const char *keys[2] = {"serving_scale_decode", "serving_scale_prefill"};
    double *scales[2] = {&tc->scale_decode, &tc->scale_prefill};
    for (int i = 0; i < 2; i++) {
        const char *v = ct_meta(t, keys[i]);
        char *end = NULL;
        *scales[i] = v ? decimal_strtod(v, &end) : 1.0;
        if (!(*scales[i] > 0) || !isfinite(*scales[i]) || (v && (end == v || *end))) {
            snprintf(err, errlen, "cost table %s: %s must be a positive number (got \"%s\")", name, keys[i], v);
            return -1;
        }
    }
    if (parse_seq_scales(tc, ct_meta(t, "serving_scale_decode_by_seqs"), err, errlen) < 0) return -1;
    char why[256];
    for (int c = 0; c < CT_COUNT; c++) {
        bool two_d = c == CT_PREFILL_ATTN || c == CT_DECODE_ATTN;
        if (c >= CT_FIRST_OPTIONAL && t->n[c] == 0) continue;
        if (tc_build_grid(&tc->g[c], t->points[c], t->n[c], two_d, ct_component_name(c), why, sizeof why) < 0) {
            snprintf(err, errlen, "cost table %s: %s", name, why);
            tc_free(tc);
            return -1;
        }
    }
    /* the fused all-reduces stand in for the others up to a size: a table with only them
     * could not price a longer step */
    /* a step's overhead is one number: a second overhead row was read past, unused
     * (bad-input campaign) */
    if (t->n[CT_OVERHEAD] != 1) {
        snprintf(err, errlen, "cost table %s: %zu overhead rows; a table holds one, the fixed cost of a step", name,
                 t->n[CT_OVERHEAD]);
        tc_free(tc);
        return -1;
    }
    if (tc_has(tc, CT_ALLREDUCE_FUSED) && !tc_has(tc, CT_ALLREDUCE)) {
        snprintf(err, errlen, "cost table %s: allreduce_fused rows without allreduce rows (the all-reduces of "
                 "steps too long to fuse)", name);
        tc_free(tc);
        return -1;
    }
    /* a forward costs something: a table of zeros priced every run at 0 ms, and said nothing */
    bool priced = false;
    for (size_t i = 0; i < tc->g[CT_LINEAR].nx; i++) priced |= tc->g[CT_LINEAR].s[i] > 0;
    if (!priced) {
        snprintf(err, errlen, "cost table %s: every linear price is 0 s; a table holds the seconds each step takes", name);
        tc_free(tc);
        return -1;
    }
    return 0;
}

void tc_free(table_cost *tc)
{
    for (int c = 0; c < CT_COUNT; c++) {
        free(tc->g[c].x);
        free(tc->g[c].y);
        free(tc->g[c].s);
    }
    memset(tc->g, 0, sizeof tc->g);
}

/* The cell [i, i+1] holding Q (the edge cell outside the grid) and Q's position in it. */
static double cell(const double *v, size_t n, double q, size_t *i, bool *outside)
{
    if (n == 1) {
        *i = 0;
        if (q != v[0]) *outside = true;
        return 0;
    }
    if (q < v[0] || q > v[n - 1]) *outside = true;
    *i = q <= v[0] ? 0 : q >= v[n - 1] ? n - 2 : index_of(v, n - 1, q);
    return (q - v[*i]) / (v[*i + 1] - v[*i]);
}

double tc_component(const table_cost *tc, ct_component c, double x, double y, bool *outside)
{
    const grid *g = &tc->g[c];
    if (g->nx == 0) return 0;
    size_t i, j = 0;
    double tx = cell(g->x, g->nx, x, &i, outside), ty = 0;
    size_t i1 = g->nx > 1 ? i + 1 : i;
    if (g->ny > 1) ty = cell(g->y, g->ny, y, &j, outside);
    size_t j1 = g->ny > 1 ? j + 1 : j;
    const double *s = g->s;
    double low = s[i * g->ny + j] + tx * (s[i1 * g->ny + j] - s[i * g->ny + j]);
    double high = s[i * g->ny + j1] + tx * (s[i1 * g->ny + j1] - s[i * g->ny + j1]);
    double v = low + ty * (high - low);
    return v > 0 ? v : 0;
}

/* Whether NAME has not been warned about in this process yet (and now has): a plan or a
 * sweep opens the same table for every point, and "warned once" came a dozen times. */
static bool first_warning_of(const char *name)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static char warned[64][256];
    static int n;
    bool first = true;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n && first; i++) first = strcmp(warned[i], name) != 0;
    if (first && n < 64) snprintf(warned[n++], sizeof warned[0], "%s", name);
    pthread_mutex_unlock(&lock);
    return first;
}

/* The first price a step takes from beyond its component's sweep, for the warning. */
typedef struct off_sweep {
    ct_component c;
    double x, y;
} off_sweep;

/* tc_component, noting in *O the first price from beyond the sweep. */
static double price(const table_cost *tc, ct_component c, double x, double y, bool *outside, off_sweep *o)
{
    bool out = false;
    double v = tc_component(tc, c, x, y, &out);
    if (out && !*outside) *o = (off_sweep){c, x, y};
    *outside |= out;
    return v;
}

/* "linear at 131072 (its sweep 1-65536)": what a step took from beyond its table. */
static void describe_off_sweep(const table_cost *tc, const off_sweep *o, char *buf, size_t len)
{
    const grid *g = &tc->g[o->c];
    int n = snprintf(buf, len, "%s at %.6g", ct_component_name(o->c), o->x);
    if (g->ny > 1 && n > 0 && (size_t)n < len) n += snprintf(buf + n, len - (size_t)n, ", %.6g", o->y);
    if (n > 0 && (size_t)n < len) n += snprintf(buf + n, len - (size_t)n, " (its sweep %.6g-%.6g", g->x[0], g->x[g->nx - 1]);
    if (g->ny > 1 && n > 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, " by %.6g-%.6g", g->y[0], g->y[g->ny - 1]);
    if (n > 0 && (size_t)n < len) snprintf(buf + n, len - (size_t)n, ")");
}

double tc_step_time(const void *ctx, const sched_batch *b)
{
    table_cost *tc = (table_cost *)ctx;
    bool outside = false;
    off_sweep off = {0};
    /* a row of logits per sequence, and one per draft token a verification checks */
    double rows = b->num_items + b->num_draft_tokens;
    double t = price(tc, CT_LINEAR, b->num_batched_tokens, 0, &outside, &off) +
               price(tc, CT_LM_HEAD, rows, 0, &outside, &off) +
               price(tc, CT_SAMPLE, rows, 0, &outside, &off);
    double tokens = b->num_batched_tokens;
    bool fused = tokens <= tc->fused_max_tokens && tc_has(tc, CT_ALLREDUCE_FUSED);
    t += price(tc, fused ? CT_ALLREDUCE_FUSED : CT_ALLREDUCE, tokens, 0, &outside, &off);
    int decodes = b->num_items - b->num_multi_token_items;
    double decode_context = (double)b->decode_context_sum;
    for (int i = 0, left = b->num_multi_token_items; left > 0; i++) {
        const sched_item *it = &b->items[i];
        int n = it->num_new_tokens + it->num_pad_tokens;
        if (n == 1) continue;
        left--;
        if (it->num_draft_tokens > 0) {
            /* a verification's few queries read the sequence's KV once, as a decode does: the
             * decode kernel's time, not a prefill kernel's (timed for long queries) */
            decodes++;
            decode_context += it->context_len + n;
            continue;
        }
        t += price(tc, CT_PREFILL_ATTN, n, it->context_len, &outside, &off);
    }
    if (decodes > 0) t += price(tc, CT_DECODE_ATTN, decodes, decode_context / decodes, &outside, &off);
    t = (tc_prompt_bound(b->num_prefill_tokens, b->num_decode_seqs) ? tc->scale_prefill
                                                                      : tc_decode_scale(tc, b->num_decode_seqs + b->num_prefill_seqs)) * t +
        tc->g[CT_OVERHEAD].s[0];
    if (outside && !tc->warned) {
        tc->warned = true;
        char what[200];
        describe_off_sweep(tc, &off, what, sizeof what);
        if (first_warning_of(tc->name))
            fprintf(stderr, "servesim: warning: cost table %s: a step's %s lies outside the table; "
                            "extrapolating (warned once)\n", tc->name, what);
    }
    return t;
}
