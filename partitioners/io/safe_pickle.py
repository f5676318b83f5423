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
  :class:`_DtypeRecord`, :class:`_SparseRecord`, plain Python objects of :mod:`.pickle_records`)
  that only writes down what the file asked for. ``BUILD`` is accepted on a record only (never on a token,
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

Here: the pickle machine, its opcode table and :func:`restricted_load`. The tokens, the records
and their checked conversion into arrays, dtypes and sparse matrices: :mod:`.pickle_records`; the
admitted names and what calling each builds: :mod:`.pickle_names`.

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

from .pickle_names import _CALLS, ALLOWED
from .pickle_records import (_MAX_DIM, _MAX_NDIM, _RECORDS, MAX_DENSE_BYTES, _ArrayRecord, _DtypeRecord, _Name,
                             _short, _short_type, _SparseRecord, sparse_to_dense)

__all__ = ["ALLOWED", "MAX_DENSE_BYTES", "PickleDataError", "RestrictedUnpickler", "UnsafePickleError",
           "restricted_load", "sparse_to_dense"]


class UnsafePickleError(pickle.UnpicklingError):
    """The pickle asks for something a data file never needs (a name outside :data:`ALLOWED`, a
    refused opcode, a call or state change on anything but the data being built); refused before
    any of it ran."""


class PickleDataError(UnsafePickleError, ValueError):
    """The pickle is damaged, or the array/matrix it describes is malformed or out of range
    (refused before it is allocated or used)."""


_ONLY = "only numpy arrays, scipy sparse matrices and dicts of lists are allowed"

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
