#include "core/request.h"

#include <math.h>
#include <string.h>

void req_init(request *r, int64_t id, double arrival, const int32_t *prompt, int prompt_len,
              int output_len)
{
    memset(r, 0, sizeof *r);
    r->id = id;
    r->arrival_time = arrival;
    r->prompt = prompt;
    r->prompt_len = prompt_len;
    r->output_len = output_len;
    r->state = REQ_WAITING;
    r->scheduled_time = NAN;
    r->first_token_time = NAN;
    r->last_token_time = NAN;
    r->finish_time = NAN;
    r->stop = STOP_NONE;
    r->seq_slot = -1;
}

void req_from_workload(request *r, const wl_request *wr, const int32_t *prompt)
{
    req_init(r, wr->id, wr->arrival_time, prompt, wr->prompt_len, wr->output_len);
    r->warmup = wr->warmup;
}
