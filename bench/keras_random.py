#!/usr/bin/env python3
"""Random Keras architectures: mirrored_eval's predictions against Keras's.

Run by hand (never by CI) with a Python that has Keras 3 and TensorFlow:
    ~/venv-tf/bin/python bench/keras_random.py [--build build] [--record] [--all]
        [--count N] [--seed S] [--keep DIR]

From a fixed seed (47) it draws N models (40: m000 to m039; --all: the 200
after them, m040 to m239, the fuzz-phase set), alternately Sequential and
Functional, over the layers the Keras
importer takes (docs/keras.md): InputLayer, Conv2D, DepthwiseConv2D,
MaxPooling2D, AveragePooling2D, ZeroPadding2D, BatchNormalization,
LayerNormalization, Normalization, Rescaling, Activation (every activation
we take), ReLU (max_value, negative_slope, threshold), Softmax, Dropout,
SpatialDropout2D, RandomFlip, Flatten, GlobalAveragePooling2D,
GlobalMaxPooling2D, Reshape, Dense, and in the Functional models Add and
Concatenate of two branches. Images of 4 to 9 pixels a side and 1 to 3
channels, or vectors of 3 to 12 features; kernel sizes, strides, paddings,
units, activations and settings drawn; every weight (biases, BatchNorm's
moving statistics) drawn, not Keras's initialisation, so that no term
vanishes. Each model ends in Dense (softmax, sigmoid or linear), is compiled
(Adam, MSE: the importer wants a compiled model) and saved by Keras as
mNNN.keras, with 3 random input rows (mNNN_x.npy); Keras's predict of them
is the reference. Our side: mirrored_eval mNNN.keras --data mNNN_x.npy
--predict, within rtol 1e-4 + atol 1e-5 of Keras's predictions (float32 sums
in another order: each output is a dot product of at most a few hundred
terms of size about 1, whose rounding is about 1e-6 of the output; the
relative term covers outputs that grow through several layers).

Two documented limits are kept out of the draw, not hidden: gelu, swish and
silu are never the activation argument of Dense, Conv2D or DepthwiseConv2D
(refused there, docs/keras.md; they come as Activation layers), and a
Normalization's per-channel mean and variance have at most 8 numbers (the
.cfg's limit, docs/usage.md; one number for all beyond that). Any other
model mirrored_eval refuses is a finding: it is printed with the refusal
and the check fails (never left out of the set quietly).
--record writes tests/golden/keras/random/ (--all: random_all/) for
tests/test_keras_golden.c (no TensorFlow).
"""
import argparse
import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from keras_golden import Golden, run_ours  # noqa: E402

SEED = 47
ROWS = 3
RTOL, ATOL = 1e-4, 1e-5
ACTS = ["linear", "relu", "sigmoid", "tanh", "softmax", "elu", "leaky_relu", "gelu", "swish",
        "silu"]
# The activation argument of Dense, Conv2D and DepthwiseConv2D: gelu, swish and silu are refused
# there (docs/keras.md: "as a separate Activation layer only"; the activation layer after the
# kernel keeps its input for the gradient), so they come as Activation layers only.
FUSED = [a for a in ACTS if a not in ("gelu", "swish", "silu")]


class Draw:
    """One model's random choices, from numpy's generator seeded by (seed, index)."""

    def __init__(self, seed, index):
        self.r = __import__("numpy").random.default_rng([seed, index])

    def int(self, lo, hi):
        return int(self.r.integers(lo, hi + 1))

    def pick(self, xs):
        return xs[int(self.r.integers(0, len(xs)))]

    def chance(self, p):
        return bool(self.r.random() < p)

    def num(self, lo, hi):
        return round(float(self.r.uniform(lo, hi)), 3)


