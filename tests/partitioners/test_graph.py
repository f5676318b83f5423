"""Graph container: CSR construction, cleaning options, validation errors, adapters, torch-freedom."""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import textwrap
from unittest import mock
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from partitioners import Graph, GraphError
from partitioners import graph_csr as csr_module


def edge_list(g: Graph) -> list[tuple[int, int]]:
    """(src, dst) of every stored edge, in CSR order."""
    src, dst = g.edges()
    return list(zip(src.tolist(), dst.tolist()))


# ----------------------------------------------------------------------------- from_edges
def test_every_input_edge_is_stored_once_as_given():
    # a self-loop (2->2), a duplicate (0->1 twice), a one-way edge (3->0), isolated node 4
    src = [0, 2, 0, 3, 1]
    dst = [1, 2, 1, 0, 2]
    g = Graph.from_edges(src, dst, num_nodes=5)
    assert g.num_nodes == 5 and g.num_edges == 5
    # CSR by destination: row v lists the sources of v's in-edges, ascending
    assert g.indptr.tolist() == [0, 1, 3, 5, 5, 5]
    assert g.indices.tolist() == [3, 0, 0, 1, 2]
    assert sorted(edge_list(g)) == sorted(zip(src, dst))
    assert g.preprocessing == {}
    assert not g.symmetric and not g.is_symmetric()
    assert g.in_degree().tolist() == [1, 2, 2, 0, 0]
    assert g.out_degree().tolist() == [2, 1, 1, 1, 0]
    assert g.indices.dtype == np.int32 and g.indptr.dtype == np.int64


def test_num_nodes_defaults_to_max_id_plus_one_or_node_data_rows():
    assert Graph.from_edges([0, 3], [1, 2]).num_nodes == 4
    assert Graph.from_edges([0], [1], features=np.zeros((6, 2))).num_nodes == 6
    assert Graph.from_edges([0], [1], train_mask=np.zeros(3, bool)).num_nodes == 3


def test_edge_weights_follow_their_edges_and_duplicates_keep_input_order():
    src = [2, 0, 1, 0, 2]
    dst = [0, 0, 0, 0, 1]
    w = [0.5, 1.5, 2.5, 3.5, 4.5]
    g = Graph.from_edges(src, dst, edge_weight=w)
    assert g.indices.tolist() == [0, 0, 1, 2, 2]
    # the two 0->0 edges keep their input order (1.5 before 3.5)
    assert g.edge_weight.tolist() == [1.5, 3.5, 2.5, 0.5, 4.5]
    assert g.edge_weight.dtype == np.float32


def test_symmetrize_adds_each_missing_reverse_once():
    # 0->1 twice (reverse missing), 1->2 and 2->1 (already symmetric), self-loop 3->3
    src = [0, 0, 1, 2, 3]
    dst = [1, 1, 2, 1, 3]
    w = [1.0, 2.0, 3.0, 4.0, 5.0]
    g = Graph.from_edges(src, dst, edge_weight=w, symmetrize=True)
    assert g.preprocessing == {"symmetrize_added": 1}
    assert g.symmetric and g.is_symmetric()
    assert sorted(edge_list(g)) == sorted([(0, 1), (0, 1), (1, 2), (2, 1), (3, 3), (1, 0)])
    weights = collections.defaultdict(list)
    for e, wt in zip(edge_list(g), g.edge_weight.tolist()):
        weights[e].append(wt)
    assert weights[(1, 0)] == [1.0]  # the added reverse takes its first forward edge's weight
    assert weights[(0, 1)] == [1.0, 2.0]


def test_remove_self_loops_and_duplicates_are_counted():
    src = [0, 0, 1, 1, 2, 0]
    dst = [1, 1, 1, 1, 0, 1]
    w = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    g = Graph.from_edges(src, dst, edge_weight=w, remove_self_loops=True)
    assert g.preprocessing == {"self_loops_removed": 2}
    assert sorted(edge_list(g)) == [(0, 1), (0, 1), (0, 1), (2, 0)]
    g = Graph.from_edges(src, dst, edge_weight=w, remove_duplicates=True)
    assert g.preprocessing == {"duplicates_removed": 3}
    assert edge_list(g) == [(2, 0), (0, 1), (1, 1)]
    assert g.edge_weight.tolist() == [5.0, 1.0, 3.0]  # the first of each repeated pair
    g = Graph.from_edges(src, dst, remove_self_loops=True, remove_duplicates=True, symmetrize=True)
    assert g.preprocessing == {"self_loops_removed": 2, "duplicates_removed": 2, "symmetrize_added": 2}
    assert sorted(edge_list(g)) == [(0, 1), (0, 2), (1, 0), (2, 0)]


