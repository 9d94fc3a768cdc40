/* The tiny model on the CPU backend, one thread, greedy: the engine the engine, server and
 * load tests run, from a scheduler configuration. */
#ifndef SERVESIM_TESTS_TINY_ENGINE_H
#define SERVESIM_TESTS_TINY_ENGINE_H

#include "core/model.h"
#include "engine/engine.h"

static inline engine_options tiny_engine_options(sched_config sc)
{
    const model_shape *m = model_preset("tiny");
    engine_options o = {.sched = sc};
    o.backend = (kb_options){.kind = KB_CPU, .weight_seed = 5, .sample_seed = 9, .threads = 1,
                             .shape = {m->num_layers, m->hidden, m->num_heads, m->num_kv_heads, m->head_dim,
                                       m->intermediate, m->vocab, m->rope_theta, m->rms_eps}};
    engine_backend_options(&o.sched, &o.backend);
    o.sampling = (kb_sampling){.temperature = 0, .top_k = 0, .top_p = 1};
    return o;
}

#endif
