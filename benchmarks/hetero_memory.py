"""The memory planner on a typed graph: R-GCN, HGT and hetero-sage with learnable rows, predicted
vs measured peak.

Each case is a real ``gnn-dist train`` run (torchrun, P gloo ranks on CPU) on an ogbn-mag-shaped
:func:`~partitioners.hetero.synthetic.mag_graph` (METIS parts, cached under
``benchmarks/.cache``) with ``--metrics``: every rank's measured peak (the resident set's
high-water mark during ``fit``) beside the planner's prediction for that rank (what ``train``
logs at start), through :func:`memory_plan.run_case`. Ratio = predicted / measured; issue 34's
target is within 10%.

Usage (from the repository root)::

    python benchmarks/hetero_memory.py                 # 200k nodes, P = 2, R-GCN; ~3 min on 2 cores
    python benchmarks/hetero_memory.py --models rgcn hgt hetero-sage --parts 1 2

Writes ``benchmarks/results/hetero_memory_<hw>_<date>.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

import common
import memory_plan

log = logging.getLogger("hetero_memory")

FLAGS = ["--embedding-dim", "128", "--dropout", "0.5"]
"""Every case's flags besides the model and the widths: 128-d learnable rows for the featureless types."""


def partition(num_nodes: int, num_edges: int, num_classes: int, parts: int, seed: int, cache_dir: str) -> str:
    """The METIS partition of ``mag_graph(num_nodes, num_edges, num_classes, 128)`` (made once)."""
    from partitioners.api import partition_graph
    from partitioners.hetero.synthetic import mag_graph

    digest = common.source_digest(common.repo_root() / "partitioners")[:12]
    name = f"mag-{num_nodes}-{num_edges}-c{num_classes}-f128-seed{seed}"
    path = Path(cache_dir) / "partitions" / f"{name}-metis-p{parts}-{digest}"
    if not (path / "partition.json").exists():
        graph = mag_graph(num_nodes, num_edges, num_classes, 128, seed=seed, name=name)
        partition_graph(graph, parts, "metis", path, seed=seed, overwrite=True)
    return str(path)


def render(args: argparse.Namespace, rows: list[dict[str, Any]], env: dict[str, Any]) -> str:
    table = [[r["model"], r["parts"], ", ".join(common.fmt_bytes(m) for m in r["measured"]),
              ", ".join(common.fmt_bytes(p) for p in r["predicted"]),
              ", ".join(f"{x:.3f}" for x in r["ratios"]),
              ", ".join(f"{(p - b) / (m - b):.3f}" for p, m, b in zip(r["predicted"], r["measured"], r["baseline"])),
              "yes" if all(abs(x - 1) <= 0.10 for x in r["ratios"]) else "no"] for r in rows]
    return "\n".join([
        f"# Memory planner on a typed graph: typed models with learnable rows ({env['date']})", "",
        f"`mag_graph({args.num_nodes}, {args.num_edges}, {args.num_classes}, 128)` (reverses included), METIS "
        f"parts; `gnn-dist train --model MODEL --hidden {args.hidden} --layers 2 {' '.join(FLAGS)} --epochs "
        f"{args.epochs}` on CPU (gloo). Ratio = predicted / measured peak per rank; 'above baseline' compares "
        f"both less the measured baseline (the process before the partition and trainer).", "",
        common.markdown_table(["model", "P", "measured peak", "predicted", "predicted / measured",
                               "above baseline", "within 10%"], table), "",
        f"Machine: {env['cpu_model']}, {env['cpu_count']} logical CPUs (load average "
        f"{env['load_average_1_5_15']}); torch {env['packages'].get('torch')}; git {env['git_revision']}.",
        f"Rerun: `python benchmarks/hetero_memory.py --models {' '.join(args.models)} --parts "
        f"{' '.join(map(str, args.parts))} --num-nodes {args.num_nodes} --num-edges {args.num_edges} --epochs "
        f"{args.epochs}`.", ""])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--num-nodes", type=int, default=200_000)
    p.add_argument("--num-edges", type=int, default=1_000_000)
    p.add_argument("--num-classes", type=int, default=16)
    p.add_argument("--parts", type=int, nargs="+", default=[2])
    p.add_argument("--models", nargs="+", default=["rgcn"], help="typed models (registered with typed=True)")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="result stem (default benchmarks/results/hetero_memory_<hw>_<date>)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    cfg = memory_plan.BenchConfig(hidden=args.hidden, layers=2, epochs=args.epochs, seed=args.seed)
    t0 = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for parts in args.parts:
            path = partition(args.num_nodes, args.num_edges, args.num_classes, parts, args.seed, cfg.cache_dir)
            for model in args.models:
                row = memory_plan.run_case(path, model, cfg, Path(tmp), flags=FLAGS)
                log.info("%s P=%d: predicted/measured %s", model, parts, [round(r, 3) for r in row["ratios"]])
                rows.append({"model": model, "parts": parts, **row})
    env = common.environment(("torch", "numba"))
    payload = {"args": vars(args), "flags": FLAGS, "cases": rows, "environment": env,
               "wall_s": time.perf_counter() - t0}
    markdown = render(args, rows, env)
    for f in common.write_results(args.out or common.default_result_stem("hetero_memory"), payload, markdown):
        log.info("wrote %s", f)
    print(markdown)


if __name__ == "__main__":
    main()
