#!/usr/bin/env bash
# On the GPU machine: runs the CUDA tests, the kernel lab, an 8B-shaped calibration and a
# short engine-versus-simulator validation, and writes what they produce into OUTDIR, flat
# and at most 8 files:
#   env.txt       nvidia-smi, driver, toolkit, compiler, commit, and the libraries found
#   steps.log     build (when built here), calibration and validation output
#   tests.log     the CUDA tests (criterion, verbose; they compare with the CPU ops)
#   kernels.txt   bench_kernels_cuda: copy bandwidth, decode attention, 8B decode step, a 10 s
#                 GEMM's rate window by window; then nvidia-smi's SM clock, power, temperature
#                 and clock-limit reasons sampled every 200 ms while the lab ran
#   <gpu>-llama-3-8b.csv   the calibration table
#   validate.json, validate-report.md   the validation (kept when it fails its thresholds)
#   summary.txt   one line per step, written last
# The programs come from .device-bundle/bundle.tar.gz when it is there (made here by
# scripts/device-bundle.sh and carried: the GPU machine has no network and none of our Debian
# libraries); otherwise the script configures and builds them. Each step runs under
# `timeout`, the whole run stays within DEVICE_CHECK_BUDGET seconds (default 480); a failed
# step is recorded and the next one runs, so one failing test cannot cost the calibration.
# Exit status: 0 when every step passed. Usage: scripts/device-check.sh OUTDIR
#
# For a dry run of this script without a GPU, on cudaemu (kernels/cuda/README.md): with no
# bundle, DEVICE_CHECK_CMAKE_ARGS=-DSERVESIM_CUDAEMU=ON, and a small model, calibration and
# scenario in DEVICE_CHECK_MODEL, DEVICE_CHECK_CALIBRATE (the size flags) and
# DEVICE_CHECK_SCENARIO, every step's time limit multiplied by DEVICE_CHECK_SLOW, and the
# kernel lab's small sizes in DEVICE_CHECK_LAB_ARGS=--quick (docs/benchmarks.md has the command).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/device-check.sh OUTDIR}
mkdir -p "$out"
budget=${DEVICE_CHECK_BUDGET:-480} # seconds for the whole run
model=${DEVICE_CHECK_MODEL:-llama-3-8b}
calib_size=${DEVICE_CHECK_CALIBRATE:---max-tokens 8192 --max-context 8192 --max-seqs 64 --repeats 2}
scenario=${DEVICE_CHECK_SCENARIO:-scenarios/validate-cuda.ini}
start=$SECONDS
summary="$out/summary.txt"
: > "$summary.part"
failed=0

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
# min(TIMEOUT, what is left of the budget); records the outcome and returns CMD's status.
step() {
    local name=$1 limit=$2 log=$3
    shift 3
    limit=$((limit * ${DEVICE_CHECK_SLOW:-1}))
    local left=$((budget - (SECONDS - start)))
    if ((left < 10)); then
        echo "$name: SKIPPED (out of time budget)" >> "$summary.part"
        failed=1
        return 1
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
        [[ $name == validate ]] && ((rc == 3)) && why="past its [validate] limits, exit 3"
        echo "$name: FAILED, $why ($((SECONDS - t0)) s), see $(basename "$log")" >> "$summary.part"
        failed=1
    fi
    return $rc
}

