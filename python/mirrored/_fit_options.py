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


_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1


def check_int(what, value, low, high):
    """value as an int in [low, high], else InvalidArgumentError naming what
    (an integer of any width is checked before it reaches C: 2**32 + k is
    not k, a bool or a float is not an integer)."""
    import numbers
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidArgumentError(f"{what}={value!r}: an integer is taken")
    value = int(value)
    if not low <= value <= high:
        raise InvalidArgumentError(f"{what}={value}: must be from {low} to {high}")
    return value


def check_split(what, value):
    """A fraction in [0, 1): NaN, negative or 1 and above refused."""
    import math
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{what}={value!r}: a number from 0 to below 1 is taken")
    if math.isnan(f) or not 0.0 <= f < 1.0:
        raise InvalidArgumentError(f"{what}={value!r}: must be from 0 to below 1")
    return f


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
    if epochs is not None:  # 0 trains nothing: Model.fit does not call C then
        o.epochs = check_int("fit: epochs", epochs, 0, _INT32_MAX)
    if batch_size is not None:
        o.batch_size = check_int("fit: batch_size", batch_size, 1, 1 << 30)
    if validation_split is not None:
        o.validation_split = check_split("fit: validation_split", validation_split)
    if seed is not None:
        o.seed = check_int("fit: seed", seed, 0, _INT64_MAX)
    if max_steps is not None:
        o.max_steps = check_int("fit: max_steps", max_steps, 1, _INT64_MAX)
    o.stop_checkpoint = _stop_path(model, stop_checkpoint)
    keep.append(o.stop_checkpoint)
    return o, keep
