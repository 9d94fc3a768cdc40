/* Workloads: determinism, arrival processes, lengths, shared prefixes, trace replay. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "workload/trace.h"
#include "workload/workload.h"

#define CONV_TRACE SERVESIM_SOURCE_DIR "/traces/azure_llm_2023_conv.csv"

static wl_config base_config(void)
{
    wl_config c = {.num_requests = 200, .arrival = ARRIVAL_POISSON, .rate = 10,
                   .burstiness = 1, .vocab_size = 32000, .trace_time_scale = 1, .seed = 42};
    char err[256];
    cr_assert_eq(dist_parse("uniform:16:256", &c.prompt_len, err, sizeof err), 0);
    cr_assert_eq(dist_parse("lognormal:64:0.7:512", &c.output_len, err, sizeof err), 0);
    return c;
}

static workload build_ok(const wl_config *c)
{
    workload w;
    char err[512] = "";
    cr_assert_eq(wl_build(c, &w, err, sizeof err), 0, "wl_build failed: %s", err);
    return w;
}

static void build_fails(const wl_config *c, const char *expected)
{
    workload w = {0};
    char err[512] = "";
    cr_assert_eq(wl_build(c, &w, err, sizeof err), -1, "accepted, expected \"%s\"", expected);
    cr_assert(strstr(err, expected), "error \"%s\" lacks \"%s\"", err, expected);
    cr_assert_null(w.reqs);
}

static int same_requests(const workload *a, const workload *b)
{
    return a->n == b->n && a->prefix_seed == b->prefix_seed &&
           memcmp(a->reqs, b->reqs, a->n * sizeof *a->reqs) == 0;
}

Test(workload, arrival_names_round_trip)
{
    for (int a = ARRIVAL_ALL_AT_ONCE; a <= ARRIVAL_CLOSED; a++) {
        wl_arrival back;
        cr_assert_eq(wl_arrival_parse(wl_arrival_name((wl_arrival)a), &back), 0);
        cr_assert_eq(back, a);
    }
    wl_arrival x;
    cr_assert_eq(wl_arrival_parse("bursty", &x), -1);
    cr_assert_str_eq(wl_arrival_name(ARRIVAL_POISSON), "poisson");
}

Test(workload, same_seed_same_list_other_seed_differs)
{
    wl_config c = base_config();
    c.warmup_requests = 5;
    workload a = build_ok(&c), b = build_ok(&c);
    cr_assert(same_requests(&a, &b));
    c.seed = 43;
    workload d = build_ok(&c);
    cr_assert_not(same_requests(&a, &d));
    cr_assert_eq(a.n, 205);
    for (size_t i = 0; i < a.n; i++) {
        cr_assert_eq(a.reqs[i].id, (int64_t)i);
        cr_assert_eq(a.reqs[i].warmup, i < 5);
        cr_assert(a.reqs[i].prompt_len >= 16 && a.reqs[i].prompt_len <= 256);
        cr_assert(a.reqs[i].output_len >= 1 && a.reqs[i].output_len <= 512);
        cr_assert_eq(a.reqs[i].prefix_id, -1);
    }
    cr_assert_eq(a.reqs[0].arrival_time, 0.0, "the first request is sent at time 0");
    wl_free(&a);
    wl_free(&b);
    wl_free(&d);
}

/* wl_open keeps no list: its iterator must hand out exactly what wl_build lists, under every
 * generated arrival pattern, with warm-ups and shared prefixes, however far it is read. */
