r"""Negative destinations keyed by ``(seed, step, source, destination, j)``, independent of the partition.

For a positive edge :math:`(u, v)` (original ids) the :math:`j`-th negative destination is

.. math:: v'_j = h(h(h(h(h(\mathit{seed}) \oplus \mathit{step}) \oplus u) \oplus v) \oplus j) \bmod N

with :math:`h` the splitmix64 finaliser (a bijection of 64-bit words that mixes every input bit into
every output bit). The negative pair is :math:`(u, v'_j)`. Nothing depends on which rank holds the
edge or how the nodes were numbered, so P ranks draw exactly the negatives one device draws. The
draw is uniform over the nodes and does not exclude true edges (as OGB's and PyG's random
negatives for large graphs): a true edge drawn as a negative is scored as one.

Triples of a typed graph :math:`(h, r, t)` (original ids, :math:`r` the relation id) corrupt one
end with a node **of that end's type**: with the triple's key
:math:`k = h(h(h(h(h(\mathit{seed}) \oplus \mathit{step}) \oplus h) \oplus t) \oplus r)`, the
corrupted end of a training triple is its top bit (:func:`corrupted_side`: 0 the tail, 1 the
head, each half of the triples), and the :math:`j`-th corruption of end :math:`e` is
:math:`o + h(h(k \oplus (e + 1)) \oplus j) \bmod n` for the end's type holding original ids
:math:`[o, o + n)` (:func:`typed_corruptions`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["negative_destinations", "pair_sample", "splitmix64", "EVAL_STEP", "SAMPLE_STEP", "corrupted_side",
           "typed_corruptions"]

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


def _triple_key(seed: int, step: int, src: np.ndarray, dst: np.ndarray, rel: np.ndarray) -> np.ndarray:
    """uint64 ``[E]``: the key of each triple ``(src, rel, dst)`` (original ids, relation ids)."""
    return splitmix64(_pair_hash(seed, step, src, dst) ^ np.asarray(rel, dtype=np.int64).astype(np.uint64))


def corrupted_side(seed: int, step: int, src: np.ndarray, dst: np.ndarray, rel: np.ndarray) -> np.ndarray:
    """int64 ``[E]``: which end of each triple a training step corrupts (0 the tail, 1 the head)."""
    return (_triple_key(seed, step, src, dst, rel) >> np.uint64(63)).astype(np.int64)


def typed_corruptions(seed: int, step: int, src: np.ndarray, dst: np.ndarray, rel: np.ndarray, side: np.ndarray,
                      lo: np.ndarray, count: np.ndarray, k: int = 1) -> np.ndarray:
    """``[E, k]`` int64 original ids: ``k`` corruptions of end ``side[e]`` (0 the tail, 1 the
    head) of each triple ``src[e] -rel[e]-> dst[e]``, uniform over that end's type's original ids
    ``[lo[e], lo[e] + count[e])``."""
    key = _triple_key(seed, step, src, dst, rel) ^ (np.asarray(side, dtype=np.int64) + 1).astype(np.uint64)
    h = splitmix64(splitmix64(key)[:, None] ^ np.arange(k, dtype=np.uint64)[None, :])
    count = np.asarray(count, dtype=np.int64)
    return np.asarray(lo, dtype=np.int64)[:, None] + (h % count.astype(np.uint64)[:, None]).astype(np.int64)
