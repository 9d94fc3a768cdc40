/* Reading what a command wrote, for the tests that check result files, and writing the files a
 * test gives one. */
#ifndef SERVESIM_TESTS_FILE_FIXTURE_H
#define SERVESIM_TESTS_FILE_FIXTURE_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* PATH whole, as a string the caller frees. */
static inline char *slurp_path(const char *path)
{
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

/* Writes TEXT to PATH, replacing it. */
static inline void write_path(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    fputs(text, f);
    fclose(f);
}

/* DIR/NAME whole, as a string the caller frees. */
static inline char *slurp(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return slurp_path(path);
}

/* Occurrences of NEEDLE in HAYSTACK. */
static inline int count_of(const char *haystack, const char *needle)
{
    int n = 0;
    for (const char *p = haystack; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

/* The DOM of DIR/NAME after a headless Chromium (Debian's chromium-headless-shell, or
 * chromium) has loaded it and run its scripts, as a string the caller frees; NULL when no
 * such browser is installed (CI's setup installs one). */
static inline char *browser_dom(const char *dir, const char *name)
{
    const char *browser = system("command -v chromium-headless-shell >/dev/null 2>&1") == 0 ? "chromium-headless-shell"
                          : system("command -v chromium >/dev/null 2>&1") == 0           ? "chromium --headless"
                                                                                         : NULL;
    if (!browser) return NULL;
    char cmd[2048], out[1024];
    snprintf(out, sizeof out, "%s/dom.html", dir);
    /* --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start */
    snprintf(cmd, sizeof cmd, "timeout 120 %s --no-sandbox --disable-gpu --virtual-time-budget=10000 --dump-dom "
             "'file://%s/%s' > '%s' 2>/dev/null", browser, dir, name, out);
    cr_assert_eq(system(cmd), 0, "%s failed", cmd);
    return slurp(dir, "dom.html");
}

#endif
