/* `servesim validate`: the same requests through the real engine and the simulator (with a
 * cost table calibrated on that engine), and how far apart they are. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metrics/compare.h"
#include "io/outdir.h"
#include "io/plot.h"
#include "study/validate.h"
#include "calibrate/calibrate.h"
#include "cli/commands.h"
#include "io/interrupt.h"
#include "study/job.h"
#include "engine/engine.h"
#include "sim/replay.h"

static const char validate_usage[] =
    "usage: servesim validate SCENARIO.ini [--backend cpu|cuda] [--cost-table FILE] [--out DIR]\n"
    "                         [--measured DIR_OR_JSON] [--seed N] [--set SECTION.KEY=VALUE]... [--quiet]\n"
    "  For each point of the [validate] section (rates x policies), builds the request list\n"
    "  once, serves it on the real engine ([validate] engine_runs times), replays exactly the\n"
    "  same requests through the simulator with the cost table, and compares TTFT/TPOT/ITL/\n"
    "  E2EL, throughput, batch size and preemptions, and every executed step's predicted\n"
    "  against measured time. Each engine run is also simulated with its own measured step\n"
    "  times, which must reproduce it ([validate] max_replay_error). Without a table\n"
    "  (--cost-table or hardware.cost_table) it calibrates the backend in rounds, one before\n"
    "  each engine run (whose steps that round prices), and simulates with the expected value over\n"
    "  the rounds. Writes validation.json, report.md, latency plots, each run's files\n"
    "  (pointN-engine-runK/, pointN-sim/, pointN-replay-runK/: summary.json, requests.csv,\n"
    "  steps.csv) and the tables it calibrated to DIR (default results/runs/NAME-validate);\n"
    "  exits 3 when an error exceeds the [validate] thresholds (1 when something failed).\n"
    "  With --measured, no engine runs: the requests a real server served -- a `servesim load`\n"
    "  (or `servesim engine`) directory, or vLLM's `bench serve --save-result --save-detailed`\n"
    "  JSON -- are simulated at their send times with their lengths and the scenario's cost\n"
    "  model, and compared (report.md, validation.json, sim/; default DIR\n"
    "  results/runs/NAME-validate-measured). Without send times (vLLM's own JSON has none)\n"
    "  the scenario's arrivals are used.\n";

/* KEY's comma list into ITEMS, each a value of OF, the key it sets; an empty list gives
 * FALLBACK alone. -1 with why in ERR, naming KEY: an item longer than an item holds was cut to
 * 31 characters, one past MAX_POINTS dropped, an empty one skipped and one given twice run
 * twice, all without a word (bad-input campaign). */
static int split_list(const scenario *sc, scenario_key key, scenario_key of, const char *fallback, char items[][32],
                      char *err, size_t errlen)
{
    const char *list = sc->v[key].s;
    if (!list[0]) {
        snprintf(items[0], 32, "%s", fallback);
        return 1;
    }
    char label[400];
    scenario_key_label(sc, key, label, sizeof label);
    for (int n = 0;; n++) {
        size_t len = strcspn(list, ",");
        const char *next = list[len] ? list + len + 1 : NULL;
        while (len && *list == ' ') list++, len--;
        if (n == MAX_POINTS) {
            snprintf(err, errlen, "%s %s: more than %d items", label, sc->v[key].s, MAX_POINTS);
            return -1;
        }
        if (len == 0) {
            snprintf(err, errlen, "%s %s: an empty item; give V1,V2,... with none empty", label, sc->v[key].s);
            return -1;
        }
        if (len >= 32) {
            snprintf(err, errlen, "%s: the item %.*s is longer than 31 characters", label, (int)len, list);
            return -1;
        }
        memcpy(items[n], list, len);
        items[n][len] = '\0';
        for (int j = 0; j < n; j++)
            if (scenario_same_value(of, items[j], items[n])) {
                snprintf(err, errlen, "%s %s: %s is %s again; give each once", label, sc->v[key].s, items[n], items[j]);
                return -1;
            }
        if (!next) return n + 1;
        list = next;
    }
}

