/* `servesim roofline-fit`: the roofline fitted to each GPU's measured tables (all models
 * there are tables for, the newest vLLM version of each), its error against them, and with
 * --write the sim/roofline_fit.inc rows the presets read. */
#include <errno.h>
#include <stdio.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/costtab.h"
#include "metrics/metrics.h"
#include "io/outdir.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "config/measured.h"
#include "sim/roofline_fit.h"
#include "sim/table_cost.h"

/* The first line of every file --write writes */
#define FIT_FILE_HEAD "/* Written by `servesim roofline-fit --write sim/roofline_fit.inc` (scripts/aic-import runs\n"

static const char fit_usage[] =
    "usage: servesim roofline-fit [--steps] [--write FILE]\n"
    "  Fits each GPU's roofline (compute, memory and attention efficiencies, step cost) to its\n"
    "  measured cost tables in costs/, over the same steps for every model, and prints the fit\n"
    "  and the roofline's |error| against the tables (median, max), also for each model held out\n"
    "  of the fit (priced by the roofline fitted to the GPU's other models: what a model without\n"
    "  a table gets). It fits again to the GPU's FP8 tables (FP8 weights and KV cache), for\n"
    "  model.quantization = fp8. --steps prints every step's error; --write FILE writes the FIT\n"
    "  and FIT8 rows of sim/roofline_fit.inc (refused when no GPU has tables).\n";

enum { MAX_CASES = 32 };

typedef struct gpu_tables {
    fit_case cases[MAX_CASES];
    table_cost tables[MAX_CASES];
    char paths[MAX_CASES][1200];
    int n;
} gpu_tables;

/* The newest measured table of every dense model preset on GPU (one per distinct shape), or
 * with MOE of every mixture of experts; with FP8 the tables of FP8 weights and KV cache. The
 * fit sees dense models only: the roofline prices a mixture of experts' weights by the
 * experts a step touches under uniform routing, a guess the fit should not bend the
 * efficiencies to; it is reported against the tables. */
static int load(const char *gpu, gpu_tables *g, bool moe, bool fp8, char *err, size_t errlen)
{
    g->n = 0;
    for (size_t i = 0; model_preset_at(i) && g->n < MAX_CASES; i++) {
        const model_shape *m = model_preset_at(i);
        if ((m->num_experts > 0) != moe) continue;
        char shape[256], path[1200], why[1200];
        model_shape_string(m, shape, sizeof shape);
        if (measured_find(gpu, shape, 1, fp8, fp8, "", path, sizeof path, why, sizeof why) != 1) continue;
        bool seen = false;
        for (int k = 0; k < g->n; k++) seen |= strcmp(g->paths[k], path) == 0;
        if (seen) continue;
        cost_table t;
        if (ct_read(&t, path, err, errlen) < 0) return -1;
        int rc = tc_init(&g->tables[g->n], &t, path, err, errlen);
        ct_free(&t);
        if (rc < 0) return -1;
        snprintf(g->paths[g->n], sizeof g->paths[g->n], "%s", path);
        g->cases[g->n] = (fit_case){m, {.step_time = tc_step_time, .ctx = &g->tables[g->n]}, fp8};
        g->n++;
    }
    return 0;
}

static void unload(gpu_tables *g)
{
    for (int k = 0; k < g->n; k++) tc_free(&g->tables[k]);
    g->n = 0;
}

