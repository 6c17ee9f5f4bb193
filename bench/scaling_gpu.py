#!/usr/bin/env python3
"""Weak scaling of the mirrored strategy over the GPUs of this machine.

fashion_cnn.cfg (or --model) at --batch per replica, one replica per GPU,
runs alternating between the configurations:
  - one process driving n GPUs (--devices gpu:0,...,n-1, NCCL between them)
    for n = 1, 2, 4, ... up to the G GPUs `mirrored_train --list-devices`
    reports, and G itself;
  - when mpirun is on PATH and G >= 2: G processes of one GPU each
    (mpirun -np G --bind-to none, --devices auto: each rank takes the GPU of
    its node-local rank), against the one-process G-GPU run: the cost of
    processes instead of one process owning every GPU.
Reports medians of samples/s, samples/s per GPU and the weak-scaling
efficiency, samples/s at n / (n x samples/s at 1). With no GPU it prints one
line saying why and exits 0.

    /usr/bin/python3 bench/scaling_gpu.py [--model cnn] [--batch 32] [--runs 3] [--epochs 1] [--build build]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import CONFIGS, ROOT, per_replica_batch  # noqa: E402

GPU_LINE = re.compile(r"^gpu:(\d+): ")


def parse_devices(text):
    """--list-devices output -> (lines to show: gpu:N and cuda, GPU count,
    reason there is none or None)."""
    shown, count, reason = [], 0, None
    for line in text.splitlines():
        if GPU_LINE.match(line):
            shown.append(line)
            count += 1
        elif line.startswith("cuda:"):
            shown.append(line)
        elif line.startswith("gpu: none ("):
            reason = line[len("gpu: none ("):].rstrip()
            reason = reason[:-1] if reason.endswith(")") else reason
    if count == 0 and reason is None:
        reason = "no gpu lines in --list-devices output"
    return shown, count, reason


def gpu_counts(g):
    """1, 2, 4, ... up to g, and g itself."""
    counts, n = [], 1
    while n < g:
        counts.append(n)
        n *= 2
    return counts + [g]


def train(build, cfg, batch, epochs, devices, mpi_np=0):
    """One training run; returns its JSON summary. mpi_np > 0: under mpirun."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.cfg")
        with open(path, "w") as f:
            f.write(per_replica_batch(cfg, batch))
        out = os.path.join(tmp, "s.json")
        cmd = [os.path.join(build, "launch", "mirrored_train"), path, "--devices", devices,
               "--epochs", str(epochs), "--quiet", "--json", out]
        env = None
        if mpi_np:
            cmd = ["mpirun", "-np", str(mpi_np), "--bind-to", "none"] + cmd
            env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
        with open(out) as f:
            return json.load(f)


def run_gpus(build, cfg, batch, epochs, n):
    j = train(build, cfg, batch, epochs, "gpu:" + ",".join(str(i) for i in range(n)))
    assert j["processes"] == 1 and j["replicas"] == n, j
    return j["train_samples_per_sec"]


def run_mpi(build, cfg, batch, epochs, g):
    j = train(build, cfg, batch, epochs, "auto", mpi_np=g)
    assert j["processes"] == g and j["replicas"] == g, j
    return j["train_samples_per_sec"]


def table(model, batch, counts, runs, mpi_runs):
    """Markdown lines: one row per GPU count, then the mpirun row if any.
    runs: {n: [samples/s, ...]}; mpi_runs: [samples/s, ...] or []."""
    one = statistics.median(runs[1])
    lines = ["| model | batch/replica | GPUs | layout | samples/s | samples/s per GPU | "
             "weak-scaling efficiency | mpirun / 1 process |",
             "|---|---|---|---|---|---|---|---|"]
    for n in counts:
        s = statistics.median(runs[n])
        lines.append(f"| {model} | {batch} | {n} | 1 process | {s:.0f} | {s / n:.0f} | "
                     f"{s / (n * one):.2f} | |")
    if mpi_runs:
        g, m = counts[-1], statistics.median(mpi_runs)
        lines.append(f"| {model} | {batch} | {g} | mpirun -np {g} | {m:.0f} | {m / g:.0f} | "
                     f"{m / (g * one):.2f} | {m / statistics.median(runs[g]):.2f}x |")
    return lines


def raw_runs(counts, runs, mpi_runs):
    parts = [f"{n} GPU{'s' if n > 1 else ''} {[round(x) for x in runs[n]]}" for n in counts]
    if mpi_runs:
        parts.append(f"mpirun -np {counts[-1]} {[round(x) for x in mpi_runs]}")
    return "  runs: " + ", ".join(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=sorted(CONFIGS), default="cnn")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = ap.parse_args()
    cfg = os.path.join(ROOT, "models", "configs", CONFIGS[args.model])
    listing = subprocess.run([os.path.join(args.build, "launch", "mirrored_train"), "--list-devices"],
                             check=True, capture_output=True, text=True).stdout
    shown, g, reason = parse_devices(listing)
    if g == 0:
        print(f"scaling_gpu: no GPU: {reason}")
        return
    for line in shown:
        print(line)
    counts = gpu_counts(g)
    use_mpi = g >= 2 and shutil.which("mpirun") is not None
    runs, mpi_runs = {n: [] for n in counts}, []
    for _ in range(args.runs):
        for n in counts:
            runs[n].append(run_gpus(args.build, cfg, args.batch, args.epochs, n))
        if use_mpi:
            mpi_runs.append(run_mpi(args.build, cfg, args.batch, args.epochs, g))
    print()
    for line in table(args.model, args.batch, counts, runs, mpi_runs):
        print(line)
    if g >= 2 and not use_mpi:
        print("  (no mpirun on PATH: one process per GPU not measured)")
    print(raw_runs(counts, runs, mpi_runs), file=sys.stderr)


if __name__ == "__main__":
    main()
