"""The input flags of ``gnn-dist partition``: node data files, what the labels hold, a random
split, edge weights, relabelling, Planetoid sets, the features' normalisation; and the warning
about a folder that cannot be trained.

``cli.py`` adds these flags with :func:`add_input_arguments`, checks them before any reading
with :func:`check_input_request`, and reads ``--input`` with :func:`read_input`, which returns
the graph and what ``partition.json`` records about it (``split``). The reference is the
``partition`` section of ``docs/cli.md``. Torch-free.
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path
from typing import Any

from .errors import GraphError
from .graph import Graph
from .io.partition_input import PARTITION_FORMAT

__all__ = ["NODE_DATA_FLAGS", "add_input_arguments", "check_input_request", "normalize_node_features",
           "read_input", "untrainable_warning"]

log = logging.getLogger(__name__)

NODE_DATA_FLAGS = {"features": "--features", "labels": "--labels", "train_mask": "--train-mask",
                   "val_mask": "--val-mask", "test_mask": "--test-mask"}
"""Node-data field -> its flag."""

_CLEANING = ("symmetrize", "remove_self_loops", "remove_duplicates")
_WEIGHTED_FORMATS = ("edgelist", "scipy")
_RELABEL_FORMATS = ("edgelist", "npy")
_EXTENDABLE_FORMATS = ("edgelist", "npy")
"""Formats whose node count is the largest id + 1: node data may add isolated nodes."""
SPLIT_EXAMPLE = "0.6,0.2,0.2"
LABEL_KIND_CHOICES = ("auto", "class", "multilabel", "regression")
"""``--label-kind``: ``auto`` infers the kind from the labels' dtype, shape and values."""
_KIND_SHAPES = {"class": "class ids, one per node [N]", "multilabel": "a 0/1 multi-label matrix [N, C]",
                "regression": "float regression targets [N] or [N, D]"}


