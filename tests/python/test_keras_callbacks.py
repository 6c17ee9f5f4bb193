"""Keras's own callbacks, unmodified, on Model.fit (issue 44 point 3).
Skipped where keras is not importable (CI's Debian python has none)."""
import csv
import math

import numpy as np
import pytest

try:
    import keras
except ImportError:  # pragma: no cover - depends on the environment
    pytest.skip("keras is not importable in this python (Keras 3 is needed for its callbacks)",
                allow_module_level=True)

import mirrored  # noqa: E402
from conftest import dense_cfg  # noqa: E402


def model(epochs=3):
    return mirrored.Model.from_config(dense_cfg(epochs=epochs), name="tiny")


def test_early_stopping_stops(data):
    """No improvement of min_delta=100 after epoch 0: stopped after epoch 1."""
    x, y = data
    stop = keras.callbacks.EarlyStopping(monitor="loss", min_delta=100, patience=1)
    h = model(epochs=10).fit(x, y, verbose=0, callbacks=[stop])
    assert len(h.epoch) == 2 and h.params["early_stopped"]
    assert stop.stopped_epoch == 1


def test_csv_logger_writes_every_epoch(data, in_tmp):
    x, y = data
    h = model().fit(x, y, epochs=3, validation_split=0.2, verbose=0,
                    callbacks=[keras.callbacks.CSVLogger("log.csv")])
    with open(in_tmp / "log.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["epoch"]) for r in rows] == [0, 1, 2]
    assert set(rows[0]) == {"epoch", "loss", "accuracy", "val_loss", "val_accuracy"}
    assert [float(r["val_loss"]) for r in rows] == pytest.approx(h.history["val_loss"])


def test_lambda_callback_batch_and_train_hooks(data):
    x, y = data
    seen = {"begin": 0, "batches": [], "end": None}
    cb = keras.callbacks.LambdaCallback(
        on_train_begin=lambda logs: seen.update(begin=seen["begin"] + 1),
        on_train_batch_end=lambda batch, logs: seen["batches"].append((batch, logs["loss"])),
        on_train_end=lambda logs: seen.update(end=logs))
    h = model().fit(x, y, epochs=2, verbose=0, callbacks=[cb])
    steps = h.params["steps"]
    assert seen["begin"] == 1 and len(seen["batches"]) == 2 * steps
    assert [b for b, _ in seen["batches"][:steps]] == list(range(steps))
    assert all(math.isfinite(loss) for _, loss in seen["batches"])
    assert seen["end"]["loss"] == h.history["loss"][-1]


def test_terminate_on_nan_sees_every_batch(data):
    """TerminateOnNaN's on_batch_end (reached through Keras's
    on_train_batch_end) gets each step's loss; finite losses stop nothing."""
    x, y = data

    class Counting(keras.callbacks.TerminateOnNaN):
        losses = []

        def on_batch_end(self, batch, logs=None):
            Counting.losses.append(logs["loss"])
            super().on_batch_end(batch, logs)

    h = model().fit(x, y, epochs=2, verbose=0, callbacks=[Counting()])
    assert len(Counting.losses) == 2 * h.params["steps"] and len(h.epoch) == 2


def test_terminate_on_nan_stops_the_fit(data):
    """A NaN loss in a batch's logs: TerminateOnNaN sets stop_training, the
    fit ends after that epoch."""
    x, y = data

    class NaNAtBatch2(keras.callbacks.TerminateOnNaN):
        def on_batch_end(self, batch, logs=None):
            super().on_batch_end(batch, dict(logs, loss=float("nan")) if batch == 2 else logs)

    h = model(epochs=5).fit(x, y, verbose=0, callbacks=[NaNAtBatch2()])
    assert len(h.epoch) == 1 and h.params["early_stopped"]


def test_reduce_lr_on_plateau_reads_the_rate(data):
    """ReduceLROnPlateau reads model.optimizer.learning_rate each epoch; a
    reduction is refused by name (the C fit's rate is fixed at its start)."""
    x, y = data
    logs = []
    cb = keras.callbacks.ReduceLROnPlateau(monitor="loss", patience=100)
    spy = keras.callbacks.LambdaCallback(on_epoch_end=lambda e, lg: logs.append(lg))
    model().fit(x, y, epochs=2, verbose=0, callbacks=[cb, spy])
    assert len(logs) == 2
    reduce = keras.callbacks.ReduceLROnPlateau(monitor="loss", min_delta=100, patience=1)
    with pytest.raises(NotImplementedError, match="learning rate"):
        model().fit(x, y, epochs=3, verbose=0, callbacks=[reduce])



def test_model_checkpoint_saves_each_epoch(data, in_tmp):
    """ModelCheckpoint calls save(path, overwrite=True) from on_epoch_end:
    each epoch's .keras, the last one Keras's predictions of the model."""
    x, y = data
    m = model()
    ck = keras.callbacks.ModelCheckpoint("ck-{epoch:02d}.keras")
    best = keras.callbacks.ModelCheckpoint("best.keras", monitor="loss", save_best_only=True)
    m.fit(x, y, epochs=2, verbose=0, callbacks=[ck, best])
    assert sorted(p.name for p in in_tmp.glob("ck-*.keras")) == ["ck-01.keras", "ck-02.keras"]
    last = keras.models.load_model(in_tmp / "ck-02.keras")
    assert last.count_params() == m.info.params
    np.testing.assert_allclose(last.predict(x[:8], verbose=0), m.predict(x[:8]), atol=1e-4)
    assert (in_tmp / "best.keras").stat().st_size > 0


def test_early_stopping_restores_the_best_weights(data):
    """EarlyStopping(restore_best_weights=True): get_weights at each better
    epoch, set_weights at the end; the model's weights are the best epoch's
    (epoch 0 here: min_delta=100 is never improved on)."""
    x, y = data
    m = model(epochs=10)
    first = []
    spy = keras.callbacks.LambdaCallback(
        on_epoch_end=lambda e, logs: first.append(m.get_weights()) if e == 0 else None)
    stop = keras.callbacks.EarlyStopping(monitor="loss", min_delta=100, patience=2,
                                         restore_best_weights=True)
    h = m.fit(x, y, verbose=0, callbacks=[spy, stop])
    assert len(h.epoch) == 3 and stop.best_epoch == 0
    assert all(np.array_equal(a, b) for a, b in zip(m.get_weights(), first[0]))
