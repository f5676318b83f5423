"""Training benchmark: one rank of gnn-dist against PyG, and P = 2, 4 gloo ranks.

Same graph (a catalog dataset, default ``sbm-medium``), same model (2-layer GCN, hidden 128,
ReLU, dropout 0.5 after the hidden layer, Adam), same measured unit: one training step
(forward + backward + optimizer, the loss read back to the host), evaluation off, the same
number of torch threads in every process.

What it measures:

1. **One rank**, in one spawned process, epochs interleaved A B C D A B C D ... after warm-up:
   ``gnn-dist`` (``Trainer.fit(1)`` on the one-part partition), ``gnn-dist`` with the hash
   dropout's chunk patched in-process to a cache-sized one (a what-if, bit-identical output),
   PyG 2.8 ``GCNConv`` (``cached=True``) on a ``torch.sparse_csr_tensor`` ``adj_t`` (PyG accepts
   torch.sparse CSR without torch_sparse), and PyG ``GCNConv`` on ``edge_index``. The PyG inputs
   are the one-part partition's arrays (same node order, so the same memory locality). Before
   training, an eval forward of each peer from the same weights checks they compute the same
   logits. Then a torch.profiler breakdown of one epoch per peer, a micro-benchmark of the
   dropout variants and the cost of one ``Trainer.evaluate()`` (the eval forward that
   ``eval_every=1`` adds).
2. **Peak RSS** of each peer alone in its own process (``ru_maxrss``), with the RSS after the
   imports as the baseline, so ``peak - baseline`` is what the data and training cost. gnn-dist's
   processes also record a *warm* baseline, the RSS once the fixed per-process costs are paid
   (aggregation kernels loaded, first optimizer built) and before the partition is loaded.
3. **P ranks** (gloo, the spawn harness of ``tests/mp_utils.py``), rounds interleaved
   P=2, P=4, P=2, P=4 ...: the epoch time (max over ranks, median over epochs), the halo bytes
   the exchanger counted against the minimum computed from the partition (rows x width x
   element size per layer, forward, and backward where a gradient flows), the all-reduce bytes,
   each rank's peak RSS against ``single/P + halo share + 10%`` (from both baselines), and the
   loss trajectory against the one-rank run (exactness).

Every spawned process gets ``THP_MEM_ALLOC_ENABLE=1`` (unless the caller set it), as a rank
started by the launchers does; the report's config records the value. P ranks on a 2-core
machine share the cores: P=2/P=4 measure the framework's overhead, not a speed-up. Partitions are
cached under ``benchmarks/.cache/`` (git-ignored).

Usage (from the repository root)::

    python benchmarks/train.py                 # sbm-medium, ~5-10 min on 2 cores
    python benchmarks/train.py --quick         # sbm-small smoke test, < 1 min

Writes ``benchmarks/results/train_<hw>_<date>.json`` (raw numbers) and ``.md`` (the report).
"""

from __future__ import annotations

import argparse
import copy
import logging
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
_ROOT = _HERE.parent

import common  # noqa: E402
from mp_utils import run_ranks  # noqa: E402

log = logging.getLogger("benchmarks.train")

PEER_GNN = "gnn-dist"
PEER_GNN_TORCH = "gnn-dist, GNN_DIST_KERNELS=torch"
PEER_WHATIF = "gnn-dist, dropout chunk patched (what-if)"
PEER_SPARSE = "PyG GCNConv, sparse CSR adj_t"
PEER_EDGE_INDEX = "PyG GCNConv, edge_index"
PEERS = (PEER_GNN, PEER_GNN_TORCH, PEER_WHATIF, PEER_SPARSE, PEER_EDGE_INDEX)
KERNEL_ENV = "GNN_DIST_KERNELS"
"""gnn-dist's aggregation-kernel switch (``auto``, ``torch``, ``numba``, ``triton``; see ``gnn_dist.kernels``)."""
THP_ENV = "THP_MEM_ALLOC_ENABLE"
"""torch's huge-page CPU allocations; the launchers (``gnn-dist train``, ``launch/*``) set it to 1
unless the user set it, and ``gnn_dist.distributed.allocator`` tunes glibc's malloc by it."""

RSS_SLACK = 0.10
"""The per-rank memory target allows 10% over ``single/P + halo share``."""
TARGET_ONE_RANK = 0.8
"""Target: gnn-dist's one-rank epoch time <= 0.8x PyG's sparse-adj epoch time."""


@dataclass(kw_only=True, slots=True)
class BenchConfig:
    dataset: str = "sbm-medium"
    """Catalog dataset (``partitioners.catalog``)."""
    hidden: int = 128
    """Hidden width of the GCN."""
    num_layers: int = 2
    """GCN layers."""
    dropout: float = 0.5
    """Feature dropout after each hidden layer (both frameworks)."""
    lr: float = 0.01
    """Adam learning rate."""
    seed: int = 0
    """Dataset, partition and weight-initialisation seed."""
    threads: int = 1
    """``torch.set_num_threads`` in every process (every rank of every run)."""
    warmup: int = 1
    """Epochs per peer/rank before measuring."""
    epochs: int = 5
    """Measured epochs per peer (one rank) and per run (P ranks)."""
    edge_index_epochs: int = 3
    """Measured epochs of PyG on edge_index (it is several times slower); 0 skips that peer."""
    rounds: int = 2
    """Runs of each P (interleaved P=2, P=4, P=2, ...)."""
    parts: tuple[int, ...] = (2, 4)
    """The P values of the multi-rank runs."""
    memory_steps: int = 2
    """Training steps of each peer's peak-RSS process."""
    memory_pyg: bool = True
    """Measure the PyG peers' peak RSS too (gnn-dist's is always measured: the P-rank target needs it)."""
    kernels: str = "auto"
    """``GNN_DIST_KERNELS`` of every gnn-dist run (the one-rank peer, the what-if and the P ranks)."""
    compare_torch_kernels: bool = True
    """At one rank, also time gnn-dist with ``GNN_DIST_KERNELS=torch`` (when ``kernels`` resolves to another)."""
    epoch_timeout_s: float = 300.0
    """An epoch (or a peak-RSS run's step) that takes longer dumps every thread's stack and fails the run."""
    whatif_chunk: int = 1 << 18
    """``gnn_dist.nn.dropout._CHUNK_ELEMENTS`` of the what-if peer (in-process patch); the peer runs
    only while the default chunk is over twice as large (the default was ``2**22``, now ``2**19``)."""
    profile: bool = True
    """Profile one epoch of each peer (torch.profiler) and micro-benchmark the dropout."""
    cache_dir: str = str(_HERE / ".cache")
    """Where the partition folders are kept between runs."""
    timeout_s: float = 1500.0
    """Wall-clock limit of each spawned run (the harness kills it after that)."""
    thp_mem_alloc_enable: str | None = None
    """``THP_MEM_ALLOC_ENABLE`` of every spawned process: the caller's, else 1 as the launchers set
    it (filled in by :func:`main`; ``None`` in results from before it was recorded)."""
    paths: dict[int, str] = field(default_factory=dict)
    """P -> partition folder (filled in by :func:`prepare_partitions`)."""

    def __post_init__(self) -> None:
        for name in ("hidden", "num_layers", "threads", "epochs", "rounds", "memory_steps", "whatif_chunk"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        for name in ("warmup", "edge_index_epochs"):
            if getattr(self, name) < 0:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 0, got {getattr(self, name)}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"--dropout must be in [0, 1), got {self.dropout}")
        if self.kernels not in ("auto", "torch", "numba"):
            raise ValueError(f"--kernels must be auto, torch or numba, got {self.kernels!r}")
        if any(p < 2 for p in self.parts):
            raise ValueError(f"--parts must all be >= 2 (P=1 is the one-rank run), got {list(self.parts)}")


# ============================================================================ partitions
def prepare_partitions(cfg: BenchConfig) -> None:
    """Make (or reuse) the METIS partitions of ``cfg.dataset`` for P = 1 and ``cfg.parts``."""
    cfg.paths.update(common.cached_metis_partitions(cfg.dataset, (1, *cfg.parts), cfg.seed, cfg.cache_dir))


# ============================================================================ in the spawned processes
def _torch_setup(cfg: dict[str, Any]) -> Any:
    os.environ[KERNEL_ENV] = cfg["kernels"]
    import torch

    torch.set_num_threads(int(cfg["threads"]))
    logging.basicConfig(level=logging.WARNING)
    return torch


_THREADS_SEEN: set[int] = set()
"""torch thread counts found in place of the configured one before an epoch (this process)."""


def _hold_threads(cfg: dict[str, Any]) -> None:
    """Set torch's intra-op thread count back to ``cfg["threads"]`` if something changed it.

    numba's OpenMP pool launch (the first numba kernel call in a process) sets OpenMP's global
    thread count to ``NUMBA_NUM_THREADS``, which torch then reports and uses; measuring every
    peer at the configured thread count needs it reset before each epoch.
    """
    import torch

    n = torch.get_num_threads()
    if n != cfg["threads"]:
        _THREADS_SEEN.add(n)
        torch.set_num_threads(cfg["threads"])


