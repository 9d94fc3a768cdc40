/* `servesim bench`: how fast the simulator itself runs, on about a million requests whose
 * lengths are drawn from the Azure conversation trace, at 80% of the replica's capacity. */
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "calibrate/calibrate.h"
#include "cli/bench_serving.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "config/measured.h"
#include "core/model.h"
#include "workload/trace.h"

static const char bench_usage[] =
    "usage: servesim bench [--requests N] [--runs N] [--trace CSV] [--seed N] [--replicas N]\n"
    "       servesim bench --engine PRESET [--threads N]\n"
    "       servesim bench --serving PRESET [--threads N]\n"
    "  Simulates N requests (default 1000000) with (prompt, output) lengths drawn from the\n"
    "  trace (default traces/azure_llm_2023_conv.csv of servesim's data folder), Poisson arrivals at 80% of the\n"
    "  capacity a short all-at-once probe measures, llama-3-8b on the H200 roofline, paged +\n"
    "  chunked prefill (no prefix caching, 256 sequences, 2,048 tokens a step). Prints\n"
    "  simulated requests and events per wall-clock second, for each of --runs runs\n"
    "  (default 3) of the same requests, and their median.\n"
    "  --replicas N: N such replicas behind the least-outstanding router, at N times the rate.\n"
    "  --engine: the CPU engine's decode step time at batch 1 to 64 (context 128) against this\n"
    "  machine's floor (weight bytes over measured memcpy bandwidth), and prefill tokens/s.\n"
    "  --serving: 64- and 256-token prefills timed by the calibration probe and served by the\n"
    "  engine (one step per request), in six pairs seconds apart: what serving adds to a step.\n";

static double now_s(void);

