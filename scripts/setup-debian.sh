#!/usr/bin/env bash
# Installs what servesim needs to build and test on Debian 12 (CUDA stays optional).
set -euo pipefail
sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
export DEBIAN_FRONTEND=noninteractive
sudo_if_needed apt-get update -qq
sudo_if_needed apt-get install -y -qq --no-install-recommends \
    build-essential cmake pkg-config libgsl-dev libinih-dev libjansson-dev libmicrohttpd-dev libcurl4-openssl-dev libcriterion-dev \
    libcmark-gfm-dev libcmark-gfm-extensions-dev chromium-headless-shell \
    libopenblas-dev gnuplot-nox python3 >/dev/null
