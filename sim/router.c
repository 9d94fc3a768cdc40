/* The router registry: names, help and dispatch, all from SIM_ROUTERS. */
#include "sim/router.h"

#include <string.h>

static const struct {
    const char *name, *help;
    router_fn fn;
} routers[] = {
#define X(id, name, fn, help) [id] = {name, help, fn},
    SIM_ROUTERS(X)
#undef X
};

enum { NUM_ROUTERS = sizeof routers / sizeof *routers };

const char *router_name(router_kind k) { return (int)k >= 0 && (int)k < NUM_ROUTERS ? routers[k].name : "invalid"; }
const char *router_help(router_kind k) { return (int)k >= 0 && (int)k < NUM_ROUTERS ? routers[k].help : ""; }

int router_parse(const char *text, router_kind *out)
{
    for (int k = 0; k < NUM_ROUTERS; k++)
        if (strcmp(text, routers[k].name) == 0) {
            *out = (router_kind)k;
            return 0;
        }
    return -1;
}

int router_pick(router_kind k, router_state *st, sched *const *reps, int n, const request *r)
{
    return n <= 1 ? 0 : routers[k].fn(reps, n, r, st);
}
