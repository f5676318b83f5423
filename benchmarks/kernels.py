"""Aggregation kernel benchmark: each backend's SpMM, SDDMM, GCN, SAGE, GIN and GAT epochs, DGL 2.1 as peer.

Same graph for every peer: ``--graphs`` (default ``100000x4000000,50000x1000000``: nodes x
uniform random edges), CSR by destination, ``--width`` (128) float32 features, and for each of
``--threads`` (default ``1,2``) the same number of torch/numba threads in both processes (DGL's
peer is restarted per setting with ``OMP_NUM_THREADS`` and ``torch.set_num_threads``).
Measured units, interleaved A B C A B C ... after one warm-up each, DGL's included, right after
numba's (DGL runs in a peer process that executes one unit per request, so both see the same
background load; the report adds the median of the per-round ratios):

- ``spmm``: the unweighted sum ``out [N, F] = A @ x`` (DGL: ``copy_u_sum``); ``spmm_t``: the
  transposed, edge-weighted product (the backward of an edge-weighted SpMM); ``sddmm``: per-edge
  dot products (DGL: ``u_dot_v``). Backends: ``numba`` (software-prefetched gathers),
  ``numba-noprefetch`` (the same kernels with prefetching off), ``torch`` (torch.sparse CSR).
- one training epoch (forward, cross-entropy, backward, Adam step) of a 2-layer GCN, GraphSAGE
  (mean), GIN (MLP ``Linear-ReLU-Linear``, eps 0) (hidden 128, 16 classes) and a 2-layer GAT
  (4 heads x 32, 1 output head), dropout off, with ``gnn_dist.models`` on the whole graph, ``x``
  without gradient; DGL: ``GraphConv`` / ``SAGEConv('mean')`` / ``GINConv('sum')`` / ``GATConv``
  stacks of the same shape. The short epochs get :data:`SHORT_ROUNDS_FACTOR` x the rounds.
  GCN, SAGE and GIN also run as ``gnn-dist train`` runs them by default (backend
  ``numba-precomputed``: the first layer's aggregate of ``x`` computed once, at the warm-up;
  ``--precompute-first-layer auto`` does so here, each first layer aggregating its 128 raw inputs).

Memory bound, measured per thread setting: ``copy`` bandwidth (torch ``copy_`` of 256 MB,
counted as read + write) and ``gather`` bandwidth (:func:`gather_bandwidth`: random rows of
``--width`` float32 from an array of 4x the L3 (at least 256 MB), summed 32 to an output row;
bytes of gathered rows per second, the best of no prefetch and prefetching 16 rows ahead). Each
SpMM/SDDMM row reports its achieved gather rate (``E x width x 4`` bytes per median time) and
its fraction of the measured gather bandwidth; the graph's ``x`` may partly sit in the L3, so
the fraction can pass 1. For the GCN epoch: a byte model of its dense passes and gathers
(:func:`gcn_epoch_traffic`) and a profiler split of one epoch into SpMM, GEMM and the rest.

DGL runs in its own environment (``benchmarks/dgl_env.sh`` creates ``benchmarks/.dgl-venv``);
without it the DGL rows are left out. Usage (from the repository root)::

    python benchmarks/kernels.py                          # ~10-15 min on 2 cores
    python benchmarks/kernels.py --backends numba --rounds 3   # DGL comparison only (~6 min)
    python benchmarks/kernels.py --quick                  # small graph, 1 round, smoke run
    THP_MEM_ALLOC_ENABLE=1 python benchmarks/kernels.py --backends numba   # both sides on 2 MiB pages, as ranks run

Writes ``benchmarks/results/kernels_<hw>_<date>.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from typing import Any, Callable

import numba
import numpy as np
import torch

import common
from dgl_peer import dgl_peer_process

ROOT = common.repo_root()
sys.path.insert(0, str(ROOT))

from gnn_dist.kernels import numba_cpu  # noqa: E402
from gnn_dist.kernels.cache_info import cache_sizes  # noqa: E402
from gnn_dist.kernels.numba_cpu import _prefetch_row  # noqa: E402
from gnn_dist.models import GAT, GCN, GIN, FullGraph, GraphSAGE  # noqa: E402
from gnn_dist.nn import Block  # noqa: E402
from gnn_dist.nn.sparse import _csr_t, _SpMM, prepare, sddmm, spmm  # noqa: E402

log = logging.getLogger("kernels")
UNITS = ("spmm", "spmm_t", "sddmm", "gcn_epoch", "sage_epoch", "gin_epoch", "gat_epoch")
KERNEL_UNITS = ("spmm", "spmm_t", "sddmm")
SHORT_EPOCHS = ("gcn_epoch", "sage_epoch", "gin_epoch")
SHORT_ROUNDS_FACTOR = 3
"""GCN/SAGE/GIN epochs are short: they get this many times ``--rounds`` (each GAT epoch takes seconds)."""
PRECOMPUTABLE = ("gcn_epoch", "sage_epoch", "gin_epoch")
"""Epochs also run as ``gnn-dist train`` runs them (backend ``numba-precomputed``): the
first layer's aggregate of the fixed input features computed once, each step applying only the
weights (GAT's attention is not linear in the input)."""
MODELS = {"gcn_epoch": GCN, "sage_epoch": GraphSAGE, "gin_epoch": GIN, "gat_epoch": GAT}

DGL_SCRIPT = r'''
import json, sys, time
import numpy as np, torch, dgl, dgl.function as fn
from dgl.nn import GraphConv, GATConv, SAGEConv, GINConv
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
class SAGE2(torch.nn.Module):
    def __init__(s):
        super().__init__(); s.c1 = SAGEConv(width, 128, "mean"); s.c2 = SAGEConv(128, 16, "mean")
    def forward(s, g, x): return s.c2(g, torch.relu(s.c1(g, x)))
def mlp(i, o): return torch.nn.Sequential(torch.nn.Linear(i, o), torch.nn.ReLU(), torch.nn.Linear(o, o))
class GIN2(torch.nn.Module):
    def __init__(s):
        super().__init__(); s.c1 = GINConv(mlp(width, 128), "sum"); s.c2 = GINConv(mlp(128, 16), "sum")
    def forward(s, g, x): return s.c2(g, torch.relu(s.c1(g, x)))
class GAT2(torch.nn.Module):
    def __init__(s):
        super().__init__(); s.c1 = GATConv(width, 32, 4, allow_zero_in_degree=True); s.c2 = GATConv(128, 16, 1, allow_zero_in_degree=True)
    def forward(s, g, x): return s.c2(g, torch.relu(s.c1(g, x).flatten(1))).mean(1)
gs = dgl.add_self_loop(dgl.remove_self_loop(g))
def epoch_fn(model, graph):
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    def run():
        opt.zero_grad(); loss = torch.nn.functional.cross_entropy(model(graph, x), y); loss.backward(); opt.step(); float(loss)
    return run
runners = {"spmm": spmm, "sddmm": sddmm, "gcn_epoch": epoch_fn(GCN2(), gs), "sage_epoch": epoch_fn(SAGE2(), g),
           "gin_epoch": epoch_fn(GIN2(), g), "gat_epoch": epoch_fn(GAT2(), gs)}
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
    """Bytes per second of a torch copy at the current torch threads (counted as read + write),
    best of ``rounds``."""
    a = torch.ones(num_bytes // 4)
    b = torch.empty_like(a)
    b.copy_(a)
    best = min(common.timed(b.copy_, a)[1] for _ in range(rounds))
    return 2 * a.numel() * 4 / best


@numba.njit(parallel=True, nogil=True, fastmath=True)
def _gather_sum(x, idx, per_row, out, ahead):  # pragma: no cover (compiled)
    line = 16
    num_feat = x.shape[1]
    rows = out.shape[0]
    chunk = 256
    for c in numba.prange((rows + chunk - 1) // chunk):
        r0 = c * chunk
        r1 = min(rows, r0 + chunk)
        stop = r1 * per_row
        for r in range(r0, r1):
            orow = out[r]
            for f in range(num_feat):
                orow[f] = 0
            for j in range(r * per_row, (r + 1) * per_row):
                if ahead > 0 and j + ahead < stop:
                    _prefetch_row(x, idx[j + ahead], line)
                xrow = x[idx[j]]
                for f in range(num_feat):
                    orow[f] += xrow[f]


def gather_bandwidth(width: int, l3_bytes: int, rounds: int = 3, per_row: int = 32,
                     num_rows: int = 1 << 20) -> dict[str, float]:
    """Bytes of gathered rows per second at the current torch threads: ``num_rows`` output rows,
    each the sum of ``per_row`` uniformly random rows of width ``width`` (float32) of an array of
    ``max(4 x L3, 256 MB)``, so almost every row comes from DRAM. ``plain``: no software prefetch;
    ``prefetch``: each thread prefetches the row 16 entries ahead (as the SpMM kernels do);
    ``best``: the larger. Best of ``rounds`` each."""
    src_rows = max(4 * l3_bytes, 1 << 28) // (4 * width)
    rng = np.random.default_rng(1)
    x = rng.random((src_rows, width), dtype=np.float32)
    idx = rng.integers(0, src_rows, num_rows * per_row).astype(np.int32)
    out = np.empty((num_rows, width), dtype=np.float32)
    threads = torch.get_num_threads()
    numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))
    res = {}
    try:
        for name, ahead in (("plain", 0), ("prefetch", 16)):
            _gather_sum(x, idx, per_row, out, ahead)
            best = min(common.timed(_gather_sum, x, idx, per_row, out, ahead)[1] for _ in range(rounds))
            res[name] = idx.size * width * 4 / best
    finally:
        # numba's first parallel launch starts its OpenMP pool, which resets the process-wide
        # OpenMP thread count, torch's too (gnn_dist's kernels guard their launches the same way:
        # numba_cpu._launch): without this the "1 thread" setting ran every later unit on 2
        torch.set_num_threads(threads)
    res["best"] = max(res["plain"], res["prefetch"])
    return res


def dgl_peer(src: np.ndarray, dst: np.ndarray, n: int, width: int, threads: int) -> Any:
    """The DGL peer on the same graph (a context manager: a :class:`~dgl_peer.DglPeer`, or None,
    logged, when its environment is missing or it fails)."""
    return dgl_peer_process(DGL_SCRIPT, lambda path: np.savez(path, src=src, dst=dst, n=n, width=width), threads)


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


class _WholeGraphPart:
    """What :class:`~gnn_dist.cache.InputFeatures` reads of a part, for the whole graph on one
    device (no halo rows): so the epochs can run with the precomputed first layer as
    ``gnn-dist train`` runs them (``--precompute-first-layer auto``, the default, or ``on``)."""

    def __init__(self, block: Block, x: torch.Tensor) -> None:
        from gnn_dist.distributed import HaloExchanger

        self.block, self.features, self.path = block, x.numpy(), "<benchmark graph>"
        self.num_inner, self.num_halo, self.hotness, self.device = block.num_dst, 0, None, torch.device("cpu")
        self.exchanger = HaloExchanger(np.zeros(0, dtype=np.int64), [0, 0], [0, 0], block.num_dst, world_size=1,
                                       rank=0)


def precomputed_input(block: Block, x: torch.Tensor) -> Any:
    """The first layer's input as ``gnn-dist train`` gives it here: its aggregate of ``x``
    is computed once (at the first step, outside the timed rounds after the warm-up)."""
    from gnn_dist.cache import InputFeatures

    return InputFeatures(_WholeGraphPart(block, x), precompute_first_layer=True)


def paired_order(runners: dict[str, Callable[[], Any]]) -> dict[str, Callable[[], Any]]:
    """``runners`` (``unit/backend``) by unit, numba then DGL first within a unit, so that the two
    compared in a round run back to back (under the same background load)."""
    rank = {"numba": 0, "dgl": 1, "numba-precomputed": 2}
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


def _check_threads(threads: int) -> None:
    """Refuse a measurement whose torch thread count drifted from the setting's (see
    :func:`gather_bandwidth`)."""
    if torch.get_num_threads() != threads:
        raise RuntimeError(f"torch runs {torch.get_num_threads()} threads in the {threads}-thread setting: "
                           f"something reset the OpenMP thread count; the figures are void")


def parse_graphs(text: str) -> list[tuple[int, int]]:
    """``"100000x4000000,50000x1000000"`` -> ``[(100000, 4000000), (50000, 1000000)]``."""
    out = []
    for item in text.split(","):
        n, _, e = item.strip().lower().partition("x")
        out.append((int(n), int(e)))
    return out


def measure(n: int, e: int, width: int, threads: int, rounds: int, backends: list[str],
            units: list[str]) -> dict[str, Any]:
    """Every unit of this benchmark on one uniform graph at ``threads`` threads, DGL interleaved."""
    torch.set_num_threads(threads)
    src, dst = random_graph(n, e, seed=0)
    t0 = time.perf_counter()
    block = prepare(csr_block(n, src, dst))
    load_s = time.perf_counter() - t0
    torch.manual_seed(0)
    x = torch.randn(n, width)
    y = torch.randint(0, 16, (n,))
    weights = torch.rand(e)
    copy_bw = memory_bandwidth()
    gather_bw = gather_bandwidth(width, cache_sizes().l3_bytes)
    log.info("%d nodes x %d edges, %d threads: block built in %.2f s; copy %.1f GB/s, gather %.1f GB/s "
             "(plain %.1f, prefetch %.1f)", n, e, threads, load_s, copy_bw / 1e9, gather_bw["best"] / 1e9,
             gather_bw["plain"] / 1e9, gather_bw["prefetch"] / 1e9)
    epoch_backends = [b for b in backends if b in ("numba", "torch")]
    blocks = {name: prepare(block.with_kernels(name)) for name in {*epoch_backends, "numba"}}

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

    ops: dict[str, Callable[[], Any]] = {}
    epochs: dict[str, Callable[[], Any]] = {}
    for name in backends:
        if "spmm" in units:
            ops[f"spmm/{name}"] = with_backend(name, lambda b: spmm(b, x))
        if "spmm_t" in units:
            ops[f"spmm_t/{name}"] = with_backend(
                name, lambda b: b.backend_for(x).spmm(_csr_t(b), weights.unsqueeze(1), x))
        if "sddmm" in units:
            ops[f"sddmm/{name}"] = with_backend(name, lambda b: sddmm(b, x, x))
    for name in epoch_backends:
        for unit, cls in MODELS.items():
            if unit in units:
                kw = {"heads": 4} if cls is GAT else {}
                torch.manual_seed(0)
                model = cls(width, 128, 16, num_layers=2, dropout=0.0, **kw)
                epochs[f"{unit}/{name}"] = epoch_runner(model, FullGraph(blocks[name]), x, y)
                if name == "numba" and unit in PRECOMPUTABLE:
                    torch.manual_seed(0)
                    model = cls(width, 128, 16, num_layers=2, dropout=0.0)
                    epochs[f"{unit}/numba-precomputed"] = epoch_runner(model, FullGraph(blocks[name]),
                                                                       precomputed_input(blocks[name], x), y)

    load = {"start": os.getloadavg()[0]}
    with dgl_peer(src, dst, n, width, threads) as dgl:
        if dgl is not None:
            for unit in dgl.units:
                if unit in units:
                    (ops if unit in KERNEL_UNITS else epochs)[f"{unit}/dgl"] = (lambda u=unit: dgl.run(u))
        ops, epochs = paired_order(ops), paired_order(epochs)
        log.info("kernels: %d runners x %d rounds", len(ops), rounds)
        kernel_times = common.interleave(ops, rounds, warmup=1) if ops else {}
        load["after_kernels"] = os.getloadavg()[0]
        _check_threads(threads)
        epoch_rounds = {k: rounds * (SHORT_ROUNDS_FACTOR if k.split("/")[0] in SHORT_EPOCHS else 1) for k in epochs}
        log.info("epochs: %d runners x %d rounds (GCN/SAGE/GIN: x %d)", len(epochs), rounds, SHORT_ROUNDS_FACTOR)
        epoch_times = common.interleave(epochs, epoch_rounds, warmup=1) if epochs else {}
        load["after_epochs"] = os.getloadavg()[0]
        _check_threads(threads)
        dgl_versions = None if dgl is None else dgl.versions
    split = profile_split(epochs["gcn_epoch/numba"]) if "gcn_epoch/numba" in epochs else None
    times = {**kernel_times, **epoch_times}
    summary = {k: common.summarize(v) for k, v in times.items()}
    idx_bytes = 4 if n < 2**31 else 8
    return {"nodes": n, "edges": e, "width": width, "threads": threads, "block_build_s": load_s,
            "copy_bytes_per_s": copy_bw, "gather_bytes_per_s": gather_bw,
            "spmm_min_bytes": e * idx_bytes + (n + 1) * 8 + 2 * n * width * 4, "spmm_gather_bytes": e * width * 4,
            "gcn_epoch_traffic": gcn_epoch_traffic(n, e, width, 128, 16), "gcn_epoch_profile_s": split,
            "load_average_1min": load, "times": times, "summary": summary, "dgl": dgl_versions}


def paired_ratio(res: dict[str, Any], unit: str, name: str) -> float | None:
    """The median over rounds of ``unit/name``'s time over DGL's in the same round."""
    a, b = res["times"].get(f"{unit}/{name}"), res["times"].get(f"{unit}/dgl")
    if not a or not b:
        return None
    return float(np.median([p / q for p, q in zip(a, b)]))


def report_sections(res: dict[str, Any], backends: list[str]) -> list[str]:
    """The markdown of one (graph, threads) measurement."""
    summary, times = res["summary"], res["times"]
    n, e, width, threads = res["nodes"], res["edges"], res["width"], res["threads"]
    load = res["load_average_1min"]
    gbw = res["gather_bytes_per_s"]

    def med(key: str) -> float | None:
        s = summary.get(key)
        return None if s is None else s["median"]

    rows = []
    for unit in UNITS:
        peer = med(f"{unit}/dgl")
        for name in backends + ["numba-precomputed", "dgl"]:
            t = med(f"{unit}/{name}")
            if t is None:
                continue
            q = summary[f"{unit}/{name}"]
            ratio = paired_ratio(res, unit, name)
            gather = ""
            if unit in KERNEL_UNITS:
                rate = res["spmm_gather_bytes"] / t
                gather = f"{rate / 1e9:.1f} ({rate / gbw['best']:.2f})"
            rows.append([unit, name, str(q["n"]), f"{t * 1e3:.1f}", f"{q['q1'] * 1e3:.1f}-{q['q3'] * 1e3:.1f}",
                         "" if peer is None or name == "dgl" else f"{t / peer:.2f}x",
                         "" if ratio is None or name == "dgl" else f"{ratio:.2f}x", gather])
    md = [f"## {n:,} nodes, {e:,} edges, {threads} thread{'s' if threads > 1 else ''}", "",
          f"1-min load average {load['start']:.1f} at the start, {load['after_kernels']:.1f} after the kernels, "
          f"{load['after_epochs']:.1f} after the epochs, on {os.cpu_count()} CPUs. Block build: "
          f"{res['block_build_s']:.2f} s. Copy bandwidth {res['copy_bytes_per_s'] / 1e9:.1f} GB/s (read + write); "
          f"gather bandwidth (random {width}-float rows from DRAM) {gbw['best'] / 1e9:.1f} GB/s "
          f"(no prefetch {gbw['plain'] / 1e9:.1f}, prefetch 16 ahead {gbw['prefetch'] / 1e9:.1f}).", "",
          common.markdown_table(["unit", "backend", "rounds", "median ms", "IQR ms", "vs DGL (medians)",
                                 "vs DGL (paired)", "gather GB/s (fraction of measured)"], rows), ""]
    split, traffic = res["gcn_epoch_profile_s"], res["gcn_epoch_traffic"]
    gcn_t = med("gcn_epoch/numba")
    if split and gcn_t:
        total = sum(split.values()) or float("nan")
        bw = res["copy_bytes_per_s"]
        md += [f"GCN epoch byte model: dense passes {traffic['dense'] / 1e9:.2f} GB "
               f"({traffic['dense'] / bw * 1e3:.0f} ms at the copy bandwidth), SpMM row gathers "
               f"{traffic['spmm_gathers'] / 1e9:.2f} GB ({traffic['spmm_gathers'] / gbw['best'] * 1e3:.0f} ms at the "
               f"gather bandwidth); numba's median {gcn_t * 1e3:.0f} ms. One profiled epoch ({total * 1e3:.0f} ms "
               f"self CPU): SpMM {split['spmm'] * 1e3:.0f} ms ({split['spmm'] / total:.0%}), GEMM "
               f"{split['gemm'] * 1e3:.0f} ms ({split['gemm'] / total:.0%}), other {split['other'] * 1e3:.0f} ms "
               f"({split['other'] / total:.0%}).", ""]
    return md


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--graphs", default="100000x4000000,50000x1000000",
                   help="comma-separated NODESxEDGES uniform random graphs")
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts (both processes)")
    p.add_argument("--backends", default="numba,numba-noprefetch,torch",
                   help="our backends (numba, numba-noprefetch, torch); DGL is always the peer")
    p.add_argument("--units", default=",".join(UNITS))
    p.add_argument("--quick", action="store_true", help="10k nodes, 200k edges, 1 round, one thread setting")
    p.add_argument("--out", default=None, help="result stem (default benchmarks/results/kernels_<hw>_<date>)")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    if args.quick:
        args.graphs, args.rounds = "10000x200000", 1
        args.threads = args.threads.split(",")[-1]
    graphs = parse_graphs(args.graphs)
    threads = [int(t) for t in args.threads.split(",")]
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    units = [u.strip() for u in args.units.split(",") if u.strip()]
    unknown = (set(backends) - {"numba", "numba-noprefetch", "torch"}) | (set(units) - set(UNITS))
    if unknown:
        p.error(f"unknown backends/units: {sorted(unknown)}")

    results = []
    for n, e in graphs:
        for t in threads:
            results.append(measure(n, e, args.width, t, args.rounds, backends, units))
    dgl_versions = next((r["dgl"] for r in results if r["dgl"]), None)
    payload = {"config": vars(args), "environment": common.environment(["torch", "numpy", "numba"]),
               "thp_mem_alloc": os.environ.get("THP_MEM_ALLOC_ENABLE"),
               "caches": {"l2": cache_sizes().l2_bytes, "l3": cache_sizes().l3_bytes, "source": cache_sizes().source},
               "prefetch_ahead": numba_cpu.PREFETCH_AHEAD, "dgl": dgl_versions, "results": results}

    # the summary table: paired ratio ours / DGL per unit, graph and thread count
    cols = [f"{r['nodes'] // 1000}k/{r['edges'] / 1e6:g}M, {r['threads']}T" for r in results]
    summary_rows = []
    for unit, name in [(u, "numba") for u in UNITS] + [(u, "numba-precomputed") for u in PRECOMPUTABLE]:
        cells = []
        for r in results:
            ratio = paired_ratio(r, unit, name)
            ours, peer = r["summary"].get(f"{unit}/{name}"), r["summary"].get(f"{unit}/dgl")
            cells.append("" if ratio is None or ours is None or peer is None else
                         f"{ratio:.2f}x ({ours['median'] * 1e3:.0f} / {peer['median'] * 1e3:.0f} ms)")
        if any(cells):
            summary_rows.append([unit if name == "numba" else f"{unit}, first layer precomputed"] + cells)
    env = payload["environment"]
    md = [f"# Aggregation kernels, {common.hardware_tag()}, {time.strftime('%Y-%m-%d')}", "",
          f"Uniform random graphs, width {args.width} float32; {args.rounds} interleaved rounds "
          f"({args.rounds * SHORT_ROUNDS_FACTOR} for the GCN/SAGE/GIN epochs) after one warm-up, DGL's in the "
          f"same rounds (a peer process, same thread count) right after numba's; medians (IQR). DGL: "
          f"{'DGL ' + dgl_versions['dgl'] + ' / torch ' + dgl_versions['torch'] if dgl_versions else 'not run (no benchmarks/.dgl-venv)'}.",
          f"Caches: L2 {cache_sizes().l2_bytes >> 10} KiB, L3 {cache_sizes().l3_bytes >> 20} MiB "
          f"({cache_sizes().source}); gathered rows prefetched {numba_cpu.PREFETCH_AHEAD} entries ahead.",
          f"torch's 2 MiB pages (`THP_MEM_ALLOC_ENABLE`, as `gnn-dist train` sets for its ranks): "
          f"{'on' if os.environ.get('THP_MEM_ALLOC_ENABLE') == '1' else 'off'} in both processes.",
          f"Environment: {json.dumps({k: env.get(k) for k in ('cpu_model', 'python', 'packages')})}.", "",
          "## numba / DGL, paired (median of per-round ratios; medians ours / DGL)", "",
          common.markdown_table(["unit"] + cols, summary_rows), ""]
    for r in results:
        md += report_sections(r, backends)
    stem = args.out or str(ROOT / "benchmarks" / "results" / common.default_result_stem("kernels"))
    paths = common.write_results(stem, payload, "\n".join(md))
    log.info("wrote %s", ", ".join(map(str, paths)))


if __name__ == "__main__":
    main()
