"""Cache policies: which rows of a part the device tier holds, as an order of rows, hottest first.

A part's rows are its ``I`` inner rows (local ids ``[0, I)``, stored by descending hotness, see
``docs/format.md``) followed by its ``H`` halo rows (``[I, I + H)``). A policy ranks all
``S = I + H`` rows from a :class:`RowInfo`; the store caches the first rows of that order that
fit the byte budget. Policies are static (decided before training) because full-graph training
reads every row every epoch: a cyclic scan on which recency (LRU) predicts nothing.

Built-in policies (:data:`POLICIES`):

* ``degree`` (the default): inner and halo rows ranked together by their local reads per epoch,
  descending (see :func:`degree_order`): an inner row is read by its local out-edges and once as
  its own destination, a halo row by its local out-edges. Ties keep the stored order, inner rows
  first. When the ``C`` rows that fit are the first ``C`` inner rows, the device tier is the
  prefix ``[0, C)`` and the store keeps its fast path (a hit is ``id < C``).
* ``halo``: inner rows by ``fan_out`` descending (rows many peers read first), ties in stored
  order, then halo rows by ``local_reads`` descending.
* ``frequency``: starts from ``degree``'s order; the store counts the rows gathered during the
  first epoch and re-ranks by those counts after it (``FeatureStore.rerank``).
* ``none``: no device tier; every row is read from host memory or disk.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import torch

from ..config.registry import register_choices

__all__ = [
    "CachePolicy", "DegreePolicy", "FrequencyPolicy", "HaloPolicy", "NoCachePolicy", "POLICIES",
    "RowInfo", "degree_order", "get_policy", "oracle_order", "register_policy",
]


def _int64_vector(value: np.ndarray | torch.Tensor, field: str, length: int | None = None) -> np.ndarray:
    """``value`` as a 1-D ``np.int64`` array (a torch tensor is copied to the host first).

    Raises ``ValueError`` naming ``field`` when it is not 1-D integers of ``length`` entries.
    """
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    arr = np.asarray(value)
    if arr.ndim != 1 or not (np.issubdtype(arr.dtype, np.integer) or arr.size == 0):
        raise ValueError(f"{field} must be a 1-D integer array, got shape {arr.shape} and dtype {arr.dtype}")
    if length is not None and arr.shape[0] != length:
        raise ValueError(f"{field} must have {length} entries, got {arr.shape[0]}")
    return arr.astype(np.int64, copy=False)


@dataclass(kw_only=True, slots=True)
class RowInfo:
    """What a policy may rank a part's rows by. Arrays are host ``np.int64`` (converted on init).

    Rows are local ids: inner rows ``[0, num_inner)`` (stored by descending hotness), then halo
    rows ``[num_inner, num_inner + num_halo)``.
    """

    num_inner: int
    """``I``: rows the part owns (``features.npy`` rows)."""
    num_halo: int
    """``H``: rows of other parts' nodes that local edges read (received once, at start)."""
    hotness: np.ndarray | None = None
    """``[I]`` the partition's score (local out-edges + peers reading the row), descending:
    ``hotness.npy``. ``degree`` ranks inner rows by ``hotness - fan_out + 1`` (their reads per
    epoch) when it has ``fan_out`` and ``local_reads`` too."""
    fan_out: np.ndarray | None = None
    """``[I]`` how many peers read each inner row as a halo row (``bincount(send_index)``);
    needed by ``halo``."""
    local_reads: np.ndarray | None = None
    """``[I + H]`` how many local edges read each row as a source (``bincount(indices)``); ranks
    the halo rows (in stored order without it)."""

    def __post_init__(self) -> None:
        for field in ("num_inner", "num_halo"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise ValueError(f"RowInfo.{field} must be an int >= 0, got {value!r}")
            setattr(self, field, int(value))
        if self.hotness is not None:
            self.hotness = _int64_vector(self.hotness, "RowInfo.hotness", self.num_inner)
        if self.fan_out is not None:
            self.fan_out = _int64_vector(self.fan_out, "RowInfo.fan_out", self.num_inner)
        if self.local_reads is not None:
            self.local_reads = _int64_vector(self.local_reads, "RowInfo.local_reads", self.num_rows)

    @property
    def num_rows(self) -> int:
        """``S = I + H``."""
        return self.num_inner + self.num_halo

    @classmethod
    def from_graph(
        cls,
        *,
        num_inner: int,
        num_halo: int,
        indices: np.ndarray | torch.Tensor | None = None,
        send_index: np.ndarray | torch.Tensor | None = None,
        hotness: np.ndarray | torch.Tensor | None = None,
    ) -> RowInfo:
        """A :class:`RowInfo` from a part's arrays (``docs/format.md``).

        Args:
            indices: ``[E]`` CSR source ids (local, ``< I + H``): gives ``local_reads``.
            send_index: ``[sum of send sizes]`` the inner rows sent to each peer, concatenated
                over peers (each peer lists a row at most once): gives ``fan_out``.
            hotness: ``[I]`` kept as it is.
        """
        num_rows = int(num_inner) + int(num_halo)
        local_reads = fan_out = None
        if indices is not None:
            idx = _int64_vector(indices, "indices")
            if idx.size and (idx.min() < 0 or idx.max() >= num_rows):
                raise ValueError(f"indices must lie in [0, {num_rows}) (num_inner + num_halo), "
                                 f"got values in [{idx.min()}, {idx.max()}]")
            local_reads = np.bincount(idx, minlength=num_rows)
        if send_index is not None:
            sends = _int64_vector(send_index, "send_index")
            if sends.size and (sends.min() < 0 or sends.max() >= num_inner):
                raise ValueError(f"send_index must lie in [0, {num_inner}) (num_inner), "
                                 f"got values in [{sends.min()}, {sends.max()}]")
            fan_out = np.bincount(sends, minlength=int(num_inner))
        return cls(num_inner=num_inner, num_halo=num_halo, hotness=hotness, fan_out=fan_out,
                   local_reads=local_reads)


@runtime_checkable
class CachePolicy(Protocol):
    """Ranks a part's rows for the device tier (see the module docstring)."""

    name: str
    """The key in :data:`POLICIES`."""
    counts_accesses: bool
    """True when the store should count gathers during the first epoch and then call
    ``rerank()`` (``frequency``)."""
    uses_device_cache: bool
    """False when the store should cache no rows whatever the budget (``none``)."""

    def order(self, info: RowInfo) -> np.ndarray:
        """``np.int64 [S]``: a permutation of ``[0, S)``, hottest row first."""
        ...


def _descending(scores: np.ndarray) -> np.ndarray:
    """Indices of ``scores`` by descending score, ties in ascending index (a stable sort)."""
    return np.argsort(-scores.astype(np.int64, copy=False), kind="stable")


def _halo_rows(info: RowInfo) -> np.ndarray:
    """``[H]`` halo row ids by ``local_reads`` descending (stable), or stored order without it."""
    if info.local_reads is None:
        return np.arange(info.num_inner, info.num_rows, dtype=np.int64)
    return info.num_inner + _descending(info.local_reads[info.num_inner:])


def _epoch_reads(info: RowInfo) -> np.ndarray | None:
    """``np.int64 [S]``: how many times one pass of the first layer reads each row, as known before
    training; None unless ``info`` has ``hotness``, ``fan_out`` and ``local_reads``.

    An inner row is read by its local out-edges (``hotness - fan_out``: the partition's score
    less the peers it is sent to, which the one-time static halo fetch serves) and once as its own
    destination (``+ 1``); a halo row by its local out-edges (``local_reads``). A chunked first
    layer reads a row once per chunk that needs it, so the true count is at most this bound (and
    ranks rows nearly alike: ``benchmarks/cache.py`` compares it with the counted accesses).
    """
    if info.hotness is None or info.fan_out is None or info.local_reads is None:
        return None
    return np.concatenate([info.hotness - info.fan_out + 1, info.local_reads[info.num_inner:]])


def degree_order(info: RowInfo) -> np.ndarray:
    """``np.int64 [S]``: rows by their reads per epoch (:func:`_epoch_reads`) descending, ties in
    stored order (inner rows before halo rows). A part whose ``C`` top rows are its first ``C``
    inner rows gets the order ``[0, C)`` first, so the store's tier is a prefix.

    Without ``hotness``, ``fan_out`` or ``local_reads``: inner rows in stored (hotness) order,
    then halo rows by ``local_reads`` descending (stored order without it).
    """
    reads = _epoch_reads(info)
    if reads is None:
        return np.concatenate([np.arange(info.num_inner, dtype=np.int64), _halo_rows(info)])
    return _descending(reads)


class DegreePolicy:
    """``degree``: rows by their local reads per epoch (:func:`degree_order`), inner and halo
    together; the device tier is the prefix ``[0, C)`` when its ``C`` rows are the first inner rows."""

    name = "degree"
    counts_accesses = False
    uses_device_cache = True

    def order(self, info: RowInfo) -> np.ndarray:
        return degree_order(info)


class HaloPolicy:
    """``halo``: inner rows many peers read first (``fan_out`` descending), then halo rows."""

    name = "halo"
    counts_accesses = False
    uses_device_cache = True

    def order(self, info: RowInfo) -> np.ndarray:
        if info.fan_out is None:
            raise ValueError("the 'halo' cache policy needs RowInfo.fan_out (build the RowInfo with "
                             "RowInfo.from_graph(..., send_index=...))")
        return np.concatenate([_descending(info.fan_out), _halo_rows(info)])


class FrequencyPolicy:
    """``frequency``: ``degree``'s order until the store re-ranks by the first epoch's counts."""

    name = "frequency"
    counts_accesses = True
    uses_device_cache = True

    def order(self, info: RowInfo) -> np.ndarray:
        return degree_order(info)


class NoCachePolicy:
    """``none``: no device tier; the order is the stored one and unused."""

    name = "none"
    counts_accesses = False
    uses_device_cache = False

    def order(self, info: RowInfo) -> np.ndarray:
        return np.arange(info.num_rows, dtype=np.int64)


POLICIES: dict[str, type] = {
    cls.name: cls for cls in (DegreePolicy, HaloPolicy, FrequencyPolicy, NoCachePolicy)
}
"""Policy classes by name; :func:`register_policy` adds one."""
register_choices("cache_policy", lambda: tuple(sorted(POLICIES)))   # --feature-cache-policy (gnn_dist.config)


def get_policy(name: str) -> CachePolicy:
    """A new instance of the policy registered as ``name``.

    Raises ``ValueError`` listing the registered names when ``name`` is not one.
    """
    cls = POLICIES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ValueError(f"unknown cache policy {name!r}; expected one of {', '.join(POLICIES)} "
                         f"(or add one with gnn_dist.cache.register_policy)")
    return cls()


def register_policy(name: str, cls: type, *, overwrite: bool = False) -> None:
    """Make ``get_policy(name)`` return ``cls()``.

    ``cls()`` must build a :class:`CachePolicy` (``name``, ``counts_accesses``,
    ``uses_device_cache`` and ``order(info)``). Raises ``ValueError`` for an empty name, a class
    that is not a policy, or a name already taken (unless ``overwrite``).
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"a cache policy name must be a non-empty str, got {name!r}")
    if not isinstance(cls, type) or not isinstance(cls(), CachePolicy):
        raise ValueError(f"cache policy {name!r}: {cls!r} is not a class whose instances have name, "
                         f"counts_accesses, uses_device_cache and order(info)")
    if name in POLICIES and not overwrite and POLICIES[name] is not cls:
        raise ValueError(f"cache policy {name!r} is already registered ({POLICIES[name].__name__}); "
                         f"pass overwrite=True to replace it")
    POLICIES[name] = cls


def oracle_order(counts: np.ndarray | torch.Tensor) -> np.ndarray:
    """``np.int64 [S]``: rows by true access count descending, ties by row id (stable).

    ``counts`` is ``[S]`` non-negative integers, e.g. ``FeatureStore.access_counts`` after an
    epoch: the best static cache for that access trace (the benchmark's upper bound).
    """
    arr = _int64_vector(counts, "counts")
    if arr.size and arr.min() < 0:
        raise ValueError(f"counts must be >= 0, got a minimum of {arr.min()}")
    return _descending(arr)
