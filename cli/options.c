/* The option walker every command uses (options.h). */
#include "cli/options.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/decimal.h"

#include "config/scenario.h"
#include "study/simjob.h"

static const cli_opt *find_opt(const cli_opt *opts, int n, const char *flag, size_t len)
{
    for (int i = 0; i < n; i++)
        if (strlen(opts[i].flag) == len && strncmp(opts[i].flag, flag, len) == 0) return &opts[i];
    return NULL;
}

static int misuse(const char *usage, const char *what, const char *arg)
{
    fprintf(stderr, "servesim: %s%s\n%s", what, arg, usage);
    return -1;
}

int cli_take_opt(int argc, char **argv, int *i, const char *usage, const cli_opt *opts, int n,
                 const cli_opt **opt, const char **value)
{
    const char *arg = argv[*i], *eq = strchr(arg, '=');
    if (strcmp(arg, "-q") == 0 && find_opt(opts, n, "--quiet", 7)) arg = "--quiet"; /* as curl, grep, ... take it */
    size_t len = eq && arg[1] == '-' ? (size_t)(eq - arg) : strlen(arg);
    *opt = find_opt(opts, n, arg, len);
    *value = NULL;
    if (!*opt) {
        char name[128], key[160];
        snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1), arg);
        if (scenario_vllm_key(name, key, sizeof key)) /* a vLLM user's flag: name servesim's key */
            fprintf(stderr, "servesim: unknown option %s; vLLM's %s is %s here: --set %s=VALUE\n%s", name, name, key,
                    key, usage);
        else
            fprintf(stderr, "servesim: unknown option %.*s\n%s", (int)len, arg, usage);
        return -1;
    }
    if (!(*opt)->has_value) return arg[len] ? misuse(usage, (*opt)->flag, " takes no value") : 0;
    if (arg[len]) {
        *value = arg + len + 1;
        return 0;
    }
    if (*i + 1 >= argc) return misuse(usage, arg, " needs a value");
    /* `run --out --quiet` wrote a folder named --quiet, and `--set --out x` took --out for the
     * assignment (a new user's trial): a value that reads as a long option is a forgotten one */
    const char *next = argv[*i + 1];
    if (next[0] == '-' && next[1] == '-' && next[2] != '-' && next[2] != '\0') {
        char why[300];
        snprintf(why, sizeof why, " needs a value, and %s is the next option (write %s=%s to mean it)", next, arg, next);
        return misuse(usage, arg, why);
    }
    *value = argv[++*i];
    return 0;
}

int cli_parse(int argc, char **argv, const char *usage, const cli_opt *opts, int n,
              int (*on_opt)(void *ctx, const char *flag, const char *value),
              int (*on_arg)(void *ctx, const char *arg), void *ctx)
{
    /* a flag given twice: the last one won silently (--out a --out b wrote to b); only the
     * flags that add to a list repeat */
    static const char *const repeatable[] = {"--set", "--point", "--vary", "--slo"};
    unsigned long long seen = 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1]) {
            const cli_opt *o;
            const char *value;
            if (cli_take_opt(argc, argv, &i, usage, opts, n, &o, &value) < 0) return -1;
            bool repeats = false;
            for (size_t k = 0; k < sizeof repeatable / sizeof *repeatable; k++) repeats |= strcmp(o->flag, repeatable[k]) == 0;
            unsigned long long bit = 1ULL << ((o - opts) % 64);
            if (!repeats && (seen & bit)) return misuse(usage, o->flag, " given twice; give it once");
            seen |= bit;
            if (on_opt(ctx, o->flag, value) < 0) return -1;
        } else if (!on_arg) {
            return misuse(usage, "unexpected argument ", argv[i]);
        } else if (on_arg(ctx, argv[i]) < 0) {
            return -1;
        }
    }
    return 0;
}

int cli_refuse_empty_items(const char *flag, const char *value, const char *list)
{
    size_t n = strlen(list);
    if (n && list[0] != ',' && list[n - 1] != ',' && !strstr(list, ",,")) return 0;
    fprintf(stderr, "servesim: %s %s: an empty item; give V1,V2,... with none empty\n", flag,
            value[0] ? value : "\"\"");
    return -1;
}

int cli_finish_stdout(int status)
{
    errno = 0;
    bool lost = fflush(stdout) != 0 || ferror(stdout);
    int why = errno ? errno : EIO;
    if (!lost || status != EXIT_OK) return status;
    fprintf(stderr, "servesim: writing standard output: %s\n", strerror(why));
    return EXIT_FAILURE_OTHER;
}

int cli_parse_long(const char *flag, const char *value, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (end == value || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "servesim: %s %s: expected an integer in [%ld, %ld]%s\n", flag, value, lo, hi,
                decimal_hint(value, true));
        return -1;
    }
    *out = v;
    return 0;
}
