#!/usr/bin/env python3
"""Where a validation's step-time error comes from, step by step.

For every engine run of a `servesim validate` output directory (pointN-engine-runK/steps.csv,
whose predicted_time column validate priced with the calibration round just before that
run, or with the given table), prints the median of measured / predicted step time, split by
the kind of step:
  D b=1-3, D b=4-8, D b=9+   decode-only steps by number of sequences, each also split into
                             'after' (within two steps of a prompt-bound step) and 'far'
  P                          prompt-bound steps (more prompt tokens than decoding sequences)
A table that priced every kind of step alike would read about 1.0 in every column of a run.
Usage: scripts/step-ratios.py VALIDATE_OUT_DIR [MORE_DIRS...]
"""
import csv
import glob
import os
import statistics
import sys


def kinds(steps_csv):
    out, since_prompt = {}, 99
    with open(steps_csv) as f:
        for r in csv.DictReader(f):
            prompt = int(r["num_prefill_tokens"]) > int(r["num_decode_seqs"])
            measured = float(r["end_time"]) - float(r["start_time"])
            predicted = float(r["predicted_time"])
            ratio = measured / predicted if predicted > 0 else float("nan")
            if prompt:
                key = "P"
                since_prompt = 0
            elif int(r["num_prefill_tokens"]) == 0:
                b = int(r["num_decode_seqs"])
                size = "1-3" if b <= 3 else "4-8" if b <= 8 else "9+"
                key = "D b=%s %s" % (size, "after" if since_prompt <= 2 else "far")
            else:
                key = None  # a decode-like step carrying a few prompt tokens
            since_prompt += 1
            if key and ratio == ratio:
                out.setdefault(key, []).append(ratio)
    return out


COLUMNS = ["D b=1-3 far", "D b=1-3 after", "D b=4-8 far", "D b=4-8 after", "D b=9+ far", "D b=9+ after", "P"]


def main(dirs):
    print("%-28s" % "run" + "".join("%15s" % c for c in COLUMNS))
    for d in dirs:
        for run in sorted(glob.glob(os.path.join(d, "point*-engine-run*"))):
            k = kinds(os.path.join(run, "steps.csv"))
            cells = []
            for c in COLUMNS:
                v = k.get(c, [])
                cells.append("%9.2f (%3d)" % (statistics.median(v), min(len(v), 999)) if len(v) >= 5 else "%15s" % "-")
            print("%-28s" % (os.path.basename(d.rstrip("/")) + "/" + os.path.basename(run)) + "".join(cells))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
