#include "cli/job.h"

#include <stdio.h>
#include <string.h>

#include "calibrate/calibrate.h"

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

static double roofline_step_time(const void *ctx, const sched_batch *b) { return cost_step_time(ctx, b); }

static int check_table_shape(const cost_table *t, const scenario_resolved *r, char *err, size_t errlen)
{
    const model_shape *m = &r->model;
    kb_shape s = {m->num_layers, m->hidden, m->num_heads, m->num_kv_heads, m->head_dim, m->intermediate,
                  m->vocab, m->rope_theta, m->rms_eps};
    char want[256];
    calibrate_shape_string(&s, want, sizeof want);
    const char *have = ct_meta(t, "shape");
    if (have && strcmp(have, want) == 0) return 0;
    snprintf(err, errlen, "%s: measured for the shape \"%s\", but the scenario's model is \"%s\"",
             r->cost_table_path, have ? have : "(none recorded)", want);
    return -1;
}

int job_cost_init(job_cost *c, const scenario_resolved *r, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    cost_roofline_init(&c->roofline, &r->model, &r->hw, &r->roofline, r->dtype_bytes);
    snprintf(c->device, sizeof c->device, "%s roofline", r->hw.name);
    if (!r->cost_table_path[0]) return 0;
    cost_table t;
    if (ct_read(&t, r->cost_table_path, err, errlen) < 0) return -1;
    int rc = check_table_shape(&t, r, err, errlen);
    snprintf(c->device, sizeof c->device, "%s", ct_meta(&t, "device") ? ct_meta(&t, "device") : "unknown");
    if (rc == 0) rc = tc_init(&c->table, &t, r->cost_table_path, err, errlen);
    ct_free(&t);
    c->use_table = rc == 0;
    return rc;
}

step_cost job_cost_fn(job_cost *c)
{
    return c->use_table ? (step_cost){.step_time = tc_step_time, .ctx = &c->table} : (step_cost){.step_time = roofline_step_time, .ctx = &c->roofline};
}

void job_cost_free(job_cost *c)
{
    if (c->use_table) tc_free(&c->table);
    c->use_table = false;
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
