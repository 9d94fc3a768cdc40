/* Reports: every figure and direction word of a sentence comes from the numbers. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/html.h"
#include "io/report.h"
#include "study/study.h"
#include "file_fixture.h"

Test(report, change_picks_its_direction_from_the_sign)
{
    char buf[256];
    rpt_change(buf, sizeof buf, "P99 TPOT", 10, 8, "ms");
    cr_assert_str_eq(buf, "cut P99 TPOT by 20.0% (10.0 → 8.00 ms)");
    rpt_change(buf, sizeof buf, "P99 TPOT", 8, 10, "ms");
    cr_assert_str_eq(buf, "raised P99 TPOT by 25.0% (8.00 → 10.0 ms)");
    rpt_change(buf, sizeof buf, "TTFT", 100, 100.01, "ms");
    cr_assert_str_eq(buf, "left TTFT unchanged (100 ms)");
    rpt_change(buf, sizeof buf, "hits", 0, 5, "");
    cr_assert_str_eq(buf, "raised hits from 0 to 5.00");
    rpt_change(buf, sizeof buf, "free blocks", 1, 55782, ""); /* once "by 5578100.0%" */
    cr_assert_str_eq(buf, "raised free blocks 55782× (1.00 → 55782)");
    rpt_change(buf, sizeof buf, "hits", 2, 19.9, "");
    cr_assert_str_eq(buf, "raised hits by 895.0% (2.00 → 19.9)");
    rpt_ratio(buf, sizeof buf, 300, 100);
    cr_assert_str_eq(buf, "3.0×");
    rpt_ratio(buf, sizeof buf, 25, 100);
    cr_assert_str_eq(buf, "0.25×");
    rpt_ratio(buf, sizeof buf, 1234, 10);
    cr_assert_str_eq(buf, "123×");
    rpt_percent(buf, sizeof buf, 0.7345);
    cr_assert_str_eq(buf, "73.5%");
}

