/* `servesim presets`: the model and hardware presets, each GPU's fitted roofline and the
 * measured tables there are for it; `--csv models` is what scripts/aic_import.py reads. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "config/measured.h"
#include "core/model.h"
#include "sim/hardware.h"

static const char presets_usage[] =
    "usage: servesim presets [--csv models|hardware]\n"
    "  Lists the model presets (shapes and parameters) and the hardware presets (datasheet\n"
    "  figures, the roofline fitted to the GPU's measured tables and its error, the measured\n"
    "  tables in costs/). --csv prints one of the two lists as CSV.\n";

static void models_csv(void)
{
    puts("name,layers,hidden,heads,kv_heads,head_dim,intermediate,vocab,qk_norm,max_position,params,experts,"
         "experts_per_token");
    for (size_t i = 0; model_preset_at(i); i++) {
        const model_shape *m = model_preset_at(i);
        printf("%s,%d,%d,%d,%d,%d,%d,%d,%d,%d,%lld,%d,%d\n", m->name, m->num_layers, m->hidden, m->num_heads,
               m->num_kv_heads, m->head_dim, m->intermediate, m->vocab, m->qk_norm, m->max_position,
               (long long)model_num_params(m), m->num_experts, m->experts_per_token);
    }
}

static void hardware_csv(void)
{
    puts("name,db_system,peak_tflops,mem_bandwidth_gbs,mem_gib,compute_efficiency,memory_efficiency,"
         "attention_efficiency,step_overhead_ms,fit_median_error,fit_max_error,holdout_median_error,holdout_max_error,"
         "fp8_tflops,fp8_compute_efficiency,fp8_memory_efficiency,fp8_attention_efficiency,fp8_step_overhead_ms,"
         "fp8_fit_median_error,fp8_fit_max_error,fp8_holdout_median_error,fp8_holdout_max_error");
    for (size_t i = 0; hw_preset_at(i); i++) {
        const hw_spec *h = hw_preset_at(i);
        hw_fit f = hw_preset_fit(h->name), f8;
        printf("%s,%s,%g,%g,%.6g,%g,%g,%g,%g,%g,%g,%g,%g,", h->name, h->db_system, h->peak_tflops,
               h->mem_bandwidth_gbs, h->mem_gib, f.compute_efficiency, f.memory_efficiency, f.attention_efficiency,
               f.step_overhead_ms, f.median_error, f.max_error, f.holdout_median_error, f.holdout_max_error);
        if (h->fp8_tflops > 0) printf("%g", h->fp8_tflops);
        if (hw_preset_fit_fp8(h->name, &f8))
            printf(",%g,%g,%g,%g,%g,%g,%g,%g\n", f8.compute_efficiency, f8.memory_efficiency, f8.attention_efficiency,
                   f8.step_overhead_ms, f8.median_error, f8.max_error, f8.holdout_median_error, f8.holdout_max_error);
        else puts(",,,,,,,,"); /* the fp8 fit's 8 columns, empty: the GPU has no FP8 tables */
    }
}

