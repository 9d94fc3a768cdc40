/* Speculative decoding's pieces in the engine: prompt-lookup drafting and the verifier's rules
 * (greedy by hand; sampled, statistically against the target's own distribution). */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "engine/spec.h"

Test(spec, prompt_lookup_proposes_what_followed_the_longest_recurring_suffix)
{
    int32_t out[8];
    const int32_t a[] = {1, 2, 3, 4, 1, 2};
    /* "4 1 2" never came before; "1 2" did, at 0: what followed is 3 4 1 2 */
    cr_assert_eq(spec_ngram_propose(a, 6, 1, 3, 3, out), 3);
    cr_assert(out[0] == 3 && out[1] == 4 && out[2] == 1);
    cr_assert_eq(spec_ngram_propose(a, 6, 1, 3, 8, out), 4, "no further than the sequence's end");
    cr_assert_eq(out[3], 2);
    cr_assert_eq(spec_ngram_propose(a, 6, 3, 3, 3, out), 0, "no suffix of 3 recurs");
    /* the latest earlier occurrence wins: "7" came at 0 (then 8) and at 2 (then 9) */
    const int32_t b[] = {7, 8, 7, 9, 7};
    cr_assert_eq(spec_ngram_propose(b, 5, 1, 2, 2, out), 2);
    cr_assert(out[0] == 9 && out[1] == 7, "got %d %d", out[0], out[1]);
    /* a longer match is preferred to a later shorter one: "5 6" at 0, "6" alone later */
    const int32_t c[] = {5, 6, 1, 6, 2, 5, 6};
    cr_assert_eq(spec_ngram_propose(c, 7, 1, 2, 1, out), 1);
    cr_assert_eq(out[0], 1);
    cr_assert_eq(spec_ngram_propose(c, 1, 1, 2, 1, out), 0, "one token has nothing before it");
}

Test(spec, greedy_verification_keeps_the_drafts_the_target_would_have_chosen)
{
    const int32_t draft[] = {5, 6, 7}, target[] = {5, 6, 9, 1};
    cr_assert_eq(spec_accept_greedy(draft, 3, target), 2, "the third draft is 7, the target's 9");
    const int32_t all[] = {5, 6, 7, 4};
    cr_assert_eq(spec_accept_greedy(draft, 3, all), 3, "all three, then the target's 4");
    const int32_t none[] = {2, 6, 7, 4};
    cr_assert_eq(spec_accept_greedy(draft, 3, none), 0);
    cr_assert_eq(spec_accept_greedy(draft, 0, none), 0);
}

/* Logits (by id) 1, 2, -1, 0 at temperature 1: softmax e^v / (e^2 + e^1 + e^0 + e^-1); top-k 3
 * keeps the three largest (ids 1, 0, 3) and renormalizes; top-p 0.8 then keeps the smallest
 * prefix whose mass reaches 80% of theirs: ids 1 and 0 (0.665 + 0.245 of the three's 1.0 >
 * 0.8 once renormalized to 0.731 + 0.269); temperature 0.5 doubles every logit. */
Test(spec, the_verifier_samples_from_the_backends_distribution_by_hand)
{
    spec_sampler s;
    cr_assert_eq(spec_sampler_init(&s, 4, 1), 0);
    const float logits[] = {1, 2, -1, 0}; /* ids 0..3: the order is by value, not by id */
    kb_sampling p = {.temperature = 1, .top_k = 0, .top_p = 1};
    spec_probabilities(&s, logits, &p);
    double z = exp(2) + exp(1) + exp(0) + exp(-1);
    cr_assert_float_eq(s.prob[1], exp(2) / z, 1e-12);
    cr_assert_float_eq(s.prob[2], exp(-1) / z, 1e-12);
    p.top_k = 3;
    spec_probabilities(&s, logits, &p);
    z = exp(2) + exp(1) + exp(0);
    cr_assert_float_eq(s.prob[0], exp(1) / z, 1e-12);
    cr_assert_eq(s.prob[2], 0);
    p.top_p = 0.8f;
    spec_probabilities(&s, logits, &p);
    cr_assert_float_eq(s.prob[1], exp(2) / (exp(2) + exp(1)), 1e-12);
    cr_assert_float_eq(s.prob[0], exp(1) / (exp(2) + exp(1)), 1e-12);
    cr_assert(s.prob[2] == 0 && s.prob[3] == 0);
    p = (kb_sampling){.temperature = 0.5f, .top_k = 0, .top_p = 1};
    spec_probabilities(&s, logits, &p);
    cr_assert_float_eq(s.prob[1], exp(4) / (exp(4) + exp(2) + exp(0) + exp(-2)), 1e-12, "temperature halves");
    spec_sampler_free(&s);
}

/* Speculative sampling leaves the distribution as it was: over 200,000 verifications of a
 * draft x after which the target's distribution is p, the first emitted token is x with
 * probability p(x) (kept) and any other y with (1 - p(x)) p(y) / (1 - p(x)) = p(y); every
 * frequency is within 5 standard errors of p, for a likely draft and an unlikely one, with
 * top-p cutting the tail. The second token, after a kept draft, follows the next row's p. */
Test(spec, sampled_verification_leaves_the_targets_distribution_unchanged)
{
    enum { V = 6, N = 200000 };
    const float rows[2][V] = {{2.0f, 0.5f, 1.0f, -0.5f, 0.0f, 1.5f}, {0.0f, 1.0f, 2.0f, 0.0f, -1.0f, 0.5f}};
    const kb_sampling settings[] = {{.temperature = 1, .top_k = 0, .top_p = 1}, {.temperature = 0.7f, .top_k = 0, .top_p = 0.9f}};
    for (int c = 0; c < 2; c++)
        for (int32_t x = 0; x < V; x += 3) { /* x = 0 (likely), x = 3 (unlikely, or cut by top-p) */
            spec_sampler s;
            cr_assert_eq(spec_sampler_init(&s, V, 42 + x), 0);
            double p0[V], p1[V];
            spec_probabilities(&s, rows[0], &settings[c]);
            memcpy(p0, s.prob, sizeof p0);
            spec_probabilities(&s, rows[1], &settings[c]);
            memcpy(p1, s.prob, sizeof p1);
            long first[V] = {0}, second[V] = {0}, kept = 0;
            for (int i = 0; i < N; i++) {
                int32_t next, draft[1] = {x};
                int a = spec_accept_sampled(&s, &rows[0][0], draft, 1, &settings[c], &next);
                cr_assert(a == 0 || a == 1);
                first[a ? x : next]++;
                if (a) {
                    kept++;
                    second[next]++;
                } else {
                    cr_assert_neq(next, x, "a rejected draft is never the next token");
                }
            }
            for (int y = 0; y < V; y++) {
                double f = (double)first[y] / N, se = sqrt(p0[y] * (1 - p0[y]) / N) + 1e-9;
                cr_assert_lt(fabs(f - p0[y]), 5 * se, "setting %d, draft %d: token %d at %.4f, p %.4f", c, x, y, f, p0[y]);
                if (kept > 1000) {
                    double g = (double)second[y] / kept, se2 = sqrt(p1[y] * (1 - p1[y]) / kept) + 1e-9;
                    cr_assert_lt(fabs(g - p1[y]), 5 * se2, "after a kept draft: token %d at %.4f, p %.4f", y, g, p1[y]);
                }
            }
            double rate = (double)kept / N;
            cr_assert_lt(fabs(rate - p0[x]), 5 * sqrt(p0[x] * (1 - p0[x]) / N) + 1e-9, "kept %.4f, p(x) %.4f", rate, p0[x]);
            spec_sampler_free(&s);
        }
}
