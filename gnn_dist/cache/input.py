"""The first layer's input: features served by a :class:`FeatureStore`, halo rows fetched once.

Legend: ``I`` inner rows, ``H`` halo rows, ``S = I + H``, ``F`` feature width, ``F'`` the first
layer's output width, ``D'`` destinations of one chunk.

Input features never change during training, so three things a per-layer exchange would repeat
every epoch are done once here:

- **static halo cache** (``static_halo=True``, default): the halo rows' input features cross the
  network once, when :class:`InputFeatures` is built (a collective), and are kept as the store's
  rows ``[I, S)``. Layer 0 then makes no exchange at all; later layers are unchanged.
- **precomputed first layer** (``precompute_first_layer``: ``"auto"``, the default, ``"on"``,
  ``"off"``): for layers that aggregate linearly before their weights (GCN, GraphSAGE-mean, GIN)
  the aggregate of the raw features is computed once (exact: ``A (X W) = (A X) W``) and each step
  applies only the weights. ``"auto"`` does so where it costs no memory: every source row on the
  device (no chunks), the halo rows static, no input dropout (whose masks change every step), and
  a first layer whose plain step aggregates the raw rows too (it keeps that aggregate for its
  weight gradient; a narrowing map applied first keeps none); ``"on"`` insists (an error for a
  first layer that cannot). With ``"on"`` an input dropout drops what the update reads instead
  of the raw rows: the precomputed aggregate and the destinations' own input rows, each on its
  own mask keyed by the destination's original id (PipeGCN's and BNS-GCN's ``--use-pp`` drop out
  the concatenation ``[x_v, mean x_u]`` alike), so P ranks still train what one does.
- **chunked first layer** (``first_layer_chunk_rows``): when the store's device tier does not
  hold every row, the first layer runs over chunks of destinations, each fetching only its
  chunk's source rows through the store; a chunk's rows are recomputed in backward
  (activation checkpointing) instead of kept, so device memory stays at the cache budget plus
  one chunk. Exact: each destination sees its whole in-neighbourhood in its chunk.

The built-in models take an :class:`InputFeatures` in place of ``x`` (see
:class:`~gnn_dist.models.LayerInput`); custom models can call :meth:`InputFeatures.source_rows`
for the ``[S, F]`` rows of the first layer.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from ..config import ConfigError
from ..config.registry import register_check
from ..nn import INPUT_ROOT_LAYER, Block
from ..nn.decomposable import is_decomposable, splits_update
from ..nn.dropout import RowDropout, call_conv
from .budget import parse_budget
from .policies import RowInfo, get_policy
from .store import STORAGES, FeatureStore

__all__ = ["InputFeatures", "precomputable", "check_feature_options", "precompute_mode", "PRECOMPUTE_MODES"]

log = logging.getLogger(__name__)

_AUTO_CHUNK_BYTES = 32 << 20
"""Least bytes of source rows per chunk of an automatically chunked first layer."""


PRECOMPUTE_MODES = ("auto", "on", "off")
"""The values of ``precompute_first_layer`` (module docstring)."""


def precompute_mode(value: Any) -> str:
    """``value`` as one of :data:`PRECOMPUTE_MODES` (``True`` / ``False``: ``"on"`` / ``"off"``);
    raises :class:`~gnn_dist.config.ConfigError` naming the option for anything else."""
    if value is True or value is False:
        return "on" if value else "off"
    if value not in PRECOMPUTE_MODES:
        raise ConfigError("precompute_first_layer", f"{value!r} is not valid: expected one of "
                                                    f"{', '.join(PRECOMPUTE_MODES)} (or true / false)")
    return str(value)


def check_feature_options(*, storage: str, cache_policy: str, static_halo: bool, precompute_first_layer: bool | str,
                          first_layer_chunk_rows: int | None, cache_budget: Any = None) -> None:
    """Raise :class:`~gnn_dist.config.ConfigError` naming the option for a bad value or
    combination (no data needed)."""
    if storage not in STORAGES:
        raise ConfigError("feature_storage", f"{storage!r} is not supported; choose from {', '.join(STORAGES)}")
    try:
        get_policy(cache_policy)
    except ValueError as exc:
        raise ConfigError("feature_cache_policy", str(exc)) from None
    try:
        parse_budget(cache_budget, 1)
    except ValueError as exc:
        raise ConfigError("feature_cache_budget", str(exc)) from None
    if not isinstance(static_halo, bool):
        raise ConfigError("static_halo", f"{static_halo!r} is not valid: expected true or false")
    if precompute_mode(precompute_first_layer) == "on" and not static_halo:
        raise ConfigError("precompute_first_layer", "needs static_halo=True (the halo rows' features are "
                                                    "aggregated once, so they must be fetched once)")
    if first_layer_chunk_rows is not None and (isinstance(first_layer_chunk_rows, bool)
                                               or not isinstance(first_layer_chunk_rows, int)
                                               or first_layer_chunk_rows < 0):
        raise ConfigError("first_layer_chunk_rows", f"{first_layer_chunk_rows!r} must be None (automatic), "
                                                    f"0 (never chunk) or a positive number of destination rows")


def check_feature_config(features: Any) -> None:
    """A :class:`~gnn_dist.config.FeatureConfig`: ``precompute_first_layer`` as one of
    :data:`PRECOMPUTE_MODES` (in place), then :func:`check_feature_options`."""
    features.precompute_first_layer = precompute_mode(features.precompute_first_layer)
    check_feature_options(storage=features.feature_storage, cache_policy=features.feature_cache_policy,
                          static_halo=features.static_halo, precompute_first_layer=features.precompute_first_layer,
                          first_layer_chunk_rows=features.first_layer_chunk_rows,
                          cache_budget=features.feature_cache_budget)


register_check("features", check_feature_config)   # gnn_dist.config's FeatureConfig


class InputFeatures:
    """One rank's first-layer input (a :class:`~gnn_dist.models.LayerInput`).

    Building it is a collective when ``static_halo`` is on (every rank builds its own at the same
    point): each rank sends the input rows its peers hold as halo rows, read straight from its
    ``features.npy``, once.

    Args:
        part: the rank's :class:`~gnn_dist.LocalPartition` (its ``features`` are read in place).
        storage: ``"device"`` (every row on the device), ``"host"`` (host memory, pinned on
            CUDA) or ``"mmap"`` (the part's ``features.npy`` read from disk), with a device tier of
            the top-ranked rows for the last two.
        cache_budget: the device tier's size: bytes (int), a fraction of the rows' bytes (float in
            ``[0, 1]``), a size string (``"4GB"``, ``"512MiB"``, ``"25%"``), or None (every row).
        cache_policy: how rows are ranked for the device tier (``gnn_dist.cache.POLICIES``).
        static_halo: fetch the halo rows once (default); False exchanges them every step.
        precompute_first_layer: aggregate the raw features once (GCN/SAGE/GIN first layers):
            ``"auto"`` when every source row is in the device tier (no chunks), the halo rows are
            static, the step has no input dropout and the layer's plain step aggregates the raw
            rows too (:meth:`layer`); ``"on"`` (or True) always; ``"off"`` (or False) never.
        first_layer_chunk_rows: destinations per chunk of the first layer; None: chunk only when
            the device tier does not hold every row (chunks of at least 32 MiB of source rows or
            half the budget); 0: never chunk.

    Attributes:
        store: the :class:`FeatureStore` (counters ``hits``, ``misses``, ``h2d_bytes`` ...).
        static_halo_bytes: bytes this rank sent for the one-time halo fetch.
    """

    def __init__(self, part: Any, *, storage: str = "device", cache_budget: str | int | float | None = None,
                 cache_policy: str = "degree", static_halo: bool = True, precompute_first_layer: bool | str = "auto",
                 first_layer_chunk_rows: int | None = None) -> None:
        check_feature_options(storage=storage, cache_policy=cache_policy, static_halo=static_halo,
                              precompute_first_layer=precompute_first_layer,
                              first_layer_chunk_rows=first_layer_chunk_rows, cache_budget=cache_budget)
        features = part.features
        if features is None:
            raise ValueError(f"{part.path}: the partition has no node features")
        self.block: Block = part.block
        self.num_rows = int(part.num_inner)
        self.dim = int(features.shape[1])
        self.static_halo = static_halo
        self.needs_exchange = not static_halo and storage != "device"
        """True when :meth:`layer` hands ``part.exchange`` a freshly gathered tensor on every
        call (``static_halo=False`` with a host/mmap store): then call it once per step for all
        rows, never per row subset. Without the static halo cache but with every row on the
        device, each call passes the same tensor (a view of the device tier), so a part that
        remembers its exchange by tensor identity exchanges once per step."""
        self._inner_view: torch.Tensor | None = None
        self.precompute_mode = precompute_mode(precompute_first_layer)
        ex = part.exchanger
        segments: list[np.ndarray | torch.Tensor] = [features]
        self.static_halo_bytes = 0
        if static_halo:
            sent_before = ex.bytes_sent
            send = torch.from_numpy(np.ascontiguousarray(features[ex.send_index.numpy()]))
            halo = ex.fetch_rows(send, tag="input")
            self.static_halo_bytes = ex.bytes_sent - sent_before
            segments.append(halo)
        self.policy = get_policy(cache_policy)
        num_src = self.num_rows + (part.num_halo if static_halo else 0)
        indices = self.block.indices if static_halo else self.block.indices[self.block.indices < num_src]
        info = RowInfo.from_graph(num_inner=self.num_rows, num_halo=num_src - self.num_rows, indices=indices,
                                  send_index=ex.send_index, hotness=part.hotness)
        self.store = FeatureStore.from_policy(segments, self.policy, info, device=part.device, storage=storage,
                                              budget=None if storage == "device" else cache_budget)
        row_bytes, budget = self.store.row_bytes, self.store.budget_bytes or 0
        fits = self.store.cached_rows >= num_src
        if first_layer_chunk_rows is None:
            self._chunk_bound = 0 if fits else max(1, max(_AUTO_CHUNK_BYTES, budget // 2) // max(row_bytes, 1))
        else:
            self._chunk_bound = first_layer_chunk_rows
        self.precompute = self.precompute_mode == "on" or (self.precompute_mode == "auto" and static_halo
                                                           and fits and not self._chunk_bound)
        """Whether a precomputable first layer (:func:`precomputable`) may be precomputed: always
        with ``"on"``; with ``"auto"`` when every source row is in the device tier, unchunked,
        and then only without input dropout, for a layer that aggregates its raw rows (:meth:`layer`)."""
        self._plans: dict[Any, list[tuple[Block, torch.Tensor, torch.Tensor]]] = {}
        self._host_block: Block | None = None
        self._raw_first: dict[tuple[nn.Module, torch.dtype, bool], bool] = {}
        """Per first layer, dtype and grad mode: whether its plain step aggregates the raw rows
        (``"auto"``'s test, :meth:`_auto_precomputes`)."""
        self._precomputed: dict[tuple[nn.Module, torch.dtype], tuple[torch.Tensor, torch.Tensor, bool]] = {}
        """Per first layer: its aggregate (or the update's fixed part of it), the inner rows, and
        whether the first is the fixed part."""
        log.info("input features: %r, static halo %s (%d bytes sent once), first layer %s", self.store,
                 "on" if static_halo else "off", self.static_halo_bytes,
                 self._first_layer_mode())

    @property
    def recomputed(self) -> bool:
        """The first layer runs in chunks that recompute in backward already (a recomputing
        schedule view leaves it as it is)."""
        return self.static_halo and bool(self._chunk_bound) and not self.precompute

    # ------------------------------------------------------------------ the LayerInput protocol
    def layer(self, conv: nn.Module, part: Any, *, dropout_key: Any = None, rows: torch.Tensor | None = None,
              input_dropout: RowDropout | None = None) -> torch.Tensor:
        """``conv``'s output ``[len(rows) or I, F']`` for destination rows ``rows`` (None: all
        ``I``, in order). ``part.exchange`` is called (layer 0's exchange) only with
        ``static_halo=False``. ``input_dropout`` drops the conv's source rows first (keyed by
        their original ids: the same masks for any ``rows`` and chunks); with
        ``precompute_first_layer="on"`` it drops the precomputed aggregate and the destinations'
        own rows instead (:meth:`_precomputed_layer`)."""
        dtype = _param_dtype(conv)
        if self.precompute_mode == "on" or (input_dropout is None and self._auto_precomputes(conv, dtype)):
            return self._precomputed_layer(conv, rows, dtype, input_dropout)
        if not self.static_halo:
            return self._run_rows(conv, part.exchange(self._inner_rows(dtype)), rows, dropout_key, input_dropout)
        if not self._chunk_bound:
            return self._run_rows(conv, self.store.gather_range(0, self.store.num_rows).to(dtype), rows, dropout_key,
                                  input_dropout)
        outs = []
        if dropout_key is not None and isinstance(dropout_key.step, torch.Tensor):
            # chunks are recomputed in backward, after the model has advanced its step buffer in
            # place: freeze this step's value so the recomputation draws the same masks
            dropout_key = dataclasses.replace(dropout_key, step=dropout_key.step.clone())
        if input_dropout is not None:
            input_dropout = input_dropout.frozen()
        for sub, src_rows, _ in self._plan(rows):
            fn = _ChunkFn(self.store, conv, sub, dtype, dropout_key, input_dropout)
            if torch.is_grad_enabled() and any(p.requires_grad for p in conv.parameters()):
                outs.append(checkpoint(fn, src_rows, use_reentrant=False, preserve_rng_state=False))
            else:
                outs.append(fn(src_rows))
        return torch.cat(outs, dim=0) if len(outs) != 1 else outs[0]

    def with_input_dropout(self, dropout: RowDropout) -> "DroppedInput":
        """This input with its first layer's source rows dropped by ``dropout`` (a
        :class:`~gnn_dist.models.LayerInput`: what a model's input dropout passes on, for one
        training step)."""
        return DroppedInput(self, dropout)

    def source_rows(self, dtype: torch.dtype | None = None) -> torch.Tensor:
        """All the first layer's source rows ``[S, F]`` (inner then halo rows) on the device, for
        custom models (needs ``static_halo``); ``dtype`` casts after the transfer."""
        if not self.static_halo:
            raise ValueError("source_rows needs static_halo=True (otherwise the halo rows are exchanged per step)")
        x = self.store.gather_range(0, self.store.num_rows)
        return x if dtype is None else x.to(dtype)

    def end_epoch(self) -> None:
        """After the first training step: a counting policy (``frequency``) re-ranks the store by
        the accesses it saw."""
        if self.store.counting:
            self.store.rerank()
            log.info("input features: re-ranked by access counts: %r", self.store)

    def stats(self) -> dict[str, Any]:
        """The store's counters (``hits``, ``misses``, ``hit_rate``, ``h2d_bytes``, ...)."""
        return self.store.stats()

    def __repr__(self) -> str:
        return f"InputFeatures({self.store!r}, static_halo={self.static_halo}, first_layer={self._first_layer_mode()})"

    # ------------------------------------------------------------------ internals
    def _first_layer_mode(self) -> str:
        """How the first layer runs (the start-up log line and the repr); with ``"auto"``, each
        layer's decision is logged when it is taken (:meth:`_auto_precomputes`)."""
        if self.precompute_mode == "on":
            return "precomputed"
        if self.precompute:
            return "auto"
        return f"chunks<={self._chunk_bound} rows" if self._chunk_bound else "whole"

    def _auto_precomputes(self, conv: nn.Module, dtype: torch.dtype) -> bool:
        """Whether ``"auto"`` precomputes ``conv``: a precomputable layer whose plain step
        aggregates the raw rows too (its ``begin`` hands them back unmapped, under this grad
        mode), so the cached aggregate takes the place of the one the step keeps for the weight
        gradient. A layer that maps first (a narrowing map) keeps no raw-width aggregate and would
        hold ``[I, F_in]`` more: it runs plain. Decided once per layer and grad mode."""
        if not (self.precompute and precomputable(conv)):
            return False
        key = (conv, dtype, torch.is_grad_enabled())
        if key not in self._raw_first:
            x = self.store.gather_range(0, self.store.num_rows).to(dtype)
            self._raw_first[key] = conv.begin(self.block, x)[1] is x
            log.info("first layer %r (%s): %s", conv, "training" if key[2] else "no gradient",
                     "precomputed (auto)" if self._raw_first[key] else
                     "runs plain (auto: it maps its rows first, so the raw aggregate would be extra memory)")
        return self._raw_first[key]

    def _run_rows(self, conv: nn.Module, x_src: torch.Tensor, rows: torch.Tensor | None,
                  key: Any, drop: RowDropout | None) -> torch.Tensor:
        block = self.block
        if rows is not None:
            block, src_rows, _ = self._plan(rows, whole=True)[0]
            x_src = x_src[src_rows]
        return call_conv(conv, block, x_src if drop is None else drop(block, x_src), key)

    def _inner_rows(self, dtype: torch.dtype) -> torch.Tensor:
        """The inner rows ``[I, F]`` in ``dtype`` on the device; with every row on the device, the
        same tensor on every call (see :attr:`needs_exchange`)."""
        if self.needs_exchange:
            return self.store.gather_range(0, self.num_rows).to(dtype)
        if self._inner_view is None or self._inner_view.dtype != dtype:
            self._inner_view = self.store.gather_range(0, self.num_rows).to(dtype)
        return self._inner_view

    def _plan(self, rows: torch.Tensor | None, whole: bool = False) -> list[tuple[Block, torch.Tensor, torch.Tensor]]:
        """Chunks ``(sub_block, src_rows, dst_rows)`` covering destinations ``rows`` (None: all),
        each with at most ``_chunk_bound`` destinations + in-edges (a bound on its source rows);
        one chunk if ``whole``. Cached by the rows' content.

        A chunked plan for a GPU stays in host memory (together its sub-blocks hold about as many
        edges as the part's block, more than the features chunking saves) and each chunk's
        structure moves to the device with its rows (:class:`_ChunkFn`); otherwise the plan lives
        on the block's device."""
        key = (whole, None if rows is None else _digest(rows))
        if key not in self._plans:
            bound = 0 if whole else self._chunk_bound
            block = self.block
            if bound and block.device.type != "cpu":
                if self._host_block is None:
                    self._host_block = block.to("cpu")
                block = self._host_block
            dst = torch.arange(self.num_rows, device=block.device) if rows is None else rows.to(block.device)
            plan = []
            for lo, hi in _chunk_bounds(block.in_count[dst].cpu().numpy(), bound):
                sub, src_rows = block.sub_block(dst[lo:hi])
                plan.append((sub, src_rows, dst[lo:hi]))
            self._plans[key] = plan
        return self._plans[key]

    def _precomputed_layer(self, conv: nn.Module, rows: torch.Tensor | None, dtype: torch.dtype,
                           drop: RowDropout | None = None) -> torch.Tensor:
        """The layer from the aggregate of its raw input rows, computed once (the layer protocol's
        ``begin(raw=True)`` / ``aggregate``), and its ``update`` on this step's weights. ``drop``
        drops the cached aggregate (or its fixed part: dropout commutes with the row scaling)
        with its own key and the destinations' input rows with the key's
        :data:`~gnn_dist.nn.INPUT_ROOT_LAYER` twin, both row-wise by original id."""
        if not precomputable(conv):
            raise ValueError(f"precompute_first_layer needs a first layer whose aggregation is linear and reads no "
                             f"parameter (gnn_dist.nn.DecomposableLayer with linear_aggregation = True: GCNConv, "
                             f"SAGEConv, GINConv), not {conv!r}")
        key = (conv, dtype)
        if key not in self._precomputed:
            with torch.no_grad():
                acc, x_inner = self._aggregate_once(conv, dtype)
                fixed = _fixed_update(conv, acc, conv.begin(self.block, x_inner, raw=True)[0])
                self._precomputed[key] = (acc if fixed is None else fixed, x_inner, fixed is not None)
        acc, x_inner, fixed = self._precomputed[key]
        block = self.block
        if rows is not None:
            block, src_rows, _ = self._plan(rows, whole=True)[0]
            acc, x_inner = acc[rows], x_inner[rows]
        if drop is not None:
            acc, x_inner = drop(block, acc), drop.with_layer(INPUT_ROOT_LAYER)(block, x_inner)
        ctx, _ = conv.begin(block, x_inner, raw=True)
        return conv.learned_update(acc, ctx) if fixed else conv.update(acc, ctx)

    def _aggregate_once(self, conv: Any, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """``(aggregate [I, F], x_inner [I, F])`` of the raw features: on the whole block, or
        chunk by chunk over the chunked layer's plan (dropped afterwards: it is used once)."""
        if not self._chunk_bound:
            chunks = [(self.block, self.store.gather_range(0, self.store.num_rows))]
        else:
            chunks = [(_on(sub, self.store.device), self.store.gather(src_rows)) for sub, src_rows, _ in self._plan(None)]
        parts = []
        for block, x_src in chunks:
            ctx, z = conv.begin(block, x_src.to(dtype), raw=True)
            parts.append(conv.aggregate(block, z, ctx, whole=True))
        if self._chunk_bound:
            self._plans.clear()
        return torch.cat(parts, dim=0) if len(parts) != 1 else parts[0], self.store.gather_range(0, self.num_rows).to(dtype)


def _fixed_update(conv: nn.Module, acc: torch.Tensor, ctx: Any) -> torch.Tensor | None:
    """The part of ``conv``'s update that reads no trained parameter, computed once with the
    aggregate (the layer protocol's optional ``fixed_update``; None without one)."""
    return conv.fixed_update(acc, ctx) if splits_update(conv) else None


def precomputable(conv: nn.Module) -> bool:
    """Whether :class:`InputFeatures` can precompute ``conv`` as a first layer: it implements the
    layer protocol with a linear aggregation that reads no parameter."""
    return is_decomposable(conv) and bool(getattr(conv, "linear_aggregation", False))


class DroppedInput:
    """An :class:`InputFeatures` whose first layer's source rows are dropped (a
    :class:`~gnn_dist.models.LayerInput`; :meth:`InputFeatures.with_input_dropout`)."""

    def __init__(self, base: InputFeatures, dropout: RowDropout) -> None:
        self.base, self.dropout = base, dropout
        self.num_rows, self.dim, self.needs_exchange = base.num_rows, base.dim, base.needs_exchange

    @property
    def recomputed(self) -> bool:
        return self.base.recomputed

    def layer(self, conv: nn.Module, part: Any, *, dropout_key: Any = None,
              rows: torch.Tensor | None = None) -> torch.Tensor:
        return self.base.layer(conv, part, dropout_key=dropout_key, rows=rows, input_dropout=self.dropout)

    def __repr__(self) -> str:
        return f"DroppedInput({self.base!r}, p={self.dropout.p})"


class _ChunkFn:
    """One chunk of the first layer: fetch its source rows through the store (dropped by
    ``drop``), run the conv."""

    def __init__(self, store: FeatureStore, conv: nn.Module, sub: Block, dtype: torch.dtype, key: Any,
                 drop: RowDropout | None = None) -> None:
        self.store, self.conv, self.sub, self.dtype, self.key, self.drop = store, conv, sub, dtype, key, drop

    def __call__(self, src_rows: torch.Tensor) -> torch.Tensor:
        sub = _on(self.sub, self.store.device)
        x_src = self.store.gather(src_rows).to(self.dtype)
        return call_conv(self.conv, sub, x_src if self.drop is None else self.drop(sub, x_src), self.key)


def _on(block: Block, device: torch.device) -> Block:
    """``block`` on ``device`` (a chunk's structure kept in host memory moves with its rows)."""
    return block if block.device == device else block.to(device, non_blocking=True)


def _param_dtype(conv: nn.Module) -> torch.dtype:
    """The dtype the conv computes in (its first floating parameter's; float32 without one)."""
    for p in conv.parameters():
        if p.is_floating_point():
            return p.dtype
    return torch.float32


def _digest(rows: torch.Tensor) -> tuple[int, str]:
    data = rows.detach().to("cpu", torch.int64).contiguous().numpy().tobytes()
    return rows.numel(), hashlib.blake2b(data, digest_size=16).hexdigest()


def _chunk_bounds(in_count: np.ndarray, bound: int) -> list[tuple[int, int]]:
    """Consecutive ``[lo, hi)`` ranges of destinations whose ``sum(in_count + 1) <= bound``
    (a destination over the bound gets a chunk of its own); one range when ``bound`` is 0."""
    n = len(in_count)
    if bound <= 0 or n == 0:
        return [(0, n)]
    cum = np.cumsum(in_count.astype(np.int64) + 1)
    out, lo, base = [], 0, 0
    while lo < n:
        hi = int(np.searchsorted(cum, base + bound, side="right"))
        hi = max(hi, lo + 1)
        out.append((lo, hi))
        base = int(cum[hi - 1])
        lo = hi
    return out
