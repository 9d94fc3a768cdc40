#include "study/job.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/measured.h"
#include "io/decimal.h"

double job_seconds_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (t.tv_nsec - t0->tv_nsec) * 1e-9;
}

void job_progress_start(job_progress *p, const char *verb)
{
    *p = (job_progress){.verb = verb};
    clock_gettime(CLOCK_MONOTONIC, &p->start);
}

void job_progress_show(void *ctx, size_t ended, size_t total)
{
    job_progress *p = ctx;
    double t = job_seconds_since(&p->start);
    if (t < 1.0) return;
    fprintf(stderr, "\r%s: %zu/%zu requests ended (%.0f%%), %.1f s", p->verb, ended, total,
            100.0 * ended / total, t);
    p->shown = true;
}

void job_progress_end(job_progress *p)
{
    if (p->shown) fputc('\n', stderr);
}

/* A step's price: the cost model's (the GPU's work and the fixed overhead) with vLLM's host
 * work for its sequences, which async scheduling does beside the GPU's, drafting included.
 * The simulator adds the drafting (job_draft_time) to what this returns. */
static double job_step_time(const void *ctx, const sched_batch *b)
{
    job_cost *c = (job_cost *)ctx;
    double gpu = c->use_table ? tc_step_time(&c->table, b) : cost_step_time(&c->roofline, b);
    double host = c->host_s_per_seq * b->num_items;
    /* drafting keeps state on the requests: priced once a step, here, and handed on */
    c->drafted = c->draft ? draft_cost_step_time(c->draft, b) : 0;
    /* max(GPU + drafting, host) less the drafting */
    return c->async_scheduling ? fmax(gpu, host - c->drafted) : gpu + host;
}

/* The drafting job_step_time priced for the same step (the simulator asks it second). */
static double job_draft_time(const void *ctx, const sched_batch *b)
{
    (void)b;
    return ((const job_cost *)ctx)->drafted;
}

static int check_table_shape(const cost_table *t, const scenario_resolved *r, const char *path, char *err,
                             size_t errlen)
{
    char want[256];
    model_shape_string(&r->model, want, sizeof want);
    const char *have = ct_meta(t, "shape");
    if (!have || strcmp(have, want) != 0) {
        snprintf(err, errlen, "%s: measured for the shape \"%s\", but the scenario's model is \"%s\"", path,
                 have ? have : "(none recorded)", want);
        return -1;
    }
    int tp = measured_table_tp(t);
    bool fp8_weights = measured_table_fp8_weights(t), fp8_kv = measured_table_fp8_kv(t);
    if (fp8_weights != r->fp8_weights || fp8_kv != r->fp8_kv) {
        snprintf(err, errlen, "%s: measured %s, but the scenario's model.quantization is %s and kv.cache_dtype %s", path,
                 measured_precision_words(fp8_weights, fp8_kv),
                 r->fp8_weights ? "fp8" : "none", r->fp8_kv ? "fp8" : "auto");
        return -1;
    }
    if (tp == 0) { /* it read as "measured at tensor_parallel 0" (bad-input campaign) */
        snprintf(err, errlen, "%s: its tensor_parallel header \"%s\" is not a GPU count (1 to 4096)", path,
                 ct_meta(t, "tensor_parallel"));
        return -1;
    }
    if (tp != r->tensor_parallel) {
        snprintf(err, errlen, "%s: measured at tensor_parallel %d, but the scenario's deployment.tensor_parallel is %d",
                 path, tp, r->tensor_parallel);
        return -1;
    }
    /* its all-reduces would be charged to every step of one GPU, which has none (bad-input campaign) */
    if (tp == 1 && (t->n[CT_ALLREDUCE] > 0 || t->n[CT_ALLREDUCE_FUSED] > 0)) {
        snprintf(err, errlen, "%s: prices all-reduces (%s rows), but was measured on one GPU (tensor_parallel %s), "
                 "which has none; a tensor-parallel group's table says its size in its tensor_parallel header",
                 path, t->n[CT_ALLREDUCE] > 0 ? "allreduce" : "allreduce_fused",
                 ct_meta(t, "tensor_parallel") ? "1" : "not recorded");
        return -1;
    }
    return 0;
}

