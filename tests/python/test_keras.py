"""mirrored <-> a live Keras model (skipped where keras is not installed)."""
import numpy as np
import pytest

keras = pytest.importorskip("keras")

import mirrored  # noqa: E402
from conftest import CLASSES, FEATURES, dense_cfg  # noqa: E402


def keras_model():
    k = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(16, activation="relu"),
                          keras.layers.Dense(CLASSES, activation="softmax")], name="kdense")
    k.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return k


def test_from_keras_predicts_as_keras(data):
    x, _ = data
    k = keras_model()
    m = mirrored.Model.from_keras(k)
    assert m.info.params == k.count_params()
    np.testing.assert_allclose(m.predict(x), k.predict(x, verbose=0), atol=1e-4)


def test_to_keras_after_fit(data):
    x, y = data
    m = mirrored.Model.from_config(dense_cfg(epochs=2), name="tiny")
    m.fit(x, y, verbose=0)
    k = m.to_keras()
    assert isinstance(k, keras.Model)
    np.testing.assert_allclose(k.predict(x, verbose=0), m.predict(x), atol=1e-4)


def test_from_keras_fit_to_keras(data):
    """A live Keras model through from_keras, fit on 2 replicas, to_keras:
    Keras's predict of the trained model is ours."""
    x, y = data
    m = mirrored.Model.from_keras(keras_model())
    h = m.fit(x, y, epochs=2, batch_size=32, validation_split=0.1, devices="cpu:2", verbose=0)
    assert len(h.history["val_accuracy"]) == 2
    k = m.to_keras()
    assert isinstance(k, keras.Sequential)
    np.testing.assert_allclose(k.predict(x, verbose=0), m.predict(x), atol=1e-4)


def test_keras_cnn_round_trip():
    """A small Keras CNN: from_keras, fit, to_keras; predictions agree."""
    rng = np.random.default_rng(1)
    x = rng.integers(0, 255, size=(256, 8, 8, 1)).astype(np.uint8)
    y = (x[:, :4].mean(axis=(1, 2, 3)) > x[:, 4:].mean(axis=(1, 2, 3))).astype(np.int32)
    k = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Rescaling(1 / 255),
                          keras.layers.Conv2D(4, 3, activation="relu"),
                          keras.layers.MaxPooling2D(), keras.layers.Flatten(),
                          keras.layers.Dense(2, activation="softmax")])
    k.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    m = mirrored.Model.from_keras(k)
    np.testing.assert_allclose(m.predict(x), k.predict(x, verbose=0), atol=1e-4)
    m.fit(x, y, epochs=2, batch_size=32, devices="cpu:2", verbose=0)
    back = m.to_keras()
    np.testing.assert_allclose(back.predict(x, verbose=0), m.predict(x), atol=1e-4)