def test_node_data_is_validated_and_converted():
    x = np.arange(12, dtype=np.float64).reshape(4, 3)
    g = Graph.from_edges([0, 1], [1, 2], num_nodes=4, features=x, labels=[0, 2, 1, 2],
                         train_mask=[1, 0, 0, 1], val_mask=np.array([0, 1, 0, 0], bool))
    assert g.x.dtype == np.float32 and np.array_equal(g.x, x)
    assert g.y.dtype == np.int64 and g.num_classes == 3
    assert g.train_mask.dtype == bool and g.train_mask.tolist() == [True, False, False, True]
    assert g.test_mask is None
    assert repr(g) == "Graph(num_nodes=4, num_edges=2, x=float32[4, 3], num_classes=3)"
    ml = Graph.from_edges([0], [1], labels=np.array([[0, 1, 1], [1, 0, 0]]))
    assert ml.multilabel and ml.num_classes == 3 and ml.y.dtype == np.uint8
    half = Graph.from_edges([0], [1], features=np.ones((2, 2), np.float16))
    assert half.x.dtype == np.float16


def test_narrow_integer_ids_are_accepted():
    g = Graph.from_edges(np.array([3, 0], np.int32), np.array([0, 1], np.uint8))
    assert edge_list(g) == [(3, 0), (0, 1)]
    g = Graph.from_edges(np.array([1.0, 0.0]), np.array([0, 1], np.uint64))
    assert edge_list(g) == [(1, 0), (0, 1)]
    g = Graph.from_edges(np.array([], np.float32), np.array([], np.uint64), 3)
    assert g.num_nodes == 3 and g.num_edges == 0 and g.indptr.tolist() == [0, 0, 0, 0]


@pytest.mark.parametrize("kwargs, match", [
    (dict(src=[0, -3, -1], dst=[1, 1, 1]), r"src\[1\] = -3 is negative"),
    (dict(src=[0, 1, 2], dst=[1, 7, 5], num_nodes=4), r"dst\[1\] = 7 is out of range: num_nodes is 4"),
    (dict(src=[0, 1], dst=[1]), r"src has 2 entries but dst has 1"),
    (dict(src=[0.5], dst=[1]), r"src must hold integer node ids, got dtype float64"),
    (dict(src=[[0, 1]], dst=[[1, 0]]), r"src must be a 1-D array of node ids, got shape \(1, 2\)"),
    (dict(src=np.array([2**63], np.uint64), dst=[0]), r"src\[0\] = 9223372036854775808 does not fit in int64"),
    (dict(src=[], dst=[]), r"the graph is empty: num_nodes is 0"),
    (dict(src=[], dst=[], num_nodes=0), r"the graph is empty"),
    (dict(src=[0], dst=[1], edge_weight=[1.0, 2.0]), r"edge_weight has 2 entries but there are 1 edges"),
    (dict(src=[0, 1], dst=[1, 0], edge_weight=[1.0, np.inf]), r"edge_weight\[1\] = inf is not finite"),
    (dict(src=[0], dst=[1], features=[[0.0, 1.0], [2.0, np.nan]]), r"features\[1, 1\] = nan is not finite"),
    (dict(src=[0], dst=[1], features=[[np.inf], [0.0]]), r"features\[0, 0\] = inf is not finite"),
    (dict(src=[0], dst=[1], num_nodes=2, features=np.zeros((3, 2))), r"features has 3 rows but the graph has 2 nodes"),
    (dict(src=[0], dst=[1], features=np.array([["a"], ["b"]])), r"features must be numeric"),
    (dict(src=[0], dst=[1], num_nodes=2, labels=[0, 1, 1]), r"labels has 3 rows but the graph has 2 nodes"),
    (dict(src=[0], dst=[1], labels=[0, 5], num_classes=3), r"labels\[1\] = 5 is out of range: num_classes is 3"),
    (dict(src=[0], dst=[1], labels=[0, -1]), r"labels\[1\] = -1 is negative"),
    (dict(src=[0], dst=[1], labels=["a", "b"]), r"labels must be integer class ids, got dtype <U1"),
    (dict(src=[0], dst=[1], labels=[0.5, np.nan]), r"labels\[1\] = nan is not finite .*regression targets must be finite"),
    (dict(src=[0], dst=[1], labels=[[0, 2], [1, 0]]), r"multi-label labels\[0, 1\] = 2"),
    (dict(src=[0], dst=[1], num_nodes=2, train_mask=[True, False, True]), r"train_mask has shape \(3,\) but the graph has 2 nodes"),
    (dict(src=[0], dst=[1], test_mask=[0, 2]), r"test_mask\[1\] = 2; a mask holds only 0/1"),
])
def test_from_edges_errors_name_the_field_and_value(kwargs, match):
    src, dst = kwargs.pop("src"), kwargs.pop("dst")
    with pytest.raises(GraphError, match=match):
        Graph.from_edges(src, dst, **kwargs)