static void table(void)
{
    printf("Model presets\n  %-14s %6s %6s %5s %8s %8s %12s %7s %8s %7s %s\n", "name", "layers", "hidden", "heads",
           "kv_heads", "head_dim", "intermediate", "vocab", "params", "context", "");
    for (size_t i = 0; model_preset_at(i); i++) {
        const model_shape *m = model_preset_at(i);
        printf("  %-14s %6d %6d %5d %8d %8d %12d %7d %7.2fB %7d %s\n", m->name, m->num_layers, m->hidden, m->num_heads,
               m->num_kv_heads, m->head_dim, m->intermediate, m->vocab, model_num_params(m) / 1e9, m->max_position,
               m->qk_norm ? "qk-norm" : m->tied_embeddings ? "tied embeddings" : "");
        if (m->num_experts > 0)
            printf("  %-14s %d experts of that intermediate, %d per token: %.2fB parameters active\n", "",
                   m->num_experts, m->experts_per_token,
                   (model_num_params(m) - model_linear_params(m) + model_active_linear_params(m)) / 1e9);
    }
    char data[4096];
    if (measured_data_dir(data, sizeof data) < 0) snprintf(data, sizeof data, "(none found: set SERVESIM_DATA_DIR) ");
    printf("\nHardware presets (roofline: efficiencies and step cost fitted to the GPU's measured tables;\n"
           "its |error| against them, median / max, on a model the fit did not see; measured tables in\n"
           "%scosts/, by model, vLLM version and tensor parallelism: \"fp8\" prices FP8 weights and KV\n"
           "cache (model.quantization=fp8, kv.cache_dtype=fp8), \"fp8 weights\" FP8 weights with the\n"
           "KV cache in model.dtype (model.quantization=fp8 alone), \"fp8 kv\" an FP8 KV cache beside\n"
           "model.dtype weights (kv.cache_dtype=fp8 alone); under a GPU with FP8 tables, \"fp8 fit\": its FP8\n"
           "peak (\"-\": none, FP8 weights' layers at the bf16 one) and the roofline fitted to those tables,\n"
           "which model.quantization=fp8 takes)\n", data);
    printf("  %-13s %8s %7s %6s   %-30s %-13s %s\n", "name", "TFLOP/s", "GB/s", "GiB",
           "roofline: compute memory attn step", "error", "measured tables");
    for (size_t i = 0; hw_preset_at(i); i++) {
        const hw_spec *h = hw_preset_at(i);
        hw_fit f = hw_preset_fit(h->name);
        char err[32], tables[2048];
        if (f.holdout_max_error > 0)
            snprintf(err, sizeof err, "%.0f%% / %.0f%%", 100 * f.holdout_median_error, 100 * f.holdout_max_error);
        else snprintf(err, sizeof err, "not fitted");
        measured_list(h->name, tables, sizeof tables);
        printf("  %-13s %8g %7g %6.1f   %7.2f %6.2f %4.2f %5.2fms   %-13s %s\n", h->name, h->peak_tflops,
               h->mem_bandwidth_gbs, h->mem_gib, f.compute_efficiency, f.memory_efficiency, f.attention_efficiency,
               f.step_overhead_ms, err, tables[0] ? tables : "none");
        hw_fit f8;
        if (hw_preset_fit_fp8(h->name, &f8)) {
            snprintf(err, sizeof err, "%.0f%% / %.0f%%", 100 * f8.holdout_median_error, 100 * f8.holdout_max_error);
            char peak[32] = "-"; /* none: FP8 weights' layers run at the bf16 peak (the B60) */
            if (h->fp8_tflops > 0) snprintf(peak, sizeof peak, "%g", h->fp8_tflops);
            printf("    %-11s %8s %7s %6s   %7.2f %6.2f %4.2f %5.2fms   %s\n", "fp8 fit", peak, "", "",
                   f8.compute_efficiency, f8.memory_efficiency, f8.attention_efficiency, f8.step_overhead_ms, err);
        }
    }
}

static const cli_opt presets_opts[] = {{"--csv", true}};

static int on_presets_opt(void *ctx, const char *flag, const char *value)
{
    (void)flag;
    *(const char **)ctx = value;
    return 0;
}

int cmd_presets(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(presets_usage, stdout);
        return EXIT_OK;
    }
    const char *csv = NULL;
    if (cli_parse(argc, argv, presets_usage, presets_opts, 1, on_presets_opt, NULL, &csv) < 0) return EXIT_BAD_INPUT;
    if (!csv) table();
    else if (strcmp(csv, "models") == 0) models_csv();
    else if (strcmp(csv, "hardware") == 0) hardware_csv();
    else {
        fprintf(stderr, "servesim: --csv %s: expected models or hardware\n%s", csv, presets_usage);
        return EXIT_BAD_INPUT;
    }
    return EXIT_OK;
}
