#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/results.h"
#include "cli/commands.h"
#include "io/interrupt.h"
#include "cli/environment.h"
#include "study/job.h"
#include "engine/engine.h"

static const char engine_usage[] =
    "usage: servesim engine [SCENARIO.ini] [--backend cpu|cuda] [--out DIR] [--seed N]\n"
    "                       [--set SECTION.KEY=VALUE]... [--quiet]\n"
    "  Serves the scenario's requests in real time on the real engine (model weights drawn\n"
    "  from engine.weight_seed) and writes the same summary.json, requests.csv and steps.csv\n"
    "  as `servesim run` to DIR (default results/runs/NAME-engine-seedN). The CPU backend runs\n"
    "  small presets (e.g. --set model.preset=tiny); the KV pool is engine.kv_gib unless\n"
    "  kv.num_blocks is set.\n";

/* What summary.json says besides the summary: what ran, on what machine, the scenario. */
static json_t *extra_json(const scenario *sc, const scenario_resolved *r, const engine_stats *st,
                          const kb_options *kb)
{
    json_t *obj = json_object();
    if (!obj || json_put(obj, "executor", json_string("engine")) | json_put(obj, "seed", json_integer(sc->v[K_run_seed].i)) |
                    json_put(obj, "engine_steps", json_integer(st->steps)) |
                    json_put(obj, "backend_warmup_s", json_num(st->warmup_seconds)) |
                    json_put(obj, "kv_cache", job_kv_cache_json(r, true)) |
                    json_put(obj, "scheduler", job_scheduler_json(r, false)) |
                    env_json(obj, kb->kind == KB_CUDA ? "cuda" : "cpu", st->device,
                             kb->threads ? kb->threads : (int)sysconf(_SC_NPROCESSORS_ONLN)) |
                    (r->sched.num_speculative_tokens > 0 ? json_put(obj, "speculative", job_speculative_json(r)) : 0) |
                    job_scenario_json(obj, sc)) {
        json_decref(obj);
        return NULL;
    }
    return obj;
}

static int serve(const scenario *sc, const char *out, bool quiet, summary *sum, bool *have, char *rejected,
                 size_t rejected_len, char *err, size_t errlen)
{
    scenario_resolved r;
    engine_options o = {0};
    if (scenario_resolve(sc, &r, err, errlen) < 0 ||
        scenario_resolve_engine(sc, &r, &o.backend, &o.sampling, err, errlen) < 0)
        return EXIT_BAD_INPUT;
    /* the engine schedules synchronously, behind no priced API server: both keys were once
     * taken and recorded without a word (bad-input campaign) */
    scenario_key front = scenario_frontend_key(sc);
    if (front != K_COUNT || (r.async_scheduling && strcmp(sc->v[K_scheduler_async_scheduling].origin, "default") != 0)) {
        char label[400];
        scenario_key_label(sc, front != K_COUNT ? front : K_scheduler_async_scheduling, label, sizeof label);
        snprintf(err, errlen, "%s is for the simulator (servesim run): the real engine %s", label,
                 front != K_COUNT ? "runs behind no priced API server (`servesim serve` puts its own in front of it)"
                                  : "schedules each step after the last one's output");
        return EXIT_BAD_INPUT;
    }
    o.sched = r.sched;
    o.prompt_lookup_min = r.prompt_lookup_min;
    o.prompt_lookup_max = r.prompt_lookup_max;
    o.spec_draft_model = r.spec_draft_model;
    o.draft_shape = r.draft_kb_shape;
    engine_backend_options(&r.sched, &o.backend);
    /* with a cost table, every step also records what the table predicts for its batch */
    job_cost cost;
    if (job_cost_init(&cost, &r, err, errlen) < 0) return EXIT_BAD_INPUT;
    if (cost.use_table) {
        o.predict = tc_step_time;
        o.predict_ctx = &cost.table;
    }
    workload w;
    res_dir dir;
    if (wl_open(&r.workload, &w, err, errlen) < 0) {
        job_cost_free(&cost);
        return EXIT_BAD_INPUT;
    }
    if (res_open(&dir, out, err, errlen) < 0) {
        wl_free(&w);
        job_cost_free(&cost);
        return EXIT_FAILURE_OTHER;
    }
    if (r.token_times && res_open_tokens(&dir, err, errlen) < 0) {
        res_abort(&dir);
        wl_free(&w);
        job_cost_free(&cost);
        return EXIT_FAILURE_OTHER;
    }
    job_progress ps;
    job_progress_start(&ps, "serving");
    o.progress = !quiet && isatty(2) ? job_progress_show : NULL;
    o.stop = interrupt_flag();
    o.progress_ctx = &ps;
    met_acc *met = met_create();
    if (met) met_set_percentiles(met, r.percentiles, r.num_percentiles);
    recorder rc;
    rec_init(&rc, met, &dir);
    engine_stats st;
    int status = engine_run(&o, &w, &r.workload, &rc, &st, err, errlen);
    job_progress_end(&ps);
    if (status == 0) {
        *have = met_summarize(met, &r.slo, sum) == 0;
        met_describe_rejected(met, r.sched.max_model_len, rejected, rejected_len);
        json_t *extra = extra_json(sc, &r, &st, &o.backend);
        status = extra && job_write_results(&dir, sum, extra, err, errlen) == 0 ? 0 : 1;
        if (!extra) snprintf(err, errlen, "out of memory while writing summary.json");
        json_decref(extra);
    }
    if (status != 0) res_abort(&dir);
    if (status == 0 && !quiet) printf("Engine: %s; %lld steps in %.2f s\n", st.device, (long long)st.steps, st.end_time);
    met_free(met);
    wl_free(&w);
    job_cost_free(&cost);
    return status == 0 ? EXIT_OK : status == 2 ? EXIT_BAD_INPUT : EXIT_FAILURE_OTHER;
}

int cmd_engine(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(engine_usage, stdout);
        return EXIT_OK;
    }
    scenario sc;
    scenario_args a;
    if (parse_scenario_args(argc, argv, engine_usage, 0, &sc, &a) < 0) return EXIT_BAD_INPUT;
    char out[1200], suffix[64];
    snprintf(suffix, sizeof suffix, "engine-seed%lld", sc.v[K_run_seed].i);
    char out_err[2048];
    if (scenario_out_dir(&sc, a.out_dir, suffix, out, sizeof out, out_err, sizeof out_err) < 0) {
        fprintf(stderr, "servesim: %s\n", out_err);
        return EXIT_BAD_INPUT;
    }
    summary sum;
    bool have = false;
    char err[1024], rejected[400] = "";
    int status = serve(&sc, out, a.quiet, &sum, &have, rejected, sizeof rejected, err, sizeof err);
    if (status != EXIT_OK) {
        fprintf(stderr, "servesim: %s\n", err);
        return status;
    }
    if (!a.quiet) {
        if (have) res_print_summary(stdout, &sum);
        if (rejected[0]) printf("%s\n", rejected);
        printf("Results in %s/\n", out);
    }
    return EXIT_OK;
}