static int point_scenario(const scenario *base, const point *p, scenario *sc, char *err, size_t errlen)
{
    *sc = *base;
    char set[128];
    snprintf(set, sizeof set, "workload.rate=%s", p->rate);
    if (scenario_set(sc, set, err, errlen) < 0) return -1;
    snprintf(set, sizeof set, "scheduler.policy=%s", p->policy);
    return scenario_set(sc, set, err, errlen);
}

typedef struct run_side {
    met_acc *met;
    recorder rc;
    summary sum;
} run_side;

static void side_free(run_side *s)
{
    rec_free(&s->rc);
    met_free(s->met);
}

static int serve_real(const scenario_resolved *r, const kb_options *kb, const kb_sampling *sp, workload *w,
                      table_cost *tc, run_side *out, char *err, size_t errlen)
{
    engine_options o = {.sched = r->sched, .backend = *kb, .sampling = *sp, .predict = tc_step_time, .predict_ctx = tc,
                        .prompt_lookup_min = r->prompt_lookup_min, .prompt_lookup_max = r->prompt_lookup_max,
                        .spec_draft_model = r->spec_draft_model, .draft_shape = r->draft_kb_shape,
                        .stop = interrupt_flag()};
    engine_backend_options(&r->sched, &o.backend);
    out->met = met_create();
    met_keep_requests(out->met);
    rec_init(&out->rc, out->met, NULL);
    out->rc.keep_steps = true;
    int status = engine_run(&o, w, &r->workload, &out->rc, NULL, err, errlen);
    if (status == 0 && met_summarize(out->met, &r->slo, &out->sum) < 0) {
        snprintf(err, errlen, "no measured request finished on the engine");
        status = 1;
    }
    return status;
}

/* A point's scenario resolved, and its request list. */
typedef struct point_setup {
    scenario_resolved r;
    kb_options kb;
    kb_sampling sp;
    workload w;
} point_setup;

static int setup_point(const scenario *base, const point *p, point_setup *ps, char *err, size_t errlen)
{
    scenario sc;
    if (point_scenario(base, p, &sc, err, errlen) < 0 || scenario_resolve(&sc, &ps->r, err, errlen) < 0 ||
        scenario_resolve_engine(&sc, &ps->r, &ps->kb, &ps->sp, err, errlen) < 0 ||
        wl_open(&ps->r.workload, &ps->w, err, errlen) < 0)
        return EXIT_BAD_INPUT;
    return EXIT_OK;
}

static int simulate(const scenario_resolved *r, workload *w, step_cost cost, run_side *out, char *err, size_t errlen)
{
    sim_options o = {.sched = r->sched, .cost = cost, .num_replicas = 1};
    out->met = met_create();
    met_keep_requests(out->met);
    rec_init(&out->rc, out->met, NULL);
    out->rc.keep_steps = true;
    if (sim_run(&o, w, &r->workload, &out->rc, NULL, err, errlen) < 0) return 1;
    if (met_summarize(out->met, &r->slo, &out->sum) < 0) {
        snprintf(err, errlen, "no measured request finished in the simulator");
        return 1;
    }
    return 0;
}

static int compare_sides(const run_side *sim, const run_side *real, cmp_result *out, char *err, size_t errlen)
{
    size_t ns, nr;
    const req_record *rs = met_requests(sim->met, &ns), *rr = met_requests(real->met, &nr);
    cmp_side a = {&sim->sum, rs, ns, sim->rc.steps, sim->rc.num_steps};
    cmp_side b = {&real->sum, rr, nr, real->rc.steps, real->rc.num_steps};
    return cmp_runs(&a, &b, out, err, errlen) == 0 ? 0 : 1;
}

