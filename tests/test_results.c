/* Result files: temporary directory, commit and abort, exact CSV and JSON text. */
#define _XOPEN_SOURCE 700   /* nftw */
#include <criterion/criterion.h>
#include <pthread.h>
#include <dirent.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/file_fixture.h"
#include "io/results.h"

static char root[64];

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static void make_root(void)
{
    strcpy(root, "/tmp/servesim_results_XXXXXX");
    cr_assert_not_null(mkdtemp(root));
}

static void remove_root(void)
{
    nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(results, .init = make_root, .fini = remove_root);

static int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* A file of the user's at PATH holding TEXT. */
static void put_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    fputs(text, f);
    fclose(f);
}

/* Names in DIR, sorted, joined by spaces. */
static void list_dir(const char *dir, char *out, size_t len)
{
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort);
    cr_assert(n >= 0);
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (names[i]->d_name[0] != '.') {
            strncat(out, names[i]->d_name, len - strlen(out) - 2);
            strcat(out, " ");
        }
        free(names[i]);
    }
    free(names);
}

static const step_record step1 = {
    .step_id = 0, .start_time = 0.5, .end_time = 0.625, .num_prefill_tokens = 300,
    .num_prefill_seqs = 2, .num_decode_seqs = 3, .num_outputs = 4, .num_batched_tokens = 303,
    .num_padding_tokens = 0, .chunked = true, .num_free_blocks = 90,
    .num_prefix_cached_blocks = 5, .waiting = 7, .running = 5, .prefilling = 2,
    .prefix_hits = 32, .prefix_queries = 332, .kv_allocated_slots = 640, .kv_unused_slots = 17,
    .num_preempted = 1, .schedule_time = NAN, .prepare_time = NAN, .forward_time = NAN,
    .sample_time = NAN, .predicted_time = 0.25};

static summary sample_summary(void)
{
    summary s = {.completed = 3, .rejected = 1, .duration = 2.0, .total_input_tokens = 350,
                 .total_output_tokens = 18, .request_throughput = 1.5, .request_goodput = 1.0,
                 .output_throughput = 9, .total_token_throughput = 184, .num_steps = 2,
                 .mean_free_blocks = 55, .min_free_blocks = 40, .prefix_hit_rate = 0.25};
    s.ttft_ms = (latency_stats){.mean = 700.0 / 3, .median = 200, .std = 124.72, .p50 = 200,
                                .p90 = 360, .p99 = 396, .min = 100, .max = 400};
    s.tpot_ms.mean = INFINITY;
    return s;
}

static void write_run(const char *dir, const json_t *extra)
{
    int existed = exists(dir);
    res_dir d;
    char err[512] = "";
    cr_assert_eq(res_open(&d, dir, err, sizeof err), 0, "%s", err);
    res_write_step(&d, &step1);
    step_record s2 = step1;
    s2.instance = 3;
    s2.num_kv_delayed = 2;
    s2.prefix_evictions = 9;
    s2.num_spec_seqs = 2;
    s2.num_draft_tokens = 6;
    s2.num_accepted_tokens = 4;
    s2.draft_time = 0.0031;
    s2.step_id = 1;
    s2.start_time = 0.625;
    s2.end_time = 1.0 / 3;
    s2.chunked = false;
    s2.forward_time = 0.0123;
    res_write_step(&d, &s2);
    req_record r[2] = {
        {.request_id = 0, .arrival_time = 0, .scheduled_prefill_time = 0.1,
         .first_token_time = 0.25, .finish_time = 1.5, .prompt_len = 100,
         .cached_prompt_len = 32, .output_len = 11, .num_preemptions = 1, .stop = STOP_LENGTH,
         .warmup = true, .draft_tokens = 12, .accepted_tokens = 7},
        {.request_id = 1, .arrival_time = 0.5, .scheduled_prefill_time = NAN,
         .first_token_time = NAN, .finish_time = 0.5, .prompt_len = 99999,
         .stop = STOP_TOO_LONG},
    };
    for (int i = 0; i < 2; i++) res_write_request(&d, &r[i]);
    summary s = sample_summary();
    cr_assert_eq(res_write_summary(&d, &s, extra, err, sizeof err), 0, "%s", err);
    cr_assert(exists(d.od.tmp_path));
    cr_assert_eq(exists(dir), existed, "DIR untouched before the commit");
    cr_assert_eq(res_commit(&d, err, sizeof err), 0, "%s", err);
}

