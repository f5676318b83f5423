"""Keep recent collective buffers alive until the process group is gone.

Why: with gloo (measured on torch 2.13, CPU), tearing the process down while gloo's worker
threads still own a collective's buffers or are still joinable can abort the interpreter at exit
(SIGABRT, "terminate called without an active exception"), so a run that finished its work exits
non-zero. The shutdown sequence in :mod:`.process_group` is: barrier -> destroy the group ->
short pause -> :func:`release_all`. Every collective in this package passes to
:func:`keep_alive` the temporary buffers it hands to gloo, so none is freed by a gloo thread
while the interpreter is shutting down.

Memory: at most ``_CAPACITY`` (8) tensors, and at most ``_MAX_BYTES`` (32 MiB) beyond the newest
one, stay referenced beyond their natural lifetime (without the byte bound the halo buffers of
a P=4 sbm-medium run held 312 MiB per rank, the whole gap to the memory target); callers
pass only the temporaries a collective allocates and drops (the halo exchange: its ``[S, F]``
send buffer in the forward and receive buffer in the backward, not the activation-sized
outputs). CUDA tensors are not held: NCCL keeps its own references until its work completes,
and holding activation-sized GPU buffers would cost device memory. The registry is
process-wide because the default process group it protects is process-wide.
"""

from __future__ import annotations

import threading
from collections import deque

import torch

__all__ = ["keep_alive", "release_all", "num_kept"]

_CAPACITY = 8
_MAX_BYTES = 32 << 20
_lock = threading.Lock()
_kept: deque[torch.Tensor] = deque()


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def keep_alive(*tensors: torch.Tensor) -> None:
    """Hold references to the CPU ``tensors``; the oldest are dropped beyond ``_CAPACITY``
    tensors or ``_MAX_BYTES`` bytes (the newest tensor is always held)."""
    with _lock:
        _kept.extend(t for t in tensors if not t.is_cuda)
        held = sum(_nbytes(t) for t in _kept)
        while len(_kept) > 1 and (len(_kept) > _CAPACITY or held > _MAX_BYTES):
            held -= _nbytes(_kept.popleft())


def release_all() -> None:
    """Drop every held reference (call only after the process group is destroyed)."""
    with _lock:
        _kept.clear()


def num_kept() -> int:
    """How many tensors are currently held."""
    with _lock:
        return len(_kept)
