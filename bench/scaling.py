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

With --csv or --plot: the scaling curve instead, over --replicas (1 2 by
default; weak scaling, --batch per replica), each side alternating in every
round: mirrored's threads (--devices cpu:R on cores 0..R-1), mirrored under
mpirun -np R (one replica per process, bound to a core), PyTorch
DistributedDataParallel (R gloo processes) and, with --tf PYTHON (a Python
that has TensorFlow), TensorFlow's MirroredStrategy (R logical CPU devices,
bench/peer_tf.py), all on the same cores. Every run's samples/s goes into
the CSV (side, replicas, batch per replica, round, samples/s); the table
gives the medians and the scaling efficiency S(R) / (R x S(1)) of each
side; the PNG (gnuplot) plots both against R.

    /usr/bin/python3 bench/scaling.py --model cnn --replicas 1 2 --runs 3 \
        --tf /path/to/venv/bin/python --csv scaling.csv --plot scaling.png
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


def run_mpi(build, cfg, batch, epochs, bucket_mb=0, np_=2):
    """mpirun -np N (2), one replica per process, each bound to its core."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.cfg")
        open(path, "w").write(per_replica_batch(cfg, batch))
        out = os.path.join(tmp, "s.json")
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        subprocess.run(["mpirun", "-q", "-np", str(np_), "--bind-to", "core",
                        os.path.join(build, "launch", "mirrored_train"), path, "--devices", "cpu",
                        "--epochs", str(epochs), "--quiet", "--json", out, "--bucket-mb", str(bucket_mb)],
                       check=True, stdout=subprocess.DEVNULL, env=env)
        j = json.load(open(out))
        assert j["processes"] == np_ and j["replicas"] == np_, j
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


def run_tf(python, model, batch, replicas, cores, steps):
    """TensorFlow MirroredStrategy over `replicas` logical CPU devices."""
    out = subprocess.run(["taskset", "-c", cores, python, os.path.join(ROOT, "bench", "peer_tf.py"),
                          "--model", model, "--batch", str(batch), "--replicas", str(replicas),
                          "--steps", str(steps)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["samples_per_sec"]


SIDES = ["mirrored threads", "mirrored mpirun", "PyTorch DDP", "TF MirroredStrategy"]


def curve(args, cfg):
    """The scaling curve: every side at every replica count, alternating."""
    import csv

    sides = SIDES if args.tf else SIDES[:3]
    rows = []  # (side, replicas, round, samples/s)
    for rnd in range(args.runs):
        for r in args.replicas:
            cores = f"0-{r - 1}"
            for side in sides:
                if side == "mirrored threads":
                    v = run_ours(args.build, cfg, args.batch, f"cpu:{r}", cores, args.epochs)
                elif side == "mirrored mpirun":
                    v = run_mpi(args.build, cfg, args.batch, args.epochs, 0, r)
                elif side == "PyTorch DDP":
                    v = run_peer(args.model, args.batch, cores,
                                 ["--ddp", str(r), "--steps", str(args.peer_steps)])["samples_per_sec"]
                else:
                    v = run_tf(args.tf, args.model, args.batch, r, cores, args.peer_steps)
                rows.append((side, r, rnd, v))
                print(f"  round {rnd + 1}: {side}, {r} replica(s): {v:.0f} samples/s", file=sys.stderr)
    med = {(s, r): statistics.median(v for s2, r2, _, v in rows if (s2, r2) == (s, r))
           for s in sides for r in args.replicas}
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["side", "replicas", "batch_per_replica", "round", "samples_per_sec"])
            for s, r, rnd, v in rows:
                w.writerow([s, r, args.batch, rnd + 1, f"{v:.1f}"])
    base = args.replicas[0]
    print(f"| side | " + " | ".join(f"{r} replica(s)" for r in args.replicas) + " | " +
          " | ".join(f"efficiency at {r}" for r in args.replicas[1:]) + " |")
    print("|---" * (1 + 2 * len(args.replicas) - 1) + "|")
    for s in sides:
        eff = [med[(s, r)] / (r / base * med[(s, base)]) for r in args.replicas[1:]]
        print(f"| {s} | " + " | ".join(f"{med[(s, r)]:.0f}" for r in args.replicas) + " | " +
              " | ".join(f"{e:.2f}" for e in eff) + " |")
    ours = med[("mirrored threads", args.replicas[-1])]
    for s in sides[2:]:
        print(f"mirrored threads / {s} at {args.replicas[-1]} replicas: "
              f"{ours / med[(s, args.replicas[-1])]:.2f}x")
    if args.plot:
        plot(args, sides, med)


def plot(args, sides, med):
    """Two panels with gnuplot: samples/s and scaling efficiency against replicas."""
    base = args.replicas[0]
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "curve.dat")
        with open(data, "w") as f:
            for i, s in enumerate(sides):
                f.write(f'# "{s}"\n')
                for r in args.replicas:
                    f.write(f"{r} {med[(s, r)]:.1f} {med[(s, r)] / (r / base * med[(s, base)]):.4f}\n")
                f.write("\n\n")
        script = [
            f'set terminal pngcairo size 1100,450 font "sans,10"',
            f'set output "{args.plot}"',
            "set multiplot layout 1,2",
            "set key top left", "set grid", f"set xtics ({', '.join(str(r) for r in args.replicas)})",
            f'set xrange [{args.replicas[0] - 0.5}:{args.replicas[-1] + 0.5}]',
            f'set title "{args.model}, batch {args.batch} per replica: throughput"',
            'set xlabel "replicas"', 'set ylabel "samples/s (median)"', "set yrange [0:*]",
            "plot " + ", ".join(f'"{data}" index {i} using 1:2 with linespoints lw 2 title "{s}"'
                                for i, s in enumerate(sides)),
            f'set title "scaling efficiency S(R) / (R x S({base}))"',
            'set ylabel "efficiency"', "set yrange [0:1.2]", "set key bottom left",
            "plot " + ", ".join(f'"{data}" index {i} using 1:3 with linespoints lw 2 title "{s}"'
                                for i, s in enumerate(sides)),
            "unset multiplot",
        ]
        subprocess.run(["gnuplot"], input="\n".join(script) + "\n", text=True, check=True)
    print(f"plot: {args.plot}")


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
    ap.add_argument("--replicas", type=int, nargs="+", default=[1, 2],
                    help="replica counts of the curve (--csv/--plot), ascending")
    ap.add_argument("--tf", metavar="PYTHON",
                    help="a Python with TensorFlow: adds TF MirroredStrategy to the curve")
    ap.add_argument("--csv", help="the curve: every run's samples/s into this CSV")
    ap.add_argument("--plot", help="the curve: a PNG of throughput and efficiency (gnuplot)")
    ap.add_argument("--peer-steps", type=int, default=200, help="timed steps of the peers")
    args = ap.parse_args()
    cfg = os.path.join(ROOT, "models", "configs", CONFIGS[args.model])
    if args.csv or args.plot:
        if args.model not in ("mlp", "cnn") and args.tf:
            sys.exit("--tf: bench/peer_tf.py has the mlp and cnn models")
        return curve(args, cfg)
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