def _split_fractions(value: str) -> tuple[float, float, float]:
    from .io.split import check_fractions

    try:
        fractions = [float(v) for v in value.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 3 comma-separated fractions TRAIN,VAL,TEST "
                                         f"(e.g. {SPLIT_EXAMPLE}), got {value!r}") from None
    try:
        return check_fractions(fractions)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_input_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of this module on the ``partition`` parser, then the typed-input ones (:mod:`.cli_typed`)."""
    g = p.add_argument_group("node data and input options (--input only; docs/cli.md)")
    g.add_argument("--features", metavar="F.npy", help="node features, float [N, F]")
    g.add_argument("--labels", metavar="L.npy", help="node labels: int class ids [N], or 0/1 [N, C] multi-label, "
                                                     "or float regression targets [N] / [N, D]")
    g.add_argument("--label-kind", choices=LABEL_KIND_CHOICES, default="auto",
                   help="what the input's labels hold: auto (integers are class ids [N] or a 0/1 matrix [N, C]; "
                        "floats the same when all whole / all 0 or 1, regression targets otherwise), or class, "
                        "multilabel, regression (floats stay targets even when whole-valued)")
    for mask in ("train", "val", "test"):
        g.add_argument(f"--{mask}-mask", metavar="M.npy",
                       help=f"{mask} nodes: a bool [N] mask, or an int array of node ids")
    g.add_argument("--node-ids", metavar="NAMES", default=None,
                   help="with --relabel and node data: the name of each row of the node-data files, one per "
                        "line in the rows' order (text, optionally gzipped, or a .npy of names); rows are "
                        "matched to the nodes by name (required: the row order is never guessed)")
    g.add_argument("--split", type=_split_fractions, default=None, metavar="TRAIN,VAL,TEST",
                   help=f"a random split by these fractions (e.g. {SPLIT_EXAMPLE}), seeded with --seed, "
                        f"for an input without masks")
    g.add_argument("--weighted", action="store_true",
                   help="edge lists: read the third field as the edge weight; scipy: keep the values")
    g.add_argument("--relabel", action="store_true",
                   help="edge lists, .npy: the ids are any names or integers, numbered 0..N-1 in sorted "
                        "order; the names are kept in the folder (original_names.npy)")
    g.add_argument("--scratch-dir", metavar="DIR", default=None,
                   help="npy-dir, typed-npy-dir and partition input: where the on-disk CSR is built (about 8 "
                        "bytes per edge, 16 with --symmetrize; typed: also 12 per edge and 8 per node and relation; "
                        "partition: also 20 per edge and the node data; removed as it goes; default: the folder "
                        "--out is in)")
    g.add_argument("--planetoid-name", metavar="NAME", default=None,
                   help="which Planetoid set of the folder (cora, citeseer, pubmed; default: the only one)")
    from .cli_typed import add_typed_arguments

    add_typed_arguments(p)  # --add-reverse, --target-type


def _node_files(args: argparse.Namespace) -> Any:
    from .io.node_data import NodeDataFiles

    paths = {f: Path(getattr(args, f)) for f in NODE_DATA_FLAGS if getattr(args, f) is not None}
    node_ids = getattr(args, "node_ids", None)
    return NodeDataFiles(paths=paths, labels={**NODE_DATA_FLAGS, "node_ids": "--node-ids"},
                         node_ids=None if node_ids is None else Path(node_ids))


def _input_flags(args: argparse.Namespace) -> list[str]:
    flags = [flag for f, flag in NODE_DATA_FLAGS.items() if getattr(args, f) is not None]
    flags += [flag for flag, on in (("--node-ids", getattr(args, "node_ids", None) is not None),
                                    ("--label-kind", args.label_kind != "auto"),
                                    ("--split", args.split is not None), ("--weighted", args.weighted),
                                    ("--relabel", args.relabel),
                                    ("--planetoid-name", args.planetoid_name is not None)) if on]
    return flags


def input_format(args: argparse.Namespace) -> str:
    """``--input-format``, or the format inferred from ``--input``."""
    from .io import infer_format

    return args.input_format or infer_format(args.input)


def check_input_request(args: argparse.Namespace) -> None:
    """Refuse (ValueError, exit 2) flags that do not fit, before the graph is read."""
    from .cli_args import UsageError
    from .cli_typed import check_typed_request
    from .io.node_data import open_node_array

    if check_typed_request(args, None if args.dataset is not None else input_format(args)):
        return  # a typed --input: its node data comes with it (cli_typed.py)
    flags = _input_flags(args)
    if args.dataset is not None:
        if flags:
            raise UsageError(f"{flags[0]} applies to --input only: --dataset {args.dataset} is generated "
                             f"with its features, labels and masks")
        return
    masks = [NODE_DATA_FLAGS[m] for m in ("train_mask", "val_mask", "test_mask") if getattr(args, m)]
    if args.split is not None and masks:
        raise UsageError(f"--split makes the masks, {masks[0]} gives one: use either --split or the "
                         f"mask flags")
    fmt = input_format(args)
    if fmt == PARTITION_FORMAT:
        return _check_partition_input(args, flags)
    files = _node_files(args)
    for field in files.paths:
        open_node_array(files.what(field), files.paths[field])  # exists, is a plain .npy
    if args.weighted and fmt not in _WEIGHTED_FORMATS:
        raise UsageError(f"--weighted applies to edge lists (their third field) and scipy matrices "
                         f"(their values), not to --input-format {fmt} (which brings its own weights, if any)")
    if args.relabel and fmt not in _RELABEL_FORMATS:
        raise UsageError(f"--relabel applies to edge lists and .npy edge arrays, not to --input-format "
                         f"{fmt} (its node data is indexed by its own ids)")
    _check_node_ids(args, files)
    if fmt == "npy-dir":
        for field in files.paths:
            if (Path(args.input) / f"{field}.npy").is_file():
                raise UsageError(f"{files.what(field)}: the npy-dir {args.input} already has {field}.npy; "
                                 f"drop {NODE_DATA_FLAGS[field]} or remove the folder's file")
        if (args.normalize_features is not None and args.features is None
                and not (Path(args.input) / "features.npy").is_file()):
            raise _no_features(args, "features.npy to the npy-dir")  # before the out-of-core read
    elif args.scratch_dir is not None:
        raise UsageError(f"--scratch-dir applies to --input-format npy-dir and partition (read out of core), "
                         f"not to {fmt}")
    _check_scratch_dir(args)
    if args.planetoid_name is not None and fmt != "planetoid":
        raise UsageError(f"--planetoid-name applies to --input-format planetoid (a folder of ind.NAME.* "
                         f"files), not to {fmt}")


def _check_scratch_dir(args: argparse.Namespace) -> None:
    from .cli_args import UsageError

    if args.scratch_dir is not None and not Path(args.scratch_dir).is_dir():
        raise UsageError(f"--scratch-dir {args.scratch_dir}: no such folder; create it or choose "
                         f"another with room for the graph's edges")


def _check_partition_input(args: argparse.Namespace, flags: list[str]) -> None:
    """A partition folder as ``--input``: re-cut as it is (:mod:`.io.partition_input`); the flags
    that would change its graph, or apply again what it already applied, are refused."""
    from .cli_args import UsageError
    from .cli_typed import typed_flags
    from .io.partition_input import source_folder
    from .format import load_partition_meta

    cleaning = [f"--{c.replace('_', '-')}" for c in _CLEANING if getattr(args, c)]
    given = flags + cleaning + [flag for flag, on in typed_flags(args) if on]
    given += ["--edge-split"] if args.edge_split is not None else []
    if given:
        raise UsageError(f"{given[0]}: --input {args.input} is a partition folder, re-cut with the graph, node "
                         f"data and split it holds (its cleaning, split and reverse relations were applied when "
                         f"it was first partitioned); drop {given[0]}, or partition the original input with it")
    meta = load_partition_meta(source_folder(args.input))
    if args.normalize_features is not None and meta.hetero is not None:
        raise UsageError(f"--normalize-features applies to homogeneous inputs; {args.input} is a typed partition "
                         f"folder whose per-type features are carried as they are: drop --normalize-features")
    done = meta.raw.get("normalize_features")
    if args.normalize_features is not None and done is not None:
        raise UsageError(f"--normalize-features {args.normalize_features}: the features of {args.input} are "
                         f"already normalised ({done}, partition.json normalize_features) and are carried as "
                         f"they are; drop --normalize-features")
    _check_scratch_dir(args)


def _check_node_ids(args: argparse.Namespace, files: Any) -> None:
    """``--node-ids`` with ``--relabel`` and node data; node data of a ``--relabel`` input with it."""
    from .cli_args import UsageError

    given = [NODE_DATA_FLAGS[f] for f in files.paths]
    if files.node_ids is not None:
        if not args.relabel:
            raise UsageError(f"--node-ids {files.node_ids}: the nodes have names only with --relabel; without "
                             f"it row i of the node data is node i: drop --node-ids")
        if not given:
            raise UsageError(f"--node-ids {files.node_ids}: there is no node data to order; it gives the "
                             f"row order of --features, --labels and the mask files")
        if not files.node_ids.is_file():
            raise FileNotFoundError(f"--node-ids {files.node_ids}: no such file")
    elif args.relabel and given:
        raise UsageError(f"{files.what(next(iter(files.paths)))}: with --relabel the nodes are named, so the node "
                         f"data must say which row is which node: pass --node-ids FILE, a text file with "
                         f"the name of each row, one per line, in the order the rows were saved (the same "
                         f"for every node-data file); the rows are never assumed to be in any order")


def read_input(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """Read ``--input`` with its flags: ``(graph, extra partition.json keys)`` (a typed input:
    its :class:`~partitioners.hetero.HeteroGraph`, :func:`~.cli_typed.read_typed_input`).

    The reader gets only the options that are on (each reader keeps its defaults: Planetoid
    graphs are cleaned as the usual loaders do). Then node data files, then ``--split``.
    """
    from .cli_args import UsageError
    from .cli_typed import is_typed_format, read_typed_input

    fmt = input_format(args)
    if is_typed_format(fmt):
        return read_typed_input(args, fmt)
    if fmt == PARTITION_FORMAT:   # its split and normalisation come with it, recorded as they were
        from .io.partition_input import read_partition_input

        return read_partition_input(args.input, scratch_dir=_scratch_parent(args), progress=not args.no_progress)
    options: dict[str, Any] = {k: True for k in _CLEANING if getattr(args, k)}
    for key in ("weighted", "relabel"):
        if getattr(args, key):
            options[key] = True
    if args.planetoid_name is not None:
        options["planetoid_name"] = args.planetoid_name
    kind = None if args.label_kind == "auto" else args.label_kind
    if kind is not None:
        options["label_kind"] = kind
    try:
        graph = _read_graph(args, fmt, options, kind)
    except GraphError as exc:
        if kind is None or "labels" not in str(exc):
            raise
        raise GraphError(f"{exc} (--label-kind {kind} reads the labels as {_KIND_SHAPES[kind]}: give such "
                         f"labels, or --label-kind auto to infer the kind from the values)") from None
    _check_label_kind(args, graph, kind)
    extra: dict[str, Any] = {}
    has_masks = [m for m in ("train_mask", "val_mask", "test_mask") if getattr(graph, m) is not None]
    if args.split is not None:
        if has_masks:
            raise UsageError(f"--split: {args.input} has its own {has_masks[0].replace('_', ' ')}; drop "
                             f"--split to use the input's split")
        from .io.split import with_random_split

        graph, extra["split"] = with_random_split(graph, args.split, args.seed)
    elif fmt == "planetoid":
        from .io.planetoid import planetoid_split_record

        extra["split"] = planetoid_split_record(graph)
    if "train" in args.balance and graph.train_mask is None:
        raise UsageError(f"--balance train needs training nodes, but {args.input} has no train mask: "
                         f"add --train-mask M.npy or --split {SPLIT_EXAMPLE}, or drop train from --balance")
    return graph, extra


def _read_graph(args: argparse.Namespace, fmt: str, options: dict[str, Any], label_kind: str | None) -> Graph:
    """The graph of ``--input`` read with the reader's ``options``, then the node data files."""
    from .io import read_graph
    from .io.node_data import attach_node_data

    if fmt == "npy-dir":
        from .outofcore.npy_dir import open_npy_dir, read_npy_dir

        return read_npy_dir(getattr(args, "npy_dir", None) or open_npy_dir(args.input),
                            scratch_dir=_scratch_parent(args), progress=not args.no_progress,
                            node_data=_node_files(args), **options)
    graph = read_graph(args.input, fmt, **options)
    return attach_node_data(graph, _node_files(args), extend=fmt in _EXTENDABLE_FORMATS and not args.relabel,
                            label_kind=label_kind)


