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

Legend: ``N`` nodes, ``E`` stored (directed) edges, ``F`` feature dim, ``K`` classes.
"""

from __future__ import annotations

import logging
import math
from typing import Iterator

import numpy as np

from .argcheck import check_float, check_int, check_seed
from .graph import Graph
from .graph_csr import csr_from_keys, index_dtype

__all__ = ["sbm_graph", "sbm_communities", "rmat_graph", "random_split", "regression_targets",
           "multilabel_targets"]

log = logging.getLogger(__name__)

_BLOCK_EDGES = 1 << 16
"""Edge draws per independent random stream (fixed, so ``chunk_edges`` never changes a result)."""

_FEATURE_ROWS = 1 << 16
"""Rows of features generated per step (bounds the temporaries; does not change the result)."""

# stream purposes (the first spawn_key entry)
_LABELS, _EDGES, _FEATURES, _SPLIT, _PERM, _CENTROIDS, _DEGREES, _COMMUNITIES, _TARGETS, _MULTILABELS = range(10)

_FEATURE_DTYPES = ("float32", "float16")

_DEGREE_STEPS = 4
"""SBM propensities are Pareto samples rounded down to multiples of ``1 / _DEGREE_STEPS``."""


# ---------------------------------------------------------------------------- helpers
def _rng(seed: int, *key: int) -> np.random.Generator:
    """The generator of stream ``key`` under ``seed`` (PCG64 seeded by a keyed SeedSequence)."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=key)))


