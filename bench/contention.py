#!/usr/bin/env python3
"""Throughput with a busy neighbour on the machine, for two builds.

Same run, alternating: mirrored_train on a config (default
models/configs/fashion_cnn.cfg) for one epoch, with --devices cpu:2 and
--devices cpu, each on a quiet machine and beside one busy-looping process
pinned to core 1 (`taskset -c 1 sh -c 'while :; do :; done'`, what another
user's job does to a shared machine), for two binaries: BEFORE (another
build, in another folder: a change's parent, say) and AFTER. The order of
the binaries alternates from one repetition to the next, so drift in the
machine hits both. Reports the median samples/s of each cell, the spread,
and the ratios: busy cpu:2 against quiet cpu (two replicas should keep at
least 0.8 of one quiet core), busy cpu against quiet cpu (one replica should
keep at least 0.8 of its speed), and after against before on the quiet
machine (a change should cost nothing there).

Every run gets the same environment: OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE
unset (OpenBLAS picks its kernel for this CPU; the first run of each binary
prints the kernel it picked, from OPENBLAS_VERBOSE=2), and
OPENBLAS_NUM_THREADS unset, so each binary chooses its own BLAS threads.

    /usr/bin/python3 bench/contention.py --before /tmp/before/build --after build [--runs 5]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEVICES = ["cpu:2", "cpu"]
SIDES = ["quiet", "busy"]


def env():
    e = dict(os.environ)
    for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS", "OPENBLAS_VERBOSE"):
        e.pop(k, None)
    return e


def train(build, cfg, devices, epochs, verbose=False):
    """samples/s of one run; with verbose, also OpenBLAS's "Core: ..." line."""
    exe = os.path.join(build, "launch", "mirrored_train")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "s.json")
        e = env()
        if verbose:
            e["OPENBLAS_VERBOSE"] = "2"
        p = subprocess.run([exe, cfg, "--devices", devices, "--epochs", str(epochs), "--quiet",
                            "--json", out], env=e, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            sys.exit(f"{exe} exited {p.returncode}: {p.stderr.strip()}")
        core = [l for l in p.stderr.splitlines() if l.startswith("Core:")]
        return json.load(open(out))["train_samples_per_sec"], (core[0] if core else "Core: ?")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="build folder of the other binary")
    ap.add_argument("--after", default=os.path.join(ROOT, "build"), help="build folder (default: build)")
    ap.add_argument("--config", default=os.path.join(ROOT, "models", "configs", "fashion_cnn.cfg"))
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--runs", type=int, default=5, help="repetitions of every cell (default 5)")
    a = ap.parse_args()
    if a.runs < 1 or a.epochs < 1:
        sys.exit("contention.py: --runs and --epochs must be at least 1")
    for b in (a.before, a.after):
        if not os.access(os.path.join(b, "launch", "mirrored_train"), os.X_OK):
            sys.exit(f"contention.py: {b}/launch/mirrored_train: no such executable")
    if os.cpu_count() is None or len(os.sched_getaffinity(0)) < 2:
        sys.exit("contention.py: needs at least 2 cores (the neighbour takes core 1)")
    bins = {"before": a.before, "after": a.after}
    for name, b in bins.items():
        print(f"{name}: {b}: {train(b, a.config, 'cpu', 1, verbose=True)[1]}", flush=True)
    res = {(n, s, d): [] for n in bins for s in SIDES for d in DEVICES}
    for r in range(a.runs):
        order = list(bins) if r % 2 == 0 else list(bins)[::-1]
        for side in SIDES:
            hog = None
            if side == "busy":
                hog = subprocess.Popen(["taskset", "-c", "1", "sh", "-c", "while :; do :; done"])
            try:
                for d in DEVICES:
                    for n in order:
                        v = train(bins[n], a.config, d, a.epochs)[0]
                        res[(n, side, d)].append(v)
                        print(f"run {r + 1}/{a.runs} {side:5} {d:5} {n:6} {v:9.0f} samples/s",
                              flush=True)
            finally:
                if hog is not None:
                    hog.kill()
                    hog.wait()
    med = {k: statistics.median(v) for k, v in res.items()}
    print(f"\n{os.path.basename(a.config)}, {a.epochs} epoch(s), median of {a.runs} run(s), "
          "samples/s (min-max)\n")
    print("| binary | devices | quiet | busy neighbour on core 1 | busy / quiet |")
    print("|---|---|---|---|---|")
    for n in bins:
        for d in DEVICES:
            q, b = res[(n, "quiet", d)], res[(n, "busy", d)]
            print(f"| {n} | `{d}` | {med[(n, 'quiet', d)]:.0f} ({min(q):.0f}-{max(q):.0f}) | "
                  f"{med[(n, 'busy', d)]:.0f} ({min(b):.0f}-{max(b):.0f}) | "
                  f"{med[(n, 'busy', d)] / med[(n, 'quiet', d)]:.2f}x |")
    print("\n| binary | busy cpu:2 / quiet cpu (>= 0.8) | busy cpu / quiet cpu (>= 0.8) |")
    print("|---|---|---|")
    for n in bins:
        qc = med[(n, "quiet", "cpu")]
        print(f"| {n} | {med[(n, 'busy', 'cpu:2')] / qc:.2f}x | {med[(n, 'busy', 'cpu')] / qc:.2f}x |")
    print("\n| quiet, after / before | `cpu:2` | `cpu` |")
    print("|---|---|---|")
    print(f"| ratio | {med[('after', 'quiet', 'cpu:2')] / med[('before', 'quiet', 'cpu:2')]:.2f}x | "
          f"{med[('after', 'quiet', 'cpu')] / med[('before', 'quiet', 'cpu')]:.2f}x |")


if __name__ == "__main__":
    main()
