"""Hostile pickles against the restricted unpickler of the Planetoid files (issue 33).

The files are crafted opcode by opcode: ``BUILD`` on an admitted class (which used to set
attributes on ``scipy.sparse.csr_matrix`` itself, e.g. turning off its index checks), state and
items pushed into objects that are not data, sparse matrices whose arrays point outside the
matrix, arrays whose shape promises far more bytes than the file holds, object dtypes, refused
opcodes, damaged streams. Every one must be refused with one line naming the file
(:class:`UnsafePickleError`, or :class:`PickleDataError`, also a ValueError), leave every real
class as it was, and never crash or allocate what the file merely claims. Real pickles of
arrays, csr/csc matrices and a graph's ``defaultdict(list)``, protocols 0 to 5 and Python 2's,
still load equal.
"""

from __future__ import annotations

import codecs
import collections
import copyreg
import io
import pickle
import re
import struct
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from partitioners import GraphError
from partitioners.io import read_planetoid
from py2_pickle import py2_dumps
from partitioners.io.safe_pickle import (ALLOWED, PickleDataError, RestrictedUnpickler, UnsafePickleError,
                                         restricted_load, sparse_to_dense)

REPO = Path(__file__).resolve().parents[2]
REAL_OBJECTS = [sp.csr_matrix, sp.csc_matrix, np.ndarray, np.dtype, collections.defaultdict, list, object,
                bytes, copyreg._reconstructor, codecs.encode, np.zeros(1).__reduce__()[0]]
CLASS_ATTRS = {id(o): set(vars(o)) - {"__slotnames__"} if hasattr(o, "__dict__") else None  # pickling adds it
               for o in REAL_OBJECTS}
CHECK_FORMAT = (sp.csr_matrix.check_format, sp.csc_matrix.check_format, sp.csr_matrix.toarray)


# ------------------------------------------------------------------------------ opcode builders
def G(module: str, name: str) -> bytes:                      # GLOBAL
    return b"c" + f"{module}\n{name}\n".encode()


def U(text: str) -> bytes:                                   # BINUNICODE
    data = text.encode()
    return b"X" + struct.pack("<I", len(data)) + data


def B(data: bytes) -> bytes:                                 # BINBYTES
    return b"B" + struct.pack("<I", len(data)) + data


def I(n: int) -> bytes:                                      # BININT1 / BININT / LONG1
    if 0 <= n < 256:
        return b"K" + bytes([n])
    if -2**31 <= n < 2**31:
        return b"J" + struct.pack("<i", n)
    data = pickle.encode_long(n)
    return b"\x8a" + bytes([len(data)]) + data


def T(*items: bytes) -> bytes:                               # MARK ... TUPLE
    return b"(" + b"".join(items) + b"t"


P = b"\x80\x03"                                              # PROTO 3


def dtype_ops(code: str = "f8", endian: str = "<", names: bytes = b"N", fields: bytes = b"N") -> bytes:
    return (G("numpy", "dtype") + U(code) + b"\x89\x88\x87R"
            + T(I(3), U(endian), b"N", names, fields, I(-1), I(-1), I(0)) + b"b")


def array_ops(shape: tuple, raw: bytes, code: str = "f8", endian: str = "<", dtype: bytes | None = None) -> bytes:
    """An ndarray as numpy pickles it: ``_reconstruct(ndarray, (0,), b'b')``, then BUILD."""
    return (G("numpy.core.multiarray", "_reconstruct") + T(G("numpy", "ndarray"), T(I(0)), B(b"b")) + b"R"
            + T(I(1), T(*(I(s) for s in shape)), dtype or dtype_ops(code, endian), b"\x89", B(raw)) + b"b")


def load_bytes(data: bytes, source: str = "evil.pkl"):
    return RestrictedUnpickler(io.BytesIO(data), source=source).load()


def assert_one_line(exc: BaseException, name: str = "evil.pkl") -> str:
    text = str(exc)
    assert "\n" not in text and text.startswith(f"{name}: "), text
    return text


