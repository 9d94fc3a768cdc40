/* Simulator: event order, exact times under a constant step cost, Little's law, determinism,
 * replays of measured step times, the API server in front (frontend.*). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "study/job.h"
#include "study/simjob.h"
#include "sim/heap.h"
#include "sim/replay.h"
#include "sim/draft_cost.h"
#include "sim/sim.h"
#include "sim/frontend.h"

#include <jansson.h>

Test(heap, pops_by_time_then_insertion_order)
{
    heap h;
    heap_init(&h);
    heap_node n[6];
    double times[6] = {3, 1, 2, 1, 3, 0.5};
    for (int i = 0; i < 6; i++) cr_assert(heap_push(&h, &n[i], times[i]));
    heap_remove(&h, &n[2]);
    int expect[] = {5, 1, 3, 0, 4};
    for (int i = 0; i < 5; i++) cr_assert_eq(heap_pop(&h), &n[expect[i]], "pop %d", i);
    cr_assert(heap_empty(&h));
    heap_free(&h);
}

static double constant_cost(const void *ctx, const sched_batch *b)
{
    (void)b;
    return *(const double *)ctx;
}

static sched_config small_sched(void)
{
    return (sched_config){.policy = POLICY_PAGED, .max_num_seqs = 64, .max_num_batched_tokens = 4096,
                          .block_size = 16, .num_blocks = 4096, .max_model_len = 4096};
}

static wl_config constant_workload(int n, double rate)
{
    wl_config c = {.num_requests = n, .arrival = ARRIVAL_POISSON, .rate = rate, .burstiness = 1,
                   .num_prefixes = 1, .trace_time_scale = 1, .vocab_size = 1000, .seed = 3};
    char err[200];
    cr_assert_eq(dist_parse("uniform:50:300", &c.prompt_len, err, sizeof err), 0);
    cr_assert_eq(dist_parse("uniform:20:200", &c.output_len, err, sizeof err), 0);
    return c;
}

/* One request of 100 prompt tokens and 11 out: the hand-computed examples' workload. */
static wl_config one_request(void)
{
    wl_config c = constant_workload(1, 1);
    char err[200];
    cr_assert_eq(dist_parse("fixed:100", &c.prompt_len, err, sizeof err), 0);
    cr_assert_eq(dist_parse("fixed:11", &c.output_len, err, sizeof err), 0);
    return c;
}

/* A trace of ROWS ("arrival_time,prompt_len,output_len" lines) written to PATH, replayed. */
static wl_config trace_workload(const char *path, const char *rows)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fprintf(f, "arrival_time,prompt_len,output_len\n%s", rows);
    fclose(f);
    wl_config c = constant_workload(0, 1);
    c.arrival = ARRIVAL_TRACE;
    c.trace_path = path;
    return c;
}

static int run_sim(const sim_options *o, wl_config *wc, summary *sum, sim_stats *st)
{
    workload w;
    char err[512];
    cr_assert_eq(wl_build(wc, &w, err, sizeof err), 0, "%s", err);
    met_acc *met = met_create();
    recorder rc;
    rec_init(&rc, met, NULL);
    int status = sim_run(o, &w, wc, &rc, st, err, sizeof err);
    cr_assert_eq(status, 0, "%s", err);
    slo_config slo = {0};
    int s = met_summarize(met, &slo, sum);
    met_free(met);
    wl_free(&w);
    return s;
}

/* run_sim over a trace of ROWS (see trace_workload), its file (one per test process, as
 * criterion runs tests in parallel) removed after. */
static int run_trace(const sim_options *o, const char *rows, summary *sum, sim_stats *st)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/servesim-test-sim-trace-%d.csv", (int)getpid());
    wl_config wc = trace_workload(path, rows);
    int s = run_sim(o, &wc, sum, st);
    unlink(path);
    return s;
}

/* The same under async scheduling: an engine with nothing in flight schedules a request at
 * once. */
Test(sim, one_request_with_constant_step_cost_has_exact_ttft_and_e2el)
{
    for (int async = 0; async < 2; async++) {
        double step = 0.025;
        sim_options o = {.sched = small_sched(), .cost = {constant_cost, &step}, .num_replicas = 1,
                         .async_scheduling = async};
        wl_config wc = one_request();
        summary sum;
        sim_stats st;
        cr_assert_eq(run_sim(&o, &wc, &sum, &st), 0);
        cr_assert_float_eq(sum.ttft_ms.mean, 25.0, 1e-9, "async %d", async);
        cr_assert_float_eq(sum.e2el_ms.mean, 11 * 25.0, 1e-9);
        cr_assert_float_eq(sum.tpot_ms.mean, 25.0, 1e-9);
        cr_assert_float_eq(sum.itl_ms.p99, 25.0, 1e-9);
        cr_assert_eq(st.steps, 11);
    }
}

/* vLLM's API server in front (frontend.*), by hand, with the example above: the request is
 * taken in for 4 ms before the scheduler sees it; each step's token reaches the client
 * 1 + 0.5 ms after the step ends (its step and its one chunk). The engine does not wait, so
 * steps still come every 25 ms: TTFT 4 + 25 + 1.5, E2E 4 + 11 x 25 + 1.5, gaps 25 ms. */
Test(frontend, one_request_by_hand)
{
    double step = 0.025;
    sim_options o = {.sched = small_sched(), .cost = {constant_cost, &step}, .num_replicas = 1,
                     .frontend = {0.004, 0.001, 0.0005}};
    wl_config wc = one_request();
    summary sum;
    sim_stats st;
    cr_assert_eq(run_sim(&o, &wc, &sum, &st), 0);
    cr_assert_float_eq(sum.ttft_ms.mean, 30.5, 1e-9);
    cr_assert_float_eq(sum.e2el_ms.mean, 280.5, 1e-9);
    cr_assert_float_eq(sum.tpot_ms.mean, 25.0, 1e-9);
    cr_assert_float_eq(sum.itl_ms.p99, 25.0, 1e-9);
    cr_assert_eq(st.steps, 11);
}

/* An API server slower than the engine paces what the client sees: steps of 1 ms, 2 ms of
 * API-server work each. Step k ends at k ms; its token is seen at 1 + 2k ms (the loop is
 * still on the one before), so the gaps are 2 ms and the last token (k = 11) comes at 23 ms,
 * though the engine was done at 11. */
Test(frontend, a_slower_api_server_paces_the_tokens)
{
    double step = 0.001;
    sim_options o = {.sched = small_sched(), .cost = {constant_cost, &step}, .num_replicas = 1,
                     .frontend = {.step_s = 0.002}};
    wl_config wc = one_request();
    summary sum;
    sim_stats st;
    cr_assert_eq(run_sim(&o, &wc, &sum, &st), 0);
    cr_assert_float_eq(sum.ttft_ms.mean, 3.0, 1e-9);
    cr_assert_float_eq(sum.itl_ms.mean, 2.0, 1e-9);
    cr_assert_float_eq(sum.e2el_ms.mean, 23.0, 1e-9);
    cr_assert_eq(st.steps, 11);
}

/* The vllm preset is the measurement's fit to two figures: a new measurement in
 * docs/data/vllm-frontend.json without the table (sim/frontend.h) following fails here. */
Test(frontend, the_vllm_preset_is_the_committed_measurement)
{
    json_error_t je;
    json_t *doc = json_load_file(SERVESIM_SOURCE_DIR "/docs/data/vllm-frontend.json", 0, &je);
    cr_assert_not_null(doc, "%s", je.text);
    const frontend_preset *p = frontend_preset_find("vllm");
    cr_assert_not_null(p);
    const struct { const char *key; double preset; } times[] = {
        {"request_ms", p->request_ms}, {"step_ms", p->step_ms}, {"token_ms", p->token_ms}};
    for (size_t i = 0; i < 3; i++) {
        double fit = json_number_value(json_object_get(json_object_get(doc, "fit"), times[i].key));
        cr_assert_gt(fit, 0, "%s", times[i].key);
        cr_assert_lt(fabs(times[i].preset / fit - 1), 0.03, "%s: preset %g, measured %g", times[i].key, times[i].preset, fit);
    }
    cr_assert_eq(json_array_size(json_object_get(doc, "runs")), 16);
    json_decref(doc);
}

/* Requests sent together wait for one another in the API server, which works in the order
 * work comes (as an asyncio loop runs the tasks that are ready before it polls again): three
 * at 0, 10 ms of intake each, one output token, 1 ms steps. They reach the scheduler at 10,
 * 20 and 30 ms and each prefills alone, but the first two tokens (steps ending at 11 and 21)
 * wait for the intakes that came before them: seen at 30, 30 and 31 ms. */
