/* Every scenario key, once: section, key, type, default, minimum, maximum, help.
 * `servesim keys`, the defaults and the validation all read this table. Types: INT, NUM,
 * BOOL, TEXT, DIST (a length distribution), CHOICE (the minimum column lists the choices),
 * MODEL and HW (preset names), PATH (relative to the scenario file). */
#define SCENARIO_KEYS(X) \
    X(model, preset, MODEL, "llama-3-8b", "", "", "model shapes, one of the presets listed at the top of `servesim keys`") \
    X(model, num_layers, INT, "0", "0", "1000", "override the preset's layer count (0 = keep)") \
    X(model, hidden, INT, "0", "0", "65536", "override the model dimension (0 = keep)") \
    X(model, num_heads, INT, "0", "0", "1024", "override the query heads (0 = keep)") \
    X(model, num_kv_heads, INT, "0", "0", "1024", "override the KV heads (0 = keep)") \
    X(model, head_dim, INT, "0", "0", "1024", "override the head dimension (0 = keep)") \
    X(model, intermediate, INT, "0", "0", "1000000", "override the MLP dimension (0 = keep)") \
    X(model, vocab, INT, "0", "0", "4000000", "override the vocabulary size (0 = keep)") \
    X(model, max_position, INT, "0", "0", "16777216", "override the model's context length, the longest scheduler.max_model_len it takes (0 = keep; a RoPE-scaled checkpoint's)") \
    X(model, num_experts, INT, "0", "0", "4096", "override the experts of a mixture of experts per layer (0 = keep; model.intermediate is then one expert's)") \
    X(model, experts_per_token, INT, "0", "0", "4096", "override the experts the router sends each token to (0 = keep)") \
    X(model, dtype, CHOICE, "bf16", "bf16|fp16|fp32", "", "weight and KV element type") \
    X(model, quantization, CHOICE, "none", "none|fp8", "", "fp8: the linear layers' weights and activations in FP8, as vLLM's --quantization fp8 on an FP8 checkpoint (per-tensor scales, static for the activations; embedding and LM head stay model.dtype)") \
    X(hardware, preset, HW, "h200", "", "", "accelerator, one of the presets listed at the top of `servesim keys`") \
    X(hardware, cost_model, CHOICE, "measured", "measured|roofline", "", "measured: the GPU's cost table from timed vLLM kernels (costs/), when one covers the model; roofline: datasheet peaks x efficiencies") \
    X(hardware, vllm_version, TEXT, "", "", "", "vLLM version of the measured table (empty: the newest there is for the GPU)") \
    X(hardware, cost_table, PATH, "", "", "", "a cost table file (servesim calibrate, or one of costs/); replaces both") \
    X(hardware, peak_tflops, NUM, "0", "0", "100000", "roofline: dense bf16 TFLOP/s (0 = preset)") \
    X(hardware, fp8_tflops, NUM, "0", "0", "100000", "roofline: dense FP8 TFLOP/s, the rate of the linear layers with model.quantization = fp8 (0 = preset; a preset without FP8, the A100 and the B60, computes them at peak_tflops)") \
    X(hardware, mem_bandwidth_gbs, NUM, "0", "0", "100000", "roofline: memory bandwidth, GB/s (0 = preset)") \
    X(hardware, mem_gib, NUM, "0", "0", "100000", "device memory, GiB (0 = preset)") \
    X(hardware, compute_efficiency, NUM, "0", "0", "1", "roofline: fraction of peak FLOP/s GEMMs reach (0 = fitted to the GPU's measured tables, `servesim presets`; with model.quantization = fp8, to its FP8 tables, `servesim roofline-fit`)") \
    X(hardware, memory_efficiency, NUM, "0", "0", "1", "roofline: fraction of peak bandwidth reads reach (0 = fitted)") \
    X(hardware, attention_efficiency, NUM, "0", "0", "1", "roofline: fraction of peak FLOP/s prefill attention reaches (0 = fitted)") \
    X(hardware, step_overhead_ms, NUM, "-1", "-1", "10000", "fixed cost of every step (scheduling, launches, host work); -1 = the cost table's, or the roofline's fit") \
    X(hardware, host_us_per_seq, NUM, "-1", "-1", "100000", "vLLM's host work per sequence of a step (scheduling, input preparation, each sampled token's bookkeeping), microseconds: with scheduler.async_scheduling a step costs the larger of it and the GPU's work, without it the sum (-1 = the cost table's: vLLM's, measured, for tables of the kernel database and for the roofline, docs/cost-model.md; none for servesim calibrate's)") \
    X(hardware, link_gbs, NUM, "0", "0", "100000", "tensor parallelism: GPU-to-GPU bandwidth per direction, GB/s (0 = preset: NVLink, else PCIe)") \
    X(hardware, allreduce_us, NUM, "-1", "-1", "100000", "tensor parallelism: fixed time of each all-reduce, microseconds (-1 = preset)") \
    X(hardware, gpu_memory_utilization, NUM, "0.9", "0.01", "1", "fraction of device memory for weights and KV") \
    X(kv, block_size, INT, "16", "1", "1024", "token slots per KV block") \
    X(kv, cache_dtype, CHOICE, "auto", "auto|fp8", "", "auto: model.dtype; fp8: one byte a KV element, as vLLM's --kv-cache-dtype fp8") \
    X(kv, num_blocks, INT, "0", "0", "1000000000", "KV blocks (0 = what memory holds after the weights and kv.reserve_gib)") \
    X(kv, reserve_gib, NUM, "-1", "-1", "100000", "memory each GPU holds apart from the weights and the KV cache, GiB: the activation peak and non-PyTorch memory vLLM's profile run measures and leaves out of the pool (-1 = estimated from the model, scheduler.max_num_seqs and the token budget, docs/cost-model.md; 0 = none; a GPU the weights nearly fill may have no room left for KV once it is taken)") \
    X(scheduler, policy, CHOICE, "paged", SCHED_POLICY_CHOICES, "", "serving policy (docs/method.md section 5)") \
    X(scheduler, prefix_caching, BOOL, "on", "", "", "share full prompt blocks by hash (paged only; on as in vLLM's V1 engine, the older policies without it unless asked, which they refuse; it costs the simulator 2-6x the time per request even where no prompt shares a block)") \
    X(scheduler, chunked_prefill, BOOL, "on", "", "", "decodes first, prefill chunks fill the budget (paged only; on as in vLLM's V1 engine, the older policies without it unless asked, which they refuse); off: prefills first, each prompt whole, as vLLM's V0 engine") \
    X(scheduler, max_num_seqs, INT, "0", "0", "65536", "most sequences in one step (0 = vLLM's default for the GPU: 1024 on GPUs of 70 GiB or more but the A100, 256 on the others, at most the token budget)") \
    X(scheduler, max_num_batched_tokens, INT, "0", "0", "16777216", "token budget per step (0 = vLLM's default for the GPU: 8192 on GPUs of 70 GiB or more but the A100, 2048 on the others; without chunked prefill at least max_model_len; at most max_num_seqs x max_model_len)") \
    X(scheduler, chunk_size, INT, "0", "0", "16777216", "the most prompt tokens one request computes in a step, with chunked_prefill on (0 = the budget left, vLLM's default)") \
    X(scheduler, max_model_len, INT, "0", "0", "16777216", "longest prompt + output (0 = the model's context)") \
    X(scheduler, async_scheduling, BOOL, "on", "", "", "simulator: vLLM's async scheduling (--async-scheduling, on by default in vLLM releases since early 2026 (vLLM PR 27614); earlier ones schedule synchronously unless given it): the host schedules and prepares the next step while the GPU runs this one, so its per-sequence work (hardware.host_us_per_seq) only costs what exceeds the GPU's, and a request that comes while a step runs joins the step after the next, the next being already scheduled; off: the two add up, and such a request joins the next step (as servesim's own engine, which schedules synchronously). With speculative decoding it is off unless set, as in vLLM, and n-gram lookup refuses it") \
    X(speculative, num_tokens, INT, "0", "0", "16", "speculative decoding: draft tokens each running sequence proposes and the target verifies per step, as vLLM's num_speculative_tokens (0 = off; paged policy)") \
    X(speculative, method, CHOICE, "ngram", "ngram|draft", "", "ngram: prompt lookup in the sequence's own tokens (no model; free in the simulator); draft: speculative.draft_model drafts (the simulator prices its forwards by its own cost model)") \
    X(speculative, draft_model, MODEL, "llama-3.2-1b", "", "", "the draft model (method = draft): a preset with the target's vocabulary") \
    X(speculative, disable_by_batch_size, INT, "0", "0", "1000000", "no drafts in a step that starts with at least this many running sequences, where verification costs more than it saves (vLLM's disable_by_batch_size; 0 = always draft)") \
    X(speculative, prompt_lookup_min, INT, "3", "1", "64", "method = ngram: the shortest suffix of a sequence looked up in its earlier tokens (vLLM's prompt_lookup_min)") \
    X(speculative, prompt_lookup_max, INT, "5", "1", "64", "method = ngram: the longest suffix looked up first (vLLM's prompt_lookup_max)") \
    X(speculative, acceptance_spread, NUM, "0", "0", "0.5", "simulator: each request's own acceptance rate is drawn from a Beta distribution with mean acceptance_rate and this standard deviation (0 = every request acceptance_rate; a trace's acceptance_rate column overrides both)") \
    X(speculative, acceptance_rate, NUM, "0.7", "0", "1", "simulator: the chance each draft token is accepted once those before it were (drawn per token, reproducibly from run.seed); the engine's is what its verifier measures") \
    X(deployment, tensor_parallel, INT, "1", "1", "8", "GPUs per instance within one node (up to 8), splitting heads, MLP and vocabulary as vLLM's --tensor-parallel-size (weights and KV per GPU divide; all-reduces over the node's links join them)") \
    X(deployment, allreduce_fusion, CHOICE, "auto", "auto|on|off", "", "vLLM's fused all-reduce + residual add + RMSNorm (its compilation pass fuse_allreduce_rms, FlashInfer's kernels) for steps whose all-reduce is at most deployment.allreduce_fusion_max_mb: auto = on where the measured table prices it (H100, H200, B200, B300, GB200, GB300 at tensor_parallel > 1: vLLM's default there since vLLM PR 34299, 2026-02), off elsewhere; off = vLLM's custom all-reduce and a separate norm (vLLM before 2026, or -O1)") \
    X(deployment, allreduce_fusion_max_mb, NUM, "-1", "-1", "1024", "the largest all-reduce fused, MiB a GPU (tokens x hidden x 2 bytes; vLLM's pass_config.fi_allreduce_fusion_max_size_mb or VLLM_FLASHINFER_ALLREDUCE_FUSION_THRESHOLDS_MB; -1 = vLLM's default for the GPU and tensor_parallel, from the measured table: Hopper 64/2/0.5 MB at 2/4/8 GPUs, B200 64/32/1, B300 64/64/4)") \
    X(deployment, replicas, INT, "1", "1", "4096", "instances of the model, each with its own scheduler and KV pool, behind one router") \
    X(deployment, prefill_instances, INT, "0", "0", "4096", "disaggregated serving: instances that only prefill (and emit the first token); 0 = aggregated") \
    X(deployment, decode_instances, INT, "0", "0", "4096", "disaggregated serving: instances that decode what the prefill instances hand over") \
    X(deployment, kv_transfer_gbs, NUM, "50", "0.001", "100000", "disaggregated: KV bandwidth per GPU, one direction, GB/s (50: a 400 Gb/s NIC per GPU; NVLink within a node: ~450)") \
    X(deployment, kv_transfer_latency_ms, NUM, "0.1", "0", "100000", "disaggregated: fixed time of each request's KV transfer, ms (assumed: an RDMA round trip and its setup)") \
    X(deployment, router, CHOICE, "least_outstanding", ROUTER_CHOICES, "", "which replica a request goes to (sim/router.h: least_outstanding, round_robin, least_kv, prefix_aware)") \
    X(frontend, preset, CHOICE, "none", FRONTEND_CHOICES, "", "simulator: the API server in front of the engine, one event loop that takes in each request (the scheduler sees it after) and sends each step's tokens (the clients see them after), in the order they come; the engine does not wait for it (none: no API server; vllm: vLLM 0.20.2's, measured, docs/cost-model.md)") \
    X(frontend, request_ms, NUM, "-1", "-1", "100000", "simulator: the API server's time per request (HTTP, chat template, tokenization, hand-off; -1 = the preset's)") \
    X(frontend, step_ms, NUM, "-1", "-1", "100000", "simulator: the API server's time per engine step with tokens (its output received and unpacked; -1 = the preset's)") \
    X(frontend, token_ms, NUM, "-1", "-1", "100000", "simulator: the API server's time per streamed chunk, one request's tokens of a step (detokenized, formatted, sent; -1 = the preset's)") \
    X(frontend, servers, INT, "1", "1", FRONTEND_TEXT(FRONTEND_MAX_SERVERS), "simulator: API server processes sharing the engine, as vLLM's --api-server-count: request i is taken in and streamed by server i mod servers, each its own event loop") \
    X(workload, num_requests, INT, "1000", "1", "100000000", "measured requests (a trace is replayed whole unless this is set; then it is cut to its earliest this many)") \
    X(workload, arrival, CHOICE, "poisson", "all_at_once|poisson|gamma|constant|trace|closed", "", "how requests are sent") \
    X(workload, rate, NUM, "10", "0.000001", "10000000", "requests/s for poisson, gamma, constant") \
    X(workload, burstiness, NUM, "1", "0.001", "1000", "gamma shape: < 1 burstier than poisson, > 1 steadier") \
    X(workload, concurrency, INT, "16", "1", "1000000", "clients of the closed loop") \
    X(workload, max_concurrency, INT, "0", "0", "1000000", "cap on requests in flight for open-loop arrivals (0 = none)") \
    X(workload, prompt_len, DIST, "lognormal:750:0.8:7000", "", "", "prompt tokens after any shared prefix") \
    X(workload, output_len, DIST, "lognormal:150:0.8:1000", "", "", "output tokens, generated exactly (EOS ignored)") \
    X(workload, shared_prefix_len, INT, "0", "0", "1000000", "tokens of each shared prefix") \
    X(workload, num_prefixes, INT, "1", "1", "1000000", "distinct shared prefixes") \
    X(workload, prefix_fraction, NUM, "1", "0", "1", "fraction of requests that start with a shared prefix") \
    X(workload, trace, PATH, "", "", "", "CSV to replay: columns TIMESTAMP,ContextTokens,GeneratedTokens (Azure) or arrival_time,prompt_len,output_len, and optionally acceptance_rate (each request's own, for speculative decoding; every row then needs one in [0, 1]); others ignored; rows in any order, taken by time; a run's requests.csv replays, its warmup column kept and rows that did not finish left out") \
    X(workload, trace_time_scale, NUM, "1", "0.000001", "1000000", "trace gaps are multiplied by this") \
    X(slo, ttft_ms, NUM, "0", "0", "1e9", "goodput objective on TTFT (0 = none)") \
    X(slo, tpot_ms, NUM, "0", "0", "1e9", "goodput objective on TPOT (0 = none)") \
    X(slo, e2el_ms, NUM, "0", "0", "1e9", "goodput objective on end-to-end latency (0 = none)") \
    X(engine, backend, CHOICE, "cpu", "cpu|cuda", "", "device the real engine runs on") \
    X(engine, threads, INT, "0", "0", "1024", "CPU backend threads (0 = all cores)") \
    X(engine, kv_gib, NUM, "1", "0.0001", "100000", "real engine's KV pool when kv.num_blocks = 0") \
    X(engine, weight_seed, INT, "1", "0", "2147483647", "seed of the model's random weights") \
    X(engine, temperature, NUM, "0", "0", "100", "sampling temperature (0 = greedy)") \
    X(engine, top_k, INT, "0", "0", "10000000", "sample among the k most likely tokens (0 = all)") \
    X(engine, top_p, NUM, "1", "0.000001", "1", "sample within this probability mass (1 = all)") \
    X(validate, rates, TEXT, "", "", "", "arrival rates to validate at, comma-separated (empty: workload.rate)") \
    X(validate, policies, TEXT, "", "", "", "policies to validate, comma-separated (empty: scheduler.policy)") \
    X(validate, engine_runs, INT, "1", "1", "9", "times each point is served on the engine; errors are against the median run, the report shows the runs' spread") \
    X(validate, max_median_error, NUM, "0.25", "0", "1000", "largest |relative error| allowed on P50 latencies") \
    X(validate, max_p99_error, NUM, "0.25", "0", "1000", "largest |relative error| allowed on P99 latencies") \
    X(validate, max_throughput_error, NUM, "0.25", "0", "1000", "largest |relative error| allowed on throughputs") \
    X(validate, max_replay_error, NUM, "0.01", "0", "1000", "largest |relative error| allowed on P50 and P99 latencies when each engine run is replayed with its own step times") \
    X(run, seed, INT, "0", "0", "2147483647", "seed of every random draw") \
    X(run, warmup_requests, INT, "0", "0", "100000000", "requests sent first and left out of the statistics") \
    X(run, percentiles, TEXT, "99.9", "", "", "percentiles every latency reports besides P50, P90 and P99, comma-separated in (0, 100], at most 6 decimals (vLLM's --metric-percentiles; also --percentiles); summary.json keys pQ_NAME_ms") \
    X(run, token_times, BOOL, "off", "", "", "also write tokens.csv: every token's time (request_id, token_index, time), as `servesim load` does; large for long runs")

