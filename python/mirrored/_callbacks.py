"""Keras's callback protocol over a fit, an evaluate or a predict: the
hooks of keras.callbacks.Callback, called on the caller's thread.

A callback is any object (a keras.callbacks.Callback, or one's own class);
a hook it lacks is skipped. Batch hooks (on_train_batch_begin/_end, and
Keras's on_batch_begin/_end) are called only where a callback overrides
Keras's no-op ones, so that a fit whose callbacks have none (EarlyStopping,
CSVLogger, ModelCheckpoint with save_freq="epoch") runs its steps as a
fit without callbacks does (_fit.py: the C thread never waits on Python
for a step then)."""
from __future__ import annotations

from typing import Any, Iterable, Optional

_BATCH_HOOKS = ("on_train_batch_begin", "on_train_batch_end", "on_batch_begin", "on_batch_end")


def _overrides(cb: Any, name: str) -> bool:
    """cb has hook `name` of its own: an instance attribute (Keras's
    LambdaCallback) or a class's, not keras.callbacks.Callback's no-op."""
    if name in getattr(cb, "__dict__", {}):
        return True
    for klass in type(cb).__mro__:
        if name in vars(klass):
            return not (klass.__name__ == "Callback" and klass.__module__.startswith("keras"))
    return hasattr(cb, name)  # a __getattr__'s


class CallbackList:
    """The callbacks of one call, with the model's stop_training."""

    def __init__(self, callbacks: Optional[Iterable[Any]], model: Any):
        self.callbacks = list(callbacks or [])
        self.model = model
        # any batch hook: the fit delivers step events to them (_fit.py)
        self.batch_hooks = any(_overrides(cb, n) for cb in self.callbacks for n in _BATCH_HOOKS)
        for cb in self.callbacks:
            if hasattr(cb, "set_model"):
                cb.set_model(model)

    def __bool__(self) -> bool:
        return bool(self.callbacks)

    def set_params(self, params: dict[str, Any]) -> None:
        for cb in self.callbacks:
            if hasattr(cb, "set_params"):
                cb.set_params(dict(params))

    def call(self, hook: str, *args: Any) -> None:
        """hook(*args) on each callback that has it; a logs dict is copied
        per callback (Keras's callbacks add keys to theirs)."""
        for cb in self.callbacks:
            fn = getattr(cb, hook, None)
            if fn is not None:
                fn(*[dict(a) if isinstance(a, dict) else a for a in args])

    def train_batch(self, batch: int, logs: dict[str, float]) -> None:
        """A step's hooks, after the step (_fit.py queues them): begin with
        no logs, then end with the running means of the epoch so far."""
        for cb in self.callbacks:
            for begin_or_end, hook_logs in (("begin", {}), ("end", logs)):
                train, plain = f"on_train_batch_{begin_or_end}", f"on_batch_{begin_or_end}"
                if _overrides(cb, train) or _overrides(cb, plain):
                    # Keras's on_train_batch_* calls on_batch_*; a class of
                    # one's own may have either
                    fn = getattr(cb, train, None) or getattr(cb, plain)
                    fn(batch, dict(hook_logs))
