#!/usr/bin/env python3
"""ResNet on synthetic data: images/sec of mirrored against Keras, same run.

fashion_resnet20.cfg (CIFAR-style ResNet-20 on 28x28x1, BN, projection
shortcuts, global average pooling; --model resnet20, the default) or
resnet50.cfg (ResNet-50 v1.5 on 224x224x3, 1000 classes; --model resnet50)
trained on random data of its shape at its global batch (--batch; 128 for
ResNet-20, 64 for ResNet-50), as tf_cnn_benchmarks measures: the first
--warmup updates left out, then images/sec over the next ones.
Sides, alternating in every round (--runs rounds, medians):
  - mirrored, 1 replica on core 0 (taskset -c 0, --devices cpu);
  - mirrored, 2 replicas on both cores (--devices cpu:2);
  - Keras 3 (TensorFlow backend), one thread on core 0, then both cores
    with two threads (TensorFlow's own threading, as a Keras user runs it
    on one machine): ResNet-20 built layer by layer as the .cfg builds it;
    for ResNet-50 keras.applications.ResNet50(weights=None), which is v1
    (the stride in the block's first 1x1 convolution, not in its 3x3 as
    v1.5: about 5% fewer multiply-adds than ours, 3.9 against 4.1 G).
    The optimizer is the .cfg's (ResNet-20: SGD, Nesterov momentum 0.9,
    weight decay 0.005; ResNet-50: SGD, momentum 0.9).
  - Keras as compile() leaves it on a CPU-only machine, without XLA; and,
    only when --sides names them, Keras with its train step compiled by XLA
    (jit_compile=True), 5: one thread on core 0, 6: two threads on both.
--sides picks some of them (default 1,2,3,4 in the order above).
Our side prints `total images/sec` itself (--synthetic, --display-every);
Keras's is timed here around train_on_batch calls after the same warm-up.
An interop benchmark, not a test: it needs TensorFlow in a venv.

    ~/venv-tf/bin/python bench/resnet_synthetic.py [--model resnet20|resnet50]
        [--runs 3] [--build build] [--batch B] [--sides 1,2,3,4[,5,6]]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CFG = os.path.join(ROOT, "models", "configs", "fashion_resnet20.cfg")

KERAS_SIDE = r'''
import os, sys, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
threads, batch, warmup, steps = map(int, sys.argv[1:5])
which, jit = sys.argv[5], bool(int(sys.argv[6]))
import tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(threads)
tf.config.threading.set_inter_op_parallelism_threads(threads)
import keras
import numpy as np
L = keras.layers

def conv(x, f, s=1, k=3):
    return L.Conv2D(f, k, strides=s, padding="same" if k == 3 else "valid", use_bias=False)(x)

def block(x, f, s):
    y = L.Activation("relu")(L.BatchNormalization()(conv(x, f, s)))
    y = L.BatchNormalization()(conv(y, f))
    if s != 1:
        x = L.BatchNormalization()(conv(x, f, s, k=1))
    return L.Activation("relu")(L.Add()([y, x]))

if which == "resnet20":
    inp = keras.Input((28, 28, 1))
    x = L.Activation("relu")(L.BatchNormalization()(conv(inp, 16)))
    for f, s in ((16, 1), (32, 2), (64, 2)):
        for b in range(3):
            x = block(x, f, s if b == 0 else 1)
    out = L.Dense(10, activation="softmax")(L.GlobalAveragePooling2D()(x))
    model = keras.Model(inp, out)
    opt = keras.optimizers.SGD(0.1, momentum=0.9, nesterov=True, weight_decay=0.005)
    shape, classes = (28, 28, 1), 10
else:
    model = keras.applications.ResNet50(weights=None, input_shape=(224, 224, 3), classes=1000)
    opt = keras.optimizers.SGD(0.1, momentum=0.9)
    shape, classes = (224, 224, 3), 1000
model.compile(optimizer=opt, jit_compile=jit, loss="sparse_categorical_crossentropy", metrics=["accuracy"])
rng = np.random.default_rng(1)
xb = rng.random((batch,) + shape, dtype=np.float32)
yb = rng.integers(0, classes, batch)
for _ in range(warmup):
    model.train_on_batch(xb, yb)
t = time.perf_counter()
for _ in range(steps):
    model.train_on_batch(xb, yb)
print("total images/sec: %.2f" % (batch * steps / (time.perf_counter() - t)))
'''


CFGS = {"resnet20": CFG, "resnet50": os.path.join(ROOT, "models", "configs", "resnet50.cfg")}


def per_batch(model, batch):
    text = open(CFGS[model]).read()
    return re.sub(r"(?m)^global_batch = \d+", f"global_batch = {batch}", text)


def ours(build, tmp, model, batch, devices, cores, warmup, steps):
    cfg = os.path.join(tmp, "r20.cfg")
    with open(cfg, "w") as f:
        f.write(per_batch(model, batch))
    out = os.path.join(tmp, "r20.json")
    n = batch * (warmup + steps)
    subprocess.run(["taskset", "-c", cores, os.path.join(build, "launch", "mirrored_train"), cfg,
                    "--devices", devices, "--synthetic", str(n), "--epochs", "1",
                    "--warmup-steps", str(warmup), "--quiet", "--json", out],
                   check=True, stdout=subprocess.DEVNULL)
    return json.load(open(out))["images_per_sec"]


def keras_side(model, threads, cores, batch, warmup, steps, jit=False):
    r = subprocess.run(["taskset", "-c", cores, sys.executable, "-c", KERAS_SIDE, str(threads),
                        str(batch), str(warmup), str(steps), model, str(int(jit))],
                       check=True, capture_output=True, text=True)
    return float(re.search(r"total images/sec: ([0-9.]+)", r.stdout).group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--model", choices=sorted(CFGS), default="resnet20")
    ap.add_argument("--batch", type=int, default=0, help="global batch (default 128 for "
                    "resnet20, 64 for resnet50)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--sides", default="1,2,3,4", help="which sides, by number (see above; "
                    "5 and 6: Keras with XLA)")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    m = a.model
    batch = a.batch or (128 if m == "resnet20" else 64)
    sides = [("mirrored cpu, core 0", lambda t: ours(build, t, m, batch, "cpu", "0", a.warmup,
                                                     a.steps)),
             ("keras 1 thread, core 0", lambda t: keras_side(m, 1, "0", batch, a.warmup,
                                                             a.steps)),
             ("mirrored cpu:2, 2 cores", lambda t: ours(build, t, m, batch, "cpu:2", "0,1",
                                                        a.warmup, a.steps)),
             ("keras 2 threads, 2 cores", lambda t: keras_side(m, 2, "0,1", batch, a.warmup,
                                                              a.steps)),
             ("keras XLA 1 thread, core 0", lambda t: keras_side(m, 1, "0", batch, a.warmup,
                                                                 a.steps, True)),
             ("keras XLA 2 threads, 2 cores", lambda t: keras_side(m, 2, "0,1", batch, a.warmup,
                                                                   a.steps, True))]
    try:
        pick = sorted({int(k) for k in a.sides.split(",")})
        if not pick or pick[0] < 1 or pick[-1] > len(sides):
            raise ValueError
    except ValueError:
        ap.error(f"--sides {a.sides}: numbers 1 to {len(sides)}, comma-separated")
    sides = [sides[k - 1] for k in pick]
    got = {name: [] for name, _ in sides}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.runs):
            for name, fn in sides:
                got[name].append(fn(tmp))
                print(f"run {r + 1}: {name:30} {got[name][-1]:9.1f} images/sec", flush=True)
    med = {k: statistics.median(v) for k, v in got.items()}
    print(f"\n{m}: medians over {a.runs} runs, global batch {batch}, {a.steps} updates after "
          f"{a.warmup} warm-up:")
    for k, v in med.items():
        print(f"  {k:30} {v:9.1f} images/sec  (runs: {', '.join('%.1f' % x for x in got[k])})")

    def ratio(what, num, den):
        if num in med and den in med:
            print(f"  {what}: {med[num] / med[den]:.2f}x")
    ratio("mirrored 2 replicas / 1 replica", "mirrored cpu:2, 2 cores", "mirrored cpu, core 0")
    ratio("mirrored / keras, 1 core", "mirrored cpu, core 0", "keras 1 thread, core 0")
    ratio("mirrored / keras, 2 cores", "mirrored cpu:2, 2 cores", "keras 2 threads, 2 cores")
    ratio("keras XLA / keras, 1 core", "keras XLA 1 thread, core 0", "keras 1 thread, core 0")
    ratio("keras XLA / keras, 2 cores", "keras XLA 2 threads, 2 cores", "keras 2 threads, 2 cores")
    ratio("mirrored / keras XLA, 2 cores", "mirrored cpu:2, 2 cores", "keras XLA 2 threads, 2 cores")


if __name__ == "__main__":
    main()
