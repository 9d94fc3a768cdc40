/* `servesim validate` end to end on the CPU engine: a small scenario served twice with
 * calibration rounds between the runs, every file in place, the replays within 1%; bad
 * input writes nothing; a verdict past the limits exits 3, with its report. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.h"
#include "tests/file_fixture.h"

#include <jansson.h>

static bool exists(const char *dir, const char *name)
{
    char path[512];
    struct stat st;
    int n = snprintf(path, sizeof path, "%s/%s", dir, name);
    cr_assert(n > 0 && (size_t)n < sizeof path, "%s/%s: path too long", dir, name); /* cut, !exists passes */
    return stat(path, &st) == 0;
}

/* What the test printed on its redirected stderr so far (.init = cr_redirect_stderr). */
static const char *stderr_text(void)
{
    static char text[8192];
    fflush(stderr);
    FILE *e = cr_get_redirected_stderr();
    text[fread(text, 1, sizeof text - 1, e)] = 0;
    return text;
}

static const char scenario_text[] =
    "[model]\npreset = tiny\n"
    "[kv]\nblock_size = 16\nnum_blocks = 256\n"
    "[scheduler]\npolicy = paged\nchunked_prefill = on\nmax_num_seqs = 8\nmax_num_batched_tokens = 64\n"
    "max_model_len = 256\n"
    "[workload]\nnum_requests = 12\narrival = poisson\nprompt_len = uniform:8:64\noutput_len = uniform:4:16\n"
    "[engine]\nbackend = cpu\nthreads = 1\n"
    "[run]\nseed = 3\nwarmup_requests = 2\n"
    "[validate]\nrates = 20\nengine_runs = 2\nmax_median_error = 1000\nmax_p99_error = 1000\n"
    "max_throughput_error = 1000\n";

/* A test's own temporary folder: TEXT written to its scenario file (ini), and the path its
 * --out takes (out, not made). case_close removes the folder. */
typedef struct case_dir {
    char dir[sizeof "/tmp/servesim-validate-XXXXXX"], ini[64], out[64];
} case_dir;

static void case_open(case_dir *c, const char *name, const char *text)
{
    snprintf(c->dir, sizeof c->dir, "/tmp/servesim-validate-XXXXXX");
    cr_assert(mkdtemp(c->dir));
    snprintf(c->ini, sizeof c->ini, "%s/%s", c->dir, name);
    snprintf(c->out, sizeof c->out, "%s/out", c->dir);
    FILE *f = fopen(c->ini, "w");
    cr_assert(f);
    fputs(text, f);
    fclose(f);
}

static void case_close(const case_dir *c)
{
    char cmd[100];
    snprintf(cmd, sizeof cmd, "rm -rf %s", c->dir);
    cr_assert_eq(system(cmd), 0);
}

/* A simulated run's folder as a measured one made by hand: its summary.json, which says it
 * was simulated (validate --measured refuses that), removed. */
static void as_hand_made(const char *run)
{
    char path[700];
    snprintf(path, sizeof path, "%s/summary.json", run);
    cr_assert_eq(unlink(path), 0);
}

static int validate(const char **args)
{
    char *argv[32];
    int n = 0;
    while (args[n]) argv[n] = (char *)args[n], n++;
    return cmd_validate(n, argv);
}

