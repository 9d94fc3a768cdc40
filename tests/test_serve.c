/* The HTTP server: request parsing and response formats by hand, then the server itself on
 * loopback (plain sockets as the client): every token streamed, errors answered, a client
 * that hangs up aborts its request and frees its blocks, /metrics agrees with what was sent. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tiny_engine.h"
#include "serve/openai.h"
#include "serve/prom.h"
#include "serve/server.h"

static const oai_limits lim = {.model = "tiny", .vocab_size = 1000, .max_model_len = 100, .kv_tokens = 64,
                               .kv_block_size = 16};

static int parse(const char *body, oai_endpoint ep, oai_request *r, char *err)
{
    return oai_parse(body, strlen(body), ep, &lim, r, err, 512);
}

static void parse_fails(const char *body, int status, const char *expected)
{
    oai_request r;
    char err[512] = "";
    cr_assert_eq(parse(body, OAI_COMPLETIONS, &r, err), status, "%s: %s", body, err);
    cr_assert(strstr(err, expected), "%s: \"%s\" lacks \"%s\"", body, err, expected);
    cr_assert_null(r.prompt);
}

Test(serve, a_completion_request_by_hand)
{
    oai_request r;
    char err[512];
    cr_assert_eq(parse("{\"model\":\"tiny\",\"prompt\":[5,6,999],\"max_tokens\":7,\"stream\":true,"
                       "\"stream_options\":{\"include_usage\":true},\"ignore_eos\":true,\"temperature\":0,"
                       "\"unknown_field\":{\"is\":\"ignored\"}}",
                       OAI_COMPLETIONS, &r, err), 0, "%s", err);
    cr_assert_eq(r.prompt_len, 3);
    cr_assert_eq(r.prompt[0], 5);
    cr_assert_eq(r.prompt[2], 999);
    cr_assert_eq(r.max_tokens, 7);
    cr_assert(r.stream && r.include_usage);
    oai_request_free(&r);

    cr_assert_eq(parse("{\"prompt\":\"hé\"}", OAI_COMPLETIONS, &r, err), 0, "%s", err);
    cr_assert_eq(r.prompt_len, 3, "one token per byte of UTF-8");
    cr_assert_eq(r.prompt[1], 0xc3);
    cr_assert_eq(r.max_tokens, 16, "OpenAI's default");
    cr_assert(!r.stream);
    oai_request_free(&r);

    /* \u0000 is valid JSON, and vLLM's benchmark sends it (its random prompts are random
     * token ids decoded): 69 of 3,000 such requests got 400 before */
    cr_assert_eq(parse("{\"prompt\":\"a\\u0000b\"}", OAI_COMPLETIONS, &r, err), 0, "%s", err);
    cr_assert_eq(r.prompt_len, 3, "a NUL byte is a token like any other");
    cr_assert_eq(r.prompt[1], 0);
    cr_assert_eq(r.prompt[2], 'b');
    oai_request_free(&r);

    cr_assert_eq(parse("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_completion_tokens\":2,"
                       "\"max_tokens\":9}",
                       OAI_CHAT, &r, err), 0, "%s", err);
    /* "user: hi\n" + "assistant: " */
    cr_assert_eq(r.prompt_len, 9 + 11);
    cr_assert_eq(r.max_tokens, 2, "max_completion_tokens wins over max_tokens, as OpenAI's API has it");
    oai_request_free(&r);

    /* a vocabulary smaller than a byte: text that does not fit is refused, not sent on to
     * the backend (which stopped the whole engine) */
    oai_limits small = lim;
    small.vocab_size = 100;
    cr_assert_eq(oai_parse("{\"prompt\":\"AB\"}", 15, OAI_COMPLETIONS, &small, &r, err, sizeof err), 0, "%s", err);
    oai_request_free(&r);
    cr_assert_eq(oai_parse("{\"prompt\":\"hi\"}", 15, OAI_COMPLETIONS, &small, &r, err, sizeof err), 400);
    cr_assert(strstr(err, "outside this model's vocabulary [0, 100)"), "%s", err);
    const char *chat = "{\"messages\":[{\"role\":\"x\",\"content\":\"\"}]}";
    cr_assert_eq(oai_parse(chat, strlen(chat), OAI_CHAT, &small, &r, err, sizeof err), 400, "\"assistant: \" has bytes >= 100");
}

