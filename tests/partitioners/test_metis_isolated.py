"""METIS and isolated nodes: nodes with no edge to or from another node stay out of METIS (it
gets the renumbered subgraph of the others) and fill the parts by balance afterwards."""

from __future__ import annotations

import logging
import time

import numpy as np
import pytest

from partitioners import Graph
from partitioners.api import warn_sparse_ids
from partitioners.methods import assign_parts
from partitioners.methods._common import balance_bounds, vertex_weights
from partitioners.methods.metis import (_import_pymetis, combined_weights, induced_subgraph,
                                        metis_assign, place_isolated, symmetric_adjacency)
from partitioners.quality import partition_quality


def ring(n: int, chords: int = 0, seed: int = 0) -> Graph:
    rng = np.random.default_rng(seed)
    src = np.concatenate([np.arange(n), rng.integers(0, n, chords)])
    dst = np.concatenate([(np.arange(n) + 1) % n, rng.integers(0, n, chords)])
    return Graph.from_edges(src, dst, n, symmetrize=True, remove_self_loops=True,
                            remove_duplicates=True, train_mask=np.arange(n) % 3 == 0)


def raw_metis(graph: Graph, num_parts: int, seed: int, balance=("nodes",)) -> np.ndarray:
    """METIS on the whole graph, as metis_assign called it before isolated nodes were set aside."""
    pymetis = _import_pymetis()
    xadj, adjncy = symmetric_adjacency(graph)
    names, W_CN = vertex_weights(graph, balance)
    vweights = None if names == ("nodes",) else combined_weights(W_CN)
    result = pymetis.part_graph(num_parts, pymetis.CSRAdjacency(xadj, adjncy), vweights=vweights,
                                options=pymetis.Options(seed=seed, ufactor=30))
    return np.asarray(result.vertex_part, dtype=np.int32)


@pytest.mark.parametrize("balance", [("nodes",), ("edges",)])
@pytest.mark.parametrize("seed", [0, 3])
def test_without_isolated_nodes_metis_gets_the_whole_graph(seed, balance):
    g = ring(300, chords=200, seed=seed)
    assert np.all(np.diff(symmetric_adjacency(g)[0]) > 0)
    np.testing.assert_array_equal(metis_assign(g, 4, seed=seed, balance=balance),
                                  raw_metis(g, 4, seed, balance))


def test_induced_subgraph_renumbers_the_kept_nodes():
    xadj = np.array([0, 1, 1, 3, 3, 4])  # node 1 and node 3 are isolated
    adjncy = np.array([2, 0, 4, 2])
    keep = np.diff(xadj) > 0
    sub_xadj, sub_adj = induced_subgraph(xadj, adjncy, keep)
    assert sub_xadj.tolist() == [0, 1, 3, 4] and sub_adj.tolist() == [1, 0, 2, 1]


@pytest.mark.parametrize("balance", [("nodes",), ("nodes", "train"), ("nodes", "edges", "train")])
@pytest.mark.parametrize("num_parts", [2, 3, 8])
def test_isolated_nodes_fill_the_parts_within_the_balance_bound(balance, num_parts):
    n = 900
    src = np.arange(300)
    g = Graph.from_edges(src, (src + 1) % 300, n, symmetrize=True,  # ids 300.. have no edge
                         train_mask=np.arange(n) % 4 == 0)
    a = assign_parts(g, num_parts, "metis", seed=1, balance=balance)
    names, W_CN = vertex_weights(g, balance)
    bound = balance_bounds(W_CN, num_parts, 0.03)
    load = np.stack([np.bincount(a, weights=w, minlength=num_parts) for w in W_CN])
    assert np.all(load <= bound[:, None] + 1e-9), (load, bound)
    q = partition_quality(g, a, num_parts)
    assert q["edge_cut"] <= 4 * num_parts  # the ring is cut in a few places only


def test_place_isolated_evens_out_loads_in_id_order():
    assignment = np.array([0, 0, 0, 1, -1, -1, -1, -1, -1], dtype=np.int32)
    isolated = assignment < 0
    place_isolated(assignment, isolated, np.ones((1, 9), dtype=np.int64), 3)
    assert np.bincount(assignment, minlength=3).tolist() == [3, 3, 3]
    assert assignment[4:].tolist() == [2, 2, 2, 1, 1]  # the emptiest part first, ids in order


def test_place_isolated_weightless_nodes_even_out_node_counts():
    w = np.array([[5, 5, 0, 0, 0, 0]], dtype=np.int64)  # only edges balanced: isolated weigh 0
    assignment = np.array([0, 1, -1, -1, -1, -1], dtype=np.int32)
    place_isolated(assignment, assignment < 0, w, 2)
    assert np.bincount(assignment, minlength=2).tolist() == [3, 3]


def test_sparse_ids_partition_fast_and_balanced(tmp_path, caplog):
    """4 edges whose ids reach 2,000,000 (METIS used to run for over 10 minutes on it, then fail
    with pymetis' "unknown exception"): fast, balanced, and a warning about sparse ids."""
    from partitioners import partition_graph

    g = Graph.from_edges([0, 1, 5, 7], [1, 2, 2_000_000, 1_999_999])
    t = time.perf_counter()
    with caplog.at_level(logging.INFO, logger="partitioners"):
        report = partition_graph(g, 4, "metis", tmp_path / "o", seed=0)
    assert time.perf_counter() - t < 60
    assert report["node_balance"] <= 1.0 + 1e-5 and report["edge_cut"] <= 2
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and warnings[0].startswith(
        "1999994 of the 2000001 node ids 0..2000000 (100%) have no edge: the input's ids may be sparse")
    assert any("1999994 isolated nodes placed by balance, outside METIS" in r.getMessage()
               for r in caplog.records)


def test_graph_without_edges(tmp_path):
    g = Graph.from_edges([], [], 10)
    a = metis_assign(g, 3, seed=0)
    assert sorted(np.bincount(a, minlength=3).tolist()) == [3, 3, 4]


def test_no_warning_when_most_ids_have_edges(caplog):
    g = Graph.from_edges([0, 1, 2], [1, 2, 0], 5)  # 2 of 5 isolated
    with caplog.at_level(logging.WARNING, logger="partitioners"):
        assert warn_sparse_ids(g) == 2
    assert not caplog.records