Test(frontend, requests_sent_together_queue_for_the_api_server)
{
    double step = 0.001;
    sim_options o = {.sched = small_sched(), .cost = {constant_cost, &step}, .num_replicas = 1,
                     .frontend = {.request_s = 0.010}};
    summary sum;
    sim_stats st;
    cr_assert_eq(run_trace(&o, "0,100,1\n0,100,1\n0,100,1\n", &sum, &st), 0);
    cr_assert_eq(sum.completed, 3);
    cr_assert_float_eq(sum.ttft_ms.min, 30.0, 1e-9);
    cr_assert_float_eq(sum.ttft_ms.mean, 91.0 / 3, 1e-9);
    cr_assert_float_eq(sum.ttft_ms.max, 31.0, 1e-9);
    cr_assert_eq(st.steps, 3);
}

/* Two API servers (vLLM's --api-server-count 2) take requests in turn: four at 0, 10 ms of
 * intake, one token, 1 ms steps. Requests 0 and 2 go to server 0, 1 and 3 to server 1: 0 and
 * 1 reach the scheduler at 10 and prefill together on [10, 11], but each server is taking in
 * its second request until 20, so their tokens are seen at 20; 2 and 3 prefill on [20, 21],
 * seen at 21. Mean TTFT 20.5 ms; with one server the intakes end at 10, 20, 30 and 40, and
 * every token waits for the last: 40, 40, 40 and 41 ms. */
Test(frontend, two_api_servers_take_requests_in_turn)
{
    const char *four = "0,100,1\n0,100,1\n0,100,1\n0,100,1\n";
    double step = 0.001;
    sim_options o = {.sched = small_sched(), .cost = {constant_cost, &step}, .num_replicas = 1,
                     .frontend = {.request_s = 0.010, .servers = 2}};
    summary sum;
    sim_stats st;
    cr_assert_eq(run_trace(&o, four, &sum, &st), 0);
    cr_assert_float_eq(sum.ttft_ms.min, 20.0, 1e-9);
    cr_assert_float_eq(sum.ttft_ms.mean, 20.5, 1e-9);
    cr_assert_float_eq(sum.ttft_ms.max, 21.0, 1e-9);
    cr_assert_eq(st.steps, 2);
    o.frontend.servers = 1;
    cr_assert_eq(run_trace(&o, four, &sum, &st), 0);
    cr_assert_float_eq(sum.ttft_ms.mean, 40.25, 1e-9);
    cr_assert_float_eq(sum.ttft_ms.max, 41.0, 1e-9);
}

/* A client's slot frees when it sees its last token, not when the engine produced it: four
 * requests at 0 capped at two in flight, 10 ms steps, 100 ms of API-server work a step, two
 * or three tokens each. Whatever each was sent, it was sent with at most one other in
 * flight (a slot freed at the engine's end let the third and fourth go out 100 ms early, with
 * the first two still streaming). */
Test(frontend, a_client_sends_again_when_it_has_seen_the_end)
{
    const char *path = "/tmp/servesim-test-frontend-cap.csv";
    double step = 0.010;
    sim_options o = {.sched = small_sched(), .cost = {constant_cost, &step}, .num_replicas = 1,
                     .frontend = {.step_s = 0.100}};
    wl_config wc = trace_workload(path, "0,100,2\n0,100,3\n0,100,2\n0,100,3\n");
    wc.max_concurrency = 2;
    workload w;
    char err[512];
    cr_assert_eq(wl_build(&wc, &w, err, sizeof err), 0, "%s", err);
    met_acc *met = met_create();
    met_keep_requests(met);
    recorder rc;
    rec_init(&rc, met, NULL);
    cr_assert_eq(sim_run(&o, &w, &wc, &rc, NULL, err, sizeof err), 0, "%s", err);
    size_t n;
    const req_record *rr = met_requests(met, &n);
    cr_assert_eq(n, 4);
    for (size_t i = 0; i < n; i++) {
        int in_flight = 0;
        for (size_t j = 0; j < n; j++)
            in_flight += rr[j].arrival_time <= rr[i].arrival_time && rr[i].arrival_time < rr[j].finish_time;
        cr_assert_leq(in_flight, 2, "request %zu sent at %g s with %d in flight", i, rr[i].arrival_time, in_flight);
    }
    met_free(met);
    wl_free(&w);
    unlink(path);
}

/* A run stopped with intakes and clients' ends still queued frees them (the sanitizer run
 * would report the leak): 70,000 one-token requests sent at once, each taking 1 ms of intake,
 * stopped from the progress report after 65,536 have ended. */
static void stop_now(void *ctx, size_t ended, size_t total)
{
    (void)ended;
    (void)total;
    *(volatile sig_atomic_t *)ctx = SIGINT;
}

Test(frontend, a_run_stopped_with_work_queued_in_the_api_server_frees_it)
{
    wl_config wc = constant_workload(70000, 1);
    char err[512];
    wc.arrival = ARRIVAL_ALL_AT_ONCE;
    cr_assert_eq(dist_parse("fixed:16", &wc.prompt_len, err, sizeof err), 0);
    cr_assert_eq(dist_parse("fixed:1", &wc.output_len, err, sizeof err), 0);
    workload w;
    cr_assert_eq(wl_build(&wc, &w, err, sizeof err), 0, "%s", err);
    double step = 0.0001;
    volatile sig_atomic_t stop = 0;
    sim_options o = {.sched = small_sched(), .cost = {constant_cost, &step}, .num_replicas = 1,
                     .frontend = {0.001, 0.0005, 0.0001}, .stop = &stop, .progress = stop_now,
                     .progress_ctx = (void *)&stop};
    met_acc *met = met_create();
    recorder rc;
    rec_init(&rc, met, NULL);
    cr_assert_eq(sim_run(&o, &w, &wc, &rc, NULL, err, sizeof err), -1);
    cr_assert_str_eq(err, "interrupted");
    met_free(met);
    wl_free(&w);
}

/* A trace of ROWS (N requests, the first, A, at 0 to an idle engine), steps of 1 s, simulated
 * with or without async scheduling: every request ended, A after one step, the largest and
 * mean TTFT as given. */
static void trace_ttfts(bool async, const char *rows, int n, double max_ms, double mean_ms)
{
    double step = 1.0;
    sim_options o = {.sched = small_sched(), .cost = {constant_cost, &step}, .num_replicas = 1,
                     .async_scheduling = async};
    summary sum;
    sim_stats st;
    cr_assert_eq(run_trace(&o, rows, &sum, &st), 0);
    cr_assert_eq(sum.completed, n);
    cr_assert_float_eq(sum.ttft_ms.min, 1000.0, 1e-9, "A, to an idle engine, went at once");
    cr_assert_float_eq(sum.ttft_ms.max, max_ms, 1e-9, "max TTFT %g ms", sum.ttft_ms.max);
    cr_assert_float_eq(sum.ttft_ms.mean, mean_ms, 1e-9);
}

/* Requests arriving at the instant a step ends join the next step. Step cost 1 s, vLLM's
 * prefill-first order. A arrives at 0 (prefill [0,1], decodes [1,2], [2,3]...), B at 1.5
 * while A decodes, C at 2.0, the end of A's second step. C's arrival is armed when B's is
 * handled, after A's step end was queued for 2.0, so the step end pops first: a loop that
 * started the next step there would prefill B alone on [2,3] and C on [3,4] (TTFT 2 s).
 * Handled together, B and C prefill on [2,3]: TTFTs 1, 1.5 and 1 s, mean 3.5/3. */
Test(sim, a_request_arriving_as_a_step_ends_joins_the_next_step)
{
    trace_ttfts(false, "0,100,6\n1.5,100,2\n2.0,100,2\n", 3, 1500.0, 3500.0 / 3); /* C waited a step */
}

/* The same trace under vLLM's async scheduling (sim_options.async_scheduling), by hand. The
 * engine schedules step N + 1 as N starts and takes in arrivals only as N ends, for N + 2.
 * A comes to an idle engine: prefilled on [0,1], TTFT 1 s. B comes at 1.5, during step 1
 * ([1,2], whose successor [2,3] is already scheduled): first seen at 2, prefilled on [3,4],
 * TTFT 2.5 s. C comes at 2.0, as step 1 ends, after the engine has scheduled [3,4] too:
 * prefilled on [4,5], TTFT 3 s. Mean 6.5/3 s, against 3.5/3 synchronously. */
