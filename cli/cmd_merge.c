/* `servesim merge`: joins the sweep.csv of every shard of one sweep into one, in point order,
 * after checking that together they hold every point exactly once, each row that point's in the
 * sweep made again from its command line; their cost_models.csv, repeats.csv (--repeat) and
 * points/ (--keep-runs) too, and draws the sweep's plots from that sweep. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "io/outdir.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "study/study.h"
#include "study/sweep.h"

static const char merge_usage[] =
    "usage: servesim merge OUT_DIR SHARD_DIR...\n"
    "  Joins the shards of one sweep (each written by `servesim sweep --shard K/N --out\n"
    "  SHARD_DIR`) into OUT_DIR/sweep.csv, rows in point order, byte for byte what the sweep\n"
    "  without --shard writes, with its cost_models.csv and plots (drawn from the first shard's\n"
    "  command line, parsed again: run it where the shards ran). Fails when a point is missing\n"
    "  or in two shards, or a row is not its point's in that sweep. Their repeats.csv\n"
    "  (--repeat) and points/ (--keep-runs) are joined likewise.\n"
    "  Shards of `servesim plan --shard K/N` (a plan-shard.json in each) are joined into what\n"
    "  the plan without --shard writes; run it where the shards ran (their scenario is read\n"
    "  again).\n";

typedef struct merged {
    int total, repeat;
    char id[64];             /* the sweep identity every shard must carry */
    char *header;
    int num_fields, first_metric;
    char **rows;             /* by point index */
    char (*where)[1100];     /* "DIR/sweep.csv:LINE" of each row */
    const char **dir_of;     /* the shard each row came from */
    int repeats_field;       /* sweep.csv's "repeats" column (--repeat > 1) */
    char *rep_header;        /* repeats.csv's (--repeat > 1) */
    int rep_fields;
    char **rep_rows;         /* each point's runs in repeats.csv, one line each, in order */
    size_t *rep_len;         /* their length */
    int *rep_count;
    int with_runs, without_runs;           /* shards with points/ (--keep-runs) and without */
    const char *a_with_runs, *a_without_runs;
    char **cost_rows;        /* cost_models.csv's, by point index */
    char no_costs[1200];     /* why no cost_models.csv is written ("" when one is) */
    bool have_plan;          /* the sweep made again from the first shard's command line */
    sweep_plan plan;         /* its points check every row, and it draws the plots */
    char no_plan[2400];      /* why there is none ("" when there is) */
} merged;

/* "points_total", "repeat" and "sweep_id" from DIR/sweep.json, read with jansson: any valid
 * JSON layout (a file reformatted by jq included), and a parse error named by line. */
static int read_json(const char *dir, int *total, int *repeat, char *id, size_t idlen, char *err, size_t errlen)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/sweep.json", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open (is %s a sweep's output directory?)", path, dir);
        return -1;
    }
    json_error_t je;
    json_t *doc = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
    fclose(f);
    if (!doc) {
        snprintf(err, errlen, "%s:%d: not valid JSON: %s", path, je.line, je.text);
        return -1;
    }
    json_t *t = json_object_get(doc, "points_total"), *r = json_object_get(doc, "repeat");
    const char *hex = json_string_value(json_object_get(doc, "sweep_id"));
    int status = -1;
    if (!json_is_object(doc))
        snprintf(err, errlen, "%s: not a sweep.json (a JSON object is expected)", path);
    else if (!hex || !*hex || strspn(hex, "0123456789abcdef") != strlen(hex) || strlen(hex) >= idlen)
        snprintf(err, errlen, "%s: no sweep_id: a shard written by an older servesim, which merge cannot tell "
                              "apart from another sweep's; rerun it", path);
    /* bounded as 64-bit integers: a points_total past an int once wrapped */
    else if (!json_is_integer(t) || !json_is_integer(r) || json_integer_value(t) < 1 || json_integer_value(r) < 1 ||
             json_integer_value(t) > SWEEP_MAX_RUNS / json_integer_value(r))
        snprintf(err, errlen, "%s: no points_total and repeat (at most %d runs together) in it", path, SWEEP_MAX_RUNS);
    else {
        *total = (int)json_integer_value(t);
        *repeat = (int)json_integer_value(r);
        snprintf(id, idlen, "%s", hex);
        status = 0;
    }
    json_decref(doc);
    return status;
}

