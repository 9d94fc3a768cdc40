/* An output directory that appears whole or not at all: everything is written into
 * DIR.tmp.<pid>, which replaces DIR only when the command succeeds (io/results.h builds one
 * run's files on it). servesim replaces only what it wrote: DIR must not exist, be an empty
 * directory, or be a result servesim wrote, whose marker file (OD_MARKER) lists every path
 * the commit put there, with nothing added since; anything else (a file, a folder of the
 * user's, a result the user added a file to) is refused. Temporaries left by killed runs are
 * removed only when they hold servesim's own marker. */
#ifndef SERVESIM_IO_OUTDIR_H
#define SERVESIM_IO_OUTDIR_H

#include <stddef.h>
#include <stdio.h>

/* The folders od_make_parents made, each by the length of its path's prefix, in the order
 * made (past the 256th, not recorded: left, never removed). */
typedef struct od_made {
    size_t at[256];
    size_t n;
} od_made;

typedef struct outdir {
    char final_path[2048];
    char tmp_path[2100];
    od_made made; /* the folders above final_path that od_open made, which od_abort removes */
} outdir;

/* The file in every result directory that says servesim wrote it, and may replace it. */
#define OD_MARKER ".servesim-result"

/* Whether DIR may take a result: its name fits, and it is absent, an empty directory, or a
 * result servesim wrote that holds nothing else (the marker lists what servesim wrote; a file
 * added since, even the scenario itself, makes it the user's). -1 with "DIR: reason" in ERR.
 * It also makes sure the folder above DIR takes new entries (a directory made there and removed
 * at once). Nothing is left: commands call it before their work. */
int od_check(const char *dir, char *err, size_t errlen);
/* Whether DIR may take a result of a command that reads INPUT (WHAT names it: "the trace",
 * "--measured"): -1 with "DIR holds WHAT INPUT, ..." in ERR when INPUT is DIR or lies inside
 * it, as replacing DIR would delete what the command reads (a run's requests.csv given back as
 * a trace or measured run, to the run's own folder). An INPUT or DIR not there passes: its
 * reader or od_check answers for it. */
int od_check_input(const char *dir, const char *input, const char *what, char *err, size_t errlen);
/* Creates the temporary directory (and DIR's parents). -1 with "PATH: reason" in ERR, also
 * when DIR is something servesim may not replace. */
int od_open(outdir *d, const char *dir, char *err, size_t errlen);
/* TMP/NAME into BUF; -1 when it does not fit. */
int od_path(const outdir *d, const char *name, char *buf, size_t len);
/* Opens TMP/NAME for writing; NULL with "PATH: reason" in ERR. */
FILE *od_fopen(const outdir *d, const char *name, char *err, size_t errlen);
/* Closes F, reporting any write error on it. */
int od_fclose(FILE *f, const char *name, char *err, size_t errlen);
/* Puts the directory in place, replacing an older DIR only once the new one is complete. */
int od_commit(outdir *d, char *err, size_t errlen);
/* Removes the temporary directory and everything in it; a no-op after od_commit. */
void od_abort(outdir *d);
/* A single file that appears whole or not at all: written to PATH.tmp.<pid> and renamed
 * into place by of_commit (cost tables, generated sources). */
typedef struct outfile {
    char path[4096];
    char tmp_path[4200];
    FILE *f;
} outfile;

/* Whether a file can be written at PATH, before the work that makes it: a name that is not
 * only a directory's (none ending in '/', '.' or '..'), and a directory made and removed at
 * once in the nearest folder above PATH that exists. Nothing is left: the caller
 * makes PATH's folders (od_make_parents) when the work is done. -1 with "PATH: reason" in ERR. */
int of_check(const char *path, char *err, size_t errlen);
/* Opens the temporary file of PATH for writing; NULL with "PATH: reason" in ERR. */
FILE *of_open(outfile *o, const char *path, char *err, size_t errlen);
/* Closes the file and renames it onto PATH; on any failure removes it and returns -1 with
 * "PATH: reason" in ERR. */
int of_commit(outfile *o, char *err, size_t errlen);
/* Closes the file and removes it: nothing is written at PATH. */
void of_abort(outfile *o);

/* mkdir -p of every directory above PATH (not PATH itself). MADE (may be NULL) gets the
 * folders it made, for od_unmake_parents when what comes next fails. -1 with "DIR: reason"
 * in ERR, and what it made removed. */
int od_make_parents(const char *path, od_made *made, char *err, size_t errlen);
/* Removes the folders above PATH that od_make_parents recorded in MADE (and forgets them),
 * deepest first and only while empty: a failed write leaves no folder behind. */
void od_unmake_parents(const char *path, od_made *made);
/* rm -r PATH (for callers that prune what they no longer want before committing). */
int od_remove_tree(const char *path);

#endif
