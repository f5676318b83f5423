"""Pipeline modes under a simulated link: sync / overlap / stale / stale+smoothing / BNS / bf16.

For each P (default 2 and 4) on ``sbm-medium`` (METIS partitions, cached like ``train.py``'s):

1. **Calibrate** (in the same processes, just before the runs): a few ``sync`` epochs without a
   link measure, per epoch, the compute time and the halo bytes of the busiest rank; the link is
   then set so that its communication time per epoch equals the compute time (``latency_ms``
   fixed, ``gbps`` solved for), i.e. communication ~ compute.
2. **Run** every mode with that link (``--simulate-link``, a deadline inside the exchange, see
   ``gnn_dist.distributed.halo``), ``warmup`` + ``epochs`` epochs, no evaluation during training;
   then the test accuracy after the run.

Per epoch the busiest rank's epoch time, compute time, communication time (duration of the
halo exchanges on the link), exposed communication (time blocked waiting), halo bytes
sent; medians over the measured epochs. Targets (issue 4): ``stale`` epoch time <= 1.2 x
max(compute, communication) and <= 0.7 x ``sync``'s; ``overlap`` exposed communication <= 0.5 x
``sync``'s. The trainer's static halo cache is on (the first layer makes no exchange in any
mode) unless ``--no-static-halo``; ``overlap`` variants with other chunk counts show what its
boundary-first schedule adds.

Usage::

    python benchmarks/pipeline.py              # sbm-medium, P = 2 and 4 (~10-15 min on 2 cores)
    python benchmarks/pipeline.py --quick      # sbm-small, P = 2, 3 epochs (< 2 min)

Results: ``benchmarks/results/pipeline_[hardware]_[date][_quick].{md,json}``.
"""

from __future__ import annotations

import argparse
import logging
import shlex
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

log = logging.getLogger("benchmarks.pipeline")

MODES: dict[str, dict[str, Any]] = {
    "sync": {"pipeline": "sync"},
    "overlap": {"pipeline": "overlap"},
    "overlap (1 chunk)": {"pipeline": "overlap", "overlap_chunks": 1},
    "overlap (8 chunks)": {"pipeline": "overlap", "overlap_chunks": 8},
    "overlap (no boundary-first)": {"pipeline": "overlap", "overlap_chunks": 0},
    "stale": {"pipeline": "stale"},
    "stale+smoothing 0.5": {"pipeline": "stale", "stale_smoothing": 0.5},
    "sync + BNS p=0.1": {"pipeline": "sync", "boundary_sample_rate": 0.1},
    "sync + bf16 halos": {"pipeline": "sync", "halo_dtype": "bf16"},
}
"""The runs, as Trainer keyword arguments (the fields of :class:`gnn_dist.config.TrainerConfig`)."""


@dataclass(kw_only=True, slots=True)
class BenchConfig:
    dataset: str = "sbm-medium"
    """Catalog dataset."""
    parts: tuple[int, ...] = (2, 4)
    """The P values."""
    model: str = "gcn"
    """Built-in model name."""
    hidden: int = 128
    """Hidden width."""
    num_layers: int = 2
    """Layers."""
    dropout: float = 0.5
    """Feature dropout."""
    static_halo: bool = True
    """``FeatureConfig.static_halo``: the first layer's halo input rows are fetched once (no
    layer-0 exchange in any mode); False exchanges them every step."""
    lr: float = 0.01
    """Adam learning rate."""
    warmup: int = 2
    """Epochs before measuring (stale's first, synchronous epoch is among them)."""
    epochs: int = 4
    """Measured epochs per run."""
    calibrate_epochs: int = 3
    """Measured sync epochs without a link, to size the link."""
    latency_ms: float = 1.0
    """Latency of the simulated link; its bandwidth is solved for."""
    threads: int = 1
    """``torch.set_num_threads`` per rank."""
    kernels: str = "auto"
    """``GNN_DIST_KERNELS`` of the ranks (``auto``, ``torch``, ``numba``, ``triton``; see ``gnn_dist.kernels``)."""
    seed: int = 0
    """Dataset, partition and weight seed."""
    cache_dir: str = str(_HERE / ".cache")
    """Partition folders are kept here between runs."""
    timeout_s: float = 1800.0
    """Limit of each spawned run."""
    paths: dict[int, str] = field(default_factory=dict)
    """P -> partition folder."""