static bool replan(const merged *m, const char *dir, sweep_plan *p, char *why, size_t len);

static int check_plan(merged *m, const char *dir, char *err, size_t errlen)
{
    int total, repeat;
    char id[64];
    if (read_json(dir, &total, &repeat, id, sizeof id, err, errlen) < 0) return -1;
    if (m->total >= 0 && strcmp(id, m->id) != 0) {
        snprintf(err, errlen, "%s/sweep.json: sweep %s, but the first shard is of sweep %s: shards of two different "
                              "sweeps (another scenario, --vary, --point or --repeat)", dir, id, m->id);
        return -1;
    }
    if (m->total < 0) {
        snprintf(m->id, sizeof m->id, "%s", id);
        m->total = total;
        m->repeat = repeat;
        m->have_plan = replan(m, dir, &m->plan, m->no_plan, sizeof m->no_plan);
        if (m->have_plan && (sweep_num_points(&m->plan) != total || m->plan.repeat != repeat)) {
            /* its identity matched: only a sweep.json edited by hand gets here */
            snprintf(err, errlen, "%s/sweep.json: %d points x %d repeats, but its command line makes %d x %d", dir,
                     total, repeat, sweep_num_points(&m->plan), m->plan.repeat);
            return -1;
        }
        m->rows = calloc((size_t)total, sizeof *m->rows);
        m->where = calloc((size_t)total, sizeof *m->where);
        m->cost_rows = calloc((size_t)total, sizeof *m->cost_rows);
        m->dir_of = calloc((size_t)total, sizeof *m->dir_of);
        m->rep_rows = calloc((size_t)total, sizeof *m->rep_rows);
        m->rep_len = calloc((size_t)total, sizeof *m->rep_len);
        m->rep_count = calloc((size_t)total, sizeof *m->rep_count);
        if (!m->rows || !m->where || !m->cost_rows || !m->dir_of || !m->rep_rows || !m->rep_len || !m->rep_count) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
    } else if (total != m->total || repeat != m->repeat) {
        snprintf(err, errlen, "%s/sweep.json: %d points x %d repeats, but the first shard has %d x %d: not one sweep",
                 dir, total, repeat, m->total, m->repeat);
        return -1;
    }
    return 0;
}

enum { MAX_FIELDS = 4096 };

/* The fields of LINE (a row as csv_write_field wrote it; a label may be quoted and hold
 * commas): their count, and in START[i] (for i < MAX_FIELDS; START may be NULL) where field
 * i begins. */
static int split_row(const char *line, const char **start)
{
    int n = 1;
    bool quoted = false;
    if (start) start[0] = line;
    for (const char *c = line; *c && *c != '\n'; c++) {
        if (*c == '"') quoted = !quoted;
        else if (*c == ',' && !quoted && n++ < MAX_FIELDS && start) start[n - 1] = c + 1;
    }
    return n;
}

static int count_fields(const char *line) { return split_row(line, NULL); }

/* A row of the sweep's form: a line end (a missing one glued two rows into one), the
 * header's number of fields (NUM_FIELDS), and a number or nothing in every column from
 * FIRST_NUMBER on (sweep.csv's metrics from the header's "completed", repeats.csv's from
 * "repeat"; never quoted). */
static int check_fields(const char *line, int num_fields, int first_number, const char *where, char *err,
                        size_t errlen)
{
    size_t len = strlen(line);
    if (len == 0 || line[len - 1] != '\n') {
        snprintf(err, errlen, "%s: no line end: the file was cut short", where);
        return -1;
    }
    const char *start[MAX_FIELDS]; /* 32 KiB on the stack */
    int fields = split_row(line, start);
    if (fields != num_fields || fields > MAX_FIELDS) {
        snprintf(err, errlen, "%s: %d fields, the header has %d", where, fields, num_fields);
        return -1;
    }
    for (int i = first_number; i < fields; i++) {
        const char *c = start[i], *next = c + strcspn(c, ",\n");
        char *end;
        if (c == next) continue; /* a number the sweep has none of (no request finished): sumf_format */
        double v = strtod(c, &end);
        if (end == c || end != next) {
            snprintf(err, errlen, "%s: field %d (%.*s) is not a number", where, i + 1, (int)(next - c), c);
            return -1;
        }
        /* the sweep writes a number it has none of as an empty field, never nan or inf */
        if (!isfinite(v)) {
            snprintf(err, errlen, "%s: field %d (%.*s) is not a finite number", where, i + 1, (int)(next - c), c);
            return -1;
        }
    }
    return 0;
}

