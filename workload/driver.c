#include "workload/driver.h"

#include <assert.h>
#include <math.h>

void drv_init(driver *d, workload *w, const wl_config *cfg)
{
    d->reqs = w->reqs;
    d->n = w->n;
    d->next = 0;
    d->cap = cfg->arrival == ARRIVAL_CLOSED ? cfg->concurrency : cfg->max_concurrency;
    d->in_flight = 0;
    d->free_since = -INFINITY;
}

double drv_next_time(const driver *d)
{
    if (d->next >= d->n || (d->cap > 0 && d->in_flight >= d->cap))
        return INFINITY;
    return fmax(d->reqs[d->next].arrival_time, d->free_since);
}

wl_request *drv_release(driver *d, double now)
{
    double t = drv_next_time(d);
    if (!(t <= now))
        return NULL;
    wl_request *r = &d->reqs[d->next++];
    r->arrival_time = t;
    d->in_flight++;
    return r;
}

void drv_on_done(driver *d, double now)
{
    assert(d->in_flight > 0);
    /* Only a slot freed while the cap was full holds a request back. */
    if (d->cap > 0 && d->in_flight == d->cap)
        d->free_since = now;
    d->in_flight--;
}

int drv_all_sent(const driver *d)
{
    return d->next >= d->n;
}
