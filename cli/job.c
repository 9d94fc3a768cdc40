#include "cli/job.h"

#include <stdio.h>

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

void job_scenario_json(FILE *f, const scenario *sc)
{
    fprintf(f, "  \"scenario_file\": \"%s\",\n  \"scenario\": {\n", sc->path);
    scenario_write_json(sc, f, "    ");
    fprintf(f, "  }");
}

int job_write_results(res_dir *dir, met_acc *met, const summary *sum, const char *extra_json,
                      char *err, size_t errlen)
{
    size_t n;
    const req_record *recs = met_requests(met, &n);
    if (res_write_requests(dir, recs, n, err, errlen) < 0) return -1;
    if (res_write_summary(dir, sum, extra_json, err, errlen) < 0) return -1;
    return res_commit(dir, err, errlen);
}