Test(serve, bad_requests_name_their_problem)
{
    parse_fails("{\"prompt\":[1,2", 400, "malformed JSON at line 1");
    parse_fails("[1,2]", 400, "must be a JSON object");
    parse_fails("{\"max_tokens\":3}", 400, "prompt is required");
    parse_fails("{\"prompt\":[1,\"a\"]}", 400, "prompt[1]");
    parse_fails("{\"prompt\":[1,1000]}", 400, "outside the vocabulary [0, 1000)");
    parse_fails("{\"prompt\":[-1]}", 400, "token id -1");
    parse_fails("{\"prompt\":[]}", 400, "empty");
    parse_fails("{\"prompt\":[1],\"max_tokens\":0}", 400, "max_tokens must be an integer in [1,");
    parse_fails("{\"prompt\":[1],\"max_tokens\":2.5}", 400, "max_tokens");
    parse_fails("{\"prompt\":[1],\"stream\":\"yes\"}", 400, "stream must be true or false");
    parse_fails("{\"prompt\":[1],\"temperature\":-1}", 400, "temperature");
    parse_fails("{\"prompt\":[1],\"n\":2}", 400, "n must be");
    parse_fails("{\"prompt\":[1],\"max_tokens\":5,\"min_tokens\":6}", 400, "min_tokens (6) is larger");
    parse_fails("{\"prompt\":[1],\"model\":\"gpt-4\"}", 404, "`gpt-4` does not exist");
    parse_fails("{\"prompt\":[1],\"model\":3}", 400, "model must be a string");
    parse_fails("{\"prompt\":[1],\"model\":\"tiny\\u0000x\"}", 400, "the name holds a NUL byte");
    parse_fails("{\"prompt\":[1,2,3,4,5],\"max_tokens\":96}", 400, "maximum context length is 100 tokens. However, you requested 101");
    /* 100 fits max_model_len, but 99 KV slots round up to 112 > the pool's 64 */
    parse_fails("{\"prompt\":[1,2,3,4,5],\"max_tokens\":95}", 400, "needs 99 KV slots; the whole KV cache holds 64");
    /* exactly at the limits: 49 + 16 = 65 tokens need 64 slots */
    oai_request r;
    char err[512];
    cr_assert_eq(parse("{\"prompt\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,"
                       "29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49],\"max_tokens\":16}",
                       OAI_COMPLETIONS, &r, err), 0, "%s", err);
    oai_request_free(&r);
    oai_request chat;
    cr_assert_eq(parse("{\"messages\":[{\"role\":\"user\"}]}", OAI_CHAT, &chat, err), 400);
    cr_assert(strstr(err, "messages[0]"), "%s", err);
}

Test(serve, streamed_events_and_whole_responses_are_valid_json)
{
    oai_stream_fmt f;
    cr_assert_eq(oai_stream_init(&f, OAI_COMPLETIONS, "cmpl-7", 1700000000, "m\"x"), 0);
    char buf[1024];
    /* token 2 is '"' (32 + 2), which must be escaped */
    size_t n = oai_stream_token(&f, 2, true, NAN, buf, sizeof buf);
    cr_assert_gt(n, 0);
    buf[n] = '\0';
    cr_assert(strncmp(buf, "data: ", 6) == 0 && strcmp(buf + n - 2, "\n\n") == 0);
    json_error_t je;
    json_t *doc = json_loads(buf + 6, 0, &je);
    cr_assert_not_null(doc, "%s: %s", buf, je.text);
    cr_assert_str_eq(json_string_value(json_object_get(doc, "model")), "m\"x");
    json_t *choice = json_array_get(json_object_get(doc, "choices"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(choice, "text")), "\"");
    cr_assert_str_eq(json_string_value(json_object_get(choice, "finish_reason")), "length");
    json_decref(doc);
    cr_assert_eq(oai_stream_token(&f, 2, false, NAN, buf, 40), 0, "an event that does not fit is not written");
    n = oai_stream_token(&f, 3, false, 12345.25, buf, sizeof buf);
    buf[n] = '\0';
    doc = json_loads(buf + 6, 0, &je);
    cr_assert_not_null(doc, "%s: %s", buf, je.text);
    cr_assert_float_eq(json_number_value(json_object_get(doc, "servesim_sent")), 12345.25, 1e-9, "%s", buf);
    json_decref(doc);
    n = oai_stream_usage(&f, 5, 3, buf, sizeof buf);
    buf[n] = '\0';
    doc = json_loads(buf + 6, 0, &je);
    cr_assert_not_null(doc);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(doc, "usage"), "total_tokens")), 8);
    json_decref(doc);

    int32_t toks[3] = {33, 60, 94};   /* 'A', '\\', '~' */
    char *body = oai_response(OAI_CHAT, "chatcmpl-1", 1, "tiny", toks, 3, 4, "length");
    doc = json_loads(body, 0, &je);
    cr_assert_not_null(doc, "%s", body);
    choice = json_array_get(json_object_get(doc, "choices"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(choice, "message"), "content")), "A\\~");
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(doc, "usage"), "completion_tokens")), 3);
    json_decref(doc);
    free(body);
    char *e = oai_error_body(404, "no \"such\" model");
    doc = json_loads(e, 0, &je);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(doc, "error"), "code")), 404);
    json_decref(doc);
    free(e);
}