/* Whether LINE, a row of point POINT, starts as the sweep writes that point's row (its index,
 * label and, with VALUES, the varied keys' values: its first FIELDS fields): a row of another
 * sweep copied into a shard once merged under this sweep's header (bad-input campaign). */
static int check_point(const merged *m, int point, const char *line, int fields, bool values, const char *where,
                       char *err, size_t errlen)
{
    char *want = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&want, &len);
    if (!f) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    sweep_write_row_start(f, &m->plan, point, values);
    fclose(f);
    bool same = want && strncmp(line, want, len) == 0 && line[len] == ',';
    if (!same) {
        const char *start[MAX_FIELDS];
        int n = split_row(line, start);
        const char *cut = n > fields && fields < MAX_FIELDS ? start[fields] - 1 : line + strcspn(line, "\n");
        snprintf(err, errlen, "%s: %.*s is not point %d of this sweep, which is %s (a row of another sweep?)", where,
                 (int)(cut - line) > 300 ? 300 : (int)(cut - line), line, point, want ? want : "?");
    }
    free(want);
    return same ? 0 : -1;
}

static int add_row(merged *m, char *line, const char *dir, const char *where, char *err, size_t errlen)
{
    if (check_fields(line, m->num_fields, m->first_metric, where, err, errlen) < 0) return -1;
    char *end;
    long point = strtol(line, &end, 10);
    if (end == line || *end != ',' || point < 0 || point >= m->total) {
        snprintf(err, errlen, "%s: expected a point index in [0, %d) first", where, m->total);
        return -1;
    }
    if (m->rows[point]) {
        snprintf(err, errlen, "%s: point %ld is also in %s", where, point, m->where[point]);
        return -1;
    }
    if (m->have_plan && check_point(m, (int)point, line, 2 + m->plan.ncolumns, true, where, err, errlen) < 0)
        return -1;
    m->rows[point] = line;
    m->dir_of[point] = dir;
    snprintf(m->where[point], sizeof m->where[point], "%s", where);
    return 0;
}

/* The first shard's header against the one its sweep writes: another sweep's sweep.csv (other
 * varied keys, other percentiles) is refused before its rows. */
static int check_header(const merged *m, const char *where, char *err, size_t errlen)
{
    if (!m->have_plan) return 0;
    char *want = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&want, &len);
    if (!f) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    sweep_write_csv_header(f, &m->plan);
    fclose(f);
    int status = want && strcmp(want, m->header) == 0 ? 0 : -1;
    if (status < 0) snprintf(err, errlen, "%s: not the columns this sweep writes (a sweep.csv of another sweep?)", where);
    free(want);
    return status;
}

