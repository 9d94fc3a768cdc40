/* servesim serve: the real engine behind an OpenAI-compatible HTTP API, until Ctrl-C. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli/commands.h"
#include "cli/environment.h"
#include "engine/engine.h"
#include "io/interrupt.h"
#include "serve/server.h"

static const char serve_usage[] =
    "usage: servesim serve [SCENARIO.ini] [--host ADDR] [--port N] [--served-model-name NAME]\n"
    "                      [--event-times] [--event-log FILE.csv] [--backend cpu|cuda] [--seed N]\n"
    "                      [--set SECTION.KEY=VALUE]... [--quiet]\n"
    "  Serves the scenario's model (weights drawn from engine.weight_seed) on the real engine\n"
    "  behind an OpenAI-compatible API, as `vllm serve` does, until Ctrl-C:\n"
    "    POST /v1/completions        prompt as text (one token per byte) or token ids;\n"
    "                                max_tokens, stream, stream_options.include_usage\n"
    "    POST /v1/chat/completions   messages, max_completion_tokens or max_tokens, stream\n"
    "    GET  /v1/models, /health, /metrics (Prometheus text, vLLM's metric names)\n"
    "  Generation always runs to max_tokens (as with ignore_eos); every request is sampled\n"
    "  with engine.temperature. --host defaults to 127.0.0.1, --port to 8000 (0: any free\n"
    "  port, printed). The scenario's [scheduler] and [kv] settings apply; its workload does\n"
    "  not (send one with `servesim load`). --event-times adds \"servesim_sent\" (the moment of\n"
    "  writing, CLOCK_MONOTONIC s) to each token's event, from which `servesim load` on the same\n"
    "  machine measures its own delay. --event-log writes, when the server stops, every streamed\n"
    "  token's send time (request_id from the client's X-Request-Id header, else the response\n"
    "  id; token_index; sent, CLOCK_MONOTONIC s): any client's records on the same machine can\n"
    "  be timed against it (scripts/client-delay.py does it for `vllm bench serve`); it replaces\n"
    "  an existing file only when that is an event log.\n";

int cmd_serve(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(serve_usage, stdout);
        return EXIT_OK;
    }
    scenario sc;
    scenario_args a;
    if (parse_scenario_args(argc, argv, serve_usage, SA_SERVE, &sc, &a) < 0) return EXIT_BAD_INPUT;
    scenario_resolved r;
    engine_options o = {0};
    char err[1024];
    if (scenario_resolve(&sc, &r, err, sizeof err) < 0 ||
        scenario_resolve_engine(&sc, &r, &o.backend, &o.sampling, err, sizeof err) < 0) {
        fprintf(stderr, "servesim: %s\n", err);
        return EXIT_BAD_INPUT;
    }
    o.sched = r.sched;
    o.prompt_lookup_min = r.prompt_lookup_min;
    o.prompt_lookup_max = r.prompt_lookup_max;
    o.spec_draft_model = r.spec_draft_model;
    o.draft_shape = r.draft_kb_shape;
    engine_backend_options(&r.sched, &o.backend);
    env_raise_fd_limit();
    signal(SIGPIPE, SIG_IGN);
    engine_stats st;
    engine_live *eng = engine_start(&o, &st, err, sizeof err);
    if (!eng) {
        fprintf(stderr, "servesim: %s\n", err);
        return st.refused ? EXIT_BAD_INPUT : EXIT_FAILURE_OTHER;
    }
    srv_options so = {
        .host = a.host, .port = (int)a.port, .model = a.model_name ? a.model_name : sc.v[K_model_preset].s,
        .vocab_size = o.backend.shape.vocab, .max_model_len = r.sched.max_model_len,
        .kv_block_size = r.sched.block_size, .kv_tokens = (int64_t)r.sched.num_blocks * r.sched.block_size,
        .max_body = 64u << 20, .max_connections = 4096, .event_times = a.event_times,
        .event_log = a.event_log,
        .speculative = r.sched.num_speculative_tokens > 0,
    };
    srv *s = srv_start(&so, eng, err, sizeof err);
    if (!s) {
        engine_stop(eng);
        fprintf(stderr, "servesim: %s\n", err);
        return EXIT_BAD_INPUT;
    }
    if (!a.quiet) {
        printf("Serving %s on %s (%d KV blocks of %d tokens, max_model_len %d)\n", so.model, st.device,
               r.sched.num_blocks, r.sched.block_size, r.sched.max_model_len);
        /* an IPv6 address is bracketed in a URL (RFC 3986): "http://::1:8000/v1" was refused by load */
        bool v6 = strchr(a.host, ':') != NULL;
        printf("Listening on http://%s%s%s:%d/v1  (Ctrl-C to stop)\n", v6 ? "[" : "", a.host, v6 ? "]" : "",
               srv_port(s));
    }
    fflush(stdout);
    const volatile sig_atomic_t *stop = interrupt_flag();
    while (!*stop && !engine_live_error(eng)) nanosleep(&(struct timespec){0, 50 * 1000000L}, NULL);
    const char *why = engine_live_error(eng);
    char log_err[700] = "";
    int log_rc = srv_stop(s, log_err, sizeof log_err);
    engine_gauges g;
    engine_gauges_get(eng, &g);
    char failure[256] = "";
    if (why) snprintf(failure, sizeof failure, "%s", why);
    engine_stop(eng);
    if (!a.quiet)
        printf("Stopped: %lld requests finished, %lld aborted, %lld steps\n", (long long)g.finished, (long long)g.aborted,
               (long long)g.steps);
    if (failure[0]) {
        fprintf(stderr, "servesim: the engine stopped: %s\n", failure);
        return EXIT_FAILURE_OTHER;
    }
    if (log_rc < 0) {
        fprintf(stderr, "servesim: %s\n", log_err);
        return EXIT_FAILURE_OTHER;
    }
    return EXIT_OK;
}
