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


def test_from_keras_fit(data):
    x, y = data
    m = mirrored.Model.from_keras(keras_model())
    h = m.fit(x, y, epochs=2, batch_size=32, validation_split=0.1, verbose=0)
    assert len(h.history["val_accuracy"]) == 2
