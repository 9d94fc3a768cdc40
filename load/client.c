/* The load client. One thread: curl's multi interface waits on every socket at once and wakes
 * for the next planned send; each response's server-sent events are parsed as they arrive,
 * and the time a token's event arrives is its time. */
#include "load/client.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <curl/curl.h>
#include <jansson.h>

#include "workload/driver.h"

typedef struct flight {
    CURL *h;
    struct curl_slist *headers;
    char *body;
    wl_request wr;
    double sent;
    double *times;             /* each token's arrival, seconds from the start */
    int num_times, cap_times;
    int usage_tokens;          /* the server's usage.completion_tokens; -1 if it sent none */
    bool saw_done;
    char *pending;             /* bytes of an event not yet complete */
    size_t len, cap;
    char error[512];
    struct client *c;
    struct flight *prev, *next;   /* the client's list of flights */
} flight;

/* What curl asked of a socket, and whether it waits in the ready queue (then it is not
 * armed in epoll: it is re-armed once curl has read it). */
typedef struct sock_state {
    uint32_t events;           /* the epoll events curl asked for; 0 not watched */
    bool queued;
} sock_state;

/* A socket epoll found ready, and when; fd -1 once curl has let go of it. */
typedef struct ready_sock {
    int fd;
    uint32_t events;
    double since;
} ready_sock;

typedef struct client {
    const load_options *o;
    const load_sink *sink;
    struct timespec t0;
    char endpoint_url[2048];
    char model_json[600];      /* the model's name as a JSON string */
    CURLM *multi;
    size_t in_flight;
    flight *flights;
    double t0_abs;             /* CLOCK_MONOTONIC at the start, s */
    int epfd;                  /* epoll over the sockets curl asks us to watch */
    double timer;              /* when curl wants socket_action(TIMEOUT): elapsed s; INFINITY none */
    double ready_time;         /* when epoll found the socket curl is reading ready */
    struct sock_state *watch;  /* by socket number */
    size_t num_watch;
    struct ready_sock *ready;  /* sockets epoll reported, not yet handed to curl: [head, len) */
    size_t ready_head, ready_len, ready_cap;
    double *delays;            /* servesim_sent stamps' delays, s */
    size_t num_delays, cap_delays;
} client;

static double elapsed(const client *c)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - c->t0.tv_sec) + (t.tv_nsec - c->t0.tv_nsec) * 1e-9;
}

__attribute__((format(printf, 2, 3)))
static void set_error(flight *f, const char *fmt, ...)
{
    if (f->error[0]) return;   /* the first error is the one kept */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->error, sizeof f->error, fmt, ap);
    va_end(ap);
}

/* ---- request bodies ---- */

typedef struct sbuf {
    char *s;
    size_t len, cap;
    bool oom;
} sbuf;

__attribute__((format(printf, 2, 3)))
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = b->oom ? -1 : vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = true;
            return;
        }
        if (b->s && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap : 256;
        while (cap <= b->len + (size_t)n) cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
}

/* Token ids for completions; for chat, one printable character per id (chat has no way to send
 * ids, so its prompt length is what the server's template and tokenizer make of the text). */
