"""Labels planted over a graph's structure: regression targets and multi-label 0/1 matrices from a
2-hop mean-aggregated signal of the features (the catalog's ``sbm-regression`` and
``sbm-multilabel``). A model that reads the graph can fit them; one of a node's own features
cannot fully."""

from __future__ import annotations

import math

import numpy as np

from .synthetic_draws import _MULTILABELS, _TARGETS, _rng

__all__ = ["regression_targets", "multilabel_targets"]


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
