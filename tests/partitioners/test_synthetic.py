"""Tests of the synthetic generators (partitioners.synthetic): SBM (with communities) and R-MAT."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from partitioners import Graph
from partitioners.synthetic import (_clean_csr, random_split, rmat_graph, sbm_communities,
                                    sbm_graph)

ARRAYS = ("indptr", "indices", "x", "y", "train_mask", "val_mask", "test_mask")


def _assert_same_bytes(g1: Graph, g2: Graph) -> None:
    for name in ARRAYS:
        a, b = getattr(g1, name), getattr(g2, name)
        assert a.dtype == b.dtype and a.shape == b.shape, name
        assert a.tobytes() == b.tobytes(), name
    assert g1.preprocessing == g2.preprocessing


def _assert_clean_undirected(g: Graph) -> None:
    """Symmetric (checked from the arrays, not the flag), no self-loops, no repeated edges."""
    a = g.to_scipy()
    assert (a != a.T).nnz == 0
    src, dst = g.edges()
    assert not np.any(src == dst)
    # within each destination row the sources are strictly increasing => no duplicates
    step = np.diff(g.indices.astype(np.int64))
    row_start = np.zeros(g.num_edges, dtype=bool)
    row_start[g.indptr[:-1][g.in_degree() > 0]] = True
    assert np.all(step[~row_start[1:]] > 0)
    assert g.symmetric


def _assert_masks(g: Graph, fracs: tuple[float, float, float] = (0.1, 0.1, 0.8)) -> None:
    masks = (g.train_mask, g.val_mask, g.test_mask)
    for m, f in zip(masks, fracs):
        assert m.dtype == np.bool_ and m.shape == (g.num_nodes,)
        assert abs(int(m.sum()) - f * g.num_nodes) <= 1 and m.any()
    total = sum(m.astype(np.int64) for m in masks)
    assert total.max() == 1  # disjoint


def _homophily(g: Graph) -> float:
    src, dst = g.edges()
    return float((g.y[src] == g.y[dst]).mean())


# ---------------------------------------------------------------------------- CSR builder
def _check_builder(src: np.ndarray, dst: np.ndarray, n: int) -> None:
    loops = src == dst
    keys = dst[~loops].astype(np.int64) * n + src[~loops]
    # with and without room for the reverses after the keys
    roomy = np.concatenate([keys, np.full(keys.size, -1, np.int64)])
    indptr, indices, report = _clean_csr(roomy, keys.size, n, int(loops.sum()))
    tight = _clean_csr(keys.copy(), keys.size, n, int(loops.sum()))
    for a, b in zip(tight, (indptr, indices, report)):
        assert np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b
    ref = Graph.from_edges(src, dst, n, symmetrize=True, remove_self_loops=True,
                           remove_duplicates=True)
    np.testing.assert_array_equal(indptr, ref.indptr)
    np.testing.assert_array_equal(indices, ref.indices)
    assert indices.dtype == ref.indices.dtype
    assert report == ref.preprocessing
    assert list(report) == list(ref.preprocessing)  # same key order (written to JSON)
    # and an independent reference: scipy's symmetric closure of the non-loop draws
    a = sp.coo_matrix((np.ones(keys.size), (keys // n, keys % n)), shape=(n, n)).tocsr()
    a.sum_duplicates()
    closure = (a + a.T).tocsr()
    closure.sum_duplicates()
    closure.sort_indices()
    np.testing.assert_array_equal(indptr, closure.indptr)
    np.testing.assert_array_equal(indices, closure.indices)
    assert report == {"self_loops_removed": int(loops.sum()),
                      "duplicates_removed": int(keys.size - a.nnz),
                      "symmetrize_added": int(closure.nnz - a.nnz)}


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 30).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), min_size=1,
                         max_size=120))))
def test_symmetric_csr_equals_from_edges(case: tuple[int, list[tuple[int, int]]]) -> None:
    n, edges = case
    src, dst = (np.array(c, dtype=np.int64) for c in zip(*edges))
    _check_builder(src, dst, n)


def test_symmetric_csr_equals_from_edges_large_random() -> None:
    rng = np.random.default_rng(5)
    n = 3000
    src, dst = rng.integers(0, n, 50_000), rng.integers(0, n, 50_000)
    _check_builder(src, dst, n)


# ---------------------------------------------------------------------------- SBM
def test_sbm_shapes_and_cleanliness() -> None:
    g = sbm_graph(2000, 5, 12, avg_degree=12, seed=3, name="s")
    assert g.num_nodes == 2000 and g.name == "s"
    assert g.x.shape == (2000, 12) and g.x.dtype == np.float32
    assert g.y.dtype == np.int64 and g.num_classes == 5
    assert set(np.unique(g.y)) == set(range(5))
    assert np.bincount(g.y).max() - np.bincount(g.y).min() <= 1  # balanced classes
    _assert_clean_undirected(g)
    _assert_masks(g)
    # stored edges = draws - self-loops - repeats + reverses added
    p = g.preprocessing
    draws = round(12 * 2000 / 2)
    assert g.num_edges == draws - p["self_loops_removed"] - p["duplicates_removed"] + p["symmetrize_added"]
    assert 0.9 * 12 * 2000 < g.num_edges <= 12 * 2000


def test_sbm_same_seed_same_bytes_other_seed_differs() -> None:
    g1, g2 = sbm_graph(1500, 4, 8, seed=7), sbm_graph(1500, 4, 8, seed=7)
    _assert_same_bytes(g1, g2)
    g3 = sbm_graph(1500, 4, 8, seed=8)
    assert g3.indices.tobytes() != g1.indices.tobytes()
    assert g3.x.tobytes() != g1.x.tobytes()
    assert not np.array_equal(g3.train_mask, g1.train_mask)


@pytest.mark.parametrize("community_size", [None, 1000])
def test_sbm_homophily_matches_p_in_ratio(community_size: int | None) -> None:
    # flat degrees, sparse: few repeats, so the stored intra-class fraction is the draws',
    # r / (r + K - 1), with or without communities
    for ratio, k in ((9.0, 4), (1.0, 4), (21.0, 8)):
        g = sbm_graph(6000, k, 4, avg_degree=10, p_in_ratio=ratio, degree_exponent=None,
                      community_size=community_size, seed=1)
        expected = ratio / (ratio + k - 1)
        assert abs(_homophily(g) - expected) < 0.02, (ratio, k)


def _locality(g: Graph, community: np.ndarray) -> float:
    src, dst = g.edges()
    return float((community[src] == community[dst]).mean())


@pytest.mark.parametrize("p_local", [0.0, 0.5, 0.95, 1.0])
def test_sbm_locality_matches_p_local(p_local: float) -> None:
    """About ``p_local`` of the edges join two nodes of one community (exactly 0 and 1 at the ends)."""
    kwargs = {"avg_degree": 10, "degree_exponent": None, "community_size": 400, "seed": 2}
    g = sbm_graph(8000, 4, 4, p_local=p_local, **kwargs)
    community = sbm_communities(8000, 4, community_size=400, seed=2)
    assert community.max() + 1 == 20
    local = _locality(g, community)
    if p_local in (0.0, 1.0):
        assert local == p_local  # remote ends always go to another community
    else:
        assert abs(local - p_local) < 0.02
    _assert_clean_undirected(g)


def test_sbm_default_locality_and_homophily_with_skewed_degrees() -> None:
    g = sbm_graph(20_000, 8, 8, seed=0)  # defaults: 20 communities of 1000, p_local 0.95
    community = sbm_communities(20_000, 8, seed=0)
    # repeats are more frequent inside a community (a hub's neighbours are mostly there)
    assert 0.93 < _locality(g, community) <= 0.95
    assert 0.47 < _homophily(g) < 8 / 15 + 0.01  # draws: 8 / (8 + 7)


def test_sbm_communities_hold_every_class_evenly() -> None:
    n, k = 10_007, 6
    y = sbm_graph(n, k, 2, avg_degree=1, seed=4).y
    for size, expected in ((500, 20), (2, n // k), (None, 1), (10**9, 1)):
        community = sbm_communities(n, k, community_size=size, seed=4)
        assert community.dtype == np.int64 and community.shape == (n,)
        assert community.min() == 0 and community.max() + 1 == expected, size
        # [community, class] counts: every class in every community, spread to within one node
        counts = np.zeros((expected, k), dtype=np.int64)
        np.add.at(counts, (community, y), 1)
        assert counts.min() >= 1
        assert (counts.max(axis=0) - counts.min(axis=0)).max() <= 1
    # placed randomly over ids, and seeded
    community = sbm_communities(n, k, community_size=500, seed=4)
    assert abs(np.corrcoef(np.arange(n), community)[0, 1]) < 0.05
    assert np.array_equal(community, sbm_communities(n, k, community_size=500, seed=4))
    assert not np.array_equal(community, sbm_communities(n, k, community_size=500, seed=5))


def test_sbm_communities_make_metis_beat_random() -> None:
    """The point of the communities: METIS's halo is a fraction of a random partition's."""
    pytest.importorskip("pymetis")
    from partitioners.methods import assign_parts
    from partitioners.quality import partition_quality

    def volume_ratio(g: Graph) -> float:
        vol = {m: partition_quality(g, assign_parts(g, 4, m, seed=0), 4)["comm_volume"]
               for m in ("metis", "random")}
        return vol["metis"] / vol["random"]

    local = volume_ratio(sbm_graph(10_000, 8, 4, community_size=500, seed=0))
    plain = volume_ratio(sbm_graph(10_000, 8, 4, community_size=None, seed=0))
    assert local < 0.3 < 0.8 < plain


def test_sbm_community_parameters_change_the_graph() -> None:
    base = sbm_graph(3000, 4, 4, seed=1)
    for kwargs in ({"community_size": 300}, {"p_local": 0.5}, {"community_size": None}):
        other = sbm_graph(3000, 4, 4, seed=1, **kwargs)
        assert other.indices.tobytes() != base.indices.tobytes(), kwargs
        assert other.x.tobytes() == base.x.tobytes()  # features and labels do not depend on them
        assert np.array_equal(other.y, base.y)
    # one community: p_local has nothing to act on
    a = sbm_graph(3000, 4, 4, community_size=None, p_local=0.2, seed=1)
    b = sbm_graph(3000, 4, 4, community_size=None, p_local=0.9, seed=1)
    _assert_same_bytes(a, b)


def test_sbm_default_is_mostly_intra_class_and_skewed() -> None:
    g = sbm_graph(10_000, 8, 16, seed=0)
    assert _homophily(g) > 0.5
    deg = g.in_degree()
    assert deg.min() > 0
    assert deg.max() > 10 * deg.mean()  # Pareto propensities
    flat = sbm_graph(10_000, 8, 16, degree_exponent=None, seed=0).in_degree()
    assert flat.max() < 3 * flat.mean()


def _nearest_centroid_acc(x: np.ndarray, g: Graph) -> float:
    k = g.num_classes
    mu = np.stack([x[g.train_mask & (g.y == c)].mean(0) for c in range(k)])
    xt = x[g.test_mask]
    pred = ((mu ** 2).sum(1)[None] - 2 * xt @ mu.T).argmin(1)
    return float((pred == g.y[g.test_mask]).mean())


def test_sbm_graph_makes_labels_learnable() -> None:
    """Raw features alone are a weak classifier; GCN-smoothed features a strong one."""
    g = sbm_graph(10_000, 8, 32, seed=0)
    a = g.to_scipy().astype(np.float64) + sp.identity(g.num_nodes, format="csr")
    d = sp.diags(1.0 / np.sqrt(np.asarray(a.sum(1)).ravel()))
    a_hat = d @ a @ d
    x = g.x.astype(np.float64)
    raw = _nearest_centroid_acc(x, g)
    smooth = _nearest_centroid_acc(a_hat @ (a_hat @ x), g)
    assert 0.35 < raw < 0.6
    assert 0.85 < smooth < 0.98
    assert smooth > raw + 0.3


def test_sbm_feature_dtype_and_small_dim() -> None:
    g = sbm_graph(300, 6, 3, feature_dtype="float16", seed=0)  # F < K: unit-norm centroids
    assert g.x.dtype == np.float16 and g.x.shape == (300, 3)
    assert np.isfinite(g.x).all()


def test_sbm_noise_free_features_are_the_centroids() -> None:
    g = sbm_graph(200, 4, 8, feature_noise=0.0, seed=2)
    for c in range(4):
        rows = g.x[g.y == c]
        assert np.allclose(rows, rows[0])
        assert np.isclose(np.linalg.norm(rows[0]), 1.0, atol=1e-6)
    centroids = np.stack([g.x[g.y == c][0] for c in range(4)])
    assert np.allclose(centroids @ centroids.T, np.eye(4), atol=1e-6)  # orthonormal


@pytest.mark.parametrize("kwargs, match", [
    ({"num_classes": 1}, r"num_classes must be an integer >= 2, got 1"),
    ({"num_nodes": 3, "num_classes": 4}, r"num_nodes must be an integer >= 4, got 3"),
    ({"feature_dim": 0}, r"feature_dim must be an integer >= 1, got 0"),
    ({"seed": -1}, r"seed must be a non-negative integer, got -1"),
    ({"seed": 1.5}, r"seed must be a non-negative integer, got 1.5"),
    ({"avg_degree": 0}, r"avg_degree must be in \(0\.0, inf\], got 0"),
    ({"p_in_ratio": float("nan")}, r"p_in_ratio must be in"),
    ({"degree_exponent": 2.0}, r"degree_exponent must be in \(2\.0, inf\], got 2\.0"),
    ({"feature_noise": -0.1}, r"feature_noise must be in \[0\.0, inf\], got -0\.1"),
    ({"community_size": 0}, r"community_size must be an integer >= 1, got 0"),
    ({"community_size": 2.5}, r"community_size must be an integer >= 1, got 2\.5"),
    ({"p_local": 1.5}, r"p_local must be in \[0\.0, 1\.0\], got 1\.5"),
    ({"p_local": None}, r"p_local must be a number, got None"),
    ({"feature_dtype": "float64"}, r"feature_dtype must be one of float32, float16, got 'float64'"),
    ({"train_frac": 0.0}, r"train_frac must be in \(0\.0, 1\.0\], got 0\.0"),
    ({"train_frac": 0.5, "test_frac": 0.6}, r"train_frac \+ val_frac \+ test_frac = 1\.2 exceeds 1"),
    ({"val_frac": "x"}, r"val_frac must be a number, got 'x'"),
])
def test_sbm_bad_arguments(kwargs: dict, match: str) -> None:
    args = {"num_nodes": 100, "num_classes": 4, "feature_dim": 8, **kwargs}
    with pytest.raises(ValueError, match=match):
        sbm_graph(**args)


def test_sbm_communities_bad_arguments() -> None:
    with pytest.raises(ValueError, match=r"community_size must be an integer >= 1, got -3"):
        sbm_communities(100, 4, community_size=-3)
    with pytest.raises(ValueError, match=r"num_nodes must be an integer >= 4, got 3"):
        sbm_communities(3, 4)
    with pytest.raises(ValueError, match=r"seed must be a non-negative integer, got -1"):
        sbm_communities(100, 4, seed=-1)


def test_split_too_small_graph() -> None:
    with pytest.raises(ValueError, match=r"num_nodes=3 is too small for non-empty train/val/test sets"):
        random_split(3, 0.5, 0.2, 0.3, seed=0)
    t, v, s = random_split(3, 0.1, 0.1, 0.1, seed=0)  # each raised to one node
    assert (t.sum(), v.sum(), s.sum()) == (1, 1, 1) and not np.any(t & v | t & s | v & s)
    # rounding never oversubscribes: 0.1/0.1/0.8 of 4096 would round to 410 + 410 + 3277
    t, v, s = random_split(4096, 0.1, 0.1, 0.8, seed=0)
    assert (t.sum(), v.sum(), s.sum()) == (410, 409, 3277)
    assert (t | v | s).all() and not np.any(t & v | t & s | v & s)


# ---------------------------------------------------------------------------- R-MAT
def test_rmat_shapes_cleanliness_and_report() -> None:
    g = rmat_graph(4096, 40_000, feature_dim=6, num_classes=3, seed=0, name="r")
    assert g.num_nodes == 4096 and g.name == "r"
    assert g.x.shape == (4096, 6) and g.num_classes == 3
    assert g.y.min() >= 0 and g.y.max() < 3
    _assert_clean_undirected(g)
    _assert_masks(g)
    p = g.preprocessing
    assert "out_of_range_dropped" not in p  # 4096 is a power of two
    assert g.num_edges == 40_000 - p["self_loops_removed"] - p["duplicates_removed"] + p["symmetrize_added"]


def test_rmat_non_power_of_two_drops_out_of_range_draws() -> None:
    g = rmat_graph(1000, 20_000, seed=4)
    _assert_clean_undirected(g)
    p = g.preprocessing
    assert p["out_of_range_dropped"] > 0
    kept = 20_000 - p["out_of_range_dropped"]
    assert g.num_edges == kept - p["self_loops_removed"] - p["duplicates_removed"] + p["symmetrize_added"]


def test_rmat_degrees_are_skewed_and_permuted() -> None:
    g = rmat_graph(1 << 14, 16 << 14, seed=0)
    deg = g.in_degree()
    assert deg.max() > 20 * deg.mean()
    # without the permutation node 0 would be the hub; after it, degree does not follow id
    top = np.argsort(deg)[-50:]
    assert np.median(top) > (1 << 14) / 8
    assert abs(np.corrcoef(np.arange(deg.size), deg)[0, 1]) < 0.05
    # a near-uniform initiator gives a near-flat degree distribution
    flat = rmat_graph(1 << 14, 16 << 14, a=0.25, b=0.25, c=0.25, seed=0).in_degree()
    assert flat.max() < 3 * flat.mean()


def test_rmat_same_seed_same_bytes_and_chunking_invariant() -> None:
    g1 = rmat_graph(5000, 150_000, seed=11)
    g2 = rmat_graph(5000, 150_000, seed=11, chunk_edges=1)  # one 2**16-draw block at a time
    g3 = rmat_graph(5000, 150_000, seed=11, chunk_edges=1 << 20)
    _assert_same_bytes(g1, g2)
    _assert_same_bytes(g1, g3)
    g4 = rmat_graph(5000, 150_000, seed=12)
    assert g4.indices.tobytes() != g1.indices.tobytes()
    assert g4.x.tobytes() != g1.x.tobytes()


def test_rmat_initiator_goes_to_the_low_corner_before_permutation() -> None:
    # with a = 1 every draw is (0, 0): a self-loop, so no edges are left
    g = rmat_graph(64, 1000, a=1.0, b=0.0, c=0.0, seed=0)
    assert g.num_edges == 0
    assert g.preprocessing["self_loops_removed"] == 1000


@pytest.mark.parametrize("kwargs, match", [
    ({"num_nodes": 2}, r"num_nodes must be an integer >= 3, got 2"),
    ({"num_edges": 0}, r"num_edges must be an integer >= 1, got 0"),
    ({"a": 0.6, "b": 0.3, "c": 0.3}, r"a \+ b \+ c = 1\.2 exceeds 1; d = 1 - a - b - c must be >= 0"),
    ({"a": -0.1}, r"a must be in \[0\.0, 1\.0\], got -0\.1"),
    ({"num_classes": 0}, r"num_classes must be an integer >= 1, got 0"),
    ({"chunk_edges": 0}, r"chunk_edges must be an integer >= 1, got 0"),
    ({"seed": True}, r"seed must be a non-negative integer, got True"),
    ({"feature_dtype": "int8"}, r"feature_dtype must be one of float32, float16, got 'int8'"),
])
def test_rmat_bad_arguments(kwargs: dict, match: str) -> None:
    args = {"num_nodes": 100, "num_edges": 500, **kwargs}
    with pytest.raises(ValueError, match=match):
        rmat_graph(**args)
