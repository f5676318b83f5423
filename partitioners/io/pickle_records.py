"""The inert stand-ins of a restricted unpickle, and the checked steps that turn them into data.

:class:`~partitioners.io.safe_pickle.RestrictedUnpickler` hands the pickle a token
(:class:`_Name`) for each admitted name, never the object, and calling a token builds a record
(:class:`_ArrayRecord`, :class:`_DtypeRecord`, :class:`_SparseRecord`) that only writes down what
the file asked for. A record's ``setstate`` (the pickle's ``BUILD``) checks that state and builds
the real object itself: a dtype from the fixed table :data:`_DTYPES`, an array whose bytes match
its shape, a ``csr_matrix``/``csc_matrix`` whose arrays pass :func:`_check_sparse`.
:func:`sparse_to_dense` checks an unpickled sparse matrix the same way and densifies it itself.
Every message describes a value from the file with :func:`_short` (never a full repr).
Torch-free.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

if TYPE_CHECKING:
    from .safe_pickle import RestrictedUnpickler

__all__ = ["MAX_DENSE_BYTES", "sparse_to_dense"]

MAX_DENSE_BYTES = 1 << 32
"""The largest dense array :func:`sparse_to_dense` allocates by default (4 GiB)."""

_MAX_NDIM = 32
_MAX_DIM = 1 << 62


# ------------------------------------------------------------------------------- inert stand-ins
class _Name:
    """What ``find_class`` answers for an admitted name: a token, not the object it names."""

    __slots__ = ("qualname", "kind")

    def __init__(self, qualname: str, kind: str) -> None:
        self.qualname = qualname
        self.kind = kind

    def __repr__(self) -> str:
        return self.qualname


class _DtypeRecord:
    """``numpy.dtype(code, ...)`` and its ``__setstate__`` tuple, as the file gave them."""

    __slots__ = ("base", "value")

    def __init__(self, base: np.dtype) -> None:
        self.base = base                       # from the fixed table, native byte order
        self.value: np.dtype | None = None     # with the byte order of the state, once set

    def setstate(self, u: RestrictedUnpickler, state: Any) -> None:
        if self.value is not None:
            u.refuse("a second state for a numpy dtype (BUILD twice on it)")
        if type(state) is not tuple or not 5 <= len(state) <= 9:
            u.bad(f"a numpy dtype state of {_short(state)} (expected numpy's 5- to 9-item tuple)")
        if len(state) == 5:
            endian, subarray, fields, names, metadata = state[0], state[1], state[2], None, None
        elif len(state) == 6:
            endian, subarray, fields, names, metadata = state[1], state[2], state[3], None, None
        else:
            endian, subarray, names, fields = state[1], state[2], state[3], state[4]
            metadata = state[8] if len(state) == 9 else None
        if subarray is not None or names is not None or fields is not None or metadata is not None:
            u.refuse(f"a numpy dtype with fields, sub-arrays or metadata ({self.base.str[1:]}): only "
                     f"plain bool, integer and floating-point dtypes are allowed")
        if type(endian) is bytes:
            endian = endian.decode("latin1")
        if endian not in ("<", ">", "=", "|"):
            u.bad(f"a numpy dtype byte order of {_short(endian)} (expected '<', '>', '=' or '|')")
        if self.base.itemsize == 1 or endian in ("=", "|"):
            if endian == "|" and self.base.itemsize != 1:
                u.bad(f"a numpy dtype {self.base.str[1:]} without a byte order ('|')")
            self.value = self.base
        else:
            self.value = self.base.newbyteorder(endian)


class _ArrayRecord:
    """An ndarray being unpickled: ``_reconstruct``'s arguments, then its ``__setstate__`` tuple
    (version, shape, dtype record, is_fortran, raw bytes); holds the checked array once built."""

    __slots__ = ("value",)

    def __init__(self, value: np.ndarray | None = None) -> None:
        self.value = value

    def setstate(self, u: RestrictedUnpickler, state: Any) -> None:
        if self.value is not None:
            u.refuse("a second state for a numpy array (BUILD twice on it)")
        if type(state) is not tuple or len(state) not in (4, 5):
            u.bad(f"a numpy array state of {_short(state)} (expected (version, shape, dtype, "
                  f"is_fortran, data))")
        if len(state) == 5 and (type(state[0]) is not int or state[0] not in (0, 1)):
            u.bad(f"a numpy array state of version {_short(state[0])} (expected 1)")
        shape, dtype, fortran, raw = state[-4:]
        dt = u.dtype_of(dtype)
        if type(fortran) not in (bool, int) or fortran not in (0, 1):
            u.bad(f"a numpy array's is_fortran flag of {_short(fortran)} (expected True or False)")
        if type(raw) is list:
            u.refuse("a numpy array whose data is a list of objects (an object array): only bool, "
                     "integer and floating-point arrays are allowed")
        self.value = u.make_array(u.raw_bytes(raw, "a numpy array's data"), dt, shape,
                                  "F" if fortran else "C")


class _SparseRecord:
    """A ``csr_matrix``/``csc_matrix`` being unpickled: the state dict it is given; holds the
    checked matrix once built."""

    __slots__ = ("fmt", "value")

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        self.value: sp.spmatrix | None = None

    def setstate(self, u: RestrictedUnpickler, state: Any) -> None:
        what = f"{self.fmt}_matrix"
        if self.value is not None:
            u.refuse(f"a second state for a {what} (BUILD twice on it)")
        if type(state) is tuple and len(state) == 2 and state[1] is None:
            state = state[0]                   # (dict, slot state) with no slots
        if type(state) is not dict:
            u.bad(f"a {what} state of {_short(state)} (expected a dict of its attributes)")
        fields: dict[str, Any] = {}
        for key, value in state.items():
            if type(key) is bytes:
                key = key.decode("latin1")
            if type(key) is str:
                fields[key] = value
        fmt = fields.get("format", self.fmt)
        fmt = fmt.decode("latin1") if type(fmt) is bytes else fmt
        if type(fmt) is not str or fmt != self.fmt:
            u.bad(f"a {what} whose state says format {_short(fmt)}")
        arrays = []
        for key in ("data", "indices", "indptr"):
            rec = fields.get(key)
            if type(rec) is not _ArrayRecord or rec.value is None:
                u.bad(f"a {what} whose {key!r} is {_short(rec)}, not a numpy array")
            arrays.append(rec.value)
        shape = fields.get("_shape", fields.get("shape"))
        try:
            shape, data, indices, indptr = _check_sparse(self.fmt, shape, *arrays)
        except ValueError as exc:
            u.bad(f"a {what} that is not valid: {exc}")
        cls = sp.csr_matrix if self.fmt == "csr" else sp.csc_matrix
        self.value = cls((data, indices, indptr), shape=shape)


_RECORDS = (_ArrayRecord, _DtypeRecord, _SparseRecord)

_DTYPES = {code: np.dtype(code) for code in
           ("b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8")}


def _short(value: Any) -> str:
    """A short description of a value from the file (never a full repr: it may be huge or deep)."""
    if value is None or type(value) in (bool, float):
        return repr(value)
    if type(value) is int:
        return repr(value) if value.bit_length() <= 64 else f"an int of {value.bit_length()} bits"
    if type(value) in (str, bytes):
        return repr(value[:40]) + ("..." if len(value) > 40 else "")
    if type(value) is _Name:
        return value.qualname
    if type(value) is tuple and len(value) <= 4:     # one level only: items of items are named by type
        items = [_short(v) if v is None or type(v) in (bool, int, float, str, bytes, _Name)
                 else _short_type(v) for v in value]
        return "(" + ", ".join(items) + ("," if len(value) == 1 else "") + ")"
    return _short_type(value)


def _short_type(value: Any) -> str:
    if type(value) is _ArrayRecord:
        return "a numpy array"
    if type(value) is _DtypeRecord:
        return "a numpy dtype"
    if type(value) is _SparseRecord:
        return f"a {value.fmt}_matrix"
    if type(value) is _Name:
        return value.qualname
    return f"a {type(value).__name__}"


# ------------------------------------------------------------------------- sparse checks, dense
def _check_sparse(fmt: str, shape: Any, data: Any, indices: Any, indptr: Any
                  ) -> tuple[tuple[int, int], np.ndarray, np.ndarray, np.ndarray]:
    """``(shape, data, indices, indptr)`` of a csr/csc matrix, checked with numpy (every index in
    range, ``indptr`` from 0, never decreasing, within the arrays); ValueError otherwise."""
    if (type(shape) is not tuple or len(shape) != 2
            or not all(isinstance(s, (int, np.integer)) and not isinstance(s, (bool, np.bool_))
                       and 0 <= s < _MAX_DIM for s in shape)):
        raise ValueError(f"its shape {_short(shape)} is not two non-negative integers")
    rows, cols = int(shape[0]), int(shape[1])
    for key, a, kinds in (("data", data, "biuf"), ("indices", indices, "iu"), ("indptr", indptr, "iu")):
        if type(a) is not np.ndarray or a.ndim != 1 or a.dtype.kind not in kinds:
            described = f"{a.dtype}{list(a.shape)}" if isinstance(a, np.ndarray) else _short(a)
            raise ValueError(f"its {key!r} is {described}, not a 1-D "
                             f"{'numeric' if key == 'data' else 'integer'} array")
    major, minor = (rows, cols) if fmt == "csr" else (cols, rows)
    what = ("row", "column") if fmt == "csr" else ("column", "row")
    if indptr.size != major + 1:
        raise ValueError(f"its indptr has {indptr.size} entries for {major} {what[0]}s (needs {major} + 1)")
    if indptr.dtype.kind == "u" and indptr.size and int(indptr.max()) >= _MAX_DIM:
        raise ValueError("its indptr holds an offset past the arrays")
    ptr = indptr.astype(np.int64)
    if int(ptr[0]) != 0:
        raise ValueError(f"its indptr starts at {int(ptr[0])}, not 0")
    if ptr.size > 1 and bool((np.diff(ptr) < 0).any()):
        at = int(np.flatnonzero(np.diff(ptr) < 0)[0])
        raise ValueError(f"its indptr decreases at {what[0]} {at}")
    nnz = int(ptr[-1])
    if indices.size != data.size or nnz > indices.size:
        raise ValueError(f"its indptr ends at {nnz} but it has {indices.size} indices and {data.size} values")
    if indices.dtype.kind == "u" and nnz and int(indices[:nnz].max()) >= _MAX_DIM:
        raise ValueError(f"a {what[1]} index is outside its {minor} {what[1]}s")
    idx = indices[:nnz].astype(np.int64)
    if nnz and (int(idx.min()) < 0 or int(idx.max()) >= minor):
        bad = int(idx[(idx < 0) | (idx >= minor)][0])
        raise ValueError(f"its {what[1]} index {bad} is outside its {minor} {what[1]}s")
    values = data[:nnz]
    values = values.astype(np.float32 if values.dtype.kind == "f" and values.dtype.itemsize < 4
                           else values.dtype.newbyteorder("="))
    return (rows, cols), values, idx, ptr


def sparse_to_dense(obj: Any, what: str, dtype: Any = np.float32, *,
                    max_bytes: int = MAX_DENSE_BYTES) -> np.ndarray:
    """A dense 2-D array from an unpickled ndarray or csr/csc matrix.

    A sparse matrix is read from its instance attributes (``data``/``indices``/``indptr``/shape,
    never its methods), checked as :func:`restricted_load` checks it (every index in range), and
    densified here (repeated entries summed, as scipy does). ValueError, one line starting with
    ``what``, for anything else, and for a dense result over ``max_bytes``.
    """
    if isinstance(obj, np.ndarray):
        if obj.ndim != 2 or obj.dtype.kind not in "biuf":
            raise ValueError(f"{what}: expected a 2-D numeric array, got {obj.dtype}{list(obj.shape)}")
        return np.asarray(obj, dtype=dtype)
    if type(obj) not in (sp.csr_matrix, sp.csc_matrix):
        raise ValueError(f"{what}: expected a scipy sparse matrix or an array, got {type(obj).__name__}")
    fmt = "csr" if type(obj) is sp.csr_matrix else "csc"
    state = vars(obj)
    try:
        (rows, cols), data, indices, indptr = _check_sparse(
            fmt, state.get("_shape", state.get("shape")), state.get("data"), state.get("indices"),
            state.get("indptr"))
    except ValueError as exc:
        raise ValueError(f"{what}: not a valid sparse matrix ({exc})") from None
    dt = np.dtype(dtype)
    nbytes = rows * cols * dt.itemsize
    if nbytes > max_bytes:
        raise ValueError(f"{what}: its {rows} x {cols} matrix needs {nbytes} bytes dense, over the "
                         f"limit of {max_bytes}")
    try:
        out = np.zeros((rows, cols), dtype=dt)
    except MemoryError:
        raise ValueError(f"{what}: no memory for its {rows} x {cols} matrix dense ({nbytes} bytes)") from None
    major = np.repeat(np.arange(indptr.size - 1, dtype=np.int64), np.diff(indptr))
    where = (major, indices) if fmt == "csr" else (indices, major)
    np.add.at(out, where, data.astype(dt, copy=False))
    return out
