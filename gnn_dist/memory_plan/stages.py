"""What a rank of a layer- or hybrid-parallel run (``--parallel layer|hybrid --stages S --chunks
K``, :mod:`gnn_dist.layer_parallel`) holds besides a graph-parallel rank's components.

World rank ``r = s G + g`` holds stage ``s`` (layers ``[s L/S, (s+1) L/S)``, ``n = L / S`` of them)
over part ``g`` (``layer``: ``G = 1``, the whole graph). Its block, features and runtime are a
graph-parallel rank's; its ``activations`` are its ``n`` layers' saved tensors plus the terms
outside the layers (GCNII's stem runs on every stage: ``x_0`` is recomputed there, not sent);
its ``optimizer`` the whole model's weights ``4 N_p`` (every rank builds the model) and the
gradients and state of the parameters it trains only (:func:`stage_parameters`); its
``workspace`` the busiest of its layers' backward (the logits only on the last stage). The
``stage`` component (:func:`stage_bytes`) is the rest, in units of a layer input ``S_rows w 4``
(``S_rows = I + H``, ``w`` the boundary width, float32):

- the stage boundary: the received rows ``I w 4`` and the gradient sent back ``I w 4`` (``s > 0``),
  the gradient received ``I w 4`` (``s < S - 1``; the rows sent are the last layer's output);
- every layer input is a leaf (its own small autograd graph per (layer, chunk) unit) whose
  gradient stays until the step ends: ``n S_rows w 4``;
- the history of each layer input but the first stage's first (``n_h`` of them): the engine
  updates it every step, also at ``K = 1`` (a checkpoint and a later ``--chunks`` read it):
  ``n_h S_rows w 4``; at ``K > 1`` the step also gathers it into chunk order, once more;
- each layer input's chunk plan (``position``, ``order``: ``16 S_rows``) and at ``K > 1`` the
  chunks' sub-blocks (the block's edge arrays again, ``32 E``, and each chunk's source ids, at
  most ``8 K S_rows``).

Measured on this project's CPU ranks (``benchmarks/memory_plan.py --stages``, GCNII 16 x 64 on
sbm-small, 3 epochs, 2026-12-06; ``docs/performance.md``, "Memory planner"): every stage rank
0.88-0.96x of its measured peak at ``layer`` S = 2, K = 1 and 4, and ``hybrid`` S = 2, G = 2;
short by the same per-layer GCNII terms as the graph-parallel run of the model (0.84x). The
terms are counted from the engine's code (:mod:`gnn_dist.layer_parallel.engine`), not fitted:
K = 4 measured 6-48 MiB above K = 1 where they add 23-25 MiB.
"""

from __future__ import annotations

from typing import Any

from .sizes import PartSizes

__all__ = ["stage_count", "stage_layers", "stage_bytes", "stage_parameters", "historical_inputs"]


def stage_count(w: Any) -> int:
    """The stages of a layer/hybrid-parallel run: ranks per part (1 for graph parallelism)."""
    return 1 if w.parallel == "graph" else max(1, w.stages)


def stage_layers(w: Any, stage: int) -> range:
    """The layers stage ``stage`` of ``w.stages`` holds (every layer for a graph-parallel run)."""
    if stage_count(w) == 1:
        return range(w.layers)
    per = w.layers // w.stages
    return range(stage * per, (stage + 1) * per)


def historical_inputs(w: Any, stage: int) -> int:
    """``n_h``: the stage's layer inputs with a history (all but the first stage's first layer:
    :attr:`~gnn_dist.layer_parallel.engine.StageEngine.historical_layers`)."""
    return len(stage_layers(w, stage)) - (1 if stage == 0 else 0)


def stage_bytes(w: Any, s: PartSizes, stage: int, width: int) -> int:
    """The ``stage`` component of stage ``stage`` over part ``s`` (module docstring; ``width``:
    the layer inputs' width ``w``); 0 for a graph-parallel run."""
    if w.parallel == "graph":
        return 0
    n = len(stage_layers(w, stage))
    row = width * 4
    boundary = ((2 if stage > 0 else 0) + (1 if stage < w.stages - 1 else 0)) * s.inner * row
    leaves = n * s.rows * row
    history = historical_inputs(w, stage) * s.rows * row * (2 if w.chunks > 1 else 1)
    plans = n * 16 * s.rows + (32 * s.edges + 8 * w.chunks * s.rows if w.chunks > 1 else 0)
    return boundary + leaves + history + plans


def stage_parameters(w: Any, stage: int, total: int, per_conv: tuple[int, ...]) -> int:
    """The parameters stage ``stage`` trains, of the model's ``total`` and its convolutions'
    ``per_conv``: those of its layers' convolutions and every parameter outside them (the stem,
    shared by every stage for GCNII; the head: an over-estimate off the last stage, a few KB);
    ``total`` for a graph-parallel run."""
    if stage_count(w) == 1:
        return total
    return total - sum(per_conv) + sum(per_conv[i] for i in stage_layers(w, stage))
