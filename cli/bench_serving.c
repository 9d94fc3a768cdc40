/* `servesim bench --serving PRESET`: does the serving loop cost anything beyond the kernels
 * calibration times? Pairs, seconds apart, a calibration probe of one prefill shape with an
 * engine run whose every step is that same prefill, so the machine's drift in speed (large
 * on a shared VM) moves both sides of each pair alike. */
#include <stdio.h>

#include "calibrate/calibrate.h"
#include "cli/bench_serving.h"
#include "cli/commands.h"
#include "engine/engine.h"
#include "core/model.h"

enum { PAIRS = 6, RUNS = 20 };

static calib_options serving_options(const model_shape *m, const char *preset, int threads)
{
    return (calib_options){.kb = {.kind = KB_CPU, .weight_seed = 1, .sample_seed = 1, .threads = threads,
                                  .shape = {m->num_layers, m->hidden, m->num_heads, m->num_kv_heads, m->head_dim,
                                            m->intermediate, m->vocab, m->rope_theta, m->rms_eps}},
                           .model_name = preset, .block_size = 16, .max_tokens = 256, .max_context = 256,
                           .max_seqs = 1, .repeats = RUNS};
}

/* The probe's median forward + sampling time for one PROMPT-token prefill. */
static int probe_prefill(const calib_options *o, int prompt, double *out, char *err, size_t errlen)
{
    int status;
    calib_probe *p = calibrate_probe_open(o, &status, err, errlen);
    if (!p) return status;
    calib_timed t;
    status = calibrate_probe_measure(p, 1, prompt, 0, &t);
    if (status != 0) snprintf(err, errlen, "backend: %s", calibrate_probe_error(p));
    else *out = t.total;
    calibrate_probe_close(p);
    return status ? 1 : 0;
}

/* The median forward + sampling time of RC's first RUNS steps into *CTX (a double). */
static int median_forward(void *ctx, const recorder *rc, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    double v[RUNS];
    int n = 0;
    for (size_t i = 0; i < rc->num_steps && n < RUNS; i++) v[n++] = rc->steps[i].forward_time + rc->steps[i].sample_time;
    *(double *)ctx = calibrate_median(v, n);
    return 0;
}

/* The engine's median forward + sampling time over RUNS requests of PROMPT tokens and one
 * output token each, served one at a time: one prefill step per request. */
static int engine_prefill(calib_options o, int prompt, double *out, char *err, size_t errlen)
{
    calibrate_size_pool(&o);
    engine_options eo = {.backend = o.kb, .sampling = {0, 0, 1}};
    eo.sched = (sched_config){.policy = POLICY_PAGED, .max_num_seqs = 1, .max_num_batched_tokens = prompt,
                              .block_size = o.block_size, .num_blocks = o.kb.num_blocks, .max_model_len = prompt + 1};
    engine_backend_options(&eo.sched, &eo.backend);
    wl_config wc = {.num_requests = RUNS, .arrival = ARRIVAL_CLOSED, .concurrency = 1, .num_prefixes = 1,
                    .trace_time_scale = 1, .vocab_size = o.kb.shape.vocab, .seed = 7};
    wc.prompt_len = (len_dist){DIST_FIXED, prompt, prompt, 0};
    wc.output_len = (len_dist){DIST_FIXED, 1, 1, 0};
    return engine_run_steps(&eo, &wc, median_forward, out, err, errlen);
}

int bench_serving(const char *preset, int threads)
{
    const model_shape *m = model_preset(preset);
    if (!m) {
        fprintf(stderr, "servesim: --serving %s: unknown model (known: %s)\n", preset, model_preset_names());
        return EXIT_BAD_INPUT;
    }
    calib_options o = serving_options(m, preset, threads);
    char err[1024];
    const int prompts[] = {64, 256};
    printf("servesim bench --serving %s: %d pairs of (probe: median of %d prefills, engine: %d one-step "
           "requests)\n  %-7s %12s %12s %8s\n", preset, PAIRS, RUNS, RUNS, "prompt", "probe (ms)", "engine (ms)", "ratio");
    for (int k = 0; k < 2; k++) {
        double ratio[PAIRS];
        for (int i = 0; i < PAIRS; i++) {
            double probe, engine;
            int status = probe_prefill(&o, prompts[k], &probe, err, sizeof err);
            if (status == 0) status = engine_prefill(o, prompts[k], &engine, err, sizeof err);
            if (status != 0) {
                fprintf(stderr, "servesim: %s\n", err);
                return status == 2 ? EXIT_BAD_INPUT : EXIT_FAILURE_OTHER;
            }
            ratio[i] = engine / probe;
            printf("  %-7d %12.3f %12.3f %8.3f\n", prompts[k], 1e3 * probe, 1e3 * engine, ratio[i]);
        }
        printf("  median engine/probe ratio at %d tokens: %.3f\n", prompts[k], calibrate_median(ratio, PAIRS));
    }
    return EXIT_OK;
}