def test_constructor_validates_csr():
    with pytest.raises(GraphError, match=r"indices has 1 entries but indptr\[-1\] = 2"):
        Graph(indptr=[0, 1, 2], indices=[0])
    with pytest.raises(GraphError, match="indptr must start at 0 and be non-decreasing"):
        Graph(indptr=[0, 2, 1], indices=[0])
    with pytest.raises(GraphError, match=r"indices\[0\] = 3 is out of range"):
        Graph(indptr=[0, 1, 1], indices=[3])


def test_mask_from_index():
    assert Graph.mask_from_index([0, 2], 4).tolist() == [True, False, True, False]
    with pytest.raises(GraphError, match=r"train\[1\] = 4 is out of range"):
        Graph.mask_from_index([0, 4], 4, name="train")


def test_is_symmetric_leaves_the_graph_unchanged():
    # duplicates and weights: the check must not sum duplicates or overwrite weights in place
    g = Graph.from_edges([0, 0, 1, 2, 1], [1, 1, 0, 1, 2], edge_weight=[1, 2, 3, 4, 5])
    before = (g.indptr.copy(), g.indices.copy(), g.edge_weight.copy())
    assert g.is_symmetric()  # each edge has its reverse; multiplicity does not matter
    assert np.array_equal(g.indptr, before[0]) and np.array_equal(g.indices, before[1])
    assert np.array_equal(g.edge_weight, before[2])


def test_to_scipy_and_iter_in_adjacency():
    g = Graph.from_edges([0, 2, 1], [1, 1, 2], edge_weight=[1.0, 2.0, 3.0])
    a = g.to_scipy()
    assert a[1, 0] == 1.0 and a[1, 2] == 2.0 and a[2, 1] == 3.0 and a.nnz == 3  # A[dst, src]
    chunks = list(g.iter_in_adjacency(chunk_nodes=2))
    assert [c[0] for c in chunks] == [0, 2]
    assert chunks[0][1].tolist() == [0, 0, 2] and chunks[0][2].tolist() == [0, 2]
    assert chunks[1][1].tolist() == [0, 1] and chunks[1][2].tolist() == [1]


# ----------------------------------------------------------------------------- adapters
def test_from_scipy_entry_u_v_is_edge_u_to_v():
    adj = sp.coo_matrix(([5.0, 6.0, 0.0], ([0, 2, 1], [1, 0, 1])), shape=(3, 3))
    g = Graph.from_scipy(adj, use_weights=True)
    assert sorted(zip(edge_list(g), g.edge_weight.tolist())) == [((0, 1), 5.0), ((1, 1), 0.0), ((2, 0), 6.0)]
    assert Graph.from_scipy(adj.tocsr()).edge_weight is None
    with pytest.raises(GraphError, match=r"adjacency matrix must be square, got shape \(2, 3\)"):
        Graph.from_scipy(sp.csr_matrix((2, 3)))
    with pytest.raises(GraphError, match="from_scipy expects a scipy sparse matrix, got ndarray"):
        Graph.from_scipy(np.eye(2))


def test_from_networkx_directed_and_undirected():
    nx = pytest.importorskip("networkx")
    d = nx.DiGraph()
    d.add_nodes_from(["a", "b", "c"])
    d.add_edge("a", "b", w=2.0)
    d.add_edge("c", "a", w=3.0)
    g = Graph.from_networkx(d, weight_key="w")
    assert g.num_nodes == 3
    assert sorted(zip(edge_list(g), g.edge_weight.tolist())) == [((0, 1), 2.0), ((2, 0), 3.0)]

    u = nx.Graph()
    for v in range(3):
        u.add_node(v, x=[float(v), 1.0], y=v % 2)
    u.add_edges_from([(0, 1), (1, 2), (2, 2)])
    g = Graph.from_networkx(u)
    assert sorted(edge_list(g)) == [(0, 1), (1, 0), (1, 2), (2, 1), (2, 2)]  # self-loop once
    assert g.is_symmetric()
    assert g.x.tolist() == [[0.0, 1.0], [1.0, 1.0], [2.0, 1.0]]
    assert g.y.tolist() == [0, 1, 0]
    with pytest.raises(GraphError, match="the graph is empty"):
        Graph.from_networkx(nx.Graph())


