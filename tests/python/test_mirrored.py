"""The Python package mirrored against the built libmirrored
($MIRRORED_LIBRARY) and mirrored_train ($MIRRORED_TRAIN)."""
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import mirrored
from mirrored import _fit
from conftest import CLASSES, FEATURES, dense_cfg, separable


def model(**kw):
    return mirrored.Model.from_config(dense_cfg(**kw), name="tiny")


def test_version_and_devices():
    assert mirrored.__version__.count(".") == 2
    assert mirrored.job() == (0, 1)
    devices = mirrored.list_devices()
    assert devices and all(d.split(":")[0] in ("cpu", "gpu") for d in devices)


def test_info_and_summary(capsys):
    m = model()
    assert m.info.input_shape == (FEATURES,)
    assert m.info.outputs == CLASSES and m.info.label_width == 1
    assert not m.info.regression and m.info.metric == "accuracy"
    assert m.info.params == FEATURES * 16 + 16 + 16 * CLASSES + CLASSES
    assert m.info.epochs == 3 and m.info.batch_size == 32
    m.summary()
    assert str(m.info.params) in capsys.readouterr().out.replace(",", "")


def test_fit_validation_split(data):
    x, y = data
    h = model(epochs=4).fit(x, y, validation_split=0.2, devices="cpu:2", verbose=0)
    assert isinstance(h, mirrored.History)
    assert set(h.history) == {"loss", "accuracy", "val_loss", "val_accuracy"}
    assert all(len(v) == 4 for v in h.history.values())
    assert h.epoch == [0, 1, 2, 3]
    assert h.params["epochs"] == 4 and h.params["replicas"] == 2
    assert h.history["val_accuracy"][-1] > 0.6  # chance is 1/3


def test_fit_validation_data_evaluate_predict(data):
    x, y = data
    xv, yv = separable(n=200, seed=1)
    m = model()
    h = m.fit(x, y, batch_size=64, epochs=2, validation_data=(xv, yv), devices="cpu:1",
              verbose=0)
    assert len(h.history["val_loss"]) == 2 and h.params["steps"] in (9, 10)  # 600 / 64
    loss, acc = m.evaluate(xv, yv, verbose=0)
    assert acc > 0.6 and loss > 0
    d = m.evaluate(xv, yv, return_dict=True, verbose=0)
    assert d == {"loss": loss, "accuracy": acc}
    p = m.predict(xv)
    assert p.shape == (200, CLASSES) and p.dtype == np.float32
    np.testing.assert_allclose(p.sum(axis=1), 1, atol=1e-5)
    assert np.mean(np.argmax(p, axis=1) == yv) == pytest.approx(acc, abs=1e-6)


def test_fit_goes_on(data):
    """A second fit continues from the first's weights."""
    x, y = data
    m = model(epochs=1)
    first = m.fit(x, y, verbose=0).history["loss"][0]
    second = m.fit(x, y, verbose=0).history["loss"][0]
    assert second < first


def test_save_keras_and_h5(data, in_tmp):
    x, y = data
    m = model(epochs=1)
    m.fit(x, y, verbose=0)
    m.save("out.keras")
    m.save(in_tmp / "out.h5")
    assert (in_tmp / "out.keras").stat().st_size > 0
    with mirrored.load("out.h5") as back:
        np.testing.assert_array_equal(back.predict(x[:50]), m.predict(x[:50]))


def test_load_cfg_file(in_tmp):
    (in_tmp / "net.cfg").write_text(dense_cfg())
    m = mirrored.load(in_tmp / "net.cfg")
    assert m.name == "net" and m.info.params > 0


GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden", "keras_models")


@pytest.mark.parametrize("name", ["cnn.keras", "cnn.h5"])
def test_keras_file(name, in_tmp):
    """A model file Keras saved (a committed one: no Keras needed): its
    weights predict as Keras did; fit on arrays with validation_split,
    evaluate as a list and a dict, predict, save .keras and .h5."""
    x = np.load(os.path.join(GOLDEN, "cnn.x.npy"))
    want = np.load(os.path.join(GOLDEN, "cnn.predict.npy"))
    m = mirrored.load(os.path.join(GOLDEN, name))
    assert m.info.input_shape == x.shape[1:] and m.info.outputs == want.shape[1]
    np.testing.assert_allclose(m.predict(x), want, atol=1e-4)
    rng = np.random.default_rng(2)
    xt = rng.normal(size=(320,) + x.shape[1:]).astype(np.float32)
    yt = rng.integers(0, want.shape[1], size=320)
    h = m.fit(xt, yt, epochs=2, batch_size=32, validation_split=0.25, devices="cpu:2", verbose=0)
    assert set(h.history) == {"loss", "accuracy", "val_loss", "val_accuracy"}
    assert len(h.history["loss"]) == 2
    loss, accuracy = m.evaluate(xt, yt, verbose=0)
    assert m.evaluate(xt, yt, verbose=0, return_dict=True) == {"loss": loss, "accuracy": accuracy}
    p = m.predict(xt)
    assert p.shape == (320, want.shape[1]) and p.dtype == np.float32
    m.save("trained.keras")
    m.save("trained.h5")
    np.testing.assert_array_equal(mirrored.load("trained.h5").predict(xt), p)
    assert os.path.getsize("trained.keras") > 0