Test(workload, a_generated_workload_iterates_to_the_built_list)
{
    const wl_arrival kinds[] = {ARRIVAL_ALL_AT_ONCE, ARRIVAL_POISSON, ARRIVAL_GAMMA, ARRIVAL_CONSTANT,
                                ARRIVAL_CLOSED};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        wl_config c = base_config();
        c.arrival = kinds[k];
        c.burstiness = 0.5;
        c.concurrency = 4;
        c.warmup_requests = 7;
        c.shared_prefix_len = 100;
        c.num_prefixes = 3;
        c.prefix_fraction = 0.5;
        workload list = build_ok(&c), gen;
        char err[256];
        cr_assert_eq(wl_open(&c, &gen, err, sizeof err), 0, "%s", err);
        cr_assert_null(gen.reqs, "a generated workload holds no list");
        cr_assert_eq(gen.n, list.n);
        cr_assert_eq(gen.prefix_seed, list.prefix_seed);
        wl_iter *it = wl_iter_open(&gen);
        cr_assert_not_null(it);
        wl_request r;
        size_t i = 0;
        while (wl_iter_next(it, &r)) {
            cr_assert_lt(i, list.n);
            const wl_request *e = &list.reqs[i];
            cr_assert(r.id == e->id && r.arrival_time == e->arrival_time && r.prompt_len == e->prompt_len &&
                          r.output_len == e->output_len && r.prefix_id == e->prefix_id &&
                          r.prefix_len == e->prefix_len && r.token_seed == e->token_seed && r.warmup == e->warmup,
                      "%s: request %zu differs", wl_arrival_name(kinds[k]), i);
            i++;
        }
        cr_assert_eq(i, list.n, "%s: %zu of %zu requests", wl_arrival_name(kinds[k]), i, list.n);
        cr_assert_eq(wl_iter_next(it, &r), 0, "the iterator stays at its end");
        wl_iter_close(it);
        wl_free(&gen);
        wl_free(&list);
    }
}

Test(workload, streams_are_independent)
{
    wl_config c = base_config();
    workload a = build_ok(&c);
    c.prefix_fraction = 0.5;
    c.num_prefixes = 3;
    c.shared_prefix_len = 100;
    c.output_len.kind = DIST_FIXED;
    c.output_len.a = 9;
    workload b = build_ok(&c);
    for (size_t i = 0; i < a.n; i++) {
        cr_assert_eq(a.reqs[i].arrival_time, b.reqs[i].arrival_time);
        cr_assert_eq(a.reqs[i].prompt_len + b.reqs[i].prefix_len, b.reqs[i].prompt_len,
                     "own prompt lengths stay; the prefix comes on top");
        cr_assert_eq(b.reqs[i].output_len, 9);
    }
    wl_free(&a);
    wl_free(&b);
}

static double mean_gap(const workload *w)
{
    return w->reqs[w->n - 1].arrival_time / (double)(w->n - 1);
}

/* Squared coefficient of variation of the gaps: 1 for exponential, 1/shape for gamma. */
static double gap_cv2(const workload *w)
{
    double m = mean_gap(w), sq = 0;
    for (size_t i = 1; i < w->n; i++) {
        double g = w->reqs[i].arrival_time - w->reqs[i - 1].arrival_time;
        cr_assert(g >= 0);
        sq += (g - m) * (g - m);
    }
    return sq / (double)(w->n - 1) / (m * m);
}

Test(workload, poisson_and_gamma_gaps)
{
    wl_config c = base_config();
    c.num_requests = 20000;
    c.rate = 4;
    workload p = build_ok(&c);
    cr_assert_float_eq(mean_gap(&p), 0.25, 0.25 * 0.03);
    cr_assert_float_eq(gap_cv2(&p), 1.0, 0.08);
    c.arrival = ARRIVAL_GAMMA;
    c.burstiness = 0.25;   /* bursty: CV^2 = 4 */
    workload g = build_ok(&c);
    cr_assert_float_eq(mean_gap(&g), 0.25, 0.25 * 0.05);
    cr_assert_float_eq(gap_cv2(&g), 4.0, 0.5);
    c.burstiness = 4;      /* smoother than poisson: CV^2 = 0.25 */
    workload s = build_ok(&c);
    cr_assert_float_eq(mean_gap(&s), 0.25, 0.25 * 0.03);
    cr_assert_float_eq(gap_cv2(&s), 0.25, 0.03);
    wl_free(&p);
    wl_free(&g);
    wl_free(&s);
}