static char *labelled_versions_report(const char *static_point, double static_tput, double cont_tput,
                                      double static_ttft, double cont_ttft)
{
    scenario sc;
    char err[1024];
    scenario_defaults(&sc);
    sweep_plan p;
    sweep_plan_init(&p, &sc);
    cr_assert_eq(sweep_add_point(&p, static_point, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sweep_add_point(&p, "continuous:scheduler.policy=continuous", err, sizeof err), 0, "%s", err);
    system("rm -rf /tmp/ss-report && mkdir -p /tmp/ss-report/points/000 /tmp/ss-report/points/001");
    for (int i = 0; i < 2; i++) {
        char path[128];
        snprintf(path, sizeof path, "/tmp/ss-report/points/%03d/requests.csv", i);
        FILE *f = fopen(path, "w");
        fputs("request_id,arrival_time,scheduled_prefill_time,first_token_time,finish_time,prompt_len,"
              "cached_prompt_len,output_len,num_preemptions,stop_reason,warmup\n0,0,0,0.1,1,10,0,10,0,length,0\n",
              f);
        fclose(f);
    }
    sweep_result r[2] = {{.ran = true, .nruns = 1}, {.ran = true, .nruns = 1}};
    r[0].sum.output_throughput = static_tput;
    r[1].sum.output_throughput = cont_tput;
    r[0].sum.ttft_ms.mean = static_ttft;
    r[1].sum.ttft_ms.mean = cont_ttft;
    r[0].sum.tpot_ms.mean = r[1].sum.tpot_ms.mean = 5;
    r[0].sum.total_padding_tokens = 250, r[0].sum.total_prefill_tokens = 750;
    char *argv[] = {"sweep", "x.ini", "--report", "seven-versions"};
    cr_assert_eq(study_report("seven-versions", &p, r, "/tmp/ss-report", 4, argv, err, sizeof err), 0, "%s", err);
    sweep_plan_free(&p);
    FILE *f = fopen("/tmp/ss-report/report.md", "r");
    cr_assert(f);
    char *buf = calloc(1, 1 << 16);
    fread(buf, 1, (1 << 16) - 1, f);
    fclose(f);
    return buf;
}

static char *versions_report(double static_tput, double cont_tput, double static_ttft, double cont_ttft)
{
    return labelled_versions_report("static:scheduler.policy=static", static_tput, cont_tput, static_ttft, cont_ttft);
}

/* A '|' in a label the user gave is markdown's escape in report.md, so its table row keeps its
 * columns (it had split the label cell in two); the plots' titles keep the label as given. */
Test(report, a_bar_in_a_label_keeps_the_table_whole)
{
    char *md = labelled_versions_report("a|b:scheduler.policy=static", 1000, 3000, 800, 400);
    const char *row = strstr(md, "| 0 | a\\|b | 0 |");
    cr_assert(row, "%s", md);
    const char *header = strstr(md, "| point | label |");
    cr_assert(header, "%s", md);
    int cells_header = 0, cells_row = 0;
    for (const char *c = header; *c && *c != '\n'; c++) cells_header += *c == '|';
    for (const char *c = row; *c && *c != '\n'; c++) cells_row += *c == '|' && (c == row || c[-1] != '\\');
    cr_assert_eq(cells_row, cells_header, "%s", md);
    free(md);
}

Test(report, sentences_change_with_the_numbers)
{
    char *a = versions_report(1000, 3000, 800, 400);
    cr_assert(strstr(a, "servesim sweep x.ini --report seven-versions"), "the command heads the report");
    cr_assert(strstr(a, "Continuous batching served 3.0× the output throughput of static batching; it cut mean TTFT by "
                        "50.0% (800 → 400 ms)"),
              "%s", a);
    cr_assert(strstr(a, "Static batching computed 250 padding tokens, 25.0% of its prompt work."), "%s", a);
    char *b = versions_report(1000, 1500, 400, 800);
    cr_assert(strstr(b, "Continuous batching served 1.5× the output throughput of static batching; it raised mean TTFT "
                        "by 100.0% (400 → 800 ms)"),
              "%s", b);
    cr_assert_not(strstr(b, "cut mean TTFT"));
    free(a), free(b);
}

/* report.html from a hand-made report.md: its table rendered, the PNG inlined byte for byte
 * (the well-known 1x1 PNG, whose base64 is compared as text), an image that is not there left
 * a link, the scenario's text escaped; and in a headless browser the PNG renders 1x1, the
 * missing one 0x0, the table is there. */
Test(report, html_inlines_every_png_escapes_the_scenario_and_renders)
{
    const char *png64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";
    char cmd[512];
    cr_assert_eq(system("rm -rf /tmp/ss-html && mkdir -p /tmp/ss-html"), 0);
    snprintf(cmd, sizeof cmd, "echo %s | base64 -d > /tmp/ss-html/dot.png", png64);
    cr_assert_eq(system(cmd), 0);
    FILE *f = fopen("/tmp/ss-html/report.md", "w");
    fputs("# A report\n\n| a | b |\n|---|---:|\n| x | 1 |\n\n![a dot](dot.png)\n\n![gone](gone.png)\n", f);
    fclose(f);
    f = fopen("/tmp/ss-html/s.ini", "w");
    fputs("; <b>bold</b> & more\n[model]\npreset = tiny\n", f);
    fclose(f);
    char err[512];
    cr_assert_eq(html_write_report("/tmp/ss-html", "A <report>", "/tmp/ss-html/s.ini", err, sizeof err), 0, "%s", err);
    char *h = slurp("/tmp/ss-html", "report.html");
    cr_assert(strstr(h, "<title>A &lt;report&gt;</title>"), "%s", h);
    cr_assert_eq(count_of(h, "<table>"), 1);
    cr_assert(strstr(h, "<td align=\"right\">1</td>"), "%s", h);
    char want[256];
    snprintf(want, sizeof want, "<img src=\"data:image/png;base64,%s\" alt=\"a dot\"", png64);
    cr_assert(strstr(h, want), "%s", h);
    cr_assert(strstr(h, "<img src=\"gone.png\""), "%s", h);
    cr_assert(strstr(h, "; &lt;b&gt;bold&lt;/b&gt; &amp; more"), "%s", h);
    cr_assert_null(fopen("/tmp/ss-html/report.html.tmp", "r"), "no temporary left");
    char *dom = browser_dom("/tmp/ss-html", "report.html");
    if (dom) {
        cr_assert_eq(count_of(dom, "data-rendered=\"1x1\""), 1, "%s", dom);
        cr_assert_eq(count_of(dom, "data-rendered=\"0x0\""), 1, "%s", dom);
        cr_assert_eq(count_of(dom, "<table>"), 1);
        free(dom);
    } else {
        cr_log_warn("no headless Chromium: the page was not rendered");
    }
    free(h);
    cr_assert_eq(html_write_report("/tmp/ss-html/none", "x", NULL, err, sizeof err), -1);
    cr_assert(strstr(err, "/tmp/ss-html/none/report.md: cannot read"), "%s", err);
    system("rm -rf /tmp/ss-html");
}
