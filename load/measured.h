/* A run measured on a real server, read back: the requests it served (send time, lengths,
 * first token, end, whether it failed) and its inter-token gaps, from a `servesim load` (or
 * `servesim engine`) directory or from vLLM's `bench serve --save-result --save-detailed`
 * JSON. `servesim validate --measured` simulates exactly these requests. */
#ifndef SERVESIM_LOAD_MEASURED_H
#define SERVESIM_LOAD_MEASURED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "metrics/records.h"

typedef struct measured_run {
    req_record *reqs;          /* in send order; times in seconds from the first send */
    size_t n;
    double *itl;               /* every gap between tokens of a finished measured request */
    int64_t *itl_request_id;   /* each gap's request */
    size_t num_itl;
    bool have_itl;             /* the source had token times (tokens.csv, or vLLM's itls) */
    bool have_arrivals;        /* send times known (a vLLM JSON without start_times has none) */
    char kind[32];             /* "servesim" or "vllm" */
} measured_run;

/* Reads PATH: a directory with requests.csv (and tokens.csv when it has one), or a JSON file.
 * -1 with "PATH[:LINE]: reason" in ERR. */
int measured_read(const char *path, measured_run *out, char *err, size_t errlen);
void measured_free(measured_run *m);

#endif
