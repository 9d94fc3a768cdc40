#!/usr/bin/env python3
"""Cost tables from a public database of kernel timings measured on real GPUs.

NVIDIA's AIConfigurator ships, in the PyPI package aiconfigurator-core (Apache-2.0), timings
of vLLM's own kernels on real GPUs: GEMMs by (m, n, k), prefill ("context") attention by batch,
length and heads, decode ("generation") attention by batch and context, and an elementwise
quantization kernel by size. This script composes, for each model preset, the components of
a servesim cost table (docs/cost-model.md, "Measured tables") from those timings:

  linear(T)        per layer: the QKV, O, gate/up and down GEMMs at m = T, two fused
                   residual-add + RMSNorm, SiLU-and-mul, rotary (and Qwen3's QK norm), each
                   elementwise kernel priced by the stand-in below; plus the embedding, the
                   final norm, and the per-layer launch floor of the attention kernel, which
                   every step pays once (vLLM runs one attention call per layer for the whole
                   batch)
                   (a mixture of experts: the router GEMM, its softmax and top-k, and the
                   fused MoE kernel as timed at T tokens, in place of gate/up, SiLU-and-mul
                   and down)
  lm_head(R)       the LM-head GEMM at m = R sequences
  prefill_attn(n,c) one sequence's share of a batched prefill attention call: the timed
                   per-sequence cost at full length n + c in a saturated batch, less the launch
                   floor, scaled to the (query, key) pairs a chunk of n after c cached tokens
                   computes (n c + n (n + 1) / 2 of (n + c)(n + c + 1) / 2)
  decode_attn(b,s) decode attention of b sequences attending to s tokens, less the floor
  sample(R)        stand-in: greedy sampling's cast and argmax over R x vocab logits
  overhead         stand-in: the framework's per-step host time (--overhead-ms)

Tensor parallelism (--tp-models, at TP 2, 4 and 8): a table of one GPU of the group, whose
GEMMs, attention and LM head are that GPU's share (query heads, MLP columns and vocabulary
divided by TP; KV heads too until each GPU has one), and whose linear(T) adds the group's
all-reduces, timed by the database as vLLM's custom all-reduce on that many GPUs: two per
layer and one after the embedding, each of T x hidden elements (the CUDA-graph timing up to
512 tokens, vLLM's largest captured batch, the eager one above). lm_head(R) adds the gather
of the logits' slices to the first GPU, priced as an all-reduce of half the logits (an
all-gather moves half an all-reduce's bytes; the database times no gather).

FP8 (every model at TP 1, the --tp-models at each TP): "fp8" tables price vLLM's --quantization fp8 (FP8 GEMMs, each
timed with its input's quantization) with --kv-cache-dtype fp8 (attention timed with an FP8 KV cache);
"fp8-weights" tables the same GEMMs with the KV cache left in bf16, vLLM's default for an FP8
checkpoint; "fp8-kv" tables bf16 GEMMs with --kv-cache-dtype fp8 alone (the bf16 table's
linear layers beside the fp8 table's attention).

Every attention and GEMM figure is per layer in the database; the tables hold whole-model
seconds. The database has no kernel for norms, activation, rotary or sampling: they are
priced as memory-bound kernels, t = t0 + bytes / bandwidth, with t0 and the bandwidth fitted
(relative least squares) to the one elementwise kernel the database times on that GPU,
vLLM's static FP8 quantization (reads bf16, writes fp8). GPUs without that table take the
median fit of those with it (named in the table's header).

Usage:
  aic_import.py --db DATA_DIR --models MODELS.csv --out COSTS_DIR [--gpus a,b] [--date D]
                [--tp-models a,b]
DATA_DIR is aiconfigurator_core/systems (its data/<gpu>/<op>/vllm/<version>/*.parquet and
<gpu>.yaml), or a fixture of the same layout with .csv in place of .parquet (the tests).
MODELS.csv has name,layers,hidden,heads,kv_heads,head_dim,intermediate,vocab,qk_norm,
max_position,params, and optionally experts,experts_per_token (what `servesim presets --csv`
prints).
"""
import argparse
import bisect
import csv
import datetime
import math
import os
import statistics
import sys

PACKAGE = "aiconfigurator-core"
PACKAGE_VERSION = "0.12.0"
FRAMEWORK = "vllm"
DTYPE_BYTES = 2
# servesim hardware preset -> the database's system name
GPUS = {
    "a100": "a100_sxm", "h100": "h100_sxm", "h200": "h200_sxm", "b200": "b200_sxm",
    "b300": "b300_sxm", "gb200": "gb200", "gb300": "gb300", "l40s": "l40s",
    "rtx-pro-6000": "rtx_pro_6000_server", "b60": "b60",
}
# vLLM's default memory fraction, the share a model must fit in with room for KV
GPU_MEMORY_UTILIZATION = 0.9
MIN_KV_GIB = 1.0
# toy presets (tiny, small) exist for the CPU engine; nobody serves them on a GPU
MIN_PARAMS = 1e9
# tensor-parallel group sizes the database times all-reduces for
TP_DEGREES = (2, 4, 8)
# Each table's precision: its name's suffix -> (FP8 linear layers, the KV cache's element type
# in the database). "fp8" is vLLM's --quantization fp8 with --kv-cache-dtype fp8; "fp8-weights"
# its --quantization fp8 alone, which keeps the KV cache in the model's bf16 (vLLM's default for
# an FP8 checkpoint); "fp8-kv" its --kv-cache-dtype fp8 alone, bf16 weights beside an FP8 cache.
PRECISIONS = {"bf16": (False, "bfloat16"), "fp8": (True, "fp8"), "fp8-weights": (True, "bfloat16"),
              "fp8-kv": (False, "fp8")}
# A GEMM timing more than this many times the least timing of more rows (same n, k) is a
# spike (Gemm)
GEMM_SPIKE = 1.5
# vLLM captures CUDA graphs for batches up to this many tokens (its default capture sizes)
GRAPH_MAX_TOKENS = 512
# vLLM's fused all-reduce + residual add + RMSNorm (its compilation pass fuse_allreduce_rms:
# FlashInfer's port of TensorRT-LLM's all-reduce kernels) replaces the custom all-reduce and the
# norm after it on Hopper and Blackwell at TP > 1 by default since vLLM PR 34299 (2026-02-11),
# for all-reduces of up to this many MB a GPU, by compute capability and group size
# (FI_ALLREDUCE_FUSION_MAX_SIZE_MB, vllm/compilation/passes/fusion/allreduce_rms_fusion.py, as
# read at vLLM commit 0052812 on 2026-12-02). The tables price both paths; the simulator takes
# the fused one up to deployment.allreduce_fusion_max_mb (this default where -1).
FUSION_MAX_MB = {90: {2: 64, 4: 2, 8: 0.5}, 100: {2: 64, 4: 32, 8: 1}, 103: {2: 64, 4: 64, 8: 4}}
CAPABILITY = {"h100": 90, "h200": 90, "b200": 100, "gb200": 100, "b300": 103, "gb300": 103}
# The database times TensorRT-LLM's all-reduce kernels (trtllm's custom_allreduce_perf: its
# AllReduce with no fusion, strategy AUTO, in a CUDA graph): the fused kernel's stand-in
FUSED_FRAMEWORK = "trtllm"
# How a mixture of experts' tokens spread over its experts in the timed MoE kernel:
# AIConfigurator's default for such models (a power law of exponent 1.2, MOEModel in its
# sdk/models/moe.py), which is less even than real routing's best case ("balanced") and
# reads fewer experts at small batches.
MOE_DISTRIBUTION = "power_law_1.2"


