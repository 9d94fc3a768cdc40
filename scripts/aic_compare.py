#!/usr/bin/env python3
"""servesim's measured tables against AIConfigurator's own estimate, on static batches.

For a grid of static batches (B requests of ISL prompt tokens and OSL output tokens, all
sent at once and served as one batch), runs `aiconfigurator cli estimate --estimate-mode
static` (in-process, through its Python API) and `servesim run` on the same GPU, model and
vLLM version (and tensor parallelism and precision: bf16, FP8 weights and KV cache, FP8
weights alone, an FP8 KV cache alone), and writes their TTFT, TPOT and end-to-end latency
side by side. Both price the same kernel timings, so a gap beyond a few percent is a
difference of composition.
servesim runs with hardware.step_overhead_ms = 0 and hardware.host_us_per_seq = 0:
AIConfigurator's static estimate has no per-step framework time, and the comparison is about
the kernels. It also runs with deployment.allreduce_fusion = off: AIConfigurator prices vLLM's
all-reduces by vLLM's custom all-reduce timings, not by the fused kernel of vLLM's 2026 default.

Usage (scripts/aic-compare sets up the environment):
  aic_compare.py --servesim build/cli/servesim --out docs/data/aic-static.csv [--models a,b]
  aic_compare.py --db SYSTEMS_DIR --explain GPU MODEL BATCH ISL OSL
The second form prints, for one static batch, AIConfigurator's per-operation times
(`--detail time`) beside servesim's composition of the same operations, grouped alike:
where a difference comes from.
"""
import argparse
import csv
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import warnings

# servesim model preset -> the Hugging Face id AIConfigurator knows it by (its model_configs/)
MODELS = {
    "llama-3.1-8b": "meta-llama/Meta-Llama-3.1-8B",
    "qwen3-8b": "Qwen/Qwen3-8B",
    "qwen3-32b": "Qwen/Qwen3-32B",
    "llama-3.1-70b": "meta-llama/Meta-Llama-3.1-70B",
    "qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B",
    "mixtral-8x7b": "mistralai/Mixtral-8x7B-v0.1",
}
MOE_MODELS = {"qwen3-30b-a3b", "mixtral-8x7b"}
# (GPU preset, database system, vLLM version of its table, models)
CASES = [
    ("h200", "h200_sxm", "0.24.0", ["llama-3.1-8b", "qwen3-8b", "qwen3-32b", "qwen3-30b-a3b", "mixtral-8x7b"]),
    ("h100", "h100_sxm", "0.24.0", ["llama-3.1-8b", "qwen3-8b", "qwen3-32b", "qwen3-30b-a3b"]),
    ("a100", "a100_sxm", "0.14.0", ["llama-3.1-8b", "qwen3-32b"]),
    ("b200", "b200_sxm", "0.24.0", ["llama-3.1-8b", "qwen3-32b", "llama-3.1-70b", "qwen3-30b-a3b", "mixtral-8x7b"]),
    ("b300", "b300_sxm", "0.24.0", ["llama-3.1-8b"]),
    ("gb200", "gb200", "0.24.0", ["llama-3.1-8b"]),
    ("gb300", "gb300", "0.24.0", ["llama-3.1-8b"]),
    ("l40s", "l40s", "0.24.0", ["llama-3.1-8b", "qwen3-8b"]),
    ("rtx-pro-6000", "rtx_pro_6000_server", "0.24.0", ["llama-3.1-8b"]),
    ("b60", "b60", "0.26.0", ["llama-3.1-8b"]),
]
# Tensor parallelism and FP8: on the GPUs with InferenceMAX's real runs (docs/published.md),
# Llama-3.1-8B's and Qwen3-8B's FP8 tables on one GPU and Llama-3.1-70B at TP 1-8 in every
# precision, wherever servesim has the table: (GPU preset, system, version, model, TP, precision)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import aic_import  # noqa: E402  (the tables' precisions and file names)

