"""Model: a libmirrored model handle with Keras's fit, evaluate, predict,
save and summary; load, from_config and the Keras bridges."""
from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import tempfile
import threading
from typing import Any, Callable, Iterable, Optional, Sequence, Union

import numpy as np
import numpy.typing as npt

from . import _arrays, _fit, _lib
from ._callbacks import CallbackList
from ._optimizer import Optimizer
from .errors import InvalidArgumentError, ModelBusyError
from .history import History
from .progress import Progress

# what a path argument may be: str, bytes or an os.PathLike (pathlib.Path)
PathLike = Union[str, bytes, os.PathLike]


@dataclasses.dataclass(frozen=True)
class ModelInfo:
    """What the model takes and gives (mirrored_model_get_info)."""
    input_shape: tuple[int, ...]  # one example's shape, channels last
    outputs: int         # values per example of the last layer
    label_width: int     # labels per example: 1 (class ids) or k
    regression: bool     # mse, mae or huber on float targets
    params: int
    epochs: int          # the .cfg's [net] epochs
    batch_size: int      # the .cfg's global batch
    has_data: bool       # the .cfg names training data
    metric: str          # "accuracy" or "mae"


def list_devices() -> list[str]:
    """The devices replicas can run on: ['cpu:0', 'cpu:1'] or ['gpu:0', ...]."""
    _lib.job()
    buf = ctypes.create_string_buffer(1 << 16)
    count = ctypes.c_int()
    _lib.call("mirrored_list_devices", buf, len(buf), ctypes.byref(count))
    return buf.value.decode().split()


def _enc(s):
    return None if s is None else os.fsencode(s)


