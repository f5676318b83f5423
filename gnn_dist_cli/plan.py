"""``gnn-dist plan``: the memory planner's per-rank prediction of a training run and the cheapest
memory settings that fit a device, for a partition folder (``--data``) or for a graph given by
its sizes (``--nodes --edges --feature-dim --classes --parts``, the halo rows from a halo model).

The training flags that change memory (``--model``, ``--hidden``, ``--layers``, ``--heads``,
``--recompute``, ``--precision``, ``--feature-storage`` ...) are ``gnn_dist.train``'s own, parsed
by its parser. Torch-free at import: the planner (``gnn_dist.memory_plan``) is imported when the
verb runs.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from typing import Any

from partitioners.cli_args import UsageError, parts_list, positive_int

__all__ = ["add_plan_verb", "cmd_plan", "SPEC_FLAGS"]

log = logging.getLogger(__name__)

SPEC_FLAGS = ("nodes", "edges", "feature_dim", "classes", "parts")
"""The size spec's flags (all needed without ``--data``)."""


def _ratio(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a halo ratio: halo rows per inner row, a number >= 0")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number > 0")
    return value


def add_plan_verb(sub: argparse._SubParsersAction, verbose: argparse.ArgumentParser) -> None:
    """Add the ``plan`` parser to ``sub`` (``verbose``: the shared -v/-q parent)."""
    p = sub.add_parser("plan", parents=[verbose], allow_abbrev=False,
                       help="predict each rank's peak memory of a training run and the cheapest settings "
                            "that fit a device",
                       description="Per rank, the predicted peak of each component (runtime, block, features, "
                                   "halo buffers, activations, optimizer, workspace, the task's own: link "
                                   "prediction's pairs and evaluation; a typed run's learnable rows "
                                   "gathered on rank 0 at a save: --checkpoint-dir, --save-model) and "
                                   "the total; with "
                                   "--device-memory the cheapest memory settings that fit. Training flags "
                                   "(--model, --hidden, --layers, --heads, --recompute, --precision, "
                                   "--feature-storage, --feature-cache-budget, ...) are gnn_dist.train's.",
                       epilog="See docs/cli.md#plan and docs/scaling.md.")
    p.add_argument("--data", metavar="DIR", help="partition folder (or give the sizes below)")
    p.add_argument("--typed-spec", metavar="NAME", help="a published typed graph's sizes by name (ogbn-mag), "
                                                        "instead of a folder or the size spec; with --parts")
    p.add_argument("--nodes", type=positive_int, metavar="N", help="size spec: nodes of the graph")
    p.add_argument("--edges", type=positive_int, metavar="E",
                   help="size spec: edges as published (stored both ways unless --directed)")
    p.add_argument("--feature-dim", type=positive_int, metavar="F", help="size spec: input features per node")
    p.add_argument("--classes", type=positive_int, metavar="C", help="size spec: classes")
    p.add_argument("--parts", type=parts_list, metavar="P[,P...]", help="size spec: parts (ranks), or a list")
    p.add_argument("--directed", action="store_true", help="size spec: store the edges one way only")
    p.add_argument("--halo-model", default="rmat", choices=("rmat", "sbm"),
                   help="size spec: the METIS halo model (docs/scaling.md) (default: rmat)")
    p.add_argument("--halo-ratio", type=_ratio, metavar="R", help="size spec: halo rows per inner row (overrides "
                                                                  "--halo-model)")
    p.add_argument("--device", choices=("cpu", "cuda"), default=None,
                   help="where the ranks train (default: cuda with --device-memory, else cpu)")
    p.add_argument("--device-memory", metavar="SIZE[,SIZE...]",
                   help="memory of one device (80GB, 512MiB): recommend the cheapest settings that fit it; or one "
                        "size per rank (40G,20G,20G, with --data): every rank checked against its own device")
    p.add_argument("--schedules", action="store_true",
                   help="also compare the parallel schedules (graph sync, layer S, hybrid S x G on the same ranks): "
                        "bytes per epoch, epoch time with --link-gbps, the recommended one (docs/layer_parallel.md)")
    p.add_argument("--link-gbps", type=_positive_float, metavar="GBPS",
                   help="with --schedules: each rank's link in Gbit/s; rank the schedules by predicted epoch time")
    p.add_argument("--edge-rate", type=_positive_float, metavar="R",
                   help="with --schedules: edge-feature products per second per rank (default: the measured CPU "
                        "rank's, 2.2e8)")
    p.add_argument("--schedule-chunks", type=positive_int, metavar="K",
                   help="with --schedules: the chunks of the layer and hybrid candidates (default: the run's "
                        "--chunks with --parallel layer|hybrid, else 4; 1 is exact)")
    p.add_argument("--halo-data", nargs="+", default=[], metavar="DIR",
                   help="with --schedules and --data: folders of the same graph in other part counts (the halo rows "
                        "of hybrid's G parts; otherwise scaled by --halo-model)")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")


