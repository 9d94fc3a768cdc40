#!/usr/bin/env bash
# Here, before a GPU session: builds servesim with the CUDA backend (Release) and packs the
# programs scripts/device-check.sh runs, with every shared library they load except the C
# runtime's and CUDA's, into .device-bundle/bundle.tar.gz (git-ignored). Run it just before the
# device call: device-check.sh reports a bundle built from another commit as STALE. The GPU machine has
# no network and none of our Debian libraries (GSL, inih, OpenBLAS, criterion), so the build
# travels instead: name .device-bundle in the device tool's `carry`. Building here also saves
# the GPU session the minutes of an LTO build. Usage: scripts/device-bundle.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=${DEVICE_BUNDLE_BUILD:-build-bundle}
command -v nvcc > /dev/null || { echo "device-bundle: no nvcc here, so no CUDA backend to pack" >&2; exit 2; }
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build "$build" -j "$(nproc)" --target servesim test_kernels_cuda bench_kernels_cuda
stage=.device-bundle/stage
rm -rf .device-bundle
mkdir -p "$stage/bin" "$stage/lib"
cp "$build/cli/servesim" "$build/tests/test_kernels_cuda" "$build/kernels/bench_kernels_cuda" "$stage/bin/"
# The C runtime is newer there and must stay the machine's own; CUDA's libraries come with
# its toolkit and driver.
if ldd "$stage"/bin/* | grep 'not found'; then
    echo "device-bundle: the programs miss libraries here already" >&2
    exit 1
fi
for exe in "$stage"/bin/*; do ldd "$exe"; done | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u \
    | grep -Ev '/(libc|libm|libdl|libpthread|librt|libresolv|libgcc_s|libstdc\+\+)\.so|/lib(cuda|cudart|cublas|cublasLt|nv)[^/]*$' \
    | while read -r lib; do cp -L "$lib" "$stage/lib/"; done
{
    git rev-parse HEAD
    git diff --quiet HEAD || echo "(with local changes)"
} > "$stage/commit.txt"
tar -C "$stage" -czf .device-bundle/bundle.tar.gz .
rm -rf "$stage"
echo "device-bundle: $(du -h .device-bundle/bundle.tar.gz | cut -f1) in .device-bundle/bundle.tar.gz"
