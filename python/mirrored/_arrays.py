"""numpy arrays -> mirrored_array: inputs x as uint8 or float32 in place
(other dtypes converted once, with a note), labels y as the model's loss
takes them (class ids int32, multi-hot or regression targets float32)."""
import ctypes
import sys

import numpy as np

from . import _lib
from .errors import DataError, InvalidArgumentError

_DTYPES = {np.dtype(np.uint8): _lib.UINT8, np.dtype(np.int32): _lib.INT32,
           np.dtype(np.float32): _lib.FLOAT32}


def note(text):
    """One line on stdout, from the lead process of the job only."""
    if _lib.job()[0] == 0:
        print(f"mirrored: note: {text}", file=sys.stdout, flush=True)


def _float32(a, name):
    if a.dtype != np.float32:
        note(f"{name} is {a.dtype}, converted to float32 once")
        a = a.astype(np.float32)
    return a


def to_c(a):
    """(mirrored_array, the contiguous ndarray it points into): keep the
    ndarray alive while the C call runs."""
    a = np.ascontiguousarray(a)
    if a.ndim < 1 or a.ndim > _lib.MAX_DIMS:
        raise InvalidArgumentError(
            f"an array of {a.ndim} dimensions (1 to {_lib.MAX_DIMS} are taken)")
    arr = _lib.Array()
    arr.dtype = _DTYPES[a.dtype]
    arr.ndim = a.ndim
    for i, d in enumerate(a.shape):
        arr.shape[i] = d
    arr.data = a.ctypes.data_as(ctypes.c_void_p)
    return arr, a


def inputs(x, name="x"):
    """x as uint8 or float32 (n, ...), read in place where it is one."""
    x = np.asarray(x)
    if x.dtype != np.uint8:
        x = _float32(x, name)
    return to_c(x)


def _class_ids(y, name, classes):
    """Class ids (n) from ids of any integer dtype, integral floats, or
    one-hot rows (n, k)."""
    if y.ndim == 2 and y.shape[1] > 1:
        ones = (y == 1).sum(axis=1)
        zeros = (y == 0).sum(axis=1)
        bad = np.nonzero((ones != 1) | (ones + zeros != y.shape[1]))[0]
        if bad.size:
            raise DataError(f"{name}: row {bad[0]} is not one-hot ({y.shape[1]} columns: "
                             f"class ids or one-hot rows are taken)")
        if classes and y.shape[1] != classes:
            raise DataError(f"{name}: one-hot rows of {y.shape[1]} columns for a model of "
                             f"{classes} classes")
        return np.argmax(y, axis=1).astype(np.int32)
    if y.dtype.kind == "f":
        if not np.all(np.isfinite(y)) or np.any(y != np.round(y)):
            raise DataError(f"{name}: class ids must be whole numbers")
    elif y.dtype.kind not in "iub":
        raise DataError(f"{name}: labels of dtype {y.dtype} (class ids or one-hot rows)")
    _check_ids(y, name, classes)
    return y.astype(np.int32, copy=False)


def _check_ids(y, name, classes):
    """Class ids in [0, classes) (classes 0: [0, 2**31)), checked at their
    own width before the cast to int32, so 2**32 + k is never k."""
    if y.size == 0:
        return
    high = classes if classes else 2**31
    low_at, high_at = int(np.argmin(y)), int(np.argmax(y))
    for at in (low_at, high_at):
        v = y.flat[at]
        if not 0 <= v < high:
            row = np.unravel_index(at, y.shape)[0]
            raise DataError(f"{name}: label {v.item()!r} at row {row} is not a class id of this "
                             f"model (0 to {high - 1})")


def labels(y, info, name="y"):
    """y as the model's loss takes it (info: ModelInfo)."""
    y = np.asarray(y)
    if info.regression or info.label_width > 1:
        return to_c(_float32(y, name))
    return to_c(_class_ids(y, name, info.outputs if info.outputs > 1 else 0))
