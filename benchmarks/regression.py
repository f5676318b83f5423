"""Node regression benchmark (issue 20): gnn-dist on P ranks against a single-device PyG
reference of the same model, in one run.

Dataset: the catalog's ``sbm-regression`` (``sbm-tiny``'s graph and features, 4 float targets
planted over the graph: a random linear map of the 2-hop mean features plus noise), METIS
partitions at P = 1 and P (default 2), cached under ``benchmarks/.cache``.

Model: a 2-layer GCN (hidden 64, ReLU, dropout 0.5 after the hidden layer), Adam (lr 0.01,
weight decay 5e-4), MSE loss on the training mask, full batch, 200 epochs, the last epoch's
weights. For each seed both sides start from the same weights (gnn-dist's GCN built with the
seed, copied into PyG's ``GCNConv`` stack: the layers name their parameters alike):

- **gnn-dist**: ``Trainer(..., loss="mse")`` on P gloo ranks (exact: what one device trains,
  its dropout masks keyed by original node id);
- **PyG**: ``torch_geometric.nn.GCNConv`` layers on one device (``cached=True``, sparse
  ``adj_t`` of the one-part folder, i.e. the same graph), ``F.dropout``, ``F.mse_loss``.

The two differ only in the dropout masks (a hash of the node id in gnn-dist, torch's RNG in
PyG), so their errors are compared over ``--seeds`` seeds (mean). A parity check first runs both
with dropout off for 20 epochs: the test MSEs must agree to ~1e-5 (the same computation).

Target: the mean test MSE of gnn-dist within 2% relative error of PyG's
(``|mse_ours / mse_pyg - 1| <= 0.02``); the MAE and R^2 are shown beside it.

Usage (from the repository root)::

    python benchmarks/regression.py                # P = 2, 3 seeds, 200 epochs (~1 min on 2 cores)
    python benchmarks/regression.py --quick        # 1 seed, 30 epochs (seconds)
    python benchmarks/regression.py --parts 3 --seeds 5

Results: ``benchmarks/results/regression_[hardware]_[date][_quick].{md,json}``.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent

import common  # noqa: E402
from mp_utils import run_ranks  # noqa: E402

log = logging.getLogger("benchmarks.regression")

METRICS = ("mse", "mae", "r2")


def _gcn(cfg: dict[str, Any], in_dim: int, out_dim: int, seed: int, dropout: float) -> Any:
    import torch

    from gnn_dist.models import GCN

    torch.manual_seed(seed)
    return GCN(in_dim, cfg["hidden"], out_dim, 2, dropout=dropout, seed=seed)


def gnn_dist_job(rank: int, world_size: int, cfg: dict[str, Any], path: str, seeds: list[int], epochs: int,
                 dropout: float) -> dict[int, dict[str, float]]:
    """gnn-dist on this rank's part: the final test/val/train metrics of each seed (every rank)."""
    import torch

    import gnn_dist

    torch.set_num_threads(1)
    part = gnn_dist.load_partition(path)
    out = {}
    for seed in seeds:
        model = _gcn(cfg, part.feature_dim, part.num_classes, seed, dropout)
        trainer = gnn_dist.Trainer(model, part, lr=cfg["lr"], weight_decay=cfg["weight_decay"], loss="mse",
                                   log_every=0, eval_every=0)
        trainer.fit(epochs)
        out[seed] = trainer.evaluate()
    return out