def _tune_allocator() -> dict[str, Any]:
    """Apply the runtime's glibc malloc tuning as ``gnn_dist.train.main`` does at a rank's start (the
    rank jobs here do not go through that entry); returns what was set, for the report."""
    try:
        from gnn_dist.distributed.allocator import tune_allocator
    except ImportError:  # a tree from before the allocator tuning
        return {"skipped": "no gnn_dist.distributed.allocator"}
    t = tune_allocator()
    return {"reason": getattr(t, "reason", None), "applied": t.applied, "kept": t.kept, "failed": t.failed,
            "skipped": t.skipped}


def _warm_fixed_costs() -> None:
    """Pay a rank's fixed per-process costs before it loads its partition: load the aggregation
    kernels (numba: llvmlite and the cached kernels) with one tiny SpMM in each form GCN uses,
    and build one ``torch.optim`` optimizer on a dummy parameter (the first imports
    ``torch._dynamo``). The RSS after this is the *warm* baseline: peak - warm is what the data
    and training cost, without the costs that do not shrink with the partition."""
    import torch

    try:
        from gnn_dist.kernels import CSR, default_kernels
    except ImportError:  # a tree from before the kernel backends
        pass
    else:
        csr = CSR(indptr=torch.tensor([0, 1, 2]), indices=torch.tensor([1, 0]), eids=None, num_cols=2)
        x, ones = torch.ones(2, 4), torch.ones(2)
        backend = default_kernels().for_tensor(x)   # the CPU choice (GNN_DIST_KERNELS=triton falls back on CPU)
        backend.spmm(csr, None, x)
        backend.spmm(csr, None, x, row_scale=ones, col_scale=ones)
        backend.spmm(csr, torch.ones(2, 1), x)
    torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))])


def _resolved_kernels() -> str:
    """The aggregation backend gnn-dist uses for CPU float32 tensors in this process, by name."""
    import torch

    try:
        from gnn_dist.kernels import default_kernels
    except ImportError:  # a tree from before the kernel backends: torch.sparse inside nn/sparse.py
        return "torch"
    return str(default_kernels().for_tensor(torch.empty(0)).name)


class _Watchdog:
    """``with _Watchdog(s):`` a block that runs longer than ``s`` seconds dumps all stacks and exits 1
    (a hang shows up in the run's log instead of at the harness timeout)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __enter__(self) -> None:
        import faulthandler

        faulthandler.dump_traceback_later(self.seconds, exit=True)

    def __exit__(self, *exc: Any) -> None:
        import faulthandler

        faulthandler.cancel_dump_traceback_later()


def _build_gnn_dist(cfg: dict[str, Any], part: Any) -> Any:
    import torch

    from gnn_dist.models import GCN

    torch.manual_seed(cfg["seed"])
    return GCN(part.feature_dim, cfg["hidden"], part.num_classes, cfg["num_layers"], dropout=cfg["dropout"],
               seed=cfg["seed"])


def _make_pyg_model(cfg: dict[str, Any], in_dim: int, out_dim: int) -> Any:
    """PyG's GCN with the same layout as gnn-dist's: conv, ReLU, dropout, ..., conv."""
    import torch
    import torch.nn.functional as F
    from torch_geometric.nn import GCNConv

    class PygGCN(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            dims = [in_dim] + [cfg["hidden"]] * (cfg["num_layers"] - 1) + [out_dim]
            self.convs = torch.nn.ModuleList(GCNConv(a, b, cached=True) for a, b in zip(dims, dims[1:]))
            self.p = cfg["dropout"]

        def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
            for i, conv in enumerate(self.convs):
                x = conv(x, adj)
                if i < len(self.convs) - 1:
                    x = F.dropout(F.relu(x), self.p, self.training)
            return x

    return PygGCN()


def _pyg_data(path: str) -> dict[str, Any]:
    """The one-part partition as PyG inputs: ``x``, ``y``, ``train_mask``, CSR ``adj_t``, ``edge_index``.

    With one part the local ids are the global ids and the CSR is by destination, i.e. exactly
    PyG's ``adj_t`` (row = target, column = source).
    """
    import warnings

    import numpy as np
    import torch

    from partitioners.format import load_part

    data = load_part(path, 0, mmap=True, verify=True)
    if data.num_halo:
        raise ValueError(f"{path}: a one-part partition has no halo rows, found {data.num_halo}")
    n = data.num_inner
    indptr = torch.from_numpy(np.array(data.indptr, dtype=np.int64))
    indices = torch.from_numpy(np.array(data.indices, dtype=np.int64))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*[Ss]parse CSR tensor support is in beta.*")
        adj_t = torch.sparse_csr_tensor(indptr, indices, torch.ones(indices.numel()), size=(n, n),
                                        check_invariants=False)
    dst = torch.repeat_interleave(torch.arange(n), indptr.diff())
    return {"x": torch.from_numpy(np.array(data.features)), "y": torch.from_numpy(np.array(data.labels)).long(),
            "train_mask": torch.from_numpy(np.array(data.train_mask)), "adj_t": adj_t,
            "edge_index": torch.stack([indices, dst]), "num_self_loops": int(np.asarray(data.self_loops).sum())}


def _pyg_step_fn(model: Any, data: Any, adj_key: str, lr: float) -> Any:
    """One PyG training step, the same work as ``Trainer.train_step`` on one rank; returns its time."""
    import torch
    import torch.nn.functional as F

    opt = torch.optim.Adam(model.parameters(), lr=lr)
    x, y, mask, adj = data["x"], data["y"], data["train_mask"], data[adj_key]
    num_train = int(mask.sum())
    losses: list[float] = []

    def step() -> float:
        t0 = time.perf_counter()
        model.train()
        opt.zero_grad(set_to_none=True)
        out = model(x, adj)
        loss = F.cross_entropy(out[mask], y[mask], reduction="sum") / num_train
        loss.backward()
        value = float(loss.item())
        opt.step()
        dt = time.perf_counter() - t0
        losses.append(value)
        return dt

    step.losses = losses  # type: ignore[attr-defined]
    return step


def _copy_weights_to_pyg(gnn_model: Any, pyg_model: Any) -> None:
    """gnn-dist's GCNConv names its parameters ``lin.weight`` and ``bias`` like PyG's."""
    state = {f"convs.{i}.{k}": v.detach().clone() for i, conv in enumerate(gnn_model.convs)
             for k, v in conv.state_dict().items()}
    pyg_model.load_state_dict(state)


def _profile_epoch(run: Any, labels: dict[str, str]) -> dict[str, Any]:
    """Profile one call of ``run``: wall time, inclusive CPU time of each labelled event, top ops."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        _, wall = common.timed(run)
    events = {e.key: e for e in prof.key_averages()}
    parts = {name: (events[key].cpu_time_total / 1e6 if key in events else 0.0) for name, key in labels.items()}
    top = sorted(events.values(), key=lambda e: -e.self_cpu_time_total)[:8]
    return {"wall_s": wall, "parts_s": parts,
            "top_self_ops": [{"op": e.key, "self_s": e.self_cpu_time_total / 1e6, "calls": e.count} for e in top]}


def _labelled(fn: Any, label: str) -> Any:
    from torch.profiler import record_function

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with record_function(label):
            return fn(*args, **kwargs)
    return wrapper


