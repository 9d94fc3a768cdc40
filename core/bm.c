#include "core/bm.h"

#include <stdlib.h>
#include <string.h>

/* A block with ref_count 0 sits in the free pool. With a prefix cache the pool is a queue, a
 * doubly linked list threaded through the prev/next arrays: allocation takes the head,
 * release appends to the tail, so a cached block that has been free longest is evicted first
 * (LRU), and a hit on a free block pulls it out. Without one, order does not matter and the
 * pool is a stack in the prev array, which keeps the simulator's hot path cache-friendly. */
#define NIL (-1)

typedef struct cache_entry {
    uint64_t hash;
    int32_t block;      /* NIL = empty slot */
} cache_entry;

struct bm {
    bm_config cfg;
    int32_t *ref;
    int32_t *prev, *next;
    int32_t head, tail;
    int num_free;
    int64_t evictions;      /* cached blocks handed out for other content */
    /* prefix cache */
    uint64_t *hash;         /* per block, valid when has_hash */
    uint64_t *parent_hash;  /* per block: the chain it continues, for hit confirmation */
    uint8_t *has_hash;
    int32_t *tokens;        /* per block: block_size token ids, for hit confirmation */
    cache_entry *table;     /* open addressing, linear probing, power-of-two size */
    uint32_t table_mask;
    int num_cached;
    /* block tables */
    int32_t *tables;        /* max_seqs x max_blocks_per_seq */
    int32_t *free_slots;
    int num_free_slots;
    int32_t *slot_len;      /* blocks in each open row; -1 = row closed */
    int64_t table_entries;  /* blocks in all open rows, shared ones counted per row */
};

static void queue_remove(bm *m, int b)
{
    int p = m->prev[b], n = m->next[b];
    if (p != NIL) m->next[p] = n; else m->head = n;
    if (n != NIL) m->prev[n] = p; else m->tail = p;
    m->prev[b] = m->next[b] = NIL;
    m->num_free--;
}

static void queue_append(bm *m, int b)
{
    m->prev[b] = m->tail;
    m->next[b] = NIL;
    if (m->tail != NIL) m->next[m->tail] = b; else m->head = b;
    m->tail = b;
    m->num_free++;
}

/* Chained block hash: FNV-1a over the token bytes, seeded with the parent's hash, then a
 * final avalanche. Hits are confirmed by comparing tokens, so a collision only costs a miss. */