Test(sim, async_scheduling_takes_a_request_a_step_later_by_hand)
{
    trace_ttfts(true, "0,100,6\n1.5,100,2\n2.0,100,2\n", 3, 3000.0, 6500.0 / 3); /* C waited two steps */
}

/* Under load, every request still ends, and each waits at most about one step more for its
 * first token: arrivals are held back one step, and a constant-cost engine serves the same
 * tokens in the same steps. */
Test(sim, async_scheduling_under_load_delays_first_tokens_by_up_to_a_step)
{
    double step = 0.02;
    wl_config wc = constant_workload(5000, 40);
    sim_options o = {.sched = small_sched(), .cost = {constant_cost, &step}, .num_replicas = 1};
    summary sync, async;
    sim_stats st;
    cr_assert_eq(run_sim(&o, &wc, &sync, &st), 0);
    o.async_scheduling = true;
    cr_assert_eq(run_sim(&o, &wc, &async, &st), 0);
    cr_assert_eq(async.completed, 5000);
    double extra = async.ttft_ms.mean - sync.ttft_ms.mean;
    cr_assert(extra > 0.5 * step * 1e3 && extra < 1.5 * step * 1e3, "mean TTFT %g ms sync, %g async",
              sync.ttft_ms.mean, async.ttft_ms.mean);
    cr_assert_float_eq(async.tpot_ms.mean, sync.tpot_ms.mean, 0.05 * sync.tpot_ms.mean);
}

/* Requests that reach an idle engine together go together. Two closed-loop clients, 100-token
 * prompts, 5 tokens out, steps of 1 s, no API server: each wave's two requests end together
 * at a step's end and both clients send again at that instant, when nothing else runs; the
 * engine takes both at once, as vLLM drains its whole input queue. Every TTFT is one step.
 * (Asked whether the scheduler was idle request by request, the first made it busy and the
 * second waited two steps: TTFT 3 s, and the waves fell out of step.) */
Test(sim, async_scheduling_keeps_requests_that_come_together_together)
{
    double step = 1.0;
    sim_options o = {.sched = small_sched(), .cost = {constant_cost, &step}, .num_replicas = 1,
                     .async_scheduling = true};
    wl_config wc = constant_workload(6, 1);
    wc.arrival = ARRIVAL_CLOSED;
    wc.concurrency = 2;
    char err[200];
    cr_assert_eq(dist_parse("fixed:100", &wc.prompt_len, err, sizeof err), 0);
    cr_assert_eq(dist_parse("fixed:5", &wc.output_len, err, sizeof err), 0);
    summary sum;
    sim_stats st;
    cr_assert_eq(run_sim(&o, &wc, &sum, &st), 0);
    cr_assert_eq(sum.completed, 6);
    cr_assert_float_eq(sum.ttft_ms.max, 1000.0, 1e-9, "max TTFT %g ms", sum.ttft_ms.max);
    cr_assert_eq(st.steps, 15, "three waves of one prefill and four decodes");
}

/* A request whose arrival time is a step's end counts as coming as the step ends, whichever
 * event the simulator handles first. B's arrival at 2.0 is queued at 0, before A's step
 * [1,2] is: it pops while that step is still in flight. The engine has A to run, so B joins
 * the step after the next: prefilled on [4,5], TTFT 3 s (mean with A's 1 s: 2 s). */
Test(sim, async_scheduling_an_arrival_at_a_step_end_counts_as_coming_at_the_end)
{
    trace_ttfts(true, "0,100,6\n2.0,100,2\n", 2, 3000.0, 2000.0);
}

/* Only the paged policy is vLLM's scheduler: the older policies take arrivals as a
 * synchronous engine does, async scheduling or not (a static batch would otherwise hold a
 * request back for a whole batch). */
Test(sim, async_scheduling_holds_requests_back_under_the_paged_policy_only)
{
    double step = 1.0;
    const char *rows = "0,100,6\n1.5,100,2\n2.0,100,2\n";
    for (sched_policy p = 0; p < POLICY_PAGED; p++) {
        sim_options o = {.sched = small_sched(), .cost = {constant_cost, &step}, .num_replicas = 1};
        o.sched.policy = p;
        if (p == POLICY_STATIC) o.sched.max_num_batched_tokens = 65536;
        summary sync, async;
        sim_stats st;
        cr_assert_eq(run_trace(&o, rows, &sync, &st), 0);
        o.async_scheduling = true;
        cr_assert_eq(run_trace(&o, rows, &async, &st), 0);
        cr_assert_float_eq(async.ttft_ms.mean, sync.ttft_ms.mean, 1e-9, "%s", sched_policy_name(p));
        cr_assert_float_eq(async.e2el_ms.mean, sync.e2el_ms.mean, 1e-9, "%s", sched_policy_name(p));
    }
}

/* Requests held back for a step still count for the router: two replicas, steps of 1 s.
 * A and B at 0 go to replicas 0 and 1 (A waiting makes 0 the busier). C and D come at 0.5,
 * while both run a step: C goes to replica 0 (a tie), where it waits for the step after the
 * next; D must see C there and go to replica 1. A router blind to held requests sent both
 * to replica 0, and a 4-replica plan lost a quarter of its capacity. */
Test(sim, async_scheduling_held_requests_count_for_the_router)
{
    double step = 1.0;
    int64_t per_replica[2] = {0};
    sim_options o = {.sched = small_sched(), .cost = {constant_cost, &step}, .num_replicas = 2,
                     .async_scheduling = true, .replica_requests = per_replica};
    summary sum;
    sim_stats st;
    cr_assert_eq(run_trace(&o, "0,100,4\n0,100,4\n0.5,100,2\n0.5,100,2\n", &sum, &st), 0);
    cr_assert_eq(sum.completed, 4);
    cr_assert(per_replica[0] == 2 && per_replica[1] == 2, "requests per replica: %lld, %lld",
              (long long)per_replica[0], (long long)per_replica[1]);
    /* C and D: seen at 1, prefilled on [2,3] on their replicas: TTFT 2.5 s */
    cr_assert_float_eq(sum.ttft_ms.max, 2500.0, 1e-9);
}

/* L = lambda W: the time-average number of requests in the system equals the arrival rate
 * times the mean time in the system. Steps see the queue at their start; idle time holds
 * no request, so the busy-time average is scaled by the busy fraction. */
Test(sim, littles_law_holds_in_steady_state)
{
    double step = 0.02;
    sim_options o = {.sched = small_sched(), .cost = {constant_cost, &step}, .num_replicas = 1};
    wl_config wc = constant_workload(20000, 40);
    summary sum;
    sim_stats st;
    cr_assert_eq(run_sim(&o, &wc, &sum, &st), 0);
    double busy = sum.num_steps * sum.mean_step_time_ms / 1000;
    double in_system = (sum.mean_waiting + sum.mean_running) * busy / sum.duration;
    double lambda_w = sum.request_throughput * sum.e2el_ms.mean / 1000;
    cr_assert_gt(in_system, 5, "the test needs a loaded system (got %.2f)", in_system);
    cr_assert_lt(fabs(in_system - lambda_w) / lambda_w, 0.03, "L = %.3f, lambda W = %.3f", in_system, lambda_w);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    rewind(f);
    char *buf = malloc(*len + 1);
    cr_assert_eq(fread(buf, 1, *len, f), *len);
    fclose(f);
    return buf;
}

Test(sim, same_scenario_and_seed_give_byte_identical_files)
{
    scenario sc;
    scenario_defaults(&sc);
    char err[512];
    cr_assert_eq(scenario_set(&sc, "workload.num_requests=300", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "scheduler.prefix_caching=on", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "workload.shared_prefix_len=256", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "workload.prefix_fraction=0.5", err, sizeof err), 0);
    const char *dirs[2] = {"/tmp/servesim-test-det-a", "/tmp/servesim-test-det-b"};
    cr_assert_eq(system("rm -rf /tmp/servesim-test-det-a /tmp/servesim-test-det-b"), 0);
    for (int i = 0; i < 2; i++) {
        simjob j = {.sc = &sc, .out_dir = dirs[i]};
        cr_assert_eq(simjob_run(&j, err, sizeof err), EXIT_OK, "%s", err);
        cr_assert(j.have_summary);
        cr_assert_gt(j.sum.prefix_hits, 0);
    }
    const char *files[] = {"summary.json", "requests.csv", "steps.csv"};
    for (int f = 0; f < 3; f++) {
        char pa[300], pb[300];
        snprintf(pa, sizeof pa, "%s/%s", dirs[0], files[f]);
        snprintf(pb, sizeof pb, "%s/%s", dirs[1], files[f]);
        size_t la, lb;
        char *a = slurp(pa, &la), *b = slurp(pb, &lb);
        cr_assert_eq(la, lb, "%s differs in length", files[f]);
        cr_assert_eq(memcmp(a, b, la), 0, "%s differs", files[f]);
        free(a);
        free(b);
    }
    scenario other = sc;
    cr_assert_eq(scenario_set(&other, "run.seed=9", err, sizeof err), 0);
    simjob j = {.sc = &other};
    cr_assert_eq(simjob_run(&j, err, sizeof err), EXIT_OK);
    simjob again = {.sc = &sc};
    cr_assert_eq(simjob_run(&again, err, sizeof err), EXIT_OK);
    cr_assert_neq(j.sum.ttft_ms.mean, again.sum.ttft_ms.mean, "another seed draws other requests");
}