/* ", vLLM host work X us a sequence ..." after C's source, when it has any */
static void describe_host(job_cost *c)
{
    size_t n = strlen(c->source);
    if (c->host_s_per_seq > 0 && n < sizeof c->source)
        snprintf(c->source + n, sizeof c->source - n, "; host work %.3g us a sequence, %s", c->host_s_per_seq * 1e6,
                 c->async_scheduling ? "beside the GPU's (async scheduling)" : "after the GPU's (no async scheduling)");
}

/* "; ignored: deployment.allreduce_fusion = on, deployment.allreduce_fusion_max_mb (WHY)"
 * after C's source, for what the scenario asked of a fusion that nothing prices */
static void note_unused_fusion_size(job_cost *c, const scenario_resolved *r, const char *why)
{
    size_t n = strlen(c->source);
    bool on = r->allreduce_fusion == 1, size = r->fusion_max_mb >= 0;
    if ((on || size) && n < sizeof c->source)
        snprintf(c->source + n, sizeof c->source - n, "; ignored: %s%s%s (%s)", on ? "deployment.allreduce_fusion = on" : "",
                 on && size ? ", " : "", size ? "deployment.allreduce_fusion_max_mb" : "", why);
}

/* vLLM's fused all-reduces (deployment.allreduce_fusion): steps whose all-reduce message
 * (tokens x hidden x the activations' bytes) is at most the threshold take the table's
 * allreduce_fused, the threshold deployment.allreduce_fusion_max_mb or else the table's
 * allreduce_fusion_max_mb (vLLM's default for its GPU and TP). T is the table's header.
 * Appends what it chose to C's source; -1 when fusion is asked for and the table cannot price it. */
static int use_fusion(job_cost *c, const scenario_resolved *r, const cost_table *t, const char *path, char *err,
                      size_t errlen)
{
    c->table.fused_max_tokens = 0;
    if (r->allreduce_fusion == 0) return 0;
    if (r->tensor_parallel == 1) { /* one GPU: no all-reduce */
        note_unused_fusion_size(c, r, "one GPU, no all-reduce");
        return 0;
    }
    const char *mb = ct_meta(t, "allreduce_fusion_max_mb");
    char *end = NULL;
    double table_mb = mb ? decimal_strtod(mb, &end) : -1;
    if (mb && (end == mb || *end || !(table_mb >= 0 && table_mb <= 1024))) {
        snprintf(err, errlen, "%s: allreduce_fusion_max_mb \"%s\" is not a size in MiB", path, mb);
        return -1;
    }
    double max_mb = r->fusion_max_mb >= 0 ? r->fusion_max_mb : table_mb;
    if (!tc_has(&c->table, CT_ALLREDUCE_FUSED) || max_mb < 0) {
        if (r->allreduce_fusion < 0) {
            note_unused_fusion_size(c, r, "the table prices no fused all-reduce");
            return 0;
        }
        snprintf(err, errlen, "deployment.allreduce_fusion = on, but %s %s", path,
                 !tc_has(&c->table, CT_ALLREDUCE_FUSED)
                     ? "prices no fused all-reduce (vLLM fuses them on Hopper and Blackwell GPUs; the measured "
                       "tables of those price it)"
                     : "has no allreduce_fusion_max_mb header (vLLM's size for its GPU): give "
                       "deployment.allreduce_fusion_max_mb");
        return -1;
    }
    /* vLLM's fusion pass sizes its workspace by the served model's hidden size, and a draft
     * model's forwards use it too (fusion_hidden, which job_spec_init keeps the target's) */
    int hidden = r->fusion_hidden > 0 ? r->fusion_hidden : r->model.hidden;
    c->table.fused_max_tokens = floor(max_mb * 1048576.0 / ((double)hidden * r->dtype_bytes));
    size_t n = strlen(c->source);
    const char *whose = r->fusion_max_mb >= 0 ? "deployment.allreduce_fusion_max_mb" : "vLLM's default";
    if (n < sizeof c->source && c->table.fused_max_tokens >= 1)
        snprintf(c->source + n, sizeof c->source - n, "; all-reduce fused with its norm up to %.0f tokens (%g MiB, %s)",
                 c->table.fused_max_tokens, max_mb, whose);
    else if (n < sizeof c->source)
        snprintf(c->source + n, sizeof c->source - n, "; all-reduce not fused: one token's is more than %g MiB (%s)",
                 max_mb, whose);
    return 0;
}

