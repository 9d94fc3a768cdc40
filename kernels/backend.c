/* Backend dispatch: validates options, checks that the model fits the device, and forwards
 * each call to the implementation of the kind that was opened. A CUDA build adds its
 * kb_device next to kb_cpu_device. */
#include "kernels/backend_impl.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#define GIB (1024.0 * 1024.0 * 1024.0)

#ifdef SERVESIM_CUDA_BACKEND
extern const kb_device kb_cuda_device;
#endif

static const kb_device *device_of(kb_kind kind)
{
    switch (kind) {
    case KB_CPU: return &kb_cpu_device;
    case KB_CUDA:
#ifdef SERVESIM_CUDA_BACKEND
        return &kb_cuda_device;
#else
        return NULL;
#endif
    }
    return NULL;
}

size_t kb_param_count(const kb_shape *s)
{
    size_t d = (size_t)s->hidden, hd = (size_t)s->head_dim, inter = (size_t)s->intermediate;
    size_t qkv = ((size_t)s->num_heads + 2 * (size_t)s->num_kv_heads) * hd;
    size_t per_layer = d * qkv                     /* Wqkv */
                     + (size_t)s->num_heads * hd * d /* Wo */
                     + d * 2 * inter               /* W_gate_up */
                     + inter * d                   /* W_down */
                     + 2 * d;                      /* attention and MLP norms */
    return (size_t)s->vocab * d                    /* embedding */
         + (size_t)s->num_layers * per_layer
         + d                                       /* final norm */
         + d * (size_t)s->vocab;                   /* untied LM head */
}

static size_t dtype_bytes(kb_kind kind)
{
    return kind == KB_CUDA ? 2 : 4;
}

size_t kb_weight_bytes(const kb_shape *s, kb_kind kind)
{
    return kb_param_count(s) * dtype_bytes(kind);
}

size_t kb_kv_bytes(const kb_shape *s, kb_kind kind, int num_blocks, int block_size)
{
    return 2 * (size_t)s->num_layers * (size_t)num_blocks * (size_t)block_size
         * (size_t)s->num_kv_heads * (size_t)s->head_dim * dtype_bytes(kind);
}

