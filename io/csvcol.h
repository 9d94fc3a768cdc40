/* Numeric columns of a CSV file with a header line (steps.csv, requests.csv, sweep.csv), read
 * by name (io/csv.h: quoting, a byte-order mark and extra columns are fine). */
#ifndef SERVESIM_IO_CSVCOL_H
#define SERVESIM_IO_CSVCOL_H

#include <stddef.h>

/* Reads the columns NAMES[0..k) of PATH into COLS[j][0..*n) (malloc'd; free each); an empty
 * field, or a missing one at the end of a short row, reads as NAN. -1 with "PATH:LINE: reason"
 * in ERR (unreadable, a column missing, a field that is not a number). */
int csv_columns(const char *path, const char *const *names, int k, double **cols, size_t *n, char *err,
                size_t errlen);

#endif
