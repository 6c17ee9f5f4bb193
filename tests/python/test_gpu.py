"""On GPU replicas (emulated ones in a -Dgpu_emulation=true build, where the
meson test python_gpu sets MIRRORED_EXPECT_GPUS=1 so that none found is a
failure): fit on the GPUs, save a checkpoint, and the checkpoint evaluates
and predicts on the CPU as the GPUs did."""
import os

import numpy as np
import pytest

import mirrored
from conftest import dense_cfg


def gpus():
    return [d for d in mirrored.list_devices() if d.startswith("gpu:")]


def test_gpu_checkpoint_on_cpu(data, in_tmp):
    found = gpus()
    if not found:
        if os.environ.get("MIRRORED_EXPECT_GPUS"):
            pytest.fail(f"no GPU among {mirrored.list_devices()}")
        pytest.skip("no GPU here")
    x, y = data
    devices = "gpu:0,1" if len(found) > 1 else "gpu:0"
    m = mirrored.Model.from_config(dense_cfg(epochs=2), name="tiny")
    h = m.fit(x, y, validation_split=0.2, devices=devices, verbose=0)
    assert len(h.history["val_loss"]) == 2
    on_gpu = m.predict(x)
    m.save("gpu.h5")
    cpu = mirrored.load("gpu.h5")
    np.testing.assert_allclose(cpu.predict(x, devices="cpu"), on_gpu, atol=1e-4)
    loss, accuracy = cpu.evaluate(x, y, devices="cpu:2", verbose=0)
    assert accuracy > 0.5 and np.isfinite(loss)
    # the weights the load read on the host go to GPU replicas too
    with mirrored.load("gpu.h5") as back:
        np.testing.assert_allclose(back.predict(x, devices=devices), on_gpu, atol=1e-4)