static int read_csv(merged *m, const char *dir, char *err, size_t errlen)
{
    char path[1100], where[1100];
    snprintf(path, sizeof path, "%s/sweep.csv", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open", path);
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    int status = 0;
    for (int lineno = 1; status == 0 && getline(&line, &cap, f) >= 0; lineno++) {
        snprintf(where, sizeof where, "%.1087s:%d", path, lineno); /* a long path cut, never the line */
        if (lineno == 1 && !m->header) {
            m->header = line;
            line = NULL, cap = 0;
            m->num_fields = count_fields(m->header);
            const char *completed = strstr(m->header, ",completed,");
            m->first_metric = completed ? count_fields(m->header) - count_fields(completed + 1) : m->num_fields;
            const char *repeats = strstr(m->header, ",repeats,");
            m->repeats_field = repeats ? count_fields(m->header) - count_fields(repeats + 1) : -1;
            if (!completed) {
                snprintf(err, errlen, "%s: not a sweep.csv header (no completed column)", where);
                status = -1;
            } else if (m->repeat > 1 && !repeats) {
                snprintf(err, errlen, "%s: no repeats column, though the sweep ran %d repeats", where, m->repeat);
                status = -1;
            } else {
                status = check_header(m, where, err, errlen);
            }
        } else if (lineno == 1 && strcmp(line, m->header) != 0) {
            snprintf(err, errlen, "%s: the columns differ from the first shard's", where);
            status = -1;
        } else if (lineno > 1 && (status = add_row(m, line, dir, where, err, errlen)) == 0) {
            line = NULL, cap = 0;
        }
    }
    free(line);
    fclose(f);
    return status;
}

/* One row of DIR/repeats.csv into M: a run of a point whose sweep.csv row came from DIR, after
 * that point's runs before it (the sweep writes each point's runs together, numbered 1, 2, ...);
 * LAST is the point of the row before. */
static int add_run(merged *m, const char *dir, const char *line, int *last, const char *where, char *err,
                   size_t errlen)
{
    if (check_fields(line, m->rep_fields, 2, where, err, errlen) < 0) return -1;
    char *end;
    long point = strtol(line, &end, 10);
    if (end == line || *end != ',' || point < 0 || point >= m->total || m->dir_of[point] != dir) {
        snprintf(err, errlen, "%s: expected the index of a point in %s/sweep.csv first", where, dir);
        return -1;
    }
    if (m->have_plan && check_point(m, (int)point, line, 2, false, where, err, errlen) < 0) return -1;
    const char *start[MAX_FIELDS];
    split_row(line, start);
    long run = strtol(start[2], NULL, 10);
    if (run != m->rep_count[point] + 1 || (m->rep_count[point] > 0 && *last != point)) {
        snprintf(err, errlen, "%s: run %ld of point %ld, after %d of its runs%s: the sweep writes each point's runs "
                 "together, numbered from 1", where, run, point, m->rep_count[point],
                 m->rep_count[point] > 0 && *last != point ? " and another point's" : "");
        return -1;
    }
    size_t had = m->rep_len[point], len = strlen(line);
    char *grown = realloc(m->rep_rows[point], had + len + 1);
    if (!grown) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    memcpy(grown + had, line, len + 1);
    m->rep_rows[point] = grown;
    m->rep_len[point] = had + len;
    m->rep_count[point]++;
    *last = (int)point;
    return 0;
}

/* DIR/repeats.csv, which a shard of a sweep of --repeat N > 1 writes as the sweep without
 * --shard does (every run of its points): its header the first shard's, and with the plan
 * the one that sweep writes; each point's runs as many as its sweep.csv row's repeats column
 * says. merge once left it out, and the merged folder had no runs (bad-input campaign). */
static int read_repeats(merged *m, const char *dir, char *err, size_t errlen)
{
    char path[1100], where[1100];
    snprintf(path, sizeof path, "%s/repeats.csv", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open (a shard of a sweep with --repeat %d writes one)", path, m->repeat);
        return -1;
    }
    char *line = NULL, *want = NULL;
    size_t cap = 0, wantlen = 0;
    int status = 0, last = -1, lineno = 1;
    for (; status == 0 && getline(&line, &cap, f) >= 0; lineno++) {
        snprintf(where, sizeof where, "%.1087s:%d", path, lineno); /* a long path cut, never the line */
        if (lineno > 1) {
            status = add_run(m, dir, line, &last, where, err, errlen);
        } else if (m->rep_header) {
            if (strcmp(line, m->rep_header) != 0) {
                snprintf(err, errlen, "%s: the columns differ from the first shard's", where);
                status = -1;
            }
        } else {
            FILE *w = m->have_plan ? open_memstream(&want, &wantlen) : NULL;
            if (w) {
                sweep_write_repeats_header(w, &m->plan);
                fclose(w);
            }
            if (m->have_plan && (!want || strcmp(want, line) != 0)) {
                snprintf(err, errlen, "%s: not the columns this sweep writes (a repeats.csv of another sweep?)", where);
                status = -1;
            } else if (strncmp(line, "point,label,repeat,seed,", 24) != 0) {
                snprintf(err, errlen, "%s: not a repeats.csv header (point,label,repeat,seed first)", where);
                status = -1;
            } else {
                m->rep_header = line, line = NULL, cap = 0;
                m->rep_fields = count_fields(m->rep_header);
            }
        }
    }
    free(line);
    free(want);
    fclose(f);
    if (status == 0 && lineno == 1) {
        snprintf(err, errlen, "%s: empty (no header)", path);
        status = -1;
    }
    for (int i = 0; status == 0 && i < m->total; i++) {
        if (m->dir_of[i] != dir) continue;
        const char *start[MAX_FIELDS];
        split_row(m->rows[i], start);
        long want_runs = strtol(start[m->repeats_field], NULL, 10);
        if (m->rep_count[i] != want_runs) {
            snprintf(err, errlen, "%s: %d runs of point %d, where %s says it has %ld", path, m->rep_count[i], i,
                     m->where[i], want_runs);
            status = -1;
        }
    }
    return status;
}

/* DIR/points/, which a shard of --keep-runs writes: one folder a point of the shard, named as
 * the sweep names it (sweep_run_name), and nothing else. merge once left it out (bad-input
 * campaign); the folders are copied when every shard has one (see write_merged). */
static int check_runs(merged *m, const char *dir, char *err, size_t errlen)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/points", dir);
    DIR *d = opendir(path);
    if (!d && errno == ENOENT) {
        if (!m->without_runs++) m->a_without_runs = dir;
        return 0;
    }
    if (!d) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (!m->with_runs++) m->a_with_runs = dir;
    int status = 0;
    struct dirent *e;
    while (status == 0 && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char *end, name[32] = "", run[1400];
        long point = strtol(e->d_name, &end, 10);
        if (point >= 0 && point < m->total && !*end) sweep_run_name((int)point, name, sizeof name);
        struct stat st;
        snprintf(run, sizeof run, "%s/%s", path, e->d_name);
        if (point < 0 || point >= m->total || *end || strcmp(name, e->d_name) != 0 || m->dir_of[point] != dir ||
            stat(run, &st) != 0 || !S_ISDIR(st.st_mode)) {
            snprintf(err, errlen, "%s: not the run folder of a point in %s/sweep.csv", run, dir);
            status = -1;
        }
    }
    closedir(d);
    for (int i = 0; status == 0 && i < m->total; i++) {
        char name[32], run[1400];
        struct stat st;
        sweep_run_name(i, name, sizeof name);
        snprintf(run, sizeof run, "%s/%s", path, name);
        if (m->dir_of[i] == dir && stat(run, &st) != 0) {
            snprintf(err, errlen, "%s: missing: point %d ran in this shard, which kept its runs (--keep-runs)", run, i);
            status = -1;
        }
    }
    return status;
}

