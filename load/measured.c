/* Measured runs read back. A servesim directory gives every time; vLLM's JSON gives lengths,
 * TTFTs and per-request ITL lists, and its end is taken as TTFT plus the sum of the gaps
 * (vLLM measures its latency as the time of the last chunk, which is that sum). */
#include "load/measured.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <jansson.h>

#include "io/csv.h"
#include "io/decimal.h"
#include "io/errmsg.h"


void measured_free(measured_run *m)
{
    free(m->reqs);
    free(m->itl);
    free(m->itl_request_id);
    memset(m, 0, sizeof *m);
}

static int push_itl(measured_run *m, size_t *cap, double gap, int64_t request_id)
{
    if (m->num_itl == *cap) {
        size_t c = *cap ? 2 * *cap : 1024;
        double *p = realloc(m->itl, c * sizeof *p);
        if (p) m->itl = p;
        int64_t *q = p ? realloc(m->itl_request_id, c * sizeof *q) : NULL;
        if (!q) return -1;
        m->itl_request_id = q;
        *cap = c;
    }
    m->itl_request_id[m->num_itl] = request_id;
    m->itl[m->num_itl++] = gap;
    return 0;
}

static int by_arrival(const void *a, const void *b)
{
    const req_record *x = a, *y = b;
    if (x->arrival_time != y->arrival_time) return x->arrival_time < y->arrival_time ? -1 : 1;
    return (x->request_id > y->request_id) - (x->request_id < y->request_id);
}

/* Times from the first send; requests in send order. */
static void normalize(measured_run *m)
{
    if (m->n == 0 || !m->have_arrivals) return;
    qsort(m->reqs, m->n, sizeof *m->reqs, by_arrival);
    double t0 = m->reqs[0].arrival_time;
    for (size_t i = 0; i < m->n; i++) {
        m->reqs[i].arrival_time -= t0;
        m->reqs[i].first_token_time -= t0;
        m->reqs[i].finish_time -= t0;
    }
}

/* The longest prompt or output a record may give (2^24 tokens: past any model's context), the
 * longest time a vLLM result's TTFT or gap may (a day), and the latest send time. */
#define MEASURED_MAX_LEN (1 << 24)
#define MEASURED_MAX_S 86400.0
#define MEASURED_MAX_CLOCK_S 1e12   /* past any epoch clock's reading, seconds */

static double number(const char *s, bool *ok)
{
    if (!*s) return NAN;   /* an empty field: a time that does not exist */
    char *end;
    errno = 0;
    double v = decimal_strtod(s, &end);
    if (*end || errno) *ok = false;
    return v;
}

/* An integer field in [LO, HI]: empty, fractional or out of range clears OK (a NaN or a huge
 * value cast to an integer would be undefined behaviour). */
static int64_t integer(const char *s, int64_t lo, int64_t hi, bool *ok)
{
    double v = number(s, ok);
    if (!(v >= (double)lo && v <= (double)hi) || v != floor(v)) {
        *ok = false;
        return 0;
    }
    return (int64_t)v;
}

static stop_reason parse_stop(const char *s)
{
    for (int r = STOP_NONE; r <= STOP_ERROR; r++)
        if (strcmp(s, stop_reason_name((stop_reason)r)) == 0) return (stop_reason)r;
    return STOP_NONE;
}

/* A record's times tell one story: sent, then its first token, then its end, each a clock's
 * reading. Times that contradicted each other were taken (a first token before the send gave
 * a negative TTFT, an end of 1e300 s an e2el past any clock; bad-input campaign). A finished
 * request (length) has both times and a token; a failed or rejected one may lack them. */
