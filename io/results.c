/* Result files. Rows are formatted into a buffer by hand and written with one fwrite: the
 * simulator streams millions of steps, and integers are most of each row. */
#include "io/results.h"

#include "io/errmsg.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STEPS_HEADER                                                                       \
    "step_id,start_time,end_time,num_prefill_tokens,num_prefill_seqs,num_decode_seqs,"     \
    "num_outputs,num_batched_tokens,num_padding_tokens,chunked,num_free_blocks,"           \
    "num_prefix_cached_blocks,waiting,running,prefilling,prefix_hits,prefix_queries,"      \
    "kv_allocated_slots,kv_unused_slots,num_preempted,schedule_time,prepare_time,"         \
    "forward_time,sample_time,predicted_time,instance,num_kv_delayed,prefix_evictions,num_spec_seqs,"             \
    "num_draft_tokens,num_accepted_tokens,draft_time\n"

#define REQUESTS_HEADER                                                                    \
    "request_id,arrival_time,scheduled_prefill_time,first_token_time,finish_time,"         \
    "prompt_len,cached_prompt_len,output_len,num_preemptions,stop_reason,warmup,draft_tokens,"   \
    "accepted_tokens\n"


/* A CSV row under construction; every field is followed by ',' and the last one replaced
 * by '\n'. 32 bytes bound any int64 or "%.9f" time below 1e20 s. */
typedef struct row {
    char buf[1024];
    size_t len;
} row;

static void put_int(row *r, int64_t v)
{
    char tmp[24];
    size_t n = 0;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do
        tmp[n++] = (char)('0' + u % 10);
    while ((u /= 10) > 0);
    if (v < 0)
        tmp[n++] = '-';
    while (n > 0)
        r->buf[r->len++] = tmp[--n];
    r->buf[r->len++] = ',';
}

/* Seconds with nanosecond digits; a time that does not exist (NAN) is an empty field. */
static void put_time(row *r, double t)
{
    if (isfinite(t) && fabs(t) < 1e20)
        r->len += (size_t)snprintf(r->buf + r->len, sizeof r->buf - r->len, "%.9f", t);
    r->buf[r->len++] = ',';
}

static void put_str(row *r, const char *s)
{
    size_t n = strlen(s);
    memcpy(r->buf + r->len, s, n);
    r->len += n;
    r->buf[r->len++] = ',';
}

static void end_row(row *r, FILE *f)
{
    r->buf[r->len - 1] = '\n';
    fwrite(r->buf, 1, r->len, f);
}

/* Closes NAME, opened with od_fopen in D, reporting a write error on it as "PATH: reason". */
static int close_file(const res_dir *d, FILE *f, const char *name, char *err, size_t errlen)
{
    char path[sizeof d->od.tmp_path + 16];
    od_path(&d->od, name, path, sizeof path);
    return od_fclose(f, path, err, errlen);
}

static FILE *open_stream(res_dir *d, const char *name, const char *header, char *err, size_t errlen)
{
    FILE *f = od_fopen(&d->od, name, err, errlen);
    if (!f)
        return NULL;
    setvbuf(f, NULL, _IOFBF, 1 << 16);
    fputs(header, f);
    return f;
}

static void close_streams(res_dir *d)
{
    if (d->steps) fclose(d->steps);
    if (d->requests) fclose(d->requests);
    if (d->tokens) fclose(d->tokens);
    d->steps = d->requests = d->tokens = NULL;
}

int res_open_tokens(res_dir *d, char *err, size_t errlen)
{
    d->tokens = open_stream(d, "tokens.csv", "request_id,token_index,time\n", err, errlen);
    return d->tokens ? 0 : -1;
}

void res_write_token(res_dir *d, int64_t request_id, int index, double time)
{
    if (!d->tokens) return;
    row r = {.len = 0};
    put_int(&r, request_id);
    put_int(&r, index);
    put_time(&r, time);
    end_row(&r, d->tokens);
}

int res_open(res_dir *d, const char *dir, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    if (od_open(&d->od, dir, err, errlen) < 0) return -1;
    d->steps = open_stream(d, "steps.csv", STEPS_HEADER, err, errlen);
    d->requests = d->steps ? open_stream(d, "requests.csv", REQUESTS_HEADER, err, errlen) : NULL;
    if (!d->requests) {
        close_streams(d);
        od_abort(&d->od);
        return -1;
    }
    return 0;
}

