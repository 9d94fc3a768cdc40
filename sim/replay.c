#include "sim/replay.h"

void replay_init(replay_cost *r, const step_record *steps, size_t num_steps, step_cost fallback)
{
    *r = (replay_cost){.steps = steps, .num_steps = num_steps, .fallback = fallback, .first_mismatch = -1};
}

static bool same_batch(const step_record *s, const sched_batch *b)
{
    return s->num_prefill_tokens == b->num_prefill_tokens && s->num_prefill_seqs == b->num_prefill_seqs &&
           s->num_decode_seqs == b->num_decode_seqs && s->num_batched_tokens == b->num_batched_tokens;
}

/* Each replayed step ends where the engine's next step started (the engine spends a few
 * microseconds between steps delivering tokens and keeping records; a replay that dropped
 * them would fall behind the engine's clock by their sum, and arrivals would land in other
 * steps), or, when the engine then idled until an arrival, where its step ended. Measuring
 * from the simulator's own start also absorbs the engine's wake-up lag after each idle. */
#define BUSY_GAP_S 1e-4

double replay_step_time(const void *ctx, const sched_batch *b)
{
    replay_cost *r = (replay_cost *)ctx;
    size_t i = r->next++;
    if (r->first_mismatch < 0 && (i >= r->num_steps || !same_batch(&r->steps[i], b)))
        r->first_mismatch = (int64_t)i;
    if (r->first_mismatch >= 0) return r->fallback.step_time(r->fallback.ctx, b);
    const step_record *s = &r->steps[i];
    double end = s->end_time;
    if (i + 1 < r->num_steps && s[1].start_time - end >= 0 && s[1].start_time - end < BUSY_GAP_S) end = s[1].start_time;
    double d = end - r->now;
    return d > 0 ? d : 0;
}

step_cost replay_step_cost(replay_cost *r)
{
    return (step_cost){.step_time = replay_step_time, .ctx = r, .now = &r->now};
}
