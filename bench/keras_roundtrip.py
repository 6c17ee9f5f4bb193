#!/usr/bin/env python3
"""A Keras model file through mirrored_train and back into Keras, checked against Keras's own fit.

    /work/venv-tf/bin/python bench/keras_roundtrip.py [--build build] [--work DIR]

Needs TensorFlow and Keras 3 (a peer virtual environment; never a CI dependency). Steps:
  1. Fashion-MNIST as a .npz as keras.datasets holds it (x_train uint8 (60000, 28, 28, 1),
     y_train uint8 (60000,), x_test, y_test), built with numpy from the IDX files
     (--idx, default /usr/share/datasets/fashion-mnist);
  2. a Sequential CNN with Rescaling (Adam, sparse_categorical_crossentropy, accuracy),
     saved as init.keras: the initial weights both runs start from;
  3. Keras: load_model(init.keras), fit one epoch at batch 32, evaluate on the test arrays,
     --keras-runs times (default 3) with other shuffles (the spread is one epoch's noise);
  4. mirrored: mirrored_train init.keras --data fashion.npz --epochs 1 --batch-size 32
     --devices cpu:2 --save out.keras --json out.json;
  5. Keras: load_model(out.keras), its class and layer names against init.keras's, and its
     evaluation on the test arrays against mirrored's test accuracy.
Passes (exit 0) when mirrored's test accuracy is within 0.01 of Keras's fits' mean, Keras's evaluation
of out.keras is within 1e-4 of mirrored's, and the class and layer names are the same."""
import argparse
import gzip
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402
import keras  # noqa: E402

FIT_TOLERANCE = 0.01  # mirrored's fit against Keras's: different shuffles, same start
EVAL_TOLERANCE = 1e-4  # the same weights evaluated by both: one test image in 10000


def read_idx(path):
    """An IDX file (gzip'd) as a numpy array: magic (0, 0, type 0x08 uint8, rank), sizes."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    if raw[:3] != b"\x00\x00\x08":
        raise SystemExit(f"{path}: not an IDX file of unsigned bytes")
    rank = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(rank)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * rank).reshape(dims)


def fashion_npz(idx, out):
    parts = {"x_train": "train-images-idx3-ubyte.gz", "y_train": "train-labels-idx1-ubyte.gz",
             "x_test": "t10k-images-idx3-ubyte.gz", "y_test": "t10k-labels-idx1-ubyte.gz"}
    arrays = {k: read_idx(os.path.join(idx, f)) for k, f in parts.items()}
    for k in ("x_train", "x_test"):
        arrays[k] = arrays[k][..., None]  # (N, 28, 28, 1): the model's input
    np.savez(out, **arrays)
    return arrays


def initial_model(path):
    keras.utils.set_random_seed(7)
    m = keras.Sequential([
        keras.Input((28, 28, 1)),
        keras.layers.Rescaling(1.0 / 255),
        keras.layers.Conv2D(16, (3, 3), activation="relu"),
        keras.layers.MaxPooling2D((2, 2)),
        keras.layers.Conv2D(32, (3, 3), activation="relu"),
        keras.layers.MaxPooling2D((2, 2)),
        keras.layers.Flatten(),
        keras.layers.Dense(10, activation="softmax"),
    ], name="fashion_cnn")
    m.compile(optimizer=keras.optimizers.Adam(learning_rate=0.001),
              loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    m.save(path)
    return m


def keras_fit(path, d, seed):
    m = keras.models.load_model(path)
    keras.utils.set_random_seed(seed)  # fit's shuffle: the weights are the file's
    t0 = time.time()
    m.fit(d["x_train"], d["y_train"], batch_size=32, epochs=1, verbose=0)
    _, acc = m.evaluate(d["x_test"], d["y_test"], batch_size=256, verbose=0)
    return acc, time.time() - t0


def mirrored_fit(train, init, npz, out, js):
    cmd = [train, init, "--data", npz, "--epochs", "1", "--batch-size", "32", "--devices",
           "cpu:2", "--save", out, "--json", js, "--verbose", "0"]
    print("$", " ".join(cmd), flush=True)
    t0 = time.time()
    subprocess.run(cmd, check=True)
    with open(js) as f:
        return json.load(f)["test_accuracy"], time.time() - t0


def describe(m):
    return type(m).__name__, m.name, [layer.name for layer in m.layers]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build", help="the meson build folder")
    ap.add_argument("--work", default="/tmp/keras_roundtrip", help="where the files go")
    ap.add_argument("--idx", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--keras-runs", type=int, default=3,
                    help="Keras fits from the same file with other shuffles: mirrored's accuracy "
                    "is compared with their mean (one epoch's accuracy moves with the order)")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    w = lambda name: os.path.join(a.work, name)  # noqa: E731
    d = fashion_npz(a.idx, w("fashion.npz"))
    print(f"fashion.npz: x_train {d['x_train'].shape} {d['x_train'].dtype}, "
          f"x_test {d['x_test'].shape}")
    init = initial_model(w("init.keras"))
    fits = []
    for seed in range(1, a.keras_runs + 1):
        acc, secs = keras_fit(w("init.keras"), d, seed)
        fits.append(acc)
        print(f"Keras fit (shuffle seed {seed}), 1 epoch at batch 32: test accuracy {acc:.4f} "
              f"({secs:.0f} s)", flush=True)
    keras_acc = float(np.mean(fits))
    if len(fits) > 1:
        print(f"Keras fits: mean {keras_acc:.4f}, spread {max(fits) - min(fits):.4f}")
    ours, ours_s = mirrored_fit(os.path.join(a.build, "launch", "mirrored_train"),
                                w("init.keras"), w("fashion.npz"), w("out.keras"), w("out.json"))
    print(f"mirrored_train, 1 epoch at batch 32 on cpu:2: test accuracy {ours:.4f} "
          f"({ours_s:.0f} s)")
    back = keras.models.load_model(w("out.keras"))
    _, back_acc = back.evaluate(d["x_test"], d["y_test"], batch_size=256, verbose=0)
    print(f"Keras load_model(out.keras).evaluate: test accuracy {back_acc:.4f}")
    want, have = describe(init), describe(back)
    print(f"init.keras: {want[0]} '{want[1]}' {want[2]}")
    print(f"out.keras:  {have[0]} '{have[1]}' {have[2]}")
    checks = [
        (f"|mirrored - Keras fit (mean)| = {abs(ours - keras_acc):.4f} <= {FIT_TOLERANCE}",
         abs(ours - keras_acc) <= FIT_TOLERANCE),
        (f"|Keras eval of out.keras - mirrored| = {abs(back_acc - ours):.5f} <= {EVAL_TOLERANCE}",
         abs(back_acc - ours) <= EVAL_TOLERANCE),
        ("same class", want[0] == have[0]),
        ("same layer names", want[2] == have[2]),
    ]
    for what, ok in checks:
        print(f"{'PASS' if ok else 'FAIL'} {what}")
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
