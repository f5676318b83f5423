"""The ``gnn-dist partition`` verb: its flags, the checks that need no graph, the read, the cut and
the report it logs (the work is :func:`partitioners.api.partition_graph`; a family of several
``--parts`` is :mod:`.cli_family`'s; the input flags :mod:`.cli_input`'s). The command that
holds the verb is :mod:`gnn_dist_cli.command`. Torch-free. The reference is the ``partition``
section of ``docs/cli.md``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path
from typing import Any

from .cli_args import (EXIT_OK, UsageError, balance_list, emit_json, memory_size, nonneg_int, part_counts,
                       with_progress_bars)

__all__ = ["add_partition_verb", "cmd_partition"]

log = logging.getLogger("partitioners.cli")

_PARTS_HELP = ("number of parts; several (2,4,8) write a partition family: the graph read once, one folder per P "
               "(DIR/p2, DIR/p4, ...) and DIR/family.json; train picks the member of its world size")


def add_partition_verb(sub: Any, verbose: argparse.ArgumentParser) -> None:
    """``gnn-dist partition``'s parser, added to the command's verbs."""
    from .cli_input import _split_fractions, add_input_arguments
    from .cli_typed import input_formats
    from .methods import METHODS
    from .normalize import NORMALIZATIONS

    p = sub.add_parser("partition", parents=[verbose],
                       help="read or generate a graph, partition it, write a partition folder")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--dataset", metavar="NAME", help="a built-in dataset (see `gnn-dist datasets`)")
    src.add_argument("--input", metavar="PATH", help="a graph file, or a dataset folder (OGB, Planetoid, typed: docs/cli.md), or a partition "
                                                    "folder or family to cut again (its graph by original ids)")
    p.add_argument("--input-format", choices=input_formats(), default=None, metavar="FMT",
                   help=f"format of --input, one of {', '.join(input_formats())} (default: inferred from the path)")
    p.add_argument("--parts", type=part_counts, required=True, metavar="P[,P...]", help=_PARTS_HELP)
    p.add_argument("--method", choices=METHODS, default="metis",
                   help="partitioning method (default: metis)")
    p.add_argument("--import", dest="imports", action="append", metavar="FILE.py|MODULE",
                   help="import your own components first (a registered partition method or reader; a .py file "
                        "or a module name; repeatable)")
    _add_refine_arguments(p)
    p.add_argument("--balance", type=balance_list, default=("nodes",), metavar="LIST",
                   help="what to balance: comma-separated of nodes,edges,train (default: nodes)")
    p.add_argument("--symmetrize", action="store_true", help="add the reverse of every edge (--input only)")
    p.add_argument("--remove-self-loops", action="store_true", help="drop self-loop edges (--input only)")
    p.add_argument("--remove-duplicates", action="store_true", help="drop repeated edges (--input only)")
    p.add_argument("--seed", type=nonneg_int, default=0, help="random seed (default: 0)")
    p.add_argument("--edge-split", type=_split_fractions, default=None, metavar="TRAIN,VAL,TEST",
                   help="link prediction: split the unique edge pairs {u, v} (a typed graph's triples per relation: "
                        "--target-relation) by these fractions (e.g. 0.85,0.05,0.1), seeded with --seed; the val/test "
                        "pairs are removed from the graph (both directions) and every part stores its link_*.npy")
    p.add_argument("--normalize-features", choices=NORMALIZATIONS, default=None,
                   help="normalise the node features before they are written: row (each row divided by its "
                        "sum, as PyG's NormalizeFeatures: the Planetoid papers' features) or standard (each "
                        "column to zero mean and unit variance); recorded in partition.json")
    p.add_argument("--max-memory", type=memory_size, default=None, metavar="SIZE",
                   help="refuse to start when the estimated peak memory is larger, e.g. 8GB, "
                        "512MiB or bytes (default: the available memory)")
    p.add_argument("--out", required=True, metavar="DIR", help="the partition folder to write")
    p.add_argument("--overwrite", action="store_true", help="replace an existing partition folder at --out")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--json", action="store_true", help="print the quality report as JSON on stdout")
    add_input_arguments(p)


def _add_refine_arguments(p: argparse.ArgumentParser) -> None:
    """``partition``'s ``--refine``, ``--refine-objective``, ``--part-weights`` and ``--device-memory``."""
    from .cli_weights import add_weight_arguments
    from .methods import refiner_names

    p.add_argument("--refine", action="store_true",
                   help="then move boundary nodes to lower the communication volume, keeping balance")
    p.add_argument("--refine-objective", choices=refiner_names(), default="volume", metavar="OBJ",
                   help="what --refine lowers: volume (the total halo rows, default) or max-volume (the "
                        "busiest part's halo send/receive volume per layer, which sets a synchronous exchange's time)")
    add_weight_arguments(p)


