#include "study/sweep.h"


#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "io/csv.h"
#include "io/results.h"
#include "metrics/sumfield.h"
#include "study/job.h"
#include "study/simjob.h"

static const char *const key_names[K_COUNT] = {
#define X(sec, key, type, def, lo, hi, help) #sec "." #key,
    SCENARIO_KEYS(X)
#undef X
};

const char *sweep_key_name(int key) { return key_names[key]; }

/* Each key's maximum as the key table gives it: sweep_check_seeds reads run.seed's from here,
 * not from a copy of its number. */
static const char *const key_max[K_COUNT] = {
#define X(sec, key, type, def, lo, hi, help) hi,
    SCENARIO_KEYS(X)
#undef X
};

int sweep_check_seeds(const scenario *sc, int repeat, char *err, size_t errlen)
{
    long long max = strtoll(key_max[K_run_seed], NULL, 10), seed = sc->v[K_run_seed].i;
    if (repeat <= 1 || seed <= max - (repeat - 1)) return 0;
    char label[400];
    scenario_key_label(sc, K_run_seed, label, sizeof label);
    snprintf(err, errlen, "%s = %lld with --repeat %d takes seeds up to %lld, past run.seed's maximum %lld: give a "
             "seed of at most %lld, or fewer repeats", label, seed, repeat, seed + repeat - 1, max, max - (repeat - 1));
    return -1;
}

static int find_key(const char *name, size_t len)
{
    for (int k = 0; k < K_COUNT; k++)
        if (strlen(key_names[k]) == len && strncmp(key_names[k], name, len) == 0) return k;
    return -1;
}

void sweep_plan_init(sweep_plan *p, const scenario *base)
{
    memset(p, 0, sizeof *p);
    p->base = *base;
    p->repeat = 1;
    p->num_shards = 1;
}

void sweep_plan_free(sweep_plan *p)
{
    for (int a = 0; a < p->naxes; a++) free(p->axes[a].values);
    free(p->listed);
    p->naxes = p->nlisted = 0;
    p->listed = NULL;
}

static void add_column(sweep_plan *p, int key)
{
    for (int c = 0; c < p->ncolumns; c++)
        if (p->columns[c] == key) return;
    p->columns[p->ncolumns++] = key;
}

/* Checks VALUE for KEY the way the scenario reader would, on a scratch copy. */
static int check_value(const sweep_plan *p, int key, const char *value, char *err, size_t errlen)
{
    if (key == K_run_percentiles) { /* they name sweep.csv's columns, one set for every row */
        snprintf(err, errlen, "run.percentiles names sweep.csv's columns and is the same for every point: give it "
                 "once, with --percentiles");
        return -1;
    }
    scenario scratch = p->base;
    char assignment[600];
    snprintf(assignment, sizeof assignment, "%s=%s", key_names[key], value);
    char why[700];
    if (scenario_set(&scratch, assignment, why, sizeof why) == 0) return 0;
    const char *reason = strstr(why, ": ");
    snprintf(err, errlen, "%s", reason ? reason + 2 : why);
    return -1;
}

/* "SECTION.KEY" at the start of SPEC, up to '=': its key, or -1 with a reason. */
static int parse_key(const char *spec, const char **value, char *err, size_t errlen)
{
    const char *eq = strchr(spec, '=');
    if (!eq) {
        snprintf(err, errlen, "expected SECTION.KEY=VALUE");
        return -1;
    }
    int k = find_key(spec, (size_t)(eq - spec));
    if (k < 0) snprintf(err, errlen, "unknown key %.*s (see `servesim keys`)", (int)(eq - spec), spec);
    *value = eq + 1;
    return k;
}

/* Splits LIST at commas into VALUES[0..max); the count, or -1 when there are too many. */
static int split_values(const char *list, char (*values)[256], int max, char *err, size_t errlen)
{
    int n = 0;
    for (const char *p = list;; n++) {
        size_t len = strcspn(p, ",");
        if (n >= max || len >= 256) {
            snprintf(err, errlen, n >= max ? "more than %d values" : "a value longer than 255 characters", max);
            return -1;
        }
        if (len == 0) {
            snprintf(err, errlen, "empty value");
            return -1;
        }
        memcpy(values[n], p, len);
        values[n][len] = 0;
        if (!p[len]) return n + 1;
        p += len + 1;
    }
}

/* Refuses a control character (a line end, a tab, ...) anywhere in SPEC, a --point's or a
 * --vary's: its label and values are written on their point's one line of sweep.csv, and a
 * line end, even quoted, cut the row in two for every reader of it (merge refused the shard,
 * io/csv.h's reader refuses it). */
static int check_controls(const char *spec, char *why, size_t len)
{
    for (const char *c = spec; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) {
            snprintf(why, len, "holds a control character (0x%02x at byte %d): a label or value is written on its "
                     "point's one line of sweep.csv", (unsigned char)*c, (int)(c - spec) + 1);
            return -1;
        }
    return 0;
}

/* SPEC with its control characters written as \xHH, so that the message about it stays one
 * line. */
