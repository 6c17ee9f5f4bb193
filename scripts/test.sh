#!/usr/bin/env bash
# The whole test suite: builds and runs
#   1. every test (unit, MPI under mpirun, the command-line integration
#      tests, some under mpirun, and the slow training on Fashion-MNIST) in a
#      release build; then the Python package as a user installs it
#      (scripts/test_python.sh: pip wheel . and its pytest suite in a venv
#      over Debian's packages, the notebook in examples/ executed in a
#      kernel of a fresh venv of the python3 on PATH),
#   2. the unit, CLI (mirrored_train, mirrored_compare, mirrored_export),
#      checkpoint and MPI tests under AddressSanitizer + UndefinedBehavior
#      Sanitizer,
#   3. the collective, strategy and MPI tests under ThreadSanitizer,
#   4. the unit and CLI tests of a build without MPI and CUDA (job_single.c;
#      no "gpu" entry in the table of device kinds),
#   5. the GPU tests on emulated GPUs (-Dgpu_emulation=true, tests/gpu_emu):
#      the CUDA backend's own code, its .cu kernels built as C++, against
#      emulated CUDA runtime, cuBLAS, cuDNN and NCCL; with training on
#      Fashion-MNIST (tests/train_gpu_emu.py); then again on 3 emulated
#      GPUs, but the training,
#   6. the libFuzzer harnesses of the file readers (scripts/fuzz.sh, clang,
#      build-fuzz/): each on its corpus (tests/fuzz/corpus/), then fuzzed
#      with a fixed seed for at most FUZZ_RUNS inputs (default 20000) or
#      MIRRORED_FUZZ_SECONDS (default 60) each; then 200 random Keras
#      models (tests/golden/keras/random_all, bench/keras_random.py --all)
#      predicted by the release build against Keras's predictions.
# Where the CUDA toolkit is installed (/usr/local/cuda) the release build
# compiles the CUDA backend with nvcc (its GPU tests are a SKIP, with the
# reason, without a GPU), and the sanitizer builds run it on emulated GPUs,
# so the gpu suite runs under ASan/UBSan and TSan too (streams are threads
# there: a missing wait between streams is a data race TSan reports).
# Warnings are errors in every build. OpenMPI's own leaks and races are
# suppressed (tests/lsan.supp, tests/tsan_openmpi.supp); ours are not.
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
# mpirun refuses root without these (CI runs as root)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
supp=$PWD/tests

echo "== release build: all tests"
setup build
meson test -C build --print-errorlogs --num-processes 1
echo "== python package: pip wheel ., pytest, the notebook"
# without CUDA: the release build above compiles the CUDA backend already
scripts/test_python.sh --config-settings=setup-args=-Dcuda=disabled \
    --config-settings=builddir=build-pip

echo "== address + undefined sanitizers: unit, CLI, export and MPI tests"
# the GPU tests on emulated GPUs where the CUDA headers are installed
emu=()
[ -f "${CUDA_PATH:-/usr/local/cuda}/include/cuda_runtime_api.h" ] && emu=(-Dgpu_emulation=true)
setup build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debugoptimized "${emu[@]}"
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# print_suppressions=0: the tests read what a refused run prints, one line
export LSAN_OPTIONS=suppressions=$supp/lsan.supp:print_suppressions=0
ASAN_OPTIONS=detect_leaks=1 meson test -C build-asan --print-errorlogs --suite unit --no-suite gpu \
    --num-processes 2
ASAN_OPTIONS=detect_leaks=1 meson test -C build-asan --print-errorlogs cli compare export
# the slow unwinder reaches OpenMPI's frames, so its leaks can be told from ours
ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0 meson test -C build-asan --print-errorlogs --suite mpi
# checkpoints, evaluation and resume, some under mpirun
ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0 meson test -C build-asan --print-errorlogs resume
# the GPU tests on emulated GPUs, but the training (release build, below)
if [ ${#emu[@]} -gt 0 ]; then
    ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0 meson test -C build-asan --print-errorlogs \
        --suite gpu --no-suite slow --no-suite counts
fi
unset LSAN_OPTIONS

echo "== thread sanitizer: collectives, strategy, the C API and MPI"
setup build-tsan -Db_sanitize=thread -Db_lundef=false -Dbuildtype=debugoptimized "${emu[@]}"
export TSAN_OPTIONS="halt_on_error=1 suppressions=$supp/tsan_openmpi.supp"
OPENBLAS_NUM_THREADS=1 meson test -C build-tsan --print-errorlogs local strategy job api api_handle
OPENBLAS_NUM_THREADS=1 meson test -C build-tsan --print-errorlogs --suite mpi
if [ ${#emu[@]} -gt 0 ]; then
    OPENBLAS_NUM_THREADS=1 meson test -C build-tsan --print-errorlogs --suite gpu --no-suite slow \
        --no-suite counts
fi
unset TSAN_OPTIONS

echo "== without MPI and CUDA: unit and CLI tests"
setup build-nompi -Dmpi=disabled -Dcuda=disabled
meson test -C build-nompi --print-errorlogs --suite unit
meson test -C build-nompi --print-errorlogs cli
if [ ${#emu[@]} -gt 0 ]; then
    echo "== emulated GPUs: the gpu suite, and training on Fashion-MNIST; the gpu suite on 3 GPUs"
    setup build-emu -Dgpu_emulation=true
    meson test -C build-emu --print-errorlogs --suite gpu
    # an odd count, which divides no power-of-two batch (about a minute on 2 cores)
    MIRRORED_EMULATED_GPUS=3 meson test -C build-emu --print-errorlogs --suite gpu --no-suite slow
fi
echo "== fuzz harnesses: the corpus, then seeded fuzzing (20000 inputs or 60 s each)"
# seeded and bounded by inputs: the same commit fuzzes the same inputs
FUZZ_RUNS=${FUZZ_RUNS:-20000} scripts/fuzz.sh "${MIRRORED_FUZZ_SECONDS:-60}"
echo "== 200 random Keras models: mirrored_eval's predictions against Keras's (golden random_all)"
MIRRORED_KERAS_GOLDEN=random_all meson test -C build --print-errorlogs keras_golden
echo "== all test suites passed"
