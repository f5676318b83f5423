"""The typed-input flags of ``gnn-dist partition``: ``--add-reverse``, ``--target-type``,
``--target-relation`` (the relations ``--edge-split`` splits on a typed graph), and the
reading of a typed ``--input`` (:mod:`partitioners.hetero.readers`: OGB heterogeneous folders,
knowledge-graph triples, typed npy-dirs).

:func:`check_typed_request` refuses, before any reading, the typed flags on a homogeneous input
and the homogeneous flags (node data files, ``--split``, ``--symmetrize``, ...) on a typed one;
:func:`read_typed_input` reads the typed graph. The reference is ``docs/heterogeneous.md``.
Torch-free.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from .errors import GraphError
from .io.partition_input import PARTITION_FORMAT

__all__ = ["OUT_OF_CORE_FORMAT", "add_typed_arguments", "check_typed_request", "input_formats", "is_typed_format",
           "open_typed_npy_dir_input", "read_typed_input", "typed_dataset", "typed_edge_split", "typed_flags",
           "typed_untrainable_warning"]

_HOMOGENEOUS_FLAGS = {
    "features": "--features", "labels": "--labels", "train_mask": "--train-mask", "val_mask": "--val-mask",
    "test_mask": "--test-mask", "node_ids": "--node-ids", "split": "--split", "weighted": "--weighted",
    "relabel": "--relabel", "scratch_dir": "--scratch-dir", "planetoid_name": "--planetoid-name",
    "symmetrize": "--symmetrize", "remove_self_loops": "--remove-self-loops",
    "remove_duplicates": "--remove-duplicates", "normalize_features": "--normalize-features",
}
"""Flags (dest -> flag) for homogeneous inputs only: a typed input brings its own node data per type."""

OUT_OF_CORE_FORMAT = "typed-npy-dir"
"""The typed format read out of core, as the homogeneous ``npy-dir`` is (``--scratch-dir`` applies)."""


def add_typed_arguments(p: argparse.ArgumentParser) -> None:
    """``--add-reverse`` and ``--target-type`` on the ``partition`` parser."""
    g = p.add_argument_group("typed inputs (ogb-hetero, triples, typed-npy-dir; docs/heterogeneous.md)")
    g.add_argument("--add-reverse", action="store_true",
                   help="typed --input: add each relation's reverse rev_NAME (dst_type -> src_type), as the "
                        "OGB/PyG recipes for ogbn-mag do")
    g.add_argument("--target-type", metavar="TYPE", default=None,
                   help="typed --input or a typed --dataset: the labelled node type the masks and the training "
                        "balance are for (default: the input's own, or its only labelled type)")
    g.add_argument("--target-relation", dest="target_relations", action="append", metavar="NAME", default=None,
                   help="typed graph with --edge-split: a relation whose triples are split for link prediction "
                        "(repeatable; default: every relation but the rev_ reverses)")


def input_formats() -> tuple[str, ...]:
    """``--input-format``'s choices: the homogeneous formats, then the typed ones."""
    from .hetero.readers import typed_format_names
    from .io import FORMATS

    return (*FORMATS, *typed_format_names())


def is_typed_format(fmt: str) -> bool:
    from .hetero.readers import typed_format_names

    return fmt in typed_format_names()


def _typed_names() -> str:
    from .hetero.readers import typed_format_names

    return ", ".join(typed_format_names())


def check_typed_request(args: argparse.Namespace, fmt: str | None) -> bool:
    """Refuse (UsageError) the flags that do not fit the input's kind; True when ``--input`` is
    typed (``fmt``: its format; None for ``--dataset``)."""
    from .cli_args import UsageError

    if args.target_relations and args.edge_split is None:
        raise UsageError("--target-relation names the relations --edge-split splits; add --edge-split TRAIN,VAL,TEST")
    if args.dataset is not None:
        _check_dataset(args)
        return False
    if not is_typed_format(fmt or ""):
        if fmt == PARTITION_FORMAT:   # typed or not: cli_input refuses what would change its graph
            return False
        for flag, on in typed_flags(args):
            if on:
                fix = "; use --symmetrize to add the reverse edges" if flag == "--add-reverse" else ""
                raise UsageError(f"{flag} applies to typed inputs (--input-format {_typed_names()}); {args.input} "
                                 f"is read as {fmt}, a graph of one node type{fix}")
        return False
    for dest, flag in _HOMOGENEOUS_FLAGS.items():
        value = getattr(args, dest, None)
        if dest == "scratch_dir" and fmt == OUT_OF_CORE_FORMAT:  # read out of core, as an npy-dir
            if value is not None and not os.path.isdir(value):
                raise UsageError(f"--scratch-dir {value}: no such folder; create it or choose an existing one")
            continue
        if value not in (None, False):
            raise UsageError(f"{flag} applies to homogeneous inputs; {args.input} is a typed graph (--input-format "
                             f"{fmt}) whose node data, split and relations come with it: drop {flag} "
                             f"(docs/heterogeneous.md)")
    if args.label_kind != "auto":
        raise UsageError(f"--label-kind applies to homogeneous inputs; the labels of a typed graph ({args.input}, "
                         f"{fmt}) are class ids of its target type: drop --label-kind")
    return True


