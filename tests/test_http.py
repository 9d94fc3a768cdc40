#!/usr/bin/env python3
"""servesim serve, servesim load and servesim validate --measured end to end on loopback, as
a user runs them: the client's records agree with the server's /metrics, and validate reads
the run back to exactly the client's numbers (from its directory and from the vLLM-format
JSON). Also the errors a user can cause: no server at --url, a port already taken.

usage: tests/test_http.py SERVESIM"""
import http.server
import json
import os
import re
import threading
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

SERVESIM = sys.argv[1]
SCENARIO = """[model]
preset = tiny
[engine]
threads = 1
[scheduler]
policy = paged
prefix_caching = on
[run]
warmup_requests = 2
[workload]
num_requests = 40
arrival = poisson
rate = 40
prompt_len = uniform:16:160
output_len = uniform:4:48
shared_prefix_len = 32
num_prefixes = 2
prefix_fraction = 0.5
"""
failures = []


class FakeServer(http.server.BaseHTTPRequestHandler):
    """An OpenAI-style server that misbehaves as real ones can: CRLF event ends, comment
    lines, several events in one write, and (by prompt length) too few tokens or an error
    event mid-stream."""
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        body = json.dumps({"object": "list", "data": [{"id": "fake", "object": "model"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        n, plen = req["max_tokens"], len(req["prompt"])
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        events = [": keep-alive\r\n"]
        short = plen % 3 == 1          # a third of the requests get one token too few
        broken = plen % 3 == 2         # another third an error event after one token
        silent = plen % 6 == 0         # half the rest no token at all: only usage counting them, or
        bare = plen % 12 == 6          # not even that (a bare [DONE])
        for i in range(0 if silent else n - 1 if short else 1 if broken else n):
            # token 1 is a control token, whose text is empty: still a token
            text = "" if i == 1 else "x"
            events.append("data: " + json.dumps({"choices": [{"index": 0, "text": text, "finish_reason": None}]}) + "\r\n\r\n")
        # a closing chunk with no text, only the reason: not a token
        events.append("data: " + json.dumps({"choices": [{"index": 0, "text": "", "finish_reason": "length"}]}) + "\r\n\r\n")
        if broken:
            events.append("data: " + json.dumps({"error": {"message": "boom", "code": 500}}) + "\r\n\r\n")
        if silent and not bare:
            events.append("data: " + json.dumps({"choices": [], "usage": {"completion_tokens": n}}) + "\r\n\r\n")
        events.append("data: [DONE]\r\n\r\n")
        self.wfile.write("".join(events).encode())
        self.wfile.flush()


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def metrics(port):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r'^([a-z_:]+)\{model_name="tiny"\} (\S+)$', line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def start_server(ini, *flags):
    """servesim serve on any free port: the process and its port, once it listens."""
    proc = subprocess.Popen([SERVESIM, "serve", ini, "--port", "0", *flags], stdout=subprocess.PIPE, text=True)
    line = ""
    for _ in range(3):
        line = proc.stdout.readline()
        if "Listening" in line:
            break
    return proc, int(re.search(r"127\.0\.0\.1:(\d+)", line).group(1))


with tempfile.TemporaryDirectory() as tmp:
    ini = os.path.join(tmp, "tiny.ini")
    open(ini, "w").write(SCENARIO)
    server, port = start_server(ini, "--event-times")
    url = f"http://127.0.0.1:{port}/v1"
    out = os.path.join(tmp, "load")
    r = subprocess.run([SERVESIM, "load", ini, "--url", url, "--out", out, "--vllm-json", "--quiet"],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"load exit {r.returncode}: {r.stderr}")
    summ = json.load(open(os.path.join(out, "summary.json")))
    check(summ["completed"] == 40 and summ["rejected"] == 0, f"40 measured requests completed: {summ['completed']}")
    rows = open(os.path.join(out, "requests.csv")).read().splitlines()
    check(len(rows) == 43, f"42 requests (2 warm-up) in requests.csv, got {len(rows) - 1}")
    m = metrics(port)
    check(m["vllm:request_success_total"] == 42, f"the server finished 42: {m['vllm:request_success_total']}")
    out_tokens = sum(int(x.split(",")[7]) for x in rows[1:])
    in_tokens = sum(int(x.split(",")[5]) for x in rows[1:])
    check(m["vllm:generation_tokens_total"] == out_tokens, f"generated tokens: server {m['vllm:generation_tokens_total']}, client {out_tokens}")
    check(m["vllm:prompt_tokens_total"] == in_tokens, f"prompt tokens: server {m['vllm:prompt_tokens_total']}, client {in_tokens}")
    check(m["vllm:prefix_cache_hits_total"] > 0, "shared prefixes hit the server's cache")
    check(m["vllm:kv_cache_usage_perc"] == 0, "no KV block held after the run")
    # the client's clock starts before the server's events: its TTFT is the server's plus the request path
    server_ttft = m["vllm:time_to_first_token_seconds_sum"] / m["vllm:time_to_first_token_seconds_count"] * 1000
    check(server_ttft > 0, "server TTFT")
    delay = summ.get("event_delay_ms", {})
    check(delay.get("count") == out_tokens and 0 <= delay.get("p50", -1) <= delay.get("max", -1),
          f"--event-times: a delay for every token: {delay}")
    tokens = open(os.path.join(out, "tokens.csv")).read().splitlines()
    check(len(tokens) - 1 == out_tokens, f"tokens.csv has every token: {len(tokens) - 1} vs {out_tokens}")

    for source in (out, os.path.join(out, "vllm-bench.json")):
        vdir = os.path.join(tmp, "v-" + os.path.basename(source))
        r = subprocess.run([SERVESIM, "validate", ini, "--measured", source, "--out", vdir, "--quiet"],
                           capture_output=True, text=True)
        # 0 or 3 (within or past its limits: a verdict, either way); 1 would be a failure
        check(r.returncode in (0, 3), f"validate --measured {source}: exit {r.returncode}: {r.stderr}")
        if r.returncode not in (0, 3):
            continue
        v = json.load(open(os.path.join(vdir, "validation.json")))
        measured = {row["metric"]: row["measured"] for row in v["metrics"]}
        keys = ["mean_ttft_ms", "p99_ttft_ms", "mean_itl_ms", "p99_itl_ms"]
        if source == out:   # the directory has every time; the JSON's ends are its last token's
            keys += ["mean_tpot_ms", "mean_e2el_ms", "p99_e2el_ms", "request_throughput"]
        for k in keys:
            check(abs(measured[k] - summ[k]) <= 1e-6 * max(1, abs(summ[k])),
                  f"{source}: measured {k} {measured[k]} is the client's {summ[k]}")
        check(os.path.exists(os.path.join(vdir, "sim", "requests.csv")), "the simulated run is kept")

    # chat: the opening role chunk is not a token
    chat = os.path.join(tmp, "chat")
    r = subprocess.run([SERVESIM, "load", ini, "--url", url, "--out", chat, "--quiet", "--endpoint", "chat",
                        "--set", "workload.num_requests=5", "--set", "run.warmup_requests=0"],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f"chat: exit {r.returncode}: {r.stderr}")
    if r.returncode == 0:
        crow = [x.split(",") for x in open(os.path.join(chat, "requests.csv")).read().splitlines()[1:]]
        ctok = open(os.path.join(chat, "tokens.csv")).read().splitlines()[1:]
        check(all(x[9] == "length" for x in crow) and len(ctok) == sum(int(x[7]) for x in crow),
              f"chat: every request complete, one token per content chunk ({len(ctok)} token rows)")

    # 1,000 connections at once: every one served, nothing held after
    many = os.path.join(tmp, "many")
    r = subprocess.run([SERVESIM, "load", ini, "--url", url, "--out", many, "--quiet", "--set", "workload.arrival=closed",
                        "--set", "workload.concurrency=1000", "--set", "workload.num_requests=1000",
                        "--set", "run.warmup_requests=0", "--set", "workload.output_len=fixed:3",
                        "--set", "workload.prompt_len=fixed:8"], capture_output=True, text=True, timeout=250)
    check(r.returncode == 0, f"1,000 connections: exit {r.returncode}: {r.stderr}")
    if r.returncode == 0:
        s2 = json.load(open(os.path.join(many, "summary.json")))
        check(s2["completed"] == 1000, f"1,000 connections: {s2['completed']} completed, {s2['rejected']} failed")
        m2 = metrics(port)
        check(m2["vllm:request_success_total"] == 1047 and m2["vllm:kv_cache_usage_perc"] == 0,
              f"the server after 1,000 connections: {m2['vllm:request_success_total']} finished, KV {m2['vllm:kv_cache_usage_perc']}")

    # vLLM's own JSON has no send times: throughput is then not compared
    vj = json.load(open(os.path.join(out, "vllm-bench.json")))
    del vj["start_times"]
    nostart = os.path.join(tmp, "nostart.json")
    json.dump(vj, open(nostart, "w"))
    vdir = os.path.join(tmp, "v-nostart")
    r = subprocess.run([SERVESIM, "validate", ini, "--measured", nostart, "--out", vdir, "--quiet"],
                       capture_output=True, text=True)
    check(r.returncode in (0, 3), f"validate without start_times: exit {r.returncode}: {r.stderr}")
    if r.returncode in (0, 3):
        names = [row["metric"] for row in json.load(open(os.path.join(vdir, "validation.json")))["metrics"]]
        check("p50_ttft_ms" in names and not any("throughput" in n for n in names),
              f"without send times, latencies but no throughput: {names}")

    # without send times the scenario's arrivals stand in; too few of them is bad input, with
    # their count (read after it was freed, it once said 0)
    n_measured = len(vj["ttfts"])
    r = subprocess.run([SERVESIM, "validate", ini, "--measured", nostart, "--set", "workload.num_requests=2",
                        "--out", os.path.join(tmp, "v-few"), "--quiet"], capture_output=True, text=True)
    few = re.search(r"has fewer requests \((\d+)\) than it \((\d+)\)", r.stderr)
    check(r.returncode == 2 and few and 2 <= int(few.group(1)) < n_measured and int(few.group(2)) == n_measured,
          f"too few scenario requests for a file without send times: exit {r.returncode}: {r.stderr}")

    r = subprocess.run([SERVESIM, "serve", ini, "--port", "0", "--set", "model.preset=llama-3.1-70b", "--set",
                        "kv.num_blocks=16"], capture_output=True, text=True, timeout=60)
    check(r.returncode == 2 and "GiB available" in r.stderr, f"a model too large for this machine: exit {r.returncode}: {r.stderr}")
    r = subprocess.run([SERVESIM, "serve", ini, "--port", str(port)], capture_output=True, text=True, timeout=60)
    check(r.returncode == 2 and f"port {port}" in r.stderr, f"a taken port: exit {r.returncode}: {r.stderr}")
    server.send_signal(signal.SIGINT)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        check(False, "serve did not stop on Ctrl-C")
    check(server.returncode == 128 + signal.SIGINT, f"serve exit {server.returncode} after Ctrl-C (128 + SIGINT)")
    r = subprocess.run([SERVESIM, "load", ini, "--url", url, "--out", os.path.join(tmp, "none"), "--quiet"],
                       capture_output=True, text=True)
    check(r.returncode == 2 and "Couldn't connect" in r.stderr and not os.path.exists(os.path.join(tmp, "none")),
          f"no server: exit {r.returncode}: {r.stderr}")

    # --event-log: every streamed token's send time under the client's X-Request-Id; the
    # delay script times a vLLM-format result against it
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "client-delay.py")
    os.mkdir(os.path.join(tmp, "ev"))
    log = os.path.join(tmp, "ev", "log.csv")
    ev, evport = start_server(ini, "--event-log", log)
    result = {"start_times": [], "ttfts": [], "itls": [], "errors": []}
    for i, header in enumerate(["bench-x-0", "bench-x-1", None]):
        body = json.dumps({"model": "tiny", "prompt": [1, 2, 3], "max_tokens": 6, "stream": True}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{evport}/v1/completions", data=body,
                                     headers={"Content-Type": "application/json", **({"X-Request-Id": header} if header else {})})
        start = time.monotonic()
        stamps = []
        with urllib.request.urlopen(req, timeout=60) as resp:
            for raw in resp:
                if raw.startswith(b"data: {"):
                    stamps.append(time.monotonic())
        if header:
            result["start_times"].append(start)
            result["ttfts"].append(stamps[0] - start)
            result["itls"].append([b - a for a, b in zip(stamps, stamps[1:])])
            result["errors"].append("")
    ev.send_signal(signal.SIGINT)
    ev.wait(timeout=30)
    rows = [x.split(",") for x in open(log).read().splitlines()]
    check(rows[0] == ["request_id", "token_index", "sent"] and len(rows) == 19,
          f"--event-log: a header and 3 x 6 tokens: {len(rows) - 1} rows")
    ids = sorted({x[0] for x in rows[1:]})
    check(ids[:2] == ["bench-x-0", "bench-x-1"] and ids[2].startswith("cmpl-"),
          f"--event-log names requests by X-Request-Id, else the response id: {ids}")
    res_path = os.path.join(tmp, "ev", "result.json")
    json.dump(result, open(res_path, "w"))
    r = subprocess.run([sys.executable, script, log, res_path, "--json"], capture_output=True, text=True)
    d = json.loads(r.stdout) if r.returncode == 0 else {}
    check(d.get("count") == 12 and d.get("unmatched_tokens") == 0 and 0 <= d["min_ms"] <= d["max_ms"] < 1000,
          f"client-delay: 12 tokens, each stamped after the server sent it: {r.stdout} {r.stderr}")
    # by hand: sent at 10.0, 10.5 and 10.6; the client sent at 9.9, its first token 0.2 later,
    # the next two 0.45 and 0.2 after that: stamps 10.1, 10.55 and 10.75, delays 100, 50, 150 ms
    def delay_of(log_text, result):
        open(log, "w").write("request_id,token_index,sent\n" + log_text)
        json.dump(result, open(res_path, "w"))
        r = subprocess.run([sys.executable, script, log, res_path, "--json"], capture_output=True, text=True)
        return (json.loads(r.stdout) if r.returncode == 0 else {}), r
    three = "bench-y-0,0,10.0\nbench-y-0,1,10.5\nbench-y-0,2,10.6\n"
    d, r = delay_of(three, {"start_times": [9.9], "ttfts": [0.2], "itls": [[0.45, 0.2]], "errors": [""]})
    check(d.get("count") == 3 and abs(d["mean_ms"] - 100) < 1e-6 and abs(d["max_ms"] - 150) < 1e-6 and abs(d["min_ms"] - 50) < 1e-6,
          f"client-delay by hand: mean 100, max 150, min 50 ms: {r.stdout} {r.stderr}")
    # a chat client's role chunk, stamped 0.05 s before the first token, is not a token
    d, r = delay_of(three, {"start_times": [9.9], "ttfts": [0.15], "itls": [[0.05, 0.45, 0.2]], "errors": [""]})
    check(d.get("count") == 3 and abs(d["mean_ms"] - 100) < 1e-6, f"client-delay drops a chat's role stamp: {r.stdout} {r.stderr}")
    d, r = delay_of(three + "bench-z-0,0,20.0\n", {"start_times": [9.9], "ttfts": [0.2], "itls": [[0.45, 0.2]], "errors": [""]})
    check(r.returncode == 2 and "several clients or runs" in r.stderr, f"client-delay refuses two runs in one log: {r.stderr}")
    d, r = delay_of(three, {"start_times": [8.9], "ttfts": [0.2], "itls": [[0.45, 0.2]], "errors": [""]})
    check(r.returncode == 2 and "3 tokens stamped by the client before" in r.stderr, f"client-delay refuses a mismatch: {r.stderr}")
    d, r = delay_of(three + three, {"start_times": [9.9], "ttfts": [0.2], "itls": [[0.45, 0.2]], "errors": [""]})
    check(r.returncode == 2 and "appears twice" in r.stderr, f"client-delay: a request id twice: {r.stderr}")
    # an IPv6 host is bracketed in the URL printed: "http://::1:PORT/v1" was refused by load
    try:
        socket.socket(socket.AF_INET6).bind(("::1", 0))
        has_v6 = True
    except OSError:
        has_v6 = False
    if has_v6:
        v6 = subprocess.Popen([SERVESIM, "serve", ini, "--host", "::1", "--port", "0"], stdout=subprocess.PIPE, text=True)
        line = ""
        for _ in range(3):
            line = v6.stdout.readline()
            if "Listening" in line:
                break
        m = re.search(r"(http://\[::1\]:\d+/v1)", line)
        check(m is not None, f"serve --host ::1 prints a bracketed URL: {line!r}")
        if m:
            r = subprocess.run([SERVESIM, "load", ini, "--url", m.group(1), "--out", os.path.join(tmp, "v6"), "--quiet",
                                "--set", "workload.num_requests=3", "--set", "run.warmup_requests=0"],
                               capture_output=True, text=True, timeout=120)
            check(r.returncode == 0, f"load takes the URL serve printed: exit {r.returncode}: {r.stderr}")
        v6.send_signal(signal.SIGINT)
        v6.wait(timeout=60)
    blocker = os.path.join(tmp, "afile")
    open(blocker, "w").write("mine")
    r = subprocess.run([SERVESIM, "serve", ini, "--port", "0", "--event-log", os.path.join(blocker, "log.csv")],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 2 and "--event-log" in r.stderr and open(blocker).read() == "mine",
          f"an --event-log that cannot be written: exit {r.returncode}: {r.stderr}")
    # a file that is not an event log (the scenario itself, given by mistake) was overwritten at the stop
    r = subprocess.run([SERVESIM, "serve", ini, "--port", "0", "--event-log", blocker],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 2 and "is not an event log" in r.stderr and open(blocker).read() == "mine",
          f"an --event-log naming a file of the user's: exit {r.returncode}: {r.stderr}")
    # a directory was taken, and the log lost at the stop (a reviewer's find)
    r = subprocess.run([SERVESIM, "serve", ini, "--port", "0", "--event-log", os.path.join(tmp, "ev")],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 2 and "is a directory" in r.stderr, f"an --event-log that is a directory: exit {r.returncode}: {r.stderr}")

    # a server nobody here wrote the client for: short outputs and error events are failures
    fake = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeServer)
    threading.Thread(target=fake.serve_forever, daemon=True).start()
    fout = os.path.join(tmp, "fake")
    r = subprocess.run([SERVESIM, "load", ini, "--url", f"http://127.0.0.1:{fake.server_port}/v1", "--out", fout,
                        "--quiet", "--set", "run.warmup_requests=0", "--set", "workload.num_requests=30",
                        "--set", "workload.output_len=fixed:5"], capture_output=True, text=True, timeout=120)
    fake.shutdown()
    check(r.returncode == 0, f"load against the fake server: exit {r.returncode}: {r.stderr}")
    if r.returncode == 0:
        rows = [x.split(",") for x in open(os.path.join(fout, "requests.csv")).read().splitlines()[1:]]
        errs = open(os.path.join(fout, "errors.csv")).read()
        ok = [x for x in rows if x[9] == "length"]
        check(len(rows) == 30, f"every request recorded: {len(rows)}")
        check(all(int(x[5]) % 6 == 3 for x in ok) and len(ok) > 0, "only the full-length answers count as successes")
        check(all(x[7] == "5" for x in ok), "5 tokens each, from events with CRLF ends and comments")
        tokens = open(os.path.join(fout, "tokens.csv")).read().splitlines()[1:]
        full = {x[0] for x in ok}
        check(sum(1 for t in tokens if t.split(",")[0] in full) == 5 * len(full),
              "an empty-text token event is a token; a closing reason-only chunk is not")
        check("sent 4 of the 5 tokens" in errs and "the server: boom" in errs and
              "the stream carried no token (its usage said 5)" in errs and "the server sent 0 of the 5 tokens" in errs,
              f"errors.csv names the four failures: {errs[:600]}")

print("http: ok" if not failures else f"http: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
