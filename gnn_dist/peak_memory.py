"""A rank's peak memory so far, for the end-of-run summary.

- **CUDA**: ``torch.cuda.max_memory_allocated(device)``, the peak of torch's allocator on the
  rank's device (what the tensors needed; the caching allocator may reserve more).
- **CPU**: the process's peak resident set size, ``getrusage(RUSAGE_SELF).ru_maxrss`` (KiB on
  Linux, bytes on macOS): everything the process touched, torch's import and the interpreter
  included (about 0.3-0.4 GiB of a small run), which the training memory estimate
  (:mod:`.memory_guard`) counts as its runtime term too.

Where neither is available (no ``resource`` module, Windows) the peak is unknown (None).
"""

from __future__ import annotations

import sys
from typing import Any

import torch

__all__ = ["peak_memory_bytes", "peak_memory_kind"]


def peak_memory_kind(device: Any) -> str:
    """``"cuda allocated"`` or ``"cpu rss"``: what :func:`peak_memory_bytes` measures on ``device``."""
    return "cuda allocated" if torch.device(device).type == "cuda" else "cpu rss"


def peak_memory_bytes(device: Any) -> int | None:
    """This process's peak memory on ``device`` in bytes (see the module docstring), or None."""
    device = torch.device(device)
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    try:
        import resource
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)
