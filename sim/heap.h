/* An intrusive binary min-heap of events ordered by (time, insertion number), so events at the
 * same time pop in the order they were pushed: the simulator stays deterministic. */
#ifndef SERVESIM_SIM_HEAP_H
#define SERVESIM_SIM_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct heap_node {
    double time;
    uint64_t seq;      /* insertion number: the tie-breaker */
    size_t index;      /* position in the heap array, maintained by the heap */
} heap_node;

typedef struct heap {
    heap_node **nodes;
    size_t len, cap;
    uint64_t next_seq;
} heap;

void heap_init(heap *h);
void heap_free(heap *h);
bool heap_push(heap *h, heap_node *n, double time);
heap_node *heap_peek(const heap *h);
heap_node *heap_pop(heap *h);
void heap_remove(heap *h, heap_node *n);
static inline bool heap_empty(const heap *h) { return h->len == 0; }

#endif
