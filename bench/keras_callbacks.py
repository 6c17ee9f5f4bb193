#!/usr/bin/env python3
"""Our early_stopping and reduce_lr_on_plateau against Keras's own callbacks.

Trains small models with mirrored_train (random 8x8 images, 4 classes, a
validation split, many epochs so that val_loss wanders), then feeds the
epoch figures of each run (its --metrics CSV) to Keras 3's EarlyStopping
and ReduceLROnPlateau, epoch by epoch, on a real Keras model and optimizer,
and checks that Keras would have stopped after the same epoch and set the
same learning rate for every epoch as our run did. An interop check, not
a test of the suite: it needs TensorFlow/Keras in a venv. With --record it
also writes, under tests/golden/keras/callbacks/, each run's epoch figures
and what Keras's callbacks decided on them, with the .cfg and the data, so
that tests/test_keras_golden.c replays the same figures through our
callbacks (and checks a fresh run against its own figures) without
TensorFlow (bench/keras_golden.py records every check).

    ~/venv-tf/bin/python bench/keras_callbacks.py [--build build] [--record]
"""
import argparse
import csv
import os
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from keras_golden import Golden, run_ours  # noqa: E402

CASES = [
    # (name, [net] lines, epochs)
    ("es_val_loss_p1", "early_stopping = val_loss\npatience = 1\n", 30),
    ("es_val_loss_p3_delta", "early_stopping = val_loss\npatience = 3\nmin_delta = 0.002\n", 40),
    ("es_val_acc_p2", "early_stopping = val_accuracy\npatience = 2\n", 40),
    ("es_loss_p0", "early_stopping = loss\npatience = 0\nmin_delta = 0.01\n", 40),
    ("rl_val_loss", "reduce_lr_on_plateau = val_loss\nreduce_lr_patience = 1\n"
                    "reduce_lr_factor = 0.5\n", 20),
    ("rl_cooldown_min", "reduce_lr_on_plateau = val_loss\nreduce_lr_patience = 1\n"
                        "reduce_lr_factor = 0.3\nreduce_lr_cooldown = 2\nmin_lr = 0.0002\n"
                        "reduce_lr_min_delta = 0.001\n", 25),
    ("rl_val_acc", "reduce_lr_on_plateau = val_accuracy\nreduce_lr_patience = 2\n"
                   "reduce_lr_factor = 0.5\n", 25),
]


def keyvals(text):
    return dict(l.split(" = ") for l in text.strip().splitlines())


FIGURES = ("epoch", "accuracy", "loss", "val_accuracy", "val_loss", "learning_rate")


def ours_run(name):
    """Our side of a case ({golden}: the .cfg and data, {out}: its --metrics CSV)."""
    return ["mirrored_train", f"{{golden}}/{name}.cfg", "--devices", "cpu:1", "--quiet",
            "--metrics", f"{{out}}/{name}.csv"]


def run_case(build, work, tmp, name, net, epochs):
    """Our run of the case: its --metrics rows."""
    with open(os.path.join(work, name + ".cfg"), "w") as f:
        f.write(f"[net]\nbatch = 16\nepochs = {epochs}\nvalidation_split = 0.3\nseed = 7\n"
                f"learning_rate = 0.01\n{net}"
                "[data]\ntrain_images = x.npy\ntrain_labels = y.npy\nscale = 1/255\n"
                "[input]\nshape = 8,8,1\n[flatten]\n[dense]\nunits = 32\nactivation = relu\n"
                "[dense]\nunits = 4\nactivation = softmax\n")
    run_ours(build, ours_run(name), work, tmp)
    with open(os.path.join(tmp, name + ".csv")) as f:
        return list(csv.DictReader(f))


