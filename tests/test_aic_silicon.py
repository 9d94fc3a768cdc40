"""scripts/aic_silicon.py on a hand-written slice of AIConfigurator's silicon sample: which runs
it takes, the InferenceMAX recipe each becomes (checked setting by setting), bounds kept
across a re-import, and the errors a user can cause. Standard library only."""
import csv
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "aic_silicon.py")
COLS = ["id", "silicon_data_source", "backend", "backend_version", "model_path", "system", "precision", "mode",
        "isl", "osl", "batch_size", "tp_size", "pp_size", "silicon_ttft_ms", "silicon_tpot_ms"]
IM = "source_file=2026-04-06.csv; model=Llama-3.1-70B; silicon_concurrency={c}; measured=2025-10-29T00:00:00.000Z"
SAMPLE = [
    # taken: the sweep on each GPU
    ["h200-a", IM.format(c=4), "vllm", "", "meta-llama/Llama-3.1-70B", "h200_sxm", "fp8", "agg", 1024, 1024, 4, 1, 1,
     202.8, 21.47],
    ["h200-b", IM.format(c=16), "vllm", "", "meta-llama/Llama-3.1-70B", "h200_sxm", "fp8", "agg", 8192, 1024, 16, 2, 1,
     1249.0, 27.47],
    ["h100-a", IM.format(c=64), "vllm", "", "meta-llama/Llama-3.1-70B", "h100_sxm", "fp8", "agg", 1024, 8192, 64, 2, 1,
     30790.0, 41.68],
    ["b200-a", IM.format(c=8), "vllm", "", "meta-llama/Llama-3.1-70B", "b200_sxm", "fp8", "agg", 1024, 1024, 8, 4, 1,
     108.9, 8.179],
    ["h200-c", IM.format(c=32), "vllm", "", "meta-llama/Llama-3.1-70B", "h200_sxm", "fp8", "agg", 1024, 8192, 32, 4, 1,
     178.0, 15.84],
    # left: another framework, FP4, another measurement, another model, pipeline parallelism,
    # disaggregated serving
    ["trt", IM.format(c=4), "trtllm", "", "meta-llama/Llama-3.1-70B", "h200_sxm", "fp8", "agg", 1024, 1024, 4, 1, 1,
     150.0, 15.0],
    ["fp4", IM.format(c=4), "vllm", "", "meta-llama/Llama-3.1-70B", "b200_sxm", "fp4", "agg", 1024, 1024, 4, 1, 1,
     100.0, 10.0],
    ["later", "source_file=x.csv; measured=2026-03-01", "vllm", "0.12.0", "meta-llama/Llama-3.1-70B", "h200_sxm",
     "fp8", "agg", 1024, 1024, 4, 1, 1, 100.0, 10.0],
    ["qwen", IM.format(c=8), "vllm", "0.12.0", "Qwen/Qwen3-32B", "h100_sxm", "", "agg", 1024, 128, 8, 2, 1, 154.2, 18.04],
    ["pp", IM.format(c=4), "vllm", "", "meta-llama/Llama-3.1-70B", "h200_sxm", "fp8", "agg", 1024, 1024, 4, 1, 2,
     100.0, 10.0],
    ["disagg", IM.format(c=4), "vllm", "", "meta-llama/Llama-3.1-70B", "h200_sxm", "fp8", "disagg", 1024, 1024, 4, 1,
     1, 100.0, 10.0],
]


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


def read(path):
    with open(path, newline="") as f:
        return {p["id"]: p for p in csv.DictReader(f)}


