/* The HTTP server. libmicrohttpd runs one thread per connection: a streaming response's
 * reader sleeps in poll() on two descriptors, an eventfd the engine thread bumps at each token
 * and the client's socket (for a hang-up), so it wakes exactly when there is something to
 * send or nobody to send it to: a client that goes away aborts its request and frees its
 * blocks at once, even while it waits in the queue, and an idle stream costs no CPU. (A
 * 20 ms timed wait instead woke 1,000 idle streams 50,000 times a second.) */
#define _GNU_SOURCE   /* POLLRDHUP */
#include "serve/server.h"

#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <microhttpd.h>

#include "io/csv.h"
#include "io/outdir.h"
#include "serve/openai.h"
#include "serve/prom.h"

enum { STOP_CHECK_MS = 250 /* how soon a sleeping stream notices srv_stop */ };

struct srv {
    struct MHD_Daemon *d;
    engine_live *eng;
    srv_options o;
    oai_limits lim;
    long created;
    int port;
    int stopping;              /* read and written with __atomic builtins */
    int64_t next_id;
    pthread_mutex_t mlock;     /* the histograms */
    prom_hist ttft, itl, e2e;
    int64_t http_errors;
    outfile log;               /* --event-log: written to a temporary file, moved at the stop */
    FILE *logf;                /* NULL: no log */
    pthread_mutex_t loglock;
};

/* One completion request, from its parse to the end of its response. */
typedef struct stream {
    srv *s;
    engine_job job;
    oai_request rq;
    oai_stream_fmt fmt;
    char id[48];
    char client_id[128];       /* the client's X-Request-Id, else ID: the event log's name */
    double *sent_at;           /* --event-log: each token's send time (capacity rq.max_tokens) */
    int fd;                    /* the client's socket, to notice a hang-up */
    int wake;                  /* eventfd: the engine thread's news */
    pthread_mutex_t lock;
    int32_t *tokens;           /* produced so far (capacity rq.max_tokens) */
    int num_tokens;
    bool done;
    req_record rec;
    double last_time;          /* engine thread only */
    int sent;                  /* the reader only: tokens already written */
    bool role_sent, usage_sent, done_sent;
} stream;

/* A request's upload, kept until the request completes. */
typedef struct upload {
    char *body;
    size_t len, cap;
    bool too_big;
} upload;

static bool stopping(const srv *s) { return __atomic_load_n(&s->stopping, __ATOMIC_ACQUIRE); }

static void notify(stream *st)
{
    uint64_t one = 1;
    ssize_t n = write(st->wake, &one, sizeof one);
    (void)n;   /* a full counter (2^64 - 2 bumps) has news pending anyway */
}

/* ---- engine callbacks (engine thread) ---- */

static void on_token(void *ctx, int32_t token, double time)
{
    stream *st = ctx;
    srv *s = st->s;
    pthread_mutex_lock(&st->lock);
    bool first = st->num_tokens == 0;
    if (st->num_tokens < st->rq.max_tokens) st->tokens[st->num_tokens++] = token;
    pthread_mutex_unlock(&st->lock);
    notify(st);
    pthread_mutex_lock(&s->mlock);
    if (first) prom_observe(&s->ttft, time - st->job.arrival_time);
    else prom_observe(&s->itl, time - st->last_time);
    pthread_mutex_unlock(&s->mlock);
    st->last_time = time;
}

static void on_done(void *ctx, const req_record *rec)
{
    stream *st = ctx;
    srv *s = st->s;
    if (rec->stop == STOP_LENGTH) {
        pthread_mutex_lock(&s->mlock);
        prom_observe(&s->e2e, rec->finish_time - rec->arrival_time);
        pthread_mutex_unlock(&s->mlock);
    }
    pthread_mutex_lock(&st->lock);
    st->rec = *rec;
    st->done = true;
    pthread_mutex_unlock(&st->lock);
    notify(st);
}

