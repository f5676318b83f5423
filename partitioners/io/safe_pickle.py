"""Unpickle numpy arrays, scipy sparse matrices and dicts of lists, and nothing else.

Some published datasets (the Planetoid citation graphs) are Python pickles. A pickle can name
any importable callable and call it while it loads, so :func:`restricted_load` uses an
:class:`pickle.Unpickler` whose :meth:`~RestrictedUnpickler.find_class` looks each name the file
asks for up in :data:`ALLOWED` — a fixed table of objects this module resolved itself — and
refuses any other name with :class:`UnsafePickleError` before anything of it runs. Nothing the
file names is ever imported.

The table admits what numpy and scipy write for arrays and sparse matrices, under their
Python 2 and Python 3 module names: ndarray reconstruction (``_reconstruct``, ``ndarray``,
``dtype``, ``scalar``, ``_frombuffer``), ``csr_matrix``/``csc_matrix``, ``defaultdict`` and
``list`` for a graph dict, ``object`` and ``copyreg._reconstructor`` (protocols 0 and 1, limited
to the admitted classes), and ``_codecs.encode`` (how Python 3 writes bytes at protocol 2,
limited to latin-1). Py2 pickles load with ``encoding="latin1"`` (numpy's rule for them).

A loaded sparse matrix is not trusted as it is (its attributes came from the file): use
:func:`sparse_to_dense`, which rebuilds it from its arrays and checks every index.

This module is torch-free.
"""

from __future__ import annotations

import collections
import io
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = ["ALLOWED", "RestrictedUnpickler", "UnsafePickleError", "restricted_load", "sparse_to_dense"]


class UnsafePickleError(pickle.UnpicklingError):
    """The pickle names something outside :data:`ALLOWED` (nothing of it ran)."""


_SPARSE_CLASSES = (sp.csr_matrix, sp.csc_matrix)
_RECONSTRUCT = np.zeros(1).__reduce__()[0]          # numpy's ndarray reconstructor, this numpy's own
_SCALAR = np.float64(0).__reduce__()[0]             # numpy's scalar reconstructor
_FROMBUFFER = np.zeros(1).__reduce_ex__(5)[0]       # protocol 5 arrays


def _reconstruct(subtype: Any, shape: Any, dtype: Any) -> np.ndarray:
    if subtype is not np.ndarray:
        raise UnsafePickleError(f"refused: an array of type {subtype!r} (only numpy.ndarray is allowed)")
    return _RECONSTRUCT(subtype, shape, dtype)


def _reconstructor(cls: Any, base: Any, state: Any) -> Any:
    """``copyreg._reconstructor`` for the admitted sparse classes only (protocols 0 and 1)."""
    if cls not in _SPARSE_CLASSES or base is not object or state is not None:
        raise UnsafePickleError(f"refused: copyreg._reconstructor({cls!r}, {base!r}, ...) "
                                f"(only scipy sparse matrices are allowed)")
    return object.__new__(cls)