class ImportError_(Exception):
    pass


# ---------------------------------------------------------------------------------------
# Reading the database (parquet) or a fixture of it (csv)

def read_rows(path_no_ext):
    """Rows of a table as dicts, from PATH.parquet or PATH.csv."""
    if os.path.exists(path_no_ext + ".parquet"):
        import pyarrow.parquet as pq
        return pq.read_table(path_no_ext + ".parquet").to_pylist()
    if os.path.exists(path_no_ext + ".csv"):
        with open(path_no_ext + ".csv", newline="") as f:
            rows = list(csv.DictReader(f))
        for r in rows:
            for k, v in r.items():
                try:
                    r[k] = int(v)
                except ValueError:
                    try:
                        r[k] = float(v)
                    except ValueError:
                        pass
        return rows
    raise ImportError_(f"{path_no_ext}.parquet: no such table")


def read_system_yaml(path):
    """The few numbers of systems/<gpu>.yaml we use (flat `key: value` lines under gpu:)."""
    out, section = {}, None
    with open(path) as f:
        for line in f:
            text = line.split("#", 1)[0].rstrip()
            if not text.strip():
                continue
            if not line.startswith(" "):
                section = text.rstrip(":").strip()
                continue
            if section == "gpu" and ":" in text:
                key, value = (s.strip() for s in text.split(":", 1))
                try:
                    out[key] = float(value)
                except ValueError:
                    pass
    for key in ("mem_bw", "bfloat16_tc_flops", "mem_capacity"):
        if key not in out:
            raise ImportError_(f"{path}: no gpu.{key}")
    return out


def versions(db, system, op):
    d = os.path.join(db, "data", system, op, FRAMEWORK)
    if not os.path.isdir(d):
        return []
    # numeric parts as numbers ("0.9.2" before "0.24.0"); a part such as "1rc1" after its
    # number and by its text, never compared with an int
    return sorted(os.listdir(d), key=lambda v: [(int(x), "") if x.isdigit() else (-1, x) for x in v.split(".")])


def table_path(db, system, op, version, name):
    return os.path.join(db, "data", system, op, FRAMEWORK, version, name)


# ---------------------------------------------------------------------------------------
# GEMMs: latency at (m, n, k); between timed (n, k) sites, utilization interpolated

class Gemm:
    """Timed bf16 GEMMs of one GPU. A query at a timed (n, k) and m is the timing itself;
    between m values it is linear in m; at an (n, k) without timings, the utilization
    (speed-of-light time / measured time) of the four surrounding sites at the same m is
    interpolated bilinearly in (log n, log k), and held flat past the outermost sites.
    Each (n, k)'s timings are first despiked along m: a timing more than SPIKE times the
    least timing of more rows takes that least timing. A GEMM of fewer rows does no more
    work and reads no more, and vLLM runs every m of a bucket (1-16, 17-64, ...) with one
    kernel configuration, yet some timings stand 1.5-3x above their neighbours (8.6% of the
    B200's FP8 ones, against 0.1-0.4% on the H100 and H200: the m = 4 of 8192 x 7168 at
    0.0339 ms between 0.0172 and 0.0171); one such cell would set the price of every step
    of that many tokens. Smaller excesses are left: half of all timings exceed some timing
    of more rows by a little, and lowering those would bias every price down."""

    def __init__(self, rows, flops, bw, dtype="bfloat16"):
        self.flops, self.bw, self.dtype = flops, bw, dtype
        self.in_bytes = 1 if dtype == "fp8" else DTYPE_BYTES  # inputs and weights; outputs bf16
        self.sites = {}
        for r in rows:
            if r["gemm_dtype"] != dtype:
                continue
            self.sites.setdefault((r["n"], r["k"]), {})[r["m"]] = r["latency"] * 1e-3
        if not self.sites:
            raise ImportError_(f"no {dtype} GEMM timings")
        self.cells = self.lowered = 0
        for curve in self.sites.values():
            least = math.inf
            for m in sorted(curve, reverse=True):
                self.cells += 1
                if curve[m] > GEMM_SPIKE * least:
                    curve[m] = least
                    self.lowered += 1
                least = min(least, curve[m])
        self.ns = sorted({n for n, _ in self.sites})
        self.ks = sorted({k for _, k in self.sites})
        ms = None
        for curve in self.sites.values():
            ms = set(curve) if ms is None else ms & set(curve)
        self.ms = sorted(ms)
        self.sources = sorted({r.get("kernel_source", "") for r in rows if r["gemm_dtype"] == dtype})

    def sol(self, m, n, k):
        return max(2.0 * m * n * k / self.flops, (self.in_bytes * (m * k + n * k) + DTYPE_BYTES * m * n) / self.bw)

    def _site(self, m, n, k):
        curve = self.sites.get((n, k))
        if curve is None:
            return None
        if m in curve:
            return curve[m]
        ms = self.ms
        i = bisect.bisect_left(ms, m)
        if i == 0 or i == len(ms):
            # outside the timed m: hold the utilization of the nearest timed m
            edge = ms[0] if i == 0 else ms[-1]
            return curve[edge] * self.sol(m, n, k) / self.sol(edge, n, k)
        lo, hi = ms[i - 1], ms[i]
        t = (m - lo) / (hi - lo)
        return curve[lo] + t * (curve[hi] - curve[lo])

    @staticmethod
    def _bracket(values, v):
        """Two neighbours of V in sorted VALUES and V's log-position between them (clamped)."""
        if v <= values[0]:
            return values[0], values[0], 0.0
        if v >= values[-1]:
            return values[-1], values[-1], 0.0
        i = bisect.bisect_left(values, v)
        if values[i] == v:
            return v, v, 0.0
        lo, hi = values[i - 1], values[i]
        return lo, hi, (math.log(v) - math.log(lo)) / (math.log(hi) - math.log(lo))

    def latency(self, m, n, k):
        exact = self._site(m, n, k)
        if exact is not None:
            return exact
        n0, n1, tn = self._bracket(self.ns, n)
        k0, k1, tk = self._bracket(self.ks, k)
        util = 0.0
        for nn, wn in ((n0, 1 - tn), (n1, tn)):
            for kk, wk in ((k0, 1 - tk), (k1, tk)):
                if wn * wk == 0:
                    continue
                t = self._site(m, nn, kk)
                if t is None:
                    raise ImportError_(f"no GEMM timings at n={nn} k={kk}")
                util += wn * wk * self.sol(m, nn, kk) / t
        return self.sol(m, n, k) / util


