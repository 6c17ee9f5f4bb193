#!/usr/bin/env python3
"""mirrored's [layernorm] against Keras's LayerNormalization.

Run by hand (never by CI) with a Python that has Keras 3 and TensorFlow:

    ~/venv-tf/bin/python bench/keras_layernorm.py [--build build] [--out bench/out/layernorm]

1. The forward, Keras's weights in: Keras builds Input -> LayerNormalization
   -> Flatten for an (H, W, C) input (normalised over the channels of each
   pixel) and for a feature vector, each with center and scale on and off,
   sets random gamma and beta (gamma near 1), and saves it with
   model.save("x.h5"); mirrored_eval --cfg reads that Keras-written file
   (the --init-weights reader) and --predict gives our forward of the same
   random inputs (mean away from 0), compared with Keras's predict.
2. Training, our files out: a small model with [layernorm] on conv
   channels and on dense features (Conv2D 8 relu, LayerNormalization,
   MaxPooling2D, Flatten, Dense 32 relu, LayerNormalization center=0,
   Dense 10 softmax) trained one epoch on the Fashion-MNIST test set
   (10000 images, quick), saved, exported with mirrored_export; Keras's
   load_model of the .h5 and of the .keras evaluates it on the same images
   to mirrored_eval's loss and accuracy, and its predictions are compared
   with mirrored_eval --predict's.
Exits 1 unless the forwards agree within 1e-5, the losses and accuracies
within 1e-4, and the predictions within 1e-5.

--record writes golden files under tests/golden/keras/layernorm/ for
tests/test_keras_golden.c (no TensorFlow; bench/keras_golden.py records
every check): the forward cases of 1. on 16 rows each (the feature vector
with center and scale only); for 2., Keras
builds the same model on 12x12 images with random weights (gamma near 1,
beta random) and saves it, and its predictions, loss and accuracy on 64
random images are the golden ones for mirrored_eval --cfg of that file;
the LayerNormalization settings Keras reads from the archive
mirrored_export writes (after mirrored_train --init-weights, one epoch)
are the golden config.json values.

    ~/venv-tf/bin/python bench/keras_layernorm.py --record [--build build]
"""
import argparse
import gzip
import json
import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from keras_golden import Golden, archive_layer_compares, run_ours  # noqa: E402
DATA = "/usr/share/datasets/fashion-mnist"
FORWARD_CFG = """[net]
loss = mse
[data]
train_images = {x}
train_labels = {y}
[input]
shape = {shape}
[LayerNormalization]
epsilon = {eps}
center = {center}
scale = {scale}
[flatten]
"""
TRAIN_CFG = """[net]
batch = 32
epochs = 1
seed = 5
[data]
train_images = {d}/t10k-images-idx3-ubyte.gz
train_labels = {d}/t10k-labels-idx1-ubyte.gz
test_images = {d}/t10k-images-idx3-ubyte.gz
test_labels = {d}/t10k-labels-idx1-ubyte.gz
scale = 1/255
[input]
shape = 28,28,1
[conv2d]
filters = 8
size = 3
activation = relu
[layernorm]
[maxpool]
[flatten]
[dense]
units = 32
activation = relu
[layernorm]
center = 0
[dense]
units = 10
activation = softmax
"""


def run(*args):
    subprocess.run([str(a) for a in args], check=True)


