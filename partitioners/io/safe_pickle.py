"""Unpickle numpy arrays, scipy sparse matrices and dicts of lists, and nothing else.

Some published datasets (the Planetoid citation graphs) are Python pickles. A pickle can name
any importable object, call it, and set attributes on whatever it built or named, so
:func:`restricted_load` never hands the pickle a real class or a real callable:

- :class:`RestrictedUnpickler` runs the pure-Python pickle machine (``pickle._Unpickler``) with
  its own opcode table: the opcodes that call, build or fill something (``REDUCE``, ``NEWOBJ``,
  ``BUILD``, ``SETITEM(S)``, ``APPEND(S)``, ``DICT``) are replaced by checked versions, and the
  ones no array, matrix or dict of lists needs (``INST``, ``OBJ``, extensions, persistent ids,
  sets, out-of-band buffers) are refused.
- ``find_class`` answers each name of :data:`ALLOWED` with an inert token (:class:`_Name`),
  never with the object: calling a token builds a *record* (:class:`_ArrayRecord`,
  :class:`_DtypeRecord`, :class:`_SparseRecord`, plain Python objects defined here) that only
  writes down what the file asked for. ``BUILD`` is accepted on a record only (never on a token,
  a container, or twice); items go into plain lists and dicts only, under scalar keys.
- A record becomes a real object in checked Python steps: a dtype from a fixed table
  (bool, int, uint, float of the standard sizes, either byte order; no object dtype, fields or
  sub-arrays); an array only when its shape is non-negative integers and its raw bytes are
  exactly ``prod(shape) * itemsize`` (checked before anything is allocated, so every size is
  bounded by the file), through ``np.frombuffer(...).reshape(...)`` and a copy; a
  ``csr_matrix``/``csc_matrix`` only after its shape, ``indptr`` (starts at 0, never decreases,
  one entry per row/column + 1), ``indices`` (inside the other dimension) and ``data`` are checked
  with numpy, through ``scipy.sparse.csr_matrix((data, indices, indptr), shape=...)``. The
  ``defaultdict(list)`` of a graph file loads as a plain dict.

Names are admitted under their Python 2 and Python 3 module names (``numpy.core`` and
``numpy._core``, ``scipy.sparse.csr``/``_csr``, ``copy_reg``, ``__builtin__``), and protocols 0 to
5 are read (``_codecs.encode`` and ``bytes()`` are how Python 3 writes bytes at protocols < 3).
Py2 pickles load with ``encoding="latin1"`` (numpy's rule for them). Every refusal is one line
naming the file and what was refused: :class:`UnsafePickleError` for something a data file never
asks for, :class:`PickleDataError` (also a ValueError) for a damaged file or malformed data.
:func:`sparse_to_dense` checks a sparse matrix's arrays the same way and densifies it itself.

This module is torch-free.
"""

from __future__ import annotations

import io
import math
import pickle
import pickletools
import struct
from pathlib import Path
from typing import Any, Callable

import numpy as np
import scipy.sparse as sp

__all__ = ["ALLOWED", "MAX_DENSE_BYTES", "PickleDataError", "RestrictedUnpickler", "UnsafePickleError",
           "restricted_load", "sparse_to_dense"]

MAX_DENSE_BYTES = 1 << 32
"""The largest dense array :func:`sparse_to_dense` allocates by default (4 GiB)."""

_MAX_NDIM = 32
_MAX_DIM = 1 << 62


class UnsafePickleError(pickle.UnpicklingError):
    """The pickle asks for something a data file never needs (a name outside :data:`ALLOWED`, a
    refused opcode, a call or state change on anything but the data being built); refused before
    any of it ran."""


class PickleDataError(UnsafePickleError, ValueError):
    """The pickle is damaged, or the array/matrix it describes is malformed or out of range
    (refused before it is allocated or used)."""


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


# ------------------------------------------------------------------------------- admitted names
def _names(modules: tuple[str, ...], name: str, kind: str) -> dict[tuple[str, str], _Name]:
    token = _Name(f"{modules[-1]}.{name}", kind)
    return {(m, name): token for m in modules}


