"""tfc's exception classes: one per libtfrun status code, and CompileError.

The native module raises the class registered here for each ``tfrun_code_t``
(include/tfrun/tfrun.h) with the runtime's message; tfc.compile raises
CompileError with the compiler's first diagnostic.
"""
from __future__ import annotations

from typing import Optional


class Error(RuntimeError):
    """Base class of every error tfc raises. ``code`` is the C API status code."""

    code: int = -1


class InvalidArgument(Error, ValueError):
    """Bad input: an unknown input name, a wrong dtype or rank, ids outside the vocabulary,
    bad generation options (TFRUN_INVALID_ARGUMENT)."""

    code = 1


class InvalidModel(Error):
    """model.bin is truncated, corrupt or inconsistent (TFRUN_INVALID_MODEL)."""

    code = 2


class Unsupported(Error):
    """A format version, kernel or device this runtime lacks (TFRUN_UNSUPPORTED)."""

    code = 3


class IoError(Error):
    """A file could not be read or written (TFRUN_IO_ERROR)."""

    code = 4


class OutOfMemory(Error, MemoryError):
    """An allocation failed (TFRUN_OUT_OF_MEMORY)."""

    code = 5


class Internal(Error):
    """A bug in tfc (TFRUN_INTERNAL)."""

    code = 6


class NonFinite(Error, ArithmeticError):
    """The model computed NaN or +inf where a finite value is needed: generation's
    logits (TFRUN_NON_FINITE; docs/generation.md, "Non-finite logits")."""

    code = 7


class NonFiniteWarning(RuntimeWarning):
    """An output holds NaN or infinite values (``Session.run``, ``Session.generate``'s
    scores): ``output "logits" holds 12 NaN and 0 inf values``, as tfrun warns."""


def warn_non_finite(name: str, values) -> None:
    """Warns (NonFiniteWarning, once per distinct message under Python's default filter)
    when the float array ``values`` holds NaN or infinite values."""
    import warnings

    import numpy as np

    v = np.asarray(values, dtype=np.float32)
    nan = int(np.count_nonzero(np.isnan(v)))
    inf = int(np.count_nonzero(np.isinf(v)))
    if nan or inf:
        warnings.warn(f'output "{name}" holds {nan} NaN and {inf} inf values',
                      NonFiniteWarning, stacklevel=3)


class CompileError(Error):
    """A compiler diagnostic: ``file:line:column: error: message``.

    ``file``, ``line`` and ``column`` are None when the diagnostic has no location.
    ``diagnostics`` holds every diagnostic line the compiler printed (errors and warnings).
    """

    def __init__(self, message: str, file: Optional[str] = None, line: Optional[int] = None,
                 column: Optional[int] = None, diagnostics: Optional[list] = None) -> None:
        self.message = message
        self.file = file
        self.line = line
        self.column = column
        self.diagnostics = list(diagnostics or [])
        where = f"{file}:{line}:{column}: " if file is not None and line is not None else ""
        super().__init__(f"{where}{message}")


class Cancelled(Error):
    """An engine request was cancelled (TFRUN_CANCELLED; ``Request.cancel``)."""

    code = 8


class Busy(Error):
    """The engine's queue is full: try again later (TFRUN_BUSY). Nothing was queued."""

    code = 9


#: The class of each status code, registered with the native module.
BY_CODE = {cls.code: cls for cls in (InvalidArgument, InvalidModel, Unsupported, IoError,
                                     OutOfMemory, Internal, NonFinite, Cancelled, Busy)}
