/* Prefix-aware: the replica that already caches the most of R's prompt, weighed against its
 * load, as KV-aware routers (llm-d's, Dynamo's) score cache hits against queue depth: score =
 * cached prompt blocks - requests waiting or running. A request sharing nothing goes to the
 * least loaded replica; one whose prefix is cached follows it until that replica is loaded
 * by as many requests as the prefix has blocks. */
#include "sim/router.h"

int route_prefix_aware(sched *const *reps, int n, const request *r, router_state *st)
{
    (void)st;
    int best = 0;
    long best_score = 0;
    for (int i = 0; i < n; i++) {
        long score = (long)sched_cached_prefix_blocks(reps[i], r) -
                     (sched_num_waiting(reps[i]) + sched_num_running(reps[i]));
        if (i == 0 || score > best_score) best = i, best_score = score;
    }
    return best;
}
