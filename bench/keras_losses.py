#!/usr/bin/env python3
"""Our class weights and binary_crossentropy against Keras 3's model.fit, epoch by epoch.

Keras builds a small model and saves its initial weights (model.save, .h5);
mirrored_train starts from them (--init-weights) and Keras's model.fit
starts from them too, on the same examples in the same order (no shuffle,
one replica, a batch that divides the data, the last quarter held out by
validation_split as both do), with the same class weights. Each epoch's
training loss (weighted in both), accuracy (weighted in neither),
validation loss and accuracy (weighted in neither) are compared, then the
weights after the last epoch: a loss divided by the sum of the weights
instead of the batch size, or a weighted accuracy or validation loss,
shows as a relative difference of 1e-2 or more; float32 rounding in two
libraries leaves about 1e-5. The binary_crossentropy cases (one sigmoid
output, or a linear one with from_logits, labels 0 and 1) catch a wrong
target smoothing, a clipped probability where Keras takes the logit, or
another accuracy threshold the same way; the multi-label ones (ml_: 3 sigmoid
outputs on multi-hot labels (n, 3)) a sum over the outputs where Keras takes
the mean, or an accuracy over examples where Keras counts every output. The same run with 2 replicas at half the batch
must give the same figures (our contract: R x B == 1 x RB). An interop
check, not a test of the suite: it needs TensorFlow/Keras in a venv. With
--record it also writes Keras's figures and weights and the inputs our side
needs under tests/golden/keras/losses/, which tests/test_keras_golden.c
checks without TensorFlow (bench/keras_golden.py records every check).

    ~/venv-tf/bin/python bench/keras_losses.py [--build build] [--epochs 3] [--record]
"""
import argparse
import os
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from keras_golden import Golden, run_ours  # noqa: E402
from keras_optimizers import ours_weights  # noqa: E402 (the .h5 reader)

N, BATCH = 512, 32
# (name, [net] lines, the Keras loss, class weights (None: none), the last activation, classes)
CASES = [
    ("sparse_ce_sgd", "optimizer = sgd\nlearning_rate = 0.05\n", "sparse_categorical_crossentropy",
     [0.5, 2.0, 0.0, 1.25], "softmax", 4),
    ("sparse_ce_adam", "optimizer = adam\nlearning_rate = 0.003\n",
     "sparse_categorical_crossentropy", [3.0, 1.0, 1.0, 0.25], "softmax", 4),
    ("ce_smoothing_logits", "optimizer = sgd\nlearning_rate = 0.05\nmomentum = 0.9\n"
     "loss = categorical_crossentropy\nfrom_logits = 1\nlabel_smoothing = 0.1\n",
     "categorical_crossentropy_logits_0.1", [1.0, 0.5, 2.0, 1.0], "linear", 4),
    ("mse", "optimizer = sgd\nlearning_rate = 0.1\nloss = mse\n", "mean_squared_error",
     [1.0, 4.0, 0.5, 1.0], "softmax", 4),
    ("bce_sgd", "optimizer = sgd\nlearning_rate = 0.05\nloss = binary_crossentropy\n",
     "binary_crossentropy", None, "sigmoid", 2),
    ("bce_adam_weighted", "optimizer = adam\nlearning_rate = 0.003\nloss = binary_crossentropy\n",
     "binary_crossentropy", [0.5, 2.0], "sigmoid", 2),
    ("bce_smoothing_logits", "optimizer = sgd\nlearning_rate = 0.05\nmomentum = 0.9\n"
     "loss = binary_crossentropy\nfrom_logits = 1\nlabel_smoothing = 0.1\n",
     "binary_crossentropy_logits_0.1", None, "linear", 2),
    # multi-label ("ml_"): 3 sigmoid outputs on multi-hot labels (n, 3) made from the 4 classes
    ("ml_bce_adam", "optimizer = adam\nlearning_rate = 0.003\nloss = binary_crossentropy\n",
     "binary_crossentropy", None, "sigmoid", 4),
    ("ml_bce_smoothing_logits", "optimizer = sgd\nlearning_rate = 0.05\nmomentum = 0.9\n"
     "loss = binary_crossentropy\nfrom_logits = 1\nlabel_smoothing = 0.1\n",
     "binary_crossentropy_logits_0.1", None, "linear", 4),
]


def multi_hot(y):
    """Multi-label targets (n, 3) of class c: (c & 1, c >> 1, c == 3), any number of 1s."""
    return np.stack([y & 1, y >> 1, y == 3], axis=1).astype(np.float32)


def units(loss, classes, name=""):
    """binary_crossentropy: one output for two classes; multi-label: 3 sigmoid outputs."""
    if name.startswith("ml_"):
        return 3
    return 1 if loss.startswith("binary") else classes


def keras_model(last, n_out):
    import keras
    keras.utils.set_random_seed(11)
    return keras.Sequential([
        keras.Input((8, 8, 1)),
        keras.layers.Conv2D(4, 3, activation="relu"),
        keras.layers.Flatten(),
        keras.layers.Dense(16, activation="tanh"),
        keras.layers.Dense(n_out, activation=last),
    ])


