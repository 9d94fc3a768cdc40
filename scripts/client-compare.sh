#!/bin/bash
# servesim load against vLLM's benchmark client (`vllm bench serve`), both streaming 1,000
# concurrent requests from `servesim serve` (scenarios/serve-streams.ini: 3,000 requests of
# 16 prompt and 200 output tokens, the tiny model). The server (engine and HTTP threads) runs
# on CPU 0 and the client alone on CPU 1, so that what the client's stamps show is the
# client. Per run: the server's event log (every token's send time), the client's records,
# its CPU time (/usr/bin/time) and the server's /metrics; then one line per run with the
# throughput, the client's CPU per token, and its delay against the server's send times
# (summary.json's event_delay_ms for servesim load, scripts/client-delay.py for vLLM's).
#
#   scripts/client-compare.sh OUTDIR [RUNS]       (default 3 runs of each, alternating)
#
# Needs a vLLM in $VLLM_VENV (default build/vllm-venv: python3 -m venv build/vllm-venv &&
# build/vllm-venv/bin/pip install vllm==0.33.0, about 9 GB; the benchmark client needs no
# GPU), two CPUs, and a built build/cli/servesim. docs/benchmarks.md has the results.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/client-compare.sh OUTDIR [RUNS]}
runs=${2:-3}
venv=${VLLM_VENV:-build/vllm-venv}
servesim=$PWD/build/cli/servesim
port=${PORT:-8020}
[ -x "$venv/bin/vllm" ] || { echo "client-compare: no vllm in $venv (see the script's head)" >&2; exit 2; }
[ -x "$servesim" ] || { echo "client-compare: build servesim first (scripts/build.sh)" >&2; exit 2; }
[ "$(nproc)" -ge 2 ] || { echo "client-compare: needs two CPUs (server on one, client on the other)" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
"$venv/bin/python" scripts/byte-tokenizer.py "$out/tokenizer"
serve() {   # serve [--event-log FILE]: the server on CPU 0, once it answers
    taskset -c 0 "$servesim" serve scenarios/serve-streams.ini --port "$port" --event-times "$@" > "$out/server.log" 2>&1 &
    server=$!
    for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/health" > /dev/null && break; sleep 0.2; done
}
stop() { kill -TERM "$server"; wait "$server" || true; }
# vLLM's fixed cost (imports, one request), to take out of its CPU time
serve
taskset -c 1 /usr/bin/time -f "%U %S" -o "$out/vllm-startup.txt" "$venv/bin/vllm" bench serve --backend openai \
        --base-url "http://127.0.0.1:$port" --model tiny --tokenizer "$out/tokenizer" --dataset-name random \
        --random-input-len 16 --random-output-len 200 --random-range-ratio 0 --num-prompts 1 --max-concurrency 1 \
        --ignore-eos --request-rate inf --disable-tqdm > /dev/null 2>&1
stop
for i in $(seq 1 "$runs"); do
    for client in servesim vllm; do
        d=$out/$client-$i
        rm -rf "$d"
        mkdir -p "$d"
        serve --event-log "$d/log.csv"
        if [ "$client" = servesim ]; then
            taskset -c 1 /usr/bin/time -f "%U %S" -o "$d/cpu.txt" "$servesim" load scenarios/serve-streams.ini \
                --url "http://127.0.0.1:$port/v1" --quiet --out "$d/out" > "$d/client.log" 2>&1
        else
            taskset -c 1 /usr/bin/time -f "%U %S" -o "$d/cpu.txt" "$venv/bin/vllm" bench serve --backend openai \
                --base-url "http://127.0.0.1:$port" --model tiny --tokenizer "$out/tokenizer" --dataset-name random \
                --random-input-len 16 --random-output-len 200 --random-range-ratio 0 --num-prompts 3000 \
                --max-concurrency 1000 --ignore-eos --request-rate inf --save-result --save-detailed \
                --result-dir "$d" --result-filename result.json --disable-tqdm > "$d/client.log" 2>&1
        fi
        curl -s "http://127.0.0.1:$port/metrics" > "$d/metrics.txt"
        stop
    done
done
python3 - "$out" <<'PY'
import json, os, subprocess, sys
out = sys.argv[1]
startup = sum(map(float, open(os.path.join(out, "vllm-startup.txt")).read().split()))
print(f"vllm bench serve's own start (imports, one request): {startup:.1f} CPU-s, taken out below")
print("run | completed | failed | tokens/s | client CPU-s | us/token | mean TTFT client / server (ms) | "
      "mean ITL client / server (ms) | delay mean / P50 / P99 / P99.9 / max (ms)")
for name in sorted(os.listdir(out)):
    d = os.path.join(out, name)
    if not os.path.isfile(os.path.join(d, "cpu.txt")):
        continue
    cpu = sum(map(float, open(os.path.join(d, "cpu.txt")).read().split()[:2]))
    if name.startswith("servesim"):
        s = json.load(open(os.path.join(d, "out", "summary.json")))
        e = s["event_delay_ms"]
        delay = [e["mean"], e["p50"], e["p99"], e["p99.9"], e["max"]]
    else:
        s = json.load(open(os.path.join(d, "result.json")))
        cpu -= startup
        r = subprocess.run([sys.executable, "scripts/client-delay.py", os.path.join(d, "log.csv"),
                            os.path.join(d, "result.json"), "--json"], capture_output=True, text=True, check=True)
        e = json.loads(r.stdout)
        delay = [e["mean_ms"], e["p50_ms"], e["p99_ms"], e["p99.9_ms"], e["max_ms"]]
    m = {}
    for line in open(os.path.join(d, "metrics.txt")):
        k, _, v = line.rpartition(" ")
        m[k] = v
    def server_mean(name):
        return float(m[name + '_sum{model_name="tiny"}']) / float(m[name + '_count{model_name="tiny"}']) * 1000
    server_ttft = server_mean("vllm:time_to_first_token_seconds")
    server_itl = server_mean("vllm:inter_token_latency_seconds")
    tokens = s["completed"] * 200
    print(f"{name} | {s['completed']} | {s['failed']} | {s['output_throughput']:.0f} | {cpu:.1f} | "
          f"{cpu / tokens * 1e6:.1f} | {s['mean_ttft_ms']:.1f} / {server_ttft:.1f} | "
          f"{s['mean_itl_ms']:.2f} / {server_itl:.2f} | " + " / ".join(f"{v:.3f}" for v in delay))
PY
