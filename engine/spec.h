/* Speculative decoding in the real engine: drafting by prompt lookup (n-gram), and the
 * verifier's rule for how many drafts to keep. The scheduler budgets the drafts
 * (core/sched.h); the runner lays each verifying sequence out as one query a position
 * (engine/runner.h), so the target's distribution after every draft comes out of one forward. */
#ifndef SERVESIM_ENGINE_SPEC_H
#define SERVESIM_ENGINE_SPEC_H

#include <stdint.h>
#include "kernels/backend.h"

/* Prompt lookup: the longest suffix of TOKENS[0..N) of MIN_N to MAX_N tokens that occurred
 * before, at its latest earlier occurrence, proposes the up to K tokens that followed it.
 * Writes them to OUT; returns how many (0 when no suffix recurs). */
int spec_ngram_propose(const int32_t *tokens, int n, int min_n, int max_n, int k, int32_t *out);

/* Greedy verification: TARGET[j] is the target's own (argmax) token after the first j of the
 * D drafts; drafts are kept while each equals the target's token at its place. Returns how
 * many; the token after them is TARGET[accepted]. Exactly the tokens plain greedy decoding
 * gives. */
int spec_accept_greedy(const int32_t *draft, int d, const int32_t *target);

/* What sampled verification needs: the target's probabilities for a row, scratch to sort
 * one, and its own generator (splitmix64), seeded. */
typedef struct spec_sampler {
    int vocab;
    double *prob;
    struct spec_pair { float value; int32_t id; } *pairs;
    uint64_t rng;
} spec_sampler;

int spec_sampler_init(spec_sampler *s, int vocab, uint64_t seed);
void spec_sampler_free(spec_sampler *s);

/* Sampled verification of deterministic drafts (prompt lookup proposes one token with
 * certainty): draft j is kept with the target's probability of it, p_j(x_j), under the
 * sampling settings P (temperature > 0, top-k, top-p, as the backends apply them); at the
 * first rejection the next token is drawn from p_j without x_j, renormalized, else from p_D
 * after the last draft. This is speculative sampling's rule for a one-token proposal, so
 * every emitted token follows the target's distribution exactly. LOGITS: D + 1 rows of the
 * vocabulary. Returns the drafts kept and writes the token after them to *NEXT. */
int spec_accept_sampled(spec_sampler *s, const float *logits, const int32_t *draft, int d, const kb_sampling *p,
                        int32_t *next);

/* Into S->prob: the probabilities the backends sample a row of LOGITS from under P
 * (temperature > 0): softmax at the temperature over the top-k, then the smallest prefix
 * (larger logit first, lower id on ties) whose mass reaches top-p; 0 outside the kept set. */
void spec_probabilities(spec_sampler *s, const float *logits, const kb_sampling *p);

#endif
