"""Partition-independent dropout: masks from a counter-based hash, not from an RNG stream.

An RNG stream hands out numbers in the order rows are visited, so the mask a node gets depends
on which rank holds it and what else is on that rank. Here the keep/drop decision for one element
is a pure function of ``(seed, step, layer, original node id, feature)`` (or, for attention,
``(seed, step, layer, original source id, original destination id, head)``): a splitmix64-style
hash compared with ``p``. The same node gets the same mask on any rank of any partitioning, so
``P`` ranks compute exactly what one device computes, dropout included.

The hash (:mod:`gnn_dist.hashing`) works in int64 torch ops on any device, with no host
synchronisation; on CPU a feature mask and its product are one numba pass each
(:mod:`gnn_dist.kernels.dropout_numba`), the same bits.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch

from ..hashing import CHUNK_ELEMENTS, GOLDEN, IntLike, absorb, hash_bits, mix, srl
from ..kernels.dropout_numba import KEPT, RELU_PASSES, keep_mask, masked_scale, relu_dropout, relu_dropout_backward

__all__ = ["DropoutKey", "RowDropout", "INPUT_LAYER", "INPUT_ROOT_LAYER", "hash_dropout", "relu_hash_dropout",
           "hash_edge_dropout", "hash_bits"]

_NODE_DOMAIN = 0x6E6F6465  # "node": feature dropout
_EDGE_DOMAIN = 0x65646765  # "edge": attention dropout


@dataclass(frozen=True, slots=True)
class DropoutKey:
    """What a layer's dropout mask is keyed by, besides the node/edge ids and the feature/head."""

    seed: int
    """The model's dropout seed."""
    step: IntLike
    """The training step (a 0-dim int64 tensor buffer in the models, so no host sync)."""
    layer: int
    """The layer index inside the model."""


def _keep(bits: torch.Tensor, threshold: int) -> torch.Tensor:
    """True where the top 32 bits of ``bits`` are ``>= threshold`` (probability ``1 - threshold / 2**32``)."""
    return srl(bits, 32) >= threshold


