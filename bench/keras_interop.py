#!/usr/bin/env python3
"""Interoperability of mirrored's model files with real Keras, both ways.

Run by hand (never by CI) with a Python that has Keras 3 and TensorFlow:

    ~/venv-tf/bin/python bench/keras_interop.py [--configs fashion_cnn fashion_cnn_bn]
        [--epochs 1] [--build build] [--out bench/out/interop] [--devices auto]

A config is a name in models/configs/ or a path to a .cfg
(bench/fashion_residual.cfg: a small residual network, a Keras Functional).

For each config:
  1. mirrored -> Keras: mirrored_train CFG --epochs N --save NAME.h5, then
     mirrored_export NAME.h5 NAME.keras; keras.models.load_model reads both
     files and evaluates them on the Fashion-MNIST test set; the accuracy
     must agree with the "Test loss: ... - test accuracy: X" line
     mirrored_train printed within 0.001, and the .keras model's
     optimizer.iterations must be mirrored's update count (the optimizer
     state came along).
  2. Keras -> mirrored: the same architecture built in Keras (a Sequential,
     or for a graph, input = and [add], a Functional, with Keras's default
     layer names where the .cfg gives no name =), trained
     N epochs in Keras, model.save("NAME.keras_made.h5"), evaluated in
     Keras; then mirrored_eval NAME.keras_made.h5 --cfg CFG evaluates the
     same file, again within 0.001 (skipped with a message when
     build/launch/mirrored_eval is missing), and so are Keras 3's own
     formats of the same model: model.save("NAME.keras_made.keras") and
     model.save_weights("NAME.keras_made.weights.h5"); and mirrored_train CFG
     --init-weights NAME.keras_made.h5 trains one more epoch from Keras's
     weights (its test accuracy is printed).
A config whose model starts with [rescaling] (fashion_mlp_prep: [data]
scale = 1, [rescaling] 1/255 and an adapted [normalization]) is fed RAW
pixels (0 .. 255) on both sides: the preprocessing is in the model, and
Keras adapts its Normalization to the rescaled training images before its
fit; in step 1 the probabilities of Keras's predict on the raw test images
are also compared with mirrored_eval --predict's (largest difference
printed, at most 1e-4); so are a graph's (a Functional's), and in step 2
Keras's predict of its own model against mirrored_eval --cfg --predict of
the Keras-made .h5.
Prints a Markdown table of all figures; exits 1 if a pair disagrees.

--record checks the same on small inputs and writes golden files under
tests/golden/keras/interop/ for tests/test_keras_golden.c (no TensorFlow;
bench/keras_golden.py records every check). Each config
(bench/fashion_residual.cfg: a graph with batch normalization;
fashion_mlp_prep: Rescaling and an adapted Normalization) is shrunk
to 14x14 images (the first 64 test images, 2x2 means) and at most 16
filters or units, as NAME.cfg. Keras -> mirrored: Keras trains it one
epoch on those images and saves NAME.keras_made.h5 (the residual graph
also .keras and .weights.h5); its loss, accuracy and predictions are the
golden figures for mirrored_eval --cfg of each file, and mirrored_train
--init-weights must train from it. mirrored -> Keras: what Keras loads
from the archive mirrored_export writes after one epoch of mirrored_train
(each layer's class, settings and inbound nodes, the optimizer's class)
are the golden config.json values; that Keras evaluates our files as we
do is checked only here, live.

    ~/venv-tf/bin/python bench/keras_interop.py --record [--build build]
"""
import argparse
import gzip
import os
import re
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from keras_golden import (Golden, archive_config, archive_layer_compares,  # noqa: E402
                          layer_pointer, pointer_get, run_ours)
DATA = "/usr/share/datasets/fashion-mnist"
TOLERANCE = 0.001
RESULT = re.compile(r"Test loss: ([0-9.]+) - test accuracy: ([0-9.]+)")


