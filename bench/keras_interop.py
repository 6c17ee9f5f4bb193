#!/usr/bin/env python3
"""Interoperability of mirrored's model files with real Keras, both ways.

Run by hand (never by CI) with a Python that has Keras 3 and TensorFlow:

    /work/venv-tf/bin/python bench/keras_interop.py [--configs fashion_cnn fashion_cnn_bn]
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--configs", nargs="+", default=["fashion_cnn", "fashion_cnn_bn"])
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default=os.path.join("bench", "out", "interop"))
    ap.add_argument("--devices", default="auto", help="mirrored_train/mirrored_eval --devices")
    ap.add_argument("--skip-reverse", action="store_true", help="only mirrored -> Keras")
    args = ap.parse_args()
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
