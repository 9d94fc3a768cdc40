/* API servers in front of the engine, as the simulator prices them (the scenario's
 * [frontend]). One row per preset in SIM_FRONTENDS: its name, its host time per request
 * (intake: HTTP, chat template, tokenization, hand-off), per engine step with tokens (its
 * output received and unpacked) and per streamed chunk (detokenized, formatted, sent), and
 * where the numbers come from. `servesim keys`, the key's choices and the lookup read it. */
#ifndef SERVESIM_SIM_FRONTEND_H
#define SERVESIM_SIM_FRONTEND_H

#include <stdbool.h>

/* vllm: the API server process's CPU time, fitted over 16 runs of `servesim load` against a
 * real vLLM 0.20.2 OpenAI server (V1 engine, CPU build, a tiny model) at 1-64 streams, by
 * scripts/vllm-frontend.sh on the project's 2-vCPU Xeon VM on 2026-12-02: the fit in
 * docs/data/vllm-frontend.json, to two figures (test_sim checks they agree). The process
 * does the same work in front of a GPU (docs/cost-model.md, "The API server"). */
#define SIM_FRONTENDS(X)                                                                           \
    X("none", 0.0, 0.0, 0.0, "no API server: tokens reach their clients as their step ends")      \
    X("vllm", 1.8, 0.30, 0.044, "vLLM 0.20.2's OpenAI server, measured (scripts/vllm-frontend.sh)")

#define SIM_FRONTEND_NAME_(name, request_ms, step_ms, token_ms, help) "|" name
#define FRONTEND_CHOICES (SIM_FRONTENDS(SIM_FRONTEND_NAME_) + 1)

typedef struct frontend_preset {
    const char *name;
    double request_ms, step_ms, token_ms;
    const char *help;
} frontend_preset;

/* Most API server processes an instance may have (frontend.servers), and as the key table's
 * text. */
#define FRONTEND_MAX_SERVERS 64
#define FRONTEND_TEXT_(x) #x
#define FRONTEND_TEXT(x) FRONTEND_TEXT_(x)

/* The times a run uses, in seconds (all 0: no API server), and how many API server processes
 * share the engine (0 or 1: one), as vLLM's --api-server-count. */
typedef struct sim_frontend {
    double request_s, step_s, token_s;
    int servers;
} sim_frontend;

/* Whether F puts an API server in front (some time > 0), and how many processes it runs. */
static inline bool sim_frontend_on(const sim_frontend *f)
{
    return f->request_s > 0 || f->step_s > 0 || f->token_s > 0;
}

static inline int sim_frontend_servers(const sim_frontend *f)
{
    return f->servers > 1 ? f->servers : 1;
}

/* The preset called NAME, or NULL. */
const frontend_preset *frontend_preset_find(const char *name);

#endif
