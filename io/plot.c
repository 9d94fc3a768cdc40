#include "io/plot.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char log_name[] = ".gnuplot.log";

/* Runs `gnuplot` in DIR (NULL: here) with SCRIPT on its standard input and its output to LOG
 * (NULL: discarded). Returns the exit status, or -1 when it could not be started. */
static int run_gnuplot(const char *dir, const char *script, size_t len, const char *log)
{
    int fds[2];
    if (pipe(fds) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        close(fds[1]);
        if (dir && chdir(dir) != 0) _exit(127);
        int out = open(log ? log : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0666);
        if (out < 0 || dup2(fds[0], 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0) _exit(127);
        execlp("gnuplot", "gnuplot", (char *)NULL);
        _exit(127);
    }
    close(fds[0]);
    /* a gnuplot that exits early must not kill us with SIGPIPE: a short write is enough */
    void (*old)(int) = signal(SIGPIPE, SIG_IGN);
    for (size_t off = 0; off < len;) {
        ssize_t n = write(fds[1], script + off, len - off);
        if (n <= 0) break;
        off += (size_t)n;
    }
    signal(SIGPIPE, old);
    close(fds[1]);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool plot_available(char *term, size_t len)
{
    static const char probe[] = "set terminal pngcairo\n";
    int rc = run_gnuplot(NULL, probe, sizeof probe - 1, NULL);
    if (rc == 127 || rc < 0) return false;
    snprintf(term, len, "%s", rc == 0 ? "pngcairo" : "png");
    return true;
}

void plot_quote(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'') fputc('\'', f);
        fputc(*s, f);
    }
    fputc('\'', f);
}

FILE *plot_begin(plot *p, const char *term, const char *png, const char *title, int width, int height)
{
    *p = (plot){0};
    p->f = open_memstream(&p->buf, &p->len);
    if (!p->f) return NULL;
    fprintf(p->f, "set terminal %s noenhanced size %d,%d font ',10'\nset output ", term, width, height);
    plot_quote(p->f, png);
    fputs("\nset title ", p->f);
    plot_quote(p->f, title);
    fputs("\nset datafile separator ','\nset datafile missing ''\nset key outside right top\n"
          "set grid\nset style data linespoints\n",
          p->f);
    return p->f;
}

/* The last non-empty line of DIR/.gnuplot.log, for the error message. */
static void read_complaint(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    char line[512], last[512] = "no message";
    while (f && fgets(line, sizeof line, f))
        if (line[strspn(line, " \t\r\n")]) snprintf(last, sizeof last, "%.*s", (int)strcspn(line, "\r\n"), line);
    if (f) fclose(f);
    snprintf(err, errlen, "gnuplot: %s", last);
}

int plot_finish(plot *p, const char *dir, char *err, size_t errlen)
{
    if (fclose(p->f) != 0) {
        free(p->buf);
        snprintf(err, errlen, "out of memory while writing a plot script");
        return -1;
    }
    char log[4200];
    snprintf(log, sizeof log, "%s/%s", dir, log_name);
    int rc = run_gnuplot(dir, p->buf, p->len, log_name);
    free(p->buf);
    *p = (plot){0};
    if (rc != 0) read_complaint(log, err, errlen);
    unlink(log);
    return rc == 0 ? 0 : -1;
}

int plot_script(const char *dir, const char *png, const char *title, int width, int height, const char *script,
                char *err, size_t errlen)
{
    char term[32];
    if (!plot_available(term, sizeof term)) {
        printf("note: gnuplot not found, no plots\n");
        return 0;
    }
    plot pl;
    FILE *f = plot_begin(&pl, term, png, title, width, height);
    if (!f) return -1;
    fputs(script, f);
    return plot_finish(&pl, dir, err, errlen);
}

void plot_slo_line(FILE *f, const char *key, double limit)
{
    if (!(limit > 0)) return;
    char title[160];
    snprintf(title, sizeof title, "SLO: %s = %g ms", key, limit);
    fprintf(f, ", %.17g with lines dashtype 3 linewidth 2 linecolor rgb '#cc0000' title ", limit);
    plot_quote(f, title);
}

void plot_log_y_if_wide(FILE *f, const char *csv, const char *lo, const char *hi, double limit, bool from_zero)
{
    fprintf(f, "stats '%s' using '%s' name 'LO' nooutput\nstats '%s' using '%s' name 'HI' nooutput\n", csv, lo, csv, hi);
    fprintf(f, "lo = LO_min; hi = HI_max; slo = %.17g\n", limit > 0 ? limit : 0);
    fputs("if (slo > 0 && slo < lo) { lo = slo }\nif (slo > hi) { hi = slo }\n"
          "if (lo > 0 && hi / lo >= 20) { set logscale y; set yrange [*:*] } else { unset logscale y", f);
    fputs(from_zero ? "; set yrange [0:*] }\n" : " }\n", f);
}