class Model:
    """Use load(), Model.from_config() or Model.from_keras() to make one."""

    def __init__(self, handle: ctypes.c_void_p, name: str):
        # one call at a time per model (_call): held for the whole call
        self._lock = threading.Lock()
        self._busy: Optional[str] = None  # the call in progress, for messages
        self._h = handle
        self.name = name
        self.stop_training = False
        # the last fit's, filled as its epochs end (an interrupted fit's too)
        self.history: Optional[History] = None
        self.params_hash: Optional[str] = None  # the last fit's: mirrored_train --json's params_hash (hex)
        self._devices: Optional[str] = None  # the last devices the model ran on
        self._epoch_run = None  # the fit whose on_epoch_end callbacks run now (_fit.py)
        _lib.track(self)
        self.info = self._get_info()
        self.optimizer = Optimizer(self._optimizer_name())

    # ---- making and freeing
    @classmethod
    def _make(cls, fn, *args, name):
        _lib.job()
        h = ctypes.c_void_p()
        _lib.call(fn, *args, ctypes.byref(h))
        return cls(h, name)

    @classmethod
    def load(cls, path: PathLike) -> Model:
        """A .cfg, a Keras .keras or .h5 file, or a mirrored checkpoint."""
        path = os.fspath(path)
        stem = os.path.splitext(os.path.basename(path))[0]
        return cls._make("mirrored_model_load", os.fsencode(path), name=stem)

    @classmethod
    def from_config(cls, text: str, name: Optional[str] = None,
                    folder: Optional[PathLike] = None) -> Model:
        """A model from .cfg text; data paths in it are relative to folder
        (None: the working folder)."""
        return cls._make("mirrored_model_from_config", text.encode(), _enc(name), _enc(folder),
                         name=name or "model")

    @classmethod
    def from_keras(cls, keras_model: Any) -> Model:
        """A live keras.Model, through a temporary .keras file."""
        # load reads the whole file, weights included: the folder can go
        with tempfile.TemporaryDirectory(prefix="mirrored-") as tmp:
            path = os.path.join(tmp, (getattr(keras_model, "name", None) or "model") + ".keras")
            keras_model.save(path)
            return cls.load(path)

    def to_keras(self) -> Any:
        """The model as a keras.Model (keras.models.load_model of a .keras)."""
        import keras
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, self.name + ".keras")
            self.save(path)
            return keras.models.load_model(path)

    def _handle(self):
        if not self._h:
            raise InvalidArgumentError(f"{self.name}: the model is closed")
        return self._h

    def _refuse(self, what):
        return ModelBusyError(
            f"{self.name}: {what} refused: {self._busy or 'another call'} is in progress on "
            f"this model (one call at a time per model)")

    @contextlib.contextmanager
    def _call(self, what):
        """The model's handle for the call `what`, the model held until it
        returns; ModelBusyError at once where another call holds it."""
        if not self._lock.acquire(blocking=False):
            raise self._refuse(what)
        try:
            h = self._handle()
            self._busy = what
            yield h
        finally:
            self._busy = None
            self._lock.release()

    def close(self) -> None:
        """Frees the model (its replicas and weights). Refused with
        ModelBusyError while a call on it is in progress (another thread's
        fit, or from a fit's callback): stop the fit first
        (model.stop_training in a callback), then close."""
        lock = getattr(self, "_lock", None)
        if lock is not None and not lock.acquire(blocking=False):
            raise self._refuse("close")
        try:
            self._free()
        finally:
            if lock is not None:
                lock.release()

    def _free(self):
        h, self._h = getattr(self, "_h", None), None
        if h:
            _lib.lib.mirrored_model_destroy(h)

    def _close_at_exit(self, wait_s: float = 60.0) -> bool:
        """At the interpreter's exit: a call still running (a fit on a
        daemon thread) is asked to stop and waited for; True once freed."""
        if not self._lock.acquire(blocking=False):
            h = self._h
            if h:
                _lib.lib.mirrored_model_request_stop(h)
            if not self._lock.acquire(timeout=wait_s):
                return False
        try:
            self._free()
        finally:
            self._lock.release()
        return True

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone
            pass

    def __enter__(self) -> Model:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<mirrored.Model {self.name!r} params={self.info.params}>"

    def _get_info(self):
        i = _lib.ModelInfo()
        with self._call("get_info") as h:
            _lib.call("mirrored_model_get_info", h, ctypes.byref(i))
        return ModelInfo(tuple(i.input_shape[:i.input_ndim]), i.outputs, i.label_width,
                         bool(i.regression), i.params, i.epochs, i.batch_size, bool(i.has_data),
                         (i.metric or b"accuracy").decode())

    def _optimizer_name(self):
        i = _lib.ModelInfo()
        with self._call("get_info") as h:
            _lib.call("mirrored_model_get_info", h, ctypes.byref(i))
        return (i.optimizer or b"").decode()

    def _devices_arg(self, devices):
        if devices is None:
            devices = self._devices or "auto"
        if not isinstance(devices, str):
            raise InvalidArgumentError(
                f"devices={devices!r}: a string such as 'auto', 'cpu:2', 'gpu:0,1'")
        return devices.encode()

    # ---- Keras's methods
    def summary(self, print_fn: Optional[Callable[[str], Any]] = None) -> None:
        """Prints the layers, their output shapes and weights."""
        buf = ctypes.create_string_buffer(1 << 20)
        with self._call("summary") as h:
            _lib.call("mirrored_model_summary", h, buf, len(buf))
        (print_fn or print)(buf.value.decode().rstrip("\n"))

    def save(self, path: PathLike, overwrite: bool = True) -> None:
        """PATH.keras: a Keras 3 archive; PATH.h5: a mirrored checkpoint.
        overwrite=False: FileExistsError where the file is there (Keras
        asks on the terminal; a library does not). From a fit's
        on_epoch_end (Keras's ModelCheckpoint): PATH.keras only, the
        weights of the epoch just ended."""
        if not overwrite and os.path.exists(path):
            raise FileExistsError(f"save: {os.fsdecode(os.fspath(path))} exists "
                                  f"(overwrite=False)")
        path = os.fsencode(os.fspath(path))
        run = self._in_epoch()
        if run is not None:
            return run.on_fit_thread(lambda: _lib.call("mirrored_model_save", self._h, path))
        with self._call("save") as h:
            _lib.call("mirrored_model_save", h, path)

    def save_weights(self, filepath: PathLike, overwrite: bool = True) -> None:
        """Keras's save_weights: PATH.weights.h5, Keras's weights-only file
        (a keras.Model of the .keras save's architecture load_weights it)."""
        if not os.fspath(filepath).endswith(".weights.h5"):
            raise InvalidArgumentError(
                f"save_weights: {os.fsdecode(os.fspath(filepath))}: the file name must end "
                f"in .weights.h5 (Keras's weights-only file)")
        self.save(filepath, overwrite=overwrite)

    def load_weights(self, filepath: PathLike) -> None:
        """Keras's load_weights: a .weights.h5 (Keras's save_weights or
        ours), a Keras .h5 or .keras, or a mirrored checkpoint of this
        architecture; every replica gets the weights."""
        path = os.fsencode(os.fspath(filepath))
        with self._call("load_weights") as h:
            _lib.call("mirrored_model_load_weights", h, path)

    def _in_epoch(self):
        """The fit whose on_epoch_end runs on this thread (None: none)."""
        run = self._epoch_run
        return run if run is not None and threading.current_thread() is run.caller else None

    def get_weights(self) -> list[np.ndarray]:
        """Keras's get_weights: float32 arrays in Keras's order and shapes
        (each layer's, kernel before bias). From on_epoch_end: the weights
        of the epoch just ended."""
        run = self._in_epoch()
        if run is not None:
            return run.on_fit_thread(lambda: _read_weights(self._h))
        with self._call("get_weights") as h:
            return _read_weights(h)

    def set_weights(self, weights: Sequence[npt.ArrayLike]) -> None:
        """Keras's set_weights: as many arrays as get_weights gives, of its
        shapes (float32, or converted); every replica gets them."""
        arrays = [np.ascontiguousarray(w, dtype=np.float32) for w in weights]
        with self._call("set_weights") as h:
            count = ctypes.c_int()
            _lib.call("mirrored_model_get_weight", h, 0, None, None, 0, ctypes.byref(count))
            if len(arrays) != count.value:
                raise InvalidArgumentError(f"set_weights: {len(arrays)} arrays; the model has "
                                           f"{count.value} weights")
            for i, w in enumerate(arrays):
                a = _lib.Array(_lib.FLOAT32, w.ndim, (ctypes.c_int64 * _lib.MAX_DIMS)(*w.shape),
                               w.ctypes.data)
                _lib.call("mirrored_model_set_weight", h, i, ctypes.byref(a))

    def evaluate(self, x: Optional[npt.ArrayLike] = None, y: Optional[npt.ArrayLike] = None,
                 batch_size: Optional[int] = None, verbose: Union[str, int] = "auto",
                 return_dict: bool = False, devices: Optional[str] = None,
                 callbacks: Optional[Iterable[Any]] = None) -> Union[list[float], dict[str, float]]:
        """[loss, metric], or {"loss": .., "accuracy" or "mae": ..}; no x, y:
        the .cfg's test set. batch_size: Keras's, the rows of one step over
        the replicas (None: the model's, the .cfg's or the last fit's); the
        memory for activations is bounded by it. callbacks: Keras's
        on_test_begin and on_test_end (no batch hooks: one C call)."""
        from ._fit_options import check_int
        if (x is None) != (y is None):
            raise InvalidArgumentError(
                "evaluate: give both x and y, or neither (the .cfg's test set)")
        batch = 0 if batch_size is None else check_int("evaluate: batch_size", batch_size, 1,
                                                        1 << 30)
        keep, ax, ay = [], None, None
        if x is not None:
            ax, xa = _arrays.inputs(x)
            ay, ya = _arrays.labels(y, self.info)
            keep = [xa, ya]
        loss, metric = ctypes.c_double(), ctypes.c_double()
        cbs = CallbackList(callbacks, self)
        cbs.call("on_test_begin", {})
        with self._call("evaluate") as h:
            _lib.call("mirrored_model_evaluate", h, self._devices_arg(devices), batch,
                      ctypes.byref(ax) if ax else None, ctypes.byref(ay) if ay else None,
                      ctypes.byref(loss), ctypes.byref(metric))
        del keep
        self._devices = devices or self._devices
        out = {"loss": loss.value, self.info.metric: metric.value}
        cbs.call("on_test_end", out)
        if verbose and _lib.job()[0] == 0:
            print(" - ".join(f"{k}: {v:.4f}" for k, v in out.items()), flush=True)
        return out if return_dict else list(out.values())

    def predict(self, x: npt.ArrayLike, batch_size: Optional[int] = None,
                verbose: Union[str, int] = 0, devices: Optional[str] = None,
                callbacks: Optional[Iterable[Any]] = None) -> np.ndarray:
        """The model's outputs for x: (n, outputs) float32. batch_size as
        for evaluate; callbacks: Keras's on_predict_begin and on_predict_end
        (no batch hooks: one C call)."""
        from ._fit_options import check_int
        batch = 0 if batch_size is None else check_int("predict: batch_size", batch_size, 1,
                                                        1 << 30)
        ax, xa = _arrays.inputs(x)
        out = np.empty((xa.shape[0], self.info.outputs), dtype=np.float32)
        cbs = CallbackList(callbacks, self)
        cbs.call("on_predict_begin", {})
        with self._call("predict") as h:
            _lib.call("mirrored_model_predict", h, self._devices_arg(devices), batch,
                      ctypes.byref(ax), out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                      out.size)
        self._devices = devices or self._devices
        cbs.call("on_predict_end", {})
        return out

    def fit(self, x: Optional[npt.ArrayLike] = None, y: Optional[npt.ArrayLike] = None,
            batch_size: Optional[int] = None, epochs: Optional[int] = None,
            verbose: Union[str, int] = "auto", validation_split: Optional[float] = None,
            validation_data: Optional[Sequence[npt.ArrayLike]] = None,
            devices: Optional[str] = "auto", seed: Optional[int] = None,
            max_steps: Optional[int] = None, stop_checkpoint: Optional[PathLike] = "auto",
            callbacks: Optional[Iterable[Any]] = None) -> History:
        """Trains on x, y (no x, y: the .cfg's [data]) as Keras's fit does;
        returns a History. Ctrl-C stops it after the update in flight, writes
        the stop's checkpoint (stop_checkpoint; "auto": NAME-stopped.h5 in the
        working folder, None: none) and raises KeyboardInterrupt. epochs=0
        trains nothing; None: the .cfg's."""
        from ._fit_options import fit_options
        self._handle()  # a closed model says so here, not from the fit's thread
        opts, keep = fit_options(self, x, y, batch_size, epochs, validation_split,
                                 validation_data, seed, max_steps, stop_checkpoint)
        opts.devices = self._devices_arg(devices)
        history = History(self)
        self.history = history  # Keras's: an interrupted fit's finished epochs are there
        if epochs == 0:  # Keras: the arguments checked, nothing trained
            history.params.update(verbose=verbose, epochs=0, steps=0, updates=0)
            return history
        callbacks = CallbackList(callbacks, self)
        callbacks.set_params({"verbose": verbose, "epochs": epochs or self.info.epochs})
        quiet = _lib.job()[0] != 0
        progress = Progress(0 if quiet else verbose, epochs or self.info.epochs, self.info.metric)
        self.stop_training = False
        callbacks.call("on_train_begin", {})  # the model free: a callback may use it
        # Ctrl-C held from before the model is taken until after it is free
        with _fit.SigintGuard() as guard, self._call("fit") as h:
            result, end_logs = _fit.run(self, h, guard, opts, progress, history,
                                        self.info.metric, callbacks)
        del keep
        self._devices = devices or self._devices
        self.params_hash = f"{result.params_hash:016x}"
        history.params.update(verbose=verbose, epochs=epochs or self.info.epochs,
                              steps=progress.steps, replicas=result.replicas,
                              updates=result.updates, stopped=bool(result.stopped),
                              early_stopped=bool(result.early_stopped),
                              params_hash=self.params_hash)
        callbacks.call("on_train_end", end_logs)
        return history


def _read_weights(h):
    count = ctypes.c_int()
    _lib.call("mirrored_model_get_weight", h, 0, None, None, 0, ctypes.byref(count))
    out = []
    for i in range(count.value):
        a = _lib.Array()
        _lib.call("mirrored_model_get_weight", h, i, ctypes.byref(a), None, 0, None)
        w = np.empty(tuple(a.shape[:a.ndim]), dtype=np.float32)
        _lib.call("mirrored_model_get_weight", h, i, ctypes.byref(a),
                  w.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), w.size, None)
        out.append(w)
    return out


def load(path: PathLike) -> Model:
    """mirrored.load(path): Model.load."""
    return Model.load(path)
