r"""Link prediction, full graph, leak-free: score pairs of nodes from their embeddings.

The partition has an edge split (``gnn-dist partition --edge-split``): its validation and test
edges are removed from the message-passing graph, and every split's positive pairs are stored in
the part that owns the destination. The model's output rows are node embeddings (width: the
model's hidden width); a decoder (``--decoder dot|mlp``, the model's ``link_decoder``) scores a pair
:math:`(u, v)` as a logit :math:`s(u, v)`.

Loss (``bce``), per step: every training positive :math:`(u, v)` with one negative
:math:`(u, v')` drawn by :func:`~gnn_dist.link.negative_destinations` at the epoch,

.. math:: \mathcal{L} = \frac{1}{2 |E_{train}|} \sum_{(u, v)} -\log \sigma(s(u, v)) - \log(1 - \sigma(s(u, v'))),

the sum over every rank's positives divided by their global count, so P ranks compute the
one-device loss. The endpoints' rows are fetched from their owners once per step
(:class:`~gnn_dist.link.RowFetch`, differentiable).

Metrics, each split ranked against fixed negatives (``--eval-negatives M`` per positive, drawn at a
fixed step per split, so every evaluation sees the same): ``mrr`` the mean over positives of
:math:`1 / \mathrm{rank}`, with :math:`\mathrm{rank} = 1 + \#\{j: s_j > s\} + \frac{1}{2}\#\{j: s_j = s\}`
among the positive's own negatives; ``hits@K`` the share of positives with rank :math:`\le K`;
``auc`` the ROC-AUC of all the split's positives against all its negatives
(:func:`~gnn_dist.scoring.pair_auc`: only the positives travel).
Sums are all-reduced, so every rank reports the one-device numbers. The training split's metrics
are computed on a hash-drawn sample of its pairs as large as the validation split
(:meth:`LinkPrediction.eval_fraction`; the same pairs on any number of ranks). Model selection
watches ``val_mrr``.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch.nn.functional as F

from ..link import LinkEdges, RowFetch
from ..link.edges import LINK_SPLITS, PairSet
from ..link.score import score_pairs
from ..nn.link_decoder import build_decoder
from ..scoring import pair_auc
from .base import Task, count_ratios, register_task

__all__ = ["LinkPrediction"]

_EVAL_CHUNK = 2048
"""Evaluated positives scored at a time (with their negatives, in float64): bounds the
evaluation's memory."""


