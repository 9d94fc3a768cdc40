#!/usr/bin/env python3
"""Published vLLM serving runs replayed as scenarios: how far servesim is from reality.

docs/data/published.csv holds measured results others published (source address and date
on every row), each with the scenario settings that reproduce its workload and server
configuration (`sets`, --set assignments separated by ';'); docs/data/silicon.csv, in the
same columns, the runs scripts/aic_silicon.py takes from AIConfigurator's silicon sample.
For every point this script runs `servesim run` twice, priced by the GPU's measured table
and by its fitted roofline, and compares the published metrics (mean or median, as
published) with the simulated ones. AIConfigurator's estimate for the same point, where it
has one, is read from the file's aic_* columns (`--aic` recomputes them; it needs
aiconfigurator installed).

  published.py [--servesim BIN]            the error table on stdout
  published.py --write                     also docs/data/published-errors.csv and docs/published.md
  published.py --check                     exit 1 when a measured-table error exceeds its bound
  published.py --record-bounds             set every bound to the point's |error| now plus 5 points
  published.py --aic                       recompute the aic_* columns of both files
  published.py --set KEY=VALUE ...         extra --set for every run (what-if: e.g. an overhead)

Only the standard library is needed (CI runs --check).
"""
import argparse
import concurrent.futures
import csv
import datetime
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "docs", "data", "published.csv")
# Runs taken from AIConfigurator's silicon sample by scripts/aic_silicon.py (same columns).
SILICON = os.path.join(ROOT, "docs", "data", "silicon.csv")
METRICS = ("ttft", "tpot", "itl", "e2el", "output_tps")
GOAL_METRICS = ("ttft", "tpot", "e2el")  # the goal: mean (or median) TTFT, TPOT, E2E
# How the summaries group the goal's metrics (a source that gives no TPOT gives ITL)
METRIC_GROUPS = (("TTFT", ("ttft",)), ("TPOT/ITL", ("tpot", "itl")), ("E2E", ("e2el",)))
SETS = {
    "v1": "vLLM V1 engine (0.8 and later) at a steady load: the yardstick",
    "burst": "vLLM V1, every request sent at once to a GPU whose KV cache holds a few of them",
    "v0": "older V0 engines, for reference",
    "silicon": "vLLM 0.10.2, InferenceMAX's Llama-3.3-70B FP8 sweep (AIConfigurator's silicon sample)",
}
BOUNDED_SETS = ("v1", "silicon")  # every metric of these needs a recorded bound
# the presets AIConfigurator is asked about (scripts/aic_compare.py's MODELS gives their ids)
AIC_MODELS = {"llama-3.1-8b", "qwen3-8b", "qwen3-32b", "llama-3.1-70b", "qwen3-30b-a3b"}
AIC_SYSTEMS = {"h100": ("h100_sxm", "0.24.0"), "h200": ("h200_sxm", "0.24.0"), "a100": ("a100_sxm", "0.14.0"),
               "b200": ("b200_sxm", "0.24.0")}


REQUIRED = ("id", "set", "gpu", "model", "stat", "sets")


def user_error(message):
    """A mistake in the data files: one message, exit 2, nothing written."""
    print(f"published: {message}", file=sys.stderr)
    sys.exit(2)


def read_points(paths=(DATA, SILICON)):
    """Every point of the data files, each remembering its file (`_path`) for the writers. A
    point's id names it everywhere (its simulation's folder, its bounds), so ids are unique
    across the files."""
    points, where = [], {}
    for path in paths:
        if not os.path.isfile(path):
            user_error(f"{path}: no such file")
        with open(path, newline="") as f:
            rows = csv.DictReader(f)
            missing = [c for c in REQUIRED if c not in (rows.fieldnames or [])]
            if missing:
                user_error(f"{path}: no column {', '.join(missing)}")
            for line, p in enumerate(rows, start=2):
                if p["id"] in where:
                    user_error(f"{path}:{line}: point {p['id']} is already in {where[p['id']]}")
                where[p["id"]] = f"{os.path.relpath(path, ROOT)}:{line}"
                points.append(dict(p, _path=path))
    return points


def write_points(points):
    """Each data file again, from its points (`--record-bounds`, `--aic`), in its own columns."""
    for path in dict.fromkeys(p["_path"] for p in points):
        with open(path, newline="") as f:
            cols = next(csv.reader(f))
        mine = [{k: v for k, v in p.items() if k != "_path"} for p in points if p["_path"] == path]
        with open(path + ".tmp", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols)
            w.writeheader()
            w.writerows(mine)
        os.replace(path + ".tmp", path)


