#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/results.h"
#include "cli/commands.h"
#include "cli/job.h"
#include "cli/run_repeat.h"
#include "cli/study_args.h"

static const char run_usage[] =
    "usage: servesim run [SCENARIO.ini] [--out DIR] [--seed N] [--set SECTION.KEY=VALUE]... [--quiet]\n"
    "                    [--repeat N [--jobs N]]\n"
    "  Simulates the scenario (a built-in default without one: llama-3-8b on an H200, priced by\n"
    "  vLLM's kernels timed on one, 1000 chat-like requests, Poisson arrivals at 10/s) and writes\n"
    "  summary.json, requests.csv and steps.csv to DIR (default results/runs/NAME-seedN).\n"
    "  --repeat N runs seeds seed .. seed+N-1 (N threads at most --jobs, default one per CPU),\n"
    "  prints each metric's mean ± std and adds DIR/repeats.csv and repeat_stats.csv.\n";

/* Takes run's own --repeat and --jobs out of ARGV; the rest is every scenario command's. */
static int take_repeat_args(int *argc, char **argv, long *repeat, long *jobs)
{
    int kept = 1;
    for (int i = 1; i < *argc; i++) {
        bool is_repeat = strcmp(argv[i], "--repeat") == 0, is_jobs = strcmp(argv[i], "--jobs") == 0;
        if (!is_repeat && !is_jobs) {
            argv[kept++] = argv[i];
            continue;
        }
        if (i + 1 >= *argc) {
            fprintf(stderr, "servesim: %s needs a value\n%s", argv[i], run_usage);
            return -1;
        }
        if (study_parse_int(argv[i], argv[i + 1], 1, is_repeat ? 10000 : 1024, is_repeat ? repeat : jobs) < 0)
            return -1;
        i++;
    }
    *argc = kept;
    return 0;
}

int cmd_run(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(run_usage, stdout);
        return EXIT_OK;
    }
    scenario sc;
    scenario_args a;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN), repeat = 1, jobs = cpus > 0 ? cpus : 1;
    if (take_repeat_args(&argc, argv, &repeat, &jobs) < 0) return EXIT_BAD_INPUT;
    if (parse_scenario_args(argc, argv, run_usage, &sc, &a) < 0) return EXIT_BAD_INPUT;
    char out[1200], suffix[64];
    snprintf(suffix, sizeof suffix, "seed%lld", sc.v[K_run_seed].i);
    scenario_out_dir(&sc, a.out_dir, suffix, out, sizeof out);
    if (repeat > 1) return run_repeats(&sc, out, (int)repeat, (int)jobs, a.quiet);
    simjob j = {.sc = &sc, .out_dir = out, .progress = !a.quiet};
    char err[1024];
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int status = simjob_run(&j, err, sizeof err);
    double wall = job_seconds_since(&t0);
    if (status != EXIT_OK) {
        fprintf(stderr, "servesim: %s\n", err);
        return status;
    }
    if (!a.quiet) {
        if (j.have_summary) res_print_summary(stdout, &j.sum);
        else printf("No measured request finished: every one was rejected (see requests.csv).\n");
        printf("Cost model: %s, %s\n", j.cost_kind, j.cost_source);
        printf("Simulated %.1f s of serving in %.2f s (%zu events). Results in %s/\n",
               j.stats.end_time, wall, j.stats.events, out);
    }
    return EXIT_OK;
}
