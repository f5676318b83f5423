"""What a model runs on: a part's block, its halo exchange, and the schedule's way of running a
layer. No collectives here: a part's ``exchange`` is whatever the caller gives.

Legend: ``I`` inner rows (the part's destinations ``D``), ``S`` = inner + halo source rows.

A model calls ``part.run_layer(i, conv, h, dropout_key=..., activation=...)`` for each layer ``i``
and the part (a rank's :class:`~gnn_dist.LocalPartition`, a training schedule's view, or a
:class:`FullGraph`) decides when the layer's halo rows travel: before the layer (``sync``,
:func:`exchange_then_run`), from the previous epoch (``stale``), or while the layer computes
(``overlap``). Custom models may instead call ``part.exchange(h)`` before each layer and run the
layer on ``part.block`` themselves; every part supports both.

**Narrower rows travel.** A layer that maps its rows to fewer columns before aggregating them
(:meth:`~gnn_dist.nn.decomposable.DecomposableLayer.narrows`: GraphSAGE and GCN's output layer,
``F_out < F_in``) needs only the mapped rows of its sources. Where the exchange hands out this
step's rows exactly (``maps_before_exchange`` on the part: ``sync``, evaluation, one device),
:func:`exchange_then_run` maps the inner rows, exchanges the mapped rows and aggregates them: the
halo's bytes (forward and backward) scale with ``F_out``, not ``F_in`` (a 4-layer GraphSAGE 256
wide over 8 classes sends a third less per step, a 2-layer GCN with its first layer precomputed
``F_in / F_out`` times less). Each halo row's map is then computed by its owner instead of its
reader: the same values up to the order of float additions (P ranks still equal one rank to
``1e-5``; one rank's bits are unchanged). ``stale`` exchanges the input rows, as PipeGCN does
(last epoch's rows meet this epoch's weights).
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Protocol

import torch
from torch import nn

from .block import Block
from .decomposable import is_decomposable
from .dropout import DropoutKey, call_conv, takes_dropout_key

__all__ = ["Activation", "LayerInput", "PartLike", "FullGraph", "exchange_then_run", "maps_before_exchange"]

Activation = Callable[[torch.Tensor, Optional[torch.Tensor]], torch.Tensor]
"""``activation(h_rows, rows)``: a hidden layer's nonlinearity and dropout applied to its output
rows ``rows`` (int64 destination ids; None: all ``I`` rows, in order). Row-wise, so a schedule
may compute a layer's output in pieces (e.g. the rows its peers need first)."""


class LayerInput(Protocol):
    """A first-layer input that computes the first conv itself (``gnn_dist.cache.InputFeatures``:
    features served by a tiered store, halo rows fetched once, optionally chunked or
    precomputed). A model passes one instead of a tensor as layer 0's input."""

    num_rows: int
    """``I``: the part's inner rows."""
    dim: int
    """``F_in``: the feature width."""
    needs_exchange: bool
    """Each :meth:`layer` call exchanges a freshly gathered tensor: call it once per step."""

    def layer(self, conv: nn.Module, part: "PartLike", *, dropout_key: Any = None,
              rows: torch.Tensor | None = None) -> torch.Tensor:
        """``conv``'s output ``[len(rows) or I, F']`` for destination rows ``rows`` (None: all);
        ``part.exchange`` fetches the halo rows if the input does not hold them."""
        ...


class PartLike(Protocol):
    """A block, a differentiable halo exchange and a way to run a layer."""

    block: Block
    maps_before_exchange: bool
    """Optional (default False): :meth:`exchange` returns this step's rows of its argument, so a
    layer that narrows its rows may map the inner rows first and exchange the mapped rows
    (:func:`exchange_then_run`); False where the halo rows are another step's (``stale``)."""

    def exchange(self, h_inner: torch.Tensor) -> torch.Tensor:
        """``[I, F]`` inner rows -> ``[S, F]`` inner rows then halo rows (differentiable)."""
        ...

    def run_layer(self, index: int, conv: nn.Module, h: torch.Tensor | LayerInput, *,
                  dropout_key: DropoutKey | None = None, activation: Activation | None = None) -> torch.Tensor:
        """Layer ``index`` (``conv``) of the model on input ``h`` (``[I, F]``, or a
        :class:`LayerInput` for layer 0), then ``activation`` (None: the output layer): ``[I, F']``."""
        ...


def exchange_then_run(part: PartLike, conv: nn.Module, h: torch.Tensor | LayerInput, *,
                      dropout_key: DropoutKey | None = None, activation: Activation | None = None) -> torch.Tensor:
    """A layer as ``sync`` runs it: the exchange (``part.exchange``, or the input's own fetch),
    then the conv on the whole block, then the activation. A layer that narrows its rows
    (:func:`maps_before_exchange`) maps the inner rows first and the mapped rows travel."""
    if isinstance(h, torch.Tensor):
        if maps_before_exchange(part, conv, h):
            out = _map_exchange_aggregate(part, conv, h, dropout_key)
        else:
            out = call_conv(conv, part.block, part.exchange(h), dropout_key)
    else:
        out = h.layer(conv, part, dropout_key=dropout_key)
    return out if activation is None else activation(out, None)


def maps_before_exchange(part: Any, conv: nn.Module, h: torch.Tensor) -> bool:
    """Whether :func:`exchange_then_run` runs ``conv`` on ``h`` (``[I, F]``) by exchanging its
    mapped rows: the part's exchange is exact (``part.maps_before_exchange``) and the layer
    implements the layer protocol and narrows ``h``'s rows before aggregating them
    (:meth:`~gnn_dist.nn.decomposable.DecomposableLayer.narrows`)."""
    if not getattr(part, "maps_before_exchange", False):
        return False
    narrows = getattr(conv, "narrows", None)
    return narrows is not None and is_decomposable(conv) and bool(narrows(h))


def _map_exchange_aggregate(part: PartLike, conv: Any, h: torch.Tensor, dropout_key: DropoutKey | None) -> torch.Tensor:
    """The layer's :func:`~gnn_dist.nn.decomposable.propagate` with the exchange between the map
    and the aggregation: ``begin`` on the inner rows (the destinations), the exchange of their
    mapped rows, then one aggregation over the whole block."""
    key = dropout_key if takes_dropout_key(conv) else None   # as call_conv hands it
    ctx, z_inner = conv.begin(part.block, h, key)
    return conv.update(conv.aggregate(part.block, part.exchange(z_inner), ctx, whole=True), ctx)


class FullGraph:
    """A whole graph on one device as a :class:`PartLike`: no halo, ``exchange`` is the identity.

    ``FullGraph(Block.from_graph(indptr, indices))`` runs a model without any process group.
    """

    maps_before_exchange = True
    """The exchange is the identity: a narrowing layer's mapped rows are its whole input."""

    def __init__(self, block: Block) -> None:
        if block.num_halo:
            raise ValueError(f"FullGraph needs a block without halo rows, got {block!r}")
        self.block = block

    def exchange(self, h_inner: torch.Tensor) -> torch.Tensor:
        return h_inner

    def run_layer(self, index: int, conv: nn.Module, h: torch.Tensor | LayerInput, *,
                  dropout_key: DropoutKey | None = None, activation: Activation | None = None) -> torch.Tensor:
        return exchange_then_run(self, conv, h, dropout_key=dropout_key, activation=activation)

    def __repr__(self) -> str:
        return f"FullGraph({self.block!r})"
