#!/usr/bin/env python3
"""Real vLLM serving runs from AIConfigurator's silicon sample, as points for published.py.

aiconfigurator-core (PyPI, Apache-2.0) ships `aiconfigurator_core/systems/silicon_sample.csv`:
serving runs measured on real GPUs (mean TTFT and mean TPOT of a benchmark at a fixed input
length, output length and concurrency), against which AIConfigurator checks its estimates.
This script takes from it the vLLM runs servesim can replay and writes them, in the schema of
docs/data/published.csv, to docs/data/silicon.csv, which published.py replays beside the
hand-collected points.

Taken: the Llama-3.3-70B-Instruct-FP8 sweep (H100, H200, B200; tensor parallelism 1-8; input
and output 1k/1k, 1k/8k, 8k/1k; 4-64 clients). Its shape, GPUs and parallelism lists, the
date it was measured (2025-10-29) and its settings match InferenceMAX's sweep of that model
at the time (SemiAnalysis, github.com/SemiAnalysisAI/InferenceX, Apache-2.0, commit c198b20eb
of 2025-10-30), so its recipe is replayed as that repository ran it:
  - server: vllm/vllm-openai:v0.10.2, FP8 weights and activations, --kv-cache-dtype fp8,
    --async-scheduling, --no-enable-prefix-caching, --max-num-batched-tokens 8192,
    --gpu-memory-utilization 0.9, --max-num-seqs the concurrency (512 on the B200);
  - client: vLLM's benchmark_serving.py (a fork, kimbochen/bench_serving), the completions
    API, random-token prompts, --random-range-ratio 0.8 (each input and output length drawn
    uniformly from [0.8 L, L]), --num-prompts 10 x the concurrency, --max-concurrency the
    concurrency, --ignore-eos.
Llama-3.3-70B has Llama-3.1-70B's shapes (the llama-3.1-70b preset). The B200 script also
compiles with FlashInfer's fused all-reduce + RMSNorm (enable_fi_allreduce_fusion, with
VLLM_FLASHINFER_ALLREDUCE_FUSION_THRESHOLDS_MB 32, 32 and 8 MB at TP 2, 4 and 8), which vLLM
0.10.2 did not do unless asked: its rows set deployment.allreduce_fusion on, the H100 and
H200 rows off (servesim's default, auto, is vLLM's of 2026, which fuses on both). vLLM 0.10's
pass sized its workspace at MB / (hidden x TP x 2 bytes) tokens (collective_fusion.py), so
the script's sizes meant 1,024, 512 and 64 tokens of the 70B; servesim's
deployment.allreduce_fusion_max_mb counts tokens x hidden x 2 bytes, as vLLM does now, so the
rows give the script's sizes divided by TP.

One departure: the H100 runs are replayed with vLLM 0.10.2's defaults for what the scripts'
config file says, because vLLM never read that file. The H100 scripts pass it as
`--config=config.yaml`; vLLM 0.10.2 pulls a config file's options in only when `--config` is an
argument of its own (FlexibleArgumentParser.parse_args: `if '--config' in args`), and its
argument parser then takes `--config=...` as a declared option and drops it. The H200 and B200
scripts write `--config config.yaml` and were read. So on the H100: a bf16 KV cache
(kv.cache_dtype = auto), no async scheduling, prefix caching on, and the model's own
max_model_len; the token budget of 8,192 is vLLM's default there too. What the runs measured
says the same: the three points that run out of KV (TP 2; 1k/8k with 64 clients, 8k/1k with 32
and 64) queue as a pool of 13,500-14,000 blocks does (servesim's pool with kv.num_blocks; a
bf16 cache gives 14,861, an fp8 one 29,722), where the H200's starved points queue as an fp8
pool does (docs/published.head.md).

Not taken: other frameworks, disaggregated runs, FP4 and INT4 models, models without a
preset, and the vLLM 0.12.0 runs of Qwen3-32B and Llama-3.1-8B-FP8, whose client, request
count and length spread the sample does not say (docs/published.head.md).

    aic_silicon.py [SILICON_CSV] [--out FILE]
        SILICON_CSV  default build/aic-db/aiconfigurator_core/systems/silicon_sample.csv
                     (scripts/aic-import unpacks the pinned package there)
        FILE         default docs/data/silicon.csv

Bounds already recorded in docs/data/silicon.csv are kept for rows that stay.
"""
import csv
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "docs", "data", "silicon.csv")
DEFAULT_IN = os.path.join(ROOT, "build", "aic-db", "aiconfigurator_core", "systems", "silicon_sample.csv")
PACKAGE = "aiconfigurator-core 0.12.0"
SOURCE_URL = "https://pypi.org/project/aiconfigurator-core/0.12.0/"
RECIPE_URL = "https://github.com/SemiAnalysisAI/InferenceX/tree/c198b20eb/benchmarks"
GPUS = {"h100_sxm": "h100", "h200_sxm": "h200", "b200_sxm": "b200"}
RANGE_RATIO = 0.8
# The KV cache the runs had: the scripts' fp8, but vLLM's default (bf16) on the H100, whose
# config file vLLM did not read (the docstring above)
KV_CACHE_DTYPE = {"h100": "auto", "h200": "fp8", "b200": "fp8"}
# The fused all-reduce's largest message, MiB of a GPU's tokens x hidden, by TP, where the
# script asks for it: its sizes divided by TP, as vLLM 0.10 read them (the docstring)
FUSION_MB = {"b200": {2: 32 / 2, 4: 32 / 4, 8: 8 / 8}}
# The rest of the H100 config file that vLLM did not read: its defaults instead
H100_IGNORED = {"scheduler.async_scheduling": "off", "scheduler.prefix_caching": "on"}
KV_NOTE = {"h100": "; vLLM 0.10.2 did not read the script's --config=config.yaml (only '--config FILE' is "
                   "pulled in), so its defaults are replayed: KV cache bf16, no async scheduling, prefix caching "
                   "on, the model's max_model_len (docs/published.md)"}