def prepare_partitions(cfg: BenchConfig) -> None:
    """METIS partitions of ``cfg.dataset`` for every P (reused when already on disk)."""
    cfg.paths.update(common.cached_metis_partitions(cfg.dataset, cfg.parts, cfg.seed, cfg.cache_dir))


# ============================================================================ in the spawned ranks
def rank_job(rank: int, world_size: int, cfg: dict[str, Any], runs: dict[str, dict[str, Any]],
             epochs: int) -> dict[str, Any]:
    """Calibrate the link (sync without a link: compute time and halo bytes per epoch, the maximum
    over ranks, median over epochs), then train each run in ``runs`` (Trainer kwargs) with it for
    ``warmup + epochs`` epochs; per-epoch metrics and the final test accuracy."""
    import os

    os.environ["GNN_DIST_KERNELS"] = cfg["kernels"]
    import torch

    torch.set_num_threads(int(cfg["threads"]))
    logging.basicConfig(level=logging.WARNING)
    import gnn_dist
    from gnn_dist.distributed import all_reduce_max
    from gnn_dist.models import build_model

    part = gnn_dist.load_partition(cfg["paths"][world_size])
    out: dict[str, Any] = {}
    cal_runs = {"calibration": {"pipeline": "sync"}}
    for name, kwargs in {**cal_runs, **runs}.items():
        kwargs = dict(kwargs)
        if name != "calibration":
            kwargs["simulate_link"] = out["link"]["link"]
        torch.manual_seed(cfg["seed"])
        model = build_model(cfg["model"], in_dim=part.feature_dim, hidden_dim=cfg["hidden"],
                            out_dim=part.num_classes, num_layers=cfg["num_layers"], dropout=cfg["dropout"],
                            seed=cfg["seed"])
        trainer = gnn_dist.Trainer(model, part, lr=cfg["lr"], eval_every=0, log_every=0,
                                   static_halo=cfg["static_halo"], **kwargs)
        t0 = time.perf_counter()
        n = cfg["calibrate_epochs"] if name == "calibration" else epochs
        hist = trainer.fit(cfg["warmup"] + n)
        wall = time.perf_counter() - t0
        acc = trainer.evaluate()
        out[name] = {"history": hist[cfg["warmup"]:], "test_acc": acc["test_acc"], "wall_s": wall}
        if name == "calibration":
            med = torch.tensor([statistics.median(h[k] for h in out[name]["history"])
                                for k in ("compute_time_s", "halo_bytes")], dtype=torch.float64)
            all_reduce_max(med)
            exchanging = [b > 0 for b in out[name]["history"][-1]["bytes_per_layer"]]
            out["link"] = link_for(cfg, float(med[0]), float(med[1]), exchanging)
    return out


def link_for(cfg: dict[str, Any], compute_s: float, num_bytes: float, exchanging: list[bool]) -> dict[str, Any]:
    """The link whose time per epoch equals ``compute_s`` for ``num_bytes`` of halo rows.

    ``exchanging[i]``: layer ``i`` exchanges its input (layer 0 does not with the static halo
    cache); each such layer's forward crosses the link, and its backward unless it is layer 0
    (whose input needs no gradient). The partitions are balanced, so bytes sent stand for
    max(sent, received)."""
    num_exchanges = 2 * sum(exchanging) - int(exchanging[0])
    budget = compute_s - num_exchanges * cfg["latency_ms"] * 1e-3
    if budget <= 0:
        raise RuntimeError(f"the compute time {compute_s:.3f} s is shorter than the link latencies")
    gbps = num_bytes * 8 / budget / 1e9
    return {"compute_s": compute_s, "halo_bytes": num_bytes, "latency_ms": cfg["latency_ms"], "gbps": gbps,
            "link": f"latency_ms={cfg['latency_ms']:g},gbps={gbps:.6g}"}


