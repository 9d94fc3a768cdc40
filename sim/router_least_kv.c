/* Least KV usage: the replica with the most KV blocks free once its waiting requests have
 * theirs (cached prefix blocks no request holds count as free: they are evicted on demand).
 * Counting the queue keeps a burst of arrivals from all going to the replica that was emptiest
 * before it, whose blocks are taken only when its requests are scheduled. */
#include "sim/router.h"

static int64_t headroom(sched *s) { return bm_num_free(sched_bm(s)) - sched_waiting_blocks(s); }

int route_least_kv(sched *const *reps, int n, const request *r, router_state *st)
{
    (void)r;
    (void)st;
    int best = 0;
    int64_t best_free = headroom(reps[0]);
    for (int i = 1; i < n; i++) {
        int64_t h = headroom(reps[i]);
        if (h > best_free) best = i, best_free = h;
    }
    return best;
}
