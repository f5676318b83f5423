"""The layer protocol: a conv whose aggregation is a sum over edges that can be taken over any
subset of its source rows, followed by an update.

Legend: ``D`` destinations, ``S`` sources (the ``D`` destinations first, then the other rows),
``s`` rows of one group of sources, ``F`` width.

A :class:`DecomposableLayer` computes, for destination ``v``,

.. math::
    \\mathbf{x}'_v = \\mathrm{update}\\Big(\\bigoplus_{u \\to v} m(\\mathbf{z}_u, v),\\ v\\Big),
    \\qquad \\mathbf{z}_u = \\mathrm{transform}(\\mathbf{x}_u)

where ``transform`` maps source rows one by one (a linear map, or the identity) and ``⊕`` is
associative and commutative (a sum; GAT's is a softmax-weighted sum, kept as numerator,
denominator and running maximum). So the sources may be split into any groups, each group
aggregated alone (:meth:`~DecomposableLayer.aggregate`) and the partial results merged
(:meth:`~DecomposableLayer.merge`): what a part of the work needs before its halo rows arrive.
The five methods, in the order a schedule calls them:

.. code-block:: text

    ctx, z = layer.begin(block, x_first, dropout_key)   # x_first [s >= D, F]: destinations first
    acc = layer.aggregate(group_0, z, ctx)               # group_0: the block's edges from those rows
    for group, x in the other groups:                    # (e.g. the halo rows, once they arrive)
        acc = layer.merge(acc, layer.aggregate(group, layer.transform(x, ctx), ctx))
    out = layer.update(acc, ctx)                         # [D, F']

A group is a :class:`~gnn_dist.nn.Block` over the same destinations whose sources are the
group's rows (renumbered from 0), with their global degrees and original ids; the whole block is
the one group that holds every source (``whole=True``: a layer may then finish its aggregation
in one fused kernel). :func:`propagate` is the whole layer, and each built-in layer's
``forward``; :func:`propagate_groups` the layer over a split of its sources (the ``overlap``
schedule). A layer whose aggregation is linear and reads no parameter when asked to aggregate
its raw input rows (``begin(..., raw=True)``; ``linear_aggregation = True``) can also have its
first layer's aggregation computed once (the feature cache's precomputed first layer).

What a layer gets from implementing the protocol: the ``overlap`` schedule (inner sources
first, halo sources when they arrive) and the precomputed first layer, with no other file
touched. Every layer, decomposable or not, runs under ``sync`` and ``stale`` and through the
feature cache's chunked first layer (a destination's whole neighbourhood is in its block).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import torch

from .block import Block
from .dropout import DropoutKey

__all__ = ["DecomposableLayer", "propagate", "propagate_groups", "is_decomposable", "splits_update", "check_first"]


@runtime_checkable
class DecomposableLayer(Protocol):
    """A conv whose aggregation decomposes over any grouping of its source rows (see the module
    docstring). ``ctx`` and the partial aggregates are the layer's own objects; the schedule only
    passes them back."""

    def begin(self, block: Block, x_first: torch.Tensor, dropout_key: DropoutKey | None = None, *,
              raw: bool = False) -> tuple[Any, torch.Tensor]:
        """``(ctx, z_first)``: what :meth:`aggregate` and :meth:`update` need of the destinations,
        and the transform of the first ``s >= D`` source rows ``x_first`` (the destinations
        first). ``raw=True`` (layers with ``linear_aggregation``): aggregate the rows as given
        (``transform`` is the identity and reads no parameter)."""
        ...

    def transform(self, x: torch.Tensor, ctx: Any) -> torch.Tensor:
        """The row-wise transform of more source rows (the same map as :meth:`begin`'s)."""
        ...

    def aggregate(self, group: Block, z: torch.Tensor, ctx: Any, *, whole: bool = False) -> Any:
        """The partial aggregate over ``group``'s edges of its source rows ``z``; ``whole``: the
        group is the whole block (every source, every in-edge)."""
        ...

    def merge(self, a: Any, b: Any) -> Any:
        """Two partial aggregates of disjoint source groups as one."""
        ...

    # Optional: ``narrows(x) -> bool``, whether :meth:`begin` on rows ``x`` (not ``raw``) maps them
    # to fewer columns before aggregating them. A schedule whose exchange is exact then maps the
    # inner rows and exchanges the narrower mapped rows (:func:`gnn_dist.nn.part.exchange_then_run`);
    # :meth:`transform` is not called. Without it the input rows are exchanged.

    def update(self, acc: Any, ctx: Any) -> torch.Tensor:
        """The output ``[D, F']`` from the aggregate of every source (``acc`` is not modified).

        Optional, for the precomputed first layer: ``fixed_update(acc, ctx)``, the part of
        :meth:`update` that reads no trained parameter (None when there is none), and
        ``learned_update(fixed, ctx)``, the rest, with ``learned_update(fixed_update(acc, ctx),
        ctx)`` equal to ``update(acc, ctx)`` bit for bit and ``fixed_update`` row-wise; the feature
        cache then computes the fixed part once (GCN's self term, SAGE's mean, GIN's
        ``(1 + eps) x``)."""
        ...


def is_decomposable(layer: Any) -> bool:
    """Whether ``layer`` implements :class:`DecomposableLayer` and its ``forward`` computes what
    the protocol computes: a subclass that overrides ``forward`` (but not the protocol's methods)
    computes something else, so it is not decomposable."""
    if not isinstance(layer, DecomposableLayer):
        return False
    mro = type(layer).__mro__
    owner, forward = _owner(layer, "update"), _owner(layer, "forward")
    return owner is not None and forward is not None and mro.index(forward) >= mro.index(owner)


def splits_update(layer: Any) -> bool:
    """Whether ``layer`` has the protocol's optional ``fixed_update`` / ``learned_update`` pair
    (see :meth:`DecomposableLayer.update`), defined by the class that defines ``update``: a
    subclass that overrides ``update`` alone computes something else, and its ``update`` is used."""
    owner = _owner(layer, "fixed_update")
    return owner is not None and owner is _owner(layer, "learned_update") is _owner(layer, "update")


def _owner(layer: Any, name: str) -> type | None:
    """The class in ``layer``'s MRO that defines attribute ``name`` (None: none does)."""
    return next((c for c in type(layer).__mro__ if name in vars(c)), None)


def propagate(layer: DecomposableLayer, block: Block, x_src: torch.Tensor,
              dropout_key: DropoutKey | None = None) -> torch.Tensor:
    """The whole layer on ``block``: ``[S, F] -> [D, F']`` (one group: every source)."""
    ctx, z = layer.begin(block, x_src, dropout_key)
    return layer.update(layer.aggregate(block, z, ctx, whole=True), ctx)


def propagate_groups(layer: DecomposableLayer, block: Block, first: tuple[Block, torch.Tensor],
                     *rest: tuple[Block, Callable[[], torch.Tensor]],
                     dropout_key: DropoutKey | None = None) -> torch.Tensor:
    """The layer on ``block`` with its sources in groups: ``first = (group, x_first)``, the rows
    that start with the destinations, aggregated at once; each of ``rest = (group, rows)`` calls
    ``rows()`` (which may wait for the rows to arrive) only after the groups before it are
    aggregated. Equal to :func:`propagate` up to the order of float additions."""
    group, x_first = first
    ctx, z = layer.begin(block, x_first, dropout_key)
    acc = layer.aggregate(group, z, ctx)
    for group, rows in rest:
        acc = layer.merge(acc, layer.aggregate(group, layer.transform(rows(), ctx), ctx))
    return layer.update(acc, ctx)


def check_first(block: Block, x_first: torch.Tensor, in_channels: int | None, layer: Any) -> None:
    """Raise ``ValueError`` unless ``x_first`` is ``[s, in_channels]`` with ``D <= s <= S`` (the
    first source rows of ``block``, destinations first)."""
    if not isinstance(x_first, torch.Tensor) or x_first.dim() != 2:
        shape = list(x_first.shape) if isinstance(x_first, torch.Tensor) else type(x_first).__name__
        raise ValueError(f"{layer!r}: the source rows must be a 2-D tensor [rows, in_channels], got {shape}")
    if not block.num_dst <= x_first.shape[0] <= block.num_src:
        raise ValueError(f"{layer!r}: {x_first.shape[0]} source rows given; the block's first sources are its "
                         f"{block.num_dst} destinations, of {block.num_src} sources")
    if in_channels is not None and x_first.shape[1] != in_channels:
        raise ValueError(f"{layer!r}: the source rows have {x_first.shape[1]} features but in_channels = {in_channels}")
