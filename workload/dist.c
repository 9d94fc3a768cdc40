/* Length distributions. Zipf uses rejection-inversion (Hörmann & Derflinger, 1996), the
 * method behind Apache Commons' and NumPy's bounded Zipf samplers: exact, O(1) expected time
 * per sample whatever the range, no table. */
#include "workload/dist.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <gsl/gsl_cdf.h>
#include <gsl/gsl_randist.h>

#include "io/decimal.h"

/* Longest length a distribution may produce: far above any context window, and small
 * enough that prefix_len + length cannot overflow an int. */
#define DIST_LEN_LIMIT (1 << 24)
#define DIST_MAX_FIELDS 4
/* Largest lognormal SIGMA. Lengths span ln(2^24) = 16.6 in log space at most, so at SIGMA = 10
 * even a median in the middle of [1, 2^24] leaves over 40% of draws clipped to 1 or MAX, and
 * beyond it the distribution degenerates into its two clip bounds (lognormal:100:1e300:1000
 * gave only 1s and 1000s; bad-input campaign). Fits to real prompt and output lengths have
 * SIGMA about 0.5 to 2. */
#define LOGNORMAL_SIGMA_LIMIT 10

static const char *const usage[] = {
    [DIST_FIXED] = "fixed:N",
    [DIST_UNIFORM] = "uniform:MIN:MAX",
    [DIST_LOGNORMAL] = "lognormal:MEDIAN:SIGMA:MAX",
    [DIST_ZIPF] = "zipf:MIN:MAX:S",
};

static int parse_kind(const char *name, size_t len, dist_kind *out)
{
    for (int k = DIST_FIXED; k <= DIST_ZIPF; k++) {
        const char *colon = strchr(usage[k], ':');
        if ((size_t)(colon - usage[k]) == len && strncmp(usage[k], name, len) == 0) {
            *out = (dist_kind)k;
            return 0;
        }
    }
    return -1;
}

static int parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    *out = decimal_strtod(s, &end);
    return (end == s || *end != '\0' || errno == ERANGE || !isfinite(*out)) ? -1 : 0;
}

static int parse_length(const char *s, double *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || errno == ERANGE)
        return -1;
    *out = (double)v;
    return 0;
}

/* Splits TEXT at ':' into at most DIST_MAX_FIELDS + 1 NUL-terminated fields in BUF. */
static int split_fields(const char *text, char *buf, size_t buflen, char **fields)
{
    if (strlen(text) >= buflen)
        return -1;
    strcpy(buf, text);
    int n = 0;
    for (char *p = buf;; p++) {
        if (n == DIST_MAX_FIELDS + 1)
            return -1;
        fields[n++] = p;
        p = strchr(p, ':');
        if (!p)
            return n;
        *p = '\0';
    }
}

static int check_length(const char *text, const char *what, double v, char *err, size_t errlen)
{
    if (v < 1 || v > DIST_LEN_LIMIT) {
        snprintf(err, errlen, "\"%s\": %s must be in [1, %d], got %.0f", text, what,
                 DIST_LEN_LIMIT, v);
        return -1;
    }
    return 0;
}

static int check_values(const char *text, const len_dist *d, char *err, size_t errlen)
{
    switch (d->kind) {
    case DIST_FIXED:
        return check_length(text, "N", d->a, err, errlen);
    case DIST_UNIFORM:
    case DIST_ZIPF:
        if (check_length(text, "MIN", d->a, err, errlen) ||
            check_length(text, "MAX", d->b, err, errlen))
            return -1;
        if (d->a > d->b) {
            snprintf(err, errlen, "\"%s\": MIN > MAX", text);
            return -1;
        }
        if (d->kind == DIST_ZIPF && !(d->c > 0)) {
            snprintf(err, errlen, "\"%s\": S must be > 0", text);
            return -1;
        }
        return 0;
    case DIST_LOGNORMAL:
        /* a length is a whole token or more, so a median below 1 clipped over half the draws to
         * 1 and was no median of the lengths drawn (stop 34's leftover) */
        if (!(d->a >= 1)) {
            snprintf(err, errlen, "\"%s\": MEDIAN must be at least 1 (a length in tokens; below 1, over half the "
                     "draws would be clipped to 1)", text);
            return -1;
        }
        if (!(d->b > 0 && d->b <= LOGNORMAL_SIGMA_LIMIT)) {
            snprintf(err, errlen, "\"%s\": SIGMA must be in (0, %d]", text, LOGNORMAL_SIGMA_LIMIT);
            return -1;
        }
        if (check_length(text, "MAX", d->c, err, errlen))
            return -1;
        /* a median above MAX clipped most draws to MAX (lognormal:2000:0.5:1000 gave 19 of 20
         * prompts 1000; bad-input campaign) */
        if (d->a > d->c) {
            snprintf(err, errlen, "\"%s\": MEDIAN > MAX", text);
            return -1;
        }
        return 0;
    }
    return -1;
}

