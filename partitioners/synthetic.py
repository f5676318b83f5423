"""Synthetic graphs: a stochastic block model with learnable labels and community locality, and
Graph500-style R-MAT.

Both generators return a clean undirected :class:`~partitioners.graph.Graph` (every edge stored in
both directions, no self-loops, no duplicates, ``symmetric=True``) with features, labels and
disjoint train/val/test masks, and both scale to tens of millions of edges: edges are drawn in
chunks of vectorised numpy, never from an ``N x N`` matrix.

Randomness. Every array comes from ``np.random.Generator(PCG64(SeedSequence(seed, spawn_key=...)))``
with one fixed stream per purpose (labels, communities, degrees, centroids, features, split,
permutation) and
one per block of ``2**16`` edge draws, each drawn in a fixed order. So the same ``seed`` and
parameters give byte-identical arrays, and the result does not depend on ``chunk_edges`` (which
only sets how many draws are vectorised at once).

The SBM model (:func:`sbm_graph`). Two levels, as in real graphs (social, product, citation
networks): nodes form many small **communities** (``C = round(N / community_size)``), each
holding nodes of every class, and most of a node's edges stay inside its community; within
that, **classes** are homophilous (edges prefer a same-class end). Without the communities an SBM is an expander
that no partitioner can cut well (METIS's communication volume is 0.88x a random
partition's at 4 parts); with them METIS finds whole communities (0.21x for ``sbm-medium``;
see ``datasets/README.md``).

- **Labels** are balanced (class sizes differ by at most one), randomly placed over ids.
- **Communities**: each class's nodes, in random order, are dealt into ``C`` runs of equal
  size (within one), so every community holds about ``N / (C K)`` nodes of each class;
  :func:`sbm_communities` returns them. ``C`` is capped at ``N // K`` so no community lacks
  a class; ``community_size=None`` means one community (the plain degree-corrected SBM).
- **Propensities** ``theta[v]``: Pareto samples with tail exponent ``degree_exponent``
  (``P(theta > t) = t ** (1 - degree_exponent)``), capped at ``sqrt(N)`` and rounded down to
  a multiple of 1/4, so degrees are skewed; 1 for every node when ``degree_exponent`` is None.
- **Edges**: ``round(avg_degree * N / 2)`` independent draws. A draw picks ``u`` with
  probability proportional to ``theta[u]``; then the community of the other end: ``u``'s own
  with probability ``p_local``, else a uniformly random other one; then its class: ``u``'s
  with probability ``p_in_ratio / (p_in_ratio + K - 1)``, else any other class; and finally
  ``v`` among the nodes of that community and class(es) with probability proportional to
  ``theta[v]``. Every step is a uniform index into a table where node ``v`` fills
  ``4 * theta[v]`` slots, grouped by (community, class): O(1) work per edge, no ``N x N``
  matrix. So about ``p_local`` of the edges stay inside a community and
  ``p_in_ratio / (p_in_ratio + K - 1)`` join same-class nodes (0.53 for ``K = 8`` and the
  default ratio), the same class mixing as a plain SBM with ``p_in / p_out = p_in_ratio``.
  Each draw is stored in both directions; self-loops and repeated pairs are dropped
  (counted in ``preprocessing``). Repeats are more frequent than in a plain SBM because a
  high-degree node has only its community to draw most neighbours from: the stored mean
  degree is ~10% under ``avg_degree``, the stored homophily ~0.03 under the draws', and the
  largest degrees are bounded by a few times ``community_size``.

Features: ``x[v] = mu[y[v]] + feature_noise * N(0, I_F)`` where the class centroids ``mu`` are
orthonormal when ``F >= K`` (random unit vectors otherwise). The defaults make raw features a
weak classifier (nearest centroid ~0.5 with ``K = 8``) and 2-hop smoothed features a strong
one (~0.92); see ``datasets/README.md`` for the measured numbers.

Regression targets (``sbm_graph(target_dim=D)``, the catalog's ``sbm-regression``): the same
graph and features, and as labels float32 ``[N, D]`` targets planted over the graph
(:func:`regression_targets`): a fixed random linear map of the 2-hop mean-aggregated features,
standardised per column, plus a little noise. A 2-layer GCN can fit them; a model of a node's
own features (an MLP) cannot fully, since the 2-hop mean averages the neighbours' centroids and
noise, which a node's own row does not show.

Multi-label labels (``sbm_graph(multilabel_dim=C)``, the catalog's ``sbm-multilabel``): the same
signal with ``C`` columns (its own random map), each column thresholded at a quantile so that
10% to 40% of the nodes carry each label (:func:`multilabel_targets`): a uint8 ``[N, C]`` 0/1
matrix.

Modules: the SBM is here; R-MAT in :mod:`partitioners.synthetic_rmat`; the planted targets in
:mod:`partitioners.synthetic_targets`; the masks and features both share in
:mod:`partitioners.synthetic_nodes`; the random streams, draw blocks and CSR cleaning in
:mod:`partitioners.synthetic_draws`. Every public name is importable from here.

Legend: ``N`` nodes, ``E`` stored (directed) edges, ``F`` feature dim, ``K`` classes.
"""

