/* Command lines (cli/options.c, cli/args.c, cli/study_args.c): one table-driven parser for
 * every command, "--flag value" and "--flag=value", unknown options named as such. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/study_args.h"
#include "cli/options.h"
#include "study/simjob.h"

/* What the commands wrote to the redirected stderr so far, into OUT (at most LEN - 1 bytes). */
static void read_stderr(char *out, size_t len)
{
    fflush(stderr);
    out[fread(out, 1, len - 1, cr_get_redirected_stderr())] = 0;
}

static int parse(int extras, scenario *sc, scenario_args *a, int argc, char **argv)
{
    return parse_scenario_args(argc, argv, "usage: test\n", extras, sc, a);
}

Test(args, both_spellings_of_a_value_give_the_same_scenario)
{
    scenario sc1, sc2;
    scenario_args a1, a2;
    char *spaced[] = {"run", "--seed", "7", "--set", "workload.num_requests=50", "--out", "o", "--quiet"};
    char *joined[] = {"run", "--seed=7", "--set=workload.num_requests=50", "--out=o", "--quiet"};
    cr_assert_eq(parse(0, &sc1, &a1, 8, spaced), 0);
    cr_assert_eq(parse(0, &sc2, &a2, 5, joined), 0);
    cr_assert_eq(sc1.v[K_run_seed].i, 7);
    cr_assert_eq(sc2.v[K_run_seed].i, 7);
    cr_assert_eq(sc2.v[K_workload_num_requests].i, 50, "the value keeps its own '='");
    cr_assert_str_eq(a2.out_dir, "o");
    cr_assert(a1.quiet && a2.quiet);
}

Test(args, run_takes_repeat_and_jobs_validate_takes_a_cost_table)
{
    scenario sc;
    scenario_args a;
    char *run[] = {"run", "--repeat=3", "--jobs", "2"};
    cr_assert_eq(parse(SA_REPEAT, &sc, &a, 4, run), 0);
    cr_assert_eq(a.repeat, 3);
    cr_assert_eq(a.jobs, 2);
    char *validate[] = {"validate", "--cost-table", "t.csv"};
    cr_assert_eq(parse(SA_COST_TABLE, &sc, &a, 3, validate), 0);
    cr_assert_str_eq(a.cost_table, "t.csv");
    cr_assert_eq(a.repeat, 1, "defaults when not given");
}

/* load had no limit on a request unless --timeout was given: a server that took a request
 * and never answered held the run forever (bad-input campaign). vllm bench serve's 6 h stands
 * in; 0 is still none */
Test(args, load_limits_each_request_as_vllms_benchmark_does)
{
    scenario sc;
    scenario_args a;
    char *plain[] = {"load", "--url", "http://127.0.0.1:8000/v1"};
    cr_assert_eq(parse(SA_LOAD, &sc, &a, 3, plain), 0);
    cr_assert_eq(a.timeout_s, 21600);
    char *none[] = {"load", "--url", "http://127.0.0.1:8000/v1", "--timeout", "0"};
    cr_assert_eq(parse(SA_LOAD, &sc, &a, 5, none), 0);
    cr_assert_eq(a.timeout_s, 0);
}

/* "run --bogus --out o" once took --bogus as taking a value, then "o" as the scenario file,
 * and said "o: cannot open". */
Test(args, an_unknown_option_is_named, .init = cr_redirect_stderr)
{
    scenario sc;
    scenario_args a;
    char *argv[] = {"run", "--bogus", "--out", "o"};
    cr_assert_eq(parse(0, &sc, &a, 4, argv), -1);
    fflush(stderr);
    cr_assert_stderr_eq_str("servesim: unknown option --bogus\nusage: test\n");
}

/* vLLM's engine flags are not servesim's options, but the message names the key that models
 * one (a vLLM user typed --tensor-parallel-size 4 and got only "unknown option") */