int dist_parse(const char *text, len_dist *out, char *err, size_t errlen)
{
    char buf[256];
    char *f[DIST_MAX_FIELDS + 1];
    int n = split_fields(text, buf, sizeof buf, f);
    len_dist d = {0};
    if (n < 0 || parse_kind(f[0], strlen(f[0]), &d.kind) != 0) {
        snprintf(err, errlen, "unknown length distribution \"%s\" (expected %s, %s, %s or %s)",
                 text, usage[DIST_FIXED], usage[DIST_UNIFORM], usage[DIST_LOGNORMAL],
                 usage[DIST_ZIPF]);
        return -1;
    }
    static const int nfields[] = {
        [DIST_FIXED] = 1, [DIST_UNIFORM] = 2, [DIST_LOGNORMAL] = 3, [DIST_ZIPF] = 3,
    };
    /* Which fields are integer lengths (bit i = field i + 1); the others are reals. */
    static const unsigned int_fields[] = {
        [DIST_FIXED] = 1, [DIST_UNIFORM] = 3, [DIST_LOGNORMAL] = 4, [DIST_ZIPF] = 3,
    };
    double *vals[] = {&d.a, &d.b, &d.c};
    int ok = n - 1 == nfields[d.kind];
    for (int i = 0; ok && i < nfields[d.kind]; i++)
        ok = ((int_fields[d.kind] >> i) & 1 ? parse_length(f[i + 1], vals[i])
                                            : parse_double(f[i + 1], vals[i])) == 0;
    if (!ok) {
        snprintf(err, errlen, "expected \"%s\", got \"%s\"", usage[d.kind], text);
        return -1;
    }
    if (check_values(text, &d, err, errlen) != 0)
        return -1;
    *out = d;
    return 0;
}

/* Shortest %g form that reads back to the same double, so formats round-trip exactly. */
static void format_real(double v, char *buf, size_t len)
{
    snprintf(buf, len, "%.15g", v);
    if (decimal_strtod(buf, NULL) != v)
        snprintf(buf, len, "%.17g", v);
}

void dist_format(const len_dist *d, char *buf, size_t len)
{
    char r1[32], r2[32];
    switch (d->kind) {
    case DIST_FIXED:
        snprintf(buf, len, "fixed:%d", (int)d->a);
        return;
    case DIST_UNIFORM:
        snprintf(buf, len, "uniform:%d:%d", (int)d->a, (int)d->b);
        return;
    case DIST_LOGNORMAL:
        format_real(d->a, r1, sizeof r1);
        format_real(d->b, r2, sizeof r2);
        snprintf(buf, len, "lognormal:%s:%s:%d", r1, r2, (int)d->c);
        return;
    case DIST_ZIPF:
        format_real(d->c, r1, sizeof r1);
        snprintf(buf, len, "zipf:%d:%d:%s", (int)d->a, (int)d->b, r1);
        return;
    }
}

/* Rejection-inversion helpers for h(x) = x^-s on [1, n]: H is an antiderivative of h with
 * H(1) = 0, written with log1p/expm1 so that it stays accurate near s = 1. */
static double zipf_helper1(double x)
{
    return fabs(x) > 1e-8 ? log1p(x) / x : 1 - x * (0.5 - x * (1.0 / 3 - 0.25 * x));
}