@register_task
class LinkPrediction(Task):
    """Pairs of nodes scored from their embeddings (a partition with an edge split)."""

    name = "link"
    label_kind = "edge-split"
    losses = ("bce",)
    predicts_nodes = False

    def __init__(self, loss: str | None = None, *, decoder: str = "dot", eval_negatives: int = 100,
                 hits_k: int = 10) -> None:
        super().__init__(loss)
        self.decoder_name, self.eval_negatives, self.hits_k = decoder, int(eval_negatives), int(hits_k)
        self.metrics_shown = ("mrr", f"hits@{self.hits_k}", "auc")
        self.edges: LinkEdges | None = None
        self.decoder: torch.nn.Module | None = None
        self.seed = 0
        self._train_fetch: RowFetch | None = None
        """The last training step's :class:`RowFetch` (its exchanger counts the bytes it moved)."""
        self.eval_pairs: dict[str, PairSet] = {}
        """Each split's evaluated pairs (:meth:`eval_fraction` of its pairs)."""

    @classmethod
    def from_options(cls, loss: str | None, options: Any) -> "LinkPrediction":
        if options is None:
            return cls(loss)
        return cls(loss, decoder=options.decoder, eval_negatives=options.eval_negatives, hits_k=options.hits_k)

    @classmethod
    def trains_on(cls, label_kind: str | None, edge_split: bool) -> bool:
        return bool(edge_split)

    @property
    def select_metric(self) -> str:
        return "mrr"

    def out_dim(self, num_classes: int, hidden: int | None = None) -> int:
        if hidden is None:
            raise ValueError("link prediction's output width is the model's hidden width: pass hidden=")
        return int(hidden)

    def width_problem(self, out_dim: int, num_classes: int) -> str | None:
        return None   # any embedding width

    def record(self) -> dict[str, Any]:
        """The task's options and which pairs each split's metrics are computed on: the training
        split's on a hashed sample (``eval_fractions``; every pair of ``val`` and ``test``)."""
        out = super().record() | {"decoder": self.decoder_name, "eval_negatives": self.eval_negatives,
                                  "hits_k": self.hits_k}
        if self.edges is not None:
            out["eval_fractions"] = {s: self.eval_fraction(s) for s in LINK_SPLITS}
        return out

    # ------------------------------------------------------------------ the part
    def check_data(self, meta: Any, where: Any) -> None:
        split = getattr(meta, "edge_split", None)
        if split is None:
            raise ValueError(f"{where}: the partition has no edge split to train link prediction on; "
                             f"partition with gnn-dist partition ... --edge-split 0.85,0.05,0.1")
        if not int(split["counts"]["train"]):
            raise ValueError(f"{where}: the edge split has no training edges; partition with a larger "
                             f"TRAIN fraction in --edge-split")

    def attach(self, model: torch.nn.Module, part: Any, seed: int) -> None:
        """The decoder becomes ``model.link_decoder`` (broadcast, all-reduced and saved with the
        model); the part's pairs and id maps are loaded."""
        self.add_modules(model)
        self.decoder = model.link_decoder
        self.edges = LinkEdges.from_partition(part)
        self.seed = int(seed)
        self.eval_pairs = {s: self.edges.sample(s, self.eval_fraction(s), self.seed) for s in LINK_SPLITS}

    def eval_fraction(self, split: str) -> float:
        """The share of ``split``'s pairs its metrics are computed on: all of them for ``val`` and
        ``test``; for ``train``, as many as the validation split has (the test split's when there
        is no validation split), drawn by :meth:`LinkEdges.sample` — training pairs outnumber
        the others (17 to 1 at ``--edge-split 0.85,0.05,0.1``), and each is ranked against
        ``--eval-negatives`` negatives, so scoring them all would dominate the evaluation's time
        and memory. (OGB's ``ogbl-citation2`` evaluates a training sample the size of its
        validation set alike.)"""
        assert self.edges is not None
        counts = self.edges.global_counts
        if split != "train" or not counts["train"]:
            return 1.0
        return min(1.0, (counts["val"] or counts["test"] or counts["train"]) / counts["train"])

    def add_modules(self, model: torch.nn.Module) -> None:
        """``model.link_decoder``: the decoder ``--decoder`` names, for embeddings of the model's
        ``out_dim`` (kept when the model has one already)."""
        width = getattr(model, "out_dim", None)
        if not isinstance(width, int):
            raise ValueError(f"link prediction needs a model with an integer out_dim (its embedding width), "
                             f"got {type(model).__name__}")
        if not hasattr(model, "link_decoder"):   # a typed model's relations: DistMult's diagonals
            model.add_module("link_decoder", build_decoder(self.decoder_name, width,
                                                           int(getattr(model, "num_relations", 1))))

    def model_options(self) -> dict[str, Any]:
        return {"decoder": self.decoder_name}

    def _scores(self, h: torch.Tensor, pairs: list[tuple[torch.Tensor, ...]], part: Any,
                chunk: int | None = None,
                decoder: torch.nn.Module | None = None) -> tuple[list[torch.Tensor], RowFetch]:
        """The decoder's logits of each ``(src [E], dst [E] or [E, M])`` of ``pairs``, from this
        rank's embeddings ``h`` ``[I, D]`` (:func:`~gnn_dist.link.score.score_pairs`; its
        and its :class:`RowFetch`); ``decoder`` defaults to the task's."""
        assert self.edges is not None and self.decoder is not None
        return score_pairs(self.decoder if decoder is None else decoder, h, pairs, self.edges.starts,
                           part.num_inner, chunk)

    # ------------------------------------------------------------------ loss and metrics
    def train_loss(self, logits: torch.Tensor, part: Any, epoch: int) -> torch.Tensor:
        assert self.edges is not None
        (pos_s, neg_s), self._train_fetch = self._scores(logits, self.edges.train_pairs(self.seed, epoch), part)
        total = (F.binary_cross_entropy_with_logits(pos_s, torch.ones_like(pos_s), reduction="sum")
                 + F.binary_cross_entropy_with_logits(neg_s, torch.zeros_like(neg_s), reduction="sum"))
        return total / (2 * self.edges.global_counts["train"])

    def step_fetch_bytes(self) -> int:
        fetch = self._train_fetch
        return 0 if fetch is None else int(fetch.exchanger.totals.bytes_sent)

    def metrics(self, logits: torch.Tensor, part: Any) -> dict[str, float]:
        assert self.edges is not None
        pairs, blocks = [], []
        for split in LINK_SPLITS:
            pos, negs = self.edges.eval_pairs(self.eval_pairs[split], split, self.seed, self.eval_negatives)
            pairs += [pos, *negs]
            blocks.append(len(negs))
        # scored in float64, then rounded to float32: the same pair scored twice (a positive drawn
        # as another's negative; in batches of other shapes, on other ranks) gets the same score
        # bit for bit, a tie, so P ranks rank as one device does
        decoder = copy.deepcopy(self.decoder).double()
        scored, _ = self._scores(logits.double(), pairs, part, chunk=_EVAL_CHUNK, decoder=decoder)
        scores = [s.float() for s in scored]
        del scored
        out: dict[str, float] = {}
        sums, at, aucs = [], 0, []
        for nb in blocks:   # a split: its positives, then its blocks of negatives
            pos = scores[at].double()
            ranks = [1 + (neg > pos[:, None]).sum(1).double() + 0.5 * (neg == pos[:, None]).sum(1).double()
                     for neg in (s.double() for s in scores[at + 1:at + 1 + nb])]
            rank = torch.cat(ranks)
            n = torch.tensor(float(rank.numel()), dtype=torch.float64)
            sums += [((1.0 / rank).sum(), n), ((rank <= self.hits_k).sum(), n)]
            aucs.append((scores[at], torch.cat(scores[at + 1:at + 1 + nb], 1) if nb > 1 else scores[at + 1]))
            at += 1 + nb
        ratios = count_ratios(sums)
        for i, split in enumerate(LINK_SPLITS):
            out[f"{split}_mrr"], out[f"{split}_hits@{self.hits_k}"] = ratios[2 * i], ratios[2 * i + 1]
            out[f"{split}_auc"] = pair_auc(*aucs[i])
        return out

    def predict(self, logits: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
        return None, logits   # the node embeddings; pairs are scored by the decoder

