#!/usr/bin/env bash
# All-reduce time, algorithm and bus bandwidth (as nccl-tests define them) of
# our communicators against OpenMPI's MPI_Allreduce, 2 participants on this
# machine, in the same run:
#   local         2 replica threads of one process (shared memory)
#   mpi           2 processes of one replica (fixed-order MPI point-to-point)
#   hierarchical  2 processes, each its own (simulated) node: local level,
#                 then MPI between the node leaders
#   MPI_Allreduce 2 processes, OpenMPI's own (no fixed summation order)
# Processes are bound one per core.
#   bench/allreduce.sh [BUILD_DIR]     (default: build)
set -euo pipefail
build=${1:-build}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
local_=$("$build/bench/bench_allreduce" --threads 2 --json)
mpi=$(mpirun -q -np 2 --bind-to core "$build/bench/bench_allreduce" --json)
hier=$(mpirun -q -np 2 --bind-to core -x MIRRORED_RANKS_PER_NODE=1 "$build/bench/bench_allreduce" --json)
raw=$(mpirun -q -np 2 --bind-to core "$build/bench/bench_allreduce_mpi" --json)
/usr/bin/python3 - "$local_" "$mpi" "$hier" "$raw" <<'PY'
import json, sys
names = ["local", "mpi", "hierarchical", "MPI_Allreduce"]
runs = [{j["bytes"]: j for j in map(json.loads, arg.splitlines())} for arg in sys.argv[1:5]]
print("| bytes | " + " | ".join(f"{n} us | {n} algbw GB/s" for n in names) +
      " | busbw GB/s (local / mpi / hier / MPI) | mpi / MPI_Allreduce |")
print("|---" * (2 + 2 * len(names) + 1) + "|")
for b in sorted(runs[0]):
    cells = " | ".join(f"{r[b]['time_us']:.1f} | {r[b]['algbw']:.2f}" for r in runs)
    bus = " / ".join(f"{r[b]['busbw']:.2f}" for r in runs)
    print(f"| {b} | {cells} | {bus} | {runs[1][b]['algbw'] / runs[3][b]['algbw']:.2f}x |")
PY
