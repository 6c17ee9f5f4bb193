"""Keras's callback protocol with callbacks of our own (no keras needed):
the hooks and their order, logs, stop_training from a batch hook, the
bound on queued batch logs, evaluate's and predict's hooks, max_steps's
message and History, an interrupted fit's epochs in model.history."""
import time

import numpy as np
import pytest

import mirrored
from conftest import dense_cfg
from mirrored import _fit


def model(epochs=3):
    return mirrored.Model.from_config(dense_cfg(epochs=epochs), name="tiny")


class Recorder:
    """Records every hook of keras.callbacks.Callback it gets."""

    def __init__(self):
        self.calls = []
        self.params = None
        self.model = None

    def set_model(self, model):
        self.model = model

    def set_params(self, params):
        self.params = params

    def __getattr__(self, name):
        if not name.startswith("on_"):
            raise AttributeError(name)
        return lambda *args: self.calls.append((name,) + args)


class EpochOnly:
    def __init__(self):
        self.epochs = []

    def on_epoch_end(self, epoch, logs=None):
        self.epochs.append(epoch)


def names(calls):
    return [c[0] for c in calls]


def test_fit_calls_every_hook_in_keras_order(data):
    x, y = data  # 600 rows, batch 32: 19 steps an epoch
    rec = Recorder()
    m = model()
    h = m.fit(x, y, epochs=2, verbose=0, callbacks=[rec])
    assert rec.model is m and rec.params["epochs"] == 2
    steps = h.params["steps"]
    batch = ["on_train_batch_begin", "on_train_batch_end"] * steps
    want = (["on_train_begin", "on_epoch_begin"] + batch + ["on_epoch_end", "on_epoch_begin"] +
            batch + ["on_epoch_end", "on_train_end"])
    assert names(rec.calls) == want
    ends = [c for c in rec.calls if c[0] == "on_train_batch_end"]
    assert [c[1] for c in ends[:steps]] == list(range(steps))  # 0-based batch in the epoch
    assert set(ends[0][2]) == {"loss", "accuracy"}
    epoch_ends = [c for c in rec.calls if c[0] == "on_epoch_end"]
    assert [c[1] for c in epoch_ends] == [0, 1]
    assert epoch_ends[1][2] == {"loss": h.history["loss"][1],
                                "accuracy": h.history["accuracy"][1]}
    assert rec.calls[-1][1] == epoch_ends[1][2]  # on_train_end: the last epoch's logs


def test_validation_keys_in_epoch_logs(data):
    x, y = data
    rec = Recorder()
    model().fit(x, y, epochs=1, validation_split=0.2, verbose=0, callbacks=[rec])
    logs = [c for c in rec.calls if c[0] == "on_epoch_end"][0][2]
    assert set(logs) == {"loss", "accuracy", "val_loss", "val_accuracy"}


def test_epoch_only_callbacks_queue_no_step(data, monkeypatch):
    """No batch hook: the C thread never waits for a step's logs."""
    from mirrored._callbacks import CallbackList
    assert not CallbackList([EpochOnly()], None).batch_hooks
    assert CallbackList([Recorder()], None).batch_hooks
    made = []
    real = _fit._Run.__init__

    def spy(self, *args):
        real(self, *args)
        made.append(self)

    monkeypatch.setattr(_fit._Run, "__init__", spy)
    x, y = data
    cb = EpochOnly()
    model().fit(x, y, epochs=2, verbose=0, callbacks=[cb])
    assert cb.epochs == [0, 1] and made[0].slots is None


def test_stop_training_from_a_batch_hook_ends_after_the_epoch(data):
    x, y = data

    class StopAtBatch3:
        def set_model(self, model):
            self.model = model

        def on_train_batch_end(self, batch, logs=None):
            if batch == 3:
                self.model.stop_training = True

    h = model(epochs=5).fit(x, y, verbose=0, callbacks=[StopAtBatch3()])
    assert len(h.epoch) == 1 and h.params["early_stopped"]