# ============================================================================ in the parent
def _busiest(results: list[dict[str, Any]], run: str) -> dict[str, float]:
    """Per-epoch maximum over ranks, then the median over epochs, of each metric."""
    keys = ("epoch_time_s", "compute_time_s", "comm_time_s", "exposed_comm_s", "halo_bytes")
    per_epoch = {k: [max(float(r[run]["history"][e][k]) for r in results)
                     for e in range(len(results[0][run]["history"]))] for k in keys}
    out = {k: statistics.median(v) for k, v in per_epoch.items()}
    out["test_acc"] = results[0][run]["test_acc"]
    out["bytes_per_layer"] = results[0][run]["history"][-1]["bytes_per_layer"]
    out["epochs_measured"] = len(per_epoch["epoch_time_s"])
    out["epoch_time_spread"] = [min(per_epoch["epoch_time_s"]), max(per_epoch["epoch_time_s"])]
    return out


def run_modes(cfg: BenchConfig, num_parts: int,
              modes: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(calibration, per-mode results) of one launch of ``num_parts`` ranks."""
    res = run_ranks(rank_job, num_parts, asdict(cfg), modes, cfg.epochs, timeout=cfg.timeout_s)
    return res[0]["link"], {name: _busiest(res, name) for name in modes}


def check_targets(rows: dict[str, Any]) -> dict[str, Any]:
    """The issue-4 targets among the modes that ran (``sync`` is needed for any)."""
    out: dict[str, Any] = {}
    sync = rows["sync"]
    if "stale" in rows:
        stale = rows["stale"]
        bound = max(stale["compute_time_s"], stale["comm_time_s"])
        out.update({"stale_vs_max_compute_comm": stale["epoch_time_s"] / bound,
                    "stale_vs_max_compute_comm_ok": stale["epoch_time_s"] <= 1.2 * bound,
                    "stale_vs_sync": stale["epoch_time_s"] / sync["epoch_time_s"],
                    "stale_vs_sync_ok": stale["epoch_time_s"] <= 0.7 * sync["epoch_time_s"]})
    if "overlap" in rows:
        overlap = rows["overlap"]
        out.update({"overlap_exposed_vs_sync": overlap["exposed_comm_s"] / max(sync["exposed_comm_s"], 1e-12),
                    "overlap_exposed_vs_sync_ok": overlap["exposed_comm_s"] <= 0.5 * sync["exposed_comm_s"],
                    "overlap_epoch_vs_sync": overlap["epoch_time_s"] / sync["epoch_time_s"]})
    return out


def _ms(x: float) -> str:
    return f"{x * 1e3:.0f}"


def render(cfg: BenchConfig, env: dict[str, Any], results: dict[int, Any], args: str, wall_s: float) -> str:
    """The markdown report; ``args`` are the command-line arguments the run was made with."""
    L = [f"# Pipeline modes under a simulated link ({cfg.dataset}, P = {', '.join(map(str, cfg.parts))})", ""]
    L.append(f"Generated by `python benchmarks/pipeline.py{args}` on {env['date']} "
             f"in {wall_s / 60:.1f} min.")
    L.append("")
    L.append(f"- Model: {cfg.model.upper()}, {cfg.num_layers} layers, hidden {cfg.hidden}, dropout {cfg.dropout}, "
             f"Adam lr {cfg.lr}; METIS partitions (seed {cfg.seed}); {cfg.threads} thread per rank; gloo; "
             f"`GNN_DIST_KERNELS={cfg.kernels}`; static halo cache "
             f"{'on (layer 0 makes no exchange in any mode)' if cfg.static_halo else 'off (`--no-static-halo`)'}.")
    L.append(f"- {cfg.warmup} warm-up + {cfg.epochs} measured epochs per run; per epoch the busiest rank's "
             f"numbers, then the median over the measured epochs. Test accuracy after "
             f"{cfg.warmup + cfg.epochs} epochs.")
    L.append(f"- Hardware: {env['cpu_model']} ({env['cpu_count']} logical CPUs), load average at start "
             f"{env['load_average_1_5_15']}; Python {env['python']}, torch {env['packages'].get('torch')}.")
    L.append("- **Noise**: the machine's 2 cores are shared with other jobs running at the same time "
             "(see the load average); P = 4 runs 4 single-threaded ranks on 2 cores, so its compute "
             "times include waiting for a core. Compare modes within one P (the runs of a P follow each "
             "other in one launch), not absolute times.")
    L.append("- Columns: *epoch* = wall time of a training step; *compute* = epoch minus exposed "
             "communication; *comm* = duration of the epoch's halo exchanges (the simulated link's "
             "latency + bytes / bandwidth each; exchanges in flight together queue for the link, the "
             "queueing is not counted twice); *exposed* = time blocked waiting for them; "
             "*halo bytes* = bytes sent per epoch (as sent: bf16 halves them).")
    L.append("")
    for p, res in results.items():
        cal = res["calibration"]
        L.append(f"## P = {p}")
        L.append("")
        L.append(f"Calibration (sync, no link): compute {_ms(cal['compute_s'])} ms and "
                 f"{common.fmt_bytes(cal['halo_bytes'])} of halo rows per epoch on the busiest rank -> "
                 f"link `{cal['link']}` (communication ~ compute).")
        L.append("")
        rows = []
        for name, r in res["modes"].items():
            rows.append([name, _ms(r["epoch_time_s"]), _ms(r["compute_time_s"]), _ms(r["comm_time_s"]),
                         _ms(r["exposed_comm_s"]), common.fmt_bytes(r["halo_bytes"]), f"{r['test_acc']:.4f}",
                         f"{_ms(r['epoch_time_spread'][0])}-{_ms(r['epoch_time_spread'][1])}"])
        L.append(common.markdown_table(["mode", "epoch ms", "compute ms", "comm ms", "exposed ms", "halo bytes",
                                        "test acc", "epoch range ms"], rows))
        L.append("")
        t = res["targets"]
        L.append("Targets:")
        if "stale_vs_sync" in t:
            L.append(f"- stale epoch / max(compute, comm) = {t['stale_vs_max_compute_comm']:.2f} (target <= 1.2): "
                     f"{'met' if t['stale_vs_max_compute_comm_ok'] else '**missed**'}")
            L.append(f"- stale epoch / sync epoch = {t['stale_vs_sync']:.2f} (target <= 0.7): "
                     f"{'met' if t['stale_vs_sync_ok'] else '**missed**'}")
        if "overlap_exposed_vs_sync" in t:
            L.append(f"- overlap exposed / sync exposed = {t['overlap_exposed_vs_sync']:.2f} (target <= 0.5): "
                     f"{'met' if t['overlap_exposed_vs_sync_ok'] else '**missed**'}; overlap epoch / sync "
                     f"epoch = {t['overlap_epoch_vs_sync']:.2f}")
        L.append("")
    L.append("## Reading the numbers")
    L.append("")
    L.append("- `sync` pays the whole link time as exposed communication. `stale` waits for an exchange "
             "one epoch after starting it, so with communication ~ compute nearly nothing is exposed "
             "(its accuracy is the price: one epoch of staleness).")
    L.append("- `overlap` (exact) computes a hidden layer's boundary rows first, in chunks (4 by default), "
             "each chunk starting its piece of the next layer's exchange, then the other rows, while the "
             "pieces travel; in backward the halo gradients travel while the non-boundary rows and the "
             "later chunks run their backward. *no boundary-first* is the previous schedule (each layer "
             "only overlaps its own exchange with its inner-source aggregation); *1 chunk* sends all "
             "boundary rows as one piece. What stays exposed: in forward the part of the link time "
             "longer than the first layer's compute (the link is serial: pieces queue), in backward the "
             "part longer than the backward compute that does not need the halo gradients (with the "
             "static halo cache the first layer's backward is only its weight gradients, so little). "
             "More chunks shorten the tail but add a collective and an [H, F] result per piece.")
    L.append("- *comm* of a chunked `overlap` run counts each piece from its start to its completion, "
             "which waits for the slowest rank to start the same piece, so it exceeds the link time "
             "of the same bytes (more with more chunks); *exposed* is the figure to compare.")
    L.append("- BNS p=0.1 sends a tenth of the boundary rows, so its link time shrinks accordingly; bf16 "
             "halves the bytes. Both change the computed values (accuracy column).")
    L.append("- The link model delays the *completion* of each exchange (a deadline checked at the wait), "
             "it does not occupy a core; the gloo transfer itself runs on gloo's threads.")
    return "\n".join(L) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="sbm-small, P = 2, 1 warm-up + 3 epochs")
    ap.add_argument("--dataset", default=None)
    ap.add_argument("--parts", default=None, help="comma-separated P values (default 2,4; 2 with --quick)")
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--kernels", default="auto", choices=("auto", "torch", "numba"),
                    help="GNN_DIST_KERNELS of the ranks (default auto)")
    ap.add_argument("--modes", default=None,
                    help=f"comma-separated runs (default all: {', '.join(MODES)}); sync is always run")
    ap.add_argument("--no-static-halo", action="store_true",
                    help="exchange the first layer's halo input rows every step (as before the static halo cache)")
    ap.add_argument("--out", default=None, help="result stem (default benchmarks/results/pipeline_[hw]_[date])")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    cfg = BenchConfig()
    if a.quick:
        cfg.dataset, cfg.parts, cfg.warmup, cfg.epochs, cfg.calibrate_epochs = "sbm-small", (2,), 2, 3, 2
    if a.dataset:
        cfg.dataset = a.dataset
    if a.parts:
        cfg.parts = tuple(int(p) for p in a.parts.split(","))
    if a.epochs:
        cfg.epochs = a.epochs
    cfg.kernels = a.kernels
    cfg.static_halo = not a.no_static_halo
    modes = MODES
    if a.modes:
        names = ["sync", *[m.strip() for m in a.modes.split(",") if m.strip() and m.strip() != "sync"]]
        unknown = [m for m in names if m not in MODES]
        if unknown:
            ap.error(f"--modes: unknown {', '.join(map(repr, unknown))}; choose from {', '.join(MODES)}")
        modes = {m: MODES[m] for m in names}
    env = common.environment(("torch", "numpy"))
    t0 = time.perf_counter()
    prepare_partitions(cfg)
    results: dict[int, Any] = {}
    stem = Path(a.out) if a.out else common.default_result_stem("pipeline", "_quick" if a.quick else "")
    for p in cfg.parts:
        cal, rows = run_modes(cfg, p, modes)
        log.info("P=%d calibration: %s", p, cal)
        results[p] = {"calibration": cal, "modes": rows, "targets": check_targets(rows)}
        log.info("P=%d targets: %s", p, results[p]["targets"])
        wall = time.perf_counter() - t0  # written after every P, so a later failure keeps the earlier ones
        payload = {"config": {k: v for k, v in asdict(cfg).items() if k != "paths"}, "environment": env,
                   "results": {str(q): r for q, r in results.items()}, "wall_s": wall}
        args = "".join(f" {shlex.quote(x)}" for x in (sys.argv[1:] if argv is None else argv))
        json_path, md_path = common.write_results(stem, payload, render(cfg, env, results, args, wall))
        log.info("wrote %s and %s", md_path, json_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
