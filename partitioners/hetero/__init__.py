"""Heterogeneous (typed) graphs in the partitioner: node types, relations, the union graph.

:class:`HeteroGraph` holds node types (each a count, optional features, labels and masks) and
relations ``(src_type, name, dst_type)`` with their edges; :meth:`HeteroGraph.to_union` lays the
types out contiguously as one homogeneous :class:`~partitioners.Graph` with the type of every
node and the relation of every edge, which the partition methods and the writer consume
(:func:`partitioners.hetero.partition.partition_hetero`); an edge split per relation for link
prediction (:mod:`.link_split`). Torch-free. ``docs/heterogeneous.md``.
"""

from .graph import HeteroGraph, UnionGraph

__all__ = ["HeteroGraph", "UnionGraph"]
