"""The PyTorch side of bench/gpu_peer.py: one model, one batch, on one GPU.

Trains the PyTorch twin of one of our configs on one fixed random batch held
on the GPU (as tf_cnn_benchmarks's synthetic data: nothing crosses the bus)
in each of these variants, one after the other in this process:

  eager          NCHW, as a PyTorch user writes it;
  channels_last  the model and the batch in torch.channels_last (NHWC, the
                 layout our cuDNN calls use);
  graphs         channels_last, and the whole training step (forward, loss,
                 backward, optimizer) captured once in a CUDA graph and
                 replayed (torch.cuda.graph; Adam with capturable=True);
  compile        (only when asked) channels_last, the model through
                 torch.compile.

Full FP32 arithmetic, as ours (cuBLAS pedantic math, cuDNN FMA math): TF32
is turned off for matmuls and convolutions. Each variant runs --warmup
untimed steps, then --steps timed ones between two torch.cuda.synchronize();
its peak memory is torch.cuda.max_memory_allocated() from the model's
construction on. Prints one JSON line:

    {"torch": "2.5.1", "gpu": "NVIDIA H200", "params": 109386, "variants":
     {"eager": {"images_per_sec": ..., "peak_mib": ...}, ...}}

or, without torch or without a CUDA GPU, {"torch": VERSION or null, "gpu":
null, "reason": "..."} and exit 0. --probe prints that line only.

    /usr/bin/python3 bench/gpu_peer_torch.py --model cnn --batch 64 [--variants eager,graphs]
"""
import argparse
import gc
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

VARIANTS = ("eager", "channels_last", "graphs", "compile")
# input shape (C, H, W), classes, optimizer of each of our configs
SHAPES = {"mlp": ((1, 28, 28), 10), "cnn": ((1, 28, 28), 10), "cnn_bn": ((1, 28, 28), 10),
          "resnet20": ((1, 28, 28), 10), "resnet50": ((3, 224, 224), 1000)}


def probe(device):
    """(torch module or None, the JSON dict to print when there is no GPU, or None)."""
    try:
        import torch
    except ImportError as e:
        return None, {"torch": None, "gpu": None,
                      "reason": f"no torch in {sys.executable}: {e}"}
    if not torch.cuda.is_available():
        why = "torch.cuda.is_available() is False"
        if torch.version.cuda is None:
            why += ": a CPU-only build of torch"
        return torch, {"torch": torch.__version__, "gpu": None, "reason": why}
    if device >= torch.cuda.device_count():
        return torch, {"torch": torch.__version__, "gpu": None,
                       "reason": f"cuda:{device} asked for, {torch.cuda.device_count()} visible"}
    return torch, None


def glorot(nn, m):
    """Keras's defaults, as bench/peer_torch.py: Glorot-uniform kernels, zero biases."""
    for mod in m.modules():
        if isinstance(mod, (nn.Linear, nn.Conv2d)):
            nn.init.xavier_uniform_(mod.weight)
            if mod.bias is not None:
                nn.init.zeros_(mod.bias)
    return m


def bn(nn, c, eps):
    # Keras's BatchNormalization momentum 0.99 is PyTorch's 0.01
    return nn.BatchNorm2d(c, eps=eps, momentum=0.01)


def conv_bn(nn, cin, cout, k, stride, eps, relu=True):
    layers = [nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False), bn(nn, cout, eps)]
    return layers + [nn.ReLU()] if relu else layers


def residual(torch, nn):
    """y = relu(main(x) + shortcut(x)): our [add] of a block's two paths."""
    class Block(nn.Module):
        def __init__(self, main, shortcut):
            super().__init__()
            self.main, self.shortcut = main, shortcut

        def forward(self, x):
            return torch.relu(self.main(x) + self.shortcut(x))
    return Block


def resnet20(torch, nn):
    """fashion_resnet20.cfg: 3 stages of 3 basic blocks (16, 32, 64 filters),
    a strided 1x1 projection where a stage starts with stride 2, BN eps 1e-3."""
    Block = residual(torch, nn)
    layers, cin = conv_bn(nn, 1, 16, 3, 1, 1e-3), 16
    for f, s in ((16, 1), (32, 2), (64, 2)):
        for b in range(3):
            st = s if b == 0 else 1
            main = nn.Sequential(*conv_bn(nn, cin, f, 3, st, 1e-3),
                                 *conv_bn(nn, f, f, 3, 1, 1e-3, relu=False))
            short = (nn.Sequential(*conv_bn(nn, cin, f, 1, st, 1e-3, relu=False)) if st != 1
                     else nn.Identity())
            layers.append(Block(main, short))
            cin = f
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)]
    return nn.Sequential(*layers)


