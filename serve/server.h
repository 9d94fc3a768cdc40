/* `servesim serve`: the live engine behind an OpenAI-compatible HTTP server (libmicrohttpd,
 * one thread per connection, each blocking on its own request's tokens). */
#ifndef SERVESIM_SERVE_SERVER_H
#define SERVESIM_SERVE_SERVER_H

#include <stddef.h>
#include "engine/engine.h"

typedef struct srv_options {
    const char *host;          /* address to listen on; "127.0.0.1" by default */
    int port;                  /* 0: any free port (srv_port says which) */
    const char *model;         /* the name /v1/models shows and requests must use */
    int vocab_size, max_model_len, kv_block_size;
    int64_t kv_tokens;
    size_t max_body;           /* request bodies past this get 413 */
    unsigned max_connections;
    bool event_times;          /* stamp each token's event with its send time (servesim_sent) */
    const char *event_log;     /* CSV of every streamed token's send time, by the client's
                                  X-Request-Id (else the response id); NULL none */
    bool speculative;          /* the engine speculates: /metrics has vLLM's spec_decode counters */
} srv_options;

typedef struct srv srv;

/* Listens on O's address and serves ENG (which must outlive the server). NULL with ERR. */
srv *srv_start(const srv_options *o, engine_live *eng, char *err, size_t errlen);
int srv_port(const srv *s);
/* Writes the /metrics page to F. */
void srv_write_metrics(srv *s, FILE *f);
/* Stops listening; every open stream ends (its request aborted when the engine still runs
 * it), and the event log is moved into place. Call before engine_stop. -1 with ERR (ERR may
 * be NULL) when the log could not be written. */
int srv_stop(srv *s, char *err, size_t errlen);

#endif
