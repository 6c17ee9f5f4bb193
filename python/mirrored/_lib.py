"""ctypes bindings of libmirrored (include/mirrored.h): the structs, the
functions' argument and result types, and failed calls raised as the
status's exception (errors.py).

The structs' layouts are checked against the header's by
tests/python/test_abi.py (sizes and offsets from a C compiler).

The library is looked for in this order: the path in $MIRRORED_LIBRARY,
libmirrored.so* in this package's folder (where the wheel installs it), then
ctypes.util.find_library('mirrored')."""
from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import glob
import os
import weakref
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char, c_char_p, c_double, c_float,
                    c_int, c_int64, c_size_t, c_uint64, c_void_p)

from .errors import ERR_RUNTIME, OK, raise_status  # noqa: F401 (ERR_RUNTIME: _fit.py's)

MAX_DIMS = 8
# the layout of FitOptions below (MIRRORED_FIT_OPTIONS_VERSION)
FIT_OPTIONS_VERSION = 1

# mirrored_dtype
UINT8, INT32, FLOAT32 = range(3)


class CError(Structure):
    """mirrored_error."""
    _fields_ = [("status", c_int), ("message", c_char * 1024)]


class Array(Structure):
    _fields_ = [("dtype", c_int), ("ndim", c_int), ("shape", c_int64 * MAX_DIMS),
                ("data", c_void_p)]


class ModelInfo(Structure):
    _fields_ = [("input_ndim", c_int), ("input_shape", c_int64 * MAX_DIMS), ("outputs", c_int),
                ("label_width", c_int), ("regression", c_int), ("params", c_int64),
                ("epochs", c_int), ("batch_size", c_int64), ("has_data", c_int),
                ("metric", c_char_p), ("source", c_char_p), ("layers", c_int),
                ("optimizer", c_char_p), ("updates", c_int64), ("scale", c_double),
                ("standardized", c_int)]


class StepLogs(Structure):
    _fields_ = [("epoch", c_int), ("step", c_int64), ("steps", c_int64), ("loss", c_double),
                ("metric", c_double)]


class EpochLogs(Structure):
    _fields_ = [("epoch", c_int), ("epochs", c_int), ("loss", c_double), ("metric", c_double),
                ("has_val", c_int), ("val_loss", c_double), ("val_metric", c_double),
                ("seconds", c_double), ("samples_per_sec", c_double), ("lr", c_float)]


STEP_FN = CFUNCTYPE(None, c_void_p, POINTER(StepLogs))
EPOCH_FN = CFUNCTYPE(c_int, c_void_p, POINTER(EpochLogs))


class FitOptions(Structure):
    _fields_ = [("struct_version", c_int), ("devices", c_char_p), ("epochs", c_int), ("batch_size", c_int64),
                ("validation_split", c_double), ("x", POINTER(Array)), ("y", POINTER(Array)),
                ("val_x", POINTER(Array)), ("val_y", POINTER(Array)), ("seed", c_int64),
                ("max_steps", c_int64), ("stop_checkpoint", c_char_p), ("on_step", STEP_FN),
                ("on_epoch", EPOCH_FN), ("user", c_void_p)]


class FitResult(Structure):
    _fields_ = [("epochs", c_int), ("updates", c_int64), ("stopped", c_int),
                ("early_stopped", c_int), ("replicas", c_int), ("params_hash", c_uint64)]


_ModelP = c_void_p  # mirrored_model * (opaque)
_ErrP = POINTER(CError)
_ArrP = POINTER(Array)

