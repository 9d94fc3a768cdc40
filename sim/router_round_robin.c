/* Round robin: each replica in turn, whatever it holds. */
#include "sim/router.h"

int route_round_robin(sched *const *reps, int n, const request *r, router_state *st)
{
    (void)reps;
    (void)r;
    int pick = st->next % n;
    st->next = (pick + 1) % n;
    return pick;
}
