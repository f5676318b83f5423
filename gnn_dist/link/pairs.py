"""Pairs of nodes given by their original ids, scored by a link model (``gnn-dist predict --pairs``).

:func:`read_pairs` reads them: a text file of two integer columns (the partitioner's edge-list
reader: whitespace, comma or tab separated, ``#`` comments, an optional header line, gzip detected
by its magic bytes) or an integer ``.npy`` of shape ``[E, 2]`` or ``[2, E]``. In a job,
:func:`shared_pairs` has rank 0 read the file and send the pairs to the other ranks (the file is
read once, and only rank 0's machine needs it); ``--validate`` checks the file with
:func:`count_pairs`, which streams it and keeps nothing. :func:`score_owned_pairs` scores them:
chunk by chunk, each rank the pairs whose source it owns, the destination's embedding row fetched
from its owner (:func:`~.score.score_pairs`), so the scores do not depend on the partition.

A pairs file is user input, and a small gzip can inflate a thousandfold, so reading one is
bounded by what the file really holds:

- a gzipped text file may inflate to :data:`MAX_GZIP_RATIO` (100) times its size (at least
  :data:`MIN_TEXT_BYTES`, 1 MiB, for a small one): a file of pairs compresses 2 to 4 times; more
  is a decompression bomb, refused as soon as the text read passes it;
- a file holds at most :func:`max_pairs` pairs: ``max(2**24, 64 * num_nodes)`` (the pairs take
  16 bytes each on every rank);
- a line holds at most 64 KiB (the text reader's bound, :mod:`partitioners.io._text`); the text
  is parsed :data:`PAIRS_TEXT_CHUNK` (4 MiB) at a time.

Each is refused in one line naming the file (a ``ValueError``: exit code 2), as a bad line is.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import torch

from .score import score_pairs

__all__ = ["MAX_GZIP_RATIO", "MIN_TEXT_BYTES", "PAIR_CHUNK", "PAIRS_TEXT_CHUNK", "count_pairs", "max_pairs",
           "read_pairs", "score_owned_pairs", "shared_pairs"]

PAIR_CHUNK = 1 << 16
"""Pairs scored at a time (every rank walks the same chunks): bounds the rows fetched at once."""
MAX_GZIP_RATIO = 100
"""The most a gzipped pairs file may inflate, in times its size on disk."""
MIN_TEXT_BYTES = 1 << 20
"""Text a gzipped pairs file may always inflate to, whatever its size."""
PAIRS_FLOOR = 1 << 24
"""Pairs any graph may be asked about (16.8 million)."""
PAIRS_PER_NODE = 64
"""Pairs per node of the graph beyond :data:`PAIRS_FLOOR`."""
PAIRS_TEXT_CHUNK = 4 << 20
"""Bytes of text parsed at a time."""
_BROADCAST_ROWS = 1 << 22
"""Pairs sent from rank 0 at a time (64 MiB)."""

_INT_HINT = "; a pairs file holds two columns of the graph's original node ids (integers >= 0)"


def max_pairs(num_nodes: int) -> int:
    """The most pairs read for a graph of ``num_nodes`` nodes: ``max(2**24, 64 * num_nodes)``."""
    return max(PAIRS_FLOOR, PAIRS_PER_NODE * int(num_nodes))


def read_pairs(path: str | os.PathLike, num_nodes: int, *, what: str = "--pairs") -> np.ndarray:
    """int64 ``[E, 2]``: the pairs of ``path``, in the file's order, each id an original id of a
    graph of ``num_nodes`` nodes (bounded as the module docstring says). Raises ``ValueError``
    in one line starting with ``what`` and naming the file (and the line, or the pair, at fault)."""
    blocks = list(_blocks(path, num_nodes, what))
    if not blocks:
        return np.zeros((0, 2), dtype=np.int64)
    return np.concatenate(blocks) if len(blocks) > 1 else blocks[0]


def count_pairs(path: str | os.PathLike, num_nodes: int, *, what: str = "--pairs") -> int:
    """How many pairs :func:`read_pairs` would return, with all its checks, holding one block of
    the file at a time (what ``--validate`` runs)."""
    return sum(len(b) for b in _blocks(path, num_nodes, what))


def shared_pairs(path: str | os.PathLike, num_nodes: int, *, what: str = "--pairs") -> np.ndarray:
    """:func:`read_pairs` of rank 0, on every rank (a collective: every rank calls it; without a
    process group, :func:`read_pairs`). A refusal is a ``ValueError`` on every rank (rank 0's
    own, naming the file)."""
    from ..distributed import all_ranks_agree, get_rank, is_distributed, keep_alive
    from ..distributed.collectives import comm_device, named_collective

    if not is_distributed():
        return read_pairs(path, num_nodes, what=what)
    import torch.distributed as dist

    pairs = None
    with all_ranks_agree(f"reading {what} {path}"):
        if get_rank() == 0:
            pairs = read_pairs(path, num_nodes, what=what)
    device = comm_device()
    with named_collective(f"broadcast of the pairs of {what} {path}"):
        count = torch.tensor([0 if pairs is None else len(pairs)], dtype=torch.int64, device=device)
        dist.broadcast(count, src=0)
        n = int(count.item())
        out = pairs if pairs is not None else np.empty((n, 2), dtype=np.int64)
        for a in range(0, n, _BROADCAST_ROWS):
            rows = torch.from_numpy(out[a:a + _BROADCAST_ROWS])
            buf = rows.to(device) if device.type != "cpu" else rows
            dist.broadcast(buf, src=0)
            if buf is not rows:
                rows.copy_(buf.cpu())
            keep_alive(count, rows)
    return out


def _blocks(path: str | os.PathLike, num_nodes: int, what: str) -> Iterator[np.ndarray]:
    """The pairs of ``path`` as int64 ``[n, 2]`` blocks, checked (ids, and the bounds)."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{what} {path}: {'is a folder' if p.is_dir() else 'no such file'}; give a text file of "
                         f"pairs of original node ids (two columns) or an integer .npy of shape [E, 2]")
    try:
        yield from (_npy_blocks(p, num_nodes, what) if p.suffix.lower() == ".npy" else _text_blocks(p, num_nodes, what))
    except OSError as exc:
        raise ValueError(f"{what} {p}: cannot be read ({exc.strerror or exc})") from None


