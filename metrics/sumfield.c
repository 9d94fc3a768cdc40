#include "metrics/sumfield.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

/* The CSV columns: every S row with csv = 1 and four statistics of every latency. */
#define SUMF_ROW_1(name, type) {#name, offsetof(summary, name), SUMF_##type},
#define SUMF_ROW_0(name, type)
#define S(name, type, csv, label, what) SUMF_ROW_##csv(name, type)
#define STAT(stat, name) {#stat "_" #name "_ms", offsetof(summary, name##_ms.stat), SUMF_DBL},
#define L(name, title, abbrev, what) STAT(mean, name) STAT(median, name) STAT(p90, name) STAT(p99, name)

static const sumf fields[] = {SUMMARY_FIELDS(S, L)};

#undef S
#undef L

size_t sumf_count(void) { return sizeof fields / sizeof *fields; }

const sumf *sumf_at(size_t i) { return i < sumf_count() ? &fields[i] : NULL; }

int sumf_find(const char *name)
{
    for (size_t i = 0; i < sumf_count(); i++)
        if (strcmp(fields[i].name, name) == 0) return (int)i;
    return -1;
}

double sumf_get(const sumf *f, const summary *s)
{
    const char *p = (const char *)s + f->offset;
    switch (f->type) {
    case SUMF_INT: return *(const int *)(const void *)p;
    case SUMF_I64: return (double)*(const int64_t *)(const void *)p;
    case SUMF_DBL: break;
    }
    return *(const double *)(const void *)p;
}

void sumf_format(double v, sumf_type type, char *buf, size_t len)
{
    if (!isfinite(v)) snprintf(buf, len, "%s", "");
    else if (type != SUMF_DBL) snprintf(buf, len, "%.0f", v);
    else snprintf(buf, len, "%.10g", v);
}

void sumf_write_header(FILE *f, const char *suffix)
{
    for (size_t i = 0; i < sumf_count(); i++) fprintf(f, "%s%s%s", i ? "," : "", fields[i].name, suffix);
}

void sumf_write_row(FILE *f, const summary *s)
{
    for (size_t i = 0; i < sumf_count(); i++) {
        char buf[64];
        sumf_format(sumf_get(&fields[i], s), fields[i].type, buf, sizeof buf);
        fprintf(f, "%s%s", i ? "," : "", buf);
    }
}

/* Each latency's stats in the summary, in SUMMARY_FIELDS' order, with its name. */
#define S(name, type, csv, label, what)
#define L(name, title, abbrev, what) {#name, offsetof(summary, name##_ms)},
static const struct { const char *name; size_t offset; } latencies[] = {SUMMARY_FIELDS(S, L)};
#undef S
#undef L
enum { NUM_LATENCIES = sizeof latencies / sizeof *latencies };

static const latency_stats *latency_of(const summary *s, int l)
{
    return (const latency_stats *)(const void *)((const char *)s + latencies[l].offset);
}

int sumf_extra_count(const summary *s) { return NUM_LATENCIES * s->num_percentiles; }

double sumf_extra_get(const summary *s, int k)
{
    return latency_of(s, k / s->num_percentiles)->extra[k % s->num_percentiles];
}

void sumf_extra_name(const summary *s, int k, char *buf, size_t len)
{
    char label[32];
    met_percentile_label(s->percentiles[k % s->num_percentiles], label, sizeof label);
    snprintf(buf, len, "p%s_%s_ms", label, latencies[k / s->num_percentiles].name);
}

void sumf_write_extra_header(FILE *f, const summary *s)
{
    for (int k = 0; k < sumf_extra_count(s); k++) {
        char name[64];
        sumf_extra_name(s, k, name, sizeof name);
        fprintf(f, ",%s", name);
    }
}

void sumf_write_extra_row(FILE *f, const summary *s, int n)
{
    for (int k = 0; k < NUM_LATENCIES * n; k++) {
        char buf[64] = "";
        if (s) sumf_format(sumf_extra_get(s, k), SUMF_DBL, buf, sizeof buf);
        fprintf(f, ",%s", buf);
    }
}

void sumf_mean_extras(const summary *runs, size_t nruns, summary *out)
{
    out->num_percentiles = runs[0].num_percentiles;
    memcpy(out->percentiles, runs[0].percentiles, sizeof out->percentiles);
    for (int k = 0; k < sumf_extra_count(out); k++) {
        double sum = 0;
        for (size_t r = 0; r < nruns; r++) sum += sumf_extra_get(&runs[r], k);
        latency_stats *o = (latency_stats *)(void *)((char *)out + latencies[k / out->num_percentiles].offset);
        o->extra[k % out->num_percentiles] = sum / (double)nruns;
    }
}
