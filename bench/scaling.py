#!/usr/bin/env python3
"""Weak scaling of the mirrored strategy on this machine, and the peer.

Same run, alternating: fashion_cnn.cfg (or --model) at --batch per replica,
  - 1 replica restricted to one core (taskset -c 0),
  - 2 replicas (--devices cpu:2) on both cores,
  - 2 processes of one replica each under mpirun (--bind-to core), one job
    over the mpi communicator: against cpu:2, the cost of processes and
    MPI instead of threads and shared memory,
  - two independent 1-replica processes at once, one pinned to each core
    (their samples/s added): what the two cores give with no communication
    and no synchronisation at all, the ceiling for 2 replicas on this
    machine (shared caches, memory bandwidth, clock),
  - PyTorch DistributedDataParallel, gloo, 2 processes, 1 thread each,
    same model and per-replica batch (bench/peer_torch.py --ddp 2).
Reports medians of samples/s and the ratios the issue names.

    /usr/bin/python3 bench/scaling.py [--model cnn] [--batch 32] [--runs 3] [--build build]
"""
import argparse
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import CONFIGS, ROOT, per_replica_batch, run_peer  # noqa: E402

import json
import tempfile


def run_ours(build, cfg, batch, devices, cores, epochs, bucket_mb=0):
    with tempfile.TemporaryDirectory() as tmp:
        text = per_replica_batch(cfg, batch)
        path = os.path.join(tmp, "model.cfg")
        open(path, "w").write(text)
        out = os.path.join(tmp, "s.json")
        subprocess.run(["taskset", "-c", cores, os.path.join(build, "launch", "mirrored_train"), path,
                        "--devices", devices, "--epochs", str(epochs), "--quiet", "--json", out,
                        "--bucket-mb", str(bucket_mb)],
                       check=True, stdout=subprocess.DEVNULL)
        return json.load(open(out))["train_samples_per_sec"]


def run_mpi(build, cfg, batch, epochs, bucket_mb=0):
    """mpirun -np 2, one replica per process, each bound to its core."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.cfg")
        open(path, "w").write(per_replica_batch(cfg, batch))
        out = os.path.join(tmp, "s.json")
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        subprocess.run(["mpirun", "-q", "-np", "2", "--bind-to", "core",
                        os.path.join(build, "launch", "mirrored_train"), path, "--devices", "cpu",
                        "--epochs", str(epochs), "--quiet", "--json", out, "--bucket-mb", str(bucket_mb)],
                       check=True, stdout=subprocess.DEVNULL, env=env)
        j = json.load(open(out))
        assert j["processes"] == 2 and j["replicas"] == 2, j
        return j["train_samples_per_sec"]


def run_two_processes(build, cfg, batch, epochs):
    """Two 1-replica jobs at the same time, on cores 0 and 1: summed samples/s."""
    with tempfile.TemporaryDirectory() as tmp:
        text = per_replica_batch(cfg, batch)
        path = os.path.join(tmp, "model.cfg")
        open(path, "w").write(text)
        procs, outs = [], []
        for core in ("0", "1"):
            out = os.path.join(tmp, f"s{core}.json")
            outs.append(out)
            procs.append(subprocess.Popen(
                ["taskset", "-c", core, os.path.join(build, "launch", "mirrored_train"), path,
                 "--devices", "cpu", "--epochs", str(epochs), "--quiet", "--json", out],
                stdout=subprocess.DEVNULL))
        for p in procs:
            if p.wait() != 0:
                raise RuntimeError("mirrored_train failed")
        return sum(json.load(open(o))["train_samples_per_sec"] for o in outs)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=sorted(CONFIGS), default="cnn")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--mpi-only", action="store_true",
                    help="only 2 replica threads against mpirun -np 2 (with and without buckets)")
    ap.add_argument("--bucket-mb", type=float, default=0.05,
                    help="bucket size of the bucketed mpirun column (--mpi-only)")
    args = ap.parse_args()
    cfg = os.path.join(ROOT, "models", "configs", CONFIGS[args.model])
    if args.mpi_only:
        two, mpi, mpib = [], [], []
        for _ in range(args.runs):
            two.append(run_ours(args.build, cfg, args.batch, "cpu:2", "0,1", args.epochs))
            mpi.append(run_mpi(args.build, cfg, args.batch, args.epochs))
            mpib.append(run_mpi(args.build, cfg, args.batch, args.epochs, args.bucket_mb))
        t, m, b = statistics.median(two), statistics.median(mpi), statistics.median(mpib)
        print(f"| model | batch/replica | 2 threads (cpu:2) | mpirun -np 2 | mpi / threads | "
              f"mpirun -np 2, {args.bucket_mb} MiB buckets | buckets / none |")
        print(f"|---|---|---|---|---|---|---|")
        print(f"| {args.model} | {args.batch} | {t:.0f} | {m:.0f} | {m / t:.2f}x | {b:.0f} | {b / m:.2f}x |")
        print(f"  runs: cpu:2 {[round(x) for x in two]}, mpirun {[round(x) for x in mpi]}, "
              f"mpirun+buckets {[round(x) for x in mpib]}", file=sys.stderr)
        return
    one, two, mpi, indep, ddp = [], [], [], [], []
    for _ in range(args.runs):
        one.append(run_ours(args.build, cfg, args.batch, "cpu", "0", args.epochs))
        two.append(run_ours(args.build, cfg, args.batch, "cpu:2", "0,1", args.epochs))
        mpi.append(run_mpi(args.build, cfg, args.batch, args.epochs))
        indep.append(run_two_processes(args.build, cfg, args.batch, args.epochs))
        ddp.append(run_peer(args.model, args.batch, "0,1", ["--ddp", "2", "--steps", "200"])["samples_per_sec"])
    o, t, d = statistics.median(one), statistics.median(two), statistics.median(ddp)
    i, m = statistics.median(indep), statistics.median(mpi)
    print(f"| model | batch/replica | 1 replica, 1 core | 2 replicas, 2 cores | scaling | "
          f"mpirun -np 2 | mpirun / threads | "
          f"2 independent 1-replica jobs | their scaling | PyTorch DDP 2 procs | ours / DDP |")
    print(f"|---|---|---|---|---|---|---|---|---|---|---|")
    print(f"| {args.model} | {args.batch} | {o:.0f} | {t:.0f} | {t / o:.2f}x | {m:.0f} | {m / t:.2f}x | "
          f"{i:.0f} | {i / o:.2f}x | {d:.0f} | {t / d:.2f}x |")
    print(f"  runs: 1 replica {[round(x) for x in one]}, 2 replicas {[round(x) for x in two]}, "
          f"mpirun {[round(x) for x in mpi]}, "
          f"2 independent {[round(x) for x in indep]}, ddp {[round(x) for x in ddp]}", file=sys.stderr)


if __name__ == "__main__":
    main()
