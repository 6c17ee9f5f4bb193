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
  - lstm: a Sequential with Conv1D and LSTM (refused: not supported).
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--record", required=True, metavar="DIR")
    out = ap.parse_args().record
    os.makedirs(out, exist_ok=True)
    for name, make in [("cnn", cnn), ("residual", residual), ("lstm", lstm)]:
        m, x = make()
        m.save(os.path.join(out, name + ".keras"))
        m.save(os.path.join(out, name + ".h5"))
        if x is not None:
            np.save(os.path.join(out, name + ".x.npy"), x)
            np.save(os.path.join(out, name + ".predict.npy"),
                    m.predict(x, verbose=0).astype(np.float32))


if __name__ == "__main__":
    main()
