#include "sim/heap.h"

#include <stdlib.h>

static bool before(const heap_node *a, const heap_node *b)
{
    return a->time < b->time || (a->time == b->time && a->seq < b->seq);
}

static void place(heap *h, heap_node *n, size_t i)
{
    h->nodes[i] = n;
    n->index = i;
}

static void sift_up(heap *h, size_t i)
{
    heap_node *n = h->nodes[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!before(n, h->nodes[parent])) break;
        place(h, h->nodes[parent], i);
        i = parent;
    }
    place(h, n, i);
}

static void sift_down(heap *h, size_t i)
{
    heap_node *n = h->nodes[i];
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= h->len) break;
        if (child + 1 < h->len && before(h->nodes[child + 1], h->nodes[child])) child++;
        if (!before(h->nodes[child], n)) break;
        place(h, h->nodes[child], i);
        i = child;
    }
    place(h, n, i);
}

void heap_init(heap *h) { *h = (heap){0}; }

void heap_free(heap *h)
{
    free(h->nodes);
    *h = (heap){0};
}

bool heap_push(heap *h, heap_node *n, double time)
{
    if (h->len == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 16;
        heap_node **nodes = realloc(h->nodes, cap * sizeof *nodes);
        if (!nodes) return false;
        h->nodes = nodes;
        h->cap = cap;
    }
    n->time = time;
    n->seq = h->next_seq++;
    place(h, n, h->len++);
    sift_up(h, n->index);
    return true;
}

heap_node *heap_peek(const heap *h) { return h->len ? h->nodes[0] : NULL; }

void heap_remove(heap *h, heap_node *n)
{
    size_t i = n->index;
    heap_node *last = h->nodes[--h->len];
    if (i == h->len) return;
    place(h, last, i);
    if (i > 0 && before(last, h->nodes[(i - 1) / 2])) sift_up(h, i);
    else sift_down(h, i);
}

heap_node *heap_pop(heap *h)
{
    heap_node *top = heap_peek(h);
    if (top) heap_remove(h, top);
    return top;
}