Test(args, a_vllm_flag_is_answered_with_its_key, .init = cr_redirect_stderr)
{
    scenario sc;
    scenario_args a;
    char *argv[] = {"run", "--tensor-parallel-size=4"};
    cr_assert_eq(parse(0, &sc, &a, 2, argv), -1);
    fflush(stderr);
    cr_assert_stderr_eq_str("servesim: unknown option --tensor-parallel-size; vLLM's --tensor-parallel-size is "
                            "deployment.tensor_parallel here: --set deployment.tensor_parallel=VALUE\nusage: test\n");
}

Test(args, options_of_another_command_are_unknown, .init = cr_redirect_stderr)
{
    scenario sc;
    scenario_args a;
    char *argv[] = {"engine", "--repeat", "3"};
    cr_assert_eq(parse(0, &sc, &a, 3, argv), -1);
    fflush(stderr);
    cr_assert_stderr_eq_str("servesim: unknown option --repeat\nusage: test\n");
}

/* A value given by --seed or --percentiles is named by that flag in later messages: a bad
 * --percentiles said "run.percentiles (--set)" though the user typed no --set */
Test(args, values_from_flags_are_named_by_their_flag)
{
    scenario sc;
    scenario_args a;
    char *argv[] = {"run", "--percentiles", "101", "--seed", "7"};
    cr_assert_eq(parse(0, &sc, &a, 5, argv), 0);
    cr_assert_str_eq(sc.v[K_run_percentiles].origin, "--percentiles");
    cr_assert_str_eq(sc.v[K_run_seed].origin, "--seed");
    scenario_resolved r;
    char err[1024];
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), -1);
    cr_assert(strstr(err, "run.percentiles (--percentiles): expected"), "%s", err);
}

/* --out a --out b wrote to b, silently; a flag that adds to a list (--set, --point, --vary,
 * --slo) repeats */
Test(args, a_flag_given_twice_is_refused_unless_it_adds_to_a_list, .init = cr_redirect_stderr)
{
    scenario sc;
    scenario_args a;
    char *twice[] = {"run", "--out", "a", "--out=b"};
    cr_assert_eq(parse(0, &sc, &a, 4, twice), -1);
    char *sets[] = {"run", "--set", "workload.rate=2", "--set", "workload.num_requests=5", "--seed", "3"};
    cr_assert_eq(parse(0, &sc, &a, 7, sets), 0);
    cr_assert_eq(sc.v[K_workload_num_requests].i, 5);
    char *seeds[] = {"run", "--seed", "1", "--seed", "2"};
    cr_assert_eq(parse(0, &sc, &a, 5, seeds), -1);
    fflush(stderr);
    cr_assert_stderr_eq_str("servesim: --out given twice; give it once\nusage: test\n"
                            "servesim: --seed given twice; give it once\nusage: test\n");
}

Test(args, misuses_are_refused, .init = cr_redirect_stderr)
{
    scenario sc;
    scenario_args a;
    char *flag_with_value[] = {"run", "--quiet=yes"};
    cr_assert_eq(parse(0, &sc, &a, 2, flag_with_value), -1);
    char *missing[] = {"run", "--seed"};
    cr_assert_eq(parse(0, &sc, &a, 2, missing), -1);
    char *empty_out[] = {"run", "--out="};
    cr_assert_eq(parse(0, &sc, &a, 2, empty_out), -1);
    char *two_files[] = {"run", "a.ini", "b.ini"};
    cr_assert_eq(parse(0, &sc, &a, 3, two_files), -1);
    char *bad_repeat[] = {"run", "--repeat", "0"};
    cr_assert_eq(parse(SA_REPEAT, &sc, &a, 3, bad_repeat), -1);
    /* a forgotten value: `run --out --quiet` wrote a folder named --quiet, `--set --out x`
     * took --out for the assignment (a new user's trial); --out=--quiet means it, and a
     * negative number is a value */
    char *forgot_out[] = {"run", "--out", "--quiet"};
    cr_assert_eq(parse(0, &sc, &a, 3, forgot_out), -1);
    char *forgot_set[] = {"run", "--set", "--out", "x7"};
    cr_assert_eq(parse(0, &sc, &a, 4, forgot_set), -1);
    char *meant[] = {"run", "--out=--quiet", "--seed", "-1"};
    cr_assert_eq(parse(0, &sc, &a, 4, meant), -1, "a negative seed is a value, refused by its range");
    fflush(stderr);
    cr_assert_stderr_eq_str("servesim: --quiet takes no value\nusage: test\n"
                            "servesim: --seed needs a value\nusage: test\n"
                            "servesim: --out needs a directory name, got \"\"\nusage: test\n"
                            "servesim: more than one scenario file: b.ini\nusage: test\n"
                            "servesim: --repeat 0: expected an integer in [1, 10000]\n"
                            "servesim: --out needs a value, and --quiet is the next option (write --out=--quiet to "
                            "mean it)\nusage: test\n"
                            "servesim: --set needs a value, and --out is the next option (write --set=--out to mean "
                            "it)\nusage: test\n"
                            "servesim: --seed -1: run.seed = -1 is out of range [0, 2147483647]\n");
}

