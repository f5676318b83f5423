"""Scores computed over every rank's rows: ROC-AUC of multi-label outputs (ogbn-proteins' metric).

ROC-AUC is not a sum of per-rank terms (it ranks every positive against every negative), so the
rows of a mask are gathered on rank 0 (their logits and labels, ``[n, C]`` each), scored there
and the result broadcast: every rank returns the same number, equal to what one device computes
on the whole graph's rows.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.stats import rankdata

from .distributed import broadcast_json, gather_rows, get_rank

__all__ = ["roc_auc", "multilabel_roc_auc"]


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
    ranks = rankdata(s[:, usable], axis=0)
    p, n = pos[usable].astype(np.float64), neg[usable].astype(np.float64)
    auc = ((ranks * y[:, usable]).sum(axis=0) - p * (p + 1) / 2) / (p * n)
    return float(auc.mean())


def multilabel_roc_auc(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """:func:`roc_auc` of this rank's rows ``[n_r, C]`` together with every other rank's (a
    collective: a gather on rank 0, then a broadcast of the score)."""
    rows = gather_rows(torch.cat([logits.detach().float(), labels.float()], dim=1))
    value = None
    if get_rank() == 0:
        assert rows is not None
        both = torch.cat(rows).cpu().numpy()
        c = logits.shape[1]
        value = roc_auc(both[:, :c], both[:, c:])
    out = broadcast_json(value)
    return math.nan if out is None else float(out)
