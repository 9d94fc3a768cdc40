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
/* S as a gnuplot single-quoted string. */
void plot_quote(FILE *f, const char *s);

#endif