/* Reads the table at PATH into C (checking its shape against the scenario's model). */
static int use_table(job_cost *c, const scenario_resolved *r, const char *path, const char *shown, char *err,
                     size_t errlen)
{
    cost_table t;
    if (ct_read(&t, path, err, errlen) < 0) return -1;
    int rc = check_table_shape(&t, r, path, err, errlen);
    snprintf(c->device, sizeof c->device, "%s", ct_meta(&t, "device") ? ct_meta(&t, "device") : "unknown");
    const char *src = ct_meta(&t, "source"), *model = ct_meta(&t, "model");
    int n = snprintf(c->source, sizeof c->source, "%s (%s%s%s)", shown, c->device, src ? "; " : "", src ? src : "");
    /* a measured table is found by shape: llama-3-8b is priced by llama-3.1-8b's, which a user
     * took for the wrong model (new-user trial) */
    if (rc == 0 && model && r->model.name && strcmp(model, r->model.name) != 0 && n >= 0 && (size_t)n < sizeof c->source)
        n += snprintf(c->source + n, sizeof c->source - (size_t)n, "; %s's table, the same shape as %s", model,
                      r->model.name);
    /* a table's host work per sequence: the kernel database's carry vLLM's; servesim
     * calibrate's have none (their engine's host work is in their overhead and scales) */
    const char *host = ct_meta(&t, "host_us_per_seq");
    char *end = NULL;
    double host_us = host ? decimal_strtod(host, &end) : 0;
    if (rc == 0 && host && (end == host || *end || !(host_us >= 0 && host_us < 1e6))) {
        snprintf(err, errlen, "%s: host_us_per_seq \"%s\" is not a number of microseconds", path, host);
        rc = -1;
    }
    c->host_s_per_seq = r->host_s_per_seq >= 0 ? r->host_s_per_seq : host_us * 1e-6;
    if (rc == 0) rc = tc_init(&c->table, &t, path, err, errlen);
    if (rc == 0 && use_fusion(c, r, &t, path, err, errlen) < 0) {
        tc_free(&c->table);
        rc = -1;
    }
    n = (int)strlen(c->source); /* use_fusion added to it */
    ct_free(&t);
    c->use_table = rc == 0;
    /* hardware.step_overhead_ms, when given, replaces the table's per-step cost too */
    if (rc == 0 && r->step_overhead_s >= 0) {
        c->table.g[CT_OVERHEAD].s[0] = r->step_overhead_s;
        n += snprintf(c->source + n, sizeof c->source - (size_t)n, "; step overhead %g ms (hardware.step_overhead_ms)",
                      r->step_overhead_s * 1e3);
    }
    if (rc == 0 && r->roofline_keys_set[0] && (size_t)n < sizeof c->source)
        snprintf(c->source + n, sizeof c->source - (size_t)n, "; ignored, roofline only: %s", r->roofline_keys_set);
    if (rc == 0) describe_host(c);
    return rc;
}

