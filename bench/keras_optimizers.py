#!/usr/bin/env python3
"""Our optimizers, weight decay and clipping against Keras 3's, update by update.

Keras builds a small model and saves its initial weights (model.save, .h5);
mirrored_train starts from them (--init-weights) and Keras's model.fit
starts from them too, on the same examples in the same order (no shuffle,
no validation, one replica, a batch that divides the data), with the same
optimizer settings. After a few epochs both models' weights are compared:
any difference in the formulas (epsilon inside or outside the root, the
weight decay's rate, the clipping's order or norm) shows as a relative
difference of 1e-2 or more; float32 rounding in two libraries leaves about
1e-5. Then our trained model, exported with mirrored_export, is loaded by
keras.models.load_model: its optimizer must be of the same class with the
same settings, each of its variables (slots and update count) must equal
what our .h5 holds under the same name, and the kernels' initializers
(he_normal, he_uniform in the .cfg) must be Keras's HeNormal, HeUniform. An interop check, not a test
of the suite: it needs TensorFlow/Keras in a venv. With --record it
also writes what Keras computed (its weights and losses, the optimizer and
initializers it read from our archive) and the inputs our side needs under
tests/golden/keras/optimizers/, which tests/test_keras_golden.c checks
without TensorFlow (bench/keras_golden.py records every check).

    ~/venv-tf/bin/python bench/keras_optimizers.py [--build build] [--epochs 3] [--record]
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from keras_golden import Golden, archive_config, layer_pointer, pointer_get, run_ours  # noqa: E402

# (name, [net] lines, the Keras optimizer's class and arguments)
CASES = [
    ("sgd", "optimizer = sgd\nlearning_rate = 0.05\n", "SGD", dict(learning_rate=0.05)),
    ("sgd_nesterov_clipvalue",
     "optimizer = sgd\nlearning_rate = 0.05\nmomentum = 0.9\nnesterov = 1\nclipvalue = 0.02\n",
     "SGD", dict(learning_rate=0.05, momentum=0.9, nesterov=True, clipvalue=0.02)),
    ("sgdw", "optimizer = sgd\nlearning_rate = 0.05\nmomentum = 0.9\nweight_decay = 0.1\n",
     "SGD", dict(learning_rate=0.05, momentum=0.9, weight_decay=0.1)),
    ("adam_global_clipnorm", "optimizer = adam\nlearning_rate = 0.003\nglobal_clipnorm = 0.5\n",
     "Adam", dict(learning_rate=0.003, global_clipnorm=0.5)),
    ("adamw", "optimizer = adamw\nlearning_rate = 0.003\n", "AdamW", dict(learning_rate=0.003)),
    ("adamw_clipnorm", "optimizer = adamw\nlearning_rate = 0.003\nweight_decay = 0.05\n"
                       "clipnorm = 0.2\n",
     "AdamW", dict(learning_rate=0.003, weight_decay=0.05, clipnorm=0.2)),
    ("rmsprop", "optimizer = rmsprop\nlearning_rate = 0.001\n", "RMSprop",
     dict(learning_rate=0.001)),
    ("sgd_l2", "optimizer = sgd\nlearning_rate = 0.05\nmomentum = 0.9\n", "SGD",
     dict(learning_rate=0.05, momentum=0.9)),
    ("adam_l2_clipnorm", "optimizer = adam\nlearning_rate = 0.003\nclipnorm = 0.2\n", "Adam",
     dict(learning_rate=0.003, clipnorm=0.2)),
    ("rmsprop_momentum_wd",
     "optimizer = rmsprop\nlearning_rate = 0.001\nrho = 0.8\nmomentum = 0.5\nepsilon = 1e-5\n"
     "weight_decay = 0.02\n",
     "RMSprop", dict(learning_rate=0.001, rho=0.8, momentum=0.5, epsilon=1e-5, weight_decay=0.02)),
]

N, BATCH, CLASSES = 512, 32, 4
# the cases whose kernels carry an L2 penalty (Keras kernel_regularizer=L2,
# our kernel_l2) on the convolution and both Dense layers
L2 = {"sgd_l2": 0.01, "adam_l2_clipnorm": 0.003}


def keras_model(l2=0.0):
    import keras
    keras.utils.set_random_seed(11)
    reg = (lambda: keras.regularizers.L2(l2)) if l2 > 0 else (lambda: None)
    return keras.Sequential([
        keras.Input((8, 8, 1)),
        keras.layers.Conv2D(4, 3, activation="relu", kernel_regularizer=reg()),
        keras.layers.Flatten(),
        keras.layers.Dense(16, activation="tanh", kernel_regularizer=reg()),
        keras.layers.Dense(CLASSES, activation="softmax", kernel_regularizer=reg()),
    ])


def cfg_text(net, epochs, l2=0.0):
    reg = f"kernel_l2 = {l2}\n" if l2 > 0 else ""
    return (f"[net]\nbatch = {BATCH}\nepochs = {epochs}\nshuffle = 0\nlr_scaling = none\n{net}"
            "[data]\ntrain_images = x.npy\ntrain_labels = y.npy\nscale = 1/255\n"
            "[input]\nshape = 8,8,1\n[conv2d]\nfilters = 4\nsize = 3\nactivation = relu\n"
            f"kernel_initializer = he_normal\n{reg}"
            "[flatten]\n[dense]\nunits = 16\nactivation = tanh\nkernel_initializer = he_uniform\n"
            f"{reg}[dense]\nunits = {CLASSES}\nactivation = softmax\n{reg}")


def ours_weights(path):
    """The model's weights from our .h5 (Keras's layout), in layer order."""
    import h5py
    out = []
    with h5py.File(path, "r") as f:
        mw = f["model_weights"]
        for layer in [n.decode() if isinstance(n, bytes) else n for n in mw.attrs["layer_names"]]:
            g = mw[layer]
            for w in [n.decode() if isinstance(n, bytes) else n for n in g.attrs["weight_names"]]:
                out.append(np.array(g[w]))
    return out


def same_optimizer(ours_h5, archive, cls, kwargs, golden=None):
    """'' if Keras's optimizer loaded from our archive is ours, else why not. With golden (a
    list), appends what Keras read from the archive as comparisons of the archive's config.json
    and of our .h5's optimizer variable names (tests/test_keras_golden.c)."""
    import h5py
    import keras
    try:
        model = keras.models.load_model(archive)
    except Exception as e:  # a file Keras cannot load is the finding
        return f"Keras cannot load it: {str(e).splitlines()[0][:120]}"
    kernels = [l for l in model.layers if hasattr(l, "kernel")]
    inits = [type(l.kernel_initializer).__name__ for l in kernels]
    if inits[:2] != ["HeNormal", "HeUniform"]:
        return f"kernel initializers {inits}"
    opt = model.optimizer
    if type(opt).__name__ != cls:
        return f"class {type(opt).__name__}"
    cfg = opt.get_config()
    for k, v in kwargs.items():
        if not np.isclose(cfg[k], v, rtol=1e-6):
            return f"{k} {cfg[k]} != {v}"
    with h5py.File(ours_h5, "r") as f:
        ow = f["optimizer_weights"]
        names = [n.decode() if isinstance(n, bytes) else n for n in ow.attrs["weight_names"]]
        # ours: <opt>/sequential_<layer>_<weight>_<slot>; Keras's path drops "sequential_"
        by_keras = {n.replace("/sequential_", "/"): n for n in names}
        if [v.path for v in opt.variables] != list(by_keras):
            return "variables in another order or under other names"
        for v in opt.variables:
            if not np.array_equal(np.asarray(v.numpy()), np.array(ow[by_keras[v.path]])):
                return f"{v.path} differs"
    if golden is not None:
        golden += archive_golden(archive, kernels, cls, kwargs, cfg, opt)
    return ""


