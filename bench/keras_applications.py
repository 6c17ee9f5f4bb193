#!/usr/bin/env python3
"""keras.applications models as mirrored's model: each loads, predicts as Keras does, trains.

    /work/venv-tf/bin/python bench/keras_applications.py BUILD_DIR [--keep DIR]

Builds MobileNetV2(alpha=0.35, input_shape=(32, 32, 3)), ResNet50(input_shape=(64, 64, 3))
and ResNet50V2(input_shape=(64, 64, 3)), all weights=None, compiled with Adam and
sparse_categorical_crossentropy, saves each as MODEL.keras in a temporary folder (--keep: in
DIR) and runs BUILD_DIR's executables on it:
  - mirrored_eval MODEL.keras --data x.npy --predict p.npy, against Keras's model.predict(x)
    (BatchNormalization's moving statistics are set to random values first, so inference
    normalises with something other than 0 and 1);
  - mirrored_train MODEL.keras --synthetic 64 --epochs 1 --devices cpu:2.
--eval-devices and --train-devices choose other devices: in a build with -Dgpu_emulation=true,
`--eval-devices gpu:0 --train-devices gpu:0,1` with MIRRORED_EMULATED_GPUS=2 and
CUDA_VISIBLE_DEVICES=0,1 (without it the script hides every GPU from TensorFlow, and so from
the emulator) runs them on emulated GPUs.
Prints a table: model, params, max |ours - keras| of predict (with the largest Keras
probability beside it, for the scale: 1000 classes), whether training ran. Exit 1 when a
difference exceeds 1e-4 or a run fails. Needs TensorFlow and Keras 3 (a peer venv, never CI);
the files are too large to keep in the repository (ResNet50: ~100 MB)."""
import argparse
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402
import keras  # noqa: E402

MODELS = [
    ("MobileNetV2", lambda: keras.applications.MobileNetV2(
        alpha=0.35, input_shape=(32, 32, 3), weights=None)),
    ("ResNet50", lambda: keras.applications.ResNet50(input_shape=(64, 64, 3), weights=None)),
    ("ResNet50V2", lambda: keras.applications.ResNet50V2(input_shape=(64, 64, 3), weights=None)),
]


def random_bn_statistics(m, rng):
    """Moving means and variances away from 0 and 1 (gamma, beta too), so that inference
    differs from a fresh model's identity normalisation."""
    for layer in m.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            g, b, mean, var = layer.get_weights()
            layer.set_weights([
                rng.uniform(0.5, 1.5, g.shape).astype(np.float32),
                rng.uniform(-0.2, 0.2, b.shape).astype(np.float32),
                rng.uniform(-0.2, 0.2, mean.shape).astype(np.float32),
                rng.uniform(0.5, 2.0, var.shape).astype(np.float32)])


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


def check(name, make, build, folder, rng, eval_devices, train_devices):
    keras.utils.set_random_seed(7)
    m = make()
    m.compile(optimizer=keras.optimizers.Adam(learning_rate=0.001),
              loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    random_bn_statistics(m, rng)
    path = os.path.join(folder, name + ".keras")
    m.save(path)
    x = rng.uniform(-1, 1, (4,) + tuple(m.input_shape[1:])).astype(np.float32)
    xp, pp = os.path.join(folder, name + ".x.npy"), os.path.join(folder, name + ".p.npy")
    np.save(xp, x)
    want = m.predict(x, verbose=0)
    rc, out = run([os.path.join(build, "launch/mirrored_eval"), path, "--data", xp,
                   "--predict", pp, "--devices", eval_devices])
    diff = float(np.max(np.abs(np.load(pp) - want))) if rc == 0 else None
    if rc != 0:
        print(f"{name}: mirrored_eval exit {rc}: {out.strip()[-600:]}", file=sys.stderr)
    rc, out = run([os.path.join(build, "launch/mirrored_train"), path, "--synthetic", "64",
                   "--epochs", "1", "--devices", train_devices, "--quiet"])
    if rc != 0:
        print(f"{name}: mirrored_train exit {rc}: {out.strip()[-600:]}", file=sys.stderr)
    return m.count_params(), diff, float(np.max(want)), rc == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", help="the meson build folder (launch/mirrored_eval, ...)")
    ap.add_argument("--keep", metavar="DIR", help="save the models in DIR (kept)")
    ap.add_argument("--only", metavar="NAME", help="one model (MobileNetV2, ResNet50, ...)")
    ap.add_argument("--eval-devices", default="cpu", help="mirrored_eval's --devices (cpu)")
    ap.add_argument("--train-devices", default="cpu:2",
                    help="mirrored_train's --devices (cpu:2)")
    a = ap.parse_args()
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as tmp:
        folder = a.keep or tmp
        os.makedirs(folder, exist_ok=True)
        rows, ok = [], True
        for name, make in MODELS:
            if a.only and name != a.only:
                continue
            params, diff, top, trained = check(name, make, a.build, folder, rng,
                                                  a.eval_devices, a.train_devices)
            ok = ok and diff is not None and diff <= 1e-4 and trained
            rows.append((name, params, "failed" if diff is None else f"{diff:.2e}", f"{top:.2e}",
                         "yes" if trained else "no"))
    print(f"{'model':<12} {'params':>10}  {'max |ours - keras|':>18}  {'max keras':>9}  "
          f"train {a.train_devices} (eval on {a.eval_devices})")
    for name, params, diff, top, trained in rows:
        print(f"{name:<12} {params:>10}  {diff:>18}  {top:>9}  {trained}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
