"""Errors are worded by the face: the library and the Python package name
Keras's arguments (devices='gpu', batch_size=64), never the command line's
flags, and mirrored_train names its flags (--devices, --batch-size) for the
same mistakes."""
import os
import subprocess

import numpy as np
import pytest

import mirrored
from conftest import dense_cfg, separable


def model():
    return mirrored.Model.from_config(dense_cfg(), name="tiny")


def no_flag(text):
    """No word of the command line in a Python error."""
    return "--" not in text


def has_gpu():
    return any(d.startswith("gpu") for d in mirrored.list_devices())


def test_fit_on_gpu_without_one():
    if has_gpu():
        pytest.skip("a GPU is here: nothing to refuse")
    x, y = separable(96)
    with pytest.raises(Exception) as e:
        model().fit(x, y, epochs=1, devices="gpu", verbose=0)
    text = str(e.value)
    assert "devices='gpu'" in text and "no GPU available" in text, text
    assert "devices='cpu'" in text and no_flag(text), text


def test_batch_size_that_does_not_divide():
    x, y = separable(96)
    with pytest.raises(Exception) as e:
        model().fit(x, y, epochs=1, batch_size=64, devices="cpu:3", verbose=0)
    text = str(e.value)
    assert "batch_size=64 does not divide evenly over 3 replicas" in text, text
    assert "global_batch" not in text and no_flag(text), text


def test_batch_size_smaller_than_the_replicas():
    x, y = separable(96)
    with pytest.raises(Exception) as e:
        model().fit(x, y, epochs=1, batch_size=2, devices="cpu:3", verbose=0)
    text = str(e.value)
    assert "batch_size=2 is smaller than 3 replicas" in text and no_flag(text), text


def test_unknown_devices():
    x, _ = separable(8)
    with pytest.raises(Exception) as e:
        model().predict(x, devices="tpu:0")
    text = str(e.value)
    assert "devices='tpu:0'" in text and no_flag(text), text


def test_the_command_line_names_its_flags(tmp_path):
    """The same batch through mirrored_train: its flag, not Python's argument."""
    exe = os.environ.get("MIRRORED_TRAIN")
    if not exe:
        pytest.skip("MIRRORED_TRAIN is not set")
    x, y = separable(96)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y.astype(np.int32))
    cfg = tmp_path / "m.cfg"
    cfg.write_text(dense_cfg(data="[data]\ntrain_images = x.npy\ntrain_labels = y.npy\n"))
    run = subprocess.run([exe, str(cfg), "--devices", "cpu:3", "--batch-size", "64", "--quiet"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    assert "--batch-size 64 does not divide evenly over 3 replicas" in run.stderr, run.stderr
    assert "batch_size=" not in run.stderr, run.stderr


def test_validation_split_beside_val_images(tmp_path):
    """The .cfg's own validation set and a validation_split: one of them."""
    x, y = separable(96)
    for name, a in (("x", x), ("y", y.astype(np.int32)), ("vx", x[:32]),
                    ("vy", y[:32].astype(np.int32))):
        np.save(tmp_path / f"{name}.npy", a)
    data = ("[data]\ntrain_images = x.npy\ntrain_labels = y.npy\n"
            "val_images = vx.npy\nval_labels = vy.npy\n")
    m = mirrored.Model.from_config(dense_cfg(data=data), name="val", folder=str(tmp_path))
    with pytest.raises(Exception) as e:
        m.fit(epochs=1, validation_split=0.25, devices="cpu:1", verbose=0)
    text = str(e.value)
    assert "validation_split=0.25: [data] val_images" in text and no_flag(text), text


def test_closed_model_and_folders_named():
    """fit after close() said "mirrored: status 7" (the check ran on the
    fit's thread); a folder was "no such file"."""
    m = model()
    m.close()
    x, y = separable(8)
    with pytest.raises(mirrored.InvalidArgumentError) as e:
        m.fit(x, y, epochs=1, verbose=0)
    assert "the model is closed" in str(e.value), str(e.value)
    with pytest.raises(OSError) as e:
        mirrored.load(os.getcwd())
    assert "a folder, not a model file" in str(e.value), str(e.value)


def test_save_where_it_cannot_write_is_an_oserror(tmp_path):
    """save() into a folder that does not exist was a RuntimeError (a
    failure of a run, as a training's checkpoint is); the docs promise
    OSError for a file that cannot be written (issue 47 M3)."""
    m = model()
    for name in ("x.h5", "x.keras"):
        with pytest.raises(OSError) as e:
            m.save(str(tmp_path / "missing" / name))
        assert not isinstance(e.value, RuntimeError), repr(e.value)
        assert "cannot write" in str(e.value), str(e.value)


def test_from_config_folder_survives_a_checkpoint(tmp_path, monkeypatch):
    """A from_config(folder=) model's checkpoint resolves its [data] paths in
    that folder, from any working folder (they were resolved in the working
    folder of the load: no such file)."""
    data = tmp_path / "data"
    data.mkdir()
    x, y = separable(64)
    np.save(data / "x.npy", x)
    np.save(data / "y.npy", y.astype(np.int32))
    text = dense_cfg(epochs=1, data="[data]\ntrain_images = x.npy\ntrain_labels = y.npy\n")
    m = mirrored.Model.from_config(text, name="m.cfg", folder=str(data))
    m.fit(epochs=1, verbose=0, devices="cpu")
    out = tmp_path / "out"
    out.mkdir()
    m.save(str(out / "ck.h5"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    again = mirrored.load(str(out / "ck.h5"))
    assert len(again.fit(epochs=1, verbose=0, devices="cpu").epoch) == 1
    # and its own checkpoint keeps the folder too
    again.save(str(out / "ck2.h5"))
    assert len(mirrored.load(str(out / "ck2.h5")).fit(epochs=1, verbose=0, devices="cpu").epoch) == 1
