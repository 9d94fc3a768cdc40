#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "io/outdir.h"
#include "calibrate/calibrate.h"
#include "cli/commands.h"
#include "io/interrupt.h"
#include "cli/options.h"
#include "cli/environment.h"
#include "study/job.h"
#include "core/model.h"
#include "config/scenario.h"
#include "sim/hardware.h"
#include "sim/table_cost.h"

static const char calibrate_usage[] =
    "usage: servesim calibrate [--backend cpu|cuda] [--model PRESET] [--out FILE]\n"
    "                          [--max-tokens N] [--max-context N] [--max-seqs N]\n"
    "                          [--block-size N] [--threads N] [--repeats N] [--rounds N]\n"
    "                          [--seed N]\n"
    "       servesim calibrate --check FILE\n"
    "  Times the real backend's parts (linear layers over batched tokens, prefill attention\n"
    "  over new tokens x cached context, decode attention over sequences x context, LM head\n"
    "  and sampling over sequences, per-step overhead) and writes a cost table the simulator\n"
    "  reads with `[hardware] cost_table = FILE`. Defaults: cuda 16384 tokens, 8192 context,\n"
    "  1024 sequences, 5 repeats; cpu 512, 2048, 64, 3 (model tiny). The sweeps run in --rounds\n"
    "  passes (default: cuda 1, cpu 3), the repeats spread over them, each followed by a segment of\n"
    "  real serving that fits the step overhead and the serving scales (docs/cost-model.md).\n"
    "  --check holds out every other point of each sweep and reports the interpolation error.\n";

typedef struct calib_args {
    const char *backend, *model, *out, *check;
    const char *other;       /* the first option besides --check, which --check takes none of */
    long max_tokens, max_context, max_seqs, block_size, threads, repeats, rounds, seed;
} calib_args;

static const cli_opt calibrate_opts[] = {
    {"--backend", true}, {"--model", true}, {"--out", true}, {"--check", true}, {"--max-tokens", true},
    {"--max-context", true}, {"--max-seqs", true}, {"--block-size", true}, {"--threads", true},
    {"--repeats", true}, {"--rounds", true}, {"--seed", true},
};

static int on_calibrate_opt(void *ctx, const char *f, const char *v)
{
    calib_args *a = ctx;
    if (!a->other && strcmp(f, "--check") != 0) a->other = f;
    if (strcmp(f, "--backend") == 0) a->backend = v;
    else if (strcmp(f, "--model") == 0) a->model = v;
    else if (strcmp(f, "--out") == 0) a->out = v;
    else if (strcmp(f, "--check") == 0) a->check = v;
    /* at least 2: a one-token step is a decode, and a grid of them has no prefill rows, which
     * the table then failed on after the whole calibration (bad-input campaign) */
    else if (strcmp(f, "--max-tokens") == 0) return cli_parse_long(f, v, 2, 1 << 20, &a->max_tokens);
    else if (strcmp(f, "--max-context") == 0) return cli_parse_long(f, v, 1, 1 << 22, &a->max_context);
    else if (strcmp(f, "--max-seqs") == 0) return cli_parse_long(f, v, 1, 65536, &a->max_seqs);
    else if (strcmp(f, "--block-size") == 0) return cli_parse_long(f, v, 1, 1024, &a->block_size);
    else if (strcmp(f, "--threads") == 0) return cli_parse_long(f, v, 0, 1024, &a->threads);
    else if (strcmp(f, "--repeats") == 0) return cli_parse_long(f, v, 1, 64, &a->repeats);
    else if (strcmp(f, "--rounds") == 0) return cli_parse_long(f, v, 1, 64, &a->rounds);
    else if (strcmp(f, "--seed") == 0) return cli_parse_long(f, v, 0, 2147483647, &a->seed);
    return 0;
}

static int parse_args(int argc, char **argv, calib_args *a)
{
    *a = (calib_args){.backend = "cpu", .block_size = 16, .seed = 1};
    if (cli_parse(argc, argv, calibrate_usage, calibrate_opts, sizeof calibrate_opts / sizeof *calibrate_opts,
                  on_calibrate_opt, NULL, a) < 0)
        return -1;
    if (strcmp(a->backend, "cpu") != 0 && strcmp(a->backend, "cuda") != 0) {
        fprintf(stderr, "servesim: --backend %s: expected cpu or cuda\n", a->backend);
        return -1;
    }
    if (a->out && !a->out[0]) {
        fprintf(stderr, "servesim: --out needs a file name, got \"\"\n%s", calibrate_usage);
        return -1;
    }
    return 0;
}

static int check_table(const char *path)
{
    cost_table t;
    char err[1024];
    if (ct_read(&t, path, err, sizeof err) < 0) {
        fprintf(stderr, "servesim: %s\n", err);
        return EXIT_BAD_INPUT;
    }
    /* a table the simulator refuses (a component missing, a grid cut short) has nothing to
     * check: it once scored 0.0% (bad-input campaign) */
    table_cost usable;
    if (tc_init(&usable, &t, path, err, sizeof err) < 0) {
        fprintf(stderr, "servesim: %s\n", err);
        ct_free(&t);
        return EXIT_BAD_INPUT;
    }
    tc_free(&usable);
    /* a table of sweeps too short to hold a point out scored "0 held out ... 0.0%" (bad-input
     * campaign): the report is printed only when it checked something */
    char *report = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&report, &size);
    double worst = f ? calibrate_check(&t, f) : -2;
    if (f) fclose(f);
    ct_free(&t);
    if (worst < 0) {
        fprintf(stderr, worst == -1 ? "servesim: %s: no point could be held out and interpolated from the rest "
                                      "(that needs a sweep of 3 sizes or more)\n" : "servesim: %s: out of memory\n", path);
        free(report);
        return worst == -1 ? EXIT_BAD_INPUT : EXIT_FAILURE_OTHER;
    }
    printf("Interpolation error on held-out sweep points of %s:\n%s", path, report);
    printf("Largest held-out error: %.1f%%\n", 100 * worst);
    free(report);
    return EXIT_OK;
}

