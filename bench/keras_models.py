#!/usr/bin/env python3
"""Writes the Keras model files that mirrored_train and mirrored_eval take as the model
(models/keras_import.c), and what Keras predicts with them.

    /work/venv-tf/bin/python bench/keras_models.py --record tests/golden/keras_models

Per model NAME: NAME.keras and NAME.h5 (model.save of the same model), and x.npy (inputs,
float32) with NAME.predict.npy (Keras's model.predict(x), float32). Models:
  - cnn: a Sequential CNN (Rescaling, Conv2D, MaxPooling2D, Flatten, Dropout, Dense softmax),
    compiled with Adam(learning_rate=0.002) and sparse_categorical_crossentropy, metric accuracy;
  - residual: a Functional with Add, Concatenate and a linear last layer (logits), compiled with
    SGD(momentum=0.9, nesterov=True) and SparseCategoricalCrossentropy(from_logits=True);
  - lstm: a Sequential with Conv1D and LSTM (refused: not supported);
  - mobile: a Functional with a MobileNetV2-style stem and inverted residual block
    (ZeroPadding2D((0, 1), (0, 1)), Conv2D use_bias=False, BatchNormalization of random moving
    statistics, ReLU(6), DepthwiseConv2D, Add) and SpatialDropout2D, Reshape,
    GlobalMaxPooling2D, a leaky thresholded ReLU and a Softmax layer (.keras only).
--only NAME writes one model (the others' files are left as they are).
Training data for a fit is the caller's (--synthetic, --data)."""
import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402
import keras  # noqa: E402


def cnn():
    keras.utils.set_random_seed(1)
    m = keras.Sequential([
        keras.Input((8, 8, 1)),
        keras.layers.Rescaling(1.0 / 255),
        keras.layers.Conv2D(4, (3, 3), activation="relu", padding="same"),
        keras.layers.MaxPooling2D((2, 2)),
        keras.layers.Flatten(),
        keras.layers.Dropout(0.25),
        keras.layers.Dense(3, activation="softmax"),
    ], name="small_cnn")
    m.compile(optimizer=keras.optimizers.Adam(learning_rate=0.002),
              loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    x = np.random.default_rng(1).integers(0, 256, (16, 8, 8, 1)).astype(np.float32)
    return m, x


def residual():
    keras.utils.set_random_seed(2)
    inp = keras.Input((6,), name="features")
    h = keras.layers.Dense(8, activation="relu", name="hidden")(inp)
    g = keras.layers.Dense(8, activation="tanh", name="gate")(h)
    s = keras.layers.Add(name="sum")([h, g])
    c = keras.layers.Concatenate(name="join")([s, h])
    out = keras.layers.Dense(4, name="logits")(c)
    m = keras.Model(inp, out, name="residual")
    m.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05, momentum=0.9, nesterov=True),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
    x = np.random.default_rng(2).standard_normal((16, 6)).astype(np.float32)
    return m, x


def lstm():
    keras.utils.set_random_seed(3)
    m = keras.Sequential([
        keras.Input((10, 3)),
        keras.layers.Conv1D(4, 3, activation="relu"),
        keras.layers.LSTM(5),
        keras.layers.Dense(2, activation="softmax"),
    ], name="sequence")
    m.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return m, None


def bn(name):
    return keras.layers.BatchNormalization(epsilon=1e-3, momentum=0.999, name=name)


def mobile():
    keras.utils.set_random_seed(4)
    L = keras.layers
    inp = keras.Input((8, 8, 3), name="image")
    x = L.ZeroPadding2D(((0, 1), (0, 1)), name="stem_pad")(inp)
    x = L.Conv2D(8, 3, strides=2, use_bias=False, name="stem_conv")(x)
    x = bn("stem_bn")(x)
    skip = L.ReLU(6.0, name="stem_relu")(x)
    x = L.Conv2D(16, 1, use_bias=False, name="expand")(skip)
    x = bn("expand_bn")(x)
    x = L.ReLU(6.0, name="expand_relu")(x)
    x = L.DepthwiseConv2D(3, padding="same", use_bias=False, name="depthwise")(x)
    x = bn("depthwise_bn")(x)
    x = L.ReLU(6.0, name="depthwise_relu")(x)
    x = L.Conv2D(8, 1, use_bias=False, name="project")(x)
    x = bn("project_bn")(x)
    x = L.Add(name="block_add")([skip, x])
    x = L.SpatialDropout2D(0.2, name="channel_drop")(x)
    x = L.DepthwiseConv2D(2, strides=2, depth_multiplier=2, name="dw_down")(x)
    x = L.Activation("relu", name="act")(x)
    x = L.Reshape((4, 4, 4), name="regroup")(x)
    x = L.GlobalMaxPooling2D(name="gmp")(x)
    x = L.Dense(6, name="hidden")(x)
    x = L.ReLU(negative_slope=0.1, threshold=0.05, name="leaky")(x)
    x = L.Dense(3, name="logits")(x)
    out = L.Softmax(name="probs")(x)
    m = keras.Model(inp, out, name="mobile")
    m.compile(optimizer=keras.optimizers.Adam(learning_rate=0.001),
              loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    rng = np.random.default_rng(4)
    for layer in m.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            c = layer.get_weights()[0].shape
            layer.set_weights([rng.uniform(0.5, 1.5, c), rng.uniform(-0.2, 0.2, c),
                               rng.uniform(-0.2, 0.2, c), rng.uniform(0.5, 2.0, c)])
    x = rng.standard_normal((8, 8, 8, 3)).astype(np.float32)
    return m, x


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--record", required=True, metavar="DIR")
    ap.add_argument("--only", metavar="NAME", help="one model: cnn, residual, lstm or mobile")
    a = ap.parse_args()
    out = a.record
    os.makedirs(out, exist_ok=True)
    models = [("cnn", cnn), ("residual", residual), ("lstm", lstm), ("mobile", mobile)]
    for name, make in models:
        if a.only and name != a.only:
            continue
        m, x = make()
        m.save(os.path.join(out, name + ".keras"))
        if name != "mobile":
            m.save(os.path.join(out, name + ".h5"))
        if x is not None:
            np.save(os.path.join(out, name + ".x.npy"), x)
            np.save(os.path.join(out, name + ".predict.npy"),
                    m.predict(x, verbose=0).astype(np.float32))


if __name__ == "__main__":
    main()
