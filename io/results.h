/* Result files: summary.json, requests.csv, steps.csv, written into a temporary directory
 * that is renamed into place only when the run succeeds. */
#ifndef SERVESIM_IO_RESULTS_H
#define SERVESIM_IO_RESULTS_H

#include <stdio.h>
#include "metrics/metrics.h"
#include "io/json.h"
#include "io/outdir.h"
#include "metrics/records.h"

typedef struct res_dir {
    outdir od;          /* the directory that appears whole or not at all */
    FILE *steps;        /* steps.csv and requests.csv, streamed while the run goes */
    FILE *requests;
    FILE *tokens;       /* tokens.csv, only after res_open_tokens */
} res_dir;

/* Creates DIR.tmp.<pid> (and the parents of DIR) as od_open does, refusing what servesim did
 * not write. -1 with a message in ERR on failure. */
int res_open(res_dir *d, const char *dir, char *err, size_t errlen);
/* Also write tokens.csv (request_id, token_index, time): every token's time. -1 with ERR. */
int res_open_tokens(res_dir *d, char *err, size_t errlen);
/* One row of tokens.csv, when it is open. */
void res_write_token(res_dir *d, int64_t request_id, int index, double time);
/* One row of steps.csv. */
void res_write_step(res_dir *d, const step_record *s);
/* One row of requests.csv; rows come in the order requests end. Write errors surface when
 * res_commit closes the file. */
void res_write_request(res_dir *d, const req_record *r);
/* The summary's fields as a JSON object (SUMMARY_FIELDS order); NULL when out of memory. */
json_t *res_summary_json(const summary *s);
/* Writes summary.json: the summary's fields, then the members of EXTRA (what ran, the cost
 * model, the scenario; may be NULL). */
int res_write_summary(res_dir *d, const summary *s, const json_t *extra, char *err, size_t errlen);
/* Renames the temporary directory to DIR, replacing an older result (od_commit). */
int res_commit(res_dir *d, char *err, size_t errlen);
/* Removes the temporary directory and everything in it. */
void res_abort(res_dir *d);

/* Prints the table vLLM's `bench serve` users know. */
void res_print_summary(FILE *f, const summary *s);

#endif
