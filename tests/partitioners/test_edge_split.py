"""``gnn-dist partition --edge-split``: the seeded split of a graph's edge pairs, their removal
from the message-passing graph, and the parts' ``link_*.npy`` (partitioners/io/edge_split.py)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from partitioners import Graph
from gnn_dist_cli.command import EXIT_FAILED, EXIT_OK, EXIT_USAGE, main
from partitioners.errors import PartitionFormatError
from partitioners.format import load_part, load_partition_meta, verify_partition, write_partition
from partitioners.io.edge_split import LINK_KINDS, with_edge_split

FRACTIONS = (0.7, 0.1, 0.2)


def _graph() -> Graph:
    """60 nodes: symmetric random edges with repeats, self-loops and one edge stored one way,
    weights and edge features (each row a function of its edge, so rows can be followed)."""
    rng = np.random.default_rng(3)
    src, dst = rng.integers(0, 60, 300), rng.integers(0, 60, 300)
    src, dst = np.concatenate([src, dst, [5, 7, 7], [0]]), np.concatenate([dst, src, [5, 9, 9], [59]])
    w = (src * 100 + dst).astype(np.float32)
    attr = np.stack([src, dst], axis=1).astype(np.float32)
    return Graph.from_edges(src, dst, 60, edge_weight=w, edge_attr=attr, features=rng.random((60, 3)))


def _pair_keys(pairs: np.ndarray, n: int) -> np.ndarray:
    return np.sort(np.minimum(pairs[0], pairs[1]) * n + np.maximum(pairs[0], pairs[1]))


def _edge_keys(g: Graph) -> np.ndarray:
    src, dst = (np.asarray(a, dtype=np.int64) for a in g.edges())
    return src, dst, np.minimum(src, dst) * g.num_nodes + np.maximum(src, dst)


def test_split_counts_determinism_and_removal():
    g = _graph()
    n = g.num_nodes
    src, dst, keys = _edge_keys(g)
    pairs = np.unique(keys[src != dst])
    split, record = with_edge_split(g, FRACTIONS, seed=4)
    again, record2 = with_edge_split(g, FRACTIONS, seed=4)
    other, _ = with_edge_split(g, FRACTIONS, seed=5)
    m = pairs.size
    want = {"val": round(0.1 * m), "test": round(0.3 * m) - round(0.1 * m)}
    want["train"] = m - want["val"] - want["test"]
    assert record["counts"] == want and record == record2 and record["fractions"] == list(FRACTIONS)
    for kind in LINK_KINDS:
        lp = split.link_pairs[kind]
        assert lp.dtype == np.int64 and np.all(lp[0] < lp[1])
        np.testing.assert_array_equal(lp, again.link_pairs[kind])
    assert not np.array_equal(split.link_pairs["val"], other.link_pairs["val"])
    every = np.concatenate([_pair_keys(split.link_pairs[k], n) for k in LINK_KINDS])
    np.testing.assert_array_equal(np.sort(every), pairs)   # disjoint, and all pairs (fractions sum to 1)

    held = np.concatenate([_pair_keys(split.link_pairs[k], n) for k in ("val", "test")])
    s2, d2, k2 = _edge_keys(split)
    assert not np.isin(k2, held).any()                        # gone both ways, every repeat
    removed = np.isin(keys, held)
    assert record["removed_edges"] == int(removed.sum()) == g.num_edges - split.num_edges
    np.testing.assert_array_equal(np.sort(k2), np.sort(keys[~removed]))
    np.testing.assert_array_equal(split.edge_weight, s2 * 100 + d2)   # weights and features follow
    np.testing.assert_array_equal(split.edge_attr, np.stack([s2, d2], axis=1))
    assert np.isin(_pair_keys(split.link_pairs["train"], n), k2).all()


def test_bad_fractions_and_too_few_pairs():
    with pytest.raises(ValueError, match="sum to 1.2"):
        with_edge_split(_graph(), (0.8, 0.2, 0.2), 0)
    tiny = Graph.from_edges([0, 1], [1, 0], 2)
    with pytest.raises(ValueError, match="1 edge pairs .* too few"):
        with_edge_split(tiny, FRACTIONS, 0)


def _folder_pairs(folder: Path) -> dict[str, np.ndarray]:
    """Each set's pairs over all parts, as sorted ``src * N + dst`` keys of original ids, after
    checking every part's pairs: owned destination, (dst, src) order, orientation."""
    meta = load_partition_meta(folder)
    node_map = np.load(folder / "node_map.npy")
    orig_of = np.argsort(node_map)
    out: dict[str, list[np.ndarray]] = {k: [] for k in LINK_KINDS}
    for p in range(meta.num_parts):
        part = load_part(folder, p)
        lo, hi = part.global_id_range
        for kind in LINK_KINDS:
            lp = np.asarray(getattr(part, f"link_{kind}"))
            assert lp.dtype == np.int64 and lp.shape[0] == 2
            assert np.all((lp[1] >= lo) & (lp[1] < hi))
            assert np.array_equal(np.lexsort((lp[0], lp[1])), np.arange(lp.shape[1]))
            o = orig_of[lp]
            assert np.all(o[0] < o[1])
            out[kind].append(o[0] * meta.num_nodes + o[1])
    return {k: np.sort(np.concatenate(v)) for k, v in out.items()}


