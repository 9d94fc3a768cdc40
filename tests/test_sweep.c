/* Sweeps: points equal separate runs, thread count and sharding change nothing, merge checks
 * coverage, bad input writes nothing. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "metrics/sumfield.h"
#include "cli/commands.h"
#include "study/sweep.h"
#include "tests/file_fixture.h"

/* What the redirected stderr holds so far, into BUF. */
static void stderr_text(char *buf, size_t len)
{
    fflush(stderr);
    buf[fread(buf, 1, len - 1, cr_get_redirected_stderr())] = 0;
}

static bool exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

static int cli(int (*cmd)(int, char **), const char **args)
{
    char *argv[64];
    int n = 0;
    while (args[n]) argv[n] = (char *)args[n], n++;
    return cmd(n, argv);
}

static scenario tiny(void)
{
    scenario sc;
    char err[512];
    scenario_defaults(&sc);
    /* as a scenario file sets them, which a --vary or --point may replace (a --set may not) */
    cr_assert_eq(scenario_set_from(&sc, "workload.num_requests=40", "tiny.ini:2", err, sizeof err), 0, "%s", err);
    cr_assert_eq(scenario_set_from(&sc, "workload.prompt_len=uniform:20:400", "tiny.ini:3", err, sizeof err), 0, "%s", err);
    cr_assert_eq(scenario_set_from(&sc, "workload.output_len=uniform:5:60", "tiny.ini:4", err, sizeof err), 0, "%s", err);
    return sc;
}

Test(sweep, points_follow_the_order_first_vary_outermost)
{
    scenario sc = tiny();
    sweep_plan p;
    char err[1024], label[256];
    sweep_plan_init(&p, &sc);
    cr_assert_eq(sweep_add_point(&p, "A:scheduler.max_num_seqs=4", err, sizeof err), 0, "%s", err);
    cr_assert_eq(sweep_add_point(&p, "scheduler.max_num_seqs=8,kv.block_size=32", err, sizeof err), 0, "%s", err);
    cr_assert_eq(sweep_add_vary(&p, "workload.rate=1,2,3", err, sizeof err), 0, "%s", err);
    cr_assert_eq(sweep_add_vary(&p, "run.seed=5,6", err, sizeof err), 0, "%s", err);
    cr_assert_eq(sweep_num_points(&p), 12);
    sweep_point_label(&p, 0, label, sizeof label);
    cr_assert_str_eq(label, "A 1 5");
    sweep_point_label(&p, 1, label, sizeof label);
    cr_assert_str_eq(label, "A 1 6");
    sweep_point_label(&p, 2, label, sizeof label);
    cr_assert_str_eq(label, "A 2 5");
    sweep_point_label(&p, 11, label, sizeof label);
    cr_assert_str_eq(label, "8/32 3 6");
    scenario out;
    cr_assert_eq(sweep_point_scenario(&p, 7, &out, err, sizeof err), 0);
    cr_assert_eq(out.v[K_scheduler_max_num_seqs].i, 8);
    cr_assert_eq(out.v[K_kv_block_size].i, 32);
    cr_assert_float_eq(out.v[K_workload_rate].d, 1.0, 0);
    cr_assert_eq(out.v[K_run_seed].i, 6);
    cr_assert_eq(p.ncolumns, 4);
    sweep_plan_free(&p);
}

Test(sweep, every_point_equals_a_separate_run)
{
    scenario sc = tiny();
    sweep_plan p;
    char err[1024];
    sweep_plan_init(&p, &sc);
    cr_assert_eq(sweep_add_vary(&p, "workload.rate=5,50", err, sizeof err), 0, "%s", err);
    cr_assert_eq(sweep_add_vary(&p, "scheduler.max_num_seqs=2,64", err, sizeof err), 0, "%s", err);
    sweep_result r[4];
    sweep_opts o = {.jobs = 2};
    cr_assert_eq(sweep_run(&p, &o, r, err, sizeof err), 0, "%s", err);
    const char *rates[] = {"5", "50"}, *seqs[] = {"2", "64"};
    for (int i = 0; i < 4; i++) {
        scenario one = sc;
        char a[64], b[64];
        snprintf(a, sizeof a, "workload.rate=%s", rates[i / 2]);
        snprintf(b, sizeof b, "scheduler.max_num_seqs=%s", seqs[i % 2]);
        cr_assert_eq(scenario_set(&one, a, err, sizeof err), 0);
        cr_assert_eq(scenario_set(&one, b, err, sizeof err), 0);
        simjob j = {.sc = &one};
        cr_assert_eq(simjob_run(&j, err, sizeof err), 0, "%s", err);
        cr_assert(r[i].ran && r[i].nruns == 1);
        for (size_t k = 0; k < sumf_count(); k++)
            cr_assert_eq(sumf_get(sumf_at(k), &r[i].sum), sumf_get(sumf_at(k), &j.sum), "point %d %s", i,
                         sumf_at(k)->name);
    }
    /* the points differ: the sweep did change the keys */
    cr_assert_neq(r[0].sum.ttft_ms.p99, r[2].sum.ttft_ms.p99);
    sweep_results_free(r, 4);
    sweep_plan_free(&p);
}

static const char *const grid[] = {"--vary", "workload.rate=4,40,400", "--vary", "scheduler.max_num_seqs=3,48",
                                   "--set", "workload.num_requests=30", "--quiet"};

static int sweep_with(const char *out, const char *jobs, const char *shard)
{
    const char *args[32] = {"sweep"};
    int n = 1;
    for (size_t i = 0; i < sizeof grid / sizeof *grid; i++) args[n++] = grid[i];
    args[n++] = "--out", args[n++] = out, args[n++] = "--jobs", args[n++] = jobs;
    if (shard) args[n++] = "--shard", args[n++] = shard;
    args[n] = NULL;
    return cli(cmd_sweep, args);
}

/* Points each within the memory could together pass it in parallel threads, and the OOM
 * killer end the sweep (review): the threads are as many as the largest runs' pools allow */
Test(sweep, threads_are_as_many_as_the_largest_pools_fit)
{
    double gib = 1 << 30;
    double a[] = {1 * gib, 9 * gib, 9 * gib, 9 * gib};
    cr_assert_eq(sweep_threads_for_memory(a, 4, 4, 22 * gib), 2, "two of the 9 GiB runs fit in 22 GiB");
    double b[] = {9 * gib, 1 * gib, 9 * gib, 9 * gib};
    cr_assert_eq(sweep_threads_for_memory(b, 4, 4, 40 * gib), 4, "all fit");
    double c[] = {9 * gib, 9 * gib};
    cr_assert_eq(sweep_threads_for_memory(c, 2, 8, 20 * gib), 8, "fewer runs than threads, all fit: as asked");
    double d[] = {9 * gib, 9 * gib, 9 * gib};
    cr_assert_eq(sweep_threads_for_memory(d, 3, 3, 5 * gib), 1, "at least one");
}

Test(sweep, jobs_do_not_change_the_csv)
{
    system("rm -rf /tmp/ss-sweep-j1 /tmp/ss-sweep-j2");
    cr_assert_eq(sweep_with("/tmp/ss-sweep-j1", "1", NULL), 0);
    cr_assert_eq(sweep_with("/tmp/ss-sweep-j2", "2", NULL), 0);
    char *a = slurp_path("/tmp/ss-sweep-j1/sweep.csv"), *b = slurp_path("/tmp/ss-sweep-j2/sweep.csv");
    cr_assert_str_eq(a, b);
    int rows = 0;
    for (char *c = a; *c; c++) rows += *c == '\n';
    cr_assert_eq(rows, 7);
    free(a), free(b);
}

