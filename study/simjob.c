#include "study/simjob.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "io/plot.h"
#include "io/results.h"
#include "io/interrupt.h"
#include "sim/draft_cost.h"
#include "study/job.h"

/* The API server the run priced (frontend.*), in ms, and how busy it was: its work over the
 * simulated time, per server; NULL when there is none. */
static json_t *frontend_json(const simjob *j, const scenario_resolved *r)
{
    const sim_frontend *f = &r->frontend;
    if (!sim_frontend_on(f)) return NULL;
    double span = j->stats.end_time * sim_frontend_servers(f);
    return json_pack("{s:s, s:f, s:f, s:f, s:i, s:f, s:o}", "preset", r->frontend_preset, "request_ms",
                     1e3 * f->request_s, "step_ms", 1e3 * f->step_s, "token_ms", 1e3 * f->token_s, "servers",
                     f->servers, "busy_s", j->stats.frontend_busy_s, "busy_fraction",
                     json_num(span > 0 ? j->stats.frontend_busy_s / span : NAN));
}

/* The deployment: GPUs per replica, replicas, the router, and the requests each was sent. A
 * disaggregated run's instances (r->replicas of them) are no replicas: it said "replicas": 3
 * for one prefill and two decode instances, its scenario's deployment.replicas being 1, and
 * counted each request in requests_per_replica twice; its instances array says it all. */
static json_t *deployment_json(const simjob *j, const scenario_resolved *r)
{
    json_t *o = json_object();
    bool disaggregated = r->prefill_instances > 0;
    if (!o || json_put(o, "gpus", json_integer((json_int_t)r->replicas * r->tensor_parallel)) |
            json_put(o, "tensor_parallel", json_integer(r->tensor_parallel)) |
            json_put(o, "prefill_instances", json_integer(r->prefill_instances)) |
            json_put(o, "decode_instances", json_integer(disaggregated ? r->replicas - r->prefill_instances : 0)) |
            (disaggregated ? 0 : json_put(o, "replicas", json_integer(r->replicas))) |
            json_put(o, "router", json_string(router_name(r->router)))) {
        json_decref(o);
        return NULL;
    }
    json_t *counts = j->replica_requests && !disaggregated ? json_put_array(o, "requests_per_replica") : NULL;
    if (j->replica_requests && !disaggregated && !counts) {
        json_decref(o);
        return NULL;
    }
    for (int i = 0; counts && i < r->replicas; i++)
        if (json_array_append_new(counts, json_integer(j->replica_requests[i])) < 0) {
            json_decref(o);
            return NULL;
        }
    /* each instance's work: requests, steps, tokens out, and the share of the run it was busy */
    json_t *inst = j->instances ? json_put_array(o, "instances") : NULL;
    for (int i = 0; inst && i < r->replicas; i++) {
        const sim_instance_stats *is = &j->instances[i];
        json_t *e = json_object();
        const char *role = !r->prefill_instances ? "replica" : i < r->prefill_instances ? "prefill" : "decode";
        if (!e || json_array_append_new(inst, e) < 0 ||
            (json_put(e, "instance", json_integer(i)) | json_put(e, "role", json_string(role)) |
             json_put(e, "requests", json_integer(j->replica_requests[i])) | json_put(e, "steps", json_integer(is->steps)) |
             json_put(e, "output_tokens", json_integer(is->output_tokens)) |
             json_put(e, "busy_fraction", json_real(j->stats.end_time > 0 ? is->busy_s / j->stats.end_time : 0)))) {
            json_decref(o);
            return NULL;
        }
    }
    const sim_stats *st = &j->stats;
    if (r->prefill_instances &&
        (json_put(o, "kv_transfers", json_integer(st->kv_transfers)) |
         json_put(o, "mean_kv_transfer_ms", json_real(st->kv_transfer_mean_s * 1e3)) |
         json_put(o, "p99_kv_transfer_ms", json_real(st->kv_transfer_p99_s * 1e3)) |
         json_put(o, "mean_decode_queue_ms", json_real(st->decode_wait_mean_s * 1e3)) |
         json_put(o, "p99_decode_queue_ms", json_real(st->decode_wait_p99_s * 1e3)))) {
        json_decref(o);
        return NULL;
    }
    return o;
}


/* What summary.json says besides the summary: what ran, on which cost model, the scenario. */
/* How a run speculated, when it did: the method, the draft model and what priced it, and the
 * acceptance the simulator drew from (what it measured is in the summary's spec_ fields). */