Test(serve, histogram_buckets_by_hand)
{
    static const double bounds[] = {0.1, 0.5, 1.0};
    prom_hist h;
    prom_hist_init(&h, bounds, 3);
    const double v[] = {0.05, 0.1, 0.3, 0.7, 2.0, 9.0};
    for (int i = 0; i < 6; i++) prom_observe(&h, v[i]);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    prom_write_hist(f, "x_seconds", "help", "m", &h);
    fclose(f);
    /* le is inclusive: 0.1 falls in the first bucket */
    cr_assert(strstr(text, "x_seconds_bucket{le=\"0.1\",model_name=\"m\"} 2\n"), "%s", text);
    cr_assert(strstr(text, "x_seconds_bucket{le=\"0.5\",model_name=\"m\"} 3\n"), "%s", text);
    cr_assert(strstr(text, "x_seconds_bucket{le=\"1\",model_name=\"m\"} 4\n"), "%s", text);
    cr_assert(strstr(text, "x_seconds_bucket{le=\"+Inf\",model_name=\"m\"} 6\n"), "%s", text);
    cr_assert(strstr(text, "x_seconds_sum{model_name=\"m\"} 12.15\n"), "%s", text);
    cr_assert(strstr(text, "# TYPE x_seconds histogram\n"), "%s", text);
    free(text);
}

/* ---- on loopback ---- */

typedef struct live {
    engine_live *eng;
    srv *s;
    int port;
} live;

static live start_named(int num_blocks, const char *model);

static live start_named(int num_blocks, const char *model);
static live start(int num_blocks) { return start_named(num_blocks, "tiny"); }

static live start_spec(int num_blocks, const char *model, int speculative_tokens)
{
    const model_shape *m = model_preset("tiny");
    engine_options o = tiny_engine_options((sched_config){
        .policy = POLICY_PAGED, .chunked_prefill = true, .prefix_caching = true, .max_num_seqs = 16,
        .max_num_batched_tokens = 256, .block_size = 16, .num_blocks = num_blocks, .max_model_len = 1024,
        .num_speculative_tokens = speculative_tokens});
    o.prompt_lookup_min = 1;
    o.prompt_lookup_max = 3;
    live l = {0};
    char err[512];
    l.eng = engine_start(&o, NULL, err, sizeof err);
    cr_assert_not_null(l.eng, "%s", err);
    srv_options so = {.host = "127.0.0.1", .port = 0, .model = model, .vocab_size = m->vocab, .max_model_len = 1024,
                      .kv_block_size = 16, .kv_tokens = (int64_t)num_blocks * 16, .max_body = 4096,
                      .max_connections = 256, .speculative = speculative_tokens > 0};
    l.s = srv_start(&so, l.eng, err, sizeof err);
    cr_assert_not_null(l.s, "%s", err);
    l.port = srv_port(l.s);
    cr_assert_gt(l.port, 0);
    return l;
}