def keras_loss(name):
    import keras
    if name.startswith("categorical_crossentropy_logits"):
        return keras.losses.CategoricalCrossentropy(from_logits=True,
                                                    label_smoothing=float(name.split("_")[-1]))
    if name.startswith("binary_crossentropy_logits"):
        return keras.losses.BinaryCrossentropy(from_logits=True,
                                               label_smoothing=float(name.split("_")[-1]))
    return name


def metrics(last):
    """Keras's "accuracy" with binary_crossentropy is BinaryAccuracy(threshold=0.5) on the
    model's output whatever from_logits says, so on a linear last layer it thresholds the logits
    at 0.5; ours is z > 0 (p > 0.5) there, which is BinaryAccuracy(threshold=0) on logits. With
    the categorical losses, "accuracy" is the argmax's, logits or not."""
    import keras
    if last == "linear":
        return [keras.metrics.BinaryAccuracy(name="accuracy", threshold=0.0)]
    if last == "sigmoid":  # one output or several (multi-label: over all n x k outputs)
        return [keras.metrics.BinaryAccuracy(name="accuracy", threshold=0.5)]
    return ["accuracy"]


def cfg_text(net, epochs, weights, last, batch, n_out, x="x.npy", y="y.npy"):
    cw = f"class_weight = {', '.join(f'{w:g}' for w in weights)}\n" if weights else ""
    return (f"[net]\nglobal_batch = {batch}\nepochs = {epochs}\nshuffle = 0\n"
            f"validation_split = 0.25\n{cw}{net}"
            f"[data]\ntrain_images = {x}\ntrain_labels = {y}\nscale = 1/255\n"
            "[input]\nshape = 8,8,1\n[conv2d]\nfilters = 4\nsize = 3\nactivation = relu\n"
            "[flatten]\n[dense]\nunits = 16\nactivation = tanh\n"
            f"[dense]\nunits = {n_out}\nactivation = {last}\n")


def read_csv(path):
    lines = open(path).read().strip().splitlines()
    head = lines[0].split(",")
    return [dict(zip(head, map(float, ln.split(",")))) for ln in lines[1:]]


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-12)


def write_data(work, name, classes):
    """The case's data in work (the same for every case of a class count): (file names of the
    images and labels, images (N, 8, 8, 1) float32 as Keras gets them, labels (N,))."""
    rng = np.random.default_rng(5)
    y = (np.arange(N) % classes).astype(np.uint8)
    x = (rng.random((N, 8, 8)) * 140 + (np.arange(64).reshape(8, 8) % classes
                                     == y[:, None, None]) * 80).astype(np.uint8)
    xs, ys = f"x{classes}.npy", "y_multi_hot.npy" if name.startswith("ml_") else f"y{classes}.npy"
    np.save(os.path.join(work, xs), x)
    np.save(os.path.join(work, ys), multi_hot(y) if name.startswith("ml_") else y)
    return xs, ys, (x.astype(np.float32) * np.float32(1 / 255)).reshape(N, 8, 8, 1), y


def keras_init(work, last, n_out, inits):
    """Keras's initial weights of the case's model, saved once per set of equal weights
    (seeded: the same for every last activation); returns the file's name."""
    model = keras_model(last, n_out)
    mine = model.get_weights()
    for f, w in inits.items():
        if len(w) == len(mine) and all(a.shape == b.shape and np.array_equal(a, b)
                                       for a, b in zip(w, mine)):
            return f
    f = f"init{len(inits)}.h5"
    model.save(os.path.join(work, f))
    inits[f] = mine
    return f


def ours_runs(name, init):
    """Our side of a case: one replica, and two at half the batch each."""
    return [["mirrored_train", f"{{golden}}/{name}.cfg", "--devices", devices, "--quiet",
             "--init-weights", f"{{golden}}/{init}", "--save", f"{{out}}/{name}_{tag}.h5",
             "--metrics", f"{{out}}/{name}_{tag}.csv"]
            for devices, tag in (("cpu:1", "one"), ("cpu:2", "two"))]


def golden_compare(golden, name, init, hist, kw):
    """The comparisons of a case with the script's tolerances; kw: Keras's weights after."""
    one, two = f"{{out}}/{name}_one", f"{{out}}/{name}_two"
    out = [{"name": f"epoch {m}", "csv": one + ".csv", "column": m, "keras": hist[m],
            **({"rel": 1e-3} if "loss" in m else {"abs": 1.5 / N})}
           for m in ("loss", "accuracy", "val_loss", "val_accuracy")]
    out.append({"name": "2 replicas' epoch loss", "csv": two + ".csv", "column": "loss",
                "ours_ref": one + ".csv", "rel": 1e-4})
    for i, w in enumerate(kw):
        golden.array(f"{name}/weights/{i}", w)
    out.append({"name": "weights after training", "weights": one + ".h5",
                "keras": f"{name}/weights", "init": f"{{golden}}/{init}", "tol": 1e-3})
    out.append({"name": "2 replicas' weights", "weights": two + ".h5", "ours_ref": one + ".h5",
                "init": f"{{golden}}/{init}", "tol": 1e-4})
    return out


