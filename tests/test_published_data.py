"""scripts/published.py's data files: points read from two files go back to their own file in
its own columns, an id in both files is refused (it named one simulation for two points and
mixed their bounds), and a missing or malformed file is one message and exit 2. Standard
library only; no simulation runs."""
import contextlib
import csv
import subprocess
import sys
import importlib.util
import io
import os
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
spec = importlib.util.spec_from_file_location("published", os.path.join(ROOT, "scripts", "published.py"))
published = importlib.util.module_from_spec(spec)
spec.loader.exec_module(published)

HAND = [["id", "set", "gpu", "model", "stat", "sets", "bound_ttft", "notes"],
        ["A", "v1", "h100", "qwen3-8b", "mean", "workload.concurrency=4", "0.30", "hand"],
        ["B", "burst", "a100", "qwen3-32b", "mean", "", "", "hand"]]
SILICON = [["id", "set", "gpu", "model", "stat", "sets", "bound_ttft", "bound_tpot", "aic_ttft_ms"],
           ["IM-1", "silicon", "h200", "llama-3.1-70b", "mean", "x=1", "", "", "239.9"]]


class PublishedData(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.hand = self.write("published.csv", HAND)
        self.silicon = self.write("silicon.csv", SILICON)

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, rows):
        path = os.path.join(self.dir.name, name)
        with open(path, "w", newline="") as f:
            csv.writer(f).writerows(rows)
        return path

    def rows(self, path):
        with open(path, newline="") as f:
            return list(csv.reader(f))

    def refused(self, paths, message):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as e:
            published.read_points(paths)
        self.assertEqual(e.exception.code, 2)
        self.assertIn(message, err.getvalue())

    def test_points_go_back_to_their_own_file(self):
        points = published.read_points((self.hand, self.silicon))
        self.assertEqual([p["id"] for p in points], ["A", "B", "IM-1"])
        next(p for p in points if p["id"] == "IM-1")["bound_tpot"] = "0.11"
        next(p for p in points if p["id"] == "A")["bound_ttft"] = "0.25"
        published.write_points(points)
        self.assertEqual(self.rows(self.silicon), [SILICON[0], SILICON[1][:7] + ["0.11", "239.9"]])
        self.assertEqual(self.rows(self.hand), [HAND[0], HAND[1][:6] + ["0.25", "hand"], HAND[2]])
        self.assertEqual(sorted(os.listdir(self.dir.name)), ["published.csv", "silicon.csv"])

    def test_the_committed_page_is_its_head_and_the_results(self):
        """docs/published.md starts with docs/published.head.md as it stands: an edit of the
        head without `published.py --write` once left the page a stop behind."""
        head = open(os.path.join(ROOT, "docs", "published.head.md")).read().rstrip() + "\n\n## Results\n"
        page = open(os.path.join(ROOT, "docs", "published.md")).read()
        self.assertTrue(page.startswith(head), "docs/published.md is stale: run scripts/published.py --write")

    def test_an_id_in_both_files_is_refused(self):
        self.write("silicon.csv", SILICON + [["A", "silicon", "h200", "llama-3.1-70b", "mean", "", "", "", ""]])
        self.refused((self.hand, self.silicon), "silicon.csv:3: point A is already in")

    def test_bad_files_are_refused(self):
        self.refused((self.hand, os.path.join(self.dir.name, "gone.csv")), "gone.csv: no such file")
        self.write("silicon.csv", [["id", "gpu"], ["IM-1", "h200"]])
        self.refused((self.hand, self.silicon), "silicon.csv: no column set, model, stat, sets")


class PublishedRuns(unittest.TestCase):
    """The script's own errors, with a stand-in for servesim (no simulation runs)."""

    def run_script(self, *args):
        return subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "published.py"), *args],
                              capture_output=True, text=True)

    def test_no_binary(self):
        r = self.run_script("--servesim", "/nonexistent/servesim")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr.strip(), "published: --servesim /nonexistent/servesim: no servesim binary there "
                                           "(scripts/build.sh builds one)")

    def test_a_failed_run_is_reported_once_with_its_status(self):
        with tempfile.TemporaryDirectory() as d:
            fake = os.path.join(d, "servesim")
            with open(fake, "w") as f:
                f.write("#!/bin/sh\necho 'servesim: --set a.b=1: unknown key a.b' >&2\nexit 2\n")
            os.chmod(fake, 0o755)
            r = self.run_script("--servesim", fake, "--set", "a.b=1")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr.count("published:"), 1, r.stderr)
        self.assertIn(": servesim: --set a.b=1: unknown key a.b\n  (the run: ", r.stderr)


if __name__ == "__main__":
    unittest.main()
