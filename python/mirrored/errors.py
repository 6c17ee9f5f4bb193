"""The package's exceptions: one base class, mirrored.Error, and a subclass
per status of the C API (mirrored_status in include/mirrored.h), each also
the Python built-in a caller would catch for it (ValueError, OSError,
FileNotFoundError, MemoryError, RuntimeError). The text is the library's
one line; .status is the mirrored_status it came from."""
from __future__ import annotations

from typing import NoReturn, Optional

# mirrored_status (include/mirrored.h)
OK, ERR_USAGE, ERR_CONFIG, ERR_IO, ERR_DATA, ERR_NOMEM, ERR_UNSUPPORTED, ERR_RUNTIME, \
    ERR_ABORTED, ERR_NOT_FOUND = range(10)


class Error(Exception):
    """Base class of every exception mirrored raises."""
    status: Optional[int] = None

    def __init__(self, message: str, status: Optional[int] = None):
        super().__init__(message)
        if status is not None:
            self.status = status


class InvalidArgumentError(Error, ValueError):
    """A bad argument: devices, an array's shape or dtype, a closed model."""
    status = ERR_USAGE


class ConfigError(Error, ValueError):
    """A bad .cfg, or a model file's architecture that cannot be honoured."""
    status = ERR_CONFIG


class DataError(Error, ValueError):
    """Data that is readable but wrong (labels out of range, a shape)."""
    status = ERR_DATA


class UnsupportedError(Error, ValueError):
    """What this build or machine cannot do (gpu:0 without a GPU)."""
    status = ERR_UNSUPPORTED


class ModelBusyError(Error, RuntimeError):
    """A call on a model while another is in progress on it (another
    thread's, or a fit's callback calling back into its model): one call at
    a time per model. Raised at once, naming the call in progress."""
    status = ERR_USAGE


class FileError(Error, OSError):
    """A file unreadable or unwritable."""
    status = ERR_IO


class NotFoundError(FileError, FileNotFoundError):
    """A file or folder that does not exist."""
    status = ERR_NOT_FOUND


class ResourceExhaustedError(Error, MemoryError):
    """An allocation failed."""
    status = ERR_NOMEM


class RunError(Error, RuntimeError):
    """A failure while running: a NaN loss, a collective timed out."""
    status = ERR_RUNTIME


class AbortedError(RunError):
    """Another process of the job failed first."""
    status = ERR_ABORTED


_BY_STATUS = {cls.status: cls for cls in (
    InvalidArgumentError, ConfigError, DataError, UnsupportedError, FileError, NotFoundError,
    ResourceExhaustedError, RunError, AbortedError)}


def error_class(status: int) -> type[Error]:
    """The exception class of a mirrored_status (RunError for one this
    package does not know)."""
    return _BY_STATUS.get(status, RunError)


def raise_status(status: int, message: str) -> NoReturn:
    """Raises the exception of a failed call, with the C message as its text."""
    raise error_class(status)(message or f"mirrored: status {status}", status)
