#!/usr/bin/env bash
# Regenerates the experiment reports under results/reports/ by running the sweep command
# written at the top of each scenarios/*.ini that has one (rerun it whenever the cost model
# changes). Usage: scripts/study-reports.sh [SCENARIO.ini...]; SERVESIM names the binary.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${SERVESIM:-build/cli/servesim}
[ $# -gt 0 ] || set -- scenarios/*.ini
for ini in "$@"; do
    cmd=$(awk '/^; servesim sweep/ { on = 1 } on { sub(/^; /, ""); more = sub(/\\$/, ""); printf "%s", $0; if (!more) exit }' "$ini")
    [ -n "$cmd" ] || continue
    echo "== $ini"
    start=$(date +%s.%N)
    eval "$bin ${cmd#servesim }" --quiet
    echo "   $(echo "$(date +%s.%N) - $start" | bc) s"
done