Test(sim, every_request_of_the_azure_conversation_trace_finishes)
{
    scenario sc;
    scenario_defaults(&sc);
    char err[512];
    const char *sets[] = {"workload.arrival=trace", "workload.trace=" SERVESIM_SOURCE_DIR "/traces/azure_llm_2023_conv.csv",
                          "workload.num_requests=100000000", "scheduler.chunked_prefill=on",
                          /* its longest conversations pass llama-3-8b's 8,192 positions */
                          "model.max_position=16384", "scheduler.max_model_len=16384"};
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
        cr_assert_eq(scenario_set(&sc, sets[i], err, sizeof err), 0, "%s", err);
    simjob j = {.sc = &sc};
    cr_assert_eq(simjob_run(&j, err, sizeof err), EXIT_OK, "%s", err);
    cr_assert_eq(j.sum.completed, 19366);
    cr_assert_eq(j.sum.rejected, 0);
    cr_assert_eq(j.sum.total_output_tokens, 4088665);
}

/* A cost that varies with the batch, so a replay cannot match by accident. */
static double linear_cost(const void *ctx, const sched_batch *b)
{
    (void)ctx;
    return 1e-3 + 2e-5 * b->num_batched_tokens + 1e-4 * b->num_decode_seqs;
}

typedef struct recorded {
    met_acc *met;
    recorder rc;
} recorded;

static void record_run(const sim_options *o, wl_config *wc, recorded *out)
{
    workload w;
    char err[512];
    cr_assert_eq(wl_build(wc, &w, err, sizeof err), 0, "%s", err);
    out->met = met_create();
    met_keep_requests(out->met);
    rec_init(&out->rc, out->met, NULL);
    out->rc.keep_steps = true;
    cr_assert_eq(sim_run(o, &w, wc, &out->rc, NULL, err, sizeof err), 0, "%s", err);
    wl_free(&w);
}

static void recorded_free(recorded *r)
{
    rec_free(&r->rc);
    met_free(r->met);
}

/* A source run with the engine's habits: after each step it spends GAP seconds (delivering
 * tokens, keeping records, or descheduled on a loaded machine) before the next may start,
 * and requests that arrive meanwhile join that next step. */
typedef struct gapped {
    double gap, now, next_ready;
} gapped;

static double gapped_step(const void *ctx, const sched_batch *b)
{
    gapped *g = (gapped *)ctx;
    double dt = linear_cost(NULL, b);
    g->next_ready = g->now + dt + g->gap;
    return dt;
}

static double gapped_ready(const void *ctx) { return ((const gapped *)ctx)->next_ready; }

/* Replaying a run's own step times reproduces it exactly: every step's start and end, every
 * request's first token and finish, although 3 ms pass between steps and about one arrival
 * in twenty lands in such a gap (a replay that ran each step on to the next one's start
 * stamped tokens late; one that started at once scheduled those arrivals a step early). */
Test(replay, a_replay_of_measured_step_times_reproduces_the_run)
{
    gapped g = {.gap = 3e-3, .next_ready = -INFINITY};
    sim_options o = {.sched = small_sched(), .num_replicas = 1,
                     .cost = {.step_time = gapped_step, .ctx = &g, .now = &g.now, .ready_time = gapped_ready}};
    wl_config wc = constant_workload(300, 20);
    recorded src, rep;
    record_run(&o, &wc, &src);
    size_t gaps = 0;
    for (size_t i = 0; i + 1 < src.rc.num_steps; i++)
        gaps += fabs(src.rc.steps[i + 1].start_time - src.rc.steps[i].end_time - g.gap) < 1e-12;
    cr_assert_gt(gaps, 1000, "the run needs busy stretches (got %zu gaps of 3 ms)", gaps);
    size_t n, m, in_gap = 0;
    const req_record *a = met_requests(src.met, &n);
    for (size_t i = 0, k = 0; i < n; i++) {
        while (k + 1 < src.rc.num_steps && src.rc.steps[k + 1].start_time < a[i].arrival_time) k++;
        in_gap += a[i].arrival_time > src.rc.steps[k].end_time && k + 1 < src.rc.num_steps &&
                  a[i].arrival_time <= src.rc.steps[k + 1].start_time;
    }
    cr_assert_geq(in_gap, 5, "the run needs arrivals between steps (got %zu)", in_gap);

    replay_cost rp;
    double never = 1;
    replay_init(&rp, src.rc.steps, src.rc.num_steps, (step_cost){.step_time = constant_cost, .ctx = &never});
    o.cost = replay_step_cost(&rp);
    record_run(&o, &wc, &rep);
    cr_assert_eq(rp.first_mismatch, -1, "schedules parted at step %lld", (long long)rp.first_mismatch);
    cr_assert_eq(rep.rc.num_steps, src.rc.num_steps);
    for (size_t i = 0; i < src.rc.num_steps; i++) {
        cr_assert_float_eq(rep.rc.steps[i].start_time, src.rc.steps[i].start_time, 1e-12, "step %zu", i);
        cr_assert_float_eq(rep.rc.steps[i].end_time, src.rc.steps[i].end_time, 1e-12, "step %zu", i);
    }
    const req_record *b = met_requests(rep.met, &m);
    cr_assert_eq(n, m);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(a[i].request_id, b[i].request_id);
        cr_assert_float_eq(a[i].first_token_time, b[i].first_token_time, 1e-12, "request %zu", i);
        cr_assert_float_eq(a[i].finish_time, b[i].finish_time, 1e-12, "request %zu", i);
    }
    recorded_free(&src);
    recorded_free(&rep);
}

/* Steps of another schedule: the replay notices the first batch that differs and prices
 * everything from there with its fallback. */
Test(replay, a_different_schedule_is_noticed_and_priced_by_the_fallback)
{
    sim_options o = {.sched = small_sched(), .cost = {linear_cost, NULL}, .num_replicas = 1};
    wl_config wc = constant_workload(100, 20);
    recorded src, rep;
    record_run(&o, &wc, &src);
    o.sched.chunked_prefill = true;
    o.sched.max_num_batched_tokens = 64; /* other batches from the first prompt on */
    replay_cost rp;
    double fallback = 0.005;
    replay_init(&rp, src.rc.steps, src.rc.num_steps, (step_cost){.step_time = constant_cost, .ctx = &fallback});
    o.cost = replay_step_cost(&rp);
    record_run(&o, &wc, &rep);
    cr_assert_eq(rp.first_mismatch, 0);
    for (size_t i = 0; i < rep.rc.num_steps; i++)
        cr_assert_float_eq(rep.rc.steps[i].end_time - rep.rc.steps[i].start_time, fallback, 1e-12, "step %zu", i);
    recorded_free(&src);
    recorded_free(&rep);
}

Test(sim, a_set_stop_flag_ends_the_run_as_interrupted)
{
    scenario sc;
    scenario_defaults(&sc);
    scenario_resolved r;
    char err[512];
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    workload w;
    cr_assert_eq(wl_build(&r.workload, &w, err, sizeof err), 0, "%s", err);
    job_cost cost;
    cr_assert_eq(job_cost_init(&cost, &r, err, sizeof err), 0, "%s", err);
    volatile sig_atomic_t stop = SIGINT;
    sim_options o = {.sched = r.sched, .cost = job_cost_fn(&cost), .num_replicas = 1, .stop = &stop};
    met_acc *met = met_create();
    recorder rc;
    rec_init(&rc, met, NULL);
    cr_assert_eq(sim_run(&o, &w, &r.workload, &rc, NULL, err, sizeof err), -1);
    cr_assert_str_eq(err, "interrupted");
    met_free(met);
    job_cost_free(&cost);
    wl_free(&w);
}

