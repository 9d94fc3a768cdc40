/* servesim load: a scenario's workload sent to an OpenAI-compatible server, measured the way
 * a simulated run is: summary.json with the same keys, requests.csv, and each token's time. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <curl/curl.h>

#include "cli/commands.h"
#include "cli/environment.h"
#include "io/csv.h"
#include "io/interrupt.h"
#include "io/results.h"
#include "load/client.h"
#include "study/job.h"

static const char load_usage[] =
    "usage: servesim load [SCENARIO.ini] --url http://HOST:PORT/v1 [--model NAME]\n"
    "                     [--endpoint completions|chat] [--timeout S] [--vllm-json] [--out DIR]\n"
    "                     [--seed N] [--set SECTION.KEY=VALUE]... [--quiet]\n"
    "  Sends the scenario's workload (arrivals, traces, closed loops, max_concurrency, shared\n"
    "  prefixes) to any OpenAI-compatible server (servesim serve, vLLM, SGLang): prompts as\n"
    "  token ids of the scenario's lengths (drawn from model.preset's vocabulary: name the\n"
    "  served model's preset, or set model.vocab), outputs of exact length (max_tokens with\n"
    "  ignore_eos), streamed. Writes to DIR (default\n"
    "  results/runs/NAME-load-seedN) summary.json with `run`'s keys, requests.csv (failed\n"
    "  requests too, stop_reason error), tokens.csv (each token's arrival), errors.csv, and with\n"
    "  --vllm-json vllm-bench.json in the format of `vllm bench serve --save-result\n"
    "  --save-detailed`. --model defaults to the first one the server lists. --timeout ends a\n"
    "  request that takes longer (recorded failed): 21600 s, vllm bench serve's, unless given;\n"
    "  0 for none. Ctrl-C stops sending and writes what was measured. Exits 1, its files\n"
    "  written, when every request failed.\n";

typedef struct recorder_files {
    res_dir *dir;
    FILE *errors;
    /* for vllm-bench.json: per measured request, in the order they ended */
    json_t *input_lens, *output_lens, *ttfts, *itls, *errs, *starts;
} recorder_files;

static void on_request(void *ctx, const req_record *rec, const double *times, int n, const char *error)
{
    recorder_files *rf = ctx;
    res_write_request(rf->dir, rec);
    for (int i = 0; i < n; i++) res_write_token(rf->dir, rec->request_id, i, times[i]);
    if (error) {
        fprintf(rf->errors, "%lld,", (long long)rec->request_id);
        csv_write_field(rf->errors, error);
        fputc('\n', rf->errors);
    }
    if (!rf->input_lens || rec->warmup) return;
    bool ok = !error;
    json_array_append_new(rf->input_lens, json_integer(rec->prompt_len));
    json_array_append_new(rf->output_lens, json_integer(ok ? rec->output_len : 0));
    json_array_append_new(rf->ttfts, json_real(ok && n ? times[0] - rec->arrival_time : 0));
    json_array_append_new(rf->starts, json_real(rec->arrival_time));
    json_t *gaps = json_array();
    for (int i = 1; ok && i < n; i++) json_array_append_new(gaps, json_real(times[i] - times[i - 1]));
    json_array_append_new(rf->itls, gaps);
    json_array_append_new(rf->errs, json_string(error ? error : ""));
}

static int vllm_put_latency(json_t *doc, const char *name, const latency_stats *st)
{
    char key[64];
    int bad = 0;
    const struct { const char *stat; double v; } f[] = {{"mean", st->mean}, {"median", st->median}, {"std", st->std}, {"p99", st->p99}};
    for (size_t i = 0; i < 4; i++) {
        snprintf(key, sizeof key, "%s_%s_ms", f[i].stat, name);
        bad |= json_put(doc, key, json_num(f[i].v));
    }
    return bad;
}

