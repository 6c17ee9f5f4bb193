#!/usr/bin/env python3
"""A residual model's files as Keras's Functional, both ways.

    python3 tests/keras_functional.py BUILD_DIR SOURCE_DIR

Trains a small residual network (conv2d, conv2d_1, c3 and an [add] of c3
and conv2d, batch normalisation, global average pooling, dense) for three
epochs on generated 8x8 images, then:

1. Its checkpoint has Keras's Functional .h5 layout (tests/h5_layout.py):
   model_config's class Functional, the InputLayer first, each layer's
   inbound node taking the right earlier layers, input_layers and
   output_layers, weights at <layer>/<layer>/<weight>. It resumes.
2. Keras-made files of the same model, written here with h5py as Keras
   3.15.1 writes a Functional (checked against its model.save("x.h5") and
   model.save_weights("x.weights.h5") of the same layers): Keras's own
   names (conv2d_2 where the .cfg says name = c3), the InputLayer's group,
   empty weight_names of float64 as Keras leaves them, no checksums.
   mirrored_eval --cfg reads both and predicts exactly what the checkpoint
   predicts; mirrored_train --init-weights starts from them as from the
   checkpoint; one with a kernel of another shape is refused with one line
   naming the dataset.
3. mirrored_export writes the .keras; mirrored_eval --cfg reads it back
   with the same predictions.

Exit 0 when all hold, 1 otherwise; 77 (skip) without numpy or h5py."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import h5py
    import numpy as np
except ImportError:
    print("SKIPPED: python3-numpy or python3-h5py is not installed")
    sys.exit(77)

CFG = """[net]
batch = 16
epochs = 3
seed = 4
optimizer = adam
learning_rate = 0.03
[data]
train_images = x.npy
train_labels = y.npy
test_images = x.npy
test_labels = y.npy
scale = 1/255
[input]
shape = 8,8,1
[conv2d]
filters = 4
size = 3
padding = same
activation = relu
[conv2d]
filters = 4
size = 3
padding = same
use_bias = 0
[batchnorm]
[conv2d]
name = c3
filters = 4
size = 3
padding = same
[add]
from = -4
[globalavgpool]
[dense]
units = 4
activation = softmax
"""

# (mirrored's name, Keras's automatic name, class, weights)
LAYERS = [
    ("conv2d", "conv2d", "Conv2D", ["kernel", "bias"]),
    ("conv2d_1", "conv2d_1", "Conv2D", ["kernel"]),
    ("batch_normalization", "batch_normalization", "BatchNormalization",
     ["gamma", "beta", "moving_mean", "moving_variance"]),
    ("c3", "conv2d_2", "Conv2D", ["kernel", "bias"]),
    ("add", "add", "Add", []),
    ("global_average_pooling2d", "global_average_pooling2d", "GlobalAveragePooling2D", []),
    ("dense", "dense", "Dense", ["kernel", "bias"]),
]


def fail(msg):
    print(f"keras_functional: {msg}")
    sys.exit(1)


def run(cmd, cwd, want=0):
    p = subprocess.run(cmd, cwd=cwd, shell=True, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if p.returncode != want:
        fail(f"`{cmd}` exited {p.returncode}, expected {want}:\n{p.stdout}")
    return p.stdout


def test_line(out):
    lines = [ln for ln in out.splitlines() if ln.startswith("Test loss: ")]
    if not lines:
        fail(f"no Test loss line in:\n{out}")
    return lines[-1]


def empty_names(group):
    # Keras writes an empty weight_names as an empty float64 array
    group.attrs["weight_names"] = np.array([], dtype=np.float64)


def keras_made(ck_path, h5_path, weights_path, bad=False):
    """The checkpoint's weights as Keras 3.15.1 saves a Functional of the
    same layers built without names (model.save(".h5") and
    model.save_weights(".weights.h5"))."""
    ck = h5py.File(ck_path, "r")
    mw = ck["model_weights"]
    config = json.loads(ck.attrs["model_config"])
    for entry in config["config"]["layers"]:  # Keras's own names
        for ours, theirs, _, _ in LAYERS:
            if entry["config"]["name"] == ours:
                entry["config"]["name"] = entry["name"] = theirs
    with h5py.File(h5_path, "w") as f:
        f.attrs["backend"] = "tensorflow"
        f.attrs["keras_version"] = "3.15.1"
        f.attrs["model_config"] = json.dumps(config)
        f.attrs["training_config"] = ck.attrs["training_config"]
        g = f.create_group("model_weights")
        names = ["input_layer"] + [theirs for _, theirs, _, _ in LAYERS]
        for key in ("backend", "keras_version"):
            g.attrs[key] = ck["model_weights"].attrs[key]
        g.attrs["layer_names"] = np.array(names, dtype=h5py.string_dtype())
        empty_names(g.create_group("input_layer"))
        for ours, theirs, _, weights in LAYERS:
            lg = g.create_group(theirs)
            if not weights:
                empty_names(lg)
                continue
            lg.attrs["weight_names"] = np.array([f"{theirs}/{w}" for w in weights],
                                                dtype=h5py.string_dtype())
            for w in weights:
                v = mw[ours][f"{ours}/{w}"][()]
                if bad and ours == "c3" and w == "kernel":
                    v = v[:, :, :, :2]
                lg.create_dataset(f"{theirs}/{w}", data=v)
        empty_names(g.create_group("top_level_model_weights"))
    with h5py.File(weights_path, "w") as f:
        f.create_group("layers/input_layer/vars").attrs["name"] = "input_layer"
        for ours, theirs, _, weights in LAYERS:
            vg = f.create_group(f"layers/{theirs}/vars")
            vg.attrs["name"] = theirs
            for i, w in enumerate(weights):
                vg.create_dataset(str(i), data=mw[ours][f"{ours}/{w}"][()])
        f.create_group("optimizer/vars").attrs["name"] = "adam"
        f.create_group("vars").attrs["name"] = "functional"
    ck.close()


def main():
    build, source = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    train = os.path.join(build, "launch", "mirrored_train")
    evaluate = os.path.join(build, "launch", "mirrored_eval")
    export = os.path.join(build, "launch", "mirrored_export")
    d = tempfile.mkdtemp(prefix="keras_functional.")
    rng = np.random.default_rng(7)
    y = (np.arange(160) % 4).astype(np.uint8)
    x = (rng.random((160, 8, 8)) * 100).astype(np.uint8)
    # class-dependent brightness: learnable
    x[np.arange(64).reshape(8, 8)[None] % 4 == y[:, None, None]] += 120
    np.save(os.path.join(d, "x.npy"), x)
    np.save(os.path.join(d, "y.npy"), y)
    with open(os.path.join(d, "res.cfg"), "w") as f:
        f.write(CFG)

    # 1. the checkpoint's Functional layout, and a resume from it
    run(f"{train} res.cfg --devices cpu --quiet --save res.h5", d)
    specs = ["input_layer:InputLayer", "conv2d:Conv2D:3x3x1x4;4:input_layer",
             "conv2d_1:Conv2D:3x3x4x4:conv2d",
             "batch_normalization:BatchNormalization:4;4;4;4:conv2d_1",
             "c3:Conv2D:3x3x4x4;4:batch_normalization", "add:Add::c3+conv2d",
             "global_average_pooling2d:GlobalAveragePooling2D::add",
             "dense:Dense:4x4;4:global_average_pooling2d"]
    layout = os.path.join(source, "tests", "h5_layout.py")
    print(run(f"{sys.executable} {layout} res.h5 " + " ".join(f"'{s}'" for s in specs), d), end="")
    run(f"{train} res.cfg --devices cpu --quiet --resume res.h5 --epochs 4", d)

    # 2. Keras-made files: the same predictions as the checkpoint
    keras_made(os.path.join(d, "res.h5"), os.path.join(d, "km.h5"),
               os.path.join(d, "km.weights.h5"))
    want = test_line(run(f"{evaluate} res.h5 --devices cpu --predict p.npy", d))
    ref = np.load(os.path.join(d, "p.npy"))
    for made in ("km.h5", "km.weights.h5"):
        got = test_line(run(f"{evaluate} {made} --cfg res.cfg --devices cpu --predict q.npy", d))
        if got != want or not np.array_equal(np.load(os.path.join(d, "q.npy")), ref):
            fail(f"{made}: '{got}' and its predictions, where the checkpoint gives '{want}'")
        print(f"{made}: {got} (the checkpoint's predictions, bitwise)")
    start = test_line(run(f"{train} res.cfg --devices cpu --quiet --init-weights res.h5", d))
    for made in ("km.h5", "km.weights.h5"):
        got = test_line(run(f"{train} res.cfg --devices cpu --quiet --init-weights {made}", d))
        if got != start:
            fail(f"--init-weights {made}: '{got}', from the checkpoint '{start}'")
    print(f"--init-weights km.h5, km.weights.h5: {start}, as from the checkpoint")
    keras_made(os.path.join(d, "res.h5"), os.path.join(d, "bad.h5"),
               os.path.join(d, "bad.weights.h5"), bad=True)
    out = run(f"{evaluate} bad.h5 --cfg res.cfg --devices cpu", d, want=2)
    if out.count("\n") != 1 or "conv2d_2/kernel" not in out or "(3, 3, 4, 2)" not in out:
        fail(f"bad.h5: expected one line naming conv2d_2/kernel and its shape: {out}")
    print(f"bad.h5: refused: {out}", end="")

    # 3. the exported .keras reads back the same
    run(f"{export} res.h5 res.keras", d)
    got = test_line(run(f"{evaluate} res.keras --cfg res.cfg --devices cpu --predict k.npy", d))
    if got != want or not np.array_equal(np.load(os.path.join(d, "k.npy")), ref):
        fail(f"res.keras: '{got}', the checkpoint '{want}'")
    print(f"res.keras: {got}")
    shutil.rmtree(d)


if __name__ == "__main__":
    main()