def assert_real_classes_unchanged() -> None:
    for obj in REAL_OBJECTS:
        assert not hasattr(obj, "zz_sentinel"), obj
        if CLASS_ATTRS[id(obj)] is not None:
            assert set(vars(obj)) - {"__slotnames__"} == CLASS_ATTRS[id(obj)], obj
    assert (sp.csr_matrix.check_format, sp.csc_matrix.check_format, sp.csr_matrix.toarray) == CHECK_FORMAT


# ---------------------------------------------------------------- (1) BUILD on an admitted name
@pytest.mark.parametrize("module, name", sorted(ALLOWED), ids=lambda v: str(v))
@pytest.mark.parametrize("form", ["dict", "slots", "setitem", "append", "call"])
def test_nothing_of_an_admitted_name_can_be_changed(module, name, form):
    """GLOBAL then BUILD (a dict state, or ``(None, slots)``, the setattr path), SETITEM or
    APPEND on the name itself: refused, and the real class/function is untouched."""
    state = b"}" + U("zz_sentinel") + I(1) + b"s" + U("check_format") + G("builtins", "object") + b"s"
    body = {"dict": state + b"b", "slots": T(b"N", state) + b"b", "setitem": U("zz_sentinel") + I(1) + b"s",
            "append": I(1) + b"a", "call": T(U("zz_sentinel")) + b"R"}[form]
    with pytest.raises(UnsafePickleError) as err:
        load_bytes(P + G(module, name) + body + b".")
    text = assert_one_line(err.value)
    if form in ("dict", "slots"):
        assert "refused setting the state of" in text and "(BUILD)" in text
    elif form in ("setitem", "append"):
        assert "only on a plain" in text
    assert_real_classes_unchanged()
    assert restricted_load.__module__ == "partitioners.io.safe_pickle"


def test_a_file_gets_tokens_not_the_objects(tmp_path):
    """What a file names comes back as an inert token (and a bare name is refused as a result)."""
    for (module, name), token in ALLOWED.items():
        assert token not in REAL_OBJECTS and not isinstance(token, (type, types.FunctionType,
                                                                    types.BuiltinFunctionType))
        with pytest.raises(UnsafePickleError, match=r"evil\.pkl: refused .* in the file: a file holds one"):
            load_bytes(P + G(module, name) + b".")


def test_the_issue_attack_leaves_scipy_checked_in_a_fresh_process(tmp_path):
    """The attack of issue 33 end to end, in its own interpreter (a crash must fail the test, not
    the run): ``ind.x`` first BUILDs ``check_format``/``toarray`` away on ``csr_matrix`` (a
    ``(None, slots)`` state, which the pickle machine applies with setattr: the old loader let it
    through), then a matrix whose index is far outside; the folder is refused, and scipy still
    checks."""
    folder = tmp_path / "toy"
    write_planetoid(folder)
    attack = (P + G("scipy.sparse._csr", "csr_matrix") + b"(N}" + U("check_format") + G("builtins", "object")
              + b"s" + U("toarray") + G("builtins", "object") + b"stb0")    # BUILD (None, {...}): setattr
    bad = sp.csr_matrix(np.eye(3, dtype=np.float32))
    bad.indices = np.array([0, 1, 10**7], dtype=np.int32)
    (folder / "ind.toy.x").write_bytes(attack + pickle.dumps(bad, protocol=2)[2:])
    script = textwrap.dedent(f"""
        import scipy.sparse as sp, numpy as np
        from partitioners import GraphError
        from partitioners.io import read_planetoid
        before = (sp.csr_matrix.check_format, sp.csr_matrix.toarray, set(vars(sp.csr_matrix)))
        try:
            read_planetoid({str(folder)!r})
        except GraphError as exc:
            print("REFUSED", exc)
        assert (sp.csr_matrix.check_format, sp.csr_matrix.toarray, set(vars(sp.csr_matrix))) == before
        m = sp.csr_matrix((np.ones(1), np.array([5]), np.array([0, 1])), shape=(1, 3))
        try:
            m.check_format(full_check=True)
        except ValueError:
            print("STILL CHECKED")
    """)
    run = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert len(lines) == 2 and lines[1] == "STILL CHECKED", run.stdout
    assert "ind.toy.x: refused setting the state of scipy.sparse.csr_matrix (BUILD)" in lines[0]