void res_write_step(res_dir *d, const step_record *s)
{
    row r = {.len = 0};
    put_int(&r, s->step_id);
    put_time(&r, s->start_time);
    put_time(&r, s->end_time);
    put_int(&r, s->num_prefill_tokens);
    put_int(&r, s->num_prefill_seqs);
    put_int(&r, s->num_decode_seqs);
    put_int(&r, s->num_outputs);
    put_int(&r, s->num_batched_tokens);
    put_int(&r, s->num_padding_tokens);
    put_int(&r, s->chunked);
    put_int(&r, s->num_free_blocks);
    put_int(&r, s->num_prefix_cached_blocks);
    put_int(&r, s->waiting);
    put_int(&r, s->running);
    put_int(&r, s->prefilling);
    put_int(&r, s->prefix_hits);
    put_int(&r, s->prefix_queries);
    put_int(&r, s->kv_allocated_slots);
    put_int(&r, s->kv_unused_slots);
    put_int(&r, s->num_preempted);
    put_time(&r, s->schedule_time);
    put_time(&r, s->prepare_time);
    put_time(&r, s->forward_time);
    put_time(&r, s->sample_time);
    put_time(&r, s->predicted_time);
    put_int(&r, s->instance);
    put_int(&r, s->num_kv_delayed);
    put_int(&r, s->prefix_evictions);
    put_int(&r, s->num_spec_seqs);
    put_int(&r, s->num_draft_tokens);
    put_int(&r, s->num_accepted_tokens);
    put_time(&r, s->draft_time);
    end_row(&r, d->steps);
}

void res_write_request(res_dir *d, const req_record *q)
{
    row r = {.len = 0};
    put_int(&r, q->request_id);
    put_time(&r, q->arrival_time);
    put_time(&r, q->scheduled_prefill_time);
    put_time(&r, q->first_token_time);
    put_time(&r, q->finish_time);
    put_int(&r, q->prompt_len);
    put_int(&r, q->cached_prompt_len);
    put_int(&r, q->output_len);
    put_int(&r, q->num_preemptions);
    put_str(&r, stop_reason_name(q->stop));
    put_int(&r, q->warmup);
    put_int(&r, q->draft_tokens);
    put_int(&r, q->accepted_tokens);
    end_row(&r, d->requests);
}

static int json_latency(json_t *obj, const char *name, const latency_stats *st, const summary *s)
{
    const struct { const char *stat; double v; } fields[] = {
        {"mean", st->mean}, {"median", st->median}, {"std", st->std}, {"p50", st->p50},
        {"p90", st->p90},   {"p99", st->p99},       {"min", st->min}, {"max", st->max},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
        char key[32];
        snprintf(key, sizeof key, "%s_%s_ms", fields[i].stat, name);
        bad |= json_put(obj, key, json_num(fields[i].v));
    }
    for (int i = 0; i < s->num_percentiles; i++) {
        char q[32], key[64];
        met_percentile_label(s->percentiles[i], q, sizeof q);
        snprintf(key, sizeof key, "p%s_%s_ms", q, name);
        bad |= json_put(obj, key, json_num(st->extra[i]));
    }
    return bad;
}

#define json_INT(v) json_integer(v)
#define json_I64(v) json_integer(v)
#define json_DBL(v) json_num(v)

json_t *res_summary_json(const summary *s)
{
    json_t *obj = json_object();
    int bad = !obj;
#define S(name, type, csv, label, what) bad |= !obj || json_put(obj, #name, json_##type(s->name));
#define L(name, title, abbrev, what) bad |= !obj || json_latency(obj, #name, &s->name##_ms, s);
    SUMMARY_FIELDS(S, L)
#undef S
#undef L
    if (bad) {
        json_decref(obj);
        return NULL;
    }
    return obj;
}

int res_write_summary(res_dir *d, const summary *s, const json_t *extra, char *err, size_t errlen)
{
    json_t *doc = res_summary_json(s);
    if (!doc || (extra && json_object_update(doc, (json_t *)extra) < 0)) {
        json_decref(doc);
        return errmsg(err, errlen, "%s/summary.json: out of memory", d->od.tmp_path);
    }
    FILE *f = od_fopen(&d->od, "summary.json", err, errlen);
    if (f) json_write(f, doc);
    json_decref(doc);
    return f ? close_file(d, f, "summary.json", err, errlen) : -1;
}