def summary_key(stat, metric):
    if metric == "output_tps":
        return "output_throughput"
    return f"{'mean' if stat == 'mean' else 'median'}_{metric}_ms"


class RunFailed(Exception):
    """A servesim run that failed: its message, and the exit status to end with."""

    def __init__(self, message, code):
        super().__init__(message)
        self.code = code


def simulate(binary, p, cost_model, extra, tmp):
    out = os.path.join(tmp, f"{p['id']}-{cost_model}")
    cmd = [binary, "run", "--quiet", "--out", out, "--set", f"model.preset={p['model']}",
           "--set", f"hardware.preset={p['gpu']}", "--set", f"hardware.cost_model={cost_model}"]
    for a in p["sets"].split(";") + list(extra):
        # the fused all-reduce is a measured table's component; the roofline has one all-reduce
        if a and not (cost_model == "roofline" and a.startswith("deployment.allreduce_fusion")):
            cmd += ["--set", a]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:  # servesim's own message first; its exit 2 (a bad --set) stays a user's error
        raise RunFailed(f"published: {p['id']}: {r.stderr.strip()}\n  (the run: {' '.join(cmd)})",
                        2 if r.returncode == 2 else 1)
    with open(os.path.join(out, "summary.json")) as f:
        s = json.load(f)
    if cost_model == "measured" and s["cost_model"] != "measured":
        raise SystemExit(f"published: {p['id']}: no measured table: {s['cost_source']}")
    return s


def num(v):
    return float(v) if v not in ("", None) else None


def rel(a, b):
    return None if a is None or b is None else a / b - 1


def replay(binary, points, extra):
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        jobs = [(p, cm) for p in points for cm in ("measured", "roofline")]
        pool = concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2)
        try:
            done = list(pool.map(lambda j: simulate(binary, j[0], j[1], extra, tmp), jobs))
        except RunFailed as e:  # the first failure, once; the runs not yet started are dropped
            pool.shutdown(wait=True, cancel_futures=True)
            print(e, file=sys.stderr)
            sys.exit(e.code)
        pool.shutdown()
        by_point = {}
        for (p, cm), s in zip(jobs, done):
            by_point.setdefault(p["id"], {})[cm] = s
        for p in points:
            sims = by_point[p["id"]]
            for m in METRICS:
                pub = num(p[f"pub_{m}_ms" if m != "output_tps" else "pub_output_tps"])
                if pub is None:
                    continue
                meas = sims["measured"][summary_key(p["stat"], m)]
                roof = sims["roofline"][summary_key(p["stat"], m)]
                aic = num(p.get(f"aic_{m}_ms")) if m != "output_tps" else None
                rows.append({"id": p["id"], "set": p["set"], "gpu": p["gpu"], "model": p["model"], "vllm": p["vllm"],
                             "metric": m, "stat": p["stat"], "published": pub, "measured": meas,
                             "err_measured": rel(meas, pub), "roofline": roof, "err_roofline": rel(roof, pub),
                             "aic": aic, "err_aic": rel(aic, pub), "bound": num(p.get(f"bound_{m}"))})
    return rows


def pct(e):
    return "" if e is None else f"{100 * e:+.1f}%"


def goal_rows(rows, which="v1"):
    """The goal's rows: TTFT, TPOT (ITL where a source gives no TPOT) and E2E of the V1 set."""
    out = []
    by_id = {}
    for r in rows:
        by_id.setdefault(r["id"], {})[r["metric"]] = r
    for pid, ms in by_id.items():
        if next(iter(ms.values()))["set"] != which:
            continue
        for m in GOAL_METRICS:
            r = ms.get(m) or (ms.get("itl") if m == "tpot" else None)
            if r:
                out.append(r)
    return out


def stats(rows, key):
    errs = [abs(r[key]) for r in rows if r[key] is not None]
    if not errs:
        return None
    return statistics.median(errs), max(errs), len(errs)