def _spec_part(args: argparse.Namespace, parts: int, task: str = "auto") -> Any:
    """The size spec's mean part at ``parts`` parts; link prediction's pairs (``--task link``)
    from :data:`~gnn_dist.memory_plan.SPEC_EDGE_SPLIT` of the edges."""
    from gnn_dist.memory_plan import SPEC_EDGE_SPLIT, sizes_from_spec

    return sizes_from_spec(nodes=args.nodes, edges=args.edges, feature_dim=args.feature_dim, num_classes=args.classes,
                           num_parts=parts, halo=args.halo_ratio, halo_model=args.halo_model,
                           symmetric=not args.directed, edge_split=SPEC_EDGE_SPLIT if task == "link" else None)


def _sizes(args: argparse.Namespace, task: str = "auto") -> tuple[list[list[Any]], str]:
    """The parts' sizes per part count, and a description of where they came from."""
    from gnn_dist.memory_plan import sizes_from_meta

    given = [f for f in SPEC_FLAGS if getattr(args, f) is not None]
    if args.typed_spec is not None:
        return _typed_spec(args, given), f"{args.typed_spec} (typed), {args.halo_model} halo model"
    if args.data is not None:
        if given:
            raise UsageError(f"plan: --data {args.data} and --{given[0].replace('_', '-')} exclude each other; give "
                             f"a partition folder or a size spec")
        from partitioners.format import load_partition_meta

        return [sizes_from_meta(load_partition_meta(args.data))], args.data
    missing = [f"--{f.replace('_', '-')}" for f in SPEC_FLAGS if getattr(args, f) is None]
    if missing:
        raise UsageError(f"plan: give --data DIR (a partition folder) or a whole size spec; missing "
                         f"{', '.join(missing)}")
    out = [[_spec_part(args, p, task)] for p in args.parts]
    halo = f"halo ratio {args.halo_ratio}" if args.halo_ratio is not None else f"{args.halo_model} halo model"
    return out, f"{args.nodes:,} nodes, {args.edges:,} edges, {args.feature_dim} features, {args.classes} classes, {halo}"


def _typed_spec(args: argparse.Namespace, given: list[str]) -> list[list[Any]]:
    """The parts of ``--typed-spec NAME`` at each of ``--parts``."""
    from gnn_dist.memory_plan import TYPED_SPECS, typed_sizes_from_spec

    if args.typed_spec not in TYPED_SPECS:
        raise UsageError(f"plan: --typed-spec {args.typed_spec}: not a known typed graph; known: "
                         f"{', '.join(sorted(TYPED_SPECS))}")
    extra = [f"--{f.replace('_', '-')}" for f in given if f != "parts"] + (["--data"] if args.data else [])
    if extra or args.parts is None:
        raise UsageError(f"plan: --typed-spec takes --parts and none of {', '.join(extra) or 'the size spec'}")
    return [[typed_sizes_from_spec(args.typed_spec, p, args.halo_model, args.halo_ratio)] for p in args.parts]


def _meta(args: argparse.Namespace) -> Any:
    """The ``--data`` folder's metadata (``--task auto`` resolves by it), else None."""
    if args.data is None:
        return None
    from partitioners.format import load_partition_meta

    return load_partition_meta(args.data)


def _config(rest: Sequence[str]) -> Any:
    from gnn_dist.config_cli import UsageError as ConfigUsage, parse_run_config

    try:
        return parse_run_config(["--data", "-", *rest])[0]
    except ConfigUsage as exc:
        raise UsageError(f"plan: {str(exc).replace('gnn_dist.train: error: ', '')}") from None


def _device_memory(args: argparse.Namespace) -> int | tuple[int, ...] | None:
    """``--device-memory``: bytes of one device, or a tuple of each rank's own (several sizes)."""
    from partitioners.memory import parse_size_list

    if args.device_memory is None:
        return None
    try:
        sizes = parse_size_list(args.device_memory)
    except ValueError as exc:
        raise UsageError(f"--device-memory: {exc}") from None
    return sizes[0] if len(sizes) == 1 else sizes


def _recorded_device_memory(args: argparse.Namespace, config: Any, meta: Any) -> tuple[int, ...] | None:
    """The ``--data`` folder's devices (``meta``: its metadata, None without ``--data``), when its
    parts were sized by ``partition --device-memory`` (recorded in ``partition.json``): each rank
    is then checked against its own device. Not for layer parallelism, whose ranks are stages x parts."""
    if meta is None or args.typed_spec is not None or config.trainer.parallel.parallel != "graph":
        return None
    from partitioners.memory import format_bytes

    sizes = meta.device_memory
    if sizes is not None:
        log.info(f"device memory per rank: {','.join(format_bytes(b) for b in sizes)}, recorded in {args.data}/partition.json "
                 f"by partition --device-memory (give --device-memory to plan for other devices)")
    return sizes


