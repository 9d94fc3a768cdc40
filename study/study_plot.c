/* Plots of a sweep, drawn by gnuplot from sweep.csv. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/plot.h"
#include "study/study.h"

/* True when every value of the axis reads as a number; *RATIO is max/min for a log scale. */
static bool numeric_axis(const sweep_axis *ax, double *ratio)
{
    double lo = INFINITY, hi = -INFINITY;
    for (int v = 0; v < ax->n; v++) {
        char *end;
        double x = strtod(ax->values[v], &end);
        if (end == ax->values[v] || *end) return false;
        lo = fmin(lo, x);
        hi = fmax(hi, x);
    }
    *ratio = lo > 0 ? hi / lo : 0;
    return ax->n > 1;
}

/* The title of the series through point START: its listed label and other axes' values. */
static void series_title(const sweep_plan *p, int start, char *buf, size_t len)
{
    int grid = sweep_grid_size(p), rem = start % grid, li = start / grid;
    size_t used = 0;
    buf[0] = 0;
    if (p->nlisted && used < len) used += (size_t)snprintf(buf + used, len - used, "%s", p->listed[li].label);
    for (int a = p->naxes - 1, stride = 1; a >= 1; stride *= p->axes[a].n, a--) {
        const char *key = strchr(sweep_key_name(p->axes[a].key), '.') + 1;
        int v = rem / stride % p->axes[a].n;
        if (used < len) used += (size_t)snprintf(buf + used, len - used, "%s%s=%s", used ? " " : "", key, p->axes[a].values[v]);
    }
}

/* plot for each series (rows START, START+STRIDE, ... of its block) of column Y against X, and
 * the scenario's objective on the metric (SLO_KEY, its LIMIT) as a line when it sets one. */
static void plot_series(FILE *f, const sweep_plan *p, const char *x, const char *const *ys, const char *const *names,
                        int ny, const char *slo_key, double slo)
{
    int grid = sweep_grid_size(p), stride = grid / p->axes[0].n, blocks = p->nlisted ? p->nlisted : 1;
    fputs("plot ", f);
    for (int b = 0, first = 1; b < blocks; b++)
        for (int j = 0; j < stride; j++)
            for (int y = 0; y < ny; y++, first = 0) {
                char title[300], full[400];
                series_title(p, b * grid + j, title, sizeof title);
                snprintf(full, sizeof full, "%s%s%s", names[y], blocks * stride > 1 ? " " : "",
                         blocks * stride > 1 ? title : "");
                fprintf(f, "%s'sweep.csv' every %d::%d::%d using '%s':'%s' title ", first ? "" : ", \\\n    ", stride,
                        b * grid + j, b * grid + grid - 1, x, ys[y]);
                plot_quote(f, full);
                fprintf(f, " dashtype %d", y % 2 ? 2 : 1);
            }
    if (slo_key) plot_slo_line(f, slo_key, slo);
    fputc('\n', f);
}

static int lines_plots(const sweep_plan *p, const char *term, double ratio, const char *dir, char *err, size_t errlen)
{
    const char *x = sweep_key_name(p->axes[0].key);
    plot pl;
    FILE *f = plot_begin(&pl, term, "latency.png", "latency against the first varied key", 1200, 500);
    if (!f) return -1;
    fprintf(f, "set multiplot layout 1,2\nset xlabel '%s'\n%s", x, ratio >= 20 ? "set logscale x\n" : "");
    static const char *const ttft[] = {"median_ttft_ms", "p99_ttft_ms"}, *const tpot[] = {"median_tpot_ms", "p99_tpot_ms"};
    static const char *const names[] = {"P50", "P99"};
    double slo_ttft = p->base.v[K_slo_ttft_ms].d, slo_tpot = p->base.v[K_slo_tpot_ms].d;
    fputs("set title 'TTFT (ms)'\n", f);
    plot_log_y_if_wide(f, "sweep.csv", ttft[0], ttft[1], slo_ttft, false);
    plot_series(f, p, x, ttft, names, 2, "slo.ttft_ms", slo_ttft);
    fputs("set title 'TPOT (ms)'\n", f);
    plot_log_y_if_wide(f, "sweep.csv", tpot[0], tpot[1], slo_tpot, false);
    plot_series(f, p, x, tpot, names, 2, "slo.tpot_ms", slo_tpot);
    fputs("unset multiplot\n", f);
    if (plot_finish(&pl, dir, err, errlen) < 0) return -1;
    if (!(f = plot_begin(&pl, term, "throughput.png", "throughput against the first varied key", 1200, 500)))
        return -1;
    fprintf(f, "set multiplot layout 1,2\nset xlabel '%s'\n%s", x, ratio >= 20 ? "set logscale x\n" : "");
    static const char *const req[] = {"request_throughput"}, *const tok[] = {"output_throughput"};
    static const char *const none[] = {""};
    fputs("set title 'requests/s'\n", f);
    plot_series(f, p, x, req, none, 1, NULL, 0);
    fputs("set title 'output tokens/s'\n", f);
    plot_series(f, p, x, tok, none, 1, NULL, 0);
    fputs("unset multiplot\n", f);
    return plot_finish(&pl, dir, err, errlen);
}

static int bar_plots(const sweep_plan *p, const char *term, const char *dir, char *err, size_t errlen)
{
    plot pl;
    FILE *f = plot_begin(&pl, term, "bars.png", "every point", 1500, 500);
    if (!f) return -1;
    double slo_ttft = p->base.v[K_slo_ttft_ms].d, slo_tpot = p->base.v[K_slo_tpot_ms].d;
    /* the key only where an objective is drawn: the bars are named on the x axis */
    fputs("set multiplot layout 1,3\nset style data histograms\nset style fill solid 0.7 border -1\n"
          "set boxwidth 0.8\nset xtics rotate by -40 left\nset key off\nset yrange [0:*]\n"
          "set title 'output tokens/s'\nplot 'sweep.csv' using 'output_throughput':xtic(2)\n", f);
    /* latency bars spanning decades (a saturated point beside idle ones) on a log scale */
    fprintf(f, "set title 'P99 TTFT (ms)'\n%s", slo_ttft > 0 ? "set key inside top left\n" : "");
    plot_log_y_if_wide(f, "sweep.csv", "p99_ttft_ms", "p99_ttft_ms", slo_ttft, true);
    fputs("plot 'sweep.csv' using 'p99_ttft_ms':xtic(2) notitle", f);
    plot_slo_line(f, "slo.ttft_ms", slo_ttft);
    fprintf(f, "\nset key off\nset title 'P99 TPOT (ms)'\n%s", slo_tpot > 0 ? "set key inside top left\n" : "");
    plot_log_y_if_wide(f, "sweep.csv", "p99_tpot_ms", "p99_tpot_ms", slo_tpot, true);
    fputs("plot 'sweep.csv' using 'p99_tpot_ms':xtic(2) notitle", f);
    plot_slo_line(f, "slo.tpot_ms", slo_tpot);
    fputs("\nunset multiplot\n", f);
    return plot_finish(&pl, dir, err, errlen);
}

int study_sweep_plots(const sweep_plan *p, const char *dir, char *err, size_t errlen)
{
    char term[32];
    if (!plot_available(term, sizeof term)) {
        printf("note: gnuplot not found, no plots\n");
        return 0;
    }
    double ratio;
    if (p->naxes > 0 && numeric_axis(&p->axes[0], &ratio)) return lines_plots(p, term, ratio, dir, err, errlen);
    return bar_plots(p, term, dir, err, errlen);
}