static void escape_controls(const char *spec, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = 0;
    for (const char *c = spec; *c && used + 5 < len; c++)
        used += (size_t)snprintf(buf + used, len - used, (unsigned char)*c < 0x20 || *c == 0x7f ? "\\x%02x" : "%c",
                                 (unsigned char)*c);
}

int64_t sweep_runs_wanted(const sweep_plan *p)
{
    int64_t n = p->nlisted ? p->nlisted : 1;
    for (int a = 0; a < p->naxes && n <= SWEEP_MAX_RUNS; a++) n *= p->axes[a].n;
    return n > SWEEP_MAX_RUNS ? n : n * (p->repeat > 0 ? p->repeat : 1);
}

/* Refuses a plan of more runs than SWEEP_MAX_RUNS. */
static int check_size(const sweep_plan *p, char *why, size_t len)
{
    int64_t n = sweep_runs_wanted(p);
    if (n <= SWEEP_MAX_RUNS) return 0;
    snprintf(why, len, "the sweep would be more than %d runs (points x repeats); split it", SWEEP_MAX_RUNS);
    return -1;
}

/* Whether a listed point sets KEY. A --vary of it too applied the axis value after the point's,
 * and the rows ran at the --vary values under the point's label (bad-input campaign). */
static bool set_by_a_point(const sweep_plan *p, int key)
{
    for (int i = 0; i < p->nlisted; i++)
        for (int j = 0; j < p->listed[i].n; j++)
            if (p->listed[i].a[j].key == key) return true;
    return false;
}

/* Whether KEY was given on the command line (--set, --seed, ...): `sweep --vary
 * workload.rate=2,4 --set workload.rate=3` dropped the --set without a word (a new user's
 * trial). A scenario file's value is the one a --vary or --point is there to replace. */
static bool set_on_the_command_line(const sweep_plan *p, int key, char *why, size_t len, const char *by)
{
    if (!scenario_from_command_line(&p->base, (scenario_key)key)) return false;
    snprintf(why, len, "%s is also set by %s, whose value the %s would replace; give it once", key_names[key],
             p->base.v[key].origin, by);
    return true;
}

int sweep_add_vary(sweep_plan *p, const char *spec, char *err, size_t errlen)
{
    char why[800], shown[2048];
    const char *list;
    sweep_axis ax = {0};
    if (p->naxes >= SWEEP_MAX_AXES) {
        snprintf(why, sizeof why, "more than %d --vary options", SWEEP_MAX_AXES);
        goto bad;
    }
    if (check_controls(spec, why, sizeof why) < 0 || (ax.key = parse_key(spec, &list, why, sizeof why)) < 0)
        goto bad;
    for (int a = 0; a < p->naxes; a++)
        if (p->axes[a].key == ax.key) {
            snprintf(why, sizeof why, "%s is varied twice", key_names[ax.key]);
            goto bad;
        }
    if (set_on_the_command_line(p, ax.key, why, sizeof why, "--vary values")) goto bad;
    if (set_by_a_point(p, ax.key)) {
        snprintf(why, sizeof why, "%s is also set by a --point, whose value the --vary values would replace; give "
                 "it with one of --vary and --point", key_names[ax.key]);
        goto bad;
    }
    if (!(ax.values = malloc(SWEEP_MAX_VALUES * sizeof *ax.values))) {
        snprintf(why, sizeof why, "out of memory");
        goto bad;
    }
    if ((ax.n = split_values(list, ax.values, SWEEP_MAX_VALUES, why, sizeof why)) < 0) goto bad;
    for (int v = 0; v < ax.n; v++) {
        if (check_value(p, ax.key, ax.values[v], why, sizeof why) < 0) goto bad;
        for (int u = 0; u < v; u++)
            if (scenario_same_value(ax.key, ax.values[u], ax.values[v])) { /* the same point run twice */
                if (strcmp(ax.values[u], ax.values[v]) == 0) snprintf(why, sizeof why, "%s is given twice", ax.values[v]);
                else snprintf(why, sizeof why, "%s is %s given again: the same point would run twice", ax.values[v],
                              ax.values[u]);
                goto bad;
            }
    }
    p->axes[p->naxes++] = ax;
    if (check_size(p, why, sizeof why) < 0) {
        p->naxes--;
        goto bad;
    }
    add_column(p, ax.key);
    return 0;
bad:
    free(ax.values);
    escape_controls(spec, shown, sizeof shown);
    snprintf(err, errlen, "--vary %s: %s", shown, why);
    return -1;
}

static int parse_assignments(const sweep_plan *p, const char *text, sweep_listed *pt, char *why, size_t len)
{
    char values[SWEEP_MAX_ASSIGN][256];
    int n = split_values(text, values, SWEEP_MAX_ASSIGN, why, len);
    for (int i = 0; i < n; i++) {
        const char *value;
        int k = parse_key(values[i], &value, why, len);
        if (k < 0 || check_value(p, k, value, why, len) < 0) return -1;
        for (int j = 0; j < pt->n; j++)
            if (pt->a[j].key == k) {
                snprintf(why, len, "%s is set twice", key_names[k]);
                return -1;
            }
        pt->a[pt->n].key = k;
        snprintf(pt->a[pt->n].value, sizeof pt->a[pt->n].value, "%s", value);
        pt->n++;
    }
    return n < 0 ? -1 : 0;
}

