#include "io/costtab.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/csv.h"
#include "io/decimal.h"
#include "io/outdir.h"

static const char *names[CT_COUNT] = {"linear",   "prefill_attn", "decode_attn",    "lm_head",
                                      "sample",   "overhead",     "allreduce",      "allreduce_fused"};

const char *ct_component_name(ct_component c) { return names[c]; }

void ct_init(cost_table *t) { memset(t, 0, sizeof *t); }

void ct_free(cost_table *t)
{
    for (int c = 0; c < CT_COUNT; c++) free(t->points[c]);
    ct_init(t);
}

int ct_set_meta(cost_table *t, const char *key, const char *value)
{
    int i = 0;
    while (i < t->num_meta && strcmp(t->meta_key[i], key) != 0) i++;
    if (i == CT_MAX_META) return -1;
    if (i == t->num_meta) t->num_meta++;
    snprintf(t->meta_key[i], sizeof t->meta_key[i], "%s", key);
    snprintf(t->meta_value[i], sizeof t->meta_value[i], "%s", value);
    return 0;
}

const char *ct_meta(const cost_table *t, const char *key)
{
    for (int i = 0; i < t->num_meta; i++)
        if (strcmp(t->meta_key[i], key) == 0) return t->meta_value[i];
    return NULL;
}

int ct_add(cost_table *t, ct_component c, double x, double y, double seconds)
{
    if (t->n[c] == t->cap[c]) {
        size_t cap = t->cap[c] ? 2 * t->cap[c] : 32;
        ct_point *p = realloc(t->points[c], cap * sizeof *p);
        if (!p) return -1;
        t->points[c] = p;
        t->cap[c] = cap;
    }
    t->points[c][t->n[c]++] = (ct_point){x, y, seconds};
    return 0;
}

int ct_write(const cost_table *t, const char *path, char *err, size_t errlen)
{
    outfile out;
    FILE *f = of_open(&out, path, err, errlen);
    if (!f) return -1;
    fprintf(f, "%s\n", CT_FIRST_LINE);
    for (int i = 0; i < t->num_meta; i++) fprintf(f, "# %s: %s\n", t->meta_key[i], t->meta_value[i]);
    fprintf(f, "component,x,y,seconds\n");
    for (int c = 0; c < CT_COUNT; c++)
        for (size_t i = 0; i < t->n[c]; i++)
            fprintf(f, "%s,%.10g,%.10g,%.9g\n", names[c], t->points[c][i].x, t->points[c][i].y,
                    t->points[c][i].seconds);
    return of_commit(&out, err, errlen);
}

static int parse_row(cost_table *t, const csv_reader *r, char *why, size_t len)
{
    if (r->nfields != 4) {
        snprintf(why, len, "expected component,x,y,seconds (got %d fields)", r->nfields);
        return -1;
    }
    char *const *fields = r->field;
    int c = 0;
    while (c < CT_COUNT && strcmp(fields[0], names[c]) != 0) c++;
    if (c == CT_COUNT) {
        snprintf(why, len, "unknown component \"%s\"", fields[0]);
        return -1;
    }
    double v[3];
    for (int i = 0; i < 3; i++) {
        char *end;
        v[i] = decimal_strtod(fields[i + 1], &end);
        if (end == fields[i + 1] || *end || !isfinite(v[i]) || v[i] < 0) {
            snprintf(why, len, "\"%s\" is not a non-negative number", fields[i + 1]);
            return -1;
        }
        /* a shape of up to a billion tokens or sequences, a price of up to a day: beyond
         * them a table is corrupt, and 1e308 s priced steps into an infinite clock */
        double bound = i < 2 ? 1e9 : CT_MAX_SECONDS;
        if (v[i] > bound) {
            snprintf(why, len, "%s %s is past %g", i == 0 ? "x" : i == 1 ? "y" : "seconds", fields[i + 1], bound);
            return -1;
        }
    }
    if (ct_add(t, (ct_component)c, v[0], v[1], v[2]) < 0) {
        snprintf(why, len, "out of memory");
        return -1;
    }
    return 0;
}

/* The header's four columns, in this order: the rows are read by position. */
static bool is_header(const csv_reader *r)
{
    static const char *const cols[] = {"component", "x", "y", "seconds"};
    if (r->nfields != 4) return false;
    for (int i = 0; i < 4; i++)
        if (strcmp(r->field[i], cols[i]) != 0) return false;
    return true;
}

static int read_table(cost_table *t, const char *path, bool meta_only, char *err, size_t errlen)
{
    ct_init(t);
    csv_reader r;
    if (csv_open(&r, path, CSV_COMMENTS, err, errlen) < 0) {
        if (strstr(err, ": is a directory")) snprintf(err, errlen, "%s: is a directory, not a cost table", path);
        return -1;
    }
    char why[300];
    int got, header = 0;
    long bad = 0;
    while (!bad && (got = csv_next(&r, err, errlen)) > 0) {
        char key[64], value[256];
        if (r.comment) {
            if (sscanf(r.field[0], "# %63[^:]: %255[^\n]", key, value) == 2) ct_set_meta(t, key, value);
        } else if (!header) {
            header = is_header(&r);
            if (header && meta_only) break;
            if (!header) snprintf(why, sizeof why, "expected the header component,x,y,seconds"), bad = r.lineno;
        } else if (parse_row(t, &r, why, sizeof why) < 0) {
            bad = r.lineno;
        }
    }
    csv_close(&r);
    if (got < 0) {
        ct_free(t);
        return -1;
    }
    if (!bad && !header) {
        snprintf(err, errlen, "%s: not a cost table (no header line component,x,y,seconds)", path);
        ct_free(t);
        return -1;
    }
    if (bad) {
        snprintf(err, errlen, "%s:%ld: %s", path, bad, why);
        ct_free(t);
        return -1;
    }
    return 0;
}

int ct_read(cost_table *t, const char *path, char *err, size_t errlen)
{
    return read_table(t, path, false, err, errlen);
}

int ct_read_meta(cost_table *t, const char *path, char *err, size_t errlen)
{
    return read_table(t, path, true, err, errlen);
}
