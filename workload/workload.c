/* Workload generation. Each random quantity has its own GSL stream, seeded from cfg->seed
 * and the stream's name, so changing one setting leaves the others' draws alone: arrival
 * times do not move when the length or prefix settings change, and so on. Open-loop
 * arrivals start at 0: the first request is sent at time 0, each later one a gap after the
 * one before it (as vLLM's `bench serve` does). */
#include "workload/workload.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include "workload/trace.h"

static const char *const arrival_names[] = {
    [ARRIVAL_ALL_AT_ONCE] = "all_at_once",
    [ARRIVAL_POISSON] = "poisson",
    [ARRIVAL_GAMMA] = "gamma",
    [ARRIVAL_CONSTANT] = "constant",
    [ARRIVAL_TRACE] = "trace",
    [ARRIVAL_CLOSED] = "closed",
};

#define NUM_ARRIVALS ((int)(sizeof arrival_names / sizeof *arrival_names))

const char *wl_arrival_name(wl_arrival a)
{
    return (int)a >= 0 && (int)a < NUM_ARRIVALS ? arrival_names[a] : "invalid";
}

int wl_arrival_parse(const char *text, wl_arrival *out)
{
    for (int a = 0; a < NUM_ARRIVALS; a++) {
        if (strcmp(text, arrival_names[a]) == 0) {
            *out = (wl_arrival)a;
            return 0;
        }
    }
    return -1;
}

uint64_t wl_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

enum stream { STREAM_ARRIVAL, STREAM_PROMPT_LEN, STREAM_OUTPUT_LEN, STREAM_PREFIX,
              STREAM_TOKENS, NUM_STREAMS };

/* mt19937 keeps only 32 bits of its seed: hash all 64 bits of the run seed with the stream
 * number into those 32. */
static gsl_rng *stream_rng(uint64_t seed, enum stream s)
{
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (rng)
        gsl_rng_set(rng, (unsigned long)(wl_mix64(wl_mix64(seed) ^ (uint64_t)s) >> 32));
    return rng;
}

static uint64_t draw_u64(gsl_rng *rng)
{
    uint64_t hi = gsl_rng_get(rng) & 0xffffffffUL;
    return hi << 32 | (gsl_rng_get(rng) & 0xffffffffUL);
}

static int check_config(const wl_config *c, char *err, size_t errlen)
{
    const char *bad = NULL;
    int rated = c->arrival == ARRIVAL_POISSON || c->arrival == ARRIVAL_GAMMA ||
                c->arrival == ARRIVAL_CONSTANT;
    if ((int)c->arrival < 0 || (int)c->arrival >= NUM_ARRIVALS)
        bad = "unknown arrival pattern";
    else if (c->num_requests < 0 || (c->arrival != ARRIVAL_TRACE && c->num_requests < 1))
        bad = "num_requests must be >= 1 (0 = the whole trace, for trace arrivals only)";
    else if (c->warmup_requests < 0)
        bad = "warmup_requests must be >= 0";
    else if (rated && !(c->rate > 0 && isfinite(c->rate)))
        bad = "rate must be a positive number of requests/s";
    else if (c->arrival == ARRIVAL_GAMMA && !(c->burstiness > 0 && isfinite(c->burstiness)))
        bad = "burstiness must be > 0";
    else if (c->arrival == ARRIVAL_CLOSED && c->concurrency < 1)
        bad = "concurrency must be >= 1 for closed-loop arrivals";
    else if (c->max_concurrency < 0)
        bad = "max_concurrency must be >= 0";
    else if (c->arrival == ARRIVAL_TRACE && !c->trace_path)
        bad = "trace arrivals need a trace path";
    else if (c->arrival == ARRIVAL_TRACE && !(c->trace_time_scale > 0 &&
                                              isfinite(c->trace_time_scale)))
        bad = "trace_time_scale must be > 0";
    else if (c->vocab_size < 1)
        bad = "vocab_size must be >= 1";
    else if (c->shared_prefix_len < 0 || c->shared_prefix_len > (1 << 24))
        bad = "shared_prefix_len must be in [0, 16777216]";
    else if (c->num_prefixes < 0)
        bad = "num_prefixes must be >= 0";
    else if (!(c->prefix_fraction >= 0 && c->prefix_fraction <= 1))
        bad = "prefix_fraction must be in [0, 1]";
    else if (c->prefix_fraction > 0 && c->shared_prefix_len > 0 && c->num_prefixes < 1)
        bad = "num_prefixes must be >= 1 when requests share a prefix";
    if (bad)
        snprintf(err, errlen, "%s", bad);
    return bad ? -1 : 0;
}

