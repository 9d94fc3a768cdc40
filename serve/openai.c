/* The OpenAI-compatible API's JSON. Requests are parsed with jansson; streamed events, the
 * hot path (one per token), are formatted from a prefix written once per response. */
#include "serve/openai.h"

#include "io/errmsg.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A 400 Bad Request, with its reason in ERR. */
__attribute__((format(printf, 3, 4)))
static int bad(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    verrmsg(err, errlen, fmt, ap);
    va_end(ap);
    return 400;
}

void oai_request_free(oai_request *r)
{
    free(r->prompt);
    r->prompt = NULL;
}

/* Appends the bytes of S as token ids; -1 when out of memory or too long, -2 when a byte is
 * outside a vocabulary smaller than 256 (VOCAB). */
static int append_bytes(oai_request *r, int *cap, const char *s, size_t n, int vocab)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= vocab) return -2;
    if (r->prompt_len + (int64_t)n > *cap) {
        int64_t want = (int64_t)*cap * 2 + (int64_t)n;
        if (want > (1 << 26)) return -1;
        int32_t *p = realloc(r->prompt, (size_t)want * sizeof *p);
        if (!p) return -1;
        r->prompt = p;
        *cap = (int)want;
    }
    for (size_t i = 0; i < n; i++) r->prompt[r->prompt_len++] = (unsigned char)s[i];
    return 0;
}

static int bytes_error(int rc, int vocab, char *err, size_t errlen)
{
    if (rc == -2)
        return bad(err, errlen, "the text has a byte outside this model's vocabulary [0, %d): send token ids", vocab);
    return bad(err, errlen, "the prompt is too long");
}

/* A completion's prompt: a string (its bytes), or a list of token ids. */
static int parse_prompt(json_t *p, const oai_limits *lim, oai_request *r, char *err, size_t errlen)
{
    int cap = 0, rc;
    if (json_is_string(p)) {
        if ((rc = append_bytes(r, &cap, json_string_value(p), json_string_length(p), lim->vocab_size)) < 0)
            return bytes_error(rc, lim->vocab_size, err, errlen);
    } else if (json_is_array(p)) {
        size_t n = json_array_size(p);
        if (n > (1u << 24)) return bad(err, errlen, "prompt is too long");
        r->prompt = malloc((n ? n : 1) * sizeof *r->prompt);
        if (!r->prompt) return bad(err, errlen, "prompt is too long");
        for (size_t i = 0; i < n; i++) {
            json_t *t = json_array_get(p, i);
            if (!json_is_integer(t))
                return bad(err, errlen, "prompt[%zu]: a prompt is a string or a list of token ids (integers)", i);
            json_int_t id = json_integer_value(t);
            if (id < 0 || id >= lim->vocab_size)
                return bad(err, errlen, "prompt[%zu]: token id %lld is outside the vocabulary [0, %d)", i, (long long)id,
                           lim->vocab_size);
            r->prompt[r->prompt_len++] = (int32_t)id;
        }
    } else {
        return bad(err, errlen, "prompt: a prompt is a string or a list of token ids");
    }
    return 0;
}

/* A chat's messages as one text: "role: content\n" each, then "assistant: ". */
static int parse_messages(json_t *m, int vocab, oai_request *r, char *err, size_t errlen)
{
    if (!json_is_array(m) || json_array_size(m) == 0)
        return bad(err, errlen, "messages: a non-empty list of {\"role\", \"content\"} objects is required");
    int cap = 0, rc = 0;
    size_t i;
    json_t *msg;
    json_array_foreach(m, i, msg) {
        json_t *role = json_object_get(msg, "role"), *content = json_object_get(msg, "content");
        if (!json_is_object(msg) || !json_is_string(role) || !(json_is_string(content) || json_is_null(content)))
            return bad(err, errlen, "messages[%zu]: an object with a string \"role\" and a string \"content\"", i);
        const char *c = json_is_string(content) ? json_string_value(content) : "";
        size_t clen = json_is_string(content) ? json_string_length(content) : 0;
        if ((rc = append_bytes(r, &cap, json_string_value(role), json_string_length(role), vocab)) < 0 ||
            (rc = append_bytes(r, &cap, ": ", 2, vocab)) < 0 || (rc = append_bytes(r, &cap, c, clen, vocab)) < 0 ||
            (rc = append_bytes(r, &cap, "\n", 1, vocab)) < 0)
            return bytes_error(rc, vocab, err, errlen);
    }
    if ((rc = append_bytes(r, &cap, "assistant: ", 11, vocab)) < 0) return bytes_error(rc, vocab, err, errlen);
    return 0;
}