static char *request_body(const client *c, const workload *w, const wl_request *wr)
{
    int32_t *ids = malloc((size_t)(wr->prompt_len ? wr->prompt_len : 1) * sizeof *ids);
    if (!ids) return NULL;
    wl_fill_prompt(w, wr, ids);
    sbuf b = {0};
    sb_printf(&b, "{\"model\":%s,", c->model_json);
    if (c->o->endpoint == LOAD_COMPLETIONS) {
        sb_printf(&b, "\"prompt\":[");
        for (int i = 0; i < wr->prompt_len; i++) sb_printf(&b, i ? ",%d" : "%d", ids[i]);
        sb_printf(&b, "],\"max_tokens\":%d,", wr->output_len);
    } else {
        sb_printf(&b, "\"messages\":[{\"role\":\"user\",\"content\":\"");
        for (int i = 0; i < wr->prompt_len; i++) {
            char ch = (char)('a' + (uint32_t)ids[i] % 26);
            sb_printf(&b, "%c", ch);
        }
        sb_printf(&b, "\"}],\"max_completion_tokens\":%d,\"max_tokens\":%d,", wr->output_len, wr->output_len);
    }
    sb_printf(&b, "\"min_tokens\":%d,\"ignore_eos\":true,\"temperature\":0,\"stream\":true,"
                  "\"stream_options\":{\"include_usage\":true}}", wr->output_len);
    free(ids);
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

/* ---- responses ---- */

static void add_token_time(flight *f, double t)
{
    if (f->num_times == f->cap_times) {
        int cap = f->cap_times ? 2 * f->cap_times : 64;
        double *p = realloc(f->times, (size_t)cap * sizeof *p);
        if (!p) {
            set_error(f, "out of memory for token times");
            return;
        }
        f->times = p;
        f->cap_times = cap;
    }
    f->times[f->num_times++] = t;
}

/* True when CHOICE carries a generated token: a completion's "text" or a chat delta's
 * "content", even empty (a control token such as <s> streams as ""), but not a chat's
 * opening role chunk, nor an empty chunk that only says why the stream ends. */
static bool has_content(json_t *choice)
{
    json_t *delta = json_object_get(choice, "delta");
    json_t *t = delta ? json_object_get(delta, "content") : json_object_get(choice, "text");
    if (!json_is_string(t) || (delta && json_object_get(delta, "role"))) return false;
    json_t *finish = json_object_get(choice, "finish_reason");
    return json_string_length(t) > 0 || !finish || json_is_null(finish);
}

/* One event's "data:" payload. */
static void on_data(flight *f, const char *data, size_t len, double now)
{
    if (len == 6 && memcmp(data, "[DONE]", 6) == 0) {
        f->saw_done = true;
        return;
    }
    json_error_t je;
    json_t *doc = json_loadb(data, len, 0, &je);
    if (!doc) {
        set_error(f, "an event that is not JSON: %.*s", (int)(len < 120 ? len : 120), data);
        return;
    }
    json_t *err = json_object_get(doc, "error");
    if (err) {
        json_t *m = json_object_get(err, "message");
        set_error(f, "the server: %s", json_is_string(m) ? json_string_value(m) : "an error event");
    }
    size_t i;
    json_t *choice;
    json_array_foreach(json_object_get(doc, "choices"), i, choice)
        if (has_content(choice)) add_token_time(f, now);
    json_t *stamp = json_object_get(doc, "servesim_sent");
    client *c = f->c;
    if (json_is_number(stamp)) {
        if (c->num_delays == c->cap_delays) {
            size_t cap = c->cap_delays ? 2 * c->cap_delays : 4096;
            double *p = realloc(c->delays, cap * sizeof *p);
            if (p) c->delays = p, c->cap_delays = cap;
        }
        if (c->num_delays < c->cap_delays) c->delays[c->num_delays++] = c->t0_abs + now - json_number_value(stamp);
    }
    json_t *usage = json_object_get(doc, "usage");
    json_t *ct = json_object_get(usage, "completion_tokens");
    if (json_is_integer(ct)) f->usage_tokens = (int)json_integer_value(ct);
    json_decref(doc);
}

/* Handles every complete event in the pending bytes ("\n\n" or "\r\n\r\n" ends one). */
static void parse_events(flight *f, double now)
{
    size_t start = 0;
    for (;;) {
        char *end = NULL;
        size_t sep = 0;
        for (size_t i = start; i + 1 < f->len; i++) {
            if (f->pending[i] == '\n' && f->pending[i + 1] == '\n') { end = f->pending + i; sep = 2; break; }
            if (i + 3 < f->len && memcmp(f->pending + i, "\r\n\r\n", 4) == 0) { end = f->pending + i; sep = 4; break; }
        }
        if (!end) break;
        /* the event's lines: "data: ..." carries the payload; others (comments, ids) are skipped */
        char *line = f->pending + start;
        while (line < end) {
            char *nl = memchr(line, '\n', (size_t)(end - line));
            char *le = nl ? nl : end;
            size_t ll = (size_t)(le - line);
            if (ll && line[ll - 1] == '\r') ll--;
            if (ll >= 5 && memcmp(line, "data:", 5) == 0) {
                const char *d = line + 5;
                size_t dl = ll - 5;
                if (dl && *d == ' ') d++, dl--;
                on_data(f, d, dl, now);
            }
            line = nl ? nl + 1 : end;
        }
        start = (size_t)(end - f->pending) + sep;
    }
    memmove(f->pending, f->pending + start, f->len - start);
    f->len -= start;
}

static size_t on_bytes(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    flight *f = userdata;
    size_t n = size * nmemb;
    double now = f->c->ready_time;
    if (f->len + n + 1 > f->cap) {
        size_t cap = f->cap ? f->cap : 4096;
        while (cap < f->len + n + 1) cap *= 2;
        char *p = realloc(f->pending, cap);
        if (!p) return 0;   /* curl ends the transfer with a write error */
        f->pending = p;
        f->cap = cap;
    }
    memcpy(f->pending + f->len, ptr, n);
    f->len += n;
    f->pending[f->len] = '\0';
    long status = 0;
    curl_easy_getinfo(f->h, CURLINFO_RESPONSE_CODE, &status);
    if (status == 200) parse_events(f, now);
    return n;
}

/* The message of an OpenAI-style error body, or the body's start. */
static void http_error(flight *f, long status)
{
    json_t *doc = f->pending ? json_loadb(f->pending, f->len, 0, NULL) : NULL;
    json_t *m = json_object_get(json_object_get(doc, "error"), "message");
    if (!m) m = json_object_get(doc, "message");   /* older vLLM: {"object": "error", "message": ...} */
    if (json_is_string(m)) set_error(f, "HTTP %ld: %s", status, json_string_value(m));
    else set_error(f, "HTTP %ld: %.200s", status, f->pending ? f->pending : "");
    json_decref(doc);
}

static void flight_free(flight *f)
{
    if (!f) return;
    if (f->h) curl_easy_cleanup(f->h);
    curl_slist_free_all(f->headers);
    free(f->body);
    free(f->times);
    free(f->pending);
    free(f);
}

/* ---- the run ---- */

typedef struct run {
    client c;
    driver drv;
    size_t ended, total;
    load_stats *stats;
    bool window_started;
} run;

static void end_flight(run *r, flight *f, CURLcode result, double now)
{
    long status = 0;
    curl_easy_getinfo(f->h, CURLINFO_RESPONSE_CODE, &status);
    if (result != CURLE_OK) set_error(f, "%s", curl_easy_strerror(result));
    else if (status != 200) http_error(f, status);
    else if (!f->saw_done && f->num_times == 0) set_error(f, "the stream ended without a token");
    /* a finished stream whose usage counts tokens it never streamed has no first token to time:
     * it was written as a success with no first_token_time, which validate --measured refuses */
    else if (f->num_times == 0 && f->usage_tokens > 0)
        set_error(f, "the stream carried no token (its usage said %d)", f->usage_tokens);
    int out = f->usage_tokens >= 0 ? f->usage_tokens : f->num_times;
    /* asked with ignore_eos and min_tokens: fewer tokens is a failure, not a short success */
    if (out < f->wr.output_len) set_error(f, "the server sent %d of the %d tokens asked for", out, f->wr.output_len);
    bool ok = !f->error[0];
    req_record rec = {
        .request_id = f->wr.id, .arrival_time = f->sent, .scheduled_prefill_time = NAN,
        .first_token_time = f->num_times ? f->times[0] : NAN, .finish_time = now,
        .prompt_len = f->wr.prompt_len, .output_len = ok ? out : f->num_times,
        .stop = ok ? STOP_LENGTH : STOP_ERROR, .warmup = f->wr.warmup,
    };
    const load_sink *s = r->c.sink;
    if (s->met) {
        if (ok && !f->wr.warmup)
            for (int i = 1; i < f->num_times; i++) met_on_itl(s->met, f->times[i] - f->times[i - 1]);
        met_on_request(s->met, &rec);
    }
    if (s->on_request) s->on_request(s->ctx, &rec, f->times, f->num_times, ok ? NULL : f->error);
    if (!ok && !r->stats->failed)
        /* the error cut to what first_error holds after "request ID: " (errors.csv has it whole) */
        snprintf(r->stats->first_error, sizeof r->stats->first_error, "request %lld: %.169s", (long long)f->wr.id,
                 f->error);
    r->stats->failed += !ok;
    if (f->prev) f->prev->next = f->next;
    else r->c.flights = f->next;
    if (f->next) f->next->prev = f->prev;
    curl_multi_remove_handle(r->c.multi, f->h);
    flight_free(f);
    r->c.in_flight--;
    r->ended++;
    drv_on_done(&r->drv, now);
    if (r->c.o->progress) r->c.o->progress(r->c.o->progress_ctx, r->ended, r->total);
}

static int start_flight(run *r, const workload *w, const wl_request *wr, double now)
{
    client *c = &r->c;
    flight *f = calloc(1, sizeof *f);
    if (!f) return -1;
    f->c = c;
    f->wr = *wr;
    f->usage_tokens = -1;
    f->body = request_body(c, w, wr);
    f->h = curl_easy_init();
    f->headers = curl_slist_append(NULL, "Content-Type: application/json");
    if (!f->body || !f->h || !f->headers) {
        flight_free(f);
        return -1;
    }
    CURL *h = f->h;
    curl_easy_setopt(h, CURLOPT_URL, c->endpoint_url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, f->headers);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, f->body);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_bytes);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, f);
    curl_easy_setopt(h, CURLOPT_PRIVATE, f);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    if (c->o->timeout_s > 0) curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(c->o->timeout_s * 1000));
    f->sent = now;
    if (!wr->warmup && !r->window_started && r->c.sink->met) {
        met_set_window_start(r->c.sink->met, now);
        r->window_started = true;
    }
    if (curl_multi_add_handle(c->multi, h) != CURLM_OK) {
        flight_free(f);
        return -1;
    }
    c->in_flight++;
    f->next = c->flights;
    if (c->flights) c->flights->prev = f;
    c->flights = f;
    r->stats->sent++;
    return 0;
}

