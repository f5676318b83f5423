r"""The ``task`` component: what a task holds and computes besides the model's layers (node tasks:
nothing; link prediction: its pairs, the node map, and the larger of its training step's and its
evaluation's transients).

Legend (one rank, :class:`~.sizes.PartSizes` and :class:`~.model.Workload`): ``T, V, X`` this
part's train, val and test pairs; ``f`` the share of the training pairs evaluated
(``gnn_dist.tasks.link.LinkPrediction.eval_fraction``: the validation split's size over the
training split's); ``Q = V + X + f T`` the pairs the evaluation scores; ``N`` the graph's nodes;
``D`` the embedding width (``--hidden``); ``M`` ``--eval-negatives``; ``c`` the positives scored
at a time (``gnn_dist.tasks.link._EVAL_CHUNK``, at most the largest split's ``Q_s``).

Link prediction (``gnn_dist/tasks/link.py``, ``gnn_dist/link/``), on top of the node task's rank:

- **held** ``32 (T + V + X) + 32 f T + 8 N``: each split's pairs and their original ids (int64
  ``[2, E]`` each), the training sample's own copies, and the node map (int64 ``[N]``,
  memory-mapped: the hashed negatives touch every page of it, so it is all resident);
- **step** ``T (4 k D + 32) + 4 D (I + 2 R)``: the training loss's endpoint rows,
  float32 ``[T, D]`` gathered from the :class:`~gnn_dist.link.RowFetch` table, kept for backward
  and their gradients (:data:`STEP_ROWS` ``k`` of them per decoder), the fetch's index (int64
  ``[4 T]``), the table and its gradient (``[I + R, D]``, ``R`` the remote endpoints' rows, with
  the exchange's buffers). Its backward runs before the model's layers', so
  it counts only beyond the model's ``workspace`` (less :data:`~.model.STEP_RUNTIME_BYTES`);
- **evaluation** (no gradients; after the step's tensors are freed, so it counts only beyond the
  model's ``activations + workspace``): the step's fetch index ``32 T`` (kept until the next
  step) and the largest of three phases, with ``Z = Q (M + 3)`` the ids of the evaluated pairs'
  endpoints and negatives:

  - *fetch*: the negatives ``8 Q M`` (int64 ``[Q_s, M]`` per split) and the
    :class:`~gnn_dist.link.RowFetch`'s ids, their ``torch.unique`` and its index,
    :data:`UNIQUE_FACTOR` ``x 8 Z``;
  - *scoring*: the negatives, the float64 scores so far ``16 Q M``, the fetch's ids and index
    ``16 Z``, the float64 table ``8 D (I + 2 R)`` and the chunk's float64 ``[c, M, D]``
    temporaries, :data:`EVAL_ROWS` of them per decoder;
  - *ranking*: the negatives, the index and float32 scores ``20 Q M``, and for the largest
    split the ROC-AUC's work (``gnn_dist.scoring.pair_auc``): :data:`AUC_NEGATIVE_BYTES` per
    local negative (``Q_s M``) and :data:`AUC_POSITIVE_BYTES` per positive of every part
    (``Q_g``: the positives are all-gathered, the negatives stay on their rank).

The rank's peak is the node task's components plus ``held + max(step - workspace, evaluation -
activations - workspace)`` (both without :data:`~.model.STEP_RUNTIME_BYTES`, the heap the step
leaves, which stays). ``R``: ``N - I`` on more than one part (the hashed negatives are uniform
over the nodes: every row is some pair's endpoint once ``T`` or ``Q M`` is well above ``N``), at
most the pairs' endpoints. Calibrated on sbm-small and sbm-medium with ``--edge-split
0.85,0.05,0.1`` at P = 1, 2 (``benchmarks/memory_plan.py``'s link cases; ``docs/performance.md``
"Memory planner": every rank within 7%).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["TASK_FORMULAS", "task_bytes", "link_held", "link_step", "link_evaluation"]

STEP_ROWS: dict[str, float] = {"dot": 5.8, "mlp": 9.4, "distmult": 6.8}
"""Decoder -> float32 ``[T, D]`` tensors of the training step's peak: the four gathered endpoint
rows (two per pair, kept for backward; the MLP also its product and hidden layer per pair) and
the backward's gradients of them (fitted: sbm-small P = 1 and sbm-medium P = 1, 2, hidden 32-128:
dot 5.6-6.3, MLP 9.3-9.8; DistMult counted as dot's and its product with the diagonals, not fitted)."""
EVAL_ROWS: dict[str, float] = {"dot": 2.0, "mlp": 3.0, "distmult": 3.0}
"""Decoder -> float64 ``[c, M, D]`` tensors alive while a chunk is scored: dot the gathered
destinations and their product with the (broadcast) sources; MLP the destinations, the product
and the hidden layer (its input freed as its ReLU is made); DistMult the destinations, the
sources times the diagonals and their product."""
AUC_NEGATIVE_BYTES = 32
"""Bytes per local negative score of ``pair_auc``: its float64 copy (8), and ``torch.sort``'s
values and int64 indices (16), beside the ranking's float64 copy (8). Counted from the code, not
fitted (the fitted constants of the rank-0 gather it replaced: 40 B per score on every rank and
67 more per gathered score on rank 0)."""
AUC_POSITIVE_BYTES = 40
"""Bytes per positive of every part in ``pair_auc``: the all-gather's padded receive buffers
(8), their concatenation (8) and the two int64 ``torch.searchsorted`` results and their
difference (24). Counted from the code, not fitted."""
UNIQUE_FACTOR = 5.2
"""The evaluation's :class:`~gnn_dist.link.RowFetch`: its ids ``[Z]``, ``Z = Q (M + 3)``, their
``torch.unique`` (a sorted copy, the sort's int64 indices, the inverse) and the index, in units of
``8 Z`` (measured 5.17 on sbm-medium, one part)."""
STEP_PAIR_BYTES = 32
"""Bytes per training pair besides the rows at the backward's peak: the fetch's int64 index of
the four endpoints (the ids, their ``torch.unique`` and the hashed negatives are freed before)."""