# name: (restype, argtypes), one per function of mirrored.h
_SIGNATURES = {
    "mirrored_version": (c_char_p, []),
    "mirrored_init": (c_int, [POINTER(c_int), c_void_p, _ErrP]),
    "mirrored_job": (c_int, [POINTER(c_int), POINTER(c_int), _ErrP]),
    "mirrored_finalize": (None, []),
    "mirrored_list_devices": (c_int, [c_char_p, c_size_t, POINTER(c_int), _ErrP]),
    "mirrored_model_load": (c_int, [c_char_p, POINTER(_ModelP), _ErrP]),
    "mirrored_model_from_config": (c_int, [c_char_p, c_char_p, c_char_p, POINTER(_ModelP),
                                           _ErrP]),
    "mirrored_model_destroy": (None, [_ModelP]),
    "mirrored_model_get_info": (c_int, [_ModelP, POINTER(ModelInfo), _ErrP]),
    "mirrored_model_summary": (c_int, [_ModelP, c_char_p, c_size_t, _ErrP]),
    "mirrored_fit_options_default": (FitOptions, []),
    "mirrored_model_fit": (c_int, [_ModelP, POINTER(FitOptions), POINTER(FitResult), _ErrP]),
    "mirrored_model_request_stop": (None, [_ModelP]),
    "mirrored_model_evaluate": (c_int, [_ModelP, c_char_p, c_int64, _ArrP, _ArrP,
                                        POINTER(c_double), POINTER(c_double), _ErrP]),
    "mirrored_model_predict": (c_int, [_ModelP, c_char_p, c_int64, _ArrP, POINTER(c_float),
                                       c_int64, _ErrP]),
    "mirrored_model_save": (c_int, [_ModelP, c_char_p, _ErrP]),
    "mirrored_model_load_weights": (c_int, [_ModelP, c_char_p, _ErrP]),
    "mirrored_model_get_weight": (c_int, [_ModelP, c_int, _ArrP, POINTER(c_float), c_int64,
                                          POINTER(c_int), _ErrP]),
    "mirrored_model_set_weight": (c_int, [_ModelP, c_int, _ArrP, _ErrP]),
}


def _candidates():
    """(paths to try, what was looked at) in the documented order."""
    tried = []
    env = os.environ.get("MIRRORED_LIBRARY")
    if env:
        tried.append(("$MIRRORED_LIBRARY", [env]))
    here = os.path.dirname(os.path.abspath(__file__))
    tried.append((os.path.join(here, "libmirrored.so*"),
                  sorted(glob.glob(os.path.join(here, "libmirrored.so*")))))
    found = ctypes.util.find_library("mirrored")
    tried.append(("ctypes.util.find_library('mirrored')", [found] if found else []))
    return tried


def _load():
    errors = []
    for where, paths in _candidates():
        if not paths:
            errors.append(f"{where}: none")
        for path in paths:
            try:
                return ctypes.CDLL(path)
            except OSError as e:
                errors.append(f"{where}: {e}")
    raise ImportError("mirrored: libmirrored not found; looked at " + "; ".join(errors) +
                      " (set MIRRORED_LIBRARY to the library's path)")


lib = _load()
for _name, (_res, _args) in _SIGNATURES.items():
    _fn = getattr(lib, _name)
    _fn.restype = _res
    _fn.argtypes = _args


def raise_error(status, err):
    """Raises the exception of a failed call's status (errors.py), with the
    C message as its text."""
    raise_status(status, err.message.decode("utf-8", "replace"))


def call(name, *args):
    """Calls a function that ends with a mirrored_error *; raises on failure."""
    err = CError()
    status = getattr(lib, name)(*args, ctypes.byref(err))
    if status != OK:
        raise_error(status, err)


_live_models = weakref.WeakSet()  # models to destroy before mirrored_finalize
_job = None  # (rank, size) once the job has started


def job() -> tuple[int, int]:
    """(rank, size) of this process in the job; starts the job on the first
    call (MPI under mpirun), which should be from the main thread."""
    global _job
    if _job is None:
        call("mirrored_init", None, None)
        rank, size = c_int(), c_int()
        call("mirrored_job", ctypes.byref(rank), ctypes.byref(size))
        _job = (rank.value, size.value)
        atexit.register(_finalize)
    return _job


def track(model):
    _live_models.add(model)


def _finalize():
    # a fit still running (a daemon thread's) is stopped and waited for:
    # MPI_Finalize under a running fit would crash the exit
    freed = [m._close_at_exit() for m in list(_live_models)]
    if all(freed):
        lib.mirrored_finalize()
