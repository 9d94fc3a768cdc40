/* Least outstanding requests: the replica with the fewest requests waiting or running. */
#include "sim/router.h"

int route_least_outstanding(sched *const *reps, int n, const request *r, router_state *st)
{
    (void)r;
    (void)st;
    int best = 0, best_load = sched_num_waiting(reps[0]) + sched_num_running(reps[0]);
    for (int i = 1; i < n; i++) {
        int load = sched_num_waiting(reps[i]) + sched_num_running(reps[i]);
        if (load < best_load) best = i, best_load = load;
    }
    return best;
}