def published_columns():
    with open(os.path.join(ROOT, "docs", "data", "published.csv"), newline="") as f:
        return next(csv.reader(f))


def inferencemax_70b(r):
    """The scenario settings of one run of InferenceMAX's Llama-70B FP8 sweep, or None."""
    if not (r["backend"] == "vllm" and r["mode"] == "agg" and r["model_path"] == "meta-llama/Llama-3.1-70B"
            and r["precision"] == "fp8" and r["system"] in GPUS and r["pp_size"] == "1"
            and "measured=2025-10-29" in r["silicon_data_source"]):
        return None
    isl, osl, conc, tp = int(r["isl"]), int(r["osl"]), int(r["batch_size"]), int(r["tp_size"])
    ttft, tpot = float(r["silicon_ttft_ms"]), float(r["silicon_tpot_ms"])
    gpu = GPUS[r["system"]]
    if gpu == "h100":
        max_len = 131072                      # the model's: the config file was not read (docstring)
    elif gpu == "h200" and (isl, osl) == (1024, 1024):
        max_len = isl + osl + 20              # 70b_fp8_h200_slurm.sh
    elif gpu == "h200":
        max_len = isl + osl + 200
    else:
        max_len = isl + osl                   # the workflow's max-model-len (2048 or 9216)
    sets = {
        "model.quantization": "fp8", "kv.cache_dtype": KV_CACHE_DTYPE[gpu], "deployment.tensor_parallel": tp,
        "scheduler.chunked_prefill": "on", "scheduler.prefix_caching": "off",
        "scheduler.max_num_batched_tokens": 8192, "scheduler.max_num_seqs": 512 if gpu == "b200" else conc,
        "scheduler.max_model_len": max_len, "hardware.gpu_memory_utilization": 0.9,
        "workload.arrival": "closed", "workload.concurrency": conc, "workload.num_requests": 10 * conc,
        "workload.prompt_len": f"uniform:{int(isl * RANGE_RATIO)}:{isl}",
        "workload.output_len": f"uniform:{int(osl * RANGE_RATIO)}:{osl}",
        "frontend.preset": "vllm",
    }
    if gpu == "h100":
        sets.update(H100_IGNORED)
    if tp > 1 and gpu in FUSION_MB:
        sets.update({"deployment.allreduce_fusion": "on", "deployment.allreduce_fusion_max_mb": f"{FUSION_MB[gpu][tp]:g}"})
    elif tp > 1:
        sets["deployment.allreduce_fusion"] = "off"
    k = lambda n: f"{n // 1024}k"
    return {
        "id": f"IM-{gpu.upper()}-tp{tp}-{k(isl)}{k(osl)}-c{conc}",
        "set": "silicon", "source": f"AIConfigurator's silicon sample ({PACKAGE}, systems/silicon_sample.csv); "
                                    f"recipe: InferenceMAX Llama-3.3-70B-Instruct-FP8 sweep",
        "source_url": SOURCE_URL, "source_date": "2025-10-29", "vllm": "0.10.2", "gpu": gpu,
        "model": "llama-3.1-70b", "stat": "mean", "sets": ";".join(f"{a}={b}" for a, b in sets.items()),
        "pub_ttft_ms": f"{ttft:.4g}", "pub_tpot_ms": f"{tpot:.4g}",
        "notes": f"{r['id']} in the sample; recipe {RECIPE_URL} (70b_fp8_{gpu}_*.sh, workflows 70b-tmpl.yml and "
                 f"full-sweep-tmpl.yml): {conc} clients, {10 * conc} requests, input U[{int(isl * RANGE_RATIO)}, {isl}], "
                 f"output U[{int(osl * RANGE_RATIO)}, {osl}], EOS ignored{KV_NOTE.get(gpu, '')}",
    }


