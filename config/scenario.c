#include "config/scenario.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "workload/dist.h"
#include "io/decimal.h"
#include "io/outdir.h"
#include "io/results.h"
#include "sim/hardware.h"

typedef enum key_type { INT, NUM, BOOL, TEXT, DIST, CHOICE, MODEL, HW, PATH } key_type;

typedef struct key_def {
    const char *section, *key;
    key_type type;
    const char *def, *lo, *hi, *help;
} key_def;

static const key_def keys[K_COUNT] = {
#define X(sec, key, type, def, lo, hi, help) {#sec, #key, type, def, lo, hi, help},
    SCENARIO_KEYS(X)
#undef X
};

static const char *type_names[] = {"int", "number", "bool", "text", "distribution", "choice",
                                   "model preset", "hardware preset", "path"};

/* inih's limit as Debian builds it: longer lines are cut silently. */
/* inih (Debian's, INI_MAX_LINE 200) reads a line with fgets into 200 bytes: at most 199
 * characters, its line end included. A line of 198 characters is read whole; one of 199 or
 * 200 was cut, its end read as another line (which then shifted every later error's line
 * number, or dropped a last '#' as a comment). */
enum { INI_LINE_LIMIT = INI_MAX_LINE - 2 };

static int find_key(const char *section, const char *key)
{
    for (int k = 0; k < K_COUNT; k++)
        if (strcmp(keys[k].section, section) == 0 && strcmp(keys[k].key, key) == 0) return k;
    return -1;
}

static const struct vllm_option {
    const char *match, *shown;
    int key;
} vllm_options[] = {
#define X(match, shown, sec, key) {match, shown, K_##sec##_##key},
    VLLM_OPTIONS(X)
#undef X
};

/* The vLLM option NAME names (leading dashes, '_' for '-' and case aside), or NULL. */
static const struct vllm_option *vllm_option(const char *name)
{
    char norm[128];
    size_t n = 0;
    while (*name == '-') name++;
    for (; *name && n + 1 < sizeof norm; name++) norm[n++] = *name == '_' ? '-' : (char)tolower((unsigned char)*name);
    norm[n] = 0;
    for (size_t i = 0; i < sizeof vllm_options / sizeof *vllm_options; i++)
        if (strcmp(vllm_options[i].match, norm) == 0) return &vllm_options[i];
    return NULL;
}

const char *scenario_vllm_key(const char *name, char *buf, size_t len)
{
    const struct vllm_option *o = vllm_option(name);
    if (!o) return NULL;
    snprintf(buf, len, "%s.%s", keys[o->key].section, keys[o->key].key);
    return buf;
}

/* "; vLLM's --NAME is SECTION.KEY here" when NAME is a vLLM option's; else "". */
static const char *vllm_hint(const char *name, char *buf, size_t len)
{
    const struct vllm_option *o = vllm_option(name);
    if (!o) return "";
    snprintf(buf, len, "; vLLM's %s is %s.%s here", o->shown, keys[o->key].section, keys[o->key].key);
    return buf;
}

/* The key named KEY in exactly one section, or -1 (none, or several: "preset"). */
static int key_of_one_section(const char *key)
{
    int k = -1;
    for (int i = 0; i < K_COUNT; i++)
        if (strcmp(keys[i].key, key) == 0) {
            if (k >= 0) return -1;
            k = i;
        }
    return k;
}

/* Levenshtein distance between A and B, both under 128 characters (longer: a large number). */
static int edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la >= 128 || lb >= 128) return 1000;
    int row[128];
    for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[lb];
}

/* The one key whose "section.key" is within two edits of SECTION.KEY (a typo such as
 * workload.num_request, which no other hint caught; new-user trial), else -1. */
static int nearest_key(const char *section, const char *key)
{
    char want[300], have[300];
    snprintf(want, sizeof want, "%s.%s", section, key);
    int best = -1, best_d = 3, ties = 0;
    for (int k = 0; k < K_COUNT; k++) {
        snprintf(have, sizeof have, "%s.%s", keys[k].section, keys[k].key);
        int d = edit_distance(want, have);
        if (d < best_d) best = k, best_d = d, ties = 0;
        else if (d == best_d) ties++;
    }
    return ties ? -1 : best;
}

static bool known_section(const char *section)
{
    for (int k = 0; k < K_COUNT; k++)
        if (strcmp(keys[k].section, section) == 0) return true;
    return false;
}

static int parse_bool(const char *text, bool *out)
{
    static const char *yes[] = {"true", "on", "yes", "1"}, *no[] = {"false", "off", "no", "0"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(text, yes[i]) == 0) { *out = true; return 0; }
        if (strcasecmp(text, no[i]) == 0) { *out = false; return 0; }
    }
    return -1;
}

static bool choice_allowed(const char *choices, const char *text)
{
    size_t n = strlen(text);
    for (const char *p = choices; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, text, n) == 0) return true;
        if (!bar) break;
        p = bar + 1;
    }
    return false;
}

static int parse_number(const key_def *d, const char *text, double *out, char *err, size_t errlen)
{
    char *end;
    errno = 0;
    double v = decimal_strtod(text, &end);
    if (end == text || *end || errno || !isfinite(v)) {
        snprintf(err, errlen, "%s.%s: expected %s %s, got \"%s\"%s", d->section, d->key,
                 strchr("aeiou", type_names[d->type][0]) ? "an" : "a", type_names[d->type], text,
                 strchr(text, '#')                      ? " (only ';' starts a comment)"
                 : end == text                          ? ""
                                                        : decimal_hint(text, d->type == INT));
        return -1;
    }
    /* an integer in decimal digits: strtod took 1e1 for 10 */
    const char *digits = text + (*text == '-' || *text == '+');
    if (d->type == INT && (!*digits || strspn(digits, "0123456789") != strlen(digits))) {
        snprintf(err, errlen, "%s.%s: expected an integer in decimal digits, got \"%s\"", d->section, d->key, text);
        return -1;
    }
    if (d->type == INT && v != floor(v)) {
        snprintf(err, errlen, "%s.%s: expected an integer, got \"%s\"", d->section, d->key, text);
        return -1;
    }
    double lo = atof(d->lo), hi = atof(d->hi);
    if (v < lo || v > hi) {
        snprintf(err, errlen, "%s.%s = %s is out of range [%s, %s]", d->section, d->key, text, d->lo, d->hi);
        return -1;
    }
    *out = v;
    return 0;
}