from __future__ import annotations

import logging
import math

import numpy as np

from .argcheck import check_float, check_int, check_seed
from .graph import Graph
from .graph_csr import index_dtype
from .synthetic_draws import _CENTROIDS, _COMMUNITIES, _DEGREES, _EDGES, _LABELS, _blocks, _clean_csr, _rng
from .synthetic_nodes import _check_feature_dtype, _gaussian_features, random_split
from .synthetic_rmat import rmat_graph
from .synthetic_targets import multilabel_targets, regression_targets

__all__ = ["sbm_graph", "sbm_communities", "rmat_graph", "random_split", "regression_targets",
           "multilabel_targets"]

log = logging.getLogger(__name__)

_DEGREE_STEPS = 4
"""SBM propensities are Pareto samples rounded down to multiples of ``1 / _DEGREE_STEPS``."""


def _num_communities(num_nodes: int, num_classes: int, community_size: int | None) -> int:
    """``round(N / community_size)``, at least 1 and at most ``N // K`` (1 when None)."""
    if community_size is None:
        return 1
    return min(max(1, round(num_nodes / community_size)), num_nodes // num_classes)


def _community_of(labels: np.ndarray, num_classes: int, num_communities: int, seed: int,
                  ) -> np.ndarray:
    """int64 ``[N]``: the community of each node, every class spread evenly over communities.

    Each class's nodes, in a seeded random order, are cut into ``num_communities`` consecutive
    runs whose sizes differ by at most one; run ``i`` joins community ``i``. So a community holds
    ``floor`` or ``ceil`` of ``class_size / num_communities`` nodes of every class (at least one
    when ``num_communities <= class_size``), placed randomly over node ids.
    """
    n = labels.size
    order = _rng(seed, _COMMUNITIES).permutation(n)
    by_class = order[np.argsort(labels[order], kind="stable")]  # class by class, random inside
    del order
    class_size = np.bincount(labels, minlength=num_classes)
    size_of = np.repeat(class_size, class_size)  # [N], in by_class order
    rank = np.arange(n, dtype=np.int64) - (np.cumsum(class_size) - class_size).repeat(class_size)
    community = np.empty(n, dtype=np.int64)
    community[by_class] = rank * num_communities // size_of
    return community


def _sbm_labels(num_nodes: int, num_classes: int, seed: int) -> np.ndarray:
    """int64 ``[N]``: balanced labels (class sizes differ by at most one), randomly placed."""
    return _rng(seed, _LABELS).permutation(np.arange(num_nodes, dtype=np.int64) % num_classes)


def sbm_communities(num_nodes: int, num_classes: int, *, community_size: int | None = 1000,
                    seed: int = 0) -> np.ndarray:
    """int64 ``[N]``: the community of every node of ``sbm_graph`` with the same arguments.

    Communities depend only on ``num_nodes``, ``num_classes``, ``community_size`` and ``seed``
    (not on the degree, edge or feature parameters), so this recomputes them without
    generating the graph: e.g. to measure how many edges stay inside a community, or to
    compare a partition with the planted communities. Ids are in ``[0, C)``, ``C`` as in
    :func:`sbm_graph`; all zeros when ``community_size`` is None.
    """
    seed = check_seed(seed)
    num_classes = check_int("num_classes", num_classes, 2)
    num_nodes = check_int("num_nodes", num_nodes, max(3, num_classes))
    if community_size is not None:
        community_size = check_int("community_size", community_size, 1)
    num_comm = _num_communities(num_nodes, num_classes, community_size)
    return _community_of(_sbm_labels(num_nodes, num_classes, seed), num_classes, num_comm, seed)


def _sbm_slots(cell_of: np.ndarray, k: int, num_comm: int, degree_exponent: float | None,
               seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The slot table of the edge draws: ``(slots, mass, start, comm_start, comm_mass)``.

    Integer propensities laid out as "slots": node ``v`` repeated ``weight[v]`` times, cell
    (``community * K + class``) by cell, so a uniform slot in a range of cells is a node of those
    cells drawn proportionally to its weight. Per cell: its slots ``[start, start + mass)``; its
    community's ``[comm_start, comm_start + comm_mass)``.
    """
    n = cell_of.size
    if degree_exponent is None:
        weight = np.ones(n, dtype=np.int64)
    else:  # Pareto(x_min=1) theta, P(theta > t) = t ** -(exponent - 1), capped, in quarters
        theta = (1.0 - _rng(seed, _DEGREES).random(n)) ** (-1.0 / (degree_exponent - 1.0))
        weight = np.floor(np.minimum(theta, math.sqrt(n)) * _DEGREE_STEPS).astype(np.int64)
        del theta
    members = np.argsort(cell_of, kind="stable")  # node ids grouped by cell
    slots = np.repeat(members.astype(index_dtype(n)), weight[members])
    del members
    mass = np.bincount(cell_of, weights=weight, minlength=num_comm * k).astype(np.int64)
    del weight
    start = np.cumsum(mass) - mass
    comm_start = np.repeat(start[::k], k)
    comm_mass = np.repeat(mass.reshape(num_comm, k).sum(axis=1), k)
    return slots, mass, start, comm_start, comm_mass


def _sbm_edge_keys(cell_of: np.ndarray, k: int, num_comm: int, *, avg_degree: float,
                   p_in_ratio: float, p_local: float, degree_exponent: float | None, seed: int,
                   ) -> tuple[np.ndarray, int, int]:
    """The SBM's edge draws as keys ``v * N + u``: ``(keys, num_keys, self_loops_dropped)``.

    ``keys`` is an int64 buffer of ``2 * draws`` entries: the kept draws at the front, room for
    their reverses after them (see :func:`_clean_csr`).
    """
    n = cell_of.size
    num_cells = num_comm * k
    slots, mass, start, comm_start, comm_mass = _sbm_slots(cell_of, k, num_comm, degree_exponent,
                                                           seed)
    total = int(slots.size)
    p_same = p_in_ratio / (p_in_ratio + k - 1)
    num_draws = max(1, round(avg_degree * n / 2))
    keys = np.empty(2 * num_draws, dtype=np.int64)  # second half: room for the reverses
    filled = loops = 0
    for b, lo, hi in _blocks(num_draws):
        g = _rng(seed, _EDGES, b)
        m = hi - lo
        u = slots[g.integers(0, total, m)]
        cell = cell_of[u]  # u's cell, then moved to the other end's community and class
        if num_comm > 1:
            remote = np.flatnonzero(g.random(m) >= p_local)
            shift = g.integers(1, num_comm, remote.size) * k  # to a uniform other community
            cell[remote] = (cell[remote] + shift) % num_cells
        same = g.random(m) < p_same
        cm = mass[cell]
        # same class: a slot of the cell; other class: a slot of the community, skipping the cell
        t = g.integers(0, np.where(same, cm, comm_mass[cell] - cm))
        c_start = start[cell]
        in_comm = c_start - comm_start[cell]  # where the cell starts inside its community
        v = slots[np.where(same, c_start + t, comm_start[cell] + t + cm * (t >= in_comm))]
        keep = u != v
        kept = int(np.count_nonzero(keep))
        loops += m - kept
        keys[filled:filled + kept] = v[keep].astype(np.int64) * n + u[keep]
        filled += kept
    return keys, filled, loops


def _sbm_centroids(feature_dim: int, k: int, seed: int) -> np.ndarray:
    """float32 ``[K, F]`` class centroids: orthonormal when ``F >= K``, else random unit vectors."""
    g = _rng(seed, _CENTROIDS)
    if feature_dim >= k:
        q, _ = np.linalg.qr(g.standard_normal((feature_dim, k)))
        centroids = np.ascontiguousarray(q.T)
    else:
        centroids = g.standard_normal((k, feature_dim))
        centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    return centroids.astype(np.float32)


def _check_edge_args(avg_degree: float, p_in_ratio: float, degree_exponent: float | None,
                     community_size: int | None, p_local: float,
                     ) -> tuple[float, float, float | None, int | None, float]:
    """:func:`sbm_graph`'s edge-model arguments checked, in that order (each error names its
    argument): ``(avg_degree, p_in_ratio, degree_exponent, community_size, p_local)``."""
    avg_degree = check_float("avg_degree", avg_degree, 0.0, lo_open=True)
    p_in_ratio = check_float("p_in_ratio", p_in_ratio, 0.0, lo_open=True)
    if degree_exponent is not None:
        degree_exponent = check_float("degree_exponent", degree_exponent, 2.0, lo_open=True)
    if community_size is not None:
        community_size = check_int("community_size", community_size, 1)
    p_local = check_float("p_local", p_local, 0.0, 1.0)
    return avg_degree, p_in_ratio, degree_exponent, community_size, p_local


def _check_label_args(target_dim: int | None, multilabel_dim: int | None, target_noise: float,
                      ) -> tuple[int | None, int | None, float]:
    """:func:`sbm_graph`'s planted-label arguments checked: at most one of ``target_dim`` and
    ``multilabel_dim``, each >= 1, and ``target_noise`` >= 0."""
    if target_dim is not None and multilabel_dim is not None:
        raise ValueError("sbm_graph: pass target_dim (regression) or multilabel_dim (multi-label), not both")
    if target_dim is not None:
        target_dim = check_int("target_dim", target_dim, 1)
    if multilabel_dim is not None:
        multilabel_dim = check_int("multilabel_dim", multilabel_dim, 1)
    return target_dim, multilabel_dim, check_float("target_noise", target_noise, 0.0)


def _sbm_csr(y: np.ndarray, k: int, num_comm: int, *, avg_degree: float, p_in_ratio: float,
             p_local: float, degree_exponent: float | None, seed: int,
             ) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """The SBM's edges over the labels ``y`` and ``num_comm`` communities, drawn and cleaned:
    ``(indptr, indices, preprocessing report)`` as :func:`~partitioners.synthetic_draws._clean_csr`."""
    cell_of = _community_of(y, k, num_comm, seed)  # cell = community * K + class
    cell_of *= k
    cell_of += y
    keys, filled, loops = _sbm_edge_keys(cell_of, k, num_comm, avg_degree=avg_degree,
                                         p_in_ratio=p_in_ratio, p_local=p_local,
                                         degree_exponent=degree_exponent, seed=seed)
    del cell_of
    return _clean_csr(keys, filled, y.size, loops)


def _graph_labels(indptr: np.ndarray, indices: np.ndarray, x: np.ndarray, y: np.ndarray, k: int, seed: int, *,
                  target_dim: int | None, multilabel_dim: int | None, noise: float,
                  ) -> tuple[np.ndarray, int, str]:
    """``(labels, num_classes, label_kind)`` of the graph: the classes ``y``, or with ``target_dim``
    regression targets, or with ``multilabel_dim`` multi-labels planted over it (noise ``noise``)."""
    if target_dim is not None:
        return regression_targets(indptr, indices, x, target_dim, seed, noise), target_dim, "regression"
    if multilabel_dim is not None:
        return multilabel_targets(indptr, indices, x, multilabel_dim, seed, noise), multilabel_dim, "multilabel"
    return y, k, "class"


def sbm_graph(num_nodes: int, num_classes: int, feature_dim: int, *, avg_degree: float = 20.0,
              p_in_ratio: float = 8.0, degree_exponent: float | None = 3.0,
              community_size: int | None = 1000, p_local: float = 0.95,
              feature_noise: float = 0.75, train_frac: float = 0.1,
              val_frac: float = 0.1, test_frac: float = 0.8, seed: int = 0,
              feature_dtype: str = "float32", name: str = "", target_dim: int | None = None,
              target_noise: float = 0.1, multilabel_dim: int | None = None) -> Graph:
    """A degree-corrected stochastic block model with planted communities: labels learnable from
    the graph much better than from the features, and community locality a partitioner can use.

    The model (communities, classes, propensities, edge draws, features) is described in the
    module docstring, under *The SBM model*.

    Args:
        num_nodes: ``N`` (>= ``num_classes`` and >= 3).
        num_classes: ``K`` (>= 2).
        feature_dim: ``F`` (>= 1).
        avg_degree: expected stored edges per node before cleaning (default: ``20.0``).
        p_in_ratio: weight of a same-class end over one of another class, > 0 (default: ``8.0``).
        degree_exponent: Pareto tail exponent of the propensities, > 2, or None for equal
            propensities (default: ``3.0``).
        community_size: mean nodes per community (>= 1), or None for no communities
            (default: ``1000``).
        p_local: fraction of the edge draws that stay inside a community, in ``[0, 1]``
            (default: ``0.95``; no effect with one community).
        feature_noise: standard deviation of the per-dimension feature noise (default: ``0.75``).
        train_frac, val_frac, test_frac: sizes of the disjoint random masks (default: 0.1/0.1/0.8).
        seed: non-negative seed; the same seed and parameters give identical arrays (default: ``0``).
        feature_dtype: ``"float32"`` or ``"float16"`` (default: ``"float32"``).
        name: stored in :attr:`Graph.name`.
        target_dim: ``D`` (>= 1): the labels are float32 ``[N, D]`` regression targets
            (:func:`regression_targets`) instead of the classes (default: None, classes).
        target_noise: with ``target_dim`` or ``multilabel_dim``, the standard deviation of the
            planted signal's noise (default: ``0.1``; the signal's own is 1).
        multilabel_dim: ``C`` (>= 1): the labels are a uint8 ``[N, C]`` 0/1 matrix
            (:func:`multilabel_targets`, noise ``target_noise``) instead of the classes
            (default: None, classes; not with ``target_dim``).

    Shapes: ``x`` ``[N, F]``, ``y`` int64 ``[N]`` (float32 ``[N, D]`` with ``target_dim``, uint8
    ``[N, C]`` with ``multilabel_dim``),
    masks bool ``[N]``, ``E ~ 0.9 * avg_degree * N``.
    """
    seed = check_seed(seed)
    num_classes = check_int("num_classes", num_classes, 2)
    num_nodes = check_int("num_nodes", num_nodes, max(3, num_classes))
    feature_dim = check_int("feature_dim", feature_dim, 1)
    avg_degree, p_in_ratio, degree_exponent, community_size, p_local = _check_edge_args(
        avg_degree, p_in_ratio, degree_exponent, community_size, p_local)
    feature_noise = check_float("feature_noise", feature_noise, 0.0)
    target_dim, multilabel_dim, target_noise = _check_label_args(target_dim, multilabel_dim, target_noise)
    _check_feature_dtype(feature_dtype)
    n, k = num_nodes, num_classes
    masks = random_split(n, train_frac, val_frac, test_frac, seed)

    y = _sbm_labels(n, k, seed)
    num_comm = _num_communities(n, k, community_size)
    indptr, indices, report = _sbm_csr(y, k, num_comm, avg_degree=avg_degree, p_in_ratio=p_in_ratio,
                                       p_local=p_local, degree_exponent=degree_exponent, seed=seed)
    centroids = _sbm_centroids(feature_dim, k, seed)
    x = _gaussian_features(n, feature_dim, seed, feature_dtype, centroids, y, feature_noise)
    labels, num_labels, kind = _graph_labels(indptr, indices, x, y, k, seed, target_dim=target_dim,
                                             multilabel_dim=multilabel_dim, noise=target_noise)
    graph = Graph(indptr=indptr, indices=indices, x=x, y=labels, train_mask=masks[0],
                  val_mask=masks[1], test_mask=masks[2], num_classes=num_labels,
                  symmetric=True, name=name, preprocessing=report, label_kind=kind)
    log.debug("sbm_graph: %r, %d communities (%s)", graph, num_comm, report)
    return graph