/* Puts the finished directory in place. An older DIR is first renamed aside so that DIR
 * never holds a mix of two runs, and is deleted only once the new one is in place. */
int res_commit(res_dir *d, char *err, size_t errlen)
{
    FILE *files[3] = {d->steps, d->requests, d->tokens};
    const char *names[3] = {"steps.csv", "requests.csv", "tokens.csv"};
    d->steps = d->requests = d->tokens = NULL;
    int bad = 0;
    for (int i = 0; i < 3; i++) {
        if (!files[i]) continue;
        if (bad) fclose(files[i]);   /* the first error is the one reported */
        else bad = close_file(d, files[i], names[i], err, errlen);
    }
    return bad ? -1 : od_commit(&d->od, err, errlen);
}

void res_abort(res_dir *d)
{
    close_streams(d);
    od_abort(&d->od);
}

/* TITLE centred in a 50-column rule of FILL, the extra fill on the right (Python's "^"). */
static void print_rule(FILE *f, char fill, const char *title)
{
    int pad = 50 - (int)strlen(title);
    for (int i = 0; i < pad / 2; i++)
        fputc(fill, f);
    fputs(title, f);
    for (int i = pad / 2; i < pad; i++)
        fputc(fill, f);
    fputc('\n', f);
}

/* Mean, median, P90, P99, the other percentiles asked for, and for the inter-token
 * latency the longest stall. */
static void print_int(FILE *f, const char *label, int64_t v)
{
    if (*label) fprintf(f, "%-40s %" PRId64 "\n", label, v);
}

/* "-" for a figure with no sample (a latency where no request finished) */
static void print_num(FILE *f, const char *label, double v)
{
    if (!*label) return;
    if (isnan(v)) fprintf(f, "%-40s -\n", label);
    else fprintf(f, "%-40s %.2f\n", label, v);
}

static void print_latency(FILE *f, const char *title, const char *name, const latency_stats *st, const summary *s)
{
    const struct { const char *stat; double v; } rows[] = {
        {"Mean", st->mean}, {"Median", st->median}, {"P90", st->p90}, {"P99", st->p99},
    };
    print_rule(f, '-', title);
    char label[64];
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        snprintf(label, sizeof label, "%s %s (ms):", rows[i].stat, name);
        print_num(f, label, rows[i].v);
    }
    for (int i = 0; i < s->num_percentiles; i++) {
        double q = s->percentiles[i];
        if (q == 50 || q == 90 || q == 99) continue; /* printed above */
        char ql[32];
        met_percentile_label(q, ql, sizeof ql);
        snprintf(label, sizeof label, "P%s %s (ms):", ql, name);
        print_num(f, label, st->extra[i]);
    }
    if (strcmp(name, "ITL") == 0) {
        snprintf(label, sizeof label, "Max %s (ms):", name);
        print_num(f, label, st->max);
    }
}

#define print_INT print_int
#define print_I64 print_int
#define print_DBL print_num

void res_print_summary(FILE *f, const summary *s)
{
    print_rule(f, '=', " Serving Benchmark Result ");
#define S(name, type, csv, label, what) print_##type(f, label, s->name);
#define L(name, title, abbrev, what) print_latency(f, title, abbrev, &s->name##_ms, s);
    SUMMARY_FIELDS(S, L)
#undef S
#undef L
    if (s->spec_draft_tokens > 0) { /* as vLLM's server logs its SpecDecoding metrics */
        print_rule(f, '-', "Speculative Decoding");
        print_num(f, "Acceptance rate (%):", 100 * s->spec_acceptance_rate);
        print_num(f, "Mean acceptance length:", s->spec_mean_accepted_length);
        print_int(f, "Drafted tokens:", s->spec_draft_tokens);
        print_int(f, "Accepted tokens:", s->spec_accepted_tokens);
        print_num(f, "Drafting share of step time (%):", 100 * s->spec_draft_time_share);
        print_num(f, "Mean draft time per step (ms):", s->spec_mean_draft_ms);
        print_num(f, "Mean verify time per step (ms):", s->spec_mean_verify_ms);
    }
    print_rule(f, '=', "");
}
