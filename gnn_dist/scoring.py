"""Scores computed over every rank's rows: ROC-AUC of multi-label outputs (ogbn-proteins' metric)
and of link prediction's scored pairs.

ROC-AUC is not a sum of per-rank terms (it ranks every positive against every negative). For
multi-label outputs (:func:`gathered_roc_auc`) the rows of a mask are gathered on rank 0 (their
logits and labels, ``[n, C]`` each), scored there and the result broadcast; for pairs
(:func:`pair_auc`, whose negatives outnumber the positives ``--eval-negatives`` to one) only the
positives travel, and every rank counts its own negatives against them. Either way every rank
returns the same number, equal to what one device computes on the whole graph's rows.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .distributed import all_gather_rows, all_reduce_sum, broadcast_json, gather_rows, get_rank

__all__ = ["roc_auc", "gathered_roc_auc", "pair_auc"]


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    r"""Mean over the label columns that have both classes of the ROC-AUC (NaN when none does).

    Per column, with ties ranked on average (Mann-Whitney):
    :math:`\mathrm{AUC} = \frac{\sum_{i \in +} r_i - n_+ (n_+ + 1) / 2}{n_+ n_-}`, the probability that a
    random positive scores above a random negative (ties count one half).

    Args:
        scores: ``[n, C]`` (or ``[n]``) real scores, higher meaning more positive.
        labels: the same shape, 0/1.
    """
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels) > 0.5
    if s.ndim == 1:
        s, y = s[:, None], y[:, None]
    if s.shape != y.shape:
        raise ValueError(f"roc_auc: scores {list(s.shape)} and labels {list(y.shape)} must have the same shape")
    pos = y.sum(axis=0)
    neg = y.shape[0] - pos
    usable = (pos > 0) & (neg > 0)
    if not usable.any():
        return math.nan
    from scipy.stats import rankdata   # here: scipy.stats takes ~1.3 s to import, in every rank that loads a task

    ranks = rankdata(s[:, usable], axis=0)
    p, n = pos[usable].astype(np.float64), neg[usable].astype(np.float64)
    auc = ((ranks * y[:, usable]).sum(axis=0) - p * (p + 1) / 2) / (p * n)
    return float(auc.mean())


def gathered_roc_auc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """:func:`roc_auc` of this rank's ``scores`` and 0/1 ``labels`` (``[n_r]`` or ``[n_r, C]``, the
    same shape) together with every other rank's (a collective: the rows are gathered on rank 0,
    scored there in float64, and the score broadcast)."""
    if scores.shape != labels.shape:
        raise ValueError(f"gathered_roc_auc: scores {list(scores.shape)} and labels {list(labels.shape)} "
                         f"must have the same shape")
    s = scores.detach().reshape(scores.shape[0], -1).double()
    rows = gather_rows(torch.cat([s, labels.reshape(s.shape).double()], dim=1))
    value = None
    if get_rank() == 0:
        assert rows is not None
        both = torch.cat(rows).cpu().numpy()
        c = s.shape[1]
        value = roc_auc(both[:, :c], both[:, c:])
    out = broadcast_json(value)
    return math.nan if out is None else float(out)


def pair_auc(pos: torch.Tensor, neg: torch.Tensor) -> float:
    r"""ROC-AUC of every rank's positive scores ``pos`` against every rank's negative scores
    ``neg`` (any shapes), exactly :func:`roc_auc` of them all:
    :math:`\mathrm{AUC} = \frac{\#\{(p, n): s_p > s_n\} + \frac{1}{2} \#\{(p, n): s_p = s_n\}}{n_+ n_-}`.

    A collective that moves only the positives: they are all-gathered, each rank counts for each
    of them its own negatives below and equal (a binary search in its sorted negatives), and the
    integer counts are summed over ranks (float64, exact below 2^53). Memory per rank: 24 bytes
    per positive of the whole graph and 16 per local negative, instead of every score on one rank
    (link prediction has ``--eval-negatives`` negatives per positive)."""
    every_pos = torch.cat(all_gather_rows(pos.detach().reshape(-1).double()))
    ordered = torch.sort(neg.detach().reshape(-1).double().to(every_pos.device)).values
    below = torch.searchsorted(ordered, every_pos, right=False)
    upto = torch.searchsorted(ordered, every_pos, right=True)
    counts = torch.stack([below.sum(), (upto - below).sum(), below.new_tensor(ordered.numel())]).double()
    all_reduce_sum(counts)
    pairs = every_pos.numel() * counts[2].item()
    return (counts[0].item() + 0.5 * counts[1].item()) / pairs if pairs else math.nan
