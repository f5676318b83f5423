"""Relabel arbitrary node ids (strings, or sparse / negative integers) to contiguous ``0..N-1``.

The order is **sorted**: node ``i`` is the ``i``-th smallest id of the input, numerically when
every id is an integer (the reader parses them as integers then), else by Unicode code point
(``"10" < "9"``). Sorted, not first-seen,
so the numbering does not depend on the order of the edges, and a user can lay out node data
files in the same order with ``np.unique(ids)``. The ids themselves are returned as ``names``
(int64, or a numpy unicode array: no pickle) with ``names[i]`` = the input's id of node ``i``.

Text is relabelled block by block (:func:`merge_block_names`): each block keeps only its own
distinct ids and int32 codes, so the whole edge list is never held as strings.

Node data of named nodes comes with its own names (``--node-ids``): :func:`nodes_of_names` joins
them to the sorted ``names`` with a binary search (``np.searchsorted``), no dict of ``N`` entries.

This module is torch-free.
"""

from __future__ import annotations

import numpy as np

__all__ = ["block_codes", "merge_block_names", "nodes_of_names", "relabel_int_ids"]


def _narrow(codes: np.ndarray, n: int) -> np.ndarray:
    return codes.astype(np.int32 if n < 2**31 else np.int64, copy=False)


def block_codes(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(distinct ids of the block, sorted; code of every id into them)``."""
    names, inverse = np.unique(ids, return_inverse=True)
    return names, _narrow(inverse.reshape(ids.shape), names.size)


def merge_block_names(blocks: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Merge the ``(names, codes)`` of :func:`block_codes` into ``(names [N], codes)``.

    ``codes`` is every block's codes, concatenated, into the sorted global ``names`` (text
    names come back as a plain unicode array).
    """
    if not blocks:
        return np.zeros(0, np.int64), np.zeros(0, np.int32)
    names = np.unique(np.concatenate([b[0] for b in blocks]))
    codes = np.concatenate([np.searchsorted(names, b_names)[b_codes] for b_names, b_codes in blocks])
    if names.dtype.kind == "S":
        names = names.astype(str)
    return names, _narrow(codes, names.size)


def relabel_int_ids(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(src', dst', names)``: integer ids (any values, negative too) as codes into sorted ``names``."""
    names, codes = block_codes(np.concatenate([np.asarray(src, np.int64), np.asarray(dst, np.int64)]))
    return codes[:src.size], codes[src.size:], names.astype(np.int64, copy=False)


def nodes_of_names(names: np.ndarray, listed: np.ndarray) -> np.ndarray:
    """The node of each of ``listed`` (int64, ``-1`` where it is not one of ``names``).

    ``names``: the sorted, distinct names of the nodes (a graph's ``node_names``); ``listed``:
    names of the same kind (integers for integer names, strings for text), in any order.
    """
    nodes = np.searchsorted(names, listed).astype(np.int64, copy=False)
    if names.size == 0:
        nodes[:] = -1
        return nodes
    np.minimum(nodes, names.size - 1, out=nodes)
    nodes[names[nodes] != listed] = -1
    return nodes
