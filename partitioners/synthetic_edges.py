"""Edge features planted over a labelled graph: the catalog's ``sbm-edges``.

:func:`planted_edge_features` gives every stored edge ``u -> v`` a float32 row of ``D`` values:

.. math::
    a_{uv, 0} = [y_u = y_v] + \\sigma \\epsilon_{uv, 0}, \\qquad a_{uv, j} = \\sigma \\epsilon_{uv, j}
    \\quad (1 \\le j < D)

so column 0 says, noisily, whether the edge joins two nodes of the same class (in a homophilous
SBM about two thirds do) and the other columns are distractors. A layer that reads edge features
(GINE, GAT with ``edge_dim``) can learn to discount the edges across classes, which a layer that
reads only the node features cannot tell apart. The noise :math:`\\epsilon` is a hash of the
*unordered* pair ``{u, v}``, the column and the seed (splitmix64, two uniforms, Box-Muller): the
two directions of an undirected edge get the same row, and a row does not depend on the order
the edges are stored in. Torch-free.
"""

from __future__ import annotations

import numpy as np

from .argcheck import check_int, check_seed
from .graph import Graph

__all__ = ["planted_edge_features"]

_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


def _splitmix64(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser of uint64 ``z`` (a new array)."""
    with np.errstate(over="ignore"):
        z = (z + np.uint64(0x9E3779B97F4A7C15)) & _MASK
        z = ((z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & _MASK
        z = ((z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & _MASK
        return z ^ (z >> np.uint64(31))


def _uniform(key: np.ndarray) -> np.ndarray:
    """float64 in ``(0, 1)`` from uint64 keys: the top 53 bits of their hash, offset by half a step."""
    return ((_splitmix64(key) >> np.uint64(11)).astype(np.float64) + 0.5) / float(1 << 53)


def planted_edge_features(graph: Graph, dim: int = 4, *, seed: int = 0, noise: float = 0.5) -> np.ndarray:
    """float32 ``[E, dim]`` edge features of ``graph`` (class labels ``y`` ``[N]``) in its CSR
    order, as the module docstring defines them; ``noise`` is :math:`\\sigma`."""
    dim = check_int("dim", dim, 1)
    seed = check_seed(seed)
    if graph.y is None or graph.y.ndim != 1:
        raise ValueError("planted_edge_features needs class labels y [N] (the same-class signal)")
    src, dst = graph.edges()
    lo = np.minimum(src, dst).astype(np.uint64)
    hi = np.maximum(src, dst).astype(np.uint64)
    with np.errstate(over="ignore"):
        pair = _splitmix64((lo * np.uint64(graph.num_nodes) + hi) ^ _splitmix64(np.full(1, seed, np.uint64)))
    out = np.empty((src.size, dim), dtype=np.float32)
    for j in range(dim):
        with np.errstate(over="ignore"):
            base = (pair + np.uint64(2 * j) * np.uint64(0xD1B54A32D192ED03)) & _MASK
        u1, u2 = _uniform(base), _uniform(base ^ np.uint64(0xA0761D6478BD642F))
        out[:, j] = noise * np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)
    out[:, 0] += (graph.y[src] == graph.y[dst])
    return out