def single_rank_job(rank: int, world_size: int, cfg: dict[str, Any]) -> dict[str, Any]:
    """The one-rank comparison (runs in a spawned process; no process group)."""
    torch = _torch_setup(cfg)
    import torch.nn.functional as F
    import torch_geometric.nn.conv.gcn_conv as pyg_gcn_conv

    import gnn_dist
    import gnn_dist.models.basic_gnn as basic_gnn
    import gnn_dist.nn.dropout as dropout_mod
    import gnn_dist.nn.gcn_conv as gcn_conv

    path = cfg["paths"][1]
    part = gnn_dist.load_partition(path)
    model = _build_gnn_dist(cfg, part)
    model_w = copy.deepcopy(model)
    model_t = copy.deepcopy(model)
    pyg_sparse = _make_pyg_model(cfg, part.feature_dim, part.num_classes)
    pyg_ei = _make_pyg_model(cfg, part.feature_dim, part.num_classes)
    _copy_weights_to_pyg(model, pyg_sparse)
    _copy_weights_to_pyg(model, pyg_ei)
    trainer = gnn_dist.Trainer(model, part, lr=cfg["lr"], log_every=0, eval_every=0)
    trainer_w = gnn_dist.Trainer(model_w, part, lr=cfg["lr"], log_every=0, eval_every=0)
    trainer_t = gnn_dist.Trainer(model_t, part, lr=cfg["lr"], log_every=0, eval_every=0)
    kernels = _resolved_kernels()
    with_torch_peer = cfg["compare_torch_kernels"] and kernels != "torch"
    data = _pyg_data(path)

    # same weights, eval mode: the three implementations must give the same logits
    with torch.no_grad():
        for m in (model, pyg_sparse, pyg_ei):
            m.eval()
        ref = model(part, part.x)
        scale = float(ref.abs().max())
        parity = {PEER_SPARSE: float((pyg_sparse(data["x"], data["adj_t"]) - ref).abs().max()) / scale,
                  PEER_EDGE_INDEX: float((pyg_ei(data["x"], data["edge_index"]) - ref).abs().max()) / scale}

    chunk_default = dropout_mod._CHUNK_ELEMENTS

    def gnn_epoch() -> float:
        return float(trainer.fit(1)[0]["epoch_time_s"])

    def torch_kernels_epoch() -> float:
        os.environ[KERNEL_ENV] = "torch"
        try:
            return float(trainer_t.fit(1)[0]["epoch_time_s"])
        finally:
            os.environ[KERNEL_ENV] = cfg["kernels"]

    def whatif_epoch() -> float:
        dropout_mod._CHUNK_ELEMENTS = cfg["whatif_chunk"]
        try:
            return float(trainer_w.fit(1)[0]["epoch_time_s"])
        finally:
            dropout_mod._CHUNK_ELEMENTS = chunk_default

    sparse_step = _pyg_step_fn(pyg_sparse, data, "adj_t", cfg["lr"])
    ei_step = _pyg_step_fn(pyg_ei, data, "edge_index", cfg["lr"])
    cpu_times: dict[str, list[float]] = {}
    usage: dict[str, list[dict[str, float]]] = {}

    def with_cpu(name: str, fn: Any) -> Any:
        # process CPU time of the epoch next to its wall time: the work, without the time other
        # jobs on a shared machine took the core away
        cpu_times[name] = []
        usage[name] = []

        def run() -> float:
            _hold_threads(cfg)
            c0, u0 = time.process_time(), common.cpu_usage()
            with _Watchdog(cfg["epoch_timeout_s"]):
                t = fn()
            cpu_times[name].append(time.process_time() - c0)
            u1 = common.cpu_usage()
            usage[name].append({k: u1[k] - u0[k] for k in u0})
            return t
        return run

    runners = {PEER_GNN: with_cpu(PEER_GNN, gnn_epoch)}
    if with_torch_peer:
        runners[PEER_GNN_TORCH] = with_cpu(PEER_GNN_TORCH, torch_kernels_epoch)
    run_whatif = chunk_default > 2 * cfg["whatif_chunk"]
    if run_whatif:
        runners[PEER_WHATIF] = with_cpu(PEER_WHATIF, whatif_epoch)
    runners[PEER_SPARSE] = with_cpu(PEER_SPARSE, sparse_step)
    runners[PEER_EDGE_INDEX] = with_cpu(PEER_EDGE_INDEX, ei_step)
    rounds = {name: cfg["epochs"] for name in runners}
    rounds[PEER_EDGE_INDEX] = cfg["edge_index_epochs"]
    t0 = time.perf_counter()
    times = common.interleave(runners, rounds, warmup=cfg["warmup"])
    timing_s = time.perf_counter() - t0

    out: dict[str, Any] = {
        "num_nodes": part.num_inner, "num_edges": part.block.num_edges, "feature_dim": part.feature_dim,
        "num_classes": part.num_classes, "num_train": part.global_num_train,
        "num_self_loops": data["num_self_loops"], "logit_parity_rel": parity, "epoch_times_s": times,
        "timing_wall_s": timing_s, "dropout_chunk_default": chunk_default, "kernels": kernels,
        "epoch_cpu_s": {name: v[cfg["warmup"]:] for name, v in cpu_times.items()},
        "epoch_usage": {name: v[cfg["warmup"]:] for name, v in usage.items()},
        "torch_threads_reset_from": sorted(_THREADS_SEEN),
        "losses": {PEER_GNN: [h["train_loss"] for h in trainer.history],
                   PEER_WHATIF: [h["train_loss"] for h in trainer_w.history],
                   PEER_GNN_TORCH: [h["train_loss"] for h in trainer_t.history],
                   PEER_SPARSE: sparse_step.losses, PEER_EDGE_INDEX: ei_step.losses},
    }
    out["whatif_bit_identical"] = out["losses"][PEER_GNN] == out["losses"][PEER_WHATIF] if run_whatif else None
    if with_torch_peer:
        pairs = zip(out["losses"][PEER_GNN], out["losses"][PEER_GNN_TORCH])
        out["torch_kernels_max_loss_diff"] = max((abs(a - b) for a, b in pairs), default=0.0)
    evals = [common.timed(trainer.evaluate)[1] for _ in range(3)]
    out["evaluate_s"] = common.summarize(evals)

    if cfg["profile"]:
        # labelled regions: patch the module-level names the models call (this process only)
        basic_gnn.hash_dropout = _labelled(basic_gnn.hash_dropout, "bench::dropout")
        gcn_conv.spmm_scaled = _labelled(gcn_conv.spmm_scaled, "bench::spmm")
        pyg_gcn_conv.spmm = _labelled(pyg_gcn_conv.spmm, "bench::spmm")
        gnn_labels = {"dropout forward (hash)": "bench::dropout", "SpMM forward": "bench::spmm",
                      "SpMM backward": "autograd::engine::evaluate_function: _SpMMBackward",
                      "dense linear forward": "aten::linear",
                      "dense linear backward": "autograd::engine::evaluate_function: MmBackward0",
                      "elementwise backward (dropout, self term)": "autograd::engine::evaluate_function: MulBackward0",
                      "optimizer step": "Optimizer.step#Adam.step"}
        pyg_labels = {"dropout forward (bernoulli)": "aten::dropout", "SpMM forward": "bench::spmm",
                      "SpMM backward": "autograd::engine::evaluate_function: SparseAddmmBackward0",
                      "dense linear forward": "aten::linear",
                      "dense linear backward": "autograd::engine::evaluate_function: MmBackward0",
                      "elementwise backward (dropout, self term)":
                          "autograd::engine::evaluate_function: NativeDropoutBackward0",
                      "optimizer step": "Optimizer.step#Adam.step"}
        out["profile"] = {PEER_GNN: _profile_epoch(gnn_epoch, gnn_labels)}
        if with_torch_peer:
            out["profile"][PEER_GNN_TORCH] = _profile_epoch(torch_kernels_epoch, gnn_labels)
        if run_whatif:
            out["profile"][PEER_WHATIF] = _profile_epoch(whatif_epoch, gnn_labels)
        out["profile"][PEER_SPARSE] = _profile_epoch(sparse_step, pyg_labels)
        basic_gnn.hash_dropout = dropout_mod.hash_dropout
        # dropout alone on a [N, hidden] activation, interleaved
        h = torch.randn(part.num_inner, cfg["hidden"])
        ids = part.original_ids[:part.num_inner]

        def hash_default() -> None:
            dropout_mod.hash_dropout(h, cfg["dropout"], seed=0, step=0, layer=0, row_ids=ids)

        def hash_whatif() -> None:
            dropout_mod._CHUNK_ELEMENTS = cfg["whatif_chunk"]
            try:
                dropout_mod.hash_dropout(h, cfg["dropout"], seed=0, step=0, layer=0, row_ids=ids)
            finally:
                dropout_mod._CHUNK_ELEMENTS = chunk_default

        micro = common.interleave({"hash_dropout (default chunk)": hash_default,
                                   "hash_dropout (what-if chunk)": hash_whatif,
                                   "torch F.dropout": lambda: F.dropout(h, cfg["dropout"], True)}, 5, warmup=1)
        out["dropout_micro_s"] = {k: common.summarize(v) for k, v in micro.items()}
    return out


def memory_job(rank: int, world_size: int, cfg: dict[str, Any], peer: str) -> dict[str, Any]:
    """One peer alone in a fresh process: RSS after the imports, peak RSS after training steps."""
    torch = _torch_setup(cfg)
    path = cfg["paths"][1]
    allocator = None
    if peer == PEER_GNN:
        allocator = _tune_allocator()
        import gnn_dist
        import gnn_dist.models  # noqa: F401
        import gnn_dist.partition  # noqa: F401
        import gnn_dist.trainer  # noqa: F401

        baseline = common.current_rss_bytes()
        _warm_fixed_costs()
        warm = common.current_rss_bytes()
        part = gnn_dist.load_partition(path)
        trainer = gnn_dist.Trainer(_build_gnn_dist(cfg, part), part, lr=cfg["lr"], log_every=0, eval_every=0)
        loaded = common.current_rss_bytes()
        times = []
        for _ in range(cfg["memory_steps"]):
            _hold_threads(cfg)
            with _Watchdog(cfg["epoch_timeout_s"]):
                times += [float(h["epoch_time_s"]) for h in trainer.fit(1)]
    else:
        import torch_geometric.nn  # noqa: F401

        import partitioners.format  # noqa: F401

        baseline = common.current_rss_bytes()
        warm = None
        data = _pyg_data(path)
        torch.manual_seed(cfg["seed"])
        model = _make_pyg_model(cfg, data["x"].shape[1], int(data["y"].max()) + 1)
        step = _pyg_step_fn(model, data, "adj_t" if peer == PEER_SPARSE else "edge_index", cfg["lr"])
        loaded = common.current_rss_bytes()
        with _Watchdog(cfg["epoch_timeout_s"] * cfg["memory_steps"]):
            times = [step() for _ in range(cfg["memory_steps"])]
    return {"peer": peer, "allocator": allocator, "torch_threads_reset_from": sorted(_THREADS_SEEN),
            "baseline_rss_bytes": baseline, "warm_rss_bytes": warm,
            "loaded_rss_bytes": loaded,
            "peak_rss_bytes": common.peak_rss_bytes(),
            "epoch_times_s": times}


