/* The load client against the real server on loopback: every request accounted for, token
 * counts exact, times in order, the server's own counters agreeing with the client's records,
 * the in-flight cap kept, and failures (refused requests, a server that is not there or goes
 * away mid-run) recorded, never dropped. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tiny_engine.h"
#include "tests/file_fixture.h"
#include "cli/commands.h"
#include "load/client.h"
#include "load/measured.h"
#include "serve/server.h"

typedef struct seen {
    req_record recs[400];
    int tokens[400];
    int bad_order;
    char errors[400][160];
    int n;
    srv *stop_after;           /* stop this server once STOP_AT requests ended */
    int stop_at;
} seen;

static void on_request(void *ctx, const req_record *rec, const double *times, int n, const char *error)
{
    seen *s = ctx;
    cr_assert_lt(s->n, 400);
    s->recs[s->n] = *rec;
    s->tokens[s->n] = n;
    for (int i = 1; i < n; i++) s->bad_order += times[i] < times[i - 1];
    if (n) s->bad_order += times[0] < rec->arrival_time || rec->finish_time < times[n - 1];
    snprintf(s->errors[s->n], sizeof s->errors[s->n], "%s", error ? error : "");
    s->n++;
    if (s->stop_after && s->n == s->stop_at) {
        srv_stop(s->stop_after, NULL, 0);
        s->stop_after = NULL;
    }
}

typedef struct live {
    engine_live *eng;
    srv *s;
    char url[64];
} live;

static live start(void)
{
    const model_shape *m = model_preset("tiny");
    engine_options o = tiny_engine_options((sched_config){
        .policy = POLICY_PAGED, .chunked_prefill = true, .prefix_caching = true, .max_num_seqs = 32,
        .max_num_batched_tokens = 256, .block_size = 16, .num_blocks = 512, .max_model_len = 512});
    live l = {0};
    char err[512];
    l.eng = engine_start(&o, NULL, err, sizeof err);
    cr_assert_not_null(l.eng, "%s", err);
    srv_options so = {.host = "127.0.0.1", .port = 0, .model = "tiny", .vocab_size = m->vocab, .max_model_len = 512,
                      .kv_block_size = 16, .kv_tokens = 512 * 16, .max_body = 1 << 20, .max_connections = 512};
    l.s = srv_start(&so, l.eng, err, sizeof err);
    cr_assert_not_null(l.s, "%s", err);
    snprintf(l.url, sizeof l.url, "http://127.0.0.1:%d/v1", srv_port(l.s));
    return l;
}

static wl_config workload_config(int n, wl_arrival arrival)
{
    wl_config c = {.num_requests = n, .arrival = arrival, .rate = 80, .burstiness = 1, .concurrency = 4,
                   .num_prefixes = 2, .shared_prefix_len = 32, .prefix_fraction = 0.5, .trace_time_scale = 1,
                   .vocab_size = model_preset("tiny")->vocab, .seed = 11};
    char err[200];
    dist_parse("uniform:8:120", &c.prompt_len, err, sizeof err);
    dist_parse("uniform:1:40", &c.output_len, err, sizeof err);
    return c;
}

static int run_load(const char *url, const char *model, wl_config *c, seen *s, met_acc *met, load_stats *st, char *err)
{
    workload w;
    cr_assert_eq(wl_build(c, &w, err, 512), 0, "%s", err);
    load_options o = {.url = url, .model = model, .timeout_s = 60};
    load_sink sink = {.met = met, .on_request = on_request, .ctx = s};
    int rc = load_run(&o, &w, c, &sink, st, err, 512);
    wl_free(&w);
    return rc;
}

