/* The roofline fit: it recovers the efficiencies and step cost of a roofline it is fitted to,
 * reports the error of what it cannot fit, and the fitted values reach the presets. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim/cost.h"
#include "sim/roofline_fit.h"

static double roofline_step(const void *ctx, const sched_batch *b) { return cost_step_time(ctx, b); }

/* Two models' "measured" prices made by HW's roofline at TRUTH (quantized to FP8 weights and
 * KV cache with FP8), as fit cases, and the fit to them in OUT. */
static void fit_to_roofline(const hw_spec *hw, roofline_params truth, bool fp8, cost_model measured[2],
                            fit_case cases[2], hw_fit *out)
{
    const model_shape *models[] = {model_preset("llama-3.1-8b"), model_preset("qwen3-32b")};
    for (int i = 0; i < 2; i++) {
        cost_roofline_init(&measured[i], models[i], hw, &truth, 2, 1);
        if (fp8) cost_roofline_quantize(&measured[i], true, true);
        cases[i] = (fit_case){models[i], {.step_time = roofline_step, .ctx = &measured[i]}, fp8};
    }
    cr_assert_eq(roofline_fit(hw, cases, 2, out), 0);
}

/* F is TRUTH, to the search's tolerance, and prices the steps within 0.1%. */
static void assert_recovered(const hw_fit *f, roofline_params truth)
{
    cr_assert_float_eq(f->compute_efficiency, truth.compute_efficiency, 2e-3);
    cr_assert_float_eq(f->memory_efficiency, truth.memory_efficiency, 2e-3);
    cr_assert_float_eq(f->attention_efficiency, truth.attention_efficiency, 5e-3);
    cr_assert_float_eq(f->step_overhead_ms, truth.step_overhead_s * 1e3, 5e-3);
    cr_assert_lt(f->max_error, 1e-3);
}

Test(roofline_fit, recovers_the_roofline_it_is_fitted_to)
{
    const hw_spec *hw = hw_preset("h100");
    cost_model measured[2];
    fit_case cases[2];
    hw_fit f;
    roofline_params truth = {0.62, 0.81, 0.47, 0.9e-3};
    fit_to_roofline(hw, truth, false, measured, cases, &f);
    assert_recovered(&f, truth);
    /* each model held out is priced by the fit to the other: the same roofline */
    cr_assert_eq(roofline_fit_holdout(hw, cases, 2, &f), 0);
    cr_assert_lt(f.holdout_max_error, 2e-3);
    cr_assert_eq(roofline_fit_holdout(hw, cases, 1, &f), -1, "one model cannot be held out");
}

/* A "measured" model the roofline cannot follow: a floor of 4 ms under every step. */
typedef struct floored {
    cost_model roof;
} floored;

static double floored_step(const void *ctx, const sched_batch *b)
{
    const floored *f = ctx;
    double t = cost_step_time(&f->roof, b);
    return t > 4e-3 ? t : 4e-3;
}

Test(roofline_fit, reports_the_error_it_cannot_fit_away)
{
    const hw_spec *hw = hw_preset("h200");
    const model_shape *m = model_preset("llama-3.2-1b");
    floored fl;
    roofline_params p = {0.7, 0.8, 0.5, 0.2e-3};
    cost_roofline_init(&fl.roof, m, hw, &p, 2, 1);
    fit_case c = {m, {.step_time = floored_step, .ctx = &fl}, false};
    hw_fit f;
    cr_assert_eq(roofline_fit(hw, &c, 1, &f), 0);
    cr_assert_gt(f.max_error, 0.05, "a 4 ms floor under a 1B model's small steps cannot be fitted");
    cr_assert_leq(f.median_error, f.max_error);
    /* the reported errors are the errors of its steps */
    double worst = 0;
    char what[96];
    for (int i = 0; i < roofline_fit_steps(); i++) worst = fmax(worst, roofline_fit_error(hw, &c, &f, i, what, sizeof what));
    cr_assert_float_eq(worst, f.max_error, 1e-12);
}

/* FP8 cases are priced by the quantized roofline: a fit to an FP8 roofline recovers it, and
 * the same fit on the bf16 roofline's terms would not (FP8 weights halve the bytes a decode
 * reads and double the peak a prefill runs at). */
Test(roofline_fit, recovers_the_fp8_roofline_it_is_fitted_to)
{
    const hw_spec *hw = hw_preset("h200");
    cost_model measured[2];
    fit_case cases[2];
    hw_fit f;
    roofline_params truth = {0.41, 0.62, 0.9, 1.3e-3};
    fit_to_roofline(hw, truth, true, measured, cases, &f);
    assert_recovered(&f, truth);
    /* the same prices read as bf16 cases: the bf16 roofline cannot follow them */
    for (int i = 0; i < 2; i++) cases[i].fp8 = false;
    cr_assert_eq(roofline_fit(hw, cases, 2, &f), 0);
    cr_assert_gt(f.max_error, 0.05);
}

/* The presets carry an FP8 fit where their GPU has FP8 tables (not the A100's). */
Test(roofline_fit, presets_carry_an_fp8_fit_where_their_gpu_has_fp8_tables)
{
    hw_fit bf16 = hw_preset_fit("h200"), fp8;
    cr_assert(hw_preset_fit_fp8("h200", &fp8));
    cr_assert_gt(fp8.max_error, 0);
    cr_assert_lt(fp8.compute_efficiency, bf16.compute_efficiency, "FP8 GEMMs reach less of their peak");
    cr_assert_not(hw_preset_fit_fp8("a100", &fp8));
    cr_assert_not(hw_preset_fit_fp8("", &fp8), "the placeholder row is no GPU's");
}

/* Every GPU folder in costs/ with a table of FP8 weights (".fp8." in its name) has a FIT8 row,
 * and none without: a GPU whose FP8 tables came without a refit would price FP8 weights on
 * the bf16 fit's efficiencies, 20-40% short. The folders are the presets' names. */
Test(roofline_fit, every_gpu_with_fp8_tables_has_an_fp8_fit)
{
    DIR *costs = opendir(SERVESIM_SOURCE_DIR "/costs");
    cr_assert_not_null(costs);
    int gpus = 0, with_fp8 = 0;
    for (struct dirent *g; (g = readdir(costs));) {
        if (g->d_name[0] == '.') continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/costs/%s", SERVESIM_SOURCE_DIR, g->d_name);
        DIR *tables = opendir(path);
        if (!tables) continue; /* LICENSE, NOTICE */
        bool fp8 = false;
        for (struct dirent *t; (t = readdir(tables));) fp8 |= strstr(t->d_name, ".fp8.") != NULL;
        closedir(tables);
        hw_fit f;
        cr_assert_eq(hw_preset_fit_fp8(g->d_name, &f), fp8, "%s: FP8 tables %d, FIT8 row %d", g->d_name, fp8, !fp8);
        gpus++;
        with_fp8 += fp8;
    }
    closedir(costs);
    cr_assert_geq(gpus, 10);
    cr_assert_geq(with_fp8, 9, "every GPU but the A100 has FP8 tables");
}

Test(roofline_fit, presets_carry_their_fit_and_unknown_hardware_the_defaults)
{
    hw_fit f = hw_preset_fit("h200");
    cr_assert_gt(f.max_error, 0);
    cr_assert_neq(f.compute_efficiency, hw_unfitted.compute_efficiency);
    hw_fit u = hw_preset_fit("no-such-gpu");
    cr_assert_float_eq(u.compute_efficiency, 0.8, 0);
    cr_assert_float_eq(u.step_overhead_ms, 0.5, 0);
}