/* Writes the FIT rows in ROWS to PATH through a temporary file renamed into place. */
static int write_fits(const char *path, const char *rows)
{
    outfile file;
    char err[4400];
    od_made made = {0};
    FILE *out = od_make_parents(path, &made, err, sizeof err) == 0 ? of_open(&file, path, err, sizeof err) : NULL;
    if (!out) {
        od_unmake_parents(path, &made);
        fprintf(stderr, "servesim: %s\n", err);
        return EXIT_FAILURE_OTHER;
    }
    fprintf(out, FIT_FILE_HEAD
                 " * it): the roofline fitted to each GPU's measured cost tables. Do not edit by hand.\n"
                 " * FIT(name, compute, memory, attention, step_overhead_ms, median_error, max_error,\n"
                 " *     holdout_median_error, holdout_max_error); FIT8 the same, fitted to the tables of\n"
                 " * FP8 weights and KV cache (the roofline quantized alike), for model.quantization = fp8 */\n%s",
            rows);
    if (of_commit(&file, err, sizeof err) < 0) {
        od_unmake_parents(path, &made);
        fprintf(stderr, "servesim: %s\n", err);
        return EXIT_FAILURE_OTHER;
    }
    return EXIT_OK;
}

typedef struct fit_args {
    const char *write;
    bool steps;
} fit_args;

static const cli_opt fit_opts[] = {{"--write", true}, {"--steps", false}};

static int on_fit_opt(void *ctx, const char *f, const char *v)
{
    fit_args *a = ctx;
    if (strcmp(f, "--write") == 0) a->write = v;
    else a->steps = true;
    return 0;
}

/* --write PATH may be written before the fit runs: PATH is new, or a file an earlier --write
 * wrote (its first line), not anything else of the user's, which it overwrote. */
static int check_write(const char *path)
{
    struct stat st;
    if (!path[0]) {
        fprintf(stderr, "servesim: --write needs a file name, got \"\"\n");
        return -1;
    }
    char why[4400];
    if (stat(path, &st) != 0) {
        /* a folder that is not there, or one nothing can be written in, was found after the fit */
        if (errno != ENOENT) snprintf(why, sizeof why, "%s: %s", path, strerror(errno));
        else if (of_check(path, why, sizeof why) == 0) return 0;
        fprintf(stderr, "servesim: --write %s\n", why);
        return -1;
    }
    char head[sizeof FIT_FILE_HEAD] = "";
    FILE *f = S_ISREG(st.st_mode) ? fopen(path, "r") : NULL;
    bool ours = f && fgets(head, sizeof head, f) && strcmp(head, FIT_FILE_HEAD) == 0;
    if (f) fclose(f);
    if (ours) {
        /* an earlier fit's file whose name leaves no room for the temporary beside it */
        if (of_check(path, why, sizeof why) == 0) return 0;
        fprintf(stderr, "servesim: --write %s\n", why);
        return -1;
    }
    fprintf(stderr, "servesim: --write %s: %s; it replaces only a file an earlier --write wrote\n", path,
            S_ISDIR(st.st_mode) ? "is a directory" : "exists and is not servesim's roofline fit");
    return -1;
}

