#!/usr/bin/env python3
"""How late a benchmark client stamped each streamed token, against the server's send times.

`servesim serve --event-log LOG.csv` writes every streamed token's send time (CLOCK_MONOTONIC)
under the client's X-Request-Id. `vllm bench serve --save-result --save-detailed` records, per
request, its send time (`start_times`, time.perf_counter: CLOCK_MONOTONIC on Linux), the time
to its first token and the gaps between tokens, and names request i `<prefix>-i` in that
header. Run on the same machine, the two give each token's delay: the client's stamp minus
the server's send time (an upper bound on the client's error: it holds the kernel's delivery
and any wait for a core too). vLLM's chat client also stamps the opening role chunk, which
carries no token: a request with exactly one stamp more than the log has tokens loses its
first stamp. A token stamped before the server sent it means the log and the result are
not of one run: that is an error.

    python3 scripts/client-delay.py LOG.csv RESULT.json [--json]
"""
import csv
import json
import math
import re
import sys


def percentile(sorted_values, q):
    """Linear interpolation between closest ranks (numpy's default, and servesim's)."""
    if not sorted_values:
        return math.nan
    pos = (len(sorted_values) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def read_log(path):
    """{request_id: [send time of token 0, 1, ...]} from servesim serve's event log."""
    sent = {}
    with open(path, newline="") as f:
        rows = csv.DictReader(f)
        if rows.fieldnames != ["request_id", "token_index", "sent"]:
            raise ValueError(f"{path}: not a servesim serve --event-log file (columns {rows.fieldnames})")
        for line, row in enumerate(rows, start=2):
            times = sent.setdefault(row["request_id"], [])
            if int(row["token_index"]) == 0 and times:
                raise ValueError(f"{path}:{line}: request {row['request_id']} appears twice (two runs with one "
                                 "request-id prefix against one server?)")
            if int(row["token_index"]) != len(times):
                raise ValueError(f"{path}:{line}: token {row['token_index']} of {row['request_id']} out of order")
            times.append(float(row["sent"]))
    return sent


def client_times(result):
    """{request index: [client stamp of each token]} from a vllm bench serve detailed result."""
    for key in ("start_times", "ttfts", "itls", "errors"):
        if key not in result:
            raise ValueError(f"no \"{key}\": save the result with --save-result --save-detailed")
    times = {}
    for i, (start, ttft, gaps, error) in enumerate(zip(result["start_times"], result["ttfts"], result["itls"], result["errors"])):
        if error or not ttft:
            continue
        t = start + ttft
        stamps = [t]
        for gap in gaps:
            t += gap
            stamps.append(t)
        times[i] = stamps
    return times


def delays(log, result):
    """Every matched token's delay (s), and how many tokens the client saw the log lacks."""
    by_index, prefixes = {}, set()
    for request_id, sent in log.items():
        if re.match(r"(chat)?cmpl-\d+$", request_id):
            continue   # the server's own name: the client sent no X-Request-Id
        m = re.match(r"(.*?)(\d+)$", request_id)
        if m:
            prefixes.add(m.group(1))
            by_index[int(m.group(2))] = sent
    if len(prefixes) > 1:
        raise ValueError(f"the log holds requests of several clients or runs ({', '.join(sorted(prefixes))}): "
                         "give each run a server of its own")
    out, unmatched = [], 0
    for i, stamps in client_times(result).items():
        sent = by_index.get(i)
        if sent is not None and len(stamps) == len(sent) + 1:
            stamps = stamps[1:]   # a chat's role chunk, stamped as a token
        if sent is None or len(sent) < len(stamps):
            unmatched += len(stamps)
            continue
        out.extend(stamp - s for stamp, s in zip(stamps, sent))
    early = sum(1 for d in out if d < 0)
    if early:
        raise ValueError(f"{early} tokens stamped by the client before the server sent them: the log and the "
                         "result are not of one run on one machine")
    return out, unmatched


def summary(values):
    v = sorted(values)
    return {"count": len(v), "mean_ms": sum(v) / len(v) * 1000 if v else math.nan,
            "p50_ms": percentile(v, 50) * 1000, "p99_ms": percentile(v, 99) * 1000,
            "p99.9_ms": percentile(v, 99.9) * 1000, "max_ms": v[-1] * 1000 if v else math.nan,
            "min_ms": v[0] * 1000 if v else math.nan}


def main(argv):
    args = [a for a in argv if a != "--json"]
    if len(args) != 2:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    try:
        log = read_log(args[0])
        with open(args[1]) as f:
            result = json.load(f)
        d, unmatched = delays(log, result)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"client-delay: {e}", file=sys.stderr)
        return 2
    if not d:
        print("client-delay: no request of the result is in the log (was the server given --event-log, "
              "and did the client send X-Request-Id?)", file=sys.stderr)
        return 2
    s = summary(d)
    s["unmatched_tokens"] = unmatched
    if "--json" in argv:
        print(json.dumps(s))
    else:
        print(f"{s['count']} tokens: delay mean {s['mean_ms']:.3f} ms, P50 {s['p50_ms']:.3f}, P99 {s['p99_ms']:.3f}, "
              f"P99.9 {s['p99.9_ms']:.3f}, max {s['max_ms']:.3f} (min {s['min_ms']:.3f}); {unmatched} tokens unmatched")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