Test(results, commit_creates_dir_with_three_files_and_exact_csv)
{
    char dir[128], listing[512];
    snprintf(dir, sizeof dir, "%s/a/b/run", root);
    write_run(dir, NULL);
    list_dir(dir, listing, sizeof listing);
    cr_assert_str_eq(listing, "requests.csv steps.csv summary.json ");
    char parent[128];
    snprintf(parent, sizeof parent, "%s/a/b", root);
    list_dir(parent, listing, sizeof listing);
    cr_assert_str_eq(listing, "run ", "no temporary directory left: %s", listing);

    char *steps = slurp(dir, "steps.csv");
    cr_assert_str_eq(steps,
        "step_id,start_time,end_time,num_prefill_tokens,num_prefill_seqs,num_decode_seqs,"
        "num_outputs,num_batched_tokens,num_padding_tokens,chunked,num_free_blocks,"
        "num_prefix_cached_blocks,waiting,running,prefilling,prefix_hits,prefix_queries,"
        "kv_allocated_slots,kv_unused_slots,num_preempted,schedule_time,prepare_time,"
        "forward_time,sample_time,predicted_time,instance,num_kv_delayed,prefix_evictions,num_spec_seqs,"
        "num_draft_tokens,num_accepted_tokens,draft_time\n"
        "0,0.500000000,0.625000000,300,2,3,4,303,0,1,90,5,7,5,2,32,332,640,17,1,,,,,0.250000000,0,0,0,0,0,0,0.000000000\n"
        "1,0.625000000,0.333333333,300,2,3,4,303,0,0,90,5,7,5,2,32,332,640,17,1,,,0.012300000,,0.250000000,3,2,9,2,6,4,0.003100000\n");
    char *reqs = slurp(dir, "requests.csv");
    cr_assert_str_eq(reqs,
        "request_id,arrival_time,scheduled_prefill_time,first_token_time,finish_time,"
        "prompt_len,cached_prompt_len,output_len,num_preemptions,stop_reason,warmup,draft_tokens,accepted_tokens\n"
        "0,0.000000000,0.100000000,0.250000000,1.500000000,100,32,11,1,length,1,12,7\n"
        "1,0.500000000,,,0.500000000,99999,0,0,0,too_long,0,0,0\n");
    free(steps);
    free(reqs);
}

Test(results, summary_json_order_format_and_determinism)
{
    char a[128], b[128];
    snprintf(a, sizeof a, "%s/one", root);
    snprintf(b, sizeof b, "%s/two", root);
    json_t *extra = json_pack("{s:{s:s}}", "scenario", "name", "demo");
    write_run(a, extra);
    write_run(b, extra);
    json_decref(extra);
    char *ja = slurp(a, "summary.json"), *jb = slurp(b, "summary.json");
    cr_assert_str_eq(ja, jb, "identical inputs, identical bytes");
    /* integers as integers, reals with 10 significant digits (and a ".0" jansson keeps) */
    const char *head = "{\n  \"completed\": 3,\n  \"rejected\": 1,\n  \"failed\": 0,\n  \"duration\": 2.0,\n"
                       "  \"total_input_tokens\": 350,\n  \"total_output_tokens\": 18,\n"
                       "  \"request_throughput\": 1.5,\n  \"request_goodput\": 1.0,\n"
                       "  \"output_throughput\": 9.0,\n  \"total_token_throughput\": 184.0,\n"
                       "  \"keep_up\": 0.0,\n  \"mean_ttft_ms\": 233.3333333,\n  \"median_ttft_ms\": 200.0,\n"
                       "  \"std_ttft_ms\": 124.72,\n  \"p50_ttft_ms\": 200.0,\n"
                       "  \"p90_ttft_ms\": 360.0,\n  \"p99_ttft_ms\": 396.0,\n";
    cr_assert(strncmp(ja, head, strlen(head)) == 0, "summary.json starts:\n%s", ja);
    cr_assert_not_null(strstr(ja, "  \"mean_tpot_ms\": null,\n"), "non-finite is null");
    const char *order[] = {"\"p99_e2el_ms\"", "\"num_steps\": 2", "\"mean_free_blocks\": 55.0",
                           "\"min_free_blocks\": 40", "\"prefix_hit_rate\": 0.25",
                           "\"total_padding_tokens\": 0", "\"spec_draft_tokens\": 0"};
    const char *at = ja;
    for (size_t i = 0; i < sizeof order / sizeof *order; i++) {
        const char *p = strstr(at, order[i]);
        cr_assert_not_null(p, "%s missing or out of order", order[i]);
        at = p;
    }
    const char *tail = "  \"spec_mean_verify_ms\": 0.0,\n  \"scenario\": {\n    \"name\": \"demo\"\n  }\n}\n";
    cr_assert_str_eq(ja + strlen(ja) - strlen(tail), tail);
    free(ja);
    free(jb);
}

Test(results, commit_replaces_a_result_servesim_wrote)
{
    char dir[128], path[192], listing[512];
    snprintf(dir, sizeof dir, "%s/run", root);
    write_run(dir, NULL);
    snprintf(path, sizeof path, "%s/" OD_MARKER, dir);
    cr_assert(exists(path), "a result carries the marker");
    write_run(dir, NULL);
    list_dir(dir, listing, sizeof listing);
    cr_assert_str_eq(listing, "requests.csv steps.csv summary.json ");
    list_dir(root, listing, sizeof listing);
    cr_assert_str_eq(listing, "run ", "no old copy left aside: %s", listing);
}

/* A rerun into a result deleted whatever the user had put in it since, the scenario file
 * itself when it lived there: the marker lists what servesim wrote, and anything else makes
 * the directory the user's. */