Test(load, every_request_and_token_is_measured_and_the_server_agrees)
{
    live l = start();
    wl_config c = workload_config(60, ARRIVAL_POISSON);
    seen *s = calloc(1, sizeof *s);
    met_acc *met = met_create();
    load_stats st;
    char err[512];
    cr_assert_eq(run_load(l.url, NULL, &c, s, met, &st, err), 0, "%s", err);
    cr_assert_str_eq(st.model, "tiny", "the model named by GET /models");
    cr_assert_eq(st.sent, 60);
    cr_assert_eq(st.failed, 0, "%s", s->errors[0]);
    cr_assert_eq(s->n, 60, "every request ends once");
    workload w;
    cr_assert_eq(wl_build(&c, &w, err, sizeof err), 0);
    int64_t prompt = 0, output = 0;
    bool ended[60] = {0};
    for (int i = 0; i < s->n; i++) {
        const req_record *r = &s->recs[i];
        cr_assert(!ended[r->request_id], "request %lld twice", (long long)r->request_id);
        ended[r->request_id] = true;
        cr_assert_eq(r->stop, STOP_LENGTH);
        cr_assert_eq(r->output_len, w.reqs[r->request_id].output_len, "request %lld", (long long)r->request_id);
        cr_assert_eq(s->tokens[i], r->output_len, "one streamed event per token");
        cr_assert_eq(r->prompt_len, w.reqs[r->request_id].prompt_len);
        prompt += r->prompt_len;
        output += r->output_len;
    }
    cr_assert_eq(s->bad_order, 0, "token times out of order");
    summary sum;
    cr_assert_eq(met_summarize(met, NULL, &sum), 0);
    cr_assert_eq(sum.completed, 60);
    cr_assert_eq(sum.total_output_tokens, output);
    cr_assert_gt(sum.itl_ms.mean, 0);
    engine_gauges g;
    engine_gauges_get(l.eng, &g);
    cr_assert_eq(g.finished, 60);
    cr_assert_eq(g.prompt_tokens, prompt, "the server counted the prompts the client sent");
    cr_assert_eq(g.generation_tokens, output);
    cr_assert_gt(g.prefix_hits, 0, "shared prefixes were sent as the same ids");
    srv_stop(l.s, NULL, 0);
    engine_stop(l.eng);
    met_free(met);
    wl_free(&w);
    free(s);
}

/* A closed loop of 4 clients: never more than 4 requests at the server at once. */
Test(load, a_closed_loop_keeps_its_clients)
{
    live l = start();
    wl_config c = workload_config(30, ARRIVAL_CLOSED);
    seen *s = calloc(1, sizeof *s);
    load_stats st;
    char err[512];
    cr_assert_eq(run_load(l.url, "tiny", &c, s, NULL, &st, err), 0, "%s", err);
    cr_assert_eq(s->n, 30);
    for (int i = 0; i < s->n; i++) {
        int overlapping = 0;
        double t = s->recs[i].arrival_time;
        for (int k = 0; k < s->n; k++) overlapping += s->recs[k].arrival_time <= t && t < s->recs[k].finish_time;
        cr_assert_leq(overlapping, 4, "at %.6f s %d requests were in flight", t, overlapping);
    }
    srv_stop(l.s, NULL, 0);
    engine_stop(l.eng);
    free(s);
}

Test(load, refused_requests_and_missing_servers_are_recorded_not_dropped)
{
    live l = start();
    wl_config c = workload_config(20, ARRIVAL_ALL_AT_ONCE);
    char err[200];
    dist_parse("fixed:600", &c.prompt_len, err, sizeof err);   /* past max_model_len = 512 */
    seen *s = calloc(1, sizeof *s);
    load_stats st;
    char e[512];
    cr_assert_eq(run_load(l.url, "tiny", &c, s, NULL, &st, e), 0, "%s", e);
    cr_assert_eq(s->n, 20);
    cr_assert_eq(st.failed, 20);
    cr_assert_eq(s->recs[0].stop, STOP_ERROR);
    cr_assert(strstr(s->errors[0], "HTTP 400: This model's maximum context length is 512"), "%s", s->errors[0]);
    memset(s, 0, sizeof *s);
    wl_config three = workload_config(3, ARRIVAL_ALL_AT_ONCE);
    cr_assert_eq(run_load(l.url, "gpt-9", &three, s, NULL, &st, e), 2, "a model the server does not list");
    cr_assert(strstr(e, "--model gpt-9: the server at") && strstr(e, "serves tiny"), "%s", e);
    cr_assert_eq(s->n, 0, "nothing sent");
    srv_stop(l.s, NULL, 0);
    engine_stop(l.eng);

    memset(s, 0, sizeof *s);
    wl_config one = workload_config(2, ARRIVAL_ALL_AT_ONCE);
    cr_assert_eq(run_load("http://127.0.0.1:1/v1", NULL, &one, s, NULL, &st, e), 2);
    cr_assert(strstr(e, "--url http://127.0.0.1:1/v1: Couldn't connect"), "%s", e);
    cr_assert_eq(s->n, 0, "nothing sent before the server answered");
    free(s);
}

