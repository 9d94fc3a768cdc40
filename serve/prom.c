/* Prometheus text format 0.0.4: one HELP and TYPE line per metric, then its samples. */
#include "serve/prom.h"

#include <math.h>

const double prom_ttft_bounds[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
                                   1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
const double prom_itl_bounds[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
                                  0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
const double prom_e2e_bounds[] = {0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0,
                                  30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
const int prom_ttft_n = sizeof prom_ttft_bounds / sizeof *prom_ttft_bounds;
const int prom_itl_n = sizeof prom_itl_bounds / sizeof *prom_itl_bounds;
const int prom_e2e_n = sizeof prom_e2e_bounds / sizeof *prom_e2e_bounds;

void prom_hist_init(prom_hist *h, const double *bounds, int n)
{
    *h = (prom_hist){.bounds = bounds, .num_bounds = n < PROM_MAX_BUCKETS - 1 ? n : PROM_MAX_BUCKETS - 1};
}

void prom_observe(prom_hist *h, double v)
{
    int i = 0;
    while (i < h->num_bounds && v > h->bounds[i]) i++;   /* le: a value on a bound counts in it */
    h->counts[i]++;
    h->count++;
    h->sum += v;
}

void prom_write_hist(FILE *f, const char *name, const char *help, const char *model, const prom_hist *h)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    int64_t cum = 0;
    for (int i = 0; i < h->num_bounds; i++) {
        cum += h->counts[i];
        fprintf(f, "%s_bucket{le=\"%g\",model_name=\"%s\"} %lld\n", name, h->bounds[i], model, (long long)cum);
    }
    fprintf(f, "%s_bucket{le=\"+Inf\",model_name=\"%s\"} %lld\n", name, model, (long long)h->count);
    fprintf(f, "%s_sum{model_name=\"%s\"} %.9g\n", name, model, h->sum);
    fprintf(f, "%s_count{model_name=\"%s\"} %lld\n", name, model, (long long)h->count);
}

void prom_write_value(FILE *f, const char *name, const char *type, const char *help, const char *model, double v)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n%s{model_name=\"%s\"} %.17g\n", name, help, name, type, name, model, v);
}