/* Whether A and B set the same keys to the same values, in any order: one setting, whose
 * point would run twice. Values compare as the scenario reads them ("1" and "1.0" alike), as
 * --vary's do. */
static bool same_setting(const sweep_listed *a, const sweep_listed *b)
{
    if (a->n != b->n) return false;
    for (int i = 0; i < a->n; i++) {
        int j = 0;
        while (j < b->n && (b->a[j].key != a->a[i].key || !scenario_same_value(a->a[i].key, b->a[j].value,
                                                                                 a->a[i].value)))
            j++;
        if (j == b->n) return false;
    }
    return true;
}

/* PT's assignments appended to BUF, joined by SEP: their values, or KEY=VALUE when KEYED. */
static void append_assignments(const sweep_listed *pt, bool keyed, const char *sep, char *buf, size_t len)
{
    for (int i = 0; i < pt->n; i++) {
        size_t used = strlen(buf);
        if (used < len)
            snprintf(buf + used, len - used, "%s%s%s%s", i ? sep : "", keyed ? key_names[pt->a[i].key] : "",
                     keyed ? "=" : "", pt->a[i].value);
    }
}

/* A listed point's part of its labels (sweep_point_label's start): its own label, or its
 * values joined by '/'. */
static void listed_label(const sweep_listed *pt, char *buf, size_t len)
{
    snprintf(buf, len, "%s", pt->label);
    if (!pt->label[0]) append_assignments(pt, false, "/", buf, len);
}

/* A listed point as its --point was written ("[LABEL:]K=V,K=V"), for messages. */
static void listed_text(const sweep_listed *pt, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s", pt->label, pt->label[0] ? ":" : "");
    append_assignments(pt, true, ",", buf, len);
}

int sweep_add_point(sweep_plan *p, const char *spec, char *err, size_t errlen)
{
    char why[800], shown[2048];
    sweep_listed pt = {.n = 0};
    /* a label ends at a ':' before the first '=' (values, e.g. distributions, may hold ':') */
    const char *colon = strchr(spec, ':'), *eq = strchr(spec, '='), *body = spec;
    if (check_controls(spec, why, sizeof why) < 0) goto bad;
    if (colon && (!eq || colon < eq)) {
        if ((size_t)(colon - spec) >= sizeof pt.label || colon == spec) {
            snprintf(why, sizeof why, "a label must have 1 to %zu characters", sizeof pt.label - 1);
            goto bad;
        }
        snprintf(pt.label, sizeof pt.label, "%.*s", (int)(colon - spec), spec);
        body = colon + 1;
    }
    if (p->nlisted >= SWEEP_MAX_LISTED) {
        snprintf(why, sizeof why, "more than %d --point options", SWEEP_MAX_LISTED);
        goto bad;
    }
    if (parse_assignments(p, body, &pt, why, sizeof why) < 0) goto bad;
    for (int i = 0; i < pt.n; i++)
        if (set_on_the_command_line(p, pt.a[i].key, why, sizeof why, "point")) goto bad;
    for (int i = 0; i < pt.n; i++)
        for (int a = 0; a < p->naxes; a++)
            if (p->axes[a].key == pt.a[i].key) {
                snprintf(why, sizeof why, "%s is also varied by --vary, whose values would replace the point's; give "
                         "it with one of --vary and --point", key_names[pt.a[i].key]);
                goto bad;
            }
    /* two rows of one label, or one setting run twice (bad-input campaign); --vary refuses a
     * value given twice alike */
    char mine[400], theirs[400];
    listed_label(&pt, mine, sizeof mine);
    for (int i = 0; i < p->nlisted; i++) {
        /* a label given is compared with the others' labels given or made from their values:
         * --point 2:workload.rate=5 beside --point workload.rate=2 gave two rows labelled "2".
         * Two labels both made of values may match (workload.rate=4, max_num_seqs=4): the
         * results show both with their keys (shown_label) */
        listed_label(&p->listed[i], theirs, sizeof theirs);
        bool given = pt.label[0] || p->listed[i].label[0];
        bool same = same_setting(&pt, &p->listed[i]), label_twice = !same && given && strcmp(mine, theirs) == 0;
        if (!label_twice && !same) continue;
        char other[600];
        listed_text(&p->listed[i], other, sizeof other);
        if (label_twice && pt.label[0] && p->listed[i].label[0])
            snprintf(why, sizeof why, "the label %s is given to --point %s too: a label names one point", mine, other);
        else if (label_twice) /* one of the two labels is made of values */
            snprintf(why, sizeof why, "it and --point %s would both be labelled %s: a label names one point; give %s a "
                     "label of its own (--point LABEL:...)", other, mine, pt.label[0] ? "the other" : "this one");
        else snprintf(why, sizeof why, "the same setting as --point %s: the point would run twice", other);
        goto bad;
    }
    sweep_listed *grown = realloc(p->listed, (size_t)(p->nlisted + 1) * sizeof *grown);
    if (!grown) {
        snprintf(why, sizeof why, "out of memory");
        goto bad;
    }
    p->listed = grown;
    p->listed[p->nlisted++] = pt;
    if (check_size(p, why, sizeof why) < 0) {
        p->nlisted--;
        goto bad;
    }
    for (int i = 0; i < pt.n; i++) add_column(p, pt.a[i].key);
    return 0;
bad:
    escape_controls(spec, shown, sizeof shown);
    snprintf(err, errlen, "--point %s: %s", shown, why);
    return -1;
}