static bool within(const cmp_result *c, const char *metric, double limit)
{
    const cmp_row *row = cmp_find(c, metric);
    return row && fabs(row->rel_error) <= limit;
}

/* Whether METRIC of R is within LIMIT; where not, it is added to P's failed list, as
 * "WHAT METRIC +E% (limit L%)". */
static bool judge(point *p, const cmp_result *r, const char *what, const char *metric, double limit)
{
    if (within(r, metric, limit)) return true;
    const cmp_row *row = cmp_find(r, metric);
    size_t used = strlen(p->failed);
    if (used < sizeof p->failed)
        snprintf(p->failed + used, sizeof p->failed - used, "%s%s%s %+.1f%% (limit %.3g%%)", used ? ", " : "", what,
                 metric, row ? 100 * row->rel_error : NAN, 100 * limit);
    return false;
}

static bool point_passes(point *p, const scenario *sc)
{
    double med = sc->v[K_validate_max_median_error].d, p99 = sc->v[K_validate_max_p99_error].d;
    double thr = sc->v[K_validate_max_throughput_error].d, replay = sc->v[K_validate_max_replay_error].d;
    const char *lat[] = {"ttft", "tpot", "itl", "e2el"};
    p->failed[0] = 0;
    bool ok = judge(p, &p->cmp, "", "request_throughput", thr);
    ok &= judge(p, &p->cmp, "", "output_throughput", thr);
    for (int i = 0; i < 4; i++) {
        char m[40];
        snprintf(m, sizeof m, "p50_%s_ms", lat[i]);
        ok &= judge(p, &p->cmp, "", m, med);
        ok &= judge(p, &p->replay, "replay ", m, replay);
        snprintf(m, sizeof m, "p99_%s_ms", lat[i]);
        ok &= judge(p, &p->cmp, "", m, p99);
        ok &= judge(p, &p->replay, "replay ", m, replay);
    }
    return ok;
}

/* DIR/NAME (in the temporary directory) into PATH; -1 with a reason when it does not fit. */
static int out_path(const outdir *od, const char *name, char *path, size_t len, char *err, size_t errlen)
{
    if (od_path(od, name, path, len) == 0) return 0;
    snprintf(err, errlen, "%.1024s/%s: path too long", od->final_path, name); /* a message: the folder cut */
    return -1;
}

/* One side's whole run (summary.json, requests.csv, steps.csv) as DIR/NAME, so a point's
 * error can be traced to the steps that made it. */
static int write_side(const outdir *od, const char *name, const run_side *s, char *err, size_t errlen)
{
    char path[2200];
    if (out_path(od, name, path, sizeof path, err, errlen) < 0) return -1;
    res_dir dir;
    if (res_open(&dir, path, err, errlen) < 0) return -1;
    for (size_t i = 0; i < s->rc.num_steps; i++) res_write_step(&dir, &s->rc.steps[i]);
    size_t n;
    const req_record *recs = met_requests(s->met, &n);
    for (size_t i = 0; i < n; i++) res_write_request(&dir, &recs[i]);
    if (job_write_results(&dir, &s->sum, NULL, err, errlen) < 0) {
        res_abort(&dir);
        return -1;
    }
    return 0;
}

/* Engine run RUN simulated with its own measured step times (TC prices any step after the
 * schedules part), into P's replay rows. */
static int replay_run(const point_setup *ps, int index, int run, point *p, const run_side *real, table_cost *tc,
                      const outdir *od, char *err, size_t errlen)
{
    replay_cost rp;
    replay_init(&rp, real->rc.steps, real->rc.num_steps, (step_cost){.step_time = tc_step_time, .ctx = tc});
    run_side rs = {0};
    int status = simulate(&ps->r, (workload *)&ps->w, replay_step_cost(&rp), &rs, err, errlen);
    if (status == 0) status = compare_sides(&rs, real, &p->replays[run], err, errlen);
    char name[64];
    snprintf(name, sizeof name, "point%d-replay-run%d", index, run + 1);
    if (status == 0 && write_side(od, name, &rs, err, errlen) < 0) status = 1;
    p->replay_mismatch[run] = rp.first_mismatch;
    p->replay_steps[run] = (int64_t)real->rc.num_steps;
    side_free(&rs);
    return status;
}

