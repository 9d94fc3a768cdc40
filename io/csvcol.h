/* Columns of a CSV file with a header line (steps.csv, requests.csv), read by name. */
#ifndef SERVESIM_IO_CSVCOL_H
#define SERVESIM_IO_CSVCOL_H

#include <stddef.h>

/* Reads the columns NAMES[0..k) of PATH into COLS[j][0..*n) (malloc'd; free each); an empty
 * field reads as NAN. -1 with "PATH: reason" in ERR (unreadable, or a column missing). */
int csv_columns(const char *path, const char *const *names, int k, double **cols, size_t *n, char *err,
                size_t errlen);

#endif
