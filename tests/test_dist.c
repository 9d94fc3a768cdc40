/* Length distributions: parsing, errors, canonical text, sample ranges and means. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>
#include <gsl/gsl_rng.h>

#include "workload/dist.h"

static const double pi = 3.14159265358979323846;

static len_dist parse_ok(const char *text)
{
    len_dist d;
    char err[256] = "";
    cr_assert_eq(dist_parse(text, &d, err, sizeof err), 0, "\"%s\" rejected: %s", text, err);
    return d;
}

static void parse_fails(const char *text, const char *expected_err)
{
    len_dist d;
    char err[256] = "";
    cr_assert_eq(dist_parse(text, &d, err, sizeof err), -1, "\"%s\" accepted", text);
    cr_assert(strstr(err, expected_err), "\"%s\": error \"%s\" lacks \"%s\"", text, err,
              expected_err);
    cr_assert_null(strchr(err, '\n'), "error must be one line: %s", err);
}

static gsl_rng *rng_seeded(unsigned long seed)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, seed);
    return r;
}

Test(dist, parses_each_kind)
{
    len_dist d = parse_ok("fixed:128");
    cr_assert_eq(d.kind, DIST_FIXED);
    cr_assert_eq(d.a, 128);
    d = parse_ok("uniform:32:64");
    cr_assert_eq(d.kind, DIST_UNIFORM);
    cr_assert(d.a == 32 && d.b == 64);
    d = parse_ok("lognormal:1000:0.5:8000");
    cr_assert_eq(d.kind, DIST_LOGNORMAL);
    cr_assert(d.a == 1000 && d.b == 0.5 && d.c == 8000);
    d = parse_ok("zipf:1:4096:1.1");
    cr_assert_eq(d.kind, DIST_ZIPF);
    cr_assert(d.a == 1 && d.b == 4096 && d.c == 1.1);
}

Test(dist, rejects_malformed_text_with_a_reason)
{
    parse_fails("uniform:5", "expected \"uniform:MIN:MAX\", got \"uniform:5\"");
    parse_fails("uniform:5:6:7", "expected \"uniform:MIN:MAX\"");
    parse_fails("fixed:", "expected \"fixed:N\", got \"fixed:\"");
    parse_fails("fixed:12x", "expected \"fixed:N\"");
    parse_fails("fixed:1.5", "expected \"fixed:N\"");
    parse_fails("lognormal:1000:abc:8000", "expected \"lognormal:MEDIAN:SIGMA:MAX\"");
    parse_fails("zipf:1:10", "expected \"zipf:MIN:MAX:S\"");
    parse_fails("normal:5:1", "unknown length distribution \"normal:5:1\"");
    parse_fails("", "unknown length distribution");
}

Test(dist, rejects_bad_values)
{
    parse_fails("fixed:0", "N must be in [1,");
    parse_fails("fixed:-3", "N must be in [1,");
    parse_fails("uniform:0:10", "MIN must be in [1,");
    parse_fails("uniform:9:5", "MIN > MAX");
    parse_fails("zipf:9:5:1.0", "MIN > MAX");
    parse_fails("zipf:1:5:0", "S must be > 0");
    parse_fails("lognormal:0:0.5:100", "MEDIAN must be at least 1");
    parse_fails("lognormal:0.5:0.5:100", "MEDIAN must be at least 1"); /* took, and clipped half the draws */
    len_dist one;
    char why[256];
    cr_assert_eq(dist_parse("lognormal:1:0.5:100", &one, why, sizeof why), 0, "%s", why);
    parse_fails("lognormal:10:0:100", "SIGMA must be in (0, 10]");
    parse_fails("lognormal:10:0.5:0", "MAX must be in [1,");
    /* a median past MAX clipped most draws to MAX, a huge sigma all to 1 or MAX (bad-input campaign) */
    parse_fails("lognormal:2000:0.5:1000", "\"lognormal:2000:0.5:1000\": MEDIAN > MAX");
    parse_fails("lognormal:100:1e300:1000", "\"lognormal:100:1e300:1000\": SIGMA must be in (0, 10]");
    parse_fails("lognormal:100:10.5:1000", "SIGMA must be in (0, 10]");
    parse_ok("lognormal:1000:10:1000");
}

Test(dist, format_round_trips)
{
    const char *texts[] = {"fixed:7", "uniform:1:9", "lognormal:1000:0.5:8000",
                           "lognormal:333.3:0.1:500", "zipf:2:100:1.25"};
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        len_dist d = parse_ok(texts[i]), back;
        char buf[128], err[256];
        dist_format(&d, buf, sizeof buf);
        cr_assert_str_eq(buf, texts[i]);
        cr_assert_eq(dist_parse(buf, &back, err, sizeof err), 0);
        cr_assert(memcmp(&d, &back, sizeof d) == 0);
    }
}

