"""Keras's save_weights and load_weights (issue 44 point 6: save("w.weights.h5")
wrote a full checkpoint that Keras's load_weights could not read): the
PATH.weights.h5 file is Keras's weights-only format."""
import numpy as np
import pytest

import mirrored
from conftest import dense_cfg


def fitted(data):
    x, y = data
    m = mirrored.Model.from_config(dense_cfg(epochs=1), name="tiny")
    m.fit(x, y, verbose=0, devices="cpu:2")
    return m


def test_save_weights_then_load_weights(tmp_path, data):
    m = fitted(data)
    m.save_weights(tmp_path / "m.weights.h5")
    fresh = mirrored.Model.from_config(dense_cfg(epochs=1), name="tiny")
    assert any(np.any(a != b) for a, b in zip(fresh.get_weights(), m.get_weights()))
    fresh.load_weights(tmp_path / "m.weights.h5")
    for a, b in zip(fresh.get_weights(), m.get_weights()):
        np.testing.assert_array_equal(a, b)
    x, _ = data
    # other devices: the loaded weights move with the replicas
    np.testing.assert_array_equal(fresh.predict(x, devices="cpu:1"), m.predict(x, devices="cpu:1"))
    # save("...weights.h5") is the same file, not a checkpoint
    m.save(tmp_path / "same.weights.h5")
    with pytest.raises(mirrored.Error):
        mirrored.load(tmp_path / "same.weights.h5")


def test_save_weights_names_the_suffix(tmp_path, data):
    m = fitted(data)
    with pytest.raises(mirrored.InvalidArgumentError) as e:
        m.save_weights(tmp_path / "m.h5")
    assert ".weights.h5" in str(e.value)
    other = mirrored.Model.from_config(dense_cfg(epochs=1, units=5), name="wide")
    m.save_weights(tmp_path / "m.weights.h5")
    with pytest.raises(mirrored.Error) as e:
        other.load_weights(tmp_path / "m.weights.h5")
    assert "m.weights.h5" in str(e.value), str(e.value)


keras = pytest.importorskip("keras", reason="keras is not importable in this python "
                            "(Keras 3 reads the files in the tests below)")


def test_keras_reads_our_weights_file(tmp_path, data):
    m = fitted(data)
    m.save(tmp_path / "m.keras")
    m.save_weights(tmp_path / "m.weights.h5")
    k = keras.models.load_model(tmp_path / "m.keras")
    k.set_weights([np.zeros_like(w) for w in k.get_weights()])
    k.load_weights(tmp_path / "m.weights.h5")
    for a, b in zip(k.get_weights(), m.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_we_read_keras_weights_file(tmp_path, data):
    m = fitted(data)
    m.save(tmp_path / "m.keras")
    k = keras.models.load_model(tmp_path / "m.keras")
    k.set_weights([w * 0.5 + 0.25 for w in k.get_weights()])
    k.save_weights(tmp_path / "k.weights.h5")
    m.load_weights(tmp_path / "k.weights.h5")
    for a, b in zip(m.get_weights(), k.get_weights()):
        np.testing.assert_array_equal(a, b)
    # and get_weights of a file equals Keras's load_model(f).get_weights()
    back = mirrored.load(tmp_path / "m.keras")
    for a, b in zip(back.get_weights(), keras.models.load_model(tmp_path / "m.keras")
                    .get_weights()):
        np.testing.assert_array_equal(a, b)