static int invalid(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int invalid(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static int check_options(const kb_options *o, char *err, size_t errlen)
{
    const kb_shape *s = &o->shape;
    const struct { const char *name; int v; } positive[] = {
        {"num_layers", s->num_layers},     {"hidden", s->hidden},
        {"num_heads", s->num_heads},       {"num_kv_heads", s->num_kv_heads},
        {"head_dim", s->head_dim},         {"intermediate", s->intermediate},
        {"vocab", s->vocab},               {"num_blocks", o->num_blocks},
        {"block_size", o->block_size},     {"max_num_seqs", o->max_num_seqs},
        {"max_num_tokens", o->max_num_tokens}, {"max_blocks_per_seq", o->max_blocks_per_seq},
    };
    for (size_t i = 0; i < sizeof positive / sizeof positive[0]; i++)
        if (positive[i].v <= 0)
            return invalid(err, errlen, "model option %s must be positive, got %d",
                           positive[i].name, positive[i].v);
    if (s->num_heads % s->num_kv_heads != 0)
        return invalid(err, errlen, "num_heads (%d) must be a multiple of num_kv_heads (%d) for "
                       "grouped-query attention", s->num_heads, s->num_kv_heads);
    if (s->head_dim % 2 != 0)
        return invalid(err, errlen, "head_dim must be even for rotary embeddings, got %d",
                       s->head_dim);
    if (!(s->rope_theta > 0) || !(s->rms_eps > 0))
        return invalid(err, errlen, "rope_theta and rms_eps must be positive, got %g and %g",
                       (double)s->rope_theta, (double)s->rms_eps);
    if (o->threads < 0)
        return invalid(err, errlen, "threads must be 0 (all cores) or positive, got %d",
                       o->threads);
    /* Slots and per-row widths are int32 in batches and int in kernels. */
    if ((int64_t)o->num_blocks * o->block_size > INT32_MAX
        || (int64_t)o->max_blocks_per_seq * o->block_size > INT32_MAX
        || (int64_t)(s->num_heads + 2 * s->num_kv_heads) * s->head_dim > INT32_MAX
        || 2 * (int64_t)s->intermediate > INT32_MAX)
        return invalid(err, errlen, "KV pool or model dimensions overflow 32-bit indices");
    return 0;
}

kb_backend *kb_open(const kb_options *opt, char *err, size_t errlen)
{
    if (check_options(opt, err, errlen))
        return NULL;
    const kb_device *dev = device_of(opt->kind);
    if (!dev) {
        invalid(err, errlen, "backend cuda: this build has no CUDA backend "
                "(configure on a machine with nvcc to build one)");
        return NULL;
    }
    size_t avail;
    if (dev->memory_available(&avail, err, errlen))
        return NULL;
    const kb_shape *s = &opt->shape;
    size_t w = kb_weight_bytes(s, opt->kind);
    size_t kv = kb_kv_bytes(s, opt->kind, opt->num_blocks, opt->block_size);
    size_t ws = dev->workspace_bytes(opt);
    if (w + kv + ws > avail) {
        invalid(err, errlen, "a model of %d layers, hidden %d, vocab %d needs %.1f GiB of %s "
                "weights + %.1f GiB KV pool + %.1f GiB activations, but %s has %.1f GiB available",
                s->num_layers, s->hidden, s->vocab, w / GIB, dev->dtype, kv / GIB, ws / GIB,
                dev->memory_name, avail / GIB);
        return NULL;
    }
    return dev->open(opt, err, errlen);
}

long kb_blocks_that_fit(const kb_options *opt, double fraction, char *err, size_t errlen)
{
    const kb_device *dev = device_of(opt->kind);
    if (!dev) {
        invalid(err, errlen, "backend cuda: this build has no CUDA backend");
        return -1;
    }
    size_t avail;
    if (dev->memory_available(&avail, err, errlen))
        return -1;
    const kb_shape *s = &opt->shape;
    double room = fraction * (double)avail - (double)kb_weight_bytes(s, opt->kind)
                - (double)dev->workspace_bytes(opt);
    double block = (double)kb_kv_bytes(s, opt->kind, 1, opt->block_size);
    if (room < block) {
        invalid(err, errlen, "no room for a KV pool next to %.1f GiB of weights in %.0f%% of the "
                "%.1f GiB %s has available", kb_weight_bytes(s, opt->kind) / GIB, 100 * fraction,
                avail / GIB, dev->memory_name);
        return -1;
    }
    return room / block > INT32_MAX ? INT32_MAX : (long)(room / block);
}

void kb_close(kb_backend *b)
{
    if (b)
        b->ops->close(b);
}

const char *kb_device_name(const kb_backend *b)
{
    return b->device_name;
}

const char *kb_error(const kb_backend *b)
{
    return b->error;
}

int kb_fail(kb_backend *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->error, sizeof b->error, fmt, ap);
    va_end(ap);
    return -1;
}

int kb_forward(kb_backend *b, const kb_batch *batch, kb_timing *t)
{
    return b->ops->forward(b, batch, t);
}

int kb_get_logits(kb_backend *b, float *out)
{
    return b->ops->get_logits(b, out);
}

int kb_sample(kb_backend *b, const kb_sampling *p, int32_t *out, kb_timing *t)
{
    return b->ops->sample(b, p, out, t);
}

/* What every backend refuses before touching the device: a batch outside its limits. */
int kb_check_batch(kb_backend *b, const kb_options *o, const kb_batch *bt)
{
    int max_keys = o->max_blocks_per_seq * o->block_size;
    if (bt->num_tokens < 1 || bt->num_tokens > o->max_num_tokens)
        return kb_fail(b, "batch has %d tokens; this backend takes 1 to %d",
                       bt->num_tokens, o->max_num_tokens);
    if (bt->num_seqs < 1 || bt->num_seqs > o->max_num_seqs)
        return kb_fail(b, "batch has %d sequences; this backend takes 1 to %d",
                       bt->num_seqs, o->max_num_seqs);
    if (bt->query_start[0] != 0 || bt->query_start[bt->num_seqs] != bt->num_tokens)
        return kb_fail(b, "query_start must run from 0 to num_tokens (%d)",
                       bt->num_tokens);
    int num_slots = o->num_blocks * o->block_size;
    for (int t = 0; t < bt->num_tokens; t++) {
        if (bt->token_ids[t] < 0 || bt->token_ids[t] >= o->shape.vocab)
            return kb_fail(b, "token %d: id %d is outside the vocabulary [0, %d)", t,
                           bt->token_ids[t], o->shape.vocab);
        if (bt->positions[t] < 0)
            return kb_fail(b, "token %d: negative position %d", t, bt->positions[t]);
        if (bt->slot_mapping[t] < -1 || bt->slot_mapping[t] >= num_slots)
            return kb_fail(b, "token %d: slot %d is outside the KV pool [0, %d)", t,
                           bt->slot_mapping[t], num_slots);
    }
    for (int s = 0; s < bt->num_seqs; s++) {
        if (bt->query_start[s + 1] <= bt->query_start[s])
            return kb_fail(b, "sequence %d has no query token", s);
        int ctx = bt->context_lens[s];
        if (ctx < 0 || ctx > max_keys)
            return kb_fail(b, "sequence %d: context length %d is outside [0, %d]", s,
                           ctx, max_keys);
        const int32_t *table = bt->block_tables + (size_t)s * o->max_blocks_per_seq;
        for (int i = 0; i < (ctx + o->block_size - 1) / o->block_size; i++)
            if (table[i] < 0 || table[i] >= o->num_blocks)
                return kb_fail(b, "sequence %d: block table entry %d is block %d, "
                               "outside [0, %d)", s, i, table[i], o->num_blocks);
    }
    return 0;
}
