"""Feature cache benchmark (issue 5): hit rates by policy and budget, the first layer's
host-to-device bytes and time, memory, and the static halo cache's exchange bytes.

For each dataset (default ``rmat-medium`` and ``rmat-large``; METIS partitions into P = 2 parts,
cached like the other benchmarks') a 2-layer GCN (hidden 128) is trained on P gloo ranks in each
of these runs (one launch of the ranks per run, so each rank's peak RSS is its run's, then one
launch that times the first layer of every run; ``--quick``: all in one launch):

- ``device, whole``: ``feature_storage="device"``, unchunked first layer (the baseline);
- ``device, no static halo``: the same with ``static_halo=False`` (layer 0 exchanges every epoch);
- ``host, chunked, no cache``: ``feature_storage="host"``, budget 0, chunked first layer;
- ``host, chunked, degree``: the same with a budget (default 25%) and the policy ``degree``;
- ``host, chunked, frequency``: the same with ``frequency``; its ranks also count the accesses.

The chunked runs use one chunk size per part, the same for every policy and budget:
``first_layer_chunk_rows = chunk_frac x S`` (``S`` = the part's inner + halo rows, default 5%), a
bound on each chunk's destinations + in-edges and so on its source rows.

What it reports:

1. **Hit rate against budget** (5/10/25/50% of the part's ``S`` rows' bytes, the store's budget
   convention) for the policies ``degree``, ``halo``, ``frequency``, ``none``, an offline
   **oracle**, and "inner rows first" (``degree`` without hotness: its rule before it ranked inner
   and halo rows together), on every part. The accesses are those of the chunked first layer in one training
   epoch (forward + the backward recomputation), counted by the ``frequency`` run's
   ``FeatureStore`` (``access_counts`` after its first epoch). Each policy's store is then built
   for each budget (``FeatureStore.from_policy``; ``frequency`` is re-ranked by the run's own
   post-epoch order, the oracle by ``rerank(oracle_order(counts))``) and its hits in an epoch
   after the first are ``counts[tier rows].sum()``: a static tier serves the same rows every epoch,
   so this is the store's hit count, without replaying the gathers. The training runs check it:
   their store counters (``feature_hits``/``feature_misses`` of every epoch after the first) must
   equal these predictions exactly for ``degree`` and ``frequency`` at the run budget and for
   budget 0.
2. **Layer-0 time and host-to-device bytes** per epoch: the bytes are the Trainer's
   ``feature_h2d_bytes`` (median over the measured epochs); the time is the first layer alone,
   forward + backward (with the chunks' recomputation), timed after the training runs on each rank
   with the runs interleaved (median over ``layer0_reps`` passes; the passes must copy exactly the
   bytes of a training epoch), next to the training runs' epoch time.
3. **Memory**: each rank's peak RSS during the run (``VmHWM``, reset at the run's start with
   ``/proc/self/clear_refs``; on CPU the "device" tier is a tensor in RAM) and, separately, what
   device memory the first layer's input needs: the device tier's bytes plus the largest chunk's
   source rows (for ``device, whole``: every row); next to it, the bytes of the chunk plans (the
   chunks' sub-blocks and row lists, which ``InputFeatures`` keeps on the part's device).
4. **Halo exchange bytes** per epoch with and without the static halo cache: the difference must
   equal exactly layer 0's share of the run without it (``bytes_per_layer[0]``).

Targets (issue 5): ``degree`` >= 95% of the oracle's hit rate at every budget; with a 25% budget,
layer-0 host-to-device bytes <= 0.5x the uncached run's; exchange bytes lower by exactly the
layer-0 share.

Usage (from the repository root)::

    python benchmarks/cache.py             # rmat-medium and rmat-large, P = 2 (~10 min on 2 cores)
    python benchmarks/cache.py --quick     # rmat-small, P = 2, 1 measured epoch (< 1 min)
    python benchmarks/cache.py --datasets rmat-medium --parts 4 --chunk-frac 0.02

Results: ``benchmarks/results/cache_[hardware]_[date][_quick].{md,json}``.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
_ROOT = _HERE.parent

import common  # noqa: E402
from mp_utils import run_ranks  # noqa: E402

log = logging.getLogger("benchmarks.cache")

INNER_FIRST = "inner rows first"
POLICY_NAMES = ("degree", "halo", "frequency", "none", "oracle", INNER_FIRST)
"""Rows of the hit-rate table: the built-in policies, the offline oracle, and ``degree``'s rule when
it has no hotness (every inner row in stored order, then the halo rows by local reads: the rule
``degree`` had before it ranked inner and halo rows together)."""
RUN_DEVICE = "device, whole"
RUN_NO_STATIC = "device, no static halo"
RUN_UNCACHED = "host, chunked, no cache"
RUN_DEGREE = "host, chunked, degree"
RUN_FREQUENCY = "host, chunked, frequency"
RUNS = (RUN_DEVICE, RUN_NO_STATIC, RUN_UNCACHED, RUN_DEGREE, RUN_FREQUENCY)
TARGET_ORACLE_SHARE = 0.95
"""``degree``'s hit rate must be at least this share of the oracle's, at every budget."""
TARGET_H2D_RATIO = 0.5
"""Layer-0 host-to-device bytes with the cache at most this share of the uncached run's."""


