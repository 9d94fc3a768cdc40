/* The client side of a run: releases requests at their planned times, holding them back
 * while `max_concurrency` are in flight (closed loop = all at time 0 with the cap set to
 * the number of clients). Shared by the simulator (virtual time) and the real engine. */
#ifndef SERVESIM_WORKLOAD_DRIVER_H
#define SERVESIM_WORKLOAD_DRIVER_H

#include <stdbool.h>
#include <stddef.h>
#include "workload/workload.h"

typedef struct driver {
    wl_iter *it;
    wl_request ahead;   /* the next request to send, valid when has_ahead */
    wl_request sent;    /* the one drv_release returned last */
    bool has_ahead;
    int cap;            /* 0 = no cap */
    int in_flight;
    double free_since;  /* when the cap last opened a slot */
} driver;

/* -1 when out of memory. */
int drv_init(driver *d, const workload *w, const wl_config *cfg);
void drv_free(driver *d);
/* Earliest time the next request may be sent; INFINITY when none is left or the cap is full. */
double drv_next_time(const driver *d);
/* Sends the next request if it is due at NOW; sets its arrival_time to the send time.
 * Returns NULL when nothing is due; the request returned stays valid until the next call. */
wl_request *drv_release(driver *d, double now);
/* A request ended (finished or rejected) at NOW: frees its slot. A request held back by the
 * cap is sent at the time a slot frees, so call drv_release right after this. */
void drv_on_done(driver *d, double now);
int drv_all_sent(const driver *d);

#endif
