#define _XOPEN_SOURCE 700   /* nftw */
#include "io/outdir.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <ftw.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int fail(char *err, size_t errlen, const char *path, int e)
{
    snprintf(err, errlen, "%s: %s", path, strerror(e));
    return -1;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

int od_remove_tree(const char *path)
{
    return nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int od_make_parents(const char *path, od_made *made, char *err, size_t errlen)
{
    char buf[PATH_MAX];
    od_made mine = {0};
    if (!made) made = &mine;
    made->n = 0;
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        snprintf(err, errlen, "%.200s...: path too long", path);
        return -1;
    }
    for (char *p = strchr(buf + 1, '/'); p; p = strchr(p + 1, '/')) {
        *p = '\0';
        if (mkdir(buf, 0777) == 0) {
            /* each folder this call made, by its own prefix: with a ".." after one (new/../keep)
             * the folders deeper in the path are not all new, and only these may go */
            if (made->n < sizeof made->at / sizeof *made->at) made->at[made->n++] = (size_t)(p - buf);
        } else if (errno != EEXIST) {
            int e = errno;
            fail(err, errlen, buf, e);
            od_unmake_parents(path, made);
            return -1;
        }
        *p = '/';
    }
    return 0;
}

void od_unmake_parents(const char *path, od_made *made)
{
    char buf[PATH_MAX];
    if (!made || snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return;
    /* deepest first; rmdir takes only an empty folder, so nothing put in one since is lost
     * (another servesim writing beside it into a folder both needed may find it gone and fail:
     * two commands writing into one new folder at once is not supported) */
    while (made->n > 0) {
        size_t at = made->at[--made->n];
        buf[at] = '\0';
        rmdir(buf);
    }
}

/* The marker's first line; the paths servesim wrote follow the line OD_MANIFEST, one a line
 * (folders with a trailing /). A marker without them is an older servesim's. */
#define OD_MARKER_TEXT "servesim wrote this directory; the next servesim command told to write here replaces it\n"
#define OD_MANIFEST "files:"
/* The file a temporary directory holds while servesim writes it, so that only servesim's own
 * leftovers are taken for stale ones; removed just before the rename that commits. */
#define OD_TEMP_MARKER ".servesim-writing"

typedef struct walk {
    size_t root_len;      /* the walked directory's path length, to make paths relative */
    char **listed;        /* checking: the manifest's paths, sorted */
    size_t nlisted;
    size_t cap;           /* room in listed */
    bool writing;         /* writing the manifest: collect the paths in listed (the commit's walk
                           * skips the temporary marker) */
    bool has_list;        /* checking: the marker has a manifest (an older servesim's has none) */
    bool foreign;         /* checking: the marker's first line is not servesim's */
    char unlisted[512];   /* checking: the first path the manifest lacks */
    char locked[512];     /* checking: the first folder whose entries servesim could not delete */
} walk;

/* nftw passes no context; a sweep's threads each write their points' results */
static _Thread_local walk *walking;

static int by_text(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Appends a copy of TEXT to W's list: -1 out of memory. */
static int list_add(walk *w, const char *text)
{
    if (w->nlisted == w->cap) {
        char **more = realloc(w->listed, (w->cap ? 2 * w->cap : 64) * sizeof *more);
        if (!more) return -1;
        w->listed = more;
        w->cap = w->cap ? 2 * w->cap : 64;
    }
    if (!(w->listed[w->nlisted] = strdup(text))) return -1;
    w->nlisted++;
    return 0;
}

static int visit(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    /* replacing a result deletes the old one's files once the new one is in place: a folder of
     * it that will not let go of them left the old result beside the new, and an error */
    if (!walking->writing && (flag == FTW_D || flag == FTW_DNR) && access(path, R_OK | W_OK | X_OK) != 0) {
        snprintf(walking->locked, sizeof walking->locked, "%s", path);
        return 1;
    }
    if (ftw->level == 0) return 0;
    const char *rel = path + walking->root_len + 1;
    if (strcmp(rel, OD_MARKER) == 0 || (walking->writing && strcmp(rel, OD_TEMP_MARKER) == 0)) return 0;
    char line[4200];
    int n = snprintf(line, sizeof line, "%s%s", rel, flag == FTW_D || flag == FTW_DP ? "/" : "");
    /* a name with a newline would read as two lines of the manifest: never servesim's */
    bool odd = n < 0 || (size_t)n >= sizeof line || strchr(line, '\n');
    if (walking->writing) return odd || list_add(walking, line) < 0;
    const char *key = line;
    if (!odd && walking->nlisted &&
        bsearch(&key, walking->listed, walking->nlisted, sizeof *walking->listed, by_text))
        return 0;
    snprintf(walking->unlisted, sizeof walking->unlisted, "%.*s", (int)strcspn(line, "\n"), line);
    return 1;
}

/* Walks DIR with W: collects its paths in W->listed, or stops at the first W->listed lacks. */
static int walk_tree(const char *dir, walk *w)
{
    w->root_len = strlen(dir);
    walking = w;
    errno = 0;
    int rc = nftw(dir, visit, 16, FTW_PHYS);
    walking = NULL;
    return rc;
}

/* The paths DIR's marker lists, sorted, in W (has_list false for an older servesim's marker,
 * which lists nothing; foreign true for a marker servesim did not write): 1, or 0 when DIR has
 * no marker (none, or not a file), -1 out of memory. */
static int read_manifest(const char *dir, walk *w)
{
    char path[sizeof ((outdir *)0)->final_path + 40];
    snprintf(path, sizeof path, "%s/%s", dir, OD_MARKER);
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    bool in_list = false;
    char *line = NULL;
    size_t len = 0;
    ssize_t got;
    int rc = 1;
    /* its first line is servesim's, as every servesim's marker has had: an empty marker, or
     * any other file of that name, once passed for an older servesim's and the folder was
     * replaced whole, the user's files in it with it */
    got = getline(&line, &len, f);
    w->foreign = got <= 0 || strncmp(line, OD_MARKER_TEXT, strlen(OD_MARKER_TEXT)) != 0;
    while (rc == 1 && !w->foreign && (got = getline(&line, &len, f)) > 0) {
        if (line[got - 1] == '\n') line[--got] = 0;
        if (!in_list) {
            in_list = w->has_list = strcmp(line, OD_MANIFEST) == 0;
            continue;
        }
        if (list_add(w, line) < 0) rc = -1;
    }
    free(line);
    fclose(f);
    if (w->nlisted) qsort(w->listed, w->nlisted, sizeof *w->listed, by_text);
    return rc;
}

static void free_manifest(walk *w)
{
    for (size_t i = 0; i < w->nlisted; i++) free(w->listed[i]);
    free(w->listed);
}

/* Whether DIR is absent, an empty directory, or a result servesim wrote and nobody added to
 * since; else why not. */
static int replaceable(const char *dir, char *err, size_t errlen)
{
    struct stat st;
    if (lstat(dir, &st) != 0) return errno == ENOENT ? 0 : fail(err, errlen, dir, errno);
    if (S_ISLNK(st.st_mode)) { /* replacing it would replace the link, not the folder it names */
        snprintf(err, errlen, "%s: is a symbolic link; name the directory it points to, or a new one: servesim "
                              "replaces a result by renaming a new directory onto its path", dir);
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s: exists and is not a directory; servesim writes results only into a new "
                              "directory or one it wrote before, and deletes nothing else", dir);
        return -1;
    }
    DIR *dd = opendir(dir);
    if (!dd) return fail(err, errlen, dir, errno);
    bool empty = true;
    struct dirent *e;
    while ((e = readdir(dd)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) empty = false;
    closedir(dd);
    if (empty) return 0;
    walk w = {0};
    int have = read_manifest(dir, &w), rc = 0;
    if (have < 0) {
        rc = fail(err, errlen, dir, ENOMEM);
    } else if (have == 0) {
        snprintf(err, errlen, "%s: a directory with files servesim did not write (no %s in it); choose another "
                              "output directory or empty this one: servesim replaces only its own results", dir, OD_MARKER);
        rc = -1;
    } else if (w.foreign) {
        snprintf(err, errlen, "%s: its %s is not one servesim wrote (its first line is not servesim's); choose another "
                              "output directory or empty this one: servesim replaces only its own results", dir, OD_MARKER);
        rc = -1;
    } else if (w.has_list && walk_tree(dir, &w) != 0) {
        /* (an older servesim's marker lists nothing: its whole result is taken as written) */
        if (w.locked[0])
            snprintf(err, errlen, "%s: a result servesim wrote, but %s does not let its files be deleted (%s); make "
                                  "it writable or choose another output directory", dir, w.locked, strerror(EACCES));
        else if (w.unlisted[0])
            snprintf(err, errlen, "%s: holds %s, which servesim did not write there; move it away or choose "
                                  "another output directory: servesim replaces only its own results", dir, w.unlisted);
        else
            fail(err, errlen, dir, errno ? errno : EIO);
        rc = -1;
    }
    free_manifest(&w);
    return rc;
}

/* Whether every name in PATH fits a directory entry (NAME_MAX bytes), the last with RESERVE
 * bytes more for the temporary servesim writes beside it (PATH.tmp.PID, a directory's
 * PATH.tmp.PID.old too), which TEMP names in the message. A name too long was found only
 * when the temporary was made: after the work for a file, with the folders above it made and
 * left, and with exit 1. */
static int names_fit(const char *path, size_t reserve, const char *temp, char *err, size_t errlen)
{
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') len--;
    for (size_t start = 0; start < len;) {
        size_t n = strcspn(path + start, "/");
        if (start + n > len) n = len - start;
        bool last = start + n >= len;
        if (n + (last ? reserve : 0) > NAME_MAX) {
            if (last && n <= NAME_MAX)
                snprintf(err, errlen, "%.*s: its last name is %zu bytes; with the %s servesim writes beside it, a name "
                                      "may be at most %zu", (int)len, path, n, temp, (size_t)NAME_MAX - reserve);
            else
                snprintf(err, errlen, "%.*s: the name \"%.40s...\" in it is %zu bytes; a file system takes at most %d",
                         (int)len, path, path + start, n, NAME_MAX);
            return -1;
        }
        start += n + 1;
    }
    return 0;
}

/* Whether servesim can make DIR's temporary beside it: a directory made and removed at once in
 * the nearest folder above DIR that exists (where od_make_parents starts), since permissions
 * alone do not say it (root may write anywhere but a read-only or virtual file system). An
 * unwritable --out was found only after the whole run, naming DIR.tmp.PID. */
static int writable_above(const char *dir, char *err, size_t errlen)
{
    char above[PATH_MAX], probe[sizeof above + 64];
    snprintf(above, sizeof above, "%s", dir);
    struct stat st;
    for (;;) {
        char *slash = strrchr(above, '/');
        if (!slash) snprintf(above, sizeof above, ".");
        else if (slash == above) above[1] = '\0';
        else *slash = '\0';
        if (lstat(above, &st) == 0 || errno != ENOENT || !slash || strcmp(above, "/") == 0) break;
    }
    /* a name of its own: a sweep's threads check at once */
    snprintf(probe, sizeof probe, "%s/.servesim-probe-XXXXXX", above);
    if (!mkdtemp(probe)) {
        /* a folder that exists answering "no such file" is a virtual one (/proc) */
        snprintf(err, errlen, "%s: cannot write in %s: %s%s", dir, above, strerror(errno),
                 errno == ENOENT ? " (a file system that takes no new entries)" : "");
        return -1;
    }
    rmdir(probe);
    return 0;
}

int od_check_input(const char *dir, const char *input, const char *what, char *err, size_t errlen)
{
    char real_dir[PATH_MAX], real_input[PATH_MAX];
    if (!input[0] || !realpath(dir, real_dir) || !realpath(input, real_input)) return 0;
    size_t n = strlen(real_dir);
    bool inside = strncmp(real_input, real_dir, n) == 0 && (real_input[n] == '\0' || real_input[n] == '/' || n == 1);
    if (!inside) return 0;
    snprintf(err, errlen, "%s holds %s %s, which this command reads: writing the result there would replace it; "
             "choose another output directory", dir, what, input);
    return -1;
}

int od_check(const char *dir, char *err, size_t errlen)
{
    size_t len = strlen(dir);
    while (len > 1 && dir[len - 1] == '/') len--;
    if (len == 0 || len >= sizeof ((outdir *)0)->final_path - 40) {
        snprintf(err, errlen, "\"%.200s\": not a usable directory name (%zu characters; at most %zu)", dir, len,
                 sizeof ((outdir *)0)->final_path - 41);
        return -1;
    }
    char path[sizeof ((outdir *)0)->final_path];
    snprintf(path, sizeof path, "%.*s", (int)len, dir);
    /* the result is written beside the directory and renamed onto it: "." or ".." would put
     * the temporary inside what it replaces (a run to --out . ended in a false "files
     * servesim did not write"), and replacing the working directory, or a folder above it,
     * leaves the shell in a deleted one */
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    if (strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
        snprintf(err, errlen, "%s: name the output directory itself (such as results/NAME), not '.' or '..'", dir);
        return -1;
    }
    char real[PATH_MAX], cwd[PATH_MAX];
    size_t rlen;
    if (realpath(path, real) && getcwd(cwd, sizeof cwd) && strncmp(cwd, real, rlen = strlen(real)) == 0 &&
        (cwd[rlen] == '\0' || cwd[rlen] == '/' || rlen == 1)) {
        snprintf(err, errlen, "%s: is the working directory or holds it; servesim replaces an output directory "
                              "whole: choose one below it", dir);
        return -1;
    }
    if (names_fit(path, strlen(".tmp.") + 10 + strlen(".old"),
                  "\".tmp.PID\" (and \".tmp.PID.old\", when it replaces a result)", err, errlen) < 0)
        return -1;
    return replaceable(path, err, errlen) < 0 ? -1 : writable_above(path, err, errlen);
}

/* Removes DIR.tmp.<pid> and DIR.tmp.<pid>.old left by servesim processes that no longer
 * exist (killed before they could clean up). Best effort: what cannot be removed stays. */
static void remove_stale_temporaries(const char *dir)
{
    const char *slash = strrchr(dir, '/');
    const char *base = slash ? slash + 1 : dir;
    size_t blen = strlen(base);
    char parent[sizeof ((outdir *)0)->final_path];
    if (!slash) snprintf(parent, sizeof parent, ".");
    else if (slash == dir) snprintf(parent, sizeof parent, "/");
    else snprintf(parent, sizeof parent, "%.*s", (int)(slash - dir), dir);
    DIR *dd = opendir(parent);
    if (!dd) return;
    struct dirent *e;
    while ((e = readdir(dd))) {
        if (strncmp(e->d_name, base, blen) != 0 || strncmp(e->d_name + blen, ".tmp.", 5) != 0) continue;
        char *end;
        long pid = strtol(e->d_name + blen + 5, &end, 10);
        if (end == e->d_name + blen + 5 || (*end && strcmp(end, ".old") != 0) || pid <= 0 || pid == (long)getpid())
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive, or not ours to judge */
        char path[sizeof parent + 300], mark[sizeof path + 40], why[256];
        snprintf(path, sizeof path, "%s/%s", parent, e->d_name);
        /* only what servesim left: a temporary it was writing (its marker inside), or a result it
         * had set aside to replace (a result it wrote, nobody added to) */
        struct stat st;
        snprintf(mark, sizeof mark, "%s/%s", path, OD_TEMP_MARKER);
        bool writing = !*end && lstat(mark, &st) == 0 && S_ISREG(st.st_mode);
        snprintf(mark, sizeof mark, "%s/%s", path, OD_MARKER);
        if (!writing && (lstat(mark, &st) != 0 || !S_ISREG(st.st_mode))) continue;
        /* a result set aside, or a temporary killed between its marker and its rename */
        if (!writing && replaceable(path, why, sizeof why) != 0) continue;
        od_remove_tree(path);
    }
    closedir(dd);
}

int od_open(outdir *d, const char *dir, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    if (od_check(dir, err, errlen) < 0) return -1; /* a usable name, a directory we may replace */
    size_t len = strlen(dir);
    while (len > 1 && dir[len - 1] == '/') len--;
    memcpy(d->final_path, dir, len);
    snprintf(d->tmp_path, sizeof d->tmp_path, "%s.tmp.%ld", d->final_path, (long)getpid());
    if (od_make_parents(d->final_path, &d->made, err, errlen) < 0) goto fail;
    remove_stale_temporaries(d->final_path);
    /* a leftover of a crashed run with our pid holds nothing worth keeping */
    if (mkdir(d->tmp_path, 0777) != 0 &&
        (errno != EEXIST || od_remove_tree(d->tmp_path) != 0 || mkdir(d->tmp_path, 0777) != 0)) {
        fail(err, errlen, d->tmp_path, errno);
        goto fail;
    }
    char mark[sizeof d->tmp_path + 40];
    snprintf(mark, sizeof mark, "%s/%s", d->tmp_path, OD_TEMP_MARKER);
    FILE *m = fopen(mark, "w");
    if (!m || fclose(m) != 0) {
        fail(err, errlen, mark, errno);
        od_remove_tree(d->tmp_path);
        goto fail;
    }
    return 0;
fail:
    od_unmake_parents(d->final_path, &d->made);
    d->tmp_path[0] = '\0';
    return -1;
}

int od_path(const outdir *d, const char *name, char *buf, size_t len)
{
    return (size_t)snprintf(buf, len, "%s/%s", d->tmp_path, name) < len ? 0 : -1;
}

FILE *od_fopen(const outdir *d, const char *name, char *err, size_t errlen)
{
    char path[4096];
    if (od_path(d, name, path, sizeof path) < 0) {
        snprintf(err, errlen, "%s/%s: path too long", d->tmp_path, name);
        return NULL;
    }
    FILE *f = fopen(path, "w");
    if (!f) fail(err, errlen, path, errno);
    return f;
}

int od_fclose(FILE *f, const char *name, char *err, size_t errlen)
{
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) return fail(err, errlen, name, bad ? EIO : errno);
    return 0;
}

int od_commit(outdir *d, char *err, size_t errlen)
{
    /* the manifest, sorted: the same result lists the same lines on every file system */
    walk w = {.writing = true};
    if (walk_tree(d->tmp_path, &w) != 0) {
        free_manifest(&w);
        return fail(err, errlen, d->tmp_path, errno ? errno : EIO);
    }
    if (w.nlisted) qsort(w.listed, w.nlisted, sizeof *w.listed, by_text);
    FILE *m = od_fopen(d, OD_MARKER, err, errlen);
    if (m) {
        fputs(OD_MARKER_TEXT OD_MANIFEST "\n", m);
        for (size_t i = 0; i < w.nlisted; i++) fprintf(m, "%s\n", w.listed[i]);
    }
    free_manifest(&w);
    if (!m || od_fclose(m, OD_MARKER, err, errlen) < 0) return -1;
    char mark[sizeof d->tmp_path + 40];
    snprintf(mark, sizeof mark, "%s/%s", d->tmp_path, OD_TEMP_MARKER);
    unlink(mark); /* last: a run killed before here leaves a temporary that is still marked ours */
    /* checked again: something may have appeared at DIR while the command ran */
    if (replaceable(d->final_path, err, errlen) < 0) return -1;
    char aside[sizeof d->tmp_path + 8];
    snprintf(aside, sizeof aside, "%s.old", d->tmp_path);
    struct stat st;
    int replacing = lstat(d->final_path, &st) == 0;
    if (replacing && rename(d->final_path, aside) != 0) return fail(err, errlen, d->final_path, errno);
    if (rename(d->tmp_path, d->final_path) != 0) {
        int e = errno;
        if (replacing) rename(aside, d->final_path);
        return fail(err, errlen, d->final_path, e);
    }
    d->tmp_path[0] = '\0';
    if (replacing && od_remove_tree(aside) != 0) return fail(err, errlen, aside, errno);
    return 0;
}

void od_abort(outdir *d)
{
    if (d->tmp_path[0]) {
        od_remove_tree(d->tmp_path);
        od_unmake_parents(d->final_path, &d->made); /* and the folders made for it */
    }
    d->tmp_path[0] = '\0';
}

int of_check(const char *path, char *err, size_t errlen)
{
    if (strlen(path) + 32 > sizeof ((outfile *)0)->path) { /* with of_open's ".tmp.PID" */
        snprintf(err, errlen, "%.200s...: path too long", path);
        return -1;
    }
    /* a name that can only be a directory (DIR/, DIR/., DIR/..) passed, the whole job ran, and
     * then the rename onto it failed, leaving the folders made for it (bad-input campaign) */
    size_t len = strlen(path);
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    if (len == 0 || path[len - 1] == '/' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
        snprintf(err, errlen, "%s: names a directory, not a file; give the file's own name (such as DIR/table.csv)",
                 path);
        return -1;
    }
    if (names_fit(path, strlen(".tmp.") + 10, "\".tmp.PID\"", err, errlen) < 0) return -1;
    /* nothing made: the caller makes the folders PATH needs when it writes it, after the work */
    return writable_above(path, err, errlen);
}

FILE *of_open(outfile *o, const char *path, char *err, size_t errlen)
{
    o->f = NULL;
    if (snprintf(o->path, sizeof o->path, "%s", path) >= (int)sizeof o->path ||
        snprintf(o->tmp_path, sizeof o->tmp_path, "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof o->tmp_path) {
        snprintf(err, errlen, "%.200s...: path too long", path);
        return NULL;
    }
    o->f = fopen(o->tmp_path, "w");
    if (!o->f) snprintf(err, errlen, "%s: %s", o->tmp_path, strerror(errno));
    return o->f;
}

void of_abort(outfile *o)
{
    if (!o->f) return;
    fclose(o->f);
    o->f = NULL;
    unlink(o->tmp_path);
}

int of_commit(outfile *o, char *err, size_t errlen)
{
    FILE *f = o->f;
    o->f = NULL;
    if (od_fclose(f, o->path, err, errlen) < 0) {
        unlink(o->tmp_path);
        return -1;
    }
    if (rename(o->tmp_path, o->path) != 0) {
        int e = errno;
        unlink(o->tmp_path);
        return fail(err, errlen, o->path, e);
    }
    return 0;
}
