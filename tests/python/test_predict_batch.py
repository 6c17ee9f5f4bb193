"""Keras's batch_size for evaluate and predict: the rows of one step over
the replicas, which bound the memory for activations whatever the width of
the input (issue 47 N21: a wide input's predict of one row grew to 23 GB
and was killed; issue 44: predict(batch_size=) and evaluate(batch_size=))."""
import numpy as np
import pytest

import mirrored
from conftest import CLASSES, dense_cfg, separable


def test_batch_size_gives_the_same_outputs(data):
    x, y = data
    m = mirrored.Model.from_config(dense_cfg(epochs=1), name="tiny")
    m.fit(x, y, devices="cpu:1", verbose=0)
    want = m.predict(x, devices="cpu:1")
    for b in (1, 7, 600):
        np.testing.assert_allclose(m.predict(x, batch_size=b, devices="cpu:1"), want,
                                   rtol=1e-6, atol=1e-7)
    loss, acc = m.evaluate(x, y, verbose=0, devices="cpu:1")
    loss7, acc7 = m.evaluate(x, y, batch_size=7, verbose=0, devices="cpu:1")
    assert acc7 == acc and abs(loss7 - loss) < 1e-6 * max(1.0, abs(loss))
    # the fit's replicas are rebuilt for it, then the weights go on
    h = m.fit(x, y, devices="cpu:1", verbose=0)
    assert len(h.history["loss"]) == 1


def test_batch_size_refused_by_name(data):
    x, y = data
    m = mirrored.Model.from_config(dense_cfg(epochs=1), name="tiny")
    for bad in (0, -1, 2**31, 1.5):
        with pytest.raises(mirrored.InvalidArgumentError) as e:
            m.predict(x, batch_size=bad)
        assert "predict: batch_size=" in str(e.value), str(e.value)
    with pytest.raises(mirrored.InvalidArgumentError) as e:
        m.evaluate(x, y, batch_size=3, devices="cpu:2", verbose=0)
    assert "batch_size=3" in str(e.value), str(e.value)


def available_bytes():
    with open("/proc/meminfo") as f:
        kib = {l.split(":")[0]: int(l.split()[1]) for l in f if l.split()[1].isdigit()}
    return (kib["MemAvailable"] + kib.get("SwapFree", 0)) * 1024


def test_wide_input_one_row_is_bounded_by_the_batch():
    """A (1024, 1024, 1) input through 8 filters: 8 Mi floats a row for
    the conv's output and for each gradient buffer. At a batch whose
    buffers exceed what the machine can give, predict is refused in one
    line (MemoryError), not killed; batch_size=1 predicts the row."""
    row = 8 * 1024 * 1024 * 4
    batch = available_bytes() // (2 * row) + 1
    cfg = (f"[net]\nglobal_batch = {batch}\nseed = 1\n[input]\nshape = 1024,1024,1\n"
           "[conv2d]\nfilters = 8\nsize = 3\npadding = same\n[globalavgpool]\n"
           f"[dense]\nunits = {CLASSES}\nactivation = softmax\n")
    m = mirrored.Model.from_config(cfg, name="wide")
    x = np.random.default_rng(0).random((1, 1024, 1024, 1), dtype=np.float32)
    with pytest.raises(MemoryError) as e:
        m.predict(x, devices="cpu:1")
    assert "out of memory for the model at batch" in str(e.value), str(e.value)
    p = m.predict(x, batch_size=1, devices="cpu:1")
    assert p.shape == (1, CLASSES) and abs(float(p.sum()) - 1.0) < 1e-5