static uint64_t block_hash(uint64_t parent, const int32_t *tok, int n)
{
    uint64_t h = parent ^ 0xcbf29ce484222325ULL;
    for (int i = 0; i < n; i++) {
        h ^= (uint32_t)tok[i];
        h *= 0x100000001b3ULL;
    }
    h ^= h >> 33; h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33; h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

static uint32_t table_index(const bm *m, uint64_t h) { return (uint32_t)h & m->table_mask; }

static int table_find(const bm *m, uint64_t h)
{
    for (uint32_t i = table_index(m, h);; i = (i + 1) & m->table_mask) {
        if (m->table[i].block == NIL) return NIL;
        if (m->table[i].hash == h) return m->table[i].block;
    }
}

static void table_insert(bm *m, uint64_t h, int b)
{
    uint32_t i = table_index(m, h);
    while (m->table[i].block != NIL) i = (i + 1) & m->table_mask;
    m->table[i].hash = h;
    m->table[i].block = b;
}

/* Backward-shift deletion keeps probe chains intact without tombstones. */
static void table_delete(bm *m, uint64_t h, int b)
{
    uint32_t i = table_index(m, h);
    while (!(m->table[i].block == b && m->table[i].hash == h)) i = (i + 1) & m->table_mask;
    for (uint32_t j = i;;) {
        m->table[i].block = NIL;
        for (;;) {
            j = (j + 1) & m->table_mask;
            if (m->table[j].block == NIL) return;
            uint32_t home = table_index(m, m->table[j].hash);
            /* move j back to i unless its home lies cyclically in (i, j] */
            if (i <= j ? (home <= i || home > j) : (home <= i && home > j)) break;
        }
        m->table[i] = m->table[j];
        i = j;
    }
}

static void pool_put(bm *m, int b)
{
    if (m->cfg.prefix_caching) queue_append(m, b);
    else m->prev[m->num_free++] = b;
}

static void uncache(bm *m, int b)
{
    table_delete(m, m->hash[b], b);
    m->has_hash[b] = 0;
    m->num_cached--;
}

/* The prefix cache's hash table: a power of two at least twice the blocks, so that linear
 * probing stays short. */
static uint32_t cache_table_size(int num_blocks)
{
    uint32_t size = 16;
    while (size < 2u * (uint32_t)num_blocks) size <<= 1;
    return size;
}

double bm_memory_bytes(const bm_config *cfg)
{
    bm m;
    double nb = cfg->num_blocks, rows = cfg->max_seqs;
    double per_block = sizeof *m.ref + sizeof *m.prev + sizeof *m.next;
    double bytes = nb * per_block + rows * (sizeof *m.free_slots + sizeof *m.slot_len);
    double full_tables = rows * cfg->max_blocks_per_seq * sizeof *m.tables;
    double touched_tables = (nb + rows * 4096.0 / sizeof *m.tables) * sizeof *m.tables;
    bytes += full_tables < touched_tables ? full_tables : touched_tables;
    if (cfg->prefix_caching)
        bytes += (double)cache_table_size(cfg->num_blocks) * sizeof *m.table +
                 nb * (sizeof *m.hash + sizeof *m.parent_hash + sizeof *m.has_hash +
                       (double)cfg->block_size * sizeof *m.tokens);
    return bytes;
}

bm *bm_create(const bm_config *cfg)
{
    bm *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->cfg = *cfg;
    int nb = cfg->num_blocks;
    m->ref = calloc(nb, sizeof *m->ref);
    m->prev = malloc(nb * sizeof *m->prev);
    m->next = malloc(nb * sizeof *m->next);
    m->tables = malloc((size_t)cfg->max_seqs * cfg->max_blocks_per_seq * sizeof *m->tables);
    m->free_slots = malloc(cfg->max_seqs * sizeof *m->free_slots);
    m->slot_len = malloc(cfg->max_seqs * sizeof *m->slot_len);
    if (cfg->prefix_caching) {
        uint32_t size = cache_table_size(nb);
        m->table_mask = size - 1;
        m->table = malloc(size * sizeof *m->table);
        m->hash = malloc(nb * sizeof *m->hash);
        m->parent_hash = malloc(nb * sizeof *m->parent_hash);
        m->has_hash = calloc(nb, 1);
        m->tokens = malloc((size_t)nb * cfg->block_size * sizeof *m->tokens);
        if (m->table)
            for (uint32_t i = 0; i < size; i++) m->table[i].block = NIL;
    }
    if (!m->ref || !m->prev || !m->next || !m->tables || !m->free_slots || !m->slot_len ||
        (cfg->prefix_caching && (!m->table || !m->hash || !m->parent_hash || !m->has_hash || !m->tokens))) {
        bm_free(m);
        return NULL;
    }
    m->head = m->tail = NIL;
    for (int b = 0; b < nb; b++) pool_put(m, m->cfg.prefix_caching ? b : nb - 1 - b);
    for (int s = 0; s < cfg->max_seqs; s++) {
        m->free_slots[s] = cfg->max_seqs - 1 - s;
        m->slot_len[s] = -1;
    }
    m->num_free_slots = cfg->max_seqs;
    return m;
}

void bm_free(bm *m)
{
    if (!m) return;
    free(m->ref); free(m->prev); free(m->next); free(m->tables); free(m->free_slots); free(m->slot_len);
    free(m->table); free(m->hash); free(m->parent_hash); free(m->has_hash); free(m->tokens);
    free(m);
}

int bm_num_free(const bm *m) { return m->num_free; }
int bm_num_cached(const bm *m) { return m->num_cached; }
int64_t bm_table_entries(const bm *m) { return m->table_entries; }
int bm_block_size(const bm *m) { return m->cfg.block_size; }
bool bm_prefix_caching(const bm *m) { return m->cfg.prefix_caching; }
int bm_ref_count(const bm *m, int b) { return m->ref[b]; }

static int32_t *row(const bm *m, const request *r)
{
    return m->tables + (size_t)r->seq_slot * m->cfg.max_blocks_per_seq;
}

const int32_t *bm_block_table(const bm *m, const request *r) { return row(m, r); }

bool bm_seq_open(bm *m, request *r)
{
    if (r->seq_slot >= 0) return true;
    if (m->num_free_slots == 0) return false;
    r->seq_slot = m->free_slots[--m->num_free_slots];
    m->slot_len[r->seq_slot] = 0;
    r->num_blocks = 0;
    r->num_hashed_blocks = 0;
    r->last_hash = 0;
    return true;
}

/* Hits never cover the whole prompt: the last prompt token is always computed, so the step
 * that finishes the prefill has logits to sample from. */
static int max_hit_blocks(const bm *m, const request *r)
{
    return (r->prompt_len - 1) / m->cfg.block_size;
}

static bool block_matches(const bm *m, int b, uint64_t parent, const int32_t *tok)
{
    return m->parent_hash[b] == parent &&
           memcmp(m->tokens + (size_t)b * m->cfg.block_size, tok,
                  m->cfg.block_size * sizeof *tok) == 0;
}

int bm_count_hits(bm *m, const request *r)
{
    if (!m->cfg.prefix_caching || r->num_blocks > 0) return 0;
    int bs = m->cfg.block_size, limit = max_hit_blocks(m, r), hits = 0;
    uint64_t parent = 0;
    while (hits < limit) {
        const int32_t *tok = r->prompt + (size_t)hits * bs;
        uint64_t h = block_hash(parent, tok, bs);
        int b = table_find(m, h);
        if (b == NIL || !block_matches(m, b, parent, tok)) break;
        parent = h;
        hits++;
    }
    return hits;
}

static int blocks_needed(const bm *m, const request *r, int num_hit_blocks, int num_tokens)
{
    int have = r->num_blocks > 0 ? r->num_blocks : num_hit_blocks;
    int want = bm_blocks_for(num_tokens, m->cfg.block_size);
    return want > have ? want - have : 0;
}

/* Hit blocks nobody holds are counted in num_free but cannot also serve as fresh blocks. */
static int free_hit_blocks(const bm *m, const request *r, int num_hit_blocks)
{
    int bs = m->cfg.block_size, n = 0;
    uint64_t parent = 0;
    for (int i = 0; i < num_hit_blocks; i++) {
        uint64_t h = block_hash(parent, r->prompt + (size_t)i * bs, bs);
        if (m->ref[table_find(m, h)] == 0) n++;
        parent = h;
    }
    return n;
}

static int take_free_block(bm *m)
{
    int b;
    if (m->cfg.prefix_caching) {
        b = m->head;
        queue_remove(m, b);
        if (m->has_hash[b]) {
            uncache(m, b);
            m->evictions++;
        }
    } else {
        b = m->prev[--m->num_free];
    }
    m->ref[b] = 1;
    return b;
}

static void share_hits(bm *m, request *r, int num_hit_blocks)
{
    int bs = m->cfg.block_size;
    int32_t *t = row(m, r);
    uint64_t parent = 0;
    for (int i = 0; i < num_hit_blocks; i++) {
        uint64_t h = block_hash(parent, r->prompt + (size_t)i * bs, bs);
        int b = table_find(m, h);
        if (m->ref[b]++ == 0) queue_remove(m, b);
        t[i] = b;
        parent = h;
    }
    r->num_blocks = num_hit_blocks;
    r->num_hashed_blocks = num_hit_blocks;
    r->last_hash = parent;
}

/* Registers R's full prompt blocks up to NUM_TOKENS. A block whose hash is already cached
 * (another sequence computed the same prefix concurrently) stays private. */
void bm_register_blocks(bm *m, request *r, int num_tokens)
{
    int bs = m->cfg.block_size;
    int filled = num_tokens < r->prompt_len ? num_tokens : r->prompt_len;
    const int32_t *t = row(m, r);
    while ((r->num_hashed_blocks + 1) * bs <= filled) {
        int i = r->num_hashed_blocks;
        const int32_t *tok = r->prompt + (size_t)i * bs;
        uint64_t h = block_hash(r->last_hash, tok, bs);
        int b = t[i];
        if (!m->has_hash[b] && table_find(m, h) == NIL) {
            m->hash[b] = h;
            m->parent_hash[b] = r->last_hash;
            m->has_hash[b] = 1;
            memcpy(m->tokens + (size_t)b * bs, tok, bs * sizeof *tok);
            table_insert(m, h, b);
            m->num_cached++;
        }
        r->last_hash = h;
        r->num_hashed_blocks++;
    }
}

bool bm_allocate_blocks(bm *m, request *r, int num_hit_blocks, int num_tokens)
{
    if (r->num_blocks > 0) num_hit_blocks = 0;
    int fresh = blocks_needed(m, r, num_hit_blocks, num_tokens);
    if (fresh == 0 && num_hit_blocks == 0) {
        if (m->cfg.prefix_caching && r->prompt) bm_register_blocks(m, r, num_tokens);
        return true;
    }
    int usable = m->num_free - (num_hit_blocks ? free_hit_blocks(m, r, num_hit_blocks) : 0);
    if (fresh > usable || bm_blocks_for(num_tokens, m->cfg.block_size) > m->cfg.max_blocks_per_seq)
        return false;
    if (num_hit_blocks) share_hits(m, r, num_hit_blocks);
    int32_t *t = row(m, r);
    for (int i = 0; i < fresh; i++) t[r->num_blocks++] = take_free_block(m);
    m->table_entries += r->num_blocks - m->slot_len[r->seq_slot];
    m->slot_len[r->seq_slot] = r->num_blocks;
    if (m->cfg.prefix_caching && r->prompt) bm_register_blocks(m, r, num_tokens);
    return true;
}

/* Tail blocks are freed first so they sit nearer the head of the queue: a sequence's
 * prefix, the part most likely shared, is evicted last. */
void bm_release(bm *m, request *r)
{
    if (r->seq_slot < 0) return;
    const int32_t *t = row(m, r);
    for (int i = r->num_blocks - 1; i >= 0; i--)
        if (--m->ref[t[i]] == 0) pool_put(m, t[i]);
    m->table_entries -= r->num_blocks;
    r->num_blocks = 0;
    r->num_hashed_blocks = 0;
    r->last_hash = 0;
    m->slot_len[r->seq_slot] = -1;
    m->free_slots[m->num_free_slots++] = r->seq_slot;
    r->seq_slot = -1;
}

void bm_truncate(bm *m, request *r, int num_tokens)
{
    if (r->seq_slot < 0) return;
    int keep = bm_blocks_for(num_tokens, m->cfg.block_size);
    /* a prefix-cached block is a full prompt block: never past the tokens a sequence keeps */
    if (keep < r->num_hashed_blocks) keep = r->num_hashed_blocks;
    if (keep >= r->num_blocks) return;
    const int32_t *t = row(m, r);
    for (int i = r->num_blocks - 1; i >= keep; i--)
        if (--m->ref[t[i]] == 0) pool_put(m, t[i]);
    m->table_entries -= r->num_blocks - keep;
    r->num_blocks = keep;
    m->slot_len[r->seq_slot] = keep;
}

/* Every reference is a block-table entry of an open row: none leaked, none lost. */
static const char *check_references(const bm *m)
{
    int32_t *count = calloc(m->cfg.num_blocks, sizeof *count);
    if (!count) return "out of memory while checking references";
    const char *bad = NULL;
    for (int s = 0; s < m->cfg.max_seqs && !bad; s++)
        for (int i = 0; i < m->slot_len[s]; i++) {
            int b = m->tables[(size_t)s * m->cfg.max_blocks_per_seq + i];
            if (b < 0 || b >= m->cfg.num_blocks) { bad = "a block table holds an invalid block"; break; }
            count[b]++;
        }
    for (int b = 0; b < m->cfg.num_blocks && !bad; b++)
        if (count[b] != m->ref[b]) bad = "a reference count differs from the block tables holding it";
    free(count);
    return bad;
}

static const char *check_pool(const bm *m)
{
    if (!m->cfg.prefix_caching) {
        for (int i = 0; i < m->num_free; i++)
            if (m->ref[m->prev[i]] != 0) return "a block in the free stack has a nonzero reference count";
        return NULL;
    }
    int queued = 0;
    for (int b = m->head, prev = NIL; b != NIL; prev = b, b = m->next[b]) {
        if (m->ref[b] != 0) return "a block in the free queue has a nonzero reference count";
        if (m->prev[b] != prev) return "free queue links are inconsistent";
        if (++queued > m->cfg.num_blocks) return "free queue has a cycle";
    }
    return queued == m->num_free ? NULL : "free block count differs from the free queue length";
}

const char *bm_check(const bm *m)
{
    const char *bad = check_pool(m);
    if (bad) return bad;
    int unreferenced = 0, cached = 0;
    for (int b = 0; b < m->cfg.num_blocks; b++) {
        if (m->ref[b] < 0) return "a block has a negative reference count";
        unreferenced += m->ref[b] == 0;
        if (m->cfg.prefix_caching && m->has_hash[b]) {
            cached++;
            if (table_find(m, m->hash[b]) != b) return "a cached block is missing from the hash table";
        }
    }
    if (unreferenced != m->num_free) return "blocks with no reference are not all free";
    if (cached != m->num_cached) return "cached block count is wrong";
    int64_t entries = 0;
    for (int sl = 0; sl < m->cfg.max_seqs; sl++) entries += m->slot_len[sl] > 0 ? m->slot_len[sl] : 0;
    if (entries != m->table_entries) return "block table entry count is wrong";
    return check_references(m);
}

int64_t bm_evictions(const bm *m) { return m->evictions; }
