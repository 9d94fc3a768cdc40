/* The roofline's efficiencies fitted to a measured cost table with GSL's Nelder-Mead. */
#include "sim/roofline_fit.h"

#include <gsl/gsl_multimin.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/cost.h"

/* The steps: what serving runs through most. */
enum { MAX_ITEMS = 257 }; /* the largest step: 256 decodes */
static const int decode_seqs[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
static const int decode_ctx[] = {256, 1024, 4096};
static const int prefill_tokens[] = {128, 512, 2048, 8192};
static const struct { int n, c; } chunks[] = {{2048, 2048}, {2048, 8192}};
static const struct { int n, decodes; } riders[] = {{512, 16}, {2048, 16}, {512, 64}, {2048, 64}};
#define COUNT(a) ((int)(sizeof a / sizeof a[0]))
enum { RIDER_CTX = 1024 };

int roofline_fit_steps(void)
{
    return COUNT(decode_seqs) * COUNT(decode_ctx) + COUNT(prefill_tokens) + COUNT(chunks) + COUNT(riders);
}

/* Step I as a batch in ITEMS (a prefill or chunk first, then the decodes). */
static sched_batch step(int i, sched_item *items, request *reqs, char *what, size_t len)
{
    int pre_n = 0, pre_c = 0, dec = 0, dec_ctx = 0;
    int nd = COUNT(decode_seqs) * COUNT(decode_ctx);
    if (i < nd) {
        dec = decode_seqs[i / COUNT(decode_ctx)];
        dec_ctx = decode_ctx[i % COUNT(decode_ctx)];
        snprintf(what, len, "decode %d x %d", dec, dec_ctx);
    } else if ((i -= nd) < COUNT(prefill_tokens)) {
        pre_n = prefill_tokens[i];
        snprintf(what, len, "prefill %d", pre_n);
    } else if ((i -= COUNT(prefill_tokens)) < COUNT(chunks)) {
        pre_n = chunks[i].n;
        pre_c = chunks[i].c;
        snprintf(what, len, "chunk %d after %d", pre_n, pre_c);
    } else {
        i -= COUNT(chunks);
        pre_n = riders[i].n;
        dec = riders[i].decodes;
        dec_ctx = RIDER_CTX;
        snprintf(what, len, "chunk %d + %d decodes x %d", pre_n, dec, dec_ctx);
    }
    sched_batch b = {.items = items};
    if (pre_n) {
        items[b.num_items++] = (sched_item){.req = &reqs[0], .num_new_tokens = pre_n, .context_len = pre_c,
                                            .emits_token = true};
        b.num_multi_token_items = 1;
        b.num_prefill_tokens = pre_n;
        b.num_prefill_seqs = 1;
    }
    for (int d = 0; d < dec; d++) {
        items[b.num_items] = (sched_item){.req = &reqs[b.num_items], .num_new_tokens = 1, .context_len = dec_ctx - 1,
                                          .emits_token = true, .is_decode = true};
        b.num_items++;
    }
    b.num_decode_seqs = dec;
    b.decode_context_sum = (int64_t)dec * dec_ctx;
    b.num_batched_tokens = pre_n + dec;
    b.num_outputs = b.num_items;
    return b;
}

static roofline_params params_of(const hw_fit *f)
{
    return (roofline_params){f->compute_efficiency, f->memory_efficiency, f->attention_efficiency,
                             f->step_overhead_ms * 1e-3};
}

static double error_of(const hw_spec *hw, const fit_case *c, const hw_fit *fit, int i, double *log_ratio,
                       char *what, size_t len)
{
    sched_item items[MAX_ITEMS];
    request reqs[MAX_ITEMS];
    cost_model roof;
    roofline_params p = params_of(fit);
    cost_roofline_init(&roof, c->model, hw, &p, 2, 1);
    if (c->fp8) cost_roofline_quantize(&roof, true, true);
    sched_batch b = step(i, items, reqs, what, len);
    double measured = c->measured.step_time(c->measured.ctx, &b), priced = cost_step_time(&roof, &b);
    *log_ratio = log(priced / measured);
    return fabs(priced / measured - 1);
}

double roofline_fit_error(const hw_spec *hw, const fit_case *c, const hw_fit *fit, int i, char *what, size_t len)
{
    double lr;
    return error_of(hw, c, fit, i, &lr, what, len);
}

typedef struct problem {
    const hw_spec *hw;
    const fit_case *cases;
    int ncases;
} problem;

/* Efficiencies exp(x) capped at 1, the step cost exp(x) ms. */
static hw_fit fit_of(const gsl_vector *x)
{
    double e[3];
    for (int k = 0; k < 3; k++) e[k] = fmin(1.0, exp(gsl_vector_get(x, k)));
    return (hw_fit){e[0], e[1], e[2], exp(gsl_vector_get(x, 3)), 0, 0, 0, 0};
}

static double loss(const gsl_vector *x, void *params)
{
    const problem *pr = params;
    hw_fit f = fit_of(x);
    double sum = 0;
    char what[96];
    for (int c = 0; c < pr->ncases; c++)
        for (int i = 0; i < roofline_fit_steps(); i++) {
            double lr;
            error_of(pr->hw, &pr->cases[c], &f, i, &lr, what, sizeof what);
            sum += lr * lr;
        }
    return sum;
}

int roofline_fit(const hw_spec *hw, const fit_case *cases, int ncases, hw_fit *out)
{
    problem pr = {hw, cases, ncases};
    gsl_multimin_function fn = {.n = 4, .f = loss, .params = &pr};
    gsl_vector *x = gsl_vector_alloc(4), *step = gsl_vector_alloc(4);
    const double start[4] = {log(hw_unfitted.compute_efficiency), log(hw_unfitted.memory_efficiency),
                             log(hw_unfitted.attention_efficiency), log(hw_unfitted.step_overhead_ms)};
    for (int k = 0; k < 4; k++) {
        gsl_vector_set(x, k, start[k]);
        gsl_vector_set(step, k, 0.3);
    }
    gsl_multimin_fminimizer *m = gsl_multimin_fminimizer_alloc(gsl_multimin_fminimizer_nmsimplex2, 4);
    gsl_multimin_fminimizer_set(m, &fn, x, step);
    int status = GSL_CONTINUE;
    for (int it = 0; it < 5000 && status == GSL_CONTINUE; it++) {
        if (gsl_multimin_fminimizer_iterate(m)) break;
        status = gsl_multimin_test_size(gsl_multimin_fminimizer_size(m), 1e-6);
    }
    *out = fit_of(gsl_multimin_fminimizer_x(m));
    gsl_multimin_fminimizer_free(m);
    gsl_vector_free(x);
    gsl_vector_free(step);
    if (status != GSL_SUCCESS) return -1;
    int n = ncases * roofline_fit_steps();
    double *errs = malloc((size_t)n * sizeof *errs);
    if (!errs) return -1;
    char what[96];
    for (int c = 0, k = 0; c < ncases; c++)
        for (int i = 0; i < roofline_fit_steps(); i++) errs[k++] = roofline_fit_error(hw, &cases[c], out, i, what, sizeof what);
    gsl_sort(errs, 1, (size_t)n);
    out->median_error = gsl_stats_median_from_sorted_data(errs, 1, (size_t)n);
    out->max_error = errs[n - 1];
    free(errs);
    return 0;
}

int roofline_fit_holdout(const hw_spec *hw, const fit_case *cases, int ncases, hw_fit *out)
{
    if (ncases < 2) return -1;
    int steps = roofline_fit_steps(), n = ncases * steps;
    fit_case *others = malloc((size_t)(ncases - 1) * sizeof *others);
    double *errs = malloc((size_t)n * sizeof *errs);
    int rc = others && errs ? 0 : -1;
    char what[96];
    for (int k = 0; k < ncases && rc == 0; k++) {
        for (int c = 0, j = 0; c < ncases; c++)
            if (c != k) others[j++] = cases[c];
        hw_fit f;
        rc = roofline_fit(hw, others, ncases - 1, &f);
        for (int i = 0; i < steps && rc == 0; i++) errs[k * steps + i] = roofline_fit_error(hw, &cases[k], &f, i, what, sizeof what);
    }
    if (rc == 0) {
        gsl_sort(errs, 1, (size_t)n);
        out->holdout_median_error = gsl_stats_median_from_sorted_data(errs, 1, (size_t)n);
        out->holdout_max_error = errs[n - 1];
    }
    free(others);
    free(errs);
    return rc;
}