# ---------------------------------------------------------------------------------------
# Attention

def pairs(n, c):
    """(query, key) pairs a causal prefill of N tokens after C cached ones computes."""
    return n * c + n * (n + 1) / 2.0


def pick_kernel(rows):
    """The kernel source with the most timings (the framework's default on that GPU)."""
    counts = {}
    for r in rows:
        counts[r["kernel_source"]] = counts.get(r["kernel_source"], 0) + 1
    return max(sorted(counts), key=lambda s: counts[s])


def attention_rows(rows, kv_dtype="bfloat16"):
    out = [r for r in rows if r.get("attn_dtype", "bfloat16") == "bfloat16"
           and r["kv_cache_dtype"] == kv_dtype and r.get("window_size", 0) == 0]
    if not out:
        raise ImportError_(f"no attention timings with a {kv_dtype} KV cache")
    kernel = pick_kernel(out)
    return [r for r in out if r["kernel_source"] == kernel], kernel


def despike(grid):
    """{(batch, length): seconds} with single-cell spikes along the length removed: an
    interior cell becomes the median of itself and its two neighbours (which leaves every
    monotone run as it is), and a first cell over 1.5 times both of the next two takes the
    next one's value.
    Attention never gets cheaper with more context, yet a few timings jump 2-18x above both
    neighbours (the B60's one-sequence two-token decode); one such cell would set the price
    of a whole interval."""
    out = dict(grid)
    for b in sorted({b for b, _ in grid}):
        lengths = sorted(s for bb, s in grid if bb == b)
        v = [grid[(b, s)] for s in lengths]
        for i in range(1, len(v) - 1):
            out[(b, lengths[i])] = sorted(v[i - 1:i + 2])[1]
        if len(v) > 2 and v[0] > 1.5 * sorted(v[1:3])[0] and v[0] > 1.5 * sorted(v[1:3])[1]:
            out[(b, lengths[0])] = v[1]
    return out


class AttentionTable:
    """One attention table's timings for one (heads, kv heads, head dim): seconds by
    (batch, length), despiked; between timed head counts of the same kv heads and head dim,
    interpolated linearly in heads."""

    def __init__(self, rows, length_of):
        raw = {}
        for r in rows:
            cfg = (r["num_heads"], r["num_key_value_heads"], r["head_dim"])
            raw.setdefault(cfg, {})[(r["batch_size"], length_of(r))] = r["latency"] * 1e-3
        self.by_cfg = {cfg: despike(g) for cfg, g in raw.items()}

    def grid(self, heads, kv_heads, head_dim):
        """{(batch, length): seconds} for the shape, or None."""
        cfg = (heads, kv_heads, head_dim)
        if cfg in self.by_cfg:
            return self.by_cfg[cfg], "timed"
        same = sorted(h for h, kv, hd in self.by_cfg if kv == kv_heads and hd == head_dim)
        lower = [h for h in same if h < heads]
        upper = [h for h in same if h > heads]
        if not lower or not upper:
            return None, None
        h0, h1 = lower[-1], upper[0]
        g0, g1 = self.by_cfg[(h0, kv_heads, head_dim)], self.by_cfg[(h1, kv_heads, head_dim)]
        t = (heads - h0) / (h1 - h0)
        return {key: g0[key] + t * (g1[key] - g0[key]) for key in g0 if key in g1}, \
            f"interpolated between {h0} and {h1} heads"


class Attention:
    """Prefill and decode attention of one model shape on one GPU, per layer, in seconds."""

    def __init__(self, ctx_rows, gen_rows, heads, kv_heads, head_dim, kv_dtype="bfloat16"):
        ctx, self.ctx_kernel = attention_rows(ctx_rows, kv_dtype)
        gen, self.gen_kernel = attention_rows(gen_rows, kv_dtype)
        # context rows: isl = tokens; generation rows: step = tokens already cached, and the
        # query token attends to step + 1
        self.ctx, how_c = AttentionTable(ctx, lambda r: r["isl"]).grid(heads, kv_heads, head_dim)
        self.gen, how_g = AttentionTable(gen, lambda r: r["step"] + 1).grid(heads, kv_heads, head_dim)
        if self.ctx is None or self.gen is None:
            raise ImportError_(f"no attention timings for {heads} heads, {kv_heads} kv heads, head dim {head_dim}")
        self.how = how_c if how_c == how_g else f"prefill {how_c}, decode {how_g}"
        # the launch floor of one attention call: the fastest decode call timed
        self.floor = min(self.gen.values())
        self.ctx_lengths = sorted({s for _, s in self.ctx})
        self.gen_batches = sorted({b for b, _ in self.gen})
        self.gen_lengths = sorted({s for _, s in self.gen})
        # per-sequence cost in a saturated batch, at each timed length: the least over the
        # timed batches of (call - floor) / batch
        self.sat = {}
        for s in self.ctx_lengths:
            costs = [(t - self.floor) / b for (b, ss), t in self.ctx.items() if ss == s]
            self.sat[s] = max(min(costs), 0.0)

    def prefill_full(self, s):
        """One sequence's share of a batched prefill of S tokens (no cache), floor excluded:
        per pair, interpolated linearly in log S between timed lengths, held past them."""
        lengths = self.ctx_lengths
        if s in self.sat:
            return self.sat[s]
        if s <= lengths[0]:
            return self.sat[lengths[0]] * pairs(s, 0) / pairs(lengths[0], 0)
        if s >= lengths[-1]:
            return self.sat[lengths[-1]] * pairs(s, 0) / pairs(lengths[-1], 0)
        i = bisect.bisect_left(lengths, s)
        lo, hi = lengths[i - 1], lengths[i]
        t = (math.log(s) - math.log(lo)) / (math.log(hi) - math.log(lo))
        per_pair = (1 - t) * self.sat[lo] / pairs(lo, 0) + t * self.sat[hi] / pairs(hi, 0)
        return per_pair * pairs(s, 0)

    def prefill(self, n, c):
        if n <= 0:
            return 0.0
        return self.prefill_full(n + c) * pairs(n, c) / pairs(n + c, 0)

    def decode(self, b, s):
        """Decode attention of B sequences attending to S tokens, floor excluded. Timed cells
        as they are. Past the largest batch timed at that length (the database stops where
        the KV would not fit, at about b x s = 2^17 to 2^19 tokens) the call reads b x s keys
        and values: its cost per token read is the median over the edge of the timed region
        (the largest timed batch at each length within 4x of S), so that no single noisy
        edge cell sets it. Below it (gaps where interpolated head counts keep only the cells
        both neighbours have), the nearest timed batch's cost, floor excluded, scaled
        linearly in batch."""
        if (b, s) in self.gen:
            return max(self.gen[(b, s)] - self.floor, 0.0)
        timed = [bb for bb in self.gen_batches if (bb, s) in self.gen]
        if not timed:
            raise ImportError_(f"no decode timings at length {s}")
        if b > timed[-1]:
            edge = []
            for length in self.gen_lengths:
                if s / 4 <= length <= 4 * s:
                    top = max(bb for bb in self.gen_batches if (bb, length) in self.gen)
                    edge.append((self.gen[(top, length)] - self.floor) / (top * length))
            return max(statistics.median(edge) * b * s, 0.0)
        near = min(timed, key=lambda bb: (abs(math.log(bb / b)), -bb))
        return max((self.gen[(near, s)] - self.floor) * b / near, 0.0)