/* A flag that stands for a key is named as given: `engine --backend foo` said "--set
 * engine.backend=foo", a flag the user never wrote (a new user's trial). */
Test(args, a_flag_for_a_key_is_named_as_given, .init = cr_redirect_stderr)
{
    scenario sc;
    scenario_args a;
    char *backend[] = {"engine", "--backend", "foo"};
    cr_assert_eq(parse(0, &sc, &a, 3, backend), -1);
    char *seed[] = {"run", "--seed", "x"};
    cr_assert_eq(parse(0, &sc, &a, 3, seed), -1);
    char *cpu[] = {"engine", "--backend", "cpu"};
    cr_assert_eq(parse(0, &sc, &a, 3, cpu), 0);
    cr_assert_str_eq(sc.v[K_engine_backend].origin, "--backend", "later messages name the flag too");
    fflush(stderr);
    cr_assert_stderr_eq_str("servesim: --backend foo: engine.backend: \"foo\" is not one of cpu|cuda\n"
                            "servesim: --seed x: run.seed: expected an int, got \"x\"\n");
}

/* roofline-fit --write overwrote any file it was given; it replaces only its own now, and
 * says so before the fit */
Test(args, roofline_fit_writes_only_over_its_own_file, .init = cr_redirect_stderr)
{
    FILE *f = fopen("/tmp/ss-fit-notes.txt", "w");
    fputs("my notes\n", f);
    fclose(f);
    char *fit[] = {"roofline-fit", "--write", "/tmp/ss-fit-notes.txt"};
    cr_assert_eq(cmd_roofline_fit(3, fit), EXIT_BAD_INPUT);
    char text[64] = "";
    f = fopen("/tmp/ss-fit-notes.txt", "r");
    cr_assert(fgets(text, sizeof text, f));
    fclose(f);
    cr_assert_str_eq(text, "my notes\n");
    remove("/tmp/ss-fit-notes.txt");
    char out[1024];
    read_stderr(out, sizeof out);
    cr_assert_str_eq(out, "servesim: --write /tmp/ss-fit-notes.txt: exists and is not servesim's roofline fit; it "
                          "replaces only a file an earlier --write wrote\n");
    /* a folder nothing can be made in was found only after the fit (bad-input campaign) */
    char *nowhere[] = {"roofline-fit", "--write", "/proc/ss-nowhere/fit.inc"};
    cr_assert_eq(cmd_roofline_fit(3, nowhere), EXIT_BAD_INPUT);
    read_stderr(out, sizeof out);
    cr_assert(strstr(out, "servesim: --write /proc/ss-nowhere/fit.inc: cannot write in /proc: "), "%s", out);
    /* an earlier fit's file whose name leaves no room for the .tmp.PID beside it was taken,
     * and the fit failed after its work (review) */
    char longname[300];
    snprintf(longname, sizeof longname, "/tmp/ss-fit-long-%0235d.inc", 0);
    char head[256] = "";
    f = fopen(SERVESIM_SOURCE_DIR "/sim/roofline_fit.inc", "r"); /* its first line is every fit's */
    cr_assert(f && fgets(head, sizeof head, f));
    fclose(f);
    f = fopen(longname, "w");
    cr_assert_not_null(f);
    fputs(head, f);
    fclose(f);
    char *ours[] = {"roofline-fit", "--write", longname};
    cr_assert_eq(cmd_roofline_fit(3, ours), EXIT_BAD_INPUT);
    remove(longname);
    read_stderr(out, sizeof out);
    cr_assert(strstr(out, ": its last name is 251 bytes; with the \".tmp.PID\" servesim writes beside it, a name may "
                          "be at most 240\n"), "%s", out);
}