ALLOWED: dict[tuple[str, str], _Name] = {
    **_names(("numpy.core.multiarray", "numpy._core.multiarray"), "_reconstruct", "reconstruct"),
    **_names(("numpy.core.multiarray", "numpy._core.multiarray"), "scalar", "scalar"),
    **_names(("numpy.core.numeric", "numpy._core.numeric"), "_frombuffer", "frombuffer"),
    **_names(("numpy",), "ndarray", "ndarray"),
    **_names(("numpy",), "dtype", "dtype"),
    **_names(("scipy.sparse.csr", "scipy.sparse._csr", "scipy.sparse"), "csr_matrix", "csr"),
    **_names(("scipy.sparse.csc", "scipy.sparse._csc", "scipy.sparse"), "csc_matrix", "csc"),
    **_names(("collections",), "defaultdict", "defaultdict"),
    **_names(("__builtin__", "builtins"), "list", "list"),
    **_names(("__builtin__", "builtins"), "object", "object"),
    **_names(("__builtin__", "builtins"), "bytes", "bytes"),
    **_names(("copy_reg", "copyreg"), "_reconstructor", "reconstructor"),
    **_names(("_codecs",), "encode", "encode"),
}
"""``(module, name)`` -> the inert token :class:`RestrictedUnpickler` hands out for it (the
names numpy and scipy write for arrays, dtypes and sparse matrices, a graph's ``defaultdict``
and ``list``, ``object``/``copyreg._reconstructor`` of protocols 0 and 1, and the two ways
Python 3 writes bytes at protocols < 3)."""

_DTYPES = {code: np.dtype(code) for code in
           ("b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8")}
_ONLY = "only numpy arrays, scipy sparse matrices and dicts of lists are allowed"


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


# ------------------------------------------------------------------------ calls (REDUCE) of tokens
def _call_reconstruct(u: RestrictedUnpickler, name: _Name, args: tuple) -> Any:
    if len(args) != 3 or type(args[0]) is not _Name or args[0].kind != "ndarray":
        u.refuse(f"{name.qualname}{_short(args)}: only numpy.ndarray may be reconstructed")
    if type(args[1]) is not tuple or args[2] not in ("b", b"b"):
        u.bad(f"{name.qualname} with the arguments {_short(args)} (numpy writes (numpy.ndarray, (0,), b'b'))")
    return _ArrayRecord()


def _call_dtype(u: RestrictedUnpickler, name: _Name, args: tuple) -> Any:
    if not 1 <= len(args) <= 3 or not all(type(a) in (bool, int) for a in args[1:]):
        u.bad(f"numpy.dtype{_short(args)} (numpy writes numpy.dtype(code, False, True))")
    code = args[0]
    if type(code) is bytes:
        code = code.decode("latin1")
    if type(code) is not str or code not in _DTYPES:
        if type(code) is str and code[:1] == "O":
            u.refuse(f"an object dtype ({_short(code)}): only bool, integer and floating-point arrays "
                     f"are allowed (an object array runs code when it loads)")
        u.refuse(f"the numpy dtype {_short(code)}: only bool, integer and floating-point dtypes "
                 f"({', '.join(_DTYPES)}) are allowed")
    return _DtypeRecord(_DTYPES[code])


def _call_scalar(u: RestrictedUnpickler, name: _Name, args: tuple) -> Any:
    if len(args) != 2:
        u.refuse(f"{name.qualname} with {len(args)} argument(s): only a numeric scalar with its bytes")
    dt = u.dtype_of(args[0])
    raw = u.raw_bytes(args[1], "a numpy scalar's data")
    if len(raw) != dt.itemsize:
        u.bad(f"a numpy scalar of dtype {dt} with {len(raw)} bytes (it needs {dt.itemsize})")
    return np.frombuffer(raw, dtype=dt, count=1)[0].item()     # a plain Python number


def _call_frombuffer(u: RestrictedUnpickler, name: _Name, args: tuple) -> Any:
    if len(args) != 4:
        u.bad(f"{name.qualname} with {len(args)} argument(s) (numpy writes (buffer, dtype, shape, order))")
    buf, dtype, shape, order = args
    if type(buf) not in (bytes, bytearray):
        u.refuse(f"{name.qualname} of {_short(buf)}: only bytes from the file itself")
    if order not in ("C", "F"):
        u.bad(f"{name.qualname} with the order {_short(order)} (expected 'C' or 'F')")
    return _ArrayRecord(u.make_array(bytes(buf), u.dtype_of(dtype), shape, order))