def _scratch_parent(args: argparse.Namespace) -> Path:
    """Where an out-of-core read puts its scratch files: ``--scratch-dir``, else the folder ``--out`` is in."""
    if args.scratch_dir:
        return Path(args.scratch_dir)
    out_parent = Path(args.out).absolute().parent
    out_parent.mkdir(parents=True, exist_ok=True)
    return out_parent


def _no_features(args: argparse.Namespace, source: str) -> ValueError:
    from .cli_args import UsageError

    return UsageError(f"--normalize-features {args.normalize_features}: {args.dataset or args.input} has no "
                      f"features to normalise; add {source}, or drop --normalize-features")


def normalize_node_features(args: argparse.Namespace, graph: Graph) -> str:
    """``--normalize-features HOW``: ``graph.x`` replaced by its normalisation
    (:func:`partitioners.normalize.normalize_graph_features`: in memory, or a scratch memory map
    for memory-mapped features); returns what ``partition.json`` records (``HOW``)."""
    from .normalize import normalize_graph_features

    how = args.normalize_features
    if graph.x is None:
        raise _no_features(args, "features.npy to the npy-dir" if graph.scratch_dir is not None
                           else "--features F.npy")
    scratch_dir = None
    if graph.scratch_dir is None and args.out is not None:
        scratch_dir = Path(args.out).absolute().parent  # beside the folder, as an npy-dir's scratch
        scratch_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    normalize_graph_features(graph, how, scratch_dir=scratch_dir)
    log.info(f"normalized the features ({how}, {graph.x.dtype}[{graph.num_nodes}, {graph.feature_dim}]) "
             f"in {time.perf_counter() - t0:.2f}s")
    return how