/* A hexadecimal number, which strtod would have read, is refused with a word on how to write
 * it, in every flag that takes a number, as in the scenario's keys (--rate, --max-rate and
 * integer flags were refused without one) */
Test(args, a_hexadecimal_flag_value_is_answered_with_decimal, .init = cr_redirect_stderr)
{
    char *capacity[] = {"capacity", "--max-rate", "0x10"};
    cr_assert_eq(cmd_capacity(3, capacity), EXIT_BAD_INPUT);
    char *plan[] = {"plan", "--rate", "0x1p3"};
    cr_assert_eq(cmd_plan(3, plan), EXIT_BAD_INPUT);
    char *gpus[] = {"plan", "--gpus", "0x8"};
    cr_assert_eq(cmd_plan(3, gpus), EXIT_BAD_INPUT);
    char *decimal[] = {"plan", "--gpus", "-8"};
    cr_assert_eq(cmd_plan(3, decimal), EXIT_BAD_INPUT);
    char *tiny[] = {"plan", "--gpus", "1", "--max-rate", "1e-300"}; /* taken, "none down to 1e-300" */
    cr_assert_eq(cmd_plan(5, tiny), EXIT_BAD_INPUT);
    char out[2048];
    read_stderr(out, sizeof out);
    cr_assert(strstr(out, "servesim: --max-rate 0x10: expected a rate in [1e-06, 1e7] requests/s (in decimal notation, "
                          "such as 0.5 or 1e3)\n"), "%s", out);
    cr_assert(strstr(out, "servesim: --rate 0x1p3: expected a rate in [1e-06, 1e7] requests/s (in decimal notation, "
                          "such as 0.5 or 1e3)\n"), "%s", out);
    cr_assert(strstr(out, "servesim: --max-rate 1e-300: expected a rate in [1e-06, 1e7] requests/s\n"), "%s", out);
    cr_assert(strstr(out, "servesim: --gpus 0x8: expected an integer in [1, 4096] (in decimal digits)\n"), "%s", out);
    cr_assert(strstr(out, "servesim: --gpus -8: expected an integer in [1, 4096]\n"), "%s", out);
}

/* calibrate --check scored a table the simulator refuses 0.0% (a header alone, a component
 * missing; bad-input campaign): it now refuses it as run does, naming what is missing */
Test(args, calibrate_check_refuses_an_unusable_table, .init = cr_redirect_stderr)
{
    FILE *f = fopen("/tmp/ss-header-only.csv", "w");
    cr_assert(f);
    fputs("component,x,y,seconds\n", f);
    fclose(f);
    char *argv[] = {"calibrate", "--check", "/tmp/ss-header-only.csv"};
    cr_assert_eq(cmd_calibrate(3, argv), EXIT_BAD_INPUT);
    remove("/tmp/ss-header-only.csv");
    char out[1024];
    read_stderr(out, sizeof out);
    cr_assert_str_eq(out, "servesim: cost table /tmp/ss-header-only.csv: no linear rows\n");
}

/* calibrate --check took --out, --max-tokens and the rest and ignored them, and scored a table
 * of one point a sweep "0 held out ... Largest held-out error: 0.0%" with exit 0 (bad-input
 * campaign): both refused */