typedef struct streams {
    gsl_rng *rng[NUM_STREAMS];
} streams;

static void streams_free(streams *s)
{
    for (int i = 0; i < NUM_STREAMS; i++)
        gsl_rng_free(s->rng[i]);
}

static int streams_init(streams *s, uint64_t seed)
{
    int ok = 1;
    for (int i = 0; i < NUM_STREAMS; i++)
        ok &= (s->rng[i] = stream_rng(seed, (enum stream)i)) != NULL;
    if (!ok)
        streams_free(s);
    return ok ? 0 : -1;
}

/* Chooses a request's shared prefix. Two draws per request whatever the settings, so one
 * request's choice never shifts another's. */
static void choose_prefix(const wl_config *c, gsl_rng *rng, wl_request *r)
{
    double u = gsl_rng_uniform(rng), v = gsl_rng_uniform(rng);
    r->prefix_id = -1;
    r->prefix_len = 0;
    if (c->shared_prefix_len > 0 && c->num_prefixes > 0 && u < c->prefix_fraction) {
        int id = (int)(v * c->num_prefixes);
        r->prefix_id = id < c->num_prefixes ? id : c->num_prefixes - 1;
        r->prefix_len = c->shared_prefix_len;
    }
}

static int load_trace(const wl_config *c, wl_request **reqs, size_t *n, char *err,
                      size_t errlen)
{
    size_t want = c->num_requests > 0 ? (size_t)c->warmup_requests + c->num_requests : 0;
    trace_row *rows;
    size_t unfinished = 0;
    if (trace_read(c->trace_path, want, &rows, n, &unfinished, err, errlen))
        return -1;
    /* said once a process (a sweep opens the trace at each point) */
    static _Thread_local char said[4096]; /* a sweep's workers build theirs at once */
    if ((unfinished || (want && *n < want)) && strcmp(said, c->trace_path) != 0) {
        snprintf(said, sizeof said, "%s", c->trace_path);
        if (unfinished)
            fprintf(stderr, "servesim: warning: %s: %zu requests that did not finish (stop_reason other than length: "
                            "rejected or failed, their output length not known) are left out of the replay\n",
                    c->trace_path, unfinished);
        /* a cut past the trace's end replayed fewer requests without a word (a new user's trial) */
        if (want && *n < want)
            fprintf(stderr, "servesim: warning: %s: workload.num_requests = %d%s asks for %zu, the trace has %zu: all "
                            "are replayed\n", c->trace_path, c->num_requests,
                    c->warmup_requests ? " with run.warmup_requests" : "", want, *n);
    }
    if (*n == 0) {
        free(rows);
        snprintf(err, errlen, "%s: the trace has no requests", c->trace_path);
        return -1;
    }
    if (*n <= (size_t)c->warmup_requests) {
        free(rows);
        snprintf(err, errlen, "%s: the trace has %zu requests, and run.warmup_requests = %d leaves none to measure",
                 c->trace_path, *n, c->warmup_requests);
        return -1;
    }
    /* rows are in arrival order: the last is the latest; past a billion seconds (31 years)
     * the clock's resolution is gone, and 1e308 x a scale is infinite */
    double last = rows[*n - 1].time * c->trace_time_scale;
    if (!(last <= WL_MAX_TIME)) {
        free(rows);
        snprintf(err, errlen, "%s: with workload.trace_time_scale = %g the last arrival is at %g s, past %g s",
                 c->trace_path, c->trace_time_scale, last, WL_MAX_TIME);
        return -1;
    }
    *reqs = calloc(*n, sizeof **reqs);
    if (!*reqs) {
        free(rows);
        snprintf(err, errlen, "%s: out of memory", c->trace_path);
        return -1;
    }
    for (size_t i = 0; i < *n; i++) {
        (*reqs)[i].arrival_time = rows[i].time * c->trace_time_scale;
        (*reqs)[i].prompt_len = rows[i].prompt_len;
        (*reqs)[i].output_len = rows[i].output_len;
        (*reqs)[i].has_acceptance_rate = rows[i].acceptance_rate >= 0;
        (*reqs)[i].acceptance_rate = rows[i].acceptance_rate;
        (*reqs)[i].warmup = rows[i].warmup;   /* a run's requests.csv: its warm-ups stay warm-ups */
    }
    free(rows);
    return 0;
}