int job_cost_init(job_cost *c, const scenario_resolved *r, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    c->async_scheduling = r->async_scheduling;
    c->host_s_per_seq = r->host_s_per_seq >= 0 ? r->host_s_per_seq : JOB_VLLM_HOST_S_PER_SEQ;
    cost_roofline_init(&c->roofline, &r->model, &r->hw, &r->roofline, r->dtype_bytes, r->tensor_parallel);
    cost_roofline_quantize(&c->roofline, r->fp8_weights, r->fp8_kv);
    if (r->cost_table_path[0]) {
        c->kind = "table";
        return use_table(c, r, r->cost_table_path, r->cost_table_path, err, errlen);
    }
    char why[1200] = "hardware.cost_model = roofline";
    if (r->measured) {
        char shape[256], path[1200];
        model_shape_string(&r->model, shape, sizeof shape);
        int found = 0;
        if (r->dtype_bytes != 2)
            snprintf(why, sizeof why, "measured tables are of bf16 kernels, model.dtype is fp32");
        else
            found = measured_find(r->hw.name, shape, r->tensor_parallel, r->fp8_weights, r->fp8_kv, r->vllm_version,
                                  path, sizeof path, why, sizeof why);
        if (found) {
            c->kind = "measured";
            char data[4096];
            size_t n = measured_data_dir(data, sizeof data) == 0 ? strlen(data) : 0;
            return use_table(c, r, path, strncmp(path, data, n) == 0 ? path + n : path, err, errlen);
        }
        if (r->vllm_version[0]) { /* a pinned version is a request for a measured table */
            snprintf(err, errlen, "hardware.vllm_version = %s: %s", r->vllm_version, why);
            return -1;
        }
    }
    if (r->allreduce_fusion == 1 && r->tensor_parallel > 1) {
        snprintf(err, errlen, "deployment.allreduce_fusion = on, but the roofline prices no fused all-reduce (%s); "
                 "a measured table that does is needed (Hopper and Blackwell GPUs' at the group sizes the database "
                 "times)", why);
        return -1;
    }
    c->kind = "roofline";
    snprintf(c->device, sizeof c->device, "%s roofline", r->hw.name);
    const roofline_params *p = &r->roofline;
    char tp[400] = "";
    int n = 0;
    if (r->tensor_parallel > 1)
        n = snprintf(tp, sizeof tp, ", tensor parallel %d: all-reduce %g us + 2 (tp-1)/tp x bytes / %g GB/s",
                     r->tensor_parallel, r->hw.allreduce_us, r->hw.link_gbs);
    if (r->fp8_weights && n >= 0 && (size_t)n < sizeof tp) {
        char units[48] = " (weights only: no FP8 units)";
        if (r->hw.fp8_tflops > 0) snprintf(units, sizeof units, " at %g TFLOP/s", r->hw.fp8_tflops);
        n += snprintf(tp + n, sizeof tp - (size_t)n, ", FP8 linear layers%s%s", units,
                      r->roofline_fit_fp8 ? ", efficiencies fitted to the GPU's FP8 tables" : "");
    }
    /* the FP8 peak prices FP8 weights only: given beside model.dtype weights it would be
     * unused without a word (review) */
    if (!r->fp8_weights && strstr(r->roofline_keys_set, "hardware.fp8_tflops") && n >= 0 && (size_t)n < sizeof tp)
        n += snprintf(tp + n, sizeof tp - (size_t)n, ", hardware.fp8_tflops unused (the weights are not FP8: "
                      "model.quantization = fp8 uses it)");
    if (r->fp8_kv && n >= 0 && (size_t)n < sizeof tp) snprintf(tp + n, sizeof tp - (size_t)n, ", FP8 KV cache");
    snprintf(c->source, sizeof c->source,
             "%s roofline: %g TFLOP/s x %.2f, %g GB/s x %.2f, attention x %.2f, %.3g ms per step%s (%s)",
             r->hw.name, r->hw.peak_tflops, p->compute_efficiency, r->hw.mem_bandwidth_gbs, p->memory_efficiency,
             p->attention_efficiency, p->step_overhead_s * 1e3, tp, why);
    if (r->allreduce_fusion != 0) note_unused_fusion_size(c, r, "the roofline prices no fused all-reduce");
    describe_host(c);
    return 0;
}

void job_cost_describe(const scenario *sc, char *out, size_t len)
{
    scenario_resolved r;
    job_cost c;
    char err[1024];
    if (scenario_resolve(sc, &r, err, sizeof err) < 0 || job_cost_init(&c, &r, err, sizeof err) < 0) {
        snprintf(out, len, "? (%s)", err);
        return;
    }
    snprintf(out, len, "%s, %s", c.kind, c.source);
    job_cost_free(&c);
}