def archive_golden(archive, kernels, cls, kwargs, cfg, opt):
    """What Keras read from our archive, as comparisons of the part our side wrote."""
    doc = archive_config(archive)
    arch = archive.replace(os.path.dirname(archive), "{out}")
    h5 = arch[:-len(".keras")] + ".h5"
    out = [{"name": "optimizer class Keras loads", "archive": arch,
            "pointer": "/compile_config/optimizer/class_name", "keras": cls}]
    out += [{"name": f"optimizer {k} Keras loads", "archive": arch,
             "pointer": f"/compile_config/optimizer/config/{k}", "keras": cfg[k]}
            if isinstance(cfg[k], bool) else
            {"name": f"optimizer {k} Keras loads", "archive": arch,
             "pointer": f"/compile_config/optimizer/config/{k}", "keras": float(cfg[k]),
             "rel": 1e-6} for k in kwargs]
    out += [{"name": f"{l.name}'s kernel initializer Keras loads", "archive": arch,
             "pointer": layer_pointer(doc, l.name) + "/config/kernel_initializer/class_name",
             "keras": type(l.kernel_initializer).__name__} for l in kernels]
    # our variable names as Keras's paths (ours add "sequential_" before the layer)
    out.append({"name": "optimizer variables Keras matches", "h5_attr": h5,
                "object": "optimizer_weights", "attr": "weight_names",
                "replace": ["/sequential_", "/"], "keras": [v.path for v in opt.variables]})
    for c in out:  # the archive says what Keras read
        if "pointer" in c:
            got = pointer_get(doc, c["pointer"])
            assert got == c["keras"] or np.isclose(got, c["keras"], rtol=1e-6), (c, got)
    return out