def table(rows):
    lines = ["| point | GPU | model | vLLM | metric | published | servesim (measured) | servesim (roofline) | AIConfigurator |",
             "|---|---|---|---|---|---:|---:|---:|---:|"]
    for r in rows:
        unit = " tok/s" if r["metric"] == "output_tps" else " ms"
        aic = f"{r['aic']:.4g}{unit} ({pct(r['err_aic'])})" if r["aic"] is not None else "-"
        lines.append(f"| {r['id']} | {r['gpu']} | {r['model']} | {r['vllm']} | {r['stat']} {r['metric']} | "
                     f"{r['published']:.4g}{unit} | {r['measured']:.4g}{unit} ({pct(r['err_measured'])}) | "
                     f"{r['roofline']:.4g}{unit} ({pct(r['err_roofline'])}) | {aic} |")
    return "\n".join(lines)


def summary_lines(rows):
    out = []
    for which, what in SETS.items():
        g = goal_rows(rows, which)
        if not g:
            continue
        out.append(f"- **{what}**: {len({r['id'] for r in g})} points, {len(g)} metrics (TTFT, TPOT or ITL, E2E as published)")
        for key, name in (("err_measured", "servesim, measured tables"), ("err_roofline", "servesim, fitted roofline"),
                          ("err_aic", "AIConfigurator")):
            s = stats(g, key)
            if s:
                parts = []
                for label, ms in METRIC_GROUPS:
                    sub = stats([r for r in g if r["metric"] in ms], key)
                    if sub:
                        parts.append(f"{label} {100 * sub[0]:.1f}% ({sub[2]})")
                out.append(f"  - {name}: median |error| {100 * s[0]:.1f}%, largest {100 * s[1]:.1f}% ({s[2]} metrics); "
                           f"median by metric: {', '.join(parts)}")
        gpus = sorted({r["gpu"] for r in g})
        for key, name in (("err_measured", "servesim, measured tables"), ("err_aic", "AIConfigurator")):
            parts = []
            for gpu in gpus if len(gpus) > 1 else ():
                sub = [r for r in g if r["gpu"] == gpu]
                by = [(label, [r[key] for r in sub if r["metric"] in ms and r[key] is not None])
                      for label, ms in METRIC_GROUPS]
                if any(errs for _, errs in by):
                    parts.append(f"{gpu} " + ", ".join(
                        f"{label} {100 * statistics.median(abs(e) for e in errs):.1f}% ({len(errs)}; signed "
                        f"{100 * statistics.median(errs):+.1f}%, {sum(abs(e) <= 0.10 for e in errs)} within 10%)"
                        for label, errs in by if errs))
            if parts:
                out.append(f"  - {name}, median |error| by GPU: {'; '.join(parts)}")
        both = [r for r in g if r["err_aic"] is not None]
        if both:
            closer = sum(abs(r["err_measured"]) < abs(r["err_aic"]) for r in both)
            out.append(f"  - servesim closer than AIConfigurator on {closer} of the {len(both)} metrics both estimate")
    return out


def write_outputs(rows, binary):
    path = os.path.join(ROOT, "docs", "data", "published-errors.csv")
    with open(path + ".tmp", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else ("" if v is None else v)) for k, v in r.items()})
    os.replace(path + ".tmp", path)
    md = os.path.join(ROOT, "docs", "published.md")
    head = open(os.path.join(ROOT, "docs", "published.head.md")).read()
    with open(md + ".tmp", "w") as f:
        f.write(head.rstrip() + "\n\n")
        f.write(f"## Results\n\nWritten by `scripts/published.py --write` on {datetime.date.today().isoformat()} "
                f"(servesim {git_describe()}); errors are simulated / published - 1.\n\n")
        f.write("\n".join(summary_lines(rows)) + "\n\n")
        for which, what in SETS.items():
            sel = [r for r in rows if r["set"] == which]
            if sel:
                title = what if what.startswith("vLLM") else what[0].upper() + what[1:]
                f.write(f"### {title}\n\n{table(sel)}\n\n")
    os.replace(md + ".tmp", md)


def git_describe():
    r = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return r.stdout.strip() or "unknown"


def check(rows):
    bad = []
    for r in rows:
        if r["bound"] is not None and abs(r["err_measured"]) > r["bound"]:
            bad.append(f"{r['id']} {r['metric']}: |error| {100 * abs(r['err_measured']):.1f}% > bound {100 * r['bound']:.1f}%")
        if r["bound"] is None and r["set"] in BOUNDED_SETS:
            bad.append(f"{r['id']} {r['metric']}: no bound recorded")
    for b in bad:
        print(f"published: {b}", file=sys.stderr)
    if not bad:
        print(f"published: every error within its bound ({sum(r['bound'] is not None for r in rows)} metrics)")
    return 1 if bad else 0


