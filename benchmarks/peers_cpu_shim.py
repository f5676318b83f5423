"""CUDA stand-ins that let PipeGCN and BNS-GCN run on a machine without a GPU (``benchmarks/peers.py
--device cpu``). Their code moves every tensor with ``.cuda()``, overlaps its copies on CUDA
streams and events, and reads the CUDA allocator's figures; on CPU each of those is the identity
or a no-op here, which keeps their control flow (threads, ``isend``/``recv``, the
pipelined buffers) as it is. The device literals and the pinned buffers are text patches of
their files instead (``peers_patches.py``): a function's default cannot be changed from outside.
Imported, in CPU mode only, from the first line of their ``main.py`` (so by every spawned rank).
"""

from __future__ import annotations

import contextlib

import torch


class _Stream:
    """A CUDA stream or event that has nothing to wait for."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def __getattr__(self, name: str):
        return lambda *args, **kwargs: None


def _same(self, *args: object, **kwargs: object):
    return self


def install() -> None:
    import torch._dynamo  # noqa: F401  (checks the classes of torch.cuda.Event/Stream once, at its import)

    cuda = torch.cuda
    cuda.Stream = _Stream
    cuda.Event = _Stream
    cuda.current_stream = lambda *a, **k: _Stream()
    cuda.stream = lambda *a, **k: contextlib.nullcontext()
    for name in ("synchronize", "reset_peak_memory_stats", "set_device"):
        setattr(cuda, name, lambda *a, **k: None)
    for name in ("memory_allocated", "max_memory_allocated", "memory_reserved"):
        setattr(cuda, name, lambda *a, **k: 0)
    torch.Tensor.cuda = _same
    torch.nn.Module.cuda = _same


install()