def _check_label_kind(args: argparse.Namespace, graph: Graph, kind: str | None) -> None:
    """``--label-kind K``: the input has labels, and they are of kind K (class ids and a
    multi-label matrix differ by their shape, which no flag changes)."""
    from .cli_args import UsageError

    if kind is None or graph.label_kind == kind:
        return
    if graph.y is None:
        source = "--labels L.npy (or labels.npy in the npy-dir)" if graph.scratch_dir is not None else "--labels L.npy"
        raise UsageError(f"--label-kind {kind}: {args.input} has no labels; add {source}, or drop --label-kind")
    raise UsageError(f"--label-kind {kind}: the labels of {args.input} are {_KIND_SHAPES[graph.label_kind]} "
                     f"(shape {list(graph.y.shape)}), not {_KIND_SHAPES[kind]}: use --label-kind "
                     f"{graph.label_kind} or auto")


def untrainable_warning(graph: Graph) -> str | None:
    """One line naming what a folder of ``graph`` lacks for training and the flag (for an
    npy-dir: or the file) that adds it (a typed graph: :func:`~.cli_typed.typed_untrainable_warning`)."""
    from .hetero.graph import HeteroGraph

    if isinstance(graph, HeteroGraph):
        from .cli_typed import typed_untrainable_warning

        return typed_untrainable_warning(graph)
    on_disk = graph.scratch_dir is not None
    features, labels, train = ("--features F.npy", "--labels L.npy", "--train-mask M.npy")
    if on_disk:
        features, labels, train = (f"{features} or features.npy", f"{labels} or labels.npy",
                                   f"{train} or train_mask.npy")
    where = " in the npy-dir" if on_disk else ""
    missing = []
    if graph.x is None:
        missing.append(f"no features (add {features}{where}, float [N, F])")
    if graph.y is None:
        missing.append(f"no labels (add {labels}{where}, int [N])")
    if graph.train_mask is None or not graph.train_mask.any():
        missing.append(f"no training nodes (add {train}{where}, or --split {SPLIT_EXAMPLE})")
    if not missing:
        return None
    return "the partition folder cannot be trained (gnn-dist train refuses it): " + "; ".join(missing)