static double zipf_helper2(double x)
{
    return fabs(x) > 1e-8 ? expm1(x) / x : 1 + x * 0.5 * (1 + x * (1.0 / 3) * (1 + 0.25 * x));
}

static double zipf_h(double x, double s) { return exp(-s * log(x)); }

static double zipf_H(double x, double s)
{
    double lx = log(x);
    return zipf_helper2((1 - s) * lx) * lx;
}

static double zipf_H_inv(double x, double s)
{
    double t = x * (1 - s);
    if (t < -1)
        t = -1;
    return exp(zipf_helper1(t) * x);
}

/* Returns k in [1, n] with P(k) proportional to k^-s. */
static int zipf_sample(int n, double s, gsl_rng *rng)
{
    double h_x1 = zipf_H(1.5, s) - 1;
    double h_n = zipf_H(n + 0.5, s);
    double s2 = 2 - zipf_H_inv(zipf_H(2.5, s) - zipf_h(2, s), s);
    for (;;) {
        double u = h_n + gsl_rng_uniform(rng) * (h_x1 - h_n);
        double x = zipf_H_inv(u, s);
        int k = (int)(x + 0.5);
        if (k < 1)
            k = 1;
        else if (k > n)
            k = n;
        if (k - x <= s2 || u >= zipf_H(k + 0.5, s) - zipf_h(k, s))
            return k;
    }
}

int dist_sample(const len_dist *d, gsl_rng *rng)
{
    switch (d->kind) {
    case DIST_FIXED:
        return (int)d->a;
    case DIST_UNIFORM:
        return (int)d->a + (int)gsl_rng_uniform_int(rng, (unsigned long)(d->b - d->a) + 1);
    case DIST_LOGNORMAL: {
        double x = round(gsl_ran_lognormal(rng, log(d->a), d->b));
        return x < 1 ? 1 : x > d->c ? (int)d->c : (int)x;
    }
    case DIST_ZIPF:
        return (int)d->a - 1 + zipf_sample((int)(d->b - d->a) + 1, d->c, rng);
    }
    return 1;
}

int dist_max(const len_dist *d)
{
    switch (d->kind) {
    case DIST_FIXED: return (int)d->a;
    case DIST_UNIFORM: return (int)d->b;
    case DIST_LOGNORMAL: return (int)d->c;
    case DIST_ZIPF: return (int)d->b;
    }
    return 1;
}

/* sum_{j=1}^{n} j^p: exact summation of the first terms, Euler-Maclaurin for the tail
 * (its error is far below double precision once j > 10000). */
static double power_sum(double p, int n)
{
    const int direct = 10000;
    double sum = 0;
    for (int j = 1; j <= n && j <= direct; j++)
        sum += pow(j, p);
    if (n <= direct)
        return sum;
    double a = direct + 1, b = n;
    double integral = p == -1 ? log(b / a) : (pow(b, p + 1) - pow(a, p + 1)) / (p + 1);
    return sum + integral + (pow(a, p) + pow(b, p)) / 2 +
           p * (pow(b, p - 1) - pow(a, p - 1)) / 12 -
           p * (p - 1) * (p - 2) * (pow(b, p - 3) - pow(a, p - 3)) / 720;
}

/* Mean of the rounded, clipped lognormal X as sum_{k>=1} P(X >= k) = 1 + sum_{k=2}^{MAX}
 * Q(k - 1/2). The terms fall monotonically; once one is negligible the rest are too. */
static double lognormal_mean(const len_dist *d)
{
    double zeta = log(d->a), sum = 1;
    for (int k = 2; k <= (int)d->c; k++) {
        double q = gsl_cdf_lognormal_Q(k - 0.5, zeta, d->b);
        sum += q;
        if (q < 1e-20)
            break;
    }
    return sum;
}

double dist_mean(const len_dist *d)
{
    switch (d->kind) {
    case DIST_FIXED:
        return d->a;
    case DIST_UNIFORM:
        return (d->a + d->b) / 2;
    case DIST_LOGNORMAL:
        return lognormal_mean(d);
    case DIST_ZIPF: {
        int n = (int)(d->b - d->a) + 1;
        return d->a - 1 + power_sum(1 - d->c, n) / power_sum(-d->c, n);
    }
    }
    return 0;
}
