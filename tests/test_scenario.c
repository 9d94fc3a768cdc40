/* Scenarios and the run command: every key from one table, every bad input a clear message
 * with file and line (or flag), exit status 2, and no output directory. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/commands.h"

#include <jansson.h>
#include "io/interrupt.h"

static char path[256];

static const char *write_ini(const char *text)
{
    snprintf(path, sizeof path, "/tmp/servesim-test-%d.ini", (int)getpid());
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static void expect_load_error(const char *text, const char *fragment, int line)
{
    scenario sc;
    scenario_defaults(&sc);
    char err[1024], where[300];
    const char *p = write_ini(text);
    cr_assert_eq(scenario_load(&sc, p, err, sizeof err), -1, "accepted: %s", text);
    snprintf(where, sizeof where, "%s:%d: ", p, line);
    cr_assert(strstr(err, where) == err, "message \"%s\" does not start with \"%s\"", err, where);
    cr_assert(strstr(err, fragment), "message \"%s\" lacks \"%s\"", err, fragment);
    unlink(p);
}

Test(scenario, bad_files_name_the_line)
{
    expect_load_error("[model]\npreset = tiny\n[nonsense]\nx = 1\n", "unknown section [nonsense]", 3);
    /* a key of another section had no hint in a file, where --set named it (a new user's trial) */
    expect_load_error("[scheduler]\nrate = 5\n", "unknown key scheduler.rate; did you mean rate under [workload]?", 2);
    expect_load_error("[scheduler]\nmax_num_seq = 5\n", "unknown key scheduler.max_num_seq; did you mean max_num_seqs?", 2);
    /* a key before any header said "unknown section []" (a new user's trial) */
    expect_load_error("rate = 3\n[workload]\nnum_requests = 5\n",
                      "rate is outside any section: every key follows a [section] header: put it under [workload]", 1);
    expect_load_error("preset = tiny\n", "preset is outside any section: every key follows a [section] header: put "
                      "it under [model] or [hardware] or [frontend]", 1);
    expect_load_error("speed = 3\n", "speed is outside any section: every key follows a [section] header (see "
                      "`servesim keys`)", 1);
    expect_load_error("[model]\npreset = tiny\nlayers = 3\n", "unknown key model.layers", 3);
    expect_load_error("[kv]\n\nblock_size = sixteen\n", "expected an int, got \"sixteen\"", 3);
    expect_load_error("[workload\nnum_requests = 7\n", "a section header without its ']': \"[workload\"", 1);
    expect_load_error("[kv]\nblock_size = 0x10\n", "expected an int, got \"0x10\" (in decimal digits)", 2);
    expect_load_error("[workload]\nnum_requests = 1e1\n", "expected an integer in decimal digits", 2);
    expect_load_error("[workload]\nrate = 0x10\n", "expected a number, got \"0x10\" (in decimal notation, such as 0.5 or 1e3)", 2);
    expect_load_error("\n[workload]\nrate = 0x1p4\n", "workload.rate: expected a number, got \"0x1p4\"", 3);
    expect_load_error("[kv]\nblock_size = 0\n", "out of range [1, 1024]", 2);
    expect_load_error("[kv]\nblock_size = 16 # slots\n", "only ';' starts a comment", 2);
    expect_load_error("[scheduler]\npolicy = fifo\n", "not one of naive|kv_single", 2);
    expect_load_error("[scheduler]\nprefix_caching = maybe\n", "expected true/false", 2);
    expect_load_error("[workload]\nprompt_len = uniform:5\n", "workload.prompt_len", 2);
    expect_load_error("[model]\npreset = gpt-9\n", "unknown model", 2);
    expect_load_error("[kv]\nblock_size = 16\nblock_size = 32\n", "set twice", 3);
    char longline[400];
    snprintf(longline, sizeof longline, "[run]\n; %0250d\nseed = 1\n", 0);
    expect_load_error(longline, "longer than 198", 2);
    /* 199 and 200 characters were cut by inih's 200-byte buffer; 198 is read whole */
    snprintf(longline, sizeof longline, "[run]\n; %0196d\nseed = x\n", 0);
    expect_load_error(longline, "run.seed", 3);
    snprintf(longline, sizeof longline, "[run]\n; %0197d\nseed = 1\n", 0);
    expect_load_error(longline, "line of 199 characters, longer than 198", 2);
    /* inih counts a CR too: 198 characters and a CR were split, and later lines misnumbered */
    snprintf(longline, sizeof longline, "[run]\r\n; %0196d\r\nseed = 1\r\n", 0);
    expect_load_error(longline, "line of 199 characters, longer than 198", 2);
    expect_load_error("[kv\nblock_size = 16\n", "", 1);
    /* an indented line continued the previous value in inih and overrode it silently */
    expect_load_error("[kv]\nblock_size = 16\n  block_size = 32\n", "an indented line", 3);
    /* a key line without '=' read as "set twice" */
    expect_load_error("[kv]\nblock_size = 16\nblock_size\n", "expected KEY = VALUE", 3);
    /* inih drops what follows a section's ']': "[model]preset=tiny" ran the default model; and
     * a file of CR line ends was one line, header and all, running the defaults (bad-input
     * campaign) */
    expect_load_error("[model]preset=tiny\n[workload]\nnum_requests=3\n",
                      "text after the section header [model]: \"preset=tiny\"", 1);
    expect_load_error("[run]\nseed = 1\n[model] junk\n", "text after the section header [model]: \"junk\"", 3);
    expect_load_error("[model]\rpreset = tiny\r[workload]\rnum_requests = 3\r",
                      "a carriage return inside the line (at column 8): a file of CR line ends?", 1);
    scenario sc;
    scenario_defaults(&sc);
    char err[1024];
    cr_assert_eq(scenario_load(&sc, write_ini("[model] ; the small one\r\npreset = tiny\r\n[run]  # seeds\nseed = 4\n"),
                               err, sizeof err), 0, "a comment after a header, CRLF ends: %s", err);
    cr_assert_str_eq(sc.v[K_model_preset].s, "tiny");
    cr_assert_eq(sc.v[K_run_seed].i, 4);
    unlink(path);
}

Test(scenario, a_nul_byte_is_named_as_such)
{
    const char *p = "/tmp/servesim-test-nul.ini";
    FILE *f = fopen(p, "wb");
    fwrite("[kv]\nblock_size = 1\0006\n", 1, 22, f);
    fclose(f);
    scenario sc;
    scenario_defaults(&sc);
    char err[1024];
    cr_assert_eq(scenario_load(&sc, p, err, sizeof err), -1);
    cr_assert(strstr(err, ":2: a NUL byte"), "%s (it once said: line longer than 200 characters)", err);
    unlink(p);
}

Test(scenario, unreadable_file_is_named)
{
    scenario sc;
    scenario_defaults(&sc);
    char err[1024];
    cr_assert_eq(scenario_load(&sc, "/nonexistent/x.ini", err, sizeof err), -1);
    cr_assert(strstr(err, "/nonexistent/x.ini: cannot open"), "%s", err);
}

/* A scenario in a pipe (`run <(cat s.ini)`) is read once: it was read twice, to check and to
 * parse, and the second read found nothing, so the run took the defaults and exited 0 */
Test(scenario, a_scenario_in_a_pipe_is_read_once)
{
    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    const char text[] = "[workload]\nnum_requests = 7\n";
    cr_assert_eq(write(fd[1], text, sizeof text - 1), (ssize_t)(sizeof text - 1));
    close(fd[1]);
    char path[64], err[512];
    snprintf(path, sizeof path, "/dev/fd/%d", fd[0]);
    scenario sc;
    scenario_defaults(&sc);
    cr_assert_eq(scenario_load(&sc, path, err, sizeof err), 0, "%s", err);
    close(fd[0]);
    cr_assert_eq(sc.v[K_workload_num_requests].i, 7);
}