/* vLLM's engine options and the scenario keys that model them: vLLM's name as a user would
 * write it (matched with '-' or '_', with or without leading dashes or a section), how
 * `servesim keys` shows it, and the key. A --set or a file line that uses vLLM's name is
 * answered with servesim's, rather than aliased: one name per setting in files, summaries
 * and docs. */
#define VLLM_OPTIONS(X) \
    X("tensor-parallel-size", "--tensor-parallel-size", deployment, tensor_parallel) \
    X("data-parallel-size", "--data-parallel-size", deployment, replicas) \
    X("max-num-seqs", "--max-num-seqs", scheduler, max_num_seqs) \
    X("max-num-batched-tokens", "--max-num-batched-tokens", scheduler, max_num_batched_tokens) \
    X("max-model-len", "--max-model-len", scheduler, max_model_len) \
    X("long-prefill-token-threshold", "--long-prefill-token-threshold", scheduler, chunk_size) \
    X("enable-prefix-caching", "--enable-prefix-caching", scheduler, prefix_caching) \
    X("enable-chunked-prefill", "--enable-chunked-prefill", scheduler, chunked_prefill) \
    X("async-scheduling", "--async-scheduling", scheduler, async_scheduling) \
    X("num-speculative-tokens", "--speculative-config's num_speculative_tokens", speculative, num_tokens) \
    X("gpu-memory-utilization", "--gpu-memory-utilization", hardware, gpu_memory_utilization) \
    X("kv-cache-dtype", "--kv-cache-dtype", kv, cache_dtype) \
    X("block-size", "--block-size", kv, block_size) \
    X("num-gpu-blocks-override", "--num-gpu-blocks-override", kv, num_blocks) \
    X("quantization", "--quantization", model, quantization) \
    X("dtype", "--dtype", model, dtype)

/* Values vLLM takes for an option that a CHOICE key models by another name: the key, vLLM's
 * value, and what is said when it is given (the value is refused, as an option's name is:
 * one name per setting). */
#define VLLM_FP8_FORMATS_SAY \
    "servesim's fp8 is vLLM's fp8 (its default format, e4m3; an e5m2 cache takes the same memory, and the " \
    "measured tables time e4m3's kernels)"
#define VLLM_VALUES(X) \
    X(kv, cache_dtype, "fp8_e4m3", VLLM_FP8_FORMATS_SAY) \
    X(kv, cache_dtype, "fp8_e5m2", VLLM_FP8_FORMATS_SAY)
