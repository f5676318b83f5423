"""The checks and derived arrays of a :class:`~.block.Block`'s inputs (``Block.from_csr`` and
``Block.from_graph``): the CSR, the per-row arrays, the local in-degree counts, the edge weights,
weighted degrees and edge features; each refusal a :class:`BlockError` naming the field."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["BlockError", "as_long", "check_local_counts", "checked_csr", "checked_edge_attr", "checked_edge_weight",
           "checked_weighted_degree", "graph_weighted_degree", "node_arrays"]


class BlockError(ValueError):
    """A block's arrays are inconsistent; the message names the field and the bad value."""


def graph_weighted_degree(dst: torch.Tensor, src: torch.Tensor, weight: torch.Tensor, n: int) -> torch.Tensor:
    """float32 ``[n, 2]`` (:attr:`Block.weighted_degree`) of a whole graph's edges ``src -> dst``
    in CSR order: non-loop in-edge weights summed in float64, the last self-loop's weight."""
    loop = src == dst
    out = torch.zeros(n, 2, dtype=torch.float64)
    out[:, 0].index_add_(0, dst[~loop], weight[~loop].to(torch.float64))
    pos = torch.nonzero(loop).flatten()
    last = torch.full((n,), -1, dtype=torch.long).scatter_reduce_(0, dst[pos], pos, "amax")
    has = last >= 0
    out[has, 1] = weight[last[has]].to(torch.float64)
    return out.to(torch.float32)


def checked_csr(indptr: torch.Tensor, indices: torch.Tensor, num_src: int) -> tuple[int, torch.Tensor]:
    """``(num_dst, row lengths [D])`` of a block's CSR, after checking it: ``indptr`` starts at 0,
    never decreases and ends at ``E``, ``D <= S``, and every index is in ``[0, S)``."""
    if indptr.numel() < 1:
        raise BlockError("indptr must be a 1-D array of length num_dst + 1, got an empty array")
    num_dst = indptr.numel() - 1
    if num_src < num_dst:
        raise BlockError(f"num_src = {num_src} is smaller than num_dst = {num_dst} (len(indptr) - 1); "
                         "the destinations must be the first num_dst sources")
    if int(indptr[0]) != 0:
        raise BlockError(f"indptr[0] = {int(indptr[0])}, expected 0")
    counts = indptr.diff()
    if bool((counts < 0).any()):
        i = int(torch.nonzero(counts < 0)[0])
        raise BlockError(f"indptr must be non-decreasing, but indptr[{i + 1}] < indptr[{i}]")
    if int(indptr[-1]) != indices.numel():
        raise BlockError(f"indices has {indices.numel()} entries but indptr[-1] = {int(indptr[-1])}")
    if indices.numel():
        bad = (indices < 0) | (indices >= num_src)
        if bool(bad.any()):
            i = int(torch.nonzero(bad)[0])
            raise BlockError(f"indices[{i}] = {int(indices[i])} is out of range [0, num_src={num_src})")
    return num_dst, counts


def node_arrays(num_src: int, **given: Any) -> dict[str, torch.Tensor]:
    """The per-row arrays ``given`` (``in_degree``, ``out_degree``, ``self_loops``,
    ``src_original_ids``) as int64 ``[S]`` tensors, after checking that the counts are
    non-negative and ``self_loops <= in_degree``."""
    arrays = {}
    for name, a in given.items():
        t = as_long(name, a)
        if t.numel() != num_src:
            raise BlockError(f"{name} has {t.numel()} entries but num_src = {num_src}")
        arrays[name] = t
    for name in ("in_degree", "out_degree", "self_loops"):
        if num_src and int(arrays[name].min()) < 0:
            i = int(torch.nonzero(arrays[name] < 0)[0])
            raise BlockError(f"{name}[{i}] = {int(arrays[name][i])} is negative")
    over = arrays["self_loops"] > arrays["in_degree"]
    if bool(over.any()):
        i = int(torch.nonzero(over)[0])
        raise BlockError(f"self_loops[{i}] = {int(arrays['self_loops'][i])} exceeds "
                         f"in_degree[{i}] = {int(arrays['in_degree'][i])}")
    return arrays


