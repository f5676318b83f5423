"""The partition folder, format version 1: writer, reader and verifier (``docs/format.md``)."""

from __future__ import annotations

from .layout import FORMAT_NAME, FORMAT_VERSION, part_dir_name
from .meta import FileEntry, PartitionMeta, PartMeta
from .reader import PartData, load_original_names, load_part, load_partition_meta
from .verify import verify_partition
from .writer import check_out_dir, write_partition

__all__ = [
    "FORMAT_NAME", "FORMAT_VERSION", "FileEntry", "PartData", "PartMeta", "PartitionMeta",
    "check_out_dir", "load_original_names", "load_part", "load_partition_meta", "part_dir_name",
    "verify_partition",
    "write_partition",
]
