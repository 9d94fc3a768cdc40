/* Length distributions written as text in scenarios: "fixed:N", "uniform:MIN:MAX", ... */
#ifndef SERVESIM_WORKLOAD_DIST_H
#define SERVESIM_WORKLOAD_DIST_H

#include <stddef.h>
#include <gsl/gsl_rng.h>

typedef enum dist_kind {
    DIST_FIXED,      /* fixed:N */
    DIST_UNIFORM,    /* uniform:MIN:MAX, integers, both ends included */
    DIST_LOGNORMAL,  /* lognormal:MEDIAN:SIGMA:MAX, rounded, clipped to [1, MAX]; MEDIAN <= MAX, SIGMA in (0, 10] */
    DIST_ZIPF,       /* zipf:MIN:MAX:S, P(k) ~ 1/(k-MIN+1)^S on [MIN, MAX] */
} dist_kind;

typedef struct len_dist {
    dist_kind kind;
    double a, b, c;
} len_dist;

/* Parses TEXT; on error returns -1 and writes a one-line reason to ERR. */
int dist_parse(const char *text, len_dist *out, char *err, size_t errlen);
/* Writes the canonical text form (round-trips through dist_parse). */
void dist_format(const len_dist *d, char *buf, size_t len);
int dist_sample(const len_dist *d, gsl_rng *rng);
int dist_max(const len_dist *d);
double dist_mean(const len_dist *d);

#endif