def test_plain_on_batch_end_is_called(data):
    """A class of one's own with Keras's older on_batch_end only."""
    x, y = data

    class Batches:
        n = 0

        def on_batch_end(self, batch, logs=None):
            Batches.n += 1

    h = model().fit(x, y, epochs=1, verbose=0, callbacks=[Batches()])
    assert Batches.n == h.params["steps"]


def test_slow_batch_hook_is_bounded(data, monkeypatch):
    """A batch hook slower than a step: the C fit runs at most
    _MAX_PENDING_STEPS steps ahead of the hooks."""
    monkeypatch.setattr(_fit, "_MAX_PENDING_STEPS", 3)
    done = []
    monkeypatch.setattr(_fit, "_on_c_step", lambda run: done.append(1))
    ahead = []

    class Slow:
        seen = 0

        def on_train_batch_end(self, batch, logs=None):
            Slow.seen += 1
            time.sleep(0.01)
            ahead.append(len(done) - Slow.seen)

    x, y = data
    h = model().fit(x, y, epochs=2, verbose=0, callbacks=[Slow()])
    assert Slow.seen == 2 * h.params["steps"]
    assert max(ahead) <= 3


def test_evaluate_and_predict_hooks(data):
    x, y = data
    m = model()
    rec = Recorder()
    out = m.evaluate(x, y, verbose=0, return_dict=True, callbacks=[rec])
    assert rec.calls == [("on_test_begin", {}), ("on_test_end", out)]
    rec.calls.clear()
    m.predict(x[:5], callbacks=[rec])
    assert names(rec.calls) == ["on_predict_begin", "on_predict_end"]


def test_max_steps_ends_with_a_message_and_a_history(data, capsys):
    x, y = data
    h = model(epochs=5).fit(x, y, verbose=0, max_steps=3)
    err = capsys.readouterr().err
    assert "max_steps=3" in err and "3/19 updates" in err
    assert len(h.history["loss"]) == 1 and h.params["partial_epoch"] == 0
    assert h.params["updates"] == 3


def test_max_steps_on_an_epoch_end_adds_nothing(data, capsys):
    x, y = data
    h = model(epochs=5).fit(x, y, verbose=0, max_steps=19)  # one whole epoch
    assert "max_steps" not in capsys.readouterr().err
    assert len(h.epoch) == 1 and "partial_epoch" not in h.params


def test_interrupted_fit_keeps_finished_epochs_in_model_history(data, in_tmp, monkeypatch):
    x, y = data

    def interrupt_in_epoch_2(kind, payload):
        if kind == "step" and payload["epoch"] == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(_fit, "_on_event", interrupt_in_epoch_2)
    m = model(epochs=50)
    with pytest.raises(KeyboardInterrupt):
        m.fit(x, y, verbose=0)
    assert m.history.epoch == [0, 1] and len(m.history.history["loss"]) == 2


def test_save_overwrite(data, in_tmp):
    m = model()
    m.save("m.h5", overwrite=True)
    with pytest.raises(FileExistsError, match="overwrite=False"):
        m.save("m.h5", overwrite=False)
    m.save("other.keras", overwrite=False)
    assert (in_tmp / "other.keras").stat().st_size > 0


def test_train_begin_and_end_may_use_the_model(data, in_tmp):
    """on_train_begin and on_train_end run with the model free."""
    x, y = data

    class UseIt:
        def set_model(self, model):
            self.model = model

        def on_train_begin(self, logs=None):
            self.before = self.model.predict(x[:2])

        def on_train_end(self, logs=None):
            self.model.save("end.keras")

    cb = UseIt()
    model().fit(x, y, epochs=1, verbose=0, callbacks=[cb])
    assert cb.before.shape == (2, 3) and (in_tmp / "end.keras").stat().st_size > 0


def test_optimizer_learning_rate(data):
    """model.optimizer: its name; the rate the fit ran (the .cfg's 0.01)
    readable in on_epoch_end; an assignment refused, not ignored."""
    x, y = data
    m = model()
    assert m.optimizer.name == "adam" and m.optimizer.learning_rate is None
    seen = []

    class Read:
        def on_epoch_end(self, epoch, logs=None):
            seen.append(m.optimizer.learning_rate)

    m.fit(x, y, epochs=2, verbose=0, callbacks=[Read()])
    assert seen == pytest.approx([0.01, 0.01])
    with pytest.raises(NotImplementedError, match="learning rate"):
        m.optimizer.learning_rate = 0.001


