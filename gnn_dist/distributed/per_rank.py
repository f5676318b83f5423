"""Parameters whose rows belong to this rank alone (a typed graph's learnable node rows,
:mod:`gnn_dist.hetero.embedding`): the collectives over a model's parameters leave them out.

Such a parameter holds the rows of the nodes this rank owns; its gradient is complete on its
owner (the halo exchange's backward brings the peers' parts home), so it is never all-reduced
(:func:`~.collectives.all_reduce_grads`) nor broadcast (:func:`~.collectives.broadcast_module`),
and it differs in shape between ranks.
"""

from __future__ import annotations

import torch

__all__ = ["PER_RANK", "ROW_IDS", "is_per_rank", "mark_per_rank", "row_ids"]

PER_RANK = "_gnn_dist_per_rank"
"""The attribute that marks such a parameter."""
ROW_IDS = "_gnn_dist_row_ids"
"""The attribute holding its rows' ids (int64 ``[n]``, unique over the ranks): what checkpoints
and model files save each row by (:mod:`gnn_dist.checkpoints.node_rows`)."""


def is_per_rank(p: torch.Tensor) -> bool:
    """Whether ``p`` holds this rank's own rows."""
    return bool(getattr(p, PER_RANK, False))


def mark_per_rank(p: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Mark ``p`` (``[n, ...]``) as this rank's own rows, row ``i`` that of id ``ids[i]``; returns it."""
    if ids.shape != p.shape[:1]:
        raise ValueError(f"mark_per_rank: {p.shape[0]} rows but {ids.numel()} ids")
    setattr(p, PER_RANK, True)
    setattr(p, ROW_IDS, ids if ids.device.type == "meta" else ids.to(torch.int64).cpu())
    return p


def row_ids(p: torch.Tensor) -> torch.Tensor:
    """The ids of a per-rank parameter's rows."""
    return getattr(p, ROW_IDS)
