"""Uneven clusters: one rank at half speed, equal parts against parts weighted to match (issue 37).

A synchronous step waits for its slowest rank, so on a cluster whose devices differ the epoch
takes as long as the slow device's part. ``--part-weights`` sizes the parts to their devices;
this measures what that buys. At ``P`` ranks (default 2) of ``sbm-small`` (METIS partitions,
cached like the other benchmarks'), rank 0 runs at half speed (below), and five runs are
timed:

- **equal, no slowdown**: the reference, every rank at full speed;
- **equal parts**: rank 0 slowed, METIS with equal parts;
- **matched weights**: rank 0 slowed, ``--part-weights 1,2`` (``1,2,2`` at P = 3: rank 0 gets
  the share its speed can do in the others' time);
- **more weight**: rank 0 slowed, ``--part-weights 1,3``: a smaller part still holds about as
  many halo rows, and the step has costs that do not shrink with the part, so the small part's
  work is more than its share of the nodes;
- **measured weights**: rank 0 slowed, the weights a user reads off the end-of-fit ``rank
  balance`` line (``gnn_dist/rank_balance.py``): a calibration launch first trains the equal
  parts with rank 0 slowed, and each rank's median compute per step sizes the parts to the
  speeds measured (the halo rows and the fixed costs included), not to the speed ratio.

Each round is one launch of the ranks that trains every run in turn (warm-up epochs, then
measured ones), the order rotating from round to round (interleaved: the machine's background
load falls on all runs alike); per run the median epoch time over its measured epochs, then per
round the ratio *matched / equal parts*, and the median over rounds. Target: matched <= 0.75 x
equal parts (the ideal at P = 2 is 2/3: the slow rank's 1/3 at half speed takes as long as the
fast rank's 2/3). Measured on the shared 2-core machine at load 16 (docs/performance.md,
"Uneven cluster"): 0.84-0.92x, missed; the exchanges (not slowed) are a large part of the epoch
there, and a smaller part keeps about as many halo rows.

**The slowdown.** Rank 0 runs each layer's compute twice, forward and backward: the conv's
layer-protocol methods (``begin``, ``transform``, ``aggregate``, ``update``, wrapped on the conv
instance, so ``sync``'s whole-block call and ``overlap``'s per-group calls alike) and the
activation with its hash dropout (the model's per-layer activation wrapped alike), each copy
tied to the output by :class:`_Tie`, an autograd function that hands the output's gradient on
and gives the copy a zero gradient, so the copy's backward runs too (the same kernels, the same
sizes) and adds exactly zero: the values are unchanged (the losses match the unslowed run's;
``tests/benchmarks/test_uneven_slowdown.py``), the compute is doubled. The exchange is not: its
rows are sent once, and the bytes and collectives are the same. Halving the rank's threads
instead is not available at P = 2 on a 2-core machine (one thread per rank already) and would
not halve the compute (the kernels do not scale linearly); sleeping for the layer's time would
not occupy the core, which a slower device does. The optimizer step is doubled too
(:func:`slow_down_optimizer`: a twin optimizer steps a copy of the parameters on the same
gradients; Adam over 1024-wide layers is a tenth of a rank's compute, which a slower device also
takes twice as long over); the loss runs at full speed. Nothing of this is in the library: the
wrappers are installed on the model and its optimizer in the benchmark's ranks. The first layer's aggregate is not precomputed
(``precompute_first_layer="off"``) so that every layer calls its conv.

``--schedule overlap`` runs every configuration with the ``overlap`` schedule (the halo rows in
flight while the inner rows are aggregated): the exchange, which the slow device does not slow,
then hides behind its compute instead of adding to it.

Usage::

    python benchmarks/uneven.py                 # sbm-small, P = 2, 5 rounds (~5 min on 2 cores)
    python benchmarks/uneven.py --quick         # 2 rounds of 1 + 3 epochs (~2 min)
    python benchmarks/uneven.py --schedule overlap

Results: ``benchmarks/results/uneven_[hardware]_[date][_quick].{md,json}``.
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

log = logging.getLogger("benchmarks.uneven")

RUNS: dict[str, tuple[str, bool]] = {
    "equal, no slowdown": ("equal", False),
    "equal parts": ("equal", True),
    "matched weights": ("matched", True),
    "more weight": ("more", True),
    "measured weights": ("measured", True),
}
"""The runs: the partition (:meth:`BenchConfig.weights`) and whether rank 0 is slowed."""


@dataclass(kw_only=True, slots=True)
class BenchConfig:
    dataset: str = "sbm-small"
    """Catalog dataset."""
    parts: int = 2
    """Ranks (P); rank 0 is the slow one."""
    slowdown: int = 2
    """How many times rank 0 runs each conv (2: half speed)."""
    model: str = "gcn"
    hidden: int = 256
    """Wide layers: the convs are most of the step (what a slower device slows)."""
    num_layers: int = 3
    dropout: float = 0.5
    lr: float = 0.01
    warmup: int = 2
    """Epochs of each run before measuring."""
    epochs: int = 5
    """Measured epochs of each run."""
    rounds: int = 5
    """Launches, each training every run once (order rotated)."""
    threads: int = 1
    """``torch.set_num_threads`` per rank."""
    schedule: str = "sync"
    """The halo exchange's schedule (``sync``, ``overlap``: the exchange behind the inner rows' work)."""
    seed: int = 0
    cache_dir: str = str(_HERE / ".cache")
    timeout_s: float = 1200.0
    paths: dict[str, str] = field(default_factory=dict)
    """``equal``/``matched``/``more``/``measured`` -> partition folder."""
    measured: tuple[float, ...] | None = None
    """The part weights of the calibration launch (:func:`calibrate`)."""

    def weights(self, name: str) -> tuple[float, ...] | None:
        """The part weights of partition ``name``: ``equal`` (None); ``matched``: rank 0 gets
        1/slowdown of a fast rank's share (its speed); ``more``: one more for each fast rank
        (1,3 at P = 2: the share a rank's work would match if the halo rows and the step's fixed
        costs, which do not shrink with the part, were counted too)."""
        if name == "equal":
            return None
        if name == "measured":
            return self.measured
        fast = float(self.slowdown + (name == "more"))
        return (1.0, *([fast] * (self.parts - 1)))


def prepare_partitions(cfg: BenchConfig) -> None:
    """METIS partitions with equal parts and with each run's weights (cached); the measured
    weights' after :func:`calibrate`."""
    for name in dict.fromkeys(part for part, _ in RUNS.values()):
        if name != "measured" or cfg.measured is not None:
            cfg.paths[name] = common.cached_metis_partitions(cfg.dataset, [cfg.parts], cfg.seed, cfg.cache_dir,
                                                             part_weights=cfg.weights(name))[cfg.parts]


