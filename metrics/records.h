/* Per-request and per-step records: one schema for the real engine and the simulator. */
#ifndef SERVESIM_METRICS_RECORDS_H
#define SERVESIM_METRICS_RECORDS_H

#include <stdbool.h>
#include <stdint.h>

/* Why a request ended. Every request of a workload ends with one of these. */
typedef enum stop_reason {
    STOP_NONE = 0,      /* not finished (never written for a completed run) */
    STOP_LENGTH,        /* generated exactly its target output length */
    STOP_TOO_LONG,      /* prompt + output longer than max_model_len */
    STOP_KV_CAPACITY,   /* needs more KV slots than the whole pool holds */
    STOP_ABORTED,       /* its client went away (a server's request) */
    STOP_ERROR,         /* the server answered with an error or not at all (a load client's request) */
    STOP_HANDOFF,       /* transient, never in a record: prefilled on a prefill instance, its KV
                         * leaves for a decode instance (disaggregated serving) */
} stop_reason;

const char *stop_reason_name(stop_reason r);

typedef struct req_record {
    int64_t request_id;
    double arrival_time;           /* seconds, when the request was sent */
    double scheduled_prefill_time; /* first time a step computed any of its tokens; NAN if never */
    double first_token_time;       /* NAN if rejected */
    double finish_time;            /* end of the step that produced its last token, or rejection time */
    int prompt_len;
    int cached_prompt_len;         /* prompt tokens served by the prefix cache at first schedule */
    int output_len;                /* tokens actually generated */
    int num_preemptions;
    stop_reason stop;
    bool warmup;                   /* run, but left out of every statistic */
    int draft_tokens;              /* speculative decoding: its drafts verified */
    int accepted_tokens;           /* ... and kept */
} req_record;

typedef struct step_record {
    int64_t step_id;
    double start_time, end_time;   /* seconds */
    int num_prefill_tokens;        /* new prompt tokens computed this step (not padding) */
    int num_prefill_seqs;
    int num_decode_seqs;
    int num_outputs;               /* tokens emitted to users this step */
    int num_batched_tokens;        /* every token through the model, padding included */
    int num_padding_tokens;
    bool chunked;                  /* some prefill in this step did not finish its prompt */
    int num_free_blocks;
    int num_prefix_cached_blocks;
    int waiting, running, prefilling;
    int64_t prefix_hits, prefix_queries;   /* tokens, during this step's scheduling */
    int64_t kv_allocated_slots, kv_unused_slots; /* over running sequences, after scheduling */
    int num_preempted;
    int num_kv_delayed;            /* requests first held back for lack of KV blocks this step */
    int64_t prefix_evictions;      /* cached prefix blocks evicted this step */
    /* Measured by the real engine only; NAN in the simulator. */
    double schedule_time, prepare_time, forward_time, sample_time;
    /* The real engine under validation: what the cost model says this very batch costs. */
    double predicted_time;
    /* Which instance ran it (deployment's replicas, prefill instances first): 0 for one. */
    int instance;
    /* Speculative decoding: sequences verifying drafts, their draft tokens, how many were
     * accepted, and the seconds of the step that drafting took (in the simulator: priced
     * apart, inside end_time - start_time). */
    int num_spec_seqs, num_draft_tokens, num_accepted_tokens;
    double draft_time;
} step_record;

#endif