static int cmp_seconds(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Bytes copied per second by memcpy over a buffer far larger than the caches. */
static double copy_bandwidth(void)
{
    size_t n = (size_t)256 << 20;
    char *a = malloc(n), *b = malloc(n);
    if (!a || !b) {
        free(a);
        free(b);
        return 0;
    }
    memset(a, 1, n);
    memset(b, 2, n);
    double best = 0;
    for (int r = 0; r < 5; r++) {
        double t0 = now_s();
        memcpy(r % 2 ? a : b, r % 2 ? b : a, n);
        double bw = n / (now_s() - t0);
        if (bw > best) best = bw;
    }
    free(a);
    free(b);
    return best;
}

static int bench_engine(const char *preset, int threads)
{
    const model_shape *m = model_preset(preset);
    if (!m) {
        fprintf(stderr, "servesim: --engine %s: unknown model (known: %s)\n", preset, model_preset_names());
        return EXIT_BAD_INPUT;
    }
    calib_options o = {.kb = {.kind = KB_CPU, .weight_seed = 1, .sample_seed = 1, .threads = threads,
                              .shape = {m->num_layers, m->hidden, m->num_heads, m->num_kv_heads, m->head_dim,
                                        m->intermediate, m->vocab, m->rope_theta, m->rms_eps}},
                       .model_name = preset, .block_size = 16, .max_tokens = 512, .max_context = 128,
                       .max_seqs = 64, .repeats = 5};
    int status;
    char err[1024];
    calib_probe *p = calibrate_probe_open(&o, &status, err, sizeof err);
    if (!p) {
        fprintf(stderr, "servesim: %s\n", err);
        return status == 2 ? EXIT_BAD_INPUT : EXIT_FAILURE_OTHER;
    }
    double bw = copy_bandwidth(), weights = (double)kb_weight_bytes(&o.kb.shape, KB_CPU);
    double floor_s = weights / bw;
    printf("servesim bench --engine %s: %s\n", preset, calibrate_probe_device(p));
    printf("  weights %.1f MiB fp32; memcpy bandwidth %.2f GB/s; weight-read floor %.3f ms\n",
           weights / (1 << 20), bw / 1e9, 1e3 * floor_s);
    printf("  %-6s %12s %12s %10s\n", "batch", "step (ms)", "tokens/s", "x floor");
    int batches[] = {1, 4, 16, 64};
    calib_timed t;
    for (int i = 0; i < 4 && status != -1; i++) {
        if (calibrate_probe_measure(p, batches[i], 1, 127, &t) < 0) status = -1;
        else printf("  %-6d %12.3f %12.0f %10.2f\n", batches[i], 1e3 * t.total, batches[i] / t.total, t.total / floor_s);
    }
    if (status != -1 && calibrate_probe_measure(p, 1, 512, 0, &t) == 0)
        printf("  prefill of 512 tokens: %.1f ms, %.0f tokens/s\n", 1e3 * t.total, 512 / t.total);
    else
        fprintf(stderr, "servesim: backend: %s\n", calibrate_probe_error(p));
    calibrate_probe_close(p);
    return EXIT_OK;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* Requests whose lengths are rows of SOURCE drawn with replacement; Poisson arrivals at RATE
 * (all at once when RATE is 0). */
static int resample(const workload *source, size_t n, double rate, uint64_t seed, workload *out)
{
    out->reqs = calloc(n, sizeof *out->reqs);
    if (!out->reqs) return -1;
    out->n = n;
    out->vocab_size = source->vocab_size;
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, seed);
    double t = 0;
    for (size_t i = 0; i < n; i++) {
        const wl_request *row = &source->reqs[gsl_rng_uniform_int(rng, source->n)];
        out->reqs[i] = (wl_request){.id = (int64_t)i, .arrival_time = t, .prompt_len = row->prompt_len,
                                    .output_len = row->output_len, .prefix_id = -1};
        if (rate > 0) t += gsl_ran_exponential(rng, 1.0 / rate);
    }
    gsl_rng_free(rng);
    return 0;
}

static double roofline(const void *ctx, const sched_batch *b) { return cost_step_time(ctx, b); }

static int simulate(const scenario_resolved *r, int replicas, workload *w, wl_config *wc, summary *sum,
                    sim_stats *stats, double *wall, char *err, size_t errlen)
{
    cost_model cost;
    cost_roofline_init(&cost, &r->model, &r->hw, &r->roofline, r->dtype_bytes, r->tensor_parallel);
    sim_options o = {.sched = r->sched, .cost = {roofline, &cost}, .num_replicas = replicas};
    met_acc *met = met_create();
    recorder rc;
    rec_init(&rc, met, NULL);
    double t0 = now_s();
    int status = sim_run(&o, w, wc, &rc, stats, err, errlen);
    *wall = now_s() - t0;
    if (status == 0) met_summarize(met, &r->slo, sum);
    met_free(met);
    return status;
}

typedef struct bench_args {
    long n, seed, threads, runs, replicas;
    const char *trace, *engine, *serving;
    const char *sim_flag, *threads_flag; /* the first option of the simulator's bench, and --threads */
} bench_args;

static const cli_opt bench_opts[] = {
    {"--trace", true}, {"--engine", true}, {"--serving", true}, {"--runs", true},
    {"--threads", true}, {"--requests", true}, {"--seed", true}, {"--replicas", true},
};

static int on_bench_opt(void *ctx, const char *f, const char *v)
{
    bench_args *a = ctx;
    bool engine_mode = strcmp(f, "--engine") == 0 || strcmp(f, "--serving") == 0;
    if (strcmp(f, "--threads") == 0) a->threads_flag = f;
    else if (!engine_mode && !a->sim_flag) a->sim_flag = f;
    if (strcmp(f, "--trace") == 0) a->trace = v;
    else if (strcmp(f, "--engine") == 0) a->engine = v;
    else if (strcmp(f, "--serving") == 0) a->serving = v;
    else if (strcmp(f, "--runs") == 0) return cli_parse_long(f, v, 1, 99, &a->runs);
    else if (strcmp(f, "--threads") == 0) return cli_parse_long(f, v, 0, 1024, &a->threads);
    else if (strcmp(f, "--requests") == 0) return cli_parse_long(f, v, 1, 100000000, &a->n);
    else if (strcmp(f, "--seed") == 0) return cli_parse_long(f, v, 0, 2147483647, &a->seed);
    else if (strcmp(f, "--replicas") == 0) return cli_parse_long(f, v, 1, 4096, &a->replicas);
    return 0;
}

int cmd_bench(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(bench_usage, stdout);
        return EXIT_OK;
    }
    /* the default trace from servesim's data directory, so bench works from any folder */
    char default_trace[1100] = "traces/azure_llm_2023_conv.csv";
    if (measured_data_dir(default_trace, sizeof default_trace - 40) == 0)
        strcat(default_trace, "traces/azure_llm_2023_conv.csv");
    bench_args a = {.n = 1000000, .runs = 3, .replicas = 1, .trace = default_trace};
    if (cli_parse(argc, argv, bench_usage, bench_opts, sizeof bench_opts / sizeof *bench_opts, on_bench_opt, NULL, &a) < 0)
        return EXIT_BAD_INPUT;
    long n = a.n, seed = a.seed, threads = a.threads, runs = a.runs;
    const char *trace = a.trace;
    /* each mode's options apart: --engine ran its own bench with --requests, --runs and --trace
     * ignored, and over --serving without a word (bad-input campaign) */
    const char *mode = a.engine ? "--engine" : a.serving ? "--serving" : NULL;
    if (a.engine && a.serving) {
        fprintf(stderr, "servesim: bench --engine and --serving are two benchmarks: give one\n");
        return EXIT_BAD_INPUT;
    }
    if (mode && a.sim_flag) {
        fprintf(stderr, "servesim: bench %s times the engine and takes only --threads (got %s, an option of the "
                        "simulator's bench)\n", mode, a.sim_flag);
        return EXIT_BAD_INPUT;
    }
    if (!mode && a.threads_flag) {
        fprintf(stderr, "servesim: bench --threads is for --engine and --serving; the simulator runs on one thread\n");
        return EXIT_BAD_INPUT;
    }
    if (a.engine) return bench_engine(a.engine, (int)threads);
    if (a.serving) return bench_serving(a.serving, (int)threads);
    scenario sc;
    scenario_defaults(&sc);
    char err[1024];
    /* the benchmark's workload is fixed: vLLM V1's scheduler as it was before servesim took
     * its defaults for the GPU, prefix caching off (nothing in the trace is shared) */
    const char *sets[] = {"scheduler.chunked_prefill=on", "scheduler.prefix_caching=off", "scheduler.max_num_seqs=256",
                          "scheduler.max_num_batched_tokens=2048", "workload.arrival=trace"};
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) scenario_set(&sc, sets[i], err, sizeof err);
    char trace_set[1100];
    snprintf(trace_set, sizeof trace_set, "workload.trace=%s", trace);
    if (scenario_set(&sc, trace_set, err, sizeof err) < 0) { fprintf(stderr, "servesim: %s\n", err); return EXIT_BAD_INPUT; }
    scenario_resolved r;
    if (scenario_resolve(&sc, &r, err, sizeof err) < 0) { fprintf(stderr, "servesim: %s\n", err); return EXIT_BAD_INPUT; }
    r.workload.num_requests = 0; /* every row */
    workload rows;
    if (wl_build(&r.workload, &rows, err, sizeof err) < 0) { fprintf(stderr, "servesim: %s\n", err); return EXIT_BAD_INPUT; }
    /* the trace may exceed the model's context: a row's prompt is cut to fit it. No prompt fits
     * beside an answer that fills the context alone: one cut to 0 tokens or fewer ended in
     * "internal error: 0 of 20000 requests ended" (bad-input campaign) */
    for (size_t i = 0; i < rows.n; i++) {
        if (rows.reqs[i].output_len >= r.sched.max_model_len) {
            trace_row *tr = NULL;
            size_t nt = 0;
            long line = trace_read(r.workload.trace_path, i + 1, &tr, &nt, NULL, err, sizeof err) == 0 && nt == i + 1
                            ? tr[i].line : 0;
            free(tr);
            char where[1200];
            if (line > 0) snprintf(where, sizeof where, "%s:%ld", r.workload.trace_path, line);
            else snprintf(where, sizeof where, "%s, row %zu", r.workload.trace_path, i + 1); /* not read again */
            fprintf(stderr, "servesim: %s: an output of %d tokens leaves no room for a prompt in "
                            "scheduler.max_model_len (%d tokens); bench fits a row to the context by cutting its "
                            "prompt\n",
                    where, rows.reqs[i].output_len, r.sched.max_model_len);
            wl_free(&rows);
            return EXIT_BAD_INPUT;
        }
        if (rows.reqs[i].prompt_len + rows.reqs[i].output_len > r.sched.max_model_len)
            rows.reqs[i].prompt_len = r.sched.max_model_len - rows.reqs[i].output_len;
    }
    wl_config wc = r.workload;
    wc.arrival = ARRIVAL_POISSON;
    wc.max_concurrency = 0;

    summary sum;
    sim_stats st;
    double wall;
    workload probe;
    int status = resample(&rows, 20000, 0, (uint64_t)seed + 1, &probe);
    if (status == 0) status = simulate(&r, 1, &probe, &wc, &sum, &st, &wall, err, sizeof err);
    free(probe.reqs);
    double rate = 0.8 * sum.request_throughput * (double)a.replicas;
    workload w;
    double walls[99];
    if (status == 0) status = resample(&rows, (size_t)n, rate, (uint64_t)seed, &w);
    for (int i = 0; i < runs && status == 0; i++) {
        status = simulate(&r, (int)a.replicas, &w, &wc, &sum, &st, &walls[i], err, sizeof err);
        if (status == 0) fprintf(stderr, "run %d: %.3f s, %.0f simulated requests/s\n", i + 1, walls[i], n / walls[i]);
    }
    if (status == 0) {
        free(w.reqs);
        qsort(walls, runs, sizeof walls[0], cmp_seconds);
        wall = walls[runs / 2];
    }
    wl_free(&rows);
    if (status != 0) { fprintf(stderr, "servesim: %s\n", err[0] ? err : "out of memory"); return EXIT_FAILURE_OTHER; }
    printf("servesim bench: %ld requests, lengths from %s, Poisson at %.2f req/s (80%% of capacity)\n",
           n, trace, rate);
    if (a.replicas > 1) printf("  %ld replicas, least-outstanding router\n", a.replicas);
    printf("  model llama-3-8b, h200 roofline, paged + chunked prefill, max_num_seqs %d\n", r.sched.max_num_seqs);
    printf("  simulated time        %12.1f s\n", st.end_time);
    printf("  wall-clock time       %12.3f s  (median of %ld runs)\n", wall, runs);
    printf("  events                %12zu  (%.0f per second)\n", st.events, st.events / wall);
    printf("  steps                 %12lld  (%.0f per second)\n", (long long)st.steps, st.steps / wall);
    printf("  simulated requests/s  %12.0f\n", n / wall);
    printf("  served: %d completed, mean TTFT %.1f ms, mean TPOT %.2f ms, output %.0f tok/s\n",
           sum.completed, sum.ttft_ms.mean, sum.tpot_ms.mean, sum.output_throughput);
    return EXIT_OK;
}