#define COST_MODELS_HEADER "point,label,cost_model,cost_source\n"

/* DIR/cost_models.csv's rows into M by point (the sweep wrote one a point: see cmd_sweep.c).
 * A shard without one (an older servesim's), or one not of that form, leaves the merge
 * without it, and M->no_costs says why: sweep.csv is the result, this its annotation. */
static void read_cost_models(merged *m, const char *dir)
{
    if (m->no_costs[0]) return;
    char path[1100];
    snprintf(path, sizeof path, "%s/cost_models.csv", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(m->no_costs, sizeof m->no_costs, "%s: cannot open", path);
        return;
    }
    char *line = NULL;
    size_t cap = 0;
    for (int lineno = 1; !m->no_costs[0] && getline(&line, &cap, f) >= 0; lineno++) {
        char *end;
        long point = lineno > 1 ? strtol(line, &end, 10) : 0;
        if (lineno == 1 ? strcmp(line, COST_MODELS_HEADER) != 0
                        : end == line || *end != ',' || point < 0 || point >= m->total || m->cost_rows[point] ||
                              !m->rows[point] || line[strlen(line) - 1] != '\n')
            snprintf(m->no_costs, sizeof m->no_costs, "%s:%d: not a row of this shard's points", path, lineno);
        else if (lineno > 1)
            m->cost_rows[point] = line, line = NULL, cap = 0;
    }
    free(line);
    fclose(f);
}

static int check_complete(const merged *m, char *err, size_t errlen)
{
    int missing = 0;
    size_t used = 0;
    for (int i = 0; i < m->total; i++) {
        if (m->rows[i]) continue;
        if (missing++ < 10 && used < errlen)
            used += (size_t)snprintf(err + used, errlen - used, "%s%d", missing > 1 ? ", " : "points missing from every shard: ", i);
    }
    if (missing > 10 && used < errlen) snprintf(err + used, errlen - used, " and %d more", missing - 10);
    if (missing && used < errlen) snprintf(err + strlen(err), errlen - strlen(err), " (the sweep has %d)", m->total);
    return missing ? -1 : 0;
}

/* The sweep's plan made again from the first shard's command line (its sweep.json's args, run
 * where it ran), for the rows' checks and the plots: false with why not in WHY, which leaves
 * the merge without them. */