/* FIELD of OBJ as an integer in [LO, HI] when present. */
static int int_field(json_t *obj, const char *field, long lo, long hi, int *out, char *err, size_t errlen)
{
    json_t *v = json_object_get(obj, field);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return bad(err, errlen, "%s must be an integer in [%ld, %ld]", field, lo, hi);
    *out = (int)json_integer_value(v);
    return 0;
}

static int bool_field(json_t *obj, const char *field, bool *out, char *err, size_t errlen)
{
    json_t *v = json_object_get(obj, field);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) return bad(err, errlen, "%s must be true or false", field);
    *out = json_is_true(v);
    return 0;
}

static int check_fields(json_t *doc, oai_request *r, const oai_limits *lim, char *err, size_t errlen)
{
    int status;
    json_t *model = json_object_get(doc, "model");
    if (model && !json_is_null(model)) {
        if (!json_is_string(model)) return bad(err, errlen, "model must be a string");
        if (strlen(json_string_value(model)) != json_string_length(model))
            return bad(err, errlen, "model: the name holds a NUL byte (\\u0000)");
        if (lim->model && strcmp(json_string_value(model), lim->model) != 0) {
            snprintf(err, errlen, "The model `%s` does not exist (this server serves `%s`)", json_string_value(model),
                     lim->model);
            return 404;
        }
    }
    int min_tokens = 0, n = 1;
    r->max_tokens = 16;   /* OpenAI's default for completions */
    /* chat: max_completion_tokens, OpenAI's current name, wins over the older max_tokens */
    if ((status = int_field(doc, "max_tokens", 1, 1 << 24, &r->max_tokens, err, errlen)) ||
        (r->endpoint == OAI_CHAT &&
         (status = int_field(doc, "max_completion_tokens", 1, 1 << 24, &r->max_tokens, err, errlen))) ||
        (status = int_field(doc, "min_tokens", 0, 1 << 24, &min_tokens, err, errlen)) ||
        (status = int_field(doc, "n", 1, 1, &n, err, errlen)))
        return status;
    if (min_tokens > r->max_tokens) return bad(err, errlen, "min_tokens (%d) is larger than max_tokens (%d)", min_tokens, r->max_tokens);
    bool ignore_eos = false;
    if ((status = bool_field(doc, "stream", &r->stream, err, errlen)) ||
        (status = bool_field(doc, "ignore_eos", &ignore_eos, err, errlen)))
        return status;
    json_t *t = json_object_get(doc, "temperature");
    if (t && !json_is_null(t) && (!json_is_number(t) || json_number_value(t) < 0 || !isfinite(json_number_value(t))))
        return bad(err, errlen, "temperature must be a number >= 0");
    json_t *so = json_object_get(doc, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so)) return bad(err, errlen, "stream_options must be an object");
        if ((status = bool_field(so, "include_usage", &r->include_usage, err, errlen))) return status;
    }
    return 0;
}

static int check_length(const oai_request *r, const oai_limits *lim, char *err, size_t errlen)
{
    if (r->prompt_len == 0) return bad(err, errlen, "the prompt is empty");
    int64_t total = (int64_t)r->prompt_len + r->max_tokens;
    if (total > lim->max_model_len)
        return bad(err, errlen,
                   "This model's maximum context length is %d tokens. However, you requested %lld tokens (%d in the "
                   "messages, %d in the completion). Please reduce the length of the messages or completion.",
                   lim->max_model_len, (long long)total, r->prompt_len, r->max_tokens);
    /* the last token's KV is never written: the scheduler needs prompt + max_tokens - 1 slots */
    int64_t bs = lim->kv_block_size > 0 ? lim->kv_block_size : 1;
    if ((total - 1 + bs - 1) / bs * bs > lim->kv_tokens)
        return bad(err, errlen, "the request needs %lld KV slots; the whole KV cache holds %lld", (long long)(total - 1),
                   (long long)lim->kv_tokens);
    return 0;
}