PRECISIONS = tuple(aic_import.PRECISIONS)
TP_CASES = [(gpu, system, "0.24.0", model, tp, prec)
            for gpu, system in (("h100", "h100_sxm"), ("h200", "h200_sxm"), ("b200", "b200_sxm"))
            for model, tps, precs in (("llama-3.1-8b", (1,), ("fp8", "fp8-weights", "fp8-kv")),
                                      ("llama-3.1-70b", (1, 2, 4, 8), PRECISIONS),
                                      ("qwen3-8b", (1,), ("fp8", "fp8-weights", "fp8-kv")))
            for tp in tps for prec in precs if (tp, prec) != (1, "bf16")  # CASES has bf16 at TP 1
            # Qwen3-8B (no tensor-parallel tables) where CASES has it in bf16
            if model != "qwen3-8b" or any(g == gpu and model in ms for g, _, _, ms in CASES)]
BATCHES = [1, 8, 32, 128]
ISLS = [128, 1024, 4096]
OSLS = [128, 512]


def model_path(model):
    """What AIConfigurator is given for MODEL: its Hugging Face id when the id is among its
    default models, else a folder holding the config.json its package caches (it would
    otherwise download it)."""
    from aiconfigurator_core.sdk.common import DefaultHFModels
    hf_id = MODELS[model]
    if hf_id in DefaultHFModels:
        return hf_id
    import aiconfigurator_core
    d = os.path.join(tempfile.gettempdir(), f"servesim-aic-{os.getpid()}-{model}")
    os.makedirs(d, exist_ok=True)
    shutil.copy(os.path.join(os.path.dirname(aiconfigurator_core.__file__), "model_configs",
                             hf_id.replace("/", "--") + "_config.json"), os.path.join(d, "config.json"))
    return d


def aic_estimate(model, system, version, b, isl, osl, tp=1, prec="bf16"):
    from aiconfigurator.cli.api import cli_estimate
    # a mixture of experts on one GPU: its experts unsplit (moe_tp 1, no expert parallelism)
    extra = {"moe_tp_size": 1, "moe_ep_size": 1} if model in MOE_MODELS else {}
    fp8_weights, kv_dtype = aic_import.PRECISIONS[prec]
    if fp8_weights:
        extra["gemm_quant_mode"] = "fp8"
    if kv_dtype == "fp8":
        extra["kvcache_quant_mode"] = "fp8"
    r = cli_estimate(model_path(model), system, mode="static", backend_name="vllm", backend_version=version,
                     isl=isl, osl=osl, batch_size=b, tp_size=tp, **extra)
    return r.ttft, r.tpot, r.ttft + r.tpot * (osl - 1)


