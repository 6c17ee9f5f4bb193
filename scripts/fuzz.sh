#!/usr/bin/env bash
# Builds the libFuzzer harnesses of the file readers (tests/fuzz/, clang,
# AddressSanitizer + UndefinedBehaviorSanitizer, in build-fuzz/), runs each
# on every file of its corpus (tests/fuzz/corpus/NAME/: the seeds and every
# reproducer of a bug found), then fuzzes each for SECONDS (0: the corpus
# only). Harnesses run side by side, FUZZ_PARALLEL at a time (default 2).
# A crash, a hang (> 10 s per input), a leak, an allocation over 2 GB or a
# refusal that is not one line naming the file stops the harness; the input
# is left as build-fuzz/artifacts/NAME-crash-..., with the harness's log in
# build-fuzz/logs/NAME.log, and the script exits 1. What fuzzing found
# that is new coverage goes to build-fuzz/corpus/NAME/, not into the
# repository. Each harness's fuzzing appends its wall and CPU time to
# build-fuzz/fuzz-time.log.
#
# Usage: scripts/fuzz.sh SECONDS [HARNESS...]
#   HARNESS: config keras_json idx npy image h5 checkpoint metrics_csv (default: all)
# FUZZ_RUNS=N (CI: scripts/test.sh) makes the fuzzing reproducible: a fixed
# seed (FUZZ_SEED, default 1) and at most N inputs per harness, SECONDS
# still bounding it; the same commit then fuzzes the same inputs (or a
# prefix of them on a slower machine), so a commit's verdict does not hang
# on luck. Unset: libFuzzer's random seed, SECONDS only.
set -euo pipefail
cd "$(dirname "$0")/.."
all=(config keras_json keras_archive idx npy npz image h5 checkpoint metrics_csv)
if [ $# -lt 1 ] || ! [[ $1 =~ ^[0-9]+$ ]]; then
    echo "usage: scripts/fuzz.sh SECONDS [${all[*]}]" >&2
    exit 2
fi
seconds=$1
shift
names=("$@")
[ ${#names[@]} -gt 0 ] || names=("${all[@]}")
for n in "${names[@]}"; do
    [ -d "tests/fuzz/corpus/$n" ] || { echo "scripts/fuzz.sh: no harness '$n' (${all[*]})" >&2; exit 2; }
done
command -v clang > /dev/null || { echo "scripts/fuzz.sh: clang not found (scripts/deps.sh)" >&2; exit 2; }
b=build-fuzz
if [ ! -f $b/build.ninja ]; then
    # no MPI, CUDA or Check: the harnesses need the libraries only
    CC=clang meson setup $b -Dwerror=true -Dfuzz=true -Db_sanitize=address,undefined \
        -Db_lundef=false -Dbuildtype=debugoptimized -Dmpi=disabled -Dcuda=disabled -Dtests=disabled
fi
ninja -C $b "${names[@]/#/tests/fuzz/fuzz_}"
mkdir -p $b/artifacts $b/logs
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# HDF5's own leaks on some broken files (tests/fuzz/lsan.supp); ours are reported
export LSAN_OPTIONS=suppressions=$PWD/tests/fuzz/lsan.supp:print_suppressions=0
export OPENBLAS_NUM_THREADS=1

run() { # name: the corpus, then SECONDS of fuzzing; 0 or 1
    local n=$1 exe=$b/tests/fuzz/fuzz_$1 log=$b/logs/$1.log
    local opts=(-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 -artifact_prefix=$b/artifacts/$n-)
    # every corpus file once (the reproducers of past bugs among them)
    if ! "$exe" "${opts[@]}" tests/fuzz/corpus/$n/* > "$log" 2>&1; then
        echo "fuzz $n: FAILED on its corpus ($log):"; tail -n 40 "$log"; return 1
    fi
    [ "$seconds" -gt 0 ] || { echo "fuzz $n: corpus ok"; return 0; }
    mkdir -p $b/corpus/$n
    # the CPU time it got (the cores may be shared), for fuzz-time.log
    local TIMEFORMAT='%U %S' st=0
    local bound=()
    [ -z "${FUZZ_RUNS:-}" ] || bound=(-seed="${FUZZ_SEED:-1}" -runs="$FUZZ_RUNS")
    { time "$exe" "${opts[@]}" "${bound[@]}" -max_total_time="$seconds" -print_final_stats=1 \
        $b/corpus/$n tests/fuzz/corpus/$n >> "$log" 2>&1; } 2> $b/logs/$n.cpu || st=$?
    local cpu
    cpu=$(awk '{printf "%.0f", $1 + $2}' $b/logs/$n.cpu)
    echo "$(date -u +%FT%TZ) $(git rev-parse --short HEAD 2>/dev/null) $n ${seconds} s wall," \
        "${cpu} s CPU, status $st" >> $b/fuzz-time.log
    if [ $st -ne 0 ]; then
        echo "fuzz $n: FAILED after fuzzing ($log):"; tail -n 40 "$log"; return 1
    fi
    echo "fuzz $n: corpus ok, $(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$log" |
        grep -o '[0-9]*$') inputs in ${seconds} s (${cpu} s of CPU), no crash, hang or leak"
}

parallel=${FUZZ_PARALLEL:-2}
start=$(date +%s)
failed=0
for n in "${names[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$parallel" ]; do sleep 1; done
    # each harness's verdict in a file: a status wait could miss is kept
    rm -f $b/logs/$n.ok
    (run "$n" && touch $b/logs/$n.ok) &
done
wait
for n in "${names[@]}"; do [ -f $b/logs/$n.ok ] || failed=1; done
echo "fuzz: ${#names[@]} harnesses in $(($(date +%s) - start)) s; CPU time per run in $b/fuzz-time.log"
exit $failed