Test(validate, two_engine_runs_with_calibration_between_them, .timeout = 240)
{
    case_dir c;
    case_open(&c, "small.ini", scenario_text);
    char *ini = c.ini, *out = c.out;
    const char *args[] = {"validate", ini, "--out", out, "--quiet", NULL};
    cr_assert_eq(validate(args), 0);
    const char *files[] = {"validation.json", "report.md", "cost-table.csv", "cost-table-round1.csv",
                           "cost-table-round2.csv", "point0-sim/requests.csv", "point0-engine-run1/steps.csv",
                           "point0-engine-run2/requests.csv", "point0-replay-run1/steps.csv",
                           "point0-replay-run2/requests.csv"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) cr_assert(exists(out, files[i]), "%s missing", files[i]);
    cr_assert_not(exists(out, "cost-table-round3.csv"));
    char *json = slurp(out, "validation.json"), *report = slurp(out, "report.md");
    json_error_t je;
    json_t *doc = json_loads(json, 0, &je);
    cr_assert_not_null(doc, "validation.json: %s", je.text);
    json_t *pt = json_array_get(json_object_get(doc, "points"), 0);
    cr_assert_eq(json_integer_value(json_object_get(pt, "engine_runs")), 2, "%s", json);
    cr_assert(json_is_true(json_object_get(doc, "calibrated_between_runs")));
    /* exit 0 above also means each run, replayed with its own step times, came within the
     * default 1% on every P50 and P99 latency */
    cr_assert_eq(json_array_size(json_object_get(json_object_get(pt, "replay"), "first_mismatch")), 2, "%s", json);
    /* every metric lists both runs' measurements */
    json_t *metrics = json_object_get(pt, "metrics"), *p50 = NULL;
    for (size_t i = 0; i < json_array_size(metrics); i++)
        if (strcmp(json_string_value(json_object_get(json_array_get(metrics, i), "metric")), "p50_ttft_ms") == 0)
            p50 = json_array_get(metrics, i);
    cr_assert_not_null(p50);
    json_t *runs = json_object_get(p50, "measured_runs");
    cr_assert_eq(json_array_size(runs), 2);
    cr_assert_gt(json_number_value(json_array_get(runs, 0)), 0);
    cr_assert_gt(json_number_value(json_array_get(runs, 1)), 0);
    json_decref(doc);
    cr_assert(strstr(report, "| metric | simulated | measured | error | engine spread |"));
    int inside;
    const char *range = strstr(report, " of the 12 latency percentiles simulated lie between");
    cr_assert(range, "%s", report);
    while (range > report && range[-1] >= '0' && range[-1] <= '9') range--;
    cr_assert_eq(sscanf(range, "%d of the 12", &inside), 1);
    cr_assert(inside >= 0 && inside <= 12);
    free(json);
    free(report);
    case_close(&c);
}

/* A --cost-table that is not there is refused, and nothing written; so is one longer than the
 * resolved path holds, which was cut and the cut path opened (the format helper's find). */
Test(validate, a_missing_cost_table_is_named_and_nothing_is_written, .init = cr_redirect_stderr)
{
    char table[1200];
    case_dir c;
    case_open(&c, "small.ini", scenario_text);
    char *ini = c.ini, *out = c.out;
    const char *args[] = {"validate", ini, "--cost-table", "/nonexistent/table.csv", "--out", out, "--quiet", NULL};
    cr_assert_eq(validate(args), 2);
    struct stat st;
    cr_assert_neq(stat(out, &st), 0, "a failed validation left %s behind", out);
    memset(table, 'a', sizeof table - 1);
    table[0] = '/';
    table[sizeof table - 1] = 0;
    args[3] = table;
    cr_assert_eq(validate(args), 2);
    const char *text = stderr_text();
    cr_assert(strstr(text, "--cost-table /aaaa") && strstr(text, "...: a path of 1199 characters; at most 999"), "%s",
              text);
    cr_assert_neq(stat(out, &st), 0);
    const char *zero[] = {"validate", ini, "--set", "validate.engine_runs=0", "--out", out, "--quiet", NULL};
    cr_assert_eq(validate(zero), 2);
    cr_assert_neq(stat(out, &st), 0);
    case_close(&c);
}

/* Validates a scenario of TEXT (written to a temporary bad.ini) into a temporary --out, and
 * returns the exit status; the --out must not exist afterwards. */
static int validate_text(const char *text)
{
    case_dir c;
    case_open(&c, "bad.ini", text);
    char *ini = c.ini, *out = c.out;
    const char *args[] = {"validate", ini, "--out", out, "--quiet", NULL};
    int status = validate(args);
    struct stat st;
    cr_assert_neq(stat(out, &st), 0, "nothing written");
    case_close(&c);
    return status;
}

