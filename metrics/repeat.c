#include "metrics/repeat.h"

#include <math.h>
#include <string.h>

#include "metrics/sumfield.h"

static void aggregate_field(const sumf *f, const summary *runs, size_t n, rep_stat *out)
{
    double sum = 0, lo = INFINITY, hi = -INFINITY;
    for (size_t r = 0; r < n; r++) {
        double v = sumf_get(f, &runs[r]);
        sum += v;
        lo = fmin(lo, v);
        hi = fmax(hi, v);
    }
    double mean = sum / (double)n, sq = 0;
    /* two passes: the spread of nearly equal runs would vanish in a one-pass sum of squares */
    for (size_t r = 0; r < n; r++) {
        double d = sumf_get(f, &runs[r]) - mean;
        sq += d * d;
    }
    *out = (rep_stat){mean, n > 1 ? sqrt(sq / (double)(n - 1)) : 0, lo, hi};
}

void rep_aggregate(const summary *runs, size_t n, rep_stat *out)
{
    for (size_t i = 0; i < sumf_count(); i++) aggregate_field(sumf_at(i), runs, n, &out[i]);
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
    fputc('\n', f);
    for (size_t r = 0; r < n; r++) {
        fprintf(f, "%zu,%llu,", r + 1, (unsigned long long)seeds[r]);
        sumf_write_row(f, &runs[r]);
        fputc('\n', f);
    }
}

void rep_write_stats_csv(FILE *f, const rep_stat *st)
{
    fputs("metric,mean,std,min,max\n", f);
    for (size_t i = 0; i < sumf_count(); i++)
        fprintf(f, "%s,%.10g,%.10g,%.10g,%.10g\n", sumf_at(i)->name, st[i].mean, st[i].std, st[i].min,
                st[i].max);
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
