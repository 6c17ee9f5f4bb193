#!/usr/bin/env python3
"""Records the golden files of every Keras check (bench/keras_*.py --record) in one command.

Each check's --record runs the check as its live mode does (Keras and our
executables side by side, the same pass or fail) and writes
tests/golden/keras/<check>/:
  - the inputs our side needs: the .cfg files, the small data arrays (.npy,
    an image folder), the .h5 files Keras saved (initial weights, models);
  - expected.h5: Keras's arrays (weights after training, predictions,
    decoded images), one dataset per array;
  - golden.json: the Keras and TensorFlow versions, and per case the
    commands of our side ({golden}: this folder, {out}: a scratch folder;
    the program is build/launch/<name>) and the comparisons with what Keras
    computed, with the check's tolerances.
tests/test_keras_golden.c replays the commands and the comparisons with no
TensorFlow (meson test keras_golden).

    ~/venv-tf/bin/python bench/keras_golden.py [--build build] [--only optimizers losses]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "tests", "golden", "keras")
CHECKS = ["optimizers", "losses", "callbacks", "metrics", "activations", "layernorm",
          "image_folder", "interop", "depthwise", "random"]
# not recorded by this script: random_all (bench/keras_random.py --record --all, 200 models, the
# fuzz phase's set)


class Golden:
    """The golden folder of one check, written by its --record mode."""

    def __init__(self, check, recorded_by=None):
        self.check = check
        self.recorded_by = recorded_by or f"bench/keras_{check}.py --record"
        self.dir = os.path.join(GOLDEN, check)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.cases = []
        self.arrays = {}

    def path(self, *name):
        return os.path.join(self.dir, *name)

    def array(self, name, a, compress=False):
        """Keras's array `a` under `name` in expected.h5 (gzip-compressed if told);
        returns the name."""
        self.arrays[name] = (np.ascontiguousarray(a), compress)
        return name

    def case(self, name, runs, compare):
        """runs: argv lists of our side; compare: the comparisons (test_keras_golden.c)."""
        self.cases.append({"name": name, "runs": runs, "compare": compare})

    def write(self, notes=""):
        import h5py
        import keras
        import tensorflow as tf

        with h5py.File(self.path("expected.h5"), "w") as f:
            for k, (v, compress) in sorted(self.arrays.items()):
                f.create_dataset(k, data=v, **(dict(compression="gzip", shuffle=True)
                                               if compress else {}))
        doc = {"check": self.check, "keras": keras.__version__, "tensorflow": tf.__version__,
               "recorded_by": self.recorded_by, "notes": notes,
               "cases": self.cases}
        with open(self.path("golden.json"), "w") as f:
            f.write(dumps(doc) + "\n")
        size = sum(os.path.getsize(os.path.join(d, n)) for d, _, ns in os.walk(self.dir)
                   for n in ns)
        print(f"recorded {len(self.cases)} case(s) in {os.path.relpath(self.dir, ROOT)}"
              f" ({size / 1024:.0f} KiB)")


def dumps(v, depth=0):
    """JSON with one member per line, but lists of numbers or strings on one line."""
    pad, inner = " " * depth, " " * (depth + 1)
    if isinstance(v, dict):
        items = [f"{inner}{json.dumps(k)}: {dumps(x, depth + 1)}" for k, x in v.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(v, list) and any(isinstance(x, (dict, list)) for x in v):
        return "[\n" + ",\n".join(inner + dumps(x, depth + 1) for x in v) + "\n" + pad + "]"
    return json.dumps(v)


def expand(argv, golden, out):
    return [a.replace("{golden}", golden).replace("{out}", out) for a in argv]


def run_ours(build, argv, golden, out, **kw):
    """Runs one of our executables (argv[0]: its name in build/launch) with {golden} and
    {out} filled in; returns the CompletedProcess (check=True unless told)."""
    exe = os.path.join(os.path.abspath(build), "launch", argv[0])
    kw.setdefault("check", True)
    return subprocess.run([exe] + expand(argv[1:], golden, out), **kw)


def model_weights(path):
    """(layer/weight name, array) of an .h5 in Keras's legacy layout (ours or Keras's), in order."""
    import h5py

    def names(attrs, key):
        return [n.decode() if isinstance(n, bytes) else n for n in attrs[key]]

    out = []
    with h5py.File(path, "r") as f:
        mw = f["model_weights"]
        for layer in names(mw.attrs, "layer_names"):
            g = mw[layer]
            for w in names(g.attrs, "weight_names"):
                out.append((f"{layer}/{w}", np.array(g[w])))
    return out


def archive_config(path):
    """config.json of a .keras archive."""
    import zipfile

    with zipfile.ZipFile(path) as z:
        return json.loads(z.read("config.json"))


def layer_pointer(config, layer_name):
    """The JSON pointer of the layer called layer_name in a .keras config.json."""
    for j, layer in enumerate(config["config"]["layers"]):
        if layer["config"]["name"] == layer_name:
            return f"/config/layers/{j}"
    raise KeyError(layer_name)


def pointer_get(doc, pointer):
    for part in pointer.strip("/").split("/"):
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def archive_layer_compares(archive, placeholder, model, keys):
    """Comparisons of what Keras read from our exported archive (at `archive`, {out}/... as
    `placeholder`): for each layer of the loaded `model` and each config key of `keys` it has,
    the value config.json holds there ("keras"; what Keras turned it into: "keras_read")."""
    doc = archive_config(archive)
    out = []
    for layer in model.layers:
        conf = layer.get_config()
        for key in keys:
            if key in conf:
                pointer = layer_pointer(doc, layer.name) + f"/config/{key}"
                read = conf[key]
                out.append({"name": f"{layer.name}'s {key} Keras loads", "archive": placeholder,
                            "pointer": pointer, "keras": pointer_get(doc, pointer),
                            "keras_read": read if isinstance(read, (str, int, float, bool))
                            else str(read)})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--only", nargs="+", choices=CHECKS, default=CHECKS)
    a = ap.parse_args()
    failed = []
    for check in a.only:
        script = os.path.join(ROOT, "bench", f"keras_{check}.py")
        print(f"== {check}", flush=True)
        if subprocess.run([sys.executable, script, "--record", "--build", a.build]).returncode:
            failed.append(check)
    print("recorded" if not failed else f"FAILED: {' '.join(failed)} (their goldens are suspect)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
