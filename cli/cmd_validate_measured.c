/* `servesim validate --measured`: the requests a real server served (from `servesim load`,
 * `servesim engine`, or vLLM's saved benchmark), simulated with the scenario's cost model at
 * the times they were sent, and compared metric by metric. This is how a user with a GPU
 * checks servesim against their own vLLM. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/commands.h"
#include "core/sched.h"
#include "io/outdir.h"
#include "io/results.h"
#include "load/measured.h"
#include "metrics/compare.h"
#include "sim/sim.h"
#include "study/job.h"

/* The per-token acceptance rate a at which K drafts a step keep SHARE of them on average:
 * share(a) = (a + a^2 + ... + a^K) / K rises from 0 to 1, so bisection finds it. */
static double acceptance_for_share(double share, int k)
{
    double lo = 0, hi = 1;
    for (int i = 0; i < 60; i++) {
        double a = (lo + hi) / 2, kept = 0, p = 1;
        for (int j = 0; j < k; j++) kept += p *= a;
        if (kept / k < share) lo = a;
        else hi = a;
    }
    return (lo + hi) / 2;
}

/* The measured requests (failed ones left out) as a list workload. A request the scenario's
 * own workload also generated (same id and lengths: the run was `servesim load` of this
 * scenario) keeps its prompt, so shared prefixes hit the cache as they did on the server. */
