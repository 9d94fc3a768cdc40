/* The summary's CSV columns (SUMMARY_FIELDS in metrics.h) as a table of named fields, so that
 * sweeps, repeats, SLOs and reports can treat every metric alike. Names are summary.json's keys. */
#ifndef SERVESIM_METRICS_SUMFIELD_H
#define SERVESIM_METRICS_SUMFIELD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include "metrics/metrics.h"

typedef enum sumf_type { SUMF_INT, SUMF_I64, SUMF_DBL } sumf_type;

typedef struct sumf {
    const char *name;
    size_t offset;
    sumf_type type;
} sumf;

size_t sumf_count(void);
const sumf *sumf_at(size_t i);
/* The field's index, or -1. */
int sumf_find(const char *name);
double sumf_get(const sumf *f, const summary *s);
/* Integers as integers, doubles with 10 significant digits (as summary.json writes them). */
void sumf_format(double v, sumf_type type, char *buf, size_t len);
/* "completed,rejected,..." with SUFFIX after each name (e.g. "_std"); no line end. */
void sumf_write_header(FILE *f, const char *suffix);
/* Every field of S, comma-separated; no line end. */
void sumf_write_row(FILE *f, const summary *s);

/* The latencies at run.percentiles (summary.percentiles, vLLM's --metric-percentiles) beyond
 * the fixed columns: every latency at each percentile, K from 0 to sumf_extra_count, named as
 * summary.json names them ("p99.9_ttft_ms"). Every row of one CSV has the same ones. */
int sumf_extra_count(const summary *s);
double sumf_extra_get(const summary *s, int k);
void sumf_extra_name(const summary *s, int k, char *buf, size_t len);
/* ",pQ_NAME_ms" for each of S's; no line end. */
void sumf_write_extra_header(FILE *f, const summary *s);
/* Their values in S, each led by a comma; blank when S is NULL (a point with no finished
 * request), N percentiles' worth. */
void sumf_write_extra_row(FILE *f, const summary *s, int n);
/* The mean of each over RUNS[0..NRUNS) (a point's repeats, NRUNS > 0) into OUT, with RUNS[0]'s
 * percentiles. */
void sumf_mean_extras(const summary *runs, size_t nruns, summary *out);

#endif