static void redirect_stdout_and_stderr(void)
{
    cr_redirect_stdout();
    cr_redirect_stderr();
}

/* `servesim load` exited 0 when every request failed (bad-input campaign), so a script took a
 * wrong --url path or --model for a measurement: it exits 1, with its files written. The first
 * failure is named once, on stderr (stdout named it too, a line above). */
Test(load, a_run_whose_every_request_failed_exits_1_with_its_files, .init = redirect_stdout_and_stderr)
{
    live l = start();
    system("rm -rf /tmp/servesim-load-allfail");
    char *argv[] = {"load", "--url", l.url, "--set", "model.preset=tiny", "--set", "workload.prompt_len=fixed:600",
                    "--set", "workload.num_requests=4", "--set", "workload.arrival=all_at_once", "--out",
                    "/tmp/servesim-load-allfail"};
    cr_assert_eq(cmd_load(13, argv), EXIT_FAILURE_OTHER);
    cr_assert_eq(access("/tmp/servesim-load-allfail/requests.csv", F_OK), 0, "the failures are recorded");
    fflush(stderr);
    fflush(stdout);
    char text[1024], printed[4096];
    text[fread(text, 1, sizeof text - 1, cr_get_redirected_stderr())] = 0;
    printed[fread(printed, 1, sizeof printed - 1, cr_get_redirected_stdout())] = 0;
    cr_assert(strstr(text, "servesim: every one of the 4 requests failed; the first: request ") &&
              strstr(text, ": HTTP 400: This model's maximum context length is 512 tokens"), "%s", text);
    cr_assert(strstr(printed, "4 requests sent to ") && strstr(printed, "4 failed"), "%s", printed);
    cr_assert_null(strstr(printed, "maximum context length"), "named twice: %s", printed);
    srv_stop(l.s, NULL, 0);
    engine_stop(l.eng);
    system("rm -rf /tmp/servesim-load-allfail");
}

/* The server goes away mid-run: the requests it was serving end as errors, the rest fail to
 * connect; all are recorded and the run ends. */
Test(load, a_server_that_dies_mid_run_leaves_every_request_recorded)
{
    live l = start();
    wl_config c = workload_config(80, ARRIVAL_POISSON);
    seen *s = calloc(1, sizeof *s);
    s->stop_after = l.s;
    s->stop_at = 10;
    load_stats st;
    char err[512];
    cr_assert_eq(run_load(l.url, "tiny", &c, s, NULL, &st, err), 0, "%s", err);
    cr_assert_eq(s->n, 80, "every request recorded");
    cr_assert_geq(st.failed, 1);
    int ok = 0;
    for (int i = 0; i < s->n; i++) ok += s->recs[i].stop == STOP_LENGTH;
    cr_assert_eq(ok + (int)st.failed, 80);
    engine_stop(l.eng);
    free(s);
}

/* ---- measured runs read back ---- */