class _MaskedScale(torch.autograd.Function):
    """``x * (mask * scale)`` that keeps the boolean mask for backward (1 byte an element), not
    the float factor a plain product would keep (4), and computes ``x * mask`` then scales it in
    place: one ``[N, F]`` result, no float factor beside it. For float32 the same values as the
    product with the factor, bit for bit (``x * 1 * s = x * s``, ``x * 0 * s = x * 0``, signs and
    NaNs included); bfloat16 scales by ``s`` in float32 instead of ``s`` rounded to bfloat16."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, mask: torch.Tensor, scale: float) -> torch.Tensor:  # type: ignore[override]
        ctx.save_for_backward(mask)
        ctx.scale = scale
        return _scaled(x, mask, scale)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        (mask,) = ctx.saved_tensors
        return _scaled(grad, mask, ctx.scale), None, None


def _scaled(x: torch.Tensor, mask: torch.Tensor, scale: float) -> torch.Tensor:
    """``x.mul(mask).mul_(scale)``; a float32 CPU tensor in one numba pass, the same bits
    (:func:`~gnn_dist.kernels.dropout_numba.masked_scale`)."""
    if x.device.type == "cpu" and x.dtype == torch.float32 and x.dim() == 2 and x.shape == mask.shape:
        return torch.from_numpy(masked_scale(x.detach().contiguous().numpy(), mask.contiguous().numpy(), scale))
    return x.mul(mask).mul_(scale)


def _check_p(p: float, who: str) -> float:
    p = float(p)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{who}: dropout probability p must be in [0, 1], got {p}")
    return p


def hash_dropout(x: torch.Tensor, p: float, *, seed: int, step: IntLike, layer: int,
                 row_ids: torch.Tensor, training: bool = True) -> torch.Tensor:
    r"""Dropout whose mask depends only on ``(seed, step, layer, row_ids[i], j)``.

    .. math::
        \mathrm{out}_{ij} = \frac{m_{ij}}{1 - p} x_{ij}, \qquad
        m_{ij} = [\, h(\mathrm{seed}, \mathrm{step}, \mathrm{layer}, \mathrm{id}_i, j) \ge p \cdot 2^{32} \,]

    with :math:`h` the top 32 bits of a splitmix64-style hash. A row's mask does not depend on
    its position or on the other rows, so any partition of the rows gets the same masks.

    Args:
        x (torch.Tensor): ``[N, F]`` features.
        p (float): drop probability in ``[0, 1]``.
        seed (int): the model's seed.
        step (int or torch.Tensor): training step (0-dim int64 tensor allowed, no host sync).
        layer (int): layer index.
        row_ids (torch.Tensor): int64 ``[N]``: the original (partition-independent) id of each row.
        training (bool): identity when False. (default: :obj:`True`)

    Returns:
        torch.Tensor: ``[N, F]``, ``x`` itself when ``p == 0`` or not training.
    """
    p = _check_p(p, "hash_dropout")
    if not training or p == 0.0:
        return x
    if x.dim() != 2 or row_ids.shape != (x.shape[0],):
        raise ValueError(f"hash_dropout: x must be [N, F] with row_ids [N], got x {list(x.shape)} "
                         f"and row_ids {list(row_ids.shape)}")
    if p == 1.0:
        return x * 0.0
    base = hash_bits(_NODE_DOMAIN, seed, step, layer, device=x.device)
    threshold = int(p * (1 << 32))
    if x.device.type == "cpu":   # one numba pass, the same bits (kernels/hash_numba.py)
        mask = torch.from_numpy(keep_mask(row_ids.to(torch.long).numpy(), int(base), threshold, x.shape[1]))
        return _MaskedScale.apply(x, mask, 1.0 / (1.0 - p))
    return _MaskedScale.apply(x, _row_mask(base, row_ids, x.shape[1], threshold, x.device), 1.0 / (1.0 - p))


def _row_mask(base: torch.Tensor, row_ids: torch.Tensor, width: int, threshold: int,
              device: torch.device) -> torch.Tensor:
    """bool ``[N, width]``: the keep mask of rows of original ids ``row_ids`` in int64 torch ops
    (any device; in chunks of :data:`CHUNK_ELEMENTS`)."""
    cols = mix(torch.arange(width, dtype=torch.long, device=device) + GOLDEN)
    ids = row_ids.to(device=device, dtype=torch.long)
    mask = torch.empty((ids.shape[0], width), dtype=torch.bool, device=device)
    rows_per_chunk = max(1, CHUNK_ELEMENTS // max(1, width))
    for lo in range(0, ids.shape[0], rows_per_chunk):
        hi = min(ids.shape[0], lo + rows_per_chunk)
        mask[lo:hi] = _keep(mix(absorb(base, ids[lo:hi]).unsqueeze(1) + cols), threshold)
    return mask


def relu_hash_dropout(x: torch.Tensor, p: float, *, seed: int, step: IntLike, layer: int,
                      row_ids: torch.Tensor, training: bool = True) -> torch.Tensor:
    """``hash_dropout(torch.relu(x), ...)``, the same bits, as one op that keeps one byte an element
    for the backward where the two keep the mask and ReLU's output (4 bytes in float32); on CPU
    (float32) one numba pass forward and one backward (:func:`~gnn_dist.kernels.dropout_numba.relu_dropout`)."""
    p = _check_p(p, "relu_hash_dropout")
    if not (training and 0.0 < p < 1.0) or x.dim() != 2 or row_ids.shape != (x.shape[0],):
        return hash_dropout(torch.relu(x), p, seed=seed, step=step, layer=layer, row_ids=row_ids, training=training)
    return _ReluDropout.apply(x, row_ids, hash_bits(_NODE_DOMAIN, seed, step, layer, device=x.device),
                              int(p * (1 << 32)), 1.0 / (1.0 - p))


class _ReluDropout(torch.autograd.Function):
    """:func:`relu_hash_dropout`: the output and a uint8 code per element for the backward
    (:data:`~gnn_dist.kernels.dropout_numba.KEPT`, :data:`~gnn_dist.kernels.dropout_numba.RELU_PASSES`);
    float32 on CPU in one numba pass each way, elsewhere in torch ops, the same bits."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, row_ids: torch.Tensor, base: torch.Tensor, threshold: int,  # type: ignore[override]
                scale: float) -> torch.Tensor:
        x = x.detach()
        if x.device.type == "cpu" and x.dtype == torch.float32:
            out, code = relu_dropout(x.contiguous().numpy(), row_ids.to(torch.long).numpy(), int(base), threshold,
                                     scale)
            out, code = torch.from_numpy(out), torch.from_numpy(code)
        else:
            r = torch.relu(x)
            mask = _row_mask(base, row_ids, x.shape[1], threshold, x.device)
            out = _scaled(r, mask, scale)
            code = mask.to(torch.uint8) | (r > 0).logical_or_(r.isnan()).to(torch.uint8).mul_(int(RELU_PASSES))
        ctx.save_for_backward(code)
        ctx.scale = scale
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        (code,) = ctx.saved_tensors
        if grad.device.type == "cpu" and grad.dtype == torch.float32:
            g = torch.from_numpy(relu_dropout_backward(grad.contiguous().numpy(), code.numpy(), ctx.scale))
        else:   # the dropout's backward, then ReLU's (threshold_backward: +0 where it blocks)
            g = _scaled(grad, (code & int(KEPT)).bool(), ctx.scale)
            g = torch.where((code & int(RELU_PASSES)).bool(), g, torch.zeros((), dtype=g.dtype, device=g.device))
        return g, None, None, None, None


