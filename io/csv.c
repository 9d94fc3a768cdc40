/* CSV records, read one line at a time and split in place (csv.h says which CSV). */
#include "io/csv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int csv_open(csv_reader *r, const char *path, int flags, char *err, size_t errlen)
{
    *r = (csv_reader){.path = path, .flags = flags};
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s: is a directory", path);
        return -1;
    }
    r->f = fopen(path, "r");
    if (!r->f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

static int add_field(csv_reader *r, char *start)
{
    if (r->nfields == r->fcap) {
        int cap = r->fcap ? 2 * r->fcap : 16;
        char **grown = realloc(r->field, (size_t)cap * sizeof *grown);
        if (!grown) return -1;
        r->field = grown;
        r->fcap = cap;
    }
    r->field[r->nfields++] = start;
    return 0;
}

/* Splits the line in place. A quoted field is unquoted where it lies: its text moves left
 * over the quotes, so every field stays a NUL-terminated string inside LINE. */
static int split(csv_reader *r, char *why, size_t whylen)
{
    char *p = r->line;
    r->nfields = 0;
    for (;;) {
        char *start = p;
        if (*p == '"') {
            char *out = p;
            for (p++;; p++) {
                if (*p == '\0') {
                    snprintf(why, whylen, "field %d: a quote is opened and never closed", r->nfields + 1);
                    return -1;
                }
                if (*p == '"') {
                    if (p[1] != '"') break;
                    p++;
                }
                *out++ = *p;
            }
            p++; /* past the closing quote */
            if (*p != ',' && *p != '\0') {
                snprintf(why, whylen, "field %d: text after its closing quote", r->nfields + 1);
                return -1;
            }
            char next = *p;
            *out = '\0';
            if (add_field(r, start) < 0) goto oom;
            if (next == '\0') return 0;
            p++;
        } else {
            p += strcspn(p, ",");
            char next = *p;
            *p = '\0';
            if (add_field(r, start) < 0) goto oom;
            if (next == '\0') return 0;
            p++;
        }
    }
oom:
    snprintf(why, whylen, "out of memory");
    return -1;
}

int csv_next(csv_reader *r, char *err, size_t errlen)
{
    ssize_t len;
    while ((len = getline(&r->line, &r->cap, r->f)) >= 0) {
        r->lineno++;
        while (len > 0 && (r->line[len - 1] == '\n' || r->line[len - 1] == '\r')) r->line[--len] = '\0';
        char *text = r->line;
        if (r->lineno == 1 && strncmp(text, "\xEF\xBB\xBF", 3) == 0) {
            memmove(text, text + 3, (size_t)len - 2);
            len -= 3;
        }
        if ((size_t)len != strlen(text)) {
            snprintf(err, errlen, "%s:%ld: a NUL byte in the line (not a text file?)", r->path, r->lineno);
            return -1;
        }
        if (len == 0) continue;
        r->comment = (r->flags & CSV_COMMENTS) && text[0] == '#';
        if (r->comment) {
            r->nfields = 0;
            if (add_field(r, text) < 0) {
                snprintf(err, errlen, "%s:%ld: out of memory", r->path, r->lineno);
                return -1;
            }
            return 1;
        }
        char why[128];
        if (split(r, why, sizeof why) < 0) {
            snprintf(err, errlen, "%s:%ld: %s", r->path, r->lineno, why);
            return -1;
        }
        return 1;
    }
    if (ferror(r->f)) {
        snprintf(err, errlen, "%s: read error: %s", r->path, strerror(errno));
        return -1;
    }
    return 0;
}

int csv_index(const csv_reader *r, const char *name)
{
    for (int i = 0; i < r->nfields; i++)
        if (strcmp(r->field[i], name) == 0) return i;
    return -1;
}

int csv_column(const csv_reader *r, const char *name, char *err, size_t errlen)
{
    int at = csv_index(r, name);
    for (int i = at + 1; at >= 0 && i < r->nfields; i++)
        if (strcmp(r->field[i], name) == 0) {
            snprintf(err, errlen, "%s:%ld: column %s is named twice (columns %d and %d)", r->path, r->lineno, name,
                     at + 1, i + 1);
            return -2;
        }
    return at;
}

void csv_close(csv_reader *r)
{
    if (r->f) fclose(r->f);
    free(r->line);
    free(r->field);
    *r = (csv_reader){0};
}

void csv_write_field(FILE *f, const char *s)
{
    size_t n = strlen(s);
    bool quote = strpbrk(s, ",\"\r\n") != NULL || (n > 0 && (s[0] == ' ' || s[n - 1] == ' '));
    if (!quote) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}
