/* Arrival traces as CSV (io/csv.h: quoting, a byte-order mark). Two formats, told apart by
 * the columns the header names (in any order, other columns ignored; the columns read each
 * named once, and not both formats' three):
 *   Azure LLM inference traces: TIMESTAMP,ContextTokens,GeneratedTokens
 *       with TIMESTAMP as "YYYY-MM-DD HH:MM:SS[.fffffff]" (up to 7 fraction digits);
 *   plain: arrival_time,prompt_len,output_len   with arrival_time in seconds.
 * Times are returned relative to the earliest row, exactly for Azure timestamps (integer
 * arithmetic in 100 ns ticks before the one conversion to seconds). An optional column
 * acceptance_rate gives each request's chance that a speculative draft is accepted (the
 * simulator draws from it; an engine run's requests.csv has draft_tokens and accepted_tokens
 * to compute it from). Lengths must be >= 1. Rows may come in any order (a run's
 * requests.csv is in finish order): they are returned in time order, ties in file order.
 * A run's requests.csv replays as it ran: an optional column warmup marks its warm-ups, and
 * with a column stop_reason, rows other than "length" (rejected or failed: their output
 * length is not known, 0 in the file) are left out and counted.
 * CRLF line ends are accepted and blank lines skipped. */
#ifndef SERVESIM_WORKLOAD_TRACE_H
#define SERVESIM_WORKLOAD_TRACE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct trace_row {
    double time;        /* seconds since the earliest row */
    int prompt_len, output_len;
    double acceptance_rate; /* optional column acceptance_rate (speculative decoding), in [0, 1]; -1 without */
    long line;          /* the file's line it was read from (header = line 1), for messages */
    bool warmup;        /* optional column warmup (a run's requests.csv): 1 for a warm-up request */
} trace_row;

/* Reads the MAX_ROWS earliest rows (0 = all; every row is read to find them); UNFINISHED
 * (may be NULL) counts the rows left out by stop_reason. On error returns -1 with "PATH:LINE: reason" (header = line 1) or "PATH: cannot open: reason" in ERR and
 * allocates nothing. */
int trace_read(const char *path, size_t max_rows, trace_row **rows, size_t *n, size_t *unfinished, char *err,
               size_t errlen);

#endif
