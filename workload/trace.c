#include "workload/trace.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/csv.h"
#include "io/decimal.h"

#define TRACE_LEN_LIMIT (1 << 24)
#define TICKS_PER_SECOND 10000000LL

typedef enum trace_format { TRACE_AZURE, TRACE_PLAIN } trace_format;

/* The columns each format needs: time, prompt length, output length. */
static const char *const columns[][3] = {
    [TRACE_AZURE] = {"TIMESTAMP", "ContextTokens", "GeneratedTokens"},
    [TRACE_PLAIN] = {"arrival_time", "prompt_len", "output_len"},
};

/* A row's time as read: Azure timestamps as exact ticks, plain times as seconds. */
typedef struct raw_time {
    int64_t ticks;
    double seconds;
} raw_time;

typedef struct reader {
    csv_reader csv;
    trace_format fmt;
    int col[3];              /* time, prompt and output columns in the header */
    int acceptance_col;      /* the optional acceptance_rate column, or -1 */
    int warmup_col, stop_col; /* a run's requests.csv: its warmup and stop_reason columns, or -1 */
    int num_columns;
    char *err;
    size_t errlen;
} reader;

__attribute__((format(printf, 2, 3)))
static void fail(reader *r, const char *fmt, ...)
{
    int n = snprintf(r->err, r->errlen, "%s:%ld: ", r->csv.path, r->csv.lineno);
    if (n < 0 || (size_t)n >= r->errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err + n, r->errlen - (size_t)n, fmt, ap);
    va_end(ap);
}

/* Parses exactly WIDTH digits at *P (WIDTH = 0: one or more) and advances P. */
static int digits(const char **p, int width, int64_t *out)
{
    int64_t v = 0;
    int n = 0;
    while ((**p >= '0' && **p <= '9') && (width == 0 || n < width) && n < 18) {
        v = v * 10 + (**p - '0');
        (*p)++;
        n++;
    }
    *out = v;
    return n > 0 && (width == 0 || n == width) ? 0 : -1;
}

