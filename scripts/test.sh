#!/usr/bin/env bash
# The whole test suite: builds and runs
#   1. every test (unit + integration on Fashion-MNIST) in a release build,
#   2. the unit and CLI tests under AddressSanitizer + UndefinedBehaviorSanitizer,
#   3. the collective and strategy tests under ThreadSanitizer.
# Warnings are errors in all three builds.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
setup() { # dir, extra meson options...
    local dir=$1; shift
    [ -f "$dir/build.ninja" ] || meson setup "$dir" -Dwerror=true "$@"
    ninja -C "$dir"
}
# OpenBLAS's own threads are not what these tests check; keep its pool small
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-2}

echo "== release build: all tests"
setup build
meson test -C build --print-errorlogs --num-processes 1

echo "== address + undefined sanitizers: unit and CLI tests"
setup build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debugoptimized
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
    meson test -C build-asan --print-errorlogs --suite unit --num-processes 2
UBSAN_OPTIONS=halt_on_error=1 ASAN_OPTIONS=detect_leaks=1 \
    meson test -C build-asan --print-errorlogs cli

echo "== thread sanitizer: collectives and strategy"
setup build-tsan -Db_sanitize=thread -Db_lundef=false -Dbuildtype=debugoptimized
TSAN_OPTIONS=halt_on_error=1 OPENBLAS_NUM_THREADS=1 \
    meson test -C build-tsan --print-errorlogs local strategy
echo "== all test suites passed"