static int check_record(const req_record *q, const char *path, long line, char *err, size_t errlen)
{
    const struct { const char *name; double v; } t[] = {
        {"arrival_time", q->arrival_time}, {"first_token_time", q->first_token_time}, {"finish_time", q->finish_time}};
    for (int i = 0; i < 3; i++)
        if (!isnan(t[i].v) && !(t[i].v >= 0 && t[i].v <= MEASURED_MAX_CLOCK_S))
            return errmsg(err, errlen, "%s:%ld: %s %g is not a clock reading in [0, %g] s", path, line, t[i].name, t[i].v,
                          MEASURED_MAX_CLOCK_S);
    if (q->stop == STOP_LENGTH && (isnan(q->first_token_time) || isnan(q->finish_time)))
        return errmsg(err, errlen, "%s:%ld: a finished request (stop_reason length) needs first_token_time and finish_time",
                      path, line);
    if (q->stop == STOP_LENGTH && q->output_len < 1)
        return errmsg(err, errlen, "%s:%ld: a finished request (stop_reason length) with output_len 0", path, line);
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++)
            if (t[j].v < t[i].v)   /* false where either is NaN */
                return errmsg(err, errlen, "%s:%ld: %s %g is before %s %g", path, line, t[j].name, t[j].v, t[i].name, t[i].v);
    return 0;
}

/* A request's id and its index in measured_run.reqs, sorted by id to find a token's request. */
typedef struct id_index {
    int64_t id;
    size_t index;
} id_index;

static int by_id(const void *a, const void *b)
{
    int64_t x = ((const id_index *)a)->id, y = ((const id_index *)b)->id;
    return (x > y) - (x < y);
}

/* Each request once: a request_id on two rows had the token gaps of both given to one, and
 * the two compared as one request's. */
static int check_unique_ids(const measured_run *m, const char *path, char *err, size_t errlen)
{
    id_index *sorted = malloc(m->n * sizeof *sorted);
    if (!sorted) return errmsg(err, errlen, "%s: out of memory", path);
    for (size_t i = 0; i < m->n; i++) sorted[i] = (id_index){m->reqs[i].request_id, i};
    qsort(sorted, m->n, sizeof *sorted, by_id);
    int rc = 0;
    for (size_t i = 1; rc == 0 && i < m->n; i++) {
        if (sorted[i].id != sorted[i - 1].id) continue;
        size_t a = sorted[i - 1].index < sorted[i].index ? sorted[i - 1].index : sorted[i].index;
        size_t b = sorted[i - 1].index < sorted[i].index ? sorted[i].index : sorted[i - 1].index;
        rc = errmsg(err, errlen, "%s: request_id %lld is given twice, on records %zu and %zu (counted after the "
                    "header): a request has one record", path, (long long)sorted[i].id, a + 1, b + 1);
    }
    free(sorted);
    return rc;
}