/* Engine run RUN of point INDEX, each step's predicted time from TC; its files written. */
static int engine_once(const scenario *base, int index, int run, const point *p, const outdir *od,
                       table_cost *tc, run_side *out, char *err, size_t errlen)
{
    point_setup ps;
    int status = setup_point(base, p, &ps, err, errlen);
    if (status != EXIT_OK) return status;
    status = serve_real(&ps.r, &ps.kb, &ps.sp, &ps.w, tc, out, err, errlen);
    char name[64];
    snprintf(name, sizeof name, "point%d-engine-run%d", index, run + 1);
    if (status == 0 && write_side(od, name, out, err, errlen) < 0) status = 1;
    wl_free(&ps.w);
    return status;
}

/* Point INDEX simulated with TC and compared with each of its engine runs REAL[0..runs). */
static int simulate_point(const scenario *base, int index, point *p, const run_side *real, const outdir *od,
                          table_cost *tc, char *err, size_t errlen)
{
    point_setup ps;
    int status = setup_point(base, p, &ps, err, errlen);
    if (status != EXIT_OK) return status;
    run_side sim = {0};
    status = simulate(&ps.r, &ps.w, (step_cost){.step_time = tc_step_time, .ctx = tc}, &sim, err, errlen);
    for (int k = 0; k < p->num_runs && status == 0; k++) {
        status = compare_sides(&sim, &real[k], &p->runs[k], err, errlen);
        if (status == 0) status = replay_run(&ps, index, k, p, &real[k], tc, od, err, errlen);
    }
    char name[64];
    snprintf(name, sizeof name, "point%d-sim", index);
    if (status == 0 && write_side(od, name, &sim, err, errlen) < 0) status = 1;
    side_free(&sim);
    wl_free(&ps.w);
    return status;
}

/* What prices the runs: the one table given, or a calibration taken round by round, round K
 * just before engine run K, so that the table (the expected value over the rounds) is measured over
 * the same minutes as the runs it predicts: a shared machine's speed drifts over minutes. */
typedef struct pricing {
    calib_session *session;  /* NULL: GIVEN prices every run */
    table_cost given, round, final;
    bool have_given, have_round, have_final, per_round;
    char table[1100], device[256];
} pricing;