# --------------------------------------------------------- state and items on other objects
ARRAY = pickle.dumps(np.arange(3.0), protocol=2)[:-1]
MATRIX = pickle.dumps(sp.csr_matrix(np.eye(2)), protocol=2)[:-1]


def case_ids(cases: list) -> list[str]:
    return [re.sub(r"[^A-Za-z0-9_.]+", "-", pattern.replace("\\", ""))[:60].strip("-") for _, pattern in cases]


STATE_CASES = [
    (P + b"}}b.", r"setting the state of a dict \(BUILD\)"),
    (P + b"]}b.", r"setting the state of a list \(BUILD\)"),
    (P + B(b"x") + b"}b.", r"setting the state of b'x' \(BUILD\)"),
    (ARRAY + b"}b.", r"a second state for a numpy array"),
    (MATRIX + b"}b.", r"a second state for a csr_matrix"),
    (P + dtype_ops() + T(I(3), U(">"), b"NNN", I(-1), I(-1), I(0)) + b"b.", r"a second state for a numpy dtype"),
    (ARRAY + U("k") + I(1) + b"s.", r"SETITEM on a numpy array: only on a plain dict"),
    (MATRIX + I(1) + b"a.", r"APPEND on a csr_matrix: only on a plain list"),
    (P + b"}(" + I(1) + b"e.", r"APPENDS on a dict: only on a plain list"),
    (P + b"](" + I(1) + I(2) + b"u.", r"SETITEMS on a list: only on a plain dict"),
    (P + b"})R.", r"calling a dict \(REDUCE\)"),
    (ARRAY + b")R.", r"calling a numpy array \(REDUCE\)"),
    (P + G("scipy.sparse", "csr_matrix") + b")R.", r"calling scipy\.sparse\.csr_matrix \(REDUCE\)"),
    (P + G("numpy", "ndarray") + b")\x81.", r"creating numpy\.ndarray \(NEWOBJ\)"),
    (P + G("scipy.sparse", "csr_matrix") + T(I(1)) + b"\x81.", r"creating scipy\.sparse\.csr_matrix \(NEWOBJ\)"),
    (P + G("scipy.sparse", "csr_matrix") + b")}" + U("copy") + b"\x88s\x92.",
     r"creating scipy\.sparse\.csr_matrix \(NEWOBJ_EX\): only a scipy csr_matrix/csc_matrix, with no arguments"),
    (P + G("collections", "defaultdict") + T(G("builtins", "object")) + b"R.",
     r"collections\.defaultdict\(builtins\.object,\)"),
    (P + G("numpy.core.multiarray", "_reconstruct") + T(G("scipy.sparse", "csr_matrix"), T(I(0)), B(b"b")) + b"R.",
     r"numpy\._core\.multiarray\._reconstruct\(scipy\.sparse\.csr_matrix, a tuple, b'b'\): only numpy\.ndarray "
     r"may be reconstructed"),
    (P + G("builtins", "bytes") + T(I(10**6)) + b"R.", r"bytes\(1000000,\): only bytes\(\)"),
    (P + b"}" + b")" + b"\x85" * 200_000 + I(1) + b"s.", r"a tuple as a dict key: only numbers and strings"),
    (P + b"(" + b")" + b"\x85" * 200_000 + I(1) + b"d.", r"a tuple as a dict key"),
    (P + b"]" + ARRAY[2:] + b"a.", r"a numpy array in a list: a file holds one numpy array or sparse matrix"),
    (P + b"}" + U("x") + MATRIX[2:] + b"s.", r"a csr_matrix in a dict"),
    (P + b"ccopy_reg\n_reconstructor\n(cnumpy\nndarray\nc__builtin__\nobject\nNtR.", r"copyreg\._reconstructor"),
    (P + b"(i__builtin__\nobject\n.", r"the pickle opcode INST"),
    (P + b"(" + G("builtins", "object") + b"o.", r"the pickle opcode OBJ"),
    (P + b"\x82\x01.", r"the pickle opcode EXT1"),
    (P + b"Pabc\n.", r"the pickle opcode PERSID"),
    (P + U("abc") + b"Q.", r"the pickle opcode BINPERSID"),
    (P + b"\x8f(" + I(1) + b"\x90.", r"the pickle opcode EMPTY_SET"),
    (P + b"(" + I(1) + b"\x91.", r"the pickle opcode FROZENSET"),
    (b"\x80\x05\x97.", r"the pickle opcode NEXT_BUFFER"),
    (b"\x80\x05" + B(b"ab") + b"\x98.", r"the pickle opcode READONLY_BUFFER"),
    (P + b"\xff.", r"an unknown pickle opcode 0xff"),
]