void job_scheduler_note(const scenario *sc, char *out, size_t len)
{
    /* from the keys, not a resolved scenario: plan's base may not fit one GPU as it stands */
    bool chunked = sc->v[K_scheduler_chunked_prefill].b, prefix = sc->v[K_scheduler_prefix_caching].b;
    *out = 0;
    if (strcmp(sc->v[K_scheduler_policy].s, "paged") != 0 || (chunked && prefix)) return;
    snprintf(out, len,
             "Scheduler: chunked prefill %s, prefix caching %s, as the scenario sets them; vLLM's V1 engine, and "
             "servesim by default, have both on.",
             chunked ? "on" : "off", prefix ? "on" : "off");
}

int job_spec_init(job_spec *sp, const scenario_resolved *r, char *err, size_t errlen)
{
    memset(sp, 0, sizeof *sp);
    if (r->sched.num_speculative_tokens == 0 || !r->spec_draft_model) return 0;
    scenario_resolved d = *r;
    d.model = r->draft_model;
    d.fp8_weights = false;
    d.fp8_kv = false;
    d.cost_table_path[0] = 0; /* hardware.cost_table is the target's */
    d.host_s_per_seq = 0;     /* the target's step does the host work of its sequences */
    if (d.allreduce_fusion == 1) d.allreduce_fusion = -1; /* the draft's table may not price it */
    char why[1024];
    if (job_cost_init(&sp->model, &d, why, sizeof why) < 0) {
        snprintf(err, errlen, "speculative.draft_model (%s): %s", d.model.name, why);
        return -1;
    }
    draft_cost_init(&sp->draft, job_cost_fn(&sp->model), job_cost_step_overhead(&sp->model),
                    r->sched.num_speculative_tokens);
    sp->on = true;
    return 0;
}

void job_spec_free(job_spec *sp)
{
    if (!sp->on) return;
    draft_cost_free(&sp->draft);
    job_cost_free(&sp->model);
    sp->on = false;
}

void job_spec_options(job_spec *sp, const scenario_resolved *r, job_cost *c, sim_options *o)
{
    o->acceptance_rate = r->acceptance_rate;
    o->acceptance_spread = r->acceptance_spread;
    o->acceptance_seed = r->workload.seed;
    c->draft = sp->on ? &sp->draft : NULL;
    o->draft = sp->on ? (step_cost){.step_time = job_draft_time, .ctx = c} : (step_cost){0};
}