def out_size(n, k, s, padding):
    return -(-n // s) if padding == "same" else (n - k) // s + 1


def image_layer(d, L, shape):
    """A layer for an image (h, w, c) and its output shape; None if none fits."""
    h, w, c = shape
    kind = d.pick(["conv", "conv", "depthwise", "maxpool", "avgpool", "zeropad", "bn", "ln",
                   "act", "relu", "dropout", "sdropout", "flip", "rescale", "norm"])
    if kind in ("conv", "depthwise"):
        k = (d.int(1, 3), d.int(1, 3)) if d.chance(0.3) else d.int(1, 3)
        kh, kw = (k, k) if isinstance(k, int) else k
        s = d.pick([1, 1, 2])
        padding = d.pick(["valid", "same"])
        oh, ow = out_size(h, kh, s, padding), out_size(w, kw, s, padding)
        if oh < 1 or ow < 1:
            return None
        act = d.pick(FUSED)
        bias = d.chance(0.8)
        if kind == "conv":
            f = d.int(1, 6)
            return L.Conv2D(f, k, strides=s, padding=padding, activation=act,
                            use_bias=bias), (oh, ow, f)
        m = d.int(1, 2)
        return L.DepthwiseConv2D(k, strides=s, padding=padding, depth_multiplier=m,
                                 activation=act, use_bias=bias), (oh, ow, c * m)
    if kind in ("maxpool", "avgpool"):
        p = d.int(2, 3) if d.chance(0.7) else (d.int(1, 3), d.int(1, 3))
        ph, pw = (p, p) if isinstance(p, int) else p
        s = d.pick([None, 1, 2])
        sh, sw = (ph, pw) if s is None else (s, s)
        padding = d.pick(["valid", "same"])
        oh, ow = out_size(h, ph, sh, padding), out_size(w, pw, sw, padding)
        if oh < 1 or ow < 1:
            return None
        cls = L.MaxPooling2D if kind == "maxpool" else L.AveragePooling2D
        return cls(p, strides=s, padding=padding), (oh, ow, c)
    if kind == "zeropad":
        p = d.pick([1, (1, 0), ((0, 1), (1, 2))])
        (t, b), (l, r) = ((p, p), (p, p)) if isinstance(p, int) else \
            ((p[0], p[0]), (p[1], p[1])) if isinstance(p[0], int) else p
        if h + t + b > 12 or w + l + r > 12:
            return None
        return L.ZeroPadding2D(p), (h + t + b, w + l + r, c)
    return any_layer(d, L, kind, shape)


def any_layer(d, L, kind, shape):
    """A layer that keeps the shape (images or vectors)."""
    if kind == "bn":
        return L.BatchNormalization(epsilon=d.pick([1e-3, 1e-5, 0.01])), shape
    if kind == "ln":
        return L.LayerNormalization(epsilon=d.pick([1e-3, 1e-6]), center=d.chance(0.8),
                                    scale=d.chance(0.8)), shape
    if kind == "act":
        return L.Activation(d.pick(ACTS)), shape
    if kind == "relu":
        return L.ReLU(max_value=d.pick([None, 6.0, 0.5]), negative_slope=d.pick([0.0, 0.1]),
                      threshold=d.pick([0.0, 0.1])), shape
    if kind == "softmax":
        return L.Softmax(), shape
    if kind == "dropout":
        return L.Dropout(d.num(0.1, 0.5)), shape
    if kind == "sdropout":
        return L.SpatialDropout2D(d.num(0.1, 0.5)), shape
    if kind == "flip":
        return L.RandomFlip(d.pick(["horizontal", "vertical", "horizontal_and_vertical"])), shape
    if kind == "rescale":
        return L.Rescaling(d.num(0.2, 2.0), offset=d.num(-0.5, 0.5)), shape
    if kind == "norm":
        c = shape[-1]
        # one mean and variance for all, or one per channel: at most 8, [normalization]'s limit
        # (docs/usage.md: mean, variance "up to 8 numbers"; more is refused)
        if d.chance(0.5) or c > 8:
            mean, var = d.num(-0.5, 0.5), d.num(0.5, 2.0)
        else:
            mean, var = [d.num(-0.5, 0.5) for _ in range(c)], [d.num(0.5, 2.0) for _ in range(c)]
        return L.Normalization(mean=mean, variance=var), shape
    raise ValueError(kind)


def vector_layer(d, L, shape):
    (n,) = shape
    kind = d.pick(["dense", "dense", "dense", "bn", "ln", "act", "relu", "softmax", "dropout",
                   "rescale", "norm"])
    if kind == "dense":
        u = d.int(2, 10)
        return L.Dense(u, activation=d.pick(FUSED), use_bias=d.chance(0.8)), (u,)
    return any_layer(d, L, kind, shape)


def to_vector(d, L, shape):
    if len(shape) == 1:
        return None
    kind = d.pick(["flatten", "flatten", "gap", "gmp"])
    if kind == "flatten":
        return L.Flatten(), (shape[0] * shape[1] * shape[2],)
    return (L.GlobalAveragePooling2D() if kind == "gap" else L.GlobalMaxPooling2D()), (shape[2],)


def to_image(d, L, shape):
    """Reshape of a vector into an image where its size factors."""
    (n,) = shape
    for h in (3, 2):
        if n % h == 0 and n // h >= 2:
            w = d.pick([x for x in (1, 2, 3) if (n // h) % x == 0])
            return L.Reshape((h, w, n // h // w)), (h, w, n // h // w)
    return None


def step(d, L, shape):
    """One layer after `shape`: (layer, shape)."""
    for _ in range(20):
        if len(shape) == 3:
            got = image_layer(d, L, shape) if not d.chance(0.12) else to_vector(d, L, shape)
        else:
            got = vector_layer(d, L, shape) if not d.chance(0.08) else to_image(d, L, shape)
        if got is not None:
            return got
    raise RuntimeError("no layer fits")


def branch_pair(d, L, shape):
    """Two branches from one tensor, merged: (fn(x) -> y, shape). Add takes equal shapes:
    a branch keeps its shape (a same conv of as many filters, a Dense of as many units, a
    normalisation, an activation); Concatenate joins on the channels."""
    concat = d.chance(0.5)

    def keep(x_shape):
        if len(x_shape) == 3:
            if concat:
                f = d.int(1, 4)
                return L.Conv2D(f, d.int(1, 3), padding="same", activation=d.pick(FUSED)), \
                    x_shape[:2] + (f,)
            kind = d.pick(["conv", "depthwise", "bn", "ln", "act", "relu", "maxpool"])
            if kind == "conv":
                return L.Conv2D(x_shape[2], d.int(1, 3), padding="same",
                                activation=d.pick(FUSED)), x_shape
            if kind == "depthwise":
                return L.DepthwiseConv2D(d.int(1, 3), padding="same"), x_shape
            if kind == "maxpool":
                return L.MaxPooling2D(d.int(2, 3), strides=1, padding="same"), x_shape
            return any_layer(d, L, kind, x_shape)
        if concat:
            u = d.int(2, 6)
            return L.Dense(u, activation=d.pick(FUSED)), (u,)
        kind = d.pick(["dense", "bn", "ln", "act", "relu"])
        if kind == "dense":
            return L.Dense(x_shape[0], activation=d.pick(FUSED)), x_shape
        return any_layer(d, L, kind, x_shape)

    a_layer, a_shape = keep(shape)
    identity = d.chance(0.4)
    b_layer, b_shape = (None, shape) if identity else keep(shape)
    if concat:
        out = a_shape[:-1] + (a_shape[-1] + b_shape[-1],)
        merge = L.Concatenate()
    else:
        out, merge = shape, L.Add()

    def apply(x):
        return merge([a_layer(x), x if b_layer is None else b_layer(x)])
    return apply, out


def build(keras, d, functional):
    """A compiled random model and its input shape."""
    L = keras.layers
    shape = (d.int(4, 9), d.int(4, 9), d.int(1, 3)) if d.chance(0.65) else (d.int(3, 12),)
    inp = keras.Input(shape)
    x, s = inp, shape
    layers = []
    for _ in range(d.int(1, 6)):
        if functional and d.chance(0.4):
            fn, s = branch_pair(d, L, s)
            x = fn(x)
        else:
            layer, s = step(d, L, s)
            layers.append(layer)
            x = layer(x)
    got = to_vector(d, L, s)
    if got is not None:
        layer, s = got
        layers.append(layer)
        x = layer(x)
    head = L.Dense(d.int(2, 6), activation=d.pick(["softmax", "softmax", "sigmoid", "linear"]))
    layers.append(head)
    x = head(x)
    if functional:
        model = keras.Model(inp, x)
    else:
        model = keras.Sequential([inp] + layers)
    model.compile(optimizer="adam", loss="mse")
    return model, shape


def draw_weights(model, d, np):
    """Every weight drawn (BatchNorm's moving variance and LayerNorm's gamma away from 0)."""
    for layer in model.layers:
        ws = layer.get_weights()
        if not ws:
            continue
        cls = type(layer).__name__
        new = []
        for v, w in zip(layer.weights, ws):
            name = v.path.split("/")[-1]
            if cls == "Normalization":
                new.append(w)
            elif name in ("gamma", "moving_variance"):
                new.append(d.r.uniform(0.5, 1.5, w.shape).astype(np.float32))
            else:
                new.append(d.r.uniform(-0.6, 0.6, w.shape).astype(np.float32))
        layer.set_weights(new)


def deflate(path):
    """Keras stores the archive's members uncompressed (about 30 KB a model, mostly the
    .h5's empty space); the same members, byte for byte, deflated (about 4 KB), which Keras
    and our reader (libzip) both read. The members' dates are fixed (1980-01-01); what Keras
    writes still varies between recordings only in metadata.json's date_saved and
    config.json's shared_object_id (Python object ids), never in the weights."""
    import zipfile

    with zipfile.ZipFile(path) as z:
        members = [(i, z.read(i.filename)) for i in z.infolist()]
    with zipfile.ZipFile(path, "w") as z:
        for info, data in members:
            info.date_time = (1980, 1, 1, 0, 0, 0)
            z.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)


def layer_summary(model):
    return [type(layer).__name__ for layer in model.layers]


def legacy_h5(a, np, keras, golden, work):
    """A Normalization(mean=..., variance=...) in a legacy .h5 (model.save("x.h5")): Keras
    writes its group with no weights (the statistics are config); it was refused ("the layers
    differ") before mirrored read them from the config. True if ours agrees."""
    keras.backend.clear_session()
    keras.utils.set_random_seed(a.seed)
    L = keras.layers
    model = keras.Sequential([keras.Input((4,)),
                              L.Normalization(mean=[0.1, 0.2, 0.3, 0.4], variance=[1, 2, 3, 4]),
                              L.Dense(5, activation="tanh"), L.LayerNormalization(),
                              L.Dense(3, activation="softmax")])
    model.compile(optimizer="adam", loss="mse")
    x = np.random.default_rng(a.seed).uniform(-1, 1, (ROWS, 4)).astype(np.float32)
    np.save(os.path.join(work, "normalization_x.npy"), x)
    model.save(os.path.join(work, "normalization.h5"))
    pred = model.predict(x, batch_size=ROWS, verbose=0)
    run = ["mirrored_eval", "{golden}/normalization.h5", "--data", "{golden}/normalization_x.npy",
           "--devices", "cpu", "--quiet", "--predict", "{out}/normalization.npy"]
    p = run_ours(a.build, run, work, a.out, check=False, capture_output=True, text=True)
    ok = p.returncode == 0
    if ok:
        err = np.abs(np.load(os.path.join(a.out, "normalization.npy")) - pred)
        ok = float(np.max(err - RTOL * np.abs(pred))) <= ATOL
        print(f"normalization.h5 (legacy .h5: Normalization(mean, variance)): max |ours - keras| "
              f"{float(err.max()):.3g}")
    else:
        print(f"normalization.h5: REFUSED (exit {p.returncode}): {p.stderr.strip()}")
    if golden:
        golden.case("normalization_h5", [run], [{
            "name": "predictions of a legacy .h5 with Normalization(mean, variance)",
            "array": "{out}/normalization.npy", "keras": golden.array("normalization", pred),
            "abs": ATOL, "rel": RTOL}])
    return ok


def check(a, np, keras, golden, work):
    failed, classes = [], {}
    for i in range(a.first, a.first + a.count):
        keras.backend.clear_session()
        keras.utils.set_random_seed(a.seed * 1000 + i)
        d = Draw(a.seed, i)
        functional = i % 2 == 1
        model, shape = build(keras, d, functional)
        draw_weights(model, d, np)
        name = f"m{i:03d}"
        x = d.r.uniform(-1, 1, (ROWS,) + shape).astype(np.float32)
        np.save(os.path.join(work, f"{name}_x.npy"), x)
        path = os.path.join(work, f"{name}.keras")
        model.save(path)
        deflate(path)
        pred = model.predict(x, batch_size=ROWS, verbose=0)
        again = keras.models.load_model(path).predict(x, batch_size=ROWS, verbose=0)
        assert np.array_equal(again, pred), f"{name}: Keras's reload of the deflated archive"
        kinds = layer_summary(model)
        for k in kinds:
            classes[k] = classes.get(k, 0) + 1
        run = ["mirrored_eval", f"{{golden}}/{name}.keras", "--data", f"{{golden}}/{name}_x.npy",
               "--devices", "cpu", "--quiet", "--predict", f"{{out}}/{name}.npy"]
        p = run_ours(a.build, run, work, a.out, check=False, capture_output=True, text=True)
        desc = f"{name} ({'Functional' if functional else 'Sequential'}: {' '.join(kinds[1:])})"
        if p.returncode != 0:
            msg = (p.stderr or p.stdout).strip().splitlines()
            print(f"{desc}: REFUSED (exit {p.returncode}): {msg[-1] if msg else ''}")
            failed.append(name)
        else:
            ours = np.load(os.path.join(a.out, f"{name}.npy"))
            if ours.shape != pred.shape:
                print(f"{desc}: shape {ours.shape} against Keras's {pred.shape}")
                failed.append(name)
            else:
                err = np.abs(ours - pred)
                excess = float(np.max(err - RTOL * np.abs(pred)))
                ok = excess <= ATOL
                print(f"{desc}: max |ours - keras| {float(err.max()):.3g}"
                      f"{'' if ok else '  MISMATCH'}")
                if not ok:
                    failed.append(name)
        if golden:
            golden.case(name, [run], [{
                "name": f"predictions of {desc}", "array": f"{{out}}/{name}.npy",
                "keras": golden.array(name, pred), "abs": ATOL, "rel": RTOL}])
    if a.first == 0 and not legacy_h5(a, np, keras, golden, work):
        failed.append("normalization.h5")
    print("layers covered:", ", ".join(f"{k} {n}" for k, n in sorted(classes.items())))
    if golden:
        golden.write(notes=f"seed {a.seed}: {a.count} random models from m{a.first:03d}; "
                     f"predictions within rel {RTOL} + abs {ATOL}")
    if failed:
        print(f"DISAGREE: {len(failed)} of {a.count}: {' '.join(failed)}")
        return 1
    print(f"agree: {a.count} models")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--record", action="store_true",
                    help="written as golden files (tests/golden/keras/random/, --all: random_all/)")
    ap.add_argument("--all", action="store_true",
                    help="the fuzz-phase set: the 200 models after CI's 40 (m040 to m239)")
    ap.add_argument("--count", type=int)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--keep", help="write the models and inputs here (no --record)")
    a = ap.parse_args()
    a.count = a.count or (200 if a.all else 40)
    a.first = 40 if a.all else 0
    import numpy as np
    import keras
    with tempfile.TemporaryDirectory() as out, tempfile.TemporaryDirectory() as work:
        a.out = out
        golden = (Golden("random_all", "bench/keras_random.py --record --all") if a.all
                  else Golden("random")) if a.record else None
        if a.keep:
            os.makedirs(a.keep, exist_ok=True)
        return check(a, np, keras, golden, golden.dir if golden else (a.keep or work))


if __name__ == "__main__":
    sys.exit(main())