@pytest.mark.parametrize("payload, pattern", STATE_CASES, ids=case_ids(STATE_CASES))
def test_state_calls_and_items_reach_only_the_data_being_built(payload, pattern):
    started = time.monotonic()
    with pytest.raises(UnsafePickleError, match=r"^evil\.pkl: refused " + pattern) as err:
        load_bytes(payload)
    assert_one_line(err.value)
    assert time.monotonic() - started < 5
    assert_real_classes_unchanged()


# ------------------------------------------------------------ (2) sparse matrices out of range
def tampered(**changes):
    m = sp.csr_matrix(np.array([[1, 0, 2], [0, 0, 3], [4, 0, 0]], dtype=np.float32))
    for key, value in changes.items():
        m.__dict__[key] = value                  # what a file may say: any attribute, any value
    return m


BAD_MATRICES = [
    (dict(indices=np.array([0, 2, 7, 0], np.int32)), r"its column index 7 is outside its 3 columns"),
    (dict(indices=np.array([0, 2, -1, 0], np.int32)), r"its column index -1 is outside its 3 columns"),
    (dict(indices=np.array([0, 2, 2**40, 0], np.int64)), r"its column index 1099511627776 is outside"),
    (dict(indices=np.array([0, 2, 2**63 + 5, 0], np.uint64)), r"a column index is outside its 3 columns"),
    (dict(indptr=np.array([0, 3, 2, 4], np.int32)), r"its indptr decreases at row 1"),
    (dict(indptr=np.array([1, 2, 3, 4], np.int32)), r"its indptr starts at 1, not 0"),
    (dict(indptr=np.array([0, 2, 3, 9], np.int32)), r"its indptr ends at 9 but it has 4 indices"),
    (dict(indptr=np.array([0, 2, 4], np.int32)), r"its indptr has 3 entries for 3 rows"),
    (dict(_shape=(10**12, 3)), r"its indptr has 4 entries for 1000000000000 rows"),
    (dict(_shape=(-3, 3)), r"its shape \(-3, 3\) is not two non-negative integers"),
    (dict(_shape=(3, 3, 1)), r"its shape \(3, 3, 1\) is not two"),
    (dict(_shape=(3, 2**70)), r"its shape \(3, an int of 71 bits\) is not two"),
    (dict(data=np.ones(5, np.float32)), r"it has 4 indices and 5 values"),
    (dict(data=np.ones((2, 2), np.float32)), r"its 'data' is float32\[2, 2\], not a 1-D numeric array"),
    (dict(indices=np.array([0, 2, 2, 0], np.float32)), r"its 'indices' is float32\[4\], not a 1-D integer array"),
    (dict(format="csc"), r"a csr_matrix whose state says format 'csc'"),
    (dict(indptr=[0, 2, 3, 4]), r"a csr_matrix whose 'indptr' is a list, not a numpy array"),
]