def calibrate(cfg: BenchConfig) -> dict[str, Any]:
    """The weights a user reads off the end-of-fit ``rank balance`` line (``gnn_dist/rank_balance.py``):
    one launch trains the equal parts with rank 0 slowed, and each rank's median compute per step
    sizes the parts to the measured speeds (what the library computes, not the speed ratio)."""
    from gnn_dist.rank_balance import speed_weights

    run = run_round(cfg, ["equal parts"])["equal parts"]
    cfg.measured = tuple(round(w, 4) for w in speed_weights([1 / cfg.parts] * cfg.parts, run["compute_s"]))
    log.info("calibration: compute per rank %s s -> --part-weights %s", [round(c, 3) for c in run["compute_s"]],
             ",".join(f"{w:g}" for w in cfg.measured))
    return {"compute_s": run["compute_s"], "weights": list(cfg.measured)}


# ============================================================================ in the spawned ranks
def _tie_function() -> Any:
    import torch

    class _Tie(torch.autograd.Function):
        """Forward: ``out`` (``twin`` computed alongside); backward: ``out``'s gradient, and a zero
        gradient for ``twin`` so that its backward runs and adds nothing."""

        @staticmethod
        def forward(ctx: Any, out: Any, twin: Any) -> Any:
            return out.view_as(out)

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            return grad, torch.zeros_like(grad)

    return _Tie


