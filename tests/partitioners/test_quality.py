"""partition_quality against a brute-force Python computation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from partitioners import Graph
from partitioners.format import write_partition
from partitioners.quality import halo_and_send_counts, halo_counts, partition_quality


def brute_quality(src: list[int], dst: list[int], n: int, part: list[int], num_parts: int,
                  train: list[bool] | None) -> dict:
    """The definitions of quality.py, one edge at a time."""
    halo: list[set[int]] = [set() for _ in range(num_parts)]
    cut = 0
    edges = [0] * num_parts
    for u, v in zip(src, dst):
        edges[part[v]] += 1
        if part[u] != part[v]:
            cut += 1
            halo[part[v]].add(u)
    sizes = [part.count(p) for p in range(num_parts)]
    frac = [len(halo[p]) / sizes[p] if sizes[p] else 0.0 for p in range(num_parts)]

    def bal(xs: list[int]) -> float:
        mean = sum(xs) / len(xs)
        return max(xs) / mean if mean > 0 else 1.0

    tr = 1.0
    if train is not None:
        tr = bal([sum(1 for v in range(n) if train[v] and part[v] == p) for p in range(num_parts)])
    send = [sum(1 for p in range(num_parts) for u in halo[p] if part[u] == q) for q in range(num_parts)]
    recv = [len(h) for h in halo]
    return {
        "edge_cut": cut, "comm_volume": sum(len(h) for h in halo),
        "halo_per_part": recv, "send_per_part": send, "max_send_volume": max(send),
        "mean_send_volume": sum(send) / num_parts, "max_recv_volume": max(recv),
        "mean_recv_volume": sum(recv) / num_parts, "max_halo_fraction": max(frac),
        "mean_halo_fraction": sum(frac) / num_parts, "node_balance": max(sizes) / (n / num_parts),
        "edge_balance": bal(edges), "train_balance": tr, "part_sizes": sizes,
        "empty_parts": sizes.count(0),
    }


@st.composite
def graphs_and_parts(draw: st.DrawFn) -> tuple[Graph, np.ndarray, int]:
    n = draw(st.integers(1, 25))
    m = draw(st.integers(0, 80))
    src = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m))
    dst = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m))  # loops, repeats allowed
    num_parts = draw(st.integers(1, 6))
    part = draw(st.lists(st.integers(0, num_parts - 1), min_size=n, max_size=n))  # empty parts too
    train = draw(st.none() | st.lists(st.booleans(), min_size=n, max_size=n))
    g = Graph.from_edges(np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64), n,
                         train_mask=None if train is None else np.array(train))
    return g, np.array(part, dtype=np.int32), num_parts


@given(graphs_and_parts())
@settings(max_examples=50, deadline=None)
def test_matches_brute_force(case: tuple[Graph, np.ndarray, int]) -> None:
    g, part, num_parts = case
    src, dst = g.edges()
    train = None if g.train_mask is None else g.train_mask.tolist()
    want = brute_quality(src.tolist(), dst.tolist(), g.num_nodes, part.tolist(), num_parts, train)
    got = partition_quality(g, part, num_parts)
    assert got.keys() == want.keys()
    for key, value in want.items():
        assert got[key] == pytest.approx(value), key
        assert type(got[key]) is type(value) or isinstance(value, float), key  # JSON-ready types


@given(graphs_and_parts())
@settings(max_examples=25, deadline=None)
def test_the_writers_report_equals_partition_quality(tmp_path_factory, case) -> None:
    """write_partition(quality=None) counts the cut and the halos in its own pass over the
    edges (the relabeling's): the report is partition_quality's, value for value."""
    g, part, num_parts = case
    out = tmp_path_factory.mktemp("q") / "out"
    meta = write_partition(g, part, num_parts, out, method="given", method_params={}, seed=None)
    got = {k: v for k, v in meta["quality"].items() if k not in ("time_s", "peak_rss_bytes")}
    assert got == partition_quality(g, part, num_parts)
    assert set(meta["quality"]["time_s"]) == {"quality", "write"}


@given(graphs_and_parts())
@settings(max_examples=30, deadline=None)
def test_halo_methods_agree(case: tuple[Graph, np.ndarray, int]) -> None:
    g, part, num_parts = case
    cut_d, halo_d, send_d = halo_and_send_counts(g, part, num_parts, method="dense")
    for method in ("bits", "sort"):
        cut, halo, send = halo_and_send_counts(g, part, num_parts, method=method)
        assert cut == cut_d and halo_counts(g, part, num_parts, method=method)[0] == cut
        np.testing.assert_array_equal(halo, halo_d)
        np.testing.assert_array_equal(send, send_d)


def test_bits_halo_with_many_parts() -> None:
    rng = np.random.default_rng(1)
    n, m = 500, 4000
    g = Graph.from_edges(rng.integers(0, n, m), rng.integers(0, n, m), n)
    for num_parts in (9, 17, 40, 64):
        part = rng.integers(0, num_parts, n)
        dense = halo_counts(g, part, num_parts, method="dense")
        bits = halo_counts(g, part, num_parts, method="bits")
        assert dense[0] == bits[0]
        np.testing.assert_array_equal(dense[1], bits[1])
    with pytest.raises(ValueError, match=r"halo method 'bits' is not one of dense, bits \(P <= 64\), sort"):
        halo_counts(g, rng.integers(0, 65, n), 65, method="bits")


def test_hand_computed() -> None:
    # 0 -> 1, 1 -> 0, 2 -> 1, 2 -> 1 (repeat), 3 -> 3 (loop), 0 -> 3; parts {0, 1} | {2, 3}
    g = Graph.from_edges([0, 1, 2, 2, 3, 0], [1, 0, 1, 1, 3, 3], 4,
                         train_mask=[True, True, True, False])
    q = partition_quality(g, np.array([0, 0, 1, 1]), 2)
    assert q["edge_cut"] == 3                  # 2->1 twice, 0->3
    assert q["halo_per_part"] == [1, 1]        # part 0 reads node 2; part 1 reads node 0
    assert q["comm_volume"] == 2
    assert q["max_halo_fraction"] == 0.5 and q["mean_halo_fraction"] == 0.5
    assert q["node_balance"] == 1.0
    assert q["edge_balance"] == pytest.approx(4 / 3)  # in-edges: part 0 has 4, part 1 has 2
    assert q["train_balance"] == pytest.approx(2 / 1.5)
    assert q["part_sizes"] == [2, 2] and q["empty_parts"] == 0


def test_empty_parts_and_no_train_mask() -> None:
    g = Graph.from_edges([0, 1], [1, 2], 3)
    q = partition_quality(g, np.array([0, 0, 0]), 3)
    assert q["part_sizes"] == [3, 0, 0] and q["empty_parts"] == 2
    assert q["node_balance"] == 3.0 and q["train_balance"] == 1.0
    assert q["max_halo_fraction"] == 0.0 and q["comm_volume"] == 0
    g.train_mask = np.zeros(3, dtype=bool)
    assert partition_quality(g, np.array([0, 1, 2]), 3)["train_balance"] == 1.0


def test_chunked_large_graph_matches_unchunked(monkeypatch: pytest.MonkeyPatch) -> None:
    import partitioners.quality as quality

    rng = np.random.default_rng(0)
    n, m = 3000, 30000
    g = Graph.from_edges(rng.integers(0, n, m), rng.integers(0, n, m), n)
    part = rng.integers(0, 7, n)
    whole = partition_quality(g, part, 7)
    monkeypatch.setattr(quality, "_CHUNK_EDGES", 1000)
    assert partition_quality(g, part, 7) == whole
    monkeypatch.setattr(quality, "DENSE_MARK_BYTES", 4 * n)  # too small for [N, P]: bit words
    assert partition_quality(g, part, 7) == whole
    monkeypatch.setattr(quality, "DENSE_MARK_BYTES", 10)     # too small for anything: sort
    assert partition_quality(g, part, 7) == whole


def test_errors() -> None:
    g = Graph.from_edges([0, 1], [1, 2], 3)
    with pytest.raises(ValueError, match=r"assignment has shape \(2,\) but the graph has 3 nodes"):
        partition_quality(g, [0, 1], 2)
    with pytest.raises(ValueError, match=r"assignment\[2\] = 5 is out of range: part ids must be in \[0, num_parts = 2\)"):
        partition_quality(g, [0, 1, 5], 2)
    with pytest.raises(ValueError, match=r"assignment\[0\] = -1 is out of range"):
        partition_quality(g, [-1, 1, 1], 2)
    with pytest.raises(ValueError, match=r"assignment must hold integer part ids, got dtype float64"):
        partition_quality(g, [0.0, 1.0, 1.0], 2)
    with pytest.raises(ValueError, match=r"num_parts must be a positive integer, got 0"):
        partition_quality(g, [0, 0, 0], 0)
