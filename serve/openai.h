/* The OpenAI-compatible API's requests and responses, apart from HTTP: parse a completion or
 * chat request into token ids and settings, and write the JSON a server sends back, streamed
 * (server-sent events, one per token) or whole. Text is tokenized byte by byte: the presets'
 * weights are random, and benchmarks send token ids. */
#ifndef SERVESIM_SERVE_OPENAI_H
#define SERVESIM_SERVE_OPENAI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "io/json.h"

typedef enum oai_endpoint { OAI_COMPLETIONS, OAI_CHAT } oai_endpoint;

/* What a request may ask for on this server. */
typedef struct oai_limits {
    const char *model;         /* the served model's name; a request naming another gets 404 */
    int vocab_size;            /* token ids must be in [0, vocab_size) */
    int max_model_len;         /* prompt + max_tokens */
    int64_t kv_tokens;         /* what the whole KV pool holds */
    int kv_block_size;
} oai_limits;

typedef struct oai_request {
    oai_endpoint endpoint;
    int32_t *prompt;           /* malloc'd token ids */
    int prompt_len;
    int max_tokens;
    bool stream, include_usage;
} oai_request;

/* Parses a request BODY for EP. 0, or the HTTP status to answer (400, 404) with the reason
 * in ERR: malformed JSON, a known field of the wrong type or out of range, a prompt that is
 * empty, has ids outside the vocabulary, or is too long with max_tokens for the model or the
 * KV pool. Unknown fields are ignored, as vLLM does; temperature is checked and ignored (the
 * server samples every request with its own setting). */
int oai_parse(const char *body, size_t len, oai_endpoint ep, const oai_limits *lim, oai_request *out,
              char *err, size_t errlen);
void oai_request_free(oai_request *r);

/* {"error": {"message", "type", "param", "code"}} as OpenAI's API answers, as text (malloc'd). */
char *oai_error_body(int status, const char *message);

/* The text of output token T: one printable ASCII character. */
char oai_token_char(int32_t t);

/* One streamed response: its id, creation time and model, formatted once. */
typedef struct oai_stream_fmt {
    oai_endpoint endpoint;
    char head[384];            /* data: {"id":...,"object":...,"created":...,"model":..., */
    size_t head_len;
} oai_stream_fmt;

int oai_stream_init(oai_stream_fmt *f, oai_endpoint ep, const char *id, long created, const char *model);
/* Writes the event for token T (FINAL: the last one, finish_reason "length") into BUF; returns
 * its length, or 0 when it does not fit in CAP. SENT, when not NAN, is added as
 * "servesim_sent" (seconds of CLOCK_MONOTONIC as the event is written): a client on the same
 * machine can then measure its own delay (servesim serve --event-times). */
size_t oai_stream_token(const oai_stream_fmt *f, int32_t t, bool final, double sent, char *buf, size_t cap);
/* The chat stream's first event (the assistant role, no content). */
size_t oai_stream_role(const oai_stream_fmt *f, char *buf, size_t cap);
/* The usage event (choices empty), for stream_options.include_usage. */
size_t oai_stream_usage(const oai_stream_fmt *f, int prompt_tokens, int completion_tokens, char *buf, size_t cap);

/* A whole (not streamed) response for TOKENS[0..n), malloc'd text. FINISH: "length" or "abort". */
char *oai_response(oai_endpoint ep, const char *id, long created, const char *model, const int32_t *tokens, int n,
                   int prompt_tokens, const char *finish);
/* GET /v1/models. */
char *oai_models(const char *model, long created, int max_model_len);

#endif
