"""save(".keras") carries the .cfg's [data] scale as a Keras Rescaling
layer after the input, so the saved model takes the raw inputs and
evaluates as it did: reloaded here (the importer makes it a [rescaling]
layer), and in Keras, which reads the same config.json."""
import json
import zipfile

import numpy as np
import pytest

import mirrored
from conftest import separable

NET = "[net]\nglobal_batch = 32\nepochs = 2\noptimizer = adam\nlearning_rate = 0.01\nseed = 1\n"
DATA = "[data]\ntrain_images =\nscale = {scale}\n"
HEAD = "[input]\nshape = 8\n"
TAIL = "[dense]\nunits = 3\nactivation = softmax\n"
BODIES = {
    "sequential": "[dense]\nunits = 16\nactivation = relu\n",
    # a [rescaling] of its own: its archive group is counted after the data scale's
    "own_rescaling": "[rescaling]\nscale = 2\n[dense]\nunits = 16\nactivation = relu\n",
    # a graph: a Functional, the first layer's input the data scale's tensor
    "functional": "[dense]\nname = a\nunits = 8\nactivation = relu\n[dense]\nunits = 8\n"
                  "[add]\nfrom = a\n",
}


def layers_of(path):
    with zipfile.ZipFile(path) as z:
        return json.loads(z.read("config.json"))["config"]["layers"]


@pytest.mark.parametrize("body", sorted(BODIES))
def test_keras_save_keeps_data_scale(body, tmp_path):
    x, y = separable()
    x = (x * 100).astype(np.float32)  # raw inputs: the .cfg scales them by 0.01
    cfg = NET + DATA.format(scale=0.01) + HEAD + BODIES[body] + TAIL
    with mirrored.Model.from_config(cfg, name="scaled") as m:
        m.fit(x, y, verbose=0, devices="cpu:1")
        want = m.evaluate(x, y, verbose=0)
        p = m.predict(x[:16])
        m.save(tmp_path / "s.keras")
    first = layers_of(tmp_path / "s.keras")[1]
    assert first["class_name"] == "Rescaling", first
    assert first["config"]["scale"] == pytest.approx(0.01) and first["config"]["offset"] == 0
    with mirrored.load(tmp_path / "s.keras") as back:
        got = back.evaluate(x, y, verbose=0)
        assert got == pytest.approx(want, rel=1e-5)
        np.testing.assert_allclose(back.predict(x[:16]), p, rtol=1e-5, atol=1e-6)
        back.save(tmp_path / "again.keras")  # its own [rescaling] now: the same file's model
    assert len(layers_of(tmp_path / "again.keras")) == len(layers_of(tmp_path / "s.keras"))
    with mirrored.load(tmp_path / "again.keras") as again:
        assert again.evaluate(x, y, verbose=0) == pytest.approx(want, rel=1e-5)


def test_no_scale_no_layer(tmp_path):
    x, y = separable()
    cfg = NET + HEAD + BODIES["sequential"] + TAIL
    with mirrored.Model.from_config(cfg, name="plain") as m:
        m.save(tmp_path / "p.keras")
    assert [l["class_name"] for l in layers_of(tmp_path / "p.keras")] == \
        ["InputLayer", "Dense", "Dense"]
