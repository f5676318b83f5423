"""Memory-bounded training: a step's peak memory, epoch time and losses with activation
recomputation and bf16, against the plain fp32 run, on P ranks; and bf16's accuracy against fp32.

Memory and time: one launch of P ranks (default: sbm-medium, P = 2, METIS partitions cached
like ``train.py``'s) trains a 4-layer GCN of width 256 once per setting (fp32 with
``recompute`` none, layers and all; bf16 with none and all), from the same initial weights,
**interleaved** epoch by epoch. Per epoch and rank: the step's peak resident memory above the
memory resident when the step started (``gnn_dist.measured_peak``: the high-water mark reset
before the step), i.e. what the step's activations, saved tensors, gradients and workspace
need on top of the graph, features, weights and optimizer state; and the peak above the
process's memory before it loaded the partition (the rank's *data* memory: all of it but the
interpreter and torch). The median over the epochs after the warm-up, the busiest rank.
Losses: the recomputed runs' must equal the plain run's bit for bit.

Accuracy: GCN, SAGE and GAT (2 layers, width 64) on sbm-small at P = 2, 100 epochs, fp32 and
bf16, test accuracy of the last epoch.

Targets (issue 15): with ``recompute all``, the per-rank step peak at most 0.5x the plain run's,
losses bit-identical, epoch time at most 1.4x.

Usage::

    python benchmarks/recompute.py            # both parts (~10 min on 2 cores)
    python benchmarks/recompute.py --quick    # sbm-small, 3 epochs, 20 accuracy epochs (< 1 min)
    python benchmarks/recompute.py --layers 8 --epochs 5 --no-accuracy --out benchmarks/results/recompute_cpu2_2026-12-02_8layers

Results: ``benchmarks/results/recompute_[hardware]_[date][_quick].{md,json}``.
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

import common  # noqa: E402
from mp_utils import run_ranks  # noqa: E402

log = logging.getLogger("benchmarks.recompute")

SETTINGS: dict[str, dict[str, Any]] = {
    "fp32": {},
    "fp32 recompute layers": {"recompute": "layers"},
    "fp32 recompute all": {"recompute": "all"},
    "bf16": {"precision": "bf16"},
    "bf16 recompute all": {"precision": "bf16", "recompute": "all"},
}
"""The memory/time runs, as Trainer keyword arguments; the first is the reference."""

ACCURACY_MODELS = ("gcn", "sage", "gat")


@dataclass(kw_only=True, slots=True)
class BenchConfig:
    dataset: str = "sbm-medium"
    parts: int = 2
    hidden: int = 256
    num_layers: int = 4
    epochs: int = 8
    warmup: int = 2
    accuracy_dataset: str = "sbm-small"
    accuracy_epochs: int = 100
    threads: int = 1
    seed: int = 0
    cache_dir: str = str(_HERE / ".cache")
    timeout_s: float = 3600.0
    paths: dict[str, str] = field(default_factory=dict)


# ============================================================================ in the spawned ranks
def memory_job(rank: int, world_size: int, cfg: dict[str, Any]) -> dict[str, Any]:
    """Every setting's trainer, one epoch each in turn; per epoch its time, loss and peaks."""
    import torch

    torch.set_num_threads(int(cfg["threads"]))
    logging.basicConfig(level=logging.WARNING)
    import gnn_dist
    from gnn_dist.models import build_model
    from gnn_dist.measured_peak import current_memory_bytes, peak_memory_bytes, reset_peak

    runtime = current_memory_bytes("cpu")
    part = gnn_dist.load_partition(cfg["paths"]["memory"])
    torch.manual_seed(cfg["seed"])

    def model() -> torch.nn.Module:
        torch.manual_seed(cfg["seed"])
        return build_model("gcn", in_dim=part.feature_dim, hidden_dim=cfg["hidden"], out_dim=part.num_classes,
                           num_layers=cfg["num_layers"], dropout=0.5, seed=cfg["seed"])
    trainers = {name: gnn_dist.Trainer(model(), part, lr=0.01, eval_every=0, log_every=0, **kwargs)
                for name, kwargs in SETTINGS.items()}
    history: dict[str, list[dict[str, Any]]] = {name: [] for name in SETTINGS}
    for _ in range(cfg["epochs"]):
        for name, trainer in trainers.items():
            reset_peak(part.device)
            base = current_memory_bytes(part.device)
            rec = trainer.fit(1)[0]
            peak = peak_memory_bytes(part.device)
            history[name].append({"loss": rec["train_loss"], "epoch_time_s": rec["epoch_time_s"],
                                  "step_peak": peak - base, "data_peak": peak - runtime})
    return {"history": history, "nodes": int(part.num_inner), "halo": int(part.num_halo)}