Test(workload, constant_all_at_once_and_closed)
{
    wl_config c = base_config();
    c.arrival = ARRIVAL_CONSTANT;
    c.rate = 8;
    workload w = build_ok(&c);
    for (size_t i = 0; i < w.n; i++)
        cr_assert_float_eq(w.reqs[i].arrival_time, i / 8.0, 1e-12);
    wl_free(&w);
    c.arrival = ARRIVAL_ALL_AT_ONCE;
    w = build_ok(&c);
    for (size_t i = 0; i < w.n; i++)
        cr_assert_eq(w.reqs[i].arrival_time, 0.0);
    wl_free(&w);
    c.arrival = ARRIVAL_CLOSED;
    c.concurrency = 4;
    w = build_ok(&c);
    cr_assert_eq(w.reqs[w.n - 1].arrival_time, 0.0);
    wl_free(&w);
}

Test(workload, bad_configs_are_rejected)
{
    wl_config c = base_config();
    c.rate = 0;
    build_fails(&c, "rate must be");
    c = base_config();
    c.arrival = ARRIVAL_GAMMA;
    c.burstiness = 0;
    build_fails(&c, "burstiness");
    c = base_config();
    c.arrival = ARRIVAL_CLOSED;
    build_fails(&c, "concurrency");
    c = base_config();
    c.num_requests = 0;
    build_fails(&c, "num_requests");
    c = base_config();
    c.prefix_fraction = 0.5;
    c.shared_prefix_len = 10;
    build_fails(&c, "num_prefixes");
    c = base_config();
    c.vocab_size = 0;
    build_fails(&c, "vocab_size");
}

Test(workload, shared_prefixes)
{
    wl_config c = base_config();
    c.num_requests = 400;
    c.shared_prefix_len = 128;
    c.num_prefixes = 4;
    c.prefix_fraction = 0.5;
    c.vocab_size = 1000;
    workload w = build_ok(&c);
    int with = 0, per_id[4] = {0};
    const wl_request *first[4] = {NULL};
    int32_t a[128 + 256], b[128 + 256];
    for (size_t i = 0; i < w.n; i++) {
        const wl_request *r = &w.reqs[i];
        if (r->prefix_id < 0) {
            cr_assert_eq(r->prefix_len, 0);
            continue;
        }
        with++;
        cr_assert(r->prefix_id < 4);
        cr_assert_eq(r->prefix_len, 128);
        per_id[r->prefix_id]++;
        if (!first[r->prefix_id]) {
            first[r->prefix_id] = r;
            continue;
        }
        const wl_request *f = first[r->prefix_id];
        wl_fill_prompt(&w, f, a);
        wl_fill_prompt(&w, r, b);
        cr_assert(memcmp(a, b, 128 * sizeof *a) == 0, "same prefix id, same prefix tokens");
        int min_len = f->prompt_len < r->prompt_len ? f->prompt_len : r->prompt_len;
        cr_assert(memcmp(a + 128, b + 128, (size_t)(min_len - 128) * sizeof *a) != 0,
                  "suffixes differ");
    }
    /* 400 draws at p = 0.5: sd 10. */
    cr_assert(with > 170 && with < 230, "%d requests with a prefix", with);
    for (int p = 0; p < 4; p++)
        cr_assert(per_id[p] > 20, "prefix %d used %d times", p, per_id[p]);
    wl_fill_prompt(&w, first[0], a);
    wl_fill_prompt(&w, first[1], b);
    cr_assert(memcmp(a, b, 128 * sizeof *a) != 0, "different prefix ids, different prefixes");
    for (size_t i = 0; i < w.n; i++) {
        int32_t buf[128 + 256];
        wl_fill_prompt(&w, &w.reqs[i], buf);
        for (int k = 0; k < w.reqs[i].prompt_len; k++)
            cr_assert(buf[k] >= 0 && buf[k] < 1000);
    }
    wl_free(&w);
}