def _check_request(args: argparse.Namespace) -> None:
    """Checks that need no graph: refuse a bad request before a long read."""
    from .cli_family import check_family_out, split_parts
    from .cli_input import check_input_request, input_format
    from .cli_typed import OUT_OF_CORE_FORMAT, open_typed_npy_dir_input
    from .io.partition_input import PARTITION_FORMAT
    from .cli_weights import resolve_part_weights
    from .format import check_out_dir

    resolve_part_weights(args, args.parts)   # --parts as given: a family refuses them
    split_parts(args)
    if args.dataset is not None:
        from .catalog import dataset_info

        if args.input_format is not None:
            raise UsageError(f"--input-format {args.input_format} applies to --input only, not to "
                             f"--dataset {args.dataset}")
        info = dataset_info(args.dataset)  # ValueError listing the names
        _check_parts(args.parts, info.num_nodes, f"dataset {info.name}")
        _check_memory(args, info.sizes(), log_estimate=False)  # before generating it
    elif not Path(args.input).exists():
        raise FileNotFoundError(f"--input {args.input}: no such file or directory")
    check_input_request(args)
    _check_refine_flags(args)
    (check_out_dir if args.family is None else check_family_out)(args.out, args.overwrite)
    if args.input is not None and input_format(args) == "npy-dir":  # sized from its headers
        from .outofcore.npy_dir import open_npy_dir

        if args.edge_split is not None:
            raise UsageError("--edge-split needs the graph in memory and does not apply to --input-format "
                             "npy-dir (read out of core): give the edges as another --input format")
        args.npy_dir = open_npy_dir(args.input)
        size = args.npy_dir.sizes(args.npy_dir.num_nodes(), symmetric=args.symmetrize)
        _check_parts(args.parts, size.num_nodes, args.input)
        _check_memory(args, size)  # before the on-disk build
    elif args.input is not None and input_format(args) == PARTITION_FORMAT:  # sized from its partition.json
        from .io.partition_input import input_size

        size = input_size(args.input)
        _check_parts(args.parts, size.num_nodes, args.input)
        _check_memory(args, size)
        args.partition_input = True
    elif args.input is not None and input_format(args) == OUT_OF_CORE_FORMAT:  # typed: the same, from headers
        size = open_typed_npy_dir_input(args)
        _check_parts(args.parts, size.num_nodes, args.input)
        _check_memory(args, size)


def _check_refine_flags(args: argparse.Namespace) -> None:
    """``--refine-objective`` needs ``--refine``."""
    if args.refine_objective != "volume" and not args.refine:
        raise UsageError(f"--refine-objective {args.refine_objective} applies to --refine; add --refine")


def _check_parts(num_parts: int, num_nodes: int, what: str) -> None:
    if num_parts > num_nodes:
        raise UsageError(f"--parts {num_parts} is more than the {num_nodes} nodes of {what}; "
                         f"use at most {num_nodes} parts")


def _check_memory(args: argparse.Namespace, graph: Any, *, log_estimate: bool = True) -> None:
    """Refuse (MemoryLimitError, exit 2) a run whose estimated peak exceeds ``--max-memory``."""
    from .memory import guard_memory

    guard_memory(graph, args.method, args.parts, refine=args.refine, limit=args.max_memory,
                 what=args.dataset or args.input, log_estimate=log_estimate)