@pytest.mark.parametrize("protocol", [0, 2])
@pytest.mark.parametrize("changes, pattern", BAD_MATRICES, ids=case_ids(BAD_MATRICES))
def test_a_sparse_matrix_outside_its_shape_is_refused_in_one_line(tmp_path, protocol, changes, pattern):
    bad = tampered(**changes)
    path = tmp_path / "bad.pkl"
    path.write_bytes(pickle.dumps(bad, protocol=protocol))
    with pytest.raises(PickleDataError, match=pattern) as err:
        restricted_load(path)
    assert isinstance(err.value, ValueError) and str(err.value).startswith(f"{path}: refused")
    assert "\n" not in str(err.value)
    folder = tmp_path / "toy"
    write_planetoid(folder)
    (folder / "ind.toy.allx").write_bytes(path.read_bytes())
    with pytest.raises(GraphError, match=r"ind\.toy\.allx: refused .*" + pattern) as err:
        read_planetoid(folder)
    assert "\n" not in str(err.value)
    assert_real_classes_unchanged()


def test_a_sparse_matrix_too_large_to_densify_is_refused_before_allocating(tmp_path):
    wide = sp.csr_matrix((np.ones(1, np.float32), np.array([5]), np.array([0, 1, 1, 1, 1])), shape=(4, 10**15))
    path = tmp_path / "wide.pkl"
    path.write_bytes(pickle.dumps(wide, protocol=2))
    loaded = restricted_load(path)                   # cheap as a sparse matrix: 4 rows, 1 entry
    assert loaded.shape == (4, 10**15) and loaded.nnz == 1
    with pytest.raises(ValueError, match=r"wide\.pkl: its 4 x 1000000000000000 matrix needs 16000000000000000 "
                                         r"bytes dense, over the limit of 4294967296"):
        sparse_to_dense(loaded, str(path))
    folder = tmp_path / "toy"
    write_planetoid(folder)
    (folder / "ind.toy.tx").write_bytes(path.read_bytes())
    with pytest.raises(GraphError, match=r"ind\.toy\.tx: its 4 x 1000000000000000 matrix needs"):
        read_planetoid(folder)


def test_sparse_to_dense_checks_a_matrix_it_was_handed():
    m = sp.csr_matrix(np.eye(3, dtype=np.float32))
    m.indices = m.indices.copy()
    m.indices[1] = 9
    with pytest.raises(ValueError, match=r"^x: not a valid sparse matrix \(its column index 9 is outside its 3 "
                                         r"columns\)$"):
        sparse_to_dense(m, "x")
    dup = sp.csc_matrix((np.array([1, 2, 4], np.float32), np.array([0, 0, 2]), np.array([0, 2, 3])), shape=(3, 2))
    np.testing.assert_array_equal(sparse_to_dense(dup, "x"), dup.toarray())          # repeats summed
    with pytest.raises(ValueError, match=r"^x: expected a scipy sparse matrix or an array, got coo_matrix$"):
        sparse_to_dense(sp.coo_matrix(np.eye(2)), "x")