def _call_reconstructor(u: RestrictedUnpickler, name: _Name, args: tuple) -> Any:
    cls = args[0] if args else None
    if (len(args) != 3 or type(cls) is not _Name or cls.kind not in ("csr", "csc")
            or type(args[1]) is not _Name or args[1].kind != "object" or args[2] is not None):
        u.refuse(f"copyreg._reconstructor{_short(args)}: only scipy sparse matrices (csr_matrix, "
                 f"csc_matrix) are allowed")
    return _SparseRecord(cls.kind)


def _call_defaultdict(u: RestrictedUnpickler, name: _Name, args: tuple) -> Any:
    if len(args) > 1 or (args and args[0] is not None
                         and (type(args[0]) is not _Name or args[0].kind != "list")):
        u.refuse(f"collections.defaultdict{_short(args)}: only defaultdict(list) (a graph's dict of lists)")
    return {}                                  # a plain dict: the graph is read, never extended


def _call_encode(u: RestrictedUnpickler, name: _Name, args: tuple) -> Any:
    encoding = args[1] if len(args) == 2 else None
    if len(args) != 2 or encoding not in ("latin1", "latin-1", "iso-8859-1"):
        u.refuse(f"_codecs.encode with encoding {_short(encoding)} (only latin1, how Python 3 "
                 f"writes bytes)")
    if type(args[0]) is not str:
        u.refuse(f"_codecs.encode of {_short(args[0])}: only text")
    try:
        return args[0].encode("latin1")
    except UnicodeEncodeError:
        u.bad("_codecs.encode of text outside latin-1 (not bytes Python wrote)")


def _call_bytes(u: RestrictedUnpickler, name: _Name, args: tuple) -> Any:
    if args:
        u.refuse(f"bytes{_short(args)}: only bytes() (the empty bytes) is allowed")
    return b""


_CALLS: dict[str, Callable[[Any, _Name, tuple], Any]] = {
    "reconstruct": _call_reconstruct, "dtype": _call_dtype, "scalar": _call_scalar,
    "frombuffer": _call_frombuffer, "reconstructor": _call_reconstructor,
    "defaultdict": _call_defaultdict, "encode": _call_encode, "bytes": _call_bytes,
}

_KEY_TYPES = (str, int, bytes, float, bool, type(None))   # flat: hashing them cannot recurse
_LEAF_TYPES = _KEY_TYPES + (bytearray,)