static int pricing_open(pricing *pr, const scenario *sc, const char *flag_table, int runs, bool quiet, char *err,
                        size_t errlen)
{
    memset(pr, 0, sizeof *pr);
    scenario_resolved r;
    kb_options kb;
    kb_sampling sp;
    if (scenario_resolve(sc, &r, err, errlen) < 0 || scenario_resolve_engine(sc, &r, &kb, &sp, err, errlen) < 0)
        return EXIT_BAD_INPUT;
    if (r.sched.num_speculative_tokens > 0) {
        /* the engine's acceptances come from its model, the simulator's are drawn: the step-
         * by-step comparison (and its replay) has nothing to hold them to */
        snprintf(err, errlen, "%s: speculative.num_tokens = %d: validate runs the engine and the simulator on the same "
                 "schedule, which drafts accepted by a model and drafts accepted by chance cannot keep; serve the "
                 "scenario with `servesim engine` and compare with `servesim validate --measured DIR`",
                 sc->path[0] ? sc->path : "built-in scenario", r.sched.num_speculative_tokens);
        return EXIT_BAD_INPUT;
    }
    if (scenario_frontend_key(sc) != K_COUNT) {
        /* the engine is served in-process here: there is no API server to compare */
        char label[400];
        scenario_key_label(sc, scenario_frontend_key(sc), label, sizeof label);
        snprintf(err, errlen, "%s prices an API server in front of the engine, which validate does not run (it "
                 "drives the engine in-process); leave the frontend out here, or serve the scenario and compare with "
                 "`servesim validate --measured DIR`", label);
        return EXIT_BAD_INPUT;
    }
    if (flag_table && snprintf(r.cost_table_path, sizeof r.cost_table_path, "%s", flag_table) >=
                          (int)sizeof r.cost_table_path) { /* cut, it named another file */
        snprintf(err, errlen, "--cost-table %.60s...: a path of %zu characters; at most %zu", flag_table,
                 strlen(flag_table), sizeof r.cost_table_path - 1);
        return EXIT_BAD_INPUT;
    }
    if (r.cost_table_path[0]) {
        job_cost jc;
        if (job_cost_init(&jc, &r, err, errlen) < 0) return EXIT_BAD_INPUT;
        pr->given = jc.table;
        pr->have_given = true;
        snprintf(pr->table, sizeof pr->table, "%s", r.cost_table_path);
        snprintf(pr->device, sizeof pr->device, "%s", jc.device);
        return EXIT_OK;
    }
    /* Calibrate the batches the workload can make: no more sequences than it sends, no more
     * tokens than its prompts hold. A scenario that left the scheduler at the GPU's vLLM
     * defaults (1024 sequences) calibrated the tiny model on the CPU for over 8 minutes,
     * silently, for 40 requests (a new user's trial). */
    int max_seqs = r.sched.max_num_seqs, max_tokens = r.sched.max_num_batched_tokens;
    workload w;
    char why[512];
    if (wl_build(&r.workload, &w, why, sizeof why) == 0) {
        int64_t prompts = 0;
        for (size_t i = 0; i < w.n; i++) prompts += w.reqs[i].prompt_len + w.reqs[i].output_len; /* a recompute too */
        if ((int64_t)w.n < max_seqs) max_seqs = (int)w.n;
        if (prompts < max_tokens) max_tokens = (int)prompts;
        wl_free(&w);
    }
    /* the sizes said, and progress shown: the minutes a large range takes went without a word */
    if (!quiet)
        fprintf(stderr, "servesim: no cost table given for %s on %s: calibrating first, in %d round%s, one before "
                        "each engine run, up to %d tokens a step, %d sequences and a context of %d (the scheduler's "
                        "limits and the workload's; smaller ones calibrate faster)\n", r.model.name,
                kb.kind == KB_CUDA ? "cuda" : "cpu", runs, runs > 1 ? "s" : "", max_tokens, max_seqs,
                r.sched.max_model_len);
    calib_options o = {.kb = kb, .model_name = r.model.name, .block_size = r.sched.block_size,
                       .max_tokens = max_tokens, .max_context = r.sched.max_model_len,
                       .max_seqs = max_seqs, .repeats = 5, .rounds = runs, .stop = interrupt_flag(),
                       .progress = quiet ? NULL : calibrate_show_progress};
    pr->session = calibrate_begin(&o, err, errlen);
    pr->per_round = true;
    snprintf(pr->table, sizeof pr->table, "cost-table.csv (calibrated by this run)");
    return pr->session ? EXIT_OK : EXIT_FAILURE_OTHER;
}

/* The table that predicts each step of engine run K: the given one, or a calibration round
 * taken now. */
static int pricing_next(pricing *pr, int k, const outdir *od, table_cost **tc, char *err, size_t errlen)
{
    if (!pr->session) {
        *tc = &pr->given;
        return EXIT_OK;
    }
    if (pr->have_round) tc_free(&pr->round);
    pr->have_round = false;
    cost_table t;
    int status = calibrate_next_round(pr->session, &t, err, errlen);
    if (status != 0) return status == 2 ? EXIT_BAD_INPUT : EXIT_FAILURE_OTHER;
    char name[64], path[2200];
    snprintf(name, sizeof name, "cost-table-round%d.csv", k + 1);
    snprintf(pr->device, sizeof pr->device, "%s", ct_meta(&t, "device") ? ct_meta(&t, "device") : "?");
    status = out_path(od, name, path, sizeof path, err, errlen) < 0 || ct_write(&t, path, err, errlen) < 0 ||
             tc_init(&pr->round, &t, name, err, errlen) < 0;
    ct_free(&t);
    if (status) return EXIT_FAILURE_OTHER;
    pr->have_round = true;
    *tc = &pr->round;
    return EXIT_OK;
}