int sweep_set_shard(sweep_plan *p, const char *spec, char *err, size_t errlen)
{
    /* parsed as 64-bit: "%d" of 99999999999 was undefined and wrapped */
    long long k, n;
    int used = 0;
    if (sscanf(spec, "%lld/%lld%n", &k, &n, &used) != 2 || spec[used] || n < 1 || k < 1 || k > n ||
        n > SWEEP_MAX_RUNS) {
        snprintf(err, errlen, "--shard %s: expected K/N with 1 <= K <= N <= %d (the K-th of N slices)", spec,
                 SWEEP_MAX_RUNS);
        return -1;
    }
    p->shard = (int)(k - 1);
    p->num_shards = (int)n;
    return 0;
}

int sweep_grid_size(const sweep_plan *p)
{
    int n = 1;
    for (int a = 0; a < p->naxes; a++) n *= p->axes[a].n;
    return n;
}

int sweep_num_points(const sweep_plan *p)
{
    return (p->nlisted ? p->nlisted : 1) * sweep_grid_size(p);
}

bool sweep_in_shard(const sweep_plan *p, int index)
{
    return index % p->num_shards == p->shard;
}

/* The axis coordinates of INDEX, the first axis outermost; returns the listed point's index. */
static int coordinates(const sweep_plan *p, int index, int *coord)
{
    int grid = sweep_grid_size(p), rem = index % grid;
    for (int a = p->naxes - 1; a >= 0; a--) {
        coord[a] = rem % p->axes[a].n;
        rem /= p->axes[a].n;
    }
    return index / grid;
}

static int apply(scenario *sc, int key, const char *value, char *err, size_t errlen)
{
    char assignment[600];
    snprintf(assignment, sizeof assignment, "%s=%s", key_names[key], value);
    return scenario_set_from(sc, assignment, "the sweep's point", err, errlen);
}

int sweep_point_scenario(const sweep_plan *p, int index, scenario *out, char *err, size_t errlen)
{
    if (index < 0 || index >= sweep_num_points(p)) {
        snprintf(err, errlen, "point %d does not exist (the sweep has %d)", index, sweep_num_points(p));
        return -1;
    }
    int coord[SWEEP_MAX_AXES];
    int li = coordinates(p, index, coord);
    *out = p->base;
    for (int i = 0; p->nlisted && i < p->listed[li].n; i++)
        if (apply(out, p->listed[li].a[i].key, p->listed[li].a[i].value, err, errlen) < 0) return -1;
    for (int a = 0; a < p->naxes; a++)
        if (apply(out, p->axes[a].key, p->axes[a].values[coord[a]], err, errlen) < 0) return -1;
    return 0;
}

static void append(char *buf, size_t len, const char *sep, const char *s)
{
    size_t used = strlen(buf);
    if (used < len) snprintf(buf + used, len - used, "%s%s", used ? sep : "", s);
}

/* Listed point LI's label in the results: its own, or its values joined by '/'. Two points
 * whose values alone read the same (workload.rate=4 beside scheduler.max_num_seqs=4) had two
 * rows, legends and report lines labelled "4": each such point's values are then written with
 * their keys ("workload.rate=4"). A label given holds no '=', so none equals such a label. */
static void shown_label(const sweep_plan *p, int li, char *buf, size_t len)
{
    const sweep_listed *pt = &p->listed[li];
    listed_label(pt, buf, len);
    if (pt->label[0]) return;
    char other[400];
    for (int j = 0; j < p->nlisted; j++) {
        if (j == li || p->listed[j].label[0]) continue;
        listed_label(&p->listed[j], other, sizeof other);
        if (strcmp(buf, other) != 0) continue;
        buf[0] = 0;
        append_assignments(pt, true, "/", buf, len);
        return;
    }
}

void sweep_point_label(const sweep_plan *p, int index, char *buf, size_t len)
{
    int coord[SWEEP_MAX_AXES];
    int li = coordinates(p, index, coord);
    buf[0] = 0;
    if (p->nlisted) shown_label(p, li, buf, len);
    for (int a = 0; a < p->naxes; a++) append(buf, len, " ", p->axes[a].values[coord[a]]);
    if (!buf[0]) snprintf(buf, len, "base");
}