# ---------------------------------------------------------------------------------------
# Memory-bound kernels the database does not time

class Elementwise:
    """Seconds of a memory-bound kernel moving N bytes: t0 + bytes / bandwidth, both from
    vLLM's static fp8 quantization kernel (m x k bf16 read, fp8 written: 3 m k bytes) as
    timed on the GPU. t0 is the median latency of its smallest size class (under 64 KiB);
    the bandwidth that of its largest sizes (the slope between the two largest size classes,
    1 GiB and up), where the data streams from memory. The medium sizes run faster than that
    in the database, because the benchmark reads the same tensor in every repetition and the
    L2 cache keeps it; a forward's activations share the cache with the weights streaming
    through it, so the tables do not count on it."""

    def __init__(self, rows=None, t0=None, bandwidth=None, how=""):
        self.how = how
        if rows is None:
            self.t0, self.bandwidth = t0, bandwidth
            return
        classes = {}
        for r in rows:
            nbytes = r["m"] * r["k"] * 3.0
            classes.setdefault(int(math.log2(nbytes)), []).append((nbytes, r["latency"] * 1e-3))
        if len(classes) < 3:
            raise ImportError_("too few elementwise timings")
        med = [(statistics.median(p[0] for p in classes[c]), statistics.median(p[1] for p in classes[c]))
               for c in sorted(classes)]
        small = [t for c, (b, t) in zip(sorted(classes), med) if b < 65536]
        self.t0 = statistics.median(small) if small else med[0][1]
        (b0, t0_), (b1, t1) = med[-2], med[-1]
        if not (b1 >= 2**30 and t1 > t0_):
            raise ImportError_("the elementwise timings reach no size that streams from memory")
        self.bandwidth = (b1 - b0) / (t1 - t0_)

    def floor(self):
        return self.t0

    def hbm_bandwidth(self):
        return self.bandwidth

    def __call__(self, nbytes):
        return self.t0 + nbytes / self.bandwidth


# ---------------------------------------------------------------------------------------
# All-reduce

class AllReduce:
    """vLLM's custom all-reduce of one GPU, by group size, CUDA graph or eager, and message
    size in elements (bf16): timed sizes as they are, linear between them, the smallest
    timing below the smallest size (a fixed cost), and the last two sizes' slope past the
    largest. A mode the database lacks for a group size takes the other."""

    def __init__(self, rows):
        self.curves = {}
        for r in rows:
            if r.get("allreduce_dtype", "bfloat16") != "bfloat16":
                continue
            graph = r.get("backend", "vllm_graph") != "vllm_eager"
            self.curves.setdefault((r["num_gpus"], graph), {})[r["message_size"]] = r["latency"] * 1e-3
        self.sizes = {key: sorted(c) for key, c in self.curves.items()}
        if not self.curves:
            raise ImportError_("no bfloat16 all-reduce timings")

    def groups(self):
        return sorted({n for n, _ in self.curves})

    def latency(self, elements, n, graph):
        key = (n, graph) if (n, graph) in self.curves else (n, not graph)
        if key not in self.curves:
            raise ImportError_(f"no all-reduce timings on {n} GPUs")
        curve, sizes = self.curves[key], self.sizes[key]
        if elements <= sizes[0]:
            return curve[sizes[0]]
        i = bisect.bisect_left(sizes, elements)
        if i == len(sizes):
            lo, hi = sizes[-2], sizes[-1]
        else:
            lo, hi = sizes[i - 1], sizes[i]
        return curve[lo] + (elements - lo) * (curve[hi] - curve[lo]) / (hi - lo)


def allreduce_rows(db, system, version, framework=FRAMEWORK):
    """(version, rows) of FRAMEWORK's all-reduce timings on SYSTEM: VERSION's when timed, else
    the newest version's; (None, None) when the database has none."""
    d = os.path.join(db, "data", system, "comm", framework)
    if not os.path.isdir(d):
        return None, None
    have = [v for v in sorted(os.listdir(d), key=lambda v: [(int(x), "") if x.isdigit() else (-1, x) for x in v.split(".")])
            if os.path.exists(os.path.join(d, v, "custom_allreduce_perf.parquet"))
            or os.path.exists(os.path.join(d, v, "custom_allreduce_perf.csv"))]
    if not have:
        return None, None
    v = version if version in have else have[-1]
    return v, read_rows(os.path.join(d, v, "custom_allreduce_perf"))


def fusion_max_mb(g, tp):
    """vLLM's default largest fused all-reduce on GPU G in a group of TP, MB; None where vLLM
    does not fuse (no FlashInfer fusion for that compute capability or group size)."""
    return FUSION_MAX_MB.get(CAPABILITY.get(g), {}).get(tp)


# ---------------------------------------------------------------------------------------
# Mixture of experts

class MoE:
    """vLLM's fused MoE kernel (routing of the tokens to their experts, the experts' gate/up
    GEMM, SiLU-and-mul and down GEMM, and the weighted sum) for one shape, as timed at T
    tokens on one GPU whose experts each hold 1 / TP of their columns (no expert
    parallelism: vLLM's default). Timed token counts as they are, linear between them, the
    smallest timing below the smallest count, and the last two counts' slope past the
    largest."""

    def __init__(self, rows, hidden, inter, experts, topk, tp, dtype="bfloat16"):
        mine = [r for r in rows if (r["moe_dtype"], r["hidden_size"], r["inter_size"], r["num_experts"], r["topk"],
                                    r["moe_tp_size"], r["moe_ep_size"], r["distribution"])
                == (dtype, hidden, inter, experts, topk, tp, 1, MOE_DISTRIBUTION)]
        if not mine:
            raise ImportError_(f"no {dtype} MoE timings for hidden {hidden}, {experts} experts of {inter}, top {topk}, "
                               f"moe_tp {tp}")
        self.kernel = pick_kernel(mine)
        self.curve = {r["num_tokens"]: r["latency"] * 1e-3 for r in mine if r["kernel_source"] == self.kernel}
        self.tokens = sorted(self.curve)
        if len(self.tokens) < 2:
            raise ImportError_(f"too few MoE timings for hidden {hidden}, {experts} experts of {inter}")

    def latency(self, T):
        c, ts = self.curve, self.tokens
        if T <= ts[0]:
            return c[ts[0]]
        i = bisect.bisect_left(ts, T)
        lo, hi = (ts[-2], ts[-1]) if i == len(ts) else (ts[i - 1], ts[i])
        return c[lo] + (T - lo) * (c[hi] - c[lo]) / (hi - lo)