def hash_edge_dropout(values: torch.Tensor, p: float, *, key: DropoutKey, src_ids: torch.Tensor,
                      dst_ids: torch.Tensor, training: bool = True) -> torch.Tensor:
    r"""Dropout of per-edge, per-head values ``[E, H]`` keyed by ``(key, src_ids[e], dst_ids[e], head)``.

    Used for attention coefficients. ``src_ids``/``dst_ids`` (int64 ``[E]``) are original node
    ids, so an edge gets the same mask on whichever rank holds it. Parallel (duplicate) edges
    share a mask.

    Returns:
        torch.Tensor: ``[E, H]``, ``values`` itself when ``p == 0`` or not training.
    """
    p = _check_p(p, "hash_edge_dropout")
    if not training or p == 0.0:
        return values
    if values.dim() != 2 or src_ids.shape != (values.shape[0],) or dst_ids.shape != (values.shape[0],):
        raise ValueError(f"hash_edge_dropout: values must be [E, H] with src_ids and dst_ids [E], got "
                         f"{list(values.shape)}, {list(src_ids.shape)}, {list(dst_ids.shape)}")
    if p == 1.0:
        return values * 0.0
    dev = values.device
    base = hash_bits(_EDGE_DOMAIN, key.seed, key.step, key.layer, device=dev)
    threshold = int(p * (1 << 32))
    heads = mix(torch.arange(values.shape[1], dtype=torch.long, device=dev) + GOLDEN)
    mask = torch.empty(values.shape, dtype=torch.bool, device=dev)
    step = max(1, CHUNK_ELEMENTS // max(1, values.shape[1]))
    for lo in range(0, values.shape[0], step):
        hi = min(values.shape[0], lo + step)
        h = absorb(absorb(base, src_ids[lo:hi].to(dev, torch.long)), dst_ids[lo:hi].to(dev, torch.long))
        mask[lo:hi] = _keep(mix(h.unsqueeze(1) + heads), threshold)
    return _MaskedScale.apply(values, mask, 1.0 / (1.0 - p))


INPUT_LAYER = -1
"""The ``layer`` of the input-feature dropout's key (before layer 0: no hidden layer's index)."""

INPUT_ROOT_LAYER = -2
"""The ``layer`` of the input dropout's second mask under a precomputed first layer: there the
precomputed aggregate is dropped with :data:`INPUT_LAYER`'s key and the destinations' own input
rows (the root term's) with this one, so the two are dropped independently
(``gnn_dist.cache.InputFeatures``)."""


@dataclass(frozen=True, slots=True)
class RowDropout:
    """Hash dropout of a block's source rows, keyed by their original ids: a model's dropout of
    its input features (``key.layer`` is :data:`INPUT_LAYER`).

    ``drop(block, x)`` drops the rows of ``x``, which are the block's first source rows (the
    destinations first: the inner rows ``[I, F]``, or every source row ``[S, F]``). A halo row
    gets the mask its owner's inner row gets, so dropping the rows after they were exchanged
    equals exchanging dropped rows, on any partitioning."""

    p: float
    """The drop probability, in ``[0, 1)``."""
    key: DropoutKey
    """Seed, step and layer of the masks."""

    def __call__(self, block: Any, x: torch.Tensor) -> torch.Tensor:
        k = self.key
        ids = block.src_original_ids[:x.shape[0]]
        if x.device.type == "cpu" and x.dim() == 2 and x.is_floating_point() and 0.0 < self.p < 1.0:
            # counted first: a dense input's index list would cost more than its masks
            if int(torch.count_nonzero(x)) * _SPARSE_INPUT <= x.numel():
                return x * _sparse_factor(x, x.nonzero(as_tuple=True), self.p, k, ids)
        return hash_dropout(x, self.p, seed=k.seed, step=k.step, layer=k.layer, row_ids=ids, training=True)

    def with_layer(self, layer: int) -> "RowDropout":
        """The same probability, seed and step, keyed with ``layer``: independent masks."""
        return RowDropout(self.p, replace(self.key, layer=layer))

    def frozen(self) -> "RowDropout":
        """The same masks with the step's current value copied (for work recomputed in backward,
        after the model has advanced its step buffer in place)."""
        step = self.key.step
        if not isinstance(step, torch.Tensor):
            return self
        return RowDropout(self.p, DropoutKey(self.key.seed, step.clone(), self.key.layer))


_SPARSE_INPUT = 4
"""An input with at most one nonzero in this many elements (bag-of-words features: Cora's are
1.3% nonzero) has its masks hashed at its nonzeros only: a zero stays zero whatever its mask,
so the result is the same, bit for bit, at a fraction of the ~12 int64 passes per element."""


def _sparse_factor(x: torch.Tensor, nonzero: tuple[torch.Tensor, torch.Tensor], p: float, key: DropoutKey,
                   row_ids: torch.Tensor) -> torch.Tensor:
    """The factor ``mask / (1 - p)`` of :func:`hash_dropout` at ``x``'s nonzeros, 0 elsewhere."""
    rows, cols = nonzero
    base = hash_bits(_NODE_DOMAIN, key.seed, key.step, key.layer, device=x.device)
    threshold = int(p * (1 << 32))
    ids = row_ids.to(device=x.device, dtype=torch.long)
    keep = torch.empty(rows.shape, dtype=torch.bool, device=x.device)
    for lo in range(0, rows.numel(), CHUNK_ELEMENTS):
        hi = min(rows.numel(), lo + CHUNK_ELEMENTS)
        h = absorb(base, ids[rows[lo:hi]]) + mix(cols[lo:hi] + GOLDEN)
        keep[lo:hi] = _keep(mix(h), threshold)
    factor = torch.zeros_like(x)
    factor[rows, cols] = keep.to(x.dtype) * (1.0 / (1.0 - p))
    return factor


def takes_dropout_key(conv: Any) -> bool:
    """Whether ``conv`` is handed the layer's dropout key (``uses_dropout_key``: GAT's attention dropout)."""
    return bool(getattr(conv, "uses_dropout_key", False))


def call_conv(conv: torch.nn.Module, block: Any, x_src: torch.Tensor, key: DropoutKey | None) -> torch.Tensor:
    """``conv(block, x_src)``, with ``dropout_key=key`` for layers that take one
    (:func:`takes_dropout_key`)."""
    if takes_dropout_key(conv):
        return conv(block, x_src, dropout_key=key)
    return conv(block, x_src)