int oai_parse(const char *body, size_t len, oai_endpoint ep, const oai_limits *lim, oai_request *out,
              char *err, size_t errlen)
{
    *out = (oai_request){.endpoint = ep};
    json_error_t je;
    /* JSON allows \u0000 in a string, and vLLM takes it in a prompt (its benchmark's random
     * prompts are random token ids decoded, NUL bytes among them): text is counted by its
     * length, never by strlen */
    json_t *doc = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!doc) return bad(err, errlen, "malformed JSON at line %d, column %d: %s", je.line, je.column, je.text);
    int status;
    if (!json_is_object(doc)) status = bad(err, errlen, "the request body must be a JSON object");
    else if ((status = check_fields(doc, out, lim, err, errlen))) {
    } else if (ep == OAI_COMPLETIONS) {
        json_t *p = json_object_get(doc, "prompt");
        status = p ? parse_prompt(p, lim, out, err, errlen) : bad(err, errlen, "prompt is required");
    } else {
        status = parse_messages(json_object_get(doc, "messages"), lim->vocab_size, out, err, errlen);
    }
    if (!status) status = check_length(out, lim, err, errlen);
    json_decref(doc);
    if (status) oai_request_free(out);
    return status;
}

static char *dump(json_t *doc)
{
    char *s = doc ? json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(doc);
    return s;
}

char *oai_error_body(int status, const char *message)
{
    const char *type = status == 404 ? "NotFoundError" : status == 413 ? "RequestTooLarge"
                     : status >= 500 ? "InternalServerError" : "BadRequestError";
    json_t *e = json_object(), *doc = json_object();
    if (!e || !doc || json_put(e, "message", json_text(message)) | json_put(e, "type", json_string(type)) |
                          json_put(e, "param", json_null()) | json_put(e, "code", json_integer(status)) |
                          json_put(doc, "error", json_incref(e))) {
        json_decref(e);
        json_decref(doc);
        return NULL;
    }
    json_decref(e);
    return dump(doc);
}

char oai_token_char(int32_t t)
{
    uint32_t u = (uint32_t)t;
    return (char)(' ' + u % 95);
}

/* T's text as a JSON string literal: one character, two when it needs a backslash. */
static size_t token_literal(int32_t t, char *out)
{
    char c = oai_token_char(t);
    size_t n = 0;
    out[n++] = '"';
    if (c == '"' || c == '\\') out[n++] = '\\';
    out[n++] = c;
    out[n++] = '"';
    return n;
}

int oai_stream_init(oai_stream_fmt *f, oai_endpoint ep, const char *id, long created, const char *model)
{
    json_t *m = json_text(model), *i = json_text(id);
    char *ms = m ? json_dumps(m, JSON_ENCODE_ANY) : NULL, *is = i ? json_dumps(i, JSON_ENCODE_ANY) : NULL;
    json_decref(m);
    json_decref(i);
    int n = ms && is ? snprintf(f->head, sizeof f->head, "data: {\"id\":%s,\"object\":\"%s\",\"created\":%ld,\"model\":%s,", is,
                                ep == OAI_CHAT ? "chat.completion.chunk" : "text_completion", created, ms)
                     : -1;
    free(ms);
    free(is);
    f->endpoint = ep;
    if (n < 0 || (size_t)n >= sizeof f->head) return -1;
    f->head_len = (size_t)n;
    return 0;
}

/* The response's head, then TAIL[0..N) (N from snprintf: negative or past LIMIT is an
 * error), into BUF; its length, or 0 when it does not fit in CAP. */
static size_t put_event(const oai_stream_fmt *f, const char *tail, int n, size_t limit, char *buf, size_t cap)
{
    if (n < 0 || (size_t)n >= limit) return 0;
    size_t total = f->head_len + (size_t)n;
    if (total > cap) return 0;
    memcpy(buf, f->head, f->head_len);
    memcpy(buf + f->head_len, tail, (size_t)n);
    return total;
}

