/* Prometheus text exposition: histograms and the /metrics page, with vLLM's metric names so
 * that dashboards and scrapers made for vLLM read servesim's server unchanged. */
#ifndef SERVESIM_SERVE_PROM_H
#define SERVESIM_SERVE_PROM_H

#include <stdint.h>
#include <stdio.h>

enum { PROM_MAX_BUCKETS = 32 };

typedef struct prom_hist {
    const double *bounds;      /* upper bounds, ascending; +Inf is implied */
    int num_bounds;
    int64_t counts[PROM_MAX_BUCKETS];   /* per bucket, not cumulative */
    int64_t count;
    double sum;
} prom_hist;

/* vLLM's buckets for time to first token, inter-token latency, end-to-end latency (s). */
extern const double prom_ttft_bounds[], prom_itl_bounds[], prom_e2e_bounds[];
extern const int prom_ttft_n, prom_itl_n, prom_e2e_n;

void prom_hist_init(prom_hist *h, const double *bounds, int n);
void prom_observe(prom_hist *h, double v);
/* NAME's HELP, TYPE, cumulative _bucket lines (le="..."), _sum and _count, labelled with
 * model_name="MODEL". */
void prom_write_hist(FILE *f, const char *name, const char *help, const char *model, const prom_hist *h);
/* A gauge or a counter (TYPE "gauge" or "counter"); a counter's NAME ends in _total. */
void prom_write_value(FILE *f, const char *name, const char *type, const char *help, const char *model, double v);

#endif