def dist_rank_job(rank: int, world_size: int, cfg: dict[str, Any]) -> dict[str, Any]:
    """One rank of a P-rank training run (gloo group set up by the harness)."""
    _torch_setup(cfg)
    allocator = _tune_allocator()
    import gnn_dist
    import gnn_dist.models  # noqa: F401
    import gnn_dist.partition  # noqa: F401
    import gnn_dist.trainer  # noqa: F401

    baseline = common.current_rss_bytes()
    _warm_fixed_costs()
    warm = common.current_rss_bytes()
    part = gnn_dist.load_partition(cfg["paths"][world_size])
    trainer = gnn_dist.Trainer(_build_gnn_dist(cfg, part), part, lr=cfg["lr"], log_every=0, eval_every=0)
    loaded = common.current_rss_bytes()
    hist, cpu = [], []
    for _ in range(cfg["warmup"] + cfg["epochs"]):
        _hold_threads(cfg)
        c0 = time.process_time()
        with _Watchdog(cfg["epoch_timeout_s"]):
            hist += trainer.fit(1)
        cpu.append(time.process_time() - c0)
    ex = part.exchanger
    try:  # collective buffers the runtime holds past their use (see gnn_dist/distributed/keepalive.py)
        from gnn_dist.distributed import keepalive

        kept = sum(t.numel() * t.element_size() for t in list(keepalive._kept))
    except (ImportError, AttributeError):
        kept = None
    return {"rank": rank, "allocator": allocator, "keepalive_bytes": kept,
            "torch_threads_reset_from": sorted(_THREADS_SEEN),
            "kernels": _resolved_kernels(), "num_inner": part.num_inner,
            "num_halo": part.num_halo, "num_send": ex.num_send, "epoch_time_s": [h["epoch_time_s"] for h in hist],
            "epoch_cpu_s": cpu, "halo_bytes": [h["halo_bytes"] for h in hist],
            "allreduce_bytes": [h["allreduce_bytes"] for h in hist], "train_loss": [h["train_loss"] for h in hist],
            "num_forward": ex.num_forward, "num_backward": ex.num_backward, "element_size": part.x.element_size(),
            "baseline_rss_bytes": baseline, "warm_rss_bytes": warm, "loaded_rss_bytes": loaded,
            "peak_rss_bytes": common.peak_rss_bytes()}


# ============================================================================ analysis
def layer_widths(cfg: BenchConfig, feature_dim: int) -> list[int]:
    """Width of each layer's input, i.e. of the tensor each layer's halo exchange moves."""
    return [feature_dim] + [cfg.hidden] * (cfg.num_layers - 1)


def halo_minimum(cfg: BenchConfig, num_parts: int, feature_dim: int, element_size: int) -> list[dict[str, int]]:
    """Per rank, the halo bytes one epoch must send, from the partition folder.

    Forward, every layer after the first (the first layer's halo input rows cross once, at start:
    the trainer's static halo cache): the rows the rank sends (``send_offsets[-1]``) x the layer's
    input width. Backward, the same layers: the rank's halo rows (``num_halo``, from
    ``partition.json``) x that width. Also the formula that counts every layer both ways, for
    reference.
    """
    from partitioners.format import load_part, load_partition_meta

    path = cfg.paths[num_parts]
    meta = load_partition_meta(path)
    widths = layer_widths(cfg, feature_dim)
    rows = []
    for r in range(num_parts):
        num_send = int(load_part(path, r, mmap=True, verify=False).send_offsets[-1])
        num_halo = int(meta.parts[r].num_halo)
        fwd = num_send * sum(widths[1:]) * element_size
        bwd = num_halo * sum(widths[1:]) * element_size
        rows.append({"rank": r, "num_send": num_send, "num_halo": num_halo, "num_inner": int(meta.parts[r].num_inner),
                     "forward": fwd, "backward": bwd, "minimum": fwd + bwd,
                     "every_layer_both_ways": (num_send + num_halo) * sum(widths) * element_size})
    return rows


def analyse(cfg: BenchConfig, single: dict[str, Any], memory: dict[str, dict[str, Any]],
            dist_runs: dict[int, list[list[dict[str, Any]]]]) -> dict[str, Any]:
    w, e = cfg.warmup, cfg.epochs
    times = {peer: common.summarize(v) for peer, v in single["epoch_times_s"].items()}
    pyg = times[PEER_SPARSE]["median"]
    cpu = {peer: common.summarize(v) for peer, v in single["epoch_cpu_s"].items()}
    def usage_median(peer: str, key: str) -> float:
        return common.summarize(u[key] for u in single.get("epoch_usage", {}).get(peer, []))["median"]

    one_rank = {peer: {**s, "vs_pyg_sparse": s["median"] / pyg, "cpu": cpu[peer],
                       "sys_s": usage_median(peer, "sys_s"), "minor_faults": usage_median(peer, "minor_faults"),
                       "cpu_vs_pyg_sparse": cpu[peer]["median"] / cpu[PEER_SPARSE]["median"]}
                for peer, s in times.items()}
    mem_single = memory.get(PEER_GNN)
    single_data = mem_single["peak_rss_bytes"] - mem_single["baseline_rss_bytes"] if mem_single else float("nan")
    single_peak = mem_single["peak_rss_bytes"] if mem_single else float("nan")
    single_warm = (mem_single or {}).get("warm_rss_bytes")
    single_warm_data = single_peak - single_warm if single_warm is not None else float("nan")
    ref_loss = single["losses"][PEER_GNN]
    multi = {}
    for num_parts, runs in dist_runs.items():
        epoch_max = [max(rk["epoch_time_s"][i] for rk in run) for run in runs for i in range(w, w + e)]
        epoch_cpu = [sum(rk["epoch_cpu_s"][i] for rk in run) for run in runs for i in range(w, w + e)]
        ranks = runs[0]
        minimum = halo_minimum(cfg, num_parts, single["feature_dim"], ranks[0]["element_size"])
        per_rank = []
        for r in range(num_parts):
            measured = sorted({b for run in runs for b in run[r]["halo_bytes"]})
            peak = max(run[r]["peak_rss_bytes"] for run in runs)
            base = min(run[r]["baseline_rss_bytes"] for run in runs)
            loaded = max(run[r]["loaded_rss_bytes"] for run in runs)
            halo_share = single_data * minimum[r]["num_halo"] / single["num_nodes"]
            budget = (1 + RSS_SLACK) * (single_data / num_parts + halo_share)
            # the same budget from the warm baselines (fixed per-process costs paid before both)
            warms = [run[r].get("warm_rss_bytes") for run in runs]
            warm = min(warms) if None not in warms else float("nan")
            warm_budget = (1 + RSS_SLACK) * single_warm_data * (
                1 / num_parts + minimum[r]["num_halo"] / single["num_nodes"])
            raw_budget = (1 + RSS_SLACK) * (single_peak / num_parts + halo_share)
            per_rank.append({
                "rank": r, "num_inner": minimum[r]["num_inner"], "num_halo": minimum[r]["num_halo"],
                "num_send": minimum[r]["num_send"], "halo_bytes_per_epoch": measured,
                "halo_bytes_minimum": minimum[r]["minimum"], "halo_bytes_every_layer_both_ways":
                    minimum[r]["every_layer_both_ways"],
                "bytes_ratio": measured[-1] / minimum[r]["minimum"] if minimum[r]["minimum"] else float("nan"),
                "bytes_constant": len(measured) == 1,
                "allreduce_bytes": sorted({b for run in runs for b in run[r]["allreduce_bytes"]}),
                "peak_rss_bytes": peak, "baseline_rss_bytes": base, "data_rss_bytes": peak - base,
                "loaded_rss_bytes": loaded,
                "keepalive_bytes": max((run[r]["keepalive_bytes"] or 0) for run in runs),
                "data_rss_budget_bytes": budget, "data_rss_ratio": (peak - base) / budget,
                "warm_rss_bytes": warm, "warm_data_rss_bytes": peak - warm,
                "warm_data_rss_budget_bytes": warm_budget, "warm_data_rss_ratio": (peak - warm) / warm_budget,
                "raw_rss_budget_bytes": raw_budget, "raw_rss_ratio": peak / raw_budget})
        total_measured = sum(pr["halo_bytes_per_epoch"][-1] for pr in per_rank)
        total_min = sum(m["minimum"] for m in minimum)
        total_naive = sum(m["every_layer_both_ways"] for m in minimum)
        # what a schedule could move instead: the static input features once (not per epoch), and
        # in each later layer the narrower of its input and output (GCN's linear map commutes with
        # the aggregation, so it can run on the inner rows before the exchange)
        widths = layer_widths(cfg, single["feature_dim"])
        outs = widths[1:] + [single["num_classes"]]
        narrow = sum(min(a, b) for a, b in zip(widths[1:], outs[1:]))
        lower = sum((m["num_send"] + m["num_halo"]) * narrow * ranks[0]["element_size"] for m in minimum)
        losses = [run[0]["train_loss"] for run in runs]
        n = min(len(ref_loss), *(len(x) for x in losses))
        loss_diff = max(abs(a[i] - ref_loss[i]) for a in losses for i in range(n)) if n else float("nan")
        multi[num_parts] = {
            "epoch_time_s": common.summarize(epoch_max), "epoch_cpu_s_all_ranks": common.summarize(epoch_cpu),
            "per_rank": per_rank,
            "halo_bytes_total": total_measured, "halo_bytes_minimum_total": total_min,
            "bytes_ratio": total_measured / total_min if total_min else float("nan"),
            "bytes_ratio_vs_every_layer_both_ways": total_measured / total_naive if total_naive else float("nan"),
            "halo_bytes_static_features_narrow_total": lower,
            "max_data_rss_ratio": max(pr["data_rss_ratio"] for pr in per_rank),
            "max_warm_data_rss_ratio": max(pr["warm_data_rss_ratio"] for pr in per_rank),
            "max_raw_rss_ratio": max(pr["raw_rss_ratio"] for pr in per_rank),
            "max_abs_loss_diff_vs_one_rank": loss_diff, "loss_epochs_compared": n,
            "num_forward_backward": [(rk["num_forward"], rk["num_backward"]) for rk in ranks]}
    kernels_p = [rk["kernels"] for runs in dist_runs.values() for run in runs for rk in run]
    threads_seen = sorted({n for runs in dist_runs.values() for run in runs for rk in run
                           for n in rk.get("torch_threads_reset_from", [])}
                          | {n for m in memory.values() for n in m.get("torch_threads_reset_from", [])})
    return {"one_rank": one_rank, "kernels_p_ranks": kernels_p, "torch_threads_reset_from": threads_seen,
            "single_data_rss_bytes": single_data,
            "single_warm_rss_bytes": float("nan") if single_warm is None else single_warm,
            "single_warm_data_rss_bytes": single_warm_data,
            "single_peak_rss_bytes": single_peak,
            "single_baseline_rss_bytes": mem_single["baseline_rss_bytes"] if mem_single else float("nan"),
            "single_loaded_rss_bytes": mem_single["loaded_rss_bytes"] if mem_single else float("nan"),
            "multi_rank": multi}


