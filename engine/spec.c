/* Prompt-lookup drafting and the verifier's acceptance rules (engine/spec.h). */
#include "engine/spec.h"
#include "workload/workload.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int spec_ngram_propose(const int32_t *tokens, int n, int min_n, int max_n, int k, int32_t *out)
{
    if (min_n < 1) min_n = 1;
    for (int len = max_n < n - 1 ? max_n : n - 1; len >= min_n; len--) {
        const int32_t *suffix = tokens + n - len;
        /* latest earlier start first: a recent repetition predicts best */
        for (int at = n - len - 1; at >= 0; at--) {
            if (memcmp(tokens + at, suffix, (size_t)len * sizeof *tokens) != 0) continue;
            int m = n - (at + len);
            if (m > k) m = k;
            memcpy(out, tokens + at + len, (size_t)m * sizeof *out);
            return m;
        }
    }
    return 0;
}

int spec_accept_greedy(const int32_t *draft, int d, const int32_t *target)
{
    int a = 0;
    while (a < d && draft[a] == target[a]) a++;
    return a;
}

/* SplitMix64 as a generator: the state steps by the golden ratio, each output the mix of it. */
static double uniform(uint64_t *state)
{
    double u = wl_mix_unit(*state);
    *state += 0x9e3779b97f4a7c15ULL;
    return u;
}

int spec_sampler_init(spec_sampler *s, int vocab, uint64_t seed)
{
    s->vocab = vocab;
    s->rng = seed;
    s->prob = malloc((size_t)vocab * sizeof *s->prob);
    s->pairs = malloc((size_t)vocab * sizeof *s->pairs);
    if (s->prob && s->pairs) return 0;
    spec_sampler_free(s);
    return -1;
}

void spec_sampler_free(spec_sampler *s)
{
    free(s->prob);
    free(s->pairs);
    s->prob = NULL;
    s->pairs = NULL;
}

/* the backends' order: larger logit first, lower id on ties */
static int by_logit(const void *a, const void *b)
{
    const struct spec_pair *x = a, *y = b;
    return x->value > y->value ? -1 : x->value < y->value ? 1 : x->id - y->id;
}

void spec_probabilities(spec_sampler *s, const float *logits, const kb_sampling *p)
{
    int vocab = s->vocab;
    for (int i = 0; i < vocab; i++) s->pairs[i] = (struct spec_pair){logits[i], i};
    qsort(s->pairs, (size_t)vocab, sizeof *s->pairs, by_logit);
    int n = p->top_k > 0 && p->top_k < vocab ? p->top_k : vocab;
    double maxv = s->pairs[0].value, sum = 0;
    memset(s->prob, 0, (size_t)vocab * sizeof *s->prob);
    for (int i = 0; i < n; i++)
        sum += s->prob[s->pairs[i].id] = exp(((double)s->pairs[i].value - maxv) / p->temperature);
    if (p->top_p < 1.0f) {
        double cum = 0;
        int m = 0;
        while (m < n && cum < p->top_p * sum) cum += s->prob[s->pairs[m++].id];
        for (int i = m; i < n; i++) s->prob[s->pairs[i].id] = 0;
        sum = cum;
    }
    for (int i = 0; i < vocab; i++) s->prob[i] /= sum;
}

/* A draw from S->prob, whose entries sum to TOTAL. */
static int32_t draw(spec_sampler *s, double total)
{
    double u = uniform(&s->rng) * total, acc = 0;
    int32_t last = 0;
    for (int i = 0; i < s->vocab; i++) {
        if (s->prob[i] <= 0) continue;
        acc += s->prob[i];
        last = i;
        if (u < acc) return i;
    }
    return last;
}

int spec_accept_sampled(spec_sampler *s, const float *logits, const int32_t *draft, int d, const kb_sampling *p,
                        int32_t *next)
{
    for (int j = 0; j < d; j++) {
        spec_probabilities(s, logits + (size_t)j * s->vocab, p);
        double keep = s->prob[draft[j]];
        if (uniform(&s->rng) < keep) continue;
        /* rejected: the residual max(0, p - q), with q all on the draft, is p without it */
        s->prob[draft[j]] = 0;
        *next = draw(s, 1 - keep);
        return j;
    }
    spec_probabilities(s, logits + (size_t)d * s->vocab, p);
    *next = draw(s, 1);
    return d;
}
