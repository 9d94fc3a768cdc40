"""scripts/aic_import.py on a slice of the kernel database (tests/data/aic-slice): every
component of a composed table checked against the fixture's rows by hand, the header's
provenance, and the models it must leave out. Standard library only (CI has no pyarrow)."""
import csv
import math
import os
import statistics
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SLICE = os.path.join(ROOT, "tests", "data", "aic-slice")
DATA = os.path.join(SLICE, "data", "h200_sxm")
T0, BW = 2e-6, 4e12  # the slice's elementwise timings: T0 + bytes / BW


def ew(nbytes):
    return T0 + nbytes / BW

# exact: every GEMM shape timed; interp: gate/up n = 28,672 and down k = 14,336 are not
# moe: Mixtral-8x7B's experts (8 of 14,336 columns, 2 a token) on two of exact's layers
MODELS = """name,layers,hidden,heads,kv_heads,head_dim,intermediate,vocab,qk_norm,max_position,params,experts,experts_per_token
exact,2,4096,32,8,128,6144,8192,0,4096,2000000000,0,0
exact-short,2,4096,32,8,128,6144,8192,0,2048,2000000000,0,0
interp,2,4096,32,8,128,14336,8192,1,4096,2000000000,0,0
toy,2,4096,32,8,128,6144,4096,0,4096,900000000,0,0
huge,3,4096,32,8,128,6144,8192,0,4096,90000000000,0,0
moe,2,4096,32,8,128,14336,8192,0,4096,3000000000,8,2
"""


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def gemm(m, n, k, dtype="bfloat16"):
    """The slice's timing of (m, n, k); these are no spikes (test_gemm_timings_are_despiked_along_m
    checks the importer's rule, and asserts so)."""
    for r in rows(os.path.join(DATA, "gemm", "vllm", "0.24.0", "gemm_perf.csv")):
        if int(r["m"]) == m and int(r["n"]) == n and int(r["k"]) == k and r["gemm_dtype"] == dtype:
            return float(r["latency"]) * 1e-3
    raise KeyError((m, n, k))


def attention(table, kernel="vllm_flash_attn_fa3", heads=(32, 8), kv="bfloat16"):
    out = {}
    for r in rows(os.path.join(DATA, "attention", "vllm", "0.24.0", f"{table}_attention_perf.csv")):
        if (r["kernel_source"] == kernel and (int(r["num_heads"]), int(r["num_key_value_heads"])) == heads
                and r["kv_cache_dtype"] == kv):
            length = int(r["isl"]) if table == "context" else int(r["step"]) + 1
            out[(int(r["batch_size"]), length)] = float(r["latency"]) * 1e-3
    return out


def read_table(path):
    meta, comp = {}, {}
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("# ") and ": " in line:
                k, v = line[2:].split(": ", 1)
                meta[k] = v
            elif line and not line.startswith("#") and not line.startswith("component"):
                c, x, y, s = line.split(",")
                comp.setdefault(c, {})[(float(x), float(y))] = float(s)
    return meta, comp


