#!/usr/bin/env python3
"""Training throughput of mirrored against PyTorch on the same GPU.

One command for the first GPU a machine lends: our mirrored_train on one GPU
(--devices gpu:0) against the PyTorch twin of the same config
(bench/gpu_peer_torch.py) in three variants: eager (NCHW), channels_last,
and channels_last with the whole training step captured in a CUDA graph
(--compile adds torch.compile). The models:

  fashion_mlp, fashion_cnn, fashion_cnn_bn  at global batches 64 and 256;
  resnet20 (fashion_resnet20.cfg)           at 128;
  resnet50 (resnet50.cfg, 224x224x3)        at 64;

every one on synthetic data (our --synthetic N: the GPU makes each batch
itself; PyTorch: one random batch held on the GPU), full FP32 on both sides
(no TF32: ours asks cuBLAS and cuDNN for FP32 math, PyTorch is told to).
Each side leaves the first updates out (our --warmup-steps, PyTorch's
untimed steps) and times the next ones; in every round the sides alternate
(ours first in odd rounds, PyTorch first in even ones) and the table gives
the medians of --runs rounds: images/s, our figure over each PyTorch
variant's, and the peak memory (PyTorch: torch.cuda.max_memory_allocated;
ours: n/a, mirrored_train reports no peak; the notes give the device memory
its start line says is in use after setup, and each PyTorch twin's
trainable parameters against our summary's "Trainable params").

Without a GPU for our side (`mirrored_train --list-devices` says none) it
says so and exits 0; without torch or without a CUDA GPU for it, the
PyTorch side prints one line saying it found no GPU and its cells are "-".
On emulated GPUs (a -Dgpu_emulation=true build, MIRRORED_EMULATED_GPUS=1)
our side runs end to end: --quick takes every model, the ResNets at tiny
batches, a few updates each, one round (the meson test `gpu_peer`). Exit
status 1 when a run of ours fails or prints no figure.

    /usr/bin/python3 bench/gpu_peer.py [--build build] [--runs 3] [--quick]
        [--models fashion_mlp,resnet50] [--compile] [--python PY] [--table]

--table prints the block for docs/performance.md (report.py --sections
gpu_peer writes it there): the GPU, the commit, the date, the table.
"""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# name: (.cfg under models/configs, PyTorch twin in gpu_peer_torch.py)
MODELS = {
    "fashion_mlp": ("fashion_mlp.cfg", "mlp"),
    "fashion_cnn": ("fashion_cnn.cfg", "cnn"),
    "fashion_cnn_bn": ("fashion_cnn_bn.cfg", "cnn_bn"),
    "resnet20": ("fashion_resnet20.cfg", "resnet20"),
    "resnet50": ("resnet50.cfg", "resnet50"),
}
# (model, global batch, warm-up updates, timed updates)
FULL = [(m, b, 20, 300) for m in ("fashion_mlp", "fashion_cnn", "fashion_cnn_bn")
        for b in (64, 256)] + [("resnet20", 128, 10, 100), ("resnet50", 64, 5, 40)]
# every model through our GPU path in seconds on emulated GPUs: tiny batches
# for the ResNets (ResNet-50's 2 updates take about 10 s on one core there)
QUICK = [("fashion_mlp", 64, 2, 6), ("fashion_mlp", 256, 2, 6), ("fashion_cnn", 64, 2, 6),
         ("fashion_cnn_bn", 64, 2, 6), ("resnet20", 8, 1, 2), ("resnet50", 2, 1, 1)]
VARIANTS = ("eager", "channels_last", "graphs")
GPU_LINE = re.compile(r"^gpu:(\d+): (.*)$")
MEMORY = re.compile(r"device memory in use gpu:\d+ ([0-9.]+) of ([0-9.]+) GiB")
PARAMS = re.compile(r"^Trainable params: ([0-9,]+)$", re.M)


class OursFailed(Exception):
    """A run of ours that failed or printed no figure."""


def our_gpu(build, device):
    """(the GPU's --list-devices line, or None; the reason there is none)."""
    exe = os.path.join(build, "launch", "mirrored_train")
    r = subprocess.run([exe, "--list-devices"], capture_output=True, text=True)
    if r.returncode != 0:
        raise OursFailed(f"{exe} --list-devices exited {r.returncode}: {r.stderr.strip()[-500:]}")
    reason = "no gpu lines in --list-devices output"
    for line in r.stdout.splitlines():
        m = GPU_LINE.match(line)
        if m and int(m.group(1)) == device:
            return m.group(2), None
        if line.startswith("gpu: none ("):
            reason = line[len("gpu: none ("):].rstrip().removesuffix(")")
    return None, reason


def gpu_name(line):
    """'NVIDIA H200' from a --list-devices line 'NVIDIA H200, 139.8 GiB, ...'."""
    return line.split(",")[0].strip()


