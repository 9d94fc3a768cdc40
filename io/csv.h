/* CSV, the one reader and the one field writer for every CSV servesim reads or writes
 * (traces, cost tables, steps and requests files, sweeps).
 *
 * Read as RFC 4180 has it, one record per line: fields separated by commas; a field in double
 * quotes may hold commas, and "" inside it is one quote; LF or CRLF line ends; a UTF-8
 * byte-order mark before the first line (as spreadsheets write one) is skipped; blank lines
 * are skipped. Extra columns are the caller's to ignore: columns are found by name in the
 * header (csv_index). A quoted field cannot span lines here (no file servesim reads has one):
 * an unterminated quote is an error naming the line. */
#ifndef SERVESIM_IO_CSV_H
#define SERVESIM_IO_CSV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Lines that start with '#' come back as comment records (csv_reader.comment, the whole
 * line in field[0]) instead of being split (cost tables keep their provenance there). */
enum { CSV_COMMENTS = 1 };

typedef struct csv_reader {
    const char *path;
    FILE *f;
    int flags;
    long lineno;             /* of the current record, 1-based */
    bool comment;            /* the current record is a '#' line (CSV_COMMENTS) */
    char **field;            /* the current record's fields, pointing into line */
    int nfields;
    char *line;              /* internal */
    size_t cap;
    int fcap;
} csv_reader;

/* Opens PATH. -1 with "PATH: cannot open: reason" (or "PATH: is a directory") in ERR. */
int csv_open(csv_reader *r, const char *path, int flags, char *err, size_t errlen);
/* Reads the next record: 1, 0 at the end of the file, -1 with "PATH:LINE: reason" in ERR. */
int csv_next(csv_reader *r, char *err, size_t errlen);
/* The index of the field equal to NAME in the current record (the header), or -1. */
int csv_index(const csv_reader *r, const char *name);
/* The column NAME of the header just read: its index; -1 when it has none (ERR untouched); -2
 * with "PATH:LINE: column NAME is named twice (columns A and B)" when two fields name it, as
 * which of them holds the data cannot be told. Every reader of a column by name takes it so. */
int csv_column(const csv_reader *r, const char *name, char *err, size_t errlen);
void csv_close(csv_reader *r);

/* Writes S as one CSV field: as it is, or in double quotes (quotes doubled) when it holds a
 * comma, a quote, a line end, or starts or ends with a space. */
void csv_write_field(FILE *f, const char *s);

#endif
