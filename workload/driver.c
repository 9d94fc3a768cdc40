#include "workload/driver.h"

#include <assert.h>
#include <math.h>

int drv_init(driver *d, const workload *w, const wl_config *cfg)
{
    *d = (driver){
        .it = wl_iter_open(w),
        .cap = cfg->arrival == ARRIVAL_CLOSED ? cfg->concurrency : cfg->max_concurrency,
        .free_since = -INFINITY,
    };
    if (!d->it)
        return -1;
    d->has_ahead = wl_iter_next(d->it, &d->ahead);
    return 0;
}

void drv_free(driver *d)
{
    wl_iter_close(d->it);
    d->it = NULL;
}

double drv_next_time(const driver *d)
{
    if (!d->has_ahead || (d->cap > 0 && d->in_flight >= d->cap))
        return INFINITY;
    return fmax(d->ahead.arrival_time, d->free_since);
}

wl_request *drv_release(driver *d, double now)
{
    double t = drv_next_time(d);
    if (!(t <= now))
        return NULL;
    d->sent = d->ahead;
    d->sent.arrival_time = t;
    d->has_ahead = wl_iter_next(d->it, &d->ahead);
    d->in_flight++;
    return &d->sent;
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
    return !d->has_ahead;
}