# ============================================================================ report
def _ms(s: float) -> str:
    return "-" if s is None or math.isnan(s) else f"{s * 1e3:,.0f} ms"


def _label(peer: str, single: dict[str, Any]) -> str:
    k = single["kernels"]
    return {PEER_GNN: f"gnn-dist ({k} kernels)", PEER_GNN_TORCH: "gnn-dist (torch kernels)",
            PEER_WHATIF: f"gnn-dist ({k} kernels), dropout chunk patched (what-if)"}.get(peer, peer)


def render_markdown(cfg: BenchConfig, env: dict[str, Any], single: dict[str, Any], memory: dict[str, Any],
                    res: dict[str, Any], wall_s: float, command: str) -> str:
    one = res["one_rank"]
    ratio = one[PEER_GNN]["vs_pyg_sparse"]
    L: list[str] = []
    L.append(f"# Training benchmark: gnn-dist vs PyG {env['packages'].get('torch_geometric')}, "
             f"{cfg.dataset}, {env['cpu_count']} CPUs")
    L.append("")
    L.append(f"Generated by `{command}` on "
             f"{env['date']} (git {env['git_revision']}; working-tree sources gnn_dist "
             f"`{env['source_sha256']['gnn_dist'][:12]}`, partitioners `{env['source_sha256']['partitioners'][:12]}` "
             f"(sha256 of the .py files)), total wall time "
             f"{wall_s:.0f} s.")
    L.append("")
    L.append("## Setup")
    L.append("")
    L.append(f"- Graph: `{cfg.dataset}` (`partitioners.catalog.load_dataset`, seed {cfg.seed}): "
             f"{single['num_nodes']:,} nodes, {single['num_edges']:,} stored edges, {single['feature_dim']} float32 "
             f"features, {single['num_classes']} classes, {single['num_train']:,} training nodes, "
             f"{single['num_self_loops']} self-loops. Partitions: METIS (`partition_graph(..., 'metis', seed="
             f"{cfg.seed})`), P = 1, {', '.join(map(str, cfg.parts))}. PyG runs on the one-part partition's "
             f"arrays (same node order as gnn-dist).")
    L.append(f"- gnn-dist: `{KERNEL_ENV}={cfg.kernels}`, which resolved to the **{single['kernels']}** aggregation "
             f"kernels (one rank, P ranks: {', '.join(sorted(set(res['kernels_p_ranks'])))})"
             + (f"; the one-rank table also has gnn-dist with `{KERNEL_ENV}=torch` (torch.sparse CSR)"
                if PEER_GNN_TORCH in one else "") + ".")
    seen = sorted(set(single.get("torch_threads_reset_from", [])) | set(res.get("torch_threads_reset_from", [])))
    if seen:
        L.append(f"- Threads: before some epochs torch reported {', '.join(map(str, seen))} intra-op threads instead "
                 f"of the {cfg.threads} set: numba's OpenMP pool launch (the first numba kernel call in a process, "
                 f"`gnn_dist/kernels/numba_cpu.py` `_num_threads`) resets OpenMP's global thread count to "
                 f"`NUMBA_NUM_THREADS`. The benchmark sets it back before every epoch, so only warm-up epochs ran "
                 f"with the extra threads.")
    alloc = (memory.get(PEER_GNN) or {}).get("allocator") or {}
    if cfg.thp_mem_alloc_enable is not None or alloc:
        L.append(f"- Allocator: `{THP_ENV}={cfg.thp_mem_alloc_enable}` in every spawned process, PyG's included "
                 f"(torch's huge-page CPU allocations; the launchers' default is 1 unless the user set it); gnn-dist's "
                 f"glibc malloc tuning "
                 f"(`gnn_dist/distributed/allocator.py`) in the gnn-dist processes: "
                 + (f"applied {alloc.get('applied')}" if alloc.get("applied") else f"not applied "
                    f"({alloc.get('skipped')})")
                 + (f" because {alloc['reason']}" if alloc.get("reason") and alloc.get("applied") else "") + ".")
    L.append(f"- Model: {cfg.num_layers}-layer GCN, hidden {cfg.hidden}, ReLU, dropout {cfg.dropout} after the hidden "
             f"layer, Adam lr {cfg.lr}, loss = sum of cross-entropy over training nodes / their count. PyG: "
             f"`GCNConv(cached=True)` (normalisation computed once, as gnn-dist caches it per block).")
    L.append(f"- Measured: one training step (forward + backward + optimizer + loss to host); eval off; "
             f"`torch.set_num_threads({cfg.threads})` in every process and rank. {cfg.warmup} warm-up epoch(s), "
             f"then {cfg.epochs} measured epochs per peer ({cfg.edge_index_epochs} for PyG on edge_index), "
             f"interleaved A B C D A B C D ...; medians reported.")
    L.append(f"- Machine: {env['cpu_model']}, {env['cpu_count']} logical CPUs, "
             f"{common.fmt_bytes(env['memory_bytes'])} RAM, load average at start "
             f"{', '.join(f'{x:.1f}' for x in env['load_average_1_5_15'] or [])} (other jobs share the CPUs: "
             f"timings are noisy, hence interleaving and medians). Python {env['python']}, "
             + ", ".join(f"{k} {v}" for k, v in env["packages"].items()) + ".")
    L.append("")
    L.append("## One rank")
    L.append("")
    rows = []
    for peer in (p for p in PEERS if p in one):
        s = one[peer]
        mem = memory.get(peer)
        rows.append([_label(peer, single), _ms(s["median"]), f"{_ms(s['min'])} - {_ms(s['max'])}", s["n"],
                     common.fmt_ratio(s["vs_pyg_sparse"]), _ms(s["cpu"]["median"]),
                     common.fmt_ratio(s["cpu_vs_pyg_sparse"]), _ms(s["sys_s"]),
                     "-" if math.isnan(s["minor_faults"]) else f"{s['minor_faults']:,.0f}",
                     common.fmt_bytes(mem["peak_rss_bytes"]) if mem else "-",
                     common.fmt_bytes(mem["peak_rss_bytes"] - mem["baseline_rss_bytes"]) if mem else "-"])
    L.append(common.markdown_table(["peer", "epoch (median)", "min - max", "epochs", "vs PyG sparse",
                                    "CPU time (median)", "CPU vs PyG sparse", "of it kernel (sys)",
                                    "minor page faults", "peak RSS",
                                    "peak - RSS after imports"], rows))
    L.append("")
    L.append("Epoch = wall time of the step (the target's measure). CPU time = the process's CPU seconds in the "
             "same step: on this shared machine it leaves out the time other jobs held the core, so its ratio is "
             "the steadier one. Kernel (sys) time is mostly page faults of fresh large tensors (zeroing pages); it "
             "grows a lot when the machine is under memory pressure, and counts in both epoch and CPU time.")
    L.append("")
    met = "met" if ratio <= TARGET_ONE_RANK else "**missed**"
    L.append(f"Target one rank <= {TARGET_ONE_RANK}x PyG sparse-adj epoch time ({single['kernels']} kernels): {met} "
             f"({ratio:.2f}x wall, {one[PEER_GNN]['cpu_vs_pyg_sparse']:.2f}x CPU)."
             + (f" With the dropout chunk patched (what-if, identical losses: {single['whatif_bit_identical']}): "
                f"{one[PEER_WHATIF]['vs_pyg_sparse']:.2f}x wall, {one[PEER_WHATIF]['cpu_vs_pyg_sparse']:.2f}x CPU."
                if PEER_WHATIF in one else "")
             + (f" With `{KERNEL_ENV}=torch`: {one[PEER_GNN_TORCH]['vs_pyg_sparse']:.2f}x wall, "
                f"{one[PEER_GNN_TORCH]['cpu_vs_pyg_sparse']:.2f}x CPU (max |loss diff| vs the "
                f"{single['kernels']} kernels {single['torch_kernels_max_loss_diff']:.1e})."
                if PEER_GNN_TORCH in one else ""))
    L.append("")
    par = single["logit_parity_rel"]
    L.append(f"Same weights, eval forward: max |logits - gnn-dist| / max |logits| = {par[PEER_SPARSE]:.1e} "
             f"(sparse adj_t), {par[PEER_EDGE_INDEX]:.1e} (edge_index). PyG 2.8 without torch_sparse accepts a "
             f"`torch.sparse_csr_tensor` as `adj_t` (its `gcn_norm` and `spmm` have a torch.sparse path; "
             f"`torch.sparse.mm` forward, autograd `SparseAddmmBackward0` backward).")
    L.append("")
    L.append(f"One `Trainer.evaluate()` (the extra eval forward that the default `eval_every=1` adds to "
             f"every epoch) takes {_ms(single['evaluate_s']['median'])}: excluded here, as the PyG step has none.")
    L.append("")
    if "profile" in single:
        prof = single["profile"]
        L.append("### Where the one-rank epoch goes (torch.profiler, one epoch each, inclusive CPU time)")
        L.append("")
        cols = [p for p in (PEER_GNN, PEER_GNN_TORCH, PEER_WHATIF, PEER_SPARSE) if p in prof]
        names = {p: list(prof[p]["parts_s"]) for p in cols}
        rows = []
        for i, gname in enumerate(names[PEER_GNN]):
            pname = names[PEER_SPARSE][i]
            label = gname if gname == pname else f"{gname} / {pname}"
            rows.append([label] + [_ms(prof[p]["parts_s"][names[p][i]]) for p in cols])
        rows.append(["other (loss, ReLU, gathers, allocation, ...)"]
                    + [_ms(prof[p]["wall_s"] - sum(prof[p]["parts_s"].values())) for p in cols])
        rows.append(["**epoch (wall, profiled)**"] + [_ms(prof[p]["wall_s"]) for p in cols])
        L.append(common.markdown_table(["region"] + [_label(p, single) for p in cols], rows))
        L.append("")
        L.append("Top ops by self CPU time: " + "; ".join(
            f"{_label(p, single)}: " + ", ".join(f"`{o['op']}` {_ms(o['self_s'])}" for o in prof[p]["top_self_ops"][:5])
            for p in (PEER_GNN, PEER_SPARSE)) + ".")
        L.append("")
        micro = single["dropout_micro_s"]
        L.append(f"Dropout alone on a [{single['num_nodes']:,}, {cfg.hidden}] float32 activation (median of 5, "
                 f"interleaved): "
                 + ", ".join(f"{k} {_ms(v['median'])}" for k, v in micro.items())
                 + f" (default chunk {single['dropout_chunk_default']:,} elements, what-if {cfg.whatif_chunk:,}).")
        L.append("")
        L.append(_why(cfg, single, res))
        L.append("")
    L.append("## P ranks (gloo, one machine)")
    L.append("")
    L.append(f"{cfg.rounds} run(s) per P, interleaved; epoch time = max over ranks, median over "
             f"{cfg.epochs} measured epochs x runs. P ranks share {env['cpu_count']} cores, so this is overhead, "
             f"not speed-up.")
    L.append("")
    rows = []
    p1 = one[PEER_GNN]["median"]
    c1 = one[PEER_GNN]["cpu"]["median"]
    rows.append(["1", _ms(p1), "1.00x", _ms(c1), "1.00x", "0", "0", "-", "0",
                 common.fmt_bytes(res["single_peak_rss_bytes"]),
                 common.fmt_bytes(res["single_data_rss_bytes"]), "-",
                 common.fmt_bytes(res.get("single_warm_data_rss_bytes", float("nan"))), "-", "-"])
    for num_parts, m in res["multi_rank"].items():
        wall, cpu = m["epoch_time_s"]["median"], m["epoch_cpu_s_all_ranks"]["median"]
        rows.append([str(num_parts), _ms(wall), common.fmt_ratio(wall / p1), _ms(cpu), common.fmt_ratio(cpu / c1),
                     common.fmt_bytes(m["halo_bytes_total"]), common.fmt_bytes(m["halo_bytes_minimum_total"]),
                     f"{m['bytes_ratio']:.4f}", common.fmt_bytes(m["per_rank"][0]["allreduce_bytes"][-1]),
                     common.fmt_bytes(max(pr["peak_rss_bytes"] for pr in m["per_rank"])),
                     common.fmt_bytes(max(pr["data_rss_bytes"] for pr in m["per_rank"])),
                     common.fmt_ratio(m["max_data_rss_ratio"]),
                     common.fmt_bytes(max(pr.get("warm_data_rss_bytes", float("nan")) for pr in m["per_rank"])),
                     common.fmt_ratio(m.get("max_warm_data_rss_ratio", float("nan"))),
                     common.fmt_ratio(m["max_raw_rss_ratio"])])
    L.append(common.markdown_table(
        ["P", "epoch (median)", "vs P=1", "CPU time/epoch, all ranks", "vs P=1", "halo bytes/epoch (all ranks)",
         "minimum", "ratio",
         "all-reduce bytes/rank", "max peak RSS/rank", "max data RSS/rank", "data RSS vs budget",
         "max warm data RSS/rank", "warm data RSS vs budget", "raw RSS vs budget"], rows))
    L.append("")
    L.append("Per rank:")
    L.append("")
    rows = []
    for num_parts, m in res["multi_rank"].items():
        for pr in m["per_rank"]:
            rows.append([f"{num_parts}/{pr['rank']}", f"{pr['num_inner']:,}", f"{pr['num_halo']:,}",
                         f"{pr['num_send']:,}",
                         f"{pr['halo_bytes_per_epoch'][-1]:,}", f"{pr['halo_bytes_minimum']:,}",
                         f"{pr['bytes_ratio']:.4f}", common.fmt_bytes(pr["peak_rss_bytes"]),
                         common.fmt_bytes(pr["baseline_rss_bytes"]), common.fmt_bytes(pr["loaded_rss_bytes"]),
                         common.fmt_bytes(pr["data_rss_bytes"]), common.fmt_bytes(pr["keepalive_bytes"]),
                         common.fmt_bytes(pr["data_rss_budget_bytes"]), common.fmt_ratio(pr["data_rss_ratio"]),
                         common.fmt_bytes(pr.get("warm_rss_bytes", float("nan"))),
                         common.fmt_bytes(pr.get("warm_data_rss_bytes", float("nan"))),
                         common.fmt_bytes(pr.get("warm_data_rss_budget_bytes", float("nan"))),
                         common.fmt_ratio(pr.get("warm_data_rss_ratio", float("nan")))])
    L.append(common.markdown_table(["P/rank", "inner", "halo", "sent rows", "halo bytes/epoch (measured)",
                                    "minimum", "ratio", "peak RSS", "RSS after imports", "RSS after load", "data RSS",
                                    "held by keep_alive at the end",
                                    "data budget", "data vs budget", "RSS warm", "warm data RSS",
                                    "warm data budget", "warm data vs budget"], rows))
    L.append("")
    L.append(_multi_notes(cfg, single, res))
    L.append("")
    return "\n".join(L)


