#!/usr/bin/env python3
"""Our [net] top_k and per_class figures against Keras's on the same model.

Trains models/configs/fashion_mlp.cfg with mirrored_train for one epoch
(validation_split = 0.1, top_k = K, per_class = 1; --json), exports it
with mirrored_export, loads the .keras file in Keras 3, and computes on the
same validation rows (the last 6000 training images) and test set:
  - keras.metrics.SparseTopKCategoricalAccuracy(k=K) of model.predict, to
    compare with val_ and test_sparse_top_k_categorical_accuracy of the
    JSON, and with mirrored_eval --top-k K' for several K';
  - each class's accuracy (argmax == label over the class's examples), to
    compare with the JSON's test_per_class_accuracy and
    val_per_class_accuracy, and its example counts.
Prints a Markdown table and the largest difference in examples; exits 1 if
one figure is off by more than TOLERANCE_EXAMPLES examples (Keras ranks
softmax probabilities, we rank logits, so a near tie may round apart). An
interop check run by hand, not a test of the suite: it needs
TensorFlow/Keras in a venv.

--record checks the same figures on a small set instead, and writes them
as golden files under tests/golden/keras/metrics/ for
tests/test_keras_golden.c (no TensorFlow; bench/keras_golden.py records
every check): Keras trains a small model (8x8 images, 10 classes) and
saves it; mirrored_eval --cfg evaluates that file with --top-k K for each
K, and mirrored_train --init-weights trains it one epoch at a learning rate
(1e-10) that leaves its weights as they were, with validation_split,
top_k and per_class; Keras's top-k and per-class accuracies of the same
rows (all, and the validation rows) are the golden figures.

    ~/venv-tf/bin/python bench/keras_metrics.py [--build build] [--top-k 5]
        [--devices cpu:2] [--out bench/out/metrics] [--record]
"""
import argparse
import json
import os
import re
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from keras_interop import fashion  # noqa: E402  (the same reader of the IDX files)
from keras_golden import Golden, run_ours  # noqa: E402

TOLERANCE_EXAMPLES = 1
TOP_KS = (1, 2, 3, 5)


def run(cmd):
    print("$", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        sys.exit(f"{cmd[0]} exited {p.returncode}:\n{p.stdout}")
    return p.stdout


RECORD_N, RECORD_CLASSES, RECORD_VAL = 400, 10, 100  # the small set: its last 100 rows validate
RECORD_CFG = """[net]
batch = 20
epochs = 1
shuffle = 0
optimizer = sgd
learning_rate = 1e-10
validation_split = 0.25
top_k = {k}
per_class = 1
[data]
train_images = x.npy
train_labels = y.npy
test_images = x.npy
test_labels = y.npy
scale = 1/255
[input]
shape = 8,8,1
[flatten]
[dense]
units = 32
activation = relu
[dense]
units = 10
activation = softmax
"""


def record_keras(golden):
    """Keras trains the small model and saves it; returns (x as Keras sees it, y, model)."""
    import keras
    import numpy as np

    rng = np.random.default_rng(8)
    y = rng.integers(0, RECORD_CLASSES, RECORD_N).astype(np.uint8)  # classes of unequal sizes
    x = (rng.random((RECORD_N, 8, 8)) * 160 + (np.arange(64).reshape(8, 8) % RECORD_CLASSES
                                               == y[:, None, None]) * 60).astype(np.uint8)
    np.save(golden.path("x.npy"), x)
    np.save(golden.path("y.npy"), y)
    xf = (x.astype(np.float32) * np.float32(1 / 255)).reshape(RECORD_N, 8, 8, 1)
    keras.utils.set_random_seed(3)
    model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(),
                              keras.layers.Dense(32, activation="relu"),
                              keras.layers.Dense(RECORD_CLASSES, activation="softmax")])
    model.compile(optimizer=keras.optimizers.Adam(0.003), loss="sparse_categorical_crossentropy")
    model.fit(xf[:-RECORD_VAL], y[:-RECORD_VAL].astype(np.int64), batch_size=20, epochs=4,
              verbose=0)
    model.save(golden.path("model.h5"))
    return xf, y.astype(np.int64), model