size_t oai_stream_token(const oai_stream_fmt *f, int32_t t, bool final, double sent, char *buf, size_t cap)
{
    char text[8], stamp[48] = "";
    size_t tl = token_literal(t, text);
    const char *finish = final ? "\"length\"" : "null";
    if (!isnan(sent)) snprintf(stamp, sizeof stamp, ",\"servesim_sent\":%.9f", sent);
    char tail[200];
    int n = f->endpoint == OAI_CHAT
                ? snprintf(tail, sizeof tail, "\"choices\":[{\"index\":0,\"delta\":{\"content\":%.*s},\"logprobs\":null,\"finish_reason\":%s}]%s}\n\n",
                           (int)tl, text, finish, stamp)
                : snprintf(tail, sizeof tail, "\"choices\":[{\"index\":0,\"text\":%.*s,\"logprobs\":null,\"finish_reason\":%s,\"stop_reason\":null}]%s}\n\n",
                           (int)tl, text, finish, stamp);
    return put_event(f, tail, n, sizeof tail, buf, cap);
}

size_t oai_stream_role(const oai_stream_fmt *f, char *buf, size_t cap)
{
    static const char tail[] =
        "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n";
    return put_event(f, tail, (int)sizeof tail - 1, sizeof tail, buf, cap);
}

size_t oai_stream_usage(const oai_stream_fmt *f, int prompt_tokens, int completion_tokens, char *buf, size_t cap)
{
    char tail[160];
    int n = snprintf(tail, sizeof tail,
                     "\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"total_tokens\":%d,\"completion_tokens\":%d}}\n\n",
                     prompt_tokens, prompt_tokens + completion_tokens, completion_tokens);
    return put_event(f, tail, n, sizeof tail, buf, cap);
}

static json_t *usage_json(int prompt_tokens, int completion_tokens)
{
    json_t *u = json_object();
    if (u && (json_put(u, "prompt_tokens", json_integer(prompt_tokens)) |
              json_put(u, "total_tokens", json_integer(prompt_tokens + completion_tokens)) |
              json_put(u, "completion_tokens", json_integer(completion_tokens)))) {
        json_decref(u);
        return NULL;
    }
    return u;
}

char *oai_response(oai_endpoint ep, const char *id, long created, const char *model, const int32_t *tokens, int n,
                   int prompt_tokens, const char *finish)
{
    char *text = malloc((size_t)n + 1);
    if (!text) return NULL;
    for (int i = 0; i < n; i++) text[i] = oai_token_char(tokens[i]);
    text[n] = '\0';
    json_t *doc = json_object(), *choice = json_object(), *choices = json_array();
    int err = !doc || !choice || !choices;
    err = err || json_put(choice, "index", json_integer(0));
    if (!err && ep == OAI_CHAT) {
        json_t *msg = json_object();
        err = !msg || json_put(msg, "role", json_string("assistant")) | json_put(msg, "content", json_text(text)) ||
              json_put(choice, "message", msg);
    } else if (!err) {
        err = json_put(choice, "text", json_text(text));
    }
    free(text);
    err = err || json_put(choice, "logprobs", json_null()) | json_put(choice, "finish_reason", json_string(finish)) ||
          json_array_append_new(choices, choice) < 0;
    choice = NULL;
    err = err || json_put(doc, "id", json_text(id)) |
                     json_put(doc, "object", json_string(ep == OAI_CHAT ? "chat.completion" : "text_completion")) |
                     json_put(doc, "created", json_integer(created)) | json_put(doc, "model", json_text(model)) |
                     json_put(doc, "choices", choices) || json_put(doc, "usage", usage_json(prompt_tokens, n));
    if (err) {
        json_decref(doc);
        return NULL;
    }
    return dump(doc);
}

char *oai_models(const char *model, long created, int max_model_len)
{
    json_t *doc = json_object(), *m = json_object(), *data = json_array();
    if (!doc || !m || !data || json_put(m, "id", json_text(model)) | json_put(m, "object", json_string("model")) |
                                   json_put(m, "created", json_integer(created)) |
                                   json_put(m, "owned_by", json_string("servesim")) |
                                   json_put(m, "max_model_len", json_integer(max_model_len)) ||
        json_array_append_new(data, m) < 0 || json_put(doc, "object", json_string("list")) | json_put(doc, "data", data)) {
        json_decref(doc);
        return NULL;
    }
    return dump(doc);
}
