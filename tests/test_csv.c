/* The CSV reader and field writer: hand-made files, every case the reader claims to handle,
 * errors that name the line, and the writer's output read back; the decimal-only number
 * reader its numeric fields (and every number a user writes) go through. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/csv.h"
#include "io/csvcol.h"
#include "io/decimal.h"

static char path[64];

static void write_file(const char *text, size_t len)
{
    strcpy(path, "/tmp/servesim_csv_XXXXXX");
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, text, len), (ssize_t)len);
    close(fd);
}

static void cleanup(void) { unlink(path); }

TestSuite(csv, .fini = cleanup);

/* Reads PATH whole as "field|field\n" per record, comments as "#...\n". */
static int read_all(int flags, char *out, size_t len, char *err, size_t errlen)
{
    csv_reader r;
    if (csv_open(&r, path, flags, err, errlen) < 0) return -1;
    out[0] = 0;
    int got;
    while ((got = csv_next(&r, err, errlen)) > 0) {
        for (int i = 0; i < r.nfields; i++) {
            strncat(out, r.field[i], len - strlen(out) - 1);
            strncat(out, i + 1 < r.nfields ? "|" : "\n", len - strlen(out) - 1);
        }
    }
    csv_close(&r);
    return got;
}

Test(csv, quoted_fields_crlf_bom_and_blank_lines)
{
    const char text[] = "\xEF\xBB\xBF" "a,b,c\r\n\r\n\"x, y\",\"say \"\"hi\"\"\",\r\n,\"\",3\n";
    write_file(text, sizeof text - 1);
    char out[256], err[256];
    cr_assert_eq(read_all(0, out, sizeof out, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(out, "a|b|c\nx, y|say \"hi\"|\n||3\n");
}

Test(csv, comment_lines_come_back_whole_when_asked)
{
    const char text[] = "# source: a, b\nk,v\n#x\n1,2\n";
    write_file(text, sizeof text - 1);
    char out[256], err[256];
    cr_assert_eq(read_all(CSV_COMMENTS, out, sizeof out, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(out, "# source: a, b\nk|v\n#x\n1|2\n");
    cr_assert_eq(read_all(0, out, sizeof out, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(out, "# source: a| b\nk|v\n#x\n1|2\n", "without the flag a '#' line is a record");
}

Test(csv, columns_are_found_by_name)
{
    const char text[] = "extra,time,\"len\"\n";
    write_file(text, sizeof text - 1);
    csv_reader r;
    char err[256];
    cr_assert_eq(csv_open(&r, path, 0, err, sizeof err), 0);
    cr_assert_eq(csv_next(&r, err, sizeof err), 1);
    cr_assert_eq(csv_index(&r, "time"), 1);
    cr_assert_eq(csv_index(&r, "len"), 2);
    cr_assert_eq(csv_index(&r, "Time"), -1);
    cr_assert_eq(r.lineno, 1);
    csv_close(&r);
}

/* A column named twice is refused by every reader of columns by name: which holds the data
 * cannot be told (readers took the first; stop 34's leftover) */
Test(csv, a_column_named_twice_is_refused_by_name)
{
    const char text[] = "a,time,len,time\n1,2,3,4\n";
    write_file(text, sizeof text - 1);
    csv_reader r;
    char err[256] = "";
    cr_assert_eq(csv_open(&r, path, 0, err, sizeof err), 0);
    cr_assert_eq(csv_next(&r, err, sizeof err), 1);
    cr_assert_eq(csv_column(&r, "len", err, sizeof err), 2);
    cr_assert_eq(csv_column(&r, "none", err, sizeof err), -1);
    cr_assert_str_eq(err, "", "a missing column is the caller's to name");
    cr_assert_eq(csv_column(&r, "time", err, sizeof err), -2);
    char expected[512];
    snprintf(expected, sizeof expected, "%s:1: column time is named twice (columns 2 and 4)", path);
    cr_assert_str_eq(err, expected);
    csv_close(&r);
    const char *names[] = {"len", "time"};
    double *cols[2];
    size_t n;
    cr_assert_eq(csv_columns(path, names, 2, cols, &n, err, sizeof err), -1);
    cr_assert_str_eq(err, expected);
}

/* TEXT (LEN bytes) fails to read with "PATH:LINE: WHY". */
static void read_fails(const char *text, size_t len, int line, const char *why)
{
    char out[256], err[256], expected[256];
    write_file(text, len);
    cr_assert_eq(read_all(0, out, sizeof out, err, sizeof err), -1, "read: %s", out);
    snprintf(expected, sizeof expected, "%s:%d: %s", path, line, why);
    cr_assert_str_eq(err, expected);
    unlink(path);
}

Test(csv, errors_name_the_file_and_line)
{
    const char open_quote[] = "a,b\n1,2\n\n3,\"4\n", after_quote[] = "a,b\n\"1\"x,2\n", nul[] = "a,b\n1\0,2\n";
    read_fails(open_quote, sizeof open_quote - 1, 4, "field 2: a quote is opened and never closed");
    read_fails(after_quote, sizeof after_quote - 1, 2, "field 1: text after its closing quote");
    read_fails(nul, sizeof nul - 1, 2, "a NUL byte in the line (not a text file?)");
    char err[256];
    csv_reader r;
    cr_assert_eq(csv_open(&r, "/tmp", 0, err, sizeof err), -1);
    cr_assert_str_eq(err, "/tmp: is a directory");
    cr_assert_eq(csv_open(&r, "/nonexistent/x.csv", 0, err, sizeof err), -1);
    cr_assert_str_eq(err, "/nonexistent/x.csv: cannot open: No such file or directory");
}

Test(csv, written_fields_read_back_unchanged)
{
    const char *fields[] = {"plain", "a,b", "say \"hi\"", " padded", "", "tab\tok", "line\rend"};
    enum { N = sizeof fields / sizeof *fields };
    char *buf;
    size_t len;
    FILE *f = open_memstream(&buf, &len);
    for (int i = 0; i < N; i++) {
        if (i) fputc(',', f);
        csv_write_field(f, fields[i]);
    }
    fputc('\n', f);
    fclose(f);
    cr_assert_str_eq(buf, "plain,\"a,b\",\"say \"\"hi\"\"\",\" padded\",,tab\tok,\"line\rend\"\n");
    write_file(buf, len);
    free(buf);
    csv_reader r;
    char err[256];
    cr_assert_eq(csv_open(&r, path, 0, err, sizeof err), 0);
    cr_assert_eq(csv_next(&r, err, sizeof err), 1, "%s", err);
    cr_assert_eq(r.nfields, N);
    for (int i = 0; i < N; i++) cr_assert_str_eq(r.field[i], fields[i]);
    csv_close(&r);
}

/* decimal_strtod reads what strtod reads of a decimal number, to the same double, and
 * nothing of hexadecimal, "inf" or "nan" (strtod read 0x10 as 16, so workload.rate = 0x10 ran
 * at 16 requests/s). */
Test(decimal, reads_decimal_notation_only)
{
    static const struct { const char *text; double v; size_t used; } cases[] = {
        {"16", 16, 2}, {"-0.5", -0.5, 4}, {"+.25", 0.25, 4}, {"1e3", 1000, 3}, {"2.5E-2", 0.025, 6},
        {"7.", 7, 2}, {" 3", 3, 2}, {"1e", 1, 1}, {"1e+", 1, 1}, {"12 slots", 12, 2}, {"0x10", 0, 1},
        {"0.1", 0.1, 3}, {"1e999", HUGE_VAL, 5}, {"0x", 0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *end;
        double v = decimal_strtod(cases[i].text, &end);
        cr_assert_eq(v, cases[i].v, "%s: %g", cases[i].text, v);
        cr_assert_eq((size_t)(end - cases[i].text), cases[i].used, "%s: read %td characters", cases[i].text,
                     end - cases[i].text);
    }
    static const char *const none[] = {"", "-", ".", "inf", "nan", "infinity", "x1", "e5"};
    for (size_t i = 0; i < sizeof none / sizeof *none; i++) {
        char *end;
        cr_assert_eq(decimal_strtod(none[i], &end), 0, "%s", none[i]);
        cr_assert_eq(end, none[i], "%s: nothing read", none[i]);
    }
    cr_assert_eq(decimal_strtod("2.5", NULL), 2.5, "END may be NULL, as strtod's (dist_format passes it)");
    /* longer than its buffer: strtod's own answer */
    char longer[300];
    memset(longer, '1', 200);
    strcpy(longer + 200, ".5e-190");
    char *end;
    cr_assert_eq(decimal_strtod(longer, &end), strtod(longer, NULL));
    cr_assert_eq(*end, 0);
    /* 200 spaces then hex: the spaces once sent it to strtod whole, which read 16 */
    char spaced[300];
    memset(spaced, ' ', 200);
    strcpy(spaced + 200, "0x10");
    cr_assert_eq(decimal_strtod(spaced, &end), 0);
    cr_assert_eq(end, spaced + 201, "the 0, not the hex");
    /* out of range: HUGE_VAL and ERANGE, as strtod */
    errno = 0;
    cr_assert_eq(decimal_strtod("1e999", NULL), HUGE_VAL);
    cr_assert_eq(errno, ERANGE);
}