static stream *stream_new(srv *s, oai_request *rq, int fd)
{
    stream *st = calloc(1, sizeof *st);
    int32_t *tokens = malloc((size_t)rq->max_tokens * sizeof *tokens);
    double *sent_at = s->logf ? malloc((size_t)rq->max_tokens * sizeof *sent_at) : NULL;
    int wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (!st || !tokens || (s->logf && !sent_at) || wake < 0) {
        free(st);
        free(tokens);
        free(sent_at);
        if (wake >= 0) close(wake);
        return NULL;
    }
    st->wake = wake;
    st->s = s;
    st->rq = *rq;
    st->tokens = tokens;
    st->sent_at = sent_at;
    st->fd = fd;
    pthread_mutex_init(&st->lock, NULL);
    long long id = __atomic_fetch_add(&s->next_id, 1, __ATOMIC_RELAXED);
    snprintf(st->id, sizeof st->id, "%s-%lld", rq->endpoint == OAI_CHAT ? "chatcmpl" : "cmpl", id);
    snprintf(st->client_id, sizeof st->client_id, "%s", st->id);
    st->job = (engine_job){.prompt = rq->prompt, .prompt_len = rq->prompt_len, .max_tokens = rq->max_tokens,
                           .on_token = on_token, .on_done = on_done, .ctx = st};
    return st;
}

/* Ends ST's request if the engine still runs it, then frees ST. */
static void stream_free(void *cls)
{
    stream *st = cls;
    engine_abort(st->s->eng, &st->job);
    srv *s = st->s;
    if (s->logf && st->sent > 0) {
        pthread_mutex_lock(&s->loglock);
        for (int i = 0; i < st->sent; i++) {
            csv_write_field(s->logf, st->client_id);
            fprintf(s->logf, ",%d,%.9f\n", i, st->sent_at[i]);
        }
        pthread_mutex_unlock(&s->loglock);
    }
    free(st->sent_at);
    oai_request_free(&st->rq);
    free(st->tokens);
    close(st->wake);
    pthread_mutex_destroy(&st->lock);
    free(st);
}

/* Sleeps (ST's lock released meanwhile) until the engine has news for ST; false when the
 * client hung up or the server is stopping. */
static bool wait_news(stream *st)
{
    pthread_mutex_unlock(&st->lock);
    struct pollfd p[2] = {{.fd = st->wake, .events = POLLIN}, {.fd = st->fd, .events = POLLRDHUP}};
    bool here = true;
    for (;;) {
        int n = poll(p, st->fd >= 0 ? 2 : 1, STOP_CHECK_MS);
        if (stopping(st->s)) here = false;
        else if (n > 0 && (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))) here = false;
        else if (n <= 0 || !(p[0].revents & POLLIN)) continue;
        break;
    }
    uint64_t count;
    ssize_t r = read(st->wake, &count, sizeof count);   /* reset: what it counted is read below */
    (void)r;
    pthread_mutex_lock(&st->lock);
    return here;
}