def _load_graph(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """``(graph, extra partition.json keys)``: the dataset, or ``--input`` with its flags; then
    ``--edge-split``, then ``--normalize-features``."""
    from .hetero.graph import HeteroGraph

    graph, extra = _read_graph(args)
    if args.edge_split is not None and isinstance(graph, HeteroGraph):   # typed: per relation
        from .cli_typed import typed_edge_split

        graph = typed_edge_split(graph, args)
    elif args.edge_split is not None:
        from .io.edge_split import with_edge_split

        graph, extra["edge_split"] = with_edge_split(graph, args.edge_split, args.seed)
    if args.normalize_features is not None:
        from .cli_input import normalize_node_features

        extra["normalize_features"] = normalize_node_features(args, graph)
    return graph, extra


def _read_graph(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    if args.dataset is not None:
        from .catalog import load_dataset

        if args.symmetrize or args.remove_self_loops or args.remove_duplicates:
            log.warning("--symmetrize/--remove-* apply to --input only; built-in datasets are "
                        "already symmetric and clean")
        from .cli_typed import typed_dataset

        return typed_dataset(load_dataset(args.dataset, seed=args.seed), args), {}
    from .cli_input import read_input

    return read_input(args)


def _read_on_disk(args: argparse.Namespace) -> bool:
    """The input is read out of core (an npy-dir, typed or not, or a partition folder): its estimate was
    logged before the build."""
    return any(getattr(args, key, None) is not None for key in ("npy_dir", "typed_npy_dir", "partition_input"))


def _read_stage(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """:func:`_load_graph` under a one-step ``read`` bar (the readers report no finer progress;
    the out-of-core reader shows its own bars)."""
    from tqdm.auto import tqdm

    if _read_on_disk(args):
        return _load_graph(args)
    with tqdm(total=1, desc="read", disable=args.no_progress, file=sys.stderr,
              bar_format="{l_bar}{bar}| {elapsed}") as bar:
        loaded = _load_graph(args)
        bar.update(1)
    return loaded


def cmd_partition(args: argparse.Namespace) -> int:
    return with_progress_bars(_partition, args)


def _partition(args: argparse.Namespace) -> int:
    from .cli_input import untrainable_warning

    _check_request(args)
    t0 = time.perf_counter()
    log.info(f"reading {args.dataset or args.input} ...")
    graph, extra_meta = _read_stage(args)
    read_s = time.perf_counter() - t0
    log.info(f"read {graph!r} in {read_s:.2f}s")
    if graph.preprocessing:
        counts = ", ".join(f"{k} {v}" for k, v in graph.preprocessing.items())
        who = ("the generator's cleaning (every draw stored both ways, self-loops and repeats dropped)"
               if args.dataset else "--symmetrize/--remove-* and the reader")
        log.info(f"preprocessing, by {who}: {counts}")
    if (untrainable := untrainable_warning(graph)) is not None:
        log.warning(untrainable)
    _check_parts(args.parts, graph.num_nodes, args.dataset or args.input)
    _check_memory(args, graph, log_estimate=not _read_on_disk(args))
    if args.family is not None:
        from .cli_family import write_family

        reports = write_family(args, lambda out: _cut(args, graph, out, read_s, extra_meta))
        if args.json:
            emit_json({"family": args.out, "source": args.dataset or args.input, "split": extra_meta.get("split"),
                        "members": {str(p): r for p, r in reports.items()}})
        return EXIT_OK
    report = _cut(args, graph, args.out, read_s, extra_meta)
    if args.json:
        report["source"] = args.dataset or args.input
        report["split"] = extra_meta.get("split")
        emit_json(report)
    return EXIT_OK


def _cut(args: argparse.Namespace, graph: Any, out: Any, read_s: float, extra_meta: dict[str, Any]) -> dict[str, Any]:
    """Cut ``graph`` into ``args.parts`` parts, write the folder ``out``, log its report; the report."""
    from .api import partition_graph
    from .report import report_lines

    report = partition_graph(graph, args.parts, args.method, out, seed=args.seed,
                             refine=args.refine, balance=args.balance, overwrite=args.overwrite,
                             progress=not args.no_progress, read_time_s=read_s, extra_meta=extra_meta,
                             part_weights=args.part_weights, refine_objective=args.refine_objective,
                             device_memory=args.device_memory)
    for line in report_lines(report):
        log.info(line)
    if report.get("empty_parts"):
        log.warning(f"{report['empty_parts']} of {args.parts} parts are empty: their ranks will "
                    f"hold no nodes and do no work; consider fewer parts or another method")
    log.info(f"wrote {out}")
    return report