/* The table the simulation uses: the given one, or the calibration over every round, also
 * written as DIR/cost-table.csv. */
static int pricing_final(pricing *pr, const outdir *od, table_cost **tc, char *err, size_t errlen)
{
    if (!pr->session) {
        *tc = &pr->given;
        return EXIT_OK;
    }
    cost_table t;
    char path[2200];
    if (calibrate_finish(pr->session, &t, err, errlen) != 0) return EXIT_FAILURE_OTHER;
    int bad = out_path(od, "cost-table.csv", path, sizeof path, err, errlen) < 0 || ct_write(&t, path, err, errlen) < 0 ||
              tc_init(&pr->final, &t, "cost-table.csv", err, errlen) < 0;
    ct_free(&t);
    if (bad) return EXIT_FAILURE_OTHER;
    pr->have_final = true;
    *tc = &pr->final;
    return EXIT_OK;
}

static void pricing_close(pricing *pr)
{
    calibrate_end(pr->session);
    pr->session = NULL;
    if (pr->have_given) tc_free(&pr->given);
    if (pr->have_round) tc_free(&pr->round);
    if (pr->have_final) tc_free(&pr->final);
}

/* The points, rates x policies: N, or -1 with why in ERR (past MAX_POINTS, the rest were
 * dropped without a word; bad-input campaign). */
static int build_points(const scenario *sc, point *pts, char *err, size_t errlen)
{
    char rates[MAX_POINTS][32], pols[MAX_POINTS][32], rate[32];
    /* the scenario's rate when validate.rates gives none, in as few digits as read back the same
     * (%g validated workload.rate = 12.3456789 at 12.3457) */
    for (int digits = 6; digits <= 17; digits++) {
        snprintf(rate, sizeof rate, "%.*g", digits, sc->v[K_workload_rate].d);
        if (strtod(rate, NULL) == sc->v[K_workload_rate].d) break;
    }
    int nr = split_list(sc, K_validate_rates, K_workload_rate, rate, rates, err, errlen);
    int np = nr < 0 ? -1 : split_list(sc, K_validate_policies, K_scheduler_policy, sc->v[K_scheduler_policy].s, pols,
                                      err, errlen);
    if (nr < 0 || np < 0) return -1;
    if (nr * np > MAX_POINTS) {
        char lr[400], lp[400];
        scenario_key_label(sc, K_validate_rates, lr, sizeof lr);
        scenario_key_label(sc, K_validate_policies, lp, sizeof lp);
        snprintf(err, errlen, "%s and %s: %d rates x %d policies make %d points, more than %d", lr, lp, nr, np, nr * np,
                 MAX_POINTS);
        return -1;
    }
    int n = 0;
    for (int i = 0; i < np; i++)
        for (int j = 0; j < nr; j++, n++) {
            memset(&pts[n], 0, sizeof pts[n]);
            snprintf(pts[n].policy, sizeof pts[n].policy, "%s", pols[i]);
            snprintf(pts[n].rate, sizeof pts[n].rate, "%s", rates[j]);
        }
    return n;
}

/* Every engine run of every point (run K of all points, then run K + 1), then each point's
 * simulation against its runs. */
