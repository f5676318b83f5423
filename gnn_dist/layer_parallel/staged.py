r"""A model cut into stages: a row-local stem, graph layers one at a time, a row-local head.

.. code-block:: text

    logits = head(layer_{L-1}( ... layer_1(layer_0(stem(x))) ... ))

- ``stem(x, step) -> (h, ctx)``: the work before the first graph layer, on the inner rows
  (GCNII: dropout, ``lin_in``, activation: ``x_0`` and ``h = dropout(x_0)``; BasicGNN: the input
  dropout). ``ctx`` is what every layer reads besides its input (GCNII's ``x_0``; None).
- ``layer(i, block, x_src, ctx_rows, rows, step) -> out``: graph layer ``i`` for the
  destinations of ``block`` (``rows``: their ids in the part's inner rows), from its source rows
  ``x_src``, with the activation and dropout that follow it.
- ``carry(i, out, acc) -> acc``: folds layer ``i``'s output rows into a row-local accumulator
  that travels with the stage-to-stage rows (``carry_width`` columns; none when 0): jumping
  knowledge, whose head reads every layer's output. ``max`` carries the running maximum
  (``F`` columns); BasicGNN's ``cat`` carries the partial logits
  :math:`\sum_{j \le i} \mathbf{x}^{(j)} W_j^\top` of ``lin`` over the concatenation
  (``F_out`` columns; ``lin.weight`` is then trained by every stage, its gradient summed over
  all ranks). Sending every layer's rows to the last stage instead would cost ``L / S`` times
  the stage boundary.
- ``head(h, ctx, step, acc) -> logits``: the work after the last graph layer (GCNII: activation,
  dropout, ``lin_out``; BasicGNN: none, or ``lin`` of the jumping knowledge ``acc``).

Dropout masks are the model's own (keyed by seed, step, layer, original id), so a stage computes
what the whole model computes on those rows. ``context_shared``: every stage recomputes ``ctx``
from the features with the stem's weights (``x_0`` never travels between stages: its gradient
reaches ``lin_in`` through a small all-reduce of the stem's weights instead of ``2 I F`` floats
per boundary and epoch). Adapters are registered by exact model class
(:func:`register_adapter`, on the model's :class:`~gnn_dist.models.ModelSpec`; a subclass
registers its own, since it may change ``forward``), and
declare the ``jk`` modes they cut (``jk_modes``); :func:`staged_model` checks that the stem,
the layers, the head and the shared parameters hold every parameter of the model exactly once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ..models.basic_gnn import GAT, GCN, GIN, GraphSAGE
from ..models.gcnii import GCNII
from ..models.residual import ResGCN, ResGraphSAGE
from ..models.spec import spec_of_class
from ..nn import INPUT_LAYER, DropoutKey, RowDropout, hash_dropout
from ..nn.block import Block
from ..nn.dropout import call_conv

__all__ = ["StagedModel", "StagedBasicGNN", "StagedGCNII", "StagedResidualGNN", "adapter_of", "register_adapter",
           "staged_model", "split_stage_parameters"]


class StagedModel:
    """The stage protocol over a model (see the module docstring); ``ids`` the part's inner rows'
    original ids (the dropout keys)."""

    context_shared = False
    jk_modes: tuple[str, ...] = ("last",)
    """The model's ``jk`` values this adapter cuts into stages."""

    def __init__(self, model: nn.Module, ids: torch.Tensor, block: Block) -> None:
        self.model = model
        self.ids = ids
        self.block = block
        self.num_layers = int(model.num_layers)
        self.jk = getattr(model, "jk", "last")

    @property
    def carry_width(self) -> int:
        """The columns of the accumulator :meth:`carry` builds (0: none)."""
        return 0

    def width(self, i: int) -> int:
        """The width of layer ``i``'s output rows (what travels to the next stage, besides the carry)."""
        return int(self.model.out_dim if i == self.num_layers - 1 else self.model.hidden_dim)

    def stem(self, x: torch.Tensor, step: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        raise NotImplementedError

    def layer(self, i: int, block: Block, x_src: torch.Tensor, ctx_rows: torch.Tensor | None, rows: torch.Tensor | None,
              step: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def carry(self, i: int, out: torch.Tensor, acc: torch.Tensor | None) -> torch.Tensor:
        """``acc`` (None before layer 0) with layer ``i``'s output rows ``out`` folded in."""
        raise NotImplementedError

    def head(self, h: torch.Tensor, ctx: torch.Tensor | None, step: torch.Tensor,
             acc: torch.Tensor | None = None) -> torch.Tensor:
        return h

    def stem_parameters(self) -> list[nn.Parameter]:
        return []

    def layer_parameters(self, i: int) -> list[nn.Parameter]:
        return list(self.model.convs[i].parameters())

    def head_parameters(self) -> list[nn.Parameter]:
        return []

    def shared_parameters(self) -> list[nn.Parameter]:
        """The parameters every stage trains (their gradient summed over every rank): a shared
        stem's, and those :meth:`carry` reads on every stage."""
        return self.stem_parameters() if self.context_shared else []

    def _drop_input(self, x: torch.Tensor, step: torch.Tensor) -> torch.Tensor:
        """The inner rows' features with the model's ``input_dropout`` (keyed with ``INPUT_LAYER``)."""
        m = self.model
        if m.training and m.input_dropout > 0:
            x = RowDropout(m.input_dropout, DropoutKey(m.seed, step, INPUT_LAYER))(self.block, x)
        return x

    def _drop(self, h: torch.Tensor, p: float, layer: int, rows: torch.Tensor | None, step: torch.Tensor) -> torch.Tensor:
        return hash_dropout(h, p, seed=self.model.seed, step=step, layer=layer,
                            row_ids=self.ids if rows is None else self.ids[rows], training=self.model.training)


def _running_max(acc: torch.Tensor | None, out: torch.Tensor) -> torch.Tensor:
    """The element-wise maximum of the layers' rows so far (``jumping_knowledge``'s ``max``, one
    layer at a time)."""
    return out if acc is None else torch.stack([acc, out], dim=-1).max(dim=-1)[0]


class StagedBasicGNN(StagedModel):
    """:class:`~gnn_dist.models.BasicGNN` (gcn, sage, gat, gin): the stem is the input dropout;
    with jumping knowledge every layer is followed by its activation and dropout, and the head
    is ``lin`` (``cat``: the carried partial logits plus ``lin.bias``)."""

    jk_modes = ("last", "cat", "max")

    @property
    def carry_width(self) -> int:
        return {"last": 0, "cat": int(self.model.out_dim), "max": int(self.model.hidden_dim)}[self.jk]

    def width(self, i: int) -> int:
        return super().width(i) if self.jk == "last" else int(self.model.hidden_dim)

    def stem(self, x: torch.Tensor, step: torch.Tensor) -> tuple[torch.Tensor, None]:
        return self._drop_input(x, step), None

    def layer(self, i: int, block: Block, x_src: torch.Tensor, ctx_rows: torch.Tensor | None, rows: torch.Tensor | None,
              step: torch.Tensor) -> torch.Tensor:
        m = self.model
        out = call_conv(m.convs[i], block, x_src, DropoutKey(m.seed, step, i))
        if i == self.num_layers - 1 and self.jk == "last":
            return out
        return self._drop(m._act(out), m.dropout, i, rows, step)

    def carry(self, i: int, out: torch.Tensor, acc: torch.Tensor | None) -> torch.Tensor:
        if self.jk == "max":
            return _running_max(acc, out)
        F = int(self.model.hidden_dim)   # cat: lin(cat(x_0 .. x_{L-1})) = sum_i x_i W[:, iF:(i+1)F]^T + b
        part = out @ self.model.lin.weight[:, i * F:(i + 1) * F].t()
        return part if acc is None else acc + part

    def head(self, h: torch.Tensor, ctx: torch.Tensor | None, step: torch.Tensor,
             acc: torch.Tensor | None = None) -> torch.Tensor:
        if self.jk == "last":
            return h
        assert acc is not None
        return self.model.lin(acc) if self.jk == "max" else acc + self.model.lin.bias

    def head_parameters(self) -> list[nn.Parameter]:
        lin = self.model.lin
        return [] if lin is None else [lin.bias] if self.jk == "cat" else list(lin.parameters())

    def shared_parameters(self) -> list[nn.Parameter]:
        return [self.model.lin.weight] if self.jk == "cat" else []


class StagedGCNII(StagedModel):
    """:class:`~gnn_dist.models.GCNII`: stem ``x_0 = act(lin_in(drop(x)))``, ``h = drop(x_0)``;
    conv ``i`` bound to its destinations' rows of ``x_0``; head ``lin_out(drop(act(h)))``."""

    context_shared = True

    def width(self, i: int) -> int:
        return int(self.model.hidden_dim)

    def stem(self, x: torch.Tensor, step: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        m = self.model
        x_0 = m._act(m.lin_in(self._drop(x, m.dropout, INPUT_LAYER, None, step)))
        return self._drop(x_0, m.dropout, 0, None, step), x_0

    def layer(self, i: int, block: Block, x_src: torch.Tensor, ctx_rows: torch.Tensor | None, rows: torch.Tensor | None,
              step: torch.Tensor) -> torch.Tensor:
        m = self.model
        assert ctx_rows is not None
        out = m.convs[i].bind(ctx_rows)(block, x_src)
        if i == self.num_layers - 1:
            return out
        return self._drop(m._act(out), m.dropout, i + 1, rows, step)

    def head(self, h: torch.Tensor, ctx: torch.Tensor | None, step: torch.Tensor,
             acc: torch.Tensor | None = None) -> torch.Tensor:
        m = self.model
        return m.lin_out(self._drop(m._act(h), m.dropout, self.num_layers, None, step))

    def stem_parameters(self) -> list[nn.Parameter]:
        return list(self.model.lin_in.parameters())

    def head_parameters(self) -> list[nn.Parameter]:
        return list(self.model.lin_out.parameters())


class StagedResidualGNN(StagedModel):
    """:class:`~gnn_dist.models.residual.DeepResidualGNN` (resgcn, ressage): stem
    ``node_encoder(drop(x))``; layer ``i`` the first block's conv (``i = 0``) or block ``i``,
    whose output is the residual stream (each reader pre-activates its rows); head
    ``lin(drop(act(layers[0].norm(h))))``, or with ``jk="max"`` ``lin(drop(acc))`` of the
    carried maximum of every block's closed output. ``layers[0].norm`` closes the stack: the
    head's parameter (with ``max``, every stage's carry applies it: a shared parameter). ``jk="cat"`` is not cut: its dropout acts on the concatenation's columns
    (keyed by their index in it), so only the last stage could apply it, from every layer's rows."""

    jk_modes = ("last", "max")

    @property
    def carry_width(self) -> int:
        return int(self.model.hidden_dim) if self.jk == "max" else 0

    def width(self, i: int) -> int:
        return int(self.model.hidden_dim)

    def stem(self, x: torch.Tensor, step: torch.Tensor) -> tuple[torch.Tensor, None]:
        return self.model.node_encoder(self._drop_input(x, step)), None

    def layer(self, i: int, block: Block, x_src: torch.Tensor, ctx_rows: torch.Tensor | None, rows: torch.Tensor | None,
              step: torch.Tensor) -> torch.Tensor:
        m = self.model
        return call_conv(m.convs[i], block, x_src, DropoutKey(m.seed, step, i))

    def carry(self, i: int, out: torch.Tensor, acc: torch.Tensor | None) -> torch.Tensor:
        return _running_max(acc, self.model._close(out))

    def head(self, h: torch.Tensor, ctx: torch.Tensor | None, step: torch.Tensor,
             acc: torch.Tensor | None = None) -> torch.Tensor:
        m = self.model
        h = m._close(h) if acc is None else acc
        return m.lin(self._drop(h, m.dropout, self.num_layers, None, step))

    def stem_parameters(self) -> list[nn.Parameter]:
        return list(self.model.node_encoder.parameters())

    def _closing_norm(self) -> list[nn.Parameter]:
        norm = self.model.layers[0].norm
        return [] if norm is None else list(norm.parameters())

    def head_parameters(self) -> list[nn.Parameter]:
        return list(self.model.lin.parameters()) + (self._closing_norm() if self.jk == "last" else [])

    def shared_parameters(self) -> list[nn.Parameter]:
        return self._closing_norm() if self.jk == "max" else []   # every stage's carry closes its rows


def register_adapter(*model_classes: type) -> Callable[[type[StagedModel]], type[StagedModel]]:
    """Class decorator: the adapter of ``model_classes`` (exactly these classes, each a registered
    model: the adapter is kept on its :class:`~gnn_dist.models.ModelSpec`)."""
    specs = []
    for model_class in model_classes:
        spec = spec_of_class(model_class)
        if spec is None:
            raise ValueError(f"register_adapter: {model_class.__name__} is not a registered model; register it "
                             f"first (@gnn_dist.models.register_model('name'))")
        specs.append(spec)

    def deco(cls: type[StagedModel]) -> type[StagedModel]:
        for spec in specs:
            spec.stage_adapter = cls
        return cls
    return deco


def adapter_of(model_class: type) -> type[StagedModel] | None:
    """The stage adapter registered for exactly ``model_class``, or None."""
    spec = spec_of_class(model_class)
    return None if spec is None else spec.stage_adapter


register_adapter(GCN, GraphSAGE, GAT, GIN)(StagedBasicGNN)
register_adapter(GCNII)(StagedGCNII)
register_adapter(ResGCN, ResGraphSAGE)(StagedResidualGNN)


def staged_model(model: nn.Module, ids: torch.Tensor, block: Block) -> StagedModel:
    """The stage adapter of ``model``; ``ValueError`` naming it when there is none, when it does not
    cut the model's ``jk``, or when the adapter's parameters are not the model's, each once."""
    cls = type(model)
    adapter_cls = adapter_of(cls)
    if adapter_cls is None:
        base = next((b for b in cls.__mro__[1:] if adapter_of(b) is not None), None)
        hint = (f"; if it keeps {base.__name__}'s forward, register_adapter({cls.__name__})"
                f"({adapter_of(base).__name__})" if base is not None else "")
        raise ValueError(f"{cls.__name__} has no stage adapter for layer parallelism (register one with "
                         f"gnn_dist.layer_parallel.register_adapter{hint}); train it with --parallel graph")
    jk = getattr(model, "jk", "last")
    if jk not in adapter_cls.jk_modes:
        raise ValueError(f"{cls.__name__}: jk={jk!r} is not cut into stages ({adapter_cls.__name__} takes jk "
                         f"{', '.join(adapter_cls.jk_modes)}; see its docstring); train it with --parallel graph")
    adapter = adapter_cls(model, ids, block)
    _check_parameters(adapter)
    return adapter


def _check_parameters(adapter: StagedModel) -> None:
    """Every trainable parameter of the model in exactly one of the stem, a layer, the head or the
    shared parameters."""
    a = adapter
    shared = a.shared_parameters()
    shared_ids = {id(q) for q in shared}
    seen: dict[int, int] = {}
    pieces = [[q for q in a.stem_parameters() if id(q) not in shared_ids], a.head_parameters(), shared,
              *(a.layer_parameters(i) for i in range(a.num_layers))]
    for q in (q for piece in pieces for q in piece):
        seen[id(q)] = seen.get(id(q), 0) + 1
    for name, q in a.model.named_parameters():
        if q.requires_grad and seen.get(id(q), 0) != 1:
            raise ValueError(f"{type(a).__name__}: parameter {name!r} of {type(a.model).__name__} is in "
                             f"{seen.get(id(q), 0)} of the stem, layers, head and shared parameters (it must "
                             f"be in exactly one)")


def split_stage_parameters(adapter: StagedModel, layers: range, first: bool, last: bool) -> tuple[list[Any], list[Any]]:
    """``(owned, shared)``: the parameters this stage trains alone (its layers', the stem's on the
    first stage unless shared, the head's on the last) and those every stage trains
    (:meth:`StagedModel.shared_parameters`)."""
    owned = [p for i in layers for p in adapter.layer_parameters(i)]
    shared = adapter.shared_parameters()
    if first and not adapter.context_shared:
        owned = adapter.stem_parameters() + owned
    if last:
        owned = owned + adapter.head_parameters()
    return owned, shared
