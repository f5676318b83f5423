"""What the accuracy benchmarks against a single-device PyG reference share (issue 20).

Each of ``regression.py``, ``link_prediction.py`` and ``multilabel.py`` trains one model twice per
seed, from the same initial weights:

- **gnn-dist**: :func:`gnn_dist_job`, ``Trainer`` on P gloo ranks (exact: what one device trains,
  its dropout masks keyed by original node id);
- **PyG**: ``torch_geometric.nn.GCNConv`` layers on one device (:func:`reference_model`, the
  weights copied from gnn-dist's model: the layers name their parameters alike), on the one-part
  folder's graph (:func:`reference_graph`), trained by :func:`train_reference` with the loss and
  scored by metrics each benchmark writes itself in plain torch / numpy (not gnn-dist's task
  code), so that agreement means something.

The two differ only in the dropout masks (a hash of the node id in gnn-dist, torch's RNG in PyG).
:func:`run_comparison` first runs both with dropout off (the same computation: the metrics must
agree to ~1e-5), then ``--seeds`` seeds with dropout on, and compares the means over seeds against
:class:`Target` s; :func:`comparison_markdown` and :func:`write_report` write
``benchmarks/results/[theme]_[hardware]_[date][_quick].{md,json}``.

The model is a 2-layer GCN (hidden ``cfg["hidden"]``, ReLU, dropout after the hidden layer), Adam
(``cfg["lr"]``, ``cfg["weight_decay"]``), full batch, the last epoch's weights. A ``cfg`` is a plain
dict (it travels to the ranks): ``hidden``, ``lr``, ``weight_decay``, ``trainer`` (more
``Trainer`` keywords: the task, the loss) and optionally ``decoder`` (link prediction: the model's
output is its hidden width and ``link_decoder`` the decoder).
"""

from __future__ import annotations

import argparse
import logging
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import common
from mp_utils import run_ranks

log = logging.getLogger("benchmarks.task_reference")

Runs = dict[int, dict[str, float]]
"""seed -> the final metrics (``test_mse``, ``val_mrr``, ...) of one side."""

PARITY_EPOCHS = 20

PACKAGES = ("torch", "torch_geometric", "numpy", "scipy", "gnn_dist")
"""The package versions a report records."""


# ----------------------------------------------------------------------------- models
def out_width(cfg: Mapping[str, Any], num_classes: int) -> int:
    """The model's output width: the hidden width for link prediction (node embeddings), else the
    partition's classes / labels / targets."""
    return int(cfg["hidden"]) if cfg.get("decoder") else int(num_classes)


def build_gcn(cfg: Mapping[str, Any], in_dim: int, out_dim: int, seed: int, dropout: float) -> Any:
    """gnn-dist's 2-layer GCN with the weights of ``seed`` (and its ``link_decoder`` when
    ``cfg["decoder"]``): both sides start from these."""
    import torch

    from gnn_dist.models import GCN

    torch.manual_seed(seed)
    model = GCN(in_dim, cfg["hidden"], out_dim, 2, dropout=dropout, seed=seed)
    if cfg.get("decoder"):
        from gnn_dist.nn.link_decoder import build_decoder

        model.add_module("link_decoder", build_decoder(cfg["decoder"], out_dim))
    return model


def gnn_dist_job(rank: int, world_size: int, cfg: dict[str, Any], path: str, seeds: list[int], epochs: int,
                 dropout: float) -> Runs:
    """gnn-dist on this rank's part: the final train/val/test metrics of each seed (every rank)."""
    import torch

    import gnn_dist

    torch.set_num_threads(1)
    part = gnn_dist.load_partition(path)
    out = {}
    for seed in seeds:
        model = build_gcn(cfg, part.feature_dim, out_width(cfg, part.num_classes), seed, dropout)
        trainer = gnn_dist.Trainer(model, part, lr=cfg["lr"], weight_decay=cfg["weight_decay"], log_every=0,
                                   eval_every=0, **cfg["trainer"])
        trainer.fit(epochs)
        out[seed] = trainer.evaluate()
    return out


