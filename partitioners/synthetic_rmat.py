"""The Graph500-style R-MAT (Kronecker) generator: skewed degrees and random labels, for scale and
partitioning tests (:func:`rmat_graph`)."""

from __future__ import annotations

import logging
import math

import numpy as np

from .argcheck import check_float, check_int, check_seed
from .graph import Graph
from .synthetic_draws import _EDGES, _LABELS, _PERM, _clean_csr, _draw_blocks, _rng
from .synthetic_nodes import _check_feature_dtype, _gaussian_features, random_split

__all__ = ["rmat_graph"]

log = logging.getLogger("partitioners.synthetic")   # the generators' one logger


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