def ours_runs(name):
    """Our side of a case ({golden}: the inputs, {out}: what it writes)."""
    return [["mirrored_train", f"{{golden}}/{name}.cfg", "--devices", "cpu:1", "--quiet",
             "--init-weights", "{golden}/init.h5", "--save", f"{{out}}/{name}.h5", "--metrics",
             f"{{out}}/{name}.csv"],
            ["mirrored_export", f"{{out}}/{name}.h5", f"{{out}}/{name}.keras"]]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--record", action="store_true",
                    help="also write the golden files (tests/golden/keras/optimizers/)")
    a = ap.parse_args()
    import keras
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        golden = Golden("optimizers") if a.record else None
        work = golden.dir if golden else tmp  # the inputs of our side
        rng = np.random.default_rng(5)
        y = (np.arange(N) % CLASSES).astype(np.uint8)
        x = (rng.random((N, 8, 8)) * 140 + (np.arange(64).reshape(8, 8) % CLASSES
                                             == y[:, None, None]) * 80).astype(np.uint8)
        np.save(os.path.join(work, "x.npy"), x)
        np.save(os.path.join(work, "y.npy"), y)
        xf = (x.astype(np.float32) * np.float32(1 / 255)).reshape(N, 8, 8, 1)
        init = os.path.join(work, "init.h5")
        keras_model().save(init)
        print(f"{'case':24} {'max |ours - keras| / max |keras - init|':>40}  {'training':9}"
              f" {'our loss':7} {'keras':7} {'last epoch loss':9} exported optimizer")
        for name, net, cls, kwargs in CASES:
            l2 = L2.get(name, 0.0)
            with open(os.path.join(work, name + ".cfg"), "w") as f:
                f.write(cfg_text(net, a.epochs, l2))
            runs = ours_runs(name)
            run_ours(a.build, runs[0], work, tmp)
            run_ours(a.build, runs[1], work, tmp, stdout=subprocess.DEVNULL)
            out = os.path.join(tmp, name + ".h5")
            csv = os.path.join(tmp, name + ".csv")
            our_loss = float(open(csv).read().strip().splitlines()[-1].split(",")[2])
            model = keras_model(l2)
            model.set_weights(keras.models.load_model(init, compile=False).get_weights())
            w0 = [w.copy() for w in model.get_weights()]
            model.compile(optimizer=getattr(keras.optimizers, cls)(**kwargs),
                          loss="sparse_categorical_crossentropy")
            hist = model.fit(xf, y.astype(np.int64), batch_size=BATCH, epochs=a.epochs,
                             shuffle=False, verbose=0)
            keras_loss = hist.history["loss"][-1]
            kw, ow = model.get_weights(), ours_weights(out)
            moved = max(float(np.max(np.abs(k - i))) for k, i in zip(kw, w0))
            diff = max(float(np.max(np.abs(k - o))) for k, o in zip(kw, ow))
            rel = diff / moved
            loss_rel = abs(our_loss - keras_loss) / keras_loss
            archive = os.path.join(tmp, name + ".keras")
            compare = []
            why = same_optimizer(out, archive, cls, kwargs, compare)
            ok = rel < 1e-3
            loss_ok = loss_rel < 1e-3
            failures += (not ok) + (why != "") + (not loss_ok)
            print(f"{name:24} {rel:40.2e}  {'same' if ok else 'DIFFERENT':9}"
                  f" {our_loss:.5f} {keras_loss:.5f} {'same' if loss_ok else 'DIFFERENT':9}"
                  f" {'same' if not why else 'DIFFERENT: ' + why}")
            if golden:
                for i, w in enumerate(kw):
                    golden.array(f"{name}/weights/{i}", w)
                golden.case(name, runs, [
                    {"name": f"weights after {a.epochs} epochs", "weights": f"{{out}}/{name}.h5",
                     "keras": f"{name}/weights", "init": "{golden}/init.h5", "tol": 1e-3},
                    {"name": "last epoch's loss", "csv": f"{{out}}/{name}.csv",
                     "column": "loss", "rows": [a.epochs - 1], "keras": [keras_loss],
                     "rel": 1e-3}] + compare)
        if golden:
            golden.write()
    print("all the same" if failures == 0 else f"{failures} case(s) differ")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
