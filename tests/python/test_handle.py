"""A model handle that is safe to misuse: one call at a time per model
(a second call, from another thread or from a fit's callback, raises
ModelBusyError at once; close() during a fit is refused), a burst of Ctrl-C
ends the C fit before fit() raises, and a stop whose checkpoint cannot be
written reports that error with the updates it made."""
import os
import re
import signal
import threading
import time

import numpy as np
import pytest

import mirrored
from mirrored import _fit
from conftest import CLASSES, FEATURES, dense_cfg


def model(**kw):
    return mirrored.Model.from_config(dense_cfg(**kw), name="tiny")


def fit_thread_alive():
    return any(t.name == "mirrored-fit" and t.is_alive() for t in threading.enumerate())


@pytest.fixture
def default_sigint():
    """Python's own Ctrl-C handler, whatever this process inherited (a run
    in the background ignores SIGINT and Python then installs none)."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


def test_second_call_during_fit_refused(data, monkeypatch):
    """A fit on another thread held at its first update: every other call
    on the model, close() and a second fit raise ModelBusyError naming the
    fit; the model is whole and free once the fit returns."""
    x, y = data
    reached, release = threading.Event(), threading.Event()

    def hold(_run):  # C thread
        reached.set()
        release.wait(120)

    monkeypatch.setattr(_fit, "_on_c_step", hold)
    m = model(epochs=2)
    out = {}

    def fit():
        try:
            out["history"] = m.fit(x, y, verbose=0, devices="cpu:2")
        except BaseException as e:  # reported below
            out["error"] = e

    t = threading.Thread(target=fit)
    t.start()
    try:
        assert reached.wait(120)
        calls = {"predict": lambda: m.predict(x[:2]),
                 "evaluate": lambda: m.evaluate(x[:8], y[:8], verbose=0),
                 "save": lambda: m.save("never.keras"),
                 "summary": lambda: m.summary(print_fn=lambda s: None),
                 "fit": lambda: m.fit(x, y, epochs=1, verbose=0),
                 "close": m.close}
        for name, call in calls.items():
            with pytest.raises(mirrored.ModelBusyError,
                               match=f"{name} refused: fit is in progress") as e:
                call()
            assert isinstance(e.value, RuntimeError)
    finally:
        monkeypatch.setattr(_fit, "_on_c_step", None)
        release.set()
        t.join(120)
    assert "error" not in out, out.get("error")
    assert out["history"].params["updates"] > 0
    assert not os.path.exists("never.keras")
    assert m.predict(x[:2]).shape == (2, CLASSES)
    m.close()
    with pytest.raises(ValueError, match="closed"):
        m.predict(x[:2])


def test_close_from_a_callback_refused(data):
    """close() from a fit's callback raises ModelBusyError out of fit, the
    fit stopped; the model still works and closes afterwards."""
    x, y = data

    class CloseIt:
        def set_model(self, model):
            self.model = model

        def on_epoch_end(self, epoch, logs):
            self.model.close()

    m = model(epochs=5)
    with pytest.raises(mirrored.ModelBusyError, match="close refused: fit is in progress"):
        m.fit(x, y, verbose=0, callbacks=[CloseIt()], stop_checkpoint=None)
    assert not fit_thread_alive()
    assert m.predict(x[:2]).shape == (2, CLASSES)
    m.close()


def test_ctrl_c_burst_ends_the_c_fit_first(data, in_tmp, monkeypatch, capsys, default_sigint):
    """A burst of SIGINTs while the fit runs: KeyboardInterrupt comes only
    once the C fit has returned, with its true update count and its
    checkpoint; the next fit runs."""
    x, y = data
    burst_done = threading.Event()
    started = []

    def burst():
        for _ in range(200):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.0005)
        burst_done.set()

    def hold_during_burst(_run):  # C thread: the fit runs on, held, while the burst lasts
        if not started:
            started.append(threading.Thread(target=burst))
            started[0].start()
        burst_done.wait(120)

    monkeypatch.setattr(_fit, "_on_c_step", hold_during_burst)
    m = model(epochs=1000)
    alive_at_raise = None
    try:
        m.fit(x, y, verbose=1, devices="cpu:2", stop_checkpoint="burst.h5")
    except KeyboardInterrupt:
        alive_at_raise = fit_thread_alive()
    assert alive_at_raise is False, "fit raised while the C fit ran"
    started[0].join(120)
    monkeypatch.setattr(_fit, "_on_c_step", None)
    err = capsys.readouterr().err
    n = re.search(r"fit stopped after (\d+) updates", err)
    assert n and int(n.group(1)) > 0, err
    assert "the fit had ended" not in err
    assert (in_tmp / "burst.h5").stat().st_size > 0
    with mirrored.load(in_tmp / "burst.h5") as back:
        assert back.predict(x[:2]).shape == (2, CLASSES)
    h = m.fit(x, y, epochs=1, verbose=0, devices="cpu:2")
    assert h.params["updates"] > int(n.group(1))


def test_unwritable_stop_checkpoint_reported(data, in_tmp, monkeypatch, capsys, default_sigint):
    """Ctrl-C with a stop checkpoint in no folder: the write error is raised
    (from the KeyboardInterrupt), the updates made are told, and the model's
    count follows its weights (the next fit goes on from them)."""
    x, y = data
    sent = []

    def ctrl_c(_run):  # C thread
        if not sent:
            sent.append(1)
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.3)  # the main thread takes it while the fit runs

    monkeypatch.setattr(_fit, "_on_c_step", ctrl_c)
    m = model(epochs=1000)
    bad = in_tmp / "no" / "such" / "stop.h5"
    # the library's status for a write that fails during training: RunError
    # (the CLI's exit 1), the file named
    with pytest.raises(mirrored.Error, match="no/such/stop.h5: cannot write") as e:
        m.fit(x, y, verbose=0, devices="cpu:2", stop_checkpoint=bad)
    assert isinstance(e.value.__cause__, KeyboardInterrupt)
    monkeypatch.setattr(_fit, "_on_c_step", None)
    err = capsys.readouterr().err
    n = re.search(r"fit stopped after (\d+) updates", err)
    assert n and int(n.group(1)) > 0 and "no/such/stop.h5" in err, err
    h = m.fit(x, y, epochs=1, verbose=0, devices="cpu:2")
    assert h.params["updates"] == int(n.group(1)) + -(-len(x) // 32)
    assert np.isfinite(m.evaluate(x, y, verbose=0)[0])
    assert FEATURES == m.info.input_shape[0]


def test_load_reads_the_file_once(data, tmp_path):
    """A file renamed over the loaded path before the model's first use
    changes nothing: the model is the file loaded."""
    x, y = data
    for name, epochs in (("a.keras", 1), ("b.keras", 4)):
        with model(epochs=epochs) as m:
            m.fit(x, y, verbose=0, devices="cpu:1")
            m.save(tmp_path / name)
    with mirrored.load(tmp_path / "a.keras") as a, mirrored.load(tmp_path / "b.keras") as b:
        pa, pb = a.predict(x[:8]), b.predict(x[:8])
    assert not np.array_equal(pa, pb)
    path = tmp_path / "w.keras"
    path.write_bytes((tmp_path / "a.keras").read_bytes())
    m = mirrored.load(path)
    os.replace(tmp_path / "b.keras", path)
    np.testing.assert_array_equal(m.predict(x[:8]), pa)
    m.close()


def test_usable_after_a_nan_stop_on_two_replicas(data):
    """A fit on cpu:2 that stops on a NaN loss aborts the replicas'
    communicator; every later 2-replica call on the object failed with
    "local all-reduce: communicator aborted by replica 1" (issue 44). The
    next call builds fresh replicas with the weights the fit left."""
    x, y = data
    m = model(epochs=1)
    bad = x.copy()
    bad[5:, :] = np.inf  # the first update's loss is not finite
    with pytest.raises(mirrored.RunError) as e:
        m.fit(bad, y, devices="cpu:2", batch_size=32, verbose=0)
    assert "aborted" not in str(e.value), str(e.value)
    p = m.predict(x, devices="cpu:2")
    assert p.shape == (len(x), CLASSES)
    loss, _ = m.evaluate(x, y, devices="cpu:2")
    assert np.isfinite(loss) or np.isnan(loss)  # it ran: the weights are what the fit left
    fresh = model(epochs=1)
    h = fresh.fit(x, y, devices="cpu:2", batch_size=32, verbose=0)
    again = model(epochs=1)
    with pytest.raises(mirrored.RunError):
        again.fit(bad, y, devices="cpu:2", batch_size=32, verbose=0)
    h2 = again.fit(x, y, devices="cpu:2", batch_size=32, verbose=0)
    assert len(h2.history["loss"]) == 1 and len(h.history["loss"]) == 1
