#include <stdio.h>
#include <string.h>
#include <time.h>

#include "bench/results.h"
#include "cli/commands.h"

static const char run_usage[] =
    "usage: servesim run [SCENARIO.ini] [--out DIR] [--seed N] [--set SECTION.KEY=VALUE]... [--quiet]\n"
    "  Simulates the scenario (a built-in default without one: llama-3-8b on an H200 roofline,\n"
    "  1000 chat-like requests, Poisson arrivals at 10/s) and writes summary.json,\n"
    "  requests.csv and steps.csv to DIR (default results/runs/NAME-seedN).\n";

int cmd_run(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(run_usage, stdout);
        return EXIT_OK;
    }
    scenario sc;
    scenario_args a;
    if (parse_scenario_args(argc, argv, run_usage, &sc, &a) < 0) return EXIT_BAD_INPUT;
    char out[1200], stem[300];
    scenario_stem_into(&sc, stem, sizeof stem);
    if (a.out_dir) snprintf(out, sizeof out, "%s", a.out_dir);
    else snprintf(out, sizeof out, "results/runs/%s-seed%lld", stem, sc.v[K_run_seed].i);
    simjob j = {.sc = &sc, .out_dir = out, .progress = !a.quiet};
    char err[1024];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int status = simjob_run(&j, err, sizeof err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (status != EXIT_OK) {
        fprintf(stderr, "servesim: %s\n", err);
        return status;
    }
    if (!a.quiet) {
        if (j.have_summary) res_print_summary(stdout, &j.sum);
        else printf("No measured request finished: every one was rejected (see requests.csv).\n");
        double wall = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
        printf("Simulated %.1f s of serving in %.2f s (%zu events). Results in %s/\n",
               j.stats.end_time, wall, j.stats.events, out);
    }
    return EXIT_OK;
}
