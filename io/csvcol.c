#include "io/csvcol.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_FIELDS = 128 };

/* Splits LINE in place at commas; returns the field count. */
static int split(char *line, char **fields)
{
    int n = 0;
    line[strcspn(line, "\r\n")] = 0;
    for (char *p = line; n < MAX_FIELDS; p++) {
        fields[n++] = p;
        p = strchr(p, ',');
        if (!p) break;
        *p = 0;
    }
    return n;
}

static int find_columns(char *header, const char *const *names, int k, int *idx)
{
    char *fields[MAX_FIELDS];
    int n = split(header, fields);
    for (int j = 0; j < k; j++) {
        idx[j] = -1;
        for (int i = 0; i < n; i++)
            if (strcmp(fields[i], names[j]) == 0) idx[j] = i;
        if (idx[j] < 0) return j;
    }
    return -1;
}

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

static int read_rows(FILE *f, const int *idx, int k, double **cols, size_t *n)
{
    char *line = NULL, *fields[MAX_FIELDS];
    size_t len = 0, cap = 0;
    int status = 0;
    while (status == 0 && getline(&line, &len, f) >= 0) {
        int nf = split(line, fields);
        if (nf == 1 && !fields[0][0]) continue;
        if (*n == cap && grow(cols, k, &cap) < 0) status = -1;
        for (int j = 0; status == 0 && j < k; j++)
            cols[j][*n] = idx[j] < nf && fields[idx[j]][0] ? strtod(fields[idx[j]], NULL) : NAN;
        if (status == 0) (*n)++;
    }
    free(line);
    return status;
}

int csv_columns(const char *path, const char *const *names, int k, double **cols, size_t *n, char *err,
                size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open", path);
        return -1;
    }
    char *header = NULL;
    size_t len = 0;
    int idx[MAX_FIELDS], missing = -1, status = 0;
    *n = 0;
    for (int j = 0; j < k; j++) cols[j] = NULL;
    if (k > MAX_FIELDS || getline(&header, &len, f) < 0 || (missing = find_columns(header, names, k, idx)) >= 0) {
        snprintf(err, errlen, "%s: no column %s", path, missing >= 0 ? names[missing] : "header");
        status = -1;
    } else if (read_rows(f, idx, k, cols, n) < 0) {
        snprintf(err, errlen, "%s: out of memory", path);
        status = -1;
    }
    free(header);
    fclose(f);
    if (status < 0)
        for (int j = 0; j < k; j++) free(cols[j]), cols[j] = NULL;
    return status;
}