def read_idx(path):
    import numpy as np

    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def fashion(split, raw=False):
    """(images (N, 28, 28, 1) float32 scaled by 1/255, or raw 0 .. 255,
    labels (N,) int64)."""
    prefix = "train" if split == "train" else "t10k"
    x = read_idx(f"{DATA}/{prefix}-images-idx3-ubyte.gz")
    y = read_idx(f"{DATA}/{prefix}-labels-idx1-ubyte.gz")
    x = x.astype("float32") if raw else x.astype("float32") / 255.0
    return x.reshape(-1, 28, 28, 1), y.astype("int64")


def takes_raw(sections):
    """1: the model's first layer is [rescaling] and [data] scale = 1, so
    both sides take raw pixels."""
    layers = [s for s, _ in sections if s not in ("net", "data", "augment", "input")]
    return bool(layers) and layers[0] == "rescaling"


def parse_cfg(path):
    """The .cfg as a list of (section, {key: value}) in file order (layer
    sections repeat, so configparser will not do)."""
    sections = []
    for line in open(path):
        line = re.split(r"[#;]", line, maxsplit=1)[0].strip()
        if not line:
            continue
        if line.startswith("[") and line.endswith("]"):
            sections.append((line[1:-1].strip(), {}))
        elif "=" in line and sections:
            k, v = line.split("=", 1)
            sections[-1][1][k.strip()] = v.strip()
    return sections


def ints(v, n=2):
    t = tuple(int(s) for s in v.split(","))
    return t * n if len(t) == 1 else t


def check_cfg(sections, path):
    data = dict(next((kv for s, kv in sections if s == "data"), {}))
    if takes_raw(sections):
        if data.get("scale", "1").replace(" ", "") != "1":
            sys.exit(f"{path}: a model that starts with [rescaling] is fed raw pixels here: "
                     "[data] scale must be 1")
    elif data.get("scale", "1").replace(" ", "") != "1/255":
        sys.exit(f"{path}: this script feeds x/255; the .cfg has scale = {data.get('scale')}")
    if data.get("standardize", "0") not in ("0", "false"):
        sys.exit(f"{path}: [data] standardize is not in a Keras model; not supported here")


MERGES = ("add", "concatenate")  # the sections that take a second input (from =)


def is_graph(sections):
    """1: some layer takes another output than the one just before it
    (input =, [add], [concatenate]): a Keras Functional, not a Sequential."""
    return any(s in MERGES or "input" in kv for s, kv in sections if s != "input")


def keras_layer(name, kv):
    """The Keras layer of one .cfg layer section (name = given: its name)."""
    from keras import layers

    named = {"name": kv["name"]} if "name" in kv else {}
    if name == "conv2d":
        return layers.Conv2D(int(kv["filters"]), ints(kv["size"]),
                             strides=ints(kv.get("stride", "1")),
                             padding=kv.get("padding", "valid"),
                             activation=kv.get("activation", "linear"),
                             use_bias=kv.get("use_bias", "1") not in ("0", "false"), **named)
    if name in ("maxpool", "avgpool"):
        stride = ints(kv.get("stride", "0"))
        pool = layers.MaxPooling2D if name == "maxpool" else layers.AveragePooling2D
        return pool(ints(kv.get("size", "2")), strides=None if stride[0] == 0 else stride,
                    padding=kv.get("padding", "valid"), **named)
    if name == "flatten":
        return layers.Flatten(**named)
    if name == "globalavgpool":
        return layers.GlobalAveragePooling2D(**named)
    if name == "add":
        return layers.Add(**named)
    if name == "concatenate":
        return layers.Concatenate(**named)
    if name == "dense":
        return layers.Dense(int(kv["units"]), activation=kv.get("activation", "linear"),
                            use_bias=kv.get("use_bias", "1") not in ("0", "false"), **named)
    if name == "dropout":
        return layers.Dropout(float(kv["rate"]), **named)
    if name == "batchnorm":
        return layers.BatchNormalization(momentum=float(kv.get("momentum", "0.99")),
                                         epsilon=float(kv.get("epsilon", "0.001")), **named)
    if name == "activation":
        return layers.Activation(kv["activation"], **named)
    if name == "rescaling":
        return layers.Rescaling(float(kv.get("scale", "1")), offset=float(kv.get("offset", "0")),
                                **named)
    if name == "normalization":
        if "mean" in kv:
            sys.exit("[normalization] with .cfg statistics: not built here")
        return layers.Normalization(**named)  # adapted by the caller
    sys.exit(f"[{name}]: no Keras layer for this section here")


