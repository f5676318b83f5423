"""The ``gnn-dist convert`` verb: its parser and command (the conversion is :mod:`partitioners.convert`).

Torch-free. The reference is the ``convert`` section of ``docs/cli.md``.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from .cli_args import UsageError, memory_size

__all__ = ["add_convert_verb", "cmd_convert", "delimiter_arg"]

log = logging.getLogger("partitioners.cli")

_DELIMITER_WORDS = {"auto": "auto", "tab": "\t", "\\t": "\t", "comma": ",", "whitespace": None, " ": None}

_OPTION_FLAGS = {"weighted": "--weighted", "delimiter": "--delimiter", "header": "--header",
                 "split": "--ogb-split"}
"""A converter option -> its flag."""


def delimiter_arg(value: str) -> str | None:
    """``--delimiter``: ``auto``, ``tab``, ``comma``, ``whitespace``, or one character (None: whitespace)."""
    if value in _DELIMITER_WORDS:
        return _DELIMITER_WORDS[value]
    if len(value) != 1 or value in "\r\n#%" or value.isalnum() or value in "+-.":
        raise argparse.ArgumentTypeError(f"{value!r} is not a field separator; give one character such as "
                                         f"',' or ';', or one of auto, tab, comma, whitespace")
    return value


def add_convert_verb(sub: argparse._SubParsersAction, verbose: argparse.ArgumentParser) -> None:
    """Add the ``convert`` parser to ``sub`` (``verbose``: the shared -v/-q parent)."""
    from .convert import CONVERT_FORMATS
    from .io._text import DEFAULT_CHUNK_BYTES

    c = sub.add_parser(
        "convert", parents=[verbose],
        help="convert an edge list or an OGB dataset into an npy-dir (the out-of-core input layout), streaming",
        description="Convert --input into an npy-dir (src.npy, dst.npy, and the node data there is: "
                    "features.npy, labels.npy, the three masks, graph.json), reading and writing block "
                    "by block, so memory stays near --chunk-bytes plus one byte per node whatever the size "
                    "of the graph. Edges keep the input's order and are not symmetrised or cleaned "
                    "(`gnn-dist partition` does that; it also counts duplicate edges). An edge list's "
                    "node data is not copied: give it to `gnn-dist partition --input DIR --features "
                    "F.npy --labels L.npy ...`, which memory-maps it. Edge-list ids are taken as they are (integers >= 0, "
                    "num_nodes = the largest + 1); ids that are names, negative or sparse are not "
                    "relabelled: relabel the file first, or partition it with `gnn-dist partition "
                    "--relabel`.",
        epilog="Reference: docs/cli.md; the npy-dir layout: docs/format.md")
    c.add_argument("--input", required=True, metavar="PATH",
                   help="an edge list (text, optionally gzipped), or an OGB dataset folder (raw/edge.csv.gz "
                        "or raw/data.npz)")
    c.add_argument("--input-format", choices=CONVERT_FORMATS, default=None, metavar="FMT",
                   help=f"format of --input, one of {', '.join(CONVERT_FORMATS)} (default: inferred from the path)")
    c.add_argument("--out", required=True, metavar="DIR", help="the npy-dir to write")
    c.add_argument("--overwrite", action="store_true",
                   help="replace an existing npy-dir at --out (never a folder of other content)")
    c.add_argument("--no-progress", action="store_true", help="no progress bars")
    c.add_argument("--chunk-bytes", type=memory_size, default=DEFAULT_CHUNK_BYTES, metavar="N",
                   help="bytes read and parsed at a time, e.g. 8MiB (default: 32MiB)")
    e = c.add_argument_group("edge lists (--input-format edgelist)")
    e.add_argument("--weighted", action="store_true", help="read the third field as the edge weight (edge_weight.npy)")
    e.add_argument("--delimiter", type=delimiter_arg, default="auto", metavar="D",
                   help="field separator: one character, or tab, comma, whitespace (default: auto: a comma "
                        "when the first data line has one, else whitespace)")
    e.add_argument("--header", action="store_const", const=True, default=None,
                   help="the first non-comment line is a header (default: detected: a line with no number)")
    o = c.add_argument_group("OGB datasets (--input-format ogb, ogb-npz)")
    o.add_argument("--ogb-split", metavar="NAME", default=None,
                   help="the split scheme under split/ that becomes the masks (default: the only one)")


def _options(args: argparse.Namespace, fmt: str) -> dict[str, object]:
    """The converter options that differ from their defaults; UsageError for one ``fmt`` does not take."""
    from .convert import CONVERTERS

    given = {"weighted": (args.weighted, True), "delimiter": (args.delimiter != "auto", args.delimiter),
             "header": (args.header is not None, args.header), "split": (args.ogb_split is not None, args.ogb_split)}
    options: dict[str, object] = {}
    for key, (is_set, value) in given.items():
        if not is_set:
            continue
        if key not in CONVERTERS[fmt].options:
            takers = [name for name, c in CONVERTERS.items() if key in c.options]
            raise UsageError(f"{_OPTION_FLAGS[key]} applies to --input-format {' and '.join(takers)}, not to {fmt}")
        options[key] = value
    return options


def cmd_convert(args: argparse.Namespace) -> int:
    from .cli_args import with_progress_bars

    return with_progress_bars(_convert, args)


def _convert(args: argparse.Namespace) -> int:
    from .convert import convert_graph, infer_convert_format
    from .format.writer import peak_rss_bytes
    from .memory import format_bytes

    if not Path(args.input).exists():
        raise FileNotFoundError(f"--input {args.input}: no such file or directory")
    fmt = args.input_format or infer_convert_format(args.input)
    options = _options(args, fmt)
    log.info(f"converting {args.input} ({fmt}) into {args.out} ...")
    convert_graph(args.input, args.out, fmt, overwrite=args.overwrite, chunk_bytes=args.chunk_bytes,
                  progress=not args.no_progress, **options)
    node_data = " [--features F.npy --labels L.npy]" if fmt == "edgelist" else ""
    log.info(f"peak memory (RSS) {format_bytes(peak_rss_bytes())}; partition it with `gnn-dist partition "
             f"--input {args.out} --input-format npy-dir{node_data} --parts P --out DIR`")
    return 0