def test_float64_note(data, capsys):
    x, y = data
    model(epochs=1).fit(x.astype(np.float64), y, verbose=0)
    assert "mirrored: note: x is float64, converted to float32 once" in capsys.readouterr().out


def test_uint8_inputs(data):
    x, y = data
    xu = np.clip(x * 40 + 128, 0, 255).astype(np.uint8)
    assert model(epochs=1).predict(xu).shape == (len(xu), CLASSES)


def test_one_hot_labels(data):
    x, y = data
    a = model(epochs=1).fit(x, y, verbose=0).history["loss"]
    b = model(epochs=1).fit(x, np.eye(CLASSES, dtype=np.float32)[y], verbose=0).history["loss"]
    assert a == b
    bad = np.eye(CLASSES)[y]
    bad[5] = [1, 1, 0]
    with pytest.raises(ValueError, match="row 5"):
        model(epochs=1).fit(x, bad, verbose=0)


def test_regression_mae(data):
    x, _ = data
    t = (x @ np.linspace(-1, 1, FEATURES)).astype(np.float32)
    m = mirrored.Model.from_config(dense_cfg(loss="mse", units=1, activation="linear"))
    assert m.info.regression and m.info.metric == "mae"
    h = m.fit(x, t, epochs=3, validation_split=0.1, verbose=0)
    assert set(h.history) == {"loss", "mae", "val_loss", "val_mae"}
    assert h.history["loss"][-1] < h.history["loss"][0]
    assert set(m.evaluate(x, t, return_dict=True, verbose=0)) == {"loss", "mae"}
    assert m.predict(x).shape == (len(x), 1)


def test_missing_file():
    with pytest.raises(FileNotFoundError, match="/no/such/dir/model.cfg"):
        mirrored.load("/no/such/dir/model.cfg")


def test_errors_by_status(data, tmp_path):
    """One base class, mirrored.Error, and the built-ins where they fit; the
    class comes from the C status, whatever the message says."""
    with pytest.raises(mirrored.NotFoundError) as e:
        mirrored.load("/no/such/dir/model.cfg")
    assert all(isinstance(e.value, c) for c in (mirrored.Error, FileNotFoundError, OSError))
    assert e.value.status == mirrored.errors.ERR_NOT_FOUND
    # a missing file is told by its status, not by its text
    with pytest.raises(mirrored.NotFoundError, match="^quiet$"):
        mirrored.errors.raise_status(mirrored.errors.ERR_NOT_FOUND, "quiet")
    with pytest.raises(mirrored.FileError) as e:
        mirrored.errors.raise_status(mirrored.errors.ERR_IO, "x: no such file")
    assert not isinstance(e.value, FileNotFoundError) and isinstance(e.value, OSError)
    cfg = tmp_path / "bad.cfg"
    cfg.write_text("[net]\nno_such_key = 1\n")
    with pytest.raises(mirrored.ConfigError) as e:
        mirrored.load(cfg)
    assert isinstance(e.value, ValueError) and e.value.status == mirrored.errors.ERR_CONFIG
    with pytest.raises(mirrored.InvalidArgumentError):
        model().predict(data[0], devices="tpu:0")
    for status, builtin in [(mirrored.errors.ERR_NOMEM, MemoryError),
                            (mirrored.errors.ERR_RUNTIME, RuntimeError),
                            (mirrored.errors.ERR_ABORTED, RuntimeError),
                            (mirrored.errors.ERR_DATA, ValueError),
                            (mirrored.errors.ERR_UNSUPPORTED, ValueError)]:
        with pytest.raises(builtin) as e:
            mirrored.errors.raise_status(status, "m")
        assert isinstance(e.value, mirrored.Error) and e.value.status == status


def test_fit_options_of_another_version(data):
    """A struct_version the library does not read is refused, not misread."""
    import ctypes
    from mirrored import _lib
    m = model()
    o = _lib.lib.mirrored_fit_options_default()
    o.struct_version = _lib.FIT_OPTIONS_VERSION + 1
    err = _lib.CError()
    status = _lib.lib.mirrored_model_fit(m._handle(), ctypes.byref(o), None, ctypes.byref(err))
    assert status == mirrored.errors.ERR_USAGE
    assert b"struct_version" in err.message


def test_bad_devices(data):
    with pytest.raises(ValueError):
        model().predict(data[0], devices="tpu:0")


def test_wrong_input_shape():
    with pytest.raises(ValueError):
        model().predict(np.zeros((4, FEATURES + 3), np.float32))


def test_closed_model():
    m = model()
    m.close()
    with pytest.raises(ValueError, match="closed"):
        m.predict(np.zeros((1, FEATURES), np.float32))


