/* Measured cost tables: finding the data directory, choosing the table for a GPU, a shape and
 * a vLLM version, the run's choice of cost model (measured, explicit table, roofline), and
 * every table committed in costs/: it loads, its shape is a preset's, its header carries its
 * provenance. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "study/job.h"
#include "cli/commands.h"
#include "config/measured.h"
#include "sim/table_cost.h"

static char tmpdir[256];

static void make_dirs(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/servesim-measured-%d", (int)getpid());
    char p[512];
    mkdir(tmpdir, 0755);
    snprintf(p, sizeof p, "%s/costs", tmpdir);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/costs/h200", tmpdir);
    mkdir(p, 0755);
    setenv("SERVESIM_DATA_DIR", tmpdir, 1);
}

static void teardown(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    cr_assert_eq(system(cmd), 0);
    unsetenv("SERVESIM_DATA_DIR");
}

static void shape_of(const char *preset, char *out, size_t len)
{
    model_shape_string(model_preset(preset), out, len);
}

/* A full-grid table whose every component is SCALE seconds, for SHAPE and vLLM VERSION, with
 * the header host_us_per_seq = HOST when not NULL. */
static void write_table_host(const char *file, const char *shape, const char *version, double scale, const char *tp,
                             const char *host)
{
    cost_table t;
    ct_init(&t);
    if (host) ct_set_meta(&t, "host_us_per_seq", host);
    char fw[64];
    snprintf(fw, sizeof fw, "vllm %s", version);
    ct_set_meta(&t, "shape", shape);
    if (tp) ct_set_meta(&t, "tensor_parallel", tp);
    ct_set_meta(&t, "framework", fw);
    ct_set_meta(&t, "device", "test");
    double xs[] = {1, 4096}, ys[] = {0, 8192};
    for (int i = 0; i < 2; i++) {
        ct_add(&t, CT_LINEAR, xs[i], 0, scale);
        ct_add(&t, CT_LM_HEAD, xs[i], 0, scale);
        ct_add(&t, CT_SAMPLE, xs[i], 0, scale);
        for (int j = 0; j < 2; j++) {
            ct_add(&t, CT_PREFILL_ATTN, xs[i], ys[j], scale);
            ct_add(&t, CT_DECODE_ATTN, xs[i], ys[j] + 1, scale);
        }
    }
    ct_add(&t, CT_OVERHEAD, 0, 0, scale);
    char path[600], err[256];
    snprintf(path, sizeof path, "%s/costs/h200/%s", tmpdir, file);
    cr_assert_eq(ct_write(&t, path, err, sizeof err), 0, "%s", err);
    ct_free(&t);
}

static void write_table_tp(const char *file, const char *shape, const char *version, double scale, const char *tp)
{
    write_table_host(file, shape, version, scale, tp, NULL);
}

static void write_table(const char *file, const char *shape, const char *version, double scale)
{
    write_table_tp(file, shape, version, scale, NULL);
}

TestSuite(measured, .init = make_dirs, .fini = teardown);

Test(measured, the_newest_version_by_number_not_by_text)
{
    char shape[256], path[1200], why[1200];
    shape_of("llama-3.1-8b", shape, sizeof shape);
    write_table("a.csv", shape, "0.9.2", 1);
    write_table("b.csv", shape, "0.24.0", 2);
    write_table("c.csv", shape, "0.14.0", 3);
    cr_assert_eq(measured_find("h200", shape, 1, false, false, "", path, sizeof path, why, sizeof why), 1, "%s", why);
    cr_assert(strstr(path, "/costs/h200/b.csv"), "0.24.0 is the newest: %s", path);
    cr_assert_eq(measured_find("h200", shape, 1, false, false, "0.9.2", path, sizeof path, why, sizeof why), 1);
    cr_assert(strstr(path, "/a.csv"));
    cr_assert_eq(measured_find("h200", shape, 1, false, false, "0.11.0", path, sizeof path, why, sizeof why), 0);
    cr_assert(strstr(why, "no measured table of vLLM 0.11.0"), "%s", why);
    cr_assert(strstr(why, "0.24.0") && strstr(why, "0.14.0"), "names the versions there are: %s", why);
}

Test(measured, another_shape_or_gpu_finds_nothing_and_says_why)
{
    char shape[256], other[256], path[1200], why[1200];
    shape_of("llama-3.1-8b", shape, sizeof shape);
    shape_of("qwen3-8b", other, sizeof other);
    write_table("a.csv", shape, "0.24.0", 1);
    cr_assert_eq(measured_find("h200", other, 1, false, false, "", path, sizeof path, why, sizeof why), 0);
    cr_assert(strstr(why, "covers this model's shape"), "%s", why);
    cr_assert_eq(measured_find("h100", shape, 1, false, false, "", path, sizeof path, why, sizeof why), 0);
    cr_assert(strstr(why, "no measured tables for h100"), "%s", why);
    setenv("SERVESIM_DATA_DIR", "/nonexistent", 1);
    cr_assert_eq(measured_find("h200", shape, 1, false, false, "", path, sizeof path, why, sizeof why), 0);
    cr_assert(strstr(why, "SERVESIM_DATA_DIR"), "%s", why);
}