Test(args, calibrate_check_takes_no_other_option_and_needs_a_point_to_hold_out, .init = cr_redirect_stderr)
{
    FILE *f = fopen("/tmp/ss-one-point.csv", "w");
    cr_assert(f);
    fputs("component,x,y,seconds\nlinear,1,0,0.001\nlm_head,1,0,0.0001\nprefill_attn,1,0,0.0001\n"
          "decode_attn,1,1,0.0001\nsample,1,0,0.0001\noverhead,0,0,0.0005\n", f);
    fclose(f);
    char *one[] = {"calibrate", "--check", "/tmp/ss-one-point.csv"};
    cr_assert_eq(cmd_calibrate(3, one), EXIT_BAD_INPUT);
    char *out[] = {"calibrate", "--check", "/tmp/ss-one-point.csv", "--out", "/tmp/ss-never.csv"};
    cr_assert_eq(cmd_calibrate(5, out), EXIT_BAD_INPUT);
    remove("/tmp/ss-one-point.csv");
    char text[1024];
    read_stderr(text, sizeof text);
    cr_assert_str_eq(text, "servesim: /tmp/ss-one-point.csv: no point could be held out and interpolated from the rest "
                           "(that needs a sweep of 3 sizes or more)\nservesim: --check FILE checks a table and takes no other option (got --out)\n");
}

/* --max-tokens 1 calibrated a grid with no prefill shapes, then failed writing its table (exit
 * 1, after the work); it is refused at the flag */
Test(args, calibrate_needs_two_tokens_a_step, .init = cr_redirect_stderr)
{
    char *argv[] = {"calibrate", "--max-tokens", "1", "--out", "/tmp/ss-one-token.csv"};
    cr_assert_eq(cmd_calibrate(5, argv), EXIT_BAD_INPUT);
    cr_assert(access("/tmp/ss-one-token.csv", F_OK) != 0);
}

/* bench cuts a trace row's prompt to fit the model's context; a row whose output alone fills
 * it was cut to a prompt of 0 tokens or fewer and ended in "internal error: 0 of 20000 requests
 * ended" (exit 1, bad-input campaign): refused naming the row's line (a blank line counted). */
Test(args, bench_refuses_a_trace_row_whose_output_fills_the_context, .init = cr_redirect_stderr)
{
    FILE *f = fopen("/tmp/ss-bench-long.csv", "w");
    cr_assert(f);
    fputs("arrival_time,prompt_len,output_len\n0,100,20\n\n1,100,9000\n2,100,20\n", f);
    fclose(f);
    char *argv[] = {"bench", "--requests", "50", "--runs", "1", "--trace", "/tmp/ss-bench-long.csv"};
    cr_assert_eq(cmd_bench(7, argv), EXIT_BAD_INPUT);
    char out[2048];
    read_stderr(out, sizeof out);
    cr_assert(strstr(out, "servesim: /tmp/ss-bench-long.csv:4: an output of 9000 tokens leaves no room for a prompt in "
                          "scheduler.max_model_len (8192 tokens)"), "%s", out);
    remove("/tmp/ss-bench-long.csv");
}

/* the engine schedules synchronously and has no priced API server: asking it for either was
 * taken and recorded without a word (bad-input campaign); both are refused before any work */
Test(args, the_engine_refuses_simulator_only_keys, .init = cr_redirect_stderr)
{
    system("rm -rf /tmp/ss-engine-front /tmp/ss-engine-async");
    char *front[] = {"engine", "--set", "model.preset=tiny", "--set", "frontend.preset=vllm", "--out",
                     "/tmp/ss-engine-front", "--quiet"};
    cr_assert_eq(cmd_engine(8, front), EXIT_BAD_INPUT);
    char *async[] = {"engine", "--set", "model.preset=tiny", "--set", "scheduler.async_scheduling=on", "--out",
                     "/tmp/ss-engine-async", "--quiet"};
    cr_assert_eq(cmd_engine(8, async), EXIT_BAD_INPUT);
    cr_assert(access("/tmp/ss-engine-front", F_OK) != 0 && access("/tmp/ss-engine-async", F_OK) != 0, "nothing written");
    char out[2048];
    read_stderr(out, sizeof out);
    cr_assert(strstr(out, "servesim: frontend.preset (--set) is for the simulator (servesim run)"), "%s", out);
    cr_assert(strstr(out, "servesim: scheduler.async_scheduling (--set) is for the simulator (servesim run): the real "
                          "engine schedules each step after the last one's output"), "%s", out);
}

