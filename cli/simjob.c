#include "cli/simjob.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "bench/results.h"
#include "cli/job.h"

static double roofline_step_time(const void *ctx, const sched_batch *b)
{
    return cost_step_time(ctx, b);
}

static char *summary_extra_json(const simjob *j, uint64_t seed)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    fprintf(f, "  \"executor\": \"simulator\",\n  \"seed\": %llu,\n", (unsigned long long)seed);
    fprintf(f, "  \"sim_events\": %zu,\n  \"sim_steps\": %lld,\n", j->stats.events, (long long)j->stats.steps);
    job_scenario_json(f, j->sc);
    fclose(f);
    return buf;
}

static int write_results(simjob *j, res_dir *dir, met_acc *met, uint64_t seed, char *err, size_t errlen)
{
    char *extra = summary_extra_json(j, seed);
    if (!extra) {
        snprintf(err, errlen, "out of memory while writing summary.json");
        return -1;
    }
    int rc = job_write_results(dir, met, &j->sum, extra, err, errlen);
    free(extra);
    return rc;
}

static int simulate(simjob *j, const scenario_resolved *r, workload *w, res_dir *dir, char *err, size_t errlen)
{
    cost_model cost;
    cost_roofline_init(&cost, &r->model, &r->hw, &r->roofline, r->dtype_bytes);
    job_progress ps;
    job_progress_start(&ps, "simulating");
    sim_options o = {
        .sched = r->sched,
        .cost = {roofline_step_time, &cost},
        .num_replicas = 1,
        .progress = j->progress && isatty(2) ? job_progress_show : NULL,
        .progress_ctx = &ps,
    };
    met_acc *met = met_create();
    recorder rc;
    rec_init(&rc, met, dir);
    int status = met ? sim_run(&o, w, &r->workload, &rc, &j->stats, err, errlen) : -1;
    job_progress_end(&ps);
    if (!met) snprintf(err, errlen, "out of memory");
    if (status == 0) j->have_summary = met_summarize(met, &r->slo, &j->sum) == 0;
    if (status == 0 && dir) status = write_results(j, dir, met, r->workload.seed, err, errlen);
    met_free(met);
    return status;
}

int simjob_run(simjob *j, char *err, size_t errlen)
{
    scenario_resolved r;
    if (scenario_resolve(j->sc, &r, err, errlen) < 0) return EXIT_BAD_INPUT;
    workload w;
    if (wl_build(&r.workload, &w, err, errlen) < 0) return EXIT_BAD_INPUT;
    res_dir dir;
    if (j->out_dir && res_open(&dir, j->out_dir, err, errlen) < 0) {
        wl_free(&w);
        return EXIT_FAILURE_OTHER;
    }
    int status = simulate(j, &r, &w, j->out_dir ? &dir : NULL, err, errlen);
    if (status < 0 && j->out_dir) res_abort(&dir);
    wl_free(&w);
    return status < 0 ? EXIT_FAILURE_OTHER : EXIT_OK;
}
