"""Pickles as Python 2 wrote them (the published Planetoid files): py2 module names, and bytes as
py2 ``str`` opcodes (``SHORT_BINSTRING``/``BINSTRING``: read back with ``encoding="latin1"``), at
protocol 2. Shared by the Planetoid reader's tests and the pickle corpus."""

from __future__ import annotations

import io
import pickle
import struct
import types
from typing import Any

__all__ = ["PY2_MODULES", "Py2Pickler", "py2_dumps"]

PY2_MODULES = {"numpy._core.multiarray": "numpy.core.multiarray", "numpy.core.multiarray": "numpy.core.multiarray",
               "scipy.sparse._csr": "scipy.sparse.csr", "scipy.sparse._csc": "scipy.sparse.csc",
               "builtins": "__builtin__", "copyreg": "copy_reg"}
"""Python 3 module names -> the names Python 2's numpy, scipy and pickle wrote."""


class Py2Pickler(pickle._Pickler):
    """A pickler that writes what Python 2's did (see the module docstring)."""

    dispatch = dict(pickle._Pickler.dispatch)

    def save_bytes(self, obj: bytes) -> None:
        if len(obj) < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([len(obj)]) + obj)
        else:
            self.write(pickle.BINSTRING + struct.pack("<i", len(obj)) + obj)
        self.memoize(obj)

    def save_global(self, obj: Any, name: str | None = None) -> None:
        module = PY2_MODULES.get(obj.__module__, obj.__module__)
        self.write(pickle.GLOBAL + f"{module}\n{name or obj.__qualname__}\n".encode())
        self.memoize(obj)

    dispatch[bytes] = save_bytes
    dispatch[type] = save_global
    dispatch[types.FunctionType] = save_global
    dispatch[types.BuiltinFunctionType] = save_global


def py2_dumps(obj: Any) -> bytes:
    """``obj`` pickled as Python 2 would have."""
    buf = io.BytesIO()
    Py2Pickler(buf, protocol=2).dump(obj)
    return buf.getvalue()
