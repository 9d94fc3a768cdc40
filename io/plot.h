/* PNG plots through gnuplot: a script is built in memory and piped to `gnuplot` running in
 * the output directory, so scripts name their data files relative to it. Without gnuplot
 * callers skip their plots with a note; that is not an error. */
#ifndef SERVESIM_IO_PLOT_H
#define SERVESIM_IO_PLOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct plot {
    char *buf;
    size_t len;
    FILE *f;            /* the script; write plot commands here between begin and finish */
} plot;

/* The PNG terminal gnuplot has ("pngcairo", else "png") into TERM; false without gnuplot. */
bool plot_available(char *term, size_t len);
/* Starts a script drawing PNG (in the directory plot_finish runs in) with TITLE, CSV input
 * with named columns, a grid and the key outside on the right. NULL when out of memory. */
FILE *plot_begin(plot *p, const char *term, const char *png, const char *title, int width, int height);
/* Runs the script with DIR as the working directory. -1 with gnuplot's complaint in ERR. */
int plot_finish(plot *p, const char *dir, char *err, size_t errlen);
/* One plot from SCRIPT (gnuplot commands after plot_begin's set-up), drawn as PNG in DIR;
 * without gnuplot it prints a note and draws nothing (0). -1 with gnuplot's complaint. */
int plot_script(const char *dir, const char *png, const char *title, int width, int height, const char *script,
                char *err, size_t errlen);
/* ", LIMIT as a dashed red line titled 'SLO: KEY = LIMIT ms'": appended to a latency plot
 * command when the scenario sets that objective (LIMIT > 0; nothing otherwise). */
void plot_slo_line(FILE *f, const char *key, double limit);
/* gnuplot commands that put the y axis on a log scale when the columns LO and HI of CSV (and
 * LIMIT, when > 0) span a factor of 20 or more, and on a linear one otherwise (from 0 with
 * FROM_ZERO, as bars need). */
void plot_log_y_if_wide(FILE *f, const char *csv, const char *lo, const char *hi, double limit, bool from_zero);
/* S as a gnuplot single-quoted string. */
void plot_quote(FILE *f, const char *s);

#endif