def forward_cases(a, np, keras, rows=64, golden=None):
    """Keras's LayerNormalization forward against ours on Keras's weights;
    returns the largest |difference| over the cases. With golden: the cases'
    inputs written there, Keras's outputs recorded."""
    rng = np.random.default_rng(3)
    worst = 0.0
    work = golden.dir if golden else a.out
    print("| input | center | scale | epsilon | max abs difference | max abs output |")
    print("|---|---|---|---|---|---|")
    for shape in ((4, 5, 6), (37,)):
        for center, scale, eps in ((1, 1, 1e-3), (0, 1, 1e-3), (1, 0, 1e-5), (0, 0, 1e-3)):
            if golden and shape == (37,) and (center, scale) != (1, 1):
                continue  # the golden files keep one feature-vector case (each .h5 is 25 KiB)
            name = "fwd_%s_%d%d" % ("x".join(map(str, shape)), center, scale)
            layer = keras.layers.LayerNormalization(epsilon=eps, center=bool(center),
                                                    scale=bool(scale))
            model = keras.Sequential([keras.Input(shape), layer, keras.layers.Flatten()])
            weights = []
            for w in layer.weights:
                v = rng.uniform(-1, 1, w.shape).astype(np.float32)
                weights.append(1 + 0.5 * v if w.name == "gamma" else v)
            layer.set_weights(weights)
            x = (rng.uniform(-1, 3, (rows,) + shape)).astype(np.float32)
            n_out = int(np.prod(shape))
            np.save(os.path.join(work, name + "_x.npy"), x)
            np.save(os.path.join(work, name + "_y.npy"), (np.arange(rows) % n_out).astype(np.int64))
            model.save(os.path.join(work, name + ".h5"))
            with open(os.path.join(work, name + ".cfg"), "w") as f:
                f.write(FORWARD_CFG.format(x=name + "_x.npy", y=name + "_y.npy",
                                           shape=",".join(map(str, shape)), eps=eps,
                                           center=center, scale=scale))
            run = ["mirrored_eval", f"{{golden}}/{name}.h5", "--cfg", f"{{golden}}/{name}.cfg",
                   "--data", f"{{golden}}/{name}_x.npy", "--devices", "cpu", "--quiet",
                   "--predict", f"{{out}}/{name}_pred.npy"]
            run_ours(a.build, run, work, a.out)
            ours = np.load(os.path.join(a.out, name + "_pred.npy"))
            theirs = model.predict(x, batch_size=64, verbose=0)
            diff = float(np.max(np.abs(ours - theirs)))
            worst = max(worst, diff)
            print(f"| {shape} | {center} | {scale} | {eps:g} | {diff:.3g} | "
                  f"{float(np.max(np.abs(theirs))):.3g} |")
            if golden:
                golden.case(name, [run], [{
                    "name": "LayerNormalization's output", "array": f"{{out}}/{name}_pred.npy",
                    "keras": golden.array(name, theirs), "abs": 1e-5}])
    return worst