static live start_named(int num_blocks, const char *model) { return start_spec(num_blocks, model, 0); }

static void stop(live *l)
{
    srv_stop(l->s, NULL, 0);
    engine_stop(l->eng);
}

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

static void send_request(int fd, const char *method, const char *path, const char *body)
{
    char head[256];
    int n = snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n", method, path, body ? strlen(body) : 0);
    cr_assert_eq(write(fd, head, (size_t)n), n);
    if (body) cr_assert_eq(write(fd, body, strlen(body)), (ssize_t)strlen(body));
}

/* The whole response (the server closes the connection), malloc'd. */
static char *http(int port, const char *method, const char *path, const char *body)
{
    int fd = connect_to(port);
    send_request(fd, method, path, body);
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap);
    ssize_t k;
    while ((k = read(fd, out + len, cap - len - 1)) > 0) {
        len += (size_t)k;
        if (len + 1 == cap) out = realloc(out, cap *= 2);
    }
    out[len] = '\0';
    close(fd);
    return out;
}

static int count(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p++) n++;
    return n;
}

static double metric(live *l, const char *name)
{
    char *page = http(l->port, "GET", "/metrics", NULL);
    char key[160];
    snprintf(key, sizeof key, "\n%s{model_name=\"tiny\"} ", name);
    char *p = strstr(page, key);
    cr_assert_not_null(p, "/metrics lacks %s", name);
    double v = strtod(p + strlen(key), NULL);
    free(page);
    return v;
}