class UserError(Exception):
    """A mistake in the arguments or the files: one message, exit 2, nothing written."""


def read_sample(src):
    if not os.path.isfile(src):
        raise UserError(f"{src}: no such file (run scripts/aic-import, or give the CSV's path)")
    with open(src, newline="") as f:
        rows = list(csv.DictReader(f))
    missing = {"backend", "mode", "model_path", "precision", "system", "pp_size", "silicon_data_source", "isl", "osl",
               "batch_size", "tp_size", "silicon_ttft_ms", "silicon_tpot_ms", "id"} - set(rows[0] if rows else {})
    if missing:
        raise UserError(f"{src}: not AIConfigurator's silicon sample (no column {', '.join(sorted(missing))})")
    return rows


def read_previous(out):
    """The points OUT holds now (their bounds and estimates are kept), after checking that OUT is
    this script's own file: it must not replace the hand-collected points or anything else."""
    if not os.path.exists(out):
        return {}
    with open(out, newline="") as f:
        prev = list(csv.DictReader(f))
    if prev and ("id" not in prev[0] or "set" not in prev[0]):
        raise UserError(f"{out}: not a file of published points (no id or set column); not replaced")
    others = sorted({p["set"] for p in prev} - {"silicon"})
    if others:
        raise UserError(f"{out}: holds points of set {', '.join(others)}, not only silicon ones; not replaced")
    return {p["id"]: p for p in prev}


def import_points(rows, src, old, cols):
    """The sweep's points, by GPU, TP, input and output length and clients."""
    taken, seen = [], {}
    for line, r in enumerate(rows, start=2):
        try:
            p = inferencemax_70b(r)
        except ValueError as e:
            raise UserError(f"{src}:{line}: {e}") from None
        if p is None:
            continue
        if p["id"] in seen:
            raise UserError(f"{src}: two runs become point {p['id']} ({seen[p['id']]} and {r['id']})")
        seen[p["id"]] = r["id"]
        full = {c: "" for c in cols}
        full.update(p)
        for c in cols:
            if c.startswith(("bound_", "aic_")) and p["id"] in old:
                full[c] = old[p["id"]].get(c, "")
        key = (p["gpu"], int(r["tp_size"]), int(r["isl"]), int(r["osl"]), int(r["batch_size"]))
        taken.append((key, full))
    if not taken:
        raise UserError(f"{src}: no run of the sweep in it; nothing written")
    return [full for _, full in sorted(taken, key=lambda t: t[0])]


def main(argv):
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    out = OUT
    if "--out" in argv:
        i = argv.index("--out")
        if i + 1 >= len(argv):
            print("aic_silicon: --out needs a file", file=sys.stderr)
            return 2
        out = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    if len(argv) > 1:
        print("usage: aic_silicon.py [SILICON_CSV] [--out FILE]", file=sys.stderr)
        return 2
    src = argv[0] if argv else DEFAULT_IN
    try:
        if not os.path.isdir(os.path.dirname(os.path.abspath(out))):
            raise UserError(f"--out {out}: its folder does not exist")
        cols = published_columns()
        points = import_points(read_sample(src), src, read_previous(out), cols)
    except UserError as e:
        print(f"aic_silicon: {e}", file=sys.stderr)
        return 2
    with open(out + ".tmp", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(points)
    os.replace(out + ".tmp", out)
    print(f"aic_silicon: {len(points)} runs written to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