# ------------------------------------------------------------------------------------ unpickler
class RestrictedUnpickler(pickle._Unpickler):
    """The pure-Python pickle machine with a checked opcode table (see the module docstring).

    ``source`` names the file in messages; ``size`` (default: what is left in ``file``) bounds
    every length the file states before it is read or allocated.
    """

    dispatch: dict[int, Callable[[Any], None]] = {}    # filled below the class

    def __init__(self, file: Any, *, source: str = "the pickle", size: int | None = None,
                 encoding: str = "latin1", errors: str = "strict") -> None:
        super().__init__(file, fix_imports=False, encoding=encoding, errors=errors)
        if size is None:
            here = file.tell()
            size = file.seek(0, io.SEEK_END) - here
            file.seek(here)
        self.source = source
        self.size = int(size)

    # -- messages
    def refuse(self, what: str) -> None:
        raise UnsafePickleError(f"{self.source}: refused {what}")

    def bad(self, what: str) -> None:
        raise PickleDataError(f"{self.source}: refused {what}")

    # -- names
    def find_class(self, module: str, name: str) -> Any:
        token = ALLOWED.get((module, name)) if type(module) is str and type(name) is str else None
        if token is None:
            raise UnsafePickleError(
                f"{self.source}: refused to unpickle {str(module)[:80]}.{str(name)[:80]}: {_ONLY} (the "
                f"file may try to run code; nothing of it was run)")
        return token

    def persistent_load(self, pid: Any) -> Any:
        self.refuse("a persistent id: only plain data is allowed")

    # -- the load, its errors and its result
    def load(self) -> Any:
        try:
            obj = super().load()
        except UnsafePickleError:
            raise
        except Exception as exc:       # the pickle machine on a damaged stream: struct.error, ...
            text = str(exc)
            text = text if len(text) <= 120 else text[:120] + "..."
            raise PickleDataError(f"{self.source}: not a valid pickle ({type(exc).__name__}: {text})") from None
        return self.finish(obj)

    def finish(self, obj: Any) -> Any:
        """The loaded object: a record becomes its checked array or matrix; plain data is
        walked (each container once) to make sure no token or record is left inside it."""
        if type(obj) in (_ArrayRecord, _SparseRecord):
            if obj.value is None:
                self.bad(f"{_short(obj)} that never got its state (the file ends before its BUILD)")
            return obj.value
        seen: set[int] = set()
        todo = [(obj, "the file")]
        while todo:
            item, where = todo.pop()
            if type(item) in _LEAF_TYPES:
                continue
            if type(item) in (list, tuple, dict):
                if id(item) in seen:
                    continue
                seen.add(id(item))
                inner = f"a {type(item).__name__}"
                todo.extend((v, inner) for v in (item.values() if type(item) is dict else item))
                continue
            self.refuse(f"{_short(item)} in {where}: a file holds one numpy array or sparse matrix, or "
                        f"plain data (a dict of lists)")
        return obj

    # -- checked pieces of data
    def dtype_of(self, rec: Any) -> np.dtype:
        if type(rec) is not _DtypeRecord:
            self.bad(f"{_short(rec)} where a numpy dtype belongs")
        if rec.value is None:
            self.bad("a numpy dtype used before its state was set")
        return rec.value

    def raw_bytes(self, raw: Any, what: str) -> bytes:
        if type(raw) in (bytes, bytearray):
            return bytes(raw)
        if type(raw) is str:                   # a py2 str read with encoding="latin1"
            if len(raw) > self.size:
                self.bad(f"{what} longer than the file")
            try:
                return raw.encode("latin1")
            except UnicodeEncodeError:
                self.bad(f"{what} as text outside latin-1 (not bytes numpy wrote)")
        self.bad(f"{what} given as {_short(raw)}, not bytes")
        raise AssertionError  # unreachable

    def make_array(self, raw: bytes, dt: np.dtype, shape: Any, order: str) -> np.ndarray:
        """The array of ``raw``: its size checked against the shape before anything is allocated."""
        if type(shape) is list:
            shape = tuple(shape)
        if (type(shape) is not tuple or len(shape) > _MAX_NDIM
                or not all(type(s) is int and 0 <= s < _MAX_DIM for s in shape)):
            self.bad(f"a numpy array shape of {_short(shape)} (expected at most {_MAX_NDIM} "
                     f"non-negative integers)")
        count = math.prod(shape)
        if count * dt.itemsize != len(raw):
            self.bad(f"a numpy array of shape {_short(shape)} and dtype {dt}: it needs "
                     f"{count * dt.itemsize} bytes, the file gives {len(raw)}")
        if math.prod(max(s, 1) for s in shape) * dt.itemsize >= _MAX_DIM:    # an empty array's other sizes
            self.bad(f"a numpy array of shape {_short(shape)}: too large")
        flat = np.frombuffer(raw, dtype=dt, count=count) if count else np.empty(0, dt)
        return flat.reshape(shape, order=order).astype(dt.newbyteorder("="), copy=True)

    def _read_exact(self, n: int, what: str) -> bytes:
        if n > self.size:
            self.bad(f"{what} of {n} bytes in a file of {self.size} bytes")
        data = self.read(n)
        if len(data) != n:
            self.bad(f"{what} of {n} bytes: the file ends inside it (truncated)")
        return data

    # -- opcodes that read a length the file states
    def _length(self, fmt: str, nbytes: int) -> int:
        (n,) = struct.unpack(fmt, self.read(nbytes))
        if n < 0:
            self.bad("a negative length")
        return n

    def load_binstring(self) -> None:
        self.append(self._decode_string(self._read_exact(self._length("<i", 4), "a string")))

    def load_short_binstring(self) -> None:
        self.append(self._decode_string(self._read_exact(self.read(1)[0], "a string")))

    def load_binbytes(self) -> None:
        self.append(self._read_exact(self._length("<I", 4), "a bytes object"))

    def load_short_binbytes(self) -> None:
        self.append(self._read_exact(self.read(1)[0], "a bytes object"))

    def load_binbytes8(self) -> None:
        self.append(self._read_exact(self._length("<Q", 8), "a bytes object"))

    def load_bytearray8(self) -> None:
        self.append(bytearray(self._read_exact(self._length("<Q", 8), "a bytearray")))

    def load_binunicode(self) -> None:
        self.append(str(self._read_exact(self._length("<I", 4), "a string"), "utf-8", "surrogatepass"))

    def load_short_binunicode(self) -> None:
        self.append(str(self._read_exact(self.read(1)[0], "a string"), "utf-8", "surrogatepass"))

    def load_binunicode8(self) -> None:
        self.append(str(self._read_exact(self._length("<Q", 8), "a string"), "utf-8", "surrogatepass"))

    # -- opcodes that call, build or fill something
    def load_reduce(self) -> None:
        stack = self.stack
        args = stack.pop()
        func = stack[-1]
        if type(func) is not _Name:
            self.refuse(f"calling {_short(func)} (REDUCE): only the numpy/scipy names of ALLOWED are called")
        call = _CALLS.get(func.kind)
        if call is None:
            self.refuse(f"calling {func.qualname} (REDUCE): numpy and scipy never pickle it as a call")
        if type(args) is not tuple:
            self.bad(f"calling {func.qualname} with {_short(args)} as its arguments (REDUCE needs a tuple)")
        stack[-1] = call(self, func, args)

    def _new(self, cls: Any, args: Any, kwargs: Any, opcode: str) -> Any:
        if (type(cls) is not _Name or cls.kind not in ("csr", "csc") or type(args) is not tuple or args
                or type(kwargs) is not dict or kwargs):
            self.refuse(f"creating {_short(cls)} ({opcode}): only a scipy csr_matrix/csc_matrix, "
                        f"with no arguments")
        return _SparseRecord(cls.kind)

    def load_newobj(self) -> None:
        args = self.stack.pop()
        cls = self.stack.pop()
        self.append(self._new(cls, args, {}, "NEWOBJ"))

    def load_newobj_ex(self) -> None:
        kwargs = self.stack.pop()
        args = self.stack.pop()
        cls = self.stack.pop()
        self.append(self._new(cls, args, kwargs, "NEWOBJ_EX"))

    def load_build(self) -> None:
        state = self.stack.pop()
        inst = self.stack[-1]
        if type(inst) not in _RECORDS:
            self.refuse(f"setting the state of {_short(inst)} (BUILD): only a numpy array, dtype or "
                        f"sparse matrix being unpickled takes one (never a class, function or container)")
        inst.setstate(self, state)

    def _key(self, key: Any) -> Any:
        if type(key) not in _KEY_TYPES:
            self.refuse(f"{_short_type(key)} as a dict key: only numbers and strings")
        return key

    def _target(self, kind: type, opcode: str) -> Any:
        target = self.stack[-1]
        if type(target) is not kind:
            self.refuse(f"{opcode} on {_short(target)}: only on a plain {kind.__name__}")
        return target

    def load_setitem(self) -> None:
        value = self.stack.pop()
        key = self.stack.pop()
        self._target(dict, "SETITEM")[self._key(key)] = value

    def load_setitems(self) -> None:
        items = self.pop_mark()
        target = self._target(dict, "SETITEMS")
        if len(items) % 2:
            self.bad("SETITEMS with a key and no value")
        for i in range(0, len(items), 2):
            target[self._key(items[i])] = items[i + 1]

    def load_dict(self) -> None:
        items = self.pop_mark()
        if len(items) % 2:
            self.bad("DICT with a key and no value")
        self.append({self._key(items[i]): items[i + 1] for i in range(0, len(items), 2)})

    def load_append(self) -> None:
        value = self.stack.pop()
        self._target(list, "APPEND").append(value)

    def load_appends(self) -> None:
        items = self.pop_mark()
        self._target(list, "APPENDS").extend(items)


