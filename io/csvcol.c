/* Named numeric columns of a CSV file with a header line, read with io/csv. */
#include "io/csvcol.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/csv.h"
#include "io/decimal.h"

static int grow(double **cols, int k, size_t *cap)
{
    *cap = *cap ? *cap * 2 : 1024;
    for (int j = 0; j < k; j++) {
        double *g = realloc(cols[j], *cap * sizeof *g);
        if (!g) return -1;
        cols[j] = g;
    }
    return 0;
}

/* FIELD as a number; an empty field is NAN. -1 for text that is not a number. */
static int number(const char *field, double *out)
{
    if (!*field) {
        *out = NAN;
        return 0;
    }
    char *end;
    *out = decimal_strtod(field, &end);
    return *end ? -1 : 0;
}

int csv_columns(const char *path, const char *const *names, int k, double **cols, size_t *n, char *err,
                size_t errlen)
{
    csv_reader r;
    *n = 0;
    for (int j = 0; j < k; j++) cols[j] = NULL;
    if (csv_open(&r, path, 0, err, errlen) < 0) return -1;
    int *idx = calloc((size_t)(k ? k : 1), sizeof *idx), got = csv_next(&r, err, errlen), status = -1;
    size_t cap = 0;
    if (!idx) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto done;
    }
    if (got == 0) snprintf(err, errlen, "%s: empty, expected a header line", path);
    if (got <= 0) goto done;
    for (int j = 0; j < k; j++)
        if ((idx[j] = csv_column(&r, names[j], err, errlen)) < 0) {
            if (idx[j] == -1) snprintf(err, errlen, "%s:%ld: no column %s in the header", path, r.lineno, names[j]);
            goto done;
        }
    while ((got = csv_next(&r, err, errlen)) > 0) {
        if (*n == cap && grow(cols, k, &cap) < 0) {
            snprintf(err, errlen, "%s: out of memory", path);
            goto done;
        }
        for (int j = 0; j < k; j++) {
            const char *field = idx[j] < r.nfields ? r.field[idx[j]] : "";
            if (number(field, &cols[j][*n]) < 0) {
                snprintf(err, errlen, "%s:%ld: %s \"%s\" is not a number", path, r.lineno, names[j], field);
                goto done;
            }
        }
        (*n)++;
    }
    if (got == 0) status = 0;
done:
    csv_close(&r);
    free(idx);
    if (status < 0)
        for (int j = 0; j < k; j++) free(cols[j]), cols[j] = NULL;
    return status;
}
