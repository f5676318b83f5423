"""What a restricted unpickle admits: the names a pickle may ask for (:data:`ALLOWED`, each
answered with an inert token) and what calling each token (``REDUCE``) builds, after checking its
arguments: a record of :mod:`.pickle_records`, a plain number, bytes or an empty dict, never the
named object. Torch-free.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from .pickle_records import _DTYPES, _ArrayRecord, _DtypeRecord, _Name, _short, _SparseRecord

if TYPE_CHECKING:
    from .safe_pickle import RestrictedUnpickler

__all__ = ["ALLOWED"]


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