def _refuser(code: int) -> Callable[[RestrictedUnpickler], None]:
    op = next((o for o in pickletools.opcodes if o.code.encode("latin1")[0] == code), None)
    label = f"the pickle opcode {op.name}" if op else f"an unknown pickle opcode 0x{code:02x}"

    def refuse(self: RestrictedUnpickler) -> None:
        self.refuse(f"{label}: {_ONLY}")

    return refuse


_PLAIN_OPCODES = (  # the pure-Python machine's own code: they build only plain Python data
    pickle.PROTO, pickle.FRAME, pickle.STOP, pickle.MARK, pickle.POP, pickle.POP_MARK, pickle.DUP,
    pickle.NONE, pickle.NEWTRUE, pickle.NEWFALSE, pickle.INT, pickle.BININT, pickle.BININT1,
    pickle.BININT2, pickle.LONG, pickle.LONG1, pickle.LONG4, pickle.FLOAT, pickle.BINFLOAT,
    pickle.STRING, pickle.UNICODE, pickle.EMPTY_TUPLE, pickle.TUPLE, pickle.TUPLE1, pickle.TUPLE2,
    pickle.TUPLE3, pickle.EMPTY_LIST, pickle.LIST, pickle.EMPTY_DICT, pickle.GET, pickle.BINGET,
    pickle.LONG_BINGET, pickle.PUT, pickle.BINPUT, pickle.LONG_BINPUT, pickle.MEMOIZE,
    pickle.GLOBAL, pickle.STACK_GLOBAL)
