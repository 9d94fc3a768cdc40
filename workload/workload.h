/* Workloads: the list of requests a run sends, from distributions or a trace. */
#ifndef SERVESIM_WORKLOAD_WORKLOAD_H
#define SERVESIM_WORKLOAD_WORKLOAD_H

/* The latest arrival time a workload may hold, in seconds (31 years): beyond it a double's
 * resolution is coarser than a microsecond, and results would not mean anything. */
#define WL_MAX_TIME 1e9

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "workload/dist.h"

typedef enum wl_arrival {
    ARRIVAL_ALL_AT_ONCE,
    ARRIVAL_POISSON,
    ARRIVAL_GAMMA,      /* gamma inter-arrival gaps, shape = burstiness, mean = 1/rate */
    ARRIVAL_CONSTANT,
    ARRIVAL_TRACE,
    ARRIVAL_CLOSED,     /* `concurrency` clients, each sends its next request when the last ends */
} wl_arrival;

const char *wl_arrival_name(wl_arrival a);
int wl_arrival_parse(const char *text, wl_arrival *out);

typedef struct wl_config {
    int num_requests;         /* measured requests (a trace is cut to this many when > 0) */
    int warmup_requests;      /* extra requests sent first, left out of the statistics */
    wl_arrival arrival;
    double rate;              /* requests/s for poisson, gamma, constant */
    double burstiness;        /* gamma shape; 1 = poisson */
    int concurrency;          /* clients, for ARRIVAL_CLOSED */
    int max_concurrency;      /* cap on requests in flight for open-loop arrivals; 0 = none */
    len_dist prompt_len;      /* tokens after the shared prefix */
    len_dist output_len;
    int shared_prefix_len;
    int num_prefixes;
    double prefix_fraction;   /* fraction of requests that start with one of the prefixes */
    const char *trace_path;   /* for ARRIVAL_TRACE */
    double trace_time_scale;  /* trace gaps are multiplied by this */
    int vocab_size;           /* token ids are drawn in [0, vocab_size) */
    uint64_t seed;
} wl_config;

/* One request as the client sees it. Token ids are not stored: wl_fill_prompt derives them. */
typedef struct wl_request {
    int64_t id;               /* 0..n-1 in send order; warm-up requests come first */
    double arrival_time;      /* planned send time (open loop); 0 for closed loop */
    int prompt_len;           /* prefix_len + own tokens */
    int output_len;
    int prefix_id;            /* -1: no shared prefix */
    int prefix_len;
    uint64_t token_seed;
    int warmup;
    /* speculative decoding: this request's chance a draft is accepted (a trace's
     * acceptance_rate column, a measured run's), when has_acceptance_rate */
    bool has_acceptance_rate;
    double acceptance_rate;
} wl_request;

/* A workload is a list (a trace, or wl_build's) or a generator (wl_open of a distribution):
 * either way wl_iter hands its requests out in id order, and a generated one costs no memory
 * per request. */
typedef struct workload {
    wl_request *reqs;         /* the list; NULL for a generated workload */
    size_t n;                 /* warmup_requests + num_requests */
    int vocab_size;
    uint64_t prefix_seed;
    wl_config cfg;            /* what generates it (trace_path cleared: read at open) */
} workload;

/* Builds the request list; on bad input (e.g. a malformed trace row) returns -1 with
 * "file:line: reason" in ERR and allocates nothing.
 * Open-loop arrivals start at 0: request 0 is sent at time 0 and each later one a gap after
 * the one before (poisson: exponential gaps of mean 1/rate; gamma: shape burstiness, scale
 * 1/(rate*burstiness); constant: request i at i/rate). Warm-up requests are the first
 * warmup_requests of that one arrival process.
 * Trace replay (workload/trace.h has the formats): arrival = (t - t_first) * trace_time_scale,
 * lengths as in the file; a length < 1 is an error (the Azure traces have none). With
 * num_requests > 0 only the first warmup_requests + num_requests rows are read, and a shorter
 * trace gives what it has (n may then be smaller; warm-up ones still come first). A request
 * chosen for a shared prefix shares the first min(shared_prefix_len, prompt_len) tokens of
 * its trace-given prompt. */
int wl_build(const wl_config *cfg, workload *out, char *err, size_t errlen);
/* The same workload without its list: requests are generated as wl_iter asks for them (a
 * trace is still read, and checked, whole). Same errors as wl_build. */
int wl_open(const wl_config *cfg, workload *out, char *err, size_t errlen);
void wl_free(workload *w);

/* Hands out W's requests in id order; W must outlive it. NULL when out of memory. */
typedef struct wl_iter wl_iter;
wl_iter *wl_iter_open(const workload *w);
/* The next request into OUT: 1, or 0 when all W->n are out. */
int wl_iter_next(wl_iter *it, wl_request *out);
void wl_iter_close(wl_iter *it);

/* SplitMix64's finalizer: a 64-bit value mixed into one that looks random (seeds, token ids). */
uint64_t wl_mix64(uint64_t x);
/* A uniform in [0, 1) from X: the top 53 bits of wl_mix64(X). */
static inline double wl_mix_unit(uint64_t x) { return (double)(wl_mix64(x) >> 11) * 0x1.0p-53; }

/* Writes the prompt's token ids into BUF[0..prompt_len). Requests with the same prefix_id
 * share their first prefix_len ids; other ids depend only on token_seed. */
void wl_fill_prompt(const workload *w, const wl_request *r, int32_t *buf);

#endif