Test(workload, token_ids_spread_over_the_vocabulary)
{
    wl_config c = base_config();
    c.vocab_size = 10;
    workload w = build_ok(&c);
    int counts[10] = {0}, total = 0;
    int32_t buf[256];
    for (size_t i = 0; i < w.n; i++) {
        wl_fill_prompt(&w, &w.reqs[i], buf);
        for (int k = 0; k < w.reqs[i].prompt_len; k++, total++)
            counts[buf[k]]++;
    }
    for (int t = 0; t < 10; t++)
        cr_assert_float_eq((double)counts[t] / total, 0.1, 0.01, "token %d", t);
    wl_free(&w);
}

static wl_config trace_config(const char *path, int num)
{
    wl_config c = base_config();
    c.arrival = ARRIVAL_TRACE;
    c.trace_path = path;
    c.num_requests = num;
    return c;
}

/* Row i of the conversation trace, straight from the file. */
static void conv_row(int index, char *stamp, int *prompt, int *output)
{
    FILE *f = fopen(CONV_TRACE, "r");
    cr_assert_not_null(f);
    char line[256];
    for (int i = 0; i <= index + 1; i++)
        cr_assert_not_null(fgets(line, sizeof line, f));
    fclose(f);
    cr_assert_eq(sscanf(line, "%27[^,],%d,%d", stamp, prompt, output), 3);
}

Test(workload, replays_the_azure_conversation_trace)
{
    wl_config c = trace_config(CONV_TRACE, 0);
    workload w = build_ok(&c);
    cr_assert_eq(w.n, 19366, "every row of the trace");
    cr_assert_eq(w.reqs[0].arrival_time, 0.0);
    char stamp[32];
    int prompt, output;
    conv_row(0, stamp, &prompt, &output);
    cr_assert_str_eq(stamp, "2023-11-16 18:15:46.6805900");
    cr_assert(w.reqs[0].prompt_len == prompt && w.reqs[0].output_len == output);
    /* Row 1: 18:15:50.9951690 -> 4.3145790 s after row 0. */
    conv_row(1, stamp, &prompt, &output);
    cr_assert_float_eq(w.reqs[1].arrival_time, 4.314579, 1e-9);
    cr_assert(w.reqs[1].prompt_len == prompt && w.reqs[1].output_len == output);
    /* Last row: 19:14:08.4025270 -> 58 min 21.7219370 s = 3501.721937 s. */
    conv_row(19365, stamp, &prompt, &output);
    cr_assert_float_eq(w.reqs[19365].arrival_time, 3501.721937, 1e-9);
    cr_assert_eq(w.reqs[19365].prompt_len, 197);
    cr_assert_eq(w.reqs[19365].output_len, 183);
    FILE *f = fopen(CONV_TRACE, "r");
    char line[256];
    cr_assert_not_null(fgets(line, sizeof line, f));
    for (size_t i = 0; i < w.n; i++) {
        cr_assert_not_null(fgets(line, sizeof line, f));
        cr_assert_eq(sscanf(line, "%27[^,],%d,%d", stamp, &prompt, &output), 3);
        cr_assert(w.reqs[i].prompt_len == prompt && w.reqs[i].output_len == output,
                  "row %zu: %d,%d in the file, %d,%d replayed", i, prompt, output,
                  w.reqs[i].prompt_len, w.reqs[i].output_len);
        cr_assert(i == 0 || w.reqs[i].arrival_time >= w.reqs[i - 1].arrival_time);
    }
    fclose(f);
    wl_free(&w);
}

Test(workload, trace_cut_scaled_and_warmed_up)
{
    wl_config c = trace_config(CONV_TRACE, 100);
    c.warmup_requests = 10;
    c.trace_time_scale = 0.5;
    workload w = build_ok(&c);
    cr_assert_eq(w.n, 110);
    cr_assert(w.reqs[9].warmup && !w.reqs[10].warmup);
    cr_assert_float_eq(w.reqs[1].arrival_time, 4.314579 * 0.5, 1e-9);
    wl_free(&w);
}