/* vLLM's `bench serve --save-result --save-detailed` JSON: what its readers look for. */
static int write_vllm_json(res_dir *dir, recorder_files *rf, const summary *s, const scenario *sc, const load_stats *st,
                           char *err, size_t errlen)
{
    json_t *doc = json_object();
    char date[32];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y%m%d-%H%M%S", localtime(&now));
    const char *arrival = sc->v[K_workload_arrival].s;
    int bad = !doc || json_put(doc, "date", json_string(date)) | json_put(doc, "endpoint_type", json_string("openai")) |
              json_put(doc, "backend", json_string("openai")) | json_put(doc, "label", json_null()) |
              json_put(doc, "model_id", json_text(st->model)) | json_put(doc, "tokenizer_id", json_text(st->model)) |
              json_put(doc, "num_prompts", json_integer(s->completed + s->rejected + s->failed)) |
              json_put(doc, "request_rate", strcmp(arrival, "poisson") == 0 || strcmp(arrival, "gamma") == 0 ||
                                                     strcmp(arrival, "constant") == 0
                                                 ? json_real(sc->v[K_workload_rate].d)
                                                 : json_string("inf")) |
              json_put(doc, "burstiness", json_real(sc->v[K_workload_burstiness].d)) |
              json_put(doc, "max_concurrency", strcmp(arrival, "closed") == 0 ? json_integer(sc->v[K_workload_concurrency].i)
                                               : sc->v[K_workload_max_concurrency].i ? json_integer(sc->v[K_workload_max_concurrency].i)
                                                                                     : json_null()) |
              json_put(doc, "duration", json_num(s->duration)) | json_put(doc, "completed", json_integer(s->completed)) |
              json_put(doc, "failed", json_integer(s->failed + s->rejected)) |
              json_put(doc, "total_input_tokens", json_integer(s->total_input_tokens)) |
              json_put(doc, "total_output_tokens", json_integer(s->total_output_tokens)) |
              json_put(doc, "request_throughput", json_num(s->request_throughput)) |
              json_put(doc, "request_goodput", json_num(s->request_goodput)) |
              json_put(doc, "output_throughput", json_num(s->output_throughput)) |
              json_put(doc, "total_token_throughput", json_num(s->total_token_throughput)) |
              json_put(doc, "input_lens", json_incref(rf->input_lens)) | json_put(doc, "output_lens", json_incref(rf->output_lens)) |
              json_put(doc, "ttfts", json_incref(rf->ttfts)) | json_put(doc, "itls", json_incref(rf->itls)) |
              json_put(doc, "start_times", json_incref(rf->starts)) | json_put(doc, "errors", json_incref(rf->errs)) |
              vllm_put_latency(doc, "ttft", &s->ttft_ms) | vllm_put_latency(doc, "tpot", &s->tpot_ms) |
              vllm_put_latency(doc, "itl", &s->itl_ms) | vllm_put_latency(doc, "e2el", &s->e2el_ms);
    if (bad) {
        json_decref(doc);
        snprintf(err, errlen, "out of memory while writing vllm-bench.json");
        return -1;
    }
    FILE *f = od_fopen(&dir->od, "vllm-bench.json", err, errlen);
    if (f) json_write(f, doc);
    json_decref(doc);
    char path[2300];
    od_path(&dir->od, "vllm-bench.json", path, sizeof path);
    return f ? od_fclose(f, path, err, errlen) : -1;
}