/* A generated workload's state: the streams and the running arrival time. Requests come out
 * in id order, each taking its draws from each stream in that order, so a request's values
 * do not depend on how many requests are asked for or how they are consumed. */
struct wl_iter {
    const workload *w;
    streams s;
    size_t next;
    double t;              /* arrival time of the last request */
};

static int iter_start(wl_iter *it, const workload *w)
{
    *it = (wl_iter){.w = w};
    if (streams_init(&it->s, w->cfg.seed)) return -1;
    draw_u64(it->s.rng[STREAM_TOKENS]);   /* the workload's prefix_seed, drawn first */
    return 0;
}

/* Open-loop send time of request I: each a gap after the one before (poisson: exponential
 * gaps of mean 1/rate; gamma: shape burstiness, scale 1/(rate*burstiness)); constant: I/rate,
 * not a running sum, so no drift over long runs; 0 for everything at once and closed loops. */
static double next_arrival(wl_iter *it, size_t i)
{
    const wl_config *c = &it->w->cfg;
    if (i > 0 && c->arrival == ARRIVAL_POISSON)
        it->t += gsl_ran_exponential(it->s.rng[STREAM_ARRIVAL], 1 / c->rate);
    else if (i > 0 && c->arrival == ARRIVAL_GAMMA)
        it->t += gsl_ran_gamma(it->s.rng[STREAM_ARRIVAL], c->burstiness, 1 / (c->rate * c->burstiness));
    else if (c->arrival == ARRIVAL_CONSTANT)
        it->t = (double)i / c->rate;
    return it->t;
}

int wl_iter_next(wl_iter *it, wl_request *out)
{
    const workload *w = it->w;
    const wl_config *c = &w->cfg;
    size_t i = it->next;
    if (i >= w->n) return 0;
    it->next++;
    if (w->reqs) {
        *out = w->reqs[i];
        return 1;
    }
    wl_request *r = out;
    *r = (wl_request){.id = (int64_t)i, .warmup = i < (size_t)c->warmup_requests};
    r->arrival_time = next_arrival(it, i);
    choose_prefix(c, it->s.rng[STREAM_PREFIX], r);
    r->prompt_len = r->prefix_len + dist_sample(&c->prompt_len, it->s.rng[STREAM_PROMPT_LEN]);
    r->output_len = dist_sample(&c->output_len, it->s.rng[STREAM_OUTPUT_LEN]);
    r->token_seed = draw_u64(it->s.rng[STREAM_TOKENS]);
    return 1;
}

wl_iter *wl_iter_open(const workload *w)
{
    wl_iter *it = malloc(sizeof *it);
    if (it && iter_start(it, w) < 0) {
        free(it);
        return NULL;
    }
    return it;
}

void wl_iter_close(wl_iter *it)
{
    if (!it) return;
    streams_free(&it->s);
    free(it);
}

