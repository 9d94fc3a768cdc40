/* Driver: planned release times, the in-flight cap, closed-loop clients. */
#include <criterion/criterion.h>
#include <math.h>

#include "workload/driver.h"

#define N 5

static wl_request reqs[N];
static workload w = {.reqs = reqs, .n = N};

static void plan(const double *arrivals)
{
    for (int i = 0; i < N; i++)
        reqs[i] = (wl_request){.id = i, .arrival_time = arrivals[i], .prefix_id = -1};
}

Test(driver, open_loop_without_cap_releases_at_planned_times)
{
    plan((const double[]){0, 0.5, 0.5, 2, 3});
    wl_config c = {.arrival = ARRIVAL_POISSON};
    driver d;
    drv_init(&d, &w, &c);
    cr_assert_eq(d.cap, 0);
    cr_assert_eq(drv_next_time(&d), 0.0);
    cr_assert_eq(drv_release(&d, 0)->id, 0);
    cr_assert_null(drv_release(&d, 0.4), "request 1 is due at 0.5");
    cr_assert_eq(drv_next_time(&d), 0.5);
    cr_assert_eq(drv_release(&d, 0.5)->id, 1);
    wl_request *r = drv_release(&d, 0.7);
    cr_assert_eq(r->id, 2);
    cr_assert_eq(r->arrival_time, 0.5, "sent at its planned time, not at the late poll");
    drv_on_done(&d, 1.0);
    cr_assert_eq(drv_release(&d, 2)->arrival_time, 2.0);
    cr_assert_eq(drv_release(&d, 3)->arrival_time, 3.0);
    cr_assert(drv_all_sent(&d));
    cr_assert(isinf(drv_next_time(&d)));
    cr_assert_null(drv_release(&d, 100));
    drv_free(&d);
}

Test(driver, closed_loop_of_two_clients)
{
    plan((const double[]){0, 0, 0, 0, 0});
    wl_config c = {.arrival = ARRIVAL_CLOSED, .concurrency = 2, .max_concurrency = 7};
    driver d;
    drv_init(&d, &w, &c);
    cr_assert_eq(d.cap, 2, "closed loop: the cap is the number of clients");
    cr_assert_eq(drv_release(&d, 0)->id, 0);
    cr_assert_eq(drv_release(&d, 0)->id, 1);
    cr_assert(isinf(drv_next_time(&d)), "both clients busy");
    cr_assert_null(drv_release(&d, 5));
    drv_on_done(&d, 1.25);
    cr_assert_eq(drv_next_time(&d), 1.25);
    wl_request *r = drv_release(&d, 1.25);
    cr_assert_eq(r->id, 2);
    cr_assert_eq(r->arrival_time, 1.25, "its latency clock starts when a client sends it");
    cr_assert_null(drv_release(&d, 1.25));
    drv_on_done(&d, 2.0);
    cr_assert_eq(drv_release(&d, 2.0)->arrival_time, 2.0);
    drv_on_done(&d, 2.5);
    cr_assert_eq(drv_release(&d, 2.5)->arrival_time, 2.5);
    cr_assert(drv_all_sent(&d));
    cr_assert(isinf(drv_next_time(&d)));
    drv_on_done(&d, 3.0);
    drv_on_done(&d, 3.5);
    cr_assert_eq(d.in_flight, 0);
    drv_free(&d);
}

Test(driver, open_loop_cap_holds_requests_back)
{
    plan((const double[]){0, 1, 2, 10, 11});
    wl_config c = {.arrival = ARRIVAL_CONSTANT, .max_concurrency = 1};
    driver d;
    drv_init(&d, &w, &c);
    cr_assert_eq(d.cap, 1);
    cr_assert_eq(drv_release(&d, 0)->arrival_time, 0.0);
    cr_assert(isinf(drv_next_time(&d)));
    drv_on_done(&d, 3.5);
    cr_assert_eq(drv_release(&d, 3.5)->arrival_time, 3.5, "planned 1, held until 3.5");
    drv_on_done(&d, 4.0);
    cr_assert_eq(drv_release(&d, 4.0)->arrival_time, 4.0, "planned 2, held until 4.0");
    drv_on_done(&d, 5.0);
    cr_assert_eq(drv_next_time(&d), 10.0, "a free slot does not pull a request forward");
    cr_assert_null(drv_release(&d, 9.9));
    cr_assert_eq(drv_release(&d, 10)->arrival_time, 10.0);
    drv_free(&d);
}
