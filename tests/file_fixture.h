/* Reading what a command wrote, for the tests that check result files. */
#ifndef SERVESIM_TESTS_FILE_FIXTURE_H
#define SERVESIM_TESTS_FILE_FIXTURE_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

/* DIR/NAME whole, as a string the caller frees. */
static inline char *slurp(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s missing", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    cr_assert_not_null(buf);
    buf[fread(buf, 1, (size_t)n, f)] = '\0';
    fclose(f);
    return buf;
}

#endif