static int read_requests(const char *path, measured_run *m, char *err, size_t errlen)
{
    csv_reader r;
    if (csv_open(&r, path, 0, err, errlen) < 0) return -1;
    static const char *const cols[] = {"request_id", "arrival_time", "first_token_time", "finish_time",
                                       "prompt_len", "output_len", "stop_reason", "warmup"};
    int idx[8], draft_col = -1, accepted_col = -1;
    int rc = csv_next(&r, err, errlen);
    if (rc == 0) rc = errmsg(err, errlen, "%s: empty, expected a requests.csv header", path);
    for (int k = 0; rc == 1 && k < 8; k++)
        if ((idx[k] = csv_column(&r, cols[k], err, errlen)) < 0)
            rc = idx[k] == -1 ? errmsg(err, errlen, "%s:%ld: no column %s", path, r.lineno, cols[k]) : -1;
    if (rc == 1) { /* an engine's speculation, when it speculated: optional */
        draft_col = csv_column(&r, "draft_tokens", err, errlen);
        accepted_col = csv_column(&r, "accepted_tokens", err, errlen);
        if (draft_col == -2 || accepted_col == -2) rc = -1;
        else if ((draft_col < 0) != (accepted_col < 0))
            rc = errmsg(err, errlen, "%s:%ld: draft_tokens and accepted_tokens come together", path, r.lineno);
    }
    size_t cap = 0;
    while (rc == 1 && (rc = csv_next(&r, err, errlen)) == 1) {
        int need = draft_col > accepted_col ? draft_col : accepted_col;
        for (int k = 0; k < 8; k++) need = idx[k] > need ? idx[k] : need;
        if (r.nfields <= need) {
            rc = errmsg(err, errlen, "%s:%ld: %d fields, expected at least %d", path, r.lineno, r.nfields, need + 1);
            break;
        }
        bool ok = true;
        req_record q = {
            .request_id = integer(r.field[idx[0]], 0, INT64_C(1) << 53, &ok), .arrival_time = number(r.field[idx[1]], &ok),
            .scheduled_prefill_time = NAN, .first_token_time = number(r.field[idx[2]], &ok),
            .finish_time = number(r.field[idx[3]], &ok), .prompt_len = (int)integer(r.field[idx[4]], 1, MEASURED_MAX_LEN, &ok),
            .output_len = (int)integer(r.field[idx[5]], 0, MEASURED_MAX_LEN, &ok), .stop = parse_stop(r.field[idx[6]]),
            .warmup = strcmp(r.field[idx[7]], "1") == 0,
        };
        if (draft_col >= 0) {
            q.draft_tokens = (int)integer(r.field[draft_col], 0, MEASURED_MAX_LEN, &ok);
            q.accepted_tokens = (int)integer(r.field[accepted_col], 0, MEASURED_MAX_LEN, &ok);
            ok = ok && q.accepted_tokens <= q.draft_tokens;
        }
        if (!ok || isnan(q.arrival_time) || q.prompt_len < 1 || q.output_len < 0 || q.stop == STOP_NONE) {
            rc = errmsg(err, errlen, "%s:%ld: not a request record (a number or the stop reason is wrong)", path, r.lineno);
            break;
        }
        if (check_record(&q, path, r.lineno, err, errlen) < 0) {
            rc = -1;
            break;
        }
        if (m->n == cap) {
            cap = cap ? 2 * cap : 256;
            req_record *p = realloc(m->reqs, cap * sizeof *p);
            if (!p) {
                rc = errmsg(err, errlen, "%s: out of memory", path);
                break;
            }
            m->reqs = p;
        }
        m->reqs[m->n++] = q;
    }
    csv_close(&r);
    if (rc == 0 && m->n == 0) rc = errmsg(err, errlen, "%s: no requests", path);
    if (rc == 0) rc = check_unique_ids(m, path, err, errlen);
    return rc < 0 ? -1 : 0;
}

/* tokens.csv (request_id, token_index, time): the gaps of finished measured requests. A
 * request's rows are in time order; requests' rows may interleave (the engine and the
 * simulator write a step's tokens together, the load client a request's at its end). */
static int read_tokens(const char *path, measured_run *m, char *err, size_t errlen)
{
    csv_reader r;
    if (csv_open(&r, path, 0, err, errlen) < 0) return -1;
    int rc = csv_next(&r, err, errlen), id_col = -1, time_col = -1;
    if (rc == 1) {
        id_col = csv_column(&r, "request_id", err, errlen);
        time_col = id_col == -2 ? -2 : csv_column(&r, "time", err, errlen);
        if (id_col == -2 || time_col == -2) rc = -1;
        else if (id_col < 0 || time_col < 0) rc = errmsg(err, errlen, "%s:1: expected columns request_id and time", path);
    }
    /* records by id, to know which requests count */
    id_index *sorted = malloc((m->n ? m->n : 1) * sizeof *sorted);
    double *last = malloc((m->n ? m->n : 1) * sizeof *last);   /* by request index: its previous token */
    if (!sorted || !last) rc = errmsg(err, errlen, "out of memory");
    else {
        for (size_t i = 0; i < m->n; i++) {
            sorted[i] = (id_index){m->reqs[i].request_id, i};
            last[i] = NAN;
        }
        qsort(sorted, m->n, sizeof *sorted, by_id);
    }
    size_t cap = 0;
    while (rc == 1 && (rc = csv_next(&r, err, errlen)) == 1) {
        bool ok = true;
        if (r.nfields <= (id_col > time_col ? id_col : time_col)) {
            rc = errmsg(err, errlen, "%s:%ld: too few fields", path, r.lineno);
            break;
        }
        int64_t id = integer(r.field[id_col], 0, INT64_C(1) << 53, &ok);
        double t = number(r.field[time_col], &ok);
        if (!ok || isnan(t)) {
            rc = errmsg(err, errlen, "%s:%ld: not a token record", path, r.lineno);
            break;
        }
        id_index key = {.id = id};
        const id_index *found = bsearch(&key, sorted, m->n, sizeof *sorted, by_id);
        if (!found) continue;
        size_t k = found->index;
        if (m->reqs[k].stop != STOP_LENGTH || m->reqs[k].warmup) continue;
        if (!isnan(last[k]) && push_itl(m, &cap, t - last[k], id) < 0) {
            rc = errmsg(err, errlen, "out of memory");
            break;
        }
        last[k] = t;
    }
    free(sorted);
    free(last);
    csv_close(&r);
    m->have_itl = rc == 0;
    return rc < 0 ? -1 : 0;
}