static int run_points(const scenario *sc, point *pts, int n, pricing *pr, const outdir *od, bool quiet, char *err,
                      size_t errlen)
{
    int runs = (int)sc->v[K_validate_engine_runs].i, status = EXIT_OK;
    run_side(*real)[MAX_ENGINE_RUNS] = calloc(n, sizeof *real);
    if (!real) {
        snprintf(err, errlen, "out of memory");
        return EXIT_FAILURE_OTHER;
    }
    for (int k = 0; k < runs && status == EXIT_OK; k++) {
        table_cost *tc;
        status = pricing_next(pr, k, od, &tc, err, errlen);
        for (int i = 0; i < n && status == EXIT_OK; i++) {
            if (!quiet && isatty(2))
                fprintf(stderr, "serving %s at %s req/s, engine run %d/%d\n", pts[i].policy, pts[i].rate, k + 1, runs);
            pts[i].num_runs = k + 1;
            status = engine_once(sc, i, k, &pts[i], od, tc, &real[i][k], err, errlen);
        }
    }
    table_cost *tc = NULL;
    if (status == EXIT_OK) status = pricing_final(pr, od, &tc, err, errlen);
    for (int i = 0; i < n && status == EXIT_OK; i++) {
        status = simulate_point(sc, i, &pts[i], real[i], od, tc, err, errlen);
        if (status != EXIT_OK) break;
        cmp_combine(pts[i].runs, pts[i].num_runs, &pts[i].cmp);
        cmp_combine(pts[i].replays, pts[i].num_runs, &pts[i].replay);
        pts[i].passed = point_passes(&pts[i], sc);
        if (!quiet) validate_print_point(&pts[i]);
    }
    for (int i = 0; i < n; i++)
        for (int k = 0; k < MAX_ENGINE_RUNS; k++) side_free(&real[i][k]);
    free(real);
    return status;
}

static int write_outputs(const scenario *sc, const point *pts, int n, const validation_info *vi, outdir *od,
                         char *err, size_t errlen)
{
    char term[32];
    bool plotted = plot_available(term, sizeof term);
    for (int i = 0; plotted && i < n; i++)
        if (validate_plot_point(od, i, &pts[i], term, err, errlen) < 0) return EXIT_FAILURE_OTHER;
    if (validate_write_json(od, pts, n, vi, err, errlen) < 0 ||
        validate_write_report(od, pts, n, sc, vi, plotted, err, errlen) < 0 || od_commit(od, err, errlen) < 0)
        return EXIT_FAILURE_OTHER;
    return EXIT_OK;
}

/* Every point's scenario resolves, before any calibration or engine run: a bad
 * [validate] rates or policies entry was found only after minutes of calibrating, and then
 * named as a --set the user never typed. */
static int check_points(const scenario *sc, const point *pts, int n, char *err, size_t errlen)
{
    if (n == 0) {
        snprintf(err, errlen, "%s: [validate] rates and policies give no point to validate", sc->path);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        scenario one;
        scenario_resolved r;
        char why[1024];
        if (point_scenario(sc, &pts[i], &one, why, sizeof why) == 0 && scenario_resolve(&one, &r, why, sizeof why) == 0)
            continue;
        const char *reason = strstr(why, ": ");
        /* each part cut so that the whole fits a 1,300-byte message */
        snprintf(err, errlen, "validate.rates (%.150s) and validate.policies (%.150s): the point %s at %s req/s: "
                 "%.800s", sc->v[K_validate_rates].origin, sc->v[K_validate_policies].origin, pts[i].policy,
                 pts[i].rate, reason ? reason + 2 : why);
        return -1;
    }
    return 0;
}

/* Every point has a measured request its scheduler admits: one whose pool held none (kv.num_blocks
 * = 1) ran the engine, then exited 1 (then validate's "past its limits" too) with "no measured
 * request finished on the engine" (bad-input campaign). */