int sweep_check(const sweep_plan *p, char *err, size_t errlen)
{
    scenario sc;
    scenario_resolved r;
    for (int i = 0; i < sweep_num_points(p); i++) {
        if (!sweep_in_shard(p, i)) continue;
        char why[1200], label[256];
        bool ok = sweep_point_scenario(p, i, &sc, why, sizeof why) == 0;
        if (ok && sweep_check_seeds(&sc, p->repeat, why, sizeof why) < 0) {
            /* the seed every point runs from (--seed, --set or the file's) is no point's doing: a
             * "point 0 (base): --set run.seed=..." named neither what the user typed */
            if (strcmp(sc.v[K_run_seed].origin, p->base.v[K_run_seed].origin) == 0) {
                snprintf(err, errlen, "%s", why);
                return -1;
            }
            ok = false;
        }
        /* the memory a point's pools take, before any point runs: one past it once stopped a
         * sweep with exit 2 after the points before it had run */
        if (ok && scenario_resolve(&sc, &r, why, sizeof why) == 0 && simjob_check_pool_memory(&r, why, sizeof why) == 0)
            continue;
        sweep_point_label(p, i, label, sizeof label);
        snprintf(err, errlen, "point %d (%s): %s", i, label, why);
        return -1;
    }
    return 0;
}

int sweep_check_inputs(const sweep_plan *p, const char *out, char *err, size_t errlen)
{
    scenario sc;
    char why[1600], label[256];
    for (int i = 0; i < sweep_num_points(p); i++) {
        if (sweep_point_scenario(p, i, &sc, why, sizeof why) < 0 || scenario_check_inputs(&sc, out, why, sizeof why) == 0)
            continue;   /* a point that does not apply is sweep_check's to name */
        sweep_point_label(p, i, label, sizeof label);
        snprintf(err, errlen, "--out %s (point %d, %s)", why, i, label);
        return -1;
    }
    return 0;
}

void sweep_run_name(int index, char *buf, size_t len)
{
    snprintf(buf, len, "%03d", index);
}

/* ---- running: (point, repeat) jobs shared by a pool of threads ---- */

typedef struct job {
    int point, repeat;
    uint64_t seed;
    int status;
    char err[1024];
    bool have_summary;
    summary sum;
    req_record *records;
    size_t num_records;
    char cost_kind[16], cost_source[1024];
} job;

typedef struct pool {
    const sweep_plan *plan;
    const sweep_opts *opts;
    job *jobs;
    int njobs;
    pthread_mutex_t lock;
    int next, finished;
    bool failed;             /* stop handing out jobs after the first failure */
    struct timespec start;
    bool shown;
} pool;

/* Called with the lock held. */
static void show_progress(pool *pl)
{
    enum { WIDTH = 30 };
    int filled = pl->finished * WIDTH / pl->njobs;
    char bar[WIDTH + 1];
    for (int i = 0; i < WIDTH; i++) bar[i] = i < filled ? '#' : '.';
    bar[WIDTH] = 0;
    fprintf(stderr, "\rsweep [%s] %d/%d runs, %.1f s", bar, pl->finished, pl->njobs, job_seconds_since(&pl->start));
    pl->shown = true;
}

static int run_job(const pool *pl, job *jb)
{
    scenario sc;
    if (sweep_point_scenario(pl->plan, jb->point, &sc, jb->err, sizeof jb->err) < 0) return EXIT_BAD_INPUT;
    char seed[64], dir[4200];
    jb->seed = (uint64_t)sc.v[K_run_seed].i + (uint64_t)jb->repeat;
    snprintf(seed, sizeof seed, "run.seed=%llu", (unsigned long long)jb->seed);
    if (scenario_set(&sc, seed, jb->err, sizeof jb->err) < 0) return EXIT_BAD_INPUT;
    bool write = pl->opts->runs_dir && jb->repeat == 0;
    if (write) {
        char name[32];
        sweep_run_name(jb->point, name, sizeof name);
        snprintf(dir, sizeof dir, "%s/%s", pl->opts->runs_dir, name);
    }
    simjob j = {.sc = &sc, .out_dir = write ? dir : NULL, .keep_records = pl->opts->keep_records && jb->repeat == 0};
    int status = simjob_run(&j, jb->err, sizeof jb->err);
    jb->have_summary = j.have_summary;
    jb->sum = j.sum;
    jb->records = j.records;
    jb->num_records = j.num_records;
    snprintf(jb->cost_kind, sizeof jb->cost_kind, "%s", j.cost_kind);
    snprintf(jb->cost_source, sizeof jb->cost_source, "%s", j.cost_source);
    return status;
}

static void *worker(void *arg)
{
    pool *pl = arg;
    pthread_mutex_lock(&pl->lock);
    while (!pl->failed && pl->next < pl->njobs) {
        job *jb = &pl->jobs[pl->next++];
        pthread_mutex_unlock(&pl->lock);
        jb->status = run_job(pl, jb);
        pthread_mutex_lock(&pl->lock);
        pl->finished++;
        if (jb->status != EXIT_OK) pl->failed = true;
        if (pl->opts->progress) show_progress(pl);
    }
    pthread_mutex_unlock(&pl->lock);
    return NULL;
}