def record_model(keras, np, size):
    """TRAIN_CFG's model in Keras on size x size images: random weights, gamma near 1."""
    keras.utils.set_random_seed(5)
    L = keras.layers
    model = keras.Sequential([
        keras.Input((size, size, 1)), L.Conv2D(8, 3, activation="relu"), L.LayerNormalization(),
        L.MaxPooling2D(), L.Flatten(), L.Dense(32, activation="relu"),
        L.LayerNormalization(center=False), L.Dense(10, activation="softmax")])
    rng = np.random.default_rng(5)
    for layer in model.layers:
        if isinstance(layer, L.LayerNormalization):
            layer.set_weights([(1 + 0.5 * rng.uniform(-1, 1, w.shape) if w.name == "gamma" else
                                rng.uniform(-1, 1, w.shape)).astype(np.float32)
                               for w in layer.weights])
    model.compile(loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def record_model_case(a, np, keras, golden):
    """2. on a Keras-made model, recorded; returns (largest prediction difference, loss and
    accuracy differences, the LayerNormalization centers Keras loads from our archive)."""
    size, n = 12, 64
    rng = np.random.default_rng(6)
    x = rng.integers(0, 256, (n, size, size), dtype=np.uint8)
    y = rng.integers(0, 10, n).astype(np.uint8)
    np.save(golden.path("x.npy"), x)
    np.save(golden.path("y.npy"), y)
    cfg = TRAIN_CFG.replace("28,28,1", f"{size},{size},1")
    cfg = cfg[:cfg.index("[data]")] + "[data]\ntrain_images = x.npy\ntrain_labels = y.npy\n" \
        "scale = 1/255\n" + cfg[cfg.index("[input]"):]
    with open(golden.path("ln.cfg"), "w") as f:
        f.write(cfg)
    model = record_model(keras, np, size)
    model.save(golden.path("model.h5"))
    xf = x.astype(np.float32).reshape(n, size, size, 1) / 255.0
    theirs = model.predict(xf, verbose=0)
    loss, acc = model.evaluate(xf, y.astype(np.int64), verbose=0)
    runs = [["mirrored_eval", "{golden}/model.h5", "--cfg", "{golden}/ln.cfg", "--data",
             "{golden}/x.npy,{golden}/y.npy", "--devices", "cpu", "--quiet", "--json",
             "{out}/eval.json", "--predict", "{out}/pred.npy"],
            ["mirrored_train", "{golden}/ln.cfg", "--init-weights", "{golden}/model.h5",
             "--devices", "cpu:1", "--quiet", "--save", "{out}/ln.h5"],
            ["mirrored_export", "{out}/ln.h5", "{out}/ln.keras"]]
    compare = [{"name": "class probabilities of Keras's model", "array": "{out}/pred.npy",
                "keras": golden.array("model_pred", theirs), "abs": 1e-5},
               {"name": "loss Keras evaluates", "json": "{out}/eval.json",
                "pointer": "/test_loss", "keras": loss, "abs": 1e-4},
               {"name": "accuracy Keras evaluates", "json": "{out}/eval.json",
                "pointer": "/test_accuracy", "keras": acc, "abs": 1e-4}]
    for r in runs:
        run_ours(a.build, r, golden.dir, a.out, stdout=subprocess.DEVNULL)
    with open(os.path.join(a.out, "eval.json")) as f:
        ev = json.load(f)
    diff = float(np.max(np.abs(np.load(os.path.join(a.out, "pred.npy")) - theirs)))
    loaded = keras.models.load_model(os.path.join(a.out, "ln.keras"))
    centers = [l.get_config()["center"] for l in loaded.layers
               if l.__class__.__name__ == "LayerNormalization"]
    compare += archive_layer_compares(os.path.join(a.out, "ln.keras"), "{out}/ln.keras", loaded,
                                      ["center", "scale", "epsilon", "axis"])
    golden.case("small_model", runs, compare)
    return diff, abs(loss - ev["test_loss"]), abs(acc - ev["test_accuracy"]), centers


def record(a, np, keras):
    """The check on small inputs, written as golden files; returns the exit status."""
    import tempfile

    golden = Golden("layernorm")
    with tempfile.TemporaryDirectory() as tmp:
        a.out = tmp
        fwd = forward_cases(a, np, keras, rows=16, golden=golden)
        diff, dl, da, centers = record_model_case(a, np, keras, golden)
    golden.write()
    print(f"forward: max |mirrored - keras| {fwd:.3g}; Keras-made model: predictions {diff:.3g}, "
          f"loss {dl:.3g}, accuracy {da:.3g}; LayerNormalization center Keras loads {centers}")
    ok = fwd < 1e-5 and diff < 1e-5 and dl < 1e-4 and da < 1e-4 and centers == [True, False]
    print("agree" if ok else "DISAGREE")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(HERE, "out", "layernorm"))
    ap.add_argument("--record", action="store_true",
                    help="small inputs, written as golden files (tests/golden/keras/layernorm/)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    exe = lambda name: os.path.join(a.build, "launch", name)

    import numpy as np
    import keras

    if a.record:
        return record(a, np, keras)
    fwd = forward_cases(a, np, keras)
    print(f"\nforward: max |mirrored - keras| {fwd:.3g}\n")

    cfg = os.path.join(a.out, "ln.cfg")
    with open(cfg, "w") as f:
        f.write(TRAIN_CFG.format(d=DATA))
    h5, keras_file, pred, js = (os.path.join(a.out, n)
                                for n in ("ln.h5", "ln.keras", "pred.npy", "eval.json"))
    run(exe("mirrored_train"), cfg, "--devices", "cpu", "--quiet", "--save", h5)
    run(exe("mirrored_export"), h5, keras_file)
    run(exe("mirrored_eval"), h5, "--devices", "cpu", "--quiet", "--json", js, "--predict", pred)
    with open(js) as f:
        ev = json.load(f)
    with gzip.open(os.path.join(DATA, "t10k-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28, 1)
    with gzip.open(os.path.join(DATA, "t10k-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8).astype(np.int64)
    x = x.astype(np.float32) / 255.0
    ours = np.load(pred)
    ok = fwd < 1e-5
    print("| file | Keras loss | Keras accuracy | mirrored_eval loss | mirrored_eval accuracy "
          "| max abs prediction difference |")
    print("|---|---|---|---|---|---|")
    for path in (h5, keras_file):
        model = keras.models.load_model(path)
        lns = [l.get_config() for l in model.layers
               if l.__class__.__name__ == "LayerNormalization"]
        assert len(lns) == 2 and lns[1]["center"] is False, lns
        loss, acc = model.evaluate(x, y, batch_size=1000, verbose=0)
        diff = float(np.max(np.abs(model.predict(x, batch_size=1000, verbose=0) - ours)))
        print(f"| {os.path.basename(path)} | {loss:.5f} | {acc:.4f} | {ev['test_loss']:.5f} | "
              f"{ev['test_accuracy']:.4f} | {diff:.3g} |")
        ok = ok and abs(loss - ev["test_loss"]) < 1e-4 and abs(acc - ev["test_accuracy"]) < 1e-4
        ok = ok and diff < 1e-5
    print("agree" if ok else "DISAGREE")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