def accuracy_job(rank: int, world_size: int, cfg: dict[str, Any]) -> dict[str, Any]:
    """fp32 and bf16 training of each accuracy model; the last epoch's test accuracy."""
    import torch

    torch.set_num_threads(int(cfg["threads"]))
    logging.basicConfig(level=logging.WARNING)
    import gnn_dist
    from gnn_dist.models import build_model

    part = gnn_dist.load_partition(cfg["paths"]["accuracy"])
    out: dict[str, Any] = {}
    for name in ACCURACY_MODELS:
        for precision in ("fp32", "bf16"):
            torch.manual_seed(cfg["seed"])
            model = build_model(name, in_dim=part.feature_dim, hidden_dim=64, out_dim=part.num_classes, num_layers=2,
                                dropout=0.5, seed=cfg["seed"])
            trainer = gnn_dist.Trainer(model, part, lr=0.01, eval_every=0, log_every=0, precision=precision)
            trainer.fit(cfg["accuracy_epochs"])
            out[f"{name} {precision}"] = trainer.evaluate()["test_acc"]
    return out


# ============================================================================ in the parent
def summarize(results: list[dict[str, Any]], warmup: int) -> dict[str, dict[str, Any]]:
    """Per setting: median step peak / data peak / epoch time over the timed epochs, the busiest
    rank's, and their ratios to the reference; whether the losses equal the reference's."""
    ref_name = next(iter(SETTINGS))
    rows: dict[str, dict[str, Any]] = {}
    for name in SETTINGS:
        per_rank = [r["history"][name][warmup:] for r in results]
        med = {k: max(statistics.median(e[k] for e in h) for h in per_rank)
               for k in ("step_peak", "data_peak", "epoch_time_s")}
        same = all([e["loss"] for e in r["history"][name]] == [e["loss"] for e in r["history"][ref_name]]
                   for r in results)
        rows[name] = {**med, "losses_identical": same}
    ref = rows[ref_name]
    for row in rows.values():
        for k in ("step_peak", "data_peak", "epoch_time_s"):
            row[f"{k}_ratio"] = row[k] / ref[k] if ref[k] else None
    return rows