def _why(cfg: BenchConfig, single: dict[str, Any], res: dict[str, Any]) -> str:
    prof = single["profile"]
    g, s = prof[PEER_GNN]["parts_s"], prof[PEER_SPARSE]["parts_s"]
    gw, sw = prof[PEER_GNN]["wall_s"], prof[PEER_SPARSE]["wall_s"]
    drop_g, drop_s = g["dropout forward (hash)"], s["dropout forward (bernoulli)"]
    spmm_g = g["SpMM forward"] + g["SpMM backward"]
    spmm_s = s["SpMM forward"] + s["SpMM backward"]
    k = single["kernels"]
    if PEER_GNN_TORCH in prof:
        t = prof[PEER_GNN_TORCH]["parts_s"]
        torch_note = (f" With `{KERNEL_ENV}=torch` gnn-dist's SpMM is {_ms(t['SpMM forward'])} forward and "
                      f"{_ms(t['SpMM backward'])} backward (torch.sparse CSR, transposed CSR built once).")
    else:
        torch_note = ""
    micro = single["dropout_micro_s"]
    h_def = micro["hash_dropout (default chunk)"]["median"]
    h_w = micro["hash_dropout (what-if chunk)"]["median"]
    ratio = res["one_rank"][PEER_GNN]["vs_pyg_sparse"]
    parts = [
        f"SpMM: gnn-dist ({k} kernels) {_ms(g['SpMM forward'])} forward, {_ms(g['SpMM backward'])} backward "
        f"(the backward multiplies by a transposed CSR built once per block); PyG {_ms(s['SpMM forward'])} "
        f"forward (`torch.sparse.mm`), {_ms(s['SpMM backward'])} backward (its autograd re-transposes the CSR, "
        f"`to_sparse_csr` + sort + index_select, in every backward).{torch_note} SpMM forward + backward is "
        f"{spmm_g / gw:.0%} of gnn-dist's profiled epoch and {spmm_s / sw:.0%} of PyG's."]
    if drop_g > 1.2 * drop_s:
        parts.append(f"What gnn-dist pays extra is its partition-independent hash dropout: {_ms(drop_g)} forward in "
                     f"the epoch against {_ms(drop_s)} for PyG's bernoulli dropout ({drop_g / gw:.0%} of the epoch).")
    else:
        parts.append(f"The hash dropout costs {_ms(drop_g)} forward against {_ms(drop_s)} for PyG's bernoulli "
                     f"dropout ({drop_g / gw:.0%} of the epoch).")
    if h_def > 1.3 * h_w:
        parts.append(
            f"Alone, `hash_dropout` takes {_ms(h_def)} at the default chunk of {single['dropout_chunk_default']:,} "
            f"elements and {_ms(h_w)} at {cfg.whatif_chunk:,} ({h_def / h_w:.1f}x): each chunk's int64 temporaries "
            f"are {single['dropout_chunk_default'] * 8 / 2**20:.0f} MiB, so the ~12 elementwise int64 passes of the "
            f"splitmix hash stream through main memory instead of cache.")
    elif single["dropout_chunk_default"] <= 2 * cfg.whatif_chunk:
        parts.append(f"Alone, `hash_dropout` takes {_ms(h_def)} at the default chunk of "
                     f"{single['dropout_chunk_default']:,} elements ({_ms(h_w)} at {cfg.whatif_chunk:,}), against "
                     f"{_ms(micro['torch F.dropout']['median'])} for `F.dropout`: the default chunk is cache-sized "
                     f"(it was 2**22, whose 32 MiB int64 temporaries made the hash ~5x slower).")
    else:
        parts.append(f"Alone, `hash_dropout` takes {_ms(h_def)} at the default chunk and {_ms(h_w)} at "
                     f"{cfg.whatif_chunk:,} elements: no clear gain from the smaller chunk in this run.")
    if PEER_WHATIF in res["one_rank"]:
        parts.append(f"With the chunk patched the epoch ratio goes from {ratio:.2f}x to "
                     f"{res['one_rank'][PEER_WHATIF]['vs_pyg_sparse']:.2f}x (bit-identical losses: "
                     f"{single['whatif_bit_identical']}).")
    parts.append(f"The extra eval forward is not in the measured step "
                 f"(eval off); with `eval_every=1` it would add {_ms(single['evaluate_s']['median'])} per epoch. "
                 f"(Profiled times are one epoch each, with the profiler's overhead: shares, not exact costs.)")
    return "**Why.** " + " ".join(parts)


