/* Command-line options, one way for every command: a table of the command's options, each
 * "--flag value" or "--flag=value" (or a bare --flag), unknown options named, values parsed
 * and range-checked with one message. */
#ifndef SERVESIM_CLI_OPTIONS_H
#define SERVESIM_CLI_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

/* One option of a command: FLAG (e.g. "--jobs"), whether a value follows it. */
typedef struct cli_opt {
    const char *flag;
    bool has_value;
} cli_opt;

/* ARGV[*I] as one of OPTS: its row and value (NULL for a flag without one); advances *I past a
 * separate value. -1 after printing "unknown option", "needs a value" or "takes no value"
 * with USAGE. */
int cli_take_opt(int argc, char **argv, int *i, const char *usage, const cli_opt *opts, int n,
                 const cli_opt **opt, const char **value);
/* Walks ARGV[1..): each option goes to ON_OPT(CTX, flag, value or NULL), in order; every
 * other argument ("-" included) to ON_ARG(CTX, arg), or, when ON_ARG is NULL, is refused as
 * unexpected. The callbacks return -1 after printing their own message. Returns -1 after
 * printing the problem. */
int cli_parse(int argc, char **argv, const char *usage, const cli_opt *opts, int n,
              int (*on_opt)(void *ctx, const char *flag, const char *value),
              int (*on_arg)(void *ctx, const char *arg), void *ctx);
/* -1 after printing "FLAG VALUE: an empty item ..." when the comma-separated LIST (VALUE, or
 * the part of it after "KEY=") is empty or has an empty item (a leading or trailing comma,
 * ",,"), which strtok would skip: "--routers round_robin," was taken as one router. 0 otherwise. */
int cli_refuse_empty_items(const char *flag, const char *value, const char *list);
/* A command's exit STATUS once its standard output is flushed: what it printed and could not
 * write (a full disk, /dev/full) is EXIT_FAILURE_OTHER after "servesim: writing standard
 * output: reason", where it was lost with exit 0. */
int cli_finish_stdout(int status);
/* VALUE as an integer in [LO, HI]; -1 after printing "FLAG VALUE: expected an integer in
 * [LO, HI]". */
int cli_parse_long(const char *flag, const char *value, long lo, long hi, long *out);

#endif