/* The largest batch a scenario left at vLLM's defaults runs on any GPU preset (1,024 on GPUs of
 * 70 GiB or more): a CUDA table timed to fewer would leave a loaded run's larger batches to
 * extrapolation. */
static int largest_vllm_max_seqs(void)
{
    int most = 0;
    for (size_t i = 0; hw_preset_at(i); i++) {
        int seqs = scenario_vllm_max_seqs(hw_preset_at(i));
        if (seqs > most) most = seqs;
    }
    return most;
}

static void fill_defaults(calib_args *a, bool cuda)
{
    if (!a->model) a->model = cuda ? "llama-3-8b" : "tiny";
    if (!a->max_tokens) a->max_tokens = cuda ? 16384 : 512;
    if (!a->max_context) a->max_context = cuda ? 8192 : 2048;
    if (!a->max_seqs) a->max_seqs = cuda ? largest_vllm_max_seqs() : 64;
    if (!a->repeats) a->repeats = cuda ? 5 : 3;
    /* Rounds are for machines whose speed drifts (the shared CPU VM); on a GPU they would
     * only multiply the warm-ups and the backend openings of the 8B model. */
    if (!a->rounds) a->rounds = cuda ? 1 : 3;
}

void calibrate_show_progress(void *ctx, int done, int total)
{
    (void)ctx;
    if (isatty(2)) fprintf(stderr, "\rcalibrating: %d/%d shapes%s", done, total, done == total ? "\n" : "");
}

int cmd_calibrate(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(calibrate_usage, stdout);
        return EXIT_OK;
    }
    calib_args a;
    if (parse_args(argc, argv, &a) < 0) return EXIT_BAD_INPUT;
    if (a.check && a.other) { /* --out, --max-tokens, ... were taken and ignored (bad-input campaign) */
        fprintf(stderr, "servesim: --check FILE checks a table and takes no other option (got %s)\n", a.other);
        return EXIT_BAD_INPUT;
    }
    if (a.check) return check_table(a.check);
    bool cuda = strcmp(a.backend, "cuda") == 0;
    fill_defaults(&a, cuda);
    const model_shape *m = model_preset(a.model);
    if (!m) {
        fprintf(stderr, "servesim: --model %s: unknown (known: %s)\n", a.model, model_preset_names());
        return EXIT_BAD_INPUT;
    }
    char out[1200];
    if (a.out) snprintf(out, sizeof out, "%s", a.out);
    else snprintf(out, sizeof out, "results/calibration/%s-%s.csv", a.backend, a.model);
    calib_options o = {
        .kb = {.kind = cuda ? KB_CUDA : KB_CPU, .weight_seed = (uint64_t)a.seed, .sample_seed = 1,
               .threads = (int)a.threads,
               .shape = {m->num_layers, m->hidden, m->num_heads, m->num_kv_heads, m->head_dim,
                         m->intermediate, m->vocab, m->rope_theta, m->rms_eps}},
        .model_name = a.model, .block_size = (int)a.block_size, .max_tokens = (int)a.max_tokens,
        .max_context = (int)a.max_context, .max_seqs = (int)a.max_seqs, .repeats = (int)a.repeats,
        .rounds = (int)a.rounds, .progress = calibrate_show_progress, .stop = interrupt_flag(),
    };
    /* an output that cannot be written is found before minutes of calibration, not after; and
     * calibrate replaces only a cost table (a file of the user's was once overwritten whole) */
    char why[1300];
    struct stat st;
    if (stat(out, &st) == 0) {
        char first[64] = "";
        FILE *old = S_ISREG(st.st_mode) ? fopen(out, "r") : NULL;
        if (old && !fgets(first, sizeof first, old)) first[0] = 0;
        if (old) fclose(old);
        if (strcmp(first, CT_FIRST_LINE "\n") != 0) {
            fprintf(stderr, "servesim: --out %s: %s; calibrate replaces only a cost table (its first line "
                            "\"" CT_FIRST_LINE "\")\n",
                    out, S_ISDIR(st.st_mode) ? "is a directory" : "exists and is not a cost table");
            return EXIT_BAD_INPUT;
        }
    }
    if (of_check(out, why, sizeof why) < 0) {
        fprintf(stderr, "servesim: --out %s\n", why);
        return EXIT_BAD_INPUT;
    }
    cost_table t;
    char err[1024];
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int status = calibrate_run(&o, &t, err, sizeof err);
    if (status == 0) {
        char commit[64];
        env_git_commit(commit, sizeof commit);
        ct_set_meta(&t, "commit", commit);
        /* the folders --out names, made only now that there is a table to put there */
        od_made made = {0};
        if (od_make_parents(out, &made, err, sizeof err) < 0 || ct_write(&t, out, err, sizeof err) < 0) {
            od_unmake_parents(out, &made);
            status = 1;
        }
        if (status != 0) ct_free(&t); /* the table was calibrated; only its file failed */
    }
    if (status != 0) {
        fprintf(stderr, "servesim: %s\n", err);
        return status == 2 ? EXIT_BAD_INPUT : EXIT_FAILURE_OTHER;
    }
    printf("Calibrated %s on %s in %.1f s: %s\n", a.model, ct_meta(&t, "device"), job_seconds_since(&t0), out);
    ct_free(&t);
    return EXIT_OK;
}