Test(load, a_servesim_directory_reads_back_in_send_order_with_its_gaps)
{
    char dir[] = "/tmp/servesim-measured-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/requests.csv", dir);
    /* out of order, a failed request, a warm-up, a quoted field and a column we do not read */
    write_path(path,
               "request_id,arrival_time,scheduled_prefill_time,first_token_time,finish_time,prompt_len,cached_prompt_len,"
               "output_len,num_preemptions,stop_reason,warmup,extra\n"
               "2,10.5,,10.7,11.0,30,0,4,0,length,0,\"a,b\"\n"
               "0,10.0,,10.1,10.4,20,0,3,0,length,1,x\n"
               "1,10.2,,,10.3,25,0,0,0,error,0,x\n");
    snprintf(path, sizeof path, "%s/tokens.csv", dir);
    /* rows interleaved across requests, as the engine and the simulator write them */
    write_path(path, "request_id,token_index,time\n0,0,10.1\n0,1,10.2\n2,0,10.7\n0,2,10.4\n2,1,10.75\n2,2,10.85\n2,3,11.0\n");
    measured_run m;
    char err[512];
    cr_assert_eq(measured_read(dir, &m, err, sizeof err), 0, "%s", err);
    cr_assert_eq(m.n, 3);
    cr_assert_str_eq(m.kind, "servesim");
    cr_assert(m.have_arrivals && m.have_itl);
    cr_assert_eq(m.reqs[0].request_id, 0);
    cr_assert_eq(m.reqs[1].request_id, 1);
    cr_assert_eq(m.reqs[1].stop, STOP_ERROR);
    cr_assert_float_eq(m.reqs[0].arrival_time, 0, 1e-12, "times start at the first send");
    cr_assert_float_eq(m.reqs[2].arrival_time, 0.5, 1e-12);
    cr_assert_float_eq(m.reqs[2].finish_time, 1.0, 1e-12);
    cr_assert(isnan(m.reqs[1].first_token_time));
    cr_assert(m.reqs[0].warmup);
    /* only request 2's gaps: 0 is a warm-up */
    cr_assert_eq(m.num_itl, 3);
    cr_assert_float_eq(m.itl[0], 0.05, 1e-9);
    cr_assert_float_eq(m.itl[2], 0.15, 1e-9);
    for (int i = 0; i < 3; i++) cr_assert_eq(m.itl_request_id[i], 2, "gap %d is request 2's", i);
    cr_assert_eq(m.reqs[2].draft_tokens, 0, "no draft columns, no drafts");
    measured_free(&m);

    /* an engine that speculated: each request's drafts and the ones kept */
    snprintf(path, sizeof path, "%s/requests.csv", dir);
    write_path(path, "request_id,arrival_time,first_token_time,finish_time,prompt_len,output_len,stop_reason,warmup,"
                     "draft_tokens,accepted_tokens\n0,1.0,1.1,1.2,20,3,length,0,8,5\n");
    cr_assert_eq(measured_read(dir, &m, err, sizeof err), 0, "%s", err);
    cr_assert(m.reqs[0].draft_tokens == 8 && m.reqs[0].accepted_tokens == 5);
    measured_free(&m);
    write_path(path, "request_id,arrival_time,first_token_time,finish_time,prompt_len,output_len,stop_reason,warmup,"
                     "draft_tokens,accepted_tokens\n0,1.0,1.1,1.2,20,3,length,0,4,5\n");
    cr_assert_eq(measured_read(dir, &m, err, sizeof err), -1, "more kept than drafted");
    cr_assert(strstr(err, "requests.csv:2: not a request record"), "%s", err);
    write_path(path, "request_id,arrival_time,first_token_time,finish_time,prompt_len,output_len,stop_reason,warmup,"
                     "draft_tokens\n0,1.0,1.1,1.2,20,3,length,0,4\n");
    cr_assert_eq(measured_read(dir, &m, err, sizeof err), -1);
    cr_assert(strstr(err, "draft_tokens and accepted_tokens come together"), "%s", err);
    snprintf(path, sizeof path, "%s/tokens.csv", dir);
    write_path(path, "request_id,token_index,time\n0,0,10.1\n0,1,10.2\n2,0,10.7\n0,2,10.4\n2,1,10.75\n2,2,10.85\n2,3,11.0\n");

    snprintf(path, sizeof path, "%s/requests.csv", dir);
    write_path(path, "request_id,arrival_time,first_token_time,finish_time,prompt_len,output_len,stop_reason,warmup\n"
                     "0,1.0,1.1,1.2,20,3,finished,0\n");
    cr_assert_eq(measured_read(dir, &m, err, sizeof err), -1);
    cr_assert(strstr(err, "requests.csv:2: not a request record"), "%s", err);
    write_path(path, "request_id,arrival_time,first_token_time,finish_time,prompt_len,output_len,stop_reason,warmup\n"
                     ",1.0,1.1,1.2,20,3,length,0\n");
    cr_assert_eq(measured_read(dir, &m, err, sizeof err), -1, "an empty id is not a request (it was cast from NaN)");
    cr_assert(strstr(err, "requests.csv:2: not a request record"), "%s", err);
    write_path(path, "");
    cr_assert_eq(measured_read(dir, &m, err, sizeof err), -1);
    cr_assert(strstr(err, "requests.csv: empty, expected a requests.csv header"), "%s", err);
    write_path(path, "request_id,arrival_time\n0,1\n");
    cr_assert_eq(measured_read(dir, &m, err, sizeof err), -1);
    cr_assert(strstr(err, "requests.csv:1: no column first_token_time"), "%s", err);
    /* a column named twice: the first was read, whatever the second held (stop 34's leftover) */
    write_path(path, "request_id,arrival_time,first_token_time,finish_time,prompt_len,output_len,stop_reason,warmup,"
                     "output_len\n0,1.0,1.1,1.2,20,3,length,0,7\n");
    cr_assert_eq(measured_read(dir, &m, err, sizeof err), -1);
    cr_assert(strstr(err, "requests.csv:1: column output_len is named twice (columns 6 and 9)"), "%s", err);
    write_path(path, "request_id,arrival_time,first_token_time,finish_time,prompt_len,output_len,stop_reason,warmup\n"
                     "0,10.0,10.1,10.4,20,3,length,0\n");
    snprintf(path, sizeof path, "%s/tokens.csv", dir);
    write_path(path, "request_id,token_index,time,time\n0,0,10.1,9\n0,1,10.2,9\n0,2,10.4,9\n");
    cr_assert_eq(measured_read(dir, &m, err, sizeof err), -1);
    cr_assert(strstr(err, "tokens.csv:1: column time is named twice (columns 3 and 4)"), "%s", err);
    snprintf(path, sizeof path, "rm -rf %s", dir);
    cr_assert_eq(system(path), 0);
}

