#!/usr/bin/env python3
"""The folders are the dependency graph: every #include "DIR/..." in a library folder names
that folder or one built before it (the foreach list of the top-level CMakeLists.txt), and
the simulator never includes the engine or the kernels (docs/architecture.md).

usage: tests/test_layout.py [ROOT]   exit 1 naming each include that breaks a rule."""
import os
import re
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FORBIDDEN = {("sim", "engine"), ("sim", "kernels"), ("sim", "serve"), ("load", "core"), ("load", "engine"), ("load", "serve"), ("load", "sim"), ("core", "kernels"), ("core", "sim")}


def build_order(root):
    text = open(os.path.join(root, "CMakeLists.txt"), encoding="utf-8").read()
    m = re.search(r"foreach\(dir ([a-z_ ]+)\)\s*\n\s*add_subdirectory\(\$\{dir\}\)", text)
    if not m:
        sys.exit("CMakeLists.txt: no 'foreach(dir ...) add_subdirectory(${dir})' list of the folders")
    return m.group(1).split()


def problems(root):
    order = build_order(root)
    rank = {d: i for i, d in enumerate(order)}
    found = []
    for folder in order:
        for dirpath, _, names in os.walk(os.path.join(root, folder)):
            for name in sorted(names):
                if not name.endswith((".c", ".h", ".cu", ".cuh", ".cpp", ".inc")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                for lineno, line in enumerate(open(path, encoding="utf-8"), 1):
                    m = re.match(r'\s*#\s*include\s+"([a-z_]+)/', line)
                    if not m or m.group(1) == folder:
                        continue
                    dep = m.group(1)
                    if dep not in rank:
                        found.append(f"{rel}:{lineno}: includes {dep}/, which is not a library folder")
                    elif rank[dep] > rank[folder]:
                        found.append(f"{rel}:{lineno}: {folder}/ includes {dep}/, built after it (up the graph)")
                    elif (folder, dep) in FORBIDDEN:
                        found.append(f"{rel}:{lineno}: {folder}/ must never depend on {dep}/")
    return found


if __name__ == "__main__":
    bad = problems(ROOT)
    for p in bad:
        print(p)
    print(f"layout: {len(bad)} include(s) against the dependency graph" if bad else "layout: ok")
    sys.exit(1 if bad else 0)