def run_ours(build, model, batch, warmup, steps, device):
    """images/s of one run, the start line's device memory in GiB and the summary's
    trainable parameters (each None where not printed)."""
    cfg = os.path.join(ROOT, "models", "configs", MODELS[model][0])
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "s.json")
        cmd = [os.path.join(build, "launch", "mirrored_train"), cfg, "--devices", f"gpu:{device}",
               "--synthetic", str(batch * (warmup + steps)), "--epochs", "1",
               "--batch-size", str(batch), "--warmup-steps", str(warmup),
               "--display-every", str(steps), "--verbose", "2", "--json", out]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        if r.returncode != 0:
            raise OursFailed(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stdout[-1500:]}"
                             f"{r.stderr[-1500:]}")
        with open(out) as f:
            j = json.load(f)
    ips = j.get("images_per_sec")
    if not ips or ips <= 0:
        raise OursFailed(f"{model} batch {batch}: no images_per_sec in --json ({ips!r})")
    m, p = MEMORY.search(r.stdout), PARAMS.search(r.stdout)
    return ips, float(m.group(1)) if m else None, int(p.group(1).replace(",", "")) if p else None


def torch_cmd(a, *args):
    return [a.python, os.path.join(HERE, "gpu_peer_torch.py"), "--device", str(a.device), *args]