Test(dist, fixed_and_uniform_samples)
{
    gsl_rng *rng = rng_seeded(1);
    len_dist f = parse_ok("fixed:42"), u = parse_ok("uniform:10:20");
    int seen[11] = {0};
    double sum = 0;
    const int n = 110000;
    for (int i = 0; i < n; i++) {
        cr_assert_eq(dist_sample(&f, rng), 42);
        int x = dist_sample(&u, rng);
        cr_assert(x >= 10 && x <= 20, "uniform sample %d out of [10, 20]", x);
        seen[x - 10]++;
        sum += x;
    }
    for (int k = 0; k < 11; k++)   /* each value expected 10000 times, sd about 95 */
        cr_assert(abs(seen[k] - 10000) < 600, "value %d seen %d times", k + 10, seen[k]);
    cr_assert_float_eq(sum / n, 15.0, 0.05);
    cr_assert_eq(dist_mean(&u), 15.0);
    cr_assert_eq(dist_max(&u), 20);
    cr_assert_eq(dist_max(&f), 42);
    gsl_rng_free(rng);
}

Test(dist, lognormal_median_clip_and_mean)
{
    gsl_rng *rng = rng_seeded(2);
    len_dist d = parse_ok("lognormal:200:0.8:600");
    const int n = 100000;
    int below = 0, at_max = 0;
    double sum = 0;
    for (int i = 0; i < n; i++) {
        int x = dist_sample(&d, rng);
        cr_assert(x >= 1 && x <= 600, "sample %d out of [1, 600]", x);
        below += x < 200;
        at_max += x == 600;
        sum += x;
    }
    /* Median 200: about half below it. P(X > 599.5) = Q((ln 599.5 - ln 200)/0.8) = Q(1.372)
     * = 0.085: that mass piles up at MAX. */
    cr_assert_float_eq((double)below / n, 0.5, 0.01);
    cr_assert_float_eq((double)at_max / n, 0.085, 0.005);
    double mean = dist_mean(&d);
    cr_assert_float_eq(sum / n, mean, 0.01 * mean, "sample mean %g vs dist_mean %g", sum / n,
                       mean);
    cr_assert_eq(dist_max(&d), 600);
    gsl_rng_free(rng);
}

/* P(k) = k^-s / sum_j j^-s on [1, 5] relative to MIN, checked value by value. */
static void check_zipf_pmf(const char *text, int min, int max, double s, unsigned long seed)
{
    gsl_rng *rng = rng_seeded(seed);
    len_dist d = parse_ok(text);
    int counts[8] = {0};
    const int n = 200000, k = max - min + 1;
    for (int i = 0; i < n; i++) {
        int x = dist_sample(&d, rng);
        cr_assert(x >= min && x <= max, "%s: sample %d out of range", text, x);
        counts[x - min]++;
    }
    double norm = 0;
    for (int j = 1; j <= k; j++)
        norm += pow(j, -s);
    for (int j = 1; j <= k; j++) {
        double p = pow(j, -s) / norm;
        cr_assert_float_eq((double)counts[j - 1] / n, p, 0.004, "%s: P(%d) = %g, expected %g",
                           text, min + j - 1, (double)counts[j - 1] / n, p);
    }
    gsl_rng_free(rng);
}

Test(dist, zipf_is_exact_on_small_ranges)
{
    check_zipf_pmf("zipf:10:14:1.2", 10, 14, 1.2, 3);
    check_zipf_pmf("zipf:1:5:1", 1, 5, 1.0, 4);
    check_zipf_pmf("zipf:3:8:0.5", 3, 8, 0.5, 5);
}

Test(dist, zipf_is_bounded_on_large_ranges)
{
    gsl_rng *rng = rng_seeded(6);
    len_dist d = parse_ok("zipf:100:1000000:2");
    const int n = 100000;
    int ones = 0;
    double sum = 0;
    for (int i = 0; i < n; i++) {
        int x = dist_sample(&d, rng);
        cr_assert(x >= 100 && x <= 1000000, "sample %d out of range", x);
        ones += x == 100;
        sum += x;
    }
    /* P(MIN) = 1/zeta(2) truncated = 6/pi^2 = 0.6079 */
    cr_assert_float_eq((double)ones / n, 6 / (pi * pi), 0.005);
    /* Mean excess over MIN-1: sum k^-1 / sum k^-2 = H(10^6) / (pi^2/6) = 14.39 / 1.645 */
    double mean = dist_mean(&d);
    cr_assert_float_eq(mean, 99 + (log(1e6) + 0.5772156649) / (pi * pi / 6), 1e-3);
    cr_assert_float_eq(sum / n, mean, 0.1 * mean);
    gsl_rng_free(rng);
}

Test(dist, same_seed_same_samples)
{
    len_dist d = parse_ok("lognormal:500:1:4000");
    gsl_rng *a = rng_seeded(9), *b = rng_seeded(9);
    for (int i = 0; i < 1000; i++)
        cr_assert_eq(dist_sample(&d, a), dist_sample(&d, b));
    gsl_rng_free(a);
    gsl_rng_free(b);
}