def keras_figures(model, x, y, ks):
    """{k: top-k accuracy}, per-class accuracies and example counts, as Keras computes them."""
    import keras
    import numpy as np

    p = model.predict(x, batch_size=100, verbose=0)
    top = {}
    for k in ks:
        m = keras.metrics.SparseTopKCategoricalAccuracy(k=k)
        m.update_state(y, p)
        top[k] = float(m.result())
    pred = p.argmax(axis=1)
    counts = np.bincount(y, minlength=RECORD_CLASSES)
    return top, [float((pred[y == c] == c).mean()) for c in range(RECORD_CLASSES)], counts


def figure_compares(source, prefix, top, per_class, counts, json_key):
    """The comparisons of one --json file: within one example (rounded, as the live check)."""
    n = int(sum(counts))
    out = [{"name": f"{prefix} top-{k} accuracy", "json": source, "pointer": key,
            "keras": v, "abs": 1.5 / n} for k, (key, v) in top.items()]
    for c in range(len(per_class)):
        out.append({"name": f"{prefix} class {c} accuracy ({counts[c]} examples)",
                    "json": source, "pointer": json_key(c, "accuracy"), "keras": per_class[c],
                    "abs": 1.5 / counts[c]})
        out.append({"name": f"{prefix} class {c} examples", "json": source,
                    "pointer": json_key(c, "examples"), "keras": int(counts[c]), "abs": 0.5})
    return out


