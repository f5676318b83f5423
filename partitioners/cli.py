"""The ``gnn-dist`` command line: ``datasets``, ``partition``, ``inspect`` and ``train``.

This module is torch-free: ``partition``/``inspect``/``datasets`` run on machines without torch,
and ``train`` hands over to ``torchrun`` in a child process.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import time
from typing import Sequence

from .errors import GraphError, PartitionFormatError

log = logging.getLogger("gnn_dist.cli")

BALANCE_CRITERIA = ("nodes", "edges", "train")


def _init_logger(verbose: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("[gnn-dist] %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)


def _emit_json(obj: object) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")
    sys.stdout.flush()


def _balance(value: str) -> tuple[str, ...]:
    items = tuple(v.strip() for v in value.split(",") if v.strip())
    bad = [v for v in items if v not in BALANCE_CRITERIA]
    if bad or not items:
        raise argparse.ArgumentTypeError(
            f"--balance {value!r}: unknown criterion {bad[0] if bad else '(empty)'}; "
            f"choose from {', '.join(BALANCE_CRITERIA)} (comma-separated)")
    return items


def _positive_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {n}")
    return n


def build_parser() -> argparse.ArgumentParser:
    from .io import FORMATS
    from .methods import METHODS

    parser = argparse.ArgumentParser(prog="gnn-dist", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    ds = sub.add_parser("datasets", help="list the built-in dataset catalog")
    ds.add_argument("--json", action="store_true", help="print the catalog as JSON")

    p = sub.add_parser("partition", help="read or generate a graph, partition it, write a partition folder")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--dataset", help="a built-in dataset name (see `gnn-dist datasets`)")
    src.add_argument("--input", help="path of a graph file or OGB dataset folder")
    p.add_argument("--input-format", choices=FORMATS, default=None,
                   help="format of --input (default: inferred from the path)")
    p.add_argument("--parts", type=_positive_int, required=True, help="number of parts P")
    p.add_argument("--method", choices=METHODS, default="metis", help="partitioning method (default: metis)")
    p.add_argument("--refine", action="store_true",
                   help="move boundary nodes to lower the communication volume, keeping balance")
    p.add_argument("--balance", type=_balance, default=("nodes",),
                   help="what to balance: comma-separated of nodes,edges,train (default: nodes)")
    p.add_argument("--symmetrize", action="store_true", help="add the reverse of every edge (input files only)")
    p.add_argument("--remove-self-loops", action="store_true", help="drop self-loop edges (input files only)")
    p.add_argument("--remove-duplicates", action="store_true", help="drop repeated edges (input files only)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    p.add_argument("--out", required=True, help="output partition folder")
    p.add_argument("--overwrite", action="store_true", help="replace an existing partition folder")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--json", action="store_true", help="print the quality report as JSON on stdout")

    i = sub.add_parser("inspect", help="describe and check a partition folder")
    i.add_argument("dir", help="partition folder")
    i.add_argument("--verify", action="store_true",
                   help="check checksums, shapes, id ranges and cross-part consistency")
    i.add_argument("--json", action="store_true", help="print the metadata (and problems) as JSON")

    t = sub.add_parser("train", help="train on a partition folder with torchrun on this machine",
                       description="Runs `torchrun --standalone --nproc-per-node P -m gnn_dist.train "
                                   "--data DIR ...`; every argument after the known ones is passed on.")
    t.add_argument("--data", required=True, help="partition folder")
    t.add_argument("--nproc", type=_positive_int, default=None,
                   help="processes (ranks); default: the folder's num_parts")
    return parser


def _load_graph(args: argparse.Namespace):
    if args.dataset:
        from .catalog import load_dataset

        if args.symmetrize or args.remove_self_loops or args.remove_duplicates:
            log.warning("--symmetrize/--remove-* apply to --input only; built-in datasets are already clean")
        return load_dataset(args.dataset, seed=args.seed)
    from .io import read_graph

    return read_graph(args.input, args.input_format, symmetrize=args.symmetrize,
                      remove_self_loops=args.remove_self_loops,
                      remove_duplicates=args.remove_duplicates)


def _format_report(report: dict) -> list[str]:
    q = report.get("quality", report)
    times = q.get("time_s", {})
    lines = [
        f"parts: {report.get('num_parts')}  nodes: {report.get('num_nodes')}  edges: {report.get('num_edges')}"
        f"  method: {report.get('method')}",
        f"edge cut: {q['edge_cut']}  communication volume (halo rows): {q['comm_volume']}",
        f"halo fraction: max {q['max_halo_fraction']:.4f}  mean {q['mean_halo_fraction']:.4f}",
        f"balance (max/mean): nodes {q['node_balance']:.3f}  edges {q['edge_balance']:.3f}"
        f"  train {q['train_balance']:.3f}",
    ]
    if q.get("empty_parts"):
        lines.append(f"empty parts: {q['empty_parts']}")
    if times:
        lines.append("time: " + "  ".join(f"{k} {v:.2f}s" for k, v in times.items()))
    if q.get("peak_rss_bytes"):
        lines.append(f"peak RSS: {q['peak_rss_bytes'] / 2**20:.0f} MiB")
    return lines


def cmd_datasets(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from .catalog import list_datasets

    infos = list_datasets()
    if args.json:
        _emit_json([asdict(d) for d in infos])
        return 0
    width = max(len(d.name) for d in infos)
    for d in infos:
        log.info(f"{d.name:<{width}}  {d.num_nodes:>10,} nodes  ~{d.num_edges:>12,} edges  "
                 f"dim {d.feature_dim:<4} classes {d.num_classes:<3} {d.description}")
    return 0


def cmd_partition(args: argparse.Namespace) -> int:
    from .api import partition_graph

    t0 = time.perf_counter()
    log.info(f"reading {args.dataset or args.input} ...")
    graph = _load_graph(args)
    read_s = time.perf_counter() - t0
    log.info(f"read {graph!r} in {read_s:.2f}s")
    if graph.preprocessing:
        log.info("preprocessing: " + ", ".join(f"{k} {v}" for k, v in graph.preprocessing.items()))
    report = partition_graph(graph, args.parts, args.method, args.out, seed=args.seed,
                             refine=args.refine, balance=args.balance, overwrite=args.overwrite,
                             progress=not args.no_progress, read_time_s=read_s)
    for line in _format_report(report):
        log.info(line)
    log.info(f"wrote {args.out}")
    if args.json:
        _emit_json(report)
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    from .format import load_partition_meta, verify_partition

    meta = load_partition_meta(args.dir)
    problems = verify_partition(args.dir, check_hashes=True) if args.verify else []
    if args.json:
        _emit_json({"meta": meta.raw, "verified": args.verify, "problems": problems})
    else:
        log.info(f"{args.dir}: format v{meta.raw['version']}, {meta.num_parts} parts, "
                 f"{meta.num_nodes} nodes, {meta.num_edges} edges, method {meta.method}, seed {meta.seed}")
        log.info(f"features: dim {meta.feature_dim} {meta.feature_dtype}; classes {meta.num_classes} "
                 f"({meta.label_kind})")
        for pm in meta.parts:
            log.info(f"part {pm.part_id}: inner {pm.num_inner}  halo {pm.num_halo}  "
                     f"edges {pm.num_local_edges}  global ids {pm.global_id_range}  train {pm.num_train}")
        for line in _format_report(meta.raw):
            log.info(line)
        if args.verify:
            log.info("verify: OK" if not problems else f"verify: {len(problems)} problem(s)")
    for problem in problems:
        log.error(problem)
    return 1 if problems else 0


def cmd_train(args: argparse.Namespace, rest: Sequence[str]) -> int:
    from .format import load_partition_meta

    nproc = args.nproc or load_partition_meta(args.data).num_parts
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
           "-m", "gnn_dist.train", "--data", args.data, *rest]
    log.info("running: " + " ".join(cmd))
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // nproc)))
    return subprocess.call(cmd, env=env)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if rest and args.command != "train":
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    _init_logger(args.verbose)
    try:
        if args.command == "datasets":
            return cmd_datasets(args)
        if args.command == "partition":
            return cmd_partition(args)
        if args.command == "inspect":
            return cmd_inspect(args)
        return cmd_train(args, rest)
    except (GraphError, PartitionFormatError, FileNotFoundError, FileExistsError, ValueError) as exc:
        log.error(f"error: {exc}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
