#include "metrics/sumfield.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#define F(name, type) {#name, offsetof(summary, name), type}
#define L(stat, metric) {#stat "_" #metric "_ms", offsetof(summary, metric##_ms.stat), SUMF_DOUBLE}
#define LAT(metric) L(mean, metric), L(median, metric), L(p90, metric), L(p99, metric)

static const sumf fields[] = {
    F(completed, SUMF_INT),
    F(rejected, SUMF_INT),
    F(duration, SUMF_DOUBLE),
    F(total_input_tokens, SUMF_I64),
    F(total_output_tokens, SUMF_I64),
    F(request_throughput, SUMF_DOUBLE),
    F(output_throughput, SUMF_DOUBLE),
    F(total_token_throughput, SUMF_DOUBLE),
    F(request_goodput, SUMF_DOUBLE),
    LAT(ttft),
    LAT(tpot),
    LAT(itl),
    LAT(e2el),
    F(num_steps, SUMF_I64),
    F(mean_waiting, SUMF_DOUBLE),
    F(mean_running, SUMF_DOUBLE),
    F(mean_free_blocks, SUMF_DOUBLE),
    F(min_free_blocks, SUMF_INT),
    F(mean_batched_tokens, SUMF_DOUBLE),
    F(mean_decode_seqs, SUMF_DOUBLE),
    F(mean_prefill_tokens, SUMF_DOUBLE),
    F(mean_step_time_ms, SUMF_DOUBLE),
    F(prefix_hit_rate, SUMF_DOUBLE),
    F(kv_fragmentation, SUMF_DOUBLE),
    F(peak_running, SUMF_INT),
    F(num_preemptions, SUMF_I64),
    F(total_prefill_tokens, SUMF_I64),
    F(total_padding_tokens, SUMF_I64),
};

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
    case SUMF_DOUBLE: break;
    }
    return *(const double *)(const void *)p;
}

void sumf_format(double v, sumf_type type, char *buf, size_t len)
{
    if (!isfinite(v)) snprintf(buf, len, "%s", "");
    else if (type != SUMF_DOUBLE) snprintf(buf, len, "%.0f", v);
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