/* ---- replicas and routers ---- */

/* A list workload by hand: request i at ARRIVAL[i] with prefix PREFIX[i] (-1: none), 100
 * prompt tokens of which the first 64 are the prefix, 2 output tokens. */
static workload hand_workload(int n, const double *arrival, const int *prefix)
{
    workload w = {.reqs = calloc((size_t)n, sizeof(wl_request)), .n = (size_t)n, .vocab_size = 1000,
                  .prefix_seed = 99, .cfg = {.arrival = ARRIVAL_TRACE, .vocab_size = 1000}};
    for (int i = 0; i < n; i++)
        w.reqs[i] = (wl_request){.id = i, .arrival_time = arrival[i], .prompt_len = 100, .output_len = 2,
                                 .prefix_id = prefix[i], .prefix_len = prefix[i] >= 0 ? 64 : 0,
                                 .token_seed = 1000 + (uint64_t)i};
    return w;
}

static void route_run(router_kind k, int replicas, workload *w, bool prefix_caching, int64_t *counts, summary *sum)
{
    sim_options o = {.sched = small_sched(), .cost = {constant_cost, &(double){0.01}}, .num_replicas = replicas,
                     .router = k, .replica_requests = counts};
    o.sched.prefix_caching = prefix_caching;
    met_acc *met = met_create();
    recorder rc;
    rec_init(&rc, met, NULL);
    char err[512];
    cr_assert_eq(sim_run(&o, w, &w->cfg, &rc, NULL, err, sizeof err), 0, "%s", err);
    cr_assert_eq(met_summarize(met, NULL, sum), 0);
    met_free(met);
}

Test(router, the_table_names_each_router_once)
{
    cr_assert_str_eq(ROUTER_CHOICES, "least_outstanding|round_robin|least_kv|prefix_aware");
    const char *names[] = {"least_outstanding", "round_robin", "least_kv", "prefix_aware"};
    for (int k = 0; k < 4; k++) {
        router_kind back;
        cr_assert_str_eq(router_name((router_kind)k), names[k]);
        cr_assert_eq(router_parse(names[k], &back), 0);
        cr_assert_eq(back, k);
        cr_assert_gt(strlen(router_help((router_kind)k)), 10);
    }
    router_kind x;
    cr_assert_eq(router_parse("random", &x), -1);
}

/* Seven requests at once over three replicas. */
Test(router, a_burst_by_hand)
{
    double at[7] = {0};
    int none[7] = {-1, -1, -1, -1, -1, -1, -1};
    workload w = hand_workload(7, at, none);
    int64_t rr[3] = {0}, lo[3] = {0}, kv[3] = {0};
    summary s;
    route_run(ROUTER_ROUND_ROBIN, 3, &w, false, rr, &s);
    cr_assert(rr[0] == 3 && rr[1] == 2 && rr[2] == 2, "round robin: %lld %lld %lld", (long long)rr[0], (long long)rr[1], (long long)rr[2]);
    cr_assert_eq(s.completed, 7, "every request served once");
    /* all waiting at once: 0, 1, 2, then each again in index order as loads tie */
    route_run(ROUTER_LEAST_OUTSTANDING, 3, &w, false, lo, &s);
    cr_assert(lo[0] == 3 && lo[1] == 2 && lo[2] == 2, "least outstanding: %lld %lld %lld", (long long)lo[0], (long long)lo[1], (long long)lo[2]);
    /* each waiting request books 7 blocks (100 tokens of 16): the queue counts */
    route_run(ROUTER_LEAST_KV, 3, &w, false, kv, &s);
    cr_assert(kv[0] == 3 && kv[1] == 2 && kv[2] == 2, "least KV: %lld %lld %lld", (long long)kv[0], (long long)kv[1], (long long)kv[2]);
    free(w.reqs);
}

/* Two prefixes. A and B arrive together (least loaded: A to replica 0, B to 1); later, one
 * request at a time, each A goes where A is cached and each B where B is, where least
 * outstanding sends every idle-time request to replica 0. */
Test(router, prefix_aware_follows_the_cache)
{
    double at[10] = {0, 0, 1, 2, 3, 4, 5, 6, 7, 8};
    int px[10] = {0, 1, 0, 1, 1, 0, 1, 0, 0, 1};
    workload w = hand_workload(10, at, px);
    int64_t pa[2] = {0}, lo[2] = {0};
    summary sp, sl;
    route_run(ROUTER_PREFIX_AWARE, 2, &w, true, pa, &sp);
    cr_assert(pa[0] == 5 && pa[1] == 5, "prefix aware: %lld %lld", (long long)pa[0], (long long)pa[1]);
    route_run(ROUTER_LEAST_OUTSTANDING, 2, &w, true, lo, &sl);
    cr_assert(lo[0] == 9 && lo[1] == 1, "least outstanding: %lld %lld", (long long)lo[0], (long long)lo[1]);
    /* 8 later requests find their 4 prefix blocks (64 tokens) cached: 8 x 64 hit tokens */
    cr_assert_eq(sp.prefix_hits, 8 * 64, "prefix hits %lld", (long long)sp.prefix_hits);
    cr_assert_eq(sp.completed, 10);
    free(w.reqs);
}

/* Replicas share nothing but the arrival stream: behind round robin, each one serves its
 * third of the requests exactly as a simulator of that third alone does, step for step.
 * (Catches a replica left idle with work because the simulator did not look at it again.) */
static void run_list(const sim_options *o, workload *w, met_acc **met)
{
    *met = met_create();
    met_keep_requests(*met);
    recorder rc;
    rec_init(&rc, *met, NULL);
    char err[512];
    cr_assert_eq(sim_run(o, w, &w->cfg, &rc, NULL, err, sizeof err), 0, "%s", err);
}

Test(router, each_replica_behind_round_robin_runs_as_it_would_alone)
{
    wl_config wc = constant_workload(900, 90);
    workload all;
    char err[512];
    cr_assert_eq(wl_build(&wc, &all, err, sizeof err), 0, "%s", err);
    all.cfg.arrival = ARRIVAL_TRACE; /* the list as it is */
    sim_options o = {.sched = small_sched(), .cost = {linear_cost, NULL}, .num_replicas = 3,
                     .router = ROUTER_ROUND_ROBIN};
    met_acc *together;
    run_list(&o, &all, &together);
    size_t n;
    const req_record *t = met_requests(together, &n);
    cr_assert_eq(n, 900);
    o.num_replicas = 1;
    size_t compared = 0, overlapped = 0;
    for (int r = 0; r < 3; r++) {
        workload part = all;
        part.reqs = calloc(300, sizeof *part.reqs);
        part.n = 0;
        for (size_t i = (size_t)r; i < all.n; i += 3) part.reqs[part.n++] = all.reqs[i];
        met_acc *alone;
        run_list(&o, &part, &alone);
        size_t m;
        const req_record *a = met_requests(alone, &m);
        cr_assert_eq(m, 300);
        for (size_t i = 0; i < m; i++) {
            const req_record *x = NULL;
            for (size_t k = 0; k < n && !x; k++)
                if (t[k].request_id == a[i].request_id) x = &t[k];
            cr_assert_not_null(x);
            cr_assert_float_eq(x->first_token_time, a[i].first_token_time, 1e-12, "request %lld", (long long)a[i].request_id);
            cr_assert_float_eq(x->finish_time, a[i].finish_time, 1e-12, "request %lld", (long long)a[i].request_id);
            compared++;
            bool shared = false; /* it arrived while the replica served another */
            for (size_t k = 0; k < m && !shared; k++)
                shared = a[k].arrival_time < a[i].arrival_time && a[k].finish_time > a[i].arrival_time;
            overlapped += shared;
        }
        met_free(alone);
        free(part.reqs);
    }
    cr_assert_eq(compared, 900);
    cr_assert_gt(overlapped, 600, "the replicas must be busy for this to test anything (%zu arrived at a busy one)", overlapped);
    met_free(together);
    wl_free(&all);
}

/* Disaggregated serving, isolated requests (each ends long before the next arrives): the
 * first token is the prefill side's, as aggregated; every later token comes exactly one KV
 * transfer later (its latency plus the prompt's tokens at the per-token price), since the
 * decode side is idle when the KV lands and decode steps cost what they cost aggregated.
 * With a free transfer the runs are the same. Each request goes once through a prefill and
 * once through a decode instance. */