static bool replan(const merged *m, const char *dir, sweep_plan *p, char *why, size_t len)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/sweep.json", dir);
    json_t *doc = json_load_file(path, 0, NULL), *args = json_object_get(doc, "args");
    int argc = (int)json_array_size(args) + 1;
    char **argv = calloc((size_t)argc + 1, sizeof *argv);
    bool ok = argv && json_is_array(args);
    if (!ok) snprintf(why, len, "%s holds no command line (a shard of an older servesim)", path);
    for (int i = 1; ok && i < argc; i++)
        if (!(argv[i] = (char *)json_string_value(json_array_get(args, (size_t)i - 1)))) {
            snprintf(why, len, "%s: args must be strings", path);
            ok = false;
        }
    char reason[1200], id[32];
    if (ok) {
        argv[0] = "sweep";
        /* the parser's own words (and the sweep's usage) go to stderr: kept for WHY instead,
         * since the merge goes on without plots */
        fflush(stderr);
        FILE *said = tmpfile();
        int saved = said ? dup(2) : -1;
        bool quiet = saved >= 0 && dup2(fileno(said), 2) >= 0;
        int rc = sweep_plan_from_args(argc, argv, p, reason, sizeof reason);
        if (quiet) {
            fflush(stderr);
            dup2(saved, 2);
            char line[sizeof reason] = "";
            rewind(said);
            if (fgets(line, sizeof line, said) && rc < 0) {
                line[strcspn(line, "\n")] = 0;
                snprintf(reason, sizeof reason, "%s", strncmp(line, "servesim: ", 10) == 0 ? line + 10 : line);
            }
        }
        if (saved >= 0) close(saved);
        if (said) fclose(said);
        if (rc < 0) {
            snprintf(why, len, "%s's command line: %s", path, reason);
            sweep_plan_free(p);
            ok = false;
        }
    }
    if (ok && strcmp((snprintf(id, sizeof id, "%016llx", (unsigned long long)sweep_identity(p)), id), m->id) != 0) {
        snprintf(why, len, "%s's command line makes sweep %s here, not %s: the scenario (or a file it names) changed "
                 "since the shard ran, or this is not where it ran (%s)", path, id, m->id,
                 json_string_value(json_object_get(doc, "cwd")) ? json_string_value(json_object_get(doc, "cwd")) : "?");
        sweep_plan_free(p);
        ok = false;
    }
    free(argv);
    json_decref(doc);
    return ok;
}

/* The file FROM copied byte for byte to TO. -1 with "PATH: reason" in ERR (here and below, a path
 * is cut to 1,900 characters so that the reason after it fits merge's 2,048-byte message). */
static int copy_file(const char *from, const char *to, char *err, size_t errlen)
{
    FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
    if (!in || !out) {
        snprintf(err, errlen, "%.1900s: %s", in ? to : from, strerror(errno));
        if (in) fclose(in);
        return -1;
    }
    char buf[65536];
    size_t n;
    bool wrote = true;
    while (wrote && (n = fread(buf, 1, sizeof buf, in)) > 0) wrote = fwrite(buf, 1, n, out) == n;
    bool read = !ferror(in);
    fclose(in);
    if (fclose(out) != 0) wrote = false;
    if (read && wrote) return 0;
    snprintf(err, errlen, "%.1900s: cannot %s", read ? to : from, read ? "write" : "read");
    return -1;
}

/* The folder FROM copied to TO (made here): its files byte for byte, its folders likewise;
 * anything else (a link, a device) is refused, since the sweep writes none. */
static int copy_tree(const char *from, const char *to, char *err, size_t errlen)
{
    if (mkdir(to, 0777) != 0) {
        snprintf(err, errlen, "%s: %s", to, strerror(errno));
        return -1;
    }
    DIR *d = opendir(from);
    if (!d) {
        snprintf(err, errlen, "%s: %s", from, strerror(errno));
        return -1;
    }
    int status = 0;
    struct dirent *e;
    while (status == 0 && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char src[4200], dst[4200];
        struct stat st;
        if ((size_t)snprintf(src, sizeof src, "%s/%s", from, e->d_name) >= sizeof src ||
            (size_t)snprintf(dst, sizeof dst, "%s/%s", to, e->d_name) >= sizeof dst) {
            snprintf(err, errlen, "%s/%s: the path is too long", from, e->d_name);
            status = -1;
        } else if (lstat(src, &st) != 0) {
            snprintf(err, errlen, "%.1900s: %s", src, strerror(errno));
            status = -1;
        } else if (S_ISDIR(st.st_mode)) {
            status = copy_tree(src, dst, err, errlen);
        } else if (S_ISREG(st.st_mode)) {
            status = copy_file(src, dst, err, errlen);
        } else {
            snprintf(err, errlen, "%.1900s: neither a file nor a folder, which a sweep's run never writes", src);
            status = -1;
        }
    }
    closedir(d);
    return status;
}