Test(sweep, shards_merge_into_the_unsharded_csv, .init = cr_redirect_stdout)
{
    system("rm -rf /tmp/ss-shard* /tmp/ss-merged /tmp/ss-whole");
    cr_assert_eq(sweep_with("/tmp/ss-whole", "2", NULL), 0);
    cr_assert_eq(sweep_with("/tmp/ss-shard1", "1", "1/3"), 0);
    cr_assert_eq(sweep_with("/tmp/ss-shard2", "1", "2/3"), 0);
    cr_assert_eq(sweep_with("/tmp/ss-shard3", "1", "3/3"), 0);
    char *s1 = slurp_path("/tmp/ss-shard1/sweep.csv");
    cr_assert(strstr(s1, "\n0,") && strstr(s1, "\n3,") && !strstr(s1, "\n1,"), "shard 1 holds points 0 and 3");
    free(s1);
    const char *merge[] = {"merge", "/tmp/ss-merged", "/tmp/ss-shard3", "/tmp/ss-shard1", "/tmp/ss-shard2", NULL};
    cr_assert_eq(cli(cmd_merge, merge), 0);
    char *a = slurp_path("/tmp/ss-whole/sweep.csv"), *b = slurp_path("/tmp/ss-merged/sweep.csv");
    cr_assert_str_eq(a, b);
    free(a), free(b);
    /* the merge wrote neither cost_models.csv nor the plots (bad-input campaign): it joins the
     * first and draws the second from the shard's command line, as the whole sweep does */
    a = slurp_path("/tmp/ss-whole/cost_models.csv"), b = slurp_path("/tmp/ss-merged/cost_models.csv");
    cr_assert_str_eq(a, b);
    free(a), free(b);
    if (system("command -v gnuplot >/dev/null 2>&1") == 0)
        cr_assert(exists("/tmp/ss-merged/latency.png") && exists("/tmp/ss-merged/throughput.png"));
    /* a command line that makes another sweep here (a scenario changed since, or another
     * folder) draws no plots, and the merge says so and goes on */
    cr_assert_eq(system("sed -i 's/workload.num_requests=30/workload.num_requests=31/' /tmp/ss-shard3/sweep.json"), 0);
    system("rm -rf /tmp/ss-merged");
    cr_assert_eq(cli(cmd_merge, merge), 0);
    cr_assert(exists("/tmp/ss-merged/cost_models.csv") && !exists("/tmp/ss-merged/latency.png"));
    fflush(stdout);
    static char said[8192];
    said[fread(said, 1, sizeof said - 1, cr_get_redirected_stdout())] = 0;
    cr_assert(strstr(said, "note: no plots, and each row's point not checked against the sweep's: "
                           "/tmp/ss-shard3/sweep.json's command line makes sweep ") &&
              strstr(said, "the scenario (or a file it names) changed since the shard ran"), "%s", said);
    /* a command line refused here: its reason in the note, not the parser's usage on stderr */
    cr_assert_eq(system("sed -i 's/workload.num_requests=31/workload.num_requests=-5/' /tmp/ss-shard3/sweep.json"), 0);
    system("rm -rf /tmp/ss-merged");
    cr_assert_eq(cli(cmd_merge, merge), 0);
    fflush(stdout);
    clearerr(cr_get_redirected_stdout()); /* read to its end above */
    said[fread(said, 1, sizeof said - 1, cr_get_redirected_stdout())] = 0;
    cr_assert(strstr(said, "note: no plots, and each row's point not checked against the sweep's: "
                           "/tmp/ss-shard3/sweep.json's command line: ") &&
              strstr(said, "workload.num_requests"), "%s", said);
}

Test(sweep, merge_rejects_a_missing_or_duplicated_point)
{
    system("rm -rf /tmp/ss-mshard* /tmp/ss-mbad");
    cr_assert_eq(sweep_with("/tmp/ss-mshard1", "1", "1/2"), 0);
    cr_assert_eq(sweep_with("/tmp/ss-mshard2", "1", "2/2"), 0);
    const char *missing[] = {"merge", "/tmp/ss-mbad", "/tmp/ss-mshard1", NULL};
    cr_assert_eq(cli(cmd_merge, missing), 2);
    const char *twice[] = {"merge", "/tmp/ss-mbad", "/tmp/ss-mshard1", "/tmp/ss-mshard2", "/tmp/ss-mshard1", NULL};
    cr_assert_eq(cli(cmd_merge, twice), 2);
    const char *none[] = {"merge", "/tmp/ss-mbad", "/tmp/nonexistent-shard", NULL};
    cr_assert_eq(cli(cmd_merge, none), 2);
    cr_assert_not(exists("/tmp/ss-mbad"));
    cr_assert_eq(system("ls -d /tmp/ss-mbad.* >/dev/null 2>&1"), 512);
}

/* merge once accepted garbage rows, two rows glued by a missing line end, and shards of two
 * different sweeps (#14, defect 7). */
Test(sweep, merge_rejects_corrupt_rows_and_another_sweeps_shard)
{
    system("rm -rf /tmp/ss-cshard* /tmp/ss-cbad /tmp/ss-other*");
    cr_assert_eq(sweep_with("/tmp/ss-cshard1", "1", "1/2"), 0);
    cr_assert_eq(sweep_with("/tmp/ss-cshard2", "1", "2/2"), 0);
    const char *args[] = {"merge", "/tmp/ss-cbad", "/tmp/ss-cshard1", "/tmp/ss-cshard2", NULL};
    char *orig = slurp_path("/tmp/ss-cshard2/sweep.csv");
    const char *bad[] = {"garbage,row\n", NULL, NULL};
    /* a metric that is not a number, in a row of the right length */
    char *swapped = strdup(orig);
    char *last = strrchr(swapped, ',');
    last[1] = 'x';
    bad[1] = swapped;
    for (int k = 0; k < 3; k++) {
        FILE *f = fopen("/tmp/ss-cshard2/sweep.csv", "w");
        if (k == 0) fprintf(f, "%s%s", orig, bad[0]);
        else if (k == 1) fputs(bad[1], f);
        else fwrite(orig, 1, strlen(orig) - 1, f); /* the last line end cut off */
        fclose(f);
        cr_assert_eq(cli(cmd_merge, args), 2, "case %d", k);
    }
    FILE *f = fopen("/tmp/ss-cshard2/sweep.csv", "w");
    fputs(orig, f);
    fclose(f);
    cr_assert_eq(cli(cmd_merge, args), 0, "restored, the shards merge");
    /* shard 2 of a sweep of other values: same point count, another sweep */
    const char *other[] = {"sweep", "--vary", "workload.rate=7,70", "--vary", "scheduler.max_num_seqs=3,63", "--set",
                           "workload.num_requests=20", "--shard", "2/2", "--out", "/tmp/ss-other", "--quiet", NULL};
    cr_assert_eq(cli(cmd_sweep, other), 0);
    const char *mixed[] = {"merge", "/tmp/ss-cbad2", "/tmp/ss-cshard1", "/tmp/ss-other", NULL};
    cr_assert_eq(cli(cmd_merge, mixed), 2);
    cr_assert_not(exists("/tmp/ss-cbad2"));
    free(orig);
    free(swapped);
}