def _too_many(path: Path, num_nodes: int) -> str:
    return (f"{path}: more than {max_pairs(num_nodes):,} pairs, the most read for a graph of {num_nodes:,} nodes "
            f"(max(2**24, {PAIRS_PER_NODE} per node)); score them in several files")


def _text_budget(path: Path) -> int | None:
    """The most text a gzipped ``path`` may inflate to (None: not gzipped), checked first by
    inflating it without parsing (about 1 GB/s, and stopping past the budget), so a bomb is
    refused before any of it is parsed."""
    import gzip
    import zlib

    with open(path, "rb") as f:
        if f.read(2) != b"\x1f\x8b":
            return None
    budget = max(MIN_TEXT_BYTES, MAX_GZIP_RATIO * path.stat().st_size)
    inflated = 0
    try:
        with gzip.open(path, "rb") as f:
            while piece := f.read(1 << 20):
                inflated += len(piece)
                if inflated > budget:
                    raise ValueError(_bomb(path, budget))
    except (EOFError, gzip.BadGzipFile, zlib.error):
        pass   # the reader names the damage, and the line before it
    return budget


def _bomb(path: Path, budget: int) -> str:
    return (f"{path}: its gzip data inflates to more than {budget:,} bytes, {MAX_GZIP_RATIO} times its "
            f"{path.stat().st_size:,} (a file of pairs compresses 2 to 4 times): refused as a decompression bomb")


