#!/usr/bin/env python3
"""Two cost tables side by side, component by component: at every grid point of table A
that lies inside table B's grid, A's seconds over B's (B interpolated as the simulator reads
it: piecewise linear, bilinear for the two-dimensional components). For comparing servesim's
own calibration of a GPU with the measured table imported for it, e.g. after
scripts/device-check.sh on an H200:

  scripts/compare-tables.py device-results/h200-llama-3-8b.csv costs/h200/llama-3.1-8b.vllm-0.24.0.csv

Prints per component the number of points, the median, smallest and largest ratio, and the
ratio at a few points across the grid. Both are compared as whole calls: a measured table
(one with an `attention_floor_s` line) keeps the attention call's launch floor in `linear`,
once a step, where a calibrated table times each attention call whole; the floor (times the
layers) is moved back into its attention components first. Serving scales
(`serving_scale_*` lines) are printed, not applied: this compares the timed components.
Standard library only.
"""
import bisect
import statistics
import sys

COMPONENTS = ("linear", "prefill_attn", "decode_attn", "lm_head", "sample", "overhead")


class BadTable(Exception):
    pass


def read(path):
    meta, comp, header = {}, {}, False
    try:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                line = line.rstrip("\n")
                if line.startswith("#"):
                    if line.startswith("# ") and ": " in line:
                        k, v = line[2:].split(": ", 1)
                        meta[k] = v
                elif not header:
                    if line != "component,x,y,seconds":
                        raise BadTable(f"{path}:{n}: expected the header component,x,y,seconds")
                    header = True
                elif line:
                    try:
                        c, x, y, s = line.split(",")
                        comp.setdefault(c, {})[(float(x), float(y))] = float(s)
                    except ValueError:
                        raise BadTable(f"{path}:{n}: expected component,x,y,seconds")
    except (OSError, UnicodeDecodeError) as e:
        raise BadTable(f"{path}: {e.strerror if isinstance(e, OSError) else 'not text'}")
    if not header or not comp:
        raise BadTable(f"{path}: not a cost table (no rows)")
    return meta, comp


def whole_calls(meta, comp):
    """COMP with the attention floor of a measured table moved from linear back into the
    attention components, so that each is a whole call as a calibration times it."""
    floor = float(meta.get("attention_floor_s", 0))
    layers = next((int(kv.split("=")[1]) for kv in meta.get("shape", "").split() if kv.startswith("layers=")), 0)
    if not floor or not layers:
        return comp
    shift = floor * layers
    out = dict(comp)
    out["linear"] = {k: v - shift for k, v in comp.get("linear", {}).items()}
    for c in ("prefill_attn", "decode_attn"):
        out[c] = {k: v + shift for k, v in comp.get(c, {}).items()}
    return out


def interp1(xs, vs, x):
    if len(xs) == 1:
        return vs[0]
    i = min(max(bisect.bisect_right(xs, x) - 1, 0), len(xs) - 2)
    t = (x - xs[i]) / (xs[i + 1] - xs[i])
    return vs[i] + t * (vs[i + 1] - vs[i])


def at(points, x, y):
    xs = sorted({p[0] for p in points})
    ys = sorted({p[1] for p in points})
    col = [interp1(ys, [points[(xx, yy)] for yy in ys], y) for xx in xs]
    return interp1(xs, col, x)


def inside(points, x, y):
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    return min(xs) <= x <= max(xs) and min(ys) <= y <= max(ys)


def compare(a, b):
    """{component: [(x, y, a_seconds, b_seconds)]} at A's points inside B's grid."""
    out = {}
    for c in COMPONENTS:
        if c not in a or c not in b:
            continue
        out[c] = [(x, y, s, at(b[c], x, y)) for (x, y), s in sorted(a[c].items()) if inside(b[c], x, y)]
    return out


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        (ma, a), (mb, b) = read(argv[1]), read(argv[2])
    except BadTable as e:
        print(f"compare-tables: {e}", file=sys.stderr)
        return 2
    a, b = whole_calls(ma, a), whole_calls(mb, b)
    for name, path, m in (("A", argv[1], ma), ("B", argv[2], mb)):
        print(f"{name}: {path} ({m.get('device', '?')}; {m.get('shape', '?')})")
        scales = [f"{k} {v}" for k, v in m.items() if k.startswith("serving_scale")]
        if scales:
            print(f"   serving scales, not applied here: {'; '.join(scales)}")
        if "attention_floor_s" in m:
            print(f"   attention floor {float(m['attention_floor_s']) * 1e6:.1f} us a layer moved from linear into the attention components")
    if ma.get("shape") != mb.get("shape"):
        print("note: the two tables are of different shapes")
    print(f"{'component':<13} {'points':>6} {'median A/B':>10} {'min':>8} {'max':>8}   samples (x, y: A/B)")
    for c, rows in compare(a, b).items():
        ratios = [sa / sb for _, _, sa, sb in rows if sb > 0]
        if not ratios:
            print(f"{c:<13} {0:>6}")
            continue
        picks = rows[:: max(1, len(rows) // 4)][:5]
        sample = ", ".join(f"{x:g},{y:g}: {sa / sb:.2f}" for x, y, sa, sb in picks if sb > 0)
        print(f"{c:<13} {len(ratios):>6} {statistics.median(ratios):>10.3f} {min(ratios):>8.3f} {max(ratios):>8.3f}   {sample}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
