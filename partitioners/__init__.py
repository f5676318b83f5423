"""Torch-free graph preprocessing: containers, readers, generators, partitioners, format v1."""

from .api import partition_graph
from .errors import GraphError, PartitionFormatError
from .format import load_part, load_partition_meta, verify_partition
from .graph import Graph

__all__ = ["Graph", "GraphError", "PartitionFormatError", "load_part", "load_partition_meta",
           "partition_graph", "verify_partition"]
__version__ = "0.1.0"
