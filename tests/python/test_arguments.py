"""fit's arguments checked in Python's terms before they reach C: integers
range-checked at any width, fractions refused when NaN or out of [0, 1),
class ids outside the model's classes refused at any width, and epochs=0
trains nothing, as in Keras."""
import numpy as np
import pytest

import mirrored
from conftest import CLASSES, dense_cfg, separable


def model():
    return mirrored.Model.from_config(dense_cfg(), name="tiny")


@pytest.mark.parametrize("name, value", [
    ("epochs", -1), ("epochs", 2**31), ("epochs", 1.5), ("epochs", True),
    ("batch_size", 0), ("batch_size", 2**32 + 16), ("seed", -1), ("seed", 2**63),
    ("max_steps", 0), ("validation_split", float("nan")), ("validation_split", -0.1),
    ("validation_split", 1.0),
])
def test_bad_numbers_refused(name, value):
    x, y = separable(64)
    m = model()
    args = {"epochs": 1, name: value}
    with pytest.raises(mirrored.InvalidArgumentError) as e:
        m.fit(x, y, verbose=0, devices="cpu", **args)
    assert f"fit: {name}=" in str(e.value), str(e.value)


def test_epochs_zero_trains_nothing():
    x, y = separable(64)
    m = model()
    before = m.predict(x, devices="cpu")
    h = m.fit(x, y, epochs=0, verbose=0, devices="cpu")
    assert h.epoch == [] and h.history == {} and h.params["epochs"] == 0
    assert np.array_equal(m.predict(x, devices="cpu"), before)


@pytest.mark.parametrize("dtype, value", [
    (np.int64, 2**32 + 1), (np.uint64, 2**63 + 1), (np.int64, -(2**32)), (np.int8, CLASSES),
    (np.float64, 2.0**32 + 1),
])
def test_labels_outside_the_classes_refused(dtype, value):
    """int64 labels 2**32 + k trained as class k: any width is checked."""
    x, y = separable(64)
    bad = y.astype(dtype)
    bad[5] = value
    with pytest.raises(mirrored.DataError) as e:
        model().fit(x, bad, epochs=1, verbose=0, devices="cpu")
    text = str(e.value)
    assert f"at row 5 is not a class id of this model (0 to {CLASSES - 1})" in text, text


def test_epochs_past_int_range_refused():
    """epochs go on from the model's: 2**31 - 1 more after one overflowed
    (UBSan) and returned success having trained nothing."""
    x, y = separable(64)
    m = model()
    m.fit(x, y, epochs=1, verbose=0, devices="cpu")
    with pytest.raises(mirrored.InvalidArgumentError) as e:
        m.fit(x, y, epochs=2**31 - 1, verbose=0, devices="cpu")
    assert "after the model's 1: more than 2147483647 in all" in str(e.value), str(e.value)