def test_keyboard_interrupt_writes_stop_checkpoint(data, in_tmp, monkeypatch, capsys):
    """Ctrl-C in the main thread during a fit: the fit stops after the update
    in flight, its checkpoint is written, KeyboardInterrupt propagates."""
    x, y = data

    def interrupt(kind, _payload):
        if kind == "step":
            raise KeyboardInterrupt

    def hold_until_stop(run):  # C thread: the first update waits for the stop
        deadline = time.monotonic() + 120
        while not run.stopping and time.monotonic() < deadline:
            time.sleep(0.005)

    monkeypatch.setattr(_fit, "_on_event", interrupt)
    monkeypatch.setattr(_fit, "_on_c_step", hold_until_stop)
    m = model(epochs=50)
    with pytest.raises(KeyboardInterrupt):
        m.fit(x, y, verbose=1)
    assert "tiny-stopped.h5" in capsys.readouterr().err
    with mirrored.load(in_tmp / "tiny-stopped.h5") as back:
        assert back.predict(x[:3]).shape == (3, CLASSES)
    monkeypatch.setattr(_fit, "_on_event", None)
    monkeypatch.setattr(_fit, "_on_c_step", None)
    assert len(m.fit(x, y, epochs=1, verbose=0).epoch) == 1  # usable after the stop


def test_callback_stops_training(data):
    x, y = data

    class StopAfterTwo:
        def set_model(self, model):
            self.model = model

        def on_epoch_end(self, epoch, logs):
            self.model.stop_training = epoch >= 1

    h = model(epochs=10).fit(x, y, verbose=0, callbacks=[StopAfterTwo()])
    assert len(h.epoch) == 2 and h.params["early_stopped"]


def test_progress_lines(data, capsys):
    x, y = data
    model(epochs=2).fit(x, y, validation_split=0.1, verbose=2)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("Epoch 1/2") and "val_accuracy:" in lines[0]


def write_npy_cfg(folder):
    x, y = separable(n=256)
    np.save(folder / "x.npy", x)
    np.save(folder / "y.npy", y.astype(np.int32))
    cfg = folder / "parity.cfg"
    cfg.write_text(dense_cfg(epochs=1, data="[data]\ntrain_images = x.npy\n"
                                            "train_labels = y.npy\n"))
    return cfg


def test_parity_with_mirrored_train(in_tmp):
    """fit() of a .cfg's own data gives mirrored_train's params_hash."""
    train = os.environ.get("MIRRORED_TRAIN")
    if not train:
        pytest.skip("MIRRORED_TRAIN not set")
    cfg = write_npy_cfg(in_tmp)
    subprocess.run([train, str(cfg), "--devices", "cpu:2", "--epochs", "1", "--json",
                    str(in_tmp / "run.json"), "--quiet"], check=True, capture_output=True)
    want = json.loads((in_tmp / "run.json").read_text())["params_hash"]
    m = mirrored.load(cfg)
    assert m.info.has_data
    h = m.fit(epochs=1, devices="cpu:2", verbose=0)
    got = h.params["params_hash"]
    assert m.params_hash == got
    assert got == want


def test_sigint_during_fit(data, in_tmp, monkeypatch):
    """A real SIGINT (Ctrl-C) while the first update's logs are handled: the
    main thread gets KeyboardInterrupt, the fit stops, its checkpoint is
    written where stop_checkpoint says."""
    import signal
    x, y = data
    sent = []

    def ctrl_c_then_hold(run):  # C thread
        if not sent:
            sent.append(1)
            os.kill(os.getpid(), signal.SIGINT)
        deadline = time.monotonic() + 120
        while not run.stopping and time.monotonic() < deadline:
            time.sleep(0.005)

    monkeypatch.setattr(_fit, "_on_c_step", ctrl_c_then_hold)
    # Python's own Ctrl-C handler, whatever this process inherited: a run
    # started in the background by a non-interactive shell (nohup ... &)
    # ignores SIGINT, and Python then installs none (the fit held forever)
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            model(epochs=50).fit(x, y, verbose=0, stop_checkpoint="here.h5")
    finally:
        signal.signal(signal.SIGINT, old)
    assert (in_tmp / "here.h5").stat().st_size > 0
    assert not (in_tmp / "tiny-stopped.h5").exists()


def test_import_error_names_where_it_looked(tmp_path):
    """No library: ImportError naming $MIRRORED_LIBRARY's path."""
    folder = os.path.dirname(mirrored.__file__)
    if any(n.startswith("libmirrored.so") for n in os.listdir(folder)):
        pytest.skip("the package's folder holds a libmirrored")
    env = dict(os.environ, MIRRORED_LIBRARY=str(tmp_path / "nothing.so"),
               PYTHONPATH=os.path.dirname(folder))
    env.pop("LD_LIBRARY_PATH", None)  # meson test points it at the build's library
    probe = "import ctypes.util; print(ctypes.util.find_library('mirrored') or '')"
    if subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                      text=True).stdout.strip():
        pytest.skip("a libmirrored is installed where the linker looks")
    r = subprocess.run([sys.executable, "-c", "import mirrored"], env=env,
                       capture_output=True, text=True)
    assert r.returncode != 0 and "ImportError" in r.stderr
    assert str(tmp_path / "nothing.so") in r.stderr and "MIRRORED_LIBRARY" in r.stderr