def test_save_from_on_epoch_end_writes_the_epochs_weights(data, in_tmp):
    """A save from on_epoch_end (Keras's ModelCheckpoint) writes that
    epoch's weights; PATH.h5 from there is refused by name."""
    x, y = data
    m = model()
    refused = []

    class Checkpoint:
        def on_epoch_end(self, epoch, logs=None):
            m.save(f"e{epoch}.keras", overwrite=True)
            try:
                m.save("e.h5")
            except mirrored.InvalidArgumentError as e:
                refused.append(str(e))

    m.fit(x, y, epochs=2, verbose=0, callbacks=[Checkpoint()])
    assert len(refused) == 2 and "epoch callback" in refused[0]
    first, last = mirrored.load(in_tmp / "e0.keras"), mirrored.load(in_tmp / "e1.keras")
    assert (last.predict(x[:5]) == m.predict(x[:5])).all()
    assert not (first.predict(x[:5]) == m.predict(x[:5])).all()


def test_get_and_set_weights(data):
    """Keras's order and shapes; set_weights of zeros gives the uniform
    softmax; the count and the shapes are checked."""
    x, y = data
    m = model()
    w = m.get_weights()
    assert [a.shape for a in w] == [(8, 16), (16,), (16, 3), (3,)]
    assert all(a.dtype == np.float32 for a in w)
    m.set_weights([np.zeros_like(a) for a in w])
    np.testing.assert_allclose(m.predict(x[:4]), np.full((4, 3), 1 / 3), atol=1e-6)
    with pytest.raises(mirrored.InvalidArgumentError, match="4 weights"):
        m.set_weights(w[:3])
    with pytest.raises(mirrored.InvalidArgumentError, match=r"shape \(16\)"):
        m.set_weights([w[0], np.zeros(5), w[2], w[3]])
    m.set_weights(w)
    assert all((a == b).all() for a, b in zip(m.get_weights(), w))


def test_weights_from_on_epoch_end_restore_the_best(data):
    """get_weights from on_epoch_end is that epoch's weights; set_weights
    in on_train_end restores them (EarlyStopping's restore_best_weights)."""
    x, y = data
    m = model()
    kept = {}

    class KeepFirst:
        def on_epoch_end(self, epoch, logs=None):
            kept[epoch] = m.get_weights()

        def on_train_end(self, logs=None):
            m.set_weights(kept[0])

    m.fit(x, y, epochs=3, verbose=0, callbacks=[KeepFirst()])
    assert not all((a == b).all() for a, b in zip(kept[0], kept[2]))
    assert all((a == b).all() for a, b in zip(m.get_weights(), kept[0]))


def test_a_batch_hook_that_raises_stops_the_fit(data, in_tmp, monkeypatch):
    """An exception in a batch hook, with the C fit held for room in the
    queue: the fit stops, the exception propagates, the model is usable."""
    monkeypatch.setattr(_fit, "_MAX_PENDING_STEPS", 1)
    x, y = data

    class Boom:
        def on_train_batch_end(self, batch, logs=None):
            if batch == 2:
                raise ValueError("boom")

    m = model(epochs=20)
    with pytest.raises(ValueError, match="boom"):
        m.fit(x, y, verbose=0, callbacks=[Boom()], stop_checkpoint=None)
    assert len(m.fit(x, y, epochs=1, verbose=0).epoch) == 1


def test_weights_of_a_loaded_file(data, in_tmp):
    """A loaded checkpoint's weights (held on the host until a call builds
    replicas) read and written the same way."""
    x, y = data
    m = model()
    m.fit(x, y, epochs=1, verbose=0)
    m.save("m.h5")
    back = mirrored.load("m.h5")
    assert all(np.array_equal(a, b) for a, b in zip(back.get_weights(), m.get_weights()))
    back.set_weights([np.zeros_like(a) for a in back.get_weights()])
    np.testing.assert_allclose(back.predict(x[:2]), np.full((2, 3), 1 / 3), atol=1e-6)
