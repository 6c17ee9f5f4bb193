#!/usr/bin/env bash
# Quick start: install what is missing, build, train the default model
# (models/configs/fashion_mlp.cfg) on Fashion-MNIST and print its test accuracy.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
[ -f build/build.ninja ] || meson setup build
ninja -C build
build/launch/mirrored_train models/configs/fashion_mlp.cfg "$@"