def _pyg_gcn(hidden: int, in_dim: int, out_dim: int, dropout: float) -> Any:
    import torch
    import torch.nn.functional as F
    from torch_geometric.nn import GCNConv

    class PygGCN(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.convs = torch.nn.ModuleList([GCNConv(in_dim, hidden, cached=True),
                                              GCNConv(hidden, out_dim, cached=True)])

        def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
            x = F.dropout(F.relu(self.convs[0](x, adj)), dropout, self.training)
            return self.convs[1](x, adj)

    return PygGCN()


def reference_model(cfg: Mapping[str, Any], in_dim: int, out_dim: int, seed: int, dropout: float,
                    decoder: Any = None) -> Any:
    """PyG's ``GCNConv`` stack (plus ``decoder`` as its ``link_decoder``) holding the initial
    weights of gnn-dist's model of ``seed`` (a strict state-dict copy: every parameter, nothing
    else)."""
    ours = build_gcn(cfg, in_dim, out_dim, seed, dropout)
    model = _pyg_gcn(cfg["hidden"], in_dim, out_dim, dropout)
    if decoder is not None:
        model.add_module("link_decoder", decoder)
    model.load_state_dict({k: v.detach().clone() for k, v in ours.state_dict().items() if k != "dropout_step"})
    return model


# ----------------------------------------------------------------------------- the reference side
@dataclass
class ReferenceGraph:
    """The one-part folder as PyG's input: row ``v`` is new global id ``v``."""

    data: Any
    """The part (:class:`partitioners.format.PartData`): link pairs, original ids."""
    adj: Any
    """torch sparse CSR ``[N, N]``, row = destination (the message-passing graph)."""
    x: Any
    y: Any
    masks: dict[str, Any]


def reference_graph(path: str) -> ReferenceGraph:
    """Part 0 of the one-part folder ``path`` as torch tensors."""
    import warnings

    import numpy as np
    import torch

    from partitioners.format import load_part

    data = load_part(path, 0, mmap=True, verify=True)
    n = data.num_inner
    indptr = torch.from_numpy(np.array(data.indptr, dtype=np.int64))
    indices = torch.from_numpy(np.array(data.indices, dtype=np.int64))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*[Ss]parse (CSR tensor support is in beta|invariant checks).*")
        adj = torch.sparse_csr_tensor(indptr, indices, torch.ones(indices.numel()), size=(n, n))
    y = None if data.labels is None else torch.from_numpy(np.array(data.labels))
    masks = {s: torch.from_numpy(np.array(getattr(data, f"{s}_mask"))) for s in ("train", "val", "test")}
    return ReferenceGraph(data=data, adj=adj, x=torch.from_numpy(np.array(data.features)), y=y, masks=masks)


def train_reference(model: Any, graph: ReferenceGraph, cfg: Mapping[str, Any], seed: int, epochs: int,
                    loss: Callable[[Any, int], Any]) -> Any:
    """Adam on ``loss(output, epoch)`` for ``epochs`` full-batch steps (torch's RNG seeded with
    ``seed``: PyG's dropout masks); returns the output in eval mode (no grad)."""
    import torch

    torch.manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"], weight_decay=cfg["weight_decay"])
    for epoch in range(epochs):
        model.train()
        opt.zero_grad(set_to_none=True)
        loss(model(graph.x, graph.adj), epoch).backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        return model(graph.x, graph.adj)


def roc_auc_columns(scores: Any, labels: Any) -> float:
    """The mean over the columns of ``[n, C]`` (or ``[n]``) ``scores`` whose 0/1 ``labels`` have
    both classes of the probability that a positive outscores a negative, ties one half (the
    Mann-Whitney U statistic over ``n+ n-``, from average ranks); NaN when no column has both."""
    import numpy as np
    from scipy.stats import rankdata

    s, y = np.asarray(scores, dtype=np.float64), np.asarray(labels) > 0.5
    s, y = s.reshape(s.shape[0], -1), y.reshape(y.shape[0], -1)
    aucs = []
    for c in range(s.shape[1]):
        pos = int(y[:, c].sum())
        neg = y.shape[0] - pos
        if pos and neg:
            u = rankdata(s[:, c])[y[:, c]].sum() - pos * (pos + 1) / 2
            aucs.append(u / (pos * neg))
    return float(np.mean(aucs)) if aucs else float("nan")


# ----------------------------------------------------------------------------- targets
@dataclass(frozen=True)
class Target:
    """The mean over seeds of ``test_{metric}`` within ``bound`` of the reference's: ``kind``
    ``"ratio"`` bounds ``|ours / ref - 1|`` (a relative error), ``"diff"`` ``|ours - ref|``."""

    metric: str
    kind: str
    bound: float

    def __post_init__(self) -> None:
        if self.kind not in ("ratio", "diff"):
            raise ValueError(f"Target kind {self.kind!r} is not 'ratio' or 'diff'")

    @property
    def label(self) -> str:
        return f"{self.metric} {'ratio' if self.kind == 'ratio' else 'diff'}"

    def value(self, ours: float, ref: float) -> float:
        """``ours / ref`` or ``ours - ref``."""
        return ours / ref if self.kind == "ratio" else ours - ref

    def met(self, value: float) -> bool:
        """Within the bound, inclusive (up to rounding: ``0.75 - 0.74`` is within 0.01)."""
        return abs(value - 1 if self.kind == "ratio" else value) <= self.bound + 1e-12

    def describe(self) -> str:
        if self.kind == "ratio":
            return f"|ratio - 1| <= {self.bound:g}"
        return f"|difference| <= {self.bound:g}"

    def fmt(self, value: float) -> str:
        return f"{value:.4f}" if self.kind == "ratio" else f"{value:+.4f}"


def mean_over_seeds(runs: Runs, key: str) -> float:
    return statistics.fmean(r[key] for r in runs.values())


def compare(ours: Runs, ref: Runs, metrics: Sequence[str], targets: Sequence[Target],
            split: str = "test") -> dict[str, Any]:
    """The means over seeds of ``{split}_{metric}`` on both sides, each target's value on the
    means (and per seed), and whether every target is met."""
    if set(ours) != set(ref):
        raise ValueError(f"the two sides ran other seeds: {sorted(ours)} vs {sorted(ref)}")
    means = {side: {m: mean_over_seeds(runs, f"{split}_{m}") for m in metrics}
             for side, runs in (("gnn_dist", ours), ("pyg", ref))}
    checks = {}
    for t in targets:
        value = t.value(means["gnn_dist"][t.metric], means["pyg"][t.metric])
        per_seed = {seed: t.value(ours[seed][f"{split}_{t.metric}"], ref[seed][f"{split}_{t.metric}"])
                    for seed in sorted(ours)}
        checks[t.label] = {"value": value, "per_seed": per_seed, "bound": t.bound, "kind": t.kind,
                           "met": t.met(value)}
    return {"split": split, "mean": means, "targets": checks, "met": all(c["met"] for c in checks.values())}


def parity_difference(ours: dict[str, float], ref: dict[str, float], targets: Sequence[Target]) -> float:
    """The largest relative difference ``|ours - ref| / |ref|`` of the targets' test metrics."""
    return max(abs(ours[f"test_{t.metric}"] - ref[f"test_{t.metric}"]) / max(abs(ref[f"test_{t.metric}"]), 1e-12)
               for t in targets)


def comparison_table(ours: Runs, ref: Runs, metrics: Sequence[str], targets: Sequence[Target],
                     split: str = "test") -> str:
    """One row per seed and the mean: each metric ``gnn-dist / PyG``, then each target's value."""
    result = compare(ours, ref, metrics, targets, split)
    headers = ["seed", f"{split} {metrics[0]} (gnn-dist / PyG)"] + [f"{split} {m}" for m in metrics[1:]] \
        + [t.label for t in targets]
    rows = []
    for seed in sorted(ours):
        rows.append([str(seed)] + [f"{ours[seed][f'{split}_{m}']:.4f} / {ref[seed][f'{split}_{m}']:.4f}"
                                   for m in metrics]
                    + [t.fmt(result["targets"][t.label]["per_seed"][seed]) for t in targets])
    means = result["mean"]
    rows.append(["mean"] + [f"{means['gnn_dist'][m]:.4f} / {means['pyg'][m]:.4f}" for m in metrics]
                + [t.fmt(result["targets"][t.label]["value"]) for t in targets])
    return common.markdown_table(headers, rows)


def target_lines(result: dict[str, Any], targets: Sequence[Target]) -> list[str]:
    """One line per target: the mean's value, the bound, met or NOT met."""
    lines = []
    for t in targets:
        c = result["targets"][t.label]
        what = "ratio gnn-dist / PyG" if t.kind == "ratio" else "difference gnn-dist - PyG"
        lines.append(f"- **Mean {result['split']} {t.metric} {what}: {t.fmt(c['value'])}** "
                     f"(target {t.describe()}: {'met' if c['met'] else 'NOT met'})")
    return lines


# ----------------------------------------------------------------------------- runs
def arguments(description: str, dataset: str | None, *, epochs: int, quick_epochs: int = 30, lr: float = 0.01,
              weight_decay: float = 5e-4, dropout: float = 0.5) -> argparse.ArgumentParser:
    """The options every task benchmark takes (with its defaults; ``dataset`` None: the script
    chooses one after parsing, e.g. by ``--quick``)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--dataset", default=dataset)
    ap.add_argument("--parts", type=int, default=2)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=epochs)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--lr", type=float, default=lr)
    ap.add_argument("--weight-decay", type=float, default=weight_decay)
    ap.add_argument("--dropout", type=float, default=dropout)
    ap.add_argument("--quick", action="store_true", help=f"1 seed, {quick_epochs} epochs")
    ap.add_argument("--cache-dir", default=str(Path(__file__).resolve().parent / ".cache"))
    ap.add_argument("--out", default=None, help="result stem (default benchmarks/results/[theme]_[hw]_[date])")
    ap.set_defaults(quick_epochs=quick_epochs)
    return ap


def seeds_and_epochs(a: argparse.Namespace) -> tuple[list[int], int]:
    """``--quick``: seed 0 and the quick epochs; else ``--seeds`` seeds and ``--epochs``."""
    return (list(range(1)), a.quick_epochs) if a.quick else (list(range(a.seeds)), a.epochs)


def base_config(a: argparse.Namespace, **trainer: Any) -> dict[str, Any]:
    return {"hidden": a.hidden, "lr": a.lr, "weight_decay": a.weight_decay, "trainer": trainer}


def run_comparison(ref_job: Callable[..., Runs], cfg: dict[str, Any], paths: Mapping[int, str], parts: int,
                   seeds: list[int], epochs: int, dropout: float, metrics: Sequence[str],
                   targets: Sequence[Target]) -> dict[str, Any]:
    """Parity (dropout off, :data:`PARITY_EPOCHS` epochs, seed 0) then the seeds, gnn-dist on
    ``parts`` ranks (folder ``paths[parts]``) and ``ref_job`` on one (``paths[1]``), timed."""
    sides = ((gnn_dist_job, parts, paths[parts], {}), (ref_job, 1, paths[1], {"init_group": False}))
    parity = [run_ranks(job, p, cfg, path, [0], PARITY_EPOCHS, 0.0, timeout=600, **kw)[0][0]
              for job, p, path, kw in sides]
    diff = parity_difference(parity[0], parity[1], targets)
    log.info(f"parity (dropout off, {PARITY_EPOCHS} epochs): "
             + ", ".join(f"test {t.metric} {parity[0]['test_' + t.metric]:.6f} vs {parity[1]['test_' + t.metric]:.6f}"
                         for t in targets) + f" (largest relative difference {diff:.2e})")
    runs, wall = [], []
    for job, p, path, kw in sides:
        out, t = common.timed(run_ranks, job, p, cfg, path, seeds, epochs, dropout, timeout=1200, **kw)
        runs.append(out[0])
        wall.append(t)
    return {"config": cfg, "parity": {"gnn_dist": parity[0], "pyg": parity[1], "relative": diff},
            "gnn_dist": runs[0], "pyg": runs[1], "wall_s": {"gnn_dist": wall[0], "pyg": wall[1]},
            "comparison": compare(runs[0], runs[1], metrics, targets)}


def comparison_markdown(result: dict[str, Any], metrics: Sequence[str], targets: Sequence[Target],
                        parts: int) -> str:
    """The parity line, the per-seed table, the target lines and the wall times of one comparison."""
    par = result["parity"]
    parity = ", ".join(f"test {t.metric} {par['gnn_dist']['test_' + t.metric]:.6f} vs "
                       f"{par['pyg']['test_' + t.metric]:.6f}" for t in targets)
    wall = result["wall_s"]
    return "\n".join([
        f"Parity (dropout off, {PARITY_EPOCHS} epochs): {parity}, relative difference {par['relative']:.2e}.",
        "",
        comparison_table(result["gnn_dist"], result["pyg"], metrics, targets),
        "",
        *target_lines(result["comparison"], targets),
        "",
        f"Wall time of the runs: gnn-dist {wall['gnn_dist']:.1f} s (P = {parts}), PyG {wall['pyg']:.1f} s.",
        "",
    ])


def write_report(theme: str, a: argparse.Namespace, markdown: str, payload: dict[str, Any], met: bool) -> int:
    """Print ``markdown``, write it and ``payload`` (with the environment) as the results of
    ``theme`` (``--out`` or the default stem, ``_quick`` with ``--quick``); 0 when ``met`` else 1."""
    print(markdown)
    stem = a.out or common.default_result_stem(theme, "_quick" if a.quick else "")
    json_path, md_path = common.write_results(stem, payload, markdown)
    log.info(f"wrote {json_path} and {md_path}")
    return 0 if met else 1


def gcn_settings(a: argparse.Namespace, epochs: int, loss: str) -> str:
    """The sentence naming the model and the training recipe of a report."""
    return (f"2-layer GCN, hidden {a.hidden}, dropout {a.dropout}, Adam lr {a.lr}, weight decay {a.weight_decay}, "
            f"{loss}, {epochs} epochs, the same initial weights per seed")


def report_header(a: argparse.Namespace, title: str, env: Mapping[str, Any], settings: str) -> list[str]:
    """A report's title line and settings paragraph (with the CPUs and the date)."""
    return [f"# {title}: gnn-dist (P = {a.parts}) vs PyG (one device), {a.dataset}", "",
            f"{settings}; {env['cpu_count']} CPUs, {env['date']}.", ""]


def run_node_task(a: argparse.Namespace, *, theme: str, title: str, loss: str, pyg_job: Callable[..., Runs],
                  metrics: Sequence[str], targets: Sequence[Target], trainer: dict[str, Any]) -> int:
    """A node task's whole benchmark: the partitions of ``--dataset``, :func:`run_comparison` with
    the ``Trainer`` keywords ``trainer``, the report and the result files (``theme``); the exit
    code (0: every target met)."""
    seeds, epochs = seeds_and_epochs(a)
    cfg = base_config(a, **trainer)
    paths = common.cached_metis_partitions(a.dataset, (1, a.parts), 0, a.cache_dir)
    result = run_comparison(pyg_job, cfg, paths, a.parts, seeds, epochs, a.dropout, metrics, targets)
    env = common.environment(PACKAGES)
    md = "\n".join([*report_header(a, title, env, gcn_settings(a, epochs, loss)),
                    comparison_markdown(result, metrics, targets, a.parts)])
    payload = {"config": {**cfg, "dataset": a.dataset, "parts": a.parts, "seeds": seeds, "epochs": epochs,
                          "dropout": a.dropout}, "environment": env, **result}
    return write_report(theme, a, md, payload, result["comparison"]["met"])