/* Parses TEXT into V as key K's type says. */
static int parse_value(int k, const char *text, scenario_value *v, char *err, size_t errlen)
{
    const key_def *d = &keys[k];
    if (strlen(text) >= sizeof v->s) {
        snprintf(err, errlen, "%s.%s: value longer than %zu characters", d->section, d->key, sizeof v->s - 1);
        return -1;
    }
    char why[200];
    len_dist dist;
    switch (d->type) {
    case INT:
    case NUM:
        if (parse_number(d, text, &v->d, err, errlen) < 0) return -1;
        v->i = (long long)v->d;
        break;
    case BOOL:
        if (parse_bool(text, &v->b) < 0) {
            snprintf(err, errlen, "%s.%s: expected true/false, on/off, yes/no or 1/0, got \"%s\"",
                     d->section, d->key, text);
            return -1;
        }
        break;
    case DIST:
        if (dist_parse(text, &dist, why, sizeof why) < 0) {
            snprintf(err, errlen, "%s.%s: %s", d->section, d->key, why);
            return -1;
        }
        break;
    case CHOICE:
        if (!choice_allowed(d->lo, text)) {
            const char *vllm = NULL; /* a value vLLM names otherwise (new-user trial) */
#define X(S, K, value, says)                                                                                       \
    if (!vllm && strcmp(d->section, #S) == 0 && strcmp(d->key, #K) == 0 && strcmp(text, value) == 0) vllm = says;
            VLLM_VALUES(X)
#undef X
            snprintf(err, errlen, "%s.%s: \"%s\" is not one of %s%s%s", d->section, d->key, text, d->lo,
                     vllm ? "; " : "", vllm ? vllm : "");
            return -1;
        }
        break;
    case MODEL:
        if (!model_preset(text)) {
            snprintf(err, errlen, "%s.%s: unknown model \"%s\" (known: %s)", d->section, d->key, text,
                     model_preset_names());
            return -1;
        }
        break;
    case HW:
        if (!hw_preset(text)) {
            snprintf(err, errlen, "%s.%s: unknown hardware \"%s\" (known: %s)", d->section, d->key, text,
                     hw_preset_names());
            return -1;
        }
        break;
    case TEXT:
    case PATH:
        break;
    }
    snprintf(v->s, sizeof v->s, "%s", text);
    return 0;
}

void scenario_defaults(scenario *sc)
{
    memset(sc, 0, sizeof *sc);
    char err[256];
    for (int k = 0; k < K_COUNT; k++) {
        /* the defaults go through the same parser: a bad default fails every test at once */
        if (parse_value(k, keys[k].def, &sc->v[k], err, sizeof err) < 0) {
            fprintf(stderr, "servesim: bad built-in default: %s\n", err);
            abort();
        }
        snprintf(sc->v[k].origin, sizeof sc->v[k].origin, "default");
        sc->v[k].in_file = false;
    }
}

typedef struct load_ctx {
    scenario *sc;
    char *err;
    size_t errlen;
} load_ctx;

static int on_ini_value(void *user, const char *section, const char *name, const char *value)
{
    load_ctx *c = user;
    int k = find_key(section, name);
    if (k < 0) {
        char hint[300];
        const char *why = vllm_hint(name, hint, sizeof hint);
        /* the key of another section, as --set suggests it ("[scheduler] rate" had no hint: a
         * new user's trial), or a typo */
        int near = *why ? -1 : key_of_one_section(name);
        if (near < 0 && !*why) near = nearest_key(section, name);
        if (near >= 0)
            why = strcmp(keys[near].section, section) == 0
                      ? (snprintf(hint, sizeof hint, "; did you mean %s?", keys[near].key), hint)
                      : (snprintf(hint, sizeof hint, "; did you mean %s under [%s]?", keys[near].key, keys[near].section), hint);
        if (known_section(section))
            snprintf(c->err, c->errlen, "unknown key %s.%s%s (see `servesim keys`)", section, name, why);
        else if (!*section) { /* it said "unknown section []" (a new user's trial) */
            /* the sections that have a key of that name (preset: model, hardware, frontend) */
            size_t used = 0;
            for (int i = 0; i < K_COUNT && used < sizeof hint; i++)
                if (strcmp(keys[i].key, name) == 0) {
                    int n = snprintf(hint + used, sizeof hint - used, "%s[%s]", used ? " or " : ": put it under ",
                                     keys[i].section);
                    if (n > 0) used += (size_t)n;
                }
            if (!used) snprintf(hint, sizeof hint, " (see `servesim keys`)");
            snprintf(c->err, c->errlen, "%s is outside any section: every key follows a [section] header%s", name, hint);
        }
        else snprintf(c->err, c->errlen, "unknown section [%s]", section);
        return 0;
    }
    return parse_value(k, value, &c->sc->v[k], c->err, c->errlen) == 0;
}

/* V was given on LINE of the scenario file PATH: its origin "PATH:LINE", a path too long for
 * it shown by its end ("...end/s.ini:3"), so that the line is never the part cut. */
static void origin_in_file(scenario_value *v, const char *path, int line)
{
    int n = snprintf(v->origin, sizeof v->origin, "%s:%d", path, line);
    if (n >= (int)sizeof v->origin) {
        size_t room = sizeof v->origin - 1 - 3 - 12, len = strlen(path);   /* "...", ":LINE" */
        snprintf(v->origin, sizeof v->origin, "...%s:%d", path + len - room, line);
    }
    v->in_file = true;
}

/* What inih cannot tell us: lines it would cut, NUL bytes, indented lines (inih continues the
 * previous value with them, which overrode it without a word), key lines without '=', sections
 * with no keys, keys set twice. Returns the bad line (> 0), 0 when clean, -1 when the file
 * cannot be read. */
static int prescan(const char *path, const char *text, size_t size, scenario *sc, char *err, size_t errlen)
{
    char buf[INI_LINE_LIMIT + 2];
    int line = 0, bad = 0;
    char section[128] = "", seen[K_COUNT] = {0};
    for (size_t at = 0; !bad && at < size;) {
        const char *start = text + at, *nl = memchr(start, '\n', size - at);
        size_t len = nl ? (size_t)(nl - start) : size - at;
        at += len + (nl != NULL);
        line++;
        size_t raw = len; /* inih counts a CR in the line's length */
        while (len > 0 && start[len - 1] == '\r') len--;
        bad = line;
        if (memchr(start, '\0', len)) {
            snprintf(err, errlen, "a NUL byte in the line: not a text file?");
            break;
        }
        /* inih ends lines at LF alone: a file of CR line ends (old Macs) was one line, its
         * section header taking the rest, and ran the defaults (bad-input campaign) */
        const char *cr = memchr(start, '\r', len);
        if (cr) {
            snprintf(err, errlen, "a carriage return inside the line (at column %d): a file of CR line ends? save it "
                     "with LF or CRLF line ends", (int)(cr - start) + 1);
            break;
        }
        if (raw > INI_LINE_LIMIT) {
            snprintf(err, errlen, "line of %zu characters, longer than %d (inih would cut it)", raw, INI_LINE_LIMIT);
            break;
        }
        memcpy(buf, start, len);
        buf[len] = 0;
        char *p = buf;
        if (line == 1 && strncmp(p, "\xEF\xBB\xBF", 3) == 0) p += 3; /* a UTF-8 BOM, which inih skips too */
        const char *first = p;
        while (isspace((unsigned char)*p)) p++;
        if (p != first && *p && *p != ';' && *p != '#') {
            snprintf(err, errlen, "an indented line: inih would take it as more of the previous value; start "
                                  "every line at its first column");
            break;
        }
        bad = 0;
        if (*p == '[') {
            char *close = strchr(p, ']');
            if (!close) {
                snprintf(err, errlen, "a section header without its ']': \"%s\"", p);
                bad = line;
                break;
            }
            snprintf(section, sizeof section, "%.*s", (int)(close - p - 1), p + 1);
            /* inih drops what follows the ']': "[model]preset=tiny" ran the default model */
            const char *after = close + 1;
            while (isspace((unsigned char)*after)) after++;
            if (*after && *after != ';' && *after != '#') {
                snprintf(err, errlen, "text after the section header [%s]: \"%s\" (put each key on a line of its own)",
                         section, after);
                bad = line;
                break;
            }
            if (!known_section(section)) {
                snprintf(err, errlen, "unknown section [%s]", section);
                bad = line;
            }
        } else if (*p && *p != ';' && *p != '#') {
            size_t n = strcspn(p, "=:");
            if (!p[n]) {
                snprintf(err, errlen, "expected KEY = VALUE, got \"%s\"", p);
                bad = line;
                break;
            }
            while (n > 0 && isspace((unsigned char)p[n - 1])) n--;
            p[n] = 0;
            int k = find_key(section, p);
            if (k >= 0 && seen[k]++) {
                snprintf(err, errlen, "%s.%s is set twice", section, p);
                bad = line;
            } else if (k >= 0) {
                origin_in_file(&sc->v[k], path, line);
            }
        }
    }
    return bad;
}

/* The whole file at PATH, NUL-terminated, read once (a pipe cannot be read twice, and
 * /dev/zero must not fill the memory): NULL with the reason in ERR. */
enum { SCENARIO_MAX_BYTES = 1 << 20 };
static char *read_scenario(const char *path, size_t *size, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    char *text = malloc(SCENARIO_MAX_BYTES + 2);
    size_t n = text ? fread(text, 1, SCENARIO_MAX_BYTES + 1, f) : 0;
    int bad = !text ? ENOMEM : ferror(f) ? (errno ? errno : EIO) : 0;
    fclose(f);
    if (bad) {
        snprintf(err, errlen, "%s: cannot read: %s", path, strerror(bad));
        free(text);
        return NULL;
    }
    if (n > SCENARIO_MAX_BYTES) {
        snprintf(err, errlen, "%s: more than %d bytes: not a scenario file?", path, SCENARIO_MAX_BYTES);
        free(text);
        return NULL;
    }
    text[n] = 0;
    *size = n;
    return text;
}

static void set_dir(scenario *sc, const char *path)
{
    snprintf(sc->dir, sizeof sc->dir, "%s", path);
    char *slash = strrchr(sc->dir, '/');
    if (slash) slash[1] = 0;
    else sc->dir[0] = 0;
}

int scenario_load(scenario *sc, const char *path, char *err, size_t errlen)
{
    char why[512] = "";
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) { /* fopen of a directory succeeds, and read nothing */
        snprintf(err, errlen, "%s: is a directory, not a scenario file", path);
        return -1;
    }
    if (strlen(path) >= sizeof sc->path) { /* its folder, for relative paths, would be cut */
        snprintf(err, errlen, "%.60s...: a scenario path of %zu characters; at most %zu", path, strlen(path),
                 sizeof sc->path - 1);
        return -1;
    }
    size_t size;
    char *text = read_scenario(path, &size, err, errlen);
    if (!text) return -1;
    int bad = prescan(path, text, size, sc, why, sizeof why);
    if (bad > 0) {
        snprintf(err, errlen, "%s:%d: %s", path, bad, why);
        free(text);
        return -1;
    }
    snprintf(sc->path, sizeof sc->path, "%s", path);
    set_dir(sc, path);
    load_ctx c = {.sc = sc, .err = why, .errlen = sizeof why};
    int r = ini_parse_string(text, on_ini_value, &c);
    free(text);
    if (r == 0) return 0;
    if (r == -2) snprintf(err, errlen, "%s: out of memory while reading", path);
    else snprintf(err, errlen, "%s:%d: %s", path, r, why[0] ? why : "not a valid INI line");
    return -1;
}

bool scenario_same_value(scenario_key k, const char *a, const char *b)
{
    scenario_value va, vb;
    char err[256];
    if (parse_value(k, a, &va, err, sizeof err) < 0 || parse_value(k, b, &vb, err, sizeof err) < 0)
        return strcmp(a, b) == 0;
    switch (keys[k].type) {
    case INT:
    case NUM:
        return va.d == vb.d;
    case BOOL:
        return va.b == vb.b;
    case DIST: {
        len_dist da, db;
        char ta[128], tb[128];
        dist_parse(a, &da, err, sizeof err);
        dist_parse(b, &db, err, sizeof err);
        dist_format(&da, ta, sizeof ta);
        dist_format(&db, tb, sizeof tb);
        return strcmp(ta, tb) == 0;
    }
    default:
        return strcmp(a, b) == 0;
    }
}

bool scenario_from_command_line(const scenario *sc, scenario_key k) { return strncmp(sc->v[k].origin, "--", 2) == 0; }

int scenario_set(scenario *sc, const char *assignment, char *err, size_t errlen)
{
    return scenario_set_from(sc, assignment, "--set", err, errlen);
}

int scenario_set_from(scenario *sc, const char *assignment, const char *origin, char *err, size_t errlen)
{
    char section[128], key[128];
    const char *dot = strchr(assignment, '.'), *eq = strchr(assignment, '=');
    char hint[600] = "";
    if (!dot || !eq || dot > eq || dot - assignment >= (long)sizeof section || eq - dot - 1 >= (long)sizeof key) {
        /* a name without its section: vLLM's, or a key's of one section */
        if (eq && eq - assignment < (long)sizeof key && !memchr(assignment, '.', (size_t)(eq - assignment))) {
            snprintf(key, sizeof key, "%.*s", (int)(eq - assignment), assignment);
            const struct vllm_option *o = vllm_option(key);
            int k = o ? o->key : key_of_one_section(key);
            if (o)
                snprintf(hint, sizeof hint, "; vLLM's %s is %s.%s here (--set %s.%s=%s)", o->shown,
                         keys[k].section, keys[k].key, keys[k].section, keys[k].key, eq + 1);
            else if (k >= 0)
                snprintf(hint, sizeof hint, "; did you mean %s.%s=%s?", keys[k].section, keys[k].key, eq + 1);
        }
        snprintf(err, errlen, "--set %s: expected SECTION.KEY=VALUE%s", assignment, hint);
        return -1;
    }
    snprintf(section, sizeof section, "%.*s", (int)(dot - assignment), assignment);
    snprintf(key, sizeof key, "%.*s", (int)(eq - dot - 1), dot + 1);
    int k = find_key(section, key);
    if (k < 0) {
        const char *why = vllm_hint(key, hint, sizeof hint);
        int other = *why ? -1 : key_of_one_section(key); /* the key in another section */
        if (other < 0 && !*why) other = nearest_key(section, key); /* or a typo */
        if (other >= 0)
            why = (snprintf(hint, sizeof hint, "; did you mean %s.%s?", keys[other].section, keys[other].key), hint);
        snprintf(err, errlen, "--set %s: unknown key %s.%s%s (see `servesim keys`)", assignment, section, key, why);
        return -1;
    }
    char why[512];
    if (parse_value(k, eq + 1, &sc->v[k], why, sizeof why) < 0) {
        snprintf(err, errlen, "--set %s: %s", assignment, why);
        return -1;
    }
    snprintf(sc->v[k].origin, sizeof sc->v[k].origin, "%s", origin);
    sc->v[k].in_file = false;
    return 0;
}

void scenario_stem_into(const scenario *sc, char *out, size_t len)
{
    snprintf(out, len, "%s", scenario_name(sc));
    char *dot = strrchr(out, '.');
    if (dot && strcmp(dot, ".ini") == 0) *dot = 0;
}

static int resolve_path(const scenario *sc, int key, char *out, size_t len, char *err, size_t errlen);

/* Every file the scenario names: a trace that is a run's requests.csv, given back to that
 * run's folder, was deleted by the result replacing it (bad-input campaign). */
int scenario_check_inputs(const scenario *sc, const char *out, char *why, size_t len)
{
    for (int k = 0; k < K_COUNT; k++) {
        if (keys[k].type != PATH) continue;
        char path[sizeof sc->dir + sizeof sc->v[k].s], what[80]; /* the folder and the value: never cut */
        if (resolve_path(sc, k, path, sizeof path, why, len) < 0) return -1;
        snprintf(what, sizeof what, "%s.%s", keys[k].section, keys[k].key);
        if (od_check_input(out, path, what, why, len) < 0) return -1;
    }
    return 0;
}

int scenario_out_dir(const scenario *sc, const char *flag, const char *suffix, char *out, size_t len, char *err,
                     size_t errlen)
{
    char stem[sizeof sc->path], why[1600]; /* the stem as long as the path it is from: never cut */
    scenario_stem_into(sc, stem, sizeof stem);
    int n = flag ? snprintf(out, len, "%s", flag) : snprintf(out, len, "results/runs/%s-%s", stem, suffix);
    if (n < 0 || (size_t)n >= len) { /* it was cut, and the cut path written to */
        snprintf(err, errlen, "--out %.60s...: a path of %d characters; at most %zu", flag ? flag : out, n, len - 1);
        return -1;
    }
    int bad = od_check(out, why, sizeof why) < 0 || od_check_input(out, sc->path, "the scenario", why, sizeof why) < 0 ||
              scenario_check_inputs(sc, out, why, sizeof why) < 0;
    if (bad) {
        snprintf(err, errlen, "--out %s%s", why, flag ? "" : " (the default output directory; choose one with --out)");
        return -1;
    }
    return 0;
}

const char *scenario_name(const scenario *sc)
{
    if (!sc->path[0]) return "default";
    const char *base = strrchr(sc->path, '/');
    return base ? base + 1 : sc->path;
}

json_t *scenario_json(const scenario *sc)
{
    json_t *obj = json_object();
    for (int k = 0; obj && k < K_COUNT; k++) {
        const key_def *d = &keys[k];
        char name[128];
        snprintf(name, sizeof name, "%s.%s", d->section, d->key);
        json_t *v = d->type == INT ? json_integer(sc->v[k].i)
                  : d->type == NUM ? json_num(sc->v[k].d)
                  : d->type == BOOL ? json_boolean(sc->v[k].b)
                  : json_text(sc->v[k].s);
        if (json_put(obj, name, v) < 0) {
            json_decref(obj);
            return NULL;
        }
    }
    return obj;
}

void scenario_print_keys(FILE *f)
{
    const char *section = "";
    for (int k = 0; k < K_COUNT; k++) {
        const key_def *d = &keys[k];
        if (strcmp(section, d->section) != 0) {
            fprintf(f, "%s[%s]\n", k ? "\n" : "", d->section);
            section = d->section;
        }
        char range[128] = "";
        if (d->type == INT || d->type == NUM) snprintf(range, sizeof range, " in [%s, %s]", d->lo, d->hi);
        else if (d->type == CHOICE) snprintf(range, sizeof range, ": %s", d->lo);
        fprintf(f, "  %-24s %s%s, default \"%s\"\n      %s\n", d->key, type_names[d->type], range, d->def, d->help);
        for (size_t i = 0; i < sizeof vllm_options / sizeof *vllm_options; i++)
            if (vllm_options[i].key == k) fprintf(f, "      vLLM: %s\n", vllm_options[i].shown);
    }
}

/* ---- resolving: from keys to the settings of a run ---- */

#define V(sec, key) (sc->v[K_##sec##_##key])
/* whether the user set the key (a file or --set), not left it at its default */
#define GIVEN(sec, key) (strcmp(V(sec, key).origin, "default") != 0)

static void resolve_model(const scenario *sc, scenario_resolved *out)
{
    model_shape m = *model_preset(V(model, preset).s);
    const struct { int *field; long long v; } overrides[] = {
        {&m.num_layers, V(model, num_layers).i}, {&m.hidden, V(model, hidden).i},
        {&m.num_heads, V(model, num_heads).i}, {&m.num_kv_heads, V(model, num_kv_heads).i},
        {&m.head_dim, V(model, head_dim).i}, {&m.intermediate, V(model, intermediate).i},
        {&m.vocab, V(model, vocab).i}, {&m.num_experts, V(model, num_experts).i},
        {&m.experts_per_token, V(model, experts_per_token).i}, {&m.max_position, V(model, max_position).i},
    };
    for (size_t i = 0; i < sizeof overrides / sizeof overrides[0]; i++)
        if (overrides[i].v > 0) *overrides[i].field = (int)overrides[i].v;
    out->model = m;
    out->fusion_hidden = m.hidden;
    out->dtype_bytes = strcmp(V(model, dtype).s, "fp32") == 0 ? 4 : 2;
    out->fp8_weights = strcmp(V(model, quantization).s, "fp8") == 0;
    out->fp8_kv = strcmp(V(kv, cache_dtype).s, "fp8") == 0;
}

static void resolve_hardware(const scenario *sc, scenario_resolved *out)
{
    hw_spec hw = *hw_preset(V(hardware, preset).s);
    if (V(hardware, peak_tflops).d > 0) hw.peak_tflops = V(hardware, peak_tflops).d;
    if (V(hardware, fp8_tflops).d > 0) hw.fp8_tflops = V(hardware, fp8_tflops).d;
    if (V(hardware, mem_bandwidth_gbs).d > 0) hw.mem_bandwidth_gbs = V(hardware, mem_bandwidth_gbs).d;
    if (V(hardware, mem_gib).d > 0) hw.mem_gib = V(hardware, mem_gib).d;
    if (V(hardware, link_gbs).d > 0) hw.link_gbs = V(hardware, link_gbs).d;
    if (V(hardware, allreduce_us).d >= 0) hw.allreduce_us = V(hardware, allreduce_us).d;
    out->hw = hw;
    /* an efficiency left at 0, or the overhead at -1, takes the GPU's fitted roofline: with FP8
     * weights the one fitted to its FP8 tables, where it has them */
    hw_fit fit = hw_preset_fit(hw.name);
    double ce = V(hardware, compute_efficiency).d, me = V(hardware, memory_efficiency).d;
    double ae = V(hardware, attention_efficiency).d, oh = V(hardware, step_overhead_ms).d;
    bool all_given = ce > 0 && me > 0 && ae > 0 && oh >= 0; /* then no fit is used, nor said */
    out->roofline_fit_fp8 = out->fp8_weights && !all_given && hw_preset_fit_fp8(hw.name, &fit);
    out->roofline = (roofline_params){
        .compute_efficiency = ce > 0 ? ce : fit.compute_efficiency,
        .memory_efficiency = me > 0 ? me : fit.memory_efficiency,
        .attention_efficiency = ae > 0 ? ae : fit.attention_efficiency,
        .step_overhead_s = (oh >= 0 ? oh : fit.step_overhead_ms) / 1000,
    };
    out->step_overhead_s = oh >= 0 ? oh / 1000 : -1;
    double host = V(hardware, host_us_per_seq).d;
    out->host_s_per_seq = host >= 0 ? host * 1e-6 : -1;
    /* vLLM turns async scheduling off by default beside n-gram or draft-model speculation
     * (only EAGLE/MTP kinds keep it), and refuses it outright beside n-gram lookup on the CPU */
    out->async_scheduling = V(scheduler, async_scheduling).b &&
                            (V(speculative, num_tokens).i == 0 || GIVEN(scheduler, async_scheduling));
    const char *fusion = V(deployment, allreduce_fusion).s;
    out->allreduce_fusion = strcmp(fusion, "on") == 0 ? 1 : strcmp(fusion, "off") == 0 ? 0 : -1;
    out->fusion_max_mb = V(deployment, allreduce_fusion_max_mb).d;
    out->measured = strcmp(V(hardware, cost_model).s, "measured") == 0;
    snprintf(out->vllm_version, sizeof out->vllm_version, "%s", V(hardware, vllm_version).s);
    const struct { const char *name; bool set; } roof[] = {
        {"hardware.peak_tflops", V(hardware, peak_tflops).d > 0},
        {"hardware.fp8_tflops", V(hardware, fp8_tflops).d > 0},
        {"hardware.mem_bandwidth_gbs", V(hardware, mem_bandwidth_gbs).d > 0},
        {"hardware.compute_efficiency", ce > 0}, {"hardware.memory_efficiency", me > 0},
        {"hardware.attention_efficiency", ae > 0}, {"hardware.link_gbs", V(hardware, link_gbs).d > 0},
        {"hardware.allreduce_us", V(hardware, allreduce_us).d >= 0},
    };
    out->roofline_keys_set[0] = 0;
    for (size_t i = 0; i < sizeof roof / sizeof roof[0]; i++)
        if (roof[i].set) {
            size_t n = strlen(out->roofline_keys_set);
            snprintf(out->roofline_keys_set + n, sizeof out->roofline_keys_set - n, "%s%s", n ? ", " : "", roof[i].name);
        }
}

/* Keys of the cost model that contradict each other. */
static int check_cost_keys(const scenario *sc, char *err, size_t errlen)
{
    /* 0 is the preset's; a datasheet figure this small priced steps into an infinite clock */
    const struct { int key; const char *name; } peaks[] = {
        {K_hardware_peak_tflops, "hardware.peak_tflops"}, {K_hardware_fp8_tflops, "hardware.fp8_tflops"},
        {K_hardware_mem_bandwidth_gbs, "hardware.mem_bandwidth_gbs"},
        {K_hardware_mem_gib, "hardware.mem_gib"}, {K_hardware_link_gbs, "hardware.link_gbs"},
    };
    for (size_t i = 0; i < sizeof peaks / sizeof peaks[0]; i++) {
        double v = sc->v[peaks[i].key].d;
        if (v > 0 && v < 1e-3) {
            snprintf(err, errlen, "%s (%s) must be 0 (the preset's) or at least 0.001, got %g", peaks[i].name,
                     sc->v[peaks[i].key].origin, v);
            return -1;
        }
    }
    double ar = V(hardware, allreduce_us).d;
    if (ar < 0 && ar != -1) {
        snprintf(err, errlen, "hardware.allreduce_us (%s) must be -1 (the preset's) or at least 0, got %g",
                 V(hardware, allreduce_us).origin, ar);
        return -1;
    }
    double oh = V(hardware, step_overhead_ms).d;
    if (oh < 0 && oh != -1) {
        snprintf(err, errlen, "hardware.step_overhead_ms (%s) must be -1 (the table's or the fit's) or at least 0, got %g",
                 V(hardware, step_overhead_ms).origin, oh);
        return -1;
    }
    if (V(scheduler, async_scheduling).b && GIVEN(scheduler, async_scheduling) &&
        V(speculative, num_tokens).i > 0 && strcmp(V(speculative, method).s, "ngram") == 0) {
        snprintf(err, errlen, "scheduler.async_scheduling (%s) is on, but vLLM refuses async scheduling beside n-gram "
                              "speculative decoding (speculative.method = ngram, %s); leave it unset or off",
                 V(scheduler, async_scheduling).origin, V(speculative, num_tokens).origin);
        return -1;
    }
    double host = V(hardware, host_us_per_seq).d;
    if (host < 0 && host != -1) {
        snprintf(err, errlen, "hardware.host_us_per_seq (%s) must be -1 (the table's) or at least 0, got %g",
                 V(hardware, host_us_per_seq).origin, host);
        return -1;
    }
    double fuse_mb = V(deployment, allreduce_fusion_max_mb).d;
    if (fuse_mb < 0 && fuse_mb != -1) {
        snprintf(err, errlen, "deployment.allreduce_fusion_max_mb (%s) must be -1 (vLLM's default) or at least 0 MiB, got %g",
                 V(deployment, allreduce_fusion_max_mb).origin, fuse_mb);
        return -1;
    }
    if (fuse_mb >= 0 && strcmp(V(deployment, allreduce_fusion).s, "off") == 0) {
        snprintf(err, errlen, "deployment.allreduce_fusion_max_mb (%s) sets how much vLLM fuses, but "
                 "deployment.allreduce_fusion (%s) is off; leave the size at -1, or the fusion at auto or on",
                 V(deployment, allreduce_fusion_max_mb).origin, V(deployment, allreduce_fusion).origin);
        return -1;
    }
    const char *version = V(hardware, vllm_version).s;
    if (version[0] && V(hardware, cost_table).s[0]) {
        snprintf(err, errlen, "hardware.vllm_version (%s) chooses a measured table, but hardware.cost_table (%s) names one",
                 V(hardware, vllm_version).origin, V(hardware, cost_table).origin);
        return -1;
    }
    if (version[0] && strcmp(V(hardware, cost_model).s, "roofline") == 0) {
        snprintf(err, errlen, "hardware.vllm_version (%s) chooses a measured table, but hardware.cost_model (%s) is roofline",
                 V(hardware, vllm_version).origin, V(hardware, cost_model).origin);
        return -1;
    }
    /* an explicit table prices the run whatever cost_model says: asking for the roofline too
     * is a contradiction, and the table silently won */
    if (V(hardware, cost_table).s[0] && strcmp(V(hardware, cost_model).s, "roofline") == 0) {
        snprintf(err, errlen, "hardware.cost_table (%s) names a table, but hardware.cost_model (%s) asks for the roofline",
                 V(hardware, cost_table).origin, V(hardware, cost_model).origin);
        return -1;
    }
    return 0;
}

/* Bytes of one KV element: kv.cache_dtype = fp8 stores one, else model.dtype's. */
static int kv_element_bytes(const scenario_resolved *r) { return r->fp8_kv ? 1 : r->dtype_bytes; }

double scenario_kv_block_bytes(const scenario_resolved *r)
{
    model_shape shard = model_shard(&r->model, r->tensor_parallel);
    double block = (double)model_kv_bytes_per_token(&shard, kv_element_bytes(r)) * r->sched.block_size;
    if (r->sched.num_speculative_tokens > 0 && r->spec_draft_model) {
        /* each block holds the draft model's layers' KV too (as vLLM's KV cache spec spans both
         * models' layers) */
        model_shape draft = model_shard(&r->draft_model, r->tensor_parallel);
        block += (double)model_kv_bytes_per_token(&draft, kv_element_bytes(r)) * r->sched.block_size;
    }
    return block;
}

/* vLLM sizes its KV pool after a profile run: one forward of a full token budget, then the
 * sampler on max_num_seqs rows of logits; the pool is the memory the utilization allows less
 * the weights, that run's PyTorch peak and the non-PyTorch memory it grew (NCCL, cuBLAS). On
 * an H100 with vLLM 0.11.0 and its default 1,024 sequences, llm-d-planner measured that peak
 * at 4.76-5.64 GiB for dense text models from 0.6B to 70B parameters, in step with the
 * vocabulary and not with the model (Llama 128,256: 4.76, 4.84; Qwen3 151,936: 5.56, 5.64,
 * 5.64): the sampler's working copies of the logits, 38.9 bytes a logit (38.4-39.6), set it.
 * The forward's own peak shows when max_num_seqs is small or the budget large (max_model_len
 * without chunked prefill): here the live tensors at the MLP, computed rather than measured
 * (the residual and normed input, the gate/up output, the activated half and, with FP8, its
 * quantized copy, for every token of the budget). Non-
 * PyTorch memory was 0.13 GiB on one GPU and 0.55 GiB a GPU on two (llm-d-planner's
 * docs/empirical-vllm-memory-results.md, 2026-04-01, Apache-2.0); larger groups take the
 * latter, unmeasured. */
#define VLLM_SAMPLER_BYTES_PER_LOGIT 38.9
#define VLLM_NON_TORCH_GIB_ONE_GPU 0.13
#define VLLM_NON_TORCH_GIB_GROUP 0.55

/* The estimate's two activation terms, in bytes: the forward's and the sampler's. */
static void reserve_terms(const scenario_resolved *r, double *forward_out, double *sampler_out)
{
    model_shape shard = model_shard(&r->model, r->tensor_parallel);
    double b = r->dtype_bytes;
    double inter = (double)shard.intermediate * (shard.num_experts > 0 ? shard.experts_per_token : 1);
    double per_token = 2 * shard.hidden * b + 3 * inter * b + (r->fp8_weights ? inter : 0);
    /* a fused MoE also holds each of a token's experts' outputs, whole rows that TP does not split */
    if (shard.num_experts > 0) per_token += (double)shard.experts_per_token * shard.hidden * b;
    *forward_out = per_token * r->sched.max_num_batched_tokens;
    *sampler_out = VLLM_SAMPLER_BYTES_PER_LOGIT * r->sched.max_num_seqs * r->model.vocab;
}

double scenario_kv_reserve_bytes(const scenario_resolved *r)
{
    if (r->kv_reserve_gib >= 0) return r->kv_reserve_gib * (1 << 30);
    double forward, sampler;
    reserve_terms(r, &forward, &sampler);
    double non_torch = r->tensor_parallel > 1 ? VLLM_NON_TORCH_GIB_GROUP : VLLM_NON_TORCH_GIB_ONE_GPU;
    return (forward > sampler ? forward : sampler) + non_torch * (1 << 30);
}

/* KV blocks that fit beside the weights in the memory the utilization allows, on each GPU of
 * a tensor-parallel group (each holds its share of the weights and of every token's KV, so
 * the group's pool has as many blocks as one GPU's). */
static int derive_num_blocks(const scenario *sc, const scenario_resolved *r, char *err, size_t errlen)
{
    model_shape shard = model_shard(&r->model, r->tensor_parallel);
    double budget = r->hw.mem_gib * (1 << 30) * V(hardware, gpu_memory_utilization).d;
    double weights = (double)model_num_params(&shard) * r->dtype_bytes;
    /* FP8 quantizes the linear layers but a mixture of experts' router (vLLM keeps it) */
    if (r->fp8_weights)
        weights -= (double)(model_linear_params(&shard) - model_router_params(&shard)) * (r->dtype_bytes - 1);
    if (r->sched.num_speculative_tokens > 0 && r->spec_draft_model) { /* a draft model sits beside the target */
        model_shape draft = model_shard(&r->draft_model, r->tensor_parallel);
        weights += (double)model_num_params(&draft) * r->dtype_bytes;
    }
    double reserve = scenario_kv_reserve_bytes(r), block = scenario_kv_block_bytes(r);
    double blocks = floor((budget - weights - reserve) / block);
    if (blocks < 1) {
        char split[64] = "", who[160];
        if (r->tensor_parallel > 1) snprintf(split, sizeof split, " (1/%d of them per GPU)", r->tensor_parallel);
        if (r->sched.num_speculative_tokens > 0 && r->spec_draft_model)
            snprintf(who, sizeof who, "%s and speculative.draft_model %s", r->model.name, r->draft_model.name);
        else
            snprintf(who, sizeof who, "%s", r->model.name);
        /* what would make room: when the weights alone leave some, a smaller reserve (its larger
         * term: the budget's forward or the sampler's logits); else more GPUs */
        double forward, sampler;
        reserve_terms(r, &forward, &sampler);
        const char *hint = r->tensor_parallel > 1 ? "" : " (deployment.tensor_parallel splits them over GPUs)";
        if (budget - weights >= block)
            hint = r->kv_reserve_gib >= 0 ? " (the weights alone leave room: lower kv.reserve_gib)"
                   : forward > sampler
                       ? " (the weights alone leave room: the reserve is one forward of scheduler.max_num_batched_tokens "
                         "tokens, max_model_len without chunked prefill; lower it, turn scheduler.chunked_prefill on, or "
                         "set kv.reserve_gib)"
                       : " (the weights alone leave room: lower scheduler.max_num_seqs, whose logits the reserve holds, "
                         "or set kv.reserve_gib)";
        snprintf(err, errlen,
                 "%s weights%s (%.1f GiB) and kv.reserve_gib's %.2f GiB (%s) leave no room for a KV block in %.1f GiB x "
                 "hardware.gpu_memory_utilization %.2f of %s%s",
                 who, split, weights / (1 << 30), reserve / (1 << 30),
                 r->kv_reserve_gib >= 0 ? V(kv, reserve_gib).origin : "estimated", r->hw.mem_gib,
                 V(hardware, gpu_memory_utilization).d, r->hw.name, hint);
        return -1;
    }
    return blocks > 1e9 ? 1000000000 : (int)blocks;
}

/* Prefill and decode instances: together they are the replicas; each request's KV crosses
 * from one to the other, every GPU of the group sending its own share of the heads. */
static int resolve_disaggregation(const scenario *sc, scenario_resolved *out, char *err, size_t errlen)
{
    int p = (int)V(deployment, prefill_instances).i, d = (int)V(deployment, decode_instances).i;
    if (p == 0 && d == 0) return 0;
    if (p == 0 || d == 0) {
        snprintf(err, errlen, "deployment.prefill_instances (%d, %s) and deployment.decode_instances (%d, %s) must both be "
                 "set for disaggregated serving, or both 0", p, V(deployment, prefill_instances).origin, d,
                 V(deployment, decode_instances).origin);
        return -1;
    }
    if (out->replicas != 1) {
        snprintf(err, errlen, "deployment.replicas (%s) is for aggregated serving; disaggregated serving has "
                 "deployment.prefill_instances and deployment.decode_instances instead", V(deployment, replicas).origin);
        return -1;
    }
    if (sched_policy_info(out->sched.policy)->whole_batch || sched_policy_info(out->sched.policy)->single) {
        snprintf(err, errlen, "disaggregated serving hands requests over one by one; scheduler.policy = %s serves "
                 "%s", sched_policy_name(out->sched.policy),
                 sched_policy_info(out->sched.policy)->single ? "one request at a time" : "whole batches");
        return -1;
    }
    model_shape shard = model_shard(&out->model, out->tensor_parallel);
    out->replicas = p + d;
    out->prefill_instances = p;
    out->kv_latency_s = V(deployment, kv_transfer_latency_ms).d / 1000;
    out->kv_s_per_token = (double)model_kv_bytes_per_token(&shard, kv_element_bytes(out)) /
                          (V(deployment, kv_transfer_gbs).d * 1e9);
    return 0;
}

static const scenario_key frontend_time_keys[3] = {K_frontend_request_ms, K_frontend_step_ms, K_frontend_token_ms};

/* frontend.*'s times in ms: the preset's, each replaced by its key when given (>= 0). */
static void frontend_times(const scenario *sc, double ms[3])
{
    const frontend_preset *p = frontend_preset_find(V(frontend, preset).s);
    const double preset[3] = {p->request_ms, p->step_ms, p->token_ms};
    for (int i = 0; i < 3; i++) ms[i] = sc->v[frontend_time_keys[i]].d >= 0 ? sc->v[frontend_time_keys[i]].d : preset[i];
}

void scenario_frontend_describe(const scenario_resolved *r, char *out, size_t len)
{
    const sim_frontend *f = &r->frontend;
    char servers[40] = "";
    if (f->servers > 1) snprintf(servers, sizeof servers, " x %d servers", f->servers);
    if (!sim_frontend_on(f)) snprintf(out, len, "%s", "");
    else snprintf(out, len, "%s (%.3g ms a request, %.3g ms a step, %.3g ms a streamed chunk)%s", r->frontend_preset,
                  1e3 * f->request_s, 1e3 * f->step_s, 1e3 * f->token_s, servers);
}

void scenario_kv_cache_describe(const scenario_resolved *r, char *out, size_t len)
{
    char how[160];
    if (r->kv_blocks_set) snprintf(how, sizeof how, "set by kv.num_blocks");
    else if (r->kv_reserve_gib == 0)
        snprintf(how, sizeof how, "derived from hardware.gpu_memory_utilization less the weights alone (kv.reserve_gib = 0)");
    else snprintf(how, sizeof how, "derived from hardware.gpu_memory_utilization less the weights and %.2f GiB %s",
                  scenario_kv_reserve_bytes(r) / (1 << 30),
                  r->kv_reserve_gib > 0 ? "(kv.reserve_gib)" : "of activations and buffers (estimated, kv.reserve_gib)");
    snprintf(out, len, "%lld tokens (%d blocks of %d), %.1f GiB a GPU, %s",
             (long long)r->sched.num_blocks * r->sched.block_size, r->sched.num_blocks, r->sched.block_size,
             r->sched.num_blocks * scenario_kv_block_bytes(r) / (1 << 30), how);
}

void scenario_scheduler_describe(const scenario_resolved *r, char *out, size_t len)
{
    const sched_config *c = &r->sched;
    const char *whence = r->seqs_from_vllm && r->budget_from_vllm ? "vLLM's defaults for"
                         : r->seqs_from_vllm ? "the sequences by vLLM's default for"
                         : r->budget_from_vllm ? "the tokens by vLLM's default for" : "";
    char from[96] = "";
    if (*whence) snprintf(from, sizeof from, " (%s %s)", whence, r->hw.name);
    /* a chunk_size the scheduler does not use is said: the run once ignored it without a word */
    char chunks[128] = "";
    if (c->chunk_size > 0 && c->chunked_prefill)
        snprintf(chunks, sizeof chunks, " in chunks of at most %d tokens", c->chunk_size);
    else if (c->chunk_size > 0)
        snprintf(chunks, sizeof chunks, " (scheduler.chunk_size = %d unused: it computes each prompt whole)",
                 c->chunk_size);
    snprintf(out, len, "%s, chunked prefill %s%s, prefix caching %s, %d sequences and %d tokens a step%s",
             sched_policy_name(c->policy), c->chunked_prefill ? "on" : "off", chunks, c->prefix_caching ? "on" : "off",
             c->max_num_seqs, c->max_num_batched_tokens, from);
}

scenario_key scenario_frontend_key(const scenario *sc)
{
    double ms[3];
    frontend_times(sc, ms);
    if (ms[0] + ms[1] + ms[2] == 0) return K_COUNT;
    for (int i = 0; i < 3; i++)
        if (sc->v[frontend_time_keys[i]].d > 0) return frontend_time_keys[i];
    return K_frontend_preset;
}

void scenario_key_label(const scenario *sc, scenario_key k, char *out, size_t len)
{
    snprintf(out, len, "%s.%s (%s)", keys[k].section, keys[k].key, sc->v[k].origin);
}

/* One API server in front of one instance: with replicas each would have its own, and the
 * router would count the requests still in one; that is not modelled. */
static int resolve_frontend(const scenario *sc, scenario_resolved *out, char *err, size_t errlen)
{
    for (int i = 0; i < 3; i++) {
        double v = sc->v[frontend_time_keys[i]].d;
        if (v < 0 && v != -1) {
            char label[400];
            scenario_key_label(sc, frontend_time_keys[i], label, sizeof label);
            snprintf(err, errlen, "%s = %g is refused: give a time in ms, or -1 for the preset's", label, v);
            return -1;
        }
    }
    double ms[3];
    frontend_times(sc, ms);
    out->frontend = (sim_frontend){ms[0] / 1000, ms[1] / 1000, ms[2] / 1000, (int)V(frontend, servers).i};
    bool custom = false;
    for (int i = 0; i < 3; i++) custom |= sc->v[frontend_time_keys[i]].d >= 0;
    out->frontend_preset = custom ? "custom" : frontend_preset_find(V(frontend, preset).s)->name;
    if (out->frontend.servers > 1 && !sim_frontend_on(&out->frontend)) {
        char label[400];
        scenario_key_label(sc, K_frontend_servers, label, sizeof label);
        snprintf(err, errlen, "%s = %d, but there is no API server to run more of (frontend.preset is %s and no time "
                 "is set)", label, out->frontend.servers, V(frontend, preset).s);
        return -1;
    }
    scenario_key on = scenario_frontend_key(sc);
    if (on == K_COUNT || out->replicas == 1) return 0;
    char label[400];
    scenario_key_label(sc, on, label, sizeof label);
    snprintf(err, errlen, "%s models one API server in front of one instance; this deployment has %d (%s), "
             "whose API servers and router it does not model", label, out->replicas,
             out->prefill_instances ? "deployment.prefill_instances + decode_instances" : "deployment.replicas");
    return -1;
}

/* vLLM's test: device memory of 70 GiB or more and a name without "a100" */
static bool vllm_large_gpu(const hw_spec *hw)
{
    return hw->mem_gib >= 70 && !strstr(hw->name, "a100");
}

int scenario_vllm_budget(const hw_spec *hw) { return vllm_large_gpu(hw) ? 8192 : 2048; }
int scenario_vllm_max_seqs(const hw_spec *hw) { return vllm_large_gpu(hw) ? 1024 : 256; }

static int resolve_sched(const scenario *sc, scenario_resolved *out, char *err, size_t errlen)
{
    sched_config *c = &out->sched;
    out->replicas = (int)V(deployment, replicas).i;
    out->tensor_parallel = (int)V(deployment, tensor_parallel).i;
    char why[400];
    if (model_check_tp(&out->model, out->tensor_parallel, why, sizeof why) < 0) {
        /* the scenario's name leads the message: say where the value came from */
        snprintf(err, errlen, "%s (given by %s)", why, V(deployment, tensor_parallel).origin);
        return -1;
    }
    out->token_times = V(run, token_times).b;
    router_parse(V(deployment, router).s, &out->router);
    sched_policy_parse(V(scheduler, policy).s, &c->policy);
    /* on by default for vLLM's own scheduler; the older policies refuse them only if asked */
    bool paged = sched_policy_info(c->policy)->paged;
    c->prefix_caching = V(scheduler, prefix_caching).b && (paged || GIVEN(scheduler, prefix_caching));
    c->chunked_prefill = V(scheduler, chunked_prefill).b && (paged || GIVEN(scheduler, chunked_prefill));
    const scenario_key asked = c->chunked_prefill && !paged ? K_scheduler_chunked_prefill
                               : c->prefix_caching && !paged ? K_scheduler_prefix_caching : K_COUNT;
    if (asked != K_COUNT) { /* named with where each came from, which the scheduler's own check cannot say */
        snprintf(err, errlen, "%s.%s = on (%s) needs the paged policy, but scheduler.policy is %s (%s)",
                 keys[asked].section, keys[asked].key, sc->v[asked].origin, V(scheduler, policy).s,
                 V(scheduler, policy).origin);
        return -1;
    }
    if (V(scheduler, max_model_len).i > out->model.max_position) { /* vLLM refuses it too, unless overridden */
        snprintf(err, errlen, "scheduler.max_model_len = %lld (%s) is longer than %s's context of %d positions, which "
                 "vLLM refuses; model.max_position sets a longer one", V(scheduler, max_model_len).i,
                 V(scheduler, max_model_len).origin, out->model.name, out->model.max_position);
        return -1;
    }
    c->max_num_seqs = V(scheduler, max_num_seqs).i ? (int)V(scheduler, max_num_seqs).i : scenario_vllm_max_seqs(&out->hw);
    c->chunk_size = (int)V(scheduler, chunk_size).i;
    c->block_size = (int)V(kv, block_size).i;
    c->max_model_len = V(scheduler, max_model_len).i ? (int)V(scheduler, max_model_len).i
                                                      : out->model.max_position;
    c->num_speculative_tokens = (int)V(speculative, num_tokens).i;
    c->spec_disable_by_batch_size = (int)V(speculative, disable_by_batch_size).i;
    out->spec_draft_model = strcmp(V(speculative, method).s, "draft") == 0;
    out->draft_model = *model_preset(V(speculative, draft_model).s);
    out->acceptance_rate = V(speculative, acceptance_rate).d;
    out->acceptance_spread = V(speculative, acceptance_spread).d;
    double most = sqrt(out->acceptance_rate * (1 - out->acceptance_rate));
    if (out->acceptance_spread > 0 && !(out->acceptance_spread < most)) {
        snprintf(err, errlen, "speculative.acceptance_spread = %g (%s): a rate with mean %g can spread by less than "
                 "%.4g (sqrt(mean (1 - mean)))", out->acceptance_spread, V(speculative, acceptance_spread).origin,
                 out->acceptance_rate, most);
        return -1;
    }
    out->prompt_lookup_min = (int)V(speculative, prompt_lookup_min).i;
    out->prompt_lookup_max = (int)V(speculative, prompt_lookup_max).i;
    if (out->prompt_lookup_min > out->prompt_lookup_max) {
        snprintf(err, errlen, "speculative.prompt_lookup_min = %d (%s) must not exceed speculative.prompt_lookup_max = %d (%s)",
                 out->prompt_lookup_min, V(speculative, prompt_lookup_min).origin, out->prompt_lookup_max,
                 V(speculative, prompt_lookup_max).origin);
        return -1;
    }
    if (c->num_speculative_tokens > 0 && out->spec_draft_model && out->draft_model.vocab != out->model.vocab) {
        snprintf(err, errlen, "speculative.draft_model (%s, vocabulary %d) must share the target's vocabulary (%s: %d)",
                 out->draft_model.name, out->draft_model.vocab, out->model.name, out->model.vocab);
        return -1;
    }
    if (c->num_speculative_tokens > 0 && out->spec_draft_model &&
        model_check_tp(&out->draft_model, out->tensor_parallel, why, sizeof why) < 0) {
        snprintf(err, errlen, "speculative.draft_model (%s) runs at the target's tensor parallelism: %s",
                 out->draft_model.name, why);
        return -1;
    }
    out->seqs_from_vllm = V(scheduler, max_num_seqs).i == 0;
    out->budget_from_vllm = V(scheduler, max_num_batched_tokens).i == 0;
    if (!out->budget_from_vllm) {
        c->max_num_batched_tokens = (int)V(scheduler, max_num_batched_tokens).i;
    } else { /* vLLM's: its default, at least a whole prompt without chunks, at most every sequence whole */
        int64_t budget = scenario_vllm_budget(&out->hw);
        if (!c->chunked_prefill && budget < c->max_model_len) budget = c->max_model_len;
        if (budget > (int64_t)c->max_num_seqs * c->max_model_len) budget = (int64_t)c->max_num_seqs * c->max_model_len;
        c->max_num_batched_tokens = (int)budget;
    }
    /* and vLLM's default sequences never outnumber the budget's tokens */
    if (out->seqs_from_vllm && c->max_num_seqs > c->max_num_batched_tokens)
        c->max_num_seqs = c->max_num_batched_tokens;
    out->kv_blocks_set = V(kv, num_blocks).i != 0;
    out->kv_reserve_gib = V(kv, reserve_gib).d;
    if (out->kv_reserve_gib < 0 && out->kv_reserve_gib != -1) {
        snprintf(err, errlen, "kv.reserve_gib = %g (%s): GiB of memory (0 or more), or -1 for vLLM's estimated reserve",
                 out->kv_reserve_gib, V(kv, reserve_gib).origin);
        return -1;
    }
    if (out->kv_blocks_set && out->kv_reserve_gib >= 0) {
        snprintf(err, errlen, "kv.reserve_gib (%s) shapes the pool that memory leaves, but kv.num_blocks (%s) sets the "
                 "pool itself; give one of them", V(kv, reserve_gib).origin, V(kv, num_blocks).origin);
        return -1;
    }
    if (V(kv, num_blocks).i) c->num_blocks = (int)V(kv, num_blocks).i;
    else if ((c->num_blocks = derive_num_blocks(sc, out, err, errlen)) < 0) return -1;
    if (resolve_disaggregation(sc, out, err, errlen) < 0) return -1;
    if (resolve_frontend(sc, out, err, errlen) < 0) return -1;
    return sched_config_check(c, err, errlen);
}

/* A relative path in a scenario file (origin "FILE:LINE") is taken from the file's folder; one
 * given on the command line (--set, a sweep's or plan's values) from the working directory.
 * -1 with why in ERR when the folder and the path do not fit OUT: cut, it named another file. */
static int resolve_path(const scenario *sc, int key, char *out, size_t len, char *err, size_t errlen)
{
    const char *path = sc->v[key].s;
    int n;
    if (path[0] == '/' || !sc->v[key].in_file || !sc->dir[0])
        n = snprintf(out, len, "%s", path);
    else
        n = snprintf(out, len, "%s%s", sc->dir, path);
    if ((n >= 0 && (size_t)n < len) || !path[0]) return 0; /* an empty value names no file */
    /* the key and the value's start alone: the scenario's path, which the caller names, and
     * its origin's would push the reason past a 1,024-byte message */
    snprintf(err, errlen, "%s.%s = %.40s%s: from the scenario's folder, a path of %d characters; at most %zu",
             keys[key].section, keys[key].key, path, strlen(path) > 40 ? "..." : "", n, len - 1);
    return -1;
}

static int resolve_workload(const scenario *sc, scenario_resolved *out, char *err, size_t errlen)
{
    wl_config *w = &out->workload;
    char why[200];
    memset(w, 0, sizeof *w);
    w->num_requests = (int)V(workload, num_requests).i;
    /* a trace is replayed whole unless the scenario asks for a number of requests (the
     * default of 1,000 once cut every longer trace without a word) */
    if (strcmp(V(workload, arrival).s, "trace") == 0 && !GIVEN(workload, num_requests))
        w->num_requests = 0;
    w->warmup_requests = (int)V(run, warmup_requests).i;
    wl_arrival_parse(V(workload, arrival).s, &w->arrival);
    w->rate = V(workload, rate).d;
    w->burstiness = V(workload, burstiness).d;
    w->concurrency = (int)V(workload, concurrency).i;
    w->max_concurrency = (int)V(workload, max_concurrency).i;
    dist_parse(V(workload, prompt_len).s, &w->prompt_len, why, sizeof why);
    dist_parse(V(workload, output_len).s, &w->output_len, why, sizeof why);
    w->shared_prefix_len = (int)V(workload, shared_prefix_len).i;
    w->num_prefixes = (int)V(workload, num_prefixes).i;
    w->prefix_fraction = V(workload, prefix_fraction).d;
    w->trace_time_scale = V(workload, trace_time_scale).d;
    w->vocab_size = out->model.vocab;
    w->seed = (uint64_t)V(run, seed).i;
    w->trace_path = out->trace_path;
    if (w->arrival == ARRIVAL_TRACE && !V(workload, trace).s[0]) {
        snprintf(err, errlen, "workload.arrival = trace needs workload.trace (a CSV path)");
        return -1;
    }
    if (w->arrival != ARRIVAL_TRACE && V(workload, trace).s[0]) {
        snprintf(err, errlen, "workload.trace is set (%s) but workload.arrival is %s, not trace",
                 V(workload, trace).origin, V(workload, arrival).s);
        return -1;
    }
    if (resolve_path(sc, K_workload_trace, out->trace_path, sizeof out->trace_path, err, errlen) < 0) return -1;
    /* a trace that is not there was named by its path alone, not by the key and line that gave
     * it (new-user trial); its contents are read, and their errors named by line, when it runs */
    if (w->arrival == ARRIVAL_TRACE && access(out->trace_path, R_OK) != 0) {
        char label[400];
        scenario_key_label(sc, K_workload_trace, label, sizeof label);
        /* the resolved path cut to fit scenario_resolve's 1,024-byte reason after the label and the value */
        snprintf(err, errlen, "%s = %s: cannot open %.340s: %s", label, V(workload, trace).s, out->trace_path,
                 strerror(errno));
        return -1;
    }
    return 0;
}

/* run.percentiles: up to 8 different numbers in (0, 100], of at most 6 decimals. */
static int resolve_percentiles(const scenario *sc, scenario_resolved *out, char *err, size_t errlen)
{
    const char *p = V(run, percentiles).s;
    double given[8];
    int num_given = 0;
    out->num_percentiles = 0;
    while (*p) {
        char *end;
        double q = decimal_strtod(p, &end);
        if (end == p || !(q > 0 && q <= 100) || (*end && (*end != ',' || !end[1])) || num_given == 8) {
            snprintf(err, errlen, "run.percentiles (%s): expected up to 8 numbers in (0, 100], comma-separated, got \"%s\"",
                     V(run, percentiles).origin, V(run, percentiles).s);
            return -1;
        }
        /* a percentile names summary keys (p99.9_ttft_ms): 1e-320 named one
         * "p9.9998886718268301e-321_ttft_ms" (bad-input campaign) */
        char label[64];
        met_percentile_label(q, label, sizeof label);
        const char *dot = strchr(label, '.');
        if (strchr(label, 'e') || (dot && strlen(dot + 1) > 6)) {
            snprintf(err, errlen, "run.percentiles (%s): %.*s has more than 6 decimals (it names summary keys such as "
                     "p99.9_ttft_ms)", V(run, percentiles).origin, (int)(end - p), p);
            return -1;
        }
        for (int i = 0; i < num_given; i++)
            if (given[i] == q) { /* its summary keys would collide */
                snprintf(err, errlen, "run.percentiles (%s): %.*s is given twice in \"%s\"", V(run, percentiles).origin,
                         (int)(end - p), p, V(run, percentiles).s);
                return -1;
            }
        given[num_given++] = q;
        /* P50, P90 and P99 are always reported: asked for again, the CSVs had their columns
         * twice (a new user's trial) */
        if (q != 50 && q != 90 && q != 99) out->percentiles[out->num_percentiles++] = q;
        p = *end ? end + 1 : end;
    }
    return 0;
}

int scenario_resolve(const scenario *sc, scenario_resolved *out, char *err, size_t errlen)
{
    char why[1024];
    memset(out, 0, sizeof *out);
    resolve_model(sc, out);
    resolve_hardware(sc, out);
    if (model_check(&out->model, why, sizeof why) < 0 || check_cost_keys(sc, why, sizeof why) < 0 ||
        resolve_sched(sc, out, why, sizeof why) < 0 || resolve_workload(sc, out, why, sizeof why) < 0 ||
        resolve_percentiles(sc, out, why, sizeof why) < 0) {
        snprintf(err, errlen, "%s: %s", sc->path[0] ? sc->path : "built-in scenario", why);
        return -1;
    }
    out->slo = (slo_config){V(slo, ttft_ms).d, V(slo, tpot_ms).d, V(slo, e2el_ms).d};
    if (V(hardware, cost_table).s[0] && resolve_path(sc, K_hardware_cost_table, out->cost_table_path,
                                                     sizeof out->cost_table_path, why, sizeof why) < 0) {
        snprintf(err, errlen, "%s: %s", sc->path[0] ? sc->path : "built-in scenario", why);
        return -1;
    }
    return 0;
}

int scenario_resolve_engine(const scenario *sc, scenario_resolved *r, kb_options *kb, kb_sampling *sp,
                            char *err, size_t errlen)
{
    const model_shape *m = &r->model;
    memset(kb, 0, sizeof *kb);
    if (r->fp8_weights || r->fp8_kv) {
        snprintf(err, errlen, "%s: the real engine computes in fp32 (CPU) or bf16 (CUDA); %s = fp8 is for the "
                 "simulator (servesim run)", sc->path[0] ? sc->path : "built-in scenario",
                 r->fp8_weights ? "model.quantization" : "kv.cache_dtype");
        return -1;
    }
    if (r->sched.num_speculative_tokens > 0 && r->spec_draft_model && r->draft_model.num_experts > 0) {
        snprintf(err, errlen, "%s: speculative.draft_model = %s is a mixture of experts; the real engine's forward "
                 "has a dense MLP", sc->path[0] ? sc->path : "built-in scenario", r->draft_model.name);
        return -1;
    }
    if (m->num_experts > 0) {
        snprintf(err, errlen, "%s: the real engine's forward has a dense MLP; %s is a mixture of experts "
                 "(model.num_experts = %d), for the simulator (servesim run)", sc->path[0] ? sc->path : "built-in scenario",
                 m->name, m->num_experts);
        return -1;
    }
    if (r->tensor_parallel > 1 || r->replicas > 1) {
        snprintf(err, errlen, "%s: the real engine runs one instance on one device; deployment.%s = %d is for the "
                 "simulator (servesim run)", sc->path[0] ? sc->path : "built-in scenario",
                 r->tensor_parallel > 1 ? "tensor_parallel" : r->prefill_instances ? "prefill_instances" : "replicas",
                 r->tensor_parallel > 1 ? r->tensor_parallel : r->prefill_instances ? r->prefill_instances : r->replicas);
        return -1;
    }
    kb->kind = strcmp(V(engine, backend).s, "cuda") == 0 ? KB_CUDA : KB_CPU;
    kb->shape = (kb_shape){m->num_layers, m->hidden, m->num_heads, m->num_kv_heads, m->head_dim,
                           m->intermediate, m->vocab, m->rope_theta, m->rms_eps};
    const model_shape *d = &r->draft_model;
    r->draft_kb_shape = (kb_shape){d->num_layers, d->hidden, d->num_heads, d->num_kv_heads, d->head_dim,
                                   d->intermediate, d->vocab, d->rope_theta, d->rms_eps};
    kb->weight_seed = (uint64_t)V(engine, weight_seed).i;
    kb->sample_seed = (uint64_t)V(run, seed).i;
    kb->threads = (int)V(engine, threads).i;
    *sp = (kb_sampling){(float)V(engine, temperature).d, (int)V(engine, top_k).i, (float)V(engine, top_p).d};
    double pool_blocks = r->sched.num_blocks; /* before a clamp, for the message below */
    if (V(kv, num_blocks).i == 0) {
        int elem = kb->kind == KB_CUDA ? 2 : 4;
        double block = (double)model_kv_bytes_per_token(m, elem) * r->sched.block_size;
        /* a draft model's pool has as many blocks (engine/drafter.h): engine.kv_gib holds both */
        if (r->sched.num_speculative_tokens > 0 && r->spec_draft_model)
            block += (double)model_kv_bytes_per_token(&r->draft_model, elem) * r->sched.block_size;
        double blocks = floor(V(engine, kv_gib).d * (1 << 30) / block);
        pool_blocks = blocks;
        r->sched.num_blocks = blocks < 1 ? 1 : blocks > 1e9 ? 1000000000 : (int)blocks;
        char why[512];
        if (sched_config_check(&r->sched, why, sizeof why) < 0) {
            snprintf(err, errlen, "%s: engine.kv_gib = %g gives %d KV blocks: %s",
                     sc->path[0] ? sc->path : "built-in scenario", V(engine, kv_gib).d, r->sched.num_blocks, why);
            return -1;
        }
    }
    /* the engine indexes KV slots in 32 bits: a pool past them was refused by the backend,
     * naming no key (bad-input campaign) */
    if (pool_blocks * r->sched.block_size > INT32_MAX) {
        char key[320];
        scenario_key_label(sc, V(kv, num_blocks).i ? K_kv_num_blocks : K_engine_kv_gib, key, sizeof key);
        snprintf(err, errlen, "%s: the real engine's KV pool of %.0f blocks of %d tokens passes the 2^31 token slots it "
                 "indexes; give a smaller pool", key, pool_blocks, r->sched.block_size);
        return -1;
    }
    return 0;
}
