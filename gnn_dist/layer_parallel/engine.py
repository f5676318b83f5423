"""One stage's training step over node chunks, and its exact forward for evaluation.

Forward, chunk ``k = 0, ..., K-1`` (see :mod:`.chunks` for the rows a layer reads):

.. code-block:: text

    stage input of chunk k  <- stem (stage 0, every chunk at once) or irecv from stage s-1
    for each layer i of the stage:
        x_src = cat(arrived groups' rows, the rest of the history)[chunk k's sources]
        out_{i,k} = layer_i(chunk k's block, x_src)          # its destinations only
        acc_{i,k} = carry_i(out_{i,k}, acc_{i-1,k})          # adapters with a carry (jumping knowledge)
        -> the next layer's group k (its halo rows exchanged within the stage's graph group)
    [out | acc] of the stage's last layer -> isend to stage s+1 (or the head, on the last stage)

Every group's rows (and the carry) enter as a leaf (``detach().requires_grad_()``), so each
unit ``(i, k)`` is its own small graph, with outputs ``out_{i,k}`` and ``acc_{i,k}``, and
backward runs it once: the last stage computes the loss
(``loss_fn``: the trainer's sum over the global training count) and backpropagates to its
leaves; then, chunk ``K-1`` first and each stage's layers last to first, a unit's backward
completes the gradient of its destinations' rows at chunk ``k`` (every later chunk that read
them has run), whose halo part goes back to its owners (the exchange's transpose), and whose
stage-input part is sent to stage ``s-1`` at once, so the stages' backwards overlap too. The
stem runs its backward last. With ``K = 1`` this is the model's forward and backward, split.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ..distributed import EXACT, Transport
from ..pipeline.stale import EMABuffer
from .chunks import ChunkUnit, InputPlan, chunk_units, input_plan, row_chunks
from .layout import StageLayout
from .staged import StagedModel
from .transport import StageLink, Transfer

__all__ = ["StageEngine", "StageFigures"]

_EVAL_TAG = 1 << 20


@dataclass
class StageFigures:
    """What one step of this stage measured."""

    bubble_s: float = 0.0
    """Time waiting for the neighbouring stages' rows and gradients."""
    stage_bytes: int = 0
    """Bytes sent to the neighbouring stages."""
    chunks: int = 1


@dataclass
class _Plans:
    units: list[ChunkUnit]
    inputs: dict[int, InputPlan]
    row_order: torch.Tensor
    """The inner rows in chunk order's inverse: ``cat(chunk outputs)[row_order]`` is row order."""


@dataclass
class _Step:
    """One training step's state, from its forward to its backward."""

    plans: _Plans
    chunks: int
    step: torch.Tensor
    h0: torch.Tensor | None
    """The stem's output (the first layer's input rows on the first stage)."""
    ctx: torch.Tensor | None
    ctx_leaf: torch.Tensor | None
    incoming: list[Transfer]
    """Each chunk's rows from stage ``s-1`` (posted receives; none on the first stage)."""
    grads_in: dict[int, Transfer]
    """Each chunk's gradients from stage ``s+1`` (posted receives; none on the last stage)."""
    leaves: dict[int, list[tuple[torch.Tensor, torch.Tensor] | None]]
    """Per layer, per input group: its rows and their halo rows, each a leaf (None until it arrives)."""
    hist_rows: dict[int, torch.Tensor]
    """Per historical layer: its input's history, in the plan's order."""
    acc_in: list[torch.Tensor | None]
    """Each chunk's carry from stage ``s-1`` (a leaf)."""
    staging: dict[int, torch.Tensor] = field(default_factory=dict)
    outs: dict[tuple[int, int], torch.Tensor] = field(default_factory=dict)
    accs: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)
    """``(acc_{i,k}, its leaf)``."""
    sends: list[Transfer] = field(default_factory=list)
    final: list[torch.Tensor] = field(default_factory=list)
    """The last stage's chunk outputs, each a leaf."""


