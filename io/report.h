/* Sentences of a report, written from measured numbers: the direction word ("cut", "raised")
 * and every figure come from the values passed in, so a sentence cannot contradict them. */
#ifndef SERVESIM_IO_REPORT_H
#define SERVESIM_IO_REPORT_H

#include <stddef.h>

/* V with about three significant figures ("1234", "56.7", "0.891"). */
void rpt_num(char *buf, size_t len, double v);
/* "cut WHAT by 23.4% (12.3 → 9.42 UNIT)", "raised WHAT by ...", or "left WHAT unchanged
 * (12.3 UNIT)" when the change rounds to 0.0%. From 0 it says "raised WHAT from 0 to X UNIT". */
void rpt_change(char *buf, size_t len, const char *what, double before, double after, const char *unit);
/* "3.2×" for A / B (more digits below 1: "0.31×"); "an unbounded multiple" when B is 0. */
void rpt_ratio(char *buf, size_t len, double a, double b);
/* Percent of the way, e.g. a hit rate 0.734 → "73.4%". */
void rpt_percent(char *buf, size_t len, double fraction);

#endif
