"""Model.fit's arguments -> mirrored_fit_options (the arrays it points to
are returned beside it: keep them alive while the fit runs)."""
import ctypes
import os

from . import _arrays, _lib
from .errors import InvalidArgumentError


def _data(model, x, y, what):
    if x is None or y is None:
        raise InvalidArgumentError(f"fit: {what} needs both x and y")
    ax, xa = _arrays.inputs(x, "x" if what == "training" else "validation x")
    ay, ya = _arrays.labels(y, model.info, "y" if what == "training" else "validation y")
    return ax, ay, [ax, ay, xa, ya]


def _stop_path(model, stop_checkpoint):
    if stop_checkpoint is None:
        return None
    if stop_checkpoint == "auto":
        return os.fsencode(os.path.abspath(f"{model.name}-stopped.h5"))
    return os.fsencode(os.fspath(stop_checkpoint))


def fit_options(model, x, y, batch_size, epochs, validation_split, validation_data, seed,
                max_steps, stop_checkpoint):
    """(mirrored_fit_options, objects to keep alive)."""
    o = _lib.lib.mirrored_fit_options_default()
    # this package's layout, whatever the library's is: a library that reads
    # another refuses it rather than misread the fields
    o.struct_version = _lib.FIT_OPTIONS_VERSION
    keep = []
    if x is not None or y is not None:
        ax, ay, k = _data(model, x, y, "training")
        o.x, o.y = ctypes.pointer(ax), ctypes.pointer(ay)
        keep += k
    if validation_data is not None:
        if len(validation_data) != 2:
            raise InvalidArgumentError("fit: validation_data is (x_val, y_val)")
        vx, vy, k = _data(model, *validation_data, "validation")
        o.val_x, o.val_y = ctypes.pointer(vx), ctypes.pointer(vy)
        keep += k
    if epochs is not None:
        o.epochs = int(epochs)
    if batch_size is not None:
        o.batch_size = int(batch_size)
    if validation_split is not None:
        o.validation_split = float(validation_split)
    if seed is not None:
        o.seed = int(seed)
    if max_steps is not None:
        o.max_steps = int(max_steps)
    o.stop_checkpoint = _stop_path(model, stop_checkpoint)
    keep.append(o.stop_checkpoint)
    return o, keep