def keras_model(sections):
    """The .cfg's layers as a Keras Sequential, or a Functional for a graph
    (input =, from =), with Keras's default names where the .cfg gives none
    (call keras.utils.clear_session() first), compiled as [net] says."""
    import keras

    net = dict(next((kv for s, kv in sections if s == "net"), {}))
    layer_sections = [(s, kv) for s, kv in sections if s not in ("net", "data", "augment")]
    shape = tuple(int(v) for v in layer_sections[0][1]["shape"].split(","))
    if not is_graph(sections):
        ls = [keras.Input(shape=shape)] + [keras_layer(s, kv) for s, kv in layer_sections[1:]]
        return keras.Sequential(ls), net
    # a graph: each section's output by position; references by name or -N
    outs = [keras.Input(shape=shape)]
    names = {}

    def ref(i, r):
        return outs[i + int(r)] if r.startswith("-") else outs[names[r]]

    for i, (s, kv) in enumerate(layer_sections[1:], start=1):
        x = ref(i, kv.get("input", "-1"))
        layer = keras_layer(s, kv)
        outs.append(layer([x, ref(i, kv["from"])]) if s in MERGES else layer(x))
        if "name" in kv:
            names[kv["name"]] = i
    return keras.Model(outs[0], outs[-1]), net


def run(cmd):
    print("$", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        sys.exit(f"{cmd[0]} exited {p.returncode}:\n{p.stdout}")
    return p.stdout


def result_line(text, what):
    m = RESULT.findall(text)
    if not m:
        sys.exit(f"{what}: no 'Test loss: ... - test accuracy: ...' line in:\n{text}")
    return float(m[-1][0]), float(m[-1][1])


def compare_predictions(args, model, path, cfg_name, test, cfg=None):
    """Keras's predict of `model` against mirrored_eval --predict of the
    file `path` (a Keras-made one with --cfg cfg) on the same test images;
    returns the largest difference of a probability."""
    import numpy as np

    npy = os.path.join(args.out, f"{cfg_name}.predict.npy")
    run([os.path.join(args.build, "launch", "mirrored_eval"), path, "--predict", npy,
         "--devices", args.devices, "--quiet"] + (["--cfg", cfg] if cfg else []))
    ours = np.load(os.path.join(ROOT, npy))
    theirs = model.predict(test[0], batch_size=256, verbose=0)
    diff = float(np.abs(ours - theirs).max())
    same = float((ours.argmax(1) == theirs.argmax(1)).mean())
    print(f"{cfg_name}: Keras predict vs mirrored_eval --predict on {len(ours)} images: largest "
          f"probability difference {diff:.2e}, same class for {same:.4%}")
    return diff


def mirrored_to_keras(args, cfg, name, test, rows):
    import keras

    h5 = os.path.join(args.out, f"{name}.h5")
    archive = os.path.join(args.out, f"{name}.keras")
    t0 = time.time()
    out = run([os.path.join(args.build, "launch", "mirrored_train"), cfg, "--epochs",
               str(args.epochs), "--devices", args.devices, "--save", h5])
    train_s = time.time() - t0
    loss, acc = result_line(out, "mirrored_train")
    print(f"mirrored_train: Test loss: {loss:.4f} - test accuracy: {acc:.4f}")
    exported = run([os.path.join(args.build, "launch", "mirrored_export"), h5, archive]).strip()
    print(exported)
    updates = int(re.search(r"at update (\d+)", exported).group(1))
    for path, how in ((h5, "mirrored_train --save .h5 -> Keras load_model"),
                      (archive, "mirrored_export .keras -> Keras load_model")):
        keras.utils.clear_session()
        model = keras.models.load_model(path)
        if path == archive:
            # the optimizer state comes along: Adam's step count (and slots)
            its = int(model.optimizer.iterations.numpy())
            print(f"{name}: Keras optimizer.iterations {its} (mirrored: {updates} updates)")
            if its != updates:
                sys.exit(f"{archive}: the optimizer state did not come along")
        k_loss, k_acc = model.evaluate(test[0], test[1], batch_size=256, verbose=0)
        if (args.raw or args.graph) and compare_predictions(args, model, h5, name, test) > 1e-4:
            sys.exit(f"{path}: Keras's predictions differ from mirrored_eval's")
        print(f"{name}: mirrored_train {acc:.4f} / Keras load_model({os.path.basename(path)}) "
              f"{k_acc:.4f} (loss {loss:.4f} / {k_loss:.4f})")
        rows.append((name, how, args.epochs,
                     f"mirrored_train ({train_s:.0f} s)", loss, acc, k_loss, k_acc))


def keras_to_mirrored(args, cfg, name, train, test, rows):
    import keras

    keras.utils.clear_session()
    keras.utils.set_random_seed(1)
    sections = parse_cfg(cfg)
    model, net = keras_model(sections)
    batch = int(net.get("global_batch", net.get("batch", "32")))
    lr = float(net.get("learning_rate", "0.001"))
    if net.get("lr_schedule", "constant") == "cosine":
        steps = args.epochs * (len(train[1]) // batch)
        lr = keras.optimizers.schedules.CosineDecay(lr, steps, alpha=float(net.get("lr_alpha", 0)))
    if net.get("optimizer", "adam") != "adam":
        sys.exit(f"{cfg}: only adam is built here")
    model.compile(optimizer=keras.optimizers.Adam(lr), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    t0 = time.time()
    # adapt() each Normalization to the training images as they reach it
    # (through the layers before it: Rescaling), as mirrored_train does
    for i, layer in enumerate(model.layers):
        if isinstance(layer, keras.layers.Normalization):
            x = train[0]
            for before in model.layers[:i]:
                x = before(x).numpy()
            layer.adapt(x)
    model.fit(train[0], train[1], batch_size=batch, epochs=args.epochs, verbose=0)
    train_s = time.time() - t0
    k_loss, k_acc = model.evaluate(test[0], test[1], batch_size=256, verbose=0)
    made = os.path.join(args.out, f"{name}.keras_made.h5")
    model.save(made)
    print(f"{name}: Keras trained {args.epochs} epoch(s) in {train_s:.0f} s, test accuracy "
          f"{k_acc:.4f}; saved {made} (layers {[layer.name for layer in model.layers]})")
    evaluator = os.path.join(args.build, "launch", "mirrored_eval")
    if not os.path.exists(os.path.join(ROOT, evaluator)):
        print(f"{name}: {evaluator} is not built: skipping Keras -> mirrored_eval")
        rows.append((name, "Keras model.save(.h5) -> mirrored_eval", args.epochs,
                     f"Keras ({train_s:.0f} s)", None, None, k_loss, k_acc))
        return
    out = run([evaluator, made, "--cfg", cfg, "--devices", args.devices, "--quiet"])
    loss, acc = result_line(out, "mirrored_eval")
    print(f"{name}: Keras {k_acc:.4f} / mirrored_eval {acc:.4f} (loss {k_loss:.4f} / {loss:.4f})")
    if (args.raw or args.graph) and compare_predictions(args, model, made, name, test, cfg) > 1e-4:
        sys.exit(f"{made}: mirrored_eval's predictions differ from Keras's")
    rows.append((name, "Keras model.save(.h5) -> mirrored_eval", args.epochs,
                 f"Keras ({train_s:.0f} s)", loss, acc, k_loss, k_acc))
    # Keras 3's own formats: the archive, and the weights file alone
    base = os.path.join(args.out, f"{name}.keras_made")
    model.save(base + ".keras")
    model.save_weights(base + ".weights.h5")
    for path, how in ((base + ".keras", "Keras model.save(.keras) -> mirrored_eval"),
                      (base + ".weights.h5", "Keras model.save_weights(.weights.h5) -> mirrored_eval")):
        out = run([evaluator, path, "--cfg", cfg, "--devices", args.devices, "--quiet"])
        loss, acc = result_line(out, "mirrored_eval")
        print(f"{name}: {os.path.basename(path)}: Keras {k_acc:.4f} / mirrored_eval {acc:.4f}")
        rows.append((name, how, args.epochs, f"Keras ({train_s:.0f} s)", loss, acc, k_loss, k_acc))
    # --init-weights reads the same file through the same reader
    # (mr_keras_read_weights) and goes on training from Keras's weights
    cont = os.path.join(args.out, f"{name}.from_keras.h5")
    out = run([os.path.join(args.build, "launch", "mirrored_train"), cfg, "--init-weights", made,
               "--epochs", "1", "--devices", args.devices, "--save", cont])
    c_loss, c_acc = result_line(out, "mirrored_train --init-weights")
    print(f"{name}: mirrored_train --init-weights {os.path.basename(made)}, one more epoch: "
          f"test accuracy {k_acc:.4f} -> {c_acc:.4f} (loss {k_loss:.4f} -> {c_loss:.4f})")


RECORD_CONFIGS = ["bench/fashion_residual.cfg", "fashion_mlp_prep"]
RECORD_N = 64
# the layer settings whose values Keras reads from our archive
LAYER_KEYS = ["activation", "filters", "units", "kernel_size", "strides", "padding", "use_bias",
              "pool_size", "momentum", "epsilon", "rate", "scale", "offset", "axis"]


def small_cfg(path):
    """The config's text on 14x14 images (x.npy, y.npy), at most 16 filters or units."""
    text = open(os.path.join(ROOT, path)).read()
    text = re.sub(r"^shape = 28,28,1", "shape = 14,14,1", text, flags=re.M)
    text = re.sub(r"^(filters|units) = (\d+)", lambda m: f"{m[1]} = {min(int(m[2]), 16)}",
                  text, flags=re.M)
    for key, f in (("train_images", "x.npy"), ("train_labels", "y.npy"),
                   ("test_images", "x.npy"), ("test_labels", "y.npy")):
        text = re.sub(rf"^{key} = .*$", f"{key} = {f}", text, flags=re.M)
    return text


def small_data(golden):
    """The first RECORD_N test images as 2x2 means (14x14, uint8) and their labels."""
    import numpy as np

    x = read_idx(f"{DATA}/t10k-images-idx3-ubyte.gz")[:RECORD_N].astype(np.float32)
    x = np.round(x.reshape(RECORD_N, 14, 2, 14, 2).mean(axis=(2, 4))).astype(np.uint8)
    y = read_idx(f"{DATA}/t10k-labels-idx1-ubyte.gz")[:RECORD_N]
    np.save(golden.path("x.npy"), x)
    np.save(golden.path("y.npy"), y)
    return x.reshape(RECORD_N, 14, 14, 1).astype(np.float32), y.astype(np.int64)


def keras_made(golden, name, sections, x, y, formats):
    """Keras trains the config one epoch on x and saves it in `formats`; returns the model."""
    import keras

    keras.utils.clear_session()
    keras.utils.set_random_seed(1)
    model, net = keras_model(sections)
    model.compile(optimizer=keras.optimizers.Adam(float(net.get("learning_rate", "0.001"))),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    for i, layer in enumerate(model.layers):
        if isinstance(layer, keras.layers.Normalization):
            xa = x
            for before in model.layers[:i]:
                xa = before(xa).numpy()
            layer.adapt(xa)
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    for ext in formats:
        if ext == ".weights.h5":
            model.save_weights(golden.path(f"{name}.keras_made{ext}"))
        else:
            model.save(golden.path(f"{name}.keras_made{ext}"))
    return model


def keras_to_mirrored_golden(golden, name, model, x, y, formats):
    """Our side reading Keras's files: runs and comparisons with Keras's figures."""
    loss, acc = model.evaluate(x, y, verbose=0)
    pred = golden.array(f"{name}/pred", model.predict(x, verbose=0))
    runs, compare = [], []
    for ext in formats:
        f, out = f"{{golden}}/{name}.keras_made{ext}", f"{{out}}/{name}.keras_made{ext}"
        runs.append(["mirrored_eval", f, "--cfg", f"{{golden}}/{name}.cfg", "--data",
                     "{golden}/x.npy,{golden}/y.npy", "--devices", "cpu", "--quiet", "--json",
                     out + ".json", "--predict", out + ".npy"])
        compare += [
            {"name": f"{ext}: loss Keras evaluates", "json": out + ".json",
             "pointer": "/test_loss", "keras": float(loss), "rel": 1e-4},
            {"name": f"{ext}: accuracy Keras evaluates", "json": out + ".json",
             "pointer": "/test_accuracy", "keras": float(acc), "abs": TOLERANCE},
            {"name": f"{ext}: class probabilities Keras predicts", "array": out + ".npy",
             "keras": pred, "abs": 1e-4}]
    runs.append(["mirrored_train", f"{{golden}}/{name}.cfg", "--init-weights",
                 f"{{golden}}/{name}.keras_made.h5", "--epochs", "1", "--devices", "cpu:1",
                 "--quiet", "--save", f"{{out}}/{name}.from_keras.h5"])
    return runs, compare


def mirrored_to_keras_golden(a, golden, name, tmp):
    """What Keras loads from our archive: runs and comparisons of config.json."""
    import keras

    runs = [["mirrored_train", f"{{golden}}/{name}.cfg", "--epochs", "1", "--devices", "cpu:1",
             "--quiet", "--save", f"{{out}}/{name}.h5"],
            ["mirrored_export", f"{{out}}/{name}.h5", f"{{out}}/{name}.keras"]]
    for r in runs:
        run_ours(a.build, r, golden.dir, tmp, stdout=subprocess.DEVNULL)
    archive, placeholder = os.path.join(tmp, f"{name}.keras"), f"{{out}}/{name}.keras"
    keras.utils.clear_session()
    model = keras.models.load_model(archive)
    doc = archive_config(archive)
    compare = [{"name": "optimizer class Keras loads", "archive": placeholder,
                "pointer": "/compile_config/optimizer/class_name",
                "keras": type(model.optimizer).__name__}]
    for layer in model.layers:
        at = layer_pointer(doc, layer.name)
        compare.append({"name": f"{layer.name}'s class Keras loads", "archive": placeholder,
                        "pointer": at + "/class_name", "keras": type(layer).__name__})
        if "inbound_nodes" in pointer_get(doc, at):
            compare.append({"name": f"{layer.name}'s inbound nodes Keras loads",
                            "archive": placeholder, "pointer": at + "/inbound_nodes",
                            "keras": pointer_get(doc, at + "/inbound_nodes")})
    compare += archive_layer_compares(archive, placeholder, model, LAYER_KEYS)
    for c in compare:  # the classes Keras made are those the archive names
        if c["pointer"].endswith("/class_name"):
            assert pointer_get(doc, c["pointer"]) == c["keras"], c
    return runs, compare, model


def record(a):
    """The check on small inputs, written as golden files; returns the exit status."""
    import tempfile
    import numpy as np

    golden = Golden("interop")
    x, y = small_data(golden)
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for cfg in RECORD_CONFIGS:
            path = cfg if cfg.endswith(".cfg") else os.path.join("models", "configs", cfg + ".cfg")
            name = os.path.basename(path)[:-len(".cfg")]
            with open(golden.path(name + ".cfg"), "w") as f:
                f.write(small_cfg(path))
            sections = parse_cfg(golden.path(name + ".cfg"))
            xs = x if takes_raw(sections) else x / 255.0
            formats = [".h5", ".keras", ".weights.h5"] if is_graph(sections) else [".h5"]
            model = keras_made(golden, name, sections, xs, y, formats)
            runs, compare = keras_to_mirrored_golden(golden, name, model, xs, y, formats)
            for r in runs:
                run_ours(a.build, r, golden.dir, tmp, stdout=subprocess.DEVNULL)
            for c in compare:
                if "array" in c:
                    ours = np.load(c["array"].replace("{out}", tmp))
                    d = float(np.max(np.abs(ours - golden.arrays[c["keras"]][0])))
                    worst = max(worst, d)
                    print(f"{name}: {c['name']}: max |mirrored_eval - Keras| {d:.3g}")
            golden.case(f"{name}_keras_made", runs, compare)
            runs, compare, loaded = mirrored_to_keras_golden(a, golden, name, tmp)
            print(f"{name}: Keras loads our archive: {[type(l).__name__ for l in loaded.layers]}")
            golden.case(f"{name}_exported", runs, compare)
    golden.write()
    print("all agree" if worst <= 1e-4 else "DISAGREE")
    return 0 if worst <= 1e-4 else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--configs", nargs="+", default=["fashion_cnn", "fashion_cnn_bn"])
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default=os.path.join("bench", "out", "interop"))
    ap.add_argument("--devices", default="auto", help="mirrored_train/mirrored_eval --devices")
    ap.add_argument("--skip-reverse", action="store_true", help="only mirrored -> Keras")
    ap.add_argument("--record", action="store_true",
                    help="small inputs, written as golden files (tests/golden/keras/interop/)")
    args = ap.parse_args()
    if args.record:
        return record(args)
    os.makedirs(os.path.join(ROOT, args.out), exist_ok=True)
    import keras
    import tensorflow as tf

    print(f"keras {keras.__version__}, tensorflow {tf.__version__}")
    rows = []
    for name in args.configs:
        cfg = name if name.endswith(".cfg") else os.path.join("models", "configs", f"{name}.cfg")
        name = os.path.basename(cfg)[:-len(".cfg")]
        sections = parse_cfg(os.path.join(ROOT, cfg))
        check_cfg(sections, cfg)
        args.raw = takes_raw(sections)
        args.graph = is_graph(sections)
        train, test = fashion("train", args.raw), fashion("test", args.raw)
        mirrored_to_keras(args, cfg, name, test, rows)
        if not args.skip_reverse:
            keras_to_mirrored(args, cfg, name, train, test, rows)

    def f4(v):
        return "" if v is None else f"{v:.4f}"

    print("\n| config | file, direction | epochs | trained by (time) | mirrored loss "
          "| mirrored accuracy | Keras loss | Keras accuracy | accuracy difference |")
    print("|---|---|---|---|---|---|---|---|---|")
    bad = 0
    for name, how, epochs, secs, loss, acc, k_loss, k_acc in rows:
        diff = None if acc is None else abs(acc - k_acc)
        bad += diff is not None and diff > TOLERANCE
        print(f"| `{name}.cfg` | {how} | {epochs} | {secs} | {f4(loss)} | {f4(acc)} | {f4(k_loss)} "
              f"| {f4(k_acc)} | {'skipped' if diff is None else f'{diff:.4f}'} |")
    print(f"\n{'all pairs agree' if not bad else f'{bad} pair(s) disagree'} within {TOLERANCE} "
          "(mirrored's figures are printed to 4 decimals)")
    return 1 if bad else 0


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