# ------------------------------------------------------- (3) sizes the file cannot back up
SIZE_CASES = [
    (P + array_ops((2**40, 2**20), b"\0" * 8) + b".",
     r"a numpy array of shape \(1099511627776, 1048576\) and dtype float64: it needs 9223372036854775808 bytes, "
     r"the file gives 8"),
    (P + array_ops((0, 2**61, 2**61), b"") + b".",
     r"a numpy array of shape \(0, 2305843009213693952, 2305843009213693952\): too large"),
    (P + array_ops((0, 2**62), b"") + b".", r"a numpy array shape of \(0, 4611686018427387904\)"),
    (P + array_ops((-1, 8), b"\0" * 8) + b".", r"a numpy array shape of \(-1, 8\)"),
    (P + array_ops((3,), b"\0" * 23) + b".",
     r"a numpy array of shape \(3,\) and dtype float64: it needs 24 bytes, the file gives 23"),
    (P + array_ops((1,) * 33, b"\0" * 8) + b".", r"a numpy array shape of a tuple \(expected at most 32"),
    (b"\x80\x05" + G("numpy._core.numeric", "_frombuffer") + T(b"\x96" + struct.pack("<Q", 8) + b"\0" * 8,
     dtype_ops(), T(I(2**30), I(2**30)), U("C")) + b"R.",
     r"a numpy array of shape \(1073741824, 1073741824\) and dtype float64: it needs 9223372036854775808 bytes, "
     r"the file gives 8"),
    (b"\x80\x05\x96" + struct.pack("<Q", 2**62) + b"\0" * 8 + b".",
     r"a bytearray of 4611686018427387904 bytes in a file of \d+ bytes"),
    (P + b"\x8e" + struct.pack("<Q", 2**60) + b".", r"a bytes object of 1152921504606846976 bytes in a file of"),
    (P + b"T" + struct.pack("<i", 2**31 - 1) + b"abc.", r"a string of 2147483647 bytes in a file"),
    (P + B(b"x" * 30) + b"0B" + struct.pack("<I", 20) + b"abc", r"a bytes object of 20 bytes: the file ends inside it"),
]


@pytest.mark.parametrize("payload, pattern", SIZE_CASES, ids=case_ids(SIZE_CASES))
def test_a_size_the_file_cannot_back_up_is_refused_before_allocating(payload, pattern):
    started = time.monotonic()
    with pytest.raises(PickleDataError, match=r"^evil\.pkl: refused " + pattern) as err:
        load_bytes(payload)
    assert_one_line(err.value)
    assert time.monotonic() - started < 2


def test_claimed_sizes_stay_within_a_small_address_space(tmp_path):
    """The same claims in a process whose address space is capped a little above what it has
    mapped already: each is refused, none raises MemoryError or dies."""
    payloads = [P + array_ops((2**40, 2**20), b"\0" * 8) + b".",
                b"\x80\x05\x96" + struct.pack("<Q", 2**40) + b"\0" * 8 + b".",
                P + b"\x8e" + struct.pack("<Q", 2**40) + b".",
                P + b"\x8d" + struct.pack("<Q", 2**40) + b"x."]
    for i, data in enumerate(payloads):
        (tmp_path / f"p{i}.pkl").write_bytes(data)
    script = textwrap.dedent(f"""
        import resource, re
        from pathlib import Path
        from partitioners.io.safe_pickle import PickleDataError, restricted_load
        vm = int(re.search(r"VmSize:\\s+(\\d+) kB", Path("/proc/self/status").read_text()).group(1)) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (vm + (256 << 20), resource.RLIM_INFINITY))
        for p in sorted(Path({str(tmp_path)!r}).glob("p*.pkl")):
            try:
                restricted_load(p)
            except PickleDataError as exc:
                print("REFUSED", exc)
    """)
    run = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert len(lines) == len(payloads) and all(line.startswith("REFUSED ") for line in lines), run.stdout


# ----------------------------------------------------------------------- (4) dtypes refused
@pytest.mark.parametrize("obj, pattern", [
    (np.array([1, "a"], dtype=object), r"an object dtype \('O8'\)"),
    (np.zeros(2, dtype=[("a", "<i4")]), r"the numpy dtype 'V4'"),
    (np.array(["ab"]), r"the numpy dtype 'U2'"),
    (np.zeros(2, dtype="M8[s]"), r"the numpy dtype 'M8'"),
    (np.zeros(2, dtype=np.complex64), r"the numpy dtype 'c8'"),
])
@pytest.mark.parametrize("protocol", [0, 2, 5])
def test_object_and_other_dtypes_are_refused(tmp_path, obj, pattern, protocol):
    path = tmp_path / "evil.pkl"
    path.write_bytes(pickle.dumps(obj, protocol=protocol))
    with pytest.raises(UnsafePickleError, match=rf"^{path}: refused " + pattern):
        restricted_load(path)