def probe_torch(a):
    """PyTorch's GPU name, or None and the line that says why it has none."""
    try:
        r = subprocess.run(torch_cmd(a, "--probe"), capture_output=True, text=True, timeout=300)
        j = json.loads(r.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as e:
        return None, f"pytorch side: found no GPU ({a.python}: {e.__class__.__name__}: {e})"
    if j.get("gpu"):
        return j, None
    torch = f"torch {j['torch']}: " if j.get("torch") else ""
    return None, f"pytorch side: found no GPU ({torch}{j.get('reason')})"


def run_torch(a, model, batch, warmup, steps, variants):
    """({variant: {"images_per_sec", "peak_mib"} or {"error"}}, the twin's trainable
    parameters or None) of one run."""
    cmd = torch_cmd(a, "--model", MODELS[model][1], "--batch", str(batch), "--warmup",
                    str(warmup), "--steps", str(steps), "--variants", ",".join(variants))
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    except subprocess.TimeoutExpired:
        return {v: {"error": "timed out after 1800 s"} for v in variants}, None
    try:
        j = json.loads(r.stdout.strip().splitlines()[-1])
        return j["variants"], j.get("params")
    except (ValueError, IndexError, KeyError) as e:
        why = f"exit {r.returncode}, {e.__class__.__name__}: {r.stderr.strip()[-300:]}"
        return {v: {"error": why} for v in variants}, None


def median_or_none(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(x, digits=0):
    return "-" if x is None else f"{x:,.{digits}f}"


def rate(x):
    """images/s: whole numbers, 3 significant digits below 100 (emulated GPUs)."""
    return "-" if x is None else f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def table(rows, variants, got):
    """Markdown lines. got[(model, batch)] = {"ours": [...], "mem": [...], variant: [...],
    variant + " mib": [...]}."""
    head = (["model", "batch", "mirrored images/s"] + [f"PyTorch {v}" for v in variants]
            + [f"ours / {v}" for v in variants]
            + ["peak MiB, ours", "peak MiB, PyTorch " + " / ".join(variants)])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for model, batch, _, _ in rows:
        g = got[(model, batch)]
        ours = median_or_none(g["ours"])
        peer = [median_or_none(g[v]) for v in variants]
        ratios = [fmt(ours / p, 2) + "x" if ours and p else "-" for p in peer]
        mib = " / ".join(fmt(median_or_none(g[v + " mib"])) for v in variants)
        cells = ([model, str(batch), rate(ours)] + [rate(p) for p in peer] + ratios
                 + ["n/a", mib if any(g[v + " mib"] for v in variants) else "-"])
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__.split(
        "\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--runs", type=int, default=0, help="rounds (default 3; --quick 1)")
    ap.add_argument("--quick", action="store_true",
                    help="every model, the ResNets at tiny batches, a few updates, 1 round")
    ap.add_argument("--models", help="comma-separated subset of " + ",".join(MODELS))
    ap.add_argument("--device", type=int, default=0, help="the GPU (both sides)")
    ap.add_argument("--compile", action="store_true", help="PyTorch: also torch.compile")
    ap.add_argument("--python", default="/usr/bin/python3",
                    help="the Python with torch (default %(default)s)")
    ap.add_argument("--table", action="store_true",
                    help="print the block for docs/performance.md")
    a = ap.parse_args(argv)
    a.build = os.path.abspath(a.build)
    a.runs = a.runs or (1 if a.quick else 3)
    rows = QUICK if a.quick else FULL
    if a.models:
        pick = a.models.split(",")
        bad = [m for m in pick if m not in MODELS]
        if bad:
            ap.error(f"--models: unknown {','.join(bad)} (from {','.join(MODELS)})")
        rows = [r for r in rows if r[0] in pick]
    a.rows = rows
    return a


def measure(a, peer, variants):
    """Every row's runs, the sides alternating; {(model, batch): {...}} as table() reads."""
    got = {}
    for model, batch, _, _ in a.rows:
        got[(model, batch)] = {"ours": [], "mem": [], "params": set(), "twin params": set(),
                               **{v: [] for v in variants},
                               **{v + " mib": [] for v in variants}}
    for r in range(a.runs):
        for model, batch, warmup, steps in a.rows:
            g = got[(model, batch)]
            sides = ["ours", "torch"] if peer else ["ours"]
            for side in sides if r % 2 == 0 else sides[::-1]:
                if side == "ours":
                    ips, mem, params = run_ours(a.build, model, batch, warmup, steps, a.device)
                    g["params"].add(params)
                    g["ours"].append(ips)
                    g["mem"].append(mem)
                    print(f"round {r + 1}: {model} batch {batch}: mirrored {ips:.1f} images/s",
                          file=sys.stderr, flush=True)
                    continue
                res, params = run_torch(a, model, batch, warmup, steps, variants)
                g["twin params"].add(params)
                for v in variants:
                    x = res.get(v, {"error": "missing"})
                    g[v].append(x.get("images_per_sec"))
                    g[v + " mib"].append(x.get("peak_mib"))
                    what = (f"{x['images_per_sec']:.1f} images/s" if "images_per_sec" in x
                            else f"error: {x.get('error')}")
                    print(f"round {r + 1}: {model} batch {batch}: pytorch {v} {what}",
                          file=sys.stderr, flush=True)
    return got


def twins(got):
    """'fashion_mlp 109,386 = 109,386, ...': the twins are the same models, or MISMATCH."""
    ours, twin = {}, {}
    for (m, _), g in got.items():
        ours.setdefault(m, set()).update(g["params"])
        twin.setdefault(m, set()).update(g["twin params"])
    parts = []
    for m in ours:
        o, t = sorted(ours[m], key=str), sorted(twin[m], key=str)
        if len(o) == 1 and o == t and o[0] is not None:
            parts.append(f"{m} {fmt(o[0])} = {fmt(t[0])}")
        else:
            parts.append(f"{m} MISMATCH: ours {', '.join(map(fmt, o))}, "
                         f"PyTorch {', '.join(map(fmt, t))}")
    return ", ".join(parts)


def notes(a, got, ours_line, peer, no_peer, variants):
    rows = a.rows
    mems = [(m, b, median_or_none(got[(m, b)]["mem"])) for m, b, _, _ in rows]
    out = [f"- ours: gpu:{a.device}: {ours_line} (`mirrored_train --list-devices`)",
           "- PyTorch: " + (f"torch {peer['torch']} on {peer['gpu']}" if peer
                            else no_peer.removeprefix("pytorch side: ")),
           "- ours / X: our images/s over PyTorch's variant X (above 1: ours is faster)",
           "- updates timed after the warm-up: "
           + ", ".join(f"{m} {b}: {w} + {s}" for m, b, w, s in rows),
           "- peak MiB, ours: n/a, mirrored_train reports no peak device memory; its start "
           "line's device memory in use after setup (the whole device's, CUDA context "
           "included), GiB: " + ", ".join(f"{m} {b}: {fmt(x, 2)}" for m, b, x in mems)]
    if peer:
        out.append("- trainable parameters, ours and the PyTorch twin's: " + twins(got))
    for (m, b), g in got.items():
        runs = [f"mirrored {', '.join(rate(x) for x in g['ours'])}"]
        runs += [f"{v} {', '.join(rate(x) for x in g[v])}" for v in variants if peer]
        out.append(f"- runs, {m} {b}: " + "; ".join(runs))
    return out


def main(argv=None):
    a = parse_args(argv)
    try:
        ours_line, why = our_gpu(a.build, a.device)
    except (OSError, OursFailed) as e:
        print(f"gpu_peer: {e}", file=sys.stderr)
        return 1
    if ours_line is None:
        print(f"gpu_peer: ours: found no GPU: {why}")
        return 0
    variants = list(VARIANTS) + (["compile"] if a.compile else [])
    peer, no_peer = probe_torch(a)
    print(f"ours: gpu:{a.device}: {ours_line}", file=sys.stderr if a.table else sys.stdout)
    print(f"pytorch side: torch {peer['torch']} on cuda:{a.device}: {peer['gpu']}" if peer
          else no_peer, file=sys.stderr if a.table else sys.stdout, flush=True)
    try:
        got = measure(a, peer, variants)
    except (OSError, OursFailed, subprocess.TimeoutExpired) as e:
        print(f"gpu_peer: {e}", file=sys.stderr)
        return 1
    lines = table(a.rows, variants, got)
    if a.table:
        quick = (" --quick" if a.quick else "") + (" --compile" if a.compile else "")
        print(f"_`bench/gpu_peer.py{quick}` on {gpu_name(ours_line)}, commit `{commit()}`, "
              f"{datetime.date.today().isoformat()}: images/s, medians of {a.runs} "
              f"round{'s' if a.runs > 1 else ''}"
              + (" (quick: a few updates, not figures to publish)" if a.quick else "") + "._\n")
    else:
        print()
    print("\n".join(lines))
    print()
    print("\n".join(notes(a, got, ours_line, peer, no_peer, variants)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