def test_parts_store_the_split_leak_free_and_independent_of_p(tmp_path):
    g = _graph()
    split, record = with_edge_split(g, FRACTIONS, seed=1)
    n = g.num_nodes
    for parts in (1, 3):
        a = np.random.default_rng(parts).integers(0, parts, n)
        write_partition(split, a, parts, tmp_path / f"p{parts}", method="test", method_params={}, seed=0,
                        extra_meta={"edge_split": record})
    assert verify_partition(tmp_path / "p3") == [] and verify_partition(tmp_path / "p1") == []
    meta = load_partition_meta(tmp_path / "p3")
    assert meta.edge_split == record and meta.minor_version == 2
    got1, got3 = _folder_pairs(tmp_path / "p1"), _folder_pairs(tmp_path / "p3")
    for kind in LINK_KINDS:
        want = np.sort(split.link_pairs[kind][0] * n + split.link_pairs[kind][1])
        np.testing.assert_array_equal(got3[kind], want)
        np.testing.assert_array_equal(got1[kind], want)
    held = np.concatenate([got3["val"], got3["test"]])
    for p in range(3):   # the stored CSR, in original ids, has no val/test pair either way
        part = load_part(tmp_path / "p3", p)
        orig = np.asarray(part.original_ids)
        dst = np.repeat(orig[:part.num_inner], np.diff(part.indptr))
        src = orig[np.asarray(part.indices)]
        assert part.num_local_edges and not np.isin(np.minimum(src, dst) * n + np.maximum(src, dst), held).any()


def test_writer_refuses_a_split_without_its_record(tmp_path):
    split, record = with_edge_split(_graph(), FRACTIONS, seed=1)
    a = np.zeros(60, dtype=np.int64)
    with pytest.raises(ValueError, match="needs extra_meta\\['edge_split'\\]"):
        write_partition(split, a, 1, tmp_path / "x", method="test", method_params={}, seed=0)
    with pytest.raises(ValueError, match="the graph has no link_pairs"):
        write_partition(_graph(), a, 1, tmp_path / "x", method="test", method_params={}, seed=0,
                        extra_meta={"edge_split": record})


def _replace_array(folder: Path, part: int, name: str, arr: np.ndarray) -> None:
    """Store ``arr`` as ``name`` of ``part`` with partition.json agreeing (so a value check fires)."""
    path = folder / f"part-{part:05d}" / name
    np.save(path, arr)
    meta = json.loads((folder / "partition.json").read_text())
    meta["parts"][part]["files"][name].update(size=path.stat().st_size, shape=list(arr.shape),
                                              sha256=hashlib.sha256(path.read_bytes()).hexdigest())
    (folder / "partition.json").write_text(json.dumps(meta))


def test_cli_dataset_split_inspect_and_a_wrong_owner(tmp_path, capsys):
    out = tmp_path / "p"
    assert main(["partition", "--dataset", "sbm-tiny", "--parts", "2", "--method", "random", "--seed", "2",
                 "--edge-split", "0.85,0.05,0.1", "--out", str(out), "--no-progress"]) == EXIT_OK
    capsys.readouterr()
    assert main(["inspect", str(out), "--verify"]) == EXIT_OK
    err = capsys.readouterr().err
    meta = load_partition_meta(out)
    c = meta.edge_split["counts"]
    assert f"edge split: train {c['train']}  val {c['val']}  test {c['test']} pairs" in err
    assert meta.edge_split["seed"] == 2 and c["val"] >= 1

    val0, val1 = (np.array(load_part(out, p).link_val) for p in (0, 1))
    assert val0.shape[1] and val1.shape[1]
    _replace_array(out, 0, "link_val.npy", val1)   # swapped: the counts still add up, the owners not
    _replace_array(out, 1, "link_val.npy", val0)
    assert main(["inspect", str(out), "--verify"]) == EXIT_FAILED
    errors = [line for line in capsys.readouterr().err.splitlines() if "link_val.npy" in line]
    assert errors and "part-00000/link_val.npy: destination ids (row 1) must be owned by part 0" in errors[0]
    with pytest.raises(PartitionFormatError, match="part-00000/link_val.npy: destination ids"):
        load_part(out, 0)


def test_refused_for_npy_dir_and_old_minor_versions(tmp_path, capsys):
    (tmp_path / "dir").mkdir()
    code = main(["partition", "--input", str(tmp_path / "dir"), "--input-format", "npy-dir", "--parts", "2",
                 "--edge-split", "0.85,0.05,0.1", "--out", str(tmp_path / "o"), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_USAGE and len(err) == 1 and "--edge-split" in err[0] and "npy-dir" in err[0]

    split, record = with_edge_split(_graph(), FRACTIONS, seed=1)
    write_partition(split, np.arange(60) % 2, 2, tmp_path / "p", method="test", method_params={}, seed=0,
                    extra_meta={"edge_split": record})
    path = tmp_path / "p" / "partition.json"
    raw = json.loads(path.read_text())
    path.write_text(json.dumps({**raw, "minor_version": 1}))
    with pytest.raises(PartitionFormatError, match="edge_split needs minor_version >= 2"):
        load_partition_meta(tmp_path / "p")
    bad = {**record, "counts": {**record["counts"], "test": record["counts"]["test"] + 1}}
    path.write_text(json.dumps({**raw, "edge_split": bad}))
    with pytest.raises(PartitionFormatError, match="edge_split.counts.test = .* but the parts' link_test.npy hold"):
        load_partition_meta(tmp_path / "p")


def test_a_folder_without_a_split_has_no_link_files(tmp_path):
    g = _graph()
    write_partition(g, np.arange(60) % 2, 2, tmp_path / "p", method="test", method_params={}, seed=0)
    meta = load_partition_meta(tmp_path / "p")
    assert meta.edge_split is None and "edge_split" not in meta.raw
    part = load_part(tmp_path / "p", 1)
    assert part.link_train is None and part.link_val is None and part.link_test is None
    assert not list((tmp_path / "p").glob("part-*/link_*.npy")) and verify_partition(tmp_path / "p") == []
