/* Repeat aggregation: mean, sample std, min and max of known numbers; run --repeat's files. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "metrics/repeat.h"
#include "metrics/sumfield.h"
#include "cli/commands.h"

Test(repeat, mean_std_min_max_of_known_numbers)
{
    summary runs[4] = {{0}};
    double ttft[] = {10, 20, 30, 60};
    for (int i = 0; i < 4; i++) {
        runs[i].completed = i + 1;
        runs[i].ttft_ms.p99 = ttft[i];
        runs[i].total_output_tokens = 1000 * (i + 1);
    }
    rep_stat st[64];
    cr_assert(sumf_count() <= 64);
    rep_aggregate(runs, 4, st);
    const rep_stat *c = &st[sumf_find("completed")], *t = &st[sumf_find("p99_ttft_ms")];
    cr_assert_float_eq(c->mean, 2.5, 1e-12);
    cr_assert_float_eq(c->std, sqrt(5.0 / 3.0), 1e-12);
    cr_assert_float_eq(c->min, 1, 0);
    cr_assert_float_eq(c->max, 4, 0);
    cr_assert_float_eq(t->mean, 30, 1e-12);
    cr_assert_float_eq(t->std, sqrt((400 + 100 + 0 + 900) / 3.0), 1e-12);
    summary mean;
    rep_mean_summary(st, &mean);
    cr_assert_eq(mean.completed, 3, "2.5 rounds away from zero");
    cr_assert_eq(mean.total_output_tokens, 2500);
    cr_assert_float_eq(mean.ttft_ms.p99, 30, 1e-12);
    rep_aggregate(runs, 1, st);
    cr_assert_eq(st[sumf_find("completed")].std, 0, "one run has no spread");
}

/* repeats.csv of the two RUNS (seeds 11 and 12), as text the caller frees. */
static char *runs_csv(const summary *runs)
{
    uint64_t seeds[2] = {11, 12};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    rep_write_runs_csv(f, runs, seeds, 2);
    fclose(f);
    return buf;
}

/* repeat_stats.csv of the two RUNS, as text the caller frees. */
static char *stats_csv(const summary *runs)
{
    rep_stat st[64];
    cr_assert_leq(sumf_count(), 64);
    rep_aggregate(runs, 2, st);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    rep_write_stats_csv(f, st, runs, 2);
    fclose(f);
    return buf;
}

Test(repeat, csv_rows_per_run_and_per_metric)
{
    summary runs[2] = {{.completed = 7}, {.completed = 9}};
    char *buf = runs_csv(runs);
    cr_assert(strncmp(buf, "repeat,seed,completed,rejected,", 31) == 0, "%s", buf);
    cr_assert(strstr(buf, "\n1,11,7,0,") && strstr(buf, "\n2,12,9,0,"), "%s", buf);
    free(buf);
    buf = stats_csv(runs);
    cr_assert(strstr(buf, "metric,mean,std,min,max\ncompleted,8,1.414213562,7,9\n"), "%s", buf);
    cr_assert_null(strstr(buf, "p99.9"), "no run.percentiles, no rows for them: %s", buf);
    free(buf);
}

/* The latencies at run.percentiles were in each run's summary.json and in none of the repeat
 * files (new-user trial): repeats.csv ends with them, repeat_stats.csv has a row each */
Test(repeat, the_latencies_at_run_percentiles_are_in_both_files)
{
    summary runs[2] = {{.completed = 7, .num_percentiles = 2, .percentiles = {99.9, 25}},
                       {.completed = 9, .num_percentiles = 2, .percentiles = {99.9, 25}}};
    runs[0].ttft_ms.extra[0] = 100, runs[1].ttft_ms.extra[0] = 140; /* mean 120, std sqrt(800) */
    runs[0].e2el_ms.extra[1] = 3, runs[1].e2el_ms.extra[1] = 5;
    char *buf = runs_csv(runs);
    cr_assert(strstr(buf, ",p99.9_ttft_ms,p25_ttft_ms,p99.9_tpot_ms,p25_tpot_ms,p99.9_itl_ms,p25_itl_ms,"
                          "p99.9_e2el_ms,p25_e2el_ms\n"), "%s", buf);
    cr_assert(strstr(buf, ",100,0,0,0,0,0,0,3\n") && strstr(buf, ",140,0,0,0,0,0,0,5\n"), "%s", buf);
    free(buf);
    buf = stats_csv(runs);
    cr_assert(strstr(buf, "\np99.9_ttft_ms,120,28.28427125,100,140\n"), "%s", buf);
    cr_assert(strstr(buf, "\np25_e2el_ms,4,1.414213562,3,5\n"), "%s", buf);
    free(buf);
}

Test(repeat, run_repeat_writes_a_run_and_the_spread)
{
    system("rm -rf /tmp/ss-run-repeat");
    char *argv[] = {"run", "--set", "workload.num_requests=30", "--repeat", "3", "--jobs", "2", "--out",
                    "/tmp/ss-run-repeat", "--quiet"};
    cr_assert_eq(cmd_run(10, argv), 0);
    struct stat st;
    const char *files[] = {"summary.json", "requests.csv", "steps.csv", "repeats.csv", "repeat_stats.csv"};
    for (int i = 0; i < 5; i++) {
        char p[128];
        snprintf(p, sizeof p, "/tmp/ss-run-repeat/%s", files[i]);
        cr_assert_eq(stat(p, &st), 0, "%s", p);
    }
    cr_assert_neq(stat("/tmp/ss-run-repeat/points", &st), 0);
    char *bad[] = {"run", "--repeat", "0"};
    cr_assert_eq(cmd_run(3, bad), 2);
}

/* A seed near run.seed's maximum with --repeat was refused as "point 0 (base): --set
 * run.seed=2147483648: ...", a --set and a point the user had not typed (bad-input campaign):
 * the message names --seed (or where run.seed came from) and --repeat, before any run */
Test(repeat, a_seed_whose_repeats_pass_the_maximum_names_seed_and_repeat, .init = cr_redirect_stderr)
{
    system("rm -rf /tmp/ss-run-seedmax");
    char *argv[] = {"run", "--set", "workload.num_requests=5", "--seed", "2147483647", "--repeat", "2", "--out",
                    "/tmp/ss-run-seedmax", "--quiet"};
    cr_assert_eq(cmd_run(10, argv), 2);
    struct stat st;
    cr_assert_neq(stat("/tmp/ss-run-seedmax", &st), 0, "nothing written");
    fflush(stderr);
    char text[2048];
    text[fread(text, 1, sizeof text - 1, cr_get_redirected_stderr())] = 0;
    cr_assert_str_eq(text, "servesim: run.seed (--seed) = 2147483647 with --repeat 2 takes seeds up to 2147483648, "
                           "past run.seed's maximum 2147483647: give a seed of at most 2147483646, or fewer repeats\n");
    char *last[] = {"run", "--set", "workload.num_requests=5", "--set", "run.seed=2147483644", "--repeat", "4", "--out",
                    "/tmp/ss-run-seedmax", "--quiet"};
    cr_assert_eq(cmd_run(10, last), 0, "seeds up to the maximum itself run");
    system("rm -rf /tmp/ss-run-seedmax");
}