static json_t *speculative_json(const scenario_resolved *r, const job_spec *sp)
{
    json_t *o = job_speculative_json(r);
    if (!o || json_put(o, "acceptance_rate", json_real(r->acceptance_rate)) |
            json_put(o, "acceptance_spread", json_real(r->acceptance_spread)) |
            (sp->on ? json_put(o, "draft_cost_model", json_text(sp->model.kind)) |
                      json_put(o, "draft_cost_source", json_text(sp->model.source))
                    : 0)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

long long simjob_short_pool(const scenario_resolved *r)
{
    long long tokens = (long long)r->sched.num_blocks * r->sched.block_size;
    return tokens < r->sched.max_model_len ? tokens : -1;
}

/* vLLM refuses to start when its pool cannot hold one sequence of max_model_len; servesim
 * runs (rejecting what cannot fit) and says so, once a process. */
static void warn_short_pool(const scenario_resolved *r)
{
    static atomic_flag warned = ATOMIC_FLAG_INIT; /* a sweep's threads run jobs at once */
    long long tokens = simjob_short_pool(r);
    if (tokens < 0 || atomic_flag_test_and_set(&warned)) return;
    fprintf(stderr, "servesim: warning: the KV pool holds %lld tokens, less than one sequence of scheduler.max_model_len "
            "(%d); vLLM refuses to start so. Longer requests are rejected here (warned once)\n", tokens,
            r->sched.max_model_len);
}

/* kv.num_blocks is taken as given, even past what the GPU holds (a what-if); a pool larger
 * than the GPU's whole memory is more likely a slip, and servesim says so, once a process. */
static void warn_large_pool(const scenario_resolved *r)
{
    static atomic_flag warned = ATOMIC_FLAG_INIT;
    double gib = r->sched.num_blocks * scenario_kv_block_bytes(r) / (1 << 30);
    if (!r->kv_blocks_set || gib <= r->hw.mem_gib || atomic_flag_test_and_set(&warned)) return;
    fprintf(stderr, "servesim: warning: kv.num_blocks = %d is %.4g GiB of KV a GPU, more than the GPU's %g GiB of "
            "memory; the run takes the pool as given (warned once)\n",
            r->sched.num_blocks, gib, round(r->hw.mem_gib * 10) / 10);
}

double simjob_pool_bytes(const scenario_resolved *r)
{
    return sched_memory_bytes(&r->sched) * r->replicas;
}

/* Each replica's scheduler holds its own block pool, so a run's memory grows with replicas x
 * KV blocks whatever its load; past what the machine has, the kernel's OOM killer ended the
 * run without a word (4,096 replicas of a TP-8 70B took 24 GB and were killed). */
int simjob_check_pool_memory(const scenario_resolved *r, char *err, size_t errlen)
{
    size_t avail;
    char why[256];
    if (kb_host_memory_available(&avail, why, sizeof why) < 0) return 0; /* nothing to judge by */
    double need = simjob_pool_bytes(r);
    if (need <= (double)avail) return 0;
    const double gib = 1 << 30;
    size_t cap;
    bool capped = kb_memory_cap(&cap, why, sizeof why) > 0 && cap == avail;
    snprintf(err, errlen, "deployment.replicas = %d: the simulator holds a block pool of %d KV blocks for each "
             "replica, about %.3g GiB of this machine's memory for all %d (%.3g GiB each), and only %.3g GiB is "
             "available%s; lower deployment.replicas, or kv.num_blocks (a smaller pool), or %s",
             r->replicas, r->sched.num_blocks, need / gib, r->replicas, need / r->replicas / gib, (double)avail / gib,
             capped ? " (SERVESIM_MEMORY_GIB)" : "", capped ? "raise SERVESIM_MEMORY_GIB" : "run on a larger machine");
    return -1;
}

static json_t *summary_extra_json(const simjob *j, const scenario_resolved *r, const job_cost *cost,
                                  const job_spec *sp)
{
    json_t *obj = json_object(), *frontend = frontend_json(j, r);
    if (!obj || json_put(obj, "executor", json_string("simulator")) | json_put(obj, "seed", json_integer((json_int_t)r->workload.seed)) |
                    json_put(obj, "sim_events", json_integer((json_int_t)j->stats.events)) |
                    json_put(obj, "sim_steps", json_integer(j->stats.steps)) | job_cost_json(obj, cost) |
                    json_put(obj, "deployment", deployment_json(j, r)) | json_put(obj, "kv_cache", job_kv_cache_json(r, false)) |
                    json_put(obj, "scheduler", job_scheduler_json(r, r->async_scheduling)) |
                    (r->sched.num_speculative_tokens > 0 ? json_put(obj, "speculative", speculative_json(r, sp)) : 0) |
                    (frontend ? json_put(obj, "frontend", frontend) : 0) |
                    job_scenario_json(obj, j->sc)) {
        if (!obj) json_decref(frontend); /* else OBJ took it: the | operands all ran */
        json_decref(obj);
        return NULL;
    }
    return obj;
}

enum { TIMELINE_INSTANCES = 8, TIMELINE_POINTS = 40000 };

/* DIR/timeline.png from DIR/steps.csv: each instance's running and waiting requests and the
 * share of its KV blocks in use, step by step: where a router leaves one instance queueing
 * while another idles, or a decode side fills its KV. The first TIMELINE_INSTANCES instances
 * (a title says so when there are more); every K-th step when a run has many more than
 * TIMELINE_POINTS, which gnuplot would take long to draw and a PNG cannot show. */
static int plot_timeline(const char *dir, const scenario_resolved *r, int64_t steps, char *err, size_t errlen)
{
    int n = r->replicas < TIMELINE_INSTANCES ? r->replicas : TIMELINE_INSTANCES;
    long every = steps > TIMELINE_POINTS ? (long)((steps + TIMELINE_POINTS - 1) / TIMELINE_POINTS) : 1;
    char *buf = NULL, title[160];
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    /* rows of other instances are missing, not gaps: each instance's line runs through them */
    fputs("set datafile missing NaN\nset multiplot layout 3,1\nset xlabel 'time (s)'\n", f);
    const struct { const char *label, *expr; } panels[] = {
        {"running requests", "column('running')"},
        {"waiting requests", "column('waiting')"},
        {"KV blocks in use (%)", NULL},
    };
    for (int k = 0; k < 3; k++) {
        fprintf(f, "set ylabel '%s'\nplot ", panels[k].label);
        for (int i = 0; i < n; i++) {
            char name[48];
            if (r->prefill_instances)
                snprintf(name, sizeof name, "%s %d", i < r->prefill_instances ? "prefill" : "decode", i);
            else
                snprintf(name, sizeof name, "instance %d", i);
            fprintf(f, "%s'steps.csv' every %ld using 'start_time':(column('instance') == %d ? ", i ? ", " : "", every, i);
            if (panels[k].expr) fputs(panels[k].expr, f);
            else fprintf(f, "100.0 * (1 - column('num_free_blocks') / %d.0)", r->sched.num_blocks);
            fprintf(f, " : NaN) with steps linecolor %d title '%s'", i + 1, name);
        }
        fputc('\n', f);
    }
    fputs("unset multiplot\n", f);
    if (fclose(f) != 0) {
        free(buf);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (r->replicas > n) snprintf(title, sizeof title, "instances 0-%d of %d", n - 1, r->replicas);
    else snprintf(title, sizeof title, "%d instances", n);
    if (every > 1) snprintf(title + strlen(title), sizeof title - strlen(title), ", every %ld-th step", every);
    int rc = plot_script(dir, "timeline.png", title, 1000, 900, buf, err, errlen);
    free(buf);
    return rc;
}

static int write_results(simjob *j, const scenario_resolved *r, const job_cost *cost, const job_spec *sp,
                         res_dir *dir, char *err, size_t errlen)
{
    json_t *extra = summary_extra_json(j, r, cost, sp);
    if (!extra) {
        snprintf(err, errlen, "out of memory while writing summary.json");
        return -1;
    }
    int rc = res_write_summary(dir, &j->sum, extra, err, errlen);
    json_decref(extra);
    if (rc == 0 && j->timeline && r->replicas > 1) {
        if (fflush(dir->steps) != 0) {
            snprintf(err, errlen, "%s/steps.csv: write failed", dir->od.tmp_path);
            rc = -1;
        } else {
            rc = plot_timeline(dir->od.tmp_path, r, j->stats.steps, err, errlen);
        }
    }
    return rc == 0 ? res_commit(dir, err, errlen) : -1;
}

static int keep_records(simjob *j, const met_acc *met, char *err, size_t errlen)
{
    size_t n;
    const req_record *recs = met_requests(met, &n);
    j->records = malloc((n ? n : 1) * sizeof *recs);
    if (!j->records) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    memcpy(j->records, recs, n * sizeof *recs);
    j->num_records = n;
    return 0;
}

static int simulate(simjob *j, const scenario_resolved *r, workload *w, res_dir *dir, job_cost *jc,
                    job_spec *sp, char *err, size_t errlen)
{
    job_progress ps;
    job_progress_start(&ps, "simulating");
    sim_options o = {
        .sched = r->sched,
        .cost = job_cost_fn(jc),
        .num_replicas = r->replicas,
        .num_prefill = r->prefill_instances,
        .kv_latency_s = r->kv_latency_s,
        .kv_s_per_token = r->kv_s_per_token,
        .frontend = r->frontend,
        .async_scheduling = r->async_scheduling,
        .router = r->router,
        .replica_requests = j->replica_requests,
        .instances = j->instances,
        .progress = j->progress && isatty(2) ? job_progress_show : NULL,
        .progress_ctx = &ps,
        .stop = interrupt_flag(),
    };
    job_spec_options(sp, r, jc, &o);
    met_acc *met = met_create();
    if (met) met_set_percentiles(met, r->percentiles, r->num_percentiles);
    if (met && j->keep_records) met_keep_requests(met);
    recorder rc;
    rec_init(&rc, met, dir);
    int status = met ? sim_run(&o, w, &r->workload, &rc, &j->stats, err, errlen) : -1;
    if (status == 0 && !(j->stats.end_time <= WL_MAX_TIME)) {
        /* the last defence: a cost model whose prices run the clock past any meaning */
        snprintf(err, errlen, "the simulated clock ran to %g s, past %g s: a step costs more than any GPU takes (%s)",
                 j->stats.end_time, WL_MAX_TIME, jc->source);
        status = -2;
    }
    job_progress_end(&ps);
    if (!met) snprintf(err, errlen, "out of memory");
    if (status == 0) j->have_summary = met_summarize(met, &r->slo, &j->sum) == 0;
    if (status == 0) met_describe_rejected(met, r->sched.max_model_len, j->rejected, sizeof j->rejected);
    if (status == 0 && dir) status = write_results(j, r, jc, sp, dir, err, errlen);
    if (status == 0 && j->keep_records) status = keep_records(j, met, err, errlen);
    met_free(met);
    return status;
}

int simjob_run(simjob *j, char *err, size_t errlen)
{
    scenario_resolved r;
    if (scenario_resolve(j->sc, &r, err, errlen) < 0) return EXIT_BAD_INPUT;
    job_cost cost;
    if (job_cost_init(&cost, &r, err, errlen) < 0) return EXIT_BAD_INPUT;
    job_spec spec;
    if (job_spec_init(&spec, &r, err, errlen) < 0) {
        job_cost_free(&cost);
        return EXIT_BAD_INPUT;
    }
    workload w;
    if (wl_open(&r.workload, &w, err, errlen) < 0) {
        job_spec_free(&spec);
        job_cost_free(&cost);
        return EXIT_BAD_INPUT;
    }
    if (simjob_check_pool_memory(&r, err, errlen) < 0) {
        wl_free(&w);
        job_spec_free(&spec);
        job_cost_free(&cost);
        return EXIT_BAD_INPUT;
    }
    warn_short_pool(&r); /* before the run, which a pool past the GPU's memory may make long */
    warn_large_pool(&r);
    res_dir dir;
    int status = j->out_dir && res_open(&dir, j->out_dir, err, errlen) < 0 ? -1 : 0;
    bool opened = j->out_dir && status == 0;
    if (opened && r.token_times && res_open_tokens(&dir, err, errlen) < 0) status = -1;
    j->replica_requests = r.replicas > 1 ? calloc((size_t)r.replicas, sizeof *j->replica_requests) : NULL;
    j->instances = r.replicas > 1 ? calloc((size_t)r.replicas, sizeof *j->instances) : NULL;
    if (status == 0 && r.replicas > 1 && (!j->replica_requests || !j->instances)) {
        snprintf(err, errlen, "out of memory");
        status = -1;
    }
    if (status == 0) status = simulate(j, &r, &w, opened ? &dir : NULL, &cost, &spec, err, errlen);
    free(j->replica_requests);
    free(j->instances);
    j->replica_requests = NULL;
    j->instances = NULL;
    snprintf(j->cost_kind, sizeof j->cost_kind, "%s", cost.kind);
    snprintf(j->cost_source, sizeof j->cost_source, "%s", cost.source);
    scenario_frontend_describe(&r, j->frontend, sizeof j->frontend);
    scenario_kv_cache_describe(&r, j->kv_cache, sizeof j->kv_cache);
    scenario_scheduler_describe(&r, j->scheduler, sizeof j->scheduler);
    if (status < 0 && opened) res_abort(&dir);
    wl_free(&w);
    job_spec_free(&spec);
    job_cost_free(&cost);
    return status == -2 ? EXIT_BAD_INPUT : status < 0 ? EXIT_FAILURE_OTHER : EXIT_OK;
}
