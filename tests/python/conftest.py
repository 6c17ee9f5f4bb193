"""Shared pieces of the tests of the Python package: small .cfg texts and
separable synthetic data, so that a few epochs train in well under a second."""
import numpy as np
import pytest

CLASSES = 3
FEATURES = 8


def dense_cfg(epochs=3, loss=None, units=CLASSES, activation="softmax", data=""):
    """A dense model of FEATURES inputs; data: a [data] section's text."""
    net = f"[net]\nglobal_batch = 32\nepochs = {epochs}\noptimizer = adam\n" \
          f"learning_rate = 0.01\nseed = 1\n"
    if loss:
        net += f"loss = {loss}\n"
    # no [data]: fit takes arrays
    return (net + data + f"[input]\nshape = {FEATURES}\n[dense]\nunits = 16\n"
            f"activation = relu\n[dense]\nunits = {units}\nactivation = {activation}\n")


def separable(n=600, seed=0):
    """x (n, FEATURES) float32, y (n) int64: the class is the argmax of the
    first CLASSES features."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, FEATURES)).astype(np.float32)
    y = np.argmax(x[:, :CLASSES], axis=1).astype(np.int64)
    return x, y


@pytest.fixture
def data():
    return separable()


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    """Runs the test in its own temporary working folder."""
    monkeypatch.chdir(tmp_path)
    return tmp_path