static void disagg_run_steps(workload *w, int prefill, int decode, double latency, double per_token, met_acc **met,
                             int64_t *counts, sim_stats *st, recorder *keep, sim_instance_stats *inst)
{
    sim_options o = {.sched = small_sched(), .cost = {linear_cost, NULL}, .num_replicas = prefill + decode,
                     .num_prefill = prefill, .kv_latency_s = latency, .kv_s_per_token = per_token,
                     .replica_requests = counts, .instances = inst};
    *met = met_create();
    met_keep_requests(*met);
    recorder rc;
    rec_init(&rc, *met, NULL);
    rc.keep_steps = keep != NULL;
    char err[512];
    cr_assert_eq(sim_run(&o, w, &w->cfg, &rc, st, err, sizeof err), 0, "%s", err);
    if (keep) *keep = rc;
}

static void disagg_run(workload *w, int prefill, int decode, double latency, double per_token, met_acc **met,
                       int64_t *counts, sim_stats *st)
{
    disagg_run_steps(w, prefill, decode, latency, per_token, met, counts, st, NULL, NULL);
}

Test(disagg, isolated_requests_finish_one_transfer_later)
{
    wl_config wc = constant_workload(40, 0.5); /* a request every 2 s on average; each takes < 0.3 s */
    wc.arrival = ARRIVAL_CONSTANT;
    workload w;
    char err[512];
    cr_assert_eq(wl_build(&wc, &w, err, sizeof err), 0, "%s", err);
    w.cfg.arrival = ARRIVAL_TRACE;
    met_acc *agg, *free_kv, *paid;
    int64_t counts[2] = {0}, c2[2] = {0};
    sim_stats st;
    disagg_run(&w, 0, 1, 0, 0, &agg, NULL, &st);
    disagg_run(&w, 1, 1, 0, 0, &free_kv, counts, &st);
    cr_assert_eq(counts[0], 40, "every request prefilled once");
    cr_assert_eq(counts[1], 40, "and decoded once");
    cr_assert_eq(st.kv_transfers, 40);
    disagg_run(&w, 1, 1, 2e-3, 1e-5, &paid, c2, &st);
    size_t n, m, k;
    const req_record *a = met_requests(agg, &n), *f = met_requests(free_kv, &m), *p = met_requests(paid, &k);
    cr_assert(n == 40 && m == 40 && k == 40);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(a[i].request_id, f[i].request_id);
        cr_assert_eq(a[i].request_id, p[i].request_id);
        cr_assert_eq(p[i].stop, STOP_LENGTH);
        cr_assert_float_eq(f[i].first_token_time, a[i].first_token_time, 1e-12);
        cr_assert_float_eq(f[i].finish_time, a[i].finish_time, 1e-12, "a free transfer changes nothing");
        cr_assert_float_eq(p[i].first_token_time, a[i].first_token_time, 1e-12);
        double transfer = 2e-3 + 1e-5 * a[i].prompt_len;
        cr_assert_float_eq(p[i].finish_time - a[i].finish_time, transfer, 1e-12, "request %zu", i);
    }
    /* the mean transfer is the mean of 2 ms + 10 us a prompt token; nothing waits to decode */
    double want = 0;
    for (size_t i = 0; i < n; i++) want += 2e-3 + 1e-5 * a[i].prompt_len;
    cr_assert_float_eq(st.kv_transfer_mean_s, want / 40, 1e-12);
    cr_assert_float_eq(st.decode_wait_mean_s, 0, 1e-12);
    met_free(agg);
    met_free(free_kv);
    met_free(paid);
    wl_free(&w);
}

/* One link an instance: two 100-token prompts prefilled in one step hand off together, and
 * the second's KV follows the first's: 1 ms + 100 x 10 us = 2 ms, then 1 ms + 200 x 10 us =
 * 3 ms (the fixed cost is each transfer's own). Mean 2.5 ms. */
Test(disagg, transfers_from_one_instance_queue_on_its_link)
{
    double at[2] = {0, 0};
    int none[2] = {-1, -1};
    workload w = hand_workload(2, at, none);
    met_acc *met;
    sim_stats st;
    disagg_run(&w, 1, 1, 1e-3, 1e-5, &met, NULL, &st);
    cr_assert_eq(st.kv_transfers, 2);
    cr_assert_float_eq(st.kv_transfer_mean_s, 2.5e-3, 1e-12, "got %g", st.kv_transfer_mean_s);
    cr_assert_float_eq(st.kv_transfer_p99_s, 3e-3, 1e-12);
    met_free(met);
    free(w.reqs);
}

/* Under load: two prefill and three decode instances, every request accounted for once on
 * each side, all finished at their length; a one-token request never leaves its prefill
 * instance. A decode instance runs every running sequence in every step: arriving KV joins
 * the decodes (a prefill-first decode side once gave each arrival a step of its own, and
 * TPOT of a 70B 3:1 layout read 50 ms where its steps cost 30). */
Test(disagg, every_request_through_one_prefill_and_one_decode_instance)
{
    wl_config wc = constant_workload(600, 120);
    workload w;
    char err[512];
    cr_assert_eq(wl_build(&wc, &w, err, sizeof err), 0, "%s", err);
    w.reqs[7].output_len = 1;
    w.cfg.arrival = ARRIVAL_TRACE;
    met_acc *met;
    int64_t counts[5] = {0};
    sim_stats st;
    recorder rc;
    sim_instance_stats inst[5] = {{0}};
    disagg_run_steps(&w, 2, 3, 1e-4, 1e-6, &met, counts, &st, &rc, inst);
    /* each instance's share adds up to the run: steps, and tokens (one a request on the
     * prefill side) */
    int64_t steps = 0, tokens = 0, wanted = 0;
    for (int i = 0; i < 5; i++) {
        steps += inst[i].steps;
        tokens += inst[i].output_tokens;
        cr_assert(inst[i].busy_s > 0 && inst[i].busy_s <= st.end_time, "instance %d busy %g s of %g", i, inst[i].busy_s,
                  st.end_time);
    }
    for (size_t i = 0; i < w.n; i++) wanted += w.reqs[i].output_len;
    cr_assert_eq(steps, st.steps);
    cr_assert_eq(tokens, wanted);
    cr_assert_eq(inst[0].output_tokens + inst[1].output_tokens, 600, "the prefill side emits first tokens only");
    size_t decode_steps = 0;
    for (size_t i = 0; i < rc.num_steps; i++) {
        const step_record *sr = &rc.steps[i];
        if (sr->num_prefill_tokens > 0) { /* a prefill instance's */
            cr_assert(sr->instance == 0 || sr->instance == 1, "step %zu: instance %d", i, sr->instance);
            continue;
        }
        cr_assert(sr->instance >= 2 && sr->instance <= 4, "step %zu: instance %d", i, sr->instance);
        decode_steps++;
        cr_assert_eq(sr->num_decode_seqs, sr->running, "step %zu leaves %d of %d running sequences out", i,
                     sr->running - sr->num_decode_seqs, sr->running);
    }
    cr_assert_gt(decode_steps, 1000);
    rec_free(&rc);
    cr_assert_eq(counts[0] + counts[1], 600);
    cr_assert_eq(counts[2] + counts[3] + counts[4], 599);
    cr_assert_eq(st.kv_transfers, 599);
    cr_assert_gt(st.decode_wait_p99_s, 0, "under load some wait for the decode side");
    size_t n;
    const req_record *r = met_requests(met, &n);
    cr_assert_eq(n, 600);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(r[i].stop, STOP_LENGTH);
        cr_assert_eq(r[i].output_len, w.reqs[r[i].request_id].output_len);
    }
    met_free(met);
    wl_free(&w);
}

/* run.token_times: one row per generated token, in order per request, the last at the
 * request's finish, its index output_len - 1; off by default (no tokens.csv). */
