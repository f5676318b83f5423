"""What the out-of-core tests share (homogeneous ``npy-dir`` and typed ``typed-npy-dir``): chunk
sizes shrunk so boundaries fall inside rows, parts and node-data blocks, the folder's arrays and
metadata to compare with the in-memory path's, and the scratch folders left behind."""

from __future__ import annotations

import gc
import json
from pathlib import Path

from partitioners import graph_checks, quality
from partitioners.format import relabel as relabel_mod, writer as writer_mod
from partitioners.outofcore import csr_build, npy_dir

SMALL = {"segment": 7, "edges": 11, "bytes": 96, "relabel": 13, "node_data": 64, "check": 80, "quality": 17}
"""A few entries at a time: every chunked loop of the path crosses a boundary."""


def shrink_chunks(monkeypatch, sizes: dict[str, int] = SMALL) -> None:
    """Set every chunked loop of the out-of-core path to ``sizes`` (keys of :data:`SMALL`)."""
    for mod, name, key in ((csr_build, "SEGMENT_ENTRIES", "segment"), (npy_dir, "CHUNK_EDGES", "edges"),
                           (npy_dir, "CHUNK_BYTES", "bytes"), (relabel_mod, "CHUNK_EDGES", "relabel"),
                           (writer_mod, "NODE_DATA_STEP_BYTES", "node_data"),
                           (graph_checks, "CHECK_BYTES", "check"), (quality, "_CHUNK_EDGES", "quality")):
        if key in sizes:
            monkeypatch.setattr(mod, name, sizes[key])


def folder_bytes(out: Path) -> dict[str, bytes]:
    """Every ``.npy`` of a partition folder by its path in the folder."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*.npy"))}


def meta_without_timings(out: Path) -> dict:
    """``partition.json`` without what differs between two runs of the same cut."""
    meta = json.loads((out / "partition.json").read_text())
    for key in ("time_s", "peak_rss_bytes"):
        meta["quality"].pop(key)
    return meta


def scratch_left(folder: Path) -> list[str]:
    """The scratch folders still in ``folder`` once garbage is collected."""
    gc.collect()
    return [p.name for p in folder.iterdir() if p.name.startswith(".gnn-dist-scratch")]