/* calibrate --out once overwrote whatever file it named (a user's scenario became a cost
 * table, bad-input campaign): it replaces only a cost table, and refuses before any work */
Test(args, calibrate_replaces_only_a_cost_table, .init = cr_redirect_stderr)
{
    FILE *f = fopen("/tmp/ss-precious.ini", "w");
    cr_assert(f);
    fputs("[model]\npreset = tiny\n", f);
    fclose(f);
    char *argv[] = {"calibrate", "--out", "/tmp/ss-precious.ini", "--max-tokens", "8", "--max-context", "8",
                    "--max-seqs", "1", "--repeats", "1", "--rounds", "1"};
    cr_assert_eq(cmd_calibrate(13, argv), EXIT_BAD_INPUT);
    char kept[64] = "";
    f = fopen("/tmp/ss-precious.ini", "r");
    cr_assert(f);
    cr_assert(fgets(kept, sizeof kept, f));
    fclose(f);
    cr_assert_str_eq(kept, "[model]\n", "the user's file is untouched");
    char *dir[] = {"calibrate", "--out", "/tmp"};
    cr_assert_eq(cmd_calibrate(3, dir), EXIT_BAD_INPUT);
    char out[2048];
    read_stderr(out, sizeof out);
    cr_assert(strstr(out, "servesim: --out /tmp/ss-precious.ini: exists and is not a cost table; calibrate replaces "
                          "only a cost table"), "%s", out);
    cr_assert(strstr(out, "servesim: --out /tmp: is a directory"), "%s", out);
    remove("/tmp/ss-precious.ini");
}

/* The other commands (calibrate, bench, presets, keys, roofline-fit, merge) once parsed by
 * hand: "bench --bogus x" said "bad option", "roofline-fit --write" (no value) said
 * "unexpected", and "merge --out x y" took --out for the output directory. */
Test(args, every_command_names_unknown_options_the_same_way, .init = cr_redirect_stderr)
{
    char *calibrate[] = {"calibrate", "--threads=abc"};
    cr_assert_eq(cmd_calibrate(2, calibrate), EXIT_BAD_INPUT);
    char *bench[] = {"bench", "--bogus", "x"};
    cr_assert_eq(cmd_bench(3, bench), EXIT_BAD_INPUT);
    char *presets[] = {"presets", "--csv=gpus"};
    cr_assert_eq(cmd_presets(2, presets), EXIT_BAD_INPUT);
    char *keys[] = {"keys", "extra"};
    cr_assert_eq(cmd_keys(2, keys), EXIT_BAD_INPUT);
    char *fit[] = {"roofline-fit", "--write"};
    cr_assert_eq(cmd_roofline_fit(2, fit), EXIT_BAD_INPUT);
    char *merge[] = {"merge", "--out", "x", "y"};
    cr_assert_eq(cmd_merge(4, merge), EXIT_BAD_INPUT);
    char text[8192];
    read_stderr(text, sizeof text);
    const char *expected[] = {"servesim: --threads abc: expected an integer in [0, 1024]\n",
                              "servesim: unknown option --bogus\nusage: servesim bench",
                              "servesim: --csv gpus: expected models or hardware\nusage: servesim presets",
                              "servesim: unexpected argument extra\nusage: servesim keys",
                              "servesim: --write needs a value\nusage: servesim roofline-fit",
                              "servesim: unknown option --out\nusage: servesim merge"};
    const char *at = text;
    for (size_t i = 0; i < sizeof expected / sizeof *expected; i++) {
        const char *found = strstr(at, expected[i]);
        cr_assert_not_null(found, "missing, in order: %s\n---\n%s", expected[i], text);
        at = found + strlen(expected[i]);
    }
}