static int measured_workload(const measured_run *m, const scenario_resolved *r, workload *w, size_t *excluded,
                             size_t *rejected, char *err, size_t errlen)
{
    workload base = {0};
    char why[512];
    bool have_base = wl_build(&r->workload, &base, why, sizeof why) == 0;
    *w = (workload){.vocab_size = r->workload.vocab_size, .prefix_seed = have_base ? base.prefix_seed : 0,
                    .cfg = r->workload};
    w->reqs = calloc(m->n ? m->n : 1, sizeof *w->reqs);
    if (!w->reqs) {
        wl_free(&base);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    *excluded = 0;
    for (size_t i = 0; i < m->n; i++) {
        const req_record *q = &m->reqs[i];
        if (q->stop != STOP_LENGTH) {
            (*excluded)++;
            continue;
        }
        wl_request *x = &w->reqs[w->n++];
        *x = (wl_request){.id = q->request_id, .arrival_time = q->arrival_time, .prompt_len = q->prompt_len,
                          .output_len = q->output_len, .prefix_id = -1, .token_seed = wl_mix64((uint64_t)q->request_id),
                          .warmup = q->warmup};
        if (q->draft_tokens > 0 && r->sched.num_speculative_tokens > 0) {
            /* the engine speculated: each request's kept share, as the per-token rate that
             * keeps that share of num_tokens drafts (steps that drafted fewer, near an
             * output's end or where prompt lookup found less, are not told apart) */
            x->has_acceptance_rate = true;
            x->acceptance_rate = acceptance_for_share((double)q->accepted_tokens / q->draft_tokens,
                                                      r->sched.num_speculative_tokens);
        }
        const wl_request *b = have_base && q->request_id >= 0 && (size_t)q->request_id < base.n ? &base.reqs[q->request_id] : NULL;
        if (b && b->prompt_len == q->prompt_len && b->output_len == q->output_len) {
            x->prefix_id = b->prefix_id;
            x->prefix_len = b->prefix_len;
            x->token_seed = b->token_seed;
        }
        if (!m->have_arrivals) {
            if (!have_base || i >= base.n) {
                /* the count before wl_free, which zeroes it (the message once said 0) */
                snprintf(err, errlen, "the measured file has no send times (start_times), and the scenario's workload "
                                      "has fewer requests (%zu) than it (%zu) to take them from", base.n, m->n);
                wl_free(&base);
                return -1;
            }
            x->arrival_time = base.reqs[i].arrival_time;
        }
    }
    wl_free(&base);
    if (w->n == 0) {
        snprintf(err, errlen, "no request of the measured run finished");
        return -1;
    }
    /* nothing to compare: the simulator's summary failed, and the command with it, exit 1 and
     * "servesim: " alone (bad-input campaign) */
    size_t warmups = 0;
    for (size_t i = 0; i < w->n; i++) warmups += w->reqs[i].warmup;
    if (warmups == w->n) {
        snprintf(err, errlen, "every request of the measured run that finished (%zu) is a warm-up (requests.csv's "
                 "warmup 1): none is left to compare", w->n);
        return -1;
    }
    /* the same where the scenario's scheduler would reject every one (a prompt longer than
     * scheduler.max_model_len, or than the KV pool) */
    /* and where it rejects some, the simulated side counts fewer requests than the measured
     * one, which the report says (they were compared without a word) */
    if (job_check_admission(r, w, rejected, err, errlen) < 0) return -1;
    if (m->have_arrivals) {
        /* replay the send times as they were: they already hold any closed loop or cap */
        w->cfg.arrival = ARRIVAL_TRACE;
        w->cfg.max_concurrency = 0;
    }
    return 0;
}

static int by_id(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The measured side's summary, from its records and token gaps. A request the scenario's
 * scheduler rejects (ADMIT: past scheduler.max_model_len or the pool) is recorded as the
 * simulated side records it, rejected, its gaps left out: its latencies had been compared on
 * the measured side alone. */
static int measured_summary(const measured_run *m, const sched_config *admit, const slo_config *slo, met_acc **met,
                            summary *s)
{
    *met = met_create();
    int64_t *kept = malloc((m->n ? m->n : 1) * sizeof *kept);   /* their ids, sorted */
    if (!*met || !kept) {
        free(kept);
        return -1;
    }
    met_keep_requests(*met);
    bool window = false;
    size_t n = 0;
    for (size_t i = 0; i < m->n; i++) {
        req_record q = m->reqs[i];
        if (q.stop != STOP_LENGTH) continue;
        stop_reason rejected = sched_rejects(admit, q.prompt_len, q.output_len);
        if (rejected != STOP_NONE) /* recorded as the simulator records it: ended at its arrival */
            q = (req_record){.request_id = q.request_id, .arrival_time = q.arrival_time, .scheduled_prefill_time = NAN,
                             .first_token_time = NAN, .finish_time = q.arrival_time, .prompt_len = q.prompt_len,
                             .stop = rejected, .warmup = q.warmup};
        else kept[n++] = q.request_id;
        if (!window && !q.warmup) {
            met_set_window_start(*met, q.arrival_time);
            window = true;
        }
        met_on_request(*met, &q);
    }
    qsort(kept, n, sizeof *kept, by_id);
    for (size_t i = 0; i < m->num_itl; i++)
        if (bsearch(&m->itl_request_id[i], kept, n, sizeof *kept, by_id)) met_on_itl(*met, m->itl[i]);
    free(kept);
    return met_summarize(*met, slo, s);
}

static const char *const shown[] = {
    "mean_ttft_ms", "p50_ttft_ms", "p90_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "p50_tpot_ms", "p90_tpot_ms",
    "p99_tpot_ms", "mean_itl_ms", "p50_itl_ms", "p90_itl_ms", "p99_itl_ms", "mean_e2el_ms", "p50_e2el_ms",
    "p90_e2el_ms", "p99_e2el_ms", "request_throughput", "output_throughput",
};
enum { NUM_SHOWN = sizeof shown / sizeof *shown };

static double limit_for(const scenario *sc, const char *metric)
{
    if (strstr(metric, "throughput")) return sc->v[K_validate_max_throughput_error].d;
    if (strncmp(metric, "p99", 3) == 0) return sc->v[K_validate_max_p99_error].d;
    if (strncmp(metric, "p50", 3) == 0) return sc->v[K_validate_max_median_error].d;
    return INFINITY;   /* means and P90s are reported, not judged */
}

/* Metrics the measured run cannot give: ITL without token times; throughput without send
 * times (its duration would be its longest request, not the run). */
static bool skipped(const measured_run *m, const char *metric)
{
    return (!m->have_itl && strstr(metric, "_itl_")) || (!m->have_arrivals && strstr(metric, "throughput"));
}

static int write_report(const outdir *od, const scenario *sc, const char *path, const measured_run *m, size_t excluded,
                        size_t rejected, const char *cost, const cmp_result *c, bool passed, char *err, size_t errlen)
{
    FILE *f = od_fopen(od, "report.md", err, errlen);
    if (!f) return -1;
    fprintf(f, "# Validation against a measured run: %s\n\nMeasured: `%s` (%s), %zu requests. Simulated with %s, "
               "each request sent at its measured send time with its measured lengths.%s\n\n",
            scenario_name(sc), path, m->kind, m->n, cost,
            m->have_arrivals ? "" : " The file has no send times: arrivals are the scenario's own, and throughput is not compared.");
    if (excluded) fprintf(f, "%zu requests that failed on the server are left out of both sides.\n\n", excluded);
    if (rejected)
        fprintf(f, "%zu measured requests are past the scenario's limits (scheduler.max_model_len, or the KV pool): the "
                   "simulator rejects them, so they are left out of both sides.\n\n", rejected);
    fprintf(f, "| metric | simulated | measured | error | limit |\n|---|---:|---:|---:|---:|\n");
    for (int i = 0; i < NUM_SHOWN; i++) {
        const cmp_row *row = cmp_find(c, shown[i]);
        if (!row || skipped(m, shown[i])) continue;
        double lim = limit_for(sc, shown[i]);
        char limit[16] = "-";
        if (!isinf(lim)) snprintf(limit, sizeof limit, "%.0f%%", 100 * lim);
        fprintf(f, "| %s | %.3f | %.3f | %+.1f%% | %s |\n", row->metric, row->simulated, row->measured,
                100 * row->rel_error, limit);
    }
    fprintf(f, "\n%s\n", passed ? "Every judged metric is within its limit." : "**Some metric is past its limit.**");
    return od_fclose(f, "report.md", err, errlen);
}

static int write_json(const outdir *od, const char *path, const measured_run *m, size_t excluded, size_t rejected,
                      const char *cost, const cmp_result *c, bool passed, char *err, size_t errlen)
{
    json_t *doc = json_object(), *rows = doc ? json_put_array(doc, "metrics") : NULL;
    int bad = !rows || json_put(doc, "measured", json_text(path)) | json_put(doc, "kind", json_string(m->kind)) |
                           json_put(doc, "requests", json_integer((json_int_t)m->n)) |
                           json_put(doc, "excluded_failed", json_integer((json_int_t)excluded)) |
                           json_put(doc, "rejected_by_scenario", json_integer((json_int_t)rejected)) |
                           json_put(doc, "cost_model", json_text(cost)) | json_put(doc, "passed", json_boolean(passed));
    for (int i = 0; !bad && i < NUM_SHOWN; i++) {
        const cmp_row *row = cmp_find(c, shown[i]);
        if (!row || skipped(m, shown[i])) continue;
        json_t *o = json_object();
        bad = !o || json_array_append_new(rows, o) || json_put(o, "metric", json_string(row->metric)) |
                                                           json_put(o, "simulated", json_num(row->simulated)) |
                                                           json_put(o, "measured", json_num(row->measured)) |
                                                           json_put(o, "rel_error", json_num(row->rel_error));
    }
    FILE *f = bad ? NULL : od_fopen(od, "validation.json", err, errlen);
    if (bad) snprintf(err, errlen, "out of memory");
    if (f) json_write(f, doc);
    json_decref(doc);
    return f ? od_fclose(f, "validation.json", err, errlen) : -1;
}

/* The scenario's model with a measured folder's own model.* keys (its summary.json's
 * "scenario") in their place, resolved: false where they cannot be read back, so nothing is
 * judged. */
static bool measured_model(const scenario *sc, json_t *keys, model_shape *shape, bool *fp8)
{
    scenario own = *sc;
    json_t *mine = scenario_json(sc);
    const char *name;
    json_t *v;
    bool ok = mine != NULL;
    json_object_foreach(keys, name, v) {
        if (!ok || strncmp(name, "model.", 6) != 0 || json_equal(v, json_object_get(mine, name))) continue;
        char set[600], err[600];
        int n = json_is_string(v)    ? snprintf(set, sizeof set, "%s=%s", name, json_string_value(v))
                : json_is_integer(v) ? snprintf(set, sizeof set, "%s=%lld", name, (long long)json_integer_value(v))
                : json_is_real(v)    ? snprintf(set, sizeof set, "%s=%.17g", name, json_real_value(v))
                : json_is_boolean(v) ? snprintf(set, sizeof set, "%s=%s", name, json_is_true(v) ? "on" : "off")
                                     : -1;
        ok = n > 0 && (size_t)n < sizeof set && scenario_set(&own, set, err, sizeof err) == 0;
    }
    json_decref(mine);
    scenario_resolved r;
    char err[1300];
    if (!ok || scenario_resolve(&own, &r, err, sizeof err) < 0) return false;
    *shape = r.model;
    *fp8 = r.fp8_weights;
    return true;
}

static bool same_shape(const model_shape *a, const model_shape *b)
{
    return a->num_layers == b->num_layers && a->hidden == b->hidden && a->num_heads == b->num_heads &&
           a->num_kv_heads == b->num_kv_heads && a->head_dim == b->head_dim && a->intermediate == b->intermediate &&
           a->vocab == b->vocab && a->num_experts == b->num_experts && a->experts_per_token == b->experts_per_token;
}

/* A servesim folder says what made it (summary.json): a simulated run is no measurement, and
 * one that served another model than the scenario simulates compares two models. Both were
 * once compared without a word (a new user's trial: an engine run of the tiny model against
 * the default Llama-3-8B). A folder without summary.json (made by hand) is taken as it is. */
static int check_measured_folder(const char *path, const scenario *sc, const scenario_resolved *r, char *err,
                                 size_t errlen)
{
    struct stat st;
    char file[4200];
    snprintf(file, sizeof file, "%s/summary.json", path);
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode) || stat(file, &st) != 0) return 0;
    json_error_t je;
    json_t *doc = json_load_file(file, 0, &je);
    if (!json_is_object(doc)) {
        snprintf(err, errlen, "%s:%d: not the JSON object a servesim run writes (%s)", file, je.line, doc ? "not an object" : je.text);
        json_decref(doc);
        return -1;
    }
    const char *executor = json_string_value(json_object_get(doc, "executor"));
    int rc = 0;
    if (executor && strcmp(executor, "simulator") == 0) {
        snprintf(err, errlen, "%s is a simulated run (its summary.json's executor is \"simulator\"): --measured takes "
                 "what a real server served, a `servesim load` or `servesim engine` folder or vLLM's saved benchmark "
                 "JSON", path);
        rc = -1;
    }
    /* a CPU engine run priced as a GPU read TTFT errors of -95% without a word (a new user's
     * trial): its costs are the CPU's calibration table */
    const char *backend = json_string_value(json_object_get(json_object_get(doc, "environment"), "backend"));
    if (rc == 0 && executor && strcmp(executor, "engine") == 0 && backend && strcmp(backend, "cpu") == 0 &&
        !r->cost_table_path[0]) {
        snprintf(err, errlen, "%s ran the CPU engine (its summary.json's environment), and the scenario prices %s "
                 "(hardware.preset, with no cost table): give the CPU's, --cost-table FILE from `servesim calibrate "
                 "--backend cpu --model %s`", path, r->hw.name, r->model.name ? r->model.name : "NAME");
        rc = -1;
    }
    model_shape shape;
    bool fp8;
    json_t *keys = json_object_get(doc, "scenario");
    /* an engine run's model.* keys are the model it served; a load's only chose the token
     * vocabulary of what it sent (the server's model is its own) */
    if (rc == 0 && executor && strcmp(executor, "engine") == 0 && json_is_object(keys) &&
        measured_model(sc, keys, &shape, &fp8) &&
        (!same_shape(&shape, &r->model) || fp8 != r->fp8_weights)) {
        char theirs[300], ours[300];
        model_shape_string(&shape, theirs, sizeof theirs);
        model_shape_string(&r->model, ours, sizeof ours);
        snprintf(err, errlen, "%s served %s%s (%s; its summary.json's model.* keys), and the scenario simulates %s%s "
                 "(%s): name the scenario it ran, or set its model (--set model.preset=%s)", path,
                 shape.name ? shape.name : "a model", fp8 ? " in FP8" : "", theirs, r->model.name ? r->model.name : "a model",
                 r->fp8_weights ? " in FP8" : "", ours, shape.name ? shape.name : "NAME");
        rc = -1;
    }
    json_decref(doc);
    return rc;
}