int cmd_roofline_fit(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(fit_usage, stdout);
        return EXIT_OK;
    }
    fit_args a = {0};
    if (cli_parse(argc, argv, fit_usage, fit_opts, sizeof fit_opts / sizeof *fit_opts, on_fit_opt, NULL, &a) < 0)
        return EXIT_BAD_INPUT;
    const char *write = a.write;
    bool steps = a.steps;
    if (write && check_write(write) < 0) return EXIT_BAD_INPUT;
    char data[4096], err[1400];
    if (measured_data_dir(data, sizeof data) < 0) {
        fprintf(stderr, "servesim: roofline-fit: no costs/ folder found (set SERVESIM_DATA_DIR to servesim's data "
                        "directory)\n");
        return EXIT_BAD_INPUT;
    }
    char *rows = NULL;
    size_t rows_len = 0;
    FILE *rf = open_memstream(&rows, &rows_len);
    if (!rf) return EXIT_FAILURE_OTHER;
    int fitted = 0, status = EXIT_OK;
    gpu_tables *gp = calloc(1, sizeof *gp), *moe = calloc(1, sizeof *moe); /* large: on the heap */
    if (!gp || !moe) {
        free(gp);
        free(moe);
        fclose(rf);
        free(rows);
        return EXIT_FAILURE_OTHER;
    }
    printf("tables in %scosts/; |roofline / table - 1| over the fit's steps, and over each model's steps when the\n"
           "fit has not seen that model (held out)\n", data);
    printf("%-13s %6s %6s %6s %8s %7s %7s %8s %8s  %s\n", "gpu", "comp", "mem", "attn", "step ms", "median", "max",
           "held med", "held max", "tables");
    for (size_t h = 0; hw_preset_at(h) && status == EXIT_OK; h++)
        for (int fp8 = 0; fp8 <= 1 && status == EXIT_OK; fp8++) {
            const hw_spec *hw = hw_preset_at(h);
            char label[64];
            snprintf(label, sizeof label, "%s%s", hw->name, fp8 ? " fp8" : "");
            if (load(hw->name, gp, false, fp8, err, sizeof err) < 0 ||
                load(hw->name, moe, true, fp8, err, sizeof err) < 0) {
                fprintf(stderr, "servesim: %s\n", err);
                status = EXIT_BAD_INPUT;
            } else if (gp->n == 0) {
                printf("%-13s no measured tables\n", label);
            } else {
                hw_fit f;
                if (roofline_fit(hw, gp->cases, gp->n, &f) < 0 ||
                    (gp->n > 1 && roofline_fit_holdout(hw, gp->cases, gp->n, &f) < 0)) {
                    fprintf(stderr, "servesim: roofline-fit: the search did not converge for %s\n", label);
                    status = EXIT_FAILURE_OTHER;
                } else {
                    printf("%-13s %6.3f %6.3f %6.3f %8.3f %6.1f%% %6.1f%% %7.1f%% %7.1f%%  %d\n", label,
                           f.compute_efficiency, f.memory_efficiency, f.attention_efficiency, f.step_overhead_ms,
                           100 * f.median_error, 100 * f.max_error, 100 * f.holdout_median_error,
                           100 * f.holdout_max_error, gp->n);
                    for (int c = 0; steps && c < gp->n; c++)
                        for (int i = 0; i < roofline_fit_steps(); i++) {
                            char what[96];
                            double e = roofline_fit_error(hw, &gp->cases[c], &f, i, what, sizeof what);
                            printf("    %-14s %-32s %6.1f%%\n", gp->cases[c].model->name, what, 100 * e);
                        }
                    for (int c = 0; c < moe->n; c++) {
                        int n = roofline_fit_steps();
                        double *e = malloc((size_t)n * sizeof *e), sum = 0;
                        if (!e) break;
                        for (int i = 0; i < n; i++) {
                            char what[96];
                            e[i] = roofline_fit_error(hw, &moe->cases[c], &f, i, what, sizeof what);
                            sum += e[i];
                        }
                        qsort(e, n, sizeof *e, met_cmp_double);
                        printf("%-13s   %s (mixture of experts, not in the fit): median %.1f%%, mean %.1f%%, "
                               "max %.1f%%\n",
                               "", moe->cases[c].model->name, 100 * (n % 2 ? e[n / 2] : (e[n / 2 - 1] + e[n / 2]) / 2),
                               100 * sum / n, 100 * e[n - 1]);
                        free(e);
                    }
                    fprintf(rf, "%s(\"%s\", %.3f, %.3f, %.3f, %.3f, %.3f, %.3f, %.3f, %.3f)\n", fp8 ? "FIT8" : "FIT",
                            hw->name,
                            f.compute_efficiency, f.memory_efficiency, f.attention_efficiency, f.step_overhead_ms,
                            f.median_error, f.max_error, f.holdout_median_error, f.holdout_max_error);
                    fitted++;
                }
            }
            unload(gp);
            unload(moe);
        }
    fclose(rf);
    if (status == EXIT_OK && write && fitted == 0) {
        fprintf(stderr, "servesim: roofline-fit: no GPU has measured tables in %scosts/; %s left as it was\n", data,
                write);
        status = EXIT_BAD_INPUT;
    }
    if (status == EXIT_OK && write) status = write_fits(write, rows);
    free(rows);
    free(gp);
    free(moe);
    return status;
}