def record_bounds(points, rows):
    """Each point's bound_* columns: its measured-table |error| now plus 5 points, rounded up."""
    by_id = {p["id"]: p for p in points}
    for r in rows:
        if r["err_measured"] is not None:
            by_id[r["id"]][f"bound_{r['metric']}"] = f"{math.ceil(100 * (abs(r['err_measured']) + 0.05)) / 100:.2f}"
    write_points(points)


def aic_columns(points):
    """AIConfigurator's aggregated-serving estimate at each closed-loop point it can price."""
    import logging
    import warnings
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    from aiconfigurator.cli.api import cli_estimate
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import aic_compare  # its model_path (the id, or the package's cached config) and MOE_MODELS
    for p in points:
        sets = dict(a.split("=", 1) for a in p["sets"].split(";") if a)
        ok = (p["model"] in AIC_MODELS and p["gpu"] in AIC_SYSTEMS and sets.get("workload.arrival") == "closed"
              and sets.get("workload.prompt_len", "").startswith(("fixed:", "uniform:", "lognormal:")))
        for m in ("ttft", "tpot", "e2el"):
            p[f"aic_{m}_ms"] = ""
        if not ok:
            continue
        def mean_of(dist):
            kind, *a = dist.split(":")
            if kind == "fixed":
                return int(a[0])
            if kind == "uniform":
                return (int(a[0]) + int(a[1])) // 2
            return int(round(float(a[0]) * 2.718281828 ** (float(a[1]) ** 2 / 2)))  # lognormal mean
        isl, osl = mean_of(sets["workload.prompt_len"]), mean_of(sets["workload.output_len"])
        system, version = AIC_SYSTEMS[p["gpu"]]
        quant = {"gemm_quant_mode": "fp8"} if sets.get("model.quantization") == "fp8" else {}
        tp = int(sets.get("deployment.tensor_parallel", 1))
        if p["model"] in aic_compare.MOE_MODELS:  # experts split as vLLM splits them: by TP, no expert parallelism
            quant.update(moe_tp_size=tp, moe_ep_size=1)
        if sets.get("kv.cache_dtype") == "fp8":
            quant["kvcache_quant_mode"] = "fp8"
        try:
            r = cli_estimate(aic_compare.model_path(p["model"]), system, mode="agg", backend_name="vllm", backend_version=version,
                             isl=isl, osl=osl, batch_size=int(sets["workload.concurrency"]),
                             tp_size=tp, **quant)
        except RuntimeError as e:  # it refuses a batch whose KV does not fit at once (vLLM queues it)
            print(f"{p['id']}: AIConfigurator gives no estimate: {e}", file=sys.stderr)
            continue
        p["aic_ttft_ms"], p["aic_tpot_ms"] = f"{r.ttft:.4g}", f"{r.tpot:.4g}"
        p["aic_e2el_ms"] = f"{r.ttft + r.tpot * (osl - 1):.4g}"
        print(f"{p['id']}: AIConfigurator isl {isl} osl {osl}: TTFT {r.ttft:.4g} TPOT {r.tpot:.4g}", file=sys.stderr)
    write_points(points)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--servesim", default=os.path.join(ROOT, "build", "cli", "servesim"))
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--aic", action="store_true")
    ap.add_argument("--record-bounds", action="store_true")
    ap.add_argument("--set", action="append", default=[], dest="extra")
    args = ap.parse_args()
    if not args.aic and not (os.path.isfile(args.servesim) and os.access(args.servesim, os.X_OK)):
        user_error(f"--servesim {args.servesim}: no servesim binary there (scripts/build.sh builds one)")
    points = read_points()
    if args.aic:
        aic_columns(points)
        return 0
    rows = replay(args.servesim, points, args.extra)
    for r in rows:
        print(f"{r['id']:<18} {r['stat']:>6} {r['metric']:<10} published {r['published']:>10.4g}  "
              f"measured {r['measured']:>10.4g} {pct(r['err_measured']):>8}  roofline {r['roofline']:>10.4g} "
              f"{pct(r['err_roofline']):>8}  aic {pct(r['err_aic']):>8}")
    print("\n".join(summary_lines(rows)))
    if args.write:
        write_outputs(rows, args.servesim)
    if args.record_bounds:
        record_bounds(points, rows)
    return check(rows) if args.check else 0


if __name__ == "__main__":
    sys.exit(main())
