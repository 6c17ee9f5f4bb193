#!/usr/bin/env python3
"""Training throughput of mirrored against PyTorch, measured in the same run.

Both sides train the same model on the same Fashion-MNIST data at the same
batch, pinned to the same core (taskset), one thread each; runs alternate
(ours, peer, ours, peer, ...) so drift in the machine hits both; medians are
reported with the ratio. Our figure is a whole training epoch (shuffling and
uint8 -> float conversion included); PyTorch's is steady-state steps over
pre-converted tensors (bench/peer_torch.py), which favours the peer.

    /usr/bin/python3 bench/compare.py --model mlp --batch 32 256 [--runs 3] [--build build]

Also prints the single-thread OpenBLAS SGEMM GFLOP/s (bench_sgemm) and our
achieved GFLOP/s (training FLOPs per example x examples/s) and peak RSS.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CONFIGS = {"mlp": "fashion_mlp.cfg", "cnn": "fashion_cnn.cfg", "cnn2": "fashion_cnn2.cfg"}


def train_flops_per_example(model):
    """Multiply-adds x 2 of forward + backward (weights and inputs, no input
    gradient for the first layer), from the layer shapes of the configs."""
    if model == "mlp":
        dims = [(784, 128), (128, 64), (64, 10)]
        fwd = sum(2 * a * b for a, b in dims)
        return fwd + fwd + sum(2 * a * b for a, b in dims[1:])
    if model == "cnn":
        conv = 2 * 26 * 26 * 9 * 1 * 32  # 3x3x1 -> 32 over 26x26 outputs
        dense = 2 * 5408 * 10
        return (conv + dense) + (conv + 2 * dense)  # conv: no data gradient (first layer)
    if model == "cnn2":
        c1 = 2 * 28 * 28 * 25 * 1 * 32
        c2 = 2 * 14 * 14 * 25 * 32 * 64
        d1 = 2 * 3136 * 1024
        d2 = 2 * 1024 * 10
        fwd = c1 + c2 + d1 + d2
        return fwd + fwd + (c2 + d1 + d2)
    raise ValueError(model)


def per_replica_batch(cfg, batch):
    """The .cfg text with `batch` examples per replica: the shipped configs fix
    the global batch (global_batch = 64), which would hand one replica all 64."""
    text = re.sub(r"(?m)^(global_)?batch\s*=.*\n", "", open(cfg).read())
    return text.replace("[net]\n", f"[net]\nbatch = {batch}\n", 1)


def run_ours(build, cfg, batch, core, epochs):
    with tempfile.TemporaryDirectory() as tmp:
        text = per_replica_batch(cfg, batch)
        path = os.path.join(tmp, "model.cfg")
        open(path, "w").write(text)
        out = os.path.join(tmp, "s.json")
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
        subprocess.run(["taskset", "-c", core, os.path.join(build, "launch", "mirrored_train"), path,
                        "--devices", "cpu", "--epochs", str(epochs), "--quiet", "--json", out],
                       check=True, env=env, stdout=subprocess.DEVNULL)
        return json.load(open(out))


def run_peer(model, batch, core, extra=()):
    out = subprocess.run(["taskset", "-c", core, "/usr/bin/python3", os.path.join(HERE, "peer_torch.py"),
                          "--model", model, "--batch", str(batch), "--json", *extra],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def sgemm_gflops(build, core):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    out = subprocess.run(["taskset", "-c", core, os.path.join(build, "bench", "bench_sgemm"), "1024", "1024",
                          "1024"], check=True, capture_output=True, text=True, env=env).stdout
    return float(out.split()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=sorted(CONFIGS), default="mlp")
    ap.add_argument("--batch", type=int, nargs="+", default=[32])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--core", default="0")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--peer-steps", type=int, default=300)
    args = ap.parse_args()
    cfg = os.path.join(ROOT, "models", "configs", CONFIGS[args.model])
    peak = sgemm_gflops(args.build, args.core)
    flops = train_flops_per_example(args.model)
    print(f"single-thread OpenBLAS SGEMM (1024^3): {peak:.1f} GFLOP/s; "
          f"{args.model}: {flops / 1e6:.3f} MFLOP per training example")
    print(f"| model | batch | mirrored samples/s | PyTorch samples/s | ratio | mirrored GFLOP/s | % of SGEMM | peak RSS MB |")
    print(f"|---|---|---|---|---|---|---|---|")
    for batch in args.batch:
        ours, peer, rss = [], [], []
        for _ in range(args.runs):
            j = run_ours(args.build, cfg, batch, args.core, args.epochs)
            ours.append(j["train_samples_per_sec"])
            rss.append(j["max_rss_mb"])
            peer.append(run_peer(args.model, batch, args.core, ["--steps", str(args.peer_steps)])["samples_per_sec"])
        o, p = statistics.median(ours), statistics.median(peer)
        gf = o * flops / 1e9
        print(f"| {args.model} | {batch} | {o:.0f} | {p:.0f} | {o / p:.2f}x | {gf:.1f} | {100 * gf / peak:.0f}% | {max(rss):.0f} |",
              flush=True)
        print(f"  runs: mirrored {[round(x) for x in ours]}, pytorch {[round(x) for x in peer]}", file=sys.stderr)


if __name__ == "__main__":
    main()