int validate_measured(const scenario *base, const scenario_args *a, const char *out)
{
    char err[1300];
    scenario sc = *base;
    if (a->cost_table) {
        char set[1200];
        snprintf(set, sizeof set, "hardware.cost_table=%s", a->cost_table);
        if (scenario_set(&sc, set, err, sizeof err) < 0) {
            fprintf(stderr, "servesim: --cost-table: %s\n", err);
            return EXIT_BAD_INPUT;
        }
    }
    scenario_resolved r;
    job_cost cost;
    measured_run m;
    job_spec spec;
    if (scenario_resolve(&sc, &r, err, sizeof err) < 0 || job_cost_init(&cost, &r, err, sizeof err) < 0) {
        fprintf(stderr, "servesim: %s\n", err);
        return EXIT_BAD_INPUT;
    }
    if (job_spec_init(&spec, &r, err, sizeof err) < 0) {
        job_cost_free(&cost);
        fprintf(stderr, "servesim: %s\n", err);
        return EXIT_BAD_INPUT;
    }
    if (check_measured_folder(a->measured, &sc, &r, err, sizeof err) < 0) {
        job_spec_free(&spec);
        job_cost_free(&cost);
        fprintf(stderr, "servesim: --measured %s\n", err);
        return EXIT_BAD_INPUT;
    }
    if (measured_read(a->measured, &m, err, sizeof err) < 0) {
        job_spec_free(&spec);
        job_cost_free(&cost);
        fprintf(stderr, "servesim: --measured %s\n", err);
        return EXIT_BAD_INPUT;
    }
    workload w;
    size_t excluded = 0, rejected = 0;
    char why[1024];
    int status = measured_workload(&m, &r, &w, &excluded, &rejected, why, sizeof why) < 0 ? EXIT_BAD_INPUT : EXIT_OK;
    if (status != EXIT_OK) snprintf(err, sizeof err, "--measured %s: %s", a->measured, why);
    outdir od;
    bool opened = false;
    if (status == EXIT_OK) status = od_open(&od, out, err, sizeof err) < 0 ? EXIT_BAD_INPUT : EXIT_OK;
    opened = status == EXIT_OK;
    met_acc *sim_met = NULL, *real_met = NULL;
    summary ssum, rsum;
    cmp_result c;
    bool passed = true;
    char costdesc[1100];
    snprintf(costdesc, sizeof costdesc, "%s", cost.source);
    if (status == EXIT_OK) {
        char simdir[sizeof od.tmp_path + sizeof "/sim"]; /* never cut: it is written to */
        snprintf(simdir, sizeof simdir, "%s/sim", od.tmp_path);
        res_dir dir;
        sim_met = met_create();
        if (sim_met) met_set_percentiles(sim_met, r.percentiles, r.num_percentiles);
        if (!sim_met || res_open(&dir, simdir, err, sizeof err) < 0) status = EXIT_FAILURE_OTHER;
        else {
            met_keep_requests(sim_met);
            recorder rc;
            rec_init(&rc, sim_met, &dir);
            sim_options so = {.sched = r.sched, .cost = job_cost_fn(&cost), .num_replicas = 1, .frontend = r.frontend,
                               .async_scheduling = r.async_scheduling};
            job_spec_options(&spec, &r, &cost, &so);
            sim_stats st;
            if (sim_run(&so, &w, &w.cfg, &rc, &st, err, sizeof err) < 0) status = EXIT_FAILURE_OTHER;
            else if (met_summarize(sim_met, &r.slo, &ssum) < 0) {
                /* past job_check_admission only by a rule it does not know; this once said
                 * "servesim: " alone, exit 1 */
                char why[600];
                met_describe_rejected(sim_met, r.sched.max_model_len, why, sizeof why);
                snprintf(err, sizeof err, "no measured request finished in the simulator. %s", why);
                status = EXIT_BAD_INPUT;
            } else if (job_write_results(&dir, &ssum, NULL, err, sizeof err) < 0)
                status = EXIT_FAILURE_OTHER;
            if (status != EXIT_OK) res_abort(&dir);
        }
    }
    if (status == EXIT_OK && measured_summary(&m, &r.sched, &r.slo, &real_met, &rsum) < 0) {
        snprintf(err, sizeof err, "no measured request finished");
        status = EXIT_BAD_INPUT;
    }
    if (status == EXIT_OK) {
        size_t ns, nr;
        const req_record *rs = met_requests(sim_met, &ns), *rr = met_requests(real_met, &nr);
        cmp_side sa = {&ssum, rs, ns, NULL, 0}, sb = {&rsum, rr, nr, NULL, 0};
        if (cmp_runs(&sa, &sb, &c, err, sizeof err) < 0) status = EXIT_FAILURE_OTHER;
    }
    if (status == EXIT_OK) {
        for (int i = 0; i < NUM_SHOWN; i++) {
            const cmp_row *row = cmp_find(&c, shown[i]);
            if (row && !skipped(&m, shown[i]) && !(fabs(row->rel_error) <= limit_for(&sc, shown[i]))) passed = false;
        }
        if (write_json(&od, a->measured, &m, excluded, rejected, costdesc, &c, passed, err, sizeof err) < 0 ||
            write_report(&od, &sc, a->measured, &m, excluded, rejected, costdesc, &c, passed, err, sizeof err) < 0 ||
            od_commit(&od, err, sizeof err) < 0)
            status = EXIT_FAILURE_OTHER;
    }
    if (status != EXIT_OK && opened) od_abort(&od);
    if (status != EXIT_OK) fprintf(stderr, "servesim: %s\n", err);
    if (status == EXIT_OK && !a->quiet) {
        printf("%-20s %12s %12s %8s\n", "metric", "simulated", "measured", "error");
        for (int i = 0; i < NUM_SHOWN; i++) {
            const cmp_row *row = cmp_find(&c, shown[i]);
            if (row && !skipped(&m, shown[i]))
                printf("%-20s %12.3f %12.3f %+7.1f%%\n", row->metric, row->simulated, row->measured, 100 * row->rel_error);
        }
        printf("Validation %s (%s); report in %s/report.md\n", passed ? "passed" : "FAILED", costdesc, out);
    }
    met_free(sim_met);
    met_free(real_met);
    wl_free(&w);
    measured_free(&m);
    job_spec_free(&spec);
    job_cost_free(&cost);
    return status != EXIT_OK ? status : passed ? EXIT_OK : EXIT_PAST_LIMITS;
}
