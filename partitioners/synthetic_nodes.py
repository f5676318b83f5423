"""The node data of the synthetic graphs: disjoint random train/val/test masks and Gaussian
features (plain ``N(0, 1)``, or around class centroids), each from its own seeded stream."""

from __future__ import annotations

import numpy as np

from .argcheck import check_float, check_int, check_seed
from .synthetic_draws import _FEATURES, _SPLIT, _rng

__all__ = ["random_split"]

_FEATURE_ROWS = 1 << 16
"""Rows of features generated per step (bounds the temporaries; does not change the result)."""

_FEATURE_DTYPES = ("float32", "float16")


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