def check_local_counts(arrays: dict[str, torch.Tensor], counts: torch.Tensor, indices: torch.Tensor,
                        num_dst: int) -> torch.Tensor:
    """Check that the block holds every in-edge and self-loop of its destinations (``in_degree``
    and ``self_loops`` of rows ``[0, D)`` equal the CSR's counts); returns each edge's destination
    (int64 ``[E]``)."""
    local_in = arrays["in_degree"][:num_dst] != counts
    if bool(local_in.any()):
        i = int(torch.nonzero(local_in)[0])
        raise BlockError(f"in_degree[{i}] = {int(arrays['in_degree'][i])} but the block holds "
                         f"{int(counts[i])} in-edges of destination {i}; every in-edge of a "
                         "destination must be in its block")
    dst = torch.repeat_interleave(torch.arange(num_dst, dtype=torch.long, device=counts.device), counts,
                                  output_size=indices.numel())
    local_loops = torch.bincount(dst[indices == dst], minlength=num_dst)
    bad_loops = arrays["self_loops"][:num_dst] != local_loops
    if bool(bad_loops.any()):
        i = int(torch.nonzero(bad_loops)[0])
        raise BlockError(f"self_loops[{i}] = {int(arrays['self_loops'][i])} but the block holds "
                         f"{int(local_loops[i])} self-loop edges of destination {i}")
    return dst


def checked_edge_weight(edge_weight: Any, num_edges: int) -> torch.Tensor | None:
    """``edge_weight`` as a finite float ``[E]`` tensor (float32 unless floating already), or
    None; BlockError naming ``edge_weight`` otherwise."""
    if edge_weight is None:
        return None
    weight = torch.as_tensor(np.asarray(edge_weight) if not isinstance(edge_weight, torch.Tensor)
                             else edge_weight)
    if weight.dim() != 1 or weight.numel() != num_edges:
        raise BlockError(f"edge_weight has shape {list(weight.shape)} but the block has "
                         f"{num_edges} edges")
    if not weight.is_floating_point():
        weight = weight.float()
    if not bool(torch.isfinite(weight).all()):
        i = int(torch.nonzero(~torch.isfinite(weight))[0])
        raise BlockError(f"edge_weight[{i}] = {float(weight[i])} is not finite")
    return weight


def checked_weighted_degree(weighted_degree: Any, weight: torch.Tensor | None, num_src: int,
                           ) -> torch.Tensor | None:
    """``weighted_degree`` as a finite float32 ``[S, 2]`` tensor, or None; BlockError when it is
    given without ``edge_weight`` or malformed."""
    if weighted_degree is None:
        return None
    wdeg = torch.as_tensor(np.asarray(weighted_degree) if not isinstance(weighted_degree, torch.Tensor)
                           else weighted_degree).to(torch.float32)
    if weight is None:
        raise BlockError("weighted_degree is given but the block has no edge_weight")
    if tuple(wdeg.shape) != (num_src, 2):
        raise BlockError(f"weighted_degree has shape {list(wdeg.shape)}; expected [num_src, 2] = "
                         f"[{num_src}, 2]")
    if not bool(torch.isfinite(wdeg).all()):
        raise BlockError("weighted_degree holds a value that is not finite")
    return wdeg


def checked_edge_attr(a: Any, num_edges: int) -> torch.Tensor | None:
    """``a`` as a float ``[E, D_e]`` tensor of finite values (float32 unless floating already), or
    None; BlockError naming ``edge_attr`` otherwise."""
    if a is None:
        return None
    t = a if isinstance(a, torch.Tensor) else torch.from_numpy(np.array(a))  # a copy: mmaps are read-only
    if t.dim() != 2 or t.shape[0] != num_edges or t.shape[1] < 1:
        raise BlockError(f"edge_attr has shape {list(t.shape)} but the block has {num_edges} edges; "
                         f"edge features are [num_edges, D] with D >= 1")
    if not t.is_floating_point():
        t = t.float()
    if not bool(torch.isfinite(t).all()):
        e = int(torch.nonzero(~torch.isfinite(t))[0, 0])
        raise BlockError(f"edge_attr[{e}] holds a value that is not finite")
    return t


def as_long(name: str, a: Any) -> torch.Tensor:
    """``a`` (numpy array, tensor or sequence) as a 1-D int64 tensor; BlockError otherwise."""
    if isinstance(a, torch.Tensor):
        t = a
    else:
        arr = np.asarray(a)
        if arr.dtype.kind not in "iu" and arr.size:
            raise BlockError(f"{name} must hold integers, got dtype {arr.dtype}")
        t = torch.from_numpy(np.array(arr, dtype=np.int64))  # a copy: mmap'd arrays are read-only
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise BlockError(f"{name} must hold integers, got dtype {t.dtype}")
    if t.dim() != 1:
        raise BlockError(f"{name} must be 1-D, got shape {list(t.shape)}")
    return t.long()
