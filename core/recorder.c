#include "core/recorder.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

void rec_init(recorder *rc, met_acc *met, res_dir *dir)
{
    *rc = (recorder){.met = met, .dir = dir};
}

void rec_free(recorder *rc)
{
    free(rc->steps);
    rc->steps = NULL;
    rc->num_steps = rc->steps_cap = 0;
}

static void keep_step(recorder *rc, const step_record *s)
{
    if (rc->num_steps == rc->steps_cap) {
        size_t cap = rc->steps_cap ? 2 * rc->steps_cap : 1024;
        step_record *p = realloc(rc->steps, cap * sizeof *p);
        if (!p) {
            fprintf(stderr, "servesim: out of memory keeping %zu steps\n", rc->num_steps);
            abort();
        }
        rc->steps = p;
        rc->steps_cap = cap;
    }
    rc->steps[rc->num_steps++] = *s;
}

void rec_sent(recorder *rc, const request *r)
{
    if (r->warmup || rc->window_started) return;
    met_set_window_start(rc->met, r->arrival_time);
    rc->window_started = true;
}

/* Requests that decoded in the previous step share one gap: count runs here, hand them over
 * once per run. */
void rec_tokens(recorder *rc, const sched_batch *b, double now)
{
    double last = NAN;
    int64_t run = 0;
    for (int i = 0; rc->dir && rc->dir->tokens && i < b->num_items; i++)
        if (b->items[i].emits_token) /* a verifying decode emits its accepted drafts and one more */
            for (int j = 0; j <= b->items[i].num_accepted; j++)
                res_write_token(rc->dir, b->items[i].req->id, b->items[i].req->num_generated + j, now);
    for (int i = 0; i < b->num_items; i++) {
        const request *r = b->items[i].req;
        if (!b->items[i].emits_token || r->num_generated == 0 || r->warmup) continue;
        if (r->last_token_time != last) {
            if (run) met_on_itl_n(rc->met, now - last, run);
            last = r->last_token_time;
            run = 0;
        }
        run++;
    }
    if (run) met_on_itl_n(rc->met, now - last, run);
}

void rec_step(recorder *rc, const step_record *s)
{
    met_on_step(rc->met, s);
    if (rc->dir) res_write_step(rc->dir, s);
    if (rc->keep_steps) keep_step(rc, s);
}

void req_to_record(const request *r, req_record *out)
{
    *out = (req_record){
        .request_id = r->id,
        .arrival_time = r->arrival_time,
        .scheduled_prefill_time = r->scheduled_time,
        .first_token_time = r->first_token_time,
        .finish_time = r->finish_time,
        .prompt_len = r->prompt_len,
        .cached_prompt_len = r->cached_prompt_len,
        .output_len = r->num_generated,
        .num_preemptions = r->num_preemptions,
        .stop = r->stop,
        .warmup = r->warmup,
        .draft_tokens = r->draft_tokens,
        .accepted_tokens = r->accepted_tokens,
    };
}

void rec_ended(recorder *rc, const request *r)
{
    req_record rr;
    req_to_record(r, &rr);
    met_on_request(rc->met, &rr);
    if (rc->dir) res_write_request(rc->dir, &rr);
}