/* keys lists the serving policies and the API-server presets from their tables, each with what
 * it does. */
Test(args, keys_lists_every_policy_with_its_meaning, .init = cr_redirect_stdout)
{
    char *keys[] = {"keys"};
    cr_assert_eq(cmd_keys(1, keys), EXIT_OK);
    fflush(stdout);
    FILE *out = cr_get_redirected_stdout();
    static char text[65536];
    text[fread(text, 1, sizeof text - 1, out)] = 0;
    cr_assert(strstr(text, "Serving policies (scheduler.policy):\n"
                           "  naive        one request at a time, every step recomputes the whole sequence\n"
                           "  kv_single    one request at a time with a KV cache\n"
                           "  static       a batch formed when idle runs until its last request ends\n"
                           "  continuous   iteration-level batching, max_model_len slots reserved per sequence\n"
                           "  paged        iteration-level batching over paged blocks (vLLM)\n"),
              "%.600s", text);
    cr_assert(strstr(text, "API servers (frontend.preset: per request, per step with tokens, per streamed chunk):\n"
                           "  none         0 / 0 / 0 ms: no API server: tokens reach their clients as their step ends\n"
                           "  vllm         1.8 / 0.3 / 0.044 ms: vLLM 0.20.2's OpenAI server, measured"),
              "%.1200s", text);
}

/* What a command printed to a full disk was lost with exit 0 (`servesim presets > /dev/full`,
 * keys, roofline-fit: bad-input campaign): once flushed, a write error is exit 1 with the
 * reason; a command that failed keeps its own status. */
Test(args, output_that_cannot_be_written_is_a_failure, .init = cr_redirect_stderr)
{
    cr_assert_eq(cli_finish_stdout(EXIT_OK), EXIT_OK, "nothing lost");
    cr_assert_not_null(freopen("/dev/full", "w", stdout));
    char *argv[] = {"presets", NULL};
    int status = cmd_presets(1, argv);
    cr_assert_eq(status, EXIT_OK, "the command itself has not flushed");
    cr_assert_eq(cli_finish_stdout(status), EXIT_FAILURE_OTHER);
    cr_assert_eq(cli_finish_stdout(EXIT_BAD_INPUT), EXIT_BAD_INPUT);
    fflush(stderr);
    char text[256] = "";
    FILE *e = cr_get_redirected_stderr();
    cr_assert_not_null(fgets(text, sizeof text, e));
    cr_assert_str_eq(text, "servesim: writing standard output: No space left on device\n");
}

/* bench --engine ran its own benchmark with --requests, --runs and --trace ignored, and over
 * --serving without a word (bad-input campaign): each mode takes its own options */
Test(args, bench_modes_take_their_own_options, .init = cr_redirect_stderr)
{
    char *engine_requests[] = {"bench", "--engine", "tiny", "--requests", "5"};
    cr_assert_eq(cmd_bench(5, engine_requests), EXIT_BAD_INPUT);
    char *both[] = {"bench", "--serving", "tiny", "--engine", "tiny"};
    cr_assert_eq(cmd_bench(5, both), EXIT_BAD_INPUT);
    char *threads[] = {"bench", "--requests", "5", "--threads", "2"};
    cr_assert_eq(cmd_bench(5, threads), EXIT_BAD_INPUT);
    char text[1024];
    read_stderr(text, sizeof text);
    cr_assert_str_eq(text, "servesim: bench --engine times the engine and takes only --threads (got --requests, an "
                           "option of the simulator's bench)\nservesim: bench --engine and --serving are two "
                           "benchmarks: give one\nservesim: bench --threads is for --engine and --serving; the "
                           "simulator runs on one thread\n");
}

/* -q, which curl, grep and most tools take for --quiet, was an unknown option (stop 34's
 * leftover): it is --quiet wherever a command takes --quiet, and counts as it when repeated */