/* A bad [validate] list is refused before any calibration (it ran 9 minutes first), naming
 * the file and line, not a --set the user never typed. */
Test(validate, a_bad_rate_or_policy_list_is_refused_before_any_work)
{
    cr_assert_eq(validate_text("[model]\npreset = tiny\n[validate]\nrates = 1,abc\n"), 2);
}

/* validate drives the engine in-process: an API server in the scenario has nothing to be
 * compared with, and is refused before any work, naming the key and where it was set. */
Test(validate, an_api_server_in_front_is_refused, .init = cr_redirect_stderr)
{
    cr_assert_eq(validate_text("[model]\npreset = tiny\n[frontend]\npreset = vllm\n"), 2);
    const char *text = stderr_text();
    cr_assert(strstr(text, "frontend.preset (") && strstr(text, "bad.ini:4) prices an API server in front of the engine"),
              "%s", text);
}

/* validate --measured DIR --out DIR replaced the measured run, a real server's that cannot be
 * made again, with the report (bad-input campaign); so did --cost-table DIR/table.csv. Both
 * are refused before any work, the folder left as it was. */
Test(validate, an_out_holding_the_measured_run_or_the_table_is_refused, .init = cr_redirect_stderr)
{
    char run[600], table[700];
    case_dir c;
    case_open(&c, "small.ini", scenario_text);
    char *ini = c.ini;
    snprintf(run, sizeof run, "%s/run", c.dir);
    char *sim[] = {"run", ini, "--out", run, "--quiet", NULL};
    cr_assert_eq(cmd_run(5, sim), 0);
    const char *measured[] = {"validate", ini, "--measured", run, "--out", run, "--quiet", NULL};
    cr_assert_eq(validate(measured), 2);
    cr_assert(exists(run, "requests.csv") && exists(run, "steps.csv") && exists(run, "summary.json"));
    snprintf(table, sizeof table, "%s/steps.csv", run);
    const char *cost[] = {"validate", ini, "--cost-table", table, "--out", run, "--quiet", NULL};
    cr_assert_eq(validate(cost), 2);
    cr_assert(exists(run, "requests.csv") && !exists(run, "report.md"));
    const char *text = stderr_text();
    cr_assert(strstr(text, "holds the --measured run ") && strstr(text, "holds the --cost-table "), "%s", text);
    case_close(&c);
}

/* validate --measured of a run that leaves nothing to compare (every finished request a
 * warm-up, or every one rejected by the scenario's scheduler) exited 1, validate's "past its
 * limits", saying "servesim: " alone (bad-input campaign): it is bad input, refused before
 * the simulation with why, and nothing is written. */
