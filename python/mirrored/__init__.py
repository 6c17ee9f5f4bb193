"""mirrored: data-parallel training on every core, every GPU or the
processes of an mpirun job, with Keras's names (libmirrored over ctypes).

    import mirrored
    m = mirrored.load("model.cfg")
    h = m.fit(x, y, epochs=5, validation_split=0.1, devices="cpu:2")
    m.evaluate(x_test, y_test); m.predict(x_test); m.save("out.keras")
"""
from ._lib import job
from ._lib import lib as _clib
from . import errors
from .errors import (AbortedError, ConfigError, DataError, Error, FileError,
                     InvalidArgumentError, ModelBusyError, NotFoundError, ResourceExhaustedError,
                     RunError, UnsupportedError)
from .history import History
from .model import Model, ModelInfo, list_devices, load

__version__: str = _clib.mirrored_version().decode()

__all__ = ["AbortedError", "ConfigError", "DataError", "Error", "FileError", "History", "errors",
           "InvalidArgumentError", "Model", "ModelBusyError", "ModelInfo", "NotFoundError",
           "ResourceExhaustedError", "RunError", "UnsupportedError", "job", "list_devices",
           "load", "__version__"]