static int make_jobs(const sweep_plan *p, job **out)
{
    int n = 0, total = sweep_num_points(p);
    for (int i = 0; i < total; i++) n += sweep_in_shard(p, i) ? p->repeat : 0;
    job *jobs = calloc(n ? (size_t)n : 1, sizeof *jobs);
    if (!jobs) return -1;
    n = 0;
    for (int i = 0; i < total; i++)
        for (int r = 0; sweep_in_shard(p, i) && r < p->repeat; r++) jobs[n++] = (job){.point = i, .repeat = r};
    *out = jobs;
    return n;
}

static int run_pool(pool *pl)
{
    int nthreads = pl->opts->jobs < 1 ? 1 : pl->opts->jobs;
    if (nthreads > pl->njobs) nthreads = pl->njobs;
    pthread_t *threads = calloc(nthreads ? (size_t)nthreads : 1, sizeof *threads);
    if (!threads) return -1;
    int started = 0;
    while (started < nthreads && pthread_create(&threads[started], NULL, worker, pl) == 0) started++;
    /* fewer threads than asked is slower, not wrong; none at all and this thread works alone */
    if (started == 0) worker(pl);
    for (int t = 0; t < started; t++) pthread_join(threads[t], NULL);
    free(threads);
    return 0;
}

/* Gathers the point's repeats (consecutive jobs) into its result. */
static int collect(const sweep_plan *p, job *jobs, sweep_result *r)
{
    r->ran = true;
    snprintf(r->cost_kind, sizeof r->cost_kind, "%s", jobs[0].cost_kind);
    snprintf(r->cost_source, sizeof r->cost_source, "%s", jobs[0].cost_source);
    r->records = jobs[0].records;
    r->num_records = jobs[0].num_records;
    jobs[0].records = NULL;
    r->runs = malloc((size_t)p->repeat * sizeof *r->runs);
    r->seeds = malloc((size_t)p->repeat * sizeof *r->seeds);
    r->stats = malloc(sumf_count() * sizeof *r->stats);
    if (!r->runs || !r->seeds || !r->stats) return -1;
    for (int k = 0; k < p->repeat; k++) {
        if (!jobs[k].have_summary) continue;
        r->seeds[r->nruns] = jobs[k].seed;
        r->runs[r->nruns++] = jobs[k].sum;
    }
    if (r->nruns == 0) return 0;
    rep_aggregate(r->runs, (size_t)r->nruns, r->stats);
    if (p->repeat == 1) {
        r->sum = r->runs[0];
    } else {
        rep_mean_summary(r->stats, &r->sum);
        sumf_mean_extras(r->runs, (size_t)r->nruns, &r->sum);
    }
    return 0;
}

static int first_failure(const job *jobs, int n)
{
    for (int i = 0; i < n; i++)
        if (jobs[i].status != EXIT_OK) return i;
    return -1;
}

