"""Reader/verifier error paths, atomic writing and overwrite rules of the partition folder."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest

from partitioners import (Graph, PartitionFormatError, load_part, load_partition_meta,
                          verify_partition)
from partitioners.format import npyio, write_partition
from partitioners.format.layout import local_index_dtype


def small_graph(n: int = 40, m: int = 160, seed: int = 0) -> Graph:
    rng = np.random.default_rng(seed)
    return Graph.from_edges(rng.integers(0, n, m), rng.integers(0, n, m), n,
                            features=rng.random((n, 3), dtype=np.float32), labels=rng.integers(0, 4, n),
                            train_mask=rng.random(n) < 0.5, edge_weight=rng.random(m))


def write(out: Path, *, num_parts: int = 3, seed: int = 0, **kw) -> dict:
    g = small_graph(seed=seed)
    assignment = np.random.default_rng(seed).integers(0, num_parts, g.num_nodes)
    return write_partition(g, assignment, num_parts, out, method="random", method_params={},
                           seed=seed, quality={"edge_cut": 0}, **kw)


@pytest.fixture
def part_dir(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    write(out)
    return out


def edit_meta(out: Path, fn) -> None:
    path = out / "partition.json"
    meta = json.loads(path.read_text())
    fn(meta)
    path.write_text(json.dumps(meta))


def replace_array(out: Path, part: int, name: str, arr: np.ndarray) -> None:
    """Store ``arr`` as ``name`` of ``part`` and make partition.json agree (size, sha, dtype, shape)."""
    path = out / f"part-{part:05d}" / name
    np.save(path, arr)

    def fix(meta):
        meta["parts"][part]["files"][name].update(
            size=path.stat().st_size, sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
            dtype=arr.dtype.name, shape=list(arr.shape))
    edit_meta(out, fix)


# ---------------------------------------------------------------- reader errors
def test_valid_folder_loads_and_verifies(part_dir):
    meta = load_partition_meta(part_dir)
    assert meta.num_parts == 3 and meta.parts[1].files["indptr.npy"].path == "part-00001/indptr.npy"
    assert verify_partition(part_dir) == []
    assert isinstance(load_part(part_dir, 0).indices, np.memmap)
    pd = load_part(part_dir, 0, mmap=False)
    assert type(pd.indices) is np.ndarray and pd.labels.dtype == np.int64 and pd.val_mask is None


def test_missing_partition_json(part_dir):
    (part_dir / "partition.json").unlink()
    with pytest.raises(PartitionFormatError, match=r"partition\.json: missing partition\.json"):
        load_partition_meta(part_dir)
    assert "missing partition.json" in verify_partition(part_dir)[0]


def test_no_such_folder(tmp_path):
    with pytest.raises(PartitionFormatError, match="nope: no such partition folder"):
        load_part(tmp_path / "nope", 0)


def test_not_our_format(part_dir):
    edit_meta(part_dir, lambda m: m.update(format="dgl-partition"))
    with pytest.raises(PartitionFormatError, match="not a gnn-dist partition: format is 'dgl-partition'"):
        load_part(part_dir, 0)
    (part_dir / "partition.json").write_text("{not json")
    with pytest.raises(PartitionFormatError, match=r"partition\.json: not valid JSON"):
        load_partition_meta(part_dir)


def test_unknown_version(part_dir):
    edit_meta(part_dir, lambda m: m.update(version=2))
    with pytest.raises(PartitionFormatError, match=r"partition\.json: unknown format version 2: "
                                                   r"this reader supports version 1") as info:
        load_part(part_dir, 0)
    assert (info.value.found, info.value.expected) == (2, 1)
    edit_meta(part_dir, lambda m: m.update(version="1"))
    with pytest.raises(PartitionFormatError, match="unknown format version '1'"):
        load_partition_meta(part_dir)


def test_flipped_byte_is_a_sha256_error_naming_the_file(part_dir):
    path = part_dir / "part-00001" / "indices.npy"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(PartitionFormatError, match=r"part-00001/indices\.npy: sha256 mismatch"):
        load_part(part_dir, 1)
    load_part(part_dir, 0)  # other parts are fine
    load_part(part_dir, 1, verify=False)  # the hash (and value checks) are skipped on request
    problems = verify_partition(part_dir)
    assert any("part-00001/indices.npy: sha256 mismatch" in p for p in problems)
    problems = verify_partition(part_dir, check_hashes=False)
    assert not any("sha256 mismatch" in p for p in problems)
    assert any("indices.npy: local source ids must be in" in p for p in problems)  # a bad id


def test_truncated_file_is_a_size_error_even_without_verify(part_dir):
    path = part_dir / "part-00002" / "features.npy"
    path.write_bytes(path.read_bytes()[:-4])
    with pytest.raises(PartitionFormatError, match=r"part-00002/features\.npy: size mismatch: the file "
                                                   r"has \d+ bytes, partition.json says \d+"):
        load_part(part_dir, 2, verify=False)


def test_missing_part_file(part_dir):
    (part_dir / "part-00000" / "send_index.npy").unlink()
    with pytest.raises(PartitionFormatError, match=r"part-00000/send_index\.npy: missing file"):
        load_part(part_dir, 0)
    assert any("send_index.npy: missing file" in p for p in verify_partition(part_dir))


def test_missing_node_map_is_reported_by_verify(part_dir):
    (part_dir / "node_map.npy").unlink()
    assert any("node_map.npy: missing file" in p for p in verify_partition(part_dir))


def test_part_id_out_of_range(part_dir):
    with pytest.raises(PartitionFormatError, match=r"part_id 3 is out of range: this partition has 3 "
                                                   r"parts \(0\.\.2\)"):
        load_part(part_dir, 3)
    with pytest.raises(PartitionFormatError, match="part_id -1 is out of range"):
        load_part(part_dir, -1)


def test_dtype_and_shape_mismatch_with_the_entry(part_dir):
    path = part_dir / "part-00000" / "hotness.npy"
    hot = np.load(path)
    np.save(path, hot.astype(np.int32))
    size = path.stat().st_size
    edit_meta(part_dir, lambda m: m["parts"][0]["files"]["hotness.npy"].update(size=size))
    with pytest.raises(PartitionFormatError, match=r"hotness\.npy: dtype mismatch: the file holds "
                                                   r"int32, partition.json says int64"):
        load_part(part_dir, 0, verify=False)
    np.save(path, np.zeros((hot.size + 1,), np.int64))
    size = path.stat().st_size
    edit_meta(part_dir, lambda m: m["parts"][0]["files"]["hotness.npy"].update(size=size))
    with pytest.raises(PartitionFormatError, match=r"hotness\.npy: shape mismatch"):
        load_part(part_dir, 0, verify=False)


def test_dtype_the_format_forbids(part_dir):
    indptr = np.load(part_dir / "part-00001" / "indptr.npy")
    replace_array(part_dir, 1, "indptr.npy", indptr.astype(np.int32))
    with pytest.raises(PartitionFormatError, match=r"part-00001/indptr\.npy: partition.json entry is "
                                                   r"int32\[\d+\] but format v1 requires int64"):
        load_part(part_dir, 1)


def test_id_out_of_range(part_dir):
    indices = np.load(part_dir / "part-00000" / "indices.npy")
    nl = load_partition_meta(part_dir).parts[0].num_local
    indices[0] = nl
    replace_array(part_dir, 0, "indices.npy", indices)
    with pytest.raises(PartitionFormatError, match=rf"indices\.npy: local source ids must be in "
                                                   rf"\[0, num_inner \+ num_halo = {nl}\)"):
        load_part(part_dir, 0)
    load_part(part_dir, 0, verify=False)  # value checks are part of verify
    assert any("local source ids" in p for p in verify_partition(part_dir))


def test_broken_hotness_order(part_dir):
    pd = load_part(part_dir, 2, mmap=False)
    hot = pd.hotness.copy()
    hot[[0, -1]] = hot[[-1, 0]]
    replace_array(part_dir, 2, "hotness.npy", hot)
    with pytest.raises(PartitionFormatError, match=r"hotness\.npy: hotness differs"):
        load_part(part_dir, 2)


def test_bad_metadata_fields(part_dir):
    edit_meta(part_dir, lambda m: m.pop("num_parts"))
    with pytest.raises(PartitionFormatError, match=r"field num_parts is missing \(an integer is required\)"):
        load_partition_meta(part_dir)


def test_metadata_ranges_must_be_contiguous(tmp_path):
    out = tmp_path / "o"
    write(out)
    edit_meta(out, lambda m: m["parts"][1].update(global_id_range=[0, m["parts"][1]["num_inner"]]))
    with pytest.raises(PartitionFormatError, match=r"field parts\[1\]\.global_id_range = \[0, \d+\]: "
                                                   r"expected \[\d+, \d+\]"):
        load_partition_meta(out)


def test_path_outside_the_folder_is_refused(part_dir):
    edit_meta(part_dir, lambda m: m["parts"][0]["files"]["indptr.npy"].update(path="../../etc/passwd"))
    with pytest.raises(PartitionFormatError, match=r"files\['indptr\.npy'\]\.path = '\.\./\.\./etc/passwd'"):
        load_partition_meta(part_dir)


# ---------------------------------------------------------------- cross-part verification
def _two_part_folder(tmp_path: Path) -> Path:
    # 0 -> 2 only: part 1 = {2, 3} holds node 0 as its one halo row; node 1 is isolated
    out = tmp_path / "two"
    write_partition(Graph.from_edges([0], [2], 4), [0, 0, 1, 1], 2, out, method="hand",
                    method_params={}, seed=None, quality={})
    return out


def test_verify_catches_send_list_not_matching_halo(tmp_path):
    out = _two_part_folder(tmp_path)
    assert verify_partition(out) == []
    gids = np.load(out / "part-00001" / "global_ids.npy")
    assert gids.tolist() == [2, 3, 0]
    gids[2] = 1  # halo row now claims node with gid 1 (also owned by part 0): per-part checks pass
    replace_array(out, 1, "global_ids.npy", gids)
    load_part(out, 1)
    problems = verify_partition(out)
    assert any("part-00000/send_index.npy: the 1 rows part 0 sends to part 1 are not part 1's 1 halo "
               "rows from part 0" in p for p in problems)
    assert any("node_map[original_ids] != global_ids" in p for p in problems)


def test_verify_catches_node_map_and_degree_errors(tmp_path):
    out = _two_part_folder(tmp_path)
    nm = np.load(out / "node_map.npy")
    nm[[2, 3]] = nm[[3, 2]]
    np.save(out / "node_map.npy", nm)
    out_deg = np.load(out / "part-00000" / "out_degree.npy")
    out_deg[1] += 1
    replace_array(out, 0, "out_degree.npy", out_deg)
    problems = verify_partition(out, check_hashes=False)
    assert any("node_map.npy: size mismatch" not in p and "node_map[original_ids] != global_ids" in p
               for p in problems)
    assert any("part-00000/out_degree.npy: out_degree differs" in p for p in problems)
    nm[0] = nm[1]
    np.save(out / "node_map.npy", nm)
    assert any("node_map.npy: is not a permutation" in p for p in verify_partition(out, check_hashes=False))


# ---------------------------------------------------------------- atomic writing
def _failing_save(monkeypatch, fail_at: int) -> list[str]:
    calls: list[str] = []
    real = npyio.save_array

    def save(root, rel_path, arr):
        calls.append(rel_path)
        if len(calls) == fail_at:
            raise OSError(f"disk full while writing {rel_path}")
        return real(root, rel_path, arr)
    monkeypatch.setattr(npyio, "save_array", save)
    return calls


def test_crash_while_writing_leaves_nothing(tmp_path, monkeypatch):
    calls = _failing_save(monkeypatch, 3)
    with pytest.raises(OSError, match="disk full"):
        write(tmp_path / "out")
    assert len(calls) == 3
    assert not (tmp_path / "out").exists()
    assert os.listdir(tmp_path) == []  # no stray temporary folder


def test_crash_while_overwriting_keeps_the_old_partition(tmp_path, monkeypatch):
    out = tmp_path / "out"
    old = write(out, seed=0)
    _failing_save(monkeypatch, 10)
    with pytest.raises(OSError, match="disk full"):
        write(out, seed=1, overwrite=True)
    assert json.loads((out / "partition.json").read_text()) == old
    assert verify_partition(out) == []
    assert os.listdir(tmp_path) == ["out"]


def test_failed_final_rename_restores_the_old_partition(tmp_path, monkeypatch):
    out = tmp_path / "out"
    old = write(out, seed=0)
    real = os.rename

    def rename(a, b):
        if ".tmp-" in str(a):
            raise OSError("rename failed")
        return real(a, b)
    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(OSError, match="rename failed"):
        write(out, seed=1, overwrite=True)
    monkeypatch.undo()
    assert json.loads((out / "partition.json").read_text()) == old
    assert os.listdir(tmp_path) == ["out"]


# ---------------------------------------------------------------- overwrite
def test_existing_partition_needs_overwrite(tmp_path):
    out = tmp_path / "out"
    write(out, seed=0)
    with pytest.raises(FileExistsError, match=rf"{out} already holds a partition; pass overwrite=True "
                                              rf"\(CLI: --overwrite\)"):
        write(out, seed=1)
    assert load_partition_meta(out).seed == 0
    write(out, seed=1, overwrite=True)
    assert load_partition_meta(out).seed == 1 and verify_partition(out) == []
    assert os.listdir(tmp_path) == ["out"]  # the old folder was deleted


def test_empty_folder_is_used_and_other_folders_are_never_deleted(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    write(empty)
    assert verify_partition(empty) == []
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    for overwrite in (False, True):
        with pytest.raises(FileExistsError, match=r"mine is a non-empty folder without partition\.json "
                                                  r"\(not a partition folder\); refusing to replace it"):
            write(other, overwrite=overwrite)
    assert (other / "notes.txt").read_text() == "keep me"
    afile = tmp_path / "file"
    afile.write_text("x")
    with pytest.raises(FileExistsError, match="file exists and is not a folder"):
        write(afile, overwrite=True)


# ---------------------------------------------------------------- writer input checks
@pytest.mark.parametrize("assignment, match", [
    (np.zeros(39, np.int64), r"assignment has shape \(39,\) but the graph has 40 nodes"),
    (np.full(40, 3), r"assignment\[0\] = 3 is out of range: part ids must be in \[0, num_parts = 3\)"),
    (np.zeros(40, np.float64), "assignment must hold integer part ids, got dtype float64"),
])
def test_bad_assignment(tmp_path, assignment, match):
    with pytest.raises(ValueError, match=match):
        write_partition(small_graph(), assignment, 3, tmp_path / "o", method="x", method_params={}, seed=0)
    assert os.listdir(tmp_path) == []


def test_extra_meta(tmp_path):
    g = small_graph()
    with pytest.raises(ValueError, match=r"extra_meta may not set \['num_nodes'\]"):
        write_partition(g, np.zeros(40, int), 1, tmp_path / "o", method="x", method_params={}, seed=0,
                        extra_meta={"num_nodes": 3})
    meta = write_partition(g, np.zeros(40, int), 1, tmp_path / "o", method="x", method_params={}, seed=0,
                           quality={"edge_cut": np.int64(0), "bad": float("nan")},
                           extra_meta={"source": "test", "name": "tiny"})
    raw = load_partition_meta(tmp_path / "o").raw
    assert raw == meta and raw["source"] == "test" and raw["name"] == "tiny"
    assert raw["quality"]["bad"] is None and "write" in raw["quality"]["time_s"]


def test_quality_is_computed_when_not_given(tmp_path):
    g = small_graph()
    meta = write_partition(g, np.arange(40) % 2, 2, tmp_path / "o", method="x", method_params={}, seed=0)
    src, dst = g.edges()
    assert meta["quality"]["edge_cut"] == int(np.count_nonzero(src % 2 != dst % 2))


def test_empty_parts_load(tmp_path):
    g = small_graph()
    write_partition(g, np.full(40, 2), 4, tmp_path / "o", method="x", method_params={}, seed=0, quality={})
    assert verify_partition(tmp_path / "o") == []
    pd = load_part(tmp_path / "o", 1)
    assert (pd.num_inner, pd.num_halo, pd.indptr.tolist(), pd.features.shape) == (0, 0, [0], (0, 3))
    assert load_part(tmp_path / "o", 2).num_inner == 40


def test_index_dtype_rule():
    assert local_index_dtype(2**31 - 2) == np.int32
    assert local_index_dtype(2**31 - 1) == np.int64
