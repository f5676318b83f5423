"""Aggregation kernel benchmark: each backend's SpMM, SDDMM, GCN and GAT epochs, DGL 2.1 as peer.

Same graph for every peer: ``--nodes`` (100k) nodes and ``--edges`` (4M) uniform random edges,
CSR by destination, ``--width`` (128) float32 features, the same number of torch threads.
Measured units, interleaved A B C A B C ... after one warm-up each, DGL's included, right after
numba's (DGL runs in a peer process that executes one unit per request, so both see the same
background load; the report adds the median of the per-round ratios):

- ``spmm``: the unweighted sum ``out [N, F] = A @ x`` (DGL: ``copy_u_sum``); ``spmm_t``: the
  transposed, edge-weighted product (the backward of an edge-weighted SpMM); ``sddmm``: per-edge
  dot products (DGL: ``u_dot_v``). Backends: ``numba`` (software-prefetched gathers),
  ``numba-noprefetch`` (the same kernels with prefetching off), ``torch`` (torch.sparse CSR).
- one training epoch (forward, cross-entropy, backward, Adam step) of a 2-layer GCN
  (hidden 128, 16 classes) and a 2-layer GAT (4 heads x 32, 1 output head), dropout off, with
  ``gnn_dist.models`` on the whole graph, ``x`` without gradient; DGL: ``GraphConv`` /
  ``GATConv`` stacks of the same shape. GCN epochs get :data:`GCN_ROUNDS_FACTOR` x the rounds.

Memory bound: ``bandwidth`` is a measured numpy copy (read + write). For the SpMM the report
gives the bytes it must move at least (indices + x once + out once) and the bytes of its row
gathers (``E x F x 4``); for the GCN epoch, a byte model of its dense passes and gathers
(:func:`gcn_epoch_traffic`) and a profiler split of one epoch into SpMM, GEMM and the rest.

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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Callable

import numpy as np
import torch

import common

ROOT = common.repo_root()
sys.path.insert(0, str(ROOT))

from gnn_dist.kernels import numba_cpu  # noqa: E402
from gnn_dist.kernels.cache_info import cache_sizes  # noqa: E402
from gnn_dist.models import GAT, GCN, FullGraph  # noqa: E402
from gnn_dist.nn import Block  # noqa: E402
from gnn_dist.nn.sparse import _csr_t, _SpMM, prepare, sddmm, spmm  # noqa: E402

log = logging.getLogger("kernels")
DGL_PYTHON = ROOT / "benchmarks" / ".dgl-venv" / "bin" / "python"
UNITS = ("spmm", "spmm_t", "sddmm", "gcn_epoch", "gat_epoch")
GCN_ROUNDS_FACTOR = 3
"""GCN epochs are short: they get this many times ``--rounds`` (each GAT epoch takes seconds)."""

DGL_SCRIPT = r'''
import json, sys, time
import numpy as np, torch, dgl, dgl.function as fn
from dgl.nn import GraphConv, GATConv
torch.set_num_threads(int(sys.argv[2]))
d = np.load(sys.argv[1])
src, dst, n, width = torch.from_numpy(d["src"]), torch.from_numpy(d["dst"]), int(d["n"]), int(d["width"])
g = dgl.graph((src, dst), num_nodes=n).formats(["csc", "csr", "coo"]); g.create_formats_()
torch.manual_seed(0)
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
print(json.dumps({"dgl": dgl.__version__, "torch": torch.__version__, "units": list(runners)}), flush=True)
for line in sys.stdin:   # one unit per request; the reply is its time in seconds
    f = runners[line.strip()]
    t = time.perf_counter(); f(); print(time.perf_counter() - t, flush=True)
'''


def random_graph(num_nodes: int, num_edges: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, num_nodes, num_edges), rng.integers(0, num_nodes, num_edges)


def csr_block(num_nodes: int, src: np.ndarray, dst: np.ndarray) -> Block:
    """The block of edges ``src -> dst`` (CSR by destination, sources in edge order per row)."""
    order = np.argsort(dst, kind="stable")
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=num_nodes), out=indptr[1:])
    return Block.from_graph(indptr, src[order])


def memory_bandwidth(num_bytes: int = 1 << 28, rounds: int = 5) -> float:
    """Bytes per second of a numpy copy (counted as read + write), best of ``rounds``."""
    a = np.ones(num_bytes // 8)
    b = np.empty_like(a)
    best = min(common.timed(np.copyto, b, a)[1] for _ in range(rounds))
    return 2 * a.nbytes / best


class DglPeer:
    """DGL in its own environment and process, running one measured unit per :meth:`run`.

    ``versions`` holds DGL's and its torch's version; ``units`` the names it can run.
    """

    def __init__(self, proc: subprocess.Popen[str], header: dict[str, Any]) -> None:
        self.proc = proc
        self.versions = {k: header[k] for k in ("dgl", "torch")}
        self.units: list[str] = header["units"]

    def run(self, unit: str) -> float:
        """Run ``unit`` once in the peer; its own wall time in seconds."""
        stdin, stdout = self._pipes()
        stdin.write(unit + "\n")
        stdin.flush()
        reply = stdout.readline()
        if not reply:
            raise RuntimeError(f"the DGL peer exited while running {unit!r} (exit code {self.proc.poll()})")
        return float(reply)

    def _pipes(self) -> tuple[IO[str], IO[str]]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        return self.proc.stdin, self.proc.stdout


@contextmanager
def dgl_peer(src: np.ndarray, dst: np.ndarray, n: int, width: int, threads: int) -> Iterator[DglPeer | None]:
    """The DGL peer on the same graph, or None (logged) when its environment is missing or it fails."""
    if not DGL_PYTHON.exists():
        log.info("no DGL environment at %s (benchmarks/dgl_env.sh creates it): DGL rows left out", DGL_PYTHON)
        yield None
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "graph.npz"
        np.savez(path, src=src, dst=dst, n=n, width=width)
        script = Path(tmp) / "dgl_peer.py"
        script.write_text(DGL_SCRIPT)
        with tempfile.TemporaryFile("w+") as err:
            proc = subprocess.Popen([str(DGL_PYTHON), str(script), str(path), str(threads)], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=err, text=True)
            try:
                assert proc.stdout is not None
                header = proc.stdout.readline()
                if not header:
                    proc.wait()
                    err.seek(0)
                    log.warning("DGL peer failed to start (exit code %s): %s", proc.returncode, err.read()[-2000:])
                    yield None
                    return
                yield DglPeer(proc, json.loads(header))
            finally:
                if proc.stdin is not None:
                    proc.stdin.close()
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def epoch_runner(model: torch.nn.Module, part: FullGraph, x: torch.Tensor, y: torch.Tensor) -> Callable[[], None]:
    """One training step of ``model`` on ``part`` (whose block holds the kernel backend)."""
    opt = torch.optim.Adam(model.parameters(), lr=0.01)

    def run() -> None:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(part, x), y)
        loss.backward()
        opt.step()
        float(loss.detach())
    return run


def paired_order(runners: dict[str, Callable[[], Any]]) -> dict[str, Callable[[], Any]]:
    """``runners`` (``unit/backend``) by unit, numba then DGL first within a unit, so that the two
    compared in a round run back to back (under the same background load)."""
    rank = {"numba": 0, "dgl": 1}
    return dict(sorted(runners.items(), key=lambda kv: (UNITS.index(kv[0].split("/")[0]),
                                                         rank.get(kv[0].split("/")[1], 2))))


def gcn_epoch_traffic(n: int, e: int, f_in: int, hidden: int, classes: int) -> dict[str, int]:
    """Bytes one epoch of this benchmark's 2-layer GCN moves at least (float32 values, int32 ids).

    ``dense``: each ``[N, w]`` tensor an op reads or writes, counted once, for the orders
    :class:`~gnn_dist.nn.GCNConv` picks here: layer 0 aggregates its ``F`` inputs first (``x``
    has no gradient, so its backward is GEMMs only), layer 1 projects to ``C`` first and runs one
    forward and one transposed SpMM of width ``C``. ``spmm_indices``: the three SpMMs' column ids.
    ``spmm_gathers``: their gathered rows, ``E x width x 4``; DRAM traffic only for rows that miss
    the caches, so an upper bound (``x`` [N, F] is read at least once, counted in ``dense``).
    """
    f, h, c = f_in, hidden, classes
    widths = {  # [N] float32 rows read + written per op (the SpMMs scale rows inside the kernel)
        "layer 0 forward": f + 3 * f + (f + h) + 2 * h,                # SpMM out, self term, addmm, relu
        "layer 1 forward": (h + c) + c + 3 * c + 2 * c + 2 * c,        # GEMM, SpMM out, self term, bias, log-softmax
        "layer 1 backward": 2 * c + c + 2 * c + c + 3 * c + (c + h) + (c + h),   # loss, bias, self, SpMM_t, sum, GEMMs
        "relu backward": 3 * h,
        "layer 0 backward": h + f + h,                                 # weight gradient operands, bias gradient
    }
    return {"dense": 4 * n * sum(widths.values()), "spmm_indices": 4 * e * 3 + 8 * 3 * (n + 1),
            "spmm_gathers": 4 * e * (f + 2 * c)}


def profile_split(run: Callable[[], None]) -> dict[str, float]:
    """Seconds of one call of ``run`` by kind (self CPU time): ``spmm`` (the SpMM autograd function,
    forward and backward), ``gemm`` (``mm``/``addmm``) and ``other``."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run()
    split = {"spmm": 0.0, "gemm": 0.0, "other": 0.0}
    spmm_names = {_SpMM.__name__, _SpMM.__name__ + "Backward"}
    for item in prof.key_averages():
        kind = "spmm" if item.key in spmm_names else "gemm" if item.key in ("aten::mm", "aten::addmm") else "other"
        split[kind] += item.self_cpu_time_total / 1e6
    return split


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
    t0 = time.perf_counter()
    block = prepare(csr_block(n, src, dst))
    load_s = time.perf_counter() - t0
    torch.manual_seed(0)
    x = torch.randn(n, width)
    y = torch.randint(0, 16, (n,))
    weights = torch.rand(e)
    bandwidth = memory_bandwidth()
    log.info("graph built in %.2f s; memory bandwidth %.1f GB/s; caches %s", load_s, bandwidth / 1e9, cache_sizes())
    blocks = {name: prepare(block.with_kernels(name)) for name in ("numba", "torch")}   # each backend's own block

    def with_backend(name: str, fn: Callable[[Any], Any]) -> Callable[[], Any]:
        """``fn(block)`` on the block of backend ``name`` (``numba-noprefetch``: numba's, prefetch off)."""
        b = blocks["numba" if name == "numba-noprefetch" else name]

        def run() -> Any:
            if name == "numba-noprefetch":
                saved = numba_cpu.PREFETCH_AHEAD
                numba_cpu.PREFETCH_AHEAD = 0
                try:
                    return fn(b)
                finally:
                    numba_cpu.PREFETCH_AHEAD = saved
            return fn(b)
        return run

    backends = ["numba", "numba-noprefetch", "torch"]
    ops: dict[str, Callable[[], Any]] = {}
    epochs: dict[str, Callable[[], Any]] = {}
    for name in backends:
        ops[f"spmm/{name}"] = with_backend(name, lambda b: spmm(b, x))
        ops[f"spmm_t/{name}"] = with_backend(name, lambda b: b.backend_for(x).spmm(_csr_t(b), weights.unsqueeze(1), x))
        ops[f"sddmm/{name}"] = with_backend(name, lambda b: sddmm(b, x, x))
    for name in ("numba", "torch"):
        gcn = GCN(width, 128, 16, num_layers=2, dropout=0.0)
        gat = GAT(width, 128, 16, num_layers=2, dropout=0.0, heads=4)
        epochs[f"gcn_epoch/{name}"] = epoch_runner(gcn, FullGraph(blocks[name]), x, y)
        epochs[f"gat_epoch/{name}"] = epoch_runner(gat, FullGraph(blocks[name]), x, y)
    gcn_numba = epochs["gcn_epoch/numba"]

    load = {"start": os.getloadavg()[0]}
    with dgl_peer(src, dst, n, width, args.threads) as dgl:
        if dgl is not None:
            for unit in dgl.units:
                (ops if unit in ("spmm", "sddmm") else epochs)[f"{unit}/dgl"] = (lambda u=unit: dgl.run(u))
        ops, epochs = paired_order(ops), paired_order(epochs)
        log.info("kernels: %d runners x %d rounds", len(ops), args.rounds)
        kernel_times = common.interleave(ops, args.rounds, warmup=1)
        load["after_kernels"] = os.getloadavg()[0]
        epoch_rounds = {k: args.rounds * (GCN_ROUNDS_FACTOR if k.startswith("gcn") else 1) for k in epochs}
        log.info("epochs: %d runners x %d rounds (GCN: x %d)", len(epochs), args.rounds, GCN_ROUNDS_FACTOR)
        epoch_times = common.interleave(epochs, epoch_rounds, warmup=1)
        load["after_epochs"] = os.getloadavg()[0]
        dgl_versions = None if dgl is None else dgl.versions
    split = profile_split(gcn_numba)
    times = {**kernel_times, **epoch_times}
    summary = {k: common.summarize(v) for k, v in times.items()}

    idx_bytes = 4 if n < 2**31 else 8
    min_bytes = e * idx_bytes + (n + 1) * 8 + 2 * n * width * 4
    gather_bytes = e * width * 4
    traffic = gcn_epoch_traffic(n, e, width, 128, 16)
    payload = {"config": vars(args), "environment": common.environment(["torch", "numpy", "numba"]),
               "caches": {"l2": cache_sizes().l2_bytes, "l3": cache_sizes().l3_bytes, "source": cache_sizes().source},
               "prefetch_ahead": numba_cpu.PREFETCH_AHEAD, "bandwidth_bytes_per_s": bandwidth,
               "block_build_s": load_s, "spmm_min_bytes": min_bytes, "spmm_gather_bytes": gather_bytes,
               "gcn_epoch_traffic": traffic, "gcn_epoch_profile_s": split, "load_average_1min": load,
               "times": times, "summary": summary, "dgl": dgl_versions}

    def med(key: str) -> float | None:
        s = summary.get(key)
        return None if s is None else s["median"]

    rows = []
    for unit in UNITS:
        peer = med(f"{unit}/dgl")
        for name in backends + ["dgl"]:
            t = med(f"{unit}/{name}")
            if t is None:
                continue
            q = summary[f"{unit}/{name}"]
            paired = times.get(f"{unit}/dgl")
            ratios = [a / b for a, b in zip(times[f"{unit}/{name}"], paired or [])]
            rows.append([unit, name, str(q["n"]), f"{t * 1e3:.1f}", f"{q['q1'] * 1e3:.1f}-{q['q3'] * 1e3:.1f}",
                         "" if peer is None else f"{t / peer:.2f}x",
                         "" if not ratios or name == "dgl" else f"{float(np.median(ratios)):.2f}x"])
    spmm_t = med("spmm/numba") or float("nan")
    gcn_t = med("gcn_epoch/numba") or float("nan")
    dense_ms = traffic["dense"] / bandwidth * 1e3
    gathers_ms = traffic["spmm_gathers"] / bandwidth * 1e3
    total_split = sum(split.values()) or float("nan")
    env = payload["environment"]
    md = [f"# Aggregation kernels, {common.hardware_tag()}, {time.strftime('%Y-%m-%d')}", "",
          f"Graph: {n:,} nodes, {e:,} uniform random edges, width {width} float32; {args.threads} torch threads; "
          f"{args.rounds} interleaved rounds ({args.rounds * GCN_ROUNDS_FACTOR} for the GCN epoch) after one warm-up, "
          f"DGL's in the same rounds (a peer process) right after numba's; medians (IQR). DGL: "
          f"{'DGL ' + dgl_versions['dgl'] + ' / torch ' + dgl_versions['torch'] if dgl_versions else 'not run (no benchmarks/.dgl-venv)'}.",
          f"Caches: L2 {cache_sizes().l2_bytes >> 10} KiB, L3 {cache_sizes().l3_bytes >> 20} MiB ({cache_sizes().source}); "
          f"gathered rows prefetched {numba_cpu.PREFETCH_AHEAD} entries ahead. "
          f"Block build (validation, transpose): {load_s:.2f} s.",
          f"Environment: {json.dumps({k: env.get(k) for k in ('cpu_model', 'python', 'packages')})}; "
          f"1-min load average {load['start']:.1f} at the start, {load['after_kernels']:.1f} after the kernels, "
          f"{load['after_epochs']:.1f} after the epochs, on {os.cpu_count()} CPUs.", "",
          common.markdown_table(["unit", "backend", "rounds", "median ms", "IQR ms", "vs DGL (medians)",
                                 "vs DGL (paired: median of per-round ratios)"], rows), "",
          "## What bounds the SpMM", "",
          f"Measured copy bandwidth: {bandwidth / 1e9:.1f} GB/s. The SpMM must move at least "
          f"{min_bytes / 1e6:.0f} MB (indices, x once, out once): {min_bytes / bandwidth * 1e3:.1f} ms at that rate; "
          f"its row gathers touch {gather_bytes / 1e9:.2f} GB ({e:,} x {width} x 4 B), "
          f"{gather_bytes / bandwidth * 1e3:.0f} ms if each came from DRAM. numba's median "
          f"{spmm_t * 1e3:.1f} ms is {gather_bytes / spmm_t / 1e9:.1f} GB/s of gathers and "
          f"{min_bytes / spmm_t / 1e9:.1f} GB/s of compulsory traffic. Prefetched vs not (numba-noprefetch) shows "
          "what keeping many row misses in flight buys; a load average above the core count inflates every row alike.",
          "", "## What bounds the GCN epoch", "",
          f"Byte model (`gcn_epoch_traffic`): dense passes {traffic['dense'] / 1e9:.2f} GB ({dense_ms:.0f} ms at the "
          f"copy bandwidth), SpMM indices {traffic['spmm_indices'] / 1e6:.0f} MB, SpMM row gathers "
          f"{traffic['spmm_gathers'] / 1e9:.2f} GB (widths {width} + 16 + 16; {gathers_ms:.0f} ms if all from DRAM): "
          f"{dense_ms + gathers_ms:.0f} ms in all against numba's median {gcn_t * 1e3:.0f} ms. One profiled numba epoch "
          f"({total_split * 1e3:.0f} ms, self CPU time): SpMM {split['spmm'] * 1e3:.0f} ms "
          f"({split['spmm'] / total_split:.0%}), GEMM {split['gemm'] * 1e3:.0f} ms ({split['gemm'] / total_split:.0%}), "
          f"other ops (elementwise, loss, Adam, allocation) {split['other'] * 1e3:.0f} ms "
          f"({split['other'] / total_split:.0%}).", ""]
    stem = args.out or str(ROOT / "benchmarks" / "results" / common.default_result_stem("kernels"))
    paths = common.write_results(stem, payload, "\n".join(md))
    log.info("wrote %s", ", ".join(map(str, paths)))


if __name__ == "__main__":
    main()
