"""Link prediction benchmark (issue 20): gnn-dist on P ranks against a single-device PyG
reference of the same model and decoder, in one run.

Dataset: a catalog graph with SBM communities (default ``sbm-small``: 10,000 nodes, 20
communities) with an edge split (``--edge-split``, default 0.85/0.05/0.1, as ``gnn-dist partition
--edge-split``: the val/test pairs are not in the message-passing graph), METIS partitions at
P = 1 and P (default 2), cached under ``benchmarks/.cache``.

Model: a 2-layer GCN whose output is a node embedding of the hidden width, and a decoder
(``--decoders``: ``dot``, ``mlp``); dropout 0.5 after the hidden layer, Adam (lr 0.01, no weight
decay), full batch, 100 epochs, the last epoch's weights. For each seed both
sides start from the same weights (gnn-dist's GCN and decoder built with the seed, copied into
PyG's ``GCNConv`` stack and the benchmark's own decoder), and draw the same training negatives:

- **gnn-dist**: ``Trainer(..., task="link")`` on P gloo ranks;
- **PyG**: ``torch_geometric.nn.GCNConv`` layers on one device, on the one-part folder's graph.
  Written here in plain torch, not with gnn-dist's task code: the loss (every training positive
  and one negative each, ``-(sum log sigma(s+) + sum log(1 - sigma(s-))) / (2 |E_train|)``), the
  decoders, and the metrics as ``gnn_dist/tasks/link.py`` documents them: each positive ranked
  against its ``--eval-negatives`` fixed negatives (MRR with ties one half, Hits@K), and the
  ROC-AUC of all positives against all negatives (scores in float64, rounded to float32). The negatives (training: one per positive and
  epoch; evaluation: a fixed draw per split) come from gnn-dist's sampler,
  ``gnn_dist.link.negatives.negative_destinations``, keyed by original ids, so that the two sides
  differ only in the dropout masks.

A parity check first runs both with dropout off for 20 epochs: the metrics agree to ~1e-6 with the
dot decoder; with the MLP decoder to ~1e-4 only, float32 rounding amplified by Adam (its update
normalises the tiny gradients of the decoder's nearly dead ReLU units): measured on sbm-tiny, the
reference against itself with its initial weights scaled by 1 + 1e-7 noise moves by as much
(MRR 5e-4 relative), gnn-dist at P = 1 against P = 2 too, and with SGD all agree to ~1e-6.

Target: the mean over seeds of the test MRR, Hits@10 and AUC of gnn-dist within 1 point (0.01)
of PyG's, for each decoder.

Usage (from the repository root)::

    python benchmarks/link_prediction.py            # sbm-small, P = 2, 3 seeds, dot and mlp
    python benchmarks/link_prediction.py --quick    # sbm-tiny, 1 seed, 30 epochs (seconds)

Results: ``benchmarks/results/link_prediction_[hardware]_[date][_quick].{md,json}``.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import common
import task_reference as tr

METRICS = ("mrr", "hits@10", "auc")
TARGETS = tuple(tr.Target(m, "diff", 0.01) for m in METRICS)
SCORE_CHUNK = 2048
"""Positives scored at a time against their evaluation negatives (bounds the memory)."""


def reference_decoder(name: str, dim: int) -> Any:
    """The benchmark's own decoders: ``dot`` the inner product of the two embeddings, ``mlp``
    ``Linear(dim, 1)(relu(Linear(dim, dim)(h_u * h_v)))`` (parameters named like gnn-dist's)."""
    import torch

    class Dot(torch.nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return torch.einsum("...d,...d->...", a, b)

    class Mlp(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin1, self.lin2 = torch.nn.Linear(dim, dim), torch.nn.Linear(dim, 1)

        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return self.lin2(self.lin1(a * b).relu())[..., 0]

    return {"dot": Dot, "mlp": Mlp}[name]()


class ReferencePairs:
    """The one-part folder's positive pairs by split (new ids = rows), and their negatives drawn
    by gnn-dist's sampler from the pairs' original ids."""

    def __init__(self, g: tr.ReferenceGraph) -> None:
        import numpy as np
        import torch

        d = g.data
        self.num_nodes = int(d.num_inner)
        original = np.asarray(d.original_ids[:self.num_nodes], dtype=np.int64)   # row -> original id
        self.row_of = np.empty(self.num_nodes, dtype=np.int64)
        self.row_of[original] = np.arange(self.num_nodes)
        self.pairs = {s: torch.from_numpy(np.array(getattr(d, f"link_{s}"), dtype=np.int64))
                      for s in ("train", "val", "test")}
        self.original = {s: original[p.numpy()] for s, p in self.pairs.items()}

    def negatives(self, split: str, seed: int, step: int, k: int) -> Any:
        """int64 ``[E, k]`` rows: the ``k`` negative destinations of each pair of ``split``."""
        import torch

        from gnn_dist.link.negatives import negative_destinations

        o = self.original[split]
        return torch.from_numpy(self.row_of[negative_destinations(seed, step, o[0], o[1], self.num_nodes, k)])


def pair_loss(decoder: Any, h: Any, pos: Any, neg_dst: Any) -> Any:
    """BCE of the positives ``pos`` ``[2, E]`` (label 1) and ``(src, neg_dst)`` (label 0), over ``2E``."""
    import torch.nn.functional as F

    src, dst = pos
    s_pos, s_neg = decoder(h[src], h[dst]), decoder(h[src], h[neg_dst])
    return -(F.logsigmoid(s_pos).sum() + F.logsigmoid(-s_neg).sum()) / (2 * src.numel())


def ranking_metrics(pos: Any, neg: Any, k: int) -> dict[str, float]:
    """MRR and Hits@``k`` of positives ``[E]`` each ranked among its negatives ``[E, M]``
    (rank = 1 + higher + half the ties), and the ROC-AUC of all positives against all negatives."""
    import torch

    pos, neg = pos.double(), neg.double()
    rank = 1 + (neg > pos[:, None]).sum(1).double() + 0.5 * (neg == pos[:, None]).sum(1).double()
    scores = torch.cat([pos, neg.reshape(-1)])
    labels = torch.cat([torch.ones(pos.numel()), torch.zeros(neg.numel())])
    return {"mrr": float((1.0 / rank).mean()), f"hits@{k}": float((rank <= k).double().mean()),
            "auc": tr.roc_auc_columns(scores.numpy(), labels.numpy())}


def split_metrics(decoder: Any, h: Any, pairs: ReferencePairs, split: str, seed: int, m: int,
                  k: int) -> dict[str, float]:
    """:func:`ranking_metrics` of ``split`` against its fixed evaluation negatives (gnn-dist's
    ``EVAL_STEP`` of the split, ``m`` per positive). Scored in float64 and rounded to float32, so
    that a negative drawn equal to the positive's destination ties with it, as the definition
    wants, although the two are computed in batches of other shapes."""
    import copy

    import torch

    from gnn_dist.link.negatives import EVAL_STEP

    src, dst = pairs.pairs[split]
    neg = pairs.negatives(split, seed, EVAL_STEP[split], m)
    decoder, h = copy.deepcopy(decoder).double(), h.double()
    with torch.no_grad():
        pos_s = decoder(h[src], h[dst]).float()
        neg_s = torch.cat([decoder(h[src[a:a + SCORE_CHUNK]][:, None, :].expand(-1, m, -1), h[neg[a:a + SCORE_CHUNK]])
                           for a in range(0, src.numel(), SCORE_CHUNK)]).float()
    return ranking_metrics(pos_s, neg_s, k)


def pyg_job(rank: int, world_size: int, cfg: dict[str, Any], path: str, seeds: list[int], epochs: int,
            dropout: float) -> tr.Runs:
    """PyG on one device, from the same initial weights and with the same negatives as gnn-dist's
    of each seed; the val and test metrics."""
    g = tr.reference_graph(path)
    pairs = ReferencePairs(g)
    m, k = cfg["trainer"]["eval_negatives"], cfg["trainer"]["hits_k"]
    out = {}
    for seed in seeds:
        model = tr.reference_model(cfg, g.x.shape[1], cfg["hidden"], seed, dropout,
                                   decoder=reference_decoder(cfg["decoder"], cfg["hidden"]))

        def loss(h: Any, epoch: int) -> Any:
            negatives = pairs.negatives("train", seed, epoch, 1)[:, 0]
            return pair_loss(model.link_decoder, h, pairs.pairs["train"], negatives)

        h = tr.train_reference(model, g, cfg, seed, epochs, loss)
        out[seed] = {f"{s}_{name}": v for s in ("val", "test")
                     for name, v in split_metrics(model.link_decoder, h, pairs, s, seed, m, k).items()}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = tr.arguments(__doc__.split("\n\n")[0], None, epochs=100, quick_epochs=30, weight_decay=0.0)
    ap.add_argument("--decoders", default="dot,mlp", help="comma-separated: dot, mlp")
    ap.add_argument("--edge-split", default="0.85,0.05,0.1", help="TRAIN,VAL,TEST fractions of the edges")
    ap.add_argument("--eval-negatives", type=int, default=100)
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    a.dataset = a.dataset or ("sbm-tiny" if a.quick else "sbm-small")
    seeds, epochs = tr.seeds_and_epochs(a)
    split = tuple(float(f) for f in a.edge_split.split(","))
    paths = common.cached_metis_partitions(a.dataset, (1, a.parts), 0, a.cache_dir, edge_split=split)
    env = common.environment(tr.PACKAGES)
    results, sections = {}, []
    for name in a.decoders.split(","):
        cfg = {**tr.base_config(a, task="link", decoder=name, eval_negatives=a.eval_negatives, hits_k=10),
               "decoder": name}
        results[name] = tr.run_comparison(pyg_job, cfg, paths, a.parts, seeds, epochs, a.dropout, METRICS, TARGETS)
        sections += [f"## Decoder `{name}`", "", tr.comparison_markdown(results[name], METRICS, TARGETS, a.parts)]
    met = all(r["comparison"]["met"] for r in results.values())
    settings = (f"Edge split {a.edge_split} (train, val, test); "
                + tr.gcn_settings(a, epochs, "BCE of every training edge and one hash negative each, the same "
                                              "negatives on both sides")
                + f"; the embedding is the GCN's output (width {a.hidden}); metrics against {a.eval_negatives} "
                  f"fixed negatives per positive")
    md = "\n".join([*tr.report_header(a, "Link prediction", env, settings), *sections,
                    f"All targets: {'met' if met else 'NOT met'}.", ""])
    payload = {"config": {"dataset": a.dataset, "edge_split": split, "parts": a.parts, "seeds": seeds,
                          "epochs": epochs, "dropout": a.dropout, "eval_negatives": a.eval_negatives},
               "environment": env, "decoders": results}
    return tr.write_report("link_prediction", a, md, payload, met)


if __name__ == "__main__":
    sys.exit(main())