@pytest.mark.parametrize("dtype, pattern", [
    (dtype_ops("f4", names=T(U("a"))), r"a numpy dtype with fields, sub-arrays or metadata"),
    (dtype_ops("f4", fields=b"}"), r"a numpy dtype with fields"),
    (dtype_ops("f4", endian="!"), r"a numpy dtype byte order of '!'"),
    (dtype_ops("f4", endian="|"), r"a numpy dtype f4 without a byte order"),
    (G("numpy", "dtype") + U("f4") + b"\x89\x88\x87R", r"a numpy dtype used before its state was set"),
    (B(b"f4"), r"b'f4' where a numpy dtype belongs"),
])
def test_a_dtype_state_with_fields_or_an_odd_byte_order_is_refused(dtype, pattern):
    with pytest.raises(UnsafePickleError, match=r"^evil\.pkl: refused " + pattern):
        load_bytes(P + array_ops((1,), b"\0" * 4, dtype=dtype) + b".")


def test_an_object_array_data_list_is_refused():
    data = (P + G("numpy.core.multiarray", "_reconstruct") + T(G("numpy", "ndarray"), T(I(0)), B(b"b")) + b"R"
            + T(I(1), T(I(1)), dtype_ops("f8"), b"\x89", b"](" + I(1) + b"e") + b"b.")
    with pytest.raises(UnsafePickleError, match=r"whose data is a list of objects \(an object array\)"):
        load_bytes(data)


# ------------------------------------------------------------------------- (5) round trips
def objects():
    rng = np.random.default_rng(0)
    graph = collections.defaultdict(list)
    for u, v in rng.integers(0, 50, (200, 2)).tolist():
        graph[u].append(v)
    return {
        "float32": rng.random((7, 5)).astype(np.float32),
        "fortran": np.asfortranarray(rng.random((4, 6))),
        "int64 big-endian": np.arange(12, dtype=">i8").reshape(3, 4),
        "uint8": np.arange(9, dtype=np.uint8),
        "bool": rng.random(10) < 0.5,
        "float16": np.arange(4, dtype=np.float16),
        "empty": np.zeros((0, 1433), np.float32),
        "3-d": np.arange(24, dtype=np.int32).reshape(2, 3, 4),
        "csr": sp.random(30, 20, density=0.2, format="csr", dtype=np.float32, random_state=1),
        "csc": sp.random(20, 30, density=0.2, format="csc", random_state=2),
        "csr int": sp.csr_matrix(np.eye(5, dtype=np.int64)),
        "csr empty": sp.csr_matrix((0, 4), dtype=np.float32),
        "graph": graph,
        "dict of lists": {0: [1, 2], 5: [], 7: [0]},
    }


def assert_loaded_equal(loaded, obj):
    if sp.issparse(obj):
        assert type(loaded) is type(obj) and loaded.shape == obj.shape and loaded.dtype == obj.dtype
        np.testing.assert_array_equal(loaded.toarray(), obj.toarray())
        np.testing.assert_array_equal(sparse_to_dense(loaded, "x", obj.dtype), obj.toarray())
    elif isinstance(obj, np.ndarray):
        assert type(loaded) is np.ndarray and loaded.shape == obj.shape and loaded.dtype.isnative
        assert loaded.dtype == obj.dtype.newbyteorder("=")
        np.testing.assert_array_equal(loaded, obj)
    else:
        assert type(loaded) is dict and loaded == dict(obj)


@pytest.mark.parametrize("protocol", [0, 1, 2, 3, 4, 5])
@pytest.mark.parametrize("name", list(objects()))
def test_real_pickles_load_equal(tmp_path, protocol, name):
    obj = objects()[name]
    path = tmp_path / "real.pkl"
    path.write_bytes(pickle.dumps(obj, protocol=protocol))
    assert_loaded_equal(restricted_load(path), obj)


