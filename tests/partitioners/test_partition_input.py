"""A partition folder (or a family) as the input of ``gnn-dist partition``: its graph read back by
original ids (edges, weights, edge features, node data, node names, an edge split's pairs) is the
graph it was cut from, so a re-cut into another number of parts with another method has the same
graph fingerprint, passes ``inspect --verify`` and records where it came from; the flags that would
change the graph or apply a normalisation twice are refused in one line (exit code 2). A typed
folder's re-cut: ``test_typed_partition_input.py``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gnn_dist_cli.command import main
from partitioners import Graph, partition_graph
from partitioners.format import load_partition_meta, verify_partition
from partitioners.io import infer_format
from partitioners.io.edge_split import with_edge_split
from partitioners.io.partition_input import read_partition_input


def _graph() -> tuple[Graph, dict]:
    """A random directed graph with everything a folder can hold (duplicates and self-loops
    included), with an edge split."""
    rng = np.random.default_rng(7)
    n, e = 90, 600
    src, dst = rng.integers(0, n, e), rng.integers(0, n, e)
    g = Graph.from_edges(src, dst, n, edge_weight=rng.random(e).astype(np.float32),
                         edge_attr=rng.standard_normal((e, 3)).astype(np.float32),
                         features=rng.standard_normal((n, 5)).astype(np.float16), labels=rng.integers(0, 4, n),
                         train_mask=rng.random(n) < 0.5, val_mask=rng.random(n) < 0.2, num_classes=4,
                         node_names=np.array([f"v{i * 7}" for i in range(n)]), name="rand")
    g, record = with_edge_split(g, (0.8, 0.1, 0.1), seed=3)
    return g, {"edge_split": record, "normalize_features": "row", "split": {"kind": "given"}}


def _edges(g: Graph) -> np.ndarray:
    """Every edge as a sorted table of (destination, source, weight bits, feature bits)."""
    dst = np.repeat(np.arange(g.num_nodes), np.diff(g.indptr))
    table = np.column_stack([dst, np.asarray(g.indices, dtype=np.int64), np.asarray(g.edge_weight).view(np.int32),
                             np.asarray(g.edge_attr).view(np.int32)])
    return table[np.lexsort(table.T[::-1])]


@pytest.fixture(scope="module")
def old(tmp_path_factory) -> tuple[Path, Graph]:
    g, extra = _graph()
    out = tmp_path_factory.mktemp("in") / "p2"
    partition_graph(g, 2, "metis", out, seed=1, extra_meta=extra)
    return out, g


def test_the_graph_read_back_is_the_graph_that_was_cut(old, tmp_path):
    folder, g = old
    assert infer_format(folder) == "partition"
    back, extra = read_partition_input(folder, scratch_dir=tmp_path)
    for name in ("x", "y", "train_mask", "val_mask", "node_names"):
        a, b = getattr(g, name), getattr(back, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    assert back.test_mask is None and back.num_classes == 4 and back.name == "rand"
    assert np.array_equal(back.indptr, g.indptr)
    assert np.array_equal(_edges(back), _edges(g))
    for kind, pairs in g.link_pairs.items():
        order = lambda p: p[:, np.lexsort(p[::-1])]   # noqa: E731
        assert np.array_equal(order(back.link_pairs[kind]), order(pairs)), kind
    meta = load_partition_meta(folder)
    assert extra == {"split": {"kind": "given"}, "edge_split": meta.raw["edge_split"], "normalize_features": "row",
                     "repartitioned_from": {"folder": str(folder), "num_parts": 2, "method": "metis",
                                            "graph_fingerprint": meta.graph_fingerprint}}


@pytest.mark.parametrize("method", ["ldg", "metis"])
def test_a_recut_has_the_same_graph_fingerprint(old, tmp_path, method, capsys):
    folder, _ = old
    out = tmp_path / f"p3-{method}"
    assert main(["partition", "--input", str(folder), "--parts", "3", "--method", method, "--out", str(out),
                 "--no-progress", "-q"]) == 0
    before, after = load_partition_meta(folder), load_partition_meta(out)
    assert after.num_parts == 3 and after.method == method
    assert after.graph_fingerprint == before.graph_fingerprint
    assert verify_partition(out) == []   # recomputes the fingerprint from the parts
    for key in ("edge_split", "normalize_features", "split", "preprocessing", "directed", "name"):
        assert after.raw[key] == before.raw[key], key
    assert after.raw["repartitioned_from"]["folder"] == str(folder)
    assert not list(tmp_path.glob(".gnn-dist-scratch-*")), "scratch files left behind"


def test_a_family_reads_its_largest_member(tmp_path, capsys):
    fam = tmp_path / "fam"
    assert main(["partition", "--dataset", "sbm-tiny", "--parts", "2,3", "--out", str(fam), "--no-progress", "-q"]) == 0
    out = tmp_path / "p4"
    assert main(["partition", "--input", str(fam), "--parts", "4", "--method", "random", "--out", str(out),
                 "--no-progress", "-q"]) == 0
    meta = load_partition_meta(out)
    assert meta.raw["repartitioned_from"]["folder"] == str(fam / "p3")
    assert meta.graph_fingerprint == load_partition_meta(fam / "p2").graph_fingerprint


@pytest.mark.parametrize("flags, says", [
    (["--symmetrize"], "--symmetrize: --input {} is a partition folder, re-cut with the graph"),
    (["--features", "x.npy"], "--features: --input {} is a partition folder"),
    (["--edge-split", "0.8,0.1,0.1"], "--edge-split: --input {} is a partition folder"),
    (["--normalize-features", "standard"], "--normalize-features standard: the features of {} are already "
                                           "normalised (row, partition.json normalize_features)"),
])
def test_flags_that_would_change_the_graph_are_refused(old, tmp_path, capsys, flags, says):
    folder, _ = old
    code = main(["partition", "--input", str(folder), "--parts", "3", "--out", str(tmp_path / "x"), *flags])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and says.format(folder) in err[0], err
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("kind, width", [("multilabel", 1), ("multilabel", 3), ("regression", 1), ("regression", 2)])
def test_label_matrices_keep_their_shape(tmp_path, kind, width):
    """Labels ``[N, C]`` come back as they were, a one-column matrix included (an npy-dir's
    ``[N, 1]`` would be read as ``[N]``)."""
    rng = np.random.default_rng(width)
    y = (rng.random((40, width)) < 0.5).astype(np.uint8) if kind == "multilabel" else \
        rng.standard_normal((40, width)).astype(np.float32)
    g = Graph.from_edges(rng.integers(0, 40, 150), rng.integers(0, 40, 150), 40, labels=y, label_kind=kind)
    partition_graph(g, 2, "random", tmp_path / "p2")
    back, extra = read_partition_input(tmp_path / "p2", scratch_dir=tmp_path)
    assert back.label_kind == kind and back.y.dtype == g.y.dtype and np.array_equal(back.y, g.y)
    partition_graph(back, 3, "ldg", tmp_path / "p3", extra_meta=extra)
    assert load_partition_meta(tmp_path / "p3").graph_fingerprint == load_partition_meta(tmp_path / "p2").graph_fingerprint