def test_from_pyg():
    torch = pytest.importorskip("torch")
    pyg_data = pytest.importorskip("torch_geometric.data")
    ei = torch.tensor([[0, 1, 2, 2], [1, 2, 0, 0]])
    data = pyg_data.Data(x=torch.arange(8, dtype=torch.float32).view(4, 2), edge_index=ei,
                         y=torch.tensor([[1], [0], [1], [2]]), edge_weight=torch.tensor([1.0, 2.0, 3.0, 4.0]),
                         train_mask=torch.tensor([True, False, True, False]), num_nodes=4)
    g = Graph.from_pyg(data)
    expected = Graph.from_edges(ei[0].numpy(), ei[1].numpy(), 4, edge_weight=[1.0, 2.0, 3.0, 4.0])
    assert np.array_equal(g.indptr, expected.indptr) and np.array_equal(g.indices, expected.indices)
    assert np.array_equal(g.edge_weight, expected.edge_weight)
    assert np.array_equal(g.x, data.x.numpy())
    assert g.y.tolist() == [1, 0, 1, 2] and g.num_classes == 3
    assert g.train_mask.tolist() == [True, False, True, False] and g.val_mask is None
    with pytest.raises(GraphError, match="the PyG Data object has no edge_index"):
        Graph.from_pyg(pyg_data.Data(x=data.x))


def test_from_dgl():
    dgl = pytest.importorskip("dgl")
    torch = pytest.importorskip("torch")
    dg = dgl.graph((torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0])), num_nodes=4)
    dg.ndata["feat"] = torch.ones(4, 3)
    dg.ndata["label"] = torch.tensor([0, 1, 0, 1])
    g = Graph.from_dgl(dg)
    assert sorted(edge_list(g)) == [(0, 1), (1, 2), (2, 0)]
    assert g.num_nodes == 4 and g.x.shape == (4, 3) and g.y.tolist() == [0, 1, 0, 1]


# ----------------------------------------------------------------------------- properties
@st.composite
def random_edges(draw):
    n = draw(st.integers(1, 12))
    e = draw(st.integers(0, 40))
    ids = st.lists(st.integers(0, n - 1), min_size=e, max_size=e)
    weights = st.lists(st.floats(-100, 100, allow_nan=False, width=32), min_size=e, max_size=e)
    return n, draw(ids), draw(ids), draw(weights)


@settings(max_examples=50, deadline=None)
@given(random_edges())
def test_csr_reproduces_the_multiset_of_input_edges(case):
    n, src, dst, w = case
    g = Graph.from_edges(np.array(src, np.int64), np.array(dst, np.int64), n, edge_weight=np.array(w, np.float32))
    assert g.num_nodes == n
    stored = list(zip(edge_list(g), g.edge_weight.tolist()))
    assert collections.Counter(stored) == collections.Counter(zip(zip(src, dst), np.float32(w).tolist()))
    # CSR order: by destination, then source; duplicates keep their input order
    order = sorted(range(len(src)), key=lambda i: (dst[i], src[i]))
    assert stored == [((src[i], dst[i]), float(np.float32(w[i]))) for i in order]
    assert g.indptr.tolist() == [0] + np.cumsum(np.bincount(dst, minlength=n)).tolist()


@settings(max_examples=50, deadline=None)
@given(random_edges())
def test_cleaning_options_match_a_set_model(case):
    n, src, dst, _ = case
    g = Graph.from_edges(src, dst, n, symmetrize=True, remove_self_loops=True, remove_duplicates=True)
    kept = {(u, v) for u, v in zip(src, dst) if u != v}
    want = kept | {(v, u) for u, v in kept}
    assert edge_list(g) == sorted(want, key=lambda e: (e[1], e[0]))
    assert g.preprocessing["symmetrize_added"] == len(want) - len(kept)
    assert g.preprocessing["self_loops_removed"] == sum(u == v for u, v in zip(src, dst))
    assert g.is_symmetric()