class StageEngine:
    """This rank's stage (``layout``) of ``adapter``'s model over its part."""

    def __init__(self, adapter: StagedModel, part: Any, layout: StageLayout, link: StageLink, *, chunks: int,
                 seed: int, transport: Transport = EXACT, chunk_by: str = "hash") -> None:
        self.adapter, self.part, self.layout, self.link = adapter, part, layout, link
        self.chunks = int(chunks)
        self.transport = transport
        self.layers = list(layout.layers)
        self.exchanger = part.exchanger
        self._chunk = row_chunks(part, self.chunks, seed, chunk_by)
        self._plans: dict[int, _Plans] = {}
        self._eval_link = StageLink(link.rank, link.timeout)   # evaluation: no simulated link, its own count

    @property
    def historical_layers(self) -> list[int]:
        """The layers whose input keeps a history (all but the first stage's first layer)."""
        return [i for i in self.layers if not (self.layout.first and i == self.layers[0])]

    def plans(self, chunks: int) -> _Plans:
        if chunks not in self._plans:
            p = self.part
            chunk = self._chunk if chunks == self.chunks else torch.zeros_like(self._chunk)
            units = chunk_units(p.block, chunk, chunks)
            inputs = {i: input_plan(chunk, p.num_inner, self.exchanger, chunks,
                                    at_once=self.layout.first and i == self.layers[0]) for i in self.layers}
            order = torch.cat([u.rows for u in units])
            row_order = torch.empty_like(order)
            row_order[order] = torch.arange(order.numel(), device=order.device)
            self._plans[chunks] = _Plans(units, inputs, row_order)
        return self._plans[chunks]

    def _peer(self, stage: int) -> int:
        return self.layout.rank_of(stage)

    # ------------------------------------------------------------------ training
    def train_step(self, x: torch.Tensor, step: torch.Tensor, history: dict[int, EMABuffer], chunks: int,
                   loss_fn: Callable[[torch.Tensor], torch.Tensor]) -> tuple[float, StageFigures]:
        """Forward and backward of this stage with ``chunks`` chunks; the parameters' ``.grad``
        hold this rank's contributions afterwards. Returns this rank's loss (0 off the last
        stage) and the figures."""
        a, lay, link = self.adapter, self.layout, self.link
        plans = self.plans(chunks)
        bytes0, wait0 = link.bytes_sent, link.waited_s
        figures = StageFigures(chunks=chunks)
        h0 = ctx = None
        if lay.first or a.context_shared:
            h0, ctx = a.stem(x, step)
        ctx_leaf = None if ctx is None else ctx.detach().requires_grad_(ctx.requires_grad)
        incoming, grads_in = self._post_receives(plans.units, chunks, x.device)
        st = _Step(plans=plans, chunks=chunks, step=step, h0=h0, ctx=ctx, ctx_leaf=ctx_leaf, incoming=incoming,
                   grads_in=grads_in, leaves={i: [None] * len(plans.inputs[i].groups) for i in self.layers},
                   hist_rows={i: history[i].value[plans.inputs[i].order] for i in self.layers
                              if plans.inputs[i].historical and history[i].value is not None},
                   acc_in=[None] * chunks)
        self._forward(st)
        for i in self.historical_layers:   # this epoch's input rows: the next epochs' history
            pieces = [t for pair in st.leaves[i] if pair is not None for t in pair]
            history[i].update(torch.cat(pieces).detach()[plans.inputs[i].position])
        loss_value, out_grads = self._loss(st, loss_fn) if lay.last else (0.0, [None] * chunks)
        self._backward(st, out_grads)
        self._stem_backward(st)
        for s in st.sends:
            s.wait()
        figures.bubble_s = link.waited_s - wait0
        figures.stage_bytes = link.bytes_sent - bytes0
        return loss_value, figures

    def _post_receives(self, units: list[ChunkUnit], chunks: int, device: torch.device,
                       ) -> tuple[list[Transfer], dict[int, Transfer]]:
        """Post the step's receives: every chunk's rows from stage ``s-1`` (chunk order; none on
        the first stage), then every chunk's gradients from stage ``s+1`` (last chunk first; none
        on the last stage)."""
        a, lay, link = self.adapter, self.layout, self.link
        first_layer, last_layer = self.layers[0], self.layers[-1]
        dtype = torch.float32
        incoming: list[Transfer] = []
        if not lay.first:
            width = a.width(first_layer - 1) + a.carry_width
            incoming = [link.recv((u.rows.numel(), width), dtype, device, self._peer(lay.stage - 1), 2 * k,
                                  f"stage-to-stage rows of chunk {k} (forward, into layer {first_layer})")
                        for k, u in enumerate(units)]
        grads_in: dict[int, Transfer] = {}
        if not lay.last:   # posted in the order the next stage sends them, last chunk first: NCCL matches
            width = a.width(last_layer) + a.carry_width   # point-to-point messages by order, not by tag
            for k in reversed(range(chunks)):
                grads_in[k] = link.recv((units[k].rows.numel(), width), dtype, device, self._peer(lay.stage + 1),
                                        2 * k + 1, f"stage-to-stage gradients of chunk {k} (backward, of layer "
                                                   f"{last_layer})")
        return incoming, grads_in

    def _arrive(self, st: _Step, i: int, j: int, rows: torch.Tensor) -> None:
        """Group ``j`` of layer ``i``'s input is computed: its rows as a leaf, and their halo
        rows fetched within the graph group (a leaf too)."""
        leaf = rows.detach().requires_grad_(rows.requires_grad)
        st.leaves[i][j] = (leaf, self._halo_rows(i, st.plans.inputs[i].groups[j], leaf, st.staging))

    def _forward(self, st: _Step) -> None:
        """Every chunk's forward, chunk by chunk and layer by layer: each unit ``(i, k)``'s output
        goes to the next layer's input, to stage ``s+1`` or, on the last stage, to ``st.final``."""
        a, lay, link, ctx = self.adapter, self.layout, self.link, st.ctx_leaf
        first_layer, last_layer = self.layers[0], self.layers[-1]
        for k, unit in enumerate(st.plans.units):
            acc = None
            if lay.first:
                if k == 0:
                    self._arrive(st, first_layer, 0, st.h0)
            else:
                rows, acc = self._split(st.incoming[k].wait())
                st.acc_in[k] = acc
                self._arrive(st, first_layer, k, rows.requires_grad_())
            for i in self.layers:
                plan = st.plans.inputs[i]
                x_src = self._sources(plan, st.leaves[i], st.hist_rows.get(i), k, unit)
                ctx_rows = None if ctx is None else (ctx if st.chunks == 1 else ctx[unit.rows])
                out = a.layer(i, unit.block, x_src, ctx_rows, unit.rows, st.step)
                st.outs[(i, k)] = out
                if a.carry_width:
                    acc_out = a.carry(i, out, acc)
                    acc = acc_out.detach().requires_grad_()
                    st.accs[(i, k)] = (acc_out, acc)
                if i != last_layer:
                    self._arrive(st, i + 1, k, out)
                elif not lay.last:
                    st.sends.append(link.send(self._join(out, acc), self._peer(lay.stage + 1), 2 * k,
                                              f"stage-to-stage rows of chunk {k} (forward, of layer {i})"))
                else:
                    st.final.append(out.detach().requires_grad_())

    def _loss(self, st: _Step, loss_fn: Callable[[torch.Tensor], torch.Tensor],
              ) -> tuple[float, list[torch.Tensor | None]]:
        """The last stage's head and loss over every chunk's rows (in row order), backpropagated
        to the chunks' outputs: the loss value and each chunk's output gradient."""
        a, plans, last_layer = self.adapter, st.plans, self.layers[-1]
        h = torch.cat(st.final)[plans.row_order]
        acc_rows = torch.cat([st.accs[(last_layer, k)][1] for k in range(st.chunks)])[plans.row_order] \
            if a.carry_width else None
        loss = loss_fn(a.head(h, st.ctx_leaf, st.step, acc_rows))
        loss.backward()
        return float(loss.detach()), [f.grad for f in st.final]

    def _backward(self, st: _Step, out_grads: list[torch.Tensor | None]) -> None:
        """Every chunk's backward, last chunk first and the layers last to first; each chunk's
        stage-input gradient is sent to stage ``s-1`` as soon as it is complete."""
        lay, link = self.layout, self.link
        first_layer, last_layer = self.layers[0], self.layers[-1]
        for k in reversed(range(st.chunks)):
            if lay.last:
                grad = out_grads[k]
            else:
                grad, acc_grad = self._split(st.grads_in[k].wait())
                if acc_grad is not None:
                    st.accs[(last_layer, k)][1].grad = acc_grad
            for i in reversed(self.layers):
                self._unit_backward(st, i, k, grad)
                if i != first_layer:
                    grad = st.leaves[i][k][0].grad
            if not lay.first:
                leaf, carried = st.leaves[first_layer][k][0], st.acc_in[k]
                g = leaf.grad if leaf.grad is not None else torch.zeros_like(leaf)
                if carried is not None:
                    g = self._join(g, carried.grad if carried.grad is not None else torch.zeros_like(carried))
                st.sends.append(link.send(g, self._peer(lay.stage - 1), 2 * k + 1,
                                          f"stage-to-stage gradients of chunk {k} (backward, into layer "
                                          f"{first_layer})"))

    def _unit_backward(self, st: _Step, i: int, k: int, grad: torch.Tensor | None) -> None:
        """Unit ``(i, k)``'s backward from its output's gradient ``grad`` (and its carry's), then
        the halo gradients of the input groups that arrived at chunk ``k`` back to their owners."""
        out = st.outs.pop((i, k))
        pairs = [(out, grad)]
        if self.adapter.carry_width:
            acc_out, acc_leaf = st.accs.pop((i, k))
            pairs.append((acc_out, acc_leaf.grad))
        pairs = [(t, g if g is not None else torch.zeros_like(t)) for t, g in pairs if t.requires_grad]
        if pairs:
            torch.autograd.backward([t for t, _ in pairs], [g for _, g in pairs])
        for j, group in enumerate(st.plans.inputs[i].groups):
            if group.arrives_at == k:
                self._halo_backward(i, group, st.leaves[i][j])

    def _stem_backward(self, st: _Step) -> None:
        """The stem's backward, last: from the first layer's input leaf (first stage) and the
        context's leaf."""
        tensors, grads = [], []
        if self.layout.first and st.h0 is not None and st.h0.requires_grad:
            leaf = st.leaves[self.layers[0]][0][0]
            tensors.append(st.h0)
            grads.append(leaf.grad if leaf.grad is not None else torch.zeros_like(st.h0))
        if st.ctx is not None and st.ctx.requires_grad:
            tensors.append(st.ctx)
            grads.append(st.ctx_leaf.grad if st.ctx_leaf.grad is not None else torch.zeros_like(st.ctx))
        if tensors:
            torch.autograd.backward(tensors, grads)

    def _split(self, got: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """A received ``[rows | carry]`` tensor: the rows, and the carry as a leaf (None without one)."""
        c = self.adapter.carry_width
        if not c:
            return got, None
        return got[:, :-c], got[:, -c:].detach().requires_grad_()

    @staticmethod
    def _join(rows: torch.Tensor, acc: torch.Tensor | None) -> torch.Tensor:
        """What travels to a neighbouring stage: ``[rows | carry]``."""
        return rows if acc is None else torch.cat([rows.detach(), acc.detach()], dim=1)

    def _sources(self, plan: InputPlan, leaves: list[Any], hist: torch.Tensor | None, k: int,
                 unit: ChunkUnit) -> torch.Tensor:
        """Chunk ``k``'s source rows: the arrived groups' (this epoch's), the rest historical."""
        n = plan.arrived(k)
        pieces = [t for pair in leaves[:n] for t in pair]
        if n < len(plan.groups):
            done = sum(g.size for g in plan.groups[:n])
            if hist is None:  # no history yet: only a one-chunk step runs without one
                raise RuntimeError("layer parallelism: historical rows read before any epoch computed them")
            pieces.append(hist[done:])
        rows = torch.cat(pieces) if len(pieces) > 1 else pieces[0]
        if n == len(plan.groups) and len(plan.groups) == 1 and unit.src.numel() == rows.shape[0] \
                and unit.block is self.part.block:
            return rows   # one chunk, every row: the block's own source order
        return rows[plan.position[unit.src]]

    def _halo_rows(self, i: int, group: Any, leaf: torch.Tensor, staging: dict[int, torch.Tensor]) -> torch.Tensor:
        """The halo rows of ``group`` at layer ``i``'s input, fetched within the graph group (a leaf)."""
        ex = self.exchanger
        if ex.world_size == 1:
            return leaf.new_zeros((0, *leaf.shape[1:])).requires_grad_(leaf.requires_grad)
        if group.subset is None:
            inner = leaf.detach()
        else:
            if i not in staging:
                staging[i] = leaf.new_zeros((ex.num_inner, *leaf.shape[1:]))
            inner = staging[i]
            inner[group.inner] = leaf.detach()
        recv = ex.start(inner, tag=i, subset=group.subset, transport=self.transport).wait()
        halo = recv if group.subset is None else recv[group.halo]
        return halo.detach().requires_grad_(leaf.requires_grad)

    def _halo_backward(self, i: int, group: Any, pair: tuple[torch.Tensor, torch.Tensor] | None) -> None:
        """Send the halo rows' gradients of ``group`` back to their owners; add what comes back."""
        ex = self.exchanger
        if ex.world_size == 1 or pair is None:
            return
        inner, halo = pair
        if not inner.requires_grad:
            return
        g = halo.new_zeros((ex.num_halo, *halo.shape[1:]))
        if halo.grad is not None:
            if group.subset is None:
                g = halo.grad
            else:
                g[group.halo] = halo.grad
        back = ex.start_backward(g, tag=i, subset=group.subset, transport=self.transport).wait()
        contrib = back if group.subset is None else back[group.inner]
        inner.grad = contrib if inner.grad is None else inner.grad + contrib

    # ------------------------------------------------------------------ evaluation
    @torch.no_grad()
    def forward_exact(self, x: torch.Tensor, step: torch.Tensor) -> torch.Tensor | None:
        """Every row current, every layer on the whole block: the logits on the last stage
        (None elsewhere). A collective of the pipeline and graph groups."""
        a, lay, link, ex = self.adapter, self.layout, self._eval_link, self.exchanger
        h = ctx = None
        if lay.first or a.context_shared:
            h, ctx = a.stem(x, step)
        first_layer, last_layer = self.layers[0], self.layers[-1]
        acc = None
        if not lay.first:
            h, acc = self._split(link.recv((self.part.num_inner, a.width(first_layer - 1) + a.carry_width),
                                           torch.float32, x.device, self._peer(lay.stage - 1), _EVAL_TAG,
                                           "stage-to-stage rows of the evaluation").wait())
        assert h is not None
        for i in self.layers:
            x_src = h if ex.world_size == 1 else torch.cat([h, ex.start(h, tag=i).wait()])
            h = a.layer(i, self.part.block, x_src, ctx, None, step)
            if a.carry_width:
                acc = a.carry(i, h, acc)
        if not lay.last:
            link.send(self._join(h, acc), self._peer(lay.stage + 1), _EVAL_TAG,
                      f"stage-to-stage rows of the evaluation (of layer {last_layer})").wait()
            return None
        return a.head(h, ctx, step, acc)
