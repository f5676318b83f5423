"""Benchmark of the max-volume refinement: the busiest link, METIS against METIS + refinement.

A synchronous halo exchange takes as long as its busiest rank: the largest number of halo rows
one part sends or receives per layer. On R-MAT graphs from :func:`partitioners.synthetic.rmat_graph`
at ``P`` parts this measures, for METIS alone, METIS + ``refine_objective="volume"`` (the total)
and METIS + ``refine_objective="max-volume"``: the busiest link (max over parts of send and
receive), the largest send and receive separately, the total volume, the node balance and the
refinement's time. Target: the busiest link at least 15% below METIS's, the total at most 5%
above, the balance kept (every part within 3% of the mean).

Usage::

    python benchmarks/max_volume.py --num-nodes 16384 32768 --edge-factor 16 --parts 8 \\
        --out results.json

Prints a Markdown table (and writes the raw numbers as JSON with ``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from typing import Any

import numpy as np

from partitioners.methods import metis_assign, refine_max_volume, refine_volume
from partitioners.quality import partition_quality
from partitioners.synthetic import rmat_graph


def measure(graph: Any, assignment: np.ndarray, num_parts: int, seconds: float) -> dict[str, Any]:
    q = partition_quality(graph, assignment, num_parts)
    return {"busiest_link": max(q["max_send_volume"], q["max_recv_volume"]),
            "max_send": q["max_send_volume"], "max_recv": q["max_recv_volume"],
            "total_volume": q["comm_volume"], "node_balance": q["node_balance"], "time_s": seconds}


def bench_graph(num_nodes: int, edge_factor: int, num_parts: int, seed: int) -> dict[str, Any]:
    g = rmat_graph(num_nodes, edge_factor * num_nodes, feature_dim=1, seed=seed)
    t = time.perf_counter()
    metis = metis_assign(g, num_parts, seed=seed)
    res: dict[str, Any] = {"num_nodes": g.num_nodes, "num_edges": g.num_edges,
                           "metis": measure(g, metis, num_parts, time.perf_counter() - t)}
    for name, refine in (("volume", refine_volume), ("max-volume", refine_max_volume)):
        t = time.perf_counter()
        out = refine(g, metis, num_parts, seed=seed)
        res[name] = measure(g, out, num_parts, time.perf_counter() - t)
    base = res["metis"]
    for name in ("volume", "max-volume"):
        r = res[name]
        r["busiest_vs_metis"] = r["busiest_link"] / base["busiest_link"] - 1
        r["total_vs_metis"] = r["total_volume"] / base["total_volume"] - 1
    mv = res["max-volume"]
    res["target_met"] = bool(mv["busiest_vs_metis"] <= -0.15 and mv["total_vs_metis"] <= 0.05
                             and mv["node_balance"] <= 1.03 + 1e-9)
    return res


def table(results: list[dict[str, Any]], num_parts: int) -> str:
    rows = [f"R-MAT at P={num_parts}: halo rows per layer", "",
            "| graph | partition | busiest link | max send | max recv | total | vs METIS (busiest / total) "
            "| node balance | refine time (s) |",
            "| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: |"]
    for res in results:
        graph = f"{res['num_nodes']} nodes, {res['num_edges']} edges"
        for name, label in (("metis", "METIS"), ("volume", "METIS + refine volume"),
                            ("max-volume", "METIS + refine max-volume")):
            r = res[name]
            vs = ("" if name == "metis" else
                  f"{100 * r['busiest_vs_metis']:+.1f}% / {100 * r['total_vs_metis']:+.1f}%")
            time_s = "" if name == "metis" else f"{r['time_s']:.1f}"
            rows.append(f"| {graph} | {label} | {r['busiest_link']} | {r['max_send']} | {r['max_recv']} "
                        f"| {r['total_volume']} | {vs} | {r['node_balance']:.3f} | {time_s} |")
    return "\n".join(rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-nodes", type=int, nargs="+", default=[1 << 14, 1 << 15])
    p.add_argument("--edge-factor", type=int, default=16)
    p.add_argument("--parts", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="write the numbers as JSON here")
    args = p.parse_args()
    results = [bench_graph(n, args.edge_factor, args.parts, args.seed) for n in args.num_nodes]
    print(table(results, args.parts))
    if args.out:
        doc = {"num_parts": args.parts, "edge_factor": args.edge_factor, "seed": args.seed,
               "graphs": results, "env": {"python": platform.python_version(), "numpy": np.__version__,
                                          "machine": platform.machine(), "cpus": os.cpu_count()}}
        tmp = f"{args.out}.tmp-{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=2)
        os.replace(tmp, args.out)


if __name__ == "__main__":
    main()