def _text_blocks(path: Path, num_nodes: int, what: str) -> Iterator[np.ndarray]:
    from partitioners.io.edgelist import edge_layout, iter_edge_blocks

    limit = max_pairs(num_nodes)
    text = count = 0
    try:
        budget = _text_budget(path)
        layout = edge_layout(path, "auto", None, False, warn=False)
        if layout.ncols not in (0, 2):
            shown = layout.first_data_text if len(layout.first_data_text) <= 60 else layout.first_data_text[:60] + "..."
            raise ValueError(f"{layout.where(layout.first_data_line)}: a line of {layout.ncols} fields; a pairs "
                             f"file has 2 (source and destination original ids): {shown!r}")
        for b in iter_edge_blocks(layout, num_nodes=num_nodes, int_hint=_INT_HINT, chunk_bytes=PAIRS_TEXT_CHUNK):
            text += len(b.chunk.block)
            count += len(b.src)
            if budget is not None and text > budget:   # the file changed since _text_budget read it
                raise ValueError(_bomb(path, budget))
            if count > limit:
                raise ValueError(_too_many(path, num_nodes))
            yield np.stack([b.src, b.dst], axis=1).astype(np.int64, copy=False)
            del b
    except ValueError as exc:   # each message (the reader's GraphError too) starts with the file
        raise ValueError(f"{what} {exc}") from None


def _npy_blocks(path: Path, num_nodes: int, what: str) -> Iterator[np.ndarray]:
    from partitioners.io.node_data import open_node_array

    a = open_node_array(f"{what} {path}", path)   # memory-mapped, allow_pickle=False; a GraphError names the file
    integer = np.issubdtype(a.dtype, np.integer) and a.dtype != np.bool_
    if not integer or a.ndim != 2 or 2 not in a.shape:
        raise ValueError(f"{what} {path}: an array of shape {list(a.shape)} and dtype {a.dtype}; expected integer "
                         f"original node ids of shape [E, 2] (a row per pair) or [2, E]")
    a = a if a.shape[1] == 2 else a.T
    if len(a) > max_pairs(num_nodes):
        raise ValueError(f"{what} {_too_many(path, num_nodes)}")
    step = PAIRS_TEXT_CHUNK // 16
    for start in range(0, len(a), step):   # a block at a time: a memory map is read once
        block = np.array(a[start:start + step], dtype=np.int64, order="C")   # a copy: the map is read-only
        bad = (block < 0) | (block >= num_nodes)
        if bad.any():
            row, col = (int(v[0]) for v in np.nonzero(bad))
            raise ValueError(f"{what} {path}: pair {start + row} (0-based) has id {int(block[row, col])}, which is "
                             f"not a node of the graph (its original ids are 0 to {num_nodes - 1})")
        yield block


def score_owned_pairs(decoder: torch.nn.Module, h: torch.Tensor, pairs: np.ndarray, node_map: np.ndarray,
                      starts: Sequence[int], num_inner: int, rank: int, *,
                      chunk: int = PAIR_CHUNK) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's share of the logits of ``pairs`` (int64 ``[E, 2]`` original ids, the same on
    every rank): the pairs whose source this rank owns, as ``(positions int64 [E_r] in pairs,
    logits float32 [E_r])``. ``node_map`` maps original ids to new global ids, rank ``q`` owns
    ``[starts[q], starts[q+1])``, ``h`` is this rank's ``[num_inner, D]`` embeddings. A
    collective: every rank walks the same chunks of ``chunk`` pairs, one row fetch each."""
    if int(chunk) < 1:
        raise ValueError(f"chunk={chunk}: pairs are scored at least one at a time")
    lo, hi = int(starts[rank]), int(starts[rank + 1])
    positions, scores = [torch.zeros(0, dtype=torch.int64)], [h.new_zeros(0, dtype=torch.float32)]
    for a in range(0, len(pairs), int(chunk)):
        new = np.asarray(node_map[pairs[a:a + chunk]], dtype=np.int64)   # [c, 2] new global ids
        mine = np.flatnonzero((new[:, 0] >= lo) & (new[:, 0] < hi))
        ids = torch.from_numpy(new[mine])
        (logits,), _ = score_pairs(decoder, h, [(ids[:, 0], ids[:, 1])], starts, num_inner)
        positions.append(torch.from_numpy(mine + a))
        scores.append(logits.float())
    return torch.cat(positions), torch.cat(scores)