_CHECKED_OPCODES = {
    pickle.BINSTRING: RestrictedUnpickler.load_binstring,
    pickle.SHORT_BINSTRING: RestrictedUnpickler.load_short_binstring,
    pickle.BINBYTES: RestrictedUnpickler.load_binbytes,
    pickle.SHORT_BINBYTES: RestrictedUnpickler.load_short_binbytes,
    pickle.BINBYTES8: RestrictedUnpickler.load_binbytes8,
    pickle.BYTEARRAY8: RestrictedUnpickler.load_bytearray8,
    pickle.BINUNICODE: RestrictedUnpickler.load_binunicode,
    pickle.SHORT_BINUNICODE: RestrictedUnpickler.load_short_binunicode,
    pickle.BINUNICODE8: RestrictedUnpickler.load_binunicode8,
    pickle.REDUCE: RestrictedUnpickler.load_reduce,
    pickle.NEWOBJ: RestrictedUnpickler.load_newobj,
    pickle.NEWOBJ_EX: RestrictedUnpickler.load_newobj_ex,
    pickle.BUILD: RestrictedUnpickler.load_build,
    pickle.SETITEM: RestrictedUnpickler.load_setitem,
    pickle.SETITEMS: RestrictedUnpickler.load_setitems,
    pickle.DICT: RestrictedUnpickler.load_dict,
    pickle.APPEND: RestrictedUnpickler.load_append,
    pickle.APPENDS: RestrictedUnpickler.load_appends,
}
RestrictedUnpickler.dispatch = {code: _refuser(code) for code in range(256)}
RestrictedUnpickler.dispatch.update({op[0]: pickle._Unpickler.dispatch[op[0]] for op in _PLAIN_OPCODES})
RestrictedUnpickler.dispatch.update({op[0]: f for op, f in _CHECKED_OPCODES.items()})


def restricted_load(path: str | Path, *, encoding: str = "latin1") -> Any:
    """The numpy array, scipy sparse matrix or plain data (a dict of lists) pickled in ``path``,
    read through :class:`RestrictedUnpickler` (``encoding`` for Python 2 strings). Raises
    :class:`UnsafePickleError` for anything refused and :class:`PickleDataError` (a subclass of
    it, and a ValueError) for a damaged file or malformed data, each one line naming the file."""
    data = Path(path).read_bytes()
    return RestrictedUnpickler(io.BytesIO(data), source=str(path), size=len(data), encoding=encoding).load()


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