static int expect(const char **p, char c)
{
    if (**p != c)
        return -1;
    (*p)++;
    return 0;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, int64_t m, int64_t d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int days_in_month(int64_t y, int64_t m)
{
    static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return days[m - 1] + (m == 2 && leap);
}

static int parse_timestamp(const char *s, int64_t *ticks)
{
    int64_t y, mo, d, h, mi, sec, frac = 0;
    const char *p = s;
    if (digits(&p, 4, &y) || expect(&p, '-') || digits(&p, 2, &mo) || expect(&p, '-') ||
        digits(&p, 2, &d) || expect(&p, ' ') || digits(&p, 2, &h) || expect(&p, ':') ||
        digits(&p, 2, &mi) || expect(&p, ':') || digits(&p, 2, &sec))
        return -1;
    if (*p == '.') {
        const char *start = ++p;
        if (digits(&p, 0, &frac) || p - start > 7)
            return -1;
        for (long n = p - start; n < 7; n++)
            frac *= 10;
    }
    /* 2023-02-30 was taken as 2023-03-02 (bad-input campaign) */
    if (*p != '\0' || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || sec > 60)
        return -1;
    int64_t seconds = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec;
    *ticks = seconds * TICKS_PER_SECOND + frac;
    return 0;
}

static int parse_len(const char *s, int *out)
{
    const char *p = s;
    int64_t v;
    if (digits(&p, 0, &v) || *p != '\0' || v < 1 || v > TRACE_LEN_LIMIT)
        return -1;
    *out = (int)v;
    return 0;
}

/* 1 where the row is a run's request that did not finish (stop_reason other than length):
 * its output length is not known. */
static int unfinished(reader *r)
{
    if (r->csv.nfields != r->num_columns) {
        fail(r, "expected %d fields as in the header, got %d", r->num_columns, r->csv.nfields);
        return -1;
    }
    return r->stop_col >= 0 && strcmp(r->csv.field[r->stop_col], "length") != 0;
}

static int parse_row(reader *r, raw_time *t, trace_row *row)
{
    const char *f[3];
    for (int i = 0; i < 3; i++) f[i] = r->csv.field[r->col[i]];
    if (r->fmt == TRACE_AZURE) {
        if (parse_timestamp(f[0], &t->ticks)) {
            fail(r, "bad TIMESTAMP \"%s\" (expected YYYY-MM-DD HH:MM:SS.fffffff)", f[0]);
            return -1;
        }
    } else {
        char *end;
        errno = 0;
        t->seconds = decimal_strtod(f[0], &end);
        if (end == f[0] || *end != '\0' || errno == ERANGE || !isfinite(t->seconds)) {
            fail(r, "bad arrival_time \"%s\" (expected seconds)", f[0]);
            return -1;
        }
    }
    int *lens[] = {&row->prompt_len, &row->output_len};
    for (int i = 0; i < 2; i++) {
        if (parse_len(f[i + 1], lens[i])) {
            fail(r, "bad %s \"%s\" (expected an integer in [1, %d])", columns[r->fmt][i + 1], f[i + 1],
                 TRACE_LEN_LIMIT);
            return -1;
        }
    }
    row->warmup = false;
    if (r->warmup_col >= 0) {
        const char *w = r->csv.field[r->warmup_col];
        if (strcmp(w, "0") != 0 && strcmp(w, "1") != 0) {
            fail(r, "bad warmup \"%s\" (expected 0 or 1)", w);
            return -1;
        }
        row->warmup = w[0] == '1';
    }
    row->acceptance_rate = -1;
    if (r->acceptance_col >= 0) {
        const char *a = r->csv.field[r->acceptance_col];
        char *end;
        errno = 0;
        double v = decimal_strtod(a, &end);
        if (end == a || *end != '\0' || errno == ERANGE || !(v >= 0 && v <= 1)) {
            fail(r, "bad acceptance_rate \"%s\" (expected a number in [0, 1])", a);
            return -1;
        }
        row->acceptance_rate = v;
    }
    return 0;
}

/* The header's one column NAME: its index, -1 when there is none, -2 (failed) when it is
 * there twice. A column named twice was read from its first and the second ignored without a
 * word (bad-input campaign): which one the file means cannot be told. */
static int column(reader *r, const char *name) { return csv_column(&r->csv, name, r->err, r->errlen); }

/* The format whose three columns the header names, each once, in any order among other
 * columns. A header with both formats' columns was replayed as Azure's without a word
 * (bad-input campaign): refused, as which the file means cannot be told. */
static int read_header(reader *r)
{
    int got = csv_next(&r->csv, r->err, r->errlen);
    if (got < 0) return -1;
    if (got == 0) {
        r->csv.lineno = 1;
        fail(r, "empty trace, expected a header line");
        return -1;
    }
    int found[2] = {0, 0};
    for (int k = TRACE_AZURE; k <= TRACE_PLAIN; k++)
        for (int i = 0; i < 3; i++) found[k] += csv_index(&r->csv, columns[k][i]) >= 0;
    if (found[TRACE_AZURE] == 3 && found[TRACE_PLAIN] == 3) {
        fail(r, "the header names both %s,%s,%s and %s,%s,%s; keep one format's columns", columns[TRACE_AZURE][0],
             columns[TRACE_AZURE][1], columns[TRACE_AZURE][2], columns[TRACE_PLAIN][0], columns[TRACE_PLAIN][1],
             columns[TRACE_PLAIN][2]);
        return -1;
    }
    for (int k = TRACE_AZURE; k <= TRACE_PLAIN; k++) {
        if (found[k] < 3) continue;
        r->fmt = (trace_format)k;
        r->num_columns = r->csv.nfields;
        for (int i = 0; i < 3; i++)
            if ((r->col[i] = column(r, columns[k][i])) < 0) return -1;
        r->acceptance_col = column(r, "acceptance_rate");
        r->warmup_col = column(r, "warmup");
        r->stop_col = column(r, "stop_reason");
        return r->acceptance_col < -1 || r->warmup_col < -1 || r->stop_col < -1 ? -1 : 0;
    }
    fail(r, "unknown trace header (expected the columns %s,%s,%s or %s,%s,%s)", columns[TRACE_AZURE][0],
         columns[TRACE_AZURE][1], columns[TRACE_AZURE][2], columns[TRACE_PLAIN][0], columns[TRACE_PLAIN][1],
         columns[TRACE_PLAIN][2]);
    return -1;
}

/* A row with its time as read, to sort by (the line breaks ties: stable). */
typedef struct timed_row {
    raw_time t;
    trace_row row;
} timed_row;

static int earlier(const void *a, const void *b)
{
    const timed_row *x = a, *y = b;
    if (x->t.ticks != y->t.ticks) return x->t.ticks < y->t.ticks ? -1 : 1;
    if (x->t.seconds != y->t.seconds) return x->t.seconds < y->t.seconds ? -1 : 1;
    return (x->row.line > y->row.line) - (x->row.line < y->row.line);
}

/* Rows in any order are taken in time order: a run's requests.csv lists its requests as they
 * finished, and replaying one as a trace stopped at its first row out of order ("time goes
 * backwards", a new user's trial; the README offers it as a trace). Every row is read, to find
 * the MAX_ROWS earliest: a row past them may be earlier (a long request that finished late;
 * a review's find). */
static int read_rows(reader *r, size_t max_rows, trace_row **rows, size_t *n, size_t *skipped)
{
    if (read_header(r))
        return -1;
    size_t cap = 0;
    timed_row *all = NULL;
    raw_time prev = {0};
    bool sorted = true;
    int got = 0;
    while ((got = csv_next(&r->csv, r->err, r->errlen)) > 0) {
        timed_row x = {0};
        int left_out = unfinished(r);
        if (left_out > 0) {
            (*skipped)++;
            continue;
        }
        if (left_out < 0 || parse_row(r, &x.t, &x.row)) {
            free(all);
            return -1;
        }
        if (*n > 0 && (x.t.ticks < prev.ticks || x.t.seconds < prev.seconds)) sorted = false;
        prev = x.t;
        x.row.line = r->csv.lineno;
        if (*n == cap) {
            cap = cap ? 2 * cap : 1024;
            timed_row *grown = realloc(all, cap * sizeof *all);
            if (!grown) {
                free(all);
                fail(r, "out of memory");
                return -1;
            }
            all = grown;
        }
        all[(*n)++] = x;
    }
    if (got < 0) {
        free(all);
        return -1;
    }
    if (!sorted) qsort(all, *n, sizeof *all, earlier);
    if (max_rows > 0 && *n > max_rows) *n = max_rows;
    *rows = malloc((*n ? *n : 1) * sizeof **rows);
    if (!*rows) {
        free(all);
        fail(r, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < *n; i++) {
        (*rows)[i] = all[i].row;
        (*rows)[i].time = r->fmt == TRACE_AZURE ? (double)(all[i].t.ticks - all[0].t.ticks) / TICKS_PER_SECOND
                                                : all[i].t.seconds - all[0].t.seconds;
    }
    free(all);
    return 0;
}

int trace_read(const char *path, size_t max_rows, trace_row **rows, size_t *n, size_t *unfinished, char *err,
               size_t errlen)
{
    size_t skipped = 0;
    reader r = {.err = err, .errlen = errlen};
    if (csv_open(&r.csv, path, 0, err, errlen) < 0)
        return -1;
    *rows = NULL;
    *n = 0;
    int rc = read_rows(&r, max_rows, rows, n, &skipped);
    if (unfinished) *unfinished = rc ? 0 : skipped;
    csv_close(&r.csv);
    if (rc) {
        free(*rows);
        *rows = NULL;
        *n = 0;
    }
    return rc;
}
