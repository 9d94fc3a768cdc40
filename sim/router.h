/* Routers: which replica of a deployment a new request goes to. One row per router in
 * SIM_ROUTERS (its name, its function in sim/router_NAME.c, what it does): `servesim keys`,
 * the key's choices and the parser read the table. Every router is deterministic: ties go to
 * the lowest replica index. */
#ifndef SERVESIM_SIM_ROUTER_H
#define SERVESIM_SIM_ROUTER_H

#include "core/sched.h"

#define SIM_ROUTERS(X)                                                                             \
    X(ROUTER_LEAST_OUTSTANDING, "least_outstanding", route_least_outstanding,                      \
      "fewest requests waiting or running")                                                        \
    X(ROUTER_ROUND_ROBIN, "round_robin", route_round_robin, "each replica in turn")               \
    X(ROUTER_LEAST_KV, "least_kv", route_least_kv, "most KV blocks free after its queue's")       \
    X(ROUTER_PREFIX_AWARE, "prefix_aware", route_prefix_aware,                                     \
      "most prompt blocks already cached, less a block per request outstanding (as KV-aware "      \
      "routers weigh cache hits against load)")

#define ROUTER_CHOICES "least_outstanding|round_robin|least_kv|prefix_aware"

typedef enum router_kind {
#define X(id, name, fn, help) id,
    SIM_ROUTERS(X)
#undef X
    ROUTER_COUNT
} router_kind;

/* What a router may keep between requests. */
typedef struct router_state {
    int next;                  /* round_robin: the next replica */
} router_state;

/* The replica (0..N-1) for R among REPS. */
typedef int (*router_fn)(sched *const *reps, int n, const request *r, router_state *st);

#define X(id, name, fn, help) int fn(sched *const *reps, int n, const request *r, router_state *st);
SIM_ROUTERS(X)
#undef X

const char *router_name(router_kind k);
const char *router_help(router_kind k);
int router_parse(const char *text, router_kind *out);
int router_pick(router_kind k, router_state *st, sched *const *reps, int n, const request *r);

#endif