json_t *job_speculative_json(const scenario_resolved *r)
{
    json_t *o = json_object();
    if (!o || json_put(o, "num_tokens", json_integer(r->sched.num_speculative_tokens)) |
            json_put(o, "method", json_string(r->spec_draft_model ? "draft" : "ngram")) |
            json_put(o, "disable_by_batch_size", json_integer(r->sched.spec_disable_by_batch_size)) |
            (r->spec_draft_model ? json_put(o, "draft_model", json_string(r->draft_model.name))
                                 : json_put(o, "prompt_lookup_min", json_integer(r->prompt_lookup_min)) |
                                   json_put(o, "prompt_lookup_max", json_integer(r->prompt_lookup_max)))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *job_scheduler_json(const scenario_resolved *r, bool async_scheduling)
{
    const sched_config *c = &r->sched;
    return json_pack("{s:s, s:b, s:b, s:i, s:s, s:i, s:s, s:i, s:b}", "policy", sched_policy_name(c->policy),
                     "chunked_prefill", c->chunked_prefill, "prefix_caching", c->prefix_caching, "max_num_seqs",
                     c->max_num_seqs, "max_num_seqs_source", r->seqs_from_vllm ? "vllm_default" : "scenario",
                     "max_num_batched_tokens", c->max_num_batched_tokens, "max_num_batched_tokens_source",
                     r->budget_from_vllm ? "vllm_default" : "scenario", "max_model_len", c->max_model_len,
                     "async_scheduling", async_scheduling);
}

json_t *job_kv_cache_json(const scenario_resolved *r, bool engine)
{
    json_t *o = json_pack("{s:i, s:i, s:I}", "blocks", r->sched.num_blocks, "block_size", r->sched.block_size,
                          "tokens", (json_int_t)r->sched.num_blocks * r->sched.block_size);
    const char *source = r->kv_blocks_set ? "kv.num_blocks" : engine ? "engine.kv_gib" : "derived";
    /* the simulated GPU's share, and what the derivation left out beside the weights, and whence */
    if (!o || (!engine && json_put(o, "gib_per_gpu", json_real(r->sched.num_blocks * scenario_kv_block_bytes(r) /
                                                               (1 << 30)))) ||
        json_put(o, "source", json_string(source)) ||
        (!engine && !r->kv_blocks_set &&
         (json_put(o, "reserve_gib", json_real(scenario_kv_reserve_bytes(r) / (1 << 30))) ||
          json_put(o, "reserve_source", json_string(r->kv_reserve_gib >= 0 ? "kv.reserve_gib" : "estimated"))))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int job_cost_json(json_t *obj, const job_cost *c)
{
    /* steps of up to this many tokens took vLLM's fused all-reduce (0: none did) */
    double fused = c->use_table ? c->table.fused_max_tokens : 0;
    return json_put(obj, "cost_model", json_text(c->kind)) | json_put(obj, "cost_source", json_text(c->source)) |
           json_put(obj, "allreduce_fused_max_tokens", json_integer((json_int_t)fused));
}

step_cost job_cost_fn(job_cost *c)
{
    return (step_cost){.step_time = job_step_time, .ctx = c};
}

double job_cost_step_overhead(const job_cost *c)
{
    return c->use_table ? c->table.g[CT_OVERHEAD].s[0] : c->roofline.p.step_overhead_s;
}

void job_cost_free(job_cost *c)
{
    if (c->use_table) tc_free(&c->table);
    c->use_table = false;
}

int job_check_admission(const scenario_resolved *r, const workload *w, size_t *rejected, char *err, size_t errlen)
{
    wl_iter *it = wl_iter_open(w);
    if (!it) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    size_t measured = 0, too_long = 0, too_big = 0;
    int shortest = INT_MAX, least = INT_MAX;
    wl_request q;
    while (wl_iter_next(it, &q) == 1) {
        if (q.warmup) continue;
        measured++;
        stop_reason why = sched_rejects(&r->sched, q.prompt_len, q.output_len);
        if (why == STOP_NONE) continue;
        if (why == STOP_TOO_LONG) {
            too_long++;
            shortest = q.prompt_len + q.output_len < shortest ? q.prompt_len + q.output_len : shortest;
        } else {
            too_big++;
            least = q.prompt_len + q.output_len - 1 < least ? q.prompt_len + q.output_len - 1 : least;
        }
    }
    wl_iter_close(it);
    if (rejected) *rejected = too_long + too_big;
    if (measured == 0 || too_long + too_big < measured) return 0;
    char longer[200] = "", bigger[300] = "";
    if (too_long)
        snprintf(longer, sizeof longer, "%zu longer than scheduler.max_model_len (%d tokens) in prompt + output (the "
                 "shortest %d)", too_long, r->sched.max_model_len, shortest);
    if (too_big)
        snprintf(bigger, sizeof bigger, "%s%zu needing more KV than the whole pool holds, %d block%s x %d tokens = %lld "
                 "(kv.num_blocks x kv.block_size; the least needs %d: its prompt and all but its last output token)",
                 too_long ? "; " : "", too_big, r->sched.num_blocks, r->sched.num_blocks == 1 ? "" : "s",
                 r->sched.block_size, (long long)r->sched.num_blocks * r->sched.block_size, least);
    snprintf(err, errlen, "the scheduler rejects every one of the %zu measured requests, so none would finish: %s%s",
             measured, longer, bigger);
    return -1;
}

int job_scenario_json(json_t *obj, const scenario *sc)
{
    return json_put(obj, "scenario_file", json_text(sc->path)) | json_put(obj, "scenario", scenario_json(sc));
}

int job_write_results(res_dir *dir, const summary *sum, const json_t *extra, char *err, size_t errlen)
{
    if (res_write_summary(dir, sum, extra, err, errlen) < 0) return -1;
    return res_commit(dir, err, errlen);
}
