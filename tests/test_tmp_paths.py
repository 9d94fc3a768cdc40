#!/usr/bin/env python3
"""The test files run at once (scripts/test.sh: ctest --parallel), so no two may use one path
under /tmp: a name in one, or a name another's `rm -rf /tmp/NAME*` matches, lets one test
delete what the other is writing (test_sweep's `rm -rf /tmp/ss-pshard*` removed test_plan's
/tmp/ss-pshard mid-test, and test_plan failed under ASan).

usage: tests/test_tmp_paths.py [ROOT]   exit 1 naming each path two test files share."""
import os
import re
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# /tmp/NAME, NAME up to the next '/', quote, space or format directive; a trailing '*' is a glob
PATH = re.compile(r"/tmp/([A-Za-z0-9_.-]+)(\*?)")


def names(root):
    """{file: (names, globs)} over the test sources."""
    found = {}
    tests = os.path.join(root, "tests")
    for name in sorted(os.listdir(tests)):
        if not name.endswith((".c", ".cpp", ".h", ".py")) or name == os.path.basename(__file__):
            continue
        text = open(os.path.join(tests, name), encoding="utf-8").read()
        plain, globs = set(), set()
        for m in PATH.finditer(text):
            (globs if m.group(2) else plain).add(m.group(1))
        found[name] = (plain, globs)
    return found


def problems(found):
    bad = []
    files = sorted(found)
    for i, a in enumerate(files):
        for b in files[i + 1:]:
            for n in sorted(found[a][0] & found[b][0]):
                bad.append(f"tests/{a} and tests/{b} both use /tmp/{n}")
            for x, y in ((a, b), (b, a)):
                for g in sorted(found[x][1]):
                    for n in sorted(found[y][0] | found[y][1]):
                        if n.startswith(g) or g.startswith(n):
                            bad.append(f"tests/{x} removes /tmp/{g}*, which matches tests/{y}'s /tmp/{n}")
    return bad


if __name__ == "__main__":
    found = names(ROOT)
    if sum(len(p) for p, _ in found.values()) == 0:
        sys.exit(f"{ROOT}/tests: no /tmp path found; is this the source tree?")
    bad = problems(found)
    for p in bad:
        print(p)
    print(f"tmp paths: {len(bad)} shared between test files" if bad else
          f"tmp paths: none shared ({len(found)} files)")
    sys.exit(1 if bad else 0)