def build_model(n, src, dst, w, *, symmetrize, remove_self_loops, remove_duplicates):
    """The documented semantics of from_edges, edge by edge: (indptr, [(src, dst, w)], report)."""
    edges = list(zip(src, dst, w))
    report = {}
    if remove_self_loops:
        report["self_loops_removed"] = sum(s == d for s, d, _ in edges)
        edges = [e for e in edges if e[0] != e[1]]
    if remove_duplicates:
        seen, kept = set(), []
        for e in edges:
            if e[:2] not in seen:
                seen.add(e[:2])
                kept.append(e)
        report["duplicates_removed"] = len(edges) - len(kept)
        edges = kept
    if symmetrize:
        present, added = {e[:2] for e in edges}, {}
        for s, d, wt in edges:  # the first forward edge gives the added reverse its weight
            if (d, s) not in present and (d, s) not in added:
                added[(d, s)] = wt
        report["symmetrize_added"] = len(added)
        edges += [(s, d, wt) for (s, d), wt in added.items()]
    # CSR order: by (dst, src), ties in input order (added reverses never tie with an input edge)
    stored = [e for _, e in sorted(enumerate(edges), key=lambda ie: (ie[1][1], ie[1][0], ie[0]))]
    indptr = np.cumsum([0] + np.bincount([d for _, d, _ in edges], minlength=n).tolist()).tolist()
    return indptr, stored, report


@settings(max_examples=40, deadline=None)
@given(random_edges(), st.booleans(), st.booleans(), st.booleans(), st.booleans(),
       st.sampled_from([1, 2, 3, 1 << 20]))
def test_every_option_combination_matches_the_model(case, weighted, sym, loops, dups, chunk):
    """Weighted (stable path) and unweighted (in-place sorts), every chunk size, every option set."""
    n, src, dst, w = case
    w32 = np.float32(w).tolist()
    opts = dict(symmetrize=sym, remove_self_loops=loops, remove_duplicates=dups)
    want_indptr, want, want_report = build_model(n, src, dst, w32, **opts)
    with mock.patch.object(csr_module, "CHUNK", chunk):
        g = Graph.from_edges(np.array(src, np.int64), np.array(dst, np.int64), n,
                             edge_weight=np.array(w32, np.float32) if weighted else None, **opts)
        out_degree = g.out_degree()
    assert g.indptr.tolist() == want_indptr
    assert edge_list(g) == [(s, d) for s, d, _ in want]
    if weighted:
        assert g.edge_weight.tolist() == [wt for _, _, wt in want]
    else:
        assert g.edge_weight is None
    assert list(g.preprocessing.items()) == list(want_report.items())  # counts and their order
    assert out_degree.dtype == np.int64
    assert out_degree.tolist() == np.bincount([s for s, _, _ in want], minlength=n).tolist()


def test_large_weighted_build_keeps_duplicates_in_input_order():
    # ~8 repeats per pair (n = 50), over many chunks of the key builder
    rng = np.random.default_rng(3)
    src, dst = rng.integers(0, 50, 20_000), rng.integers(0, 50, 20_000)
    w = np.arange(20_000, dtype=np.float32)  # the weight is the input position
    with mock.patch.object(csr_module, "CHUNK", 1000):
        g = Graph.from_edges(src, dst, 50, edge_weight=w)
        first = Graph.from_edges(src, dst, 50, edge_weight=w, remove_duplicates=True)
    order = np.lexsort((np.arange(src.size), src, dst))  # by dst, then src, then position
    np.testing.assert_array_equal(g.edge_weight, w[order])
    np.testing.assert_array_equal(g.indices, src[order])
    np.testing.assert_array_equal(g.dst_of_edges(), dst[order])
    # the first of each repeated pair is the one with the smallest input position
    key = dst[order] * 50 + src[order]
    runs = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    np.testing.assert_array_equal(first.edge_weight, np.minimum.reduceat(w[order], runs))
    np.testing.assert_array_equal(first.indices, src[order][runs])


@pytest.mark.parametrize("chunk", [1, 3, 1 << 20])
def test_dropped_self_loops_take_their_weights_with_them(chunk):
    with mock.patch.object(csr_module, "CHUNK", chunk):
        g = Graph.from_edges([0, 2, 1, 3], [0, 1, 1, 2], edge_weight=[1.0, 2.0, 3.0, 4.0],
                             remove_self_loops=True)
    assert edge_list(g) == [(2, 1), (3, 2)] and g.edge_weight.tolist() == [2.0, 4.0]
    assert g.preprocessing == {"self_loops_removed": 2}


