#include "metrics/repeat.h"

#include <math.h>
#include <string.h>

#include "metrics/sumfield.h"

/* Field I of run R: a sumf field, or past them the extra I - sumf_count() (metrics/sumfield.h). */
static double field_value(const summary *run, size_t i)
{
    return i < sumf_count() ? sumf_get(sumf_at(i), run) : sumf_extra_get(run, (int)(i - sumf_count()));
}

/* Mean, sample standard deviation and range of field I over RUNS[0..n). */
static rep_stat describe_field(const summary *runs, size_t n, size_t i)
{
    double sum = 0, lo = INFINITY, hi = -INFINITY;
    for (size_t r = 0; r < n; r++) {
        double v = field_value(&runs[r], i);
        sum += v;
        lo = fmin(lo, v);
        hi = fmax(hi, v);
    }
    double mean = sum / (double)n, sq = 0;
    /* two passes: the spread of nearly equal runs would vanish in a one-pass sum of squares */
    for (size_t r = 0; r < n; r++) {
        double d = field_value(&runs[r], i) - mean;
        sq += d * d;
    }
    return (rep_stat){mean, n > 1 ? sqrt(sq / (double)(n - 1)) : 0, lo, hi};
}

void rep_aggregate(const summary *runs, size_t n, rep_stat *out)
{
    for (size_t i = 0; i < sumf_count(); i++) out[i] = describe_field(runs, n, i);
}

void rep_mean_summary(const rep_stat *st, summary *out)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < sumf_count(); i++) {
        const sumf *f = sumf_at(i);
        void *p = (char *)out + f->offset;
        if (f->type == SUMF_INT) *(int *)p = (int)lround(st[i].mean);
        else if (f->type == SUMF_I64) *(int64_t *)p = llround(st[i].mean);
        else *(double *)p = st[i].mean;
    }
}

void rep_write_runs_csv(FILE *f, const summary *runs, const uint64_t *seeds, size_t n)
{
    fputs("repeat,seed,", f);
    sumf_write_header(f, "");
    if (n) sumf_write_extra_header(f, &runs[0]);
    fputc('\n', f);
    for (size_t r = 0; r < n; r++) {
        fprintf(f, "%zu,%llu,", r + 1, (unsigned long long)seeds[r]);
        sumf_write_row(f, &runs[r]);
        sumf_write_extra_row(f, &runs[r], runs[0].num_percentiles);
        fputc('\n', f);
    }
}

void rep_write_stats_csv(FILE *f, const rep_stat *st, const summary *runs, size_t n)
{
    fputs("metric,mean,std,min,max\n", f);
    for (size_t i = 0; i < sumf_count(); i++)
        fprintf(f, "%s,%.10g,%.10g,%.10g,%.10g\n", sumf_at(i)->name, st[i].mean, st[i].std, st[i].min,
                st[i].max);
    /* the latencies at run.percentiles, as each run's summary.json names them */
    for (int k = 0; n > 0 && k < sumf_extra_count(&runs[0]); k++) {
        char name[64];
        sumf_extra_name(&runs[0], k, name, sizeof name);
        rep_stat one = describe_field(runs, n, sumf_count() + (size_t)k);
        fprintf(f, "%s,%.10g,%.10g,%.10g,%.10g\n", name, one.mean, one.std, one.min, one.max);
    }
}

void rep_print_table(FILE *f, const rep_stat *st, size_t n)
{
    static const char *const shown[] = {
        "completed", "request_throughput", "output_throughput", "total_token_throughput",
        "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms",
        "p99_tpot_ms", "mean_itl_ms", "p99_itl_ms", "mean_e2el_ms", "p99_e2el_ms",
        "mean_running", "min_free_blocks",
    };
    fprintf(f, "Over %zu runs (mean ± sample std [min, max]):\n", n);
    fprintf(f, "%-24s %14s   %10s %14s %14s\n", "metric", "mean", "std", "min", "max");
    for (size_t i = 0; i < sizeof shown / sizeof *shown; i++) {
        const rep_stat *s = &st[sumf_find(shown[i])];
        fprintf(f, "%-24s %14.3f ± %10.3f %14.3f %14.3f\n", shown[i], s->mean, s->std, s->min, s->max);
    }
}