def _multi_notes(cfg: BenchConfig, single: dict[str, Any], res: dict[str, Any]) -> str:
    widths = layer_widths(cfg, single["feature_dim"])
    lines = []
    for num_parts, m in res["multi_rank"].items():
        constant = all(pr["bytes_constant"] for pr in m["per_rank"])
        lines.append(f"- P={num_parts}: measured / minimum halo bytes = {m['bytes_ratio']:.4f} "
                     f"(every epoch the same: {constant}); against the formula that counts every layer both ways "
                     f"every epoch, {m['bytes_ratio_vs_every_layer_both_ways']:.2f}. Loss trajectory "
                     f"vs one rank: max |diff| = {m['max_abs_loss_diff_vs_one_rank']:.1e} over "
                     f"{m['loss_epochs_compared']} epochs. Peak-RSS target (data RSS <= 1.1 x (single/P + halo "
                     f"share)): max ratio {m['max_data_rss_ratio']:.2f}x "
                     f"({'met' if m['max_data_rss_ratio'] <= 1 else '**missed**'}); on raw RSS, which "
                     f"includes every process's "
                     f"~{common.fmt_bytes(min(pr['baseline_rss_bytes'] for pr in m['per_rank']))} "
                     f"of interpreter and libraries, {m['max_raw_rss_ratio']:.2f}x; from the warm baseline "
                     f"(below), {m.get('max_warm_data_rss_ratio', float('nan')):.2f}x.")
    lines.append("")
    lines.append(
        "Warm data RSS = peak RSS - RSS once the rank has paid its fixed per-process costs (before it loads its "
        "partition: the aggregation kernels loaded by one tiny SpMM in each form GCN uses, and one `torch.optim` "
        "optimizer built on a dummy parameter, whose first construction imports `torch._dynamo`); its budget is "
        "the same formula on the one-rank run's warm data RSS "
        f"({common.fmt_bytes(res.get('single_warm_data_rss_bytes', float('nan')))}, RSS warm "
        f"{common.fmt_bytes(res.get('single_warm_rss_bytes', float('nan')))}). The plain data RSS counts those "
        "costs in every rank while its budget divides them by P.")
    c1 = res["one_rank"][PEER_GNN]["cpu"]["median"]
    kept = [(p, max(pr["keepalive_bytes"] for pr in m["per_rank"])) for p, m in res["multi_rank"].items()]
    if any(k for _, k in kept):
        lines.append("")
        lines.append(
            "Memory: `gnn_dist/distributed/keepalive.py` keeps the last 8 collective buffers referenced (against a "
            "gloo crash at interpreter exit); for the halo exchange these are the temporaries it hands to gloo "
            "(send and receive buffers of `[rows, width]`), so the largest of the last epoch's buffers stay "
            "resident after use: "
            + ", ".join(f"P={p} {common.fmt_bytes(k)} per rank at the end of training" for p, k in kept)
            + ", against a gap between data RSS and budget (worst rank) of "
            + ", ".join(f"P={p} " + common.fmt_bytes(max(pr["data_rss_bytes"] - pr["data_rss_budget_bytes"]
                                                          for pr in m["per_rank"]))
                        for p, m in res["multi_rank"].items()) + ".")
    lines.append("")
    lines.append(
        "Wall time at P ranks depends on how much of the cores the P processes win against the other jobs on "
        "the machine (more processes, a bigger share), so the CPU-time column is the measure of the framework's "
        "overhead: CPU seconds per epoch summed over ranks are "
        + ", ".join(f"{m['epoch_cpu_s_all_ranks']['median'] / c1:.2f}x the one-rank run's at P={p}"
                    for p, m in res["multi_rank"].items())
        + " (more rows per rank than inner rows: each rank applies `lin` to its halo rows too, and the halo "
          "exchange copies, sends and scatters rows).")
    lines.append("")
    m0 = next(iter(res["multi_rank"].values()), None)
    if m0 is not None and len(widths) > 1:
        lines.append(
            f"The minimum is the minimum of the present schedule: the first layer's halo input rows cross "
            f"once at start (the static halo cache), every later layer exchanges its input every epoch. "
            f"One more change would cut it: layer 2 moves {widths[1]}-wide rows where the "
            f"{single['num_classes']}-wide output of its linear map on the inner rows would do (GCN's linear "
            f"map commutes with the aggregation). With it: "
            + ", ".join(f"P={p} {common.fmt_bytes(m['halo_bytes_static_features_narrow_total'])} instead of "
                        f"{common.fmt_bytes(m['halo_bytes_minimum_total'])} per epoch "
                        f"({m['halo_bytes_minimum_total'] / max(1, m['halo_bytes_static_features_narrow_total']):.0f}x)"
                        for p, m in res["multi_rank"].items()) + ".")
        lines.append("")
    lines.append(
        f"Minimum bytes per epoch and rank = 4 B x (rows sent x ({' + '.join(map(str, widths[1:]))}) forward + halo "
        f"rows x ({' + '.join(map(str, widths[1:]))}) backward): the first layer's input (the node features) is "
        f"static, so its halo rows cross once at start, not per epoch. Rows sent come from each part's `send_offsets`, halo "
        f"rows from `partition.json`; the exchanger's `bytes_sent` counter is the measured side. "
        f"The halo share of the memory budget is single-rank data RSS x num_halo / num_nodes, so the budget is "
        f"1.1 x single-rank data RSS x (inner + halo rows) / num_nodes: memory proportional to local rows. "
        f"One rank alone: RSS after imports {common.fmt_bytes(res['single_baseline_rss_bytes'])}, after loading "
        f"the partition and building the trainer {common.fmt_bytes(res['single_loaded_rss_bytes'])}, peak "
        f"{common.fmt_bytes(res['single_peak_rss_bytes'])}.")
    return "\n".join(lines)