Test(serve, streams_every_token_and_answers_errors_on_loopback)
{
    live l = start(256);
    char *r = http(l.port, "POST", "/v1/completions",
                   "{\"prompt\":[1,2,3,4,5,6,7,8],\"max_tokens\":12,\"stream\":true,\"stream_options\":{\"include_usage\":true}}");
    cr_assert(strstr(r, "HTTP/1.1 200"), "%s", r);
    cr_assert(strstr(r, "text/event-stream"), "%s", r);
    cr_assert_eq(count(r, "\"text\":"), 12, "one event per token: %s", r);
    cr_assert_eq(count(r, "\"finish_reason\":\"length\""), 1);
    cr_assert(strstr(r, "\"completion_tokens\":12"), "%s", r);
    cr_assert(strstr(r, "data: [DONE]\n\n"), "%s", r);
    free(r);
    r = http(l.port, "POST", "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}],\"max_tokens\":4}");
    cr_assert(strstr(r, "\"object\":\"chat.completion\""), "%s", r);
    cr_assert(strstr(r, "\"completion_tokens\":4"), "%s", r);
    free(r);
    r = http(l.port, "POST", "/v1/completions", "{\"prompt\":[1],\"max_tokens\":-3}");
    cr_assert(strstr(r, "HTTP/1.1 400") && strstr(r, "\"code\":400"), "%s", r);
    free(r);
    char big[6000];
    memset(big, ' ', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    r = http(l.port, "POST", "/v1/completions", big);
    cr_assert(strstr(r, "HTTP/1.1 413") && strstr(r, "larger than 4096 bytes"), "%s", r);
    free(r);
    r = http(l.port, "GET", "/v1/completions", NULL);
    cr_assert(strstr(r, "HTTP/1.1 405"), "%s", r);
    free(r);
    r = http(l.port, "GET", "/health", NULL);
    cr_assert(strstr(r, "HTTP/1.1 200"), "%s", r);
    free(r);
    cr_assert_eq(metric(&l, "vllm:request_success_total"), 2);
    cr_assert_eq(metric(&l, "vllm:generation_tokens_total"), 16);
    cr_assert_eq(metric(&l, "vllm:time_to_first_token_seconds_count"), 2);
    cr_assert_eq(metric(&l, "vllm:inter_token_latency_seconds_count"), 11 + 3, "every gap but the first token's");
    cr_assert_eq(metric(&l, "vllm:kv_cache_usage_perc"), 0);
    stop(&l);
}

Test(serve, a_client_that_hangs_up_aborts_its_request)
{
    live l = start(256);
    int fd = connect_to(l.port);
    send_request(fd, "POST", "/v1/completions", "{\"prompt\":[1,2,3],\"max_tokens\":900,\"stream\":true}");
    char buf[4096];
    ssize_t k;
    size_t got = 0;
    while (got < 2 && (k = read(fd, buf, sizeof buf - 1)) > 0) {
        buf[k] = '\0';
        got += (size_t)count(buf, "data: {");
    }
    cr_assert_geq(got, 2, "the stream started");
    close(fd);
    double aborted = 0;
    for (int i = 0; i < 500 && aborted == 0; i++) {
        nanosleep(&(struct timespec){0, 10 * 1000000L}, NULL);
        aborted = metric(&l, "servesim:request_aborted_total");
    }
    cr_assert_eq(aborted, 1, "the request went on after its client left");
    cr_assert_eq(metric(&l, "vllm:kv_cache_usage_perc"), 0, "its blocks were not given back");
    cr_assert_lt(metric(&l, "vllm:generation_tokens_total"), 900);
    stop(&l);
}

/* Stopping with streams open ends each (its request aborted), without a hang or a leak. */
Test(serve, stopping_with_open_streams_ends_them)
{
    live l = start(256);
    int fds[4];
    for (int i = 0; i < 4; i++) {
        fds[i] = connect_to(l.port);
        send_request(fds[i], "POST", "/v1/completions", "{\"prompt\":[1,2,3],\"max_tokens\":1000,\"stream\":true}");
    }
    char buf[512];
    for (int i = 0; i < 4; i++) cr_assert_gt(read(fds[i], buf, sizeof buf), 0);
    srv_stop(l.s, NULL, 0);
    engine_gauges g;
    engine_gauges_get(l.eng, &g);
    cr_assert_eq(g.aborted, 4);
    cr_assert_eq(g.running + g.waiting, 0);
    engine_stop(l.eng);
    for (int i = 0; i < 4; i++) close(fds[i]);
}

/* A response whose header cannot be formatted (a 330-character model name, past what the CLI
 * allows) is a 500, and the server still stops: the job was never submitted, so freeing it
 * must not wait for the engine (it deadlocked). */
Test(serve, a_request_never_submitted_is_freed_without_waiting_for_the_engine)
{
    char name[331];
    memset(name, 'm', 330);
    name[330] = '\0';
    live l = start_named(64, name);
    char body[600];
    snprintf(body, sizeof body, "{\"model\":\"%s\",\"prompt\":[1,2],\"max_tokens\":2}", name);
    char *r = http(l.port, "POST", "/v1/completions", body);
    cr_assert(strstr(r, "HTTP/1.1 500") && strstr(r, "model name too long"), "%s", r);
    free(r);
    stop(&l);
}

/* A server that speculates (prompt lookup, k = 3) on a prompt that repeats itself: every
 * token still streams, and /metrics carries vLLM's spec_decode counters, the drafts kept no
 * more than those proposed; a server that does not speculate has none of them. */
Test(serve, a_speculating_server_streams_every_token_and_counts_its_drafts)
{
    live l = start_spec(256, "tiny", 3);
    char body[512] = "{\"prompt\":[";
    for (int i = 0; i < 48; i++) snprintf(body + strlen(body), sizeof body - strlen(body), "%s%d", i ? "," : "", 5 + i % 6);
    strcat(body, "],\"max_tokens\":40,\"stream\":true}");
    char *r = http(l.port, "POST", "/v1/completions", body);
    cr_assert_eq(count(r, "\"text\":"), 40, "one event per token: %s", r);
    cr_assert(strstr(r, "data: [DONE]\n\n"), "%s", r);
    free(r);
    cr_assert_eq(metric(&l, "vllm:generation_tokens_total"), 40);
    double drafted = metric(&l, "vllm:spec_decode_num_draft_tokens_total");
    double kept = metric(&l, "vllm:spec_decode_num_accepted_tokens_total");
    cr_assert_gt(drafted, 0, "a repeating prompt gives prompt lookup something to find");
    cr_assert_leq(kept, drafted);
    cr_assert_gt(metric(&l, "vllm:spec_decode_num_drafts_total"), 0);
    stop(&l);
    l = start(256);
    char *page = http(l.port, "GET", "/metrics", NULL);
    cr_assert_null(strstr(page, "spec_decode"), "no speculation, no counters");
    free(page);
    stop(&l);
}