/* A file saved with a UTF-8 byte order mark was refused as "expected KEY = VALUE" */
Test(scenario, a_byte_order_mark_is_skipped)
{
    scenario sc;
    scenario_defaults(&sc);
    char err[512];
    const char *p = write_ini("\xEF\xBB\xBF[workload]\nnum_requests = 7\n");
    cr_assert_eq(scenario_load(&sc, p, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sc.v[K_workload_num_requests].i, 7);
    unlink(p);
}

/* An endless file (/dev/zero) is refused after a bounded read; it filled the memory before */
Test(scenario, an_endless_file_is_refused_after_a_bounded_read)
{
    scenario sc;
    scenario_defaults(&sc);
    char err[512];
    cr_assert_eq(scenario_load(&sc, "/dev/zero", err, sizeof err), -1);
    cr_assert_str_eq(err, "/dev/zero: more than 1048576 bytes: not a scenario file?");
}

/* An --out longer than the command's buffer was cut, and the cut path written to (or, were it
 * a result, replaced); a directory that holds the user's files is refused before any work */
Test(scenario, an_out_dir_that_does_not_fit_or_is_the_user_s_is_refused)
{
    scenario sc;
    scenario_defaults(&sc);
    char flag[1300], out[1200], err[2048];
    memset(flag, 'a', sizeof flag - 1);
    flag[sizeof flag - 1] = 0;
    cr_assert_eq(scenario_out_dir(&sc, flag, "run", out, sizeof out, err, sizeof err), -1);
    cr_assert(strstr(err, "a path of 1299 characters; at most 1199"), "%s", err);
    system("rm -rf /tmp/ss-outdir && mkdir -p /tmp/ss-outdir && touch /tmp/ss-outdir/mine.txt");
    cr_assert_eq(scenario_out_dir(&sc, "/tmp/ss-outdir", "run", out, sizeof out, err, sizeof err), -1);
    cr_assert(strstr(err, "--out /tmp/ss-outdir: a directory with files servesim did not write"), "%s", err);
    cr_assert_eq(scenario_out_dir(&sc, "/tmp/ss-outdir/new", "run", out, sizeof out, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(out, "/tmp/ss-outdir/new");
    cr_assert_eq(scenario_out_dir(&sc, NULL, "sweep", out, sizeof out, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(out, "results/runs/default-sweep");
    system("rm -rf /tmp/ss-outdir");
}

/* A run's requests.csv replayed as the trace of a run to the same --out was deleted by the
 * result replacing that folder; so was a scenario file servesim wrote there (a sweep's
 * points), or a cost table. Every file the scenario names, and the scenario, is checked, a
 * path in the file taken from the file's folder (bad-input campaign). */
Test(scenario, an_out_dir_holding_a_file_the_scenario_reads_is_refused, .init = cr_redirect_stderr)
{
    char err[2048], out[1200];
    system("rm -rf /tmp/ss-outin && mkdir -p /tmp/ss-outin");
    char *run[] = {"run", "--set", "workload.num_requests=5", "--out", "/tmp/ss-outin/r", "--quiet", NULL};
    cr_assert_eq(cmd_run(6, run), 0);
    scenario sc;
    scenario_defaults(&sc);
    cr_assert_eq(scenario_set(&sc, "workload.trace=/tmp/ss-outin/r/requests.csv", err, sizeof err), 0, "%s", err);
    cr_assert_eq(scenario_out_dir(&sc, "/tmp/ss-outin/r", "run", out, sizeof out, err, sizeof err), -1);
    cr_assert_str_eq(err, "--out /tmp/ss-outin/r holds workload.trace /tmp/ss-outin/r/requests.csv, which this command "
                          "reads: writing the result there would replace it; choose another output directory");
    cr_assert_eq(scenario_out_dir(&sc, "/tmp/ss-outin/other", "run", out, sizeof out, err, sizeof err), 0, "%s", err);
    /* a path in a scenario file, from the file's folder */
    FILE *f = fopen("/tmp/ss-outin/s.ini", "w");
    cr_assert_not_null(f);
    fputs("[hardware]\ncost_table = r/steps.csv\n", f);
    fclose(f);
    scenario_defaults(&sc);
    cr_assert_eq(scenario_load(&sc, "/tmp/ss-outin/s.ini", err, sizeof err), 0, "%s", err);
    cr_assert_eq(scenario_out_dir(&sc, "/tmp/ss-outin/r", "run", out, sizeof out, err, sizeof err), -1);
    cr_assert(strstr(err, "holds hardware.cost_table /tmp/ss-outin/r/steps.csv"), "%s", err);
    /* the scenario itself, in a folder servesim did not write all of, is the user's file there
     * (scenario_out_dir's own check of the scenario answers for a result listing it) */
    cr_assert_eq(scenario_out_dir(&sc, "/tmp/ss-outin", "run", out, sizeof out, err, sizeof err), -1);
    cr_assert(strstr(err, "/tmp/ss-outin: a directory with files servesim did not write"), "%s", err);
    char *again[] = {"run", "--set", "workload.arrival=trace", "--set", "workload.trace=/tmp/ss-outin/r/requests.csv",
                     "--out", "/tmp/ss-outin/r", "--quiet", NULL};
    cr_assert_eq(cmd_run(8, again), 2);
    f = fopen("/tmp/ss-outin/r/requests.csv", "r");
    cr_assert_not_null(f, "the trace is still there");
    fclose(f);
    system("rm -rf /tmp/ss-outin");
}

Test(scenario, values_and_booleans_parse_in_every_spelling)
{
    scenario sc;
    scenario_defaults(&sc);
    char err[1024];
    const char *p = write_ini("; comment\n[scheduler]\nprefix_caching = yes ; inline\nchunked_prefill = 1\n"
                              "[kv]\nblock_size = 32\n");
    cr_assert_eq(scenario_load(&sc, p, err, sizeof err), 0, "%s", err);
    cr_assert(sc.v[K_scheduler_prefix_caching].b);
    cr_assert(sc.v[K_scheduler_chunked_prefill].b);
    cr_assert_eq(sc.v[K_kv_block_size].i, 32);
    cr_assert_str_eq(sc.v[K_kv_block_size].origin, (snprintf(err, sizeof err, "%s:6", p), err));
    const char *offs[] = {"off", "false", "no", "0", "OFF"};
    for (int i = 0; i < 5; i++) {
        char set[100];
        snprintf(set, sizeof set, "scheduler.prefix_caching=%s", offs[i]);
        cr_assert_eq(scenario_set(&sc, set, err, sizeof err), 0);
        cr_assert_not(sc.v[K_scheduler_prefix_caching].b);
    }
    cr_assert_eq(scenario_set(&sc, "kv.nope=1", err, sizeof err), -1);
    cr_assert(strstr(err, "--set kv.nope=1: unknown key"), "%s", err);
    cr_assert_eq(scenario_set(&sc, "block_size=1", err, sizeof err), -1);
    cr_assert(strstr(err, "SECTION.KEY=VALUE"), "%s", err);
    unlink(p);
}

/* A key named as vLLM names its option is answered with servesim's key (not taken: one name
 * per setting), with '-' or '_', dashes or a section; a key without its section is named
 * with it where one section has it; `servesim keys` shows vLLM's name beside each. */
Test(scenario, vllm_option_names_are_answered_with_the_key, .init = cr_redirect_stdout)
{
    scenario sc;
    scenario_defaults(&sc);
    char err[1024];
    const struct { const char *set, *says; } cases[] = {
        {"tensor_parallel_size=4", "--set tensor_parallel_size=4: expected SECTION.KEY=VALUE; vLLM's "
                                   "--tensor-parallel-size is deployment.tensor_parallel here (--set "
                                   "deployment.tensor_parallel=4)"},
        {"--max-num-seqs=8", "vLLM's --max-num-seqs is scheduler.max_num_seqs here (--set scheduler.max_num_seqs=8)"},
        {"deployment.tensor-parallel-size=2", "unknown key deployment.tensor-parallel-size; vLLM's "
                                              "--tensor-parallel-size is deployment.tensor_parallel here"},
        {"kv.NUM_GPU_BLOCKS_OVERRIDE=9", "vLLM's --num-gpu-blocks-override is kv.num_blocks here"},
        {"kv.cache_dtype=fp8_e4m3", "kv.cache_dtype: \"fp8_e4m3\" is not one of auto|fp8; servesim's fp8 is vLLM's fp8 "
                                    "(its default format, e4m3;"},
        {"scheduler.long_prefill_token_threshold=256", "unknown key scheduler.long_prefill_token_threshold; vLLM's "
                                                       "--long-prefill-token-threshold is scheduler.chunk_size here"},
        {"tensor_parallel=2", "expected SECTION.KEY=VALUE; did you mean deployment.tensor_parallel=2?"},
        {"scheduler.tensor_parallel=2", "unknown key scheduler.tensor_parallel; did you mean deployment.tensor_parallel?"},
        /* a typo within two edits of one key (new-user trial: no hint was given) */
        {"workload.num_request=200", "unknown key workload.num_request; did you mean workload.num_requests?"},
        {"worklod.num_requests=200", "did you mean workload.num_requests?"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        cr_assert_eq(scenario_set(&sc, cases[i].set, err, sizeof err), -1, "%s", cases[i].set);
        cr_assert(strstr(err, cases[i].says), "%s", err);
    }
    /* "preset" is a key of three sections: no guess */
    cr_assert_eq(scenario_set(&sc, "preset=tiny", err, sizeof err), -1);
    cr_assert_not(strstr(err, "did you mean"), "%s", err);
    cr_assert_eq(sc.v[K_deployment_tensor_parallel].i, 1, "nothing was set");
    expect_load_error("[workload]\nnum_request = 4\n", "unknown key workload.num_request; did you mean num_requests?", 2);
    expect_load_error("[scheduler]\nmax_num_seqs = 4\nenable_prefix_caching = true\n",
                      "unknown key scheduler.enable_prefix_caching; vLLM's --enable-prefix-caching is "
                      "scheduler.prefix_caching here", 3);
    scenario_print_keys(stdout);
    fflush(stdout);
    char out[1 << 17];
    out[fread(out, 1, sizeof out - 1, cr_get_redirected_stdout())] = 0;
    cr_assert(strstr(out, "  tensor_parallel          int in [1, 8], default \"1\"\n"), "%.300s", out);
    const char *tp = strstr(out, "  tensor_parallel ");
    cr_assert(tp && strstr(tp, "      vLLM: --tensor-parallel-size\n"));
    cr_assert(strstr(out, "      vLLM: --speculative-config's num_speculative_tokens\n"));
}

/* llama-3-8b: 8,030,261,248 parameters, 16,060,522,496 bf16 bytes; an H200 reports
 * 143,771 MiB, 90% of which is 135,679,338,086.4 bytes; a block of 16 tokens holds
 * 16 x 2 x 32 layers x 8 heads x 128 x 2 bytes = 2,097,152 bytes: 57,038 blocks. */
Test(scenario, kv_blocks_are_derived_from_memory_and_weights)
{
    scenario sc;
    scenario_defaults(&sc);
    scenario_resolved r;
    char err[1024];
    cr_assert_eq(scenario_set(&sc, "kv.reserve_gib=0", err, sizeof err), 0); /* the weights alone: the reserve's own test is below */
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(model_num_params(&r.model), 8030261248LL);
    cr_assert_eq(r.sched.num_blocks, 57038);
    cr_assert_eq(r.sched.max_model_len, 8192);
    cr_assert_eq(r.sched.max_num_batched_tokens, 8192);
    cr_assert_eq(scenario_set(&sc, "hardware.preset=h100", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0);
    cr_assert_eq(r.sched.num_blocks, 29043);
    cr_assert_eq(scenario_set(&sc, "model.preset=llama-3-70b", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), -1);
    cr_assert(strstr(err, "leave no room"), "%s", err);
}

/* The scheduler's defaults are vLLM V1's (EngineArgs.get_batch_defaults for its OpenAI
 * server): chunked prefill and prefix caching on; 8,192 tokens and 1,024 sequences a step on
 * GPUs of 70 GiB or more but the A100, 2,048 and 256 on the others; without chunked prefill
 * at least max_model_len. The older policies go without both unless asked (and then refuse). */
Test(scenario, the_scheduler_defaults_are_vllm_v1s_for_the_gpu)
{
    const struct { const char *set[3]; int seqs, budget; bool chunked, prefix; } cases[] = {
        {{"hardware.preset=h200", NULL}, 1024, 8192, true, true},
        {{"hardware.preset=b200", NULL}, 1024, 8192, true, true},
        {{"hardware.preset=a100", NULL}, 256, 2048, true, true},                 /* 80 GiB, but an A100 */
        {{"hardware.preset=l40s", NULL}, 256, 2048, true, true},                 /* 45 GiB */
        {{"hardware.preset=h200", "scheduler.chunked_prefill=off"}, 1024, 8192, false, true}, /* llama-3-8b: 8,192 */
        {{"hardware.preset=a100", "scheduler.chunked_prefill=off"}, 256, 8192, false, true},  /* its max_model_len */
        {{"hardware.preset=h200", "scheduler.max_model_len=4"}, 1024, 4096, true, true},      /* 1,024 x 4 */
        {{"scheduler.policy=continuous", NULL}, 1024, 8192, false, false},
        {{"scheduler.max_num_seqs=8", "scheduler.max_num_batched_tokens=512"}, 8, 512, true, true},
        {{"hardware.preset=a100", "scheduler.policy=continuous"}, 256, 8192, false, false}, /* max_model_len */
        {{"hardware.mem_gib=48", NULL}, 256, 2048, true, true},                  /* an H200 of 48 GiB */
        {{"hardware.preset=a100", "hardware.mem_gib=141"}, 256, 2048, true, true}, /* still an A100 */
        {{"scheduler.max_num_batched_tokens=512", NULL}, 512, 512, true, true},  /* sequences <= tokens */
        {{"scheduler.max_num_batched_tokens=10000", "scheduler.max_model_len=4"}, 1024, 10000, true, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        scenario sc;
        scenario_defaults(&sc);
        char err[1024];
        for (int k = 0; k < 3 && cases[i].set[k]; k++)
            cr_assert_eq(scenario_set(&sc, cases[i].set[k], err, sizeof err), 0, "%s", err);
        scenario_resolved r;
        cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "case %zu: %s", i, err);
        cr_assert_eq(r.sched.max_num_seqs, cases[i].seqs, "case %zu", i);
        cr_assert_eq(r.sched.max_num_batched_tokens, cases[i].budget, "case %zu", i);
        cr_assert_eq(r.sched.chunked_prefill, cases[i].chunked, "case %zu", i);
        cr_assert_eq(r.sched.prefix_caching, cases[i].prefix, "case %zu", i);
    }
    scenario sc;
    scenario_defaults(&sc);
    char err[1024];
    scenario_resolved r;
    cr_assert_eq(scenario_set(&sc, "scheduler.policy=continuous", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "scheduler.chunked_prefill=on", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), -1, "asked for, chunked prefill is refused there");
    cr_assert(strstr(err, "scheduler.chunked_prefill = on (--set) needs the paged policy, but scheduler.policy is "
                          "continuous (--set)"), "%s", err);
    cr_assert_eq(scenario_set(&sc, "scheduler.chunked_prefill=off", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "scheduler.prefix_caching=on", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), -1, "and so is prefix caching");
    cr_assert(strstr(err, "prefix_caching"), "%s", err);
    /* the run says which scheduler it had, and whence its sizes */
    char line[SCENARIO_SCHED_TEXT];
    scenario_defaults(&sc);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    scenario_scheduler_describe(&r, line, sizeof line);
    cr_assert_str_eq(line, "paged, chunked prefill on, prefix caching on, 1024 sequences and 8192 tokens a step "
                           "(vLLM's defaults for h200)");
    cr_assert_eq(scenario_set(&sc, "scheduler.max_num_batched_tokens=300", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    scenario_scheduler_describe(&r, line, sizeof line);
    cr_assert_str_eq(line, "paged, chunked prefill on, prefix caching on, 300 sequences and 300 tokens a step "
                           "(the sequences by vLLM's default for h200)");
    /* scheduler.chunk_size is said where it chunks, and where chunked prefill off leaves it unused
     * (it was ignored without a word) */
    cr_assert_eq(scenario_set(&sc, "scheduler.chunk_size=128", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    scenario_scheduler_describe(&r, line, sizeof line);
    cr_assert_str_eq(line, "paged, chunked prefill on in chunks of at most 128 tokens, prefix caching on, 300 sequences "
                           "and 300 tokens a step (the sequences by vLLM's default for h200)");
    cr_assert_eq(scenario_set(&sc, "scheduler.chunked_prefill=off", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "scheduler.max_num_batched_tokens=0", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    scenario_scheduler_describe(&r, line, sizeof line);
    cr_assert_str_eq(line, "paged, chunked prefill off (scheduler.chunk_size = 128 unused: it computes each prompt "
                           "whole), prefix caching on, 1024 sequences and 8192 tokens a step (vLLM's defaults for "
                           "h200)");
}

/* What vLLM's profile run holds out of the pool (kv.reserve_gib = -1, the default), by hand
 * for llama-3-8b on an H200. With vLLM's defaults there (1,024 sequences, 8,192 tokens), the
 * sampler's 38.9 bytes a logit x 1,024 x 128,256 = 5,108,898,201.6 and 0.13 GiB beside it:
 * 5,248,484,638.72 bytes, 54,536 blocks. At max_num_seqs 256: the sampler's 256 x 128,256
 * = 1,277,224,550.4 bytes, more than the forward's 8192 tokens x (2 x 4096 x 2 + 3 x 14,336 x
 * 2) = 838,860,800, plus 0.13 GiB of non-PyTorch memory (139,586,437.12): 1,416,810,987.52,
 * which leaves (135,679,338,086.4 - 16,060,522,496 - 1,416,810,987.52) / 2,097,152 = 56,363
 * blocks. At 8 sequences the sampler's 39,913,267.2 bytes fall under the forward's: 56,572
 * blocks. FP8 adds the activated half's one-byte copy (8192 x 14,336). On two GPUs each holds
 * half the MLP (8192 x 59,392 = 486,539,264, under the sampler) and 0.55 GiB beside it. */
Test(scenario, the_kv_pool_leaves_out_what_vllms_profile_run_holds)
{
    scenario sc;
    scenario_defaults(&sc);
    scenario_resolved r;
    char err[1024];
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(r.sched.max_num_seqs, 1024);
    cr_assert_eq(r.sched.max_num_batched_tokens, 8192);
    cr_assert_float_eq(scenario_kv_reserve_bytes(&r), 5248484638.72, 1e-3);
    cr_assert_eq(r.sched.num_blocks, 54536);
    cr_assert_eq(scenario_set(&sc, "scheduler.max_num_seqs=256", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_float_eq(scenario_kv_reserve_bytes(&r), 1416810987.52, 1e-3);
    cr_assert_eq(r.sched.num_blocks, 56363);
    cr_assert_eq(scenario_set(&sc, "scheduler.max_num_seqs=8", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_float_eq(scenario_kv_reserve_bytes(&r), 838860800 + 139586437.12, 1e-3);
    cr_assert_eq(r.sched.num_blocks, 56572);
    cr_assert_eq(scenario_set(&sc, "model.quantization=fp8", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_float_eq(scenario_kv_reserve_bytes(&r), 8192.0 * (2 * 4096 * 2 + 3 * 14336 * 2 + 14336) + 139586437.12,
                       1e-3);
    cr_assert_eq(scenario_set(&sc, "model.quantization=none", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "scheduler.max_num_seqs=256", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "deployment.tensor_parallel=2", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_float_eq(scenario_kv_reserve_bytes(&r), 1277224550.4 + 0.55 * 1073741824, 1e-3);
    char line[256];
    cr_assert_eq(scenario_set(&sc, "kv.reserve_gib=0", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    scenario_kv_cache_describe(&r, line, sizeof line);
    cr_assert(strstr(line, "less the weights alone (kv.reserve_gib = 0)"), "%s", line);
    /* given, it is taken as it is; too much of it is named in the refusal */
    cr_assert_eq(scenario_set(&sc, "kv.reserve_gib=2", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_float_eq(scenario_kv_reserve_bytes(&r), 2.0 * 1073741824, 1e-3);
    cr_assert_eq(scenario_set(&sc, "kv.reserve_gib=200", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), -1);
    cr_assert(strstr(err, "and kv.reserve_gib's 200.00 GiB (--set) leave no room for a KV block"), "%s", err);
    /* the weights alone would leave room: the refusal points at the given reserve, not at more GPUs */
    cr_assert(strstr(err, "(the weights alone leave room: lower kv.reserve_gib)"), "%s", err);
    /* -1 is the estimate; other negatives are mistakes */
    cr_assert_eq(scenario_set(&sc, "kv.reserve_gib=-0.5", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), -1);
    cr_assert(strstr(err, "kv.reserve_gib = -0.5 (--set): GiB of memory (0 or more), or -1"), "%s", err);
    /* and a pool given whole leaves nothing for a reserve to shape */
    cr_assert_eq(scenario_set(&sc, "kv.reserve_gib=1", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "kv.num_blocks=1000", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), -1);
    cr_assert(strstr(err, "kv.reserve_gib (--set) shapes the pool that memory leaves, but kv.num_blocks (--set)"), "%s",
              err);
    cr_assert_eq(scenario_set(&sc, "kv.reserve_gib=-1", err, sizeof err), 0); /* the default, said aloud, is fine */
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
}

/* Without chunked prefill the budget is max_model_len, and vLLM's profile forward over it is
 * what the reserve holds: llama-3.1-70b in FP8 on one H100 has room for its weights (67.7 GiB
 * of 71.6) but not for a 131,072-token forward; the refusal says so, and what to change. */
Test(scenario, a_reserve_too_large_for_the_gpu_names_its_larger_term)
{
    scenario sc;
    scenario_defaults(&sc);
    scenario_resolved r;
    char err[1024];
    const char *sets[] = {"model.preset=llama-3.1-70b", "model.quantization=fp8", "hardware.preset=h100",
                          "scheduler.chunked_prefill=off", "scheduler.max_num_seqs=256"};
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
        cr_assert_eq(scenario_set(&sc, sets[i], err, sizeof err), 0, "%s", err);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), -1);
    cr_assert(strstr(err, "the reserve is one forward of scheduler.max_num_batched_tokens tokens"), "%s", err);
    cr_assert_not(strstr(err, "max_num_seqs"), "%s", err);
    cr_assert_eq(scenario_set(&sc, "scheduler.chunked_prefill=on", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err); /* an 8,192-token budget leaves room */
    /* where the sampler's logits set it (qwen3-32b at 2,048 sequences: 38.9 x 2048 x 151,936
     * bytes, 11.3 GiB), the refusal names max_num_seqs */
    cr_assert_eq(scenario_set(&sc, "model.quantization=none", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "model.preset=qwen3-32b", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "scheduler.max_num_seqs=2048", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), -1);
    cr_assert(strstr(err, "lower scheduler.max_num_seqs, whose logits the reserve holds"), "%s", err);
}

/* A mixture of experts' forward holds, a token, each of its experts' gate/up output and
 * activated half (1/TP of their columns) and each expert's whole output row: qwen3-30b-a3b on
 * 4 GPUs, 8 of 128 experts of 768 / 4 = 192 columns: 2 x 2048 x 2 + 3 x (8 x 192) x 2 + 8 x
 * 2048 x 2 = 50,176 bytes a token, x 8192 = 411,041,792, over the sampler's 38.9 x 8 x 151,936
 * = 47,282,483.2 at 8 sequences; with 0.55 GiB (590,558,003.2) beside it. */
Test(scenario, the_reserve_of_a_mixture_of_experts_holds_its_experts_outputs)
{
    scenario sc;
    scenario_defaults(&sc);
    scenario_resolved r;
    char err[1024];
    const char *sets[] = {"model.preset=qwen3-30b-a3b", "deployment.tensor_parallel=4", "scheduler.max_num_seqs=8",
                          "scheduler.chunked_prefill=on", "scheduler.max_num_batched_tokens=8192"};
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
        cr_assert_eq(scenario_set(&sc, sets[i], err, sizeof err), 0, "%s", err);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_float_eq(scenario_kv_reserve_bytes(&r), 411041792 + 590558003.2, 1e-3);
}

/* llama-3-70b over 4 H200s (deployment.tensor_parallel = 4): each GPU holds 16 of the 64
 * heads, 2 of the 8 KV heads, 7,168 of the 28,672 MLP columns and 32,064 of the 128,256
 * vocabulary rows: 80 x (8192 x (2048 + 2 x 256) + 2048 x 8192 + 3 x 8192 x 7168)
 * = 17,112,760,320 linear + 2 x 32,064 x 8192 embedding and head + 8192 x 161 norms
 * = 17,639,415,808 parameters, 35,278,831,616 bytes; a 16-token block holds 16 x 2 x 80 x
 * 2 heads x 128 x 2 = 1,310,720 bytes of each GPU's share: (135,679,338,086.4 - 35,278,831,616)
 * / 1,310,720 = 76,599 blocks. At 3 GPUs the heads do not split; 16 GPUs leave 1 KV head each. */
Test(scenario, tensor_parallelism_splits_weights_and_kv_over_the_group)
{
    scenario sc;
    scenario_defaults(&sc);
    scenario_resolved r;
    char err[1024];
    cr_assert_eq(scenario_set(&sc, "model.preset=llama-3-70b", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "deployment.tensor_parallel=4", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "kv.reserve_gib=0", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    model_shape shard = model_shard(&r.model, 4);
    cr_assert_eq(model_num_params(&shard), 17639415808LL);
    cr_assert_eq(r.sched.num_blocks, 76599);
    cr_assert_eq(r.tensor_parallel, 4);
    cr_assert_eq(scenario_set(&sc, "deployment.tensor_parallel=3", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), -1);
    cr_assert(strstr(err, "deployment.tensor_parallel = 3 does not split llama-3-70b: its 64 attention heads "
                      "(model.num_heads) do not divide by 3, as vLLM requires; sizes that do: 1, 2, 4, 8 (given by --set)"),
              "%s", err);
    shard = model_shard(&r.model, 16);
    cr_assert_eq(shard.num_kv_heads, 1);
    cr_assert_eq(shard.num_heads, 4);
    cr_assert_eq(model_check_tp(&r.model, 16, err, sizeof err), 0, "%s", err);
    /* the engine runs one device: it says so rather than serve one GPU's share */
    kb_options kb;
    kb_sampling sp;
    cr_assert_eq(scenario_set(&sc, "deployment.tensor_parallel=2", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(scenario_resolve_engine(&sc, &r, &kb, &sp, err, sizeof err), -1);
    cr_assert(strstr(err, "deployment.tensor_parallel = 2 is for the simulator"), "%s", err);
}

/* FP8 (model.quantization = fp8, kv.cache_dtype = fp8): llama-3-8b's 6,979,321,856 linear
 * parameters at one byte and the other 1,050,939,392 (embedding, LM head, norms) at two:
 * 9,081,200,640 bytes; a 16-token block of one-byte KV is 1,048,576 bytes:
 * (135,679,338,086.4 - 9,081,200,640) / 1,048,576 = 120,733 blocks (57,038 in bf16). The
 * engine refuses FP8. */
Test(scenario, fp8_weights_and_kv_cache_by_hand)
{
    scenario sc;
    scenario_defaults(&sc);
    scenario_resolved r;
    char err[1024];
    cr_assert_eq(scenario_set(&sc, "model.quantization=fp8", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "kv.cache_dtype=fp8", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "kv.reserve_gib=0", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(model_linear_params(&r.model), 6979321856LL);
    cr_assert_eq(r.sched.num_blocks, 120733);
    cr_assert(r.fp8_weights && r.fp8_kv);
    kb_options kb;
    kb_sampling sp;
    cr_assert_eq(scenario_resolve_engine(&sc, &r, &kb, &sp, err, sizeof err), -1);
    cr_assert(strstr(err, "model.quantization = fp8 is for the simulator"), "%s", err);
    cr_assert_eq(scenario_set(&sc, "model.quantization=int4", err, sizeof err), -1);
}

/* A trace file that is not there was named by its path alone (new-user trial): the key and
 * the line that gave it too */
Test(scenario, a_missing_trace_names_its_key_and_line)
{
    scenario sc;
    scenario_resolved r;
    char err[1024], want[256];
    const char *p = write_ini("[workload]\narrival = trace\ntrace = nothere.csv\n");
    scenario_defaults(&sc);
    cr_assert_eq(scenario_load(&sc, p, err, sizeof err), 0, "%s", err);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), -1);
    snprintf(want, sizeof want, "workload.trace (%s:3) = nothere.csv: cannot open /tmp/nothere.csv: No such file", p);
    cr_assert(strstr(err, want), "%s", err);
    unlink(p);
}

/* A scenario file whose path is longer than a value's origin holds (a few hundred characters):
 * the ":LINE" was cut from the origin, which then read as a command-line value's, so a relative
 * trace = t.csv was looked for in the working directory (a helper's find). Where a value came
 * from is now its own flag; the origin keeps the line and shows the path's end. */
Test(scenario, a_relative_path_in_a_deep_scenario_file_is_from_its_folder)
{
    char dir[900], path[1000], err[1024];
    snprintf(dir, sizeof dir, "/tmp/ss-deep-origin/%0200d/%0150d", 0, 0);
    char cmd[1000];
    snprintf(cmd, sizeof cmd, "rm -rf /tmp/ss-deep-origin && mkdir -p %s", dir);
    cr_assert_eq(system(cmd), 0);
    snprintf(path, sizeof path, "%s/t.csv", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("arrival_time,prompt_len,output_len\n0,16,4\n0.5,16,4\n", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/s.ini", dir);
    f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("[workload]\narrival = trace\ntrace = t.csv\n", f);
    fclose(f);
    scenario sc;
    scenario_resolved r;
    scenario_defaults(&sc);
    cr_assert_eq(scenario_load(&sc, path, err, sizeof err), 0, "%s", err);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    workload w;
    cr_assert_eq(wl_build(&r.workload, &w, err, sizeof err), 0, "%s", err);
    cr_assert_eq(w.n, 2);
    wl_free(&w);
    const char *origin = sc.v[K_workload_trace].origin;
    size_t n = strlen(origin);
    cr_assert(n > 11 && strncmp(origin, "...", 3) == 0 && strcmp(origin + n - 8, "/s.ini:3") == 0,
              "the path's end and the line: %s", origin);
    /* a folder and a value too long together for the resolved path: refused, where the cut
     * path was opened */
    snprintf(dir, sizeof dir, "/tmp/ss-deep-origin/%0200d/%0200d/%0200d/%0200d", 0, 1, 2, 3);
    snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
    cr_assert_eq(system(cmd), 0);
    snprintf(path, sizeof path, "%s/s.ini", dir);
    f = fopen(path, "w");
    cr_assert_not_null(f);
    fprintf(f, "[workload]\narrival = trace\ntrace = %0180d.csv\n", 0);
    fclose(f);
    scenario_defaults(&sc);
    cr_assert_eq(scenario_load(&sc, path, err, sizeof err), 0, "%s", err);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), -1);
    cr_assert(strstr(err, "from the scenario's folder, a path of 1008 characters; at most 999"), "%s", err);
    cr_assert_eq(system("rm -rf /tmp/ss-deep-origin"), 0);
}

/* workload.trace_time_scale = 0 passed the keys' range [0, 1000000], as `servesim keys`
 * showed it, and was refused when the workload was built without its key, file or line
 * (bad-input campaign): 0 is out of the range now, in a file and on --set. */
Test(scenario, a_trace_time_scale_of_0_is_out_of_the_keys_range)
{
    expect_load_error("[workload]\narrival = trace\ntrace_time_scale = 0\n",
                      "workload.trace_time_scale = 0 is out of range [0.000001, 1000000]", 3);
    scenario sc;
    char err[1024];
    scenario_defaults(&sc);
    cr_assert_eq(scenario_set(&sc, "workload.trace_time_scale=0", err, sizeof err), -1);
    cr_assert(strstr(err, "--set workload.trace_time_scale=0: workload.trace_time_scale = 0 is out of range"), "%s", err);
    cr_assert_eq(scenario_set(&sc, "workload.trace_time_scale=0.000001", err, sizeof err), 0, "%s", err);
}

/* run.percentiles: numbers in (0, 100], at most 8; "" for none beyond P50/P90/P99. */
Test(scenario, percentiles_are_checked)
{
    scenario sc;
    scenario_resolved r;
    char err[1024];
    const char *bad[] = {"run.percentiles=0", "run.percentiles=101", "run.percentiles=99,x", "run.percentiles=1,2,3,4,5,6,7,8,9",
                         "run.percentiles=99,"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        scenario_defaults(&sc);
        cr_assert_eq(scenario_set(&sc, bad[i], err, sizeof err), 0);
        cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), -1, "%s", bad[i]);
        cr_assert(strstr(err, "run.percentiles (--set): expected up to 8 numbers in (0, 100]"), "%s", err);
    }
    scenario_defaults(&sc);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert(r.num_percentiles == 1 && r.percentiles[0] == 99.9);
    /* P50, P90 and P99 are always reported: asked for again, the CSVs had p99_ttft_ms twice (a
     * new user's trial); they are taken and not added */
    cr_assert_eq(scenario_set(&sc, "run.percentiles=50,99.99,90,99", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert(r.num_percentiles == 1 && r.percentiles[0] == 99.99, "%d", r.num_percentiles);
    cr_assert_eq(scenario_set(&sc, "run.percentiles=99,99.0", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), -1, "still given twice");
    cr_assert_eq(scenario_set(&sc, "run.percentiles=", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(r.num_percentiles, 0);
    /* one given twice wrote its summary keys twice (bad-input campaign) */
    cr_assert_eq(scenario_set(&sc, "run.percentiles=99.9,50,99.90", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), -1);
    cr_assert(strstr(err, "run.percentiles (--set): 99.90 is given twice in \"99.9,50,99.90\""), "%s", err);
    /* 1e-320 named the key p9.9998886718268301e-321_ttft_ms (bad-input campaign) */
    cr_assert_eq(scenario_set(&sc, "run.percentiles=50,1e-320", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), -1);
    cr_assert(strstr(err, "run.percentiles (--set): 1e-320 has more than 6 decimals"), "%s", err);
    cr_assert_eq(scenario_set(&sc, "run.percentiles=99.9999999", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), -1);
    cr_assert_eq(scenario_set(&sc, "run.percentiles=99.999999,0.000001", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "six decimals: %s", err);
}

/* llama-3.2-1b ties its LM head to the embedding: 16 x (2048 x (2048 + 2 x 512) + 2048 x 2048
 * + 3 x 2048 x 8192) + 128256 x 2048 (once) + 2048 x 33 norms = 1,235,814,400, the count
 * Meta publishes. */
Test(scenario, tied_embeddings_are_counted_once)
{
    cr_assert_eq(model_num_params(model_preset("llama-3.2-1b")), 1235814400LL);
    const model_shape *m = model_preset("llama-3.1-8b");
    cr_assert_eq(model_num_params(m), model_linear_params(m) + 2LL * 128256 * 4096 + 4096LL * 65);
}

/* qwen3-30b-a3b, a mixture of experts: per layer QKV and O 2048 x (4096 + 2 x 512) + 4096 x
 * 2048 = 18,874,368, 128 experts of 3 x 2048 x 768 = 4,718,592 each, a 2048 x 128 router;
 * x 48 layers = 29,909,581,824 linear, + 2 x 151,936 x 2048 embedding and head + 2048 x 97
 * norms = 30,532,110,336 (Qwen publishes 30.5B), of which a token uses 8 experts:
 * 48 x (18,874,368 + 262,144 + 8 x 4,718,592) = 2,730,491,904 linear (3.3B with the
 * embedding). On an H200 the 61,064,220,672 bytes of weights leave
 * (135,679,338,086.4 - 61,064,220,672) / (16 x 2 x 48 x 4 x 128 x 2 = 1,572,864) = 47,439
 * blocks. FP8 quantizes all but the router (12,582,912 parameters, bf16 in vLLM):
 * 61,064,220,672 - (29,909,581,824 - 12,582,912) = 31,167,221,760 bytes, and one-byte KV:
 * 132,894 blocks. The real engine, dense, refuses it; an expert count without a top-k is
 * named. */
Test(scenario, a_mixture_of_experts_counts_every_expert_in_memory_and_k_per_token)
{
    scenario sc;
    scenario_defaults(&sc);
    scenario_resolved r;
    char err[1024];
    cr_assert_eq(scenario_set(&sc, "model.preset=qwen3-30b-a3b", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "kv.reserve_gib=0", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(model_linear_params(&r.model), 29909581824LL);
    cr_assert_eq(model_num_params(&r.model), 30532110336LL);
    cr_assert_eq(model_active_linear_params(&r.model), 2730491904LL);
    cr_assert_eq(model_router_params(&r.model), 12582912LL);
    cr_assert_eq(r.sched.num_blocks, 47439);
    char shape[256];
    model_shape_string(&r.model, shape, sizeof shape);
    cr_assert_str_eq(shape, "layers=48 hidden=2048 heads=32 kv_heads=4 head_dim=128 intermediate=768 vocab=151936 "
                            "experts=128 topk=8");
    kb_options kb;
    kb_sampling sp;
    cr_assert_eq(scenario_resolve_engine(&sc, &r, &kb, &sp, err, sizeof err), -1);
    cr_assert(strstr(err, "qwen3-30b-a3b is a mixture of experts"), "%s", err);
    cr_assert_eq(scenario_set(&sc, "model.quantization=fp8", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "kv.cache_dtype=fp8", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(r.sched.num_blocks, 132894);
    /* Mixtral 8x7B: 32 x (41,943,040 + 8 x 176,160,768 + 32,768) + 2 x 32,000 x 4096 + 4096 x 65 */
    cr_assert_eq(model_num_params(model_preset("mixtral-8x7b")), 46702792704LL);
    scenario_defaults(&sc);
    cr_assert_eq(scenario_set(&sc, "model.num_experts=8", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), -1);
    cr_assert(strstr(err, "model.experts_per_token (0) must be between 1 and model.num_experts (8)"), "%s", err);
}

Test(scenario, cost_model_keys_that_contradict_each_other_are_named)
{
    const struct { const char *sets[2]; const char *want; } cases[] = {
        {{"hardware.vllm_version=0.24.0", "hardware.cost_table=x.csv"}, "but hardware.cost_table"},
        {{"hardware.vllm_version=0.24.0", "hardware.cost_model=roofline"}, "but hardware.cost_model"},
        {{"hardware.cost_table=x.csv", "hardware.cost_model=roofline"}, "but hardware.cost_model (--set) asks for the roofline"},
        {{"hardware.step_overhead_ms=-0.5", NULL}, "must be -1"},
        {{"hardware.host_us_per_seq=-0.5", NULL}, "hardware.host_us_per_seq (--set) must be -1 (the table's) or at least 0"},
        {{"scheduler.async_scheduling=on", "speculative.num_tokens=3"}, "vLLM refuses async scheduling beside n-gram"},
        {{"hardware.peak_tflops=1e-300", NULL}, "at least 0.001"}, /* ran to an infinite clock, exit 0 */
        {{"deployment.allreduce_fusion_max_mb=-0.5", NULL},
         "deployment.allreduce_fusion_max_mb (--set) must be -1 (vLLM's default) or at least 0 MiB, got -0.5"},
        {{"deployment.allreduce_fusion=off", "deployment.allreduce_fusion_max_mb=8"},
         "deployment.allreduce_fusion_max_mb (--set) sets how much vLLM fuses, but deployment.allreduce_fusion (--set) is "
         "off; leave the size at -1, or the fusion at auto or on"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        scenario sc;
        scenario_defaults(&sc);
        char err[1024];
        for (int k = 0; k < 2 && cases[i].sets[k]; k++)
            cr_assert_eq(scenario_set(&sc, cases[i].sets[k], err, sizeof err), 0, "%s", err);
        scenario_resolved r;
        cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), -1, "case %zu", i);
        cr_assert(strstr(err, cases[i].want), "case %zu: %s", i, err);
        cr_assert(strstr(err, "--set"), "names where the value came from: %s", err);
    }
}

Test(scenario, incompatible_keys_are_named)
{
    scenario sc;
    scenario_defaults(&sc);
    scenario_resolved r;
    char err[1024];
    scenario_set(&sc, "scheduler.policy=static", err, sizeof err);
    scenario_set(&sc, "scheduler.prefix_caching=on", err, sizeof err);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), -1);
    cr_assert(strstr(err, "scheduler.prefix_caching = on (--set) needs the paged policy, but scheduler.policy is static"),
              "%s", err);
    scenario_defaults(&sc);
    scenario_set(&sc, "workload.arrival=trace", err, sizeof err);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), -1);
    cr_assert(strstr(err, "needs workload.trace"), "%s", err);
    /* one API server in front of one instance: replicas or a disaggregated pair are refused */
    scenario_defaults(&sc);
    scenario_set(&sc, "frontend.token_ms=0.03", err, sizeof err);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_float_eq(r.frontend.token_s, 3e-5, 1e-15);
    cr_assert_float_eq(r.frontend.request_s + r.frontend.step_s, 0, 1e-15);
    scenario_set(&sc, "frontend.preset=vllm", err, sizeof err); /* the preset's, but the key given */
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_float_eq(r.frontend.request_s, 1.8e-3, 1e-15);
    cr_assert_float_eq(r.frontend.step_s, 0.30e-3, 1e-15);
    cr_assert_float_eq(r.frontend.token_s, 3e-5, 1e-15);
    scenario_set(&sc, "deployment.replicas=2", err, sizeof err);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), -1);
    cr_assert(strstr(err, "frontend.token_ms (--set) models one API server in front of one instance; this deployment "
                          "has 2 (deployment.replicas)"), "%s", err);
    scenario_set(&sc, "deployment.replicas=1", err, sizeof err);
    scenario_set(&sc, "deployment.prefill_instances=1", err, sizeof err);
    scenario_set(&sc, "deployment.decode_instances=1", err, sizeof err);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), -1);
    cr_assert(strstr(err, "has 2 (deployment.prefill_instances + decode_instances)"), "%s", err);
    scenario_set(&sc, "frontend.token_ms=-1", err, sizeof err);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), -1);
    cr_assert(strstr(err, "frontend.preset (--set) models one API server"), "%s", err);
    /* a negative time other than -1 (the preset's) */
    scenario_defaults(&sc);
    scenario_set(&sc, "frontend.step_ms=-0.5", err, sizeof err);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), -1);
    cr_assert(strstr(err, "frontend.step_ms (--set) = -0.5 is refused: give a time in ms, or -1 for the preset's"), "%s", err);
    /* more API servers, but none to run more of */
    scenario_defaults(&sc);
    scenario_set(&sc, "frontend.servers=2", err, sizeof err);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), -1);
    cr_assert(strstr(err, "frontend.servers (--set) = 2, but there is no API server to run more of"), "%s", err);
}

static bool exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

static int run_cli(const char **args, int n)
{
    char *argv[16];
    for (int i = 0; i < n; i++) argv[i] = (char *)args[i];
    return cmd_run(n, argv);
}

Test(run_command, bad_input_exits_2_and_writes_nothing)
{
    const char *out = "/tmp/servesim-test-noout";
    system("rm -rf /tmp/servesim-test-noout*");
    const char *p = write_ini("[workload]\narrival = trace\ntrace = /nonexistent.csv\n");
    const char *a1[] = {"run", p, "--out", out, "--quiet"};
    cr_assert_eq(run_cli(a1, 5), 2);
    cr_assert_not(exists(out));
    p = write_ini("[workload]\narrival = trace\ntrace = bad.csv\n");
    FILE *f = fopen("/tmp/bad.csv", "w");
    fputs("arrival_time,prompt_len,output_len\n0,10,5\n0.5,x,5\n", f);
    fclose(f);
    const char *a2[] = {"run", p, "--out", out, "--quiet"};
    cr_assert_eq(run_cli(a2, 5), 2);
    cr_assert_not(exists(out));
    const char *a3[] = {"run", "--set", "kv.block_size=-1", "--out", out};
    cr_assert_eq(run_cli(a3, 5), 2);
    const char *a4[] = {"run", "--seed", "abc", "--out", out};
    cr_assert_eq(run_cli(a4, 5), 2);
    const char *a5[] = {"run", "--bogus", "1"};
    cr_assert_eq(run_cli(a5, 3), 2);
    const char *a6[] = {"run", "/nonexistent.ini"};
    cr_assert_eq(run_cli(a6, 2), 2);
    cr_assert_not(exists(out));
    unlink("/tmp/bad.csv");
    unlink(p);
}

/* 4,096 replicas of a TP-8 70B held 24 GB of block pools and were killed by the OOM killer,
 * without a word (bad-input campaign): a run whose pools pass the machine's memory is refused
 * before any work, naming the key */
Test(run_command, block_pools_past_the_machines_memory_are_refused, .init = cr_redirect_stderr)
{
    const char *out = "/tmp/servesim-test-pools";
    system("rm -rf /tmp/servesim-test-pools*");
    const char *a[] = {"run", "--set", "deployment.replicas=1024", "--set", "kv.num_blocks=1000000000", "--out", out};
    cr_assert_eq(run_cli(a, 7), 2);
    cr_assert_not(exists(out));
    fflush(stderr);
    char text[1024];
    text[fread(text, 1, sizeof text - 1, cr_get_redirected_stderr())] = 0;
    cr_assert(strstr(text, "deployment.replicas = 1024: the simulator holds a block pool of 1000000000 KV blocks for "
                           "each replica"), "%s", text);
}

/* Several instances: timeline.png beside the three files (gnuplot is in CI's setup; without
 * it servesim draws no plot, which is no error), drawn from steps.csv in the temporary
 * directory before it is put in place. One instance: no timeline. */
Test(run_command, a_run_of_several_instances_draws_their_timeline)
{
    system("rm -rf /tmp/servesim-test-timeline*");
    const char *a[] = {"run", "--set", "workload.num_requests=60", "--set", "deployment.prefill_instances=1", "--set",
                       "deployment.decode_instances=2", "--out", "/tmp/servesim-test-timeline", "--quiet"};
    cr_assert_eq(run_cli(a, 10), 0);
    cr_assert(exists("/tmp/servesim-test-timeline/steps.csv"));
    /* its deployment: instances by role, no "replicas" (it said 3, each request counted twice) */
    json_t *sum = json_load_file("/tmp/servesim-test-timeline/summary.json", 0, NULL);
    cr_assert_not_null(sum);
    json_t *dep = json_object_get(sum, "deployment");
    cr_assert_null(json_object_get(dep, "replicas"));
    cr_assert_null(json_object_get(dep, "requests_per_replica"));
    cr_assert_eq(json_integer_value(json_object_get(dep, "prefill_instances")), 1);
    cr_assert_eq(json_integer_value(json_object_get(dep, "decode_instances")), 2);
    json_t *inst = json_object_get(dep, "instances");
    cr_assert_eq(json_array_size(inst), 3);
    json_int_t to_prefill = json_integer_value(json_object_get(json_array_get(inst, 0), "requests")), to_decode = 0;
    for (size_t i = 1; i < 3; i++) to_decode += json_integer_value(json_object_get(json_array_get(inst, i), "requests"));
    cr_assert(to_prefill == 60 && to_decode == 60, "each request once to each role: %lld, %lld", (long long)to_prefill,
              (long long)to_decode);
    json_decref(sum);
    if (system("command -v gnuplot >/dev/null 2>&1") == 0) {
        FILE *f = fopen("/tmp/servesim-test-timeline/timeline.png", "rb");
        cr_assert_not_null(f, "no timeline.png");
        unsigned char magic[4] = {0};
        cr_assert_eq(fread(magic, 1, 4, f), 4);
        fclose(f);
        cr_assert(magic[0] == 0x89 && magic[1] == 'P' && magic[2] == 'N' && magic[3] == 'G');
    }
    const char *one[] = {"run", "--set", "workload.num_requests=20", "--out", "/tmp/servesim-test-timeline1", "--quiet"};
    cr_assert_eq(run_cli(one, 6), 0);
    cr_assert(!exists("/tmp/servesim-test-timeline1/timeline.png"));
    system("rm -rf /tmp/servesim-test-timeline*");
}

Test(run_command, a_good_run_writes_three_files_and_no_temporary)
{
    const char *out = "/tmp/servesim-test-goodout";
    system("rm -rf /tmp/servesim-test-goodout*");
    const char *a[] = {"run", "--set", "workload.num_requests=50", "--out", out, "--quiet"};
    cr_assert_eq(run_cli(a, 6), 0);
    cr_assert(exists("/tmp/servesim-test-goodout/summary.json"));
    cr_assert(exists("/tmp/servesim-test-goodout/requests.csv"));
    cr_assert(exists("/tmp/servesim-test-goodout/steps.csv"));
    cr_assert_eq(system("ls -d /tmp/servesim-test-goodout.* >/dev/null 2>&1"), 512 /* exit 2: none */);
}

/* A run with an API server in front says which (custom once a time is set), with its times
 * and how busy it was, on screen and in summary.json. */
Test(run_command, a_run_says_which_api_server_priced_it, .init = cr_redirect_stdout)
{
    const char *out = "/tmp/servesim-test-frontend-run";
    system("rm -rf /tmp/servesim-test-frontend-run");
    const char *a[] = {"run", "--set", "workload.num_requests=20", "--set", "frontend.preset=vllm", "--set",
                       "frontend.step_ms=0.5", "--set", "frontend.servers=2", "--out", out};
    cr_assert_eq(run_cli(a, 11), 0);
    fflush(stdout);
    static char text[8192];
    FILE *o = cr_get_redirected_stdout();
    text[fread(text, 1, sizeof text - 1, o)] = 0;
    cr_assert(strstr(text, "\nAPI server: custom (1.8 ms a request, 0.5 ms a step, 0.044 ms a streamed chunk) x 2 servers\n"),
              "%s", text);
    json_error_t je;
    json_t *s = json_load_file("/tmp/servesim-test-frontend-run/summary.json", 0, &je);
    cr_assert_not_null(s, "%s", je.text);
    json_t *fe = json_object_get(s, "frontend");
    cr_assert_str_eq(json_string_value(json_object_get(fe, "preset")), "custom"); /* vllm, with step_ms set */
    cr_assert_float_eq(json_number_value(json_object_get(fe, "request_ms")), 1.8, 1e-12);
    cr_assert_float_eq(json_number_value(json_object_get(fe, "step_ms")), 0.5, 1e-12);
    cr_assert_float_eq(json_number_value(json_object_get(fe, "token_ms")), 0.044, 1e-12);
    cr_assert_eq(json_integer_value(json_object_get(fe, "servers")), 2);
    double busy = json_number_value(json_object_get(fe, "busy_fraction"));
    cr_assert(busy > 0 && busy < 1, "busy_fraction %g", busy);
    json_decref(s);
    system("rm -rf /tmp/servesim-test-frontend-run");
}

/* The KV pool a run had, as vLLM logs its "GPU KV cache size", on screen and in summary.json.
 * By hand, llama-3-8b on an H200 with vLLM's defaults: (143771 / 1024 GiB x 0.9 - 8,030,261,248
 * params x 2 bytes - the reserve's 5,248,484,638.72 bytes, above) / (32 layers x 8 KV heads x
 * 128 x K and V x 2 bytes x 16 tokens a block) = 54,536 blocks. */
Test(run_command, a_run_says_how_large_its_kv_cache_was, .init = cr_redirect_stdout)
{
    const char *out = "/tmp/servesim-test-kv-run", *set = "/tmp/servesim-test-kv-set";
    system("rm -rf /tmp/servesim-test-kv-run /tmp/servesim-test-kv-set /tmp/servesim-test-kv-rep");
    const char *a[] = {"run", "--set", "workload.num_requests=20", "--out", out};
    cr_assert_eq(run_cli(a, 5), 0);
    const char *b[] = {"run", "--set", "workload.num_requests=20", "--set", "kv.num_blocks=1000", "--out", set, "--quiet"};
    cr_assert_eq(run_cli(b, 8), 0);
    const char *c[] = {"run", "--repeat", "2", "--set", "workload.num_requests=20", "--out", "/tmp/servesim-test-kv-rep"};
    cr_assert_eq(run_cli(c, 7), 0); /* run --repeat says it too */
    fflush(stdout);
    static char text[65536];
    FILE *o = cr_get_redirected_stdout();
    text[fread(text, 1, sizeof text - 1, o)] = 0;
    const char *line = "\nKV cache: 872576 tokens (54536 blocks of 16), 106.5 GiB a GPU, derived from "
                       "hardware.gpu_memory_utilization less the weights and 4.89 GiB of activations and buffers "
                       "(estimated, kv.reserve_gib)\n";
    const char *first = strstr(text, line);
    cr_assert(first && strstr(first + 1, line), "%s", text);
    json_error_t je;
    json_t *s = json_load_file("/tmp/servesim-test-kv-run/summary.json", 0, &je);
    cr_assert_not_null(s, "%s", je.text);
    json_t *kv = json_object_get(s, "kv_cache");
    cr_assert_eq(json_integer_value(json_object_get(kv, "blocks")), 54536);
    cr_assert_eq(json_integer_value(json_object_get(kv, "tokens")), 54536 * 16);
    cr_assert_float_eq(json_number_value(json_object_get(kv, "gib_per_gpu")), 54536 * 2.0 / 1024, 1e-5); /* printed to 10 figures */
    cr_assert_float_eq(json_number_value(json_object_get(kv, "reserve_gib")), 5248484638.72 / 1073741824, 1e-5);
    cr_assert_str_eq(json_string_value(json_object_get(kv, "reserve_source")), "estimated");
    cr_assert_str_eq(json_string_value(json_object_get(kv, "source")), "derived");
    json_t *sched = json_object_get(s, "scheduler");
    cr_assert_eq(json_integer_value(json_object_get(sched, "max_num_seqs")), 1024);
    cr_assert_str_eq(json_string_value(json_object_get(sched, "max_num_seqs_source")), "vllm_default");
    cr_assert_eq(json_integer_value(json_object_get(sched, "max_num_batched_tokens")), 8192);
    cr_assert(json_is_true(json_object_get(sched, "chunked_prefill")) && json_is_true(json_object_get(sched, "prefix_caching")));
    json_decref(s);
    s = json_load_file("/tmp/servesim-test-kv-set/summary.json", 0, &je);
    cr_assert_not_null(s, "%s", je.text);
    kv = json_object_get(s, "kv_cache");
    cr_assert_eq(json_integer_value(json_object_get(kv, "tokens")), 16000);
    cr_assert_float_eq(json_number_value(json_object_get(kv, "gib_per_gpu")), 1000 * 2.0 / 1024, 1e-5);
    cr_assert_str_eq(json_string_value(json_object_get(kv, "source")), "kv.num_blocks");
    cr_assert_null(json_object_get(kv, "reserve_gib")); /* nothing was derived */
    json_decref(s);
    system("rm -rf /tmp/servesim-test-kv-run /tmp/servesim-test-kv-set /tmp/servesim-test-kv-rep");
}

/* The real engine's summary.json had no "scheduler" or "kv_cache", though README says every
 * run records its scheduler (new-user trial): it records both, its pool from engine.kv_gib,
 * and no async scheduling, which it never does */
Test(run_command, the_engine_records_its_scheduler_and_kv_pool)
{
    const char *out = "/tmp/servesim-test-engine-sched";
    system("rm -rf /tmp/servesim-test-engine-sched");
    char *argv[] = {"engine", "--set", "model.preset=tiny", "--set", "workload.num_requests=3", "--set",
                    "engine.kv_gib=0.125", "--out", (char *)out, "--quiet"};
    cr_assert_eq(cmd_engine(10, argv), 0);
    json_error_t je;
    json_t *s = json_load_file("/tmp/servesim-test-engine-sched/summary.json", 0, &je);
    cr_assert_not_null(s, "%s", je.text);
    json_t *kv = json_object_get(s, "kv_cache"), *sched = json_object_get(s, "scheduler");
    /* tiny: 2 layers x 2 (K, V) x 2 KV heads x 32 dims x 4 bytes (fp32 on the CPU) = 1 KiB a
     * token, 16 KiB a block of 16: 0.125 GiB holds 8,192 blocks */
    cr_assert_eq(json_integer_value(json_object_get(kv, "blocks")), 8192);
    cr_assert_eq(json_integer_value(json_object_get(kv, "tokens")), 8192 * 16);
    cr_assert_str_eq(json_string_value(json_object_get(kv, "source")), "engine.kv_gib");
    cr_assert_null(json_object_get(kv, "gib_per_gpu"), "no simulated GPU's share");
    cr_assert_str_eq(json_string_value(json_object_get(sched, "policy")), "paged");
    cr_assert(json_is_false(json_object_get(sched, "async_scheduling")));
    cr_assert_eq(json_integer_value(json_object_get(sched, "max_num_batched_tokens")), 8192);
    json_decref(s);
    system("rm -rf /tmp/servesim-test-engine-sched");
}

/* Runs `servesim run` with ARGS (N of them; OUT is its --out) and checks that it exits 0 and
 * says WANT on stderr (the test redirects it). */
static void run_warns(const char **args, int n, const char *out, const char *want)
{
    char rm[300];
    snprintf(rm, sizeof rm, "rm -rf %s", out);
    system(rm);
    cr_assert_eq(run_cli(args, n), 0);
    fflush(stderr);
    static char text[8192];
    FILE *e = cr_get_redirected_stderr();
    text[fread(text, 1, sizeof text - 1, e)] = 0;
    cr_assert(strstr(text, want), "%s", text);
    system(rm);
}

/* A pool that cannot hold one sequence of max_model_len, which vLLM refuses to start with:
 * qwen3-32b on an H100, with vLLM's defaults there (1,024 sequences, 8,192 tokens), holds
 * 20,032 tokens of its 40,960; the run goes on, and says so. */
Test(run_command, a_pool_shorter_than_one_sequence_is_warned_of, .init = cr_redirect_stderr)
{
    const char *a[] = {"run", "--set", "model.preset=qwen3-32b", "--set", "hardware.preset=h100", "--set",
                       "workload.num_requests=5", "--out", "/tmp/servesim-test-shortpool", "--quiet"};
    run_warns(a, 10, "/tmp/servesim-test-shortpool",
              "warning: the KV pool holds 20032 tokens, less than one sequence of scheduler.max_model_len (40960)");
}

/* kv.num_blocks past the GPU's memory is taken (a what-if) but warned of: a billion blocks
 * of llama-3-8b (2 MiB each) is 1.9 million GiB on an H200 of 140.4 GiB, and once ran silently. */
Test(run_command, a_pool_larger_than_the_gpu_is_warned_of, .init = cr_redirect_stderr)
{
    const char *a[] = {"run", "--set", "kv.num_blocks=100000", "--set", "workload.num_requests=5",
                       "--out", "/tmp/servesim-test-bigpool", "--quiet"};
    run_warns(a, 8, "/tmp/servesim-test-bigpool",
              "warning: kv.num_blocks = 100000 is 195.3 GiB of KV a GPU, more than the GPU's 140.4 GiB of memory");
}

/* A run stopped by Ctrl-C once left DIR.tmp.PID behind (470 MB after a minute); now it
 * removes it and exits 128 + SIGINT, and the next run clears temporaries of dead processes. */
Test(run_command, an_interrupted_run_leaves_nothing_behind)
{
    const char *out = "/tmp/servesim-test-interrupt";
    cr_assert_eq(system("rm -rf /tmp/servesim-test-interrupt*"), 0);
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        interrupt_install();
        const char *args[] = {"run", "--out", out, "--quiet", "--set", "workload.num_requests=3000000"};
        int status = run_cli(args, 6);
        int sig = *interrupt_flag();
        _exit(sig ? 128 + sig : status);
    }
    char tmp[128];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", out, (int)child);
    struct timespec tick = {0, 10000000}; /* 10 ms */
    for (int i = 0; i < 3000 && !exists(tmp); i++) nanosleep(&tick, NULL); /* the run has started writing */
    cr_assert(exists(tmp), "the run never opened %s", tmp);
    for (int i = 0; i < 20; i++) nanosleep(&tick, NULL);
    kill(child, SIGINT);
    int status;
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGINT, "exit status %d", status);
    cr_assert_not(exists(tmp), "%s left behind", tmp);
    cr_assert_not(exists(out));

    /* a temporary of a process that no longer exists goes at the next open of the same DIR
     * (servesim's: its marker inside, as the interrupted run's had); one of a live process
     * (ours, the test's parent's) stays, and so does a folder of that name without it */
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    waitpid(dead, NULL, 0);
    char stale[128], live[128];
    snprintf(stale, sizeof stale, "%s.tmp.%d", out, (int)dead);
    snprintf(live, sizeof live, "%s.tmp.%d", out, (int)getppid());
    mkdir(stale, 0777);
    mkdir(live, 0777);
    char mark[192], users[128];
    snprintf(mark, sizeof mark, "%s/.servesim-writing", stale);
    fclose(fopen(mark, "w"));
    snprintf(users, sizeof users, "%s.tmp.%d", out, (int)dead + 4194304); /* past any pid */
    mkdir(users, 0777);
    const char *args[] = {"run", "--out", out, "--quiet", "--set", "workload.num_requests=10"};
    cr_assert_eq(run_cli(args, 6), 0);
    cr_assert_not(exists(stale));
    cr_assert(exists(live));
    cr_assert(exists(users), "no marker: not servesim's to remove");
    rmdir(live);
    rmdir(users);
    cr_assert_eq(system("rm -rf /tmp/servesim-test-interrupt"), 0);
}

/* Bad inputs a user gave: each one exit 2 and nothing written (#14, defects 4 and 9). */
Test(run_command, a_directory_an_empty_out_and_an_overlong_path_are_refused)
{
    const char *out = "/tmp/servesim-test-refused";
    cr_assert_eq(system("rm -rf /tmp/servesim-test-refused*"), 0);
    const char *a1[] = {"run", "/tmp", "--out", out, "--quiet"}; /* once ran the default scenario */
    cr_assert_eq(run_cli(a1, 5), 2);
    const char *a2[] = {"run", "--out", "", "--quiet"}; /* once exit 1 */
    cr_assert_eq(run_cli(a2, 4), 2);
    char longpath[1200];
    memset(longpath, 'a', sizeof longpath);
    memcpy(longpath, "/tmp/", 5);
    snprintf(longpath + 1100, 100, "/x.ini"); /* its folder was cut at 700 characters */
    const char *a3[] = {"run", longpath, "--out", out, "--quiet"};
    cr_assert_eq(run_cli(a3, 5), 2);
    cr_assert_not(exists(out));
}

/* A trace is replayed whole unless num_requests is set (it was cut to the default 1,000). */
Test(scenario, a_trace_is_replayed_whole_unless_a_count_is_set)
{
    FILE *f = fopen("/tmp/servesim-test-trace.csv", "w");
    fputs("arrival_time,prompt_len,output_len\n", f);
    for (int i = 0; i < 1500; i++) fprintf(f, "%g,16,4\n", i * 0.01);
    fclose(f);
    scenario sc;
    scenario_defaults(&sc);
    char err[1024];
    cr_assert_eq(scenario_set(&sc, "workload.arrival=trace", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "workload.trace=/tmp/servesim-test-trace.csv", err, sizeof err), 0);
    scenario_resolved r;
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    workload w;
    cr_assert_eq(wl_build(&r.workload, &w, err, sizeof err), 0, "%s", err);
    cr_assert_eq(w.n, 1500);
    wl_free(&w);
    cr_assert_eq(scenario_set(&sc, "workload.num_requests=1000", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(wl_build(&r.workload, &w, err, sizeof err), 0, "%s", err);
    cr_assert_eq(w.n, 1000, "set explicitly, even to the default, it cuts");
    wl_free(&w);
    remove("/tmp/servesim-test-trace.csv");
}

/* The engine's KV pool (engine.kv_gib) holds a draft model's blocks too: tiny drafting for
 * tiny needs twice the bytes a block, so half the blocks (1 GiB of fp32 blocks of 16 tokens
 * of 2 layers x K and V x 2 KV heads x 32 x 4 bytes = 16 KiB: 65,536 alone, 32,768 with its
 * draft). */
Test(scenario, the_engines_pool_holds_the_draft_models_kv)
{
    scenario sc;
    scenario_defaults(&sc);
    char err[512];
    cr_assert_eq(scenario_set(&sc, "model.preset=tiny", err, sizeof err), 0);
    scenario_resolved r;
    kb_options kb;
    kb_sampling sp;
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(scenario_resolve_engine(&sc, &r, &kb, &sp, err, sizeof err), 0, "%s", err);
    cr_assert_eq(r.sched.num_blocks, 65536);
    cr_assert_eq(scenario_set(&sc, "speculative.num_tokens=2", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "speculative.method=draft", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "speculative.draft_model=tiny", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(scenario_resolve_engine(&sc, &r, &kb, &sp, err, sizeof err), 0, "%s", err);
    cr_assert_eq(r.sched.num_blocks, 32768);
}

/* A pool past the engine's 32-bit token slots was refused by the backend as "KV pool or model
 * dimensions overflow 32-bit indices", naming no key (bad-input campaign). 65,536 blocks a GiB
 * of tiny's KV: 100,000 GiB is 6,553,600,000 blocks. */
Test(scenario, an_engine_pool_past_its_slots_names_its_key)
{
    scenario sc;
    scenario_defaults(&sc);
    char err[512];
    cr_assert_eq(scenario_set(&sc, "model.preset=tiny", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "engine.kv_gib=100000", err, sizeof err), 0);
    scenario_resolved r;
    kb_options kb;
    kb_sampling sp;
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(scenario_resolve_engine(&sc, &r, &kb, &sp, err, sizeof err), -1);
    cr_assert_str_eq(err, "engine.kv_gib (--set): the real engine's KV pool of 6553600000 blocks of 16 tokens passes "
                          "the 2^31 token slots it indexes; give a smaller pool");
    cr_assert_eq(scenario_set(&sc, "engine.kv_gib=1", err, sizeof err), 0);
    cr_assert_eq(scenario_set(&sc, "kv.num_blocks=200000000", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(scenario_resolve_engine(&sc, &r, &kb, &sp, err, sizeof err), -1);
    cr_assert(strstr(err, "kv.num_blocks (--set): the real engine's KV pool of 200000000 blocks"), "%s", err);
}

/* scheduler.max_model_len past the model's context was taken (50,000-token prompts served on
 * llama-3-8b, whose context is 8,192; bad-input campaign), which vLLM refuses; model.max_position
 * sets a longer context, as a RoPE-scaled checkpoint has, and then it is taken. */
Test(scenario, max_model_len_past_the_models_context_is_refused)
{
    scenario sc;
    scenario_resolved r;
    char err[1024];
    scenario_defaults(&sc);
    cr_assert_eq(scenario_set(&sc, "scheduler.max_model_len=8192", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(scenario_set(&sc, "scheduler.max_model_len=8193", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), -1);
    cr_assert_str_eq(err, "built-in scenario: scheduler.max_model_len = 8193 (--set) is longer than llama-3-8b's context of 8192 "
                          "positions, which vLLM refuses; model.max_position sets a longer one");
    cr_assert_eq(scenario_set(&sc, "model.max_position=16384", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(r.sched.max_model_len, 8193);
    cr_assert_eq(scenario_set(&sc, "scheduler.max_model_len=0", err, sizeof err), 0);
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(r.sched.max_model_len, 16384, "0 takes the model's context, as set");
}

/* The roofline with FP8 weights takes the GPU's FP8 fit (its FIT8 row); an FP8 KV cache alone,
 * or a GPU without FP8 tables (the A100), the bf16 fit; a given efficiency wins over either. */
Test(scenario, the_roofline_with_fp8_weights_takes_the_gpus_fp8_fit)
{
    hw_fit h200_fp8;
    cr_assert(hw_preset_fit_fp8("h200", &h200_fp8));
    const struct {
        const char *gpu, *set, *also;
        double compute;
        bool fp8_fit;
    } cases[] = {
        {"h200", "model.quantization=fp8", "run.seed=1", h200_fp8.compute_efficiency, true},
        {"h200", "kv.cache_dtype=fp8", "run.seed=1", hw_preset_fit("h200").compute_efficiency, false},
        {"a100", "model.quantization=fp8", "run.seed=1", hw_preset_fit("a100").compute_efficiency, false},
        {"h200", "model.quantization=fp8", "hardware.compute_efficiency=0.5", 0.5, true},
        /* every value given: no fit is used, and the cost-model line must not name one */
        {"h200", "model.quantization=fp8",
         "hardware.compute_efficiency=0.5;hardware.memory_efficiency=0.6;hardware.attention_efficiency=0.7;"
         "hardware.step_overhead_ms=1", 0.5, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        scenario sc;
        scenario_resolved r;
        char err[512], gpu[64];
        scenario_defaults(&sc);
        snprintf(gpu, sizeof gpu, "hardware.preset=%s", cases[i].gpu);
        const char *sets[] = {gpu, "hardware.cost_model=roofline", cases[i].set};
        for (size_t k = 0; k < 3; k++) cr_assert_eq(scenario_set(&sc, sets[k], err, sizeof err), 0, "%s", err);
        char also[300];
        snprintf(also, sizeof also, "%s", cases[i].also);
        for (char *a = strtok(also, ";"); a; a = strtok(NULL, ";"))
            cr_assert_eq(scenario_set(&sc, a, err, sizeof err), 0, "%s", err);
        cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
        cr_assert_float_eq(r.roofline.compute_efficiency, cases[i].compute, 0, "case %zu", i);
        cr_assert_eq(r.roofline_fit_fp8, cases[i].fp8_fit, "case %zu", i);
        if (cases[i].fp8_fit)
            cr_assert_float_eq(r.roofline.memory_efficiency, h200_fp8.memory_efficiency, 0, "case %zu", i);
        if (i == 4) cr_assert_float_eq(r.roofline.memory_efficiency, 0.6, 0);
    }
}

/* hardware.fp8_tflops sets the FP8 peak the linear layers of FP8 weights run at; before it,
 * hardware.peak_tflops moved the bf16 peak only and FP8 weights kept the preset's FP8 peak
 * (stop 38's leftover). The A100 has no FP8 peak: FP8 weights compute at its bf16 one until
 * the key gives one. A table ignores the key and says so. */
Test(scenario, fp8_tflops_sets_the_fp8_peak)
{
    const struct {
        const char *gpu, *fp8;
        double want;
    } cases[] = {
        {"h200", "0", hw_preset("h200")->fp8_tflops},
        {"h200", "1000", 1000},
        {"a100", "0", 0},
        {"a100", "600", 600},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        scenario sc;
        scenario_resolved r;
        char err[512], gpu[64], fp8[64];
        scenario_defaults(&sc);
        snprintf(gpu, sizeof gpu, "hardware.preset=%s", cases[i].gpu);
        snprintf(fp8, sizeof fp8, "hardware.fp8_tflops=%s", cases[i].fp8);
        const char *sets[] = {gpu, "model.quantization=fp8", "hardware.peak_tflops=500", fp8};
        for (size_t k = 0; k < 4; k++) cr_assert_eq(scenario_set(&sc, sets[k], err, sizeof err), 0, "%s", err);
        cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), 0, "%s", err);
        cr_assert_float_eq(r.hw.fp8_tflops, cases[i].want, 0, "case %zu: %g", i, r.hw.fp8_tflops);
        cr_assert_float_eq(r.hw.peak_tflops, 500, 0);
        cr_assert_eq(strstr(r.roofline_keys_set, "hardware.fp8_tflops") != NULL, cases[i].want > 0 &&
                     strcmp(cases[i].fp8, "0") != 0, "case %zu: %s", i, r.roofline_keys_set);
    }
    scenario sc;
    char err[512];
    scenario_defaults(&sc);
    cr_assert_eq(scenario_set(&sc, "hardware.fp8_tflops=0.0001", err, sizeof err), 0, "%s", err);
    scenario_resolved r;
    cr_assert_eq(scenario_resolve(&sc, &r, err, sizeof err), -1);
    cr_assert(strstr(err, "hardware.fp8_tflops (--set) must be 0 (the preset's) or at least 0.001"), "%s", err);
}
