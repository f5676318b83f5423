"""A rank's peak memory so far, for the end-of-run summary.

- **CUDA**: ``torch.cuda.max_memory_allocated(device)``, the peak of torch's allocator on the
  rank's device (what the tensors needed; the caching allocator may reserve more).
- **CPU**: the process's peak resident set size, ``getrusage(RUSAGE_SELF).ru_maxrss`` (KiB on
  Linux, bytes on macOS): everything the process touched, torch's import and the interpreter
  included (about 0.3-0.4 GiB of a small run), which the training memory estimate
  (:mod:`.memory_plan.guard`) counts as its runtime term too.

Where neither is available (no ``resource`` module, Windows) the peak is unknown (None).

A peak *from a warm baseline* (what a training step needs on top of what is resident before it):
:func:`reset_peak` then, after the work, :func:`peak_memory_bytes` minus the
:func:`current_memory_bytes` read at the reset. On Linux the CPU peak is the kernel's high-water
mark ``VmHWM``, which writing ``5`` to ``/proc/self/clear_refs`` resets to the current resident
size; elsewhere it cannot be reset (:func:`reset_peak` returns False and the peak stays the
process's lifetime one). Large tensors (beyond glibc's mmap threshold, at most 32 MiB) are
mapped and unmapped on their own, so the CPU figures follow torch's live tensors closely; small
ones may stay in the heap after they are freed.
"""

from __future__ import annotations

import sys
from typing import Any

import torch

__all__ = ["peak_memory_bytes", "peak_memory_kind", "current_memory_bytes", "reset_peak"]

_STATUS = "/proc/self/status"
_CLEAR_REFS = "/proc/self/clear_refs"


def peak_memory_kind(device: Any) -> str:
    """``"cuda allocated"`` or ``"cpu rss"``: what :func:`peak_memory_bytes` measures on ``device``."""
    return "cuda allocated" if torch.device(device).type == "cuda" else "cpu rss"


def peak_memory_bytes(device: Any) -> int | None:
    """This process's peak memory on ``device`` in bytes (see the module docstring), or None."""
    device = torch.device(device)
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    hwm = _proc_status("VmHWM")
    if hwm is not None:
        return hwm
    try:
        import resource
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def current_memory_bytes(device: Any) -> int | None:
    """This process's memory on ``device`` now: CUDA ``memory_allocated``, CPU the resident set
    (``VmRSS``; None where ``/proc`` is not there)."""
    device = torch.device(device)
    if device.type == "cuda":
        return int(torch.cuda.memory_allocated(device))
    return _proc_status("VmRSS")


def reset_peak(device: Any) -> bool:
    """Start the peak of :func:`peak_memory_bytes` again from the current memory; False where it
    cannot be reset (the CPU peak outside Linux)."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return True
    try:
        with open(_CLEAR_REFS, "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _proc_status(key: str) -> int | None:
    """A ``kB`` line of ``/proc/self/status`` in bytes (None without it)."""
    try:
        with open(_STATUS) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None