Test(results, a_result_the_user_added_to_is_refused_and_kept)
{
    char dir[128], mine[256], sub[192], listing[512], err[512];
    snprintf(dir, sizeof dir, "%s/run", root);
    write_run(dir, NULL);
    snprintf(sub, sizeof sub, "%s/mine", dir);
    cr_assert_eq(mkdir(sub, 0777), 0);
    snprintf(mine, sizeof mine, "%s/notes.txt", sub);
    put_file(mine, "my notes\n");
    res_dir d;
    cr_assert_eq(res_open(&d, dir, err, sizeof err), -1);
    cr_assert(strstr(err, "run: holds mine/, which servesim did not write there"), "%s", err);
    cr_assert_eq(od_check(dir, err, sizeof err), -1, "the check before any work says the same");
    list_dir(dir, listing, sizeof listing);
    cr_assert_str_eq(listing, "mine requests.csv steps.csv summary.json ");
    cr_assert(exists(mine));
    /* a marker whose list is empty is not an older servesim's: what is there is the user's */
    char empty[128], mark[192], note[192];
    snprintf(empty, sizeof empty, "%s/empty", root);
    mkdir(empty, 0777);
    snprintf(mark, sizeof mark, "%s/" OD_MARKER, empty);
    put_file(mark, "servesim wrote this directory; the next servesim command told to write here replaces it\nfiles:\n");
    snprintf(note, sizeof note, "%s/note.txt", empty);
    fclose(fopen(note, "w"));
    cr_assert_eq(od_check(empty, err, sizeof err), -1);
    cr_assert(strstr(err, "holds note.txt"), "%s", err);
    /* an empty marker, or one of other text, is not servesim's: taken for an older servesim's,
     * the folder was replaced whole, the user's files in it too */
    const char *foreign[] = {"", "hello\n", "servesim wrote this directory\n"};
    for (int i = 0; i < 3; i++) {
        put_file(mark, foreign[i]);
        cr_assert_eq(od_check(empty, err, sizeof err), -1, "marker \"%s\"", foreign[i]);
        cr_assert(strstr(err, "is not one servesim wrote"), "%s", err);
        cr_assert(exists(note));
    }
    /* a marker of an older servesim lists nothing: its result is replaced as before */
    remove(mine);
    rmdir(sub);
    snprintf(mine, sizeof mine, "%s/" OD_MARKER, dir);
    put_file(mine, "servesim wrote this directory; the next servesim command told to write here replaces it\n");
    write_run(dir, NULL);
    list_dir(dir, listing, sizeof listing);
    cr_assert_str_eq(listing, "requests.csv steps.csv summary.json ");
}

/* A file whose name holds a newline read as two lines of the manifest, both listed: it was
 * taken for servesim's and deleted by the rerun */
Test(results, a_name_with_a_newline_is_never_servesim_s)
{
    char dir[128], odd[192], err[512];
    snprintf(dir, sizeof dir, "%s/run", root);
    write_run(dir, NULL);
    snprintf(odd, sizeof odd, "%s/steps.csv\nsummary.json", dir);
    put_file(odd, "mine\n");
    cr_assert_eq(od_check(dir, err, sizeof err), -1);
    cr_assert(strstr(err, "holds steps.csv, which servesim did not write there"), "%s", err);
    cr_assert(exists(odd));
}

/* A sweep's threads write their points' results at once: the manifest's walk kept its state in
 * one global, and 5 of 9 threaded sweeps crashed (SIGSEGV) or wrote another point's list */
static void *write_many(void *arg)
{
    const char *base = arg;
    for (int i = 0; i < 20; i++) {
        char dir[192], err[512];
        snprintf(dir, sizeof dir, "%s-%d", base, i);
        res_dir d;
        if (res_open(&d, dir, err, sizeof err) < 0) return "open";
        res_write_step(&d, &step1);
        summary s = sample_summary();
        if (res_write_summary(&d, &s, NULL, err, sizeof err) < 0 || res_commit(&d, err, sizeof err) < 0) return "commit";
    }
    return NULL;
}

