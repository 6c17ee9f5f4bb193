#!/usr/bin/env bash
# All-reduce bandwidth: our local communicator (2 threads) against OpenMPI's
# MPI_Allreduce (2 ranks) on the same machine, in the same run.
#   bench/allreduce.sh [BUILD_DIR]     (default: build)
set -euo pipefail
build=${1:-build}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ours=$("$build/bench/bench_allreduce" --threads 2 --json)
theirs=$(mpirun -np 2 --bind-to core "$build/bench/bench_allreduce_mpi" --json)
/usr/bin/python3 - "$ours" "$theirs" <<'PY'
import json, sys
ours = {j["bytes"]: j for j in map(json.loads, sys.argv[1].splitlines())}
mpi = {j["bytes"]: j for j in map(json.loads, sys.argv[2].splitlines())}
print("| bytes | local algbw GB/s | MPI algbw GB/s | local / MPI |")
print("|---|---|---|---|")
for b in sorted(ours):
    o, m = ours[b]["algbw"], mpi[b]["algbw"]
    print(f"| {b} | {o:.2f} | {m:.2f} | {o / m:.2f}x |")
b = 16 << 20
print(f"16 MiB: local {ours[b]['algbw']:.2f} GB/s vs MPI {mpi[b]['algbw']:.2f} GB/s = {ours[b]['algbw'] / mpi[b]['algbw']:.2f}x")
PY