static void collect(run *r)
{
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(r->c.multi, &left))) {
        if (m->msg != CURLMSG_DONE) continue;
        flight *f;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&f);
        end_flight(r, f, m->data.result, elapsed(&r->c));
    }
}

/* Ctrl-C: every request in flight ends now, as an error, with what it had received. */
static void abort_all(run *r)
{
    double now = elapsed(&r->c);
    while (r->c.flights) {
        flight *f = r->c.flights;
        set_error(f, "interrupted after %d tokens", f->num_times);
        end_flight(r, f, CURLE_OK, now);
    }
}

static size_t discard(char *p, size_t s, size_t n, void *u)
{
    sbuf *b = u;
    if (b->len < (1 << 20)) sb_printf(b, "%.*s", (int)(s * n), p);
    return s * n;
}

/* curl's socket interface: curl says which sockets to watch for what, and we tell it which
 * are ready, so each wake-up costs the sockets that have news, not all the transfers
 * (curl_multi_perform walks every handle: at 1,000 streams that was most of the client's
 * time, and events waited for it). */
static int on_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
    (void)easy;
    (void)socketp;
    client *c = userp;
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(c->epfd, EPOLL_CTL_DEL, fd, NULL);
        if ((size_t)fd < c->num_watch) {
            /* a queued entry must not reach a later socket that reuses the number */
            if (c->watch[fd].queued)
                for (size_t i = c->ready_head; i < c->ready_len; i++)
                    if (c->ready[i].fd == fd) c->ready[i].fd = -1;
            c->watch[fd] = (sock_state){0};
        }
        return 0;
    }
    if ((size_t)fd >= c->num_watch) {
        size_t num = c->num_watch ? c->num_watch : 256;
        while (num <= (size_t)fd) num *= 2;
        sock_state *w = realloc(c->watch, num * sizeof *w);
        if (!w) return -1;   /* curl then fails every transfer: the run ends, its records written */
        memset(w + c->num_watch, 0, (num - c->num_watch) * sizeof *w);
        c->watch = w;
        c->num_watch = num;
    }
    sock_state *st = &c->watch[fd];
    bool known = st->events != 0;
    st->events = (what & CURL_POLL_IN ? EPOLLIN : 0) | (what & CURL_POLL_OUT ? EPOLLOUT : 0) | EPOLLONESHOT;
    if (st->queued) return 0;   /* armed, with this mask, once curl has read it */
    struct epoll_event ev = {.events = st->events, .data.fd = fd};
    if (epoll_ctl(c->epfd, known ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev) < 0)
        epoll_ctl(c->epfd, known ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &ev);
    return 0;
}

