"""A corpus of broken partition folders: each is rejected with a message that names the file,
the field or the value, by the reader (``partitioners.format``), by ``verify_partition`` and by
``gnn-dist inspect --verify`` (exit code 1, one error line, never an internal error)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from corpus_utils import NUM_PARTS, edit_meta, edit_npy_header, error_lines, rehash, run_cli
from partitioners import PartitionFormatError, load_part, load_partition_meta, verify_partition
from gnn_dist_cli.command import EXIT_FAILED, EXIT_OK
from partitioners.format.writer import write_partition


def set_field(*path: str | int, value: object) -> Callable[[Path], None]:
    """A mutation that sets ``partition.json[path...] = value``."""
    def mutate(folder: Path) -> None:
        def change(meta: dict) -> None:
            node = meta
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = value
        edit_meta(folder, change)
    return mutate


def drop_field(key: str) -> Callable[[Path], None]:
    return lambda folder: edit_meta(folder, lambda meta: meta.pop(key))


def write_meta_text(text: str | bytes) -> Callable[[Path], None]:
    def mutate(folder: Path) -> None:
        path = folder / "partition.json"
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return mutate


def truncate_meta(folder: Path) -> None:
    path = folder / "partition.json"
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


def deep_quality(depth: int) -> Callable[[Path], None]:
    """``quality`` nested ``depth`` lists deep (written as text: json.dumps would recurse)."""
    def mutate(folder: Path) -> None:
        path = folder / "partition.json"
        text = path.read_text()
        at = text.index('"quality": ') + len('"quality": ')
        path.write_text(text[:at] + '{"deep": ' + "[" * depth + "]" * depth + ", " + text[at + 1:])
    return mutate


# (id, mutation, regex the message must match); the message must also start with the file's path
META_CASES = [
    ("missing-meta", lambda f: (f / "partition.json").unlink(), r"missing partition\.json"),
    ("truncated-meta", truncate_meta, r"not valid JSON"),
    ("binary-meta", write_meta_text(b"\xff\xfe\x00{"), r"not valid JSON"),
    ("empty-meta", write_meta_text(""), r"not valid JSON"),
    ("list-meta", write_meta_text("[1, 2]"), r"not a gnn-dist partition: format is 'list'"),
    ("nested-100000", write_meta_text("[" * 100_000 + "]" * 100_000),
     r"not a valid partition\.json: nesting too deep"),
    ("nested-quality-200", deep_quality(200), r"not a valid partition\.json: nesting too deep"),
    ("nested-quality-5000", deep_quality(5000), r"not a valid partition\.json: nesting too deep"),
    ("huge-int-literal", write_meta_text('{"format": "gnn-dist-partition", "version": 1' + "0" * 5000 + "}"),
     r"not valid JSON \(Exceeds the limit \(4300 digits\)"),
    ("other-format", set_field("format", value="dgl"), r"not a gnn-dist partition: format is 'dgl'"),
    ("version-2", set_field("version", value=2),
     r"unknown format version 2: this reader supports version 1 only"),
    ("version-string", set_field("version", value="1"), r"unknown format version '1'"),
    ("version-bool", set_field("version", value=True), r"unknown format version True"),
    ("missing-num-parts", drop_field("num_parts"), r"field num_parts is missing"),
    ("float-num-nodes", set_field("num_nodes", value=12.0), r"field num_nodes must be an integer, got 12\.0"),
    ("bool-num-edges", set_field("num_edges", value=True), r"field num_edges must be an integer, got True"),
    ("negative-num-edges", set_field("num_edges", value=-1), r"field num_edges = -1 must be >= 0"),
    ("int64-num-nodes", set_field("num_nodes", value=2**63),
     r"field num_nodes = 9223372036854775808 is impossible: it is larger than 9223372036854775807, "
     r"and it must fit in int64"),
    ("huge-num-halo", set_field("parts", 1, "num_halo", value=10**15),
     r"field parts\[1\]\.num_halo = 1000000000000000 is impossible: it is larger than 8, and halo "
     r"rows are nodes of other parts: at most num_nodes - num_inner = 12 - 4"),
    ("negative-num-halo", set_field("parts", 0, "num_halo", value=-2), r"field parts\[0\]\.num_halo = -2 must be >= 0"),
    ("negative-num-inner", set_field("parts", 2, "num_inner", value=-1), r"field parts\[2\]\.num_inner = -1 must be >= 0"),
    ("num-inner-over-nodes", set_field("parts", 2, "num_inner", value=13),
     r"field parts\[2\]\.num_inner = 13 is impossible: it is larger than 12"),
    ("local-edges-over-edges", set_field("parts", 0, "num_local_edges", value=10**6),
     r"field parts\[0\]\.num_local_edges = 1000000 is impossible: .* at most num_edges = \d+ edges"),
    ("num-train-over-inner", set_field("parts", 0, "num_train", value=5),
     r"field parts\[0\]\.num_train = 5 is impossible: .*at most num_inner = 4"),
    ("float-num-train", set_field("parts", 0, "num_train", value=2.5), r"field parts\[0\]\.num_train must be an integer, got 2\.5"),
    ("string-part", set_field("parts", 1, value="part"), r"field parts\[1\] must be an object, got str"),
    ("parts-count", lambda f: edit_meta(f, lambda m: m["parts"].pop()),
     r"field parts must list num_parts = 3 parts, got 2"),
    ("negative-file-size", set_field("parts", 0, "files", "indptr.npy", "size", value=-5),
     r"field parts\[0\]\.files\['indptr\.npy'\]\.size = -5 must be >= 0"),
    ("float-shape", set_field("parts", 0, "files", "indptr.npy", "shape", value=[5.0]),
     r"field parts\[0\]\.files\['indptr\.npy'\]\.shape must be a list of non-negative int64 integers"),
    ("huge-shape", set_field("parts", 0, "files", "indptr.npy", "shape", value=[2**64]),
     r"shape must be a list of non-negative int64 integers, got \[18446744073709551616\]"),
    ("negative-seed", set_field("seed", value=-3), r"field seed must be a non-negative integer or null, got -3"),
    ("name-list", set_field("name", value=["a"]), r"field name must be a string, got list"),
    ("ranges", set_field("parts", 1, "global_id_range", value=[0, 4]),
     r"field parts\[1\]\.global_id_range = \[0, 4\]: expected \[4, 8\]"),
    ("unknown-part-file", set_field("parts", 0, "files", "extra.npy", value={}),
     r"field parts\[0\]\.files lists unknown file 'extra\.npy'"),
    ("missing-node-map-entry", lambda f: edit_meta(f, lambda m: m["files"].clear()),
     r"field files must list 'node_map\.npy'"),
]


@pytest.mark.parametrize("mutate, pattern", [c[1:] for c in META_CASES], ids=[c[0] for c in META_CASES])
def test_broken_partition_json_is_named(capsys, folder, mutate, pattern):
    mutate(folder)
    meta_path = str(folder / "partition.json")
    with pytest.raises(PartitionFormatError, match=pattern) as info:
        load_partition_meta(folder)
    assert str(info.value).startswith(meta_path) and info.value.path == meta_path
    with pytest.raises(PartitionFormatError, match=pattern):
        load_part(folder, 0)
    problems = verify_partition(folder)
    assert len(problems) == 1 and problems[0] == str(info.value)
    code, out, err = run_cli(capsys, "inspect", folder, "--verify")
    assert code == EXIT_FAILED and out == ""
    assert error_lines(err) == [f"[gnn-dist] error: {info.value}"], err
    assert "internal error" not in err and "Traceback" not in err


def test_unknown_version_carries_both_versions(folder):
    set_field("version", value=2)(folder)
    with pytest.raises(PartitionFormatError) as info:
        load_partition_meta(folder)
    assert (info.value.found, info.value.expected) == (2, 1)


def test_no_such_folder(capsys, tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(PartitionFormatError, match=r"nope: no such partition folder"):
        load_partition_meta(missing)
    code, _, err = run_cli(capsys, "inspect", missing)
    assert code == EXIT_FAILED and error_lines(err) == [f"[gnn-dist] error: {missing}: no such partition folder"]


# ------------------------------------------------------------------------------- part files
def delete(rel: str) -> Callable[[Path], None]:
    return lambda folder: (folder / rel).unlink()


def truncate(rel: str) -> Callable[[Path], None]:
    def mutate(folder: Path) -> None:
        path = folder / rel
        path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])
    return mutate


def flip_last_byte(rel: str) -> Callable[[Path], None]:
    def mutate(folder: Path) -> None:
        path = folder / rel
        data = bytearray(path.read_bytes())
        data[-1] ^= 0xFF
        path.write_bytes(bytes(data))
    return mutate


def empty_part_folder(folder: Path) -> None:
    for f in (folder / "part-00002").iterdir():
        f.unlink()


def replace_header(rel: str, old: bytes, new: bytes) -> Callable[[Path], None]:
    """Edit the ``.npy`` header text in place and record the new checksum."""
    def mutate(folder: Path) -> None:
        path = folder / rel
        path.write_bytes(edit_npy_header(path.read_bytes(), old, new))
        rehash(folder, rel)
    return mutate


def rewrite_as_int32(rel: str) -> Callable[[Path], None]:
    """The array saved again as int32, checksum and dtype recorded: a layout violation."""
    def mutate(folder: Path) -> None:
        path = folder / rel
        np.save(path, np.load(path).astype(np.int32))
        rehash(folder, rel)
        part = int(rel.split("/")[0].removeprefix("part-"))
        set_field("parts", part, "files", rel.split("/")[1], "dtype", value="int32")(folder)
    return mutate


def wrong_offsets(folder: Path) -> None:
    rel = "part-00001/halo_offsets.npy"
    off = np.load(folder / rel)
    off[-1] += 1
    np.save(folder / rel, off)
    rehash(folder, rel)


# (id, mutation, regex, the file the message names, found without checksums too)
PART_CASES = [
    ("missing-file", delete("part-00001/indices.npy"),
     r"missing file \(listed in partition\.json as 'part-00001/indices\.npy'\)", "part-00001/indices.npy", True),
    ("empty-part-folder", empty_part_folder, r"missing file", "part-00002/indptr.npy", True),
    ("missing-node-map", delete("node_map.npy"), r"missing file", "node_map.npy", True),
    ("truncated", truncate("part-00001/features.npy"),
     r"size mismatch: the file has \d+ bytes, partition\.json says \d+ \(truncated or replaced\?\)",
     "part-00001/features.npy", True),
    ("corrupt-byte", flip_last_byte("part-00000/labels.npy"),
     r"sha256 mismatch: the file hashes to [0-9a-f]{64}, partition\.json says [0-9a-f]{64} "
     r"\(the file is corrupt or was modified\)", "part-00000/labels.npy", False),
    ("bad-magic", replace_header("part-00000/indptr.npy", b"\x93NUMPY", b"\x93NUMPZ"),
     r"not a readable \.npy file: bad header", "part-00000/indptr.npy", True),
    ("bad-descr", replace_header("part-00002/hotness.npy", b"'descr': '<i8'", b"'descr': '<X8'"),
     r"not a readable \.npy file: bad header", "part-00002/hotness.npy", True),
    ("header-promises-more", replace_header("part-00001/in_degree.npy", b"'shape': (", b"'shape': (9"),
     r"not a readable \.npy file: the header promises \d+ bytes of data \(int64\[9\d+\]\)",
     "part-00001/in_degree.npy", True),
    ("object-dtype", replace_header("part-00001/out_degree.npy", b"'descr': '<i8'", b"'descr': '|O'"),
     r"not a plain \.npy array: dtype object holds Python objects", "part-00001/out_degree.npy", True),
    ("fortran-features", replace_header("part-00000/features.npy", b"'fortran_order': False", b"'fortran_order': True"),
     r"stored in Fortran order; format v1 stores C order", "part-00000/features.npy", True),
    ("layout-dtype", rewrite_as_int32("part-00000/hotness.npy"),
     r"partition\.json entry is int32\[\d+\] but format v1 requires int64\[\d+\] for this part",
     "part-00000/hotness.npy", True),
    ("offsets", wrong_offsets, r"must run from 0 to \d+, got 0 \.\. \d+", "part-00001/halo_offsets.npy", True),
]


@pytest.mark.parametrize("mutate, pattern, rel, without_hash", [c[1:] for c in PART_CASES],
                         ids=[c[0] for c in PART_CASES])
def test_broken_part_file_is_named(capsys, folder, mutate, pattern, rel, without_hash):
    mutate(folder)
    named = str(folder / rel)
    if rel != "node_map.npy":
        part = int(rel.split("/")[0].removeprefix("part-"))
        with pytest.raises(PartitionFormatError, match=pattern) as info:
            load_part(folder, part)
        assert str(info.value).startswith(named) and info.value.path == named
        for mmap in (True, False):
            if without_hash:
                with pytest.raises(PartitionFormatError, match=pattern):
                    load_part(folder, part, verify=False, mmap=mmap)
            else:
                load_part(folder, part, verify=False, mmap=mmap)  # only the checksum sees it
    problems = verify_partition(folder)
    assert problems and any(p.startswith(named) and re.search(pattern, p) for p in problems), problems
    code, _, err = run_cli(capsys, "inspect", folder, "--verify")
    assert code == EXIT_FAILED and "internal error" not in err and "Traceback" not in err
    assert any(named in line for line in error_lines(err)), err
    assert error_lines(err)[-1].startswith("[gnn-dist] error: verify: FAILED with")


def test_an_empty_part_is_valid(capsys, tmp_path):
    """Format v1 allows a part without nodes: it loads, verifies and inspects cleanly."""
    from corpus_utils import small_graph

    out = tmp_path / "empty"
    write_partition(small_graph(), np.where(np.arange(12) < 6, 0, 2), NUM_PARTS, out,
                    method="test", method_params={}, seed=0)
    part = load_part(out, 1)
    assert (part.num_inner, part.num_halo, part.num_local_edges) == (0, 0, 0)
    assert part.features.shape == (0, 3) and part.indptr.tolist() == [0]
    assert verify_partition(out) == []
    code, _, err = run_cli(capsys, "inspect", out, "--verify")
    assert code == EXIT_OK and "verify: OK" in err


def test_inspect_survives_a_quality_report_of_the_wrong_types(capsys, folder):
    """``quality`` is free-form metadata: wrong types are left out of the report, not fatal."""
    edit_meta(folder, lambda m: m["quality"].update(part_sizes=5, time_s=[1], peak_rss_bytes="x",
                                                    empty_parts="2"))
    code, _, err = run_cli(capsys, "inspect", folder)
    assert code == EXIT_OK and "internal error" not in err
    edit_meta(folder, lambda m: m.update(created_by=[1], quality={"edge_cut": "many"}))
    code, _, err = run_cli(capsys, "inspect", folder)
    assert code == EXIT_OK and "no complete quality report recorded" in err