static int read_dir(const char *dir, measured_run *m, char *err, size_t errlen)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/requests.csv", dir);
    if (read_requests(path, m, err, errlen) < 0) return -1;
    snprintf(path, sizeof path, "%s/tokens.csv", dir);
    struct stat st;
    if (stat(path, &st) == 0 && read_tokens(path, m, err, errlen) < 0) return -1;
    m->have_arrivals = true;
    snprintf(m->kind, sizeof m->kind, "servesim");
    return 0;
}

static json_t *array_of(json_t *doc, const char *key, size_t n, const char *path, char *err, size_t errlen)
{
    json_t *a = json_object_get(doc, key);
    if (!json_is_array(a) || json_array_size(a) != n) {
        errmsg(err, errlen, "%s: \"%s\" must be a list of %zu entries (save the result with --save-detailed)", path, key, n);
        return NULL;
    }
    return a;
}

static int read_vllm(const char *path, measured_run *m, char *err, size_t errlen)
{
    json_error_t je;
    json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!doc) return errmsg(err, errlen, "%s:%d: %s", path, je.line, je.text);
    json_t *in = json_object_get(doc, "input_lens");
    size_t n = json_is_array(in) ? json_array_size(in) : 0;
    json_t *out = NULL, *ttfts = NULL, *itls = NULL, *errs = NULL, *starts = json_object_get(doc, "start_times");
    int rc = 0;
    if (n == 0) rc = errmsg(err, errlen, "%s: no \"input_lens\" list: not a `vllm bench serve --save-result --save-detailed` file", path);
    else if (!(out = array_of(doc, "output_lens", n, path, err, errlen)) || !(ttfts = array_of(doc, "ttfts", n, path, err, errlen)) ||
             !(itls = array_of(doc, "itls", n, path, err, errlen)) || !(errs = array_of(doc, "errors", n, path, err, errlen)))
        rc = -1;
    else if (starts && (!json_is_array(starts) || json_array_size(starts) != n))
        rc = errmsg(err, errlen, "%s: \"start_times\" must list %zu send times", path, n);
    m->have_arrivals = starts != NULL;
    m->reqs = rc == 0 ? calloc(n, sizeof *m->reqs) : NULL;
    if (rc == 0 && !m->reqs) rc = errmsg(err, errlen, "out of memory");
    size_t cap = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        json_t *e = json_array_get(errs, i), *g = json_array_get(itls, i);
        double ttft = json_number_value(json_array_get(ttfts, i));
        double start = starts ? json_number_value(json_array_get(starts, i)) : NAN;
        bool failed = json_is_string(e) && json_string_length(e) > 0;
        if (!json_is_integer(json_array_get(in, i)) || !json_is_integer(json_array_get(out, i)) || !json_is_array(g) ||
            !json_is_number(json_array_get(ttfts, i)) || (starts && !json_is_number(json_array_get(starts, i)))) {
            rc = errmsg(err, errlen, "%s: request %zu: lengths must be integers, ttfts and start_times numbers, itls lists", path, i);
            break;
        }
        /* a number or null was read as no error, the request as one that succeeded (bad-input campaign) */
        if (!json_is_string(e)) {
            rc = errmsg(err, errlen, "%s: request %zu: its \"errors\" entry is not a string (\"\" where it succeeded, else "
                        "why it failed)", path, i);
            break;
        }
        /* lengths as requests.csv takes them (an int cast of 1e12 wrapped, bad-input campaign);
         * a failed request's may be 0, vLLM's record of nothing sent back */
        json_int_t in_len = json_integer_value(json_array_get(in, i)), out_len = json_integer_value(json_array_get(out, i));
        if (in_len < !failed || in_len > MEASURED_MAX_LEN || out_len < 0 || out_len > MEASURED_MAX_LEN) {
            rc = errmsg(err, errlen, "%s: request %zu: input length %lld and output length %lld must lie in [%d, %d] and "
                        "[0, %d]", path, i, (long long)in_len, (long long)out_len, !failed, MEASURED_MAX_LEN, MEASURED_MAX_LEN);
            break;
        }
        /* send times are a clock's readings (vLLM 0.33 writes its absolute ones): any from 0 on */
        if (starts && !(start >= 0 && start <= MEASURED_MAX_CLOCK_S)) {
            rc = errmsg(err, errlen, "%s: request %zu: start_times entry %g s is not a clock reading in [0, %g] s", path,
                        i, start, MEASURED_MAX_CLOCK_S);
            break;
        }
        if (!failed && !(ttft >= 0 && ttft <= MEASURED_MAX_S)) {
            rc = errmsg(err, errlen, "%s: request %zu: ttft %g s is not a time in [0, %g] s", path, i, ttft, MEASURED_MAX_S);
            break;
        }
        /* A request that succeeded sent a token. Its gaps are not bounded by its output length:
         * each parts two streamed chunks, and where the server sent no usage vLLM's client
         * counts the output by tokenizing the text again, which can give fewer tokens than
         * chunks were streamed (a review's find). */
        if (!failed && out_len < 1) {
            rc = errmsg(err, errlen, "%s: request %zu: output length 0 for a request that succeeded (its \"errors\" "
                        "entry is \"\")", path, i);
            break;
        }
        double sum = 0;
        size_t k;
        json_t *gap;
        json_array_foreach(g, k, gap) {
            double v = json_number_value(gap);
            if (!json_is_number(gap) || !(v >= 0 && v <= MEASURED_MAX_S)) {
                rc = errmsg(err, errlen, "%s: request %zu: itls[%zu] is not a gap in [0, %g] s", path, i, k, MEASURED_MAX_S);
                break;
            }
            sum += v;
            if (!failed && push_itl(m, &cap, v, (int64_t)i) < 0) rc = errmsg(err, errlen, "out of memory");
        }
        m->reqs[i] = (req_record){
            .request_id = (int64_t)i, .arrival_time = starts ? start : 0, .scheduled_prefill_time = NAN,
            .first_token_time = (starts ? start : 0) + ttft, .finish_time = (starts ? start : 0) + ttft + sum,
            .prompt_len = (int)in_len, .output_len = (int)out_len, .stop = failed ? STOP_ERROR : STOP_LENGTH,
        };
    }
    json_decref(doc);
    if (rc < 0) return -1;
    m->n = n;
    m->have_itl = true;
    snprintf(m->kind, sizeof m->kind, "vllm");
    return 0;
}

int measured_read(const char *path, measured_run *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    struct stat st;
    if (stat(path, &st) != 0) return errmsg(err, errlen, "%s: %s", path, strerror(errno));
    int rc = S_ISDIR(st.st_mode) ? read_dir(path, out, err, errlen) : read_vllm(path, out, err, errlen);
    if (rc < 0) {
        measured_free(out);
        return -1;
    }
    normalize(out);
    return 0;
}