static int on_timer(CURLM *multi, long timeout_ms, void *userp)
{
    (void)multi;
    client *c = userp;
    c->timer = timeout_ms < 0 ? INFINITY : elapsed(c) + timeout_ms * 1e-3;
    return 0;
}

enum {
    READY_BATCH = 256,    /* sockets one epoll_wait may report */
    READY_MAX = 1024,     /* sockets one pump hands curl before it returns to sending */
    RECHECK_EVERY = 8,    /* sockets handed to curl between two looks for newly ready ones */
};

/* Appends to the ready queue the sockets epoll reports within MS ms, stamped now. */
static void look(client *c, int ms)
{
    if (c->ready_head == c->ready_len) c->ready_head = c->ready_len = 0;
    if (c->ready_len + READY_BATCH > c->ready_cap && c->ready_head > 0) {
        memmove(c->ready, c->ready + c->ready_head, (c->ready_len - c->ready_head) * sizeof *c->ready);
        c->ready_len -= c->ready_head;
        c->ready_head = 0;
    }
    if (c->ready_len + READY_BATCH > c->ready_cap) {   /* more sockets than ever before */
        ready_sock *p = realloc(c->ready, 2 * c->ready_cap * sizeof *p);
        if (p) c->ready = p, c->ready_cap *= 2;
    }
    size_t room = c->ready_cap - c->ready_len;
    if (room == 0) return;   /* every socket is queued already (each at most once) */
    struct epoll_event ev[READY_BATCH];
    int n = epoll_wait(c->epfd, ev, room < READY_BATCH ? (int)room : READY_BATCH, ms);
    double t = elapsed(c);
    for (int i = 0; i < n; i++) {
        int fd = ev[i].data.fd;
        if ((size_t)fd >= c->num_watch || c->watch[fd].queued) continue;
        c->watch[fd].queued = true;
        c->ready[c->ready_len++] = (ready_sock){fd, ev[i].events, t};
    }
}