class AicSilicon(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.src = self.sample(SAMPLE)
        self.out = os.path.join(self.dir.name, "silicon.csv")

    def sample(self, rows, name="silicon_sample.csv"):
        path = os.path.join(self.dir.name, name)
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(COLS)
            w.writerows(rows)
        return path

    def tearDown(self):
        self.dir.cleanup()

    def imported(self):
        r = run(self.src, "--out", self.out)
        self.assertEqual(r.returncode, 0, r.stderr)
        return read(self.out)

    def test_takes_the_sweep_only_in_order(self):
        with open(self.imported() and self.out, newline="") as f:
            ids = [p["id"] for p in csv.DictReader(f)]
        # by GPU, then TP, then shape, then clients
        self.assertEqual(ids, ["IM-B200-tp4-1k1k-c8", "IM-H100-tp2-1k8k-c64", "IM-H200-tp1-1k1k-c4",
                               "IM-H200-tp2-8k1k-c16", "IM-H200-tp4-1k8k-c32"])

    def test_recipe_by_hand(self):
        pts = self.imported()
        p = pts["IM-H200-tp1-1k1k-c4"]
        sets = dict(a.split("=", 1) for a in p["sets"].split(";"))
        self.assertEqual(sets, {
            "model.quantization": "fp8", "kv.cache_dtype": "fp8", "deployment.tensor_parallel": "1",
            "scheduler.chunked_prefill": "on", "scheduler.prefix_caching": "off",
            "scheduler.max_num_batched_tokens": "8192", "scheduler.max_num_seqs": "4",
            "scheduler.max_model_len": "2068",            # 1024 + 1024 + 20, the H200 script's
            "hardware.gpu_memory_utilization": "0.9",
            "workload.arrival": "closed", "workload.concurrency": "4", "workload.num_requests": "40",
            "workload.prompt_len": "uniform:819:1024",    # --random-range-ratio 0.8
            "workload.output_len": "uniform:819:1024", "frontend.preset": "vllm"})
        self.assertEqual((p["set"], p["gpu"], p["model"], p["stat"], p["vllm"]), ("silicon", "h200", "llama-3.1-70b",
                                                                                  "mean", "0.10.2"))
        self.assertEqual((p["pub_ttft_ms"], p["pub_tpot_ms"]), ("202.8", "21.47"))
        self.assertIn("aiconfigurator-core 0.12.0", p["source"])
        self.assertIn("h200-a", p["notes"])
        h200 = dict(a.split("=", 1) for a in pts["IM-H200-tp2-8k1k-c16"]["sets"].split(";"))
        self.assertEqual((h200["scheduler.max_model_len"], h200["workload.prompt_len"], h200["workload.output_len"],
                          h200["workload.num_requests"]), ("9416", "uniform:6553:8192", "uniform:819:1024", "160"))
        h200 = dict(a.split("=", 1) for a in pts["IM-H200-tp4-1k8k-c32"]["sets"].split(";"))
        self.assertEqual((h200["scheduler.max_model_len"], h200["workload.output_len"]), ("9416", "uniform:6553:8192"))
        h100 = dict(a.split("=", 1) for a in pts["IM-H100-tp2-1k8k-c64"]["sets"].split(";"))
        # vLLM 0.10.2 did not read the H100 scripts' --config=config.yaml: its defaults, not the
        # file's fp8 KV cache, async scheduling, no prefix caching and max-model-len 10240
        self.assertEqual((h100["kv.cache_dtype"], h100["model.quantization"]), ("auto", "fp8"))
        self.assertEqual((h100["scheduler.async_scheduling"], h100["scheduler.prefix_caching"],
                          h100["scheduler.max_model_len"], h100["scheduler.max_num_batched_tokens"]),
                         ("off", "on", "131072", "8192"))
        self.assertIn("did not read the script's --config=config.yaml", pts["IM-H100-tp2-1k8k-c64"]["notes"])
        self.assertNotIn("did not read", p["notes"])
        self.assertNotIn("scheduler.async_scheduling", sets)  # the H200 read its file: async, servesim's default
        b200 = dict(a.split("=", 1) for a in pts["IM-B200-tp4-1k1k-c8"]["sets"].split(";"))
        self.assertEqual((b200["scheduler.max_num_seqs"], b200["scheduler.max_model_len"],
                          b200["deployment.tensor_parallel"]), ("512", "2048", "4"))
        # the B200 script's fused all-reduce: 32 MB at TP 4, which vLLM 0.10 divided by TP (8 MiB
        # of a GPU's tokens x hidden: 512 tokens of the 70B); vLLM 0.10.2 fused nothing unasked
        self.assertEqual((b200["deployment.allreduce_fusion"], b200["deployment.allreduce_fusion_max_mb"]), ("on", "8"))
        self.assertEqual(h100["deployment.allreduce_fusion"], "off")
        self.assertNotIn("deployment.allreduce_fusion", sets)  # one GPU: no all-reduce

    def test_keeps_recorded_bounds_and_estimates(self):
        pts = self.imported()
        pts["IM-H200-tp1-1k1k-c4"]["bound_ttft"] = "0.20"
        pts["IM-H200-tp1-1k1k-c4"]["aic_tpot_ms"] = "22.96"
        with open(self.out, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(next(iter(pts.values()))))
            w.writeheader()
            w.writerows(pts.values())
        again = self.imported()
        self.assertEqual(again["IM-H200-tp1-1k1k-c4"]["bound_ttft"], "0.20")
        self.assertEqual(again["IM-H200-tp1-1k1k-c4"]["aic_tpot_ms"], "22.96")
        self.assertEqual(again["IM-H200-tp2-8k1k-c16"]["bound_ttft"], "")

    def assert_refused(self, args, message):
        before = open(self.out).read() if os.path.exists(self.out) else None
        r = run(*args)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(message, r.stderr)
        self.assertNotIn("Traceback", r.stderr)
        self.assertEqual(open(self.out).read() if os.path.exists(self.out) else None, before)
        self.assertFalse(os.path.exists(self.out + ".tmp"))

    def test_user_errors_write_nothing(self):
        self.assert_refused([os.path.join(self.dir.name, "nope.csv"), "--out", self.out], "nope.csv: no such file")
        self.assert_refused([self.src, "--out"], "--out needs a file")
        self.imported()  # from here on a previous import exists and must survive every refusal
        other = os.path.join(self.dir.name, "other.csv")
        with open(other, "w") as f:
            f.write("a,b\n1,2\n")
        self.assert_refused([other, "--out", self.out], "other.csv: not AIConfigurator's silicon sample")
        self.assert_refused([self.dir.name, "--out", self.out], "no such file")
        self.assert_refused([self.sample(SAMPLE[5:], "none.csv"), "--out", self.out], "none.csv: no run of the sweep")
        bad = [list(r) for r in SAMPLE]
        bad[1][8] = ""
        self.assert_refused([self.sample(bad, "bad.csv"), "--out", self.out], "bad.csv:3:")
        self.assert_refused([self.sample(SAMPLE + [SAMPLE[0]], "twice.csv"), "--out", self.out],
                            "two runs become point IM-H200-tp1-1k1k-c4")
        self.assert_refused([self.src, "--out", os.path.join(self.dir.name, "no", "x.csv")], "its folder does not exist")

    def test_never_replaces_other_points(self):
        with open(self.out, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["id", "set", "sets"])
            w.writerow(["VB-H100-c8", "v1", ""])
        self.assert_refused([self.src, "--out", self.out], "holds points of set v1")
        with open(self.out, "w") as f:
            f.write("a,b\n1,2\n")
        self.assert_refused([self.src, "--out", self.out], "not a file of published points")


if __name__ == "__main__":
    unittest.main()
