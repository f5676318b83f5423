"""Aggregation kernel benchmark: each backend's SpMM, SDDMM, GCN and GAT epochs, DGL 2.1 as peer.

Same graph for every peer: ``--nodes`` (100k) nodes and ``--edges`` (4M) uniform random edges,
CSR by destination, ``--width`` (128) float32 features, the same number of torch threads.
Measured units, interleaved A B C A B C ... after one warm-up each:

- ``spmm``: the unweighted sum ``out [N, F] = A @ x`` (DGL: ``copy_u_sum``); ``spmm_t``: the
  transposed product of backward (GCN's normalised weights); ``sddmm``: per-edge dot products
  (DGL: ``u_dot_v``). Backends: ``numba`` (cache-blocked), ``numba-untiled`` (the same kernel
  with the column tiling off, i.e. only row-parallel), ``torch`` (torch.sparse CSR).
- one training epoch (forward, cross-entropy, backward, Adam step) of a 2-layer GCN
  (hidden 128, 16 classes) and a 2-layer GAT (4 heads x 32, 1 output head), dropout off, with
  ``gnn_dist.models`` on the whole graph; DGL: ``GraphConv`` / ``GATConv`` stacks of the same shape.

Memory bound: ``bandwidth`` is a measured numpy copy (read + write); for the SpMM the report
gives the bytes it must move at least (indices + x once + out once) and the bytes of its
row gathers (``E x F x 4``), and the rate each implies.

DGL runs in its own environment (``benchmarks/dgl_env.sh`` creates ``benchmarks/.dgl-venv``);
without it the DGL rows are left out. Usage (from the repository root)::

    python benchmarks/kernels.py                # ~3-6 min on 2 cores
    python benchmarks/kernels.py --quick        # small graph smoke run

Writes ``benchmarks/results/kernels_<hw>_<date>.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

import common

ROOT = common.repo_root()
sys.path.insert(0, str(ROOT))

from gnn_dist.kernels import get_backend, numba_cpu, use_backend  # noqa: E402
from gnn_dist.kernels.cache_info import cache_sizes  # noqa: E402
from gnn_dist.models import GAT, GCN, FullGraph  # noqa: E402
from gnn_dist.nn import Block  # noqa: E402
from gnn_dist.nn.sparse import _csr_t, prepare, sddmm, spmm  # noqa: E402

log = logging.getLogger("kernels")
DGL_PYTHON = ROOT / "benchmarks" / ".dgl-venv" / "bin" / "python"

DGL_SCRIPT = r'''
import json, sys, time
import numpy as np, torch, dgl, dgl.function as fn
from dgl.nn import GraphConv, GATConv
torch.set_num_threads(int(sys.argv[2]))
d = np.load(sys.argv[1]); rounds = int(sys.argv[3])
src, dst, n, width = torch.from_numpy(d["src"]), torch.from_numpy(d["dst"]), int(d["n"]), int(d["width"])
g = dgl.graph((src, dst), num_nodes=n).formats(["csc", "csr", "coo"]); g.create_formats_()
x = torch.randn(n, width); y = torch.randint(0, 16, (n,))
def spmm():
    g.srcdata["h"] = x; g.update_all(fn.copy_u("h", "m"), fn.sum("m", "o")); return g.dstdata["o"]
def sddmm():
    g.srcdata["h"] = x; g.dstdata["h2"] = x; g.apply_edges(fn.u_dot_v("h", "h2", "s")); return g.edata["s"]
class GCN2(torch.nn.Module):
    def __init__(s):
        super().__init__(); s.c1 = GraphConv(width, 128, allow_zero_in_degree=True); s.c2 = GraphConv(128, 16, allow_zero_in_degree=True)
    def forward(s, g, x): return s.c2(g, torch.relu(s.c1(g, x)))
class GAT2(torch.nn.Module):
    def __init__(s):
        super().__init__(); s.c1 = GATConv(width, 32, 4, allow_zero_in_degree=True); s.c2 = GATConv(128, 16, 1, allow_zero_in_degree=True)
    def forward(s, g, x): return s.c2(g, torch.relu(s.c1(g, x).flatten(1))).mean(1)
gs = dgl.add_self_loop(dgl.remove_self_loop(g))
def epoch_fn(model):
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    def run():
        opt.zero_grad(); loss = torch.nn.functional.cross_entropy(model(gs, x), y); loss.backward(); opt.step(); float(loss)
    return run
runners = {"spmm": spmm, "sddmm": sddmm, "gcn_epoch": epoch_fn(GCN2()), "gat_epoch": epoch_fn(GAT2())}
out = {k: [] for k in runners}
for k, f in runners.items(): f()
for _ in range(rounds):
    for k, f in runners.items():
        t = time.perf_counter(); f(); out[k].append(time.perf_counter() - t)
print(json.dumps({"times": out, "dgl": dgl.__version__, "torch": torch.__version__}))
'''


def random_graph(num_nodes: int, num_edges: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, num_nodes, num_edges), rng.integers(0, num_nodes, num_edges)


def memory_bandwidth(num_bytes: int = 1 << 28, rounds: int = 5) -> float:
    """Bytes per second of a numpy copy (counted as read + write), best of ``rounds``."""
    a = np.ones(num_bytes // 8)
    b = np.empty_like(a)
    best = min(common.timed(np.copyto, b, a)[1] for _ in range(rounds))
    return 2 * a.nbytes / best


def run_dgl(src: np.ndarray, dst: np.ndarray, n: int, width: int, threads: int, rounds: int) -> dict[str, Any] | None:
    if not DGL_PYTHON.exists():
        log.info("no DGL environment at %s (benchmarks/dgl_env.sh creates it): DGL rows left out", DGL_PYTHON)
        return None
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "graph.npz"
        np.savez(path, src=src, dst=dst, n=n, width=width)
        script = Path(tmp) / "dgl_peer.py"
        script.write_text(DGL_SCRIPT)
        proc = subprocess.run([str(DGL_PYTHON), str(script), str(path), str(threads), str(rounds)],
                              capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        log.warning("DGL peer failed: %s", proc.stderr[-2000:])
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def epoch_runner(model: torch.nn.Module, part: FullGraph, x: torch.Tensor, y: torch.Tensor,
                 backend: str) -> Callable[[], None]:
    opt = torch.optim.Adam(model.parameters(), lr=0.01)

    def run() -> None:
        with use_backend(backend):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(part, x), y)
            loss.backward()
            opt.step()
            float(loss.detach())
    return run


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nodes", type=int, default=100_000)
    p.add_argument("--edges", type=int, default=4_000_000)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--quick", action="store_true", help="10k nodes, 200k edges, 2 rounds")
    p.add_argument("--out", default=None, help="result stem (default benchmarks/results/kernels_<hw>_<date>)")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    if args.quick:
        args.nodes, args.edges, args.rounds = 10_000, 200_000, 2
    torch.set_num_threads(args.threads)
    n, e, width = args.nodes, args.edges, args.width

    src, dst = random_graph(n, e, seed=0)
    order = np.argsort(dst, kind="stable")
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=indptr[1:])
    t0 = time.perf_counter()
    block = prepare(Block.from_graph(indptr, src[order]))
    load_s = time.perf_counter() - t0
    torch.manual_seed(0)
    x = torch.randn(n, width)
    y = torch.randint(0, 16, (n,))
    weights = torch.rand(e)
    part = FullGraph(block)
    bandwidth = memory_bandwidth()
    log.info("graph built in %.2f s; memory bandwidth %.1f GB/s; caches %s", load_s, bandwidth / 1e9, cache_sizes())

    def with_backend(name: str, fn: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            if name == "numba-untiled":
                saved = numba_cpu.L3_FRACTION
                numba_cpu.L3_FRACTION = 1e12
                try:
                    with use_backend("numba"):
                        return fn()
                finally:
                    numba_cpu.L3_FRACTION = saved
            with use_backend(name):
                return fn()
        return run

    backends = ["numba", "numba-untiled", "torch"]
    ops: dict[str, Callable[[], Any]] = {}
    for name in backends:
        ops[f"spmm/{name}"] = with_backend(name, lambda: spmm(block, x))
        ops[f"spmm_t/{name}"] = with_backend(name, lambda: get_backend().spmm(_csr_t(block), weights.unsqueeze(1), x))
        ops[f"sddmm/{name}"] = with_backend(name, lambda: sddmm(block, x, x))
    log.info("kernels: %d runners x %d rounds", len(ops), args.rounds)
    kernel_times = common.interleave(ops, args.rounds, warmup=1)

    epochs: dict[str, Callable[[], Any]] = {}
    for name in ("numba", "torch"):
        gcn = GCN(width, 128, 16, num_layers=2, dropout=0.0)
        gat = GAT(width, 128, 16, num_layers=2, dropout=0.0, heads=4)
        epochs[f"gcn_epoch/{name}"] = epoch_runner(gcn, part, x, y, name)
        epochs[f"gat_epoch/{name}"] = epoch_runner(gat, part, x, y, name)
    log.info("epochs: %d runners x %d rounds", len(epochs), args.rounds)
    epoch_times = common.interleave(epochs, args.rounds, warmup=1)

    dgl = run_dgl(src, dst, n, width, args.threads, args.rounds)
    times = {**kernel_times, **epoch_times}
    if dgl is not None:
        times.update({f"{k}/dgl": v for k, v in dgl["times"].items()})
    summary = {k: common.summarize(v) for k, v in times.items()}

    idx_bytes = 4 if n < 2**31 else 8
    min_bytes = e * idx_bytes + (n + 1) * 8 + 2 * n * width * 4
    gather_bytes = e * width * 4
    payload = {"config": vars(args), "environment": common.environment(["torch", "numpy", "numba"]),
               "caches": {"l2": cache_sizes().l2_bytes, "l3": cache_sizes().l3_bytes, "source": cache_sizes().source},
               "tile_rows": numba_cpu.tile_rows_for(n, width * 4), "bandwidth_bytes_per_s": bandwidth,
               "block_build_s": load_s, "spmm_min_bytes": min_bytes, "spmm_gather_bytes": gather_bytes,
               "times": times, "summary": summary, "dgl": None if dgl is None else {k: dgl[k] for k in ("dgl", "torch")}}

    def med(key: str) -> float | None:
        s = summary.get(key)
        return None if s is None else s["median"]

    rows = []
    for unit in ("spmm", "spmm_t", "sddmm", "gcn_epoch", "gat_epoch"):
        peer = med(f"{unit}/dgl")
        for name in backends + ["dgl"]:
            t = med(f"{unit}/{name}")
            if t is None:
                continue
            q = summary[f"{unit}/{name}"]
            rows.append([unit, name, f"{t * 1e3:.1f}", f"{q['q1'] * 1e3:.1f}-{q['q3'] * 1e3:.1f}",
                         "" if peer is None else f"{t / peer:.2f}x"])
    spmm_t = med("spmm/numba") or float("nan")
    env = payload["environment"]
    md = [f"# Aggregation kernels, {common.hardware_tag()}, {time.strftime('%Y-%m-%d')}", "",
          f"Graph: {n:,} nodes, {e:,} uniform random edges, width {width} float32; {args.threads} torch threads; "
          f"{args.rounds} interleaved rounds after one warm-up; medians (IQR). DGL: "
          f"{'DGL ' + dgl['dgl'] + ' / torch ' + dgl['torch'] if dgl else 'not run (no benchmarks/.dgl-venv)'}.",
          f"Caches: L2 {cache_sizes().l2_bytes >> 10} KiB, L3 {cache_sizes().l3_bytes >> 20} MiB ({cache_sizes().source}); "
          f"column tile {payload['tile_rows']:,} rows of x ({payload['tile_rows'] * width * 4 / 2**20:.1f} MiB, "
          f"L3 x {numba_cpu.L3_FRACTION}). Block build (validation, transpose): {load_s:.2f} s.",
          f"Environment: {json.dumps({k: env.get(k) for k in ('cpu', 'python', 'packages', 'loadavg') if k in env})}", "",
          common.markdown_table(["unit", "backend", "median ms", "IQR ms", "vs DGL"], rows), "",
          "## What bounds the SpMM", "",
          f"Measured copy bandwidth: {bandwidth / 1e9:.1f} GB/s. The SpMM must move at least "
          f"{min_bytes / 1e6:.0f} MB (indices, x once, out once): {min_bytes / bandwidth * 1e3:.1f} ms at that rate; "
          f"its row gathers touch {gather_bytes / 1e9:.2f} GB ({e:,} x {width} x 4 B), "
          f"{gather_bytes / bandwidth * 1e3:.0f} ms if each came from DRAM. numba's median "
          f"{spmm_t * 1e3:.1f} ms is {gather_bytes / spmm_t / 1e9:.1f} GB/s of gathers and "
          f"{min_bytes / spmm_t / 1e9:.1f} GB/s of compulsory traffic. Tiled vs untiled numba above shows what "
          "the L3 blocking buys on this machine; a load average above the core count inflates every row alike "
          f"(load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs).", ""]
    stem = args.out or str(ROOT / "benchmarks" / "results" / common.default_result_stem("kernels"))
    paths = common.write_results(stem, payload, "\n".join(md))
    log.info("wrote %s", ", ".join(map(str, paths)))


if __name__ == "__main__":
    main()