def slow_down(model: Any, times: int) -> None:
    """Make every layer of ``model`` (a ``BasicGNN`` of protocol convs: its conv's ``begin``,
    ``transform``, ``aggregate`` and ``update``, and its activation with the hash dropout) run
    ``times`` times in forward and in backward (module docstring), the outputs unchanged. The
    conv's methods are wrapped on the instance, so every schedule's calls go through them (``sync``
    calls them from the conv's ``forward``, ``overlap`` per group of source rows)."""
    tie = _tie_function()

    def twice(out: Any, again: Any) -> Any:
        """``out`` tied to ``again`` (a tensor; a tuple of tensors and contexts element by element)."""
        if isinstance(out, tuple):
            return tuple(twice(o, a) for o, a in zip(out, again))
        if hasattr(out, "requires_grad") and out.is_floating_point():
            return tie.apply(out, again)
        return out

    def repeat(fn: Any) -> Any:
        def slowed(*args: Any, **kwargs: Any) -> Any:
            out = fn(*args, **kwargs)
            for _ in range(times - 1):
                out = twice(out, fn(*args, **kwargs))
            return out
        return slowed

    for conv in model.convs:
        for method in ("begin", "transform", "aggregate", "update"):
            setattr(conv, method, repeat(getattr(conv, method)))
    activation = model._activation   # the bound method: this instance's own, wrapped

    def slow_activation(layer: int, step: Any, ids: Any) -> Any:
        return repeat(activation(layer, step, ids))

    model._activation = slow_activation


def slow_down_optimizer(optimizer: Any, times: int) -> None:
    """Make ``optimizer``'s step run ``times`` times: after each real step, ``times - 1`` twin
    optimizers of the same kind and settings step their own copies of the parameters on the same
    gradients (the same kernels on the same sizes; the model's parameters are the real step's
    alone, so the values are unchanged)."""
    import torch

    params = [p for group in optimizer.param_groups for p in group["params"]]
    twins = []
    for _ in range(times - 1):
        copies = [torch.nn.Parameter(p.detach().clone()) for p in params]
        twins.append((copies, type(optimizer)(copies, **optimizer.defaults)))
    step = optimizer.step

    def slowed(*args: Any, **kwargs: Any) -> Any:
        out = step(*args, **kwargs)
        for copies, twin in twins:
            for c, p in zip(copies, params):
                c.grad = p.grad
            twin.step()
        return out

    optimizer.step = slowed


def rank_job(rank: int, world_size: int, cfg: dict[str, Any], order: list[str]) -> dict[str, Any]:
    """Train each run of ``order`` for ``warmup + epochs`` epochs; its measured epochs' records."""
    import torch

    torch.set_num_threads(int(cfg["threads"]))
    logging.basicConfig(level=logging.WARNING)
    import gnn_dist
    from gnn_dist.models import build_model

    out: dict[str, Any] = {}
    for name in order:
        folder, slow = RUNS[name]
        part = gnn_dist.load_partition(cfg["paths"][folder])
        torch.manual_seed(cfg["seed"])
        model = build_model(cfg["model"], in_dim=part.feature_dim, hidden_dim=cfg["hidden"],
                            out_dim=part.num_classes, num_layers=cfg["num_layers"], dropout=cfg["dropout"],
                            seed=cfg["seed"])
        if slow and rank == 0:
            slow_down(model, cfg["slowdown"])
        trainer = gnn_dist.Trainer(model, part, lr=cfg["lr"], eval_every=0, log_every=0, pipeline=cfg["schedule"],
                                   precompute_first_layer="off")
        if slow and rank == 0:
            slow_down_optimizer(trainer.optimizer, cfg["slowdown"])
        hist = trainer.fit(cfg["warmup"] + cfg["epochs"])[cfg["warmup"]:]
        out[name] = {"epochs": [{k: h[k] for k in ("epoch_time_s", "compute_time_s", "exposed_comm_s", "train_loss")}
                                for h in hist], "inner": part.num_inner, "edges": part.block.num_edges}
    return out