/* Writes TEXT to a fresh temporary file; PATH receives its name. */
static void temp_trace(char *path, const char *text)
{
    strcpy(path, "/tmp/servesim_trace_XXXXXX");
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

static void trace_fails(const char *text, int line, const char *reason)
{
    char path[64], expected[128];
    temp_trace(path, text);
    wl_config c = trace_config(path, 0);
    int n = snprintf(expected, sizeof expected, "%s:%d: %s", path, line, reason);
    /* cut, it would check less than it says */
    cr_assert(n > 0 && (size_t)n < sizeof expected, "the expected message was cut: %s", expected);
    build_fails(&c, expected);
    unlink(path);
}

Test(workload, plain_trace_format)
{
    char path[64];
    temp_trace(path, "arrival_time,prompt_len,output_len\r\n10.5,100,20\r\n11.0,50,1\n\n"
                     "13.25,7,300\n");
    wl_config c = trace_config(path, 0);
    c.trace_time_scale = 2;
    workload w = build_ok(&c);
    unlink(path);
    cr_assert_eq(w.n, 3, "blank lines are skipped");
    cr_assert_eq(w.reqs[0].arrival_time, 0.0);
    cr_assert_float_eq(w.reqs[1].arrival_time, 1.0, 1e-12);
    cr_assert_float_eq(w.reqs[2].arrival_time, 5.5, 1e-12);
    cr_assert(w.reqs[2].prompt_len == 7 && w.reqs[2].output_len == 300);
    cr_assert(!w.reqs[0].has_acceptance_rate, "no acceptance_rate column, no rate");
    wl_free(&w);
    /* a measured run's requests.csv with its own acceptance per request */
    temp_trace(path, "arrival_time,prompt_len,output_len,acceptance_rate\n0,10,5,0.75\n1,10,5,1\n2,10,5,0\n");
    c = trace_config(path, 0);
    w = build_ok(&c);
    unlink(path);
    cr_assert(w.reqs[0].has_acceptance_rate && w.reqs[2].has_acceptance_rate);
    cr_assert_eq(w.reqs[0].acceptance_rate, 0.75);
    cr_assert_eq(w.reqs[1].acceptance_rate, 1.0);
    cr_assert_eq(w.reqs[2].acceptance_rate, 0.0);
    wl_free(&w);
}

/* Traces from elsewhere: a spreadsheet's byte-order mark, quoted fields, the columns in
 * another order among others (a model name with a comma in it, quoted). */
Test(workload, trace_columns_are_found_by_name_among_others)
{
    char path[64];
    temp_trace(path, "\xEF\xBB\xBFmodel,output_len,arrival_time,prompt_len\r\n"
                     "\"llama, 8b\",20,\"10.5\",100\r\n\"say \"\"hi\"\"\",1,11.0,50\r\n");
    wl_config c = trace_config(path, 0);
    workload w = build_ok(&c);
    unlink(path);
    cr_assert_eq(w.n, 2);
    cr_assert(w.reqs[0].prompt_len == 100 && w.reqs[0].output_len == 20);
    cr_assert(w.reqs[1].prompt_len == 50 && w.reqs[1].output_len == 1);
    cr_assert_float_eq(w.reqs[1].arrival_time, 0.5, 1e-12);
    wl_free(&w);
}

Test(workload, trace_longer_than_a_day_boundary)
{
    char path[64];
    temp_trace(path, "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                     "2023-12-31 23:59:59.9,10,5\n2024-01-01 00:00:00.15,10,5\n"
                     "2024-02-29 00:00:00.15,10,5\n2024-03-01 00:00:00.15,10,5\n");
    wl_config c = trace_config(path, 0);
    workload w = build_ok(&c);
    unlink(path);
    cr_assert_float_eq(w.reqs[1].arrival_time, 0.25, 1e-12);
    /* a leap year's 29 February is a day (59 days after New Year), and the next is 1 March */
    cr_assert_float_eq(w.reqs[2].arrival_time, 0.25 + 59 * 86400.0, 1e-6);
    cr_assert_float_eq(w.reqs[3].arrival_time, 0.25 + 60 * 86400.0, 1e-6);
    wl_free(&w);
}

/* A run's requests.csv lists its requests as they finished; replayed as a trace it stopped at
 * its first row out of order, "time goes backwards" (a new user's trial; the README offers
 * it). Rows in any order are taken in time order, ties in file order, times from the
 * earliest, each keeping its line; a cut takes the earliest rows, not the first. */
Test(workload, a_trace_out_of_order_is_taken_in_time_order)
{
    char path[64];
    temp_trace(path, "request_id,arrival_time,prompt_len,output_len,stop_reason\n2,10.5,30,3,length\n"
                     "0,10.0,10,1,length\n3,12.0,40,4,length\n1,10.25,20,2,length\n4,10.5,50,5,length\n");
    wl_config c = trace_config(path, 0);
    workload w = build_ok(&c);
    cr_assert_eq(w.n, 5);
    const double at[] = {0, 0.25, 0.5, 0.5, 2};
    const int prompt[] = {10, 20, 30, 50, 40};
    for (size_t i = 0; i < w.n; i++) {
        cr_assert_float_eq(w.reqs[i].arrival_time, at[i], 1e-12, "request %zu", i);
        cr_assert_eq(w.reqs[i].prompt_len, prompt[i], "request %zu: ties keep the file's order", i);
    }
    wl_free(&w);
    c = trace_config(path, 2);
    w = build_ok(&c);
    cr_assert(w.n == 2 && w.reqs[0].prompt_len == 10 && w.reqs[1].prompt_len == 20, "the two earliest rows");
    wl_free(&w);
    /* the earliest, not the first rows read: in time order up to a cut, then an earlier row
     * (a review's find: reading stopped at the cut) */
    unlink(path);
    temp_trace(path, "arrival_time,prompt_len,output_len\n0,10,1\n1,20,1\n2,30,1\n0.5,40,1\n");
    c = trace_config(path, 3);
    w = build_ok(&c);
    cr_assert(w.n == 3 && w.reqs[1].prompt_len == 40 && w.reqs[2].prompt_len == 20, "0, 0.5 and 1");
    wl_free(&w);
    unlink(path);
    temp_trace(path, "request_id,arrival_time,prompt_len,output_len,stop_reason\n2,10.5,30,3,length\n"
                     "0,10.0,10,1,length\n3,12.0,40,4,length\n1,10.25,20,2,length\n4,10.5,50,5,length\n");
    trace_row *rows;
    size_t n;
    char err[256];
    cr_assert_eq(trace_read(path, 3, &rows, &n, NULL, err, sizeof err), 0, "%s", err);
    cr_assert(n == 3 && rows[0].line == 3 && rows[1].line == 5 && rows[2].line == 2, "each keeps its line");
    free(rows);
    unlink(path);
    /* Azure timestamps: exact from the earliest */
    temp_trace(path, "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,1,1\n2023-11-16 18:15:45.9,2,1\n");
    c = trace_config(path, 0);
    w = build_ok(&c);
    cr_assert(w.n == 2 && w.reqs[0].prompt_len == 2 && w.reqs[0].arrival_time == 0);
    cr_assert_float_eq(w.reqs[1].arrival_time, 0.1, 1e-12);
    wl_free(&w);
    unlink(path);
}

/* A run's requests.csv with a rejected request stopped at it, 'bad output_len "0"', and its
 * warm-ups were replayed as measured requests (a new user's trial): rows whose stop_reason is
 * not length are left out and counted, warm-ups stay warm-ups. */
Test(workload, a_runs_requests_replay_as_they_ran)
{
    char path[64];
    temp_trace(path, "request_id,arrival_time,prompt_len,output_len,stop_reason,warmup\n"
                     "0,0.0,10,3,length,1\n2,0.5,5000,0,too_long,0\n1,0.25,20,4,length,0\n3,0.75,30,0,error,0\n"
                     "4,1.0,40,6,length,0\n");
    trace_row *rows;
    size_t n, unfinished = 99;
    char err[256];
    cr_assert_eq(trace_read(path, 0, &rows, &n, &unfinished, err, sizeof err), 0, "%s", err);
    cr_assert(n == 3 && unfinished == 2, "%zu rows, %zu left out", n, unfinished);
    cr_assert(rows[0].warmup && !rows[1].warmup && !rows[2].warmup);
    cr_assert(rows[1].prompt_len == 20 && rows[2].prompt_len == 40 && rows[2].line == 6);
    free(rows);
    wl_config c = trace_config(path, 0);
    workload w = build_ok(&c);
    cr_assert(w.n == 3 && w.reqs[0].warmup && !w.reqs[1].warmup && !w.reqs[2].warmup);
    wl_free(&w);
    c.warmup_requests = 2;
    w = build_ok(&c);
    cr_assert(w.reqs[0].warmup && w.reqs[1].warmup && !w.reqs[2].warmup, "run.warmup_requests adds its first rows");
    wl_free(&w);
    c.warmup_requests = 3;
    build_fails(&c, "the trace has 3 requests, and run.warmup_requests = 3 leaves none to measure");
    unlink(path);
    temp_trace(path, "arrival_time,prompt_len,output_len,warmup\n0,10,3,1\n1,10,3,1\n");
    c = trace_config(path, 0);
    build_fails(&c, "every one of the trace's 2 requests is a warm-up (its warmup column, and run.warmup_requests = 0)");
    unlink(path);
    temp_trace(path, "arrival_time,prompt_len,output_len,warmup\n0,10,3,yes\n");
    c = trace_config(path, 0);
    build_fails(&c, ":2: bad warmup \"yes\" (expected 0 or 1)");
    unlink(path);
}

Test(workload, malformed_traces_name_the_line)
{
    const char *az = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
    char text[512];
    snprintf(text, sizeof text, "%s2023-11-16 18:15:46.68,374,44\n2023-11-16 18:15:47,0,9\n", az);
    trace_fails(text, 3, "bad ContextTokens \"0\"");
    snprintf(text, sizeof text, "%s2023-11-16 18:15:46.68,374,44\n2023-11-16 18:15:47,3,x\n", az);
    trace_fails(text, 3, "bad GeneratedTokens \"x\"");
    snprintf(text, sizeof text, "%s2023-11-16 18:15:46.68,374,44\n\n2023-11-16 18:15:47,3\n", az);
    trace_fails(text, 4, "expected 3 fields as in the header, got 2");
    snprintf(text, sizeof text, "%s2023-11-16 18:15:46.123456789,1,1\n", az);
    trace_fails(text, 2, "bad TIMESTAMP");
    snprintf(text, sizeof text, "%s2023-11-16T18:15:46,1,1\n", az);
    trace_fails(text, 2, "bad TIMESTAMP");
    /* days past their month's end were taken as the next month's (bad-input campaign) */
    snprintf(text, sizeof text, "%s2023-02-29 00:00:00,1,1\n", az);
    trace_fails(text, 2, "bad TIMESTAMP \"2023-02-29 00:00:00\"");
    snprintf(text, sizeof text, "%s2023-11-16 18:15:46,1,1\n2023-11-31 00:00:00,1,1\n", az);
    trace_fails(text, 3, "bad TIMESTAMP");
    trace_fails("arrival_time,prompt_len,output_len\n0,1,1\nsoon,1,1\n", 3,
                "bad arrival_time \"soon\"");
    trace_fails("arrival_time,prompt_len,output_len\n0,1,1,4\n", 2,
                "expected 3 fields as in the header, got 4");
    trace_fails("time,in,out\n0,1,1\n", 1, "unknown trace header (expected the columns TIMESTAMP,");
    trace_fails("arrival_time,prompt_len,output_len\n\"0,1,1\n", 2, "field 1: a quote is opened and never closed");
    trace_fails("", 1, "empty trace");
    trace_fails("arrival_time,prompt_len,output_len,acceptance_rate\n0,1,1,0.5\n1,1,1,1.5\n", 3,
                "bad acceptance_rate \"1.5\" (expected a number in [0, 1])");
    trace_fails("arrival_time,prompt_len,output_len,acceptance_rate\n0,1,1,\n", 2, "bad acceptance_rate \"\"");
}

/* A column named twice was read from its first, and a header with both formats' columns
 * replayed as Azure's, each without a word (bad-input campaign): refused, naming the column. */
Test(workload, ambiguous_trace_headers_are_refused)
{
    trace_fails("arrival_time,prompt_len,output_len,prompt_len\n0,10,5,700\n", 1,
                "column prompt_len is named twice (columns 2 and 4)");
    trace_fails("TIMESTAMP,ContextTokens,GeneratedTokens,TIMESTAMP\n2023-11-16 18:15:46,1,1,2023-11-16 18:15:47\n", 1,
                "column TIMESTAMP is named twice (columns 1 and 4)");
    trace_fails("arrival_time,prompt_len,output_len,acceptance_rate,acceptance_rate\n0,1,1,0.5,1\n", 1,
                "column acceptance_rate is named twice (columns 4 and 5)");
    trace_fails("TIMESTAMP,ContextTokens,GeneratedTokens,arrival_time,prompt_len,output_len\n"
                "2023-11-16 18:15:46,1,1,0,700,5\n", 1,
                "the header names both TIMESTAMP,ContextTokens,GeneratedTokens and arrival_time,");
    /* a column the format does not read may still be there twice, and another format's column */
    char path[64];
    temp_trace(path, "model,arrival_time,prompt_len,output_len,model,TIMESTAMP\na,0,10,5,b,x\n");
    wl_config c = trace_config(path, 0);
    workload w = build_ok(&c);
    unlink(path);
    cr_assert(w.n == 1 && w.reqs[0].prompt_len == 10);
    wl_free(&w);
}

Test(workload, header_only_trace_and_unreadable_file)
{
    char path[64];
    temp_trace(path, "arrival_time,prompt_len,output_len\n");
    wl_config c = trace_config(path, 0);
    char expected[128];
    snprintf(expected, sizeof expected, "%s: the trace has no requests", path);
    build_fails(&c, expected);
    unlink(path);
    c.trace_path = "/nonexistent/servesim/trace.csv";
    build_fails(&c, "/nonexistent/servesim/trace.csv: cannot open: No such file or directory");
}

/* Times past any meaning and a warm-up that leaves nothing to measure are refused (#14,
 * defect 6): 1e308 s x 10 ended in "internal error", and a warm-up of every row ran with
 * exit 0 and an empty result. */
Test(workload, a_trace_past_the_clock_or_all_warm_up_is_refused)
{
    const char *path = "/tmp/servesim-test-overflow.csv";
    FILE *f = fopen(path, "w");
    fputs("arrival_time,prompt_len,output_len\n0,10,5\n1e308,10,5\n", f);
    fclose(f);
    wl_config c = base_config();
    c.arrival = ARRIVAL_TRACE;
    c.trace_path = path;
    c.num_requests = 0;
    c.trace_time_scale = 10;
    build_fails(&c, "the last arrival is at inf s, past 1e+09 s");
    f = fopen(path, "w");
    fputs("arrival_time,prompt_len,output_len\n0,10,5\n1,10,5\n", f);
    fclose(f);
    c.trace_time_scale = 1;
    c.warmup_requests = 2;
    build_fails(&c, "has 2 requests, and run.warmup_requests = 2 leaves none to measure");
    c.warmup_requests = 1;
    workload w = build_ok(&c);
    cr_assert_eq(w.n, 2);
    wl_free(&w);
    unlink(path);
}