# ============================================================================ main
def parse_args(argv: list[str] | None = None) -> tuple[BenchConfig, Path | None]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="sbm-small, 1 warm-up + 3 epochs, 1 round, no PyG peak-RSS runs (< 1 min)")
    d = BenchConfig()
    ap.add_argument("--dataset", default=None, help=f"catalog dataset (default {d.dataset}; sbm-small with --quick)")
    ap.add_argument("--hidden", type=int, default=d.hidden)
    ap.add_argument("--dropout", type=float, default=d.dropout)
    ap.add_argument("--lr", type=float, default=d.lr)
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--threads", type=int, default=d.threads, help="torch threads in every process")
    ap.add_argument("--warmup", type=int, default=None, help=f"warm-up epochs (default {d.warmup})")
    ap.add_argument("--epochs", type=int, default=None, help=f"measured epochs (default {d.epochs}; 3 with --quick)")
    ap.add_argument("--edge-index-epochs", type=int, default=None,
                    help=f"measured epochs of PyG on edge_index (default {d.edge_index_epochs}; 0 skips)")
    ap.add_argument("--rounds", type=int, default=None, help=f"runs per P (default {d.rounds}; 1 with --quick)")
    ap.add_argument("--parts", type=int, nargs="+", default=list(d.parts))
    ap.add_argument("--kernels", choices=("auto", "torch", "numba"), default=d.kernels,
                    help=f"{KERNEL_ENV} of every gnn-dist run")
    ap.add_argument("--no-torch-kernels", action="store_true",
                    help=f"do not also time gnn-dist with {KERNEL_ENV}=torch at one rank")
    ap.add_argument("--epoch-timeout", type=float, default=d.epoch_timeout_s,
                    help="seconds after which an epoch counts as hung (stacks dumped, run failed)")
    ap.add_argument("--no-profile", action="store_true", help="skip the profiler breakdown")
    ap.add_argument("--no-pyg-memory", action="store_true", help="skip the PyG peers' peak-RSS runs")
    ap.add_argument("--cache-dir", default=d.cache_dir)
    ap.add_argument("--timeout", type=float, default=None, help="seconds per spawned run")
    ap.add_argument("--render", type=Path, default=None, metavar="JSON",
                    help="only rewrite the Markdown report of an earlier run's JSON (no measuring)")
    ap.add_argument("--out", type=Path, default=None,
                    help="result path without extension (default benchmarks/results/train_<hw>_<date>[_quick])")
    a = ap.parse_args(argv)
    quick = a.quick

    def pick(value: Any, normal: Any, fast: Any) -> Any:
        return value if value is not None else (fast if quick else normal)

    cfg = BenchConfig(dataset=pick(a.dataset, d.dataset, "sbm-small"), hidden=a.hidden, dropout=a.dropout, lr=a.lr,
                      seed=a.seed, threads=a.threads, warmup=pick(a.warmup, d.warmup, 1),
                      epochs=pick(a.epochs, d.epochs, 3), edge_index_epochs=pick(a.edge_index_epochs,
                                                                                 d.edge_index_epochs, 3),
                      rounds=pick(a.rounds, d.rounds, 1), parts=tuple(a.parts), profile=not a.no_profile,
                      memory_pyg=not (a.no_pyg_memory or quick), kernels=a.kernels,
                      compare_torch_kernels=not a.no_torch_kernels, epoch_timeout_s=a.epoch_timeout,
                      cache_dir=a.cache_dir, timeout_s=pick(a.timeout, d.timeout_s, 240.0))
    out = a.out if a.out is not None else common.default_result_stem("train", "_quick" if quick else "")
    if a.render is not None:
        return _config_from_json(a.render), a.render
    return cfg, out


def _config_from_json(path: Path) -> BenchConfig:
    import json

    raw = json.loads(Path(path).read_text())["config"]
    raw["parts"] = tuple(raw["parts"])
    return BenchConfig(**raw)


def render_from_json(path: Path) -> Path:
    """Rewrite ``path``'s Markdown report from its raw numbers (the partitions must still be cached)."""
    import json

    payload = json.loads(Path(path).read_text())
    cfg = _config_from_json(path)
    prepare_partitions(cfg)
    dist_runs = {int(p): runs for p, runs in payload["multi_rank_raw"].items()}
    res = analyse(cfg, payload["one_rank_raw"], payload["memory_raw"], dist_runs)
    md = render_markdown(cfg, payload["environment"], payload["one_rank_raw"], payload["memory_raw"], res,
                         payload["wall_s"], payload.get("command", "python benchmarks/train.py"))
    return common.write_text_atomic(Path(path).with_suffix(".md"), md)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    cfg, out = parse_args(argv)
    if out is not None and out.suffix == ".json":
        log.info("rewrote %s", render_from_json(out))
        return 0
    t_start = time.perf_counter()
    # the spawned processes inherit os.environ: give them what the launchers give a rank
    os.environ.setdefault(THP_ENV, "1")
    cfg.thp_mem_alloc_enable = os.environ[THP_ENV]
    env = common.environment(["torch", "torch_geometric", "numpy", "scipy", "numba", "pymetis", "gnn_dist"])
    env["source_sha256"] = {name: common.source_digest(_ROOT / name) for name in ("gnn_dist", "partitioners")}
    prepare_partitions(cfg)
    job_cfg = asdict(cfg)

    log.info("one rank: %s, %d + %d epochs per peer, interleaved", cfg.dataset, cfg.warmup, cfg.epochs)
    single = run_ranks(single_rank_job, 1, job_cfg, timeout=cfg.timeout_s, init_group=False)[0]
    memory: dict[str, dict[str, Any]] = {}
    mem_peers = (PEER_GNN,)
    if cfg.memory_pyg:
        mem_peers += (PEER_SPARSE,) + ((PEER_EDGE_INDEX,) if cfg.edge_index_epochs else ())
    for peer in mem_peers:
        log.info("peak RSS: %s alone", peer)
        memory[peer] = run_ranks(memory_job, 1, job_cfg, peer, timeout=cfg.timeout_s, init_group=False)[0]
    dist_runs: dict[int, list[list[dict[str, Any]]]] = {p: [] for p in cfg.parts}
    for r in range(cfg.rounds):
        for num_parts in cfg.parts:
            log.info("P=%d, round %d/%d", num_parts, r + 1, cfg.rounds)
            dist_runs[num_parts].append(run_ranks(dist_rank_job, num_parts, job_cfg, timeout=cfg.timeout_s))

    res = analyse(cfg, single, memory, dist_runs)
    wall = time.perf_counter() - t_start
    command = ("python benchmarks/train.py " + " ".join(sys.argv[1:] if argv is None else argv)).strip()
    payload = {"config": {k: v for k, v in asdict(cfg).items() if k != "paths"}, "environment": env,
               "command": command, "wall_s": wall, "one_rank_raw": single, "memory_raw": memory,
               "multi_rank_raw": {str(p): runs for p, runs in dist_runs.items()}, "results": res}
    md = render_markdown(cfg, env, single, memory, res, wall, command)
    json_path, md_path = common.write_results(out, payload, md)
    one = res["one_rank"]
    log.info("one rank: gnn-dist %.3f s, PyG sparse %.3f s (%.2fx; target <= %.1fx)", one[PEER_GNN]["median"],
             one[PEER_SPARSE]["median"], one[PEER_GNN]["vs_pyg_sparse"], TARGET_ONE_RANK)
    for num_parts, m in res["multi_rank"].items():
        log.info("P=%d: epoch %.3f s, bytes ratio %.4f, data RSS vs budget %.2fx (warm %.2fx)", num_parts,
                 m["epoch_time_s"]["median"], m["bytes_ratio"], m["max_data_rss_ratio"], m["max_warm_data_rss_ratio"])
    log.info("wrote %s and %s in %.0f s", md_path, json_path, wall)
    return 0


if __name__ == "__main__":
    sys.exit(main())