Test(measured, a_run_takes_the_measured_table_else_says_why_it_priced_with_the_roofline)
{
    char shape[256], err[1024];
    shape_of("llama-3.1-8b", shape, sizeof shape);
    write_table("a.csv", shape, "0.24.0", 1e-3);
    scenario sc;
    scenario_defaults(&sc);
    cr_assert_eq(scenario_set(&sc, "model.preset=llama-3-8b", err, sizeof err), 0); /* same shape as 3.1 */
    scenario_resolved r;
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    job_cost c;
    cr_assert_eq(job_cost_init(&c, &r, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(c.kind, "measured");
    cr_assert(strstr(c.source, "costs/h200/a.csv"), "%s", c.source);
    /* every component is 1 ms: a decode step costs linear, lm_head, sample, decode_attn and
     * the overhead, five of them */
    request q;
    sched_item it = {.req = &q, .num_new_tokens = 1, .context_len = 100, .emits_token = true, .is_decode = true};
    sched_batch b = {.items = &it, .num_items = 1, .num_batched_tokens = 1, .num_decode_seqs = 1,
                     .decode_context_sum = 101, .num_outputs = 1};
    step_cost f = job_cost_fn(&c);
    cr_assert_float_eq(f.step_time(f.ctx, &b), 5e-3, 1e-12);
    job_cost_free(&c);
    /* hardware.step_overhead_ms replaces the table's overhead */
    cr_assert_eq(scenario_set(&sc, "hardware.step_overhead_ms=0", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0);
    cr_assert_eq(job_cost_init(&c, &r, err, sizeof err), 0);
    f = job_cost_fn(&c);
    cr_assert_float_eq(f.step_time(f.ctx, &b), 4e-3, 1e-12);
    cr_assert(strstr(c.source, "step overhead 0 ms (hardware.step_overhead_ms)"), "%s", c.source);
    job_cost_free(&c);
    /* keys only the roofline reads are named as ignored */
    cr_assert_eq(scenario_set(&sc, "hardware.compute_efficiency=0.1", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0);
    cr_assert_eq(job_cost_init(&c, &r, err, sizeof err), 0);
    cr_assert(strstr(c.source, "ignored, roofline only: hardware.compute_efficiency"), "%s", c.source);
    job_cost_free(&c);
    /* the roofline's FP8 peak beside bf16 weights is said to be unused, and with FP8 weights
     * named as the rate of their layers (review: it was silent) */
    scenario rf = sc;
    cr_assert_eq(scenario_set(&rf, "hardware.cost_model=roofline", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&rf, "hardware.fp8_tflops=1000", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&rf, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(job_cost_init(&c, &r, err, sizeof err), 0, "%s", err);
    cr_assert(strstr(c.source, ", hardware.fp8_tflops unused (the weights are not FP8: model.quantization = fp8 uses "
                               "it)"), "%s", c.source);
    job_cost_free(&c);
    cr_assert_eq(scenario_set(&rf, "model.quantization=fp8", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&rf, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(job_cost_init(&c, &r, err, sizeof err), 0, "%s", err);
    cr_assert(strstr(c.source, ", FP8 linear layers at 1000 TFLOP/s") && !strstr(c.source, "unused"), "%s", c.source);
    job_cost_free(&c);
    /* a model without a table, fp32, or cost_model = roofline: the roofline, and why */
    const char *cases[][2] = {{"model.preset=qwen3-8b", "covers this model's shape"},
                              {"model.dtype=fp32", "bf16 kernels"},
                              {"hardware.cost_model=roofline", "hardware.cost_model = roofline"}};
    for (size_t i = 0; i < 3; i++) {
        scenario s2;
        scenario_defaults(&s2);
        cr_assert_eq(scenario_set(&s2, cases[i][0], err, sizeof err), 0);
        cr_assert_eq(scenario_resolve(&s2, &r, err, sizeof err), 0, "%s", err);
        cr_assert_eq(job_cost_init(&c, &r, err, sizeof err), 0, "%s", err);
        cr_assert_str_eq(c.kind, "roofline", "%s", cases[i][0]);
        cr_assert(strstr(c.source, cases[i][1]), "%s: %s", cases[i][0], c.source);
        job_cost_free(&c);
    }
    /* a pinned vLLM version asks for a measured table: without one it is an error, not a roofline */
    cr_assert_eq(scenario_set(&sc, "hardware.vllm_version=0.11.0", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0);
    cr_assert_eq(job_cost_init(&c, &r, err, sizeof err), -1);
    cr_assert(strstr(err, "hardware.vllm_version = 0.11.0"), "%s", err);
    cr_assert_eq(scenario_set(&sc, "model.preset=qwen3-8b", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "hardware.vllm_version=0.24.0", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0);
    cr_assert_eq(job_cost_init(&c, &r, err, sizeof err), -1);
    cr_assert(strstr(err, "covers this model's shape"), "%s", err);
}

/* A step of 40 decodes of context 100, in Q and IT. */
static sched_batch forty_decodes(request *q, sched_item *it)
{
    for (int i = 0; i < 40; i++)
        it[i] = (sched_item){.req = &q[i], .num_new_tokens = 1, .context_len = 100, .emits_token = true, .is_decode = true};
    return (sched_batch){.items = it, .num_items = 40, .num_batched_tokens = 40, .num_decode_seqs = 40,
                         .decode_context_sum = 40 * 101, .num_outputs = 40};
}

/* What SC's cost model charges for B (the job's step price, host work included). */
static double step_price(const scenario *sc, const sched_batch *b)
{
    char err[1024];
    scenario_resolved r;
    cr_assert_eq(scenario_resolve(sc, &r, err, sizeof err), 0, "%s", err);
    job_cost c;
    cr_assert_eq(job_cost_init(&c, &r, err, sizeof err), 0, "%s", err);
    step_cost f = job_cost_fn(&c);
    double t = f.step_time(f.ctx, b);
    job_cost_free(&c);
    return t;
}

/* vLLM's host work per sequence: a table's header sets it, hardware.host_us_per_seq replaces
 * it; with async scheduling a step costs the larger of it and the table's price, without it
 * the sum; the roofline takes vLLM's measured figure, a draft model none. */
Test(measured, host_work_per_sequence_adds_to_a_step_or_hides_under_it)
{
    char shape[256], err[1024];
    shape_of("llama-3.1-8b", shape, sizeof shape);
    write_table_host("a.csv", shape, "0.24.0", 1e-3, NULL, "250");
    scenario sc;
    scenario_defaults(&sc);
    scenario_resolved r;
    cr_assert_eq(scenario_set(&sc, "model.preset=llama-3.1-8b", err, sizeof err), 0);
    /* a step of 40 decodes of context 100: linear, lm_head, sample, decode_attn and the
     * overhead are 1 ms each, 5 ms; the host's 40 x 250 us are 10 ms */
    request q[40];
    sched_item it[40];
    sched_batch b = forty_decodes(q, it);
    const struct { const char *set[2]; double want; const char *says; } cases[] = {
        {{"scheduler.async_scheduling=on", NULL}, 10e-3, "host work 250 us a sequence, beside the GPU's (async scheduling)"},
        {{"scheduler.async_scheduling=off", NULL}, 15e-3, "after the GPU's (no async scheduling)"},
        {{"scheduler.async_scheduling=on", "hardware.host_us_per_seq=100"}, 5e-3, "host work 100 us"},
        {{"scheduler.async_scheduling=off", "hardware.host_us_per_seq=100"}, 9e-3, "host work 100 us"},
        {{"scheduler.async_scheduling=off", "hardware.host_us_per_seq=0"}, 5e-3, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        scenario s2 = sc;
        for (int k = 0; k < 2 && cases[i].set[k]; k++)
            cr_assert_eq(scenario_set(&s2, cases[i].set[k], err, sizeof err), 0, "%s", err);
        cr_assert_eq(scenario_resolve(&s2, &r, err, sizeof err), 0, "%s", err);
        job_cost c;
        cr_assert_eq(job_cost_init(&c, &r, err, sizeof err), 0, "%s", err);
        step_cost f = job_cost_fn(&c);
        cr_assert_float_eq(f.step_time(f.ctx, &b), cases[i].want, 1e-12, "case %zu", i);
        if (cases[i].says) cr_assert(strstr(c.source, cases[i].says), "case %zu: %s", i, c.source);
        else cr_assert_null(strstr(c.source, "host work"), "case %zu: %s", i, c.source);
        job_cost_free(&c);
    }
    /* a table without the header (servesim calibrate's) has no host work */
    write_table("a.csv", shape, "0.24.0", 1e-3);
    cr_assert_eq(scenario_set(&sc, "scheduler.async_scheduling=off", err, sizeof err), 0);
    cr_assert_float_eq(step_price(&sc, &b), 5e-3, 1e-12);
    /* the roofline: vLLM's measured figure, added after its price */
    cr_assert_eq(scenario_set(&sc, "hardware.cost_model=roofline", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    job_cost c;
    cr_assert_eq(job_cost_init(&c, &r, err, sizeof err), 0, "%s", err);
    cr_assert_float_eq(c.host_s_per_seq, JOB_VLLM_HOST_S_PER_SEQ, 1e-15);
    step_cost f = job_cost_fn(&c);
    cr_assert_float_eq(f.step_time(f.ctx, &b), cost_step_time(&c.roofline, &b) + 40 * JOB_VLLM_HOST_S_PER_SEQ, 1e-12);
    job_cost_free(&c);
    /* a header that is not a number is refused, naming the table */
    write_table_host("a.csv", shape, "0.24.0", 1e-3, NULL, "11.1us");
    scenario_defaults(&sc);
    cr_assert_eq(scenario_set(&sc, "model.preset=llama-3.1-8b", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(job_cost_init(&c, &r, err, sizeof err), -1);
    cr_assert(strstr(err, "costs/h200/a.csv: host_us_per_seq \"11.1us\" is not a number"), "%s", err);
}

/* Sets SET in SC, opens its cost model and checks that its source says WANT. */
static void expect_source(scenario *sc, const char *set, const char *want)
{
    char err[1024];
    cr_assert_eq(scenario_set(sc, set, err, sizeof err), 0, "%s", err);
    scenario_resolved r;
    cr_assert_eq(scenario_resolve(sc, &r, err, sizeof err), 0, "%s", err);
    job_cost c;
    cr_assert_eq(job_cost_init(&c, &r, err, sizeof err), 0, "%s", err);
    cr_assert(strstr(c.source, want), "%s", c.source);
    job_cost_free(&c);
}

/* A table of llama-3.1-8b at TP 2 whose every component is 1 ms, with all-reduces of 4 ms,
 * fused ones of 2 ms when FUSED_MB is not NULL (the header allreduce_fusion_max_mb). */
static void write_tp2_table(const char *file, const char *fused_mb)
{
    char shape[256];
    shape_of("llama-3.1-8b", shape, sizeof shape);
    write_table_host(file, shape, "0.24.0", 1e-3, "2", "0");
    cost_table t;
    char path[600], err[256];
    snprintf(path, sizeof path, "%s/costs/h200/%s", tmpdir, file);
    cr_assert_eq(ct_read(&t, path, err, sizeof err), 0, "%s", err);
    for (int i = 0; i < 2; i++) {
        ct_add(&t, CT_ALLREDUCE, i ? 4096 : 1, 0, 4e-3);
        if (fused_mb) ct_add(&t, CT_ALLREDUCE_FUSED, i ? 4096 : 1, 0, 2e-3);
    }
    if (fused_mb) ct_set_meta(&t, "allreduce_fusion_max_mb", fused_mb);
    cr_assert_eq(ct_write(&t, path, err, sizeof err), 0, "%s", err);
    ct_free(&t);
}

/* vLLM's fused all-reduce (deployment.allreduce_fusion): auto takes it where the table prices
 * it, for steps whose all-reduce (tokens x hidden x 2 bytes) is at most the table's size or
 * deployment.allreduce_fusion_max_mb; on refuses a cost model that cannot price it. */
Test(measured, all_reduces_are_fused_up_to_vllms_size_where_the_table_prices_it, .init = make_dirs, .fini = teardown)
{
    write_tp2_table("a.csv", "1"); /* 1 MiB / (4096 x 2 bytes) = 128 tokens */
    request q[40];
    sched_item it[40];
    sched_batch b = forty_decodes(q, it);
    const struct { const char *set[2]; double want; const char *says; } cases[] = {
        {{NULL, NULL}, 7e-3, "all-reduce fused with its norm up to 128 tokens (1 MiB, vLLM's default)"},
        {{"deployment.allreduce_fusion=on", NULL}, 7e-3, "up to 128 tokens"},
        {{"deployment.allreduce_fusion=off", NULL}, 9e-3, NULL},
        {{"deployment.allreduce_fusion_max_mb=0.25", NULL}, 9e-3, "up to 32 tokens (0.25 MiB, deployment.allreduce_fusion_max_mb)"},
        /* the note survives the other keys that add to the source (it was overwritten) */
        {{"hardware.step_overhead_ms=1", "hardware.peak_tflops=500"}, 7e-3, "up to 128 tokens"},
        {{"deployment.allreduce_fusion_max_mb=0.3125", NULL}, 7e-3, "up to 40 tokens"},
        /* a size no step fits says so, where it said "up to 0 tokens" */
        {{"deployment.allreduce_fusion_max_mb=0", NULL}, 9e-3, "all-reduce not fused: one token's is more than 0 MiB"},
    };
    const double tokens[] = {128, 128, 0, 32, 128, 40, 0}; /* summary.json's allreduce_fused_max_tokens */
    char err[1024];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        scenario sc;
        scenario_defaults(&sc);
        cr_assert_eq(scenario_set(&sc, "model.preset=llama-3.1-8b", err, sizeof err), 0);
        cr_assert_eq(scenario_set(&sc, "deployment.tensor_parallel=2", err, sizeof err), 0);
        for (int k = 0; k < 2 && cases[i].set[k]; k++)
            cr_assert_eq(scenario_set(&sc, cases[i].set[k], err, sizeof err), 0, "%s", err);
        scenario_resolved r;
        cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
        job_cost c;
        cr_assert_eq(job_cost_init(&c, &r, err, sizeof err), 0, "case %zu: %s", i, err);
        step_cost f = job_cost_fn(&c);
        cr_assert_float_eq(f.step_time(f.ctx, &b), cases[i].want, 1e-12, "case %zu", i);
        if (cases[i].says) cr_assert(strstr(c.source, cases[i].says), "case %zu: %s", i, c.source);
        else cr_assert_null(strstr(c.source, "fused"), "case %zu: %s", i, c.source);
        json_t *o = json_object();
        cr_assert_eq(job_cost_json(o, &c), 0);
        cr_assert_eq(json_integer_value(json_object_get(o, "allreduce_fused_max_tokens")), (json_int_t)tokens[i], "case %zu", i);
        json_decref(o);
        job_cost_free(&c);
    }
    /* a table that prices no fused all-reduce: auto takes the other, on is refused */
    write_tp2_table("a.csv", NULL);
    scenario sc;
    scenario_defaults(&sc);
    cr_assert_eq(scenario_set(&sc, "model.preset=llama-3.1-8b", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "deployment.tensor_parallel=2", err, sizeof err), 0);
    cr_assert_float_eq(step_price(&sc, &b), 9e-3, 1e-12);
    scenario_resolved r;
    job_cost c;
    cr_assert_eq(scenario_set(&sc, "deployment.allreduce_fusion=on", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(job_cost_init(&c, &r, err, sizeof err), -1);
    cr_assert(strstr(err, "deployment.allreduce_fusion = on, but ") && strstr(err, "costs/h200/a.csv prices no fused all-reduce"),
              "%s", err);
    /* nor does the roofline; at TP 1 there is no all-reduce to fuse, and on is no error */
    cr_assert_eq(scenario_set(&sc, "hardware.cost_model=roofline", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(job_cost_init(&c, &r, err, sizeof err), -1);
    cr_assert(strstr(err, "the roofline prices no fused all-reduce"), "%s", err);
    cr_assert_eq(scenario_set(&sc, "deployment.tensor_parallel=1", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(job_cost_init(&c, &r, err, sizeof err), 0, "%s", err);
    job_cost_free(&c);
    /* a header that is not a size is refused, naming the table */
    write_tp2_table("a.csv", "1MB");
    scenario_defaults(&sc);
    cr_assert_eq(scenario_set(&sc, "model.preset=llama-3.1-8b", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "deployment.tensor_parallel=2", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(job_cost_init(&c, &r, err, sizeof err), -1);
    cr_assert(strstr(err, "costs/h200/a.csv: allreduce_fusion_max_mb \"1MB\" is not a size in MiB"), "%s", err);
    /* fused rows without vLLM's size: on needs deployment.allreduce_fusion_max_mb, and takes it */
    write_tp2_table("a.csv", "1");
    cost_table t;
    char path[600];
    snprintf(path, sizeof path, "%s/costs/h200/a.csv", tmpdir);
    cr_assert_eq(ct_read(&t, path, err, sizeof err), 0, "%s", err);
    for (int i = 0; i < t.num_meta; i++)
        if (strcmp(t.meta_key[i], "allreduce_fusion_max_mb") == 0) snprintf(t.meta_key[i], sizeof t.meta_key[i], "x");
    cr_assert_eq(ct_write(&t, path, err, sizeof err), 0, "%s", err);
    ct_free(&t);
    cr_assert_eq(scenario_set(&sc, "deployment.allreduce_fusion=on", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(job_cost_init(&c, &r, err, sizeof err), -1);
    cr_assert(strstr(err, "a.csv has no allreduce_fusion_max_mb header (vLLM's size for its GPU): give "
                          "deployment.allreduce_fusion_max_mb"), "%s", err);
    cr_assert_eq(scenario_set(&sc, "deployment.allreduce_fusion_max_mb=1", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(job_cost_init(&c, &r, err, sizeof err), 0, "%s", err);
    cr_assert_float_eq(c.table.fused_max_tokens, 128, 0);
    job_cost_free(&c);
    /* a size nothing fuses with is noted as ignored: one GPU, the roofline */
    cr_assert_eq(scenario_set(&sc, "deployment.tensor_parallel=1", err, sizeof err), 0);
    expect_source(&sc, "hardware.cost_model=roofline", "; ignored: deployment.allreduce_fusion = on, "
                  "deployment.allreduce_fusion_max_mb (the roofline prices no fused all-reduce)");
    /* ... and a table of one GPU, which has no all-reduce */
    char shape[256];
    shape_of("llama-3.1-8b", shape, sizeof shape);
    write_table("a.csv", shape, "0.24.0", 1e-3);
    expect_source(&sc, "hardware.cost_model=measured", "; ignored: deployment.allreduce_fusion = on, "
                  "deployment.allreduce_fusion_max_mb (one GPU, no all-reduce)");
    /* off with vLLM's default spelled out is no contradiction */
    cr_assert_eq(scenario_set(&sc, "deployment.allreduce_fusion=off", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "deployment.allreduce_fusion_max_mb=-1", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
}

/* The default scenario with SETS (N of them), resolved into R, and its cost model and drafting
 * opened in C and SP. */
static void open_with_draft(const char *const *sets, size_t n, scenario_resolved *r, job_cost *c, job_spec *sp)
{
    char err[1024];
    scenario sc;
    scenario_defaults(&sc);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(scenario_set(&sc, sets[i], err, sizeof err), 0, "%s", err);
    cr_assert_eq(scenario_resolve(&sc, r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(job_cost_init(c, r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(job_spec_init(sp, r, err, sizeof err), 0, "%s", err);
}

/* vLLM's fusion pass sizes its workspace by the served model's hidden size, and the draft
 * model's forwards go through it too: both stop fusing at the target's number of tokens (the
 * draft's own hidden gave it twice the target's at 70B over 8B). */
Test(committed_tables, a_draft_model_fuses_up_to_the_targets_token_count)
{
    const char *sets[] = {"model.preset=llama-3.1-70b", "deployment.tensor_parallel=4", "speculative.num_tokens=3",
                          "speculative.method=draft", "speculative.draft_model=llama-3.1-8b"};
    scenario_resolved r;
    job_cost c;
    job_spec sp;
    open_with_draft(sets, sizeof sets / sizeof sets[0], &r, &c, &sp);
    /* the committed H200 TP 4 tables: vLLM's 2 MiB over 8192 x 2 bytes is 128 tokens, for both */
    cr_assert_str_eq(c.kind, "measured");
    cr_assert_float_eq(c.table.fused_max_tokens, 128, 0, "%s", c.source);
    cr_assert_float_eq(sp.model.table.fused_max_tokens, 128, 0, "%s", sp.model.source);
    job_spec_free(&sp);
    job_cost_free(&c);
}

/* A measured table is found by shape: the default llama-3-8b is priced by llama-3.1-8b's,
 * which a user took for the wrong model (new-user trial); the source says whose it is */
Test(committed_tables, a_table_of_another_model_of_the_same_shape_says_so)
{
    scenario sc;
    scenario_defaults(&sc);
    scenario_resolved r;
    job_cost c;
    char err[1024];
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(job_cost_init(&c, &r, err, sizeof err), 0, "%s", err);
    cr_assert(strstr(c.source, "; llama-3.1-8b's table, the same shape as llama-3-8b;"), "%s", c.source);
    job_cost_free(&c);
    char set[64];
    snprintf(set, sizeof set, "model.preset=llama-3.1-8b");
    cr_assert_eq(scenario_set(&sc, set, err, sizeof err), 0, "%s", err);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(job_cost_init(&c, &r, err, sizeof err), 0, "%s", err);
    cr_assert_null(strstr(c.source, "'s table, the same shape"), "its own table: %s", c.source);
    job_cost_free(&c);
}

/* A draft model's forwards ride in the target's step, which does the host work */
Test(measured, a_draft_model_has_no_host_work_of_its_own)
{
    char err[1024];
    scenario sc;
    scenario_defaults(&sc);
    cr_assert_eq(scenario_set(&sc, "speculative.num_tokens=3", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "speculative.method=draft", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "hardware.cost_model=roofline", err, sizeof err), 0);
    scenario_resolved r;
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    job_spec sp;
    cr_assert_eq(job_spec_init(&sp, &r, err, sizeof err), 0, "%s", err);
    cr_assert(sp.on);
    cr_assert_eq(sp.model.host_s_per_seq, 0);
    cr_assert_null(strstr(sp.model.source, "host work"), "the draft's recorded source: %s", sp.model.source);
    job_spec_free(&sp);
    /* vLLM keeps async scheduling off beside n-gram or draft-model speculation unless told */
    cr_assert_not(r.async_scheduling);
    cr_assert_eq(scenario_set(&sc, "scheduler.async_scheduling=on", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert(r.async_scheduling, "a draft model may have it when asked");
    scenario_defaults(&sc);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert(r.async_scheduling, "on without speculation");
}

/* With async scheduling the host's work overlaps the whole step on the GPU, the draft
 * model's forwards with the target's: max(target + drafting, host); without, the sum. */
static double priced_step(const char *async, const char *host_us, double *gpu, double *draft)
{
    const char *sets[] = {"speculative.num_tokens=3", "speculative.method=draft", "hardware.cost_model=roofline",
                          async, host_us};
    scenario_resolved r;
    job_cost c;
    job_spec sp;
    open_with_draft(sets, sizeof sets / sizeof sets[0], &r, &c, &sp);
    sim_options o = {.cost = job_cost_fn(&c)};
    job_spec_options(&sp, &r, &c, &o);
    /* 4 decodes at context 100; drafting keeps state on the requests, so each price gets its own */
    request q[2][4];
    sched_item it[2][4];
    sched_batch b[2];
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < 4; i++) {
            q[k][i] = (request){.draft_computed = 100};
            it[k][i] = (sched_item){.req = &q[k][i], .num_new_tokens = 1, .context_len = 100, .emits_token = true,
                                    .is_decode = true};
        }
        b[k] = (sched_batch){.items = it[k], .num_items = 4, .num_batched_tokens = 4, .num_decode_seqs = 4,
                             .decode_context_sum = 4 * 101, .num_outputs = 4};
    }
    double t = o.cost.step_time(o.cost.ctx, &b[0]);
    t += o.draft.step_time(o.draft.ctx, &b[0]);
    *gpu = cost_step_time(&c.roofline, &b[1]);
    *draft = draft_cost_step_time(&sp.draft, &b[1]);
    job_spec_free(&sp);
    job_cost_free(&c);
    return t;
}

Test(measured, async_scheduling_hides_host_work_under_the_draft_models_forwards_too)
{
    double gpu, draft;
    /* 4 x 10 ms of host work outlasts the GPU's step: the step is the host's */
    double t = priced_step("scheduler.async_scheduling=on", "hardware.host_us_per_seq=10000", &gpu, &draft);
    cr_assert_gt(draft, 0);
    cr_assert_lt(gpu + draft, 40e-3);
    cr_assert_float_eq(t, 40e-3, 1e-12);
    /* host work between the target's and the whole step's: hidden, where max(target, host) + drafting was not */
    double between = (gpu + 0.5 * draft) / 4 * 1e6;
    char set[64];
    snprintf(set, sizeof set, "hardware.host_us_per_seq=%.17g", between);
    t = priced_step("scheduler.async_scheduling=on", set, &gpu, &draft);
    cr_assert_float_eq(t, gpu + draft, 1e-12);
    t = priced_step("scheduler.async_scheduling=off", "hardware.host_us_per_seq=10000", &gpu, &draft);
    cr_assert_float_eq(t, gpu + draft + 40e-3, 1e-12);
}

/* A table of one GPU of a tensor-parallel group prices only a run of that group size; an
 * explicit table of another size is refused, naming both. */
Test(measured, a_tensor_parallel_table_prices_only_its_group_size)
{
    char shape[256], err[1024], path[1200], why[1200];
    shape_of("llama-3.1-70b", shape, sizeof shape);
    write_table("one.csv", shape, "0.24.0", 1e-3);
    write_table_tp("four.csv", shape, "0.24.0", 2e-3, "4");
    cr_assert_eq(measured_find("h200", shape, 4, false, false, "", path, sizeof path, why, sizeof why), 1, "%s", why);
    cr_assert(strstr(path, "four.csv"), "%s", path);
    cr_assert_eq(measured_find("h200", shape, 1, false, false, "", path, sizeof path, why, sizeof why), 1, "%s", why);
    cr_assert(strstr(path, "one.csv"), "%s", path);
    cr_assert_eq(measured_find("h200", shape, 2, false, false, "", path, sizeof path, why, sizeof why), 0);
    cr_assert(strstr(why, "at tensor_parallel 2"), "%s", why);
    scenario sc;
    scenario_defaults(&sc);
    scenario_resolved r;
    job_cost c;
    cr_assert_eq(scenario_set(&sc, "model.preset=llama-3.1-70b", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "deployment.tensor_parallel=4", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(job_cost_init(&c, &r, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(c.kind, "measured");
    cr_assert(strstr(c.source, "four.csv"), "%s", c.source);
    job_cost_free(&c);
    /* at 2 GPUs there is no table: the roofline, with the group's all-reduce named */
    cr_assert_eq(scenario_set(&sc, "deployment.tensor_parallel=2", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(job_cost_init(&c, &r, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(c.kind, "roofline");
    cr_assert(strstr(c.source, "tensor parallel 2: all-reduce 4.4 us"), "%s", c.source);
    job_cost_free(&c);
    char set[700];
    snprintf(set, sizeof set, "hardware.cost_table=%s/costs/h200/four.csv", tmpdir);
    cr_assert_eq(scenario_set(&sc, set, err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(job_cost_init(&c, &r, err, sizeof err), -1);
    cr_assert(strstr(err, "measured at tensor_parallel 4, but the scenario's deployment.tensor_parallel is 2"), "%s", err);
    /* a one-GPU table with all-reduce rows had them charged to every step (bad-input
     * campaign): refused, since one GPU has none */
    cost_table t;
    snprintf(set, sizeof set, "%s/costs/h200/one.csv", tmpdir);
    cr_assert_eq(ct_read(&t, set, err, sizeof err), 0, "%s", err);
    ct_add(&t, CT_ALLREDUCE, 1, 0, 1e-5);
    ct_add(&t, CT_ALLREDUCE, 4096, 0, 1e-4);
    cr_assert_eq(ct_write(&t, set, err, sizeof err), 0, "%s", err);
    ct_free(&t);
    cr_assert_eq(scenario_set(&sc, "deployment.tensor_parallel=1", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "kv.num_blocks=1000", err, sizeof err), 0); /* 70B's weights fill the GPU */
    char table[sizeof "hardware.cost_table=" + sizeof set]; /* never cut */
    snprintf(table, sizeof table, "hardware.cost_table=%s", set);
    cr_assert_eq(scenario_set(&sc, table, err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(job_cost_init(&c, &r, err, sizeof err), -1);
    cr_assert(strstr(err, "one.csv: prices all-reduces (allreduce rows), but was measured on one GPU (tensor_parallel "
                          "not recorded), which has none"), "%s", err);
    /* a tensor_parallel header that is no count read as "measured at tensor_parallel 0"
     * (bad-input campaign) */
    cr_assert_eq(ct_read(&t, set, err, sizeof err), 0, "%s", err);
    ct_set_meta(&t, "tensor_parallel", "abc");
    cr_assert_eq(ct_write(&t, set, err, sizeof err), 0, "%s", err);
    ct_free(&t);
    cr_assert_eq(job_cost_init(&c, &r, err, sizeof err), -1);
    cr_assert(strstr(err, "one.csv: its tensor_parallel header \"abc\" is not a GPU count (1 to 4096)"), "%s", err);
}

/* Writes a table of SHAPE named NAME with the `quantization` (unless BF16_WEIGHTS) and (when KV
 * is not NULL) `kv_cache_dtype` headers an importer's FP8 table has; its path in PATH. */
static void write_fp8_table(const char *name, const char *shape, double s, bool bf16_weights, const char *kv,
                            char *path, size_t len)
{
    char err[1024];
    cost_table t;
    ct_init(&t);
    write_table(name, shape, "0.24.0", s);
    snprintf(path, len, "%s/costs/h200/%s", tmpdir, name);
    cr_assert_eq(ct_read(&t, path, err, sizeof err), 0, "%s", err);
    if (!bf16_weights) ct_set_meta(&t, "quantization", "fp8: test");
    if (kv) ct_set_meta(&t, "kv_cache_dtype", kv);
    cr_assert_eq(ct_write(&t, path, err, sizeof err), 0, "%s", err);
    ct_free(&t);
}

/* An FP8 table prices FP8 weights with the KV cache its `kv_cache_dtype` header names (fp8,
 * or the model's bf16 when it says auto or nothing), and a table without `quantization` whose
 * KV cache is fp8 bf16 weights beside an FP8 cache (those got the roofline until the importer
 * wrote such tables); without one that does, the roofline, saying why; an explicit table of
 * another precision is refused. */
Test(measured, an_fp8_table_prices_fp8_weights_with_its_own_kv_cache)
{
    char shape[256], err[1024], path[700], path_w[700], path_kv[700];
    shape_of("llama-3.1-8b", shape, sizeof shape);
    write_table("bf16.csv", shape, "0.24.0", 1e-3);
    write_fp8_table("fp8.csv", shape, 2e-3, false, "fp8 (test)", path, sizeof path);
    write_fp8_table("fp8-weights.csv", shape, 3e-3, false, "auto (test)", path_w, sizeof path_w);
    write_fp8_table("fp8-kv.csv", shape, 5e-3, true, "fp8 (test)", path_kv, sizeof path_kv);
    /* an FP8 table that names no KV cache type prices the model's bf16 one */
    char path_none[700];
    write_fp8_table("fp8-no-kv-header.csv", shape, 4e-3, false, NULL, path_none, sizeof path_none);
    cost_table t;
    ct_init(&t);
    cr_assert_eq(ct_read(&t, path_none, err, sizeof err), 0, "%s", err);
    cr_assert(measured_table_fp8_weights(&t) && !measured_table_fp8_kv(&t));
    ct_free(&t);
    unlink(path_none);
    /* `servesim presets` lists each precision by its own name (these tables name no model:
     * each is listed by its file's) */
    char listed[2048];
    measured_list("h200", listed, sizeof listed);
    cr_assert(strstr(listed, "fp8.csv (vllm 0.24.0; fp8 tp 1)"), "%s", listed);
    cr_assert(strstr(listed, "fp8-weights.csv (vllm 0.24.0; fp8 weights tp 1)"), "%s", listed);
    cr_assert(strstr(listed, "fp8-kv.csv (vllm 0.24.0; fp8 kv tp 1)"), "%s", listed);
    cr_assert(strstr(listed, "bf16.csv (vllm 0.24.0)"), "%s", listed);
    /* one model's tables listed together: its bf16 table at tp 1 said beside its FP8 ones */
    cost_table named;
    ct_init(&named);
    const char *files[] = {"bf16.csv", "fp8.csv"};
    for (int i = 0; i < 2; i++) {
        char p[700];
        snprintf(p, sizeof p, "%s/costs/h200/%s", tmpdir, files[i]);
        cr_assert_eq(ct_read(&named, p, err, sizeof err), 0, "%s", err);
        ct_set_meta(&named, "model", "one-model");
        cr_assert_eq(ct_write(&named, p, err, sizeof err), 0, "%s", err);
        ct_free(&named);
        ct_init(&named);
    }
    ct_free(&named);
    measured_list("h200", listed, sizeof listed);
    cr_assert(strstr(listed, "one-model (vllm 0.24.0; bf16 tp 1; fp8 tp 1)"), "%s", listed);
    const struct { const char *q, *kv, *kind, *what; } cases[] = {
        {"none", "auto", "measured", "bf16.csv"},
        {"fp8", "fp8", "measured", "/fp8.csv"},
        {"fp8", "auto", "measured", "fp8-weights.csv"},
        {"none", "fp8", "measured", "fp8-kv.csv"},
        {"none", "fp8", "roofline", "no measured table of this model on h200 at tensor_parallel 1 with bf16 weights and "
                                    "an FP8 KV cache"},
    };
    for (size_t i = 0; i < 5; i++) {
        if (i == 4) unlink(path_kv);
        scenario sc;
        scenario_defaults(&sc);
        char a[64], b[64];
        snprintf(a, sizeof a, "model.quantization=%s", cases[i].q);
        snprintf(b, sizeof b, "kv.cache_dtype=%s", cases[i].kv);
        cr_assert_eq(scenario_set(&sc, a, err, sizeof err), 0);
        cr_assert_eq(scenario_set(&sc, b, err, sizeof err), 0);
        scenario_resolved r;
        job_cost c;
        cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
        cr_assert_eq(job_cost_init(&c, &r, err, sizeof err), 0, "%s", err);
        cr_assert_str_eq(c.kind, cases[i].kind, "%s %s", cases[i].q, cases[i].kv);
        cr_assert(strstr(c.source, cases[i].what), "%s %s: %s", cases[i].q, cases[i].kv, c.source);
        job_cost_free(&c);
    }
    scenario sc;
    scenario_defaults(&sc);
    char set[800];
    snprintf(set, sizeof set, "hardware.cost_table=%s", path);
    cr_assert_eq(scenario_set(&sc, set, err, sizeof err), 0);
    scenario_resolved r;
    job_cost c;
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(job_cost_init(&c, &r, err, sizeof err), -1);
    cr_assert(strstr(err, "measured with FP8 weights and KV cache, but the scenario's model.quantization is none"), "%s", err);
    snprintf(set, sizeof set, "hardware.cost_table=%s", path_w);
    cr_assert_eq(scenario_set(&sc, set, err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "model.quantization=fp8", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "kv.cache_dtype=fp8", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(job_cost_init(&c, &r, err, sizeof err), -1);
    cr_assert(strstr(err, "measured with FP8 weights and a bf16 KV cache, but the scenario's model.quantization is fp8 "
                          "and kv.cache_dtype fp8"), "%s", err);
    write_fp8_table("fp8-kv.csv", shape, 5e-3, true, "fp8 (test)", path_kv, sizeof path_kv);
    snprintf(set, sizeof set, "hardware.cost_table=%s", path_kv);
    cr_assert_eq(scenario_set(&sc, set, err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "kv.cache_dtype=auto", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(job_cost_init(&c, &r, err, sizeof err), -1);
    cr_assert(strstr(err, "measured with bf16 weights and an FP8 KV cache, but the scenario's model.quantization is fp8 "
                          "and kv.cache_dtype auto"), "%s", err);
}

/* ---- the committed tables ---- */

static int visit_committed(void (*each)(const char *path, const char *gpu))
{
    char root[1024];
    snprintf(root, sizeof root, "%s/costs", SERVESIM_SOURCE_DIR);
    int n = 0;
    for (size_t h = 0; hw_preset_at(h); h++) {
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "ls '%s/%s'/*.csv 2>/dev/null", root, hw_preset_at(h)->name);
        FILE *p = popen(cmd, "r");
        char line[1200];
        while (p && fgets(line, sizeof line, p)) {
            line[strcspn(line, "\n")] = 0;
            each(line, hw_preset_at(h)->name);
            n++;
        }
        if (p) pclose(p);
    }
    return n;
}

static void check_committed(const char *path, const char *gpu)
{
    cost_table t;
    char err[512];
    cr_assert_eq(ct_read(&t, path, err, sizeof err), 0, "%s", err);
    const char *keys[] = {"device", "shape", "model", "source", "license", "framework", "gpu", "date",
                          "stand_in_elementwise", "stand_in_sample", "stand_in_overhead"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        cr_assert_not_null(ct_meta(&t, keys[i]), "%s: no %s in the header", path, keys[i]);
    cr_assert(strstr(ct_meta(&t, "source"), "aiconfigurator-core 0.12.0"), "%s", path);
    const hw_spec *hw = hw_preset(gpu);
    cr_assert_str_eq(ct_meta(&t, "gpu"), hw->db_system, "%s", path);
    /* its shape is its model preset's, and that preset is the one it names */
    const model_shape *m = model_preset(ct_meta(&t, "model"));
    cr_assert_not_null(m, "%s: model %s is not a preset", path, ct_meta(&t, "model"));
    char shape[256];
    shape_of(m->name, shape, sizeof shape);
    cr_assert_str_eq(ct_meta(&t, "shape"), shape, "%s", path);
    table_cost tc;
    cr_assert_eq(tc_init(&tc, &t, path, err, sizeof err), 0, "%s", err);
    /* every price finite and non-negative; a longer decode context never cheaper at the same batch, beyond
     * the timings' noise near the launch floor (half the floor a layer: B200 times one short
     * decode at 9 or 11 us, the B60 at 60 or 90 us) */
    for (int c = 0; c < CT_COUNT; c++)
        for (size_t i = 0; i < t.n[c]; i++)
            cr_assert(t.points[c][i].seconds >= 0 && isfinite(t.points[c][i].seconds), "%s", path);
    const grid *g = &tc.g[CT_DECODE_ATTN];
    cr_assert_not_null(ct_meta(&t, "attention_floor_s"), "%s", path);
    double slack = 0.5 * atof(ct_meta(&t, "attention_floor_s")) * m->num_layers;
    for (size_t i = 0; i < g->nx; i++)
        for (size_t j = 1; j < g->ny; j++)
            cr_assert(g->s[i * g->ny + j] >= 0.8 * g->s[i * g->ny + j - 1] - slack, "%s: decode %g x %g", path,
                      g->x[i], g->y[j]);
    tc_free(&tc);
    ct_free(&t);
}

Test(committed_tables, every_table_loads_with_its_provenance_and_a_preset_shape)
{
    cr_assert_gt(visit_committed(check_committed), 40, "the committed tables are missing");
}

Test(committed_tables, every_gpu_preset_has_tables_and_a_fitted_roofline)
{
    unsetenv("SERVESIM_DATA_DIR");
    for (size_t h = 0; hw_preset_at(h); h++) {
        const hw_spec *hw = hw_preset_at(h);
        char shape[256], path[1200], why[1200];
        shape_of("llama-3.1-8b", shape, sizeof shape);
        cr_assert_eq(measured_find(hw->name, shape, 1, false, false, "", path, sizeof path, why, sizeof why), 1, "%s: %s", hw->name, why);
        hw_fit f = hw_preset_fit(hw->name);
        cr_assert_gt(f.max_error, 0, "%s has no fitted roofline (servesim roofline-fit --write)", hw->name);
        cr_assert(f.compute_efficiency > 0 && f.compute_efficiency <= 1, "%s", hw->name);
    }
}

/* `servesim bench` read its default trace relative to the working folder and failed outside
 * the source tree; it takes it from the data folder now. */
Test(data_dir, bench_finds_its_default_trace_from_any_folder, .init = cr_redirect_stdout)
{
    cr_assert_eq(chdir("/"), 0);
    char *argv[] = {"bench", "--requests", "300", "--runs", "1"};
    cr_assert_eq(cmd_bench(5, argv), 0);
}