Test(sim, token_times_write_every_token)
{
    scenario sc;
    scenario_defaults(&sc);
    char err[512];
    cr_assert_eq(scenario_set(&sc, "workload.num_requests=60", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "run.warmup_requests=3", err, sizeof err), 0);
    cr_assert_eq(system("rm -rf /tmp/servesim-test-tok /tmp/servesim-test-notok"), 0);
    simjob plain = {.sc = &sc, .out_dir = "/tmp/servesim-test-notok"};
    cr_assert_eq(simjob_run(&plain, err, sizeof err), EXIT_OK, "%s", err);
    cr_assert_neq(access("/tmp/servesim-test-notok/tokens.csv", F_OK), 0, "no tokens.csv unless asked");
    cr_assert_eq(scenario_set(&sc, "run.token_times=on", err, sizeof err), 0);
    simjob j = {.sc = &sc, .out_dir = "/tmp/servesim-test-tok"};
    cr_assert_eq(simjob_run(&j, err, sizeof err), EXIT_OK, "%s", err);
    enum { N = 63 };
    double finish[N];
    int out_len[N];
    FILE *f = fopen("/tmp/servesim-test-tok/requests.csv", "r");
    cr_assert_not_null(f);
    char line[512];
    cr_assert_not_null(fgets(line, sizeof line, f));
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        long long id;
        double arr, fin;
        int prompt, cached, outl;
        /* request_id,arrival_time,scheduled_prefill_time,first_token_time,finish_time,prompt_len,cached,output_len */
        cr_assert_eq(sscanf(line, "%lld,%lf,%*[^,],%*[^,],%lf,%d,%d,%d", &id, &arr, &fin, &prompt, &cached, &outl), 6, "%s", line);
        cr_assert_lt(id, N);
        finish[id] = fin;
        out_len[id] = outl;
        n++;
    }
    fclose(f);
    cr_assert_eq(n, N);
    f = fopen("/tmp/servesim-test-tok/tokens.csv", "r");
    cr_assert_not_null(f);
    cr_assert_not_null(fgets(line, sizeof line, f));
    cr_assert_str_eq(line, "request_id,token_index,time\n");
    int next[N] = {0};
    double last[N];
    int64_t rows = 0, total = 0;
    while (fgets(line, sizeof line, f)) {
        long long id;
        int index;
        double t;
        cr_assert_eq(sscanf(line, "%lld,%d,%lf", &id, &index, &t), 3, "%s", line);
        cr_assert_eq(index, next[id], "request %lld: token %d after %d", id, index, next[id]);
        cr_assert(index == 0 || t >= last[id]);
        next[id]++;
        last[id] = t;
        rows++;
    }
    fclose(f);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(next[i], out_len[i], "request %d: %d token rows, %d tokens", i, next[i], out_len[i]);
        cr_assert_float_eq(last[i], finish[i], 1e-9, "request %d's last token is its finish", i);
        total += out_len[i];
    }
    cr_assert_eq(rows, total);
    cr_assert_eq(system("rm -rf /tmp/servesim-test-tok /tmp/servesim-test-notok"), 0);
}

/* Speculative decoding by hand: steps of 25 ms, k = 3, every draft accepted; prompt 100,
 * 11 tokens out. The prefill emits token 1; decodes verify 3 drafts and emit 4 (5, 9), then
 * the last 2 with one draft: 4 steps, not 11. A draft model priced 6 ms a step, 1 ms of it
 * the framework's (paid by the target's step), takes 5 ms a forward: over the prompt in the
 * first step, 3 in each of the next two, 1 in the last: TTFT 30 ms, E2EL 100 + 40 = 140 ms.
 * With every draft rejected: 11 steps as without. */
Test(spec, every_draft_accepted_gives_k_plus_one_tokens_a_step_by_hand)
{
    double step = 0.025, draft_step = 0.006;
    draft_cost dc;
    draft_cost_init(&dc, (step_cost){.step_time = constant_cost, .ctx = &draft_step}, 0.001, 3);
    sim_options o = {.sched = small_sched(), .cost = {constant_cost, &step}, .num_replicas = 1,
                     .acceptance_rate = 1.0, .acceptance_seed = 1};
    o.sched.num_speculative_tokens = 3;
    wl_config wc = one_request();
    summary sum;
    sim_stats st;
    cr_assert_eq(run_sim(&o, &wc, &sum, &st), 0);
    cr_assert_eq(st.steps, 4);
    cr_assert_float_eq(sum.e2el_ms.mean, 100.0, 1e-9);
    cr_assert_float_eq(sum.tpot_ms.mean, 75.0 / 10, 1e-9);
    cr_assert_eq(sum.spec_draft_tokens, 7);
    cr_assert_eq(sum.spec_accepted_tokens, 7);
    cr_assert_float_eq(sum.spec_mean_accepted_length, 1 + 7.0 / 3, 1e-12);
    o.draft = draft_cost_fn(&dc);
    cr_assert_eq(run_sim(&o, &wc, &sum, &st), 0);
    cr_assert_float_eq(sum.ttft_ms.mean, 30.0, 1e-9);
    cr_assert_float_eq(sum.e2el_ms.mean, 140.0, 1e-9);
    cr_assert_float_eq(sum.spec_draft_time_share, 40.0 / 140, 1e-9);
    cr_assert_eq(sum.spec_steps, 3, "the three verifying steps");
    cr_assert_float_eq(sum.spec_mean_draft_ms, 35.0 / 3, 1e-9, "15 + 15 + 5 ms over them");
    cr_assert_float_eq(sum.spec_mean_verify_ms, 25.0, 1e-9);
    o.acceptance_rate = 0;
    o.draft = (step_cost){0};
    cr_assert_eq(run_sim(&o, &wc, &sum, &st), 0);
    cr_assert_eq(st.steps, 11);
    cr_assert_float_eq(sum.e2el_ms.mean, 11 * 25.0, 1e-9);
    cr_assert_eq(sum.spec_accepted_tokens, 0);
    cr_assert_float_eq(sum.spec_mean_accepted_length, 1.0, 1e-12);
    draft_cost_free(&dc);
}

/* Per-token acceptance at rate a with k drafts: a sequence emits (1 - a^(k+1)) / (1 - a)
 * tokens a verifying step on average (2.3056 at a = 0.6, k = 4), drafts near an output's
 * end aside (outputs of 400 make them rare). The draws depend on the seed, not the batch. */
Test(spec, the_mean_accepted_length_follows_the_acceptance_rate)
{
    double step = 0.02;
    sim_options o = {.sched = small_sched(), .cost = {constant_cost, &step}, .num_replicas = 1,
                     .acceptance_rate = 0.6, .acceptance_seed = 11};
    o.sched.num_speculative_tokens = 4;
    wl_config wc = constant_workload(400, 20);
    char err[200];
    dist_parse("fixed:400", &wc.output_len, err, sizeof err);
    summary a, b;
    sim_stats st;
    cr_assert_eq(run_sim(&o, &wc, &a, &st), 0);
    double expect = (1 - pow(0.6, 5)) / 0.4;
    cr_assert_lt(fabs(a.spec_mean_accepted_length - expect) / expect, 0.02, "mean accepted length %.4f, expected %.4f",
                 a.spec_mean_accepted_length, expect);
    cr_assert_eq(a.completed, 400);
    cr_assert_eq(a.total_output_tokens, 400 * 400);
    cr_assert_eq(run_sim(&o, &wc, &b, &st), 0);
    cr_assert_eq(a.spec_accepted_tokens, b.spec_accepted_tokens);
    cr_assert_eq(a.e2el_ms.mean, b.e2el_ms.mean, "the same seed, the same run");
    o.acceptance_seed = 12;
    cr_assert_eq(run_sim(&o, &wc, &b, &st), 0);
    cr_assert_neq(a.spec_accepted_tokens, b.spec_accepted_tokens, "another seed, other draws");
}

/* A scenario with a draft model: its weights and KV shrink the pool, its measured table
 * prices the drafting, and summary.json says so; runs are byte-identical; the engine refuses. */
