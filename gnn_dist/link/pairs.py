"""Pairs of nodes given by their original ids, scored by a link model (``gnn-dist predict --pairs``).

:func:`read_pairs` reads them (every rank reads the same file): a text file of two integer
columns (the partitioner's edge-list reader: whitespace, comma or tab separated, ``#`` comments,
an optional header line, gzip detected by its magic bytes) or an integer ``.npy`` of shape
``[E, 2]`` or ``[2, E]``. :func:`score_owned_pairs` scores them: chunk by chunk, each rank the
pairs whose source it owns, the destination's embedding row fetched from its owner
(:func:`~.score.score_pairs`), so the scores do not depend on the partition.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from .score import score_pairs

__all__ = ["PAIR_CHUNK", "read_pairs", "score_owned_pairs"]

PAIR_CHUNK = 1 << 16
"""Pairs scored at a time (every rank walks the same chunks): bounds the rows fetched at once."""

_INT_HINT = "; a pairs file holds two columns of the graph's original node ids (integers >= 0)"


def read_pairs(path: str | os.PathLike, num_nodes: int, *, what: str = "--pairs") -> np.ndarray:
    """int64 ``[E, 2]``: the pairs of ``path``, in the file's order, each id an original id of a
    graph of ``num_nodes`` nodes. Raises ``ValueError`` in one line starting with ``what`` and
    naming the file (and the line, or the pair, at fault)."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{what} {path}: {'is a folder' if p.is_dir() else 'no such file'}; give a text file of "
                         f"pairs of original node ids (two columns) or an integer .npy of shape [E, 2]")
    try:
        return _read_npy(p, num_nodes, what) if p.suffix.lower() == ".npy" else _read_text(p, num_nodes, what)
    except OSError as exc:
        raise ValueError(f"{what} {p}: cannot be read ({exc.strerror or exc})") from None


def _read_text(path: Path, num_nodes: int, what: str) -> np.ndarray:
    from partitioners.io.edgelist import edge_layout, iter_edge_blocks

    try:
        layout = edge_layout(path, "auto", None, False, warn=False)
        if layout.ncols not in (0, 2):
            raise ValueError(f"{layout.where(layout.first_data_line)}: a line of {layout.ncols} fields; a pairs "
                             f"file has 2 (source and destination original ids): {layout.first_data_text!r}")
        blocks = [np.stack([b.src, b.dst], axis=1).astype(np.int64)
                  for b in iter_edge_blocks(layout, num_nodes=num_nodes, int_hint=_INT_HINT)]
    except ValueError as exc:   # the reader's GraphError names the file and the line
        raise ValueError(f"{what} {exc}") from None
    return np.concatenate(blocks) if blocks else np.zeros((0, 2), dtype=np.int64)


def _read_npy(path: Path, num_nodes: int, what: str) -> np.ndarray:
    from partitioners.io.node_data import open_node_array

    a = open_node_array(f"{what} {path}", path)   # allow_pickle=False; a GraphError names the file
    integer = np.issubdtype(a.dtype, np.integer) and a.dtype != np.bool_
    if not integer or a.ndim != 2 or 2 not in a.shape:
        raise ValueError(f"{what} {path}: an array of shape {list(a.shape)} and dtype {a.dtype}; expected integer "
                         f"original node ids of shape [E, 2] (a row per pair) or [2, E]")
    a = a if a.shape[1] == 2 else a.T
    bad = (a < 0) | (a >= num_nodes)
    if bad.any():
        row, col = (int(v[0]) for v in np.nonzero(bad))
        raise ValueError(f"{what} {path}: pair {row} (0-based) has id {int(a[row, col])}, which is not a node of "
                         f"the graph (its original ids are 0 to {num_nodes - 1})")
    return np.ascontiguousarray(a, dtype=np.int64)


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