@pytest.mark.parametrize("weighted", [False, True])
def test_from_edges_leaves_the_callers_arrays_unchanged(weighted):
    # the builder sorts and compacts in place: only in its own buffers
    src = np.array([3, 0, 2, 0, 1, 1], np.int64)
    dst = np.array([0, 1, 2, 1, 0, 3], np.int64)
    w = np.array([6, 5, 4, 3, 2, 1], np.float32) if weighted else None
    before = [a.copy() for a in (src, dst, w) if a is not None]
    g = Graph.from_edges(src, dst, 4, edge_weight=w, symmetrize=True, remove_self_loops=True,
                         remove_duplicates=True)
    assert g.num_edges == 6  # 3->0, 0->1, 1->0, 1->3 and the reverses 0->3, 3->1
    for a, b in zip([a for a in (src, dst, w) if a is not None], before):
        np.testing.assert_array_equal(a, b)


def test_added_reverses_take_the_weight_of_their_own_forward_edge():
    # the reverses (0->2 and 1->0) sort in the other order than their forward edges
    g = Graph.from_edges([2, 0, 0], [0, 1, 1], 3, edge_weight=[1.0, 2.0, 3.0], symmetrize=True)
    assert edge_list(g) == [(1, 0), (2, 0), (0, 1), (0, 1), (0, 2)]
    assert g.edge_weight.tolist() == [2.0, 1.0, 2.0, 3.0, 1.0]
    assert g.preprocessing == {"symmetrize_added": 2}


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 1 << 20])
def test_chunked_helpers_agree_with_numpy(chunk):
    rng = np.random.default_rng(chunk)
    keys = np.sort(rng.integers(0, 12, 60))  # long runs of repeats, across chunk boundaries
    queries = np.unique(rng.integers(0, 20, 15))
    with mock.patch.object(csr_module, "CHUNK", chunk):
        np.testing.assert_array_equal(csr_module._dedupe_sorted(keys.copy()), np.unique(keys))
        np.testing.assert_array_equal(csr_module._sorted_isin(queries, keys), np.isin(queries, keys))
        np.testing.assert_array_equal(csr_module._reverse_keys(keys, 4), (keys % 4) * 4 + keys // 4)


def test_stable_order_by_matches_a_stable_argsort_and_falls_back_near_overflow():
    v = np.array([3, 1, 3, 0, 1, 3], dtype=np.int64)
    want = np.argsort(v, kind="stable")
    np.testing.assert_array_equal(csr_module._stable_order_by(v.copy(), 4), want)
    # composites value * M + position would overflow int64: the argsort fallback is taken
    big = np.array([2**62 - 1, 5, 2**62 - 1, 0, 2**61], dtype=np.int64)
    np.testing.assert_array_equal(csr_module._stable_order_by(big.copy(), 2**62),
                                  np.argsort(big, kind="stable"))
    assert csr_module._stable_order_by(np.empty(0, np.int64), 4).size == 0


def test_edge_keys_fit_int64_up_to_the_node_limit_and_past_it_is_an_error():
    n = csr_module.MAX_NODES
    src = np.array([n - 1, 0, n - 1], np.int64)
    dst = np.array([n - 1, n - 1, 0], np.int64)
    buffer, num_keys, _, loops = csr_module.edge_keys(src, dst, n, None, drop_self_loops=False,
                                                       room=2)
    assert buffer.size == 5 and num_keys == 3 and loops == 0  # 2 entries of room after the keys
    keys = buffer[:num_keys]
    assert keys.tolist() == [(n - 1) * n + n - 1, (n - 1) * n, n - 1]
    assert max(keys.tolist()) <= 2**63 - 1 < (n + 1) ** 2 - 1  # n is the largest that fits
    assert csr_module._reverse_keys(keys, n).tolist() == [(n - 1) * n + n - 1, n - 1, (n - 1) * n]
    with pytest.raises(GraphError, match=r"num_nodes = 3037000500 is too large: at most 3037000499"):
        Graph.from_edges([0], [1], num_nodes=n + 1)


# ----------------------------------------------------------------------------- torch-free
def test_partitioners_does_not_import_torch():
    code = textwrap.dedent("""
        import sys
        import partitioners, partitioners.graph, partitioners.graph_csr, partitioners.io
        bad = sorted(m for m in sys.modules if m == "torch" or m.startswith("torch."))
        assert not bad, bad
        print("ok")
    """)
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=root, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