Test(results, threads_write_results_at_once)
{
    enum { THREADS = 8 };
    pthread_t t[THREADS];
    char base[THREADS][128];
    for (int i = 0; i < THREADS; i++) {
        snprintf(base[i], sizeof base[i], "%s/t%d", root, i);
        cr_assert_eq(pthread_create(&t[i], NULL, write_many, base[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        void *why;
        pthread_join(t[i], &why);
        cr_assert_null(why, "thread %d: %s failed", i, (const char *)why);
    }
    char marker[256], text[4096];
    snprintf(marker, sizeof marker, "%s/t3-7/" OD_MARKER, root);
    FILE *f = fopen(marker, "r");
    cr_assert_not_null(f);
    text[fread(text, 1, sizeof text - 1, f)] = 0;
    fclose(f);
    cr_assert_str_eq(strstr(text, "files:\n"), "files:\nrequests.csv\nsteps.csv\nsummary.json\n");
}

/* DIR.tmp.<pid> of a process that is gone is removed only when servesim left it: a folder of
 * the user's with that name was removed, whole. */
Test(results, only_servesim_s_own_leftovers_are_cleaned_up)
{
    char dir[128], mine[192], ours[192], path[256];
    snprintf(dir, sizeof dir, "%s/run", root);
    /* no process has a pid past the kernel's largest (4194304) */
    snprintf(mine, sizeof mine, "%s/run.tmp.5000001", root);
    snprintf(ours, sizeof ours, "%s/run.tmp.5000002", root);
    cr_assert_eq(mkdir(mine, 0777), 0);
    cr_assert_eq(mkdir(ours, 0777), 0);
    snprintf(path, sizeof path, "%s/thesis.txt", mine);
    put_file(path, "important\n");
    snprintf(path, sizeof path, "%s/.servesim-writing", ours);
    put_file(path, "");
    write_run(dir, NULL);
    cr_assert(exists(mine), "the user's folder stays");
    snprintf(path, sizeof path, "%s/thesis.txt", mine);
    cr_assert(exists(path));
    cr_assert(!exists(ours), "servesim's leftover goes");
}

/* --out once deleted whatever was at its path: a directory of the user's, or a file. */
Test(results, what_servesim_did_not_write_is_refused_and_kept)
{
    char dir[128], mine[192], file[128], listing[512], err[512];
    snprintf(dir, sizeof dir, "%s/notes", root);
    mkdir(dir, 0777);
    snprintf(mine, sizeof mine, "%s/thesis.tex", dir);
    put_file(mine, "years of work\n");
    res_dir d;
    cr_assert_eq(res_open(&d, dir, err, sizeof err), -1);
    cr_assert(strstr(err, "files servesim did not write"), "%s", err);
    snprintf(file, sizeof file, "%s/a-file", root);
    fclose(fopen(file, "w"));
    cr_assert_eq(res_open(&d, file, err, sizeof err), -1);
    cr_assert(strstr(err, "is not a directory"), "%s", err);
    list_dir(dir, listing, sizeof listing);
    cr_assert_str_eq(listing, "thesis.tex ");
    list_dir(root, listing, sizeof listing);
    cr_assert_str_eq(listing, "a-file notes ", "nothing created beside them: %s", listing);
    /* an empty directory is fine */
    snprintf(dir, sizeof dir, "%s/empty", root);
    mkdir(dir, 0777);
    write_run(dir, NULL);
    /* a link to a result was refused as "not a directory", which it names */
    char link[128];
    snprintf(link, sizeof link, "%s/link", root);
    cr_assert_eq(symlink("empty", link), 0);
    cr_assert_eq(od_check(link, err, sizeof err), -1);
    cr_assert(strstr(err, "link: is a symbolic link; name the directory it points to"), "%s", err);
}

Test(results, abort_leaves_nothing)
{
    char dir[128], listing[512];
    snprintf(dir, sizeof dir, "%s/run", root);
    res_dir d;
    char err[512];
    cr_assert_eq(res_open(&d, dir, err, sizeof err), 0, "%s", err);
    res_write_step(&d, &step1);
    summary s = sample_summary();
    cr_assert_eq(res_write_summary(&d, &s, NULL, err, sizeof err), 0);
    res_abort(&d);
    list_dir(root, listing, sizeof listing);
    cr_assert_str_eq(listing, "", "left behind: %s", listing);
    res_abort(&d);   /* a second abort is harmless */
}

Test(results, errors_name_the_path)
{
    char file[128], dir[192];
    snprintf(file, sizeof file, "%s/plain_file", root);
    FILE *f = fopen(file, "w");
    fclose(f);
    snprintf(dir, sizeof dir, "%s/sub/run", file);
    res_dir d;
    char err[512] = "";
    cr_assert_eq(res_open(&d, dir, err, sizeof err), -1);
    char expected[256];
    snprintf(expected, sizeof expected, "%s/sub/run: Not a directory", file);
    cr_assert_str_eq(err, expected);
    res_abort(&d);
    cr_assert(exists(file), "an abort after a failed open removes nothing");
}

/* An --out where nothing can be made was found only after the whole run, naming its
 * temporary (exit 1; bad-input campaign): the check before any work says so, naming the folder */
Test(results, an_output_directory_nothing_can_be_made_in_is_refused_before_the_work)
{
    char err[512] = "";
    cr_assert_eq(od_check("/proc/servesim-test/run", err, sizeof err), -1);
    cr_assert(strstr(err, "/proc/servesim-test/run: cannot write in /proc: "), "%s", err);
    char dir[128], listing[512];
    snprintf(dir, sizeof dir, "%s/new/run", root);
    cr_assert_eq(od_check(dir, err, sizeof err), 0, "%s", err);
    list_dir(root, listing, sizeof listing);
    cr_assert_str_eq(listing, "", "the check leaves nothing behind: %s", listing);
}

/* A single file's check leaves nothing (roofline-fit --write made its folders before the fit,
 * and left them when it then failed; review): its writer makes them after the work */
Test(results, a_files_check_makes_nothing)
{
    char path[192], listing[512], err[512] = "";
    snprintf(path, sizeof path, "%s/new/sub/table.csv", root);
    cr_assert_eq(of_check(path, err, sizeof err), 0, "%s", err);
    list_dir(root, listing, sizeof listing);
    cr_assert_str_eq(listing, "", "%s", listing);
    cr_assert_eq(of_check("/proc/ss-nowhere/table.csv", err, sizeof err), -1);
    cr_assert(strstr(err, "/proc/ss-nowhere/table.csv: cannot write in /proc: "), "%s", err);
    outfile o;
    cr_assert_eq(od_make_parents(path, NULL, err, sizeof err), 0, "%s", err);
    FILE *f = of_open(&o, path, err, sizeof err);
    cr_assert_not_null(f, "%s", err);
    fputs("x\n", f);
    cr_assert_eq(of_commit(&o, err, sizeof err), 0, "%s", err);
    cr_assert(exists(path));
}

/* A file's name ending in '/', '.' or '..' passed the check, and calibrate --out and
 * roofline-fit --write ran their whole job, made the folders, then failed to rename onto a
 * directory (exit 1) and left them (bad-input campaign): refused by the check, nothing made. */
Test(results, a_files_check_refuses_a_directory_s_name)
{
    const char *tails[] = {"new/sub/", "new/sub/.", "new/sub/..", "new/."};
    char path[192], listing[512], err[512] = "";
    for (size_t i = 0; i < sizeof tails / sizeof *tails; i++) {
        snprintf(path, sizeof path, "%s/%s", root, tails[i]);
        cr_assert_eq(of_check(path, err, sizeof err), -1, "%s", path);
        cr_assert(strstr(err, path) && strstr(err, ": names a directory, not a file"), "%s", err);
    }
    list_dir(root, listing, sizeof listing);
    cr_assert_str_eq(listing, "", "%s", listing);
    snprintf(path, sizeof path, "%s/new/sub/.table.csv", root);
    cr_assert_eq(of_check(path, err, sizeof err), 0, "a dot file is a file: %s", err);
}

/* A name past NAME_MAX, or one that fits but not with the ".tmp.PID" (and ".old") servesim
 * writes beside it first, passed the checks: run --out ran, then failed making its temporary
 * (exit 1), and calibrate --out and roofline-fit --write failed only after the whole job,
 * each leaving the folders made above it (bad-input campaign). Refused before the work. */
Test(results, a_name_too_long_for_its_temporary_is_refused_before_the_work)
{
    char name[320], path[512], listing[512], err[1024] = "";
    memset(name, 'x', 300);
    name[300] = '\0';
    snprintf(path, sizeof path, "%s/new/%s/run", root, name);
    cr_assert_eq(od_check(path, err, sizeof err), -1, "a folder's name past 255 bytes");
    cr_assert(strstr(err, "\" in it is 300 bytes; a file system takes at most 255"), "%s", err);
    snprintf(path, sizeof path, "%s/new/%s.csv", root, name);
    cr_assert_eq(of_check(path, err, sizeof err), -1, "a file's name past 255 bytes");
    cr_assert(strstr(err, "\" in it is 304 bytes"), "%s", err);
    /* the largest names that fit: 255 less ".tmp." and ten digits, and ".old" for a directory */
    name[236] = '\0';
    snprintf(path, sizeof path, "%s/new/%s", root, name);
    cr_assert_eq(od_check(path, err, sizeof err), 0, "%s", err);
    strcat(path, "x");
    cr_assert_eq(od_check(path, err, sizeof err), -1);
    cr_assert(strstr(err, ": its last name is 237 bytes; with the \".tmp.PID\" (and \".tmp.PID.old\", when it replaces "
                          "a result) servesim writes beside it, a name may be at most 236"), "%s", err);
    name[236] = 'x', name[240] = '\0';
    snprintf(path, sizeof path, "%s/new/%s", root, name);
    cr_assert_eq(of_check(path, err, sizeof err), 0, "%s", err);
    strcat(path, "x");
    cr_assert_eq(of_check(path, err, sizeof err), -1);
    cr_assert(strstr(err, "a name may be at most 240"), "%s", err);
    list_dir(root, listing, sizeof listing);
    cr_assert_str_eq(listing, "", "%s", listing);
}

/* The folders made for a file whose write then fails are removed, and only those: what was
 * there before stays, and so does a folder something else was put in. */
Test(results, folders_made_for_a_failed_write_are_removed)
{
    char name[320], path[512], listing[512], err[1024] = "";
    memset(name, 'y', 300);
    name[300] = '\0';
    char keep[128];
    snprintf(keep, sizeof keep, "%s/keep", root);
    cr_assert_eq(mkdir(keep, 0777), 0);
    /* made keep/a and keep/a/b; the file's open then fails (its name is too long) */
    snprintf(path, sizeof path, "%s/a/b/%s.csv", keep, name);
    od_made made;
    cr_assert_eq(od_make_parents(path, &made, err, sizeof err), 0, "%s", err);
    cr_assert_eq(made.n, 2);
    cr_assert_eq(made.at[0], strlen(keep) + 2, "the first folder made is keep/a");
    outfile o;
    cr_assert_null(of_open(&o, path, err, sizeof err));
    od_unmake_parents(path, &made);
    cr_assert_eq(made.n, 0, "forgotten once removed");
    list_dir(keep, listing, sizeof listing);
    cr_assert_str_eq(listing, "", "keep/a and keep/a/b removed: %s", listing);
    cr_assert(exists(keep), "what was there before stays");
    /* a mkdir that fails partway removes what the call had made before it */
    snprintf(path, sizeof path, "%s/c/%s/d/table.csv", keep, name);
    cr_assert_eq(od_make_parents(path, &made, err, sizeof err), -1);
    cr_assert(strstr(err, "File name too long"), "%s", err);
    cr_assert_eq(made.n, 0);
    list_dir(keep, listing, sizeof listing);
    cr_assert_str_eq(listing, "", "keep/c removed: %s", listing);
    /* nothing made: nothing removed */
    snprintf(path, sizeof path, "%s/table.csv", keep);
    cr_assert_eq(od_make_parents(path, &made, err, sizeof err), 0, "%s", err);
    cr_assert_eq(made.n, 0);
    od_unmake_parents(path, &made);
    cr_assert(exists(keep));
    /* a ".." after a folder made: the empty folder it leads back to was there before and
     * stays (only the first folder's length was kept, and every deeper one went; review) */
    char empty[160];
    snprintf(empty, sizeof empty, "%s/empty", keep);
    cr_assert_eq(mkdir(empty, 0777), 0);
    snprintf(path, sizeof path, "%s/new/../empty/sub/%s.csv", keep, name);
    cr_assert_eq(od_make_parents(path, &made, err, sizeof err), 0, "%s", err);
    cr_assert_eq(made.n, 2, "keep/new and keep/new/../empty/sub");
    cr_assert_null(of_open(&o, path, err, sizeof err));
    od_unmake_parents(path, &made);
    list_dir(keep, listing, sizeof listing);
    cr_assert_str_eq(listing, "empty ", "keep/new gone, keep/empty kept: %s", listing);
    list_dir(empty, listing, sizeof listing);
    cr_assert_str_eq(listing, "", "keep/empty/sub gone: %s", listing);
    cr_assert_eq(rmdir(empty), 0);
    /* and when the mkdir after it fails */
    cr_assert_eq(mkdir(empty, 0777), 0);
    snprintf(path, sizeof path, "%s/new/../empty/%s/table.csv", keep, name);
    cr_assert_eq(od_make_parents(path, &made, err, sizeof err), -1);
    list_dir(keep, listing, sizeof listing);
    cr_assert_str_eq(listing, "empty ", "%s", listing);
    cr_assert_eq(rmdir(empty), 0);
    /* a folder made, then given a file by someone else, is not removed */
    snprintf(path, sizeof path, "%s/e/f/table.csv", keep);
    cr_assert_eq(od_make_parents(path, &made, err, sizeof err), 0, "%s", err);
    snprintf(name, sizeof name, "%s/e/theirs.txt", keep);
    put_file(name, "theirs\n");
    od_unmake_parents(path, &made);
    list_dir(keep, listing, sizeof listing);
    cr_assert_str_eq(listing, "e ", "%s", listing);
    cr_assert(exists(name));
}

/* A result that fails after od_open (its files could not be opened, or the work failed)
 * leaves neither its temporary nor the folders made above it (review: od_abort removed the
 * temporary alone) */
Test(results, an_aborted_result_removes_the_folders_made_for_it)
{
    char dir[192], listing[512], err[512] = "";
    snprintf(dir, sizeof dir, "%s/new/sub/run", root);
    res_dir d;
    cr_assert_eq(res_open(&d, dir, err, sizeof err), 0, "%s", err);
    list_dir(root, listing, sizeof listing);
    cr_assert_str_eq(listing, "new ", "%s", listing);
    res_abort(&d);
    list_dir(root, listing, sizeof listing);
    cr_assert_str_eq(listing, "", "%s", listing);
}

static int chown_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return lchown(path, 65534, 65534);
}

/* A result whose folder would not let its files go was replaced, then left beside the new one
 * as RUN.tmp.PID.old with an error (bad-input campaign): refused before the work. Run as
 * nobody (uid 65534) when the tests run as root, whom permissions do not stop. */
Test(results, a_result_whose_files_cannot_be_deleted_is_refused_before_the_work)
{
    char dir[128];
    snprintf(dir, sizeof dir, "%s/run", root);
    write_run(dir, NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        if (geteuid() == 0 && (nftw(root, chown_entry, 16, FTW_PHYS) != 0 || setgid(65534) != 0 || setuid(65534) != 0))
            _exit(3); /* a user namespace without nobody: nothing to test with */
        if (chmod(dir, 0555) != 0) _exit(4);
        char err[512] = "";
        int refused = od_check(dir, err, sizeof err) == -1 &&
                      strstr(err, "/run: a result servesim wrote, but ") && strstr(err, "does not let its files be deleted");
        chmod(dir, 0755);
        _exit(refused ? 0 : 5);
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    if (geteuid() == 0) chown(root, 0, 0); /* make_root's own again, for the teardown */
    if (WIFEXITED(status) && WEXITSTATUS(status) == 3) cr_skip_test("root cannot become nobody (uid 65534) here");
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exit %d", WEXITSTATUS(status));
}

Test(results, a_single_file_appears_whole_or_not_at_all)
{
    char path[128], listing[512], err[512] = "";
    snprintf(path, sizeof path, "%s/table.csv", root);
    FILE *old = fopen(path, "w");
    fputs("old\n", old);
    fclose(old);
    outfile o;
    FILE *f = of_open(&o, path, err, sizeof err);
    cr_assert_not_null(f, "%s", err);
    fputs("new\n", f);
    char *before = slurp(root, "table.csv");
    cr_assert_str_eq(before, "old\n", "the old file stays until the commit");
    free(before);
    cr_assert_eq(of_commit(&o, err, sizeof err), 0, "%s", err);
    char *after = slurp(root, "table.csv");
    cr_assert_str_eq(after, "new\n");
    free(after);
    list_dir(root, listing, sizeof listing);
    cr_assert_str_eq(listing, "table.csv ", "left behind: %s", listing);

    /* a folder that does not exist: the error names the temporary path, nothing is made */
    char missing[192];
    snprintf(missing, sizeof missing, "%s/no/such/table.csv", root);
    cr_assert_null(of_open(&o, missing, err, sizeof err));
    cr_assert(strstr(err, "/no/such/table.csv.tmp.") && strstr(err, "No such file or directory"), "%s", err);

    /* a commit that cannot rename (the target is a directory) removes the temporary file */
    char sub[160];
    snprintf(sub, sizeof sub, "%s/adir", root);
    cr_assert_eq(mkdir(sub, 0755), 0);
    cr_assert_not_null(of_open(&o, sub, err, sizeof err));
    cr_assert_eq(of_commit(&o, err, sizeof err), -1);
    cr_assert(strstr(err, "adir: Is a directory"), "%s", err);
    list_dir(root, listing, sizeof listing);
    cr_assert_str_eq(listing, "adir table.csv ", "left behind: %s", listing);

    /* abandoned: the old file stays, the temporary one goes */
    cr_assert_not_null(of_open(&o, path, err, sizeof err), "%s", err);
    fputs("abandoned\n", o.f);
    of_abort(&o);
    char *kept = slurp(root, "table.csv");
    cr_assert_str_eq(kept, "new\n");
    free(kept);
    list_dir(root, listing, sizeof listing);
    cr_assert_str_eq(listing, "adir table.csv ", "left behind: %s", listing);
}

Test(results, printed_table)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    summary s = sample_summary();
    res_print_summary(f, &s);
    fclose(f);
    const char *head = "============ Serving Benchmark Result ============\n"
                       "Successful requests:                     3\n";
    cr_assert(strncmp(text, head, strlen(head)) == 0, "%s", text);
    cr_assert_not_null(strstr(text, "Benchmark duration (s):                  2.00\n"));
    cr_assert_not_null(strstr(text, "---------------Time to First Token----------------\n"
                                    "Mean TTFT (ms):                          233.33\n"
                                    "Median TTFT (ms):                        200.00\n"
                                    "P90 TTFT (ms):                           360.00\n"
                                    "P99 TTFT (ms):                           396.00\n"));
    cr_assert_not_null(strstr(text, "-----Time per Output Token (excl. 1st token)------\n"));
    cr_assert_not_null(strstr(text, "Mean E2EL (ms):"));
    cr_assert_str_eq(text + len - 51, "==================================================\n");
    free(text);
}

/* S as a JSON string (json_text), checked to read back as a string. */
static char *json_of(const char *s)
{
    json_t *v = json_text(s);
    cr_assert_not_null(v);
    char *text = json_dumps(v, JSON_ENCODE_ANY);
    json_decref(v);
    json_error_t e;
    json_t *back = json_loads(text, JSON_DECODE_ANY, &e);
    cr_assert(json_is_string(back), "%s does not read back: %s", text, e.text);
    json_decref(back);
    return text;
}

/* A scenario path or label with a quote, a backslash, a control byte or a Latin-1 byte once
 * made summary.json invalid (exit 0). Every string is valid JSON now: UTF-8 stays as is, and
 * a byte that is not part of UTF-8 is read as Latin-1 (written as that character in UTF-8). */
Test(results, json_strings_are_valid_whatever_the_bytes)
{
    const char *cases[][2] = {
        {"a\"b\\c", "\"a\\\"b\\\\c\""},
        {"tab\there\x01", "\"tab\\there\\u0001\""},
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\""},
        {"caf\xe9", "\"caf\xc3\xa9\""},                    /* Latin-1 e-acute: not UTF-8 */
        {"\xc3", "\"\xc3\x83\""},                           /* a sequence cut short */
        {"\xc0\xaf", "\"\xc3\x80\xc2\xaf\""},                /* an overlong '/' */
        {"\xed\xa0\x80", "\"\xc3\xad\xc2\xa0\xc2\x80\""},     /* a surrogate */
        {"del\x7f", "\"del\x7f\""},                          /* DEL needs no escape in JSON */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = json_of(cases[i][0]);
        cr_assert_str_eq(got, cases[i][1], "case %zu", i);
        free(got);
    }
}

/* Each percentile asked for is a key of its own, spelled as vLLM spells them. */
Test(results, summary_json_names_the_percentiles_asked_for)
{
    summary s = {.num_percentiles = 2, .percentiles = {99.9, 25}};
    s.itl_ms.extra[0] = 49.82;
    s.ttft_ms.extra[1] = 7;
    json_t *o = res_summary_json(&s);
    cr_assert_not_null(o);
    cr_assert_float_eq(json_real_value(json_object_get(o, "p99.9_itl_ms")), 49.82, 1e-12);
    cr_assert_float_eq(json_number_value(json_object_get(o, "p25_ttft_ms")), 7, 1e-12);
    cr_assert_not_null(json_object_get(o, "p99_itl_ms"), "the fixed ones stay");
    json_decref(o);
    /* ten figures labelled 99.999999999 "p100" (bad-input campaign): as short as it reads back */
    summary fine = {.num_percentiles = 5, .percentiles = {99.999999999, 0.1 + 0.2, 50, 100, 3e-21}};
    o = res_summary_json(&fine);
    cr_assert_not_null(json_object_get(o, "p99.999999999_ttft_ms"));
    cr_assert_not_null(json_object_get(o, "p0.30000000000000004_ttft_ms"), "Python's repr of 0.1 + 0.2");
    cr_assert_not_null(json_object_get(o, "p50_ttft_ms"), "no exponent");
    cr_assert_not_null(json_object_get(o, "p100_ttft_ms"));
    cr_assert_not_null(json_object_get(o, "p2.9999999999999999e-21_ttft_ms"), "past twenty decimals, %%.17g");
    json_t *none = res_summary_json(&(summary){0});
    cr_assert_eq(json_object_size(o), json_object_size(none) + 4 * 4, "a key for each latency and new percentile "
                 "(p50 is one of the fixed ones)");
    json_decref(none);
    json_decref(o);
}

/* "." and ".." name no directory servesim can replace (the temporary went inside the target
 * and an empty one ended in a false refusal after the whole run), and the working directory
 * or one above it would leave the shell in a deleted folder (new-user trial). */
Test(results, dot_dotdot_and_the_working_directory_are_refused)
{
    char dir[128], dot[160], err[512], here[4096];
    snprintf(dir, sizeof dir, "%s/empty-target", root);
    mkdir(dir, 0777);
    cr_assert(getcwd(here, sizeof here));
    const char *dots[] = {".", "..", "./", "x/.", "x/../"};
    for (size_t i = 0; i < sizeof dots / sizeof *dots; i++) {
        cr_assert_eq(od_check(dots[i], err, sizeof err), -1, "%s", dots[i]);
        cr_assert(strstr(err, "not '.' or '..'"), "%s", err);
    }
    snprintf(dot, sizeof dot, "%s/.", dir);
    cr_assert_eq(od_check(dot, err, sizeof err), -1);
    cr_assert_eq(chdir(dir), 0);
    cr_assert_eq(od_check(dir, err, sizeof err), -1, "the working directory");
    cr_assert(strstr(err, "is the working directory or holds it"), "%s", err);
    cr_assert_eq(od_check(root, err, sizeof err), -1, "a folder above it");
    /* a sibling whose name the working directory's extends is neither (the prefix test
     * compares whole components) */
    char longer[160];
    snprintf(longer, sizeof longer, "%sx", dir);
    mkdir(longer, 0777);
    cr_assert_eq(chdir(longer), 0);
    cr_assert_eq(od_check(dir, err, sizeof err), 0, "%s", err);
    cr_assert_eq(chdir(here), 0);
    cr_assert_eq(od_check(dir, err, sizeof err), 0, "%s", err);
}

/* A result servesim wrote may be replaced, but not by a command reading a file inside it: a
 * run's requests.csv given back as the trace, or a measured run given to validate, with the
 * same --out, was deleted by the result replacing it (bad-input campaign). od_check_input
 * refuses the folder that is or holds the input, through '..' and symbolic links alike; a
 * sibling whose name merely starts the same passes. */
Test(results, an_output_directory_holding_an_input_is_refused)
{
    char dir[128], input[192], err[2048], sibling[128], link[192], dotted[256];
    snprintf(dir, sizeof dir, "%s/run", root);
    write_run(dir, NULL);
    snprintf(input, sizeof input, "%s/requests.csv", dir);
    cr_assert_eq(od_check(dir, err, sizeof err), 0, "servesim's own result: %s", err);
    cr_assert_eq(od_check_input(dir, input, "workload.trace", err, sizeof err), -1);
    char expected[2600];
    snprintf(expected, sizeof expected, "%s holds workload.trace %s, which this command reads: writing the result there "
             "would replace it; choose another output directory", dir, input);
    cr_assert_str_eq(err, expected);
    cr_assert_eq(od_check_input(dir, dir, "the --measured run", err, sizeof err), -1, "the folder itself");
    snprintf(dotted, sizeof dotted, "%s/../run/./steps.csv", dir);
    cr_assert_eq(od_check_input(dir, dotted, "x", err, sizeof err), -1, "through '..'");
    snprintf(link, sizeof link, "%s/link.csv", root);
    cr_assert_eq(symlink(input, link), 0);
    cr_assert_eq(od_check_input(dir, link, "x", err, sizeof err), -1, "through a link outside");
    snprintf(sibling, sizeof sibling, "%s/run2", root);
    write_run(sibling, NULL);
    snprintf(input, sizeof input, "%s/requests.csv", sibling);
    cr_assert_eq(od_check_input(dir, input, "x", err, sizeof err), 0, "run2 is not inside run");
    cr_assert_eq(od_check_input(dir, "", "x", err, sizeof err), 0, "no input");
    snprintf(input, sizeof input, "%s/absent/requests.csv", root);
    cr_assert_eq(od_check_input(dir, input, "x", err, sizeof err), 0, "its reader names a missing input");
    snprintf(dotted, sizeof dotted, "%s/new", root);
    cr_assert_eq(od_check_input(dotted, link, "x", err, sizeof err), 0, "a folder not there holds nothing");
    list_dir(dir, expected, sizeof expected);
    cr_assert_str_eq(expected, "requests.csv steps.csv summary.json ", "nothing removed");
}