def check_targets(rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    r = rows["fp32 recompute all"]
    return {"step_peak<=0.5x": r["step_peak_ratio"] <= 0.5, "losses bit-identical": r["losses_identical"]
            and rows["fp32 recompute layers"]["losses_identical"], "epoch<=1.4x": r["epoch_time_s_ratio"] <= 1.4}


def render(cfg: BenchConfig, env: dict[str, Any], results: dict[str, Any], args: str, wall_s: float) -> str:
    lines = [f"# Memory-bounded training — `benchmarks/recompute.py{args}`", "",
             f"{env['date']}: {env['cpu_model']} ({env['cpu_count']} logical CPUs), load average at start "
             f"{env['load_average_1_5_15']}; torch {env['packages'].get('torch')}; git {env['git_revision']}; "
             f"wall {wall_s / 60:.1f} min.", ""]
    mem = results.get("memory")
    if mem:
        lines += [f"## {cfg.dataset}, P = {cfg.parts}, GCN {cfg.num_layers} layers x {cfg.hidden}, {cfg.epochs} "
                  f"epochs interleaved ({cfg.warmup} warm-up), {cfg.threads} thread(s) per rank", "",
                  f"Rows per rank: {mem['sizes']}. Step peak: resident memory above the step's start; data "
                  f"peak: above the rank's memory before it loaded the partition. Medians, busiest rank.", ""]
        rows = mem["rows"]
        lines.append(common.markdown_table(
            ["setting", "step peak", "x fp32", "data peak", "x fp32", "epoch", "x fp32", "losses = fp32's"],
            [[name, common.fmt_bytes(r["step_peak"]), common.fmt_ratio(r["step_peak_ratio"]),
              common.fmt_bytes(r["data_peak"]), common.fmt_ratio(r["data_peak_ratio"]),
              f"{r['epoch_time_s'] * 1e3:.0f} ms", common.fmt_ratio(r["epoch_time_s_ratio"]),
              "yes" if r["losses_identical"] else "no"] for name, r in rows.items()]))
        lines += ["", "Targets: " + ", ".join(f"{k} {'met' if v else 'MISSED'}" for k, v in mem["targets"].items()),
                  ""]
    acc = results.get("accuracy")
    if acc:
        lines += [f"## bf16 accuracy: {cfg.accuracy_dataset}, P = {cfg.parts}, 2 layers x 64, "
                  f"{cfg.accuracy_epochs} epochs", ""]
        lines.append(common.markdown_table(
            ["model", "fp32 test acc", "bf16 test acc", "bf16 - fp32"],
            [[m, f"{acc[f'{m} fp32']:.4f}", f"{acc[f'{m} bf16']:.4f}", f"{acc[f'{m} bf16'] - acc[f'{m} fp32']:+.4f}"]
             for m in ACCURACY_MODELS]))
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="sbm-small, 3 epochs; 20 accuracy epochs")
    ap.add_argument("--dataset", default=None, help="catalog graph of the memory/time runs (default sbm-medium)")
    ap.add_argument("--parts", type=int, default=None, help="P (default 2)")
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--layers", type=int, default=None, help="GCN depth of the memory/time runs (default 4)")
    ap.add_argument("--no-accuracy", action="store_true", help="skip the bf16 accuracy runs")
    ap.add_argument("--out", default=None, help="result stem (default benchmarks/results/recompute_[hw]_[date])")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    cfg = BenchConfig()
    if a.quick:
        cfg.dataset, cfg.epochs, cfg.warmup, cfg.accuracy_epochs, cfg.hidden = "sbm-small", 3, 1, 20, 64
    cfg.dataset = a.dataset or cfg.dataset
    cfg.parts = a.parts or cfg.parts
    cfg.epochs = a.epochs or cfg.epochs
    cfg.num_layers = a.layers or cfg.num_layers
    env = common.environment(("torch", "numpy", "numba"))
    t0 = time.perf_counter()
    cfg.paths["memory"] = common.cached_metis_partitions(cfg.dataset, [cfg.parts], cfg.seed, cfg.cache_dir)[cfg.parts]
    cfg.paths["accuracy"] = common.cached_metis_partitions(cfg.accuracy_dataset, [cfg.parts], cfg.seed,
                                                           cfg.cache_dir)[cfg.parts]
    stem = Path(a.out) if a.out else common.default_result_stem("recompute", "_quick" if a.quick else "")
    args = "".join(f" {shlex.quote(x)}" for x in (sys.argv[1:] if argv is None else argv))
    results: dict[str, Any] = {}
    res = run_ranks(memory_job, cfg.parts, asdict(cfg), timeout=cfg.timeout_s)
    rows = summarize(res, cfg.warmup)
    results["memory"] = {"rows": rows, "targets": check_targets(rows),
                         "sizes": [{"inner": r["nodes"], "halo": r["halo"]} for r in res]}
    log.info("memory: %s", results["memory"]["targets"])
    if not a.no_accuracy:
        results["accuracy"] = run_ranks(accuracy_job, cfg.parts, asdict(cfg), timeout=cfg.timeout_s)[0]
    wall = time.perf_counter() - t0
    payload = {"config": {k: v for k, v in asdict(cfg).items() if k != "paths"}, "environment": env,
               "results": results, "wall_s": wall}
    json_path, md_path = common.write_results(stem, payload, render(cfg, env, results, args, wall))
    log.info("wrote %s and %s", md_path, json_path)
    print(md_path.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