def _blocks(num_draws: int) -> Iterator[tuple[int, int, int]]:
    """``(block_index, start, stop)`` of the fixed random-stream blocks over ``[0, num_draws)``."""
    for b in range(-(-num_draws // _BLOCK_EDGES)):
        yield b, b * _BLOCK_EDGES, min(num_draws, (b + 1) * _BLOCK_EDGES)


def _draw_blocks(num_draws: int, chunk_edges: int) -> Iterator[list[tuple[int, int, int]]]:
    """Group the fixed random-stream blocks into chunks of about ``chunk_edges`` draws.

    Yields lists of ``(block_index, start, stop)`` over ``[0, num_draws)``.
    """
    per_chunk = max(1, chunk_edges // _BLOCK_EDGES)
    chunk: list[tuple[int, int, int]] = []
    for block in _blocks(num_draws):
        chunk.append(block)
        if len(chunk) == per_chunk:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _clean_csr(keys: np.ndarray, num_keys: int, num_nodes: int, self_loops_removed: int,
               ) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """CSR by destination of the symmetric closure of the drawn edges, repeats dropped.

    The first ``num_keys`` entries of the int64 buffer ``keys`` (consumed) are the drawn edges as
    ``dst * N + src``, self-loops already dropped; with room for as many more after them, the
    reverses go there instead of into a second array. Returns ``indptr`` (int64 ``[N+1]``),
    ``indices`` (int32/int64 ``[E]``) and the preprocessing report: the arrays and counts of
    ``Graph.from_edges(src, dst, N, symmetrize=True, remove_self_loops=True,
    remove_duplicates=True)`` on the same draws, built by the same core (see
    :func:`partitioners.graph_csr.csr_from_keys`) without materialising ``src`` and ``dst``.
    """
    report = {"self_loops_removed": int(self_loops_removed)}
    indptr, indices, _, report = csr_from_keys(keys, num_nodes, num_keys=num_keys,
                                               symmetrize=True, remove_duplicates=True,
                                               report=report)
    return indptr, indices, report


def random_split(num_nodes: int, train_frac: float, val_frac: float, test_frac: float,
                 seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Disjoint random bool masks ``[N]`` (train, val, test) of about ``frac * N`` nodes each.

    Sizes are the differences of the rounded cumulative fractions (so they never sum past
    ``N``), raised to at least 1 each; which nodes go where is a seeded random permutation.
    Raises ``ValueError`` when a fraction is outside ``(0, 1]``, the fractions sum past 1, or
    ``num_nodes`` is too small for three non-empty sets.
    """
    seed = check_seed(seed)
    num_nodes = check_int("num_nodes", num_nodes, 1)
    fracs = {"train_frac": train_frac, "val_frac": val_frac, "test_frac": test_frac}
    for k, v in fracs.items():
        fracs[k] = check_float(k, v, 0.0, 1.0, lo_open=True)
    total = sum(fracs.values())
    if total > 1.0 + 1e-9:
        raise ValueError(f"train_frac + val_frac + test_frac = {total:g} exceeds 1; the masks must be disjoint")
    bounds = np.round(np.cumsum([0.0, *fracs.values()]) * num_nodes).astype(np.int64)
    counts = [max(1, int(c)) for c in np.diff(bounds)]
    if sum(counts) > num_nodes:
        raise ValueError(f"num_nodes={num_nodes} is too small for non-empty train/val/test sets "
                         f"of sizes {counts}")
    order = _rng(seed, _SPLIT).permutation(num_nodes)
    masks = []
    start = 0
    for c in counts:
        m = np.zeros(num_nodes, dtype=bool)
        m[order[start:start + c]] = True
        masks.append(m)
        start += c
    return masks[0], masks[1], masks[2]


def _gaussian_features(num_nodes: int, feature_dim: int, seed: int, dtype: str,
                       centroids: np.ndarray | None = None, labels: np.ndarray | None = None,
                       noise: float = 1.0) -> np.ndarray:
    """``centroids[labels] + noise * N(0, 1)`` (or plain ``N(0, 1)``), ``dtype[N, F]``, in row chunks."""
    x = np.empty((num_nodes, feature_dim), dtype=dtype)
    g = _rng(seed, _FEATURES)
    buf = np.empty((min(num_nodes, _FEATURE_ROWS), feature_dim), dtype=np.float32)
    for lo in range(0, num_nodes, _FEATURE_ROWS):
        hi = min(num_nodes, lo + _FEATURE_ROWS)
        b = buf[:hi - lo]
        g.standard_normal(out=b, dtype=np.float32)
        if centroids is not None:
            assert labels is not None
            b *= np.float32(noise)
            b += centroids[labels[lo:hi]]
        x[lo:hi] = b
    return x


def _check_feature_dtype(feature_dtype: str) -> None:
    if feature_dtype not in _FEATURE_DTYPES:
        raise ValueError(f"feature_dtype must be one of {', '.join(_FEATURE_DTYPES)}, got {feature_dtype!r}")


# ---------------------------------------------------------------------------- SBM
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


def _planted_signal(indptr: np.ndarray, indices: np.ndarray, x: np.ndarray, dim: int, seed: int,
                    noise: float, stream: int) -> np.ndarray:
    r"""float64 ``[N, D]``: :math:`\mathrm{std}(M^2 X W) + \sigma \epsilon`, ``W`` and ``\epsilon``
    drawn from ``stream`` of ``seed`` (see :func:`regression_targets`)."""
    import scipy.sparse as sp

    n, f = x.shape
    adj = sp.csr_matrix((np.ones(indices.size, np.float64), indices, indptr), shape=(n, n))
    inv = 1.0 / (np.diff(indptr).astype(np.float64) + 1.0)
    h = x.astype(np.float64)
    for _ in range(2):
        h = (h + adj @ h) * inv[:, None]
    g = _rng(seed, stream)
    t = h @ (g.standard_normal((f, dim)) / math.sqrt(f))
    t -= t.mean(axis=0)
    t /= np.maximum(t.std(axis=0), 1e-12)
    t += noise * g.standard_normal(t.shape)
    return t


def regression_targets(indptr: np.ndarray, indices: np.ndarray, x: np.ndarray, target_dim: int, seed: int,
                       noise: float = 0.1) -> np.ndarray:
    r"""float32 ``[N, D]`` targets planted over a graph: :math:`t = \mathrm{std}(M^2 X W) + \sigma \epsilon`.

    :math:`M` is the mean over a node's in-neighbours and itself (:math:`(M h)_v = (h_v +
    \sum_{u \to v} h_u) / (d_v + 1)`), applied twice to the features :math:`X` ``[N, F]``;
    :math:`W` ``[F, D]`` a fixed random Gaussian map (stream ``_TARGETS`` of ``seed``), each
    column of the result standardised to mean 0 and standard deviation 1, then
    :math:`\sigma` ``noise`` times standard normal noise added.
    """
    return _planted_signal(indptr, indices, x, target_dim, seed, noise, _TARGETS).astype(np.float32)


def multilabel_targets(indptr: np.ndarray, indices: np.ndarray, x: np.ndarray, num_labels: int, seed: int,
                       noise: float = 0.1, rates: tuple[float, float] = (0.1, 0.4)) -> np.ndarray:
    r"""uint8 ``[N, C]`` 0/1 labels planted over a graph: column :math:`c` is
    :math:`[t_c > q_c]`, with :math:`t` :func:`regression_targets`' signal of width ``C`` (its own
    map and noise: stream ``_MULTILABELS`` of ``seed``) and :math:`q_c` the column's
    :math:`1 - r_c` quantile, the rates :math:`r_c` evenly spaced over ``rates`` (default 10% to
    40% of the nodes per label)."""
    t = _planted_signal(indptr, indices, x, num_labels, seed, noise, _MULTILABELS)
    rate = np.linspace(rates[0], rates[1], num_labels)
    cut = np.array([np.quantile(t[:, c], 1.0 - rate[c]) for c in range(num_labels)])
    return (t > cut[None, :]).astype(np.uint8)


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
    avg_degree = check_float("avg_degree", avg_degree, 0.0, lo_open=True)
    p_in_ratio = check_float("p_in_ratio", p_in_ratio, 0.0, lo_open=True)
    if degree_exponent is not None:
        degree_exponent = check_float("degree_exponent", degree_exponent, 2.0, lo_open=True)
    if community_size is not None:
        community_size = check_int("community_size", community_size, 1)
    p_local = check_float("p_local", p_local, 0.0, 1.0)
    feature_noise = check_float("feature_noise", feature_noise, 0.0)
    if target_dim is not None and multilabel_dim is not None:
        raise ValueError("sbm_graph: pass target_dim (regression) or multilabel_dim (multi-label), not both")
    if target_dim is not None:
        target_dim = check_int("target_dim", target_dim, 1)
    if multilabel_dim is not None:
        multilabel_dim = check_int("multilabel_dim", multilabel_dim, 1)
    target_noise = check_float("target_noise", target_noise, 0.0)
    _check_feature_dtype(feature_dtype)
    n, k = num_nodes, num_classes
    masks = random_split(n, train_frac, val_frac, test_frac, seed)

    y = _sbm_labels(n, k, seed)
    num_comm = _num_communities(n, k, community_size)
    cell_of = _community_of(y, k, num_comm, seed)  # cell = community * K + class
    cell_of *= k
    cell_of += y
    keys, filled, loops = _sbm_edge_keys(cell_of, k, num_comm, avg_degree=avg_degree,
                                         p_in_ratio=p_in_ratio, p_local=p_local,
                                         degree_exponent=degree_exponent, seed=seed)
    del cell_of
    indptr, indices, report = _clean_csr(keys, filled, n, loops)
    del keys
    centroids = _sbm_centroids(feature_dim, k, seed)
    x = _gaussian_features(n, feature_dim, seed, feature_dtype, centroids, y, feature_noise)
    labels, num_labels, kind = y, k, "class"
    if target_dim is not None:
        labels, num_labels, kind = regression_targets(indptr, indices, x, target_dim, seed, target_noise), \
            target_dim, "regression"
    elif multilabel_dim is not None:
        labels, num_labels, kind = multilabel_targets(indptr, indices, x, multilabel_dim, seed, target_noise), \
            multilabel_dim, "multilabel"
    graph = Graph(indptr=indptr, indices=indices, x=x, y=labels, train_mask=masks[0],
                  val_mask=masks[1], test_mask=masks[2], num_classes=num_labels,
                  symmetric=True, name=name, preprocessing=report, label_kind=kind)
    log.debug("sbm_graph: %r, %d communities (%s)", graph, num_comm, report)
    return graph


# ---------------------------------------------------------------------------- R-MAT
def _rmat_edge_keys(perm: np.ndarray, num_edges: int, a: float, b: float, c: float, seed: int,
                    chunk_edges: int) -> tuple[np.ndarray, int, int, int]:
    """R-MAT's edge draws as keys ``dst * N + src`` of the permuted ids ``perm``:
    ``(keys, num_keys, self_loops_dropped, out_of_range_dropped)``, ``keys`` with room for the
    reverses after the kept draws (see :func:`_clean_csr`)."""
    n = perm.size
    levels = max(1, math.ceil(math.log2(n)))
    keys = np.empty(2 * num_edges, dtype=np.int64)  # second half: room for the reverses
    filled = loops = dropped = 0
    ab, abc = a + b, a + b + c
    for chunk in _draw_blocks(num_edges, chunk_edges):
        base = chunk[0][1]
        m = chunk[-1][2] - base
        gens = [(_rng(seed, _EDGES, blk), lo - base, hi - base) for blk, lo, hi in chunk]
        src = np.zeros(m, dtype=np.int64)
        dst = np.zeros(m, dtype=np.int64)
        r = np.empty(m, dtype=np.float64)
        for level in range(levels):
            for g, lo, hi in gens:  # each block's stream is drawn level by level
                g.random(out=r[lo:hi])
            # quadrants (1,0) and (1,1) set the source bit; (0,1) and (1,1) the destination bit
            src |= (r >= ab).astype(np.int64) << level
            dst |= (((r >= a) & (r < ab)) | (r >= abc)).astype(np.int64) << level
        del r
        inside = (src < n) & (dst < n)
        keep = inside & (src != dst)
        dropped += m - int(np.count_nonzero(inside))
        loops += int(np.count_nonzero(inside)) - int(np.count_nonzero(keep))
        src, dst = perm[src[keep]], perm[dst[keep]]
        keys[filled:filled + src.size] = dst * n + src
        filled += src.size
        del src, dst
    return keys, filled, loops, dropped


def rmat_graph(num_nodes: int, num_edges: int, *, a: float = 0.57, b: float = 0.19,
               c: float = 0.19, feature_dim: int = 32, num_classes: int = 16,
               train_frac: float = 0.1, val_frac: float = 0.1, test_frac: float = 0.8,
               seed: int = 0, feature_dtype: str = "float32", chunk_edges: int = 1 << 22,
               name: str = "") -> Graph:
    """A Graph500-style R-MAT (Kronecker) graph: skewed degrees, for scale and partitioning tests.

    ``num_edges`` edge draws: each picks its source and destination bit by bit over
    ``S = ceil(log2 N)`` levels, choosing quadrant ``(0,0)``, ``(0,1)``, ``(1,0)``, ``(1,1)``
    with probabilities ``a``, ``b``, ``c``, ``d = 1 - a - b - c`` (Graph500's defaults). Draws
    with an endpoint ``>= N`` (possible when ``N`` is not a power of two) are dropped. Node ids
    are then relabelled by a seeded random permutation, as Graph500 does, so degree does not
    follow id. Each draw is stored in both directions; self-loops and repeats (many: R-MAT
    concentrates on the low-id corner) are dropped and counted in ``preprocessing``, so
    ``num_edges`` bounds ``E / 2`` from above.

    Features are i.i.d. ``N(0, 1)`` and labels uniform in ``[0, K)``, independent of the graph:
    R-MAT is for scale and partition quality, not accuracy (use :func:`sbm_graph` for that).

    Args:
        num_nodes: ``N`` (>= 3).
        num_edges: edge draws (>= 1), e.g. Graph500's edge factor 16 times ``N``.
        a, b, c: quadrant probabilities (``a + b + c <= 1``; defaults 0.57/0.19/0.19).
        feature_dim, num_classes: ``F`` (>= 1) and ``K`` (>= 1) of the random features/labels.
        train_frac, val_frac, test_frac: sizes of the disjoint random masks (default: 0.1/0.1/0.8).
        seed: non-negative seed; the same seed and parameters give identical arrays (default: ``0``).
        feature_dtype: ``"float32"`` or ``"float16"`` (default: ``"float32"``).
        chunk_edges: edge draws vectorised at once; bounds memory, never changes the result.
        name: stored in :attr:`Graph.name`.

    Shapes: ``x`` ``[N, F]``, ``y`` int64 ``[N]``, masks bool ``[N]``, ``E <= 2 * num_edges``.
    """
    seed = check_seed(seed)
    num_nodes = check_int("num_nodes", num_nodes, 3)
    num_edges = check_int("num_edges", num_edges, 1)
    feature_dim = check_int("feature_dim", feature_dim, 1)
    num_classes = check_int("num_classes", num_classes, 1)
    chunk_edges = check_int("chunk_edges", chunk_edges, 1)
    a = check_float("a", a, 0.0, 1.0)
    b = check_float("b", b, 0.0, 1.0)
    c = check_float("c", c, 0.0, 1.0)
    if a + b + c > 1.0 + 1e-12:
        raise ValueError(f"a + b + c = {a + b + c:g} exceeds 1; d = 1 - a - b - c must be >= 0")
    _check_feature_dtype(feature_dtype)
    n = num_nodes
    masks = random_split(n, train_frac, val_frac, test_frac, seed)
    perm = _rng(seed, _PERM).permutation(n)

    keys, filled, loops, dropped = _rmat_edge_keys(perm, num_edges, a, b, c, seed, chunk_edges)
    indptr, indices, report = _clean_csr(keys, filled, n, loops)
    del keys
    if dropped:
        report["out_of_range_dropped"] = dropped

    y = _rng(seed, _LABELS).integers(0, num_classes, n, dtype=np.int64)
    x = _gaussian_features(n, feature_dim, seed, feature_dtype)
    graph = Graph(indptr=indptr, indices=indices, x=x, y=y, train_mask=masks[0],
                  val_mask=masks[1], test_mask=masks[2], num_classes=num_classes,
                  symmetric=True, name=name, preprocessing=report)
    log.debug("rmat_graph: %r (%s)", graph, report)
    return graph
