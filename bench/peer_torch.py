"""PyTorch peer for the mirrored benchmarks (optional; never a build dependency).

Trains one of our models on Fashion-MNIST with the same architecture,
initialisation (Glorot-uniform kernels, zero biases), optimizer (Adam lr 1e-3,
betas 0.9/0.999, eps 1e-7) and loss (sparse categorical cross-entropy on
logits, mean) as the C runtime, and reports training throughput.

Run it with the Debian interpreter, which has torch (apt-get install python3-torch):

    taskset -c 0 /usr/bin/python3 bench/peer_torch.py --model mlp --batch 32 --json
    taskset -c 0,1 /usr/bin/python3 bench/peer_torch.py --model cnn --batch 32 --ddp 2
    /usr/bin/python3 bench/peer_torch.py --model mlp --train-epochs 1   # sanity: test accuracy

The whole data set is converted to float tensors (x / 255, NHWC -> NCHW) up
front; each step gathers its batch by a shuffled epoch index, so data loading is
not what is measured.  Timed steps run after --warmup steps, timed with
time.perf_counter (for --ddp N: on rank 0 between barriers, N gloo processes
over loopback, each taking its own --batch shard of every global batch).
samples_per_sec counts global samples: processes * batch * steps / time.
"""
import argparse
import gzip
import json
import os
import socket
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

DATA_DIR = "/usr/share/datasets/fashion-mnist"


def load_idx(name):
    with gzip.open(os.path.join(DATA_DIR, name), "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_split(prefix):
    """Images as float NCHW (N, 1, 28, 28) scaled by 1/255, labels as int64."""
    x = load_idx(prefix + "-images-idx3-ubyte.gz").astype(np.float32) / 255.0
    y = load_idx(prefix + "-labels-idx1-ubyte.gz").astype(np.int64)
    # IDX is NHWC with C = 1: adding the channel axis at 1 gives NCHW.
    return torch.from_numpy(x[:, None, :, :].copy()), torch.from_numpy(y)


def build_model(name):
    # Flatten order differs from Keras (NCHW vs NHWC); with random init that is
    # only a permutation of the next Dense kernel, so the models are equivalent.
    if name == "mlp":
        m = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(),
                          nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))
    elif name == "cnn":
        m = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(13 * 13 * 32, 10))
    elif name == "cnn2":
        m = nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(7 * 7 * 64, 1024), nn.ReLU(),
                          nn.Dropout(0.4), nn.Linear(1024, 10))
    else:
        raise ValueError(name)
    for mod in m.modules():
        if isinstance(mod, (nn.Linear, nn.Conv2d)):
            # torch's fans for conv (in*kh*kw, out*kh*kw) match Keras's.
            nn.init.xavier_uniform_(mod.weight)
            nn.init.zeros_(mod.bias)
    return m


def batches(n, batch, world, rank, seed):
    """Endless index batches: this rank's shard of each global batch of a shuffled epoch."""
    g = torch.Generator().manual_seed(seed)  # same permutation on every rank
    gb = batch * world
    while True:
        perm = torch.randperm(n, generator=g)
        for s in range(0, n - gb + 1, gb):
            yield perm[s + rank * batch: s + (rank + 1) * batch]


def worker(rank, args, port):
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    world = args.ddp
    if world > 1:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
        dist.init_process_group("gloo", rank=rank, world_size=world)

    x, y = load_split("train")
    torch.manual_seed(args.seed)
    model = build_model(args.model)
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-7)
    loss_fn = nn.CrossEntropyLoss()
    it = batches(len(x), args.batch, world, rank, args.seed)

    def step():
        idx = next(it)
        xb, yb = x[idx], y[idx]
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        return loss

    def barrier():
        if world > 1:
            dist.barrier()

    if args.train_epochs:
        steps = args.train_epochs * (len(x) // (args.batch * world))
        barrier()
        t0 = time.perf_counter()
        for _ in range(steps):
            loss = step()
        barrier()
        elapsed = time.perf_counter() - t0
        if rank == 0:
            xt, yt = load_split("t10k")
            model.eval()
            with torch.no_grad():
                acc = (model(xt).argmax(1) == yt).float().mean().item()
            print(f"pytorch {torch.__version__} {args.model} batch={args.batch} "
                  f"processes={world} threads={args.threads}: {args.train_epochs} epoch(s), "
                  f"{steps} steps in {elapsed:.1f} s, last loss {loss.item():.4f}, "
                  f"test accuracy {acc:.4f}")
    else:
        for _ in range(args.warmup):
            step()
        barrier()
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        barrier()
        elapsed = time.perf_counter() - t0
        if rank == 0:
            r = {"peer": "pytorch", "version": torch.__version__, "model": args.model,
                 "batch": args.batch, "processes": world, "threads": args.threads,
                 "samples_per_sec": round(world * args.batch * args.steps / elapsed, 1),
                 "step_ms": round(1000 * elapsed / args.steps, 4)}
            if args.json:
                print(json.dumps(r))
            else:
                print(f"pytorch {r['version']} {r['model']} batch={r['batch']} "
                      f"processes={world} threads={r['threads']}: "
                      f"{r['samples_per_sec']:.1f} samples/s, {r['step_ms']:.3f} ms/step")
    sys.stdout.flush()
    if world > 1:
        dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=["mlp", "cnn", "cnn2"], default="mlp")
    p.add_argument("--batch", type=int, default=32, help="per-process batch size")
    p.add_argument("--steps", type=int, default=300, help="timed steps")
    p.add_argument("--warmup", type=int, default=20, help="untimed steps first")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads per process")
    p.add_argument("--ddp", type=int, default=1, metavar="N", help="N DDP processes (gloo)")
    p.add_argument("--train-epochs", type=int, default=0, metavar="E",
                   help="train E full epochs and report test accuracy instead of timing")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print one JSON line")
    args = p.parse_args()
    if args.ddp > 1:
        mp.spawn(worker, args=(args, free_port()), nprocs=args.ddp)
    else:
        worker(0, args, 0)


if __name__ == "__main__":
    main()