Test(spec, a_draft_model_scenario_runs_reproducibly_and_reports_how_it_speculated)
{
    scenario sc;
    scenario_defaults(&sc);
    char err[512];
    cr_assert_eq(scenario_set(&sc, "workload.num_requests=200", err, sizeof err), 0);
    scenario_resolved plain, spec;
    cr_assert_eq(scenario_resolve(&sc, &plain, err, sizeof err), 0, "%s", err);
    cr_assert_eq(scenario_set(&sc, "speculative.num_tokens=3", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "speculative.method=draft", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &spec, err, sizeof err), 0, "%s", err);
    cr_assert_lt(spec.sched.num_blocks, plain.sched.num_blocks, "the draft model takes memory");
    const char *dirs[2] = {"/tmp/servesim-test-spec-a", "/tmp/servesim-test-spec-b"};
    cr_assert_eq(system("rm -rf /tmp/servesim-test-spec-a /tmp/servesim-test-spec-b"), 0);
    for (int i = 0; i < 2; i++) {
        simjob j = {.sc = &sc, .out_dir = dirs[i]};
        cr_assert_eq(simjob_run(&j, err, sizeof err), EXIT_OK, "%s", err);
        cr_assert_gt(j.sum.spec_accepted_tokens, 0);
        cr_assert_gt(j.sum.spec_draft_time_share, 0.05);
    }
    const char *files[] = {"summary.json", "requests.csv", "steps.csv"};
    for (int f = 0; f < 3; f++) {
        char pa[300], pb[300];
        snprintf(pa, sizeof pa, "%s/%s", dirs[0], files[f]);
        snprintf(pb, sizeof pb, "%s/%s", dirs[1], files[f]);
        size_t la, lb;
        char *a = slurp(pa, &la), *b = slurp(pb, &lb);
        cr_assert(la == lb && memcmp(a, b, la) == 0, "%s differs", files[f]);
        if (f == 0) {
            a[la] = 0;
            cr_assert(strstr(a, "\"speculative\": {") && strstr(a, "\"draft_model\": \"llama-3.2-1b\"") &&
                          strstr(a, "\"draft_cost_source\": \"costs/h200/llama-3.2-1b."),
                      "%s", a);
        }
        free(a);
        free(b);
    }
    cr_assert_eq(system("rm -rf /tmp/servesim-test-spec-a /tmp/servesim-test-spec-b"), 0);
    kb_options ko;
    kb_sampling ks;
    cr_assert_eq(scenario_set(&sc, "speculative.draft_model=qwen3-30b-a3b", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "model.preset=qwen3-8b", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &spec, err, sizeof err), 0, "%s", err);
    cr_assert_eq(scenario_resolve_engine(&sc, &spec, &ko, &ks, err, sizeof err), -1);
    cr_assert(strstr(err, "speculative.draft_model = qwen3-30b-a3b is a mixture of experts"), "%s", err);
    cr_assert_eq(scenario_set(&sc, "model.preset=llama-3.1-8b", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "speculative.draft_model=qwen3-8b", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &spec, err, sizeof err), -1);
    cr_assert(strstr(err, "must share the target's vocabulary"), "%s", err);
    /* memory too small: the message names both models, whose weights it adds */
    cr_assert_eq(scenario_set(&sc, "speculative.draft_model=llama-3.2-1b", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "model.preset=llama-3.1-70b", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &spec, err, sizeof err), -1);
    cr_assert(strstr(err, "llama-3.1-70b and speculative.draft_model llama-3.2-1b weights"), "%s", err);
}

static double per_token_cost(const void *ctx, const sched_batch *b)
{
    return *(const double *)ctx * b->num_batched_tokens;
}

/* The draft model's tokens by hand (0.1 ms a token, steps of 25 ms, k = 3, all accepted;
 * prompt 100, 11 out): it prefills the prompt with the target (100 tokens, TTFT 35 ms); then
 * before each verification it runs the tokens it has not seen (the newest: 1; after a full
 * acceptance its unfed last draft and the new token: 2) and k - 1 more one at a time: 3, then
 * 2 + 2, then 2 (one draft left to make): 109 tokens, E2EL 100 + 10.9 ms. Disabled from one
 * running sequence, it still runs over every token to keep its KV: the prompt and the 10
 * decodes' newest tokens, 11 plain steps + 11 ms. */
Test(spec, the_draft_model_catches_up_on_the_tokens_it_has_not_seen)
{
    double step = 0.025, per_token = 1e-4;
    draft_cost dc;
    draft_cost_init(&dc, (step_cost){.step_time = per_token_cost, .ctx = &per_token}, 0, 3);
    sim_options o = {.sched = small_sched(), .cost = {constant_cost, &step}, .num_replicas = 1,
                     .acceptance_rate = 1.0, .acceptance_seed = 1, .draft = draft_cost_fn(&dc)};
    o.sched.num_speculative_tokens = 3;
    wl_config wc = one_request();
    summary sum;
    sim_stats st;
    cr_assert_eq(run_sim(&o, &wc, &sum, &st), 0);
    cr_assert_eq(st.steps, 4);
    cr_assert_float_eq(sum.ttft_ms.mean, 35.0, 1e-9);
    cr_assert_float_eq(sum.e2el_ms.mean, 110.9, 1e-9);
    o.sched.spec_disable_by_batch_size = 1;
    cr_assert_eq(run_sim(&o, &wc, &sum, &st), 0);
    cr_assert_eq(st.steps, 11);
    cr_assert_eq(sum.spec_draft_tokens, 0);
    cr_assert_float_eq(sum.e2el_ms.mean, 11 * 25.0 + 11.0, 1e-9);
    draft_cost_free(&dc);
}

/* Per-request acceptance. From a trace's column: request 0 at 1.0 keeps every draft, request
 * 1 at 0.0 none, whatever the scenario's rate. Drawn around the scenario's rate with a spread:
 * requests' kept shares (kept / drafted, a function of their own rate) vary far more across
 * requests than the draws of one shared rate make them vary, around the same mean. */
Test(spec, each_request_has_its_own_acceptance_from_a_trace_or_a_spread)
{
    const char *path = "/tmp/servesim-test-acceptance.csv";
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("arrival_time,prompt_len,output_len,acceptance_rate\n0,50,40,1\n0,50,40,0\n", f);
    fclose(f);
    double step = 0.01;
    sim_options o = {.sched = small_sched(), .cost = {constant_cost, &step}, .num_replicas = 1,
                     .acceptance_rate = 0.5, .acceptance_seed = 3};
    o.sched.num_speculative_tokens = 3;
    wl_config wc = constant_workload(0, 1);
    wc.arrival = ARRIVAL_TRACE;
    wc.trace_path = path;
    workload w;
    char err[512];
    cr_assert_eq(wl_build(&wc, &w, err, sizeof err), 0, "%s", err);
    met_acc *met = met_create();
    met_keep_requests(met);
    recorder rc;
    rec_init(&rc, met, NULL);
    sim_stats st;
    cr_assert_eq(sim_run(&o, &w, &wc, &rc, &st, err, sizeof err), 0, "%s", err);
    size_t n;
    const req_record *recs = met_requests(met, &n);
    cr_assert_eq(n, 2);
    for (size_t i = 0; i < n; i++) {
        cr_assert_gt(recs[i].draft_tokens, 0);
        cr_assert_eq(recs[i].accepted_tokens, recs[i].request_id == 0 ? recs[i].draft_tokens : 0, "request %lld",
                     (long long)recs[i].request_id);
    }
    met_free(met);
    wl_free(&w);
    unlink(path);

    /* the third: a spread near its bound, Beta shapes of 0.03 and 0.01 (GSL's inverse CDF
     * aborted the run there once): rates pile up at 0 and 1, the mean stays */
    double spread_std[3], spread_mean[3];
    for (int v = 0; v < 3; v++) {
        sim_options s = {.sched = small_sched(), .cost = {constant_cost, &step}, .num_replicas = 1,
                         .acceptance_rate = v == 2 ? 0.7 : 0.6, .acceptance_spread = v == 2 ? 0.45 : v ? 0.25 : 0,
                         .acceptance_seed = 5};
        s.sched.num_speculative_tokens = 1;
        wl_config c = constant_workload(600, 50);
        dist_parse("fixed:200", &c.output_len, err, sizeof err);
        cr_assert_eq(wl_build(&c, &w, err, sizeof err), 0, "%s", err);
        met = met_create();
        met_keep_requests(met);
        rec_init(&rc, met, NULL);
        cr_assert_eq(sim_run(&s, &w, &c, &rc, &st, err, sizeof err), 0, "%s", err);
        recs = met_requests(met, &n);
        double sum = 0, sq = 0;
        for (size_t i = 0; i < n; i++) {
            double share = (double)recs[i].accepted_tokens / recs[i].draft_tokens; /* k = 1: the rate itself */
            sum += share;
            sq += share * share;
        }
        spread_mean[v] = sum / n;
        spread_std[v] = sqrt(sq / n - spread_mean[v] * spread_mean[v]);
        met_free(met);
        wl_free(&w);
    }
    cr_assert_lt(fabs(spread_mean[0] - 0.6), 0.01, "one rate: mean %g", spread_mean[0]);
    cr_assert_lt(fabs(spread_mean[1] - 0.6), 0.03, "spread: mean %g", spread_mean[1]);
    cr_assert_lt(spread_std[0], 0.06, "one rate: only the draws vary (%g)", spread_std[0]);
    cr_assert_lt(fabs(spread_std[1] - sqrt(0.25 * 0.25 + spread_std[0] * spread_std[0])), 0.03,
                 "spread 0.25 on top of the draws' %g: %g", spread_std[0], spread_std[1]);
    cr_assert_lt(fabs(spread_mean[2] - 0.7), 0.06, "spread 0.45: mean %g", spread_mean[2]);
    cr_assert_gt(spread_std[2], 0.35, "spread 0.45: std %g", spread_std[2]);
}