def _eval_fraction(s: Any) -> float:
    """``f``: the training pairs' evaluated share, as ``LinkPrediction.eval_fraction`` draws it."""
    train, val, test = s.link_global
    return 1.0 if not train else min(1.0, (val or test or train) / train)


def _evaluated(s: Any) -> tuple[float, float]:
    """``(Q, the largest split's Q_s)``: this part's evaluated pairs, in all and in one split."""
    train, val, test = s.link_pairs
    per_split = (train * _eval_fraction(s), val, test)
    return sum(per_split), max(per_split)


def link_held(w: Any, s: Any) -> int:
    """``32 (T + V + X) + 32 f T + 8 N`` (module docstring)."""
    return int(32 * sum(s.link_pairs) + 32 * _eval_fraction(s) * s.link_pairs[0] + 8 * s.num_nodes)


def _table_rows(s: Any, endpoints: float) -> float:
    """``I + 2 R``: the fetch table's rows (the inner rows and ``R`` remote rows) plus the
    exchange's receive buffer (``R``), ``R = min(N - I, endpoints)`` on more than one part."""
    remote = 0 if s.num_parts <= 1 else min(max(s.num_nodes - s.inner, 0), endpoints)
    return s.inner + 2 * remote


def link_step(w: Any, s: Any) -> int:
    """``T (4 k D + 32) + 4 D (I + 2 R)`` (module docstring)."""
    train = s.link_pairs[0]
    rows = STEP_ROWS.get(w.decoder, STEP_ROWS["mlp"])
    return int(train * (rows * w.hidden * 4 + STEP_PAIR_BYTES) + 4 * w.hidden * _table_rows(s, 2 * train))


def link_evaluation(w: Any, s: Any) -> int:
    """The largest of the fetch's, the scoring's and the ranking's peak (module docstring), on
    top of the training step's fetch index ``32 T`` (kept until the next step)."""
    from ..tasks.link import _EVAL_CHUNK

    m, d = w.eval_negatives * (2 if s.typed is not None else 1), w.hidden   # triples: M tails and M heads
    q, q_max = _evaluated(s)
    ids = q * (m + 3)
    fetch = 8 * q * m + UNIQUE_FACTOR * 8 * ids
    scoring = (16 * q * m + 16 * ids + 8 * d * _table_rows(s, q * (m + 1))
               + EVAL_ROWS.get(w.decoder, EVAL_ROWS["mlp"]) * min(_EVAL_CHUNK, q_max) * m * d * 8)
    ranking = 20 * q * m + AUC_NEGATIVE_BYTES * q_max * m + AUC_POSITIVE_BYTES * _global_largest(s)
    return int(32 * s.link_pairs[0] + max(fetch, scoring, ranking))


def _global_largest(s: Any) -> float:
    """The largest split's evaluated pairs over every part."""
    train, val, test = s.link_global
    return max(train * _eval_fraction(s), val, test)


def _link(w: Any, s: Any, activations: int, workspace: int) -> int:
    if not sum(s.link_pairs) and not sum(s.link_global):
        return 0
    return link_held(w, s) + max(0, link_step(w, s) - workspace, link_evaluation(w, s) - activations - workspace)


TASK_FORMULAS: dict[str, Callable[[Any, Any, int, int], int]] = {"link": _link}
"""Task name -> ``formula(workload, sizes, activations, workspace)`` of its component (bytes); a
task not here (classification, multilabel, regression) holds nothing beyond the model's."""


def task_bytes(w: Any, s: Any, activations: int, workspace: int) -> int:
    """The ``task`` component of workload ``w`` on part ``s``; ``activations`` and ``workspace``:
    the model's step transients (without the heap the step leaves) that the task's own
    transients, at other moments of the step and in the evaluation, reuse."""
    formula = TASK_FORMULAS.get(w.task)
    return 0 if formula is None else formula(w, s, activations, workspace)
