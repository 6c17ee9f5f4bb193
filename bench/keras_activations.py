#!/usr/bin/env python3
"""mirrored's elu, leaky_relu, gelu and swish against Keras's own.

Run by hand (never by CI) with a Python that has Keras 3 and TensorFlow:

    ~/venv-tf/bin/python bench/keras_activations.py [--build build] [--out bench/out/activations]

Trains a small model (Conv2D 4 gelu, Conv2D 4 swish with stride 2, Dense 64
elu, Dense 32 leaky_relu, Dense 32 then Activation gelu, Dense 16 then
Activation swish, Dense 16 gelu, Dense 16 silu, Dense 10 softmax) for
one epoch on the Fashion-MNIST test set (10000 images, quick), exports it
with mirrored_export, loads the .keras archive with keras.models.load_model,
and compares Keras's predictions with mirrored_eval --predict's on the same
images. Exits 1 unless the largest |difference| of the class probabilities
is below 1e-4 and the loaded layers carry Keras's own activations (elu;
leaky_relu, whose Keras 3 default negative_slope is 0.2, mirrored's slope;
gelu, Keras's exact one by default; swish, which Keras 3 names silu).

--record checks the same on small inputs and writes golden files under
tests/golden/keras/activations/ for tests/test_keras_golden.c (no
TensorFlow; bench/keras_golden.py records every check): Keras builds the
model on 12x12 images with random weights and biases and saves it
(model.h5); its predictions of 64 random images are the golden ones for
mirrored_eval --cfg --predict of that file; and the activations Keras
reads from the archive mirrored_export writes (after mirrored_train
--init-weights model.h5, one epoch) are the golden config.json values.

    ~/venv-tf/bin/python bench/keras_activations.py --record [--build build]
"""
import argparse
import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from keras_golden import Golden, archive_layer_compares, run_ours  # noqa: E402
DATA = "/usr/share/datasets/fashion-mnist"
CFG = """[net]
batch = 32
epochs = 1
seed = 7
[data]
train_images = {d}/t10k-images-idx3-ubyte.gz
train_labels = {d}/t10k-labels-idx1-ubyte.gz
test_images = {d}/t10k-images-idx3-ubyte.gz
test_labels = {d}/t10k-labels-idx1-ubyte.gz
scale = 1/255
[input]
shape = 28,28,1
[conv2d]
filters = 4
size = 3
activation = gelu
[conv2d]
filters = 4
size = 3
strides = 2
activation = swish
[flatten]
[dense]
units = 64
activation = elu
[dense]
units = 32
activation = leaky_relu
[dense]
units = 32
[activation]
activation = gelu
[dense]
units = 16
[activation]
activation = swish
[dense]
units = 16
activation = gelu
[dense]
units = 16
activation = silu
[dense]
units = 10
activation = softmax
"""


WANT = ["gelu", "silu", "elu", "leaky_relu", "linear", "gelu", "linear", "silu", "gelu",
        "silu", "softmax"]  # each loaded layer's activation, Keras's names (swish is silu)


def record_model(keras, np, size):
    """CFG's model in Keras on size x size images, random weights and biases."""
    keras.utils.set_random_seed(4)
    L = keras.layers
    model = keras.Sequential([
        keras.Input((size, size, 1)), L.Conv2D(4, 3, activation="gelu"),
        L.Conv2D(4, 3, strides=2, activation="silu"), L.Flatten(), L.Dense(64, activation="elu"),
        L.Dense(32, activation="leaky_relu"), L.Dense(32), L.Activation("gelu"), L.Dense(16),
        L.Activation("silu"), L.Dense(16, activation="gelu"), L.Dense(16, activation="silu"),
        L.Dense(10, activation="softmax")])
    rng = np.random.default_rng(4)
    for layer in model.layers:
        if getattr(layer, "bias", None) is not None:
            layer.bias.assign(rng.uniform(-0.5, 0.5, layer.bias.shape).astype(np.float32))
    return model