@pytest.mark.parametrize("name", list(objects()))
def test_python2_pickles_load_equal(tmp_path, name):
    obj = objects()[name]
    data = py2_dumps(obj)
    assert b"_codecs" not in data
    path = tmp_path / "py2.pkl"
    path.write_bytes(data)
    assert_loaded_equal(restricted_load(path, encoding="latin1"), obj)


def test_a_numpy_scalar_loads_as_a_python_number(tmp_path):
    path = tmp_path / "s.pkl"
    for value in (np.float32(1.5), np.int64(-7), np.bool_(True)):
        for protocol in (0, 2, 5):
            path.write_bytes(pickle.dumps({1: [value]}, protocol=protocol))
            loaded = restricted_load(path)[1][0]
            assert loaded == value.item() and type(loaded) is type(value.item())


# ------------------------------------------------------------------- damaged streams, fuzz
SAMPLES = [pickle.dumps(objects()["csr"], protocol=2), pickle.dumps(objects()["graph"], protocol=0),
           pickle.dumps(objects()["float32"], protocol=5)]


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(sample=st.sampled_from(range(len(SAMPLES))), at=st.integers(0, 10**6),
       edit=st.sampled_from(["flip", "set", "truncate", "delete", "insert"]), byte=st.integers(0, 255))
def test_a_damaged_pickle_raises_one_refusal_and_nothing_else(sample, at, edit, byte):
    data = bytearray(SAMPLES[sample])
    at %= len(data)
    if edit == "flip":
        data[at] ^= 1 << (byte % 8)
    elif edit == "set":
        data[at] = byte
    elif edit == "truncate":
        del data[at:]
    elif edit == "delete":
        del data[at]
    else:
        data.insert(at, byte)
    try:
        load_bytes(bytes(data))
    except UnsafePickleError as exc:
        assert_one_line(exc)
    assert_real_classes_unchanged()


# ------------------------------------------------------------------------------ helpers
def write_planetoid(folder: Path) -> None:
    """A tiny valid Planetoid set ``toy``: allx 4 rows, tx 2 rows (nodes 4 and 5), 2 classes."""
    folder.mkdir(parents=True, exist_ok=True)
    x = np.eye(6, 3, dtype=np.float32)
    onehot = np.eye(2, dtype=np.float32)[[0, 1, 0, 1, 0, 1]]
    files = {"x": sp.csr_matrix(x[:2]), "allx": sp.csr_matrix(x[:4]), "tx": sp.csr_matrix(x[4:]),
             "y": onehot[:2], "ally": onehot[:4], "ty": onehot[4:],
             "graph": collections.defaultdict(list, {0: [1, 2], 3: [4], 5: [0]})}
    for suffix, obj in files.items():
        (folder / f"ind.toy.{suffix}").write_bytes(pickle.dumps(obj, protocol=2))
    (folder / "ind.toy.test.index").write_text("4\n5\n")


def test_the_tiny_set_reads(tmp_path):
    write_planetoid(tmp_path / "toy")
    g = read_planetoid(tmp_path / "toy")
    assert g.num_nodes == 6 and g.num_classes == 2


def test_a_test_index_far_past_allx_is_refused_before_allocating(tmp_path):
    write_planetoid(tmp_path / "toy")
    (tmp_path / "toy" / "ind.toy.test.index").write_text("4\n5000000000000\n")
    with pytest.raises(GraphError, match=r"ind\.toy\.test\.index: its largest id 5000000000000 leaves "
                                         r"4999999999995 ids after allx's 4 rows that are not test nodes"):
        read_planetoid(tmp_path / "toy")
    (tmp_path / "toy" / "ind.toy.test.index").write_text("4\n" + "9" * 30 + "\n")
    with pytest.raises(GraphError, match=r"line 2: '9{30}' is not a node id \(a negative or huge number\)"):
        read_planetoid(tmp_path / "toy")