{
    echo "date: $(date -u +%FT%TZ)"
    if [[ -f .device-bundle/bundle.tar.gz ]]; then
        echo "commit: $(tar -xOzf .device-bundle/bundle.tar.gz ./commit.txt 2>/dev/null | tr '\n' ' ') (bundle)"
    else
        echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
    fi
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

log="$out/steps.log"
if [[ -f .device-bundle/bundle.tar.gz ]]; then
    bundle=$(mktemp -d)
    tar -C "$bundle" -xzf .device-bundle/bundle.tar.gz || { echo "bundle: FAILED to unpack" >> "$summary.part"; finish 1; }
    bin=$bundle/bin
    export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    # What the bundle leaves out (CUDA's own libraries) from wherever this image keeps them.
    for lib in $(ldd "$bin"/* 2>/dev/null | awk '/not found/ {print $1}' | sort -u); do
        dir=$(find /usr/local /opt /usr/lib -name "$lib" -printf '%h\n' 2>/dev/null | head -1)
        [[ -n $dir ]] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$dir"
    done
    { echo "LD_LIBRARY_PATH: $LD_LIBRARY_PATH"; for exe in "$bin"/*; do echo "ldd $(basename "$exe"):"; ldd "$exe"; done; } >> "$out/env.txt" 2>&1
    missing=$(ldd "$bin"/* 2>&1 | awk '/not found/ {print $1}' | sort -u | paste -sd' ')
    if [[ -n $missing ]]; then
        echo "bundle: FAILED, not found: $missing (see env.txt)" >> "$summary.part"
        finish 1
    fi
    made=$(head -1 "$bundle/commit.txt")
    here=$(git rev-parse HEAD 2>/dev/null || echo "")
    if [[ -n $here && $here != "$made" ]]; then
        echo "bundle: STALE, built from $made but this tree is $here" >> "$summary.part"
    fi
    echo "bundle: ok, built from $(paste -sd' ' "$bundle/commit.txt")" >> "$summary.part"
    tests=$bin/test_kernels_cuda lab=$bin/bench_kernels_cuda cli=$bin/servesim
else
    build=${DEVICE_CHECK_BUILD:-build-device}
    rm -rf "$build"
    # shellcheck disable=SC2086 # the extra arguments are words
    step configure 120 "$log" cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release \
        ${DEVICE_CHECK_CMAKE_ARGS:-} || finish 1
    step build 240 "$log" cmake --build "$build" -j "$(nproc)" --target servesim test_kernels_cuda bench_kernels_cuda \
        || finish 1
    tests=$build/tests/test_kernels_cuda lab=$build/kernels/bench_kernels_cuda cli=$build/cli/servesim
fi
step cuda-tests 120 "$out/tests.log" "$tests" --verbose --jobs 1
# The tests must have run on the GPU, not skipped.
if grep -q 'SKIP.*no CUDA device' "$out/tests.log"; then
    echo "tests: FAILED, the CUDA tests skipped on this machine (see tests.log)" >> "$summary.part"
    finish 1
fi
# the GPU's clocks and power while the lab runs: its 10 s GEMM shows whether they hold
smi_log=$(mktemp)
smi_pid=
if command -v nvidia-smi > /dev/null; then
    # under a timeout of its own: a hung NVML call must not hold the wait below past the budget
    timeout 150 nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu,clocks_event_reasons.active \
        --format=csv -lms 200 > "$smi_log" 2>&1 &
    smi_pid=$!
fi
# shellcheck disable=SC2086 # the extra arguments are words
step kernels 120 "$out/kernels.txt" "$lab" ${DEVICE_CHECK_LAB_ARGS:-}
if [[ -n $smi_pid ]]; then
    kill "$smi_pid" 2> /dev/null
    wait "$smi_pid" 2> /dev/null
    { echo "nvidia-smi every 200 ms during the lab:"; cat "$smi_log"; } >> "$out/kernels.txt"
fi
rm -f "$smi_log"
grep -E '^(device copy|decode attention|prefill attention|8B decode step|sustained bf16 GEMM( [0-9]|:)|bench_kernels_cuda)' \
    "$out/kernels.txt" 2>/dev/null >> "$summary.part"

# The calibration's grid is sized to the validation it prices (the issue's 3 minutes are for
# the full default grid, which this run has no room for): a step there batches up to 8192
# prompt tokens, tens of sequences run at once, and contexts stay under 8192.
table="$out/$gpu-$model.csv"
# By estimate (never run): about 20 PFLOP of prefill sweeps at 2 repeats plus a warm-up, well
# under the limit at half the H200's 790 TFLOP/s; the segments and 3 engine opens add tens of s.
# shellcheck disable=SC2086 # calib_size is words
if step calibrate 240 "$log" "$cli" calibrate --backend cuda --model "$model" $calib_size \
        --out "$table"; then
    vdir=$(mktemp -d)
    step validate 150 "$log" "$cli" validate "$scenario" --backend cuda \
        --cost-table "$table" --out "$vdir/validate"
fi
finish "$failed"