Test(args, dash_q_is_quiet, .init = cr_redirect_stderr)
{
    system("rm -rf /tmp/ss-dash-q");
    char *run[] = {"run", "--set", "workload.num_requests=5", "--out", "/tmp/ss-dash-q", "-q"};
    cr_assert_eq(cmd_run(6, run), EXIT_OK);
    char *twice[] = {"run", "-q", "--quiet", "--out", "/tmp/ss-dash-q"};
    cr_assert_eq(cmd_run(5, twice), EXIT_BAD_INPUT);
    char *keys[] = {"keys", "-q"};
    cr_assert_eq(cmd_keys(2, keys), EXIT_BAD_INPUT, "keys takes no --quiet");
    char text[1024];
    read_stderr(text, sizeof text);
    cr_assert(strstr(text, "servesim: --quiet given twice; give it once\n"), "%s", text);
    cr_assert(strstr(text, "servesim: unknown option -q\n"), "%s", text);
    system("rm -rf /tmp/ss-dash-q");
}

/* presets shows the FP8 fit beside the bf16 one where a GPU has FP8 tables (stop 38's
 * leftover: model.quantization=fp8 took a fit no listing showed): `--csv hardware` gives each
 * GPU 22 columns, the A100's last nine (the FP8 peak and fit) empty, the H100's FP8 peak twice
 * its bf16 one and its FP8 compute efficiency below its bf16 one; the table has an "fp8 fit"
 * line under the H100 and none under the A100; the B60's, which has FP8 tables but no FP8 peak,
 * shows "-" for it (it showed 0). */
Test(args, presets_show_the_fp8_fit)
{
    FILE *out = tmpfile();
    cr_assert_not_null(out);
    int saved = dup(1);
    fflush(stdout);
    dup2(fileno(out), 1);
    char *csv[] = {"presets", "--csv", "hardware"}, *table[] = {"presets"};
    int status = cmd_presets(3, csv);
    fflush(stdout);
    int status_table = cmd_presets(1, table);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    cr_assert_eq(status, EXIT_OK);
    cr_assert_eq(status_table, EXIT_OK);
    rewind(out);
    char line[16384], prev[16384] = "";
    bool h100 = false, a100 = false, h100_fit_line = false, a100_fit_line = false, b60_dash = false;
    while (fgets(line, sizeof line, out)) {
        int fields = 1;
        for (char *c = line; *c; c++) fields += *c == ',';
        if (strncmp(line, "h100,", 5) == 0) {
            cr_assert_eq(fields, 22, "%s", line);
            double peak, eff, peak8, eff8;
            cr_assert_eq(sscanf(line, "h100,h100_sxm,%lf,%*[^,],%*[^,],%lf,%*[^,],%*[^,],%*[^,],%*[^,],%*[^,],%*[^,],"
                                      "%*[^,],%lf,%lf",
                                &peak, &eff, &peak8, &eff8),
                         4, "%s", line);
            cr_assert_float_eq(peak8, 2 * peak, 0.01 * peak, "%s", line);
            cr_assert(eff8 > 0 && eff8 < eff, "%s", line);
            h100 = true;
        }
        if (strncmp(line, "a100,", 5) == 0) {
            cr_assert_eq(fields, 22, "%s", line);
            cr_assert(strstr(line, ",,,,,,,,,\n"), "no FP8 peak or fit: %s", line);
            a100 = true;
        }
        if (strncmp(line, "    fp8 fit", 11) == 0) {
            h100_fit_line |= strncmp(prev, "  h100 ", 7) == 0;
            a100_fit_line |= strncmp(prev, "  a100 ", 7) == 0;
            char peak[32] = "";
            if (strncmp(prev, "  b60 ", 6) == 0 && sscanf(line, "    fp8 fit %31s", peak) == 1)
                b60_dash = strcmp(peak, "-") == 0;
        }
        strcpy(prev, line);
    }
    fclose(out);
    cr_assert(h100 && a100);
    cr_assert(h100_fit_line, "an fp8 fit line under the H100");
    cr_assert_not(a100_fit_line);
    cr_assert(b60_dash, "the B60's FP8 peak is none");
}