/* A trace's rows as a list: its lengths and times from the file, prefixes and token seeds
 * drawn as for generated requests. */
static int open_trace(const wl_config *cfg, workload *out, char *err, size_t errlen)
{
    wl_request *reqs;
    size_t n;
    if (load_trace(cfg, &reqs, &n, err, errlen))
        return -1;
    streams s;
    if (streams_init(&s, cfg->seed)) {
        free(reqs);
        snprintf(err, errlen, "out of memory for the random generators");
        return -1;
    }
    out->prefix_seed = draw_u64(s.rng[STREAM_TOKENS]);
    size_t measured = 0;
    for (size_t i = 0; i < n; i++) {
        wl_request *r = &reqs[i];
        r->id = (int64_t)i;
        r->warmup = r->warmup || i < (size_t)cfg->warmup_requests;
        measured += !r->warmup;
        choose_prefix(cfg, s.rng[STREAM_PREFIX], r);
        if (r->prefix_len > r->prompt_len)
            r->prefix_len = r->prompt_len;
        r->token_seed = draw_u64(s.rng[STREAM_TOKENS]);
    }
    streams_free(&s);
    if (measured == 0) { /* every row a warm-up by its warmup column */
        free(reqs);
        snprintf(err, errlen, "%s: every one of the trace's %zu requests is a warm-up (its warmup column, and "
                 "run.warmup_requests = %d): none is left to measure", cfg->trace_path, n, cfg->warmup_requests);
        return -1;
    }
    out->reqs = reqs;
    out->n = n;
    return 0;
}

int wl_open(const wl_config *cfg, workload *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (check_config(cfg, err, errlen))
        return -1;
    out->cfg = *cfg;
    out->cfg.trace_path = NULL;   /* read here, never again */
    out->vocab_size = cfg->vocab_size;
    if (cfg->arrival == ARRIVAL_TRACE)
        return open_trace(cfg, out, err, errlen);
    out->n = (size_t)cfg->warmup_requests + (size_t)cfg->num_requests;
    streams s;
    if (streams_init(&s, cfg->seed)) {
        snprintf(err, errlen, "out of memory for the random generators");
        return -1;
    }
    out->prefix_seed = draw_u64(s.rng[STREAM_TOKENS]);
    streams_free(&s);
    return 0;
}

int wl_build(const wl_config *cfg, workload *out, char *err, size_t errlen)
{
    if (wl_open(cfg, out, err, errlen) < 0)
        return -1;
    if (out->reqs)
        return 0;
    wl_request *reqs = calloc(out->n ? out->n : 1, sizeof *reqs);
    wl_iter *it = reqs ? wl_iter_open(out) : NULL;
    if (!it) {
        free(reqs);
        snprintf(err, errlen, "out of memory for %zu requests", out->n);
        return -1;
    }
    for (size_t i = 0; wl_iter_next(it, &reqs[i]); i++) {}
    wl_iter_close(it);
    out->reqs = reqs;
    return 0;
}

void wl_free(workload *w)
{
    free(w->reqs);
    w->reqs = NULL;
    w->n = 0;
}

/* Maps a 64-bit hash onto [0, vocab) by multiply-shift (no division, negligible bias). */
static int32_t to_token(uint64_t h, int vocab)
{
    return (int32_t)(((h >> 32) * (uint64_t)vocab) >> 32);
}

void wl_fill_prompt(const workload *w, const wl_request *r, int32_t *buf)
{
    uint64_t prefix_key = wl_mix64(w->prefix_seed ^ wl_mix64((uint64_t)r->prefix_id));
    for (int i = 0; i < r->prefix_len; i++)
        buf[i] = to_token(wl_mix64(prefix_key + (uint64_t)i), w->vocab_size);
    for (int i = r->prefix_len; i < r->prompt_len; i++)
        buf[i] = to_token(wl_mix64(r->token_seed ^ wl_mix64((uint64_t)i)), w->vocab_size);
}