def keras_fit(name, net, loss, weights, last, classes, n_out, init, xf, y, epochs):
    """Keras's model.fit of the case from init: (history, weights before, weights after)."""
    import keras
    model = keras_model(last, n_out)
    model.set_weights(keras.models.load_model(init, compile=False).get_weights())
    w0 = [w.copy() for w in model.get_weights()]
    model.compile(optimizer=(keras.optimizers.SGD(0.1) if name == "mse" else
                             keras.optimizers.Adam(0.003) if "adam" in name else
                             keras.optimizers.SGD(0.05, momentum=0.9 if "momentum" in net
                                                  else 0.0)),
                  loss=keras_loss(loss), metrics=metrics(last) if
                  n_out == 1 or name.startswith("ml_") else ["accuracy"])
    if name.startswith("ml_"):
        labels = multi_hot(y)  # (n, 3)
    elif loss == "sparse_categorical_crossentropy":
        labels = y.astype(np.int64)
    elif n_out == 1:
        labels = y.astype(np.float32).reshape(N, 1)  # (n, 1): the sigmoid's shape
    else:
        labels = np.eye(classes, dtype=np.float32)[y]
    hist = model.fit(xf, labels, batch_size=BATCH, epochs=epochs, shuffle=False,
                     validation_split=0.25, verbose=0,
                     class_weight={i: w for i, w in enumerate(weights)} if weights
                     else None).history
    return hist, w0, model.get_weights()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--record", action="store_true",
                    help="also write the golden files (tests/golden/keras/losses/)")
    a = ap.parse_args()
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        golden = Golden("losses") if a.record else None
        work = golden.dir if golden else tmp  # the inputs of our side
        inits = {}
        print(f"{'case':20} {'epoch':>5} {'loss ours':>10} {'keras':>10} {'acc ours':>8}"
              f" {'keras':>8} {'val_loss':>9} {'keras':>9} {'val_acc':>7} {'keras':>7}"
              f"  2 replicas: loss")
        for name, net, loss, weights, last, classes in CASES:
            xs, ys, xf, y = write_data(work, name, classes)
            n_out = units(loss, classes, name)
            init = keras_init(work, last, n_out, inits)
            runs = ours_runs(name, init)
            with open(os.path.join(work, f"{name}.cfg"), "w") as f:
                f.write(cfg_text(net, a.epochs, weights, last, BATCH, n_out, xs, ys))
            results = []
            for run in runs:
                run_ours(a.build, run, work, tmp)
                base = os.path.join(tmp, os.path.basename(run[-1])[:-len(".csv")])
                results.append((read_csv(base + ".csv"), ours_weights(base + ".h5")))
            hist, w0, kw = keras_fit(name, net, loss, weights, last, classes, n_out,
                                     os.path.join(work, init), xf, y, a.epochs)
            (ours, ow), (two, tw) = results
            for e in range(a.epochs):
                o, t = ours[e], two[e]
                k = {m: hist[m][e] for m in ("loss", "accuracy", "val_loss", "val_accuracy")}
                bad = (rel(o["loss"], k["loss"]) > 1e-3 or rel(o["val_loss"], k["val_loss"]) > 1e-3
                       or abs(o["accuracy"] - k["accuracy"]) > 1.5 / N
                       or abs(o["val_accuracy"] - k["val_accuracy"]) > 1.5 / N
                       or rel(t["loss"], o["loss"]) > 1e-4)
                failures += bad
                print(f"{name:20} {e + 1:5} {o['loss']:10.6f} {k['loss']:10.6f}"
                      f" {o['accuracy']:8.4f} {k['accuracy']:8.4f} {o['val_loss']:9.5f}"
                      f" {k['val_loss']:9.5f} {o['val_accuracy']:7.4f} {k['val_accuracy']:7.4f}"
                      f"  {t['loss']:.6f}{'  DIFFERENT' if bad else ''}")
            moved = max(float(np.max(np.abs(k - i))) for k, i in zip(kw, w0))
            diff = max(float(np.max(np.abs(k - o))) for k, o in zip(kw, ow))
            diff2 = max(float(np.max(np.abs(t - o))) for t, o in zip(tw, ow))
            ok = diff / moved < 1e-3 and diff2 / moved < 1e-4
            failures += not ok
            print(f"{name:20} weights: max |ours - keras| / max |keras - init| = {diff / moved:.2e},"
                  f" 2 replicas vs 1: {diff2 / moved:.2e} {'same' if ok else 'DIFFERENT'}")
            if golden:
                golden.case(name, runs, golden_compare(golden, name, init, hist, kw))
        if golden:
            golden.write()
    print("all the same" if failures == 0 else f"{failures} figure(s) differ")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