@dataclass(kw_only=True, slots=True)
class BenchConfig:
    datasets: tuple[str, ...] = ("rmat-medium", "rmat-large")
    """Catalog datasets."""
    parts: int = 2
    """P: ranks and parts."""
    hidden: int = 128
    """Hidden width of the GCN."""
    num_layers: int = 2
    """GCN layers."""
    dropout: float = 0.5
    """Feature dropout after the hidden layer."""
    lr: float = 0.01
    """Adam learning rate."""
    warmup: int = 1
    """Epochs before measuring (``frequency`` counts and re-ranks in the first)."""
    epochs: int = 2
    """Measured epochs per run."""
    layer0_reps: int = 3
    """Timed forward + backward passes of the first layer alone per run, after training."""
    storage: str = "host"
    """``feature_storage`` of the chunked runs (``host`` or ``mmap``)."""
    cache_budget: float = 0.25
    """Device-tier budget of the cached runs, a fraction of the part's rows' bytes."""
    budgets: tuple[float, ...] = (0.05, 0.10, 0.25, 0.50)
    """Budgets of the hit-rate table (fractions of the part's rows' bytes)."""
    chunk_frac: float = 0.05
    """Chunk bound of the chunked runs, a fraction of the part's source rows S."""
    threads: int = 1
    """``torch.set_num_threads`` per rank."""
    kernels: str = "auto"
    """``GNN_DIST_KERNELS`` of the ranks (``auto``, ``torch``, ``numba``)."""
    seed: int = 0
    """Dataset, partition and weight seed."""
    cache_dir: str = str(_HERE / ".cache")
    """Partition folders are kept here between runs."""
    timeout_s: float = 1500.0
    """Limit of each launch."""
    one_launch: bool = False
    """Run every run of a dataset in one launch (faster start; a run's peak RSS then includes what
    the earlier runs left in the process). Otherwise one launch per run plus one for the timing."""
    paths: dict[str, str] = field(default_factory=dict)
    """Dataset -> partition folder."""

    def __post_init__(self) -> None:
        if self.parts < 2:
            raise ValueError(f"--parts must be >= 2 (the static halo needs peers), got {self.parts}")
        if self.storage not in ("host", "mmap"):
            raise ValueError(f"--storage must be host or mmap, got {self.storage!r}")
        for name in ("epochs", "layer0_reps"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        if self.warmup < 1:
            raise ValueError(f"--warmup must be >= 1 (frequency re-ranks after the first epoch), got {self.warmup}")
        if not 0 < self.chunk_frac <= 1 or not 0 <= self.cache_budget <= 1:
            raise ValueError(f"--chunk-frac must be in (0, 1] and the cache budget in [0, 1], got "
                             f"{self.chunk_frac} and {self.cache_budget}")


def run_options(cfg: dict[str, Any], run: str, chunk_rows: int) -> dict[str, Any]:
    """``InputFeatures`` keyword arguments of ``run`` for a part whose chunk bound is ``chunk_rows``."""
    chunked = {"storage": cfg["storage"], "first_layer_chunk_rows": chunk_rows}
    return {
        RUN_DEVICE: {"storage": "device", "first_layer_chunk_rows": 0},
        RUN_NO_STATIC: {"storage": "device", "first_layer_chunk_rows": 0, "static_halo": False},
        RUN_UNCACHED: {**chunked, "cache_budget": 0},
        RUN_DEGREE: {**chunked, "cache_budget": cfg["cache_budget"], "cache_policy": "degree"},
        RUN_FREQUENCY: {**chunked, "cache_budget": cfg["cache_budget"], "cache_policy": "frequency"},
    }[run]


def trainer_options(options: dict[str, Any]) -> dict[str, Any]:
    """:func:`run_options` as ``Trainer`` keyword arguments (``storage`` -> ``feature_storage``, ...)."""
    renamed = {"storage": "feature_storage", "cache_budget": "feature_cache_budget",
               "cache_policy": "feature_cache_policy"}
    return {renamed.get(k, k): v for k, v in options.items()}


# ============================================================================ in the spawned ranks
def reset_peak_rss() -> bool:
    """Reset this process's peak RSS to its current RSS (Linux ``clear_refs``); False if it cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_since_reset() -> int:
    """Peak RSS in bytes since :func:`reset_peak_rss` (``VmHWM``), else since the process started."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return common.peak_rss_bytes()


def rank_job(rank: int, world_size: int, cfg: dict[str, Any], dataset: str, runs: list[str],
             time_layers: bool) -> dict[str, Any]:
    """On this rank's part: each of ``runs`` trained, one after the other (``warmup + epochs``
    epochs, no evaluation; the peak RSS measured from the run's start; the frequency run also
    computes the hit-rate table); then, when ``time_layers``, the first layer alone of every run of
    :data:`RUNS`, timed interleaved. Returns ``{"train": {run: ...}, "layer0": {run: ...}}``."""
    import gc
    import os

    os.environ["GNN_DIST_KERNELS"] = cfg["kernels"]
    import torch

    torch.set_num_threads(int(cfg["threads"]))
    logging.basicConfig(level=logging.WARNING)
    import gnn_dist

    part = gnn_dist.load_partition(cfg["paths"][dataset], verify=False)  # no checksum pass: it pages in every file
    chunk_rows = max(1, int(cfg["chunk_frac"] * (part.num_inner + part.num_halo)))
    out: dict[str, Any] = {}
    for run in runs:
        gc.collect()
        rss_start = common.current_rss_bytes()
        per_run_peak = reset_peak_rss()
        trainer = gnn_dist.Trainer(build_gcn(cfg, part), part, lr=cfg["lr"], eval_every=0, log_every=0,
                                   **trainer_options(run_options(cfg, run, chunk_rows)))
        t0 = time.perf_counter()
        hist = trainer.fit(cfg["warmup"] + cfg["epochs"])
        fit_s = time.perf_counter() - t0
        peak_rss = peak_rss_since_reset()
        inputs = trainer.inputs
        store = inputs.store
        plan = inputs._plan(None)  # the chunks the first layer runs (one when unchunked)
        chunk_src = [int(src.numel()) for _, src, _ in plan]
        out[run] = {
            "rank": rank, "num_inner": part.num_inner, "num_halo": part.num_halo,
            "num_edges": int(part.block.indices.numel()), "chunk_rows": chunk_rows if len(plan) > 1 else 0,
            "num_chunks": len(plan), "chunk_src_rows_mean": statistics.fmean(chunk_src),
            "chunk_src_rows_max": max(chunk_src), "store": store.stats(),
            "static_halo_bytes": inputs.static_halo_bytes, "history": hist[cfg["warmup"]:], "first_epoch": hist[0],
            "fit_s": fit_s, "rss_start": rss_start, "peak_rss": peak_rss, "peak_rss_per_run": per_run_peak,
            "device_bytes": store.cached_bytes + (max(chunk_src) * store.row_bytes
                                                  if store.cached_rows < store.num_rows else 0),
            "plan_bytes": tensor_bytes(plan) if len(plan) > 1 else 0, "block_bytes": tensor_bytes(part.block),
        }
        if run == RUN_FREQUENCY:
            out[run]["hit_rates"] = hit_rate_table(trainer, cfg["budgets"])
        del trainer, inputs, store, plan
    gc.collect()
    return {"train": out, "layer0": time_first_layers(cfg, part, chunk_rows) if time_layers else {}}


def tensor_bytes(obj: Any) -> int:
    """Bytes of the distinct tensor storages reachable from ``obj`` through lists, tuples, dicts
    and object attributes (a :class:`~gnn_dist.nn.Block` with the caches its layers filled): what
    keeping ``obj`` costs on its device."""
    import torch

    seen: set[int] = set()
    stack, visited = [obj], set()
    total = 0
    while stack:
        o = stack.pop()
        if isinstance(o, torch.Tensor):
            storage = o.untyped_storage()
            if storage.data_ptr() not in seen:
                seen.add(storage.data_ptr())
                total += storage.nbytes()
        elif isinstance(o, (list, tuple)):
            stack.extend(o)
        elif isinstance(o, dict):
            stack.extend(o.values())
        elif hasattr(o, "__dict__") and id(o) not in visited:
            visited.add(id(o))
            stack.extend(vars(o).values())
    return total


def build_gcn(cfg: dict[str, Any], part: Any) -> Any:
    """The benchmark's GCN, initialised from ``cfg["seed"]`` (the same weights every time)."""
    import torch

    from gnn_dist.models import build_model

    torch.manual_seed(cfg["seed"])
    return build_model("gcn", in_dim=part.feature_dim, hidden_dim=cfg["hidden"], out_dim=part.num_classes,
                       num_layers=cfg["num_layers"], dropout=cfg["dropout"], seed=cfg["seed"])


def time_first_layers(cfg: dict[str, Any], part: Any, chunk_rows: int) -> dict[str, dict[str, Any]]:
    """The first layer alone, as a training step runs it, for every run: forward, then backward
    from a fixed output gradient (recomputing each chunk). One untimed pass each (after which a
    counting policy re-ranks, as after a training epoch), then ``layer0_reps`` timed passes,
    interleaved across the runs (A B C ... A B C ...) so background load hits them alike. Every rank
    runs the same sequence (the ``static_halo=False`` run's exchange is a collective) and the ranks
    meet in a barrier (not timed) before each pass.

    Returns per run the median forward, backward and total seconds, and the store's host-to-device
    bytes of each pass."""
    import torch
    import torch.distributed as dist

    from gnn_dist.cache import InputFeatures

    model = build_gcn(cfg, part)
    model.train()
    conv = model.convs[0]
    inputs = {run: InputFeatures(part, **run_options(cfg, run, chunk_rows)) for run in RUNS}
    grad: list[torch.Tensor] = []
    times: dict[str, list[tuple[float, float]]] = {run: [] for run in RUNS}
    h2d: dict[str, list[int]] = {run: [] for run in RUNS}

    def runner(run: str) -> Any:
        def one_pass() -> float:
            feats = inputs[run]
            conv.zero_grad(set_to_none=True)
            before = feats.store.h2d_bytes
            dist.barrier()  # the ranks start together: an exchange does not wait for a peer's previous run
            t0 = time.perf_counter()
            h = feats.layer(conv, part)
            t1 = time.perf_counter()
            if not grad:
                grad.append(torch.randn(h.shape, generator=torch.Generator().manual_seed(0), dtype=h.dtype))
            h.backward(grad[0])
            t2 = time.perf_counter()
            times[run].append((t1 - t0, t2 - t1))
            h2d[run].append(feats.store.h2d_bytes - before)
            return t2 - t0
        return one_pass

    runners = {run: runner(run) for run in RUNS}
    for run in RUNS:  # the untimed pass, then the re-ranking a training epoch ends with
        runners[run]()
        inputs[run].end_epoch()
    for run in RUNS:
        times[run].clear()
        h2d[run].clear()
    common.interleave(runners, cfg["layer0_reps"])
    return {run: {"forward_s": statistics.median(f for f, _ in times[run]),
                  "backward_s": statistics.median(b for _, b in times[run]),
                  "total_s": statistics.median(f + b for f, b in times[run]), "h2d_bytes": h2d[run]}
            for run in RUNS}


def hit_rate_table(trainer: Any, budgets: list[float]) -> dict[str, Any]:
    """Per policy and budget, the hits of an epoch after the first, from the frequency run's counts.

    ``counts`` are the accesses of the first training epoch (forward + recomputation), as the
    frequency store counted them; the chunk plan is fixed, so every epoch repeats them. A policy's
    store (built for the budget over the same rows) holds a static tier, whose hits per epoch are
    the tier rows' counts.
    """
    import numpy as np

    from gnn_dist.cache import POLICIES, FeatureStore, RowInfo, oracle_order

    inputs, part = trainer.inputs, trainer.part
    store = inputs.store
    counts = store.access_counts.copy()
    frequency_order = store.order  # the run's own re-ranking after its first epoch
    send = part.exchanger.send_index.cpu().numpy()
    block = part.block
    info = RowInfo(num_inner=part.num_inner, num_halo=part.num_halo, hotness=part.hotness,
                   fan_out=np.bincount(send, minlength=part.num_inner),
                   local_reads=np.bincount(block.indices.cpu().numpy(),
                                           minlength=block.num_src)[:store.num_rows])
    inner_first = RowInfo(num_inner=info.num_inner, num_halo=info.num_halo, local_reads=info.local_reads)
    rows = inputs.source_rows()  # [S, F]: the store's rows, inner then halo
    total = int(counts.sum())
    table: dict[str, dict[str, Any]] = {name: {} for name in POLICY_NAMES}
    for budget in budgets:
        for name in POLICY_NAMES:
            policy = name if name in POLICIES else "degree"
            st = FeatureStore.from_policy([rows], policy, inner_first if name == INNER_FIRST else info,
                                          budget=float(budget), storage="mmap")
            if name == "oracle":
                st.rerank(oracle_order(counts))
            elif name == "frequency":
                st.rerank(frequency_order)
            hits = int(counts[st.order[:st.cached_rows]].sum())
            table[name][f"{budget:g}"] = {"hits": hits, "misses": total - hits, "hit_rate": hits / total if total else
                                          float("nan"), "cached_rows": st.cached_rows,
                                          "prefix_cached": st.prefix_cached}
            del st
    return {"accesses_per_epoch": total, "rows": int(store.num_rows), "rows_read_at_least_once": int((counts > 0).sum()),
            "max_count": int(counts.max()) if counts.size else 0, "policies": table}


# ============================================================================ in the parent
def prepare_partitions(cfg: BenchConfig) -> None:
    """METIS partitions of every dataset into ``cfg.parts`` parts (reused when on disk)."""
    for ds in cfg.datasets:
        cfg.paths[ds] = common.cached_metis_partitions(ds, (cfg.parts,), cfg.seed, cfg.cache_dir)[cfg.parts]


def _median(hist: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(float(h[key]) for h in hist))


def summarize_run(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-rank medians over the measured epochs, and the busiest rank's epoch time per epoch."""
    per_rank = []
    for r in ranks:
        h = r["history"]
        per_rank.append({
            "rank": r["rank"], "epoch_time_s": _median(h, "epoch_time_s"), "halo_bytes": _median(h, "halo_bytes"),
            "bytes_per_layer": h[-1]["bytes_per_layer"], "feature_hits": [x["feature_hits"] for x in h],
            "feature_misses": [x["feature_misses"] for x in h], "feature_h2d_bytes": _median(h, "feature_h2d_bytes"),
            "feature_hit_rate": _median(h, "feature_hit_rate") if h[0]["feature_hits"] + h[0]["feature_misses"]
            else float("nan"),
            "layer0_s": r["layer0"]["total_s"], "layer0_forward_s": r["layer0"]["forward_s"],
            "layer0_backward_s": r["layer0"]["backward_s"], "layer0_h2d_bytes": r["layer0"]["h2d_bytes"],
            "peak_rss": r["peak_rss"], "rss_start": r["rss_start"], "peak_rss_per_run": r["peak_rss_per_run"],
            "device_bytes": r["device_bytes"], "plan_bytes": r["plan_bytes"], "block_bytes": r["block_bytes"],
            "cached_bytes": r["store"]["cached_bytes"], "cached_rows": r["store"]["cached_rows"],
            "num_rows": r["store"]["num_rows"], "row_bytes": r["store"]["row_bytes"],
            "prefix_cached": r["store"]["prefix_cached"], "num_chunks": r["num_chunks"],
            "chunk_rows": r["chunk_rows"], "chunk_src_rows_mean": r["chunk_src_rows_mean"],
            "chunk_src_rows_max": r["chunk_src_rows_max"], "static_halo_bytes": r["static_halo_bytes"],
            "num_inner": r["num_inner"], "num_halo": r["num_halo"], "num_edges": r["num_edges"],
        })
    epochs = len(ranks[0]["history"])
    busiest = [max(float(r["history"][e]["epoch_time_s"]) for r in ranks) for e in range(epochs)]
    return {"ranks": per_rank, "epoch_time_s": statistics.median(busiest),
            "h2d_bytes_total": sum(p["feature_h2d_bytes"] for p in per_rank),
            "halo_bytes_total": sum(p["halo_bytes"] for p in per_rank)}


def check_consistency(runs: dict[str, Any], tables: list[dict[str, Any]], cache_budget: float) -> list[str]:
    """Where the training runs' store counters disagree with the hit-rate table's predictions
    (an empty list: they agree exactly)."""
    key = f"{cache_budget:g}"
    problems = []
    for rank, table in enumerate(tables):
        total = table["accesses_per_epoch"]
        expected = {RUN_DEGREE: table["policies"]["degree"][key]["hits"],
                    RUN_FREQUENCY: table["policies"]["frequency"][key]["hits"], RUN_UNCACHED: 0}
        for run, hits in expected.items():
            got = runs[run]["ranks"][rank]
            for h, m in zip(got["feature_hits"], got["feature_misses"]):
                if (h, m) != (hits, total - hits):
                    problems.append(f"{run}, rank {rank}: store counted {h} hits + {m} misses, "
                                    f"the table predicts {hits} + {total - hits}")
        for run in (RUN_DEGREE, RUN_FREQUENCY, RUN_UNCACHED):
            got = runs[run]["ranks"][rank]
            if any(x != got["feature_h2d_bytes"] for x in got["layer0_h2d_bytes"]):
                problems.append(f"{run}, rank {rank}: the first layer alone copied {got['layer0_h2d_bytes']} bytes, "
                                f"a training epoch {got['feature_h2d_bytes']}")
    return problems


def check_targets(runs: dict[str, Any], tables: list[dict[str, Any]], budgets: tuple[float, ...]) -> dict[str, Any]:
    """The three targets, per rank and over all ranks."""
    share = {}
    for rank, table in enumerate(tables):
        pol = table["policies"]
        share[rank] = {f"{b:g}": (pol["degree"][f"{b:g}"]["hits"] / pol["oracle"][f"{b:g}"]["hits"]
                                  if pol["oracle"][f"{b:g}"]["hits"] else 1.0) for b in budgets}
    worst = min(v for s in share.values() for v in s.values())
    cached, uncached = runs[RUN_DEGREE], runs[RUN_UNCACHED]
    h2d_rank = [c["feature_h2d_bytes"] / u["feature_h2d_bytes"] if u["feature_h2d_bytes"] else float("nan")
                for c, u in zip(cached["ranks"], uncached["ranks"])]
    h2d_total = cached["h2d_bytes_total"] / uncached["h2d_bytes_total"] if uncached["h2d_bytes_total"] else float("nan")
    static, dynamic = runs[RUN_DEVICE], runs[RUN_NO_STATIC]
    halo = []
    for s, d in zip(static["ranks"], dynamic["ranks"]):
        halo.append({"with_static": s["halo_bytes"], "without_static": d["halo_bytes"],
                     "layer0_share": d["bytes_per_layer"][0], "drop": d["halo_bytes"] - s["halo_bytes"],
                     "static_layer0": s["bytes_per_layer"][0], "static_halo_bytes_once": s["static_halo_bytes"]})
    halo_ok = all(h["drop"] == h["layer0_share"] and h["static_layer0"] == 0 for h in halo)
    return {"degree_vs_oracle": share, "degree_vs_oracle_worst": worst,
            "degree_vs_oracle_ok": worst >= TARGET_ORACLE_SHARE,
            "h2d_ratio_per_rank": h2d_rank, "h2d_ratio_total": h2d_total,
            "h2d_ok_per_rank": [r <= TARGET_H2D_RATIO for r in h2d_rank], "h2d_ok_total": h2d_total <= TARGET_H2D_RATIO,
            "halo": halo, "halo_ok": halo_ok}


def run_dataset(cfg: BenchConfig, dataset: str) -> dict[str, Any]:
    """Every run of ``dataset``: a launch of P ranks per run plus one for the layer-0 timing
    (``cfg.one_launch``: all in one launch)."""
    t0 = time.perf_counter()
    launches = [(list(RUNS), True)] if cfg.one_launch else [([run], False) for run in RUNS] + [([], True)]
    res: list[dict[str, Any]] = [{} for _ in range(cfg.parts)]
    for runs_here, time_layers in launches:
        for rank, r in enumerate(run_ranks(rank_job, cfg.parts, asdict(cfg), dataset, runs_here, time_layers,
                                           timeout=cfg.timeout_s)):
            for run, train in r["train"].items():
                res[rank][run] = train
            for run, layer0 in r["layer0"].items():
                res[rank].setdefault(run, {})["layer0"] = layer0
    runs: dict[str, Any] = {}
    for run in RUNS:
        runs[run] = summarize_run([r[run] for r in res])
        log.info("%s / %s: epoch %.2f s, layer 0 %.2f s, h2d %s", dataset, run, runs[run]["epoch_time_s"],
                 max(r["layer0_s"] for r in runs[run]["ranks"]), common.fmt_bytes(runs[run]["h2d_bytes_total"]))
    tables = [r[RUN_FREQUENCY]["hit_rates"] for r in res]
    return {"runs": runs, "hit_rates": tables, "launch_s": time.perf_counter() - t0,
            "consistency": check_consistency(runs, tables, cfg.cache_budget),
            "targets": check_targets(runs, tables, cfg.budgets)}


# ============================================================================ report
def _pct(x: float) -> str:
    return "-" if x != x else f"{100 * x:.1f}%"


def _ms(x: float) -> str:
    return f"{x * 1e3:.0f}"


def _met(ok: bool) -> str:
    return "met" if ok else "**missed**"


def render(cfg: BenchConfig, env: dict[str, Any], results: dict[str, Any], quick: bool, wall_s: float) -> str:
    budget = f"{cfg.cache_budget:.0%}"
    L = [f"# Feature cache ({', '.join(results)}, P = {cfg.parts})", ""]
    L.append(f"Generated by `python benchmarks/cache.py{' --quick' if quick else ''}` on {env['date']} "
             f"in {wall_s / 60:.1f} min (git {env.get('git_revision')}).")
    L.append("")
    L.append(f"- Model: GCN, {cfg.num_layers} layers, hidden {cfg.hidden}, dropout {cfg.dropout}, Adam lr {cfg.lr}; "
             f"METIS partitions (seed {cfg.seed}), P = {cfg.parts} gloo ranks, {cfg.threads} thread each, "
             f"`GNN_DIST_KERNELS={cfg.kernels}`; "
             + ("one launch per dataset, the runs one after the other (a run's peak RSS includes what earlier "
                "runs left in the process)." if cfg.one_launch else
                "one launch per run (each rank's peak RSS is its run's), then one launch timing the first "
                "layer of every run."))
    L.append(f"- {cfg.warmup} warm-up + {cfg.epochs} measured epochs per run (no evaluation); per-rank medians over "
             f"the measured epochs. Layer-0 time: the first layer alone, forward + backward, median of "
             f"{cfg.layer0_reps} passes after the training runs, the runs interleaved.")
    L.append(f"- Chunked runs: `feature_storage={cfg.storage!r}`, `first_layer_chunk_rows` = {cfg.chunk_frac:.0%} of "
             f"the part's S = inner + halo rows (a bound on a chunk's destinations + in-edges, so on its source "
             f"rows), the same for every policy and budget. Budgets are fractions of the part's S rows' bytes.")
    L.append(f"- Hardware: {env['cpu_model']} ({env['cpu_count']} logical CPUs, shared with other jobs: load "
             f"average at start {env['load_average_1_5_15']}); Python {env['python']}, torch "
             f"{env['packages'].get('torch')}. Times are noisy; bytes and hit rates are exact.")
    L.append("")
    for ds, res in results.items():
        runs, tables, targets = res["runs"], res["hit_rates"], res["targets"]
        ranks = runs[RUN_FREQUENCY]["ranks"]
        L.append(f"## {ds}")
        L.append("")
        L.append(common.markdown_table(
            ["part", "inner rows", "halo rows", "local edges", "chunk bound (rows)", "chunks",
             "source rows per chunk (mean / max)", "accesses per epoch", "max accesses of a row"],
            [[r["rank"], f"{r['num_inner']:,}", f"{r['num_halo']:,}", f"{r['num_edges']:,}", f"{r['chunk_rows']:,}",
              r["num_chunks"], f"{r['chunk_src_rows_mean']:,.0f} / {r['chunk_src_rows_max']:,}",
              f"{t['accesses_per_epoch']:,}", t["max_count"]] for r, t in zip(ranks, tables)]))
        L.append("")
        L.append("### 1. Hit rate of the chunked first layer (an epoch after the first) against the budget")
        L.append("")
        for rank, table in enumerate(tables):
            pol = table["policies"]
            rows = [[name] + [_pct(pol[name][f"{b:g}"]["hit_rate"]) for b in cfg.budgets] for name in POLICY_NAMES]
            rows.append(["degree / oracle"] + [_pct(targets["degree_vs_oracle"][rank][f"{b:g}"]) for b in cfg.budgets])
            L.append(f"Part {rank}:")
            L.append("")
            L.append(common.markdown_table(["policy"] + [f"budget {b:.0%}" for b in cfg.budgets], rows))
            L.append("")
        if res["consistency"]:
            L.append("**Inconsistent** with the training runs' store counters: " + "; ".join(res["consistency"]))
        else:
            L.append(f"The training runs' store counters (every measured epoch, every rank) equal these predictions "
                     f"exactly: `degree` and `frequency` at {budget}, and budget 0.")
        L.append("")
        L.append(f"### 2-3. Layer-0 time, host-to-device bytes and memory per epoch (cache budget {budget})")
        L.append("")
        rows = []
        for run in RUNS:
            for r in runs[run]["ranks"]:
                rows.append([run, r["rank"], _ms(r["layer0_s"]), f"{_ms(r['layer0_forward_s'])} + "
                             f"{_ms(r['layer0_backward_s'])}", _ms(r["epoch_time_s"]),
                             common.fmt_bytes(r["feature_h2d_bytes"]), _pct(r["feature_hit_rate"]),
                             common.fmt_bytes(r["rss_start"]), common.fmt_bytes(r["peak_rss"]),
                             common.fmt_bytes(r["cached_bytes"]), common.fmt_bytes(r["device_bytes"]),
                             common.fmt_bytes(r["plan_bytes"])])
        L.append(common.markdown_table(
            ["run", "part", "layer-0 ms", "fwd + bwd ms", "epoch ms", "h2d bytes / epoch", "hit rate",
             "RSS at start", "peak RSS", "device tier", "device memory (tier + largest chunk)",
             "chunk plans (also on the device)"], rows))
        L.append("")
        L.append("On CPU the \"device\" tier is RAM: a miss is a copy from RAM just as a hit is, so these times "
                 "show the store's cost (the cached runs split each gather into hits and misses), not a transfer "
                 "saved; the host-to-device bytes are what a GPU run would move over PCIe. *Device memory* is "
                 "the first layer's input on the device: the tier plus the largest chunk's source rows (the "
                 "whole runs: every row; without the static halo the halo rows arrive by exchange instead). "
                 "*Chunk plans*: the chunks' sub-blocks (edges, per-source degree/id arrays, the layers' "
                 "caches) and source-row lists, which `InputFeatures` keeps on the part's device for the "
                 "whole run, next to the part's own block (" + ", ".join(
                     f"part {r['rank']}: {common.fmt_bytes(r['block_bytes'])}" for r in runs[RUN_DEVICE]["ranks"])
                 + ").")
        L.append("")
        L.append("### 4. Halo exchange bytes per epoch, with and without the static halo cache")
        L.append("")
        L.append(common.markdown_table(
            ["part", "static_halo=False", "static_halo=True", "difference", "layer 0's share (without)",
             "layer 0 (with)", "sent once at start (with)"],
            [[i, f"{h['without_static']:,.0f}", f"{h['with_static']:,.0f}", f"{h['drop']:,.0f}",
              f"{h['layer0_share']:,}", f"{h['static_layer0']:,}", f"{h['static_halo_bytes_once']:,}"]
             for i, h in enumerate(targets["halo"])]))
        L.append("")
        L.append("### Targets")
        L.append("")
        L.append(f"- `degree` >= {TARGET_ORACLE_SHARE:.0%} of the oracle's hit rate at every budget: worst "
                 f"{_pct(targets['degree_vs_oracle_worst'])}, {_met(targets['degree_vs_oracle_ok'])}.")
        per_rank = ", ".join(f"part {i} {x:.3f}x ({_met(ok)})" for i, (x, ok) in
                             enumerate(zip(targets["h2d_ratio_per_rank"], targets["h2d_ok_per_rank"])))
        L.append(f"- Layer-0 host-to-device bytes with a {budget} cache <= {TARGET_H2D_RATIO}x the uncached run's: "
                 f"{per_rank}; all parts together {targets['h2d_ratio_total']:.3f}x "
                 f"({_met(targets['h2d_ok_total'])}).")
        L.append(f"- Exchange bytes lower by exactly layer 0's share: {_met(targets['halo_ok'])}.")
        L.append("")
    return "\n".join(L) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="rmat-small, 1 warm-up + 1 measured epoch, 1 layer-0 pass, one launch")
    ap.add_argument("--datasets", default=None, help="comma-separated catalog datasets (default rmat-medium,rmat-large)")
    ap.add_argument("--parts", type=int, default=None, help="P (default 2)")
    ap.add_argument("--epochs", type=int, default=None, help="measured epochs per run (default 2)")
    ap.add_argument("--chunk-frac", type=float, default=None, help="chunk bound, a fraction of S (default 0.05)")
    ap.add_argument("--storage", default=None, choices=("host", "mmap"), help="storage of the chunked runs")
    ap.add_argument("--kernels", default="auto", choices=("auto", "torch", "numba"))
    ap.add_argument("--one-launch", action="store_true", help="every run of a dataset in one launch")
    ap.add_argument("--out", default=None, help="result stem (default benchmarks/results/cache_[hw]_[date])")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    kw: dict[str, Any] = {"kernels": a.kernels}
    if a.quick:
        kw.update(datasets=("rmat-small",), epochs=1, layer0_reps=1, one_launch=True)
    if a.datasets:
        kw["datasets"] = tuple(a.datasets.split(","))
    if a.one_launch:
        kw["one_launch"] = True
    for name in ("parts", "epochs", "chunk_frac", "storage"):
        if getattr(a, name) is not None:
            kw[name] = getattr(a, name)
    cfg = BenchConfig(**kw)
    env = common.environment(("torch", "numpy"))
    t0 = time.perf_counter()
    prepare_partitions(cfg)
    stem = Path(a.out) if a.out else common.default_result_stem("cache", "_quick" if a.quick else "")
    results: dict[str, Any] = {}
    for ds in cfg.datasets:
        results[ds] = run_dataset(cfg, ds)
        log.info("%s targets: %s", ds, {k: v for k, v in results[ds]["targets"].items() if k.endswith("ok")})
        if results[ds]["consistency"]:
            log.warning("%s: store counters disagree with the hit-rate table: %s", ds, results[ds]["consistency"])
        wall = time.perf_counter() - t0  # written after every dataset, so a later failure keeps the earlier ones
        payload = {"config": {k: v for k, v in asdict(cfg).items() if k != "paths"}, "environment": env,
                   "results": results, "wall_s": wall}
        json_path, md_path = common.write_results(stem, payload, render(cfg, env, results, a.quick, wall))
        log.info("wrote %s and %s", md_path, json_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
