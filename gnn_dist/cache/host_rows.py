"""The rows a feature store reads from: its segments (numpy arrays, ``np.memmap`` files or
tensors), checked and gathered into (pinned) staging buffers for the device.

See :mod:`gnn_dist.cache.store` for the CUDA and stream assumptions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from gnn_dist.cache.budget import format_bytes

__all__ = ["Segment", "HostRows", "check_segments", "permutation", "pin_in_place"]

Segment = np.ndarray | torch.Tensor
"""A block of rows ``[rows, F]``: a numpy array or ``np.memmap``, or a torch tensor."""


def _segment_dtype(seg: Segment, index: int) -> torch.dtype:
    """The torch dtype of ``segments[index]``; ``ValueError`` when torch cannot hold it."""
    if isinstance(seg, torch.Tensor):
        return seg.dtype
    try:
        return torch.from_numpy(np.empty(0, dtype=seg.dtype)).dtype
    except (TypeError, ValueError) as exc:
        raise ValueError(f"segments[{index}] has dtype {seg.dtype}, which torch cannot hold "
                         f"(convert it to a native-endian float or int dtype)") from exc


def check_segments(segments: Sequence[Segment] | Segment) -> tuple[list[Segment], int, torch.dtype]:
    """``(segments as a list, F, dtype)``; ``ValueError`` naming the first segment that differs."""
    if isinstance(segments, (np.ndarray, torch.Tensor)):
        segments = [segments]
    segs = list(segments)
    if not segs:
        raise ValueError("segments must hold at least one [rows, F] array")
    dim, dtype = -1, torch.float32
    for i, seg in enumerate(segs):
        if not isinstance(seg, (np.ndarray, torch.Tensor)):
            raise ValueError(f"segments[{i}] is a {type(seg).__name__}; expected a numpy array, "
                             f"np.memmap or torch.Tensor of shape [rows, F]")
        if seg.ndim != 2:
            raise ValueError(f"segments[{i}] has shape {tuple(seg.shape)}; expected [rows, F]")
        seg_dtype = _segment_dtype(seg, i)
        if i == 0:
            dim, dtype = int(seg.shape[1]), seg_dtype
        elif int(seg.shape[1]) != dim:
            raise ValueError(f"segments[{i}] has {seg.shape[1]} features per row, segments[0] has "
                             f"{dim}: all segments must have the same width")
        elif seg_dtype != dtype:
            raise ValueError(f"segments[{i}] has dtype {seg_dtype}, segments[0] has {dtype}: all "
                             f"segments must have the same dtype (the store never converts)")
    return [s.detach() if isinstance(s, torch.Tensor) else s for s in segs], dim, dtype


def permutation(order: np.ndarray | torch.Tensor, num_rows: int) -> np.ndarray:
    """``order`` as ``np.int64 [S]``; ``ValueError`` unless it is a permutation of ``[0, S)``."""
    if isinstance(order, torch.Tensor):
        order = order.detach().cpu().numpy()
    arr = np.asarray(order)
    if arr.ndim != 1 or arr.shape[0] != num_rows or not (np.issubdtype(arr.dtype, np.integer) or arr.size == 0):
        raise ValueError(f"order must be a 1-D integer permutation of [0, {num_rows}), got shape "
                         f"{arr.shape} and dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    if num_rows and (arr.min() < 0 or arr.max() >= num_rows
                     or not np.all(np.bincount(arr, minlength=num_rows) == 1)):
        raise ValueError(f"order must be a permutation of [0, {num_rows}): every row id exactly once")
    return arr


def pin_in_place(tensor: torch.Tensor, device: torch.device) -> Callable[[], None]:
    """Page-lock ``tensor``'s memory (``cudaHostRegister``); returns the function that unpins it.

    Used for the host tier, which lives as long as the store, instead of
    ``torch.empty(pin_memory=True)``: PyTorch's caching host allocator rounds every pinned
    allocation up to a power of two (a 5 GiB tier would pin 8 GiB). The unpin function first
    waits for ``device`` (a copy from the tier may still be running).
    """
    cudart = torch.cuda.cudart()
    ptr, num_bytes = tensor.data_ptr(), tensor.numel() * tensor.element_size()
    err = int(cudart.cudaHostRegister(ptr, num_bytes, 0))
    if err != 0:
        raise RuntimeError(f"cudaHostRegister of the {format_bytes(num_bytes)} host tier failed with CUDA "
                           f"error {err}; pass pin_memory=False to keep it pageable")

    def unpin() -> None:
        torch.cuda.synchronize(device if device.type == "cuda" else None)
        cudart.cudaHostUnregister(ptr)

    return unpin


class HostRows:
    """Rows ``[0, S)`` of host segments laid end to end, read without copying whole segments.

    ``segments`` are numpy arrays (``np.memmap`` included) or CPU tensors of one dtype and width.
    """

    def __init__(self, segments: list[Segment], dim: int, dtype: torch.dtype) -> None:
        self.segments = segments
        self.dim, self.dtype = dim, dtype
        self.offsets = np.cumsum([0] + [int(s.shape[0]) for s in segments]).astype(np.int64)
        """``[k + 1]``: segment ``j`` holds rows ``[offsets[j], offsets[j+1])``."""

    def _buffer(self, num_rows: int, pin: bool) -> torch.Tensor:
        """An uninitialised ``[num_rows, F]`` host tensor (pinned when ``pin``)."""
        return torch.empty((num_rows, self.dim), dtype=self.dtype, pin_memory=pin)

    def read(self, ids: torch.Tensor, pin: bool, *,
             ids_sorted: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(rows [n, F], perm)``: ``rows[j]`` is row ``ids[perm[j]]`` (``perm`` None: ``ids[j]``).

        ``ids`` is a CPU int64 tensor of valid row ids. One torch segment is indexed directly;
        otherwise the ids are sorted, so each segment (a memmap: the file) is read in ascending
        row order, and the caller scatters the rows back by ``perm``.
        """
        segs = self.segments
        if len(segs) == 1 and isinstance(segs[0], torch.Tensor):
            if not pin:
                return segs[0].index_select(0, ids), None
            return torch.index_select(segs[0], 0, ids, out=self._buffer(ids.shape[0], pin)), None
        perm = None
        if not ids_sorted:
            ids, perm = torch.sort(ids)
        ids_np = ids.numpy()
        bounds = np.searchsorted(ids_np, self.offsets)
        buf = self._buffer(ids.shape[0], pin)
        buf_np = buf.numpy() if any(isinstance(s, np.ndarray) for s in segs) else None
        for j, seg in enumerate(segs):
            lo, hi = int(bounds[j]), int(bounds[j + 1])
            if hi == lo:
                continue
            local = ids_np[lo:hi] - self.offsets[j]
            if isinstance(seg, np.ndarray):
                np.take(seg, local, axis=0, out=buf_np[lo:hi], mode="clip")
            else:
                torch.index_select(seg, 0, torch.from_numpy(local), out=buf[lo:hi])
        return buf, perm

    def read_range(self, start: int, stop: int, pin: bool) -> torch.Tensor:
        """Rows ``[start, stop)`` as ``[stop - start, F]``: a view when one torch segment holds
        them all (it may share memory with the segment), else a new (pinned when ``pin``) tensor."""
        j = int(np.searchsorted(self.offsets, start, side="right")) - 1
        if j < len(self.segments) and isinstance(self.segments[j], torch.Tensor) and stop <= self.offsets[j + 1]:
            return self.segments[j][start - int(self.offsets[j]): stop - int(self.offsets[j])]
        buf = self._buffer(stop - start, pin)
        self.copy_range(start, stop, buf)
        return buf

    def copy_range(self, start: int, stop: int, out: torch.Tensor) -> None:
        """Write rows ``[start, stop)`` into the host tensor ``out`` ``[stop - start, F]``."""
        out_np = None
        for j, seg in enumerate(self.segments):
            lo, hi = max(start, int(self.offsets[j])), min(stop, int(self.offsets[j + 1]))
            if hi <= lo:
                continue
            src = slice(lo - int(self.offsets[j]), hi - int(self.offsets[j]))
            if isinstance(seg, np.ndarray):
                out_np = out.numpy() if out_np is None else out_np
                out_np[lo - start: hi - start] = seg[src]
            else:
                out[lo - start: hi - start].copy_(seg[src])