static int by_size_down(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

/* How many of JOBS threads the machine's memory holds at once: the runs' block pools
 * (simjob_pool_bytes), largest first, each alone having passed sweep_check. Threads running
 * points each within the memory could together pass it, and the OOM killer end the sweep. */
static int threads_memory_allows(const sweep_plan *p, int jobs)
{
    size_t avail;
    char why[1200];
    /* a point's repeats are jobs of their own, which threads may run at once */
    int n = sweep_num_points(p), copies = p->repeat < jobs ? p->repeat : jobs, k = 0, fit;
    double *need = jobs > 1 ? malloc((size_t)n * copies * sizeof *need) : NULL;
    if (!need || kb_host_memory_available(&avail, why, sizeof why) < 0) {
        free(need);
        return jobs;
    }
    scenario sc;
    scenario_resolved r;
    for (int i = 0; i < n; i++)
        if (sweep_in_shard(p, i) && sweep_point_scenario(p, i, &sc, why, sizeof why) == 0 &&
            scenario_resolve(&sc, &r, why, sizeof why) == 0)
            for (int c = 0; c < copies; c++) need[k++] = simjob_pool_bytes(&r);
    fit = sweep_threads_for_memory(need, k, jobs, (double)avail);
    free(need);
    return fit;
}

int sweep_threads_for_memory(double *need, int n, int jobs, double avail)
{
    qsort(need, (size_t)n, sizeof *need, by_size_down);
    int fit = 0;
    double sum = 0;
    while (fit < jobs && fit < n && sum + need[fit] <= avail) sum += need[fit++];
    return fit < jobs && fit < n ? (fit > 1 ? fit : 1) : jobs;
}

int sweep_run(const sweep_plan *p, const sweep_opts *o, sweep_result *results, char *err, size_t errlen)
{
    memset(results, 0, (size_t)sweep_num_points(p) * sizeof *results);
    pool pl = {.plan = p, .opts = o};
    pl.njobs = make_jobs(p, &pl.jobs);
    if (pl.njobs < 0 || pthread_mutex_init(&pl.lock, NULL) != 0) {
        free(pl.jobs);
        snprintf(err, errlen, "out of memory");
        return EXIT_FAILURE_OTHER;
    }
    clock_gettime(CLOCK_MONOTONIC, &pl.start);
    sweep_opts effective = *o;
    effective.progress = o->progress && isatty(2);
    effective.jobs = threads_memory_allows(p, o->jobs);
    if (effective.jobs < o->jobs && o->progress) /* slower, not different: results do not depend on it */
        fprintf(stderr, "sweep: %d threads at a time, not %d: the largest points' block pools would together pass the "
                "memory available\n", effective.jobs, o->jobs);
    pl.opts = &effective;
    int status = run_pool(&pl) == 0 ? EXIT_OK : EXIT_FAILURE_OTHER;
    if (pl.shown) fputc('\n', stderr);
    pthread_mutex_destroy(&pl.lock);
    int bad = first_failure(pl.jobs, pl.njobs);
    if (bad >= 0) {
        char label[256];
        sweep_point_label(p, pl.jobs[bad].point, label, sizeof label);
        snprintf(err, errlen, "point %d (%s): %s", pl.jobs[bad].point, label, pl.jobs[bad].err);
        status = pl.jobs[bad].status;
    } else if (status != EXIT_OK) {
        snprintf(err, errlen, "cannot start threads");
    }
    for (int i = 0; status == EXIT_OK && i < pl.njobs; i += p->repeat)
        if (collect(p, &pl.jobs[i], &results[pl.jobs[i].point]) < 0) {
            snprintf(err, errlen, "out of memory");
            status = EXIT_FAILURE_OTHER;
        }
    for (int i = 0; i < pl.njobs; i++) free(pl.jobs[i].records);
    free(pl.jobs);
    if (status != EXIT_OK) sweep_results_free(results, sweep_num_points(p));
    return status;
}

void sweep_results_free(sweep_result *r, int n)
{
    for (int i = 0; i < n; i++) {
        free(r[i].stats);
        free(r[i].runs);
        free(r[i].seeds);
        free(r[i].records);
        r[i] = (sweep_result){0};
    }
}

/* ---- output ---- */

/* A summary naming the latencies at run.percentiles every point reports (one for all: varying
 * run.percentiles is refused), for the extra columns: num_percentiles and percentiles only. */
static summary percentiles_of(const sweep_plan *p)
{
    summary s = {0};
    scenario_resolved r;
    char why[1200];
    if (scenario_resolve(&p->base, &r, why, sizeof why) == 0) {
        s.num_percentiles = r.num_percentiles;
        memcpy(s.percentiles, r.percentiles, sizeof s.percentiles);
    }
    return s;
}

static void write_header(FILE *f, const sweep_plan *p, const summary *named)
{
    fputs("point,label", f);
    for (int c = 0; c < p->ncolumns; c++) fprintf(f, ",%s", key_names[p->columns[c]]);
    fputc(',', f);
    sumf_write_header(f, "");
    if (p->repeat > 1) {
        fputs(",repeats,", f);
        sumf_write_header(f, "_std");
        fputc(',', f);
        sumf_write_header(f, "_min");
        fputc(',', f);
        sumf_write_header(f, "_max");
    }
    sumf_write_extra_header(f, named); /* last: means over the repeats when there are several */
    fputc('\n', f);
}

/* One column of every summary field: field I of the stats picked by WHICH (0 mean ... 3 max). */
static void write_stats(FILE *f, const sweep_result *r, int which)
{
    for (size_t i = 0; i < sumf_count(); i++) {
        char buf[64] = "";
        if (r->nruns > 0) {
            const rep_stat *st = &r->stats[i];
            double v[] = {st->mean, st->std, st->min, st->max};
            sumf_format(v[which], which == 1 || which == 0 ? SUMF_DBL : sumf_at(i)->type, buf, sizeof buf);
        }
        fprintf(f, ",%s", buf);
    }
}

void sweep_write_row_start(FILE *f, const sweep_plan *p, int index, bool values)
{
    scenario sc;
    char label[256], err[256];
    sweep_point_label(p, index, label, sizeof label);
    fprintf(f, "%d,", index);
    csv_write_field(f, label);
    if (!values || sweep_point_scenario(p, index, &sc, err, sizeof err) < 0) return;
    for (int c = 0; c < p->ncolumns; c++) {
        fputc(',', f);
        csv_write_field(f, sc.v[p->columns[c]].s);
    }
}

static void write_row(FILE *f, const sweep_plan *p, int index, const sweep_result *r, int num_percentiles)
{
    sweep_write_row_start(f, p, index, true);
    if (p->repeat == 1) {
        fputc(',', f);
        if (r->nruns > 0) sumf_write_row(f, &r->sum);
        else
            for (size_t i = 1; i < sumf_count(); i++) fputc(',', f);
    } else {
        write_stats(f, r, 0);
        fprintf(f, ",%d", r->nruns);
        for (int which = 1; which <= 3; which++) write_stats(f, r, which);
    }
    sumf_write_extra_row(f, r->nruns > 0 ? &r->sum : NULL, num_percentiles);
    fputc('\n', f);
}

void sweep_write_csv_header(FILE *f, const sweep_plan *p)
{
    summary named = percentiles_of(p);
    write_header(f, p, &named);
}

void sweep_write_csv(FILE *f, const sweep_plan *p, const sweep_result *r)
{
    summary named = percentiles_of(p); /* once: resolving the scenario for each row was work per row */
    write_header(f, p, &named);
    for (int i = 0; i < sweep_num_points(p); i++)
        if (r[i].ran) write_row(f, p, i, &r[i], named.num_percentiles);
}

static void write_repeats_header(FILE *f, const summary *named)
{
    fputs("point,label,repeat,seed,", f);
    sumf_write_header(f, "");
    sumf_write_extra_header(f, named);
    fputc('\n', f);
}

void sweep_write_repeats_header(FILE *f, const sweep_plan *p)
{
    summary named = percentiles_of(p);
    write_repeats_header(f, &named);
}

void sweep_write_repeats_csv(FILE *f, const sweep_plan *p, const sweep_result *r)
{
    summary named = percentiles_of(p);
    write_repeats_header(f, &named);
    for (int i = 0; i < sweep_num_points(p); i++) {
        for (int k = 0; r[i].ran && k < r[i].nruns; k++) {
            sweep_write_row_start(f, p, i, false);
            fprintf(f, ",%d,%llu,", k + 1, (unsigned long long)r[i].seeds[k]);
            sumf_write_row(f, &r[i].runs[k]);
            sumf_write_extra_row(f, &r[i].runs[k], named.num_percentiles);
            fputc('\n', f);
        }
    }
}

uint64_t sweep_identity(const sweep_plan *p)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return 0;
    json_t *base = scenario_json(&p->base);
    if (!base || json_write(f, base) < 0) {
        json_decref(base);
        fclose(f);
        free(buf);
        return 0;
    }
    json_decref(base);
    for (int a = 0; a < p->naxes; a++) {
        fprintf(f, "vary %s", key_names[p->axes[a].key]);
        for (int v = 0; v < p->axes[a].n; v++) fprintf(f, ",%s", p->axes[a].values[v]);
        fputc('\n', f);
    }
    for (int i = 0; i < p->nlisted; i++) {
        fprintf(f, "point %s:", p->listed[i].label);
        for (int k = 0; k < p->listed[i].n; k++)
            fprintf(f, "%s=%s,", key_names[p->listed[i].a[k].key], p->listed[i].a[k].value);
        fputc('\n', f);
    }
    fprintf(f, "repeat %d\n", p->repeat);
    fclose(f);
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)buf[i]) * 1099511628211ULL;
    free(buf);
    return h;
}

