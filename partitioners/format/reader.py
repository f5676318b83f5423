"""Read a partition folder (format v1): its metadata, or one part's arrays, checked.

Every failure is a :class:`~partitioners.errors.PartitionFormatError` whose message starts with
the path of the file that is wrong.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import PartitionFormatError
from .checks import layout_problems, structure_problems, value_problems
from .hetero import HETERO_FILES, type_files
from .typed_split import typed_split_files
from .layout import ORIGINAL_NAMES_FILE
from .meta import PartitionMeta, parse_meta, read_meta_json
from .npyio import load_array

__all__ = ["PartData", "load_partition_meta", "load_part", "load_original_names"]


@dataclass(kw_only=True, slots=True, eq=False)
class PartData:
    """One part's arrays (``np.memmap`` when loaded with ``mmap=True``; see ``docs/format.md``).

    Legend: ``ni`` = num_inner, ``nh`` = num_halo, ``E_p`` = num_local_edges, ``P`` = num_parts.
    """

    part_id: int
    num_parts: int
    num_inner: int
    num_halo: int
    global_id_range: tuple[int, int]
    indptr: np.ndarray
    """int64 ``[ni + 1]``: CSR by destination over the inner rows."""
    indices: np.ndarray
    """int32/int64 ``[E_p]``: local source id of each edge (inner ``< ni``, halo ``>= ni``)."""
    halo_offsets: np.ndarray
    """int64 ``[P + 1]``: halo rows from part q are ``ni + [off[q], off[q+1])``."""
    send_index: np.ndarray
    """int64 ``[S]``: inner rows to send, grouped by destination part."""
    send_offsets: np.ndarray
    """int64 ``[P + 1]``: rows for part q are ``send_index[off[q]:off[q+1]]``."""
    global_ids: np.ndarray
    """int64 ``[ni + nh]``: new global id of every local row."""
    original_ids: np.ndarray
    """int64 ``[ni + nh]``: the input's id of every local row."""
    in_degree: np.ndarray
    """int64 ``[ni + nh]``: global in-degree."""
    out_degree: np.ndarray
    """int64 ``[ni + nh]``: global out-degree."""
    self_loops: np.ndarray
    """int64 ``[ni + nh]``: self-loop edges ``v -> v`` of each row."""
    hotness: np.ndarray
    """int64 ``[ni]``: descending; the device-cache rank of inner rows."""
    edge_weight: np.ndarray | None = None
    """float32 ``[E_p]``, or None when unweighted."""
    edge_attr: np.ndarray | None = None
    """float32 ``[E_p, D]``: edge features in CSR order (format 1.1 folders with them), or None."""
    weighted_degree: np.ndarray | None = None
    """float32 ``[ni + nh, 2]``: global non-loop in-edge weight and self-loop weight of each row
    (weighted folders written since the file exists), or None."""
    features: np.ndarray | None = None
    """float32/float16 ``[ni, F]``, or None."""
    labels: np.ndarray | None = None
    """int64 ``[ni]`` or uint8 ``[ni, C]``, or None."""
    train_mask: np.ndarray | None = None
    val_mask: np.ndarray | None = None
    test_mask: np.ndarray | None = None
    link_train: np.ndarray | None = None
    """int64 ``[2, E_s]``: the edge split's training pairs whose destination this part owns, as
    new global ids (row 0 source, row 1 destination: the larger original id), sorted by
    (destination, source); format 1.2 folders written with ``--edge-split``, else None."""
    link_val: np.ndarray | None = None
    """The validation pairs, like :attr:`link_train` (not edges of the partition's graph)."""
    link_test: np.ndarray | None = None
    """The test pairs, like :attr:`link_train` (not edges of the partition's graph)."""
    typed: dict[str, np.ndarray] | None = None
    """A typed folder's part files by name without ``.npy`` (``node_type``, ``edge_type``,
    ``in_degree_rel``, ``features-TYPE``, ``labels-TYPE``: :mod:`.hetero`); None when homogeneous."""
    meta: PartitionMeta = field(repr=False)

    @property
    def num_local(self) -> int:
        """``num_inner + num_halo``."""
        return self.num_inner + self.num_halo

    @property
    def num_local_edges(self) -> int:
        return int(self.indices.shape[0])


def load_partition_meta(path: str | os.PathLike[str]) -> PartitionMeta:
    """Read and validate ``path/partition.json`` (format, version, fields, id ranges, file list)."""
    meta_path, raw = read_meta_json(path)
    return parse_meta(path, meta_path, raw)


def load_part(path: str | os.PathLike[str], part_id: int, *, mmap: bool = True,
              verify: bool = True) -> PartData:
    """Load part ``part_id`` of the partition folder ``path``, checked against ``partition.json``.

    Always checked: each file exists and has the recorded size, dtype and shape, and the shape the
    format requires; CSR and offset endpoints. With ``verify`` (default) also the sha256 of every
    file and the O(edges) value checks: id ranges, halo order, send order, degrees, hotness order.
    ``mmap`` opens the arrays with ``mmap_mode="r"`` (read-only, paged in on use).
    """
    meta = load_partition_meta(path)
    if isinstance(part_id, bool) or not isinstance(part_id, (int, np.integer)) \
            or not 0 <= int(part_id) < meta.num_parts:
        raise PartitionFormatError(f"part_id {part_id!r} is out of range: this partition has "
                                   f"{meta.num_parts} parts (0..{meta.num_parts - 1})", path=str(path))
    pm = meta.parts[int(part_id)]
    root = Path(path)
    for name, msg in layout_problems(meta, pm):
        raise PartitionFormatError(f"partition.json entry {msg}", path=str(root / pm.files[name].path))
    arrays = {name: load_array(root, entry, mmap=mmap, check_hash=verify) for name, entry in pm.files.items()}
    problems = structure_problems(meta, pm, arrays)
    if not problems and verify:
        problems = value_problems(meta, pm, arrays)
    for name, msg in problems:
        raise PartitionFormatError(msg, path=str(root / pm.files[name].path))
    typed_names = set(HETERO_FILES) | set(type_files(meta.hetero)) if meta.hetero is not None else set()
    typed_names |= set(typed_split_files(meta.hetero, meta.edge_split))   # link_*_rel.npy
    typed = {name.removesuffix(".npy"): arr for name, arr in arrays.items() if name in typed_names}
    return PartData(part_id=pm.part_id, num_parts=meta.num_parts, num_inner=pm.num_inner,
                    num_halo=pm.num_halo, global_id_range=pm.global_id_range, meta=meta, typed=typed or None,
                    **{name.removesuffix(".npy"): arr for name, arr in arrays.items() if name not in typed_names})


def load_original_names(path: str | os.PathLike[str], *, mmap: bool = True,
                        verify: bool = True) -> np.ndarray | None:
    """The input's id of every original id (``original_names.npy``: int64 or unicode ``[N]``), or
    None when the folder has none (the input's ids were used as they are).

    A part's rows are named ``names[part.original_ids]``. Checked like a part's files (size,
    dtype, shape; sha256 with ``verify``).
    """
    meta = load_partition_meta(path)
    entry = meta.files.get(ORIGINAL_NAMES_FILE)
    if entry is None:
        return None
    names = load_array(Path(path), entry, mmap=mmap, check_hash=verify)
    if names.shape != (meta.num_nodes,) or not (names.dtype == np.int64 or names.dtype.kind == "U"):
        raise PartitionFormatError(f"must be int64 or unicode [{meta.num_nodes}], got "
                                   f"{names.dtype}{list(names.shape)}", path=str(Path(path) / entry.path))
    return names