/* Times that contradicted each other were taken and reported as negative latencies (a first
 * token before the send gave a mean TTFT of -200 ms; bad-input campaign): each is refused,
 * naming the line; a failed or rejected request may still lack its times. So is an id given
 * twice. */
Test(load, a_request_record_whose_times_contradict_each_other_is_refused)
{
    char dir[] = "/tmp/servesim-measured-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/requests.csv", dir);
    const char *head = "request_id,arrival_time,scheduled_prefill_time,first_token_time,finish_time,prompt_len,"
                       "cached_prompt_len,output_len,num_preemptions,stop_reason,warmup,draft_tokens,accepted_tokens\n";
    const char *bad[][2] = {
        {"0,1.0,0,0.5,1.2,20,0,5,0,length,0,0,0", "requests.csv:3: first_token_time 0.5 is before arrival_time 1"},
        {"0,1.0,0,1.5,1.2,20,0,5,0,length,0,0,0", "requests.csv:3: finish_time 1.2 is before first_token_time 1.5"},
        {"0,1.0,0,,0.5,20,0,0,0,error,0,0,0", "requests.csv:3: finish_time 0.5 is before arrival_time 1"},
        {"0,1.0,0,,,20,0,5,0,length,0,0,0",
         "requests.csv:3: a finished request (stop_reason length) needs first_token_time and finish_time"},
        {"0,1.0,0,1.1,,20,0,5,0,length,0,0,0",
         "requests.csv:3: a finished request (stop_reason length) needs first_token_time and finish_time"},
        {"0,1.0,0,1.1,1.2,20,0,0,0,length,0,0,0", "requests.csv:3: a finished request (stop_reason length) with output_len 0"},
        {"0,1e300,0,1e300,1e300,20,0,5,0,length,0,0,0",
         "requests.csv:3: arrival_time 1e+300 is not a clock reading in [0, 1e+12] s"},
        {"0,1.0,0,1.1,1e300,20,0,5,0,length,0,0,0", "requests.csv:3: finish_time 1e+300 is not a clock reading"},
        {"0,-1.0,0,1.1,1.2,20,0,5,0,length,0,0,0", "requests.csv:3: arrival_time -1 is not a clock reading"},
    };
    measured_run m;
    char err[512], doc[512];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(doc, sizeof doc, "%s1,0.5,0,0.6,0.7,20,0,3,0,length,0,0,0\n%s\n", head, bad[i][0]);
        write_path(path, doc);
        cr_assert_eq(measured_read(dir, &m, err, sizeof err), -1, "%s", bad[i][0]);
        cr_assert(strstr(err, bad[i][1]) && strstr(err, dir), "%s: %s", bad[i][0], err);
    }
    /* what the engine, the simulator and the load client write for a request that did not
     * finish: rejected with no token, failed with no token or after some, failed unanswered */
    snprintf(doc, sizeof doc,
             "%s0,1.0,0,1.1,1.2,20,0,3,0,length,0,0,0\n1,1.0,,,1.0,16000,0,0,0,kv_capacity,0,0,0\n"
             "2,1.5,,,1.9,20,0,0,0,error,0,0,0\n3,1.5,,1.6,1.9,20,0,2,0,error,0,0,0\n4,1.5,,,,20,0,0,0,error,0,0,0\n"
             "5,1.7,,1.7,1.7,20,0,1,0,length,0,0,0\n", head);
    write_path(path, doc);
    cr_assert_eq(measured_read(dir, &m, err, sizeof err), 0, "%s", err);
    cr_assert_eq(m.n, 6);
    measured_free(&m);
    /* one request_id on two records: the gaps of both went to one, compared as one request's */
    snprintf(doc, sizeof doc, "%s7,1.0,0,1.1,1.2,20,0,3,0,length,0,0,0\n8,1.1,0,1.2,1.3,20,0,3,0,length,0,0,0\n"
             "7,1.5,0,1.6,1.7,20,0,3,0,length,0,0,0\n", head);
    write_path(path, doc);
    cr_assert_eq(measured_read(dir, &m, err, sizeof err), -1);
    cr_assert(strstr(err, "requests.csv: request_id 7 is given twice, on records 1 and 3 (counted after the header): a "
                          "request has one record"), "%s", err);
    snprintf(path, sizeof path, "rm -rf %s", dir);
    cr_assert_eq(system(path), 0);
}