def servesim(binary, gpu, model, version, b, isl, osl, tmp, tp=1, prec="bf16"):
    out = os.path.join(tmp, "run")
    blocks = b * ((isl + osl) // 16 + 2) + 16
    fp8_weights, kv_dtype = aic_import.PRECISIONS[prec]
    sets = {
        "model.preset": model, "hardware.preset": gpu, "hardware.vllm_version": version,
        "deployment.tensor_parallel": str(tp), "model.quantization": "fp8" if fp8_weights else "none",
        "kv.cache_dtype": "fp8" if kv_dtype == "fp8" else "auto",
        "hardware.step_overhead_ms": "0", "hardware.host_us_per_seq": "0",
        "deployment.allreduce_fusion": "off", "workload.arrival": "all_at_once", "workload.num_requests": str(b),
        "workload.prompt_len": f"fixed:{isl}", "workload.output_len": f"fixed:{osl}",
        "scheduler.policy": "paged", "scheduler.chunked_prefill": "off", "scheduler.prefix_caching": "off",
        "scheduler.max_num_seqs": str(b),
        "scheduler.max_num_batched_tokens": str(max(b * isl, isl + osl)), "scheduler.max_model_len": str(isl + osl),
        "kv.num_blocks": str(blocks),
    }
    cmd = [binary, "run", "--quiet", "--out", out]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={v}"]
    p = subprocess.run(cmd, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: {p.stderr}")
    with open(os.path.join(out, "summary.json")) as f:
        s = json.load(f)
    if s["cost_model"] != "measured":
        raise SystemExit(f"{gpu} {model} tp {tp} {prec}: servesim priced with {s['cost_model']}: {s['cost_source']}")
    shutil.rmtree(out)
    return s["mean_ttft_ms"], s["mean_tpot_ms"], s["mean_e2el_ms"]


def servesim_has_table(gpu, system, version, model, tp, prec):
    """Whether costs/ holds the measured table of that case (a model that does not fit, or a
    precision the database cannot compose there, has none)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.path.exists(os.path.join(root, "costs", gpu, aic_import.table_file_name(model, tp, prec, version)))


AIC_GROUPS = {
    "GEMMs (QKV, O, gate/up, down)": ("qkv_gemm", "proj_gemm", "gate_ffn1_gemm", "ffn2_gemm"),
    "elementwise (embedding, norms, activation)": ("embedding", "add_norm_1", "add_norm_2", "act_gate"),
    "attention (with rotary, KV write)": ("attention",),
    "LM head": ("logits_gemm",),
}


def aic_detail(model, system, version, b, isl, osl):
    """{phase: {op: ms}} from `aiconfigurator cli estimate --detail time` (context = the
    prefill, generation = all decode steps together)."""
    cmd = [os.path.join(os.path.dirname(sys.executable), "aiconfigurator"), "cli", "estimate", "--model-path",
           MODELS[model], "--system", system, "--backend", "vllm", "--perf-db-version", version,
           "--estimate-mode", "static", "--isl", str(isl), "--osl", str(osl), "--batch-size", str(b),
           "--tp-size", "1", "--detail", "time"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    ops = {"context": {}, "generation": {}}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[2] == "ms" and parts[0].split("_")[0] in ops:
            phase, op = parts[0].split("_", 1)
            ops[phase][op] = float(parts[1])
    return ops


def explain(db, gpu, model, b, isl, osl):
    system, version = next((c[1], c[2]) for c in CASES if c[0] == gpu)
    spec = aic_import.read_system_yaml(os.path.join(db, f"{system}.yaml"))
    [(v, gemm_rows, ctx_rows, gen_rows, quant)] = [s for s in aic_import.gpu_sources(db, system) if s[0] == version]
    presets = subprocess.run(["build/cli/servesim", "presets", "--csv", "models"], capture_output=True, text=True,
                             check=True).stdout.splitlines()
    m = next(aic_import.Model(r) for r in csv.DictReader(presets) if r["name"] == model)
    gemm = aic_import.Gemm(gemm_rows, spec["bfloat16_tc_flops"], spec["mem_bw"])
    attn = aic_import.Attention(ctx_rows, gen_rows, m.heads, m.kv_heads, m.head_dim)
    ew = aic_import.elementwise_stand_in(db, gpu, spec, aic_import.elementwise_curves(db))
    L, h, q, kv, inter, by = m.layers, m.hidden, m.heads * m.head_dim, m.kv_heads * m.head_dim, m.intermediate, 2

    def ours(T, attention_s):
        g = L * (gemm.latency(T, q + 2 * kv, h) + gemm.latency(T, h, q) + gemm.latency(T, 2 * inter, h)
                 + gemm.latency(T, h, inter))
        e = L * (2 * ew(4 * T * h * by) + ew(3 * T * inter * by)) + ew(2 * T * h * by) + ew(4 * T * h * by)
        rope = L * ew(2 * T * (q + kv) * by)
        qkn = L * (ew(2 * T * q * by) + ew(2 * T * kv * by)) if m.qk_norm else 0.0
        return {"GEMMs (QKV, O, gate/up, down)": g, "elementwise (embedding, norms, activation)": e,
                "attention (with rotary, KV write)": attention_s + rope + qkn,
                "LM head": gemm.latency(b, m.vocab, h), "sampling (AIConfigurator: none)": aic_import.sample_cost(m, ew, b)}

    def decode_at(bb, length):
        """Between the table's lengths, linear in length, as the simulator reads the table."""
        ls = attn.gen_lengths
        i = max(1, min(len(ls) - 1, next((k for k, x in enumerate(ls) if x >= length), len(ls) - 1)))
        lo, hi = ls[i - 1], ls[i]
        t = (length - lo) / (hi - lo)
        return attn.decode(bb, lo) + t * (attn.decode(bb, hi) - attn.decode(bb, lo))

    ctx = ours(b * isl, L * (attn.floor + b * attn.prefill(isl, 0)))
    gen = {k: 0.0 for k in ctx}
    for i in range(1, osl):
        for k, v in ours(b, L * (attn.floor + decode_at(b, isl + i))).items():
            gen[k] += v
    a = aic_detail(model, system, version, b, isl, osl)
    print(f"{gpu} {model} vLLM {version}: batch {b}, {isl} prompt tokens, {osl} output tokens (ms)")
    for phase, mine in (("context", ctx), ("generation", gen)):
        print(f"  {phase:<44} {'AIConfigurator':>14} {'servesim':>10} {'diff':>8}")
        ta = tm = 0.0
        for group, mine_s in mine.items():
            av = sum(a[phase].get(op, 0.0) for op in AIC_GROUPS.get(group, ()))
            ta, tm = ta + av, tm + mine_s * 1e3
            print(f"    {group:<42} {av:14.3f} {mine_s * 1e3:10.3f} {mine_s * 1e3 - av:+8.3f}")
        print(f"    {'total':<42} {ta:14.3f} {tm:10.3f} {tm - ta:+8.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--servesim", default="build/cli/servesim")
    ap.add_argument("--out")
    ap.add_argument("--db", help="aiconfigurator_core/systems, for --explain")
    ap.add_argument("--explain", nargs=5, metavar=("GPU", "MODEL", "BATCH", "ISL", "OSL"))
    ap.add_argument("--models", help="only these models (comma-separated); the other models' rows of --out are kept")
    args = ap.parse_args()
    if args.explain:
        gpu, model, b, isl, osl = args.explain
        explain(args.db, gpu, model, int(b), int(isl), int(osl))
        return
    if not args.out:
        ap.error("--out is required")
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    only = set(args.models.split(",")) if args.models else None
    if only and not only <= set(MODELS):
        ap.error(f"--models: unknown {sorted(only - set(MODELS))} (known: {', '.join(MODELS)})")
    kept = {}
    if only and os.path.exists(args.out):
        with open(args.out, newline="") as f:
            for r in csv.DictReader(f):
                if r["model"] not in only:
                    kept.setdefault((r["gpu"], r["model"], int(r["tp"]), r["precision"]), []).append(r)
    cases = [(gpu, system, version, model, 1, "bf16") for gpu, system, version, models in CASES for model in models]
    cases += [c for c in TP_CASES if servesim_has_table(*c)]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for gpu, system, version, model, tp, prec in cases:
            if only and model not in only:
                rows += kept.get((gpu, model, tp, prec), [])
                continue
            for b in BATCHES:
                for isl in ISLS:
                    for osl in OSLS:
                        try:
                            a = aic_estimate(model, system, version, b, isl, osl, tp, prec)
                        except RuntimeError as e:  # a batch whose KV does not fit its memory
                            print(f"{gpu} {model} tp {tp} {prec} {b}x{isl}/{osl}: AIConfigurator gives no estimate: {e}",
                                  file=sys.stderr)
                            continue
                        s = servesim(args.servesim, gpu, model, version, b, isl, osl, tmp, tp, prec)
                        row = {"gpu": gpu, "model": model, "vllm": version, "tp": tp, "precision": prec, "batch": b,
                               "isl": isl, "osl": osl}
                        for name, av, sv in zip(("ttft", "tpot", "e2el"), a, s):
                            row[f"aic_{name}_ms"] = f"{av:.4g}"
                            row[f"servesim_{name}_ms"] = f"{sv:.4g}"
                            row[f"err_{name}"] = f"{sv / av - 1:+.4f}"
                        rows.append(row)
                        print(" ".join(f"{k}={v}" for k, v in row.items()), file=sys.stderr)
    tmp_out = args.out + ".tmp"
    with open(tmp_out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp_out, args.out)


if __name__ == "__main__":
    main()
