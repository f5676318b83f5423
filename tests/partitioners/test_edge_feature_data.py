"""Edge features through the partitioner: the CSR build (duplicates, symmetrised reverses), the
readers (npz, npy-dir out of core, OGB CSV and its conversion), the written parts (format 1.1:
``edge_attr.npy`` in each part's CSR order), older folders, and the catalog's ``sbm-edges``."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from partitioners import Graph
from partitioners.catalog import dataset_info, load_dataset
from partitioners.convert.api import convert_graph
from partitioners.errors import GraphError, PartitionFormatError
from partitioners.format.meta import READ_MINOR_VERSION
from partitioners.format.reader import load_part, load_partition_meta
from partitioners.format.verify import verify_partition
from partitioners.format.writer import write_partition
from partitioners.io.read import read_graph


def _edges(seed: int = 0, n: int = 25, e: int = 160) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, e), rng.integers(0, n, e)
    return np.concatenate([src, src[:10], [4, 4]]), np.concatenate([dst, dst[:10], [4, 9]])  # repeats, a loop


def _stored(g: Graph) -> dict[tuple[int, int], list[tuple[float, ...]]]:
    """(src, dst) -> the feature rows of its stored edges, in CSR order."""
    out: dict[tuple[int, int], list[tuple[float, ...]]] = {}
    src, dst = g.edges()
    for s, d, row in zip(src.tolist(), dst.tolist(), np.asarray(g.edge_attr).tolist()):
        out.setdefault((s, d), []).append(tuple(row))
    return out


@pytest.mark.parametrize("symmetrize, dedupe", [(False, False), (True, False), (False, True), (True, True)])
def test_the_build_keeps_each_edges_features_like_its_weight(symmetrize, dedupe):
    src, dst = _edges()
    rng = np.random.default_rng(1)
    w = rng.random(src.size).astype(np.float32)
    attr = np.stack([w, rng.standard_normal(src.size), np.arange(src.size)], axis=1)  # column 0 = the weight
    g = Graph.from_edges(src, dst, edge_weight=w, edge_attr=attr, symmetrize=symmetrize, remove_duplicates=dedupe)
    assert g.edge_attr.dtype == np.float32 and g.edge_attr.shape == (g.num_edges, 3) and g.edge_feature_dim == 3
    np.testing.assert_array_equal(g.edge_attr[:, 0], g.edge_weight)  # rows and weights stay paired
    plain = Graph.from_edges(src, dst, edge_weight=w, symmetrize=symmetrize, remove_duplicates=dedupe)
    assert np.array_equal(g.indices, plain.indices) and np.array_equal(g.edge_weight, plain.edge_weight)
    stored = _stored(g)
    position = attr[:, 2].astype(np.int64)
    for (s, d), rows in stored.items():
        forward = [int(i) for i in np.flatnonzero((src == s) & (dst == d))]
        if forward:  # an input edge: its own rows, in input order (the first only, deduplicated)
            want = forward[:1] if dedupe else forward
            assert [int(r[2]) for r in rows] == [int(position[i]) for i in want], (s, d)
        else:  # an added reverse: the features of the first edge d -> s
            first = int(np.flatnonzero((src == d) & (dst == s))[0])
            assert symmetrize and rows == [tuple(np.float32(attr[first]).tolist())], (s, d)


def test_bad_edge_features_are_named():
    src, dst = _edges()
    with pytest.raises(GraphError, match=r"edge_attr has shape \[3, 2\] but there are 172 edges"):
        Graph.from_edges(src, dst, edge_attr=np.zeros((3, 2)))
    bad = np.zeros((src.size, 2))
    bad[7, 1] = np.nan
    with pytest.raises(GraphError, match=r"edge_attr\[7, 1\] = nan is not finite"):
        Graph.from_edges(src, dst, edge_attr=bad)
    one = Graph.from_edges(src, dst, edge_attr=np.arange(src.size, dtype=np.int64))  # [E] is [E, 1]
    assert one.edge_attr.shape == (one.num_edges, 1)


def _write_csv_gz(path: Path, rows: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(",".join(repr(float(v)) if isinstance(v, float) else str(v) for v in np.atleast_1d(r).tolist())
                   + "\n" for r in rows)
    path.write_bytes(gzip.compress(text.encode()))


@pytest.fixture
def inputs(tmp_path) -> dict:
    """One graph with edge features in the npz, npy-dir and OGB CSV layouts."""
    src, dst = _edges(3, n=30)
    rng = np.random.default_rng(3)
    attr = np.round(rng.standard_normal((src.size, 2)), 3).astype(np.float32)
    x = np.round(rng.standard_normal((30, 4)), 3).astype(np.float32)
    np.savez(tmp_path / "g.npz", src=src, dst=dst, edge_attr=attr, x=x)
    d = tmp_path / "npy"
    d.mkdir()
    for name, a in (("src", src), ("dst", dst), ("edge_attr", attr.astype(np.float64)), ("features", x)):
        np.save(d / f"{name}.npy", a)
    ogb = tmp_path / "ogb"
    _write_csv_gz(ogb / "raw" / "edge.csv.gz", np.stack([src, dst], axis=1))
    _write_csv_gz(ogb / "raw" / "num-node-list.csv.gz", np.array([30]))
    _write_csv_gz(ogb / "raw" / "node-feat.csv.gz", x)
    _write_csv_gz(ogb / "raw" / "edge-feat.csv.gz", attr)
    return {"src": src, "dst": dst, "attr": attr, "x": x, "root": tmp_path}


@pytest.mark.parametrize("symmetrize", [False, True])
def test_every_reader_carries_the_edge_features(inputs, tmp_path, symmetrize):
    ref = Graph.from_edges(inputs["src"], inputs["dst"], 30, features=inputs["x"], edge_attr=inputs["attr"],
                           symmetrize=symmetrize, remove_duplicates=True)
    root = inputs["root"]
    convert_graph(root / "ogb", tmp_path / "converted", fmt="ogb")
    assert np.load(tmp_path / "converted" / "edge_attr.npy").shape == (inputs["src"].size, 2)
    for source in ("g.npz", "npy", "ogb", "converted"):
        g = read_graph(root / source, symmetrize=symmetrize, remove_duplicates=True,
                       **({"scratch_dir": tmp_path} if source in ("npy", "converted") else {}))
        assert np.array_equal(g.indices, ref.indices), source
        assert g.edge_attr is not None and g.edge_attr.dtype == np.float32, source
        np.testing.assert_array_equal(np.asarray(g.edge_attr), ref.edge_attr, err_msg=source)


def test_an_ogb_edge_feature_file_of_another_length_is_named(inputs):
    root = inputs["root"] / "ogb"
    _write_csv_gz(root / "raw" / "edge-feat.csv.gz", inputs["attr"][:-1])
    with pytest.raises(GraphError, match=r"edge-feat\.csv\.gz: the edge feature file has 171 rows, but the dataset "
                                         r"has 172 edges"):
        read_graph(root)


def test_an_npy_dir_edge_attr_of_another_length_or_nan_is_named(inputs, tmp_path):
    d = inputs["root"] / "npy"
    np.save(d / "edge_attr.npy", np.zeros((5, 2)))
    with pytest.raises(GraphError, match=r"edge_attr\.npy: must be a real numeric \[E, D\] .* E = 172"):
        read_graph(d, scratch_dir=tmp_path)
    bad = np.zeros((inputs["src"].size, 2))
    bad[11, 1] = np.inf
    np.save(d / "edge_attr.npy", bad)
    with pytest.raises(GraphError, match=r"edge_attr\.npy: edge_attr\[11, 1\] = inf is not finite"):
        read_graph(d, scratch_dir=tmp_path)


def _graph_with_edge_features(seed: int = 0) -> Graph:
    src, dst = _edges(seed, n=40, e=300)
    rng = np.random.default_rng(seed)
    return Graph.from_edges(src, dst, 40, features=rng.standard_normal((40, 3)).astype(np.float32),
                            edge_attr=rng.standard_normal((src.size, 4)), edge_weight=rng.random(src.size),
                            symmetrize=True)


def test_each_part_stores_its_edges_rows_in_its_csr_order(tmp_path):
    g = _graph_with_edge_features()
    assignment = np.random.default_rng(5).integers(0, 3, g.num_nodes)
    write_partition(g, assignment, 3, tmp_path / "p", method="test", method_params={}, seed=0)
    meta = load_partition_meta(tmp_path / "p")
    assert (meta.minor_version, meta.edge_feature_dim) == (2, 4)
    total = 0
    for p in range(3):
        part = load_part(tmp_path / "p", p)
        assert part.edge_attr.dtype == np.float32 and part.edge_attr.shape == (part.num_local_edges, 4)
        rows = np.asarray(part.original_ids[:part.num_inner])
        want = np.concatenate([g.edge_attr[g.indptr[v]:g.indptr[v + 1]] for v in rows]) if rows.size else \
            np.zeros((0, 4), np.float32)
        np.testing.assert_array_equal(part.edge_attr, want)
        w = np.concatenate([g.edge_weight[g.indptr[v]:g.indptr[v + 1]] for v in rows])
        np.testing.assert_array_equal(part.edge_weight, w)   # the same order as the weights
        total += part.num_local_edges
    assert total == g.num_edges and verify_partition(tmp_path / "p") == []


def _rewrite_meta(folder: Path, change) -> None:
    meta = json.loads((folder / "partition.json").read_text())
    change(meta)
    (folder / "partition.json").write_text(json.dumps(meta))


def test_older_folders_read_and_newer_ones_are_refused(tmp_path):
    g = _graph_with_edge_features()
    plain = Graph(indptr=g.indptr, indices=g.indices, x=g.x, symmetric=True)
    a = np.arange(g.num_nodes) % 2
    write_partition(plain, a, 2, tmp_path / "old", method="test", method_params={}, seed=0)
    _rewrite_meta(tmp_path / "old", lambda m: [m.pop("minor_version"), m.pop("edge_feature_dim")])  # as 1.0 wrote it
    meta = load_partition_meta(tmp_path / "old")
    assert (meta.minor_version, meta.edge_feature_dim) == (0, 0)
    assert load_part(tmp_path / "old", 1).edge_attr is None and verify_partition(tmp_path / "old") == []

    write_partition(g, a, 2, tmp_path / "new", method="test", method_params={}, seed=0)
    newer = READ_MINOR_VERSION + 1   # the reader reads up to its own minor version (1.4: typed edge splits)
    _rewrite_meta(tmp_path / "new", lambda m: m.update(minor_version=newer))
    with pytest.raises(PartitionFormatError,
                       match=rf"format version 1\.{newer} is newer than this reader's 1\.{READ_MINOR_VERSION}.*upgrade"):
        load_partition_meta(tmp_path / "new")
    _rewrite_meta(tmp_path / "new", lambda m: m.update(minor_version=0))
    with pytest.raises(PartitionFormatError, match=r"edge_feature_dim = 4 needs minor_version >= 1"):
        load_partition_meta(tmp_path / "new")
    _rewrite_meta(tmp_path / "new", lambda m: m.update(minor_version=1, edge_feature_dim=0))
    with pytest.raises(PartitionFormatError, match=r"files has 'edge_attr\.npy' but .*edge_feature_dim say it should not"):
        load_partition_meta(tmp_path / "new")
    _rewrite_meta(tmp_path / "new", lambda m: m.update(edge_feature_dim=3))
    with pytest.raises(PartitionFormatError, match=r"edge_attr\.npy: partition.json entry is float32\[\d+, 4\] but "
                                                   r"format v1 requires float32\[\d+, 3\]"):
        load_part(tmp_path / "new", 0)


def test_sbm_edges_has_symmetric_edge_features_that_carry_the_classes():
    info = dataset_info("sbm-edges")
    g = load_dataset("sbm-edges")
    assert info.edge_feature_dim == 4 and g.edge_attr.shape == (g.num_edges, 4)
    tiny = load_dataset("sbm-tiny")
    assert np.array_equal(g.indices, tiny.indices) and np.array_equal(g.x, tiny.x)
    src, dst = g.edges()
    same = g.y[src] == g.y[dst]
    assert 0.9 < g.edge_attr[same, 0].mean() - g.edge_attr[~same, 0].mean() < 1.1   # the planted flag
    assert abs(g.edge_attr[same, 1].mean() - g.edge_attr[~same, 1].mean()) < 0.05  # a distractor
    import scipy.sparse as sp

    for j in range(4):  # u -> v and v -> u carry the same row
        a = sp.csr_matrix((g.edge_attr[:, j], g.indices, g.indptr), shape=(g.num_nodes,) * 2)
        assert abs(a - a.T).max() == 0, j
    again = load_dataset("sbm-edges")
    assert again.edge_attr.tobytes() == g.edge_attr.tobytes()
    assert load_dataset("sbm-edges", seed=1).edge_attr[:, 1].tobytes() != g.edge_attr[:, 1].tobytes()