/* Waits up to WAIT seconds for sockets or curl's timer, and hands curl what is ready, until
 * SEND_DUE (the next planned send) comes.
 * Each socket's bytes are stamped with the moment epoll first reported it ready, not when
 * its turn to be parsed comes: a step's token for 1,000 streams arrives as a burst, and
 * parsing one event costs about 15 us, so stamping at parse time would time the last of a
 * burst late by the time spent on the others. Bytes that arrive while a burst is being
 * handed to curl are found by a zero-timeout epoll_wait every RECHECK_EVERY sockets (without
 * it they waited for the whole burst: P99 delay 1-2 ms at 1,000 streams, docs/serving.md).
 * Sockets are watched one-shot, so that look reports only sockets not already queued; each
 * is re-armed once curl has read it. What a pump leaves queued keeps its stamp. */
static void pump(client *c, double wait, double send_due)
{
    int running;
    double now = elapsed(c);
    if (c->timer - now < wait) wait = c->timer - now;
    int ms = wait <= 0 ? 0 : (int)ceil(wait * 1000);
    look(c, c->ready_head < c->ready_len ? 0 : ms);
    running = (int)c->in_flight;
    for (int k = 0; k < READY_MAX && c->ready_head < c->ready_len; k++) {
        if (k % RECHECK_EVERY == RECHECK_EVERY - 1) {
            look(c, 0);
            if (elapsed(c) >= send_due) break;   /* a send is due: the rest waits, stamped */
        }
        ready_sock r = c->ready[c->ready_head++];
        if (r.fd < 0) continue;   /* curl let go of it meanwhile */
        sock_state *st = &c->watch[r.fd];
        st->queued = false;
        int flags = (r.events & EPOLLIN ? CURL_CSELECT_IN : 0) | (r.events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
                    (r.events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0);
        c->ready_time = r.since;
        curl_multi_socket_action(c->multi, r.fd, flags, &running);
        st = &c->watch[r.fd];   /* on_socket may have grown the table */
        if (st->events && !st->queued) {   /* still watched: re-arm */
            struct epoll_event again = {.events = st->events, .data.fd = r.fd};
            epoll_ctl(c->epfd, EPOLL_CTL_MOD, r.fd, &again);
        }
        /* a transfer ended: its end and the send that refills its slot are collect's, now */
        if (running < (int)c->in_flight) break;
    }
    if (elapsed(c) >= c->timer) {
        c->timer = INFINITY;
        c->ready_time = elapsed(c);
        curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    }
}

/* GET {url}/models: with a name in NAME, it must be listed (-1 naming the ones that are);
 * without one, NAME becomes the first listed. */
static int find_model(client *c, char *name, size_t namelen, char *err, size_t errlen)
{
    char url[2100];
    snprintf(url, sizeof url, "%s/models", c->o->url);
    CURL *h = curl_easy_init();
    sbuf b = {0};
    if (!h) return snprintf(err, errlen, "out of memory"), -1;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    CURLcode rc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(h);
    int ok = -1;
    if (rc != CURLE_OK) snprintf(err, errlen, "--url %s: %s", c->o->url, curl_easy_strerror(rc));
    else if (status != 200) snprintf(err, errlen, "--url %s: GET /models answered HTTP %ld (is this an OpenAI-compatible API's base, ending in /v1?)", c->o->url, status);
    else {
        json_t *doc = b.s ? json_loads(b.s, 0, NULL) : NULL, *m;
        json_t *first = json_object_get(json_array_get(json_object_get(doc, "data"), 0), "id");
        size_t i;
        char listed[600] = "";
        json_array_foreach(json_object_get(doc, "data"), i, m) {
            json_t *id = json_object_get(m, "id");
            if (!json_is_string(id)) continue;
            if (name[0] && strcmp(json_string_value(id), name) == 0) ok = 0;
            size_t len = strlen(listed);
            snprintf(listed + len, sizeof listed - len, "%s%s", len ? ", " : "", json_string_value(id));
        }
        if (!name[0] && json_is_string(first)) {
            snprintf(name, namelen, "%s", json_string_value(first));
            ok = 0;
        } else if (!name[0]) {
            snprintf(err, errlen, "--url %s: GET /models lists no model; name one with --model", c->o->url);
        } else if (ok != 0) {
            snprintf(err, errlen, "--model %s: the server at %s serves %s", name, c->o->url, listed[0] ? listed : "no model it lists");
        }
        json_decref(doc);
    }
    free(b.s);
    return ok;
}

int load_run(const load_options *o, const workload *w, const wl_config *cfg, const load_sink *sink,
             load_stats *stats, char *err, size_t errlen)
{
    *stats = (load_stats){0};
    run r = {.c = {.o = o, .sink = sink}, .total = w->n, .stats = stats};
    client *c = &r.c;
    snprintf(c->endpoint_url, sizeof c->endpoint_url, "%s/%s", o->url,
             o->endpoint == LOAD_CHAT ? "chat/completions" : "completions");
    /* the server must answer, and serve the model asked for, before anything is sent */
    snprintf(stats->model, sizeof stats->model, "%s", o->model ? o->model : "");
    if (find_model(c, stats->model, sizeof stats->model, err, errlen) < 0) return 2;
    json_t *m = json_string(stats->model);
    char *mj = m ? json_dumps(m, JSON_ENCODE_ANY) : NULL;
    json_decref(m);
    if (!mj || strlen(mj) >= sizeof c->model_json) {
        free(mj);
        snprintf(err, errlen, "--model: the name is not valid UTF-8 or longer than 500 bytes");
        return 2;
    }
    snprintf(c->model_json, sizeof c->model_json, "%s", mj);
    free(mj);
    c->multi = curl_multi_init();
    c->epfd = epoll_create1(EPOLL_CLOEXEC);
    c->timer = INFINITY;
    c->ready_cap = 4 * READY_BATCH;
    c->ready = malloc(c->ready_cap * sizeof *c->ready);
    if (!c->multi || c->epfd < 0 || !c->ready || drv_init(&r.drv, w, cfg) < 0) {
        if (c->multi) curl_multi_cleanup(c->multi);
        if (c->epfd >= 0) close(c->epfd);
        free(c->ready);
        snprintf(err, errlen, "out of memory");
        return 1;
    }
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
    clock_gettime(CLOCK_MONOTONIC, &c->t0);
    c->t0_abs = (double)c->t0.tv_sec + c->t0.tv_nsec * 1e-9;
    int status = 0;
    while (r.ended < r.total) {
        if (o->stop && *o->stop) {
            stats->interrupted = true;
            break;
        }
        double now = elapsed(c);
        const wl_request *wr;
        while ((wr = drv_release(&r.drv, now))) {
            if (start_flight(&r, w, wr, now) < 0) {
                snprintf(err, errlen, "out of memory for request %lld", (long long)wr->id);
                status = 1;
                break;
            }
        }
        if (status) break;
        double next = drv_next_time(&r.drv);
        now = elapsed(c);
        /* wake for the next send a millisecond early, then spin, so sends keep their time;
         * at least every 0.1 s, to notice Ctrl-C */
        double wait = isinf(next) ? 0.1 : next - now - 1e-3;
        if (wait > 0.1) wait = 0.1;
        pump(c, wait > 0 ? wait : 0, next);
        collect(&r);
    }
    abort_all(&r);   /* interrupted, or out of memory: what is in flight ends as an error */
    stats->end_time = elapsed(c);
    if (c->num_delays > 0) {
        double sum = 0;
        for (size_t i = 0; i < c->num_delays; i++) sum += c->delays[i];
        qsort(c->delays, c->num_delays, sizeof *c->delays, met_cmp_double);
        stats->delay_count = c->num_delays;
        stats->delay_mean_ms = sum / (double)c->num_delays * 1000;
        stats->delay_p50_ms = met_percentile_sorted(c->delays, c->num_delays, 50) * 1000;
        stats->delay_p99_ms = met_percentile_sorted(c->delays, c->num_delays, 99) * 1000;
        stats->delay_p999_ms = met_percentile_sorted(c->delays, c->num_delays, 99.9) * 1000;
        stats->delay_max_ms = c->delays[c->num_delays - 1] * 1000;
    }
    free(c->delays);
    free(c->watch);
    free(c->ready);
    drv_free(&r.drv);
    curl_multi_cleanup(c->multi);
    close(c->epfd);
    return status ? status : stats->interrupted ? 1 : 0;
}