def resnet50(torch, nn):
    """resnet50.cfg: ResNet-50 v1.5 (the stride in the bottleneck's 3x3), BN
    eps 1e-5, a 1x1 projection at each stage's first block."""
    Block = residual(torch, nn)
    layers = [nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False), bn(nn, 64, 1e-5), nn.ReLU(),
              nn.MaxPool2d(3, stride=2, padding=1)]
    cin = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for b in range(blocks):
            st = stride if b == 0 else 1
            main = nn.Sequential(*conv_bn(nn, cin, width, 1, 1, 1e-5),
                                 *conv_bn(nn, width, width, 3, st, 1e-5),
                                 *conv_bn(nn, width, 4 * width, 1, 1, 1e-5, relu=False))
            short = (nn.Sequential(*conv_bn(nn, cin, 4 * width, 1, st, 1e-5, relu=False))
                     if b == 0 else nn.Identity())
            layers.append(Block(main, short))
            cin = 4 * width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000)]
    return nn.Sequential(*layers)


def build(torch, name):
    """The model and its optimizer's constructor, as the .cfg trains it."""
    import torch.nn as nn
    if name in ("mlp", "cnn"):
        from peer_torch import build_model  # the CPU benchmarks' twins of the same configs
        m = build_model(name)
    elif name == "cnn_bn":
        m = glorot(nn, nn.Sequential(*conv_bn(nn, 1, 32, 3, 1, 1e-3), nn.MaxPool2d(2),
                                     *conv_bn(nn, 32, 64, 3, 1, 1e-3), nn.MaxPool2d(2),
                                     nn.Flatten(), nn.Linear(7 * 7 * 64, 256), nn.ReLU(),
                                     nn.Dropout(0.3), nn.Linear(256, 10)))
    elif name == "resnet20":
        m = glorot(nn, resnet20(torch, nn))
    else:
        m = glorot(nn, resnet50(torch, nn))
    if name == "resnet20":
        def opt(p, capturable):
            return torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.005)
    elif name == "resnet50":
        def opt(p, capturable):
            return torch.optim.SGD(p, lr=0.1, momentum=0.9)
    else:
        def opt(p, capturable):
            return torch.optim.Adam(p, lr=0.002, betas=(0.9, 0.999), eps=1e-7,
                                    capturable=capturable)
    return m, opt


def run_variant(torch, a, variant):
    """images/s and peak MiB of one variant."""
    dev = torch.device("cuda", a.device)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(dev)
    torch.manual_seed(1)
    model, make_opt = build(torch, a.model)
    model = model.to(dev).train()
    (c, h, w), classes = SHAPES[a.model]
    x = torch.rand(a.batch, c, h, w, device=dev)
    if variant != "eager":
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, classes, (a.batch,), device=dev)
    loss_fn = torch.nn.CrossEntropyLoss()
    opt = make_opt(model.parameters(), variant == "graphs")
    fwd = torch.compile(model) if variant == "compile" else model

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(fwd(x), y)
        loss.backward()
        opt.step()

    if variant == "graphs":
        # warm up on a side stream (the capture's rule), then capture one step
        s = torch.cuda.Stream(dev)
        s.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(s):
            for _ in range(max(a.warmup, 3)):
                step()
        torch.cuda.current_stream(dev).wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            loss_fn(fwd(x), y).backward()
            opt.step()
        graph.replay()  # the first replay uploads the graph: not timed
        run = graph.replay
    else:
        for _ in range(a.warmup):
            step()
        run = step
    torch.cuda.synchronize(dev)
    t0 = time.perf_counter()
    for _ in range(a.steps):
        run()
    torch.cuda.synchronize(dev)
    elapsed = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated(dev) / 2**20
    return {"images_per_sec": round(a.batch * a.steps / elapsed, 1), "peak_mib": round(peak, 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(SHAPES), default="cnn")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--variants", default="eager,channels_last,graphs")
    ap.add_argument("--probe", action="store_true", help="print the GPU (or why none) and exit")
    a = ap.parse_args()
    variants = a.variants.split(",")
    bad = [v for v in variants if v not in VARIANTS]
    if bad:
        ap.error(f"--variants: unknown {','.join(bad)} (from {','.join(VARIANTS)})")
    torch, none = probe(a.device)
    if none is not None:
        print(json.dumps(none))
        return 0
    # full FP32, as our cuBLAS (pedantic math) and cuDNN (FMA math) calls
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    torch.cuda.set_device(a.device)
    out = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(a.device), "variants": {}}
    if not a.probe:
        # what gpu_peer.py holds against our summary's "Trainable params"
        out["params"] = sum(p.numel() for p in build(torch, a.model)[0].parameters())
        for v in variants:
            try:
                out["variants"][v] = run_variant(torch, a, v)
            except Exception as e:  # one variant failing (torch.compile without a compiler)
                out["variants"][v] = {"error": f"{e.__class__.__name__}: {str(e)[:200]}"}
            gc.collect()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
