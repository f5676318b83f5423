"""The memory :func:`~.writer.write_partition` needs besides the graph and the assignment
(:func:`write_memory`, for the ``--max-memory`` guard of :mod:`partitioners.memory`), and the
writer's node-data step it counts (:data:`NODE_DATA_STEP_BYTES`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..memory import GraphSize

__all__ = ["write_memory", "NODE_DATA_STEP_BYTES"]

NODE_DATA_STEP_BYTES = 16 << 20
"""Bytes of node data gathered per step of the writer."""


def write_memory(size: GraphSize, num_parts: int) -> int:
    """Bytes :func:`~.writer.write_partition` needs besides the graph and the assignment.

    ``c`` is the width of the per-node counts (4 while ``E < 2**31``, else 8), ``k`` the edges
    of one node chunk (:data:`~.relabel.CHUNK_EDGES`, at most ``E``), and the halo ids of all
    parts are counted at ``min(E, N (P - 1))``. :func:`~.relabel.relabel` holds ``(14 + 3c) N`` (the
    argsort and its narrow copy; then order, new ids, marks, int8 part ids, hotness,
    out-degrees, self-loops) plus the
    halos and a part's halo list as int64 and narrow (``12`` B per node of the largest part's
    halo, counted at ``min(N, e_p)``). The part loop holds ``(8 + 3c) N`` (order, hotness,
    self-loops, out-degrees, ``local_of``) plus the halos, and per part ``20 + 3c`` B per local
    row (its ids, its in-degrees, out-degrees and self-loops, and one array being saved with its
    int64 copy; weighted graphs: the
    ``8 N`` of :func:`~.writer.weighted_degree` and ``16`` B per local row of its part's rows; the largest part
    counted at twice the mean and its halo at ``min(N - n_p, e_p)``), ``24 k`` for an edge
    chunk being gathered and two queued for the background writer (``3 k`` edge feature rows
    more with edge features), three node-data steps
    (:data:`NODE_DATA_STEP_BYTES`: one gathered, two queued) and the 16 MiB block
    ``write_array`` copies; a typed graph's part arrays too (:func:`typed_part_memory`).
    """
    from ..memory import WRITE_BUFFER_BYTES
    from .relabel import CHUNK_EDGES, count_dtype

    n, e, p = size.num_nodes, size.num_edges, num_parts
    c = count_dtype(e).itemsize
    n_p, e_p = min(n, -(-2 * n // p)), min(e, -(-2 * e // p))
    k = min(e, CHUNK_EDGES)
    halos = 4 * min(e, n * (p - 1))
    n_local = n_p + min(n - n_p, e_p)
    relabel_bytes = (14 + 3 * c) * n + halos + 12 * min(n, e_p)
    weights = 8 * n + 16 * n_local if size.weighted else 0  # weighted_degree [N, 2], a part's and its copy
    part_bytes = ((8 + 3 * c) * n + halos + (20 + 3 * c) * n_local + (24 + 3 * size.edge_attr_bytes) * k + weights
                  + 3 * min(NODE_DATA_STEP_BYTES, n_p * _row_bytes(size)) + WRITE_BUFFER_BYTES
                  + typed_part_memory(size, n_p, n_local, e_p))
    return max(relabel_bytes, part_bytes)


def typed_part_memory(size: GraphSize, n_p: int, n_local: int, e_p: int) -> int:
    """Bytes of one part's typed arrays (:func:`~.hetero.hetero_part_arrays`), held whole until
    saved: its local rows' original ids and types with their copies (24 B per local row), its
    inner rows' CSR ranges (40 B each), its edges' positions, their running index and relation
    ids with its copy (32 B per edge), ``in_degree_rel`` and its copy (``16 R`` B per inner row),
    and per-type features and labels (a row each, labels twice); 0 for a graph of one type."""
    if not size.num_relations:
        return 0
    per_inner = 40 + 16 * size.num_relations + size.feature_bytes + 2 * size.label_bytes
    return 24 * n_local + per_inner * n_p + 32 * e_p


def _row_bytes(size: GraphSize) -> int:
    return max(size.feature_bytes, size.label_bytes, size.num_masks and 1)
