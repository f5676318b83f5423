"""Fuzz the ``.npy`` headers of a partition folder's files: flipped or replaced header bytes, a
rewritten header literal (dtypes, shapes, Fortran order), broken magic, version and length
fields, truncation. Loading a part, with and without checksums and memory mapping, and
verifying the folder must raise nothing but :class:`~partitioners.errors.PartitionFormatError`:
no MemoryError from a shape that promises terabytes, no raw ValueError or SyntaxError from
numpy's header parser. Regressions the fuzz found are pinned as ``@example``s."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from corpus_utils import edit_npy_header, rehash
from partitioners import PartitionFormatError, load_part, verify_partition

SETTINGS = settings(max_examples=96, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])

FILES = ["part-00000/indptr.npy", "part-00000/features.npy", "part-00001/indices.npy",
         "part-00001/labels.npy", "part-00002/train_mask.npy", "part-00002/edge_weight.npy",
         "part-00001/halo_offsets.npy", "node_map.npy"]

DESCRS = ["'<i8'", "'<i4'", "'<f4'", "'<f2'", "'|b1'", "'|u1'", "'>i8'", "'<U4'", "'|O'",
          "'<c16'", "'<M8[s]'", "[('a', '<i8')]", "'V8'", "'x'", "''", "1", "None", "{}",
          "'<i8' + '<i8'"]
SHAPES = ["()", "(0,)", "(2,)", "(4,)", "(9,)", "(4, 3)", "(3, 4)", "(-1,)", "(2**40,)",
          "(1099511627776,)", "(9223372036854775807,)", "(10**30,)", "(4, 0)", "(1,) * 64",
          "[4]", "4", "(4.0,)", "('4',)", "(4, 3, 1)", "((((4,),),),)"]
ORDERS = ["False", "True", "0", "1", "'no'", "None"]


@pytest.fixture(scope="module")
def work(pristine: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fuzz-npy") / "parts"
    shutil.copytree(pristine, out)
    return out


def header_end(data: bytes) -> int:
    """Where the data starts, by the format 1.0 length field (the writer's files are 1.0)."""
    return 10 + int.from_bytes(data[8:10], "little")


@st.composite
def mutation(draw: st.DrawFn, original: bytes) -> bytes:
    """The file's bytes with its header damaged one of several ways."""
    end = header_end(original)
    kind = draw(st.sampled_from(["literal", "literal", "bytes", "magic", "length", "truncate",
                                 "text"]))
    data = bytearray(original)
    if kind == "literal":  # a header literal of chosen parts, padded to the same length if it fits
        text = (f"{{'descr': {draw(st.sampled_from(DESCRS))}, 'fortran_order': "
                f"{draw(st.sampled_from(ORDERS))}, 'shape': {draw(st.sampled_from(SHAPES))}, }}")
        if draw(st.booleans()):
            text = text.replace("'shape'", draw(st.sampled_from(["'shap'", "'shape' ", "'extra': 1, 'shape'"])))
        body = text.encode()
        room = end - 10 - 1
        if len(body) <= room:
            header = body + b" " * (room - len(body)) + b"\n"
            data[10:end] = header
        else:  # a longer header moves the data: also a case the reader must refuse cleanly
            data[8:10] = (len(body) + 1).to_bytes(2, "little")
            data[10:end] = body + b"\n"
    elif kind == "bytes":
        for _ in range(draw(st.integers(1, 6))):
            data[draw(st.integers(0, end - 1))] = draw(st.integers(0, 255))
    elif kind == "magic":
        data[draw(st.integers(0, 7))] = draw(st.integers(0, 255))
    elif kind == "length":
        data[8:10] = draw(st.integers(0, 65535)).to_bytes(2, "little")
    elif kind == "truncate":
        data = data[:draw(st.integers(0, end + 8))]
    else:  # free text in the header, unbalanced brackets, non-ASCII, deep nesting
        text = draw(st.one_of(st.text(max_size=40), st.sampled_from(
            ["(" * 500, "{" * 300 + "}" * 300, "{'descr': '<i8', 'fortran_order': False, 'shape': (" + "(" * 200,
             "\u00e9\u00e9", "\x00\x00", "{'descr': '<i8', 'fortran_order': False, 'shape': (4,), 'shape': (5,)}"])))
        body = text.encode("utf-8", "replace")[:end - 11]
        data[10:end] = body + b" " * (end - 11 - len(body)) + b"\n"
    return bytes(data)


def check_part_loads_or_refuses(folder: Path, part: int) -> None:
    for verify in (True, False):
        for mmap in (True, False):
            try:
                load_part(folder, part, verify=verify, mmap=mmap)
            except PartitionFormatError:
                pass
    problems = verify_partition(folder, check_hashes=False)
    assert isinstance(problems, list)


@pytest.mark.parametrize("rel", FILES)
def test_fuzz_npy_header(work, pristine, rel):
    path = work / rel
    original = (pristine / rel).read_bytes()
    meta_text = (pristine / "partition.json").read_text()
    part = 0 if rel == "node_map.npy" else int(rel[5:10])

    @settings(SETTINGS, max_examples=SETTINGS.max_examples // len(FILES))  # 12 per file
    @given(mutation(original), st.booleans())
    # regressions: a header promising 2**40 elements made np.load allocate them (MemoryError
    # without mmap); an object dtype, an unparsable literal and a bad magic came out as numpy's
    # own ValueError/SyntaxError instead of a PartitionFormatError
    @example(edit_npy_header(original, b"'shape': (", b"'shape': (1099511627776, "), True)
    @example(original.replace(b"\x93NUMPY", b"\x93NUMPZ", 1), True)
    def run(data: bytes, recorded: bool) -> None:
        (work / "partition.json").write_text(meta_text)
        path.write_bytes(data)
        if recorded:  # the checksum in partition.json matches: the loader must parse the header
            rehash(work, rel)
        try:
            check_part_loads_or_refuses(work, part)
        finally:
            path.write_bytes(original)

    run()
