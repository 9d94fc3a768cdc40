#!/usr/bin/env bash
# On the GPU machine: builds (Release, fresh build folder), runs the CUDA tests, the kernel
# lab, an 8B-shaped calibration and a short engine-versus-simulator validation, and writes
# what they produce into OUTDIR, flat and at most 8 files:
#   env.txt       nvidia-smi, driver, toolkit, compiler and commit
#   steps.log     configure, build, calibration and validation output
#   tests.log     the CUDA tests (criterion, verbose; they compare with the CPU ops)
#   kernels.txt   bench_kernels_cuda: copy bandwidth, decode attention, 8B decode step
#   <gpu>-llama-3-8b.csv   the calibration table (when `servesim calibrate` exists)
#   validate.json, validate-report.md   (when `servesim validate` and the scenario exist)
#   summary.txt   one line per step, written last (and on the first failure)
# Each step runs under `timeout`; the whole run stays within about 8 minutes; the first
# failure stops the run but keeps everything written so far. Usage: scripts/device-check.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/device-check.sh OUTDIR}
mkdir -p "$out"
build=${DEVICE_CHECK_BUILD:-build-device}
budget=${DEVICE_CHECK_BUDGET:-480} # seconds for the whole run
start=$SECONDS
summary="$out/summary.txt"
: > "$summary.part"

vdir=
finish() {
    if [[ -n $vdir ]]; then # keep the validation's numbers even when it failed its thresholds
        [[ -f $vdir/validate/validation.json ]] && cp "$vdir/validate/validation.json" "$out/validate.json"
        [[ -f $vdir/validate/report.md ]] && cp "$vdir/validate/report.md" "$out/validate-report.md"
        rm -rf "$vdir"
    fi
    echo "total: $((SECONDS - start)) s" >> "$summary.part"
    mv "$summary.part" "$summary"
    cat "$summary"
    exit "$1"
}

# step NAME TIMEOUT LOG CMD...: runs CMD with its output appended to LOG, under
# min(TIMEOUT, what is left of the budget); stops the run on failure.
step() {
    local name=$1 limit=$2 log=$3
    shift 3
    local left=$((budget - (SECONDS - start)))
    if ((left < 10)); then
        echo "$name: SKIPPED (out of time budget)" >> "$summary.part"
        finish 1
    fi
    ((limit > left)) && limit=$left
    local t0=$SECONDS rc
    echo "=== $name: $*" >> "$log"
    timeout --kill-after=10 "$limit" "$@" >> "$log" 2>&1
    rc=$?
    if ((rc == 0)); then
        echo "$name: ok ($((SECONDS - t0)) s)" >> "$summary.part"
    else
        local why="exit $rc"
        ((rc == 124 || rc == 137)) && why="timed out after $limit s"
        echo "$name: FAILED, $why ($((SECONDS - t0)) s), see $(basename "$log")" >> "$summary.part"
        finish 1
    fi
}

{
    echo "date: $(date -u +%FT%TZ)"
    echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
    echo "host: $(uname -srm), $(nproc) cores"
    nvidia-smi 2>&1 || echo "nvidia-smi: not available"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem \
        --format=csv 2>&1
    nvcc --version 2>&1 | tail -2
    cmake --version 2>&1 | head -1
    gcc --version 2>&1 | head -1
} > "$out/env.txt"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 \
      | sed -e 's/^NVIDIA //' -e 's/ .*//' | tr 'A-Z' 'a-z')
gpu=${gpu:-gpu}
echo "gpu: $gpu" >> "$summary.part"

rm -rf "$build"
log="$out/steps.log"
step configure 120 "$log" cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release
step build 240 "$log" cmake --build "$build" -j "$(nproc)"
step cuda-tests 180 "$out/tests.log" "$build/tests/test_kernels_cuda" --verbose --jobs 1
# The tests must have run on the GPU, not skipped.
if grep -q 'SKIP.*no CUDA device' "$out/tests.log"; then
    echo "tests: FAILED, the CUDA tests skipped on this machine (see tests.log)" >> "$summary.part"
    finish 1
fi
if [[ -x $build/kernels/bench_kernels_cuda ]]; then
    step kernels 150 "$out/kernels.txt" "$build/kernels/bench_kernels_cuda"
fi

cli=$build/cli/servesim
if [[ -x $cli ]] && "$cli" calibrate --help > /dev/null 2>&1; then
    table="$out/$gpu-llama-3-8b.csv"
    step calibrate 240 "$log" "$cli" calibrate --backend cuda --model llama-3-8b --out "$table"
    if "$cli" validate --help > /dev/null 2>&1 && [[ -f scenarios/validate-cuda.ini ]]; then
        vdir=$(mktemp -d)
        step validate 150 "$log" "$cli" validate scenarios/validate-cuda.ini --backend cuda \
            --cost-table "$table" --out "$vdir/validate"
    else
        echo "validate: not run (no 'servesim validate' or no scenarios/validate-cuda.ini)" >> "$summary.part"
    fi
else
    echo "calibrate: not run (this build has no 'servesim calibrate')" >> "$summary.part"
fi
grep -E '^(device copy|decode attention|prefill attention|8B decode step)' "$out/kernels.txt" 2>/dev/null \
    >> "$summary.part"
finish 0
