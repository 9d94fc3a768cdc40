#include "core/request.h"

#include <math.h>
#include <stdlib.h>
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
    r->num_proposed = -1;
    r->acceptance_rate = NAN;
}

void req_from_workload(request *r, const wl_request *wr, const int32_t *prompt)
{
    req_init(r, wr->id, wr->arrival_time, prompt, wr->prompt_len, wr->output_len);
    r->warmup = wr->warmup;
}

enum { POOL_CHUNK = 1024 };

void req_pool_init(req_pool *p)
{
    *p = (req_pool){.used = POOL_CHUNK};
}

static int grow(void **v, size_t *cap, size_t elem)
{
    size_t n = *cap ? 2 * *cap : 16;
    void *q = realloc(*v, n * elem);
    if (!q) return -1;
    *v = q;
    *cap = n;
    return 0;
}

request *req_pool_get(req_pool *p)
{
    if (p->num_free > 0) return p->free_list[--p->num_free];
    if (p->used == POOL_CHUNK) {
        if (p->num_chunks == p->chunks_cap && grow((void **)&p->chunks, &p->chunks_cap, sizeof *p->chunks) < 0)
            return NULL;
        /* calloc: a slot never handed out has a NULL prompt, which req_pool_free relies on */
        request *chunk = calloc(POOL_CHUNK, sizeof *chunk);
        if (!chunk) return NULL;
        p->chunks[p->num_chunks++] = chunk;
        p->used = 0;
        /* the free list can then hold every slot: req_pool_put never fails */
        size_t slots = p->num_chunks * POOL_CHUNK;
        while (p->free_cap < slots)
            if (grow((void **)&p->free_list, &p->free_cap, sizeof *p->free_list) < 0) return NULL;
    }
    return &p->chunks[p->num_chunks - 1][p->used++];
}

void req_pool_put(req_pool *p, request *r)
{
    free((void *)r->prompt);
    r->prompt = NULL;
    p->free_list[p->num_free++] = r;
}

void req_pool_free(req_pool *p)
{
    for (size_t c = 0; c < p->num_chunks; c++) {
        size_t n = c + 1 == p->num_chunks ? p->used : POOL_CHUNK;
        for (size_t i = 0; i < n; i++) free((void *)p->chunks[c][i].prompt);
        free(p->chunks[c]);
    }
    free(p->chunks);
    free(p->free_list);
    req_pool_init(p);
}
