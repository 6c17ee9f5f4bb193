#!/usr/bin/env python3
"""mirrored's [depthwise] against Keras's DepthwiseConv2D.

Run by hand (never by CI) with a Python that has Keras 3 and TensorFlow:
    ~/venv-tf/bin/python bench/keras_depthwise.py [--build build] [--record]

Keras builds Input (7, 6, 3) -> DepthwiseConv2D(3, same, depth_multiplier 2,
relu, depthwise_regularizer L2(0.01)) -> DepthwiseConv2D((3, 2), strides 2,
valid, no bias, tanh) -> Flatten -> Dense(5, softmax) with random weights
and saves it (init.h5). Our side, on Keras's file (the --init-weights
reader):
1. the forward: mirrored_eval --predict of 16 random images against
   Keras's predict (within 1e-5);
2. the gradients: one SGD step (learning rate 0.5, the 16 images as one
   batch) by mirrored_train against Keras's fit of the same step: the
   weights after it, max |ours - keras| / max |keras - init| within 1e-3
   (the step is the learning rate times the gradient, through both
   depthwise layers, the bias and the L2 penalty), and the step's loss;
3. the export: mirrored_export of the trained model to a .keras archive
   that Keras loads, with the DepthwiseConv2D settings it reads.
--record writes the golden files under tests/golden/keras/depthwise/ for
tests/test_keras_golden.c (no TensorFlow).
"""
import argparse
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from keras_golden import Golden, archive_layer_compares, model_weights, run_ours  # noqa: E402

CFG = """[net]
optimizer = sgd
learning_rate = 0.5
batch = 16
epochs = 1
shuffle = 0
loss = sparse_categorical_crossentropy
[data]
train_images = x.npy
train_labels = y.npy
[input]
shape = 7,6,3
[DepthwiseConv2D]
kernel_size = 3
padding = same
depth_multiplier = 2
activation = relu
depthwise_regularizer = L2(0.01)
[DepthwiseConv2D]
kernel_size = (3, 2)
strides = 2
use_bias = False
activation = tanh
[flatten]
[dense]
units = 5
activation = softmax
"""
ROWS = 16
KEYS = ["kernel_size", "strides", "padding", "depth_multiplier", "use_bias", "activation",
        "depthwise_regularizer", "dilation_rate"]


def keras_model(keras, np):
    keras.utils.set_random_seed(7)
    L = keras.layers
    model = keras.Sequential([
        keras.Input((7, 6, 3)),
        L.DepthwiseConv2D(3, padding="same", depth_multiplier=2, activation="relu",
                          depthwise_regularizer=keras.regularizers.L2(0.01)),
        L.DepthwiseConv2D((3, 2), strides=2, use_bias=False, activation="tanh"),
        L.Flatten(), L.Dense(5, activation="softmax")])
    rng = np.random.default_rng(8)
    model.layers[0].set_weights([rng.uniform(-0.5, 0.5, w.shape).astype(np.float32)
                                 for w in model.layers[0].weights])  # a bias away from 0
    model.compile(optimizer=keras.optimizers.SGD(0.5), loss="sparse_categorical_crossentropy")
    return model


def check(a, np, keras, golden, work):
    """The check, its inputs written to work (the golden folder with --record)."""
    rng = np.random.default_rng(9)
    x = rng.uniform(-1, 1, (ROWS, 7, 6, 3)).astype(np.float32)
    y = rng.integers(0, 5, ROWS).astype(np.int64)
    np.save(os.path.join(work, "x.npy"), x)
    np.save(os.path.join(work, "y.npy"), y)
    with open(os.path.join(work, "dw.cfg"), "w") as f:
        f.write(CFG)
    model = keras_model(keras, np)
    model.save(os.path.join(work, "init.h5"))
    pred = model.predict(x, batch_size=ROWS, verbose=0)
    init = [w.copy() for w in model.get_weights()]
    hist = model.fit(x, y, batch_size=ROWS, epochs=1, shuffle=False, verbose=0)
    loss = float(hist.history["loss"][0])
    after = model.get_weights()
    runs = [["mirrored_eval", "{golden}/init.h5", "--cfg", "{golden}/dw.cfg", "--data",
             "{golden}/x.npy", "--devices", "cpu", "--quiet", "--predict", "{out}/pred.npy"],
            ["mirrored_train", "{golden}/dw.cfg", "--init-weights", "{golden}/init.h5",
             "--devices", "cpu:1", "--quiet", "--save", "{out}/dw.h5", "--metrics",
             "{out}/dw.csv"],
            ["mirrored_export", "{out}/dw.h5", "{out}/dw.keras"]]
    for r in runs:
        run_ours(a.build, r, work, a.out, stdout=subprocess.DEVNULL)
    ours_pred = np.load(os.path.join(a.out, "pred.npy"))
    fwd = float(np.max(np.abs(ours_pred - pred)))
    ours = [w for _, w in model_weights(os.path.join(a.out, "dw.h5"))]
    moved = max(float(np.max(np.abs(k - i))) for k, i in zip(after, init))
    rel = max(float(np.max(np.abs(o - k))) for o, k in zip(ours, after)) / moved
    import csv
    with open(os.path.join(a.out, "dw.csv")) as f:
        our_loss = float(list(csv.DictReader(f))[0]["loss"])
    loaded = keras.models.load_model(os.path.join(a.out, "dw.keras"))
    same = [l.get_config()[k] == m.get_config()[k] for l, m in zip(loaded.layers, model.layers)
            if "depth_multiplier" in m.get_config() for k in KEYS]
    print(f"forward: max |ours - keras| {fwd:.3g}; after one step: weights {rel:.3g} of the "
          f"step, loss {our_loss:.6f} against {loss:.6f}; export settings the same: {all(same)}")
    ok = fwd < 1e-5 and rel < 1e-3 and abs(our_loss - loss) < 1e-4 * loss and all(same)
    if golden:
        golden.case("forward", [runs[0]], [{
            "name": "predictions through two DepthwiseConv2D", "array": "{out}/pred.npy",
            "keras": golden.array("pred", pred), "abs": 1e-5}])
        for i, w in enumerate(after):
            golden.array(f"step/weights/{i}", w)
        golden.case("one_step", runs[1:], [
            {"name": "weights after one SGD step", "weights": "{out}/dw.h5",
             "keras": "step/weights", "init": "{golden}/init.h5", "tol": 1e-3},
            {"name": "the step's loss", "csv": "{out}/dw.csv", "column": "loss", "rows": [0],
             "keras": [loss], "rel": 1e-4}]
            + archive_layer_compares(os.path.join(a.out, "dw.keras"), "{out}/dw.keras", loaded,
                                     KEYS))
        golden.write()
    print("agree" if ok else "DISAGREE")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--record", action="store_true",
                    help="written as golden files (tests/golden/keras/depthwise/)")
    a = ap.parse_args()
    import numpy as np
    import keras
    with tempfile.TemporaryDirectory() as out, tempfile.TemporaryDirectory() as work:
        a.out = out
        golden = Golden("depthwise") if a.record else None
        return check(a, np, keras, golden, golden.dir if golden else work)


if __name__ == "__main__":
    sys.exit(main())
