"""Activation offload (``--offload-activations``): what autograd saves for backward on a CUDA device
waits in pinned host memory instead, and comes back ahead of its backward.

:class:`ActivationOffload` is a :func:`torch.autograd.graph.saved_tensors_hooks` pair around a
training forward:

- **pack** (forward): a saved CUDA tensor of at least ``min_bytes`` (smaller ones, and
  parameters, stay: their copy would cost more than it frees) is copied into a pinned host
  buffer on a side stream, which first waits for the compute stream, so the copy overlaps the
  next layers' compute. The device tensor is marked as in use by the side stream
  (``record_stream``), so the caching allocator hands its memory out again only after the copy;
  autograd keeps the host handle, not the tensor.
- **unpack** (backward): the tensor comes back on the side stream; the compute stream waits for
  that copy only. Each unpack also starts the copies of the ``prefetch`` tensors saved just
  before it (backward reads what forward saved in about reverse order), so they are on their way
  while this one's backward computes.

The values are the same bits (a copy there and back): a run with offload computes exactly what
the run without it does. Tensors saved inside a recomputed region (``--recompute``) are the
region's own (they are recomputed, never offloaded); the region inputs are offloaded. On a CPU
device there is nothing to offload to (the activations are in host memory already): the
trainer refuses the option there with one line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["ActivationOffload", "check_offload_device", "MIN_OFFLOAD_BYTES"]

MIN_OFFLOAD_BYTES = 1 << 20
"""Saved tensors smaller than this stay on the device (biases, per-row scales, small layers)."""


def check_offload_device(device: Any) -> None:
    """Raises ValueError (one line: the option and the fix) unless ``device`` is a CUDA device."""
    if torch.device(device).type != "cuda":
        raise ValueError(f"offload_activations: the ranks train on {torch.device(device).type}, where the "
                         f"activations are in host memory already; it offloads CUDA activations only (bound "
                         f"a CPU run's activations with --recompute layers or all)")


@dataclass(eq=False, slots=True)
class _Saved:
    """One offloaded tensor: its host copy, and its device copy while it is back on the device."""

    host: torch.Tensor
    device: torch.device
    to_host: Any
    """The side stream's event after the copy to the host."""
    back: torch.Tensor | None = None
    to_device: Any = None
    """The side stream's event after the copy back."""


@dataclass(slots=True)
class ActivationOffload:
    """The hooks of one training forward (a context manager: ``with ActivationOffload(): ...``).

    Args:
        min_bytes: saved tensors below this stay on the device.
        prefetch: tensors brought back ahead of the one backward asks for.
    """

    min_bytes: int = MIN_OFFLOAD_BYTES
    prefetch: int = 4
    offloaded_bytes: int = 0
    """Bytes copied to the host during the forward (for the step's log)."""
    _saved: list[_Saved] = field(default_factory=list)
    _by_key: dict[Any, Any] = field(default_factory=dict)
    _stream: Any = None
    _hooks: Any = None

    def __enter__(self) -> "ActivationOffload":
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._hooks.__exit__(*exc)

    def _side(self, device: torch.device) -> Any:
        if self._stream is None:
            self._stream = torch.cuda.Stream(device)
        return self._stream

    def _pack(self, t: torch.Tensor) -> Any:
        if (t.device.type != "cuda" or isinstance(t, torch.nn.Parameter) or t.is_sparse or t.layout != torch.strided
                or t.numel() * t.element_size() < self.min_bytes):
            return t
        key = (t.data_ptr(), t._version, tuple(t.shape), t.stride(), t.dtype)
        if key in self._by_key:     # the same tensor saved by another node: one copy
            return self._by_key[key]
        side = self._side(t.device)
        side.wait_stream(torch.cuda.current_stream(t.device))
        host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
        with torch.cuda.stream(side):
            host.copy_(t, non_blocking=True)
            done = torch.cuda.Event()
            done.record(side)
        t.record_stream(side)
        saved = _Saved(host, t.device, done)
        self._saved.append(saved)
        self.offloaded_bytes += t.numel() * t.element_size()
        self._by_key[key] = packed = (len(self._saved) - 1, saved)
        return packed

    def _unpack(self, packed: Any) -> torch.Tensor:
        if isinstance(packed, torch.Tensor):
            return packed
        index, saved = packed
        if saved.back is None:       # not prefetched, or handed out already (a tensor unpacked twice)
            saved.to_device = None
        self._fetch(saved)
        for earlier in self._saved[max(0, index - self.prefetch):index][::-1]:
            self._fetch(earlier)
        torch.cuda.current_stream(saved.device).wait_event(saved.to_device)
        out = saved.back
        assert out is not None
        out.record_stream(torch.cuda.current_stream(saved.device))
        saved.back = None   # hold it no longer than its user does
        return out

    def _fetch(self, saved: _Saved) -> None:
        """Start the copy of ``saved`` back to its device (once)."""
        if saved.to_device is not None:
            return
        side = self._side(saved.device)
        with torch.cuda.stream(side):
            side.wait_event(saved.to_host)
            saved.back = saved.host.to(saved.device, non_blocking=True)
            saved.to_device = torch.cuda.Event()
            saved.to_device.record(side)