class ImportSlice(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        models = os.path.join(cls.tmp.name, "models.csv")
        with open(models, "w") as f:
            f.write(MODELS)
        cls.out = os.path.join(cls.tmp.name, "costs")
        r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "aic_import.py"), "--db", SLICE,
                            "--models", models, "--out", cls.out, "--gpus", "h200", "--overhead-ms", "0.4",
                            "--overhead-source", "the test", "--host-us-per-seq", "11.1", "--host-source", "the host test",
                            "--date", "2026-11-30", "--tp-models", "exact,moe"],
                           capture_output=True, text=True)
        cls.stdout, cls.stderr, cls.rc = r.stdout, r.stderr, r.returncode
        cls.meta, cls.t = read_table(os.path.join(cls.out, "h200", "exact.vllm-0.24.0.csv"))
        cls.floor = min(attention("generation").values())

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_runs_and_leaves_out_what_it_must(self):
        self.assertEqual(self.rc, 0, self.stderr)
        self.assertIn("skipped h200 toy: a toy preset", self.stdout)
        self.assertIn("skipped h200 huge: does not fit on one GPU", self.stdout)
        # exact-short has exact's shape and a shorter context: one table, named for the longer
        self.assertIn("skipped h200 exact-short: same shape as exact, whose table covers it", self.stdout)
        self.assertEqual(sorted(os.listdir(os.path.join(self.out, "h200"))),
                         ["exact.fp8-kv.vllm-0.24.0.csv", "exact.fp8-weights.vllm-0.24.0.csv", "exact.fp8.vllm-0.24.0.csv",
                          "exact.tp2.fp8-weights.vllm-0.24.0.csv", "exact.tp2.vllm-0.24.0.csv", "exact.vllm-0.24.0.csv",
                          # interp is not a --tp-models preset: FP8 at TP 1, no TP 2
                          "interp.fp8-kv.vllm-0.24.0.csv", "interp.fp8-weights.vllm-0.24.0.csv",
                          "interp.fp8.vllm-0.24.0.csv",
                          "interp.vllm-0.24.0.csv", "moe.fp8-kv.vllm-0.24.0.csv", "moe.tp2.vllm-0.24.0.csv",
                          "moe.vllm-0.24.0.csv"])
        # the slice times all-reduces on 2 GPUs only
        self.assertIn("skipped h200 exact tp 4: no vLLM all-reduce timings on 4 GPUs", self.stdout)

    def test_header_records_provenance(self):
        m = self.meta
        self.assertEqual(m["shape"], "layers=2 hidden=4096 heads=32 kv_heads=8 head_dim=128 intermediate=6144 vocab=8192")
        self.assertEqual(m["framework"], "vllm 0.24.0")
        self.assertEqual(m["gpu"], "h200_sxm")
        self.assertEqual(m["date"], "2026-11-30")
        self.assertIn("aiconfigurator-core 0.12.0", m["source"])
        self.assertIn("Apache-2.0", m["license"])
        self.assertIn("prefill vllm_flash_attn_fa3", m["kernels"])  # the kernel with the most timings
        self.assertEqual(m["host_us_per_seq"], "11.1")
        self.assertIn("11.1 us of host work per sequence of a step: the host test", m["stand_in_host"])
        for k in ("stand_in_elementwise", "stand_in_sample", "stand_in_overhead", "stand_in_host"):
            self.assertIn(k, m)
        self.assertIn("0.4 ms per step: the test", m["stand_in_overhead"])

    def test_linear_is_the_layers_gemms_elementwise_kernels_and_attention_floor(self):
        L = 2
        h, q, kv, inter = 4096, 4096, 1024, 6144
        for T in (1, 64, 8192):
            gemms = gemm(T, 6144, 4096) + gemm(T, 4096, 4096) + gemm(T, 12288, 4096) + gemm(T, 4096, 6144)
            # per layer: two add+norms (read x and residual, write both), SiLU-and-mul (read
            # 2 I, write I), rotary (q and k in place); then the embedding and the final norm
            per_layer = 2 * ew(4 * T * h * 2) + ew(3 * T * inter * 2) + ew(2 * T * (q + kv) * 2)
            want = L * (gemms + per_layer + self.floor) + ew(2 * T * h * 2) + ew(4 * T * h * 2)
            self.assertAlmostEqual(self.t["linear"][(T, 0)], want, delta=want * 1e-6)

    def test_lm_head_and_sample(self):
        for R in (1, 32, 1024):
            self.assertAlmostEqual(self.t["lm_head"][(R, 0)], gemm(R, 8192, 4096), delta=1e-12)
            # greedy: fp32 cast (read 2, write 4 bytes a logit), then argmax (read 4)
            self.assertAlmostEqual(self.t["sample"][(R, 0)], ew(R * 8192 * 6) + ew(R * 8192 * 4), delta=1e-12)

    def test_overhead(self):
        self.assertEqual(self.t["overhead"], {(0.0, 0.0): 0.0004})

    def test_prefill_is_the_saturated_per_sequence_cost_scaled_by_pairs(self):
        ctx = attention("context")

        def sat(s):
            return max(min((t - self.floor) / b for (b, ss), t in ctx.items() if ss == s), 0.0)

        for n in (128, 1024, 4096):
            self.assertAlmostEqual(self.t["prefill_attn"][(n, 0)], 2 * sat(n), delta=1e-12)
        # a 1024-token chunk after 1024 cached: 1024 * 1024 + 1024 * 1025 / 2 of the pairs of a
        # 2048-token prompt (2048 * 2049 / 2)
        frac = (1024 * 1024 + 1024 * 1025 / 2) / (2048 * 2049 / 2)
        self.assertAlmostEqual(self.t["prefill_attn"][(1024, 1024)], 2 * sat(2048) * frac, delta=1e-12)

    def test_decode_timed_cells_and_the_edge_beyond(self):
        gen = attention("generation")
        self.assertAlmostEqual(self.t["decode_attn"][(64, 1024)], 2 * (gen[(64, 1024)] - self.floor), delta=1e-12)
        # 1024 sequences at 4096 tokens were not timed: the median cost per token of the timed
        # edge at lengths 1024 .. 16384 (the largest batch timed at each), times b x s
        edge = []
        for s in (1024, 2048, 4096, 8192, 16384):
            top = max(b for (b, ss) in gen if ss == s)
            edge.append((gen[(top, s)] - self.floor) / (top * s))
        self.assertNotIn((1024, 4096), gen)
        want = 2 * statistics.median(edge) * 1024 * 4096
        self.assertAlmostEqual(self.t["decode_attn"][(1024, 4096)], want, delta=want * 1e-9)

    def test_untimed_gemm_shape_interpolates_utilization_in_log_n(self):
        _, t = read_table(os.path.join(self.out, "h200", "interp.vllm-0.24.0.csv"))
        flops, bw = 989e12, 4.8e12

        def sol(m, n, k):
            return max(2 * m * n * k / flops, 2 * (m * k + n * k + m * n) / bw)

        def between(m, lo, hi, v, k_fixed=None, n_fixed=None):
            w = math.log(v / lo) / math.log(hi / lo)
            if n_fixed is None:  # interpolate n at k = k_fixed
                u = (1 - w) * sol(m, lo, k_fixed) / gemm(m, lo, k_fixed) + w * sol(m, hi, k_fixed) / gemm(m, hi, k_fixed)
                return sol(m, v, k_fixed) / u
            u = (1 - w) * sol(m, n_fixed, lo) / gemm(m, n_fixed, lo) + w * sol(m, n_fixed, hi) / gemm(m, n_fixed, hi)
            return sol(m, n_fixed, v) / u

        T = 256
        gate_up = between(T, 16384, 51200, 28672, k_fixed=4096)
        down = between(T, 12288, 16384, 14336, n_fixed=4096)
        gemms = gemm(T, 6144, 4096) + gemm(T, 4096, 4096) + gate_up + down
        h, q, kv, inter = 4096, 4096, 1024, 14336
        per_layer = (2 * ew(4 * T * h * 2) + ew(3 * T * inter * 2) + ew(2 * T * (q + kv) * 2)
                     + ew(2 * T * q * 2) + ew(2 * T * kv * 2))  # + the QK norm of q and of k
        want = 2 * (gemms + per_layer + self.floor) + ew(2 * T * h * 2) + ew(4 * T * h * 2)
        self.assertAlmostEqual(t["linear"][(T, 0)], want, delta=want * 1e-6)
        self.assertGreater(gate_up, gemm(T, 16384, 4096))
        self.assertLess(gate_up, gemm(T, 51200, 4096))

    def test_decode_gap_below_the_timed_batches_scales_the_nearest_without_its_floor(self):
        sys.path.insert(0, os.path.join(ROOT, "scripts"))
        import aic_import
        a = aic_import.Attention.__new__(aic_import.Attention)
        a.floor = 1e-5
        a.gen = {(1, 64): 1.2e-5, (8, 64): 2.0e-5, (16, 64): 3.0e-5, (1, 128): 1.3e-5}
        a.gen_batches, a.gen_lengths = [1, 8, 16], [64, 128]
        # batch 4 at 64 tokens was not timed: the nearest timed batch in log is 8 (|log 2| < |log 4|)
        self.assertAlmostEqual(a.decode(4, 64), (2.0e-5 - 1e-5) * 4 / 8)
        self.assertAlmostEqual(a.decode(8, 64), 1.0e-5)

    def test_despike_removes_single_cell_spikes_and_keeps_monotone_runs(self):
        sys.path.insert(0, os.path.join(ROOT, "scripts"))
        import aic_import
        g = {(1, 2): 5.0, (1, 4): 1.0, (1, 8): 1.1, (1, 16): 9.0, (1, 32): 1.3, (1, 64): 1.4,
             (2, 2): 1.0, (2, 4): 1.2, (2, 8): 1.5, (2, 16): 2.5}
        d = aic_import.despike(g)
        self.assertEqual(d[(1, 2)], 1.0)   # a first cell over 1.5x the next two
        self.assertEqual(d[(1, 16)], 1.3)  # an interior spike: the median of three
        self.assertEqual(d[(1, 64)], 1.4)  # the last cell is kept
        self.assertEqual({k: v for k, v in d.items() if k[0] == 2}, {k: v for k, v in g.items() if k[0] == 2})

    def allreduce(self, elements, graph):
        for r in rows(os.path.join(DATA, "comm", "vllm", "0.24.0", "custom_allreduce_perf.csv")):
            if (int(r["num_gpus"]) == 2 and int(r["message_size"]) == elements
                    and (r["backend"] == "vllm_graph") == graph):
                return float(r["latency"]) * 1e-3
        raise KeyError(elements)

    def trtllm_allreduce(self, elements):
        for r in rows(os.path.join(DATA, "comm", "trtllm", "1.3.0rc20", "custom_allreduce_perf.csv")):
            if int(r["num_gpus"]) == 2 and int(r["message_size"]) == elements:
                return float(r["latency"]) * 1e-3
        raise KeyError(elements)

    def test_tensor_parallel_table_is_one_gpus_share_plus_the_all_reduces(self):
        sys.path.insert(0, os.path.join(ROOT, "scripts"))
        import aic_import
        meta, t = read_table(os.path.join(self.out, "h200", "exact.tp2.vllm-0.24.0.csv"))
        self.assertEqual(meta["tensor_parallel"], "2")
        self.assertEqual(meta["shape"], self.meta["shape"])  # the whole model's, as scenarios name it
        self.assertIn("all-reduce on 2 GPUs", meta["allreduce"])
        # attention: each GPU has 16 of the 32 heads and 4 of the 8 KV heads
        # (as despiked: tested on its own below)
        ctx16 = aic_import.despike(attention("context", heads=(16, 4)))
        floor16 = min(aic_import.despike(attention("generation", heads=(16, 4))).values())

        def sat(s):
            return max(min((v - floor16) / b for (b, ss), v in ctx16.items() if ss == s), 0.0)

        for n in (128, 1024):
            self.assertAlmostEqual(t["prefill_attn"][(n, 0)], 2 * sat(n), delta=1e-12)
        # linear: the share's GEMMs (QKV n = 2048 + 2 x 512, O k = 2048, gate/up n = 6144,
        # down k = 3072) and its elementwise kernels but the norms; allreduce: 2 x 2 + 1
        # all-reduces of T x 4096 elements (the CUDA-graph timing up to 512 tokens, the eager
        # one above), each with the residual-add + RMSNorm after it; allreduce_fused: the same
        # as TensorRT-LLM's all-reduce timings, and the norm's residual read and output write
        # at the slice's bandwidth (no launch floor: the norm is in the kernel)
        g = aic_import.Gemm(aic_import.read_rows(os.path.join(DATA, "gemm", "vllm", "0.24.0", "gemm_perf")), 989e12, 4.8e12)
        h, q, kv, inter = 4096, 2048, 512, 3072
        for T, graph in ((1, True), (64, True), (1024, False)):
            gemms = g.latency(T, q + 2 * kv, h) + g.latency(T, h, q) + g.latency(T, 2 * inter, h) + g.latency(T, h, inter)
            per_layer = ew(3 * T * inter * 2) + ew(2 * T * (q + kv) * 2)
            want = 2 * (gemms + per_layer + floor16) + ew(2 * T * h * 2)
            self.assertAlmostEqual(t["linear"][(T, 0)], want, delta=want * 1e-6)
            want = 5 * (self.allreduce(T * h, graph) + ew(4 * T * h * 2))
            self.assertAlmostEqual(t["allreduce"][(T, 0)], want, delta=want * 1e-6)
            want = 5 * (self.trtllm_allreduce(T * h) + 2 * T * h * 2 / BW)
            self.assertAlmostEqual(t["allreduce_fused"][(T, 0)], want, delta=want * 1e-6)
        # vLLM fuses all-reduces of up to 64 MB on two Hopper GPUs
        self.assertEqual(meta["allreduce_fusion_max_mb"], "64")
        self.assertIn("TensorRT-LLM's all-reduce on 2 GPUs as timed for trtllm 1.3.0rc20 (CUDA graph) and the norm's",
                      meta["allreduce_fused"])
        # a table of one GPU has neither all-reduce component, and its norms in linear
        self.assertNotIn("allreduce", self.t)
        self.assertNotIn("allreduce_fusion_max_mb", self.meta)
        # the LM head over half the vocabulary, and the gather of the logits (an all-reduce
        # of half of R x 8192); sampling over the whole vocabulary on the first GPU
        for R in (1, 32):
            self.assertAlmostEqual(t["lm_head"][(R, 0)], gemm(R, 4096, 4096) + self.allreduce(R * 4096, True), delta=1e-12)
            self.assertAlmostEqual(t["sample"][(R, 0)], ew(R * 8192 * 6) + ew(R * 8192 * 4), delta=1e-12)

    def test_fp8_table_has_fp8_gemms_with_their_quantization_and_fp8_kv_attention(self):
        sys.path.insert(0, os.path.join(ROOT, "scripts"))
        import aic_import
        meta, t = read_table(os.path.join(self.out, "h200", "exact.fp8.vllm-0.24.0.csv"))
        self.assertIn("fp8", meta["quantization"])
        self.assertIn("fp8", meta["kv_cache_dtype"])
        self.assertIn("GEMM CutlassFP8ScaledMMLinearKernel", meta["kernels"])
        ctx8 = aic_import.despike(attention("context", kv="fp8"))
        floor8 = min(aic_import.despike(attention("generation", kv="fp8")).values())
        h, q, kv, inter = 4096, 4096, 1024, 6144
        for T in (1, 64, 8192):
            gemms = (gemm(T, 6144, 4096, "fp8") + gemm(T, 4096, 4096, "fp8") + gemm(T, 12288, 4096, "fp8")
                     + gemm(T, 4096, 6144, "fp8"))
            # the same elementwise kernels as bf16: each FP8 GEMM's timing holds its input's
            # quantization (vLLM's FP8 linear layer timed whole), so none is added (it once was,
            # twice-counting four kernels a layer: +2-9% against AIConfigurator's estimate)
            per_layer = 2 * ew(4 * T * h * 2) + ew(3 * T * inter * 2) + ew(2 * T * (q + kv) * 2)
            want = 2 * (gemms + per_layer + floor8) + ew(2 * T * h * 2) + ew(4 * T * h * 2)
            self.assertAlmostEqual(t["linear"][(T, 0)], want, delta=want * 1e-6)
        for R in (1, 32):  # the LM head stays bf16
            self.assertAlmostEqual(t["lm_head"][(R, 0)], gemm(R, 8192, 4096), delta=1e-12)

        def sat(s):
            return max(min((v - floor8) / b for (b, ss), v in ctx8.items() if ss == s), 0.0)

        self.assertAlmostEqual(t["prefill_attn"][(1024, 0)], 2 * sat(1024), delta=1e-12)
        # no all-reduce slice beyond 2 GPUs, and no 16/4-head fp8 attention: the fp8 TP 2
        # table cannot be composed, and says why
        self.assertIn("skipped h200 exact tp 2 fp8: no attention timings", self.stdout)

    def test_fp8_weights_table_has_the_fp8_gemms_and_the_bf16_kv_attention(self):
        # vLLM's --quantization fp8 without --kv-cache-dtype fp8: the fp8 table's GEMMs, the
        # bf16 table's attention (its launch floor, in linear, too)
        meta, t = read_table(os.path.join(self.out, "h200", "exact.fp8-weights.vllm-0.24.0.csv"))
        _, t8 = read_table(os.path.join(self.out, "h200", "exact.fp8.vllm-0.24.0.csv"))
        self.assertIn("fp8", meta["quantization"])
        self.assertTrue(meta["kv_cache_dtype"].startswith("auto"), meta["kv_cache_dtype"])
        sys.path.insert(0, os.path.join(ROOT, "scripts"))
        import aic_import
        floor8 = min(aic_import.despike(attention("generation", kv="fp8")).values())
        floor16 = min(aic_import.despike(attention("generation")).values())
        self.assertNotAlmostEqual(floor8, floor16, delta=1e-9)  # else the test could not tell them apart
        for T in (1, 64, 8192):
            want = t8["linear"][(T, 0)] - 2 * floor8 + 2 * floor16
            self.assertAlmostEqual(t["linear"][(T, 0)], want, delta=want * 1e-7)
        for comp in ("prefill_attn", "decode_attn"):
            self.assertEqual(t[comp], self.t[comp], comp)
            self.assertNotEqual(t[comp], t8[comp], comp)
        for comp in ("lm_head", "sample", "overhead"):
            self.assertEqual(t[comp], t8[comp], comp)
        # at TP 2 the bf16 attention of 16/4 heads exists where the fp8 one does not
        self.assertIn("exact.tp2.fp8-weights", " ".join(os.listdir(os.path.join(self.out, "h200"))))

    def test_fp8_kv_table_has_the_bf16_gemms_and_the_fp8_kv_attention(self):
        # vLLM's --kv-cache-dtype fp8 without --quantization fp8: the bf16 table's GEMMs, the
        # fp8 table's attention (its launch floor, in linear, too)
        meta, t = read_table(os.path.join(self.out, "h200", "exact.fp8-kv.vllm-0.24.0.csv"))
        _, t8 = read_table(os.path.join(self.out, "h200", "exact.fp8.vllm-0.24.0.csv"))
        self.assertNotIn("quantization", meta)
        self.assertTrue(meta["kv_cache_dtype"].startswith("fp8 (vLLM's --kv-cache-dtype fp8)"), meta["kv_cache_dtype"])
        sys.path.insert(0, os.path.join(ROOT, "scripts"))
        import aic_import
        floor8 = min(aic_import.despike(attention("generation", kv="fp8")).values())
        floor16 = min(aic_import.despike(attention("generation")).values())
        for T in (1, 64, 8192):
            want = self.t["linear"][(T, 0)] - 2 * floor16 + 2 * floor8
            self.assertAlmostEqual(t["linear"][(T, 0)], want, delta=want * 1e-7)
        for comp in ("prefill_attn", "decode_attn"):
            self.assertEqual(t[comp], t8[comp], comp)
            self.assertNotEqual(t[comp], self.t[comp], comp)
        for comp in ("lm_head", "sample", "overhead"):
            self.assertEqual(t[comp], self.t[comp], comp)

    def test_fp8_fused_all_reduce_takes_off_the_quantizations_it_does(self):
        # With FP8 GEMMs vLLM's fused kernel also quantizes the norm's output for the QKV and
        # gate/up GEMMs (2 a layer: 4 here), whose timings hold a quantization kernel that then
        # does not run: allreduce_fused is the bf16 stand-in with those 4 norms writing one
        # byte an element instead of two, less 4 quantizations of T x 4096 (3 bytes an
        # element), and never above allreduce (within the 64 MB vLLM fuses on two Hopper
        # GPUs). The bf16 table's is the stand-in alone: a stop-29 table took no
        # quantization off, pricing each twice.
        meta, t = read_table(os.path.join(self.out, "h200", "exact.tp2.fp8-weights.vllm-0.24.0.csv"))
        _, tb = read_table(os.path.join(self.out, "h200", "exact.tp2.vllm-0.24.0.csv"))
        self.assertIn("4 of the fused norms also quantize their output to FP8", meta["allreduce_fused_fp8"])
        self.assertIn("static activation scales", meta["allreduce_fused_fp8"])
        h = 4096
        for T in (1, 64, 1024):
            stand_in = 5 * (self.trtllm_allreduce(T * h) + 2 * T * h * 2 / BW)
            self.assertAlmostEqual(tb["allreduce_fused"][(T, 0)], min(stand_in, tb["allreduce"][(T, 0)]),
                                   delta=stand_in * 1e-6)
            want = min(stand_in - 4 * T * h / BW - 4 * ew(3 * T * h), t["allreduce"][(T, 0)])
            self.assertAlmostEqual(t["allreduce_fused"][(T, 0)], want, delta=want * 1e-6)
            self.assertLess(t["allreduce_fused"][(T, 0)], stand_in)
        sys.path.insert(0, os.path.join(ROOT, "scripts"))
        import aic_import
        moe = aic_import.Model({"name": "m", "layers": "3", "hidden": "1024", "heads": "8", "kv_heads": "8",
                                "head_dim": "128", "intermediate": "512", "vocab": "1000", "qk_norm": "0",
                                "max_position": "4096", "params": "2000000000", "experts": "8",
                                "experts_per_token": "2"})
        self.assertEqual(aic_import.fused_quantizations(moe, True), 3, "the router takes the MLP's input in bf16")
        self.assertEqual(aic_import.fused_quantizations(moe, False), 0)

    def test_gemm_timings_are_despiked_along_m(self):
        sys.path.insert(0, os.path.join(ROOT, "scripts"))
        import aic_import
        # the B200's FP8 8192 x 7168: m = 1 and 4 stand about 2x over every timing of more rows
        rows_ = [{"gemm_dtype": "fp8", "n": 8192, "k": 7168, "m": m, "latency": lat, "kernel_source": "x"}
                 for m, lat in ((1, 0.0326), (2, 0.0172), (3, 0.0177), (4, 0.0339), (5, 0.0171), (8, 0.0175))]
        # a curve whose excesses stay under 1.5x keeps them (m = 2 over m = 3 by 10%)
        rows_ += [{"gemm_dtype": "fp8", "n": 4096, "k": 4096, "m": m, "latency": lat, "kernel_source": "x"}
                  for m, lat in ((1, 0.010), (2, 0.011), (3, 0.010), (4, 0.013), (5, 0.014), (8, 0.015))]
        g = aic_import.Gemm(rows_, 1e15, 4e12, "fp8")
        want = {1: 0.0171, 2: 0.0172, 3: 0.0177, 4: 0.0171, 5: 0.0171, 8: 0.0175}
        for m, v in want.items():
            self.assertAlmostEqual(g.latency(m, 8192, 7168), v * 1e-3, delta=1e-12)
        for m, v in ((1, 0.010), (2, 0.011), (3, 0.010), (8, 0.015)):
            self.assertAlmostEqual(g.latency(m, 4096, 4096), v * 1e-3, delta=1e-12)
        self.assertEqual((g.lowered, g.cells), (2, 12))
        self.assertIn("more than 1.5x the least timing of more rows", self.meta["gemm_timings"])
        # the slice's own timings hold no spike (the hand-computed tables above read them raw)
        slice_gemm = aic_import.Gemm(aic_import.read_rows(os.path.join(DATA, "gemm", "vllm", "0.24.0", "gemm_perf")),
                                     1e15, 4e12)
        self.assertEqual(slice_gemm.lowered, 0)

    def test_all_reduce_between_and_past_its_timed_sizes(self):
        sys.path.insert(0, os.path.join(ROOT, "scripts"))
        import aic_import
        ar = aic_import.AllReduce([
            {"num_gpus": 2, "message_size": 1024, "latency": 0.005, "backend": "vllm_graph"},
            {"num_gpus": 2, "message_size": 2048, "latency": 0.007, "backend": "vllm_graph"},
            {"num_gpus": 2, "message_size": 4096, "latency": 0.011, "backend": "vllm_graph"},
            {"num_gpus": 4, "message_size": 1024, "latency": 0.020, "backend": "vllm_eager"},
        ])
        self.assertAlmostEqual(ar.latency(100, 2, True), 5e-6)     # below: the fixed cost
        self.assertAlmostEqual(ar.latency(1536, 2, True), 6e-6)    # halfway
        self.assertAlmostEqual(ar.latency(8192, 2, True), 19e-6)   # past: the last slope
        self.assertAlmostEqual(ar.latency(1024, 2, False), 5e-6)   # no eager timings: the graph's
        self.assertAlmostEqual(ar.latency(1024, 4, True), 20e-6)
        self.assertEqual(ar.groups(), [2, 4])
        with self.assertRaises(aic_import.ImportError_):
            ar.latency(1024, 8, True)

    def test_a_decode_price_that_falls_with_context_beyond_noise_is_found(self):
        sys.path.insert(0, os.path.join(ROOT, "scripts"))
        import aic_import
        rows_ = {"decode_attn": [(4, 8, 4e-3), (4, 16, 1e-4), (8, 8, 1e-4), (8, 16, 2e-4)]}
        self.assertEqual(aic_import.decode_drop(rows_, 1e-5, 2), "batch 4: 0.004 s at 8 tokens, 0.0001 s at 16")
        # within noise: 0.8 of the shorter one less half the floor per layer (0.5 x 1e-5 x 2)
        rows_["decode_attn"][1] = (4, 16, 0.8 * 4e-3 - 1e-5 + 1e-9)
        self.assertIsNone(aic_import.decode_drop(rows_, 1e-5, 2))

    def moe_timing(self, T, tp):
        for r in rows(os.path.join(DATA, "moe", "vllm", "0.24.0", "moe_perf.csv")):
            if int(r["num_tokens"]) == T and int(r["moe_tp_size"]) == tp and r["distribution"] == "power_law_1.2":
                return float(r["latency"]) * 1e-3
        raise KeyError(T)

    def test_mixture_of_experts_prices_router_and_fused_experts_in_place_of_the_mlp(self):
        sys.path.insert(0, os.path.join(ROOT, "scripts"))
        import aic_import
        meta, t = read_table(os.path.join(self.out, "h200", "moe.vllm-0.24.0.csv"))
        self.assertEqual(meta["shape"], "layers=2 hidden=4096 heads=32 kv_heads=8 head_dim=128 intermediate=14336 "
                                        "vocab=8192 experts=8 topk=2")
        self.assertIn("power_law_1.2", meta["moe"])  # AIConfigurator's default, not the "balanced" rows
        self.assertIn("vllm_unquantizedfusedmoe_triton_tritonexperts", meta["moe"])
        g = aic_import.Gemm(aic_import.read_rows(os.path.join(DATA, "gemm", "vllm", "0.24.0", "gemm_perf")), 989e12, 4.8e12)
        h, q, kv, E, k = 4096, 4096, 1024, 8, 2
        # timed token counts as they are; 65,536 past the largest (16,384): the slope of the
        # last two (12,288 and 16,384)
        last = self.moe_timing(16384, 1)
        slope = (last - self.moe_timing(12288, 1)) / 4096
        for T, moe in ((1, self.moe_timing(1, 1)), (64, self.moe_timing(64, 1)), (65536, last + slope * (65536 - 16384))):
            # QKV and O; the router's T x 8 GEMM, its softmax and top-k (read T x 8 bf16
            # logits, write 2 ids and weights of 4 bytes each); no gate/up, down or SiLU
            per_layer = (g.latency(T, q + 2 * kv, h) + g.latency(T, h, q) + g.latency(T, E, h)
                         + ew(T * E * 2 + T * k * 8) + moe)
            per_layer += 2 * ew(4 * T * h * 2) + ew(2 * T * (q + kv) * 2)
            want = 2 * (per_layer + self.floor) + ew(2 * T * h * 2) + ew(4 * T * h * 2)
            self.assertAlmostEqual(t["linear"][(T, 0)], want, delta=want * 1e-6)
        # at TP 2 each GPU runs its half of every expert: the moe_tp 2 timings
        _, t2 = read_table(os.path.join(self.out, "h200", "moe.tp2.vllm-0.24.0.csv"))
        floor16 = min(aic_import.despike(attention("generation", heads=(16, 4))).values())
        T = 64
        per_layer = (g.latency(T, 2048 + 1024, h) + g.latency(T, h, 2048) + g.latency(T, E, h)
                     + ew(T * E * 2 + T * k * 8) + self.moe_timing(T, 2))
        per_layer += ew(2 * T * (2048 + 512) * 2)
        want = 2 * (per_layer + floor16) + ew(2 * T * h * 2)
        self.assertAlmostEqual(t2["linear"][(T, 0)], want, delta=want * 1e-6)
        want = 5 * (self.allreduce(T * h, True) + ew(4 * T * h * 2))
        self.assertAlmostEqual(t2["allreduce"][(T, 0)], want, delta=want * 1e-6)
        # the slice has no fp8 MoE timings: the fp8 table is left out, and says why
        self.assertIn("skipped h200 moe fp8: no fp8 MoE timings for hidden 4096, 8 experts of 14336, top 2", self.stdout)

    def test_fused_price_is_capped_at_the_unfused_one_within_vllms_size(self):
        sys.path.insert(0, os.path.join(ROOT, "scripts"))
        import aic_import
        m = aic_import.Model({"name": "x", "layers": "2", "hidden": "1024", "heads": "8", "kv_heads": "8",
                              "head_dim": "128", "intermediate": "4096", "vocab": "1000", "qk_norm": "0",
                              "max_position": "4096", "params": "2000000000", "experts": "0", "experts_per_token": "0"})
        ew = aic_import.Elementwise(t0=1e-6, bandwidth=1e12)
        row = lambda size, us: {"num_gpus": 2, "message_size": size, "latency": us * 1e-3}
        custom = aic_import.AllReduce([row(1024, 5.0), row(1024 * 1024, 50.0)])
        slower = aic_import.AllReduce([row(1024, 8.0), row(1024 * 1024, 80.0)])  # the stand-in above custom
        for T in (1, 64):  # 64 x 1024 x 2 bytes = 128 KiB: within 0.25 MiB, capped; past 0.0625, not
            unfused = aic_import.allreduce_cost(m, ew, custom, 2, T)
            raw = aic_import.fused_allreduce_cost(m, ew, slower, 2, T)
            self.assertGreater(raw, unfused)
            self.assertEqual(aic_import.fused_price(m, ew, slower, 2, T, 0.25, unfused), unfused)
            self.assertEqual(aic_import.fused_price(m, ew, slower, 2, T, 0.0625 if T == 64 else 0, unfused), raw)
        faster = aic_import.AllReduce([row(1024, 2.0), row(1024 * 1024, 20.0)])
        self.assertEqual(aic_import.fused_price(m, ew, faster, 2, 64, 0.25, aic_import.allreduce_cost(m, ew, custom, 2, 64)),
                         aic_import.fused_allreduce_cost(m, ew, faster, 2, 64))

    def test_fusion_threshold_is_vllms_by_compute_capability_and_group(self):
        sys.path.insert(0, os.path.join(ROOT, "scripts"))
        import aic_import
        self.assertEqual(aic_import.fusion_max_mb("h100", 8), 0.5)
        self.assertEqual(aic_import.fusion_max_mb("h200", 4), 2)
        self.assertEqual(aic_import.fusion_max_mb("b200", 4), 32)
        self.assertEqual(aic_import.fusion_max_mb("b300", 8), 4)
        self.assertIsNone(aic_import.fusion_max_mb("a100", 2))  # no FlashInfer fusion before Hopper
        self.assertIsNone(aic_import.fusion_max_mb("l40s", 2))
        self.assertIsNone(aic_import.fusion_max_mb("h200", 16))

    def test_bad_gpu_is_refused(self):
        r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "aic_import.py"), "--db", SLICE,
                            "--models", os.devnull, "--out", self.tmp.name, "--gpus", "h300", "--overhead-ms", "0",
                            "--overhead-source", "x", "--host-us-per-seq", "0", "--host-source", "x"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown GPU 'h300'", r.stderr)


if __name__ == "__main__":
    unittest.main()
