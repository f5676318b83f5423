r"""Negative destinations keyed by ``(seed, step, source, destination, j)``, independent of the partition.

For a positive edge :math:`(u, v)` (original ids) the :math:`j`-th negative destination is

.. math:: v'_j = h(h(h(h(h(\mathit{seed}) \oplus \mathit{step}) \oplus u) \oplus v) \oplus j) \bmod N

with :math:`h` the splitmix64 finaliser (a bijection of 64-bit words that mixes every input bit into
every output bit). The negative pair is :math:`(u, v'_j)`. Nothing depends on which rank holds the
edge or how the nodes were numbered, so P ranks draw exactly the negatives one device draws. The
draw is uniform over the nodes and does not exclude true edges (as OGB's and PyG's random
negatives for large graphs): a true edge drawn as a negative is scored as one.
"""

from __future__ import annotations

import numpy as np

__all__ = ["negative_destinations", "pair_sample", "splitmix64", "EVAL_STEP", "SAMPLE_STEP"]

_MASK = (1 << 64) - 1

EVAL_STEP = {"train": -1, "val": -2, "test": -3}
"""The ``step`` of each split's fixed evaluation negatives (training draws use the epoch, >= 0)."""
SAMPLE_STEP = -4
"""The ``step`` of :func:`pair_sample`'s key (apart from every negative draw's)."""


def splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser of uint64 ``x`` (element-wise, wrapping arithmetic)."""
    x = np.asarray(x, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _word(v: int) -> np.uint64:
    return np.uint64(int(v) & _MASK)


def _pair_hash(seed: int, step: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """uint64 ``[E]``: :math:`h(h(h(h(seed) \\oplus step) \\oplus u) \\oplus v)` of each pair."""
    key = splitmix64(splitmix64(np.array([_word(seed)], dtype=np.uint64)) ^ _word(step))
    h = splitmix64(key ^ np.asarray(src, dtype=np.int64).astype(np.uint64))
    return splitmix64(h ^ np.asarray(dst, dtype=np.int64).astype(np.uint64))


def pair_sample(seed: int, src: np.ndarray, dst: np.ndarray, fraction: float) -> np.ndarray:
    """bool ``[E]``: whether each pair ``(src[e], dst[e])`` (original ids) is in the sample of
    ``fraction`` of the pairs keyed by ``seed``: its hash at :data:`SAMPLE_STEP`, read as a
    uniform number in ``[0, 1)`` (its top 53 bits), is below ``fraction``."""
    h = _pair_hash(seed, SAMPLE_STEP, src, dst)
    return (h >> np.uint64(11)).astype(np.float64) * 2.0 ** -53 < fraction


def negative_destinations(seed: int, step: int, src: np.ndarray, dst: np.ndarray, num_nodes: int,
                          k: int = 1) -> np.ndarray:
    """``[E, k]`` int64 original ids: the ``k`` negative destinations of each edge ``src[e] -> dst[e]``
    (original ids, int64 ``[E]``) at ``step`` (an epoch, or an :data:`EVAL_STEP`), in ``[0, num_nodes)``."""
    if num_nodes < 1:
        raise ValueError(f"num_nodes={num_nodes} must be >= 1")
    h = _pair_hash(seed, step, src, dst)
    j = np.arange(k, dtype=np.uint64)
    h = splitmix64(h[:, None] ^ j[None, :])
    return (h % np.uint64(num_nodes)).astype(np.int64)