int sweep_write_json(FILE *f, const sweep_plan *p, int argc, char **argv)
{
    char id[32], cwd[4096];
    snprintf(id, sizeof id, "%016llx", (unsigned long long)sweep_identity(p));
    json_t *doc = json_object();
    int bad = !doc;
    if (!bad && p->num_shards > 1) { /* where and how the shard ran: merge parses it again, for the plots */
        json_t *args = json_put_array(doc, "args");
        bad = !args || json_put(doc, "cwd", json_text(getcwd(cwd, sizeof cwd) ? cwd : "?"));
        for (int i = 1; !bad && i < argc; i++) bad = json_array_append_new(args, json_text(argv[i]));
    }
    bad = bad || json_put(doc, "points_total", json_integer(sweep_num_points(p))) |
                     json_put(doc, "shard", json_integer(p->shard + 1)) |
                     json_put(doc, "num_shards", json_integer(p->num_shards)) |
                     json_put(doc, "repeat", json_integer(p->repeat)) | json_put(doc, "sweep_id", json_string(id)) |
                     json_put(doc, "scenario_file", json_text(p->base.path));
    if (!bad) bad = json_write(f, doc);
    json_decref(doc);
    return bad ? -1 : 0;
}

void sweep_print_table(FILE *f, const sweep_plan *p, const sweep_result *r)
{
    fprintf(f, "%5s  %-28s %6s %8s %9s %9s %9s %9s %9s %8s\n", "point", "label", "done", "req/s", "out tok/s",
            "TTFT p50", "TTFT p99", "TPOT p99", "E2EL p99", "min free");
    for (int i = 0; i < sweep_num_points(p); i++) {
        if (!r[i].ran) continue;
        char label[256];
        sweep_point_label(p, i, label, sizeof label);
        const summary *s = &r[i].sum;
        if (r[i].nruns == 0) {
            fprintf(f, "%5d  %-28.28s no measured request finished\n", i, label);
            continue;
        }
        fprintf(f, "%5d  %-28.28s %6d %8.2f %9.0f %9.1f %9.1f %9.2f %9.0f %8d\n", i, label, s->completed,
                s->request_throughput, s->output_throughput, s->ttft_ms.median, s->ttft_ms.p99, s->tpot_ms.p99,
                s->e2el_ms.p99, s->min_free_blocks);
    }
    if (p->repeat > 1) fprintf(f, "(means over %d seeds per point; spread in sweep.csv)\n", p->repeat);
}