def _check_rank_devices(args: argparse.Namespace, limit: Any, ranks: int) -> None:
    """A device per rank needs a folder's parts (a size spec plans the mean part) and one size per rank."""
    if not isinstance(limit, tuple):
        return
    if args.data is None:
        raise UsageError(f"plan: --device-memory {args.device_memory} gives a device per rank, which needs --data DIR "
                         f"(a folder's parts; a size spec plans the mean part): give one size, or --data")
    if len(limit) != ranks:
        raise UsageError(f"plan: --device-memory {args.device_memory} gives {len(limit)} sizes for the {ranks} ranks "
                         f"of {args.data}; give one size per rank (world rank order), or one size for every rank")


def cmd_plan(args: argparse.Namespace, rest: Sequence[str]) -> int:
    from gnn_dist.memory_plan import Workload, plan_memory, render_plan
    from gnn_dist.memory_plan.stages import stage_count

    limit = _device_memory(args)
    if (args.link_gbps or args.edge_rate or args.halo_data or args.schedule_chunks) and not args.schedules:
        raise UsageError("plan: --link-gbps, --edge-rate, --schedule-chunks and --halo-data compare schedules: "
                         "add --schedules")
    config = _config(rest)
    runs, source = _sizes(args, config.trainer.task.task)
    meta = _meta(args)   # the folder, once --data is checked
    limit = limit or _recorded_device_memory(args, config, meta)
    device = args.device or ("cuda" if limit is not None else "cpu")
    workload = Workload.from_config(config, device, meta)
    _check_rank_devices(args, limit, len(runs[0]) * stage_count(workload))
    def at(parts: int) -> list[Any]:
        """The size spec's mean part at ``parts`` parts (how many parts would fit)."""
        return [_spec_part(args, parts, workload.task)]
    spec = args.data is None and args.typed_spec is None
    plans = [plan_memory(sizes, workload, limit, at if spec else None) for sizes in runs]
    schedules = [_schedules(args, config, workload, sizes) for sizes in runs] if args.schedules else None
    if args.json:
        out = [p.to_json() for p in plans]
        for o, sch in zip(out, schedules or []):
            o["schedules"] = sch.to_json()
        sys.stdout.write(json.dumps({"source": source, "plans": out} if len(out) > 1 else {"source": source, **out[0]},
                                    indent=1) + "\n")
        return 0
    log.info(f"graph: {source}")
    for p in plans:
        for line in render_plan(p):
            log.info(line)
    for sch in schedules or []:
        for line in sch.render():
            log.info(line)
    return 0


def _schedules(args: argparse.Namespace, config: Any, workload: Any, sizes: list[Any]) -> Any:
    """The schedule comparison of one part count (:mod:`gnn_dist.memory_plan.schedule_cost`)."""
    from gnn_dist.memory_plan import sizes_from_meta
    from gnn_dist.memory_plan.model import num_parameters
    from gnn_dist.memory_plan.schedule_cost import (EDGE_RATE, ScheduleGraph, ScheduleModel, ScheduleTable,
                                                    schedule_costs, shared_parameters, workload_row_bytes)

    s0, parts = sizes[0], sizes[0].num_parts
    if args.data is not None:
        from partitioners.format import load_partition_meta

        halo = {parts: sum(s.halo for s in sizes)}
        for folder in args.halo_data:
            more = sizes_from_meta(load_partition_meta(folder))
            halo[more[0].num_parts] = sum(s.halo for s in more)
        graph = ScheduleGraph(nodes=sum(s.inner for s in sizes), edges=sum(s.edges for s in sizes), halo=halo,
                              halo_model=args.halo_model)
    else:
        halo = {g: _spec_part(args, g).halo * g for g in range(1, parts + 1) if parts % g == 0}
        graph = ScheduleGraph(nodes=args.nodes, edges=s0.edges * parts, halo=halo, halo_model=args.halo_model)
    m = config.model
    jk = getattr(m, "jk", "last") or "last"
    model = ScheduleModel(layers=m.layers, hidden=m.hidden, params=num_parameters(workload, s0),
                          shared_params=shared_parameters(m.model, feature_dim=s0.feature_dim, hidden=m.hidden,
                                                          classes=s0.num_classes, layers=m.layers, jk=jk),
                          carry={"max": m.hidden, "cat": s0.num_classes}.get(jk, 0),
                          row_bytes=workload_row_bytes(workload, s0),
                          staged_row_bytes=workload_row_bytes(workload, s0, staged=True))
    par = config.trainer.parallel
    chunks = args.schedule_chunks or (par.chunks if par.parallel != "graph" else 4)
    return ScheduleTable(schedule_costs(graph, model, parts, chunks=chunks, link_gbps=args.link_gbps,
                                        edge_rate=args.edge_rate or EDGE_RATE), chunks, args.link_gbps)