def _latin1(text: Any, encoding: Any = "latin1") -> bytes:
    """``_codecs.encode`` as Python 3 writes bytes at protocols < 3: latin-1 text only."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1", "iso-8859-1"):
        raise UnsafePickleError(f"refused: _codecs.encode with encoding {encoding!r} (only latin1)")
    return text.encode("latin1")


def _empty_bytes(*args: Any) -> bytes:
    """``bytes()`` as Python 3 writes an empty bytes object at protocols < 3."""
    if args:
        raise UnsafePickleError("refused: bytes(...) with arguments (only bytes() is allowed)")
    return b""


def _names(modules: tuple[str, ...], name: str, obj: Any) -> dict[tuple[str, str], Any]:
    return {(m, name): obj for m in modules}


_MULTIARRAY = ("numpy.core.multiarray", "numpy._core.multiarray")
_NUMERIC = ("numpy.core.numeric", "numpy._core.numeric")
_BUILTINS = ("__builtin__", "builtins")

ALLOWED: dict[tuple[str, str], Any] = {
    **_names(_MULTIARRAY, "_reconstruct", _reconstruct),
    **_names(_MULTIARRAY, "scalar", _SCALAR),
    **_names(_NUMERIC, "_frombuffer", _FROMBUFFER),
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    **_names(("scipy.sparse.csr", "scipy.sparse._csr", "scipy.sparse"), "csr_matrix", sp.csr_matrix),
    **_names(("scipy.sparse.csc", "scipy.sparse._csc", "scipy.sparse"), "csc_matrix", sp.csc_matrix),
    ("collections", "defaultdict"): collections.defaultdict,
    **_names(_BUILTINS, "list", list),
    **_names(_BUILTINS, "object", object),
    **_names(_BUILTINS, "bytes", _empty_bytes),
    **_names(("copy_reg", "copyreg"), "_reconstructor", _reconstructor),
    ("_codecs", "encode"): _latin1,
}
"""``(module, name)`` -> the object :class:`RestrictedUnpickler` hands out for it."""


class RestrictedUnpickler(pickle.Unpickler):
    """An Unpickler that resolves names only through :data:`ALLOWED` (see the module docstring)."""

    def __init__(self, file: Any, *, source: str = "the pickle", **kwargs: Any) -> None:
        super().__init__(file, **kwargs)
        self.source = source

    def find_class(self, module: str, name: str) -> Any:
        try:
            return ALLOWED[(module, name)]
        except (KeyError, TypeError):
            raise UnsafePickleError(
                f"{self.source}: refused to unpickle {module}.{name}: only numpy arrays, scipy "
                f"sparse matrices and dicts of lists are allowed (the file may try to run code; "
                f"nothing of it was run)") from None

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError(f"{self.source}: refused a persistent id: only plain data is allowed")


def restricted_load(path: str | Path, *, encoding: str = "latin1") -> Any:
    """The object pickled in ``path``, through :class:`RestrictedUnpickler` (``encoding`` for
    Python 2 strings). Raises :class:`UnsafePickleError` for a refused name, and
    :class:`pickle.UnpicklingError` (or ValueError, EOFError ...) for a damaged file."""
    data = Path(path).read_bytes()
    return RestrictedUnpickler(io.BytesIO(data), source=str(path), encoding=encoding).load()


def _state_array(state: dict[str, Any], key: str, what: str) -> np.ndarray:
    a = state.get(key)
    if not isinstance(a, np.ndarray) or a.ndim != 1 or a.dtype.hasobject:
        raise ValueError(f"{what}: its {key!r} is not a 1-D numeric array")
    return a


def sparse_to_dense(obj: Any, what: str, dtype: Any = np.float32) -> np.ndarray:
    """A dense 2-D array from an unpickled ndarray or sparse matrix, rebuilt from its arrays.

    A sparse matrix is rebuilt from its ``data``/``indices``/``indptr``/shape (not its methods:
    the file set its attributes) and fully checked (every index in range) before use.
    """
    if isinstance(obj, np.ndarray):
        if obj.ndim != 2 or obj.dtype.hasobject:
            raise ValueError(f"{what}: expected a 2-D numeric array, got {obj.dtype}{list(obj.shape)}")
        return np.asarray(obj, dtype=dtype)
    if type(obj) not in _SPARSE_CLASSES:
        raise ValueError(f"{what}: expected a scipy sparse matrix or an array, got {type(obj).__name__}")
    state = vars(obj)
    shape = state.get("_shape", state.get("shape"))
    if (not isinstance(shape, tuple) or len(shape) != 2
            or not all(isinstance(s, (int, np.integer)) and s >= 0 for s in shape)):
        raise ValueError(f"{what}: its shape {shape!r} is not two non-negative integers")
    arrays = tuple(_state_array(state, k, what) for k in ("data", "indices", "indptr"))
    try:
        m = type(obj)(arrays, shape=(int(shape[0]), int(shape[1])))
        m.check_format(full_check=True)
    except (ValueError, TypeError, IndexError) as exc:
        raise ValueError(f"{what}: not a valid sparse matrix ({exc})") from None
    return m.toarray().astype(dtype, copy=False)