/* OUT/points/ from every shard's points/ (--keep-runs), each point's run folder copied whole:
 * the shards are left as they were. None when no shard has one; when only some have, a note
 * says so and there is none, as for cost_models.csv. */
static int write_runs(const merged *m, const outdir *od, char *err, size_t errlen)
{
    if (!m->with_runs) return 0;
    if (m->without_runs) {
        printf("note: no points/: %s has none (a shard run without --keep-runs), %s has\n", m->a_without_runs,
               m->a_with_runs);
        return 0;
    }
    char to[sizeof od->tmp_path + 64], from[1400], name[32];
    snprintf(to, sizeof to, "%s/points", od->tmp_path);
    if (mkdir(to, 0777) != 0) {
        snprintf(err, errlen, "%.1900s: %s", to, strerror(errno));
        return -1;
    }
    for (int i = 0; i < m->total; i++) {
        sweep_run_name(i, name, sizeof name);
        snprintf(from, sizeof from, "%s/points/%s", m->dir_of[i], name);
        snprintf(to, sizeof to, "%s/points/%s", od->tmp_path, name);
        if (copy_tree(from, to, err, errlen) < 0) return -1;
    }
    return 0;
}

static int write_merged(merged *m, const char *out, char *err, size_t errlen)
{
    outdir od;
    if (od_open(&od, out, err, errlen) < 0) return -1;
    FILE *f = od_fopen(&od, "sweep.csv", err, errlen);
    int status = f ? 0 : -1;
    if (f) {
        fputs(m->header, f);
        for (int i = 0; i < m->total; i++) fputs(m->rows[i], f);
        status = od_fclose(f, "sweep.csv", err, errlen);
    }
    if (status == 0 && m->repeat > 1) { /* every run, in the sweep's order: by point, then seed */
        if (!(f = od_fopen(&od, "repeats.csv", err, errlen))) status = -1;
        if (f) {
            fputs(m->rep_header, f);
            for (int i = 0; i < m->total; i++)
                if (m->rep_rows[i]) fputs(m->rep_rows[i], f);
            status = od_fclose(f, "repeats.csv", err, errlen);
        }
    }
    if (status == 0) status = write_runs(m, &od, err, errlen);
    if (status == 0 && (f = od_fopen(&od, "sweep.json", err, errlen))) {
        json_t *doc = json_pack("{s:i, s:i, s:i, s:i, s:s, s:b}", "points_total", m->total, "shard", 1, "num_shards", 1,
                                "repeat", m->repeat, "sweep_id", m->id, "merged_from_shards", 1);
        if (!doc || json_write(f, doc) < 0) snprintf(err, errlen, "%s/sweep.json: cannot write", out), status = -1;
        json_decref(doc);
        if (od_fclose(f, "sweep.json", err, errlen) < 0) status = -1;
    } else {
        status = -1;
    }
    for (int i = 0; !m->no_costs[0] && i < m->total; i++)
        if (!m->cost_rows[i]) snprintf(m->no_costs, sizeof m->no_costs, "no shard's cost_models.csv has point %d", i);
    if (status == 0 && !m->no_costs[0] && (f = od_fopen(&od, "cost_models.csv", err, errlen))) {
        fputs(COST_MODELS_HEADER, f);
        for (int i = 0; i < m->total; i++)
            if (m->cost_rows[i]) fputs(m->cost_rows[i], f);
        status = od_fclose(f, "cost_models.csv", err, errlen);
    } else if (status == 0 && !m->no_costs[0]) {
        status = -1;
    } else if (status == 0) {
        printf("note: no cost_models.csv: %s\n", m->no_costs);
    }
    /* the plots the sweep without --shard draws, from the merged sweep.csv */
    if (status == 0 && m->have_plan) status = study_sweep_plots(&m->plan, od.tmp_path, err, errlen);
    else if (status == 0) printf("note: no plots, and each row's point not checked against the sweep's: %s\n", m->no_plan);
    if (status == 0) status = od_commit(&od, err, errlen);
    if (status < 0) od_abort(&od);
    return status;
}

