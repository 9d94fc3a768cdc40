/* `servesim roofline-fit`: the roofline fitted to each GPU's measured tables (all models
 * there are tables for, the newest vLLM version of each), its error against them, and with
 * --write the sim/roofline_fit.inc rows the presets read. */
#include <stdio.h>
#include <string.h>

#include "bench/costtab.h"
#include "calibrate/calibrate.h"
#include "cli/commands.h"
#include "cli/measured.h"
#include "sim/roofline_fit.h"
#include "sim/table_cost.h"

static const char fit_usage[] =
    "usage: servesim roofline-fit [--steps] [--write FILE]\n"
    "  Fits each GPU's roofline (compute, memory and attention efficiencies, step cost) to its\n"
    "  measured cost tables in costs/, over the same steps for every model, and prints the fit\n"
    "  and the roofline's |error| against the tables (median, max). --steps prints every\n"
    "  step's error; --write FILE writes the FIT rows of sim/roofline_fit.inc.\n";

enum { MAX_CASES = 32 };

typedef struct gpu_tables {
    fit_case cases[MAX_CASES];
    table_cost tables[MAX_CASES];
    char paths[MAX_CASES][1200];
    int n;
} gpu_tables;

/* The newest measured table of every model preset on GPU (one per distinct shape). */
static int load(const char *gpu, gpu_tables *g, char *err, size_t errlen)
{
    g->n = 0;
    for (size_t i = 0; model_preset_at(i) && g->n < MAX_CASES; i++) {
        const model_shape *m = model_preset_at(i);
        kb_shape s = {m->num_layers, m->hidden, m->num_heads, m->num_kv_heads, m->head_dim, m->intermediate,
                      m->vocab, m->rope_theta, m->rms_eps};
        char shape[256], path[1200], why[1200];
        calibrate_shape_string(&s, shape, sizeof shape);
        if (measured_find(gpu, shape, "", path, sizeof path, why, sizeof why) != 1) continue;
        bool seen = false;
        for (int k = 0; k < g->n; k++) seen |= strcmp(g->paths[k], path) == 0;
        if (seen) continue;
        cost_table t;
        if (ct_read(&t, path, err, errlen) < 0) return -1;
        int rc = tc_init(&g->tables[g->n], &t, path, err, errlen);
        ct_free(&t);
        if (rc < 0) return -1;
        snprintf(g->paths[g->n], sizeof g->paths[g->n], "%s", path);
        g->cases[g->n] = (fit_case){m, {tc_step_time, &g->tables[g->n], NULL}};
        g->n++;
    }
    return 0;
}

static void unload(gpu_tables *g)
{
    for (int k = 0; k < g->n; k++) tc_free(&g->tables[k]);
    g->n = 0;
}

int cmd_roofline_fit(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(fit_usage, stdout);
        return EXIT_OK;
    }
    const char *write = NULL;
    bool steps = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--write") == 0 && i + 1 < argc) write = argv[++i];
        else if (strcmp(argv[i], "--steps") == 0) steps = true;
        else {
            fprintf(stderr, "servesim: roofline-fit: unexpected \"%s\"\n%s", argv[i], fit_usage);
            return EXIT_BAD_INPUT;
        }
    }
    char rows[8192] = "", err[1400];
    size_t used = 0;
    static gpu_tables g; /* large; one command at a time */
    printf("%-13s %6s %6s %6s %8s %7s %7s  %s\n", "gpu", "comp", "mem", "attn", "step ms", "median", "max", "tables");
    for (size_t h = 0; hw_preset_at(h); h++) {
        const hw_spec *hw = hw_preset_at(h);
        if (load(hw->name, &g, err, sizeof err) < 0) {
            fprintf(stderr, "servesim: %s\n", err);
            unload(&g);
            return EXIT_BAD_INPUT;
        }
        if (g.n == 0) {
            printf("%-13s no measured tables\n", hw->name);
            continue;
        }
        hw_fit f;
        if (roofline_fit(hw, g.cases, g.n, &f) < 0) {
            fprintf(stderr, "servesim: roofline-fit: the search did not converge for %s\n", hw->name);
            unload(&g);
            return EXIT_FAILURE_OTHER;
        }
        printf("%-13s %6.3f %6.3f %6.3f %8.3f %6.1f%% %6.1f%%  %d\n", hw->name, f.compute_efficiency,
               f.memory_efficiency, f.attention_efficiency, f.step_overhead_ms, 100 * f.median_error,
               100 * f.max_error, g.n);
        if (steps)
            for (int c = 0; c < g.n; c++)
                for (int i = 0; i < roofline_fit_steps(); i++) {
                    char what[96];
                    double e = roofline_fit_error(hw, &g.cases[c], &f, i, what, sizeof what);
                    printf("    %-14s %-32s %6.1f%%\n", g.cases[c].model->name, what, 100 * e);
                }
        used += (size_t)snprintf(rows + used, sizeof rows - used, "FIT(\"%s\", %.3f, %.3f, %.3f, %.3f, %.3f, %.3f)\n",
                                 hw->name, f.compute_efficiency, f.memory_efficiency, f.attention_efficiency,
                                 f.step_overhead_ms, f.median_error, f.max_error);
        unload(&g);
    }
    if (!write) return EXIT_OK;
    FILE *out = fopen(write, "w");
    if (!out) {
        perror(write);
        return EXIT_BAD_INPUT;
    }
    fprintf(out, "/* Written by `servesim roofline-fit --write sim/roofline_fit.inc` (scripts/aic-import runs\n"
                 " * it): the roofline fitted to each GPU's measured cost tables. Do not edit by hand.\n"
                 " * FIT(name, compute, memory, attention, step_overhead_ms, median_error, max_error) */\n%s",
            rows);
    if (fclose(out) != 0) {
        perror(write);
        return EXIT_FAILURE_OTHER;
    }
    return EXIT_OK;
}