/* merge reads sweep.json as JSON, not line by line: a shard whose sweep.json was reformatted
 * (one line, keys reordered, as jq -c or a Python script writes it) merges; broken JSON is
 * refused naming the file and line. */
Test(sweep, merge_reads_sweep_json_in_any_layout_and_names_broken_json)
{
    system("rm -rf /tmp/ss-jshard* /tmp/ss-jmerged /tmp/ss-jbad");
    cr_assert_eq(sweep_with("/tmp/ss-jshard1", "1", "1/2"), 0);
    cr_assert_eq(sweep_with("/tmp/ss-jshard2", "1", "2/2"), 0);
    char *orig = slurp_path("/tmp/ss-jshard2/sweep.json");
    const char *id = strstr(orig, "\"sweep_id\": \"");
    cr_assert_not_null(id);
    char hex[65] = "";
    sscanf(id, "\"sweep_id\": \"%64[0-9a-f]\"", hex);
    int points = 0;
    cr_assert_eq(sscanf(strstr(orig, "\"points_total\""), "\"points_total\": %d", &points), 1);
    FILE *f = fopen("/tmp/ss-jshard2/sweep.json", "w");
    fprintf(f, "{\"repeat\":1,\"sweep_id\":\"%s\",\"points_total\":%d}", hex, points);
    fclose(f);
    const char *args[] = {"merge", "/tmp/ss-jmerged", "/tmp/ss-jshard1", "/tmp/ss-jshard2", NULL};
    cr_assert_eq(cli(cmd_merge, args), 0, "a one-line sweep.json with its keys in another order");
    f = fopen("/tmp/ss-jshard2/sweep.json", "w");
    fprintf(f, "{\n  \"repeat\": 1,\n  \"sweep_id\": \"%s\",\n  \"points_total\": %d,\n}\n", hex, points);
    fclose(f);
    const char *bad[] = {"merge", "/tmp/ss-jbad", "/tmp/ss-jshard1", "/tmp/ss-jshard2", NULL};
    char err[4096] = "";
    FILE *saved = tmpfile();
    int fd = dup(2);
    dup2(fileno(saved), 2);
    int rc = cli(cmd_merge, bad);
    fflush(stderr);
    dup2(fd, 2);
    close(fd);
    rewind(saved);
    err[fread(err, 1, sizeof err - 1, saved)] = 0;
    fclose(saved);
    cr_assert_eq(rc, 2);
    cr_assert(strstr(err, "/tmp/ss-jshard2/sweep.json:5: not valid JSON"), "%s", err);
    cr_assert_not(exists("/tmp/ss-jbad"));
    free(orig);
}

/* A --point label with a comma once went into sweep.csv unquoted, shifting every column of
 * its row; quoted now, and merge counts its fields as CSV does. */
Test(sweep, a_label_with_a_comma_is_one_quoted_field_and_merges)
{
    system("rm -rf /tmp/ss-qshard* /tmp/ss-qmerged");
    for (int k = 1; k <= 2; k++) {
        char out[64], shard[8];
        snprintf(out, sizeof out, "/tmp/ss-qshard%d", k);
        snprintf(shard, sizeof shard, "%d/2", k);
        const char *args[] = {"sweep", "--point", "slow, small:workload.rate=5", "--point", "fast:workload.rate=7",
                              "--set", "workload.num_requests=20", "--shard", shard, "--out", out, "--quiet", NULL};
        cr_assert_eq(cli(cmd_sweep, args), 0);
    }
    char *csv = slurp_path("/tmp/ss-qshard1/sweep.csv");
    cr_assert(strstr(csv, "\n0,\"slow, small\",5,"), "%s", csv);
    free(csv);
    const char *merge[] = {"merge", "/tmp/ss-qmerged", "/tmp/ss-qshard1", "/tmp/ss-qshard2", NULL};
    cr_assert_eq(cli(cmd_merge, merge), 0);
    csv = slurp_path("/tmp/ss-qmerged/sweep.csv");
    cr_assert(strstr(csv, "\n0,\"slow, small\",5,") && strstr(csv, "\n1,fast,7,"), "%s", csv);
    free(csv);
}