/* servesim serve --event-times: each event's time from the server's write to our clock. */
static json_t *delay_json(const load_stats *st)
{
    json_t *o = json_object();
    if (o && (json_put(o, "count", json_integer((json_int_t)st->delay_count)) | json_put(o, "mean", json_num(st->delay_mean_ms)) |
              json_put(o, "p50", json_num(st->delay_p50_ms)) | json_put(o, "p99", json_num(st->delay_p99_ms)) |
              json_put(o, "p99.9", json_num(st->delay_p999_ms)) | json_put(o, "max", json_num(st->delay_max_ms)))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *extra_json(const scenario *sc, const scenario_args *a, const load_stats *st)
{
    json_t *obj = json_object();
    if (!obj || json_put(obj, "executor", json_string("load")) | json_put(obj, "url", json_text(a->url)) |
                    json_put(obj, "model", json_text(st->model)) | json_put(obj, "endpoint", json_string(a->endpoint)) |
                    json_put(obj, "sent", json_integer((json_int_t)st->sent)) |
                    json_put(obj, "failed", json_integer((json_int_t)st->failed)) |
                    json_put(obj, "interrupted", json_boolean(st->interrupted)) |
                    (st->delay_count ? json_put(obj, "event_delay_ms", delay_json(st)) : 0) |
                    json_put(obj, "seed", json_integer(sc->v[K_run_seed].i)) | env_json(obj, "client", "", 1) |
                    job_scenario_json(obj, sc)) {
        json_decref(obj);
        return NULL;
    }
    return obj;
}

static int close_extra(res_dir *dir, FILE *f, const char *name, char *err, size_t errlen)
{
    char path[2300];
    od_path(&dir->od, name, path, sizeof path);
    return od_fclose(f, path, err, errlen);
}

static int measure(const scenario *sc, const scenario_args *a, const char *out, summary *sum, bool *have,
                   load_stats *st, char *err, size_t errlen)
{
    scenario_resolved r;
    if (scenario_resolve(sc, &r, err, errlen) < 0) return EXIT_BAD_INPUT;
    workload w;
    if (wl_open(&r.workload, &w, err, errlen) < 0) return EXIT_BAD_INPUT;
    res_dir dir;
    if (res_open(&dir, out, err, errlen) < 0) {
        wl_free(&w);
        return EXIT_FAILURE_OTHER;
    }
    recorder_files rf = {.dir = &dir};
    rf.errors = res_open_tokens(&dir, err, errlen) == 0 ? od_fopen(&dir.od, "errors.csv", err, errlen) : NULL;
    if (a->vllm_json) {
        rf.input_lens = json_array(), rf.output_lens = json_array(), rf.ttfts = json_array();
        rf.itls = json_array(), rf.errs = json_array(), rf.starts = json_array();
    }
    met_acc *met = met_create();
    if (met) met_set_percentiles(met, r.percentiles, r.num_percentiles);
    int status = rf.errors && met ? EXIT_OK : EXIT_FAILURE_OTHER;
    if (status == EXIT_OK) {
        fputs("request_id,error\n", rf.errors);
        job_progress ps;
        job_progress_start(&ps, "measuring");
        load_options o = {.url = a->url, .model = a->model,
                          .endpoint = strcmp(a->endpoint, "chat") == 0 ? LOAD_CHAT : LOAD_COMPLETIONS,
                          .timeout_s = (double)a->timeout_s, .stop = interrupt_flag(),
                          .progress = !a->quiet && isatty(2) ? job_progress_show : NULL, .progress_ctx = &ps};
        load_sink sink = {.met = met, .on_request = on_request, .ctx = &rf};
        int rc = load_run(&o, &w, &r.workload, &sink, st, err, errlen);
        job_progress_end(&ps);
        if (rc == 2) status = EXIT_BAD_INPUT;
        else if (rc == 1 && !st->interrupted) status = EXIT_FAILURE_OTHER;
    }
    if (status == EXIT_OK) {
        *have = met_summarize(met, &r.slo, sum) == 0;
        json_t *extra = extra_json(sc, a, st);
        FILE *e = rf.errors;
        rf.errors = NULL;
        if (!extra) snprintf(err, errlen, "out of memory while writing summary.json");
        else if (close_extra(&dir, e, "errors.csv", err, errlen) < 0 ||
                 (a->vllm_json && write_vllm_json(&dir, &rf, sum, sc, st, err, errlen) < 0) ||
                 job_write_results(&dir, sum, extra, err, errlen) < 0)
            status = EXIT_FAILURE_OTHER;
        json_decref(extra);
        if (!extra) status = EXIT_FAILURE_OTHER;
    }
    if (rf.errors) fclose(rf.errors);
    if (status != EXIT_OK) res_abort(&dir);
    json_decref(rf.input_lens), json_decref(rf.output_lens), json_decref(rf.ttfts);
    json_decref(rf.itls), json_decref(rf.errs), json_decref(rf.starts);
    met_free(met);
    wl_free(&w);
    return status;
}

int cmd_load(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(load_usage, stdout);
        return EXIT_OK;
    }
    scenario sc;
    scenario_args a;
    if (parse_scenario_args(argc, argv, load_usage, SA_LOAD, &sc, &a) < 0) return EXIT_BAD_INPUT;
    if (!a.url) {
        fprintf(stderr, "servesim: load needs --url, the API's base (e.g. http://127.0.0.1:8000/v1)\n%s", load_usage);
        return EXIT_BAD_INPUT;
    }
    if (strncmp(a.url, "http://", 7) != 0 && strncmp(a.url, "https://", 8) != 0) {
        fprintf(stderr, "servesim: --url %s: expected http://HOST:PORT/v1\n", a.url);
        return EXIT_BAD_INPUT;
    }
    char url[2048];
    snprintf(url, sizeof url, "%s", a.url);
    for (size_t n = strlen(url); n > 0 && url[n - 1] == '/'; n--) url[n - 1] = '\0';
    a.url = url;
    env_raise_fd_limit();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    char out[1200], suffix[64];
    snprintf(suffix, sizeof suffix, "load-seed%lld", sc.v[K_run_seed].i);
    char out_err[2048];
    if (scenario_out_dir(&sc, a.out_dir, suffix, out, sizeof out, out_err, sizeof out_err) < 0) {
        fprintf(stderr, "servesim: %s\n", out_err);
        return EXIT_BAD_INPUT;
    }
    summary sum;
    bool have = false;
    load_stats st = {0};
    char err[1024];
    int status = measure(&sc, &a, out, &sum, &have, &st, err, sizeof err);
    curl_global_cleanup();
    if (status != EXIT_OK) {
        fprintf(stderr, "servesim: %s\n", err);
        return status;
    }
    /* a run that measured nothing is no measurement: a wrong --url path or --model fails every
     * request, and a script must not take it for one (bad-input campaign) */
    bool all_failed = !st.interrupted && st.sent > 0 && st.failed == st.sent;
    if (!a.quiet) {
        if (have) res_print_summary(stdout, &sum);
        printf("%zu requests sent to %s (model %s), %zu failed%s\n", st.sent, a.url, st.model, st.failed,
               st.interrupted ? ", interrupted" : "");
        /* where all failed, the message on stderr names the first */
        if (st.failed && !all_failed) printf("First failure: %s (all in errors.csv)\n", st.first_error);
        if (st.delay_count)
            printf("Event delay, server write to client clock (%zu events): mean %.3f ms, P50 %.3f, P99 %.3f, P99.9 %.3f, max %.3f\n",
                   st.delay_count, st.delay_mean_ms, st.delay_p50_ms, st.delay_p99_ms, st.delay_p999_ms, st.delay_max_ms);
        printf("Results in %s/\n", out);
    }
    if (all_failed) {
        fprintf(stderr, "servesim: every one of the %zu requests failed; the first: %s (all in %s/errors.csv)\n",
                st.sent, st.first_error, out);
        return EXIT_FAILURE_OTHER;
    }
    return st.interrupted ? EXIT_FAILURE_OTHER : EXIT_OK;
}
