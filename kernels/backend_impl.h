/* What a device kind provides to the dispatch in backend.c. Private to kernels/. */
#ifndef SERVESIM_KERNELS_BACKEND_IMPL_H
#define SERVESIM_KERNELS_BACKEND_IMPL_H

#include "kernels/backend.h"

typedef struct kb_ops {
    void (*close)(kb_backend *b);
    int (*forward)(kb_backend *b, const kb_batch *batch, kb_timing *t);
    int (*get_logits)(kb_backend *b, float *out);
    int (*sample)(kb_backend *b, const kb_sampling *p, int32_t *out, kb_timing *t);
} kb_ops;

/* Every backend starts with this, so backend.c can dispatch without knowing the kind. */
struct kb_backend {
    const kb_ops *ops;
    char device_name[160];
    char error[256];
};

typedef struct kb_device {
    const char *memory_name;   /* "this machine", "this GPU": for the out-of-memory message */
    const char *dtype;         /* weight and KV precision */
    int (*memory_available)(size_t *bytes, char *err, size_t errlen);
    size_t (*workspace_bytes)(const kb_options *opt);
    /* Called only with validated options that fit in memory. */
    kb_backend *(*open)(const kb_options *opt, char *err, size_t errlen);
} kb_device;

extern const kb_device kb_cpu_device;

/* Parameters of the model, in the order the backends lay them out. */
size_t kb_param_count(const kb_shape *s);
/* Checks BATCH against the options B was opened with; -1 (and B's error) when it does not fit. */
int kb_check_batch(kb_backend *b, const kb_options *o, const kb_batch *batch);
/* Records why B's last call failed; returns -1 for the caller to return. */
int kb_fail(kb_backend *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
