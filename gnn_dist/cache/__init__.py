"""Tiered feature store: node input features served on the training device within a byte budget.

A rank's part has ``S = I + H`` feature rows: its ``I`` inner rows (``features.npy``, stored by
descending hotness) and ``H`` halo rows (other ranks' nodes that local edges read; they cross the
network once, at start, since input features never change). :class:`FeatureStore` keeps them in
two tiers:

* the **device tier**: the ``C`` top-ranked rows that fit the byte budget, in one tensor on the
  training device;
* the **host tier**: every row, in (pinned, for CUDA) host memory (``storage="host"``), or read
  in place from the segments, e.g. a read-only ``np.memmap`` of ``features.npy``
  (``storage="mmap"``). ``storage="device"`` puts every row on the device (no host tier).

Why a static ranking and no LRU: full-graph training reads every row every epoch, a cyclic
scan. On a cyclic scan larger than the cache, LRU evicts each row just before it is read again
and gets about no hits, while a static cache of ``C`` rows gets exactly ``C`` hits per scan. So
the tier is filled once, by a :class:`CachePolicy` ranking decided from the partition (the
``degree`` default ranks inner and halo rows together by their reads per epoch; inner rows are
stored hotness-sorted, so its tier is often the prefix ``[0, C)``), or once more
after the first epoch from the counted accesses (``frequency``).

Counters: hits, misses, hit rate and bytes copied host-to-device (:meth:`FeatureStore.stats`).
"""

from __future__ import annotations

from gnn_dist.cache.budget import format_bytes, parse_budget
from gnn_dist.cache.policies import (
    POLICIES,
    CachePolicy,
    RowInfo,
    degree_order,
    get_policy,
    oracle_order,
    register_policy,
)
from gnn_dist.cache.store import STORAGES, FeatureStore
from gnn_dist.cache.input import InputFeatures, precomputable

__all__ = [
    "POLICIES", "STORAGES", "CachePolicy", "FeatureStore", "RowInfo", "degree_order", "format_bytes",
    "get_policy", "oracle_order", "parse_budget", "register_policy", "InputFeatures", "precomputable",
]