Test(sweep, bad_input_exits_2_and_writes_nothing)
{
    system("rm -rf /tmp/ss-bad*");
    const char *cases[][14] = {
        {"sweep", "--vary", "workload.nosuch=1,2", "--out", "/tmp/ss-bad", NULL},
        {"sweep", "--vary", "workload.rate=1,x", "--out", "/tmp/ss-bad", NULL},
        {"sweep", "--vary", "workload.rate=1,,2", "--out", "/tmp/ss-bad", NULL},
        /* a point whose block pools pass the machine's memory, refused before the first point
         * runs (once at its turn, after the points before it: review) */
        {"sweep", "--vary", "deployment.replicas=1,1024", "--set", "kv.num_blocks=1000000000", "--out", "/tmp/ss-bad",
         NULL},
        /* run.percentiles names the columns: one for every point */
        {"sweep", "--vary", "run.percentiles=99,99.9", "--out", "/tmp/ss-bad", NULL},
        /* a value twice ran its point twice under one label (bad-input campaign) */
        {"sweep", "--vary", "workload.rate=1,2,1", "--out", "/tmp/ss-bad", NULL},
        {"sweep", "--point", "scheduler.policy=static,scheduler.prefix_caching=on", "--out", "/tmp/ss-bad", NULL},
        /* one label twice, one setting twice (bad-input campaign) */
        {"sweep", "--point", "a:workload.rate=1", "--point", "a:workload.rate=2", "--out", "/tmp/ss-bad", NULL},
        {"sweep", "--point", "workload.rate=1", "--point", "workload.rate=1", "--out", "/tmp/ss-bad", NULL},
        {"sweep", "--shard", "0/3", "--out", "/tmp/ss-bad", NULL},
        {"sweep", "--shard", "4/3", "--out", "/tmp/ss-bad", NULL},
        {"sweep", "--jobs", "0", "--out", "/tmp/ss-bad", NULL},
        {"sweep", "--report", "nosuch", "--out", "/tmp/ss-bad", NULL},
        {"sweep", "--bogus", "--out", "/tmp/ss-bad", NULL},
        {"sweep", "/nonexistent.ini", "--out", "/tmp/ss-bad", NULL},
        /* counts past an int: once wrapped instead of refused */
        {"sweep", "--shard", "1/99999999999", "--out", "/tmp/ss-bad", NULL},
        {"sweep", "--vary", "workload.rate=1,2,3,4,5,6,7,8,9,10", "--vary", "kv.block_size=1,2,3,4,5,6,7,8,9,10",
         "--vary", "scheduler.max_num_seqs=1,2,3,4,5,6,7,8,9,10", "--repeat", "1001", "--out", "/tmp/ss-bad", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) cr_assert_eq(cli(cmd_sweep, cases[i]), 2, "case %zu", i);
    cr_assert_not(exists("/tmp/ss-bad"));
    cr_assert_eq(system("ls -d /tmp/ss-bad.* >/dev/null 2>&1"), 512);
}

Test(sweep, repeat_and_keep_runs_write_their_files)
{
    system("rm -rf /tmp/ss-rep");
    const char *args[] = {"sweep", "--vary", "workload.rate=5,10", "--set", "workload.num_requests=20", "--repeat", "3",
                          "--keep-runs", "--out", "/tmp/ss-rep", "--quiet", NULL};
    cr_assert_eq(cli(cmd_sweep, args), 0);
    cr_assert(exists("/tmp/ss-rep/points/000/steps.csv"));
    cr_assert(exists("/tmp/ss-rep/points/001/summary.json"));
    char *csv = slurp_path("/tmp/ss-rep/sweep.csv"), *reps = slurp_path("/tmp/ss-rep/repeats.csv");
    cr_assert(strstr(csv, ",repeats,completed_std,"));
    int rows = 0;
    for (char *c = reps; *c; c++) rows += *c == '\n';
    cr_assert_eq(rows, 1 + 2 * 3);
    cr_assert(strstr(reps, "\n1,10,3,2,"), "point 1, third repeat, seed 2:\n%s", reps);
    /* the latencies at run.percentiles (99.9 by default) end both files' rows, sweep.csv's the
     * mean over the repeats (new-user trial: they were in neither) */
    cr_assert(strstr(csv, ",p99.9_ttft_ms,p99.9_tpot_ms,p99.9_itl_ms,p99.9_e2el_ms\n"), "%s", csv);
    cr_assert(strstr(reps, ",p99.9_ttft_ms,p99.9_tpot_ms,p99.9_itl_ms,p99.9_e2el_ms\n"), "%s", reps);
    /* point 1's mean P99.9 TTFT from its three rows in repeats.csv, against sweep.csv's */
    double mean = 0;
    const char *line = reps;
    int counted = 0;
    while ((line = strstr(line, "\n1,10,"))) {
        line++;
        const char *end = strchr(line, '\n'), *c = end;
        for (int commas = 0; commas < 4; c--) commas += *c == ','; /* the fourth field from the end */
        mean += strtod(c + 2, NULL) / 3;
        counted++;
    }
    cr_assert_eq(counted, 3);
    const char *row = strstr(csv, "\n1,10,");
    cr_assert(row);
    const char *end = strchr(row + 1, '\n'), *c = end;
    for (int commas = 0; commas < 4; c--) commas += *c == ',';
    cr_assert_float_eq(strtod(c + 2, NULL), mean, 1e-6 * mean, "sweep.csv's P99.9 TTFT is the repeats' mean");
    free(csv), free(reps);
}

/* ... and the printed line says how many points each priced (it said "by something else") */
Test(sweep, cost_models_csv_says_what_priced_each_point, .init = cr_redirect_stdout)
{
    system("rm -rf /tmp/ss-cost");
    const char *args[] = {"sweep", "--vary", "model.preset=llama-3.1-8b,tiny", "--set", "workload.num_requests=10",
                          "--out", "/tmp/ss-cost", NULL};
    cr_assert_eq(cli(cmd_sweep, args), 0);
    char *csv = slurp_path("/tmp/ss-cost/cost_models.csv");
    cr_assert(strstr(csv, "point,label,cost_model,cost_source\n0,llama-3.1-8b,measured,\"costs/h200/llama-3.1-8b"),
              "%s", csv);
    cr_assert(strstr(csv, "\n1,tiny,roofline,\"h200 roofline:"), "the toy model has no table:\n%s", csv);
    free(csv);
    char out[8192];
    fflush(stdout);
    out[fread(out, 1, sizeof out - 1, cr_get_redirected_stdout())] = 0;
    cr_assert(strstr(out, "Cost models: 1 point priced by measured tables, 1 by the fitted roofline; cost_models.csv "
                          "says which and why\n"), "%s", out);
}

/* An experiment's report.html (the chunked-prefill one, on its own trace): every plot report.md
 * shows is inlined, every table rendered, and a headless browser draws each plot at its size
 * and every table. */
Test(sweep, an_experiments_report_html_has_every_plot_and_table)
{
    system("rm -rf /tmp/ss-html-report");
    const char *args[] = {"sweep", SERVESIM_SOURCE_DIR "/scenarios/chunked-prefill.ini", "--report", "chunked-prefill",
                          "--vary", "scheduler.chunked_prefill=off,on", "--out", "/tmp/ss-html-report", "--quiet", NULL};
    cr_assert_eq(cli(cmd_sweep, args), 0);
    char *md = slurp("/tmp/ss-html-report", "report.md"), *html = slurp("/tmp/ss-html-report", "report.html");
    int plots = count_of(md, "](") , tables = count_of(md, "\n|---");
    cr_assert_geq(plots, 3, "%s", md);
    cr_assert_geq(tables, 2, "%s", md);
    cr_assert_eq(count_of(html, "<img src=\"data:image/png;base64,"), plots);
    cr_assert_eq(count_of(html, "<table>"), tables);
    cr_assert(strstr(html, "chunk_size = 512"), "the scenario's text is in the page");
    char *dom = browser_dom("/tmp/ss-html-report", "report.html");
    if (dom) {
        cr_assert_eq(count_of(dom, "data-rendered=\""), plots);
        cr_assert_eq(count_of(dom, "data-rendered=\"0x0\""), 0, "a plot did not render");
        cr_assert_eq(count_of(dom, "<table>"), tables);
        free(dom);
    } else {
        cr_log_warn("no headless Chromium: the page was not rendered");
    }
    free(md);
    free(html);
    system("rm -rf /tmp/ss-html-report");
}

/* The speculative-decoding experiment on a small grid: each speculative point is compared with
 * k = 0 at its own load; at acceptance 0.9 and k = 3 speculation pays most with one client and
 * less with 64 (drafting and verifying take a larger share of a busy step); without a k = 0
 * point there is nothing to compare with, and the report says so (exit 2). */
Test(sweep, the_speculative_report_compares_each_point_with_no_speculation_at_its_load)
{
    system("rm -rf /tmp/ss-spec /tmp/ss-spec-bad");
    const char *args[] = {"sweep", SERVESIM_SOURCE_DIR "/scenarios/speculative.ini", "--report", "speculative",
                          "--set", "workload.num_requests=300", "--vary", "workload.concurrency=1,64",
                          "--vary", "speculative.acceptance_rate=0.9", "--vary", "speculative.num_tokens=0,3",
                          "--out", "/tmp/ss-spec", "--quiet", NULL};
    cr_assert_eq(cli(cmd_sweep, args), 0);
    char *csv = slurp("/tmp/ss-spec", "speedup.csv");
    double at1 = 0, at64 = 0, len = 0;
    int rows = 0;
    for (char *line = strchr(csv, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        double alpha, load, speedup, ratio, tpot, thr, accepted, share;
        int k, point, base;
        cr_assert_eq(sscanf(line + 1, "%lf,%d,%lf,%d,%d,%lf,%lf,%lf,%lf,%lf,%lf", &alpha, &k, &load, &point, &base,
                            &speedup, &ratio, &tpot, &thr, &accepted, &share), 11, "%s", line + 1);
        cr_assert_eq(k, 3);
        cr_assert_eq(base, point - 1, "the k = 0 point at the same load is the one before");
        if (load == 1) at1 = speedup;
        else at64 = speedup;
        len = accepted;
        rows++;
    }
    cr_assert_eq(rows, 2);
    cr_assert_gt(at1, 1.5, "TPOT speedup at concurrency 1: %g", at1);
    cr_assert_lt(at64, at1, "at 64 clients %g, at 1 %g", at64, at1);
    double expect = (1 - pow(0.9, 4)) / 0.1; /* 3.439 tokens a verifying step */
    cr_assert_lt(fabs(len - expect) / expect, 0.03, "accepted length %g", len);
    char *md = slurp("/tmp/ss-spec", "report.md");
    cr_assert(strstr(md, "- Acceptance 0.9: at concurrency 1 the best draft length, k = 3, gave a"), "%s", md);
    cr_assert(exists("/tmp/ss-spec/speedup.png") || !strstr(md, "speedup.png"));
    free(md);
    free(csv);
    const char *bad[] = {"sweep", SERVESIM_SOURCE_DIR "/scenarios/speculative.ini", "--report", "speculative",
                         "--set", "workload.num_requests=20", "--vary", "speculative.num_tokens=1,3",
                         "--out", "/tmp/ss-spec-bad", "--quiet", NULL};
    cr_assert_eq(cli(cmd_sweep, bad), 2);
    cr_assert(!exists("/tmp/ss-spec-bad"), "nothing half-written");
    system("rm -rf /tmp/ss-spec /tmp/ss-spec-bad");
}

/* The arrival-rate and memory reports stopped in gnuplot ("STRING operator applied to
 * undefined", "x range is invalid", exit 1) on points they cannot plot: they say what they
 * need, exit 2, and write nothing; two Poisson rates of one arrival (no workload.arrival column
 * in sweep.csv) make a report */
Test(sweep, reports_refuse_points_they_cannot_plot, .init = cr_redirect_stderr)
{
    system("rm -rf /tmp/ss-refuse && mkdir -p /tmp/ss-refuse");
    const char *one[] = {"sweep", "--report", "arrival-rate", "--point", "workload.rate=2", "--set",
                         "workload.num_requests=20", "--out", "/tmp/ss-refuse/one", "--quiet", NULL};
    cr_assert_eq(cli(cmd_sweep, one), 2);
    cr_assert(!exists("/tmp/ss-refuse/one"));
    /* before the sweep: before even the output directory, which here is refused too */
    system("mkdir -p /tmp/ss-refuse/mine && touch /tmp/ss-refuse/mine/notes.txt");
    const char *first[] = {"sweep", "--report", "memory", "--point", "scheduler.policy=paged", "--set",
                           "workload.num_requests=20", "--out", "/tmp/ss-refuse/mine", "--quiet", NULL};
    cr_assert_eq(cli(cmd_sweep, first), 2);
    char text[4096];
    stderr_text(text, sizeof text);
    cr_assert(strstr(text, "servesim: memory report: needs paged points at two or more kv.block_size values"), "%s", text);
    cr_assert_null(strstr(text, "ss-refuse/mine"), "the plan was checked first: %s", text);
    const char *mem[] = {"sweep", "--report", "memory", "--point", "scheduler.policy=paged", "--set",
                         "workload.num_requests=20", "--out", "/tmp/ss-refuse/mem", "--quiet", NULL};
    cr_assert_eq(cli(cmd_sweep, mem), 2);
    cr_assert(!exists("/tmp/ss-refuse/mem"));
    const char *two[] = {"sweep", "--report", "arrival-rate", "--point", "workload.rate=2", "--point",
                         "workload.rate=4", "--set", "workload.num_requests=20", "--out", "/tmp/ss-refuse/two",
                         "--quiet", NULL};
    cr_assert_eq(cli(cmd_sweep, two), 0);
    cr_assert(exists("/tmp/ss-refuse/two/report.md"));
    /* a contiguous point and a paged one of the same KV: the memory report compares them and
     * leaves out the block-size plot it has no sizes for (it refused them before) */
    const char *pair[] = {"sweep", "--report", "memory", "--point", "scheduler.policy=continuous", "--point",
                          "scheduler.policy=paged", "--set", "workload.num_requests=20", "--out", "/tmp/ss-refuse/pair",
                          "--quiet", NULL};
    cr_assert_eq(cli(cmd_sweep, pair), 0);
    FILE *f = fopen("/tmp/ss-refuse/pair/report.md", "r");
    cr_assert_not_null(f);
    static char md[65536];
    md[fread(md, 1, sizeof md - 1, f)] = 0;
    fclose(f);
    cr_assert(strstr(md, "paged KV against contiguous reservation"), "%s", md);
    cr_assert_null(strstr(md, "block_size.png"), "%s", md);
    cr_assert_null(strstr(md, "-token to "), "no block sizes to compare: %s", md);
    system("rm -rf /tmp/ss-refuse");
}

/* A point the model refuses names the sweep's point as the value's origin (it said --set). */
Test(sweep, a_refused_point_names_the_sweep_as_its_origin, .init = cr_redirect_stderr)
{
    system("rm -rf /tmp/ss-bad-origin");
    const char *args[] = {"sweep", "--vary", "deployment.tensor_parallel=1,3", "--set", "workload.num_requests=10",
                          "--out", "/tmp/ss-bad-origin", "--quiet", NULL};
    cr_assert_eq(cli(cmd_sweep, args), 2);
    char text[4096];
    stderr_text(text, sizeof text);
    cr_assert(strstr(text, "deployment.tensor_parallel = 3 does not split llama-3-8b"), "%s", text);
    cr_assert(strstr(text, "(given by the sweep's point)"), "%s", text);
    cr_assert_not(exists("/tmp/ss-bad-origin"));
}

/* A shard folder whose files' paths did not fit merge's buffers was cut, and another file
 * opened (the format helper's find): refused, naming the argument. */
Test(sweep, merge_refuses_a_shard_path_too_long, .init = cr_redirect_stderr)
{
    char shard[1100];
    memset(shard, 'b', sizeof shard - 1);
    memcpy(shard, "/tmp/", 5);
    shard[sizeof shard - 1] = 0;
    const char *args[] = {"merge", "/tmp/ss-merge-long-out", shard, NULL};
    cr_assert_eq(cli(cmd_merge, args), 2);
    char text[4096];
    stderr_text(text, sizeof text);
    cr_assert(strstr(text, "servesim: merge SHARD_DIR /tmp/bbbb") &&
              strstr(text, "...: a path of 1099 characters; at most 1000"), "%s", text);
    cr_assert_not(exists("/tmp/ss-merge-long-out"));
}

/* A point naming a file in the out folder (--vary or --point workload.trace=OUT/requests.csv):
 * the folder, servesim's own run, was replaced by the sweep's result, the trace with it; the
 * scenario's own files were checked, points' values not. Refused before any point runs,
 * naming the point; the run is left whole. */
Test(sweep, a_point_reading_a_file_in_the_out_folder_is_refused, .init = cr_redirect_stderr)
{
    system("rm -rf /tmp/ss-sweep-in");
    const char *run[] = {"run", "--set", "workload.num_requests=20", "--out", "/tmp/ss-sweep-in", "--quiet", NULL};
    cr_assert_eq(cli(cmd_run, run), 0);
    const char *vary[] = {"sweep", "--set", "workload.arrival=trace", "--vary",
                          "workload.trace=/tmp/ss-sweep-in/requests.csv", "--out", "/tmp/ss-sweep-in", "--quiet", NULL};
    cr_assert_eq(cli(cmd_sweep, vary), 2);
    const char *point[] = {"sweep", "--set", "workload.arrival=trace", "--point",
                           "in:workload.trace=/tmp/ss-sweep-in/steps.csv", "--out", "/tmp/ss-sweep-in/", "--quiet", NULL};
    cr_assert_eq(cli(cmd_sweep, point), 2);
    char text[4096];
    stderr_text(text, sizeof text);
    cr_assert(strstr(text, "servesim: --out /tmp/ss-sweep-in holds workload.trace /tmp/ss-sweep-in/requests.csv, which "
                           "this command reads") && strstr(text, "(point 0, /tmp/ss-sweep-in/requests.csv)"), "%s", text);
    cr_assert(strstr(text, "holds workload.trace /tmp/ss-sweep-in/steps.csv") && strstr(text, "(point 0, in)"), "%s", text);
    cr_assert(exists("/tmp/ss-sweep-in/requests.csv") && exists("/tmp/ss-sweep-in/steps.csv"), "the run is still there");
    system("rm -rf /tmp/ss-sweep-in");
}

/* A --point's value of a key a --vary also sets was replaced by the --vary values, and the rows
 * ran at them under the point's label ("3 1", "3 2" at rates 1 and 2: bad-input campaign):
 * refused in either order, naming the key and both flags */
Test(sweep, a_key_given_by_both_point_and_vary_is_refused, .init = cr_redirect_stderr)
{
    system("rm -rf /tmp/ss-both");
    const char *args[] = {"sweep", "--vary", "workload.rate=1,2", "--point", "workload.rate=3", "--set",
                          "workload.num_requests=5", "--out", "/tmp/ss-both", "--quiet", NULL};
    cr_assert_eq(cli(cmd_sweep, args), 2);
    cr_assert_not(exists("/tmp/ss-both"));
    char text[4096];
    stderr_text(text, sizeof text);
    cr_assert(strstr(text, "servesim: --point workload.rate=3: workload.rate is also varied by --vary"), "%s", text);
    scenario sc = tiny();
    sweep_plan p;
    char err[1024];
    sweep_plan_init(&p, &sc);
    cr_assert_eq(sweep_add_point(&p, "A:scheduler.max_num_seqs=4,workload.rate=3", err, sizeof err), 0, "%s", err);
    cr_assert_eq(sweep_add_vary(&p, "workload.rate=1,2", err, sizeof err), -1);
    cr_assert(strstr(err, "--vary workload.rate=1,2: workload.rate is also set by a --point"), "%s", err);
    cr_assert_eq(sweep_add_vary(&p, "scheduler.max_num_seqs=8", err, sizeof err), -1);
    cr_assert_eq(sweep_add_vary(&p, "kv.block_size=16,32", err, sizeof err), 0, "another key: %s", err);
    sweep_plan_free(&p);
}

/* `sweep --vary workload.rate=2,4 --set workload.rate=3` dropped the --set without a word (a
 * new user's trial): a key given on the command line is refused by --vary and --point, naming
 * the flag; one from the scenario file is what they are there to replace. */
Test(sweep, a_key_given_on_the_command_line_and_varied_is_refused, .init = cr_redirect_stderr)
{
    system("rm -rf /tmp/ss-set-vary");
    const char *args[] = {"sweep", "--vary", "workload.rate=2,4", "--set", "workload.rate=3", "--out", "/tmp/ss-set-vary",
                          "--quiet", NULL};
    cr_assert_eq(cli(cmd_sweep, args), 2);
    cr_assert_not(exists("/tmp/ss-set-vary"));
    char text[4096];
    stderr_text(text, sizeof text);
    cr_assert(strstr(text, "servesim: --vary workload.rate=2,4: workload.rate is also set by --set, whose value the "
                           "--vary values would replace; give it once"), "%s", text);
    scenario sc = tiny();
    char err[1024];
    cr_assert_eq(scenario_set_from(&sc, "run.seed=4", "--seed", err, sizeof err), 0, "%s", err);
    cr_assert_eq(scenario_set_from(&sc, "workload.rate=7", "my.ini:3", err, sizeof err), 0, "%s", err);
    sweep_plan p;
    sweep_plan_init(&p, &sc);
    cr_assert_eq(sweep_add_point(&p, "b:run.seed=3", err, sizeof err), -1);
    cr_assert(strstr(err, "run.seed is also set by --seed, whose value the point would replace"), "%s", err);
    cr_assert_eq(sweep_add_vary(&p, "workload.rate=1,2", err, sizeof err), 0, "the file's value: %s", err);
    sweep_plan_free(&p);
}

/* Two --point of one label gave two rows both labelled "a", and one setting given twice ran
 * twice (bad-input campaign): refused as --vary refuses a value given twice, naming both */
Test(sweep, a_label_or_a_setting_given_twice_is_refused)
{
    scenario sc = tiny();
    sweep_plan p;
    char err[1024];
    sweep_plan_init(&p, &sc);
    cr_assert_eq(sweep_add_point(&p, "a:workload.rate=1,kv.block_size=32", err, sizeof err), 0, "%s", err);
    cr_assert_eq(sweep_add_point(&p, "a:workload.rate=2", err, sizeof err), -1);
    cr_assert_str_eq(err, "--point a:workload.rate=2: the label a is given to --point "
                          "a:workload.rate=1,kv.block_size=32 too: a label names one point");
    /* the same assignments in another order, under another label or none */
    cr_assert_eq(sweep_add_point(&p, "b:kv.block_size=32,workload.rate=1", err, sizeof err), -1);
    cr_assert_str_eq(err, "--point b:kv.block_size=32,workload.rate=1: the same setting as --point "
                          "a:workload.rate=1,kv.block_size=32: the point would run twice");
    cr_assert_eq(sweep_add_point(&p, "workload.rate=3", err, sizeof err), 0, "%s", err);
    cr_assert_eq(sweep_add_point(&p, "workload.rate=3", err, sizeof err), -1);
    cr_assert(strstr(err, "the same setting as --point workload.rate=3"), "%s", err);
    /* a subset of another's assignments is another setting */
    cr_assert_eq(sweep_add_point(&p, "b:workload.rate=1", err, sizeof err), 0, "%s", err);
    cr_assert_eq(p.nlisted, 3);
    sweep_plan_free(&p);
}

/* Values compared as written took workload.rate=1 beside workload.rate=1.0, one point run
 * twice; a label given equal to another point's label made of its values gave two rows
 * labelled "2" (stop 34's leftovers); two labels made of values alone, equal, did too (stop
 * 35's) */
Test(sweep, one_value_written_twice_ways_or_one_label_made_twice_is_refused)
{
    scenario sc = tiny();
    sweep_plan p;
    char err[1024];
    sweep_plan_init(&p, &sc);
    cr_assert_eq(sweep_add_point(&p, "workload.rate=1", err, sizeof err), 0, "%s", err);
    cr_assert_eq(sweep_add_point(&p, "workload.rate=1.0", err, sizeof err), -1);
    cr_assert_str_eq(err, "--point workload.rate=1.0: the same setting as --point workload.rate=1: the point would run "
                          "twice");
    cr_assert_eq(sweep_add_point(&p, "scheduler.chunked_prefill=on", err, sizeof err), 0, "%s", err);
    cr_assert_eq(sweep_add_point(&p, "scheduler.chunked_prefill=true", err, sizeof err), -1);
    cr_assert_eq(sweep_add_point(&p, "workload.prompt_len=uniform:4:8", err, sizeof err), 0, "%s", err);
    cr_assert_eq(sweep_add_point(&p, "workload.prompt_len=uniform:4:08", err, sizeof err), -1, "one length, two ways");
    cr_assert_eq(sweep_add_point(&p, "workload.prompt_len=uniform:4:9", err, sizeof err), 0, "%s", err);
    /* a label given, equal to a label made of values, either way round */
    cr_assert_eq(sweep_add_point(&p, "1:workload.rate=5", err, sizeof err), -1);
    cr_assert_str_eq(err, "--point 1:workload.rate=5: it and --point workload.rate=1 would both be labelled 1: a label "
                          "names one point; give the other a label of its own (--point LABEL:...)");
    cr_assert_eq(sweep_add_point(&p, "7:workload.rate=5", err, sizeof err), 0, "%s", err);
    cr_assert_eq(sweep_add_point(&p, "workload.rate=7", err, sizeof err), -1);
    cr_assert_str_eq(err, "--point workload.rate=7: it and --point 7:workload.rate=5 would both be labelled 7: a label "
                          "names one point; give this one a label of its own (--point LABEL:...)");
    cr_assert_eq(p.nlisted, 5);
    /* two labels made of values alone may match: the results then show both with their keys
     * (they had two rows labelled "1"), and the others as before */
    cr_assert_eq(sweep_add_point(&p, "scheduler.max_num_seqs=7", err, sizeof err), -1, "7 is --point 7:...'s label");
    cr_assert_eq(sweep_add_point(&p, "scheduler.max_num_seqs=1", err, sizeof err), 0, "%s", err);
    const char *labels[] = {"workload.rate=1", "on", "uniform:4:8", "uniform:4:9", "7", "scheduler.max_num_seqs=1"};
    for (int i = 0; i < 6; i++) {
        char label[256];
        sweep_point_label(&p, i, label, sizeof label);
        cr_assert_str_eq(label, labels[i], "point %d", i);
    }
    sweep_plan_free(&p);
    /* --vary alike */
    sweep_plan_init(&p, &sc);
    cr_assert_eq(sweep_add_vary(&p, "workload.rate=2,4,2.0", err, sizeof err), -1);
    cr_assert_str_eq(err, "--vary workload.rate=2,4,2.0: 2.0 is 2 given again: the same point would run twice");
    cr_assert_eq(sweep_add_vary(&p, "workload.rate=2,4,2.5", err, sizeof err), 0, "%s", err);
    sweep_plan_free(&p);
}

/* A label with a line end went into sweep.csv quoted, across two lines, and merge then refused
 * the shard ("2 fields, the header has 57": bad-input campaign): a control character in a
 * --point or a --vary is refused up front, the message on one line */
Test(sweep, a_control_character_in_a_label_or_value_is_refused, .init = cr_redirect_stderr)
{
    system("rm -rf /tmp/ss-ctl");
    const char *args[] = {"sweep", "--point", "a\nb:workload.rate=1", "--point", "c:workload.rate=2", "--set",
                          "workload.num_requests=5", "--shard", "1/2", "--out", "/tmp/ss-ctl", "--quiet", NULL};
    cr_assert_eq(cli(cmd_sweep, args), 2);
    cr_assert_not(exists("/tmp/ss-ctl"));
    char text[4096];
    stderr_text(text, sizeof text);
    cr_assert_str_eq(text, "servesim: --point a\\x0ab:workload.rate=1: holds a control character (0x0a at byte 2): "
                           "a label or value is written on its point's one line of sweep.csv\n");
    scenario sc = tiny();
    sweep_plan p;
    char err[1024];
    sweep_plan_init(&p, &sc);
    cr_assert_eq(sweep_add_point(&p, "tab\there:workload.rate=1", err, sizeof err), -1);
    cr_assert_eq(sweep_add_vary(&p, "hardware.vllm_version=0.10.1,0.11\r", err, sizeof err), -1);
    cr_assert(strstr(err, "--vary hardware.vllm_version=0.10.1,0.11\\x0d: holds a control character"), "%s", err);
    /* what the CSV writer quotes, and merge reads back, stays allowed */
    cr_assert_eq(sweep_add_point(&p, "\"quoted\", and spaced :workload.rate=1", err, sizeof err), 0, "%s", err);
    sweep_plan_free(&p);
}

/* --seed near run.seed's maximum with --repeat was refused as "point 0 (base): --set
 * run.seed=2147483648: ...", naming a --set and a point the user had not typed (bad-input
 * campaign): the base's seed is named with --repeat alone; a point's own seed with its point */
Test(sweep, a_seed_whose_repeats_pass_the_maximum_names_seed_and_repeat, .init = cr_redirect_stderr)
{
    system("rm -rf /tmp/ss-seedmax");
    const char *args[] = {"sweep", "--vary", "workload.rate=1,2", "--set", "workload.num_requests=5", "--seed",
                          "2147483647", "--repeat", "2", "--out", "/tmp/ss-seedmax", "--quiet", NULL};
    cr_assert_eq(cli(cmd_sweep, args), 2);
    cr_assert_not(exists("/tmp/ss-seedmax"));
    char text[4096];
    stderr_text(text, sizeof text);
    cr_assert_str_eq(text, "servesim: run.seed (--seed) = 2147483647 with --repeat 2 takes seeds up to 2147483648, "
                           "past run.seed's maximum 2147483647: give a seed of at most 2147483646, or fewer repeats\n");
    scenario sc = tiny();
    sweep_plan p;
    char err[1024];
    sweep_plan_init(&p, &sc);
    cr_assert_eq(sweep_add_vary(&p, "run.seed=1,2147483647", err, sizeof err), 0, "%s", err);
    p.repeat = 2;
    cr_assert_eq(sweep_check(&p, err, sizeof err), -1);
    cr_assert(strstr(err, "point 1 (2147483647): run.seed (the sweep's point) = 2147483647 with --repeat 2"), "%s", err);
    p.repeat = 1;
    cr_assert_eq(sweep_check(&p, err, sizeof err), 0, "%s", err);
    sweep_plan_free(&p);
}

/* Shard 2 of a sweep of other values (5,6,7 for 1,2,4) copied into this sweep's shard 2, with a
 * metric edited to nan, merged with exit 0 into a row "1,6,6,nan" (bad-input campaign): each
 * row's index, label and varied values are checked against the sweep's point, made again from
 * the shard's command line, and every metric must be a finite number; both name file and line */
Test(sweep, merge_checks_each_row_against_the_sweeps_points, .init = cr_redirect_stderr)
{
    system("rm -rf /tmp/ss-pshard* /tmp/ss-pother /tmp/ss-pbad");
    for (int k = 1; k <= 3; k++) {
        char out[64], shard[8];
        snprintf(out, sizeof out, "/tmp/ss-pshard%d", k);
        snprintf(shard, sizeof shard, "%d/3", k);
        const char *args[] = {"sweep", "--vary", "workload.rate=1,2,4", "--set", "workload.num_requests=5", "--shard",
                              shard, "--out", out, "--quiet", NULL};
        cr_assert_eq(cli(cmd_sweep, args), 0);
    }
    const char *other[] = {"sweep", "--vary", "workload.rate=5,6,7", "--set", "workload.num_requests=5", "--shard",
                           "2/3", "--out", "/tmp/ss-pother", "--quiet", NULL};
    cr_assert_eq(cli(cmd_sweep, other), 0);
    const char *merge[] = {"merge", "/tmp/ss-pbad", "/tmp/ss-pshard1", "/tmp/ss-pshard2", "/tmp/ss-pshard3", NULL};
    char *orig = slurp_path("/tmp/ss-pshard2/sweep.csv"), *theirs = slurp_path("/tmp/ss-pother/sweep.csv");
    cr_assert(strstr(theirs, "\n1,6,6,"), "%s", theirs);
    FILE *f = fopen("/tmp/ss-pshard2/sweep.csv", "w");
    fputs(theirs, f);
    fclose(f);
    cr_assert_eq(cli(cmd_merge, merge), 2);
    char text[4096];
    stderr_text(text, sizeof text);
    cr_assert(strstr(text, "servesim: /tmp/ss-pshard2/sweep.csv:2: 1,6,6 is not point 1 of this sweep, which is "
                           "1,2,2"), "%s", text);
    /* this sweep's own row, a metric edited to nan, then to inf */
    const char *bad[] = {"nan", "inf"};
    for (int k = 0; k < 2; k++) {
        char *row = strstr(orig, "\n1,2,2,") + 7, *comma = strchr(row, ',');
        f = fopen("/tmp/ss-pshard2/sweep.csv", "w");
        fprintf(f, "%.*s%s%s", (int)(row - orig), orig, bad[k], comma);
        fclose(f);
        cr_assert_eq(cli(cmd_merge, merge), 2, "%s", bad[k]);
        stderr_text(text, sizeof text);
        char want[128];
        snprintf(want, sizeof want, "servesim: /tmp/ss-pshard2/sweep.csv:2: field 4 (%s) is not a finite number", bad[k]);
        cr_assert(strstr(text, want), "%s", text);
    }
    cr_assert_not(exists("/tmp/ss-pbad"));
    f = fopen("/tmp/ss-pshard2/sweep.csv", "w");
    fputs(orig, f);
    fclose(f);
    cr_assert_eq(cli(cmd_merge, merge), 0, "restored, the shards merge");
    free(orig);
    free(theirs);
    system("rm -rf /tmp/ss-pshard* /tmp/ss-pother /tmp/ss-pbad");
}

/* merge left out repeats.csv (--repeat) and points/ (--keep-runs) with exit 0, though the sweep
 * without --shard writes both (bad-input campaign): both are merged into what it writes, byte
 * for byte; a shard without its repeats.csv, or with another point's runs, is refused */
Test(sweep, merge_joins_repeats_csv_and_the_kept_runs, .init = cr_redirect_stdout)
{
    system("rm -rf /tmp/ss-kshard* /tmp/ss-kwhole /tmp/ss-kmerged* /tmp/ss-kbad");
    const char *args[] = {"sweep", "--vary", "workload.rate=1,2,4", "--set", "workload.num_requests=5", "--repeat", "2",
                          "--keep-runs", "--out", "/tmp/ss-kwhole", "--quiet", NULL, NULL, NULL};
    cr_assert_eq(cli(cmd_sweep, args), 0);
    for (int k = 1; k <= 2; k++) {
        char out[64], shard[8];
        snprintf(out, sizeof out, "/tmp/ss-kshard%d", k);
        snprintf(shard, sizeof shard, "%d/2", k);
        args[9] = out, args[11] = "--shard", args[12] = shard;
        cr_assert_eq(cli(cmd_sweep, args), 0);
    }
    const char *merge[] = {"merge", "/tmp/ss-kmerged", "/tmp/ss-kshard2", "/tmp/ss-kshard1", NULL};
    cr_assert_eq(cli(cmd_merge, merge), 0);
    const char *files[] = {"sweep.csv", "repeats.csv", "points/000/summary.json", "points/001/requests.csv",
                           "points/002/steps.csv"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char *a = slurp("/tmp/ss-kwhole", files[i]), *b = slurp("/tmp/ss-kmerged", files[i]);
        cr_assert_str_eq(a, b, "%s", files[i]);
        free(a), free(b);
    }
    cr_assert_eq(system("diff -r /tmp/ss-kwhole/points /tmp/ss-kmerged/points"), 0, "every run, every file");
    /* a shard run without --keep-runs: no points/, and a note says why, as for cost_models.csv */
    cr_assert_eq(system("mv /tmp/ss-kshard1/points /tmp/ss-kshard1-points"), 0);
    const char *some[] = {"merge", "/tmp/ss-kmerged2", "/tmp/ss-kshard1", "/tmp/ss-kshard2", NULL};
    cr_assert_eq(cli(cmd_merge, some), 0);
    cr_assert(exists("/tmp/ss-kmerged2/repeats.csv") && !exists("/tmp/ss-kmerged2/points"));
    fflush(stdout);
    static char said[8192];
    said[fread(said, 1, sizeof said - 1, cr_get_redirected_stdout())] = 0;
    cr_assert(strstr(said, "note: no points/: /tmp/ss-kshard1 has none (a shard run without --keep-runs), "
                           "/tmp/ss-kshard2 has\n"), "%s", said);
    cr_assert_eq(system("mv /tmp/ss-kshard1-points /tmp/ss-kshard1/points"), 0);
    /* point 1's runs moved into shard 1's repeats.csv: not a point of that shard */
    char *reps = slurp("/tmp/ss-kshard2", "repeats.csv");
    FILE *f = fopen("/tmp/ss-kshard1/repeats.csv", "a");
    fputs(strchr(reps, '\n') + 1, f);
    fclose(f);
    const char *bad[] = {"merge", "/tmp/ss-kbad", "/tmp/ss-kshard1", "/tmp/ss-kshard2", NULL};
    cr_assert_eq(cli(cmd_merge, bad), 2);
    cr_assert_eq(system("rm /tmp/ss-kshard1/repeats.csv"), 0);
    cr_assert_eq(cli(cmd_merge, bad), 2, "a shard of --repeat 2 without its repeats.csv");
    /* a folder in points/ that is no run of the shard's */
    cr_assert_eq(system("mkdir /tmp/ss-kshard2/points/007"), 0);
    const char *stray[] = {"merge", "/tmp/ss-kbad", "/tmp/ss-kshard2", NULL};
    cr_assert_eq(cli(cmd_merge, stray), 2);
    cr_assert_not(exists("/tmp/ss-kbad"));
    free(reps);
    system("rm -rf /tmp/ss-kshard* /tmp/ss-kwhole /tmp/ss-kmerged* /tmp/ss-kbad");
}

/* A point where no request finished has its metrics written empty (sumf_format), and merge
 * refused its shard ("field 4 () is not a number"): empty fields merge as the sweep wrote them */
Test(sweep, merge_takes_a_point_where_no_request_finished, .init = cr_redirect_stdout)
{
    system("rm -rf /tmp/ss-eshard* /tmp/ss-ewhole /tmp/ss-emerged");
    const char *args[] = {"sweep", "--vary", "workload.prompt_len=fixed:100,fixed:300000", "--set",
                          "workload.num_requests=3", "--out", "/tmp/ss-ewhole", "--quiet", NULL, NULL, NULL};
    cr_assert_eq(cli(cmd_sweep, args), 0);
    for (int k = 1; k <= 2; k++) {
        char out[64], shard[8];
        snprintf(out, sizeof out, "/tmp/ss-eshard%d", k);
        snprintf(shard, sizeof shard, "%d/2", k);
        args[6] = out, args[8] = "--shard", args[9] = shard;
        cr_assert_eq(cli(cmd_sweep, args), 0);
    }
    char *a = slurp("/tmp/ss-ewhole", "sweep.csv");
    cr_assert(strstr(a, "\n1,fixed:300000,fixed:300000,,,"), "every request rejected, no metric: %s", a);
    const char *merge[] = {"merge", "/tmp/ss-emerged", "/tmp/ss-eshard1", "/tmp/ss-eshard2", NULL};
    cr_assert_eq(cli(cmd_merge, merge), 0);
    char *b = slurp("/tmp/ss-emerged", "sweep.csv");
    cr_assert_str_eq(a, b);
    free(a), free(b);
    system("rm -rf /tmp/ss-eshard* /tmp/ss-ewhole /tmp/ss-emerged");
}