/* merge takes only directories; an option (a typo such as --out) is refused by name. */
static int count_arg(void *ctx, const char *arg)
{
    (void)arg;
    ++*(int *)ctx;
    return 0;
}

/* The longest shard folder: its files' names ("/cost_models.csv", "points/NNN/...") fit the
 * paths built from it. */
#define MERGE_SHARD_PATH_MAX 1000

/* OUT may take the merged result (io/outdir.h) and neither is nor holds any of the SHARDS:
 * merging into a shard replaced it with the merge, and the shard was gone. -1 with the reason
 * in ERR. */
static int check_out(const char *out, char **shards, int n, char *err, size_t errlen)
{
    char why[1600], what[32];
    if (od_check(out, why, sizeof why) < 0) {
        snprintf(err, errlen, "merge OUT_DIR %s", why);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        /* the shard's files are named in 1,100-byte paths: a longer folder was cut, and another
         * file opened */
        if (strlen(shards[i]) > MERGE_SHARD_PATH_MAX) {
            snprintf(err, errlen, "merge SHARD_DIR %.60s...: a path of %zu characters; at most %d", shards[i],
                     strlen(shards[i]), MERGE_SHARD_PATH_MAX);
            return -1;
        }
        snprintf(what, sizeof what, "shard %d,", i + 1);
        if (od_check_input(out, shards[i], what, why, sizeof why) < 0) {
            snprintf(err, errlen, "merge OUT_DIR %s", why);
            return -1;
        }
    }
    return 0;
}

int cmd_merge(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(merge_usage, stdout);
        return EXIT_OK;
    }
    if (cli_parse(argc, argv, merge_usage, NULL, 0, NULL, count_arg, &(int){0}) < 0) return EXIT_BAD_INPUT;
    if (argc < 3) {
        fprintf(stderr, "servesim: merge needs OUT_DIR and at least one SHARD_DIR\n%s", merge_usage);
        return EXIT_BAD_INPUT;
    }
    char err[2048];
    if (check_out(argv[1], argv + 2, argc - 2, err, sizeof err) < 0) {
        fprintf(stderr, "servesim: %s\n", err);
        return EXIT_BAD_INPUT;
    }
    char probe[1200];
    snprintf(probe, sizeof probe, "%s/plan-shard.json", argv[2]);
    if (access(probe, F_OK) == 0) return plan_merge(argv[1], argv + 2, argc - 2);
    merged m = {.total = -1};
    int status = EXIT_OK;
    for (int i = 2; status == EXIT_OK && i < argc; i++)
        if (check_plan(&m, argv[i], err, sizeof err) < 0 || read_csv(&m, argv[i], err, sizeof err) < 0 ||
            (m.repeat > 1 && read_repeats(&m, argv[i], err, sizeof err) < 0) ||
            check_runs(&m, argv[i], err, sizeof err) < 0)
            status = EXIT_BAD_INPUT;
        else
            read_cost_models(&m, argv[i]);
    if (status == EXIT_OK && check_complete(&m, err, sizeof err) < 0) status = EXIT_BAD_INPUT;
    if (status == EXIT_OK && write_merged(&m, argv[1], err, sizeof err) < 0) status = EXIT_FAILURE_OTHER;
    if (status != EXIT_OK) fprintf(stderr, "servesim: %s\n", err);
    else printf("%d points from %d shards in %s/sweep.csv\n", m.total, argc - 2, argv[1]);
    for (int i = 0; m.rows && i < m.total; i++) free(m.rows[i]);
    for (int i = 0; m.cost_rows && i < m.total; i++) free(m.cost_rows[i]);
    for (int i = 0; m.rep_rows && i < m.total; i++) free(m.rep_rows[i]);
    free(m.rows);
    free(m.cost_rows);
    free(m.rep_rows);
    free(m.rep_len);
    free(m.rep_count);
    free(m.dir_of);
    free(m.rep_header);
    free(m.where);
    free(m.header);
    if (m.have_plan) sweep_plan_free(&m.plan);
    return status;
}
