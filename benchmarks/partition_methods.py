"""Micro-benchmark of the partition methods, the refinement and the quality report.

Measures, on an R-MAT graph from :func:`partitioners.synthetic.rmat_graph`:

* ``metis``: the whole path (:func:`partitioners.methods.metis_assign`) against raw
  ``pymetis.part_graph`` on the already symmetrised CSR (the target is a ratio <= 1.5);
* ``ldg`` / ``fennel``: streaming throughput in edges/s at the default micro-batch, and the edge
  cut against one node at a time (``batch_nodes=1``, on a smaller graph: it is slow);
* ``refine``: communication volume of METIS alone and after :func:`refine_volume`;
* ``quality``: the time of :func:`partition_quality`.

Usage::

    python benchmarks/partition_methods.py --num-nodes 131072 --edge-factor 16 --parts 8 \\
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

from partitioners.methods import (assign_parts, fennel_assign, ldg_assign, metis_assign,
                                  refine_volume)
from partitioners.methods.metis import symmetric_adjacency
from partitioners.quality import partition_quality
from partitioners.synthetic import rmat_graph


def timed(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
    t = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t


def bench(num_nodes: int, edge_factor: int, num_parts: int, seq_nodes: int, seed: int) -> dict:
    import pymetis

    g, t_gen = timed(rmat_graph, num_nodes, edge_factor * num_nodes, feature_dim=1, seed=seed)
    res: dict[str, Any] = {"graph": {"num_nodes": g.num_nodes, "num_edges": g.num_edges,
                                     "generate_s": t_gen}, "num_parts": num_parts}

    # METIS: whole path against raw pymetis on a prepared CSR (same options)
    (xadj, adjncy), t_sym = timed(symmetric_adjacency, g)
    opts = pymetis.Options(seed=seed, ufactor=30)
    _, t_raw = timed(pymetis.part_graph, num_parts, pymetis.CSRAdjacency(xadj, adjncy), options=opts)
    a_metis, t_metis = timed(metis_assign, g, num_parts, seed=seed)
    q_metis = partition_quality(g, a_metis, num_parts)
    res["metis"] = {"raw_pymetis_s": t_raw, "symmetrize_s": t_sym, "whole_path_s": t_metis,
                    "ratio": t_metis / t_raw, "edge_cut": q_metis["edge_cut"],
                    "comm_volume": q_metis["comm_volume"]}

    # refinement
    a_ref, t_ref = timed(refine_volume, g, a_metis, num_parts, seed=seed)
    q_ref = partition_quality(g, a_ref, num_parts)
    res["refine"] = {"time_s": t_ref, "comm_volume": q_ref["comm_volume"],
                     "volume_reduction": 1 - q_ref["comm_volume"] / q_metis["comm_volume"],
                     "edge_cut": q_ref["edge_cut"], "node_balance": q_ref["node_balance"]}

    # streaming
    small = rmat_graph(seq_nodes, edge_factor * seq_nodes, feature_dim=1, seed=seed)
    for name, fn in (("ldg", ldg_assign), ("fennel", fennel_assign)):
        a, t = timed(fn, g, num_parts, seed=seed)
        q = partition_quality(g, a, num_parts)
        batched = partition_quality(small, fn(small, num_parts, seed=seed), num_parts)
        seq, t_seq = timed(fn, small, num_parts, seed=seed, batch_nodes=1)
        sequential = partition_quality(small, seq, num_parts)
        res[name] = {"time_s": t, "edges_per_s": g.num_edges / t,
                     "edge_cut_fraction": q["edge_cut"] / g.num_edges,
                     "comm_volume": q["comm_volume"], "node_balance": q["node_balance"],
                     "small_graph": {"num_edges": small.num_edges,
                                     "cut_batched": batched["edge_cut"] / small.num_edges,
                                     "cut_sequential": sequential["edge_cut"] / small.num_edges,
                                     "sequential_edges_per_s": small.num_edges / t_seq}}

    a_rand = assign_parts(g, num_parts, "random", seed=seed)
    q_rand, t_q = timed(partition_quality, g, a_rand, num_parts)
    res["random"] = {"edge_cut_fraction": q_rand["edge_cut"] / g.num_edges,
                     "comm_volume": q_rand["comm_volume"]}
    res["quality"] = {"time_s": t_q, "edges_per_s": g.num_edges / t_q}
    return res


def table(res: dict) -> str:
    g = res["graph"]
    m, r = res["metis"], res["refine"]
    rows = [f"R-MAT, {g['num_nodes']} nodes, {g['num_edges']} edges, P={res['num_parts']}", "",
            "| what | time (s) | throughput | edge cut | comm volume | note |",
            "| --- | ---: | ---: | ---: | ---: | --- |",
            f"| metis (whole path) | {m['whole_path_s']:.2f} | | {m['edge_cut']} | {m['comm_volume']} "
            f"| raw pymetis {m['raw_pymetis_s']:.2f} s, ratio {m['ratio']:.2f} |",
            f"| metis + refine | {r['time_s']:.2f} (refine) | | {r['edge_cut']} | {r['comm_volume']} "
            f"| volume -{100 * r['volume_reduction']:.1f}%, node balance {r['node_balance']:.3f} |"]
    for name in ("ldg", "fennel"):
        s = res[name]
        sm = s["small_graph"]
        rows.append(f"| {name} | {s['time_s']:.2f} | {s['edges_per_s'] / 1e6:.1f}M edges/s "
                    f"| {s['edge_cut_fraction']:.3f} of E | {s['comm_volume']} | small graph: cut "
                    f"{sm['cut_batched']:.3f} batched vs {sm['cut_sequential']:.3f} one at a time "
                    f"({sm['sequential_edges_per_s'] / 1e6:.2f}M edges/s) |")
    rows.append(f"| random | | | {res['random']['edge_cut_fraction']:.3f} of E "
                f"| {res['random']['comm_volume']} | |")
    rows.append(f"| quality report | {res['quality']['time_s']:.2f} "
                f"| {res['quality']['edges_per_s'] / 1e6:.1f}M edges/s | | | |")
    return "\n".join(rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-nodes", type=int, default=1 << 17)
    p.add_argument("--edge-factor", type=int, default=16)
    p.add_argument("--parts", type=int, default=8)
    p.add_argument("--seq-nodes", type=int, default=1 << 14,
                   help="nodes of the small graph for the one-node-at-a-time comparison")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="write the numbers as JSON here")
    args = p.parse_args()
    res = bench(args.num_nodes, args.edge_factor, args.parts, args.seq_nodes, args.seed)
    res["env"] = {"python": platform.python_version(), "numpy": np.__version__,
                  "machine": platform.machine(), "cpus": os.cpu_count()}
    print(table(res))
    if args.out:
        tmp = f"{args.out}.tmp-{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(res, f, indent=2)
        os.replace(tmp, args.out)


if __name__ == "__main__":
    main()