def golden_case(golden, name, rows, ran, rates):
    """The figures Keras's callbacks saw (the CSV's columns but the timings) and their
    decisions."""
    with open(golden.path(name + "_figures.csv"), "w") as f:
        f.write(",".join(FIGURES) + "\n")
        for r in rows:
            f.write(",".join(r[k] for k in FIGURES) + "\n")
    cfg = f"{{golden}}/{name}.cfg"
    golden.case(name, [ours_run(name)], [
        {"name": "Keras's EarlyStopping and ReduceLROnPlateau on the recorded figures",
         "callbacks": f"{{golden}}/{name}_figures.csv", "cfg": cfg, "epochs": ran,
         "rates": rates},
        {"name": "the run's stop and rates as the rules give them on its figures",
         "callbacks": f"{{out}}/{name}.csv", "cfg": cfg, "self": True}])


def keras_replay(rows, net, epochs):
    """(epochs Keras would run, the rate Keras sets for each epoch)."""
    import keras
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=float(rows[0]["learning_rate"])),
                  loss="mse")
    kv = keyvals(net)
    cbs = []
    # our mode auto: accuracies rise, losses fall (Keras's auto needs the
    # model compiled with the metric; the dummy model is not)
    mode = lambda m: "max" if "accuracy" in m else "min"
    if "early_stopping" in kv:
        cbs.append(keras.callbacks.EarlyStopping(monitor=kv["early_stopping"],
                                                 mode=mode(kv["early_stopping"]),
                                                 patience=int(kv.get("patience", 0)),
                                                 min_delta=float(kv.get("min_delta", 0))))
    if "reduce_lr_on_plateau" in kv:
        cbs.append(keras.callbacks.ReduceLROnPlateau(
            monitor=kv["reduce_lr_on_plateau"], mode=mode(kv["reduce_lr_on_plateau"]),
            factor=float(kv.get("reduce_lr_factor", 0.1)),
            patience=int(kv.get("reduce_lr_patience", 10)),
            min_delta=float(kv.get("reduce_lr_min_delta", 1e-4)),
            cooldown=int(kv.get("reduce_lr_cooldown", 0)), min_lr=float(kv.get("min_lr", 0))))
    for cb in cbs:
        cb.set_model(model)
        cb.on_train_begin()
    rates, ran = [], 0
    for e, row in enumerate(rows):
        rates.append(float(model.optimizer.learning_rate.numpy()))
        logs = {k: float(row[k]) for k in ("loss", "accuracy", "val_loss", "val_accuracy")}
        for cb in cbs:
            cb.on_epoch_end(e, logs)
        ran = e + 1
        if model.stop_training:
            break
    return ran, rates


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--record", action="store_true",
                    help="also write the golden files (tests/golden/keras/callbacks/)")
    a = ap.parse_args()
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        golden = Golden("callbacks") if a.record else None
        work = golden.dir if golden else tmp  # the inputs of our side
        rng = np.random.default_rng(5)
        y = (np.arange(300) % 4).astype(np.uint8)
        x = (rng.random((300, 8, 8)) * 140 + (np.arange(64).reshape(8, 8) % 4 == y[:, None, None])
             * 40).astype(np.uint8)
        np.save(os.path.join(work, "x.npy"), x)
        np.save(os.path.join(work, "y.npy"), y)
        for name, net, epochs in CASES:
            rows = run_case(a.build, work, tmp, name, net, epochs)
            ran, rates = keras_replay(rows, net, epochs)
            ours = [float(r["learning_rate"]) for r in rows]
            same_stop = ran == len(rows)
            # our CSV's learning_rate is printed with 6 significant digits
            same_rates = all(abs(k - o) <= 1e-5 * max(k, 1e-12) + 1e-9 for k, o in zip(rates, ours))
            ok = same_stop and same_rates
            failures += not ok
            cuts = sorted(set(ours), reverse=True)
            print(f"{name:22} ours: {len(rows):2} epochs, rates {cuts}; Keras: {ran:2} epochs"
                  f" -> {'same' if ok else 'DIFFERENT'}")
            if not ok:
                print("   ours ", ours, "\n   keras", rates)
            if golden:
                golden_case(golden, name, rows, ran, rates)
        if golden:
            golden.write()
    print("all the same" if failures == 0 else f"{failures} case(s) differ")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
