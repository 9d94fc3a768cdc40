#include "study/run_repeat.h"

#include <stdio.h>
#include <string.h>

#include "io/outdir.h"
#include "metrics/repeat.h"
#include "study/job.h"
#include "study/simjob.h"
#include "study/sweep.h"

/* The first seed's run files move up from points/000/ so OUT reads like a single run. */
static int lift_first_run(const outdir *od, char *err, size_t errlen)
{
    static const char *const files[] = {"summary.json", "requests.csv", "steps.csv"};
    /* never cut: RUNS is the folder and "/points", FROM and TO hold it with a file's name to spare */
    char runs[sizeof od->tmp_path + sizeof "/points"], from[4400], to[4400];
    snprintf(runs, sizeof runs, "%s/points", od->tmp_path);
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(from, sizeof from, "%s/000/%s", runs, files[i]);
        snprintf(to, sizeof to, "%s/%s", od->tmp_path, files[i]);
        if (rename(from, to) != 0) {
            snprintf(err, errlen, "%.2000s: cannot move into place", from); /* fits a 2,048-byte message */
            return -1;
        }
    }
    return od_remove_tree(runs) == 0 ? 0 : -1;
}

static int write_repeat_files(const outdir *od, const sweep_result *r, char *err, size_t errlen)
{
    FILE *f = od_fopen(od, "repeats.csv", err, errlen);
    if (!f) return -1;
    rep_write_runs_csv(f, r->runs, r->seeds, (size_t)r->nruns);
    if (od_fclose(f, "repeats.csv", err, errlen) < 0 || !(f = od_fopen(od, "repeat_stats.csv", err, errlen)))
        return -1;
    rep_write_stats_csv(f, r->stats, r->runs, (size_t)r->nruns);
    return od_fclose(f, "repeat_stats.csv", err, errlen);
}

int run_repeats(const scenario *sc, const char *out, int repeat, int jobs, bool quiet)
{
    sweep_plan plan;
    sweep_plan_init(&plan, sc);
    plan.repeat = repeat;
    char err[2048], runs[4400];
    outdir od;
    if (od_open(&od, out, err, sizeof err) < 0) {
        fprintf(stderr, "servesim: %s\n", err);
        return EXIT_FAILURE_OTHER;
    }
    snprintf(runs, sizeof runs, "%s/points", od.tmp_path);
    sweep_opts o = {.jobs = jobs, .progress = !quiet, .runs_dir = runs};
    sweep_result r = {0};
    int status = sweep_run(&plan, &o, &r, err, sizeof err);
    if (status == EXIT_OK && r.nruns == 0) {
        snprintf(err, sizeof err, "no measured request finished in any run: every one was rejected");
        status = EXIT_FAILURE_OTHER;
    }
    if (status == EXIT_OK && (lift_first_run(&od, err, sizeof err) < 0 || write_repeat_files(&od, &r, err, sizeof err) < 0 ||
                              od_commit(&od, err, sizeof err) < 0))
        status = EXIT_FAILURE_OTHER;
    if (status != EXIT_OK) {
        od_abort(&od);
        fprintf(stderr, "servesim: %s\n", err);
    } else if (!quiet) {
        rep_print_table(stdout, r.stats, (size_t)r.nruns);
        char cost[1400];
        job_cost_describe(sc, cost, sizeof cost);
        printf("Cost model: %s\n", cost);
        scenario_resolved res;
        char frontend[200], kv[SCENARIO_KV_CACHE_TEXT], sched[SCENARIO_SCHED_TEXT], why[1024];
        if (scenario_resolve(sc, &res, why, sizeof why) == 0) {
            scenario_frontend_describe(&res, frontend, sizeof frontend);
            if (frontend[0]) printf("API server: %s\n", frontend);
            scenario_kv_cache_describe(&res, kv, sizeof kv);
            printf("KV cache: %s\n", kv);
            scenario_scheduler_describe(&res, sched, sizeof sched);
            printf("Scheduler: %s\n", sched);
        }
        printf("Seeds %llu..%llu. Results in %s/ (the first seed's run, repeats.csv, repeat_stats.csv)\n",
               (unsigned long long)r.seeds[0], (unsigned long long)r.seeds[r.nruns - 1], out);
    }
    sweep_results_free(&r, 1);
    sweep_plan_free(&plan);
    return status;
}