def typed_flags(args: argparse.Namespace) -> tuple[tuple[str, bool], ...]:
    """``(flag, given)`` of the typed-input flags."""
    return (("--add-reverse", args.add_reverse), ("--target-type", args.target_type is not None),
            ("--target-relation", bool(args.target_relations)))


def _check_dataset(args: argparse.Namespace) -> None:
    from .catalog import dataset_info
    from .cli_args import UsageError

    typed = dataset_info(args.dataset).family == "mag"
    if args.add_reverse:
        why = "has its reverse relations already" if typed else "is not typed: --symmetrize is the homogeneous flag"
        raise UsageError(f"--add-reverse applies to typed --input; --dataset {args.dataset} {why}")
    for flag, on in typed_flags(args)[1:]:
        if on and not typed:
            raise UsageError(f"{flag} applies to typed graphs; --dataset {args.dataset} has one node type")


def _with_target(graph: Any, args: argparse.Namespace) -> Any:
    from .cli_args import UsageError

    try:
        return graph.with_target(args.target_type)
    except GraphError as exc:
        raise UsageError(f"--target-type {args.target_type}: {args.dataset or args.input}: {exc}") from None


def typed_dataset(graph: Any, args: argparse.Namespace) -> Any:
    """A catalog graph with ``--target-type`` applied (typed entries only: checked before)."""
    return graph if args.target_type is None else _with_target(graph, args)


def read_typed_input(args: argparse.Namespace, fmt: str) -> tuple[Any, dict[str, Any]]:
    """``(HeteroGraph, extra partition.json keys)`` of a typed ``--input``, with ``--add-reverse``
    and ``--target-type``."""
    from .hetero.readers import read_hetero

    if fmt == OUT_OF_CORE_FORMAT:
        graph = _read_on_disk(args)
    else:
        graph = read_hetero(args.input, fmt, add_reverse=args.add_reverse)
        if args.target_type is not None:
            graph = _with_target(graph, args)
    extra: dict[str, Any] = {"input_format": fmt}
    if args.add_reverse:
        extra["add_reverse"] = True
    return graph, extra


def typed_edge_split(graph: Any, args: argparse.Namespace) -> Any:
    """``--edge-split`` (and ``--target-relation``) on a typed graph
    (:func:`partitioners.hetero.link_split.typed_edge_split`); a bad relation is one line."""
    from .cli_args import UsageError
    from .hetero.link_split import typed_edge_split as split

    try:
        return split(graph, args.edge_split, args.seed, args.target_relations)
    except GraphError as exc:
        raise UsageError(f"{args.dataset or args.input}: {exc}") from None


def open_typed_npy_dir_input(args: argparse.Namespace) -> Any:
    """Open ``--input`` (a typed npy-dir, read out of core) before any build, kept on ``args``
    for the read; the :class:`~partitioners.memory.GraphSize` of its union graph, from the headers."""
    from .hetero.npy_dir import open_typed_npy_dir
    from .hetero.outofcore import disk_sizes

    args.typed_npy_dir = open_typed_npy_dir(args.input)
    return disk_sizes(args.typed_npy_dir, add_reverse=args.add_reverse)


def _read_on_disk(args: argparse.Namespace) -> Any:
    """A typed npy-dir read out of core (:mod:`partitioners.hetero.outofcore`), its scratch folder
    in ``--scratch-dir`` or beside ``--out``, as an npy-dir's."""
    from pathlib import Path

    from .cli_args import UsageError
    from .hetero.outofcore import read_typed_npy_dir_on_disk

    out_parent = Path(args.out).absolute().parent
    out_parent.mkdir(parents=True, exist_ok=True)
    try:
        return read_typed_npy_dir_on_disk(getattr(args, "typed_npy_dir", None) or args.input,
                                          add_reverse=args.add_reverse, target_type=args.target_type,
                                          scratch_dir=args.scratch_dir or out_parent,
                                          progress=not args.no_progress)
    except GraphError as exc:
        if args.target_type is not None and "target type" in str(exc):
            raise UsageError(f"--target-type {args.target_type}: {exc}") from None
        raise


def typed_untrainable_warning(graph: Any) -> str | None:
    """One line naming what a typed folder lacks for training (its node data comes with the input);
    None with an edge split (link prediction needs no labels)."""
    if graph.link_split is not None:
        return None
    missing = []
    if graph.target_type is None:
        missing.append("no labelled target type (labels come with the input: OGB's node-label/TYPE/, a typed "
                       "npy-dir's TYPE/labels.npy; triples have none)")
    elif graph.train_mask is None or not graph.train_mask.any():
        missing.append(f"no training nodes of the target type {graph.target_type!r} (OGB's split/, a typed "
                       f"npy-dir's {graph.target_type}/train_mask.npy)")
    if not missing:
        return None
    return "the partition folder cannot be trained (gnn-dist train refuses it): " + "; ".join(missing)
