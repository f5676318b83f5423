"""``convert_graph``: an input graph into an npy-dir (``docs/format.md``), streaming, in bounded memory.

The converters are a registry (:data:`CONVERTERS`): each names the options it takes and how it
recognises its input. Every array is written block by block into a temporary folder beside
``out`` that is renamed into place at the end (:mod:`.out_dir`), then ``graph.json`` records
``num_nodes``, ``num_classes`` (with labels), ``name`` and a ``source`` section (what was
converted, by which tool).

This module is torch-free.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..errors import GraphError
from ..graph_csr import MAX_NODES
from ..io._common import existing_path
from ..io._text import DEFAULT_CHUNK_BYTES
from ..io.ogb import is_ogb_dir
from .edgelist import convert_edgelist
from .ogb_csv import convert_ogb_csv
from .ogb_npz import convert_ogb_npz, is_ogb_npz_dir
from .out_dir import staged_npy_dir

__all__ = ["CONVERTERS", "CONVERT_FORMATS", "Converter", "GRAPH_JSON", "convert_graph", "infer_convert_format"]

log = logging.getLogger(__name__)

GRAPH_JSON = "graph.json"


@dataclass(frozen=True, slots=True)
class Converter:
    """One input format of :func:`convert_graph`."""

    convert: Callable[..., dict[str, Any]]
    """``convert(input, folder, *, chunk_bytes, progress, **options) -> graph.json`` (without the tool keys)."""
    detect: Callable[[Path], bool]
    """True for an input of this format (used when ``fmt`` is not given)."""
    options: tuple[str, ...]
    """The options it takes besides ``chunk_bytes`` and ``progress``."""
    reads: str
    """What it reads, for messages."""


def _is_edgelist(path: Path) -> bool:
    from ..io.read import infer_format

    try:
        return path.is_file() and infer_format(path) == "edgelist"
    except ValueError:
        return False


CONVERTERS: dict[str, Converter] = {
    "edgelist": Converter(convert_edgelist, _is_edgelist, ("weighted", "delimiter", "header"),
                          "a text edge list (.csv, .tsv, .txt, .edgelist, .edges, .el; optionally .gz)"),
    "ogb": Converter(convert_ogb_csv, is_ogb_dir, ("split",),
                     "an OGB dataset folder in the CSV layout (raw/edge.csv.gz)"),
    "ogb-npz": Converter(convert_ogb_npz, is_ogb_npz_dir, ("split",),
                         "an OGB dataset folder in the binary layout (raw/data.npz)"),
}
CONVERT_FORMATS: tuple[str, ...] = tuple(CONVERTERS)
"""The input formats :func:`convert_graph` reads."""


def infer_convert_format(path: str | Path) -> str:
    """The :data:`CONVERTERS` entry whose input ``path`` is; a ValueError says when none or several fit."""
    p = existing_path(path)
    found = [name for name, c in CONVERTERS.items() if c.detect(p)]
    if len(found) == 1:
        return found[0]
    if found:
        raise ValueError(f"{p}: it holds the inputs of several formats ({', '.join(found)}); choose one "
                         f"with fmt= (CLI: --input-format)")
    reads = "; ".join(f"{name}: {c.reads}" for name, c in CONVERTERS.items())
    raise ValueError(f"{p}: cannot tell the input format (convert reads {reads}); pass fmt= "
                     f"(CLI: --input-format) one of {', '.join(CONVERT_FORMATS)}")


def _write_graph_json(folder: Path, meta: dict[str, Any]) -> None:
    with open(folder / GRAPH_JSON, "w", encoding="utf-8") as f:
        f.write(json.dumps(meta, indent=2, allow_nan=False) + "\n")
        f.flush()
        os.fsync(f.fileno())


def convert_graph(input: str | Path, out: str | Path, fmt: str | None = None, *, overwrite: bool = False,
                  chunk_bytes: int = DEFAULT_CHUNK_BYTES, progress: bool = False,
                  **options: Any) -> dict[str, Any]:
    """Convert ``input`` into the npy-dir ``out``; return what ``graph.json`` holds.

    Args:
        input: an edge list file, or an OGB dataset folder (CSV or binary layout).
        out: the npy-dir to write: a missing or empty folder, or (with ``overwrite``) an npy-dir.
        fmt: one of :data:`CONVERT_FORMATS` (``edgelist``, ``ogb``, ``ogb-npz``); None infers it.
        overwrite: replace an existing npy-dir at ``out`` (never a folder of other content).
        chunk_bytes: bytes read (and parsed) at a time: the memory bound. (default: 32 MiB)
        progress: tqdm bars on stderr, counting rows.
        **options: the format's own: edgelist ``weighted``, ``delimiter`` (``"auto"``, a
            character, or None for whitespace), ``header`` (None detects it); ogb and ogb-npz
            ``split`` (the scheme under ``split/``; default: the only one).

    Raises:
        ValueError: an unknown ``fmt`` or option, an input whose format cannot be inferred.
        FileNotFoundError: the input (or a file its layout needs) is missing.
        FileExistsError: ``out`` may not be replaced.
        GraphError: malformed content; the message names the file and line, or array and row.
    """
    if fmt is not None and fmt not in CONVERTERS:
        raise ValueError(f"unknown input format fmt={fmt!r}; convert reads {list(CONVERT_FORMATS)}")
    if chunk_bytes < 1:
        raise ValueError(f"chunk_bytes must be >= 1, got {chunk_bytes}")
    source = existing_path(input)
    fmt = fmt or infer_convert_format(source)
    converter = CONVERTERS[fmt]
    unknown = sorted(set(options) - set(converter.options))
    if unknown:
        raise ValueError(f"convert_graph(fmt={fmt!r}) does not take option(s) {unknown}; its options: "
                         f"{list(converter.options)}")
    t0 = time.perf_counter()
    with staged_npy_dir(out, overwrite=overwrite, source=source) as folder:
        meta = converter.convert(source, folder, chunk_bytes=chunk_bytes, progress=progress, **options)
        if meta["num_nodes"] > MAX_NODES:
            raise GraphError(f"{source}: node ids up to {meta['num_nodes'] - 1}: at most {MAX_NODES} "
                             f"nodes are supported")
        from .. import __version__

        meta["source"] = {"format": fmt, "path": str(source), **meta["source"],
                          "converted_by": f"gnn-dist convert {__version__}"}
        _write_graph_json(folder, meta)
    log.info("wrote %s: %d nodes, %d edges (%s ids) in %.2fs", out, meta["num_nodes"],
             meta["source"]["num_edges"], meta["source"]["id_dtype"], time.perf_counter() - t0)
    return meta