Test(load, a_vllm_benchmark_json_reads_back)
{
    char path[] = "/tmp/servesim-vllm-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    write_path(path, "{\"input_lens\": [10, 20, 30], \"output_lens\": [3, 0, 2], \"ttfts\": [0.1, 0, 0.2],"
                     " \"itls\": [[0.01, 0.02], [], [0.05]], \"errors\": [\"\", \"timeout\", \"\"],"
                     " \"start_times\": [5.0, 5.1, 5.3], \"extra\": 1}");
    measured_run m;
    char err[512];
    cr_assert_eq(measured_read(path, &m, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(m.kind, "vllm");
    cr_assert_eq(m.n, 3);
    cr_assert_eq(m.reqs[1].stop, STOP_ERROR);
    cr_assert_float_eq(m.reqs[2].arrival_time, 0.3, 1e-12);
    cr_assert_float_eq(m.reqs[0].finish_time, 0.1 + 0.03, 1e-12, "end = TTFT + the sum of the gaps");
    cr_assert_float_eq(m.reqs[2].first_token_time, 0.5, 1e-12);
    cr_assert_eq(m.num_itl, 3, "a failed request's gaps are not measured ones");
    cr_assert(m.itl_request_id[0] == 0 && m.itl_request_id[1] == 0 && m.itl_request_id[2] == 2, "each gap's request");
    measured_free(&m);
    write_path(path, "{\"input_lens\": [10, 20], \"output_lens\": [3], \"ttfts\": [0.1, 0.2], \"itls\": [[], []], \"errors\": [\"\", \"\"]}");
    cr_assert_eq(measured_read(path, &m, err, sizeof err), -1);
    cr_assert(strstr(err, "\"output_lens\" must be a list of 2 entries"), "%s", err);
    write_path(path, "{\"input_lens\": [10], \"output_lens\": [3], \"ttfts\": [0.1], \"itls\": [[0.1]], \"errors\": [\"\"]}");
    cr_assert_eq(measured_read(path, &m, err, sizeof err), 0, "%s", err);
    cr_assert(!m.have_arrivals, "a file without start_times (older vLLM versions) has no send times");
    measured_free(&m);
    /* as many gaps as tokens: vLLM's openai-chat client times the server's opening role chunk */
    write_path(path, "{\"input_lens\": [10], \"output_lens\": [3], \"ttfts\": [0.1], \"itls\": [[0.1, 0.1, 0.1]], "
                     "\"errors\": [\"\"]}");
    cr_assert_eq(measured_read(path, &m, err, sizeof err), 0, "%s", err);
    measured_free(&m);
    write_path(path, "{\"input_lens\": [1");
    cr_assert_eq(measured_read(path, &m, err, sizeof err), -1);
    cr_assert(strstr(err, path) && strstr(err, ":1:"), "%s", err);
    /* lengths and times out of range were taken (an output of 1e12 tokens wrapped to an int,
     * a negative TTFT shortened the run; bad-input campaign): each is refused, naming the request */
    const char *bad[][2] = {
        {"\"input_lens\": [10, 20], \"output_lens\": [3, 1000000000000], \"ttfts\": [0.1, 0.2], \"itls\": [[], []]",
         "request 1: input length 20 and output length 1000000000000 must lie in [1, 16777216] and [0, 16777216]"},
        {"\"input_lens\": [10, -5], \"output_lens\": [3, 2], \"ttfts\": [0.1, 0.2], \"itls\": [[], []]",
         "request 1: input length -5 and output length 2"},
        {"\"input_lens\": [10, 20], \"output_lens\": [3, 2], \"ttfts\": [-0.1, 0.2], \"itls\": [[], []]",
         "request 0: ttft -0.1 s is not a time in [0, 86400] s"},
        {"\"input_lens\": [10, 20], \"output_lens\": [3, 2], \"ttfts\": [0.1, 0.2], \"itls\": [[0.01], [0.02, -0.5]]",
         "request 1: itls[1] is not a gap in [0, 86400] s"},
        {"\"input_lens\": [10, 20], \"output_lens\": [3, 2], \"ttfts\": [0.1, 0.2], \"itls\": [[\"x\"], []]",
         "request 0: itls[0] is not a gap"},
        {"\"input_lens\": [10, 20], \"output_lens\": [3, 2], \"ttfts\": [0.1, 0.2], \"itls\": [[], []], "
         "\"start_times\": [5, -1]",
         "request 1: start_times entry -1 s is not a clock reading in [0, 1e+12] s"},
        /* no token from a request that succeeded was taken (bad-input campaign) */
        {"\"input_lens\": [10, 20], \"output_lens\": [3, 0], \"ttfts\": [0.1, 0.2], \"itls\": [[], []]",
         "request 1: output length 0 for a request that succeeded"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char doc[512];
        snprintf(doc, sizeof doc, "{%s, \"errors\": [\"\", \"\"]}", bad[i][0]);
        write_path(path, doc);
        cr_assert_eq(measured_read(path, &m, err, sizeof err), -1, "%s", doc);
        cr_assert(strstr(err, bad[i][1]), "%s", err);
    }
    /* more gaps than the output length counts are taken: vLLM's client counts a reply without
     * usage by tokenizing its text again, which can give fewer tokens than chunks streamed */
    write_path(path, "{\"input_lens\": [10], \"output_lens\": [2], \"ttfts\": [0.1], \"itls\": [[0.01, 0.02, 0.03]], "
                     "\"errors\": [\"\"]}");
    cr_assert_eq(measured_read(path, &m, err, sizeof err), 0, "%s", err);
    cr_assert_float_eq(m.reqs[0].finish_time - m.reqs[0].first_token_time, 0.06, 1e-12);
    measured_free(&m);
    /* an error that is not a string was read as none, the request as one that succeeded */
    const char *errors[] = {"[\"\", 5]", "[\"\", null]", "[\"\", [\"timeout\"]]"};
    for (size_t i = 0; i < sizeof errors / sizeof *errors; i++) {
        char doc[512];
        snprintf(doc, sizeof doc, "{\"input_lens\": [10, 20], \"output_lens\": [3, 2], \"ttfts\": [0.1, 0.2], "
                 "\"itls\": [[], []], \"errors\": %s}", errors[i]);
        write_path(path, doc);
        cr_assert_eq(measured_read(path, &m, err, sizeof err), -1, "%s", doc);
        cr_assert(strstr(err, "request 1: its \"errors\" entry is not a string"), "%s", err);
    }
    write_path(path, "{\"input_lens\": [10, 0], \"output_lens\": [3, 0], \"ttfts\": [0.1, 0], \"itls\": [[], []],"
                     " \"errors\": [\"\", \"refused\"]}");
    cr_assert_eq(measured_read(path, &m, err, sizeof err), 0, "a failed request may have sent nothing: %s", err);
    measured_free(&m);
    unlink(path);
}

/* A file vllm bench serve 0.33.0 wrote (tests/data/vllm-bench/README.md): its requests read
 * back to the summary numbers vLLM computed from them, and its absolute send times become
 * seconds from the first send. */
Test(load, a_real_vllm_bench_serve_result_reads_back_to_its_own_numbers)
{
    measured_run m;
    char err[512];
    const char *path = SERVESIM_SOURCE_DIR "/tests/data/vllm-bench/vllm-bench-0.33.0.json";
    cr_assert_eq(measured_read(path, &m, err, sizeof err), 0, "%s", err);
    cr_assert_eq(m.n, 12);
    cr_assert(m.have_arrivals && m.have_itl);
    cr_assert_float_eq(m.reqs[0].arrival_time, 0, 1e-12);
    cr_assert_float_eq(m.reqs[1].arrival_time, 15713.357422088 - 15713.228970984, 1e-9);
    double ttft = 0, itl = 0;
    int out = 0;
    for (size_t i = 0; i < m.n; i++) {
        cr_assert_eq(m.reqs[i].stop, STOP_LENGTH);
        ttft += m.reqs[i].first_token_time - m.reqs[i].arrival_time;
        out += m.reqs[i].output_len;
    }
    for (size_t i = 0; i < m.num_itl; i++) itl += m.itl[i];
    cr_assert_eq(out, 95, "total_output_tokens");
    cr_assert_eq(m.num_itl, 95 - 12, "a gap between each two tokens of a request");
    cr_assert_float_eq(ttft / (double)m.n * 1000, 6.800317749821261, 1e-9, "mean_ttft_ms");
    cr_assert_float_eq(itl / (double)m.num_itl * 1000, 0.9174045060783363, 1e-9, "mean_itl_ms");
    measured_free(&m);
}
