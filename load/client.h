/* `servesim load`: a benchmark client for any OpenAI-compatible server (servesim serve, vLLM,
 * SGLang). It sends a workload's requests at their planned times (or as a closed loop) with
 * exact prompt lengths (token ids) and exact output lengths (ignore_eos + max_tokens), streams
 * every response, and records each token's arrival, so that the same metrics as a simulated
 * run come out of it. libcurl's multi interface runs every request on one thread. */
#ifndef SERVESIM_LOAD_CLIENT_H
#define SERVESIM_LOAD_CLIENT_H

#include <signal.h>
#include <stdio.h>
#include "metrics/metrics.h"
#include "workload/workload.h"

typedef enum load_endpoint { LOAD_COMPLETIONS, LOAD_CHAT } load_endpoint;

typedef struct load_options {
    const char *url;           /* the API's base, e.g. http://127.0.0.1:8000/v1 */
    const char *model;         /* NULL: the first model GET {url}/models lists */
    load_endpoint endpoint;
    double timeout_s;          /* per request; 0 = none */
    const volatile sig_atomic_t *stop;   /* set: stop sending, end what is in flight */
    void (*progress)(void *ctx, size_t ended, size_t total);
    void *progress_ctx;
} load_options;

/* Where each ended request goes (any may be NULL). */
typedef struct load_sink {
    met_acc *met;
    void (*on_request)(void *ctx, const req_record *rec, const double *token_times, int num_tokens,
                       const char *error);
    void *ctx;
} load_sink;

typedef struct load_stats {
    size_t sent, failed;
    char first_error[200];     /* the first failed request's error, "" when none failed */
    double end_time;           /* seconds from the first send */
    char model[256];           /* the model the requests named */
    bool interrupted;
    /* When the server stamps its events with their send time (servesim serve --event-times,
     * same machine): how long each token's event took from the server's write to the
     * client's clock, in ms. delay_count 0 when it does not. */
    size_t delay_count;
    double delay_mean_ms, delay_p50_ms, delay_p99_ms, delay_p999_ms, delay_max_ms;
} load_stats;

/* Sends W's requests to O->url. 0 when every request was sent and ended (failed ones are
 * records with stop "error", never dropped); 2 when the server cannot be reached or named no
 * model before anything was sent (reason in ERR); 1 when interrupted (what ended is
 * recorded). */
int load_run(const load_options *o, const workload *w, const wl_config *cfg, const load_sink *sink,
             load_stats *stats, char *err, size_t errlen);

#endif
