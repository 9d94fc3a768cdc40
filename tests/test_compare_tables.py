"""scripts/compare-tables.py: ratios of two cost tables at A's points, B interpolated as the
simulator reads it (piecewise linear; bilinear in two dimensions), points outside B left out."""
import importlib.util
import os
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
spec = importlib.util.spec_from_file_location("compare_tables", os.path.join(ROOT, "scripts", "compare-tables.py"))
ct = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ct)


def write(path, rows, shape="s"):
    with open(path, "w") as f:
        f.write(f"# servesim cost table\n# shape: {shape}\ncomponent,x,y,seconds\n")
        for c, x, y, s in rows:
            f.write(f"{c},{x},{y},{s}\n")


class CompareTables(unittest.TestCase):
    def test_ratios_interpolate_b_and_skip_points_outside_it(self):
        with tempfile.TemporaryDirectory() as d:
            a, b = os.path.join(d, "a.csv"), os.path.join(d, "b.csv")
            # A: linear at 1, 3, 8; decode at (2, 10). B: linear 2 t on [1, 4]; decode 4 b s on a 2x2 grid
            write(a, [("linear", 1, 0, 1.0), ("linear", 3, 0, 3.0), ("linear", 8, 0, 8.0), ("decode_attn", 2, 10, 1.0)])
            write(b, [("linear", 1, 0, 2.0), ("linear", 4, 0, 8.0)] +
                  [("decode_attn", x, y, 4.0 * x * y) for x in (1, 4) for y in (5, 20)])
            r = ct.compare(ct.read(a)[1], ct.read(b)[1])
            self.assertEqual([(x, sa, sb) for x, _, sa, sb in r["linear"]], [(1, 1.0, 2.0), (3, 3.0, 6.0)])
            # bilinear on 4 b s is exact: 4 x 2 x 10 = 80
            [(x, y, sa, sb)] = r["decode_attn"]
            self.assertAlmostEqual(sb, 80.0)


    def test_a_measured_tables_floor_goes_back_into_its_attention_calls(self):
        meta = {"attention_floor_s": "1e-05", "shape": "layers=2 hidden=8"}
        comp = {"linear": {(1.0, 0.0): 1e-3}, "decode_attn": {(1.0, 2.0): 0.0}, "prefill_attn": {(4.0, 0.0): 5e-5}}
        w = ct.whole_calls(meta, comp)
        self.assertAlmostEqual(w["linear"][(1.0, 0.0)], 1e-3 - 2e-5)
        self.assertAlmostEqual(w["decode_attn"][(1.0, 2.0)], 2e-5)
        self.assertAlmostEqual(w["prefill_attn"][(4.0, 0.0)], 7e-5)
        self.assertIs(ct.whole_calls({}, comp), comp)  # a calibrated table stays as it is

    def test_bad_inputs_exit_2_with_the_reason(self):
        with tempfile.TemporaryDirectory() as d:
            empty = os.path.join(d, "empty.csv")
            open(empty, "w").close()
            for bad, why in ((os.path.join(d, "missing.csv"), "No such file"), (d, "Is a directory"),
                             (empty, "not a cost table"), (os.path.join(ROOT, "README.md"), "expected the header")):
                with self.assertRaises(ct.BadTable) as e:
                    ct.read(bad)
                self.assertIn(why, str(e.exception))
            self.assertEqual(ct.main(["compare-tables.py", empty, empty]), 2)


if __name__ == "__main__":
    unittest.main()
