"""The graph fingerprint (``partition.json``'s ``graph_fingerprint``): the same graph cut by
another method into another number of parts has the same one; one changed edge, edge weight,
feature, label, mask or link pair gives another. Torch-free: it runs in a subprocess that asserts
torch was never imported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from partitioners import Graph, partition_graph
from partitioners.errors import PartitionFormatError
from partitioners.format import load_partition_meta, verify_partition
from partitioners.format.graph_digest import GraphDigest, row_words

def arrays() -> dict[str, np.ndarray]:
    """A random weighted graph's arrays: edges, weights, features, labels, a train mask."""
    rng = np.random.default_rng(0)
    n = 80
    return {"src": rng.integers(0, n, 400), "dst": rng.integers(0, n, 400),
            "edge_weight": rng.random(400).astype(np.float32),
            "features": rng.standard_normal((n, 4)).astype(np.float32), "labels": rng.integers(0, 3, n),
            "train_mask": rng.random(n) < 0.5}


def graph(a: dict[str, np.ndarray]) -> Graph:
    a = dict(a)
    return Graph.from_edges(a.pop("src"), a.pop("dst"), len(a["labels"]), num_classes=3, **a)


def changed(name: str) -> dict[str, np.ndarray]:
    """:func:`arrays` with one value of ``name`` changed."""
    a = arrays()
    arr = a[name]
    arr[5] = ~arr[5] if arr.dtype == bool else (arr[5] + 1) % 3 if name in ("src", "dst", "labels") \
        else arr[5] * 0.5 + 0.25
    return a


def fingerprint(g: Graph, out: Path, parts: int, method: str) -> str:
    partition_graph(g, parts, method, out, seed=1)
    fp = load_partition_meta(out).graph_fingerprint
    assert fp is not None and len(fp) == 64
    assert verify_partition(out) == []   # --verify recomputes it from the parts
    return fp


def test_same_graph_other_cut_same_fingerprint(tmp_path):
    g = graph(arrays())
    a = fingerprint(g, tmp_path / "metis2", 2, "metis")
    b = fingerprint(g, tmp_path / "random3", 3, "random")
    assert a == b
    fps = {a}
    for name in ("src", "dst", "edge_weight", "features", "labels", "train_mask"):
        fps.add(fingerprint(graph(changed(name)), tmp_path / name, 2, "metis"))
    assert len(fps) == 7, "a changed edge, weight, feature, label or mask must change the fingerprint"


def test_digest_is_order_free_and_counts_duplicates():
    rng = np.random.default_rng(3)
    dst, src, w = rng.integers(0, 50, 30), rng.integers(0, 50, 30), rng.random(30).astype(np.float32)
    whole, split = GraphDigest(), GraphDigest()
    whole.add_edges(dst, src, w)
    order = rng.permutation(30)
    split.add_edges(dst[order[:11]], src[order[:11]], w[order[:11]])
    split.add_edges(dst[order[11:]], src[order[11:]], w[order[11:]])
    assert whole.hexdigest({}) == split.hexdigest({})
    twice = GraphDigest()
    twice.add_edges(dst, src, w)
    twice.add_edges(dst[:1], src[:1], w[:1])   # a duplicate edge is another graph
    assert twice.hexdigest({}) != whole.hexdigest({})
    x = rng.standard_normal((4, 3)).astype(np.float32)
    assert (row_words(x[:, ::-1]) != row_words(x)).all()   # the columns' order counts


def test_link_pairs_count():
    pairs = GraphDigest(), GraphDigest()
    pairs[0].add_pairs("val", np.array([[1, 2], [3, 4]]))
    pairs[1].add_pairs("val", np.array([[2, 1], [3, 4]]))
    assert pairs[0].hexdigest({}) != pairs[1].hexdigest({})


def test_bad_fingerprint_is_one_line_naming_the_field(tmp_path):
    out = tmp_path / "p"
    fp = fingerprint(graph(arrays()), out, 2, "random")
    raw = json.loads((out / "partition.json").read_text())
    raw["graph_fingerprint"] = "0" * 64
    (out / "partition.json").write_text(json.dumps(raw))
    problems = verify_partition(out)
    assert problems == [f"{out / 'partition.json'}: field graph_fingerprint = {'0' * 16}... is not the digest of "
                        f"the parts' data ({fp[:16]}...): the data or the field was modified; re-partition the graph"]
    raw["graph_fingerprint"] = "xyz"
    (out / "partition.json").write_text(json.dumps(raw))
    with pytest.raises(PartitionFormatError, match=r"partition.json.*field graph_fingerprint = 'xyz': expected 64 "
                                                   r"lowercase hex digits .* re-partition the graph"):
        load_partition_meta(out)
    del raw["graph_fingerprint"]     # a folder written before the field existed reads as before
    (out / "partition.json").write_text(json.dumps(raw))
    assert load_partition_meta(out).graph_fingerprint is None


def test_torch_free(tmp_path):
    code = ("import sys, numpy as np; from partitioners import Graph, partition_graph\n"
            "g = Graph.from_edges(np.array([0, 1, 2]), np.array([1, 2, 0]), 3, features=np.eye(3, dtype='float32'))\n"
            "partition_graph(g, 2, 'random', sys.argv[1])\n"
            "assert 'torch' not in sys.modules, 'torch was imported'")
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "p")], check=True, timeout=120)