def moe_rows(db, system, version):
    """vLLM's MoE kernel timings on SYSTEM for VERSION, or None."""
    try:
        return read_rows(table_path(db, system, "moe", version, "moe_perf"))
    except ImportError_:
        return None


# ---------------------------------------------------------------------------------------
# Composition

class Model:
    FIELDS = ("layers", "hidden", "heads", "kv_heads", "head_dim", "intermediate", "vocab",
              "qk_norm", "max_position", "params")

    def __init__(self, row):
        self.name = row["name"]
        for f in self.FIELDS:
            setattr(self, f, int(row[f]))
        # a mixture of experts: INTERMEDIATE is one expert's
        self.experts = int(row.get("experts") or 0)
        self.experts_per_token = int(row.get("experts_per_token") or 0)

    def shape(self):
        s = (f"layers={self.layers} hidden={self.hidden} heads={self.heads} kv_heads={self.kv_heads} "
             f"head_dim={self.head_dim} intermediate={self.intermediate} vocab={self.vocab}")
        return s + (f" experts={self.experts} topk={self.experts_per_token}" if self.experts else "")

    def router_params(self):
        return self.layers * self.hidden * self.experts

    def linear_params(self):
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        mlps = max(self.experts, 1)
        return (self.layers * (self.hidden * (q + 2 * kv) + q * self.hidden + mlps * 3 * self.hidden * self.intermediate)
                + self.router_params())

    def splits_by(self, tp):
        """Whether vLLM can split the model over TP GPUs (as servesim's model_check_tp)."""
        kv_ok = self.kv_heads % tp == 0 if self.kv_heads >= tp else tp % self.kv_heads == 0
        return self.heads % tp == 0 and self.intermediate % tp == 0 and kv_ok

    def shard(self, tp):
        """One GPU's share in a TP group (servesim's model_shard): heads, KV heads (at least
        one), MLP columns and vocabulary divided; layers and hidden size whole."""
        s = Model.__new__(Model)
        s.__dict__.update(self.__dict__)
        s.heads = self.heads // tp
        s.kv_heads = self.kv_heads // tp if self.kv_heads >= tp else 1
        s.intermediate = self.intermediate // tp
        s.vocab = -(-self.vocab // tp)
        s.params = self.params / tp
        return s


def read_models(path):
    """The presets of MODELS.csv, one per distinct shape: of presets sharing a shape
    (llama-3-8b and llama-3.1-8b) the one with the longest context, whose table covers both."""
    with open(path, newline="") as f:
        models = [Model(r) for r in csv.DictReader(f)]
    best = {}
    for m in models:
        if m.shape() not in best or m.max_position > best[m.shape()].max_position:
            best[m.shape()] = m
    return [m for m in models if best[m.shape()] is m], [(m, best[m.shape()]) for m in models if best[m.shape()] is not m]


def fits(model, mem_bytes, tp=1, fp8=False):
    """FP8 keeps the embedding, norms, a mixture of experts' router and the LM head in bf16 (as
    vLLM's --quantization fp8)."""
    weights = model.params * DTYPE_BYTES - (model.linear_params() - model.router_params() if fp8 else 0)
    return weights / tp + MIN_KV_GIB * 2**30 <= mem_bytes * GPU_MEMORY_UTILIZATION


def norms_cost(m, ew, T):
    """The 2 L + 1 fused residual-add + RMSNorms of a step of T tokens (two a layer and the
    final one; each reads x and the residual and writes both)."""
    return (2 * m.layers + 1) * ew(4 * T * m.hidden * DTYPE_BYTES)


def allreduce_cost(m, ew, ar, tp, T):
    """The all-reduces of a step of T tokens in a TP group, by vLLM's custom all-reduce, and the
    norm each one feeds: two per layer (after attention's output projection and after the MLP)
    and one after the embedding, of T x hidden each, every one followed by a residual-add +
    RMSNorm (the first layer's has no residual; priced alike)."""
    return (2 * m.layers + 1) * ar.latency(T * m.hidden, tp, T <= GRAPH_MAX_TOKENS) + norms_cost(m, ew, T)


def fused_allreduce_cost(m, ew, fused, tp, T, quantized=0):
    """The same all-reduces and norms as one kernel each (vLLM's fuse_allreduce_rms), priced as
    TensorRT-LLM's all-reduce of T x hidden (FlashInfer's fused kernel is its port), plus the
    bytes the norm adds to it at memory bandwidth: it adds the residual and normalizes in the
    pass that writes the sum, which saves the norm's launch and its re-read of the sum, not the
    residual read nor the normalized row written (2 T x hidden elements; no launch floor).
    QUANTIZED of the norms (fused_quantizations) write their row in FP8, one byte an element:
    the kernel quantizes it for the next GEMM."""
    elements = 2 * T * m.hidden
    return ((2 * m.layers + 1) * (fused.latency(T * m.hidden, tp, True) + elements * DTYPE_BYTES / ew.hbm_bandwidth())
            - quantized * T * m.hidden * (DTYPE_BYTES - 1) / ew.hbm_bandwidth())


def fused_quantizations(m, fp8):
    """How many of a step's fused norms also quantize their output to FP8 for the GEMM after
    them (vLLM's AllReduceFused[Add]RMSNormStaticQuantFP8 patterns: the norm before each
    layer's QKV GEMM, the first after the embedding's all-reduce, and the one before its
    gate/up GEMM; with experts the MLP's input goes to the bf16 router, so only the first);
    the final norm feeds the bf16 LM head. 0 without FP8 GEMMs."""
    return 0 if not fp8 else m.layers if m.experts else 2 * m.layers


def fused_price(m, ew, fused, tp, T, fused_mb, unfused, quantized=0):
    """allreduce_fused at T tokens: the stand-in's price, and within vLLM's default size FUSED_MB
    (MiB of T x hidden x 2 bytes) at most UNFUSED, allreduce's (compose says why). With FP8
    GEMMs, QUANTIZED of them (fused_quantizations) find their input quantized by the fused
    kernel: their timings hold a quantization kernel (linear_cost) that does not run, taken
    off here (vLLM weighs fused against unfused with that kernel in both, so the cap
    compares them so too)."""
    saved = quantized * ew(3 * T * m.hidden)  # each: T x hidden read in bf16, written in fp8
    t = fused_allreduce_cost(m, ew, fused, tp, T, quantized) - saved
    return min(t, unfused) if T * m.hidden * DTYPE_BYTES <= fused_mb * 2**20 else t


def linear_cost(m, gemm, ew, attn_floor, T, tp=1, moe=None, router_gemm=None):
    """M is the GPU's share (Model.shard) when TP > 1, whose all-reduces and the norms after
    them are components of their own (allreduce_cost). FP8 GEMMs are timed with their input's
    quantization (below). A mixture of experts' MLP is MOE's fused kernel after the router's
    bf16 GEMM (ROUTER_GEMM) and its softmax and top-k."""
    q, kv = m.heads * m.head_dim, m.kv_heads * m.head_dim
    h, inter, b = m.hidden, m.intermediate, DTYPE_BYTES
    per_layer = gemm.latency(T, q + 2 * kv, h) + gemm.latency(T, h, q)
    if moe:
        # the router: T x E logits (bf16), then softmax and top-k (read them, write k ids
        # and weights of 4 bytes each a token)
        E, k = m.experts, m.experts_per_token
        per_layer += router_gemm.latency(T, E, h) + ew(T * E * b + T * k * 8) + moe.latency(T)
    else:
        per_layer += gemm.latency(T, 2 * inter, h) + gemm.latency(T, h, inter)
        per_layer += ew(3 * T * inter * b)  # SiLU-and-mul: read 2 I, write I
    # rotary on q and k in place, and Qwen3's per-head norm of q and k (the layer's two
    # residual-add + RMSNorms: norms_cost)
    per_layer += ew(2 * T * (q + kv) * b)
    if m.qk_norm:
        per_layer += ew(2 * T * q * b) + ew(2 * T * kv * b)
    # With FP8 each GEMM's bf16 input is quantized first; the database's FP8 GEMM timings hold
    # that kernel already: its collector times vLLM's FP8 linear layer whole (the forward of a
    # RowParallelLinear with a static activation scale: quantization, then the scaled GEMM),
    # and at the smallest shapes the FP8 timing is the bf16 one plus about 2 us, the
    # quantization kernel's floor (H100, m = 1, 128 x 128: 0.0049 against 0.0027 ms).
    # embedding gather (read and write a row per token); with TP 1, the norms
    whole = ew(2 * T * h * b) + (norms_cost(m, ew, T) if tp == 1 else 0.0)
    return m.layers * (per_layer + attn_floor) + whole


def lm_head_cost(m, gemm, R, tp=1, ar=None, full_vocab=None):
    """The LM head's GEMM over the GPU's slice of the vocabulary, and with TP > 1 the gather
    of the slices (R x FULL_VOCAB logits) to the first GPU, priced as an all-reduce of half."""
    t = gemm.latency(R, m.vocab, m.hidden)
    if tp > 1:
        t += ar.latency(R * full_vocab // 2, tp, R <= GRAPH_MAX_TOKENS)
    return t


def sample_cost(vocab, ew, R):
    # greedy: logits cast to fp32 (read 2, write 4 bytes each), then argmax (read 4)
    return ew(R * vocab * 6) + ew(R * vocab * 4)


def grid_tokens(gemm, top):
    return [t for t in gemm.ms if t <= top] + ([top] if top > gemm.ms[-1] else [])


COMPONENTS = ("linear", "allreduce", "allreduce_fused", "prefill_attn", "decode_attn", "lm_head", "sample", "overhead")


def compose(m, gemm, attn, ew, overhead_s, tp=1, ar=None, full_vocab=None, lm_gemm=None, moe=None, fused=None,
            fused_mb=None, fused_quantized=0):
    """{component: [(x, y, seconds)]} for model M (one GPU's share when TP > 1). LM_GEMM prices
    the LM head and a mixture of experts' router (bf16 whatever GEMM prices the layers;
    default GEMM); MOE its experts. With TP > 1, AR prices the all-reduces (allreduce) and
    FUSED, where vLLM fuses them up to FUSED_MB by default, the fused kernel (allreduce_fused):
    within that size never above the unfused price. vLLM benchmarks its fused kernel against
    the unfused path (benchmarks/kernels/benchmark_fused_collective.py) and fuses by default
    only up to those sizes; the stand-in's TensorRT-LLM kernel picks its own algorithm by
    size, and on 8 Hopper GPUs it turns slower than the custom all-reduce below vLLM's size.
    FUSED_QUANTIZED: fused_quantizations."""
    lm_gemm = lm_gemm or gemm
    L = m.layers
    rows = {c: [] for c in COMPONENTS}
    max_len = min(m.max_position, 131072)
    for T in grid_tokens(gemm, 65536):
        rows["linear"].append((T, 0, linear_cost(m, gemm, ew, attn.floor, T, tp, moe, lm_gemm)))
        if tp > 1:
            unfused = allreduce_cost(m, ew, ar, tp, T)
            rows["allreduce"].append((T, 0, unfused))
            if fused:
                rows["allreduce_fused"].append((T, 0, fused_price(m, ew, fused, tp, T, fused_mb, unfused,
                                                                  fused_quantized)))
    seqs = [s for s in gemm.ms if s <= 4096]
    for R in seqs:
        rows["lm_head"].append((R, 0, lm_head_cost(m, lm_gemm, R, tp, ar, full_vocab)))
        # the first GPU samples from the whole vocabulary
        rows["sample"].append((R, 0, sample_cost(m.vocab if tp == 1 else full_vocab, ew, R)))
    # prefill: timed lengths and their geometric midpoints, up to the model's context
    base = sorted(set(attn.ctx_lengths) | {2 ** k for k in range(15, 18)})
    base = [s for s in base if s <= max_len]
    ns = sorted(set(base) | {int(round(math.sqrt(a * b))) for a, b in zip(base, base[1:])})
    cs = [0] + [c for c in ns if c >= 256]
    for n in ns:
        for c in cs:
            rows["prefill_attn"].append((n, c, L * attn.prefill(n, c)))
    for b in attn.gen_batches:
        for s in attn.gen_lengths:
            if s <= 2 * max_len:
                rows["decode_attn"].append((b, s, L * attn.decode(b, s)))
    rows["overhead"].append((0, 0, overhead_s))
    return rows


def decode_drop(rows, floor, layers):
    """The first place where decode attention gets cheaper with a longer context, at the same
    batch, by more than timing noise (below 0.8 of the shorter context's price less half the
    launch floor a layer), as "batch B: X s at S tokens, Y s at S' tokens"; None when none
    does. tests/test_measured.c holds every committed table to the same rule."""
    grid = {(b, s): t for b, s, t in rows["decode_attn"]}
    slack = 0.5 * floor * layers
    for b in sorted({b for b, _ in grid}):
        lengths = sorted(s for bb, s in grid if bb == b)
        for s0, s1 in zip(lengths, lengths[1:]):
            if grid[(b, s1)] < 0.8 * grid[(b, s0)] - slack:
                return f"batch {b}: {grid[(b, s0)]:.3g} s at {s0} tokens, {grid[(b, s1)]:.3g} s at {s1}"
    return None


def write_table(path, meta, rows):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write("# servesim cost table\n")
        for key, value in meta:
            if len(value) > 255 or "\n" in value:
                raise ImportError_(f"header {key} too long")
            f.write(f"# {key}: {value}\n")
        f.write("component,x,y,seconds\n")
        for comp in COMPONENTS:
            for x, y, s in rows[comp]:
                f.write(f"{comp},{x:.10g},{y:.10g},{s:.9g}\n")
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------------

def gpu_sources(db, system):
    """(version, gemm rows, ctx rows, gen rows, quant rows or None) for every framework
    version with GEMM and both attention tables."""
    out = []
    gemm_versions = versions(db, system, "gemm")
    for v in versions(db, system, "attention"):
        if v not in gemm_versions:
            continue
        try:
            ctx = read_rows(table_path(db, system, "attention", v, "context_attention_perf"))
            gen = read_rows(table_path(db, system, "attention", v, "generation_attention_perf"))
            gemm = read_rows(table_path(db, system, "gemm", v, "gemm_perf"))
        except ImportError_:
            continue
        quant = None
        for qv in reversed(versions(db, system, "quantize")):
            try:
                quant = read_rows(table_path(db, system, "quantize", qv, "scale_matrix_perf"))
                break
            except ImportError_:
                pass
        out.append((v, gemm, ctx, gen, quant))
    return out


def elementwise_curves(db):
    """{gpu: Elementwise} for every GPU whose database times the quantization kernel."""
    curves = {}
    for g, system in GPUS.items():
        for qv in reversed(versions(db, system, "quantize")):
            try:
                curves[g] = Elementwise(read_rows(table_path(db, system, "quantize", qv, "scale_matrix_perf")))
                break
            except ImportError_:
                pass
    return curves


def elementwise_stand_in(db, g, spec, curves):
    """GPU G's elementwise pricing: its own timed kernel, else t0 + bytes / bandwidth with the
    median floor and share of peak bandwidth of the GPUs that have one."""
    if g in curves:
        ew = curves[g]
        ew.how = (f"t0 + bytes / bandwidth from {g}'s timed static fp8 quantization kernel: t0 "
                  f"{ew.floor() * 1e6:.2f} us (its smallest sizes), {ew.hbm_bandwidth() / spec['mem_bw']:.2f} of peak "
                  f"bandwidth (its largest)")
        return ew
    if not curves:
        raise ImportError_("no GPU has elementwise timings for the stand-in")
    t0 = statistics.median(c.floor() for c in curves.values())
    eff = statistics.median(c.hbm_bandwidth() / read_system_yaml(os.path.join(db, f"{GPUS[o]}.yaml"))["mem_bw"]
                            for o, c in curves.items())
    return Elementwise(t0=t0, bandwidth=eff * spec["mem_bw"],
                       how=(f"no elementwise timings on {g}: t0 + bytes / bandwidth with the median floor "
                            f"({t0 * 1e6:.2f} us) and share of peak bandwidth ({eff:.2f}) of the {len(curves)} GPUs timed"))


def table_meta(g, version, m, gemm, attn, ew, args):
    return [
        ("device", f"{g} ({GPUS[g]}), {FRAMEWORK} {version} kernels"),
        ("shape", m.shape()),
        ("model", m.name),
        ("source", f"{PACKAGE} {PACKAGE_VERSION} (PyPI), systems/data/{GPUS[g]}, {FRAMEWORK} {version}"),
        ("license", f"timings from {PACKAGE} {PACKAGE_VERSION}, Apache-2.0, Copyright NVIDIA CORPORATION & AFFILIATES; see costs/NOTICE"),
        ("framework", f"{FRAMEWORK} {version}"),
        ("gpu", GPUS[g]),
        ("kernels", f"GEMM {'/'.join(gemm.sources)}; prefill {attn.ctx_kernel}; decode {attn.gen_kernel}; attention {attn.how}"),
        ("gemm_timings", f"despiked along m: {gemm.lowered} of the {gemm.cells} {gemm.dtype} timings, more than "
                         f"{GEMM_SPIKE:g}x the least timing of more rows of the same (n, k), lowered to it"),
        ("date", args.date),
        ("method", "composed by scripts/aic_import.py from per-layer kernel timings (docs/cost-model.md, Measured tables)"),
        ("attention_floor_s", f"{attn.floor:.9g}"),
        ("stand_in_elementwise", ("norms, router softmax and top-k" if m.experts else "norms, SiLU-and-mul")
         + ", rotary, QK norm, embedding, sampling: " + ew.how),
        ("stand_in_sample", "greedy sampling: fp32 cast and argmax over R x vocab logits, priced as elementwise kernels"),
        ("stand_in_overhead", f"{args.overhead_ms:g} ms per step: {args.overhead_source}"),
        ("host_us_per_seq", f"{args.host_us_per_seq:g}"),
        ("stand_in_host", f"{args.host_us_per_seq:g} us of host work per sequence of a step: {args.host_source}"),
    ]


def table_file_name(model, tp, prec, version):
    """The file a table of MODEL at tensor parallelism TP, precision PREC (one of PRECISIONS)
    and VERSION has in its GPU's folder: <model>[.tp<N>][.<prec>].vllm-<version>.csv."""
    return model + (f".tp{tp}" if tp > 1 else "") + ("" if prec == "bf16" else f".{prec}") + f".{FRAMEWORK}-{version}.csv"


def compose_one(args, g, spec, version, m, tp, prec, gemm, lm_gemm, ar, ar_version, ew, ctx_rows, gen_rows, skipped,
                moe_table=None, fused=None, fused_version=None):
    """Writes the table of model M on GPU G at tensor parallelism TP and precision PREC (one of
    PRECISIONS); its path, or None with the reason in SKIPPED."""
    fp8, kv_dtype = PRECISIONS[prec]
    label = m.name + (f" tp {tp}" if tp > 1 else "") + ("" if prec == "bf16" else f" {prec}")
    why = None
    if tp > 1 and not m.splits_by(tp):
        why = "its heads or MLP do not split that way"
    elif tp > 1 and (ar is None or tp not in ar.groups()):
        why = f"no vLLM all-reduce timings on {tp} GPUs"
    elif gemm is None:
        why = "no fp8 GEMM timings"
    elif not fits(m, spec["mem_capacity"], tp, fp8):
        why = "does not fit on one GPU" if tp == 1 else f"does not fit on {tp} GPUs"
    elif m.experts and moe_table is None:
        why = f"no vLLM {version} MoE kernel timings"
    if why:
        skipped.append((g, label, why))
        return None
    shard = m.shard(tp) if tp > 1 else m
    try:
        attn = Attention(ctx_rows, gen_rows, shard.heads, shard.kv_heads, shard.head_dim, kv_dtype)
        moe = None
        if m.experts:
            moe = MoE(moe_table, m.hidden, m.intermediate, m.experts, m.experts_per_token, tp,
                      "fp8" if fp8 else "bfloat16")
        fuse_mb = fusion_max_mb(g, tp)  # None at TP 1 and where vLLM does not fuse
        fuse = fused if fuse_mb and fused and tp in fused.groups() else None
        rows = compose(shard, gemm, attn, ew, args.overhead_ms * 1e-3, tp, ar, m.vocab, lm_gemm, moe, fuse, fuse_mb,
                       fused_quantizations(m, fp8))
    except ImportError_ as e:
        skipped.append((g, label, str(e)))
        return None
    drop = decode_drop(rows, attn.floor, m.layers)
    if drop:
        skipped.append((g, label, f"its decode attention timings fall with a longer context ({drop}), "
                                  "noise the despiking does not remove"))
        return None
    meta = table_meta(g, version, m, gemm, attn, ew, args)
    if moe:
        meta += [("moe", f"{m.experts} experts of {m.intermediate}, {m.experts_per_token} a token, 1/{tp} of each per GPU: "
                         f"fused kernel {moe.kernel} timed with {MOE_DISTRIBUTION} routing; router GEMM bf16")]
    if tp > 1:
        meta += [
            ("tensor_parallel", str(tp)),
            ("allreduce", f"vLLM custom all-reduce on {tp} GPUs as timed for {FRAMEWORK} {ar_version}, "
                          f"2 per layer + 1, each with the residual-add + RMSNorm after it (CUDA graph up to "
                          f"{GRAPH_MAX_TOKENS} tokens, eager above); the logits' gather in lm_head as an "
                          f"all-reduce of half of them"),
        ]
        if fuse:
            meta += [
                ("allreduce_fused", f"vLLM's fused all-reduce + RMSNorm (fuse_allreduce_rms) as TensorRT-LLM's "
                                    f"all-reduce on {tp} GPUs as timed for {FUSED_FRAMEWORK} {fused_version} (CUDA graph) "
                                    f"and the norm's residual read and output write at memory bandwidth; up to vLLM's "
                                    f"size, at most allreduce"),
                ("allreduce_fusion_max_mb", f"{fuse_mb:g}"),
            ]
            if fp8:
                meta += [("allreduce_fused_fp8", f"{fused_quantizations(m, fp8)} of the fused norms also quantize their "
                                                 f"output to FP8 for the GEMM after them (vLLM's "
                                                 f"AllReduceFused*RMSNormStaticQuantFP8 patterns, static activation "
                                                 f"scales): the quantization the FP8 GEMM timings hold is taken off "
                                                 f"allreduce_fused")]
    if fp8:
        meta += [("quantization", "fp8: QKV, O, gate/up and down GEMMs in FP8 with per-tensor scales, static for the "
                                  "activations (vLLM's --quantization fp8 on an FP8 checkpoint), each timed as vLLM's "
                                  "FP8 linear layer, its input's quantization included; embedding and LM head bf16")]
    if fp8 or kv_dtype == "fp8":
        meta += [("kv_cache_dtype", "fp8 (vLLM's --kv-cache-dtype fp8): attention timed with an fp8 KV cache"
                  if kv_dtype == "fp8" else "auto (vLLM's default: the model's bf16): attention timed with a bf16 KV cache")]
    gdir = os.path.join(args.out, g)
    os.makedirs(gdir, exist_ok=True)
    path = os.path.join(gdir, table_file_name(m.name, tp, prec, version))
    write_table(path, meta, rows)
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", required=True, help="aiconfigurator_core/systems (or a fixture)")
    ap.add_argument("--models", required=True, help="model presets CSV (servesim presets --csv)")
    ap.add_argument("--out", required=True, help="folder of the tables (COSTS/<gpu>/<model>.vllm-<ver>.csv)")
    ap.add_argument("--gpus", default=",".join(GPUS), help="servesim hardware presets to import")
    ap.add_argument("--overhead-ms", type=float, required=True,
                    help="the framework's per-step host time (the database has none)")
    ap.add_argument("--overhead-source", required=True, help="where --overhead-ms comes from (header)")
    ap.add_argument("--host-us-per-seq", type=float, required=True,
                    help="the framework's host time per sequence of a step, microseconds (the database has none)")
    ap.add_argument("--host-source", required=True, help="where --host-us-per-seq comes from (header)")
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    ap.add_argument("--tp-models", default="",
                    help="model presets to also compose at tensor parallelism 2, 4 and 8 (comma-separated); "
                         "every model is composed in bf16 and in FP8 (weights and KV cache, weights "
                         "alone, KV cache alone)")
    args = ap.parse_args(argv)

    models, same_shape = read_models(args.models)
    tp_models = [t for t in args.tp_models.split(",") if t]
    for t in tp_models:
        if t not in {m.name for m in models}:
            ap.error(f"--tp-models: {t!r} is not a preset of {args.models} with a table of its own")
    gpus = [g for g in args.gpus.split(",") if g]
    for g in gpus:
        if g not in GPUS:
            ap.error(f"--gpus: unknown GPU {g!r} (known: {', '.join(GPUS)})")

    sources = {}
    for g in gpus:
        spec = read_system_yaml(os.path.join(args.db, f"{GPUS[g]}.yaml"))
        sources[g] = (spec, gpu_sources(args.db, GPUS[g]))
    curves = elementwise_curves(args.db)
    written, skipped = [], []
    for g in gpus:
        spec, per_version = sources[g]
        if not per_version:
            skipped.append((g, "-", "no vLLM GEMM and attention tables"))
            continue
        ew = elementwise_stand_in(args.db, g, spec, curves)
        for version, gemm_rows, ctx_rows, gen_rows, _ in per_version:
            gemms = {"bf16": Gemm(gemm_rows, spec["bfloat16_tc_flops"], spec["mem_bw"])}
            try:
                gemms["fp8"] = Gemm(gemm_rows, spec.get("fp8_tc_flops", spec["bfloat16_tc_flops"]), spec["mem_bw"], "fp8")
            except ImportError_:
                gemms["fp8"] = None
            ar_version, ar_rows = allreduce_rows(args.db, GPUS[g], version)
            ar = AllReduce(ar_rows) if ar_rows else None
            fused_version, fused_rows = allreduce_rows(args.db, GPUS[g], None, FUSED_FRAMEWORK)
            fused = AllReduce(fused_rows) if fused_rows and g in CAPABILITY else None
            moe_table = moe_rows(args.db, GPUS[g], version) if any(m.experts for m in models) else None
            for m in models:
                if m.params < MIN_PARAMS:
                    skipped.append((g, m.name, "a toy preset (under 1B parameters)"))
                    continue
                more = m.name in tp_models
                for tp in (1,) + (TP_DEGREES if more else ()):
                    for prec in PRECISIONS:
                        t = compose_one(args, g, spec, version, m, tp, prec, gemms["fp8" if PRECISIONS[prec][0] else "bf16"], gemms["bf16"], ar, ar_version, ew,
                                        ctx_rows, gen_rows, skipped, moe_table, fused, fused_version)
                        if t:
                            written.append(t)
    for g in gpus:
        for m, kept in same_shape:
            skipped.append((g, m.name, f"same shape as {kept.name}, whose table covers it"))
    for path in written:
        print(f"wrote {path}")
    for g, name, why in skipped:
        print(f"skipped {g} {name}: {why}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ImportError_ as e:
        print(f"aic_import: {e}", file=sys.stderr)
        sys.exit(2)