# ============================================================================ in the parent
def run_round(cfg: BenchConfig, order: list[str]) -> dict[str, Any]:
    """One launch: per run the median epoch time (the ranks wait for each other, so rank 0's
    epochs are the step's), the ranks' compute times, the parts' sizes and the losses."""
    res = run_ranks(rank_job, cfg.parts, asdict(cfg), order, timeout=cfg.timeout_s)
    out: dict[str, Any] = {}
    for name in order:
        per_rank = [r[name] for r in res]
        epoch = [max(r["epochs"][e]["epoch_time_s"] for r in per_rank) for e in range(cfg.epochs)]
        out[name] = {"epoch_s": statistics.median(epoch), "epoch_range_s": [min(epoch), max(epoch)],
                     "compute_s": [statistics.median(e["compute_time_s"] for e in r["epochs"]) for r in per_rank],
                     "inner": [r["inner"] for r in per_rank], "edges": [r["edges"] for r in per_rank],
                     "loss": [e["train_loss"] for e in per_rank[0]["epochs"]]}
    return out


def summarize(cfg: BenchConfig, rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Median over rounds of each run's epoch time, the per-round ratios and the target."""
    names = list(RUNS)
    ratio = [r["matched weights"]["epoch_s"] / r["equal parts"]["epoch_s"] for r in rounds]
    more = [r["more weight"]["epoch_s"] / r["equal parts"]["epoch_s"] for r in rounds]
    measured = [r["measured weights"]["epoch_s"] / r["equal parts"]["epoch_s"] for r in rounds]
    slowed = [r["equal parts"]["epoch_s"] / r["equal, no slowdown"]["epoch_s"] for r in rounds]
    out = {"epoch_s": {n: statistics.median(r[n]["epoch_s"] for r in rounds) for n in names},
           "matched_vs_equal": ratio, "matched_vs_equal_median": statistics.median(ratio),
           "more_vs_equal": more, "more_vs_equal_median": statistics.median(more),
           "measured_vs_equal": measured, "measured_vs_equal_median": statistics.median(measured),
           "slowed_vs_reference": slowed, "slowed_vs_reference_median": statistics.median(slowed)}
    out["target_met"] = min(out["matched_vs_equal_median"], out["measured_vs_equal_median"]) <= 0.75
    return out


def render(cfg: BenchConfig, env: dict[str, Any], rounds: list[dict[str, Any]], summary: dict[str, Any],
           args: str, wall_s: float) -> str:
    weights = " or ".join(f"`--part-weights {','.join(f'{w:g}' for w in cfg.weights(n))}`" for n in ("matched", "more", "measured"))
    L = [f"# Uneven cluster: rank 0 at 1/{cfg.slowdown} speed ({cfg.dataset}, P = {cfg.parts})", "",
         f"Generated by `python benchmarks/uneven.py{args}` on {env['date']} in {wall_s / 60:.1f} min.", "",
         f"- Model: {cfg.model.upper()}, {cfg.num_layers} layers, hidden {cfg.hidden}, dropout {cfg.dropout}; "
         f"`{cfg.schedule}`; METIS (seed {cfg.seed}), equal parts or {weights}; {cfg.threads} thread "
         f"per rank; gloo.",
         f"- Slowdown: rank 0 runs every conv {cfg.slowdown} times, forward and backward (the exchange once; "
         f"see the benchmark's docstring).",
         f"- {cfg.rounds} rounds, each one launch training the runs in turn (order rotated), "
         f"{cfg.warmup} warm-up + {cfg.epochs} measured epochs a run; epoch = the step's wall time, median "
         f"over the measured epochs; then the median over rounds.",
         f"- Hardware: {env['cpu_model']} ({env['cpu_count']} logical CPUs, shared with other jobs), load "
         f"average at start {env['load_average_1_5_15']}; torch {env['packages'].get('torch')}.", ""]
    first = rounds[0]
    rows = []
    for name in RUNS:
        r = first[name]
        rows.append([name, f"{summary['epoch_s'][name] * 1e3:.0f}",
                     " / ".join(f"{c * 1e3:.0f}" for c in r["compute_s"]),
                     " / ".join(f"{n:,}" for n in r["inner"]), " / ".join(f"{e:,}" for e in r["edges"])])
    L.append(common.markdown_table(["run", "epoch ms (median)", "compute ms per rank (round 1)",
                                    "inner rows per part", "in-edges per part"], rows))
    L.append("")
    L.append("| round | " + " | ".join(f"{n} ms" for n in RUNS) + " | matched / equal | more / equal | "
             "measured / equal |")
    L.append("| --- | " + " | ".join("---:" for _ in RUNS) + " | ---: | ---: | ---: |")
    for i, r in enumerate(rounds):
        L.append(f"| {i + 1} | " + " | ".join(f"{r[n]['epoch_s'] * 1e3:.0f}" for n in RUNS)
                 + f" | {summary['matched_vs_equal'][i]:.2f} | {summary['more_vs_equal'][i]:.2f} | "
                   f"{summary['measured_vs_equal'][i]:.2f} |")
    L.append("")
    L.append(f"Matched weights / equal parts: **{summary['matched_vs_equal_median']:.2f}x** (median of the "
             f"rounds; target <= 0.75, ideal {cfg.parts / (1 + cfg.slowdown * (cfg.parts - 1)):.2f}): "
             f"{'met' if summary['target_met'] else '**missed**'}; more weight / equal parts "
             f"{summary['more_vs_equal_median']:.2f}x; measured weights (the calibration launch's compute per "
             f"rank: {' / '.join(f'{c * 1e3:.0f}' for c in summary['calibration']['compute_s'])} ms, as the end-of-fit "
             f"`rank balance` line names them) / equal parts **{summary['measured_vs_equal_median']:.2f}x**. "
             f"The slowdown costs the equal parts "
             f"{summary['slowed_vs_reference_median']:.2f}x the reference epoch.")
    return "\n".join(L) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 rounds of 1 + 3 epochs")
    ap.add_argument("--dataset", default=None)
    ap.add_argument("--parts", type=int, default=None, help="ranks, 2 or more (default 2)")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--hidden", type=int, default=None)
    ap.add_argument("--layers", type=int, default=None)
    ap.add_argument("--schedule", default=None, choices=("sync", "overlap"), help="default sync")
    ap.add_argument("--out", default=None, help="result stem (default benchmarks/results/uneven_[hw]_[date])")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    cfg = BenchConfig()
    if a.quick:
        cfg.rounds, cfg.warmup, cfg.epochs = 2, 1, 3
    cfg.dataset = a.dataset or cfg.dataset
    cfg.parts = a.parts or cfg.parts
    cfg.rounds = a.rounds or cfg.rounds
    cfg.epochs = a.epochs or cfg.epochs
    cfg.hidden = a.hidden or cfg.hidden
    cfg.num_layers = a.layers or cfg.num_layers
    cfg.schedule = a.schedule or cfg.schedule
    if cfg.parts < 2:
        ap.error(f"--parts {cfg.parts}: an uneven cluster needs 2 or more ranks")
    env = common.environment(("torch", "numpy"))
    t0 = time.perf_counter()
    prepare_partitions(cfg)
    calibration = calibrate(cfg)
    prepare_partitions(cfg)   # the measured weights' folder
    names = list(RUNS)
    rounds = []
    for i in range(cfg.rounds):
        order = names[i % len(names):] + names[:i % len(names)]
        rounds.append(run_round(cfg, order))
        log.info("round %d: %s", i + 1, {n: round(rounds[-1][n]["epoch_s"], 3) for n in names})
    summary = summarize(cfg, rounds)
    summary["calibration"] = calibration
    wall = time.perf_counter() - t0
    stem = Path(a.out) if a.out else common.default_result_stem("uneven", "_quick" if a.quick else "")
    payload = {"config": {k: v for k, v in asdict(cfg).items() if k != "paths"}, "environment": env,
               "rounds": rounds, "summary": summary, "wall_s": wall}
    args = "".join(f" {shlex.quote(x)}" for x in (sys.argv[1:] if argv is None else argv))
    json_path, md_path = common.write_results(stem, payload, render(cfg, env, rounds, summary, args, wall))
    log.info("matched / equal = %.2f, measured / equal = %.2f (target <= 0.75): %s; wrote %s and %s",
             summary["matched_vs_equal_median"], summary["measured_vs_equal_median"],
             "met" if summary["target_met"] else "missed", md_path, json_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