Test(validate, a_measured_run_with_nothing_to_compare_is_refused_saying_why, .init = cr_redirect_stderr)
{
    char measured[600], path[700];
    case_dir c;
    case_open(&c, "small.ini", scenario_text);
    char *ini = c.ini, *out = c.out;
    snprintf(measured, sizeof measured, "%s/measured", c.dir);
    snprintf(path, sizeof path, "%s/requests.csv", measured);
    cr_assert_eq(mkdir(measured, 0755), 0);
    const char *head = "request_id,arrival_time,first_token_time,finish_time,prompt_len,output_len,stop_reason,warmup\n";
    const struct { const char *rows, *set, *says; } cases[] = {
        {"0,1.0,1.1,1.2,20,5,length,1\n1,1.5,1.6,1.7,20,5,length,1\n2,1.5,,1.6,20,0,error,0\n", "run.seed=3",
         "every request of the measured run that finished (2) is a warm-up"},
        {"0,1.0,1.1,1.2,16000000,5,length,0\n", "run.seed=3",
         "the scheduler rejects every one of the 1 measured requests, so none would finish: 1 longer than "
         "scheduler.max_model_len (256 tokens) in prompt + output (the shortest 16000005)"},
        {"0,1.0,1.1,1.2,40,5,length,0\n1,1.5,1.6,1.7,20,30,length,0\n", "kv.num_blocks=2",
         "2 needing more KV than the whole pool holds, 2 blocks x 16 tokens = 32 (kv.num_blocks x kv.block_size; the "
         "least needs 44"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char text[512];
        snprintf(text, sizeof text, "%s%s", head, cases[i].rows);
        write_path(path, text);
        const char *args[] = {"validate", ini, "--measured", measured, "--set", cases[i].set, "--out", out, "--quiet", NULL};
        cr_assert_eq(validate(args), 2, "%s", cases[i].rows);
        struct stat st;
        cr_assert_neq(stat(out, &st), 0, "nothing written");
    }
    const char *said = stderr_text();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        cr_assert(strstr(said, cases[i].says), "%s", said);
    cr_assert(strstr(said, "servesim: --measured "), "%s", said);
    case_close(&c);
}

/* validate --measured compared a simulated run's folder as if a server had served it, and an
 * engine run of the tiny model against the default scenario's Llama-3-8B, without a word (a
 * new user's trial). A folder's summary.json says what made it and which model: a simulated
 * one is refused, and so is another model than the scenario's, naming both; the same model
 * under another preset's name is the same model. */
Test(validate, a_simulated_run_or_another_models_is_refused_as_measured, .init = cr_redirect_stderr)
{
    char measured[600], path[700];
    case_dir c;
    case_open(&c, "small.ini", scenario_text);
    snprintf(measured, sizeof measured, "%s/measured", c.dir);
    cr_assert_eq(mkdir(measured, 0755), 0);
    snprintf(path, sizeof path, "%s/requests.csv", measured);
    write_path(path, "request_id,arrival_time,first_token_time,finish_time,prompt_len,output_len,stop_reason,warmup\n"
                     "0,1.0,1.1,1.2,20,5,length,0\n1,1.5,1.6,1.7,20,5,length,0\n");
    snprintf(path, sizeof path, "%s/summary.json", measured);
    const struct { const char *summary; int status; const char *says; } cases[] = {
        {"{\"executor\": \"simulator\", \"scenario\": {\"model.preset\": \"tiny\"}}", 2,
         "/measured is a simulated run (its summary.json's executor is \"simulator\")"},
        {"{\"executor\": \"engine\", \"scenario\": {\"model.preset\": \"llama-3-8b\"}}", 2,
         "/measured served llama-3-8b (layers=32 hidden=4096 heads=32 kv_heads=8 head_dim=128 intermediate=14336 "
         "vocab=128256; its summary.json's model.* keys), and the scenario simulates tiny (layers=2 hidden=256 heads=8 "
         "kv_heads=2 head_dim=32 intermediate=688 vocab=2048): name the scenario it ran, or set its model "
         "(--set model.preset=llama-3-8b)"},
        {"{\"executor\": \"engine\", \"scenario\": {\"model.preset\": \"tiny\", \"model.quantization\": \"fp8\"}}", 2,
         "/measured served tiny in FP8 ("},
        /* a load's model.* keys chose only the vocabulary it sent: the server's model is its own */
        {"{\"executor\": \"load\", \"scenario\": {\"model.preset\": \"llama-3-8b\"}}", 0, NULL},
        {"{\"executor\": \"engine\", \"environment\": {\"backend\": \"cpu\"}, \"scenario\": {\"model.preset\": "
         "\"tiny\"}}", 2, "/measured ran the CPU engine (its summary.json's environment), and the scenario prices h200 "
         "(hardware.preset, with no cost table): give the CPU's, --cost-table FILE from `servesim calibrate --backend "
         "cpu --model tiny`"},
        {"{\"executor\": \"engine\", \"scenario\": {\"model.preset\": \"tiny\", \"model.dtype\": \"bf16\"}}", 0, NULL},
        {"{\"executor\": \"load\"}", 0, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        write_path(path, cases[i].summary);
        const char *args[] = {"validate", c.ini, "--measured", measured, "--out", c.out, "--quiet", NULL};
        int status = validate(args);
        struct stat st;
        if (cases[i].status == 2) {
            cr_assert_eq(status, 2, "%s", cases[i].summary);
            cr_assert_neq(stat(c.out, &st), 0, "nothing written");
            cr_assert(strstr(stderr_text(), cases[i].says), "%s", stderr_text());
        } else {
            cr_assert(status == 0 || status == 3, "%s: compared, %d", cases[i].summary, status);
            char rm[100];
            snprintf(rm, sizeof rm, "rm -rf %s", c.out);
            cr_assert_eq(system(rm), 0);
        }
    }
    case_close(&c);
}

/* A pool that holds no measured request (kv.num_blocks = 1) ran the engine, whose every
 * request was rejected, and exited 1, validate's "past its limits" (bad-input campaign): it is
 * refused before any calibration or engine run, saying why, and nothing is written. */
Test(validate, a_point_whose_scheduler_rejects_every_request_is_refused_before_any_work, .init = cr_redirect_stderr,
     .timeout = 240)
{
    case_dir c;
    case_open(&c, "small.ini", scenario_text);
    char *ini = c.ini, *out = c.out;
    const char *args[] = {"validate", ini, "--set", "kv.num_blocks=1", "--set", "workload.prompt_len=uniform:16:64",
                          "--out", out, "--quiet", NULL};
    cr_assert_eq(validate(args), 2);
    struct stat st;
    cr_assert_neq(stat(out, &st), 0, "nothing written");
    const char *text = stderr_text();
    cr_assert(strstr(text, "small.ini: the point paged at 20 req/s: the scheduler rejects every one of the 12 measured "
                           "requests, so none would finish: 12 needing more KV than the whole pool holds, 1 block x 16 "
                           "tokens = 16"),
              "%s", text);
    case_close(&c);
}

/* [validate] rates and policies were read loosely (bad-input campaign): an item cut to 31
 * characters (1.000...e1 validated at 1 req/s), items or points past 32 dropped, an empty item
 * skipped, one given twice run twice. Each is refused, naming the key, before any work. */
Test(validate, a_list_item_cut_dropped_empty_or_given_twice_is_refused, .init = cr_redirect_stderr, .timeout = 240)
{
    char many[200] = "validate.rates=1";
    case_dir c;
    case_open(&c, "small.ini", scenario_text);
    char *ini = c.ini, *out = c.out;
    for (int i = 2; i <= 33; i++) snprintf(many + strlen(many), sizeof many - strlen(many), ",%d", i);
    const struct { const char *set, *also, *says; } cases[] = {
        {"validate.rates=1.00000000000000000000000000000e1", "validate.engine_runs=1",
         "validate.rates (--set): the item 1.00000000000000000000000000000e1 is longer than 31 characters"},
        {"validate.rates=1,,2", "validate.engine_runs=1", "validate.rates (--set) 1,,2: an empty item"},
        {"validate.rates=1,", "validate.engine_runs=1", "validate.rates (--set) 1,: an empty item"},
        {"validate.rates=1, ,2", "validate.engine_runs=1", "validate.rates (--set) 1, ,2: an empty item"},
        {"validate.rates=5,5.0", "validate.engine_runs=1", "validate.rates (--set) 5,5.0: 5.0 is 5 again; give each once"},
        {"validate.policies=paged,paged", "validate.engine_runs=1",
         "validate.policies (--set) paged,paged: paged is paged again; give each once"},
        {many, "validate.engine_runs=1", ",33: more than 32 items"},
        {"validate.rates=1,2,3,4,5,6,7,8,9,10,11", "validate.policies=paged,static,continuous",
         "validate.rates (--set) and validate.policies (--set): 11 rates x 3 policies make 33 points, more than 32"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *args[] = {"validate", ini, "--set", cases[i].set, "--set", cases[i].also, "--out", out, "--quiet", NULL};
        cr_assert_eq(validate(args), 2, "%s", cases[i].set);
        struct stat st;
        cr_assert_neq(stat(out, &st), 0, "nothing written");
    }
    const char *said = stderr_text();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) cr_assert(strstr(said, cases[i].says), "%s", said);
    case_close(&c);
}

/* Without validate.rates the scenario's own rate is validated; it was written with %g, and
 * workload.rate = 12.3456789 was validated at 12.3457 req/s (helper's find). The point's
 * rate shows in the refusal of a pool too small for any request, before any work. */
Test(validate, the_scenarios_own_rate_is_validated_as_given, .init = cr_redirect_stderr)
{
    cr_assert_eq(validate_text("[model]\npreset = tiny\n[kv]\nnum_blocks = 1\n[workload]\nnum_requests = 6\n"
                               "rate = 12.3456789\nprompt_len = uniform:16:64\n"), 2);
    const char *text = stderr_text();
    cr_assert(strstr(text, "the point paged at 12.3456789 req/s: "), "%s", text);
}

/* Where the scenario rejects some of the measured requests (past scheduler.max_model_len or
 * the pool), the two sides were compared over different requests without a word (a helper's
 * find): they are left out of the measured side too, and report.md and validation.json say
 * how many. The measured run is a simulated one of the small scenario; validated with a
 * context of 60 tokens, its requests of prompt + output past 60 are those. */
Test(validate, measured_requests_the_scenario_rejects_are_left_out_of_both_sides, .init = cr_redirect_stderr)
{
    char run[600], path[700];
    case_dir c;
    case_open(&c, "small.ini", scenario_text);
    char *ini = c.ini, *out = c.out;
    snprintf(run, sizeof run, "%s/run", c.dir);
    char *sim[] = {"run", ini, "--out", run, "--quiet", NULL};
    cr_assert_eq(cmd_run(5, sim), 0);
    as_hand_made(run);
    snprintf(path, sizeof path, "%s/requests.csv", run);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    char line[512];
    int past = 0, measured = 0;
    double ttft_sum = 0;   /* of the admitted ones */
    fgets(line, sizeof line, f); /* request_id,arrival_time,scheduled_prefill_time,first_token_time,finish_time,
                                  * prompt_len,cached_prompt_len,output_len,num_preemptions,stop_reason,warmup */
    while (fgets(line, sizeof line, f)) {
        int prompt, output, warmup;
        double sent, first;
        cr_assert_eq(sscanf(line, "%*[^,],%lf,%*[^,],%lf,%*[^,],%d,%*[^,],%d,%*[^,],%*[^,],%d", &sent, &first, &prompt,
                            &output, &warmup), 5, "%s", line);
        measured += !warmup;
        past += !warmup && prompt + output > 60;
        if (!warmup && prompt + output <= 60) ttft_sum += first - sent;
    }
    fclose(f);
    cr_assert(past > 0 && past < measured, "some, not all: %d of %d", past, measured);
    const char *args[] = {"validate", ini, "--measured", run, "--set", "scheduler.max_model_len=60", "--out", out,
                          "--quiet", NULL};
    int status = validate(args);
    cr_assert(status == 0 || status == 3, "compared (its verdict aside): %d, %s", status, stderr_text());
    snprintf(path, sizeof path, "%s/report.md", out);
    char *report = slurp_path(path);
    char expected[300];
    snprintf(expected, sizeof expected, "%d measured requests are past the scenario's limits (scheduler.max_model_len, "
             "or the KV pool): the simulator rejects them, so they are left out of both sides", past);
    cr_assert(strstr(report, expected), "%s", report);
    free(report);
    snprintf(path, sizeof path, "%s/validation.json", out);
    json_t *doc = json_load_file(path, 0, NULL);
    cr_assert_not_null(doc);
    cr_assert_eq(json_integer_value(json_object_get(doc, "rejected_by_scenario")), past);
    /* the measured side is the admitted requests alone, as the simulated one (it had held all) */
    json_t *row, *rows = json_object_get(doc, "metrics");
    size_t i;
    double measured_ttft = NAN;
    json_array_foreach(rows, i, row)
        if (strcmp(json_string_value(json_object_get(row, "metric")), "mean_ttft_ms") == 0)
            measured_ttft = json_number_value(json_object_get(row, "measured"));
    cr_assert_float_eq(measured_ttft, 1000 * ttft_sum / (measured - past), 1e-6, "the measured mean TTFT, admitted only");
    json_decref(doc);
    case_close(&c);
}

/* A verdict is not a failure: past the [validate] limits, validate writes its report and
 * exits 3, where a failed run exits 1 (a script gating on it tells the two apart). */
Test(validate, a_verdict_past_the_limits_exits_3_with_its_report_written, .init = cr_redirect_stderr)
{
    char run[600], path[700], strict[600];
    case_dir c;
    case_open(&c, "small.ini", scenario_text);
    snprintf(run, sizeof run, "%s/run", c.dir);
    char *sim[] = {"run", c.ini, "--out", run, "--quiet", NULL};
    cr_assert_eq(cmd_run(5, sim), 0);
    as_hand_made(run);
    const char *same[] = {"validate", c.ini, "--measured", run, "--out", c.out, "--quiet", NULL};
    cr_assert_eq(validate(same), 0, "%s", stderr_text());
    /* one sequence at a time against a run of eight: its P99 TTFT is more than twice the run's */
    snprintf(strict, sizeof strict, "%s/strict", c.dir);
    const char *off[] = {"validate", c.ini, "--measured", run, "--set", "scheduler.max_num_seqs=1",
                         "--set", "validate.max_p99_error=0.5", "--out", strict, "--quiet", NULL};
    cr_assert_eq(validate(off), 3, "%s", stderr_text());
    snprintf(path, sizeof path, "%s/report.md", strict);
    char *report = slurp_path(path);
    cr_assert(strstr(report, "**Some metric is past its limit.**"), "%s", report);
    free(report);
    snprintf(path, sizeof path, "%s/validation.json", strict);
    json_t *doc = json_load_file(path, 0, NULL);
    cr_assert_not_null(doc);
    cr_assert(json_is_false(json_object_get(doc, "passed")));
    json_decref(doc);
    case_close(&c);
}

/* The same verdict after engine runs: limits of 0 no real run meets (its steps are timed). */
Test(validate, engine_runs_past_limits_of_zero_exit_3_with_the_report, .init = cr_redirect_stderr, .timeout = 120)
{
    char path[700];
    case_dir c;
    case_open(&c, "small.ini", scenario_text);
    /* not quiet: the calibration says its range, where minutes of it went without a word, and
     * calibrates no more sequences than the workload sends (14: 12 and 2 warm-ups), where the
     * scheduler's limit (64 here; 1024, the GPU's vLLM default) took the tiny model over 8
     * minutes (a new user's trial) */
    const char *args[] = {"validate", c.ini, "--set", "validate.engine_runs=1", "--set", "validate.max_median_error=0",
                          "--set", "validate.max_p99_error=0", "--set", "scheduler.max_num_seqs=64", "--out", c.out,
                          NULL};
    cr_assert_eq(validate(args), 3);
    const char *said = stderr_text();
    cr_assert(strstr(said, "calibrating first, in 1 round, one before each engine run, up to 64 tokens a step, 14 "
                           "sequences and a context of 256"), "%s", said);
    snprintf(path, sizeof path, "%s/report.md", c.out);
    /* and names what is past its limit: a FAIL named nothing, and stdout has no ITL (a new
     * user's trial); a P50 within 0% is not a real run's */
    char *report = slurp_path(path);
    const char *past = strstr(report, "Past its limit: ");
    cr_assert(past && strstr(past, " (limit 0%)") && (strstr(past, "p50_") || strstr(past, "p99_")), "%s", report);
    free(report);
    snprintf(path, sizeof path, "%s/validation.json", c.out);
    json_t *doc = json_load_file(path, 0, NULL);
    json_t *point = json_array_get(json_object_get(doc, "points"), 0);
    const char *listed = json_string_value(json_object_get(point, "past_limits"));
    cr_assert(listed && strstr(listed, "(limit 0%)"), "%s", listed ? listed : "(none)");
    json_decref(doc);
    case_close(&c);
}
