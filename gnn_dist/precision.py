"""Mixed precision (``--precision``): the dtype a training step computes in, with float32 master
weights.

``bf16``: the model's forward runs under :func:`torch.autocast` with ``torch.bfloat16`` (linear maps
and what follows them in bfloat16; the SpMMs keep their input's dtype and accumulate in float32
on CPU; GAT's attention scores and softmax stay float32), so activations, what autograd saves and
the halo rows and their gradients (which travel as computed unless ``--halo-dtype`` says
otherwise) take half the bytes. The weights, their gradients, the optimizer state, the loss and
the gradient all-reduce stay float32. Not exact: P ranks equal one device to bfloat16 rounding,
not bit for bit (a halo row's sum runs in another order on another partition).
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from .config.registry import register_choices

__all__ = ["PRECISIONS", "autocast"]

PRECISIONS: dict[str, torch.dtype | None] = {"fp32": None, "bf16": torch.bfloat16}
"""``precision=`` name -> the autocast dtype (None: plain float32)."""
register_choices("precision", lambda: tuple(PRECISIONS))   # --precision (gnn_dist.config)


def autocast(device: Any, precision: str) -> contextlib.AbstractContextManager:
    """The context a forward of ``precision`` runs in on ``device``."""
    dtype = PRECISIONS[precision]
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(torch.device(device).type, dtype=dtype)