def _pyg_model(cfg: dict[str, Any], in_dim: int, out_dim: int, dropout: float) -> Any:
    import torch
    import torch.nn.functional as F
    from torch_geometric.nn import GCNConv

    class PygGCN(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.convs = torch.nn.ModuleList([GCNConv(in_dim, cfg["hidden"], cached=True),
                                              GCNConv(cfg["hidden"], out_dim, cached=True)])

        def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
            x = F.dropout(F.relu(self.convs[0](x, adj)), dropout, self.training)
            return self.convs[1](x, adj)

    return PygGCN()


def pyg_job(rank: int, world_size: int, cfg: dict[str, Any], path: str, seeds: list[int], epochs: int,
            dropout: float) -> dict[int, dict[str, float]]:
    """PyG on one device, from the same initial weights as gnn-dist's of each seed."""
    import warnings

    import numpy as np
    import torch
    import torch.nn.functional as F

    from partitioners.format import load_part

    torch.set_num_threads(1)
    data = load_part(path, 0, mmap=True, verify=True)
    n = data.num_inner
    indptr = torch.from_numpy(np.array(data.indptr, dtype=np.int64))
    indices = torch.from_numpy(np.array(data.indices, dtype=np.int64))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*[Ss]parse CSR tensor support is in beta.*")
        adj = torch.sparse_csr_tensor(indptr, indices, torch.ones(indices.numel()), size=(n, n))
    x, y = torch.from_numpy(np.array(data.features)), torch.from_numpy(np.array(data.labels))
    masks = {s: torch.from_numpy(np.array(getattr(data, f"{s}_mask"))) for s in ("train", "val", "test")}
    out = {}
    for seed in seeds:
        ours = _gcn(cfg, x.shape[1], y.shape[1], seed, dropout)
        model = _pyg_model(cfg, x.shape[1], y.shape[1], dropout)
        model.load_state_dict({f"convs.{i}.{k}": v.detach().clone() for i, conv in enumerate(ours.convs)
                               for k, v in conv.state_dict().items()})
        torch.manual_seed(seed)
        opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"], weight_decay=cfg["weight_decay"])
        for _ in range(epochs):
            model.train()
            opt.zero_grad(set_to_none=True)
            F.mse_loss(model(x, adj)[masks["train"]], y[masks["train"]]).backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            pred = model(x, adj).double()
        res = {}
        for s, m in masks.items():
            e, t = pred[m] - y[m].double(), y[m].double()
            res[f"{s}_mse"] = float((e * e).mean())
            res[f"{s}_mae"] = float(e.abs().mean())
            res[f"{s}_r2"] = float((1 - (e * e).sum(0) / ((t - t.mean(0)) ** 2).sum(0)).mean())
        out[seed] = res
    return out


def _mean(runs: dict[int, dict[str, float]], key: str) -> float:
    return statistics.fmean(r[key] for r in runs.values())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="sbm-regression")
    ap.add_argument("--parts", type=int, default=2)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=200)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--dropout", type=float, default=0.5)
    ap.add_argument("--quick", action="store_true", help="1 seed, 30 epochs")
    ap.add_argument("--cache-dir", default=str(_HERE / ".cache"))
    ap.add_argument("--out", default=None, help="result stem (default benchmarks/results/regression_[hw]_[date])")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    seeds, epochs = (list(range(1)), 30) if a.quick else (list(range(a.seeds)), a.epochs)
    cfg = {"hidden": a.hidden, "lr": a.lr, "weight_decay": a.weight_decay}
    paths = common.cached_metis_partitions(a.dataset, (1, a.parts), 0, a.cache_dir)

    # parity: dropout off, 20 epochs, the same computation on both sides
    parity_ours = run_ranks(gnn_dist_job, a.parts, cfg, paths[a.parts], [0], 20, 0.0, timeout=600)[0][0]
    parity_pyg = run_ranks(pyg_job, 1, cfg, paths[1], [0], 20, 0.0, init_group=False, timeout=600)[0][0]
    parity = abs(parity_ours["test_mse"] - parity_pyg["test_mse"]) / parity_pyg["test_mse"]
    log.info(f"parity (dropout off, 20 epochs): test mse gnn-dist {parity_ours['test_mse']:.6f}, "
             f"PyG {parity_pyg['test_mse']:.6f} (relative difference {parity:.2e})")

    (ours, t_ours) = common.timed(run_ranks, gnn_dist_job, a.parts, cfg, paths[a.parts], seeds, epochs, a.dropout,
                                  timeout=1200)
    ours = ours[0]
    (pyg, t_pyg) = common.timed(run_ranks, pyg_job, 1, cfg, paths[1], seeds, epochs, a.dropout, init_group=False,
                                timeout=1200)
    pyg = pyg[0]
    ratio = _mean(ours, "test_mse") / _mean(pyg, "test_mse")
    rows = []
    for seed in seeds:
        rows.append([str(seed)] + [f"{ours[seed][f'test_{m}']:.4f} / {pyg[seed][f'test_{m}']:.4f}" for m in METRICS]
                    + [f"{ours[seed]['test_mse'] / pyg[seed]['test_mse']:.4f}"])
    rows.append(["mean"] + [f"{_mean(ours, f'test_{m}'):.4f} / {_mean(pyg, f'test_{m}'):.4f}" for m in METRICS]
                + [f"{ratio:.4f}"])
    ok = abs(ratio - 1) <= 0.02
    env = common.environment(["torch", "torch_geometric", "numpy", "gnn_dist"])
    md = "\n".join([
        f"# Node regression: gnn-dist (P = {a.parts}) vs PyG (one device), {a.dataset}",
        "",
        f"2-layer GCN, hidden {a.hidden}, dropout {a.dropout}, Adam lr {a.lr}, weight decay {a.weight_decay}, "
        f"MSE loss, {epochs} epochs, the same initial weights per seed; {env['cpu_count']} CPUs, "
        f"{env['date']}.",
        "",
        f"Parity (dropout off, 20 epochs): test MSE {parity_ours['test_mse']:.6f} vs {parity_pyg['test_mse']:.6f}, "
        f"relative difference {parity:.2e}.",
        "",
        common.markdown_table(["seed", "test mse (gnn-dist / PyG)", "test mae", "test r2", "mse ratio"], rows),
        "",
        f"**Mean test MSE ratio gnn-dist / PyG: {ratio:.4f}** (relative error {abs(ratio - 1):.2%}; target <= 2%: "
        f"{'met' if ok else 'NOT met'}). Wall time of the runs: gnn-dist {t_ours:.1f} s (P = {a.parts}), "
        f"PyG {t_pyg:.1f} s.",
        "",
    ])
    print(md)
    stem = a.out or common.default_result_stem("regression", "_quick" if a.quick else "")
    payload = {"config": {**cfg, "dataset": a.dataset, "parts": a.parts, "seeds": seeds, "epochs": epochs,
                          "dropout": a.dropout}, "environment": env, "parity": {"gnn_dist": parity_ours,
                                                                                  "pyg": parity_pyg,
                                                                                  "relative": parity},
               "gnn_dist": ours, "pyg": pyg, "test_mse_ratio": ratio, "target_met": ok,
               "wall_s": {"gnn_dist": t_ours, "pyg": t_pyg}}
    json_path, md_path = common.write_results(stem, payload, md)
    log.info(f"wrote {json_path} and {md_path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