/* Server-sent events: every token produced since the last call, then usage and [DONE]. */
static ssize_t read_events(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    stream *st = cls;
    static const char done_event[] = "data: [DONE]\n\n";
    size_t n = 0, k;
    if (max < 2048) return MHD_CONTENT_READER_END_WITH_ERROR;   /* an event must fit (MHD gives 64 KiB) */
    pthread_mutex_lock(&st->lock);
    for (;;) {
        if (st->rq.endpoint == OAI_CHAT && !st->role_sent) {
            if (!(k = oai_stream_role(&st->fmt, buf + n, max - n))) break;
            n += k;
            st->role_sent = true;
        }
        /* stamped as formatted, after any wait: what the client can be late against */
        double stamp = NAN;
        if ((st->s->o.event_times || st->sent_at) && st->sent < st->num_tokens) {
            struct timespec t;
            clock_gettime(CLOCK_MONOTONIC, &t);
            stamp = (double)t.tv_sec + t.tv_nsec * 1e-9;
        }
        while (st->sent < st->num_tokens) {
            bool final = st->sent + 1 == st->rq.max_tokens;
            if (!(k = oai_stream_token(&st->fmt, st->tokens[st->sent], final, st->s->o.event_times ? stamp : NAN, buf + n,
                                       max - n)))
                break;
            if (st->sent_at) st->sent_at[st->sent] = stamp;
            n += k;
            st->sent++;
        }
        if (n > 0) break;
        if (st->done && st->sent == st->num_tokens && st->rec.stop != STOP_LENGTH && !st->usage_sent) {
            /* the engine ended it short (stopping, or a backend failure): say so, not [DONE] */
            static const char aborted[] =
                "data: {\"error\":{\"message\":\"the server ended this request before its last token "
                "(it is stopping, or its engine failed)\",\"type\":\"InternalServerError\",\"param\":null,\"code\":500}}\n\n";
            if (max < sizeof aborted - 1) break;
            memcpy(buf, aborted, sizeof aborted - 1);
            n = sizeof aborted - 1;
            st->usage_sent = st->done_sent = true;
            break;
        }
        if (st->done && st->sent == st->num_tokens) {
            if (st->rq.include_usage && !st->usage_sent) {
                n = oai_stream_usage(&st->fmt, st->rec.prompt_len, st->num_tokens, buf, max);
                st->usage_sent = n > 0;
                if (n > 0) break;
            }
            if (!st->done_sent && max >= sizeof done_event - 1) {
                memcpy(buf, done_event, sizeof done_event - 1);
                n = sizeof done_event - 1;
                st->done_sent = true;
                break;
            }
            pthread_mutex_unlock(&st->lock);
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        if (!wait_news(st)) {
            pthread_mutex_unlock(&st->lock);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
    pthread_mutex_unlock(&st->lock);
    return (ssize_t)n;
}

/* ---- responses ---- */

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned status, char *text, const char *type)
{
    if (!text) {
        status = MHD_HTTP_INTERNAL_SERVER_ERROR;
        text = strdup("{\"error\":{\"message\":\"out of memory\",\"type\":\"InternalServerError\",\"param\":null,\"code\":500}}");
        if (!text) return MHD_NO;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result send_error(srv *s, struct MHD_Connection *c, unsigned status, const char *message)
{
    __atomic_fetch_add(&s->http_errors, 1, __ATOMIC_RELAXED);
    return send_text(c, status, oai_error_body((int)status, message), "application/json");
}

static int client_fd(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

static enum MHD_Result complete(srv *s, struct MHD_Connection *c, oai_endpoint ep, const upload *up)
{
    if (up->too_big) {
        char msg[96];
        snprintf(msg, sizeof msg, "the request body is larger than %zu bytes", s->o.max_body);
        return send_error(s, c, MHD_HTTP_CONTENT_TOO_LARGE, msg);
    }
    oai_request rq;
    char err[512];
    int status = oai_parse(up->body ? up->body : "", up->len, ep, &s->lim, &rq, err, sizeof err);
    if (status) return send_error(s, c, (unsigned)status, err);
    stream *st = stream_new(s, &rq, client_fd(c));
    if (!st) {
        oai_request_free(&rq);
        return send_error(s, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    }
    /* vLLM's benchmark client names each request in this header (vLLM's server takes it as
     * the request's id); the event log uses it so that the client's records can be matched */
    const char *xid = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Request-Id");
    if (xid && xid[0] && strlen(xid) < sizeof st->client_id) snprintf(st->client_id, sizeof st->client_id, "%s", xid);
    if (oai_stream_init(&st->fmt, ep, st->id, time(NULL), s->o.model) < 0) {
        stream_free(st);   /* never submitted: nothing to abort */
        return send_error(s, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "the response header does not fit (model name too long)");
    }
    if (engine_submit(s->eng, &st->job) < 0) {
        stream_free(st);
        return send_error(s, c, MHD_HTTP_SERVICE_UNAVAILABLE, "the server is shutting down");
    }
    if (rq.stream) {
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, read_events, st, stream_free);
        if (!r) {
            stream_free(st);
            return MHD_NO;
        }
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        return ok;
    }
    pthread_mutex_lock(&st->lock);
    bool here = true;
    while (!st->done && (here = wait_news(st))) {}
    pthread_mutex_unlock(&st->lock);
    if (!here) {
        stream_free(st);   /* aborts the request */
        return MHD_NO;
    }
    if (st->rec.stop != STOP_LENGTH) {
        stream_free(st);
        return send_error(s, c, MHD_HTTP_INTERNAL_SERVER_ERROR,
                          "the server ended this request before its last token (it is stopping, or its engine failed)");
    }
    char *body = oai_response(ep, st->id, (long)time(NULL), s->o.model, st->tokens, st->num_tokens,
                              st->rec.prompt_len, "length");
    stream_free(st);
    return send_text(c, MHD_HTTP_OK, body, "application/json");
}

void srv_write_metrics(srv *s, FILE *f)
{
    engine_gauges g;
    engine_gauges_get(s->eng, &g);
    const char *m = s->o.model;
    prom_write_value(f, "vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", m, g.running);
    prom_write_value(f, "vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", m, g.waiting);
    prom_write_value(f, "vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", m, g.kv_usage);
    prom_write_value(f, "vllm:prefix_cache_queries_total", "counter", "Prefix cache queries, in terms of number of queried tokens.", m,
                     (double)g.prefix_queries);
    prom_write_value(f, "vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in terms of number of cached tokens.", m,
                     (double)g.prefix_hits);
    prom_write_value(f, "vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", m, (double)g.prompt_tokens);
    prom_write_value(f, "vllm:generation_tokens_total", "counter", "Number of generation tokens processed.", m,
                     (double)g.generation_tokens);
    if (s->o.speculative) { /* vLLM exports these only when it speculates */
        prom_write_value(f, "vllm:spec_decode_num_drafts_total", "counter", "Number of spec decoding drafts.", m,
                         (double)g.spec_drafts);
        prom_write_value(f, "vllm:spec_decode_num_draft_tokens_total", "counter", "Number of draft tokens.", m,
                         (double)g.spec_draft_tokens);
        prom_write_value(f, "vllm:spec_decode_num_accepted_tokens_total", "counter", "Number of accepted tokens.", m,
                         (double)g.spec_accepted_tokens);
    }
    prom_write_value(f, "vllm:request_success_total", "counter", "Count of successfully processed requests.", m, (double)g.finished);
    prom_write_value(f, "servesim:request_aborted_total", "counter", "Requests whose client went away.", m, (double)g.aborted);
    prom_write_value(f, "servesim:engine_steps_total", "counter", "Engine steps run.", m, (double)g.steps);
    pthread_mutex_lock(&s->mlock);
    prom_hist ttft = s->ttft, itl = s->itl, e2e = s->e2e;
    pthread_mutex_unlock(&s->mlock);
    prom_write_hist(f, "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", m, &ttft);
    prom_write_hist(f, "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", m, &itl);
    prom_write_hist(f, "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", m, &e2e);
}

static enum MHD_Result send_metrics(srv *s, struct MHD_Connection *c)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return send_error(s, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    srv_write_metrics(s, f);
    if (fclose(f) != 0) {
        free(text);
        text = NULL;
    }
    return send_text(c, MHD_HTTP_OK, text, "text/plain; version=0.0.4; charset=utf-8");
}

/* ---- routing ---- */

static enum MHD_Result route(srv *s, struct MHD_Connection *c, const char *url, const char *method, const upload *up)
{
    bool get = strcmp(method, MHD_HTTP_METHOD_GET) == 0, post = strcmp(method, MHD_HTTP_METHOD_POST) == 0;
    if (strcmp(url, "/health") == 0 && get) return send_text(c, MHD_HTTP_OK, strdup(""), "text/plain");
    if (strcmp(url, "/metrics") == 0 && get) return send_metrics(s, c);
    if (strcmp(url, "/v1/models") == 0 && get)
        return send_text(c, MHD_HTTP_OK, oai_models(s->o.model, s->created, s->o.max_model_len), "application/json");
    if (strcmp(url, "/v1/completions") == 0 && post) return complete(s, c, OAI_COMPLETIONS, up);
    if (strcmp(url, "/v1/chat/completions") == 0 && post) return complete(s, c, OAI_CHAT, up);
    static const char *const known[] = {"/health", "/metrics", "/v1/models", "/v1/completions", "/v1/chat/completions"};
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (strcmp(url, known[i]) == 0) return send_error(s, c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed");
    char msg[160];
    snprintf(msg, sizeof msg, "no such route: %.100s", url);
    return send_error(s, c, MHD_HTTP_NOT_FOUND, msg);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *data, size_t *data_size, void **con_cls)
{
    (void)version;
    srv *s = cls;
    upload *up = *con_cls;
    if (!up) {
        up = calloc(1, sizeof *up);
        *con_cls = up;
        return up ? MHD_YES : MHD_NO;
    }
    if (*data_size) {
        size_t n = *data_size;
        *data_size = 0;
        if (up->too_big || up->len + n > s->o.max_body) {
            up->too_big = true;
            return MHD_YES;
        }
        if (up->len + n + 1 > up->cap) {
            size_t cap = up->cap ? up->cap : 4096;
            while (cap < up->len + n + 1) cap *= 2;
            char *b = realloc(up->body, cap);
            if (!b) return MHD_NO;
            up->body = b;
            up->cap = cap;
        }
        memcpy(up->body + up->len, data, n);
        up->len += n;
        up->body[up->len] = '\0';
        return MHD_YES;
    }
    return route(s, c, url, method, up);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode why)
{
    (void)cls;
    (void)c;
    (void)why;
    upload *up = *con_cls;
    if (up) free(up->body);
    free(up);
    *con_cls = NULL;
}

/* Frees a server that is not listening; its event log, if any, is removed unwritten. */
static void srv_discard(srv *s)
{
    if (s->logf) of_abort(&s->log);
    pthread_mutex_destroy(&s->loglock);
    pthread_mutex_destroy(&s->mlock);
    free(s);
}

/* The event log's header, and whether PATH is a file that starts with it. */
#define EVENT_LOG_HEADER "request_id,token_index,sent"
static bool is_event_log(const char *path)
{
    FILE *f = fopen(path, "r");
    char line[64];
    bool ours = f && fgets(line, sizeof line, f) && strcmp(line, EVENT_LOG_HEADER "\n") == 0;
    if (f) fclose(f);
    return ours;
}

srv *srv_start(const srv_options *o, engine_live *eng, char *err, size_t errlen)
{
    srv *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->o = *o;
    s->eng = eng;
    s->created = (long)time(NULL);
    s->lim = (oai_limits){.model = o->model, .vocab_size = o->vocab_size, .max_model_len = o->max_model_len,
                          .kv_tokens = o->kv_tokens, .kv_block_size = o->kv_block_size};
    if (o->event_log) {
        /* a path that cannot take the file is refused now, not found out at the stop */
        char why[600];
        struct stat sb;
        if (stat(o->event_log, &sb) == 0 && S_ISDIR(sb.st_mode)) {
            snprintf(err, errlen, "--event-log %s: is a directory (name a file in it)", o->event_log);
            free(s);
            return NULL;
        }
        /* an existing file is replaced at the stop: only an event log of ours may be (the
         * scenario file itself, given here by mistake, was overwritten) */
        if (stat(o->event_log, &sb) == 0 && !is_event_log(o->event_log)) {
            snprintf(err, errlen, "--event-log %s: exists and is not an event log; serve replaces only an event log "
                     "(its first line \"%s\"): name a new file", o->event_log, EVENT_LOG_HEADER);
            free(s);
            return NULL;
        }
        if (!(s->logf = of_open(&s->log, o->event_log, why, sizeof why))) {
            snprintf(err, errlen, "--event-log %s: cannot create it (%s)", o->event_log, strerror(errno));
            free(s);
            return NULL;
        }
        fprintf(s->logf, "%s\n", EVENT_LOG_HEADER);
    }
    pthread_mutex_init(&s->loglock, NULL);
    pthread_mutex_init(&s->mlock, NULL);
    prom_hist_init(&s->ttft, prom_ttft_bounds, prom_ttft_n);
    prom_hist_init(&s->itl, prom_itl_bounds, prom_itl_n);
    prom_hist_init(&s->e2e, prom_e2e_bounds, prom_e2e_n);
    char port[16];
    snprintf(port, sizeof port, "%d", o->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    int gai = getaddrinfo(o->host, port, &hints, &ai);
    if (gai != 0) {
        snprintf(err, errlen, "--host %s: %s", o->host, gai_strerror(gai));
        srv_discard(s);
        return NULL;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    s->d = MHD_start_daemon(flags, (uint16_t)o->port, NULL, NULL, handle, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, s, MHD_OPTION_CONNECTION_LIMIT, o->max_connections,
                            MHD_OPTION_LISTEN_BACKLOG_SIZE, 4096u, MHD_OPTION_THREAD_STACK_SIZE, (size_t)(256 * 1024),
                            MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->d) {
        snprintf(err, errlen, "cannot listen on %s port %d (in use, or not an address of this machine)", o->host, o->port);
        srv_discard(s);
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : o->port;
    return s;
}

int srv_port(const srv *s) { return s->port; }

int srv_stop(srv *s, char *err, size_t errlen)
{
    if (!s) return 0;
    __atomic_store_n(&s->stopping, 1, __ATOMIC_RELEASE);
    MHD_stop_daemon(s->d);   /* every stream freed: the log has all its lines */
    int rc = 0;
    if (s->logf) {
        char why[600];
        rc = of_commit(&s->log, why, sizeof why);
        if (rc < 0 && err) snprintf(err, errlen, "--event-log %s", why);
    }
    pthread_mutex_destroy(&s->loglock);
    pthread_mutex_destroy(&s->mlock);
    free(s);
    return rc;
}