static int check_admission(const scenario *sc, const point *pts, int n, char *err, size_t errlen)
{
    for (int i = 0; i < n; i++) {
        point_setup ps;   /* as the runs will have it: the engine's pool may be engine.kv_gib's */
        char why[1024];
        if (setup_point(sc, &pts[i], &ps, err, errlen) != EXIT_OK) return -1;
        int rc = job_check_admission(&ps.r, &ps.w, NULL, why, sizeof why);
        wl_free(&ps.w);
        if (rc < 0) {
            /* each part cut so that the whole fits a 1,300-byte message */
            snprintf(err, errlen, "%.400s: the point %s at %s req/s: %.800s", sc->path, pts[i].policy, pts[i].rate,
                     why);
            return -1;
        }
    }
    return 0;
}

static int validate(const scenario *sc, const scenario_args *a, const char *flag_table, const char *out)
{
    char err[1300];
    point *pts = calloc(MAX_POINTS, sizeof *pts);
    if (!pts) {
        fprintf(stderr, "servesim: out of memory\n");
        return EXIT_FAILURE_OTHER;
    }
    int n = build_points(sc, pts, err, sizeof err), status = EXIT_OK;
    if (n < 0 || check_points(sc, pts, n, err, sizeof err) < 0 || check_admission(sc, pts, n, err, sizeof err) < 0) {
        fprintf(stderr, "servesim: %s\n", err);
        free(pts);
        return EXIT_BAD_INPUT;
    }
    outdir od;
    if (od_open(&od, out, err, sizeof err) < 0) {
        fprintf(stderr, "servesim: %s\n", err);
        free(pts);
        return EXIT_BAD_INPUT;
    }
    pricing pr = {0};
    if (status == EXIT_OK)
        status = pricing_open(&pr, sc, flag_table, (int)sc->v[K_validate_engine_runs].i, a->quiet, err, sizeof err);
    if (status == EXIT_OK) status = run_points(sc, pts, n, &pr, &od, a->quiet, err, sizeof err);
    pricing_close(&pr);
    validation_info vi = {pr.table, pr.device, pr.per_round};
    if (status == EXIT_OK) status = write_outputs(sc, pts, n, &vi, &od, err, sizeof err);
    if (status != EXIT_OK) {
        od_abort(&od);
        fprintf(stderr, "servesim: %s\n", err);
    }
    bool all_passed = true;
    for (int i = 0; i < n; i++) all_passed = all_passed && pts[i].passed;
    if (status == EXIT_OK && !a->quiet) printf("Validation %s; report in %s/report.md\n", all_passed ? "passed" : "FAILED", out);
    free(pts);
    return status != EXIT_OK ? status : all_passed ? EXIT_OK : EXIT_PAST_LIMITS;
}

int cmd_validate(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(validate_usage, stdout);
        return EXIT_OK;
    }
    scenario sc;
    scenario_args a;
    if (parse_scenario_args(argc, argv, validate_usage, SA_COST_TABLE | SA_MEASURED, &sc, &a) < 0) return EXIT_BAD_INPUT;
    if (!sc.path[0]) {
        fprintf(stderr, "servesim: validate needs a scenario file\n%s", validate_usage);
        return EXIT_BAD_INPUT;
    }
    char out[1200];
    char out_err[2048];
    /* the measured run, or the table given, inside the output directory went with the result
     * replacing it: a measured run of a real server cannot be made again (bad-input campaign) */
    char why[1600];
    if (scenario_out_dir(&sc, a.out_dir, a.measured ? "validate-measured" : "validate", out, sizeof out, out_err,
                         sizeof out_err) < 0 ||
        (a.measured && od_check_input(out, a.measured, "the --measured run", why, sizeof why) < 0 &&
         snprintf(out_err, sizeof out_err, "--out %s", why)) ||
        (a.cost_table && od_check_input(out, a.cost_table, "the --cost-table", why, sizeof why) < 0 &&
         snprintf(out_err, sizeof out_err, "--out %s", why))) {
        fprintf(stderr, "servesim: %s\n", out_err);
        return EXIT_BAD_INPUT;
    }
    if (a.measured) return validate_measured(&sc, &a, out);
    return validate(&sc, &a, a.cost_table, out);
}