def record(a):
    """The check on small inputs, written as golden files; returns the exit status."""
    import tempfile
    import numpy as np
    import keras

    golden, size, n = Golden("activations"), 12, 64
    rng = np.random.default_rng(4)
    x = rng.integers(0, 256, (n, size, size), dtype=np.uint8)
    y = rng.integers(0, 10, n).astype(np.uint8)
    np.save(golden.path("x.npy"), x)
    np.save(golden.path("y.npy"), y)
    cfg = CFG.replace("28,28,1", f"{size},{size},1")
    cfg = cfg[:cfg.index("[data]")] + "[data]\ntrain_images = x.npy\ntrain_labels = y.npy\n" \
        "scale = 1/255\n" + cfg[cfg.index("[input]"):]
    with open(golden.path("acts.cfg"), "w") as f:
        f.write(cfg)
    model = record_model(keras, np, size)
    model.save(golden.path("model.h5"))
    theirs = model.predict(x.astype(np.float32).reshape(n, size, size, 1) / 255.0, verbose=0)
    runs = [["mirrored_eval", "{golden}/model.h5", "--cfg", "{golden}/acts.cfg", "--data",
             "{golden}/x.npy", "--devices", "cpu", "--quiet", "--predict", "{out}/pred.npy"],
            ["mirrored_train", "{golden}/acts.cfg", "--init-weights", "{golden}/model.h5",
             "--devices", "cpu:1", "--quiet", "--save", "{out}/acts.h5"],
            ["mirrored_export", "{out}/acts.h5", "{out}/acts.keras"]]
    compare = [{"name": "class probabilities of Keras's model", "array": "{out}/pred.npy",
                "keras": golden.array("pred", theirs), "abs": 1e-4}]
    with tempfile.TemporaryDirectory() as tmp:
        for r in runs:
            run_ours(a.build, r, golden.dir, tmp, stdout=subprocess.DEVNULL)
        diff = float(np.max(np.abs(np.load(os.path.join(tmp, "pred.npy")) - theirs)))
        loaded = keras.models.load_model(os.path.join(tmp, "acts.keras"))
        names = [{"swish": "silu"}.get(act, act) for act in
                 (l.get_config().get("activation") for l in loaded.layers) if act]
        compare += archive_layer_compares(os.path.join(tmp, "acts.keras"), "{out}/acts.keras",
                                          loaded, ["activation"])
    print(f"max |mirrored_eval --predict - keras predict| over {n} images: {diff:.3g}")
    print(f"activations Keras loads from our archive: {names}")
    golden.case("small_acts", runs, compare)
    golden.write()
    ok = diff < 1e-4 and names == WANT
    print("agree" if ok else "DISAGREE")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(HERE, "out", "activations"))
    ap.add_argument("--record", action="store_true",
                    help="small inputs, written as golden files (tests/golden/keras/activations/)")
    a = ap.parse_args()
    if a.record:
        return record(a)
    os.makedirs(a.out, exist_ok=True)
    cfg = os.path.join(a.out, "acts.cfg")
    with open(cfg, "w") as f:
        f.write(CFG.format(d=DATA))
    exe = lambda name: os.path.join(a.build, "launch", name)
    h5, keras_file, pred = (os.path.join(a.out, n) for n in ("acts.h5", "acts.keras", "pred.npy"))
    subprocess.run([exe("mirrored_train"), cfg, "--devices", "cpu", "--quiet", "--save", h5],
                   check=True)
    subprocess.run([exe("mirrored_export"), h5, keras_file], check=True)
    subprocess.run([exe("mirrored_eval"), h5, "--devices", "cpu", "--quiet", "--predict", pred],
                   check=True)

    import gzip
    import numpy as np
    import keras

    with gzip.open(os.path.join(DATA, "t10k-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28, 1)
    x = x.astype(np.float32) / 255.0
    model = keras.models.load_model(keras_file)
    acts = [(l.name, l.get_config().get("activation")) for l in model.layers]
    ours = np.load(pred)
    theirs = model.predict(x, batch_size=1000, verbose=0)
    diff = float(np.max(np.abs(ours - theirs)))
    leaky = keras.activations.get("leaky_relu")
    slope = float(leaky(np.array([-1.0], np.float32))[0]) * -1.0
    print("| layer | activation in the .keras archive |\n|---|---|")
    for name, act in acts:
        print(f"| {name} | {act} |")
    print(f"\nKeras leaky_relu slope below 0: {slope:g}")
    print(f"max |mirrored_eval --predict - keras predict| over {len(x)} images: {diff:.3g}")
    names = [{"swish": "silu"}.get(act, act) for _, act in acts if act]
    ok = diff < 1e-4 and names == WANT
    ok = ok and abs(slope - 0.2) < 1e-6
    print("agree" if ok else "DISAGREE")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