def record(args):
    """The check on the small set, written as golden files; returns the exit status."""
    import tempfile

    golden = Golden("metrics")
    with open(golden.path("model.cfg"), "w") as f:
        f.write(RECORD_CFG.format(k=args.top_k))
    x, y, model = record_keras(golden)
    runs, compare = [], []
    top, per_class, counts = keras_figures(model, x, y, TOP_KS)
    for k in TOP_KS:  # the per-class figures once (they do not depend on K)
        js = f"{{out}}/eval_top{k}.json"
        runs.append(["mirrored_eval", "{golden}/model.h5", "--cfg", "{golden}/model.cfg",
                     "--data", "{golden}/x.npy,{golden}/y.npy", "--top-k", str(k), "--devices",
                     "cpu:1", "--quiet", "--json", js])
        compare += figure_compares(js, f"mirrored_eval --top-k {k}",
                                   {k: ("/test_sparse_top_k_categorical_accuracy", top[k])},
                                   per_class if k == TOP_KS[0] else [], counts,
                                   lambda c, w: f"/per_class/{c}/{w}")
    vtop, vpc, vcounts = keras_figures(model, x[-RECORD_VAL:], y[-RECORD_VAL:], (args.top_k,))
    runs.append(["mirrored_train", "{golden}/model.cfg", "--init-weights", "{golden}/model.h5",
                 "--devices", "cpu:1", "--quiet", "--json", "{out}/train.json"])
    compare += figure_compares("{out}/train.json", "mirrored_train validation",
                               {args.top_k: ("/val_sparse_top_k_categorical_accuracy",
                                             vtop[args.top_k])}, vpc, vcounts,
                               lambda c, w: f"/val_per_class_{w}/{c}")
    golden.case("small_mlp", runs, compare)
    with tempfile.TemporaryDirectory() as tmp:
        import json
        worst = []
        for r in runs:
            run_ours(args.build, r, golden.dir, tmp, stdout=subprocess.DEVNULL)
        for c in compare:
            path = c["json"].replace("{out}", tmp)
            got = json.load(open(path))
            for part in c["pointer"].strip("/").split("/"):
                got = got[int(part)] if isinstance(got, list) else got[part]
            off = abs(got - c["keras"])
            print(f"{c['name']:55} ours {got:.6f} Keras {c['keras']:.6f}"
                  f"{'' if off <= c['abs'] else '  DIFFERENT'}")
            worst.append(off > c["abs"])
    golden.write()
    return 1 if any(worst) else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--top-k", type=int, default=5)
    ap.add_argument("--devices", default="cpu:2")
    ap.add_argument("--out", default=os.path.join("bench", "out", "metrics"))
    ap.add_argument("--record", action="store_true",
                    help="the small set's figures as golden files (tests/golden/keras/metrics/)")
    args = ap.parse_args()
    if args.record:
        return record(args)
    out = os.path.join(ROOT, args.out)
    os.makedirs(out, exist_ok=True)
    import keras
    import numpy as np
    import tensorflow as tf

    print(f"keras {keras.__version__}, tensorflow {tf.__version__}")
    text = open(os.path.join(ROOT, "models", "configs", "fashion_mlp.cfg")).read()
    text = re.sub(r"^epochs = .*$", "epochs = 1", text, flags=re.M)
    text = re.sub(r"^validation_split = .*$",
                  f"validation_split = 0.1\ntop_k = {args.top_k}\nper_class = 1", text, flags=re.M)
    cfg = os.path.join(out, "fashion_mlp_metrics.cfg")
    open(cfg, "w").write(text)
    h5, archive, summary = (os.path.join(out, n) for n in ("m.h5", "m.keras", "s.json"))
    train_out = run([os.path.join(args.build, "launch", "mirrored_train"), cfg, "--devices",
                     args.devices, "--save", h5, "--json", summary, "--verbose", "2"])
    print(train_out)
    ours = json.load(open(summary))
    run([os.path.join(args.build, "launch", "mirrored_export"), h5, archive])
    model = keras.models.load_model(archive)
    x, y = fashion("train")
    xt, yt = fashion("test")
    sets = {"val": (x[54000:], y[54000:]), "test": (xt, yt)}
    rows, worst = [], 0
    for name, (xs, ys) in sets.items():
        p = model.predict(xs, batch_size=1000, verbose=0)
        n = len(ys)
        for k in TOP_KS:
            m = keras.metrics.SparseTopKCategoricalAccuracy(k=k)
            m.update_state(ys, p)
            theirs = float(m.result())
            if k == args.top_k:
                mine, by = ours[f"{name}_sparse_top_k_categorical_accuracy"], "mirrored_train --json"
            elif name == "test":
                ev = run([os.path.join(args.build, "launch", "mirrored_eval"), h5, "--top-k",
                          str(k), "--devices", args.devices, "--quiet"])
                mine = float(re.search(r"test_sparse_top_k_categorical_accuracy: ([0-9.]+)",
                                       ev).group(1))
                by = "mirrored_eval --top-k (4 decimals)"
            else:
                continue
            off = round(abs(mine - theirs) * n)
            worst = max(worst, off)
            rows.append((name, f"sparse_top_k_categorical_accuracy, k = {k}", by, mine, theirs, off))
        pred = p.argmax(axis=1)
        counts = np.bincount(ys, minlength=10)
        keras_pc = [float((pred[ys == c] == c).mean()) for c in range(10)]
        mine_pc = ours[f"{name}_per_class_accuracy"]
        mine_n = ours[f"{name}_per_class_examples"]
        if list(mine_n) != [int(c) for c in counts]:
            sys.exit(f"{name}: per-class counts {mine_n}, numpy says {list(counts)}")
        for c in range(10):
            off = round(abs(mine_pc[c] - keras_pc[c]) * counts[c])
            worst = max(worst, off)
            rows.append((name, f"class {c} accuracy ({counts[c]} examples)",
                         "mirrored_train --json", mine_pc[c], keras_pc[c], off))
    print("\n| set | metric | ours from | ours | Keras | examples apart |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.6f} | {r[4]:.6f} | {r[5]} |")
    print(f"\nlargest difference: {worst} example(s) (tolerance {TOLERANCE_EXAMPLES})")
    return 1 if worst > TOLERANCE_EXAMPLES else 0


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
