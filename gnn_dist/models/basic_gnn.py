"""Multi-layer GNNs that run on one rank's part: input dropout, then per layer halo exchange,
conv, activation (ReLU by default), hash dropout.

Legend: ``I`` inner rows (the part's destinations ``D``), ``S`` = inner + halo source rows.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..nn import (INPUT_LAYER, Block, DropoutKey, GATConv, GCNConv, GINConv, RowDropout, SAGEConv, get_activation,
                  hash_dropout, relu_hash_dropout)
from ..nn.part import Activation, FullGraph, LayerInput, PartLike
from . import saved
from .shared import JK_MODES, check_jk, check_model_args, jk_width, jumping_knowledge
from .spec import MODELS, model_spec, register_model

__all__ = ["PartLike", "LayerInput", "Activation", "FullGraph", "BasicGNN", "GCN", "GraphSAGE", "GAT", "GIN",
           "MODELS", "register_model", "build_model"]


class BasicGNN(nn.Module):
    r"""Base of the built-in models (after PyG's ``BasicGNN``): ``num_layers`` convs in
    :attr:`convs`, built in a loop by :meth:`init_conv`, the only method subclasses override.

    Forward on a part, for each layer ``i``:

    .. code-block:: text

        h = part.run_layer(i, conv_i, h, dropout_key=..., activation=act_i)
        # sync: h_all = part.exchange(h)  [I, F] -> [S, F]; h = conv_i(part.block, h_all)  [I, F']
        # act_i (hidden layers): hash_dropout(activation(h), dropout, seed, dropout_step, i, original ids)
        # before layer 0 (training, input_dropout > 0): x's rows dropped, keyed with layer INPUT_LAYER

    ``x`` is the inner rows' features ``[I, F_in]``, or a :class:`LayerInput` (the trainer's
    ``gnn_dist.cache.InputFeatures``), which computes layer 0 itself without a per-step exchange.
    The part (a schedule's view, see :mod:`gnn_dist.nn.part`) decides when each layer's halo
    rows travel.

    Dropout masks are keyed by ``(seed, dropout_step, layer, original node id, feature)``, so P
    ranks equal one device with dropout on. The input dropout is keyed alike with layer
    :data:`~gnn_dist.nn.INPUT_LAYER` (-1): a tensor ``x`` has its inner rows dropped before the
    first exchange, a :class:`LayerInput` its first layer's source rows (a halo row gets its
    owner's mask either way). ``dropout_step`` is an int64 buffer (saved in the
    state dict, so a resumed run continues the same masks), incremented after each training-mode
    forward.

    Args:
        in_dim (int): input feature width.
        hidden_dim (int): width of the hidden layers.
        out_dim (int): output width (number of classes).
        num_layers (int): number of convs (>= 1).
        dropout (float, optional): feature dropout after each hidden layer. (default: :obj:`0.5`)
        seed (int, optional): dropout seed. (default: :obj:`0`)
        input_dropout (float, optional): dropout of the input features before the first layer.
            (default: :obj:`0.`)
        activation (str, optional): the nonlinearity after each hidden layer, a name of
            :data:`~gnn_dist.nn.ACTIVATIONS`. (default: :obj:`"relu"`)
        jk (str, optional): jumping knowledge, as PyG's ``BasicGNN(jk=...)``: ``"last"`` the
            last conv's output (PyG's ``jk=None``: the last conv maps to ``out_dim``, no
            activation after it); ``"cat"`` or ``"max"``: every conv maps to ``hidden_dim`` and
            is followed by the activation and dropout, the ``num_layers`` outputs are combined
            (:func:`~gnn_dist.models.shared.jumping_knowledge`) and :attr:`lin`, a
            ``Linear(hidden_dim or num_layers * hidden_dim, out_dim)``, maps them to the
            output. (default: :obj:`"last"`)
        **layer_kwargs: passed to :meth:`init_conv`.

    Shapes:
        - **input:** ``part`` (a :class:`PartLike`), ``x`` :math:`(I, F_{in})` inner rows
        - **output:** logits :math:`(I, F_{out})`
    """

    jk_modes = JK_MODES
    """The ``jk`` modes the model takes (``--jk``)."""

    accepts_layer_input = True
    """``forward`` takes a :class:`LayerInput` as ``x`` (the Trainer then passes its
    ``InputFeatures``: features through the store, halo rows fetched once)."""

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int, num_layers: int, dropout: float = 0.5,
                 seed: int = 0, *, input_dropout: float = 0.0, activation: str = "relu", jk: str = "last",
                 **layer_kwargs: Any) -> None:
        super().__init__()
        name = self.__class__.__name__
        check_model_args(name, in_dim=in_dim, hidden_dim=hidden_dim, out_dim=out_dim, num_layers=num_layers,
                         dropout=dropout, input_dropout=input_dropout)
        self.jk = check_jk(name, jk)
        self._act = get_activation(activation)
        self.in_dim = in_dim
        self.hidden_dim = hidden_dim
        self.out_dim = out_dim
        self.num_layers = num_layers
        self.dropout = float(dropout)
        self.input_dropout = float(input_dropout)
        self.activation = activation
        self.seed = int(seed)
        self.convs = nn.ModuleList()
        for i in range(num_layers):
            last = i == num_layers - 1 and jk == "last"
            self.convs.append(self.init_conv(in_dim if i == 0 else hidden_dim, out_dim if last else hidden_dim,
                                             last=last, **layer_kwargs))
        self.lin = None if jk == "last" else nn.Linear(jk_width(jk, hidden_dim, num_layers), out_dim)
        self.register_buffer("dropout_step", torch.zeros((), dtype=torch.long))

    def init_conv(self, in_channels: int, out_channels: int, *, last: bool, **kwargs: Any) -> nn.Module:
        """The conv mapping ``in_channels`` to ``out_channels`` (``last``: the output layer)."""
        raise NotImplementedError

    def reset_parameters(self) -> None:
        """Re-initialise the convs and :attr:`lin` (``dropout_step`` is kept)."""
        for conv in self.convs:
            conv.reset_parameters()
        if self.jk != "last":
            self.lin.reset_parameters()

    def forward(self, part: PartLike, x: torch.Tensor | LayerInput) -> torch.Tensor:
        block = part.block
        self._check_input(x, block)
        ids = block.src_original_ids[:block.num_dst]
        step = self.dropout_step.clone()   # this step's value: work recomputed in backward draws the same masks
        h = self._drop_input(x, block, step) if self.training and self.input_dropout > 0 else x
        xs = []
        for i, conv in enumerate(self.convs):
            act = self._activation(i, step, ids) if i < self.num_layers - 1 else None
            h = part.run_layer(i, conv, h, dropout_key=DropoutKey(self.seed, step, i), activation=act)
            if self.jk != "last":
                if act is None:   # the last conv's activation, after the layer: no exchange follows it
                    h = self._activation(i, step, ids)(h, None)
                xs.append(h)
        if self.jk != "last":
            h = self.lin(jumping_knowledge(self.jk, xs))
        if self.training:
            with torch.no_grad():
                self.dropout_step += 1
        return h

    def _check_input(self, x: torch.Tensor | LayerInput, block: Block) -> None:
        name = self.__class__.__name__
        if isinstance(x, torch.Tensor):
            if x.dim() != 2:
                raise ValueError(f"{name}: x must be a 2-D tensor [inner rows, features], got shape {list(x.shape)}")
            rows, dim = x.shape
        else:
            rows, dim = x.num_rows, x.dim
        if dim != self.in_dim:
            raise ValueError(f"{name}: x has {dim} features per row but the model's in_dim is {self.in_dim}")
        if rows != block.num_dst:
            raise ValueError(f"{name}: x has {rows} rows but the part has {block.num_dst} inner rows")

    def _drop_input(self, x: torch.Tensor | LayerInput, block: Block, step: torch.Tensor) -> torch.Tensor | LayerInput:
        """``x`` with this step's input dropout: a tensor's inner rows dropped, or a
        :class:`LayerInput` that drops its first layer's source rows."""
        drop = RowDropout(self.input_dropout, DropoutKey(self.seed, step, INPUT_LAYER))
        if isinstance(x, torch.Tensor):
            return drop(block, x)
        with_dropout = getattr(x, "with_input_dropout", None)
        if with_dropout is None:
            raise ValueError(f"{self.__class__.__name__}: input_dropout={self.input_dropout} needs x as a tensor or "
                             f"a LayerInput with with_input_dropout (gnn_dist.cache.InputFeatures), not "
                             f"{type(x).__name__}")
        return with_dropout(drop)

    def _activation(self, layer: int, step: torch.Tensor, ids: torch.Tensor) -> Activation:
        """Hidden layer ``layer``'s activation + hash dropout on any subset of its output rows."""
        fn = self._act
        # ReLU and the dropout in one pass (the same bits; one byte an element kept for backward)
        drop = relu_hash_dropout if fn is F.relu else lambda h, *a, **k: hash_dropout(fn(h), *a, **k)

        def act(h: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
            return drop(h, self.dropout, seed=self.seed, step=step, layer=layer,
                        row_ids=ids if rows is None else ids[rows], training=self.training)
        return act

    def __repr__(self) -> str:
        jk = "" if self.jk == "last" else f", jk={self.jk}"
        return f"{self.__class__.__name__}({self.in_dim}, {self.out_dim}, num_layers={self.num_layers}{jk})"


@register_model("gcn", saved=saved.gcn_saved, workspace_factor=1.1)
class GCN(BasicGNN):
    """Graph convolutional network: :class:`~gnn_dist.nn.GCNConv` layers (see :class:`BasicGNN`)."""

    exchanges_mapped_rows = True
    """A layer narrowing its rows (``F_out < F_in``) sends its mapped rows under ``sync`` (the
    convs' ``narrows``; the planner's halo bytes, :func:`gnn_dist.memory_plan.schedule_cost.halo_row_bytes`)."""

    def init_conv(self, in_channels: int, out_channels: int, *, last: bool, **kwargs: Any) -> nn.Module:
        return GCNConv(in_channels, out_channels, **kwargs)


@register_model("sage", saved=saved.sage_saved, options=("sage_init",), workspace_factor=0.95)
class GraphSAGE(BasicGNN):
    """GraphSAGE with mean aggregation: :class:`~gnn_dist.nn.SAGEConv` layers (see :class:`BasicGNN`);
    ``init`` (``--sage-init``) is every layer's initialisation (:data:`~gnn_dist.nn.sage_conv.SAGE_INITS`)."""

    exchanges_mapped_rows = True
    """A layer narrowing its rows (``F_out < F_in``) sends its mapped rows under ``sync`` (the
    convs' ``narrows``; the planner's halo bytes, :func:`gnn_dist.memory_plan.schedule_cost.halo_row_bytes`)."""

    def init_conv(self, in_channels: int, out_channels: int, *, last: bool, **kwargs: Any) -> nn.Module:
        return SAGEConv(in_channels, out_channels, **kwargs)


def _gat_check(model: Any) -> tuple[str, str] | None:
    """A hidden GAT layer's width is its heads' concatenation: a multiple of the heads."""
    if model.layers > 1 and model.hidden % (model.heads or 8):
        return "hidden", f"{model.hidden} is the total width of a gat layer and must be a multiple of heads = {model.heads or 8}"
    return None


@register_model("gat", saved=saved.gat_saved, options=("heads", "out_heads", "attn_dropout"), check=_gat_check,
                workspace_factor=0.55, workspace_edge=2)
class GAT(BasicGNN):
    """Graph attention network: :class:`~gnn_dist.nn.GATConv` layers (see :class:`BasicGNN`).

    As in PyG's GAT example: hidden layers have ``heads`` heads (default 8) of width
    ``hidden_dim // heads``, concatenated (so ``hidden_dim`` is the total width and must be a
    multiple of ``heads``); the output layer has ``out_heads`` heads (default 1), averaged.
    ``attn_dropout`` (default 0) is the attention-coefficient dropout of every layer, keyed like
    the feature dropout. ``edge_dim`` (``--edge-dim``, default the partition's edge feature width)
    makes every layer's scores read the edge features. Other keyword arguments go to every
    :class:`~gnn_dist.nn.GATConv`.
    """

    edge_features = "optional"
    """Reads the block's ``edge_attr`` when built with ``edge_dim`` (:mod:`gnn_dist.models.edge_features`)."""

    def init_conv(self, in_channels: int, out_channels: int, *, last: bool, heads: int = 8, out_heads: int = 1,
                  attn_dropout: float = 0.0, **kwargs: Any) -> nn.Module:
        if last:
            return GATConv(in_channels, out_channels, heads=out_heads, concat=False, dropout=attn_dropout, **kwargs)
        if heads < 1 or out_channels % heads:
            raise ValueError(f"GAT: hidden_dim = {out_channels} must be a positive multiple of heads = {heads} "
                             f"(each of the {heads} heads is hidden_dim // heads wide)")
        return GATConv(in_channels, out_channels // heads, heads=heads, concat=True, dropout=attn_dropout, **kwargs)


@register_model("gin", saved=saved.gin_saved, workspace_factor=1.5)
class GIN(BasicGNN):
    """Graph isomorphism network: :class:`~gnn_dist.nn.GINConv` layers whose network is
    ``Linear(in, out) - ReLU - Linear(out, out)`` (see :class:`BasicGNN`)."""

    def init_conv(self, in_channels: int, out_channels: int, *, last: bool, **kwargs: Any) -> nn.Module:
        mlp = nn.Sequential(nn.Linear(in_channels, out_channels), nn.ReLU(), nn.Linear(out_channels, out_channels))
        return GINConv(mlp, **kwargs)


def build_model(spec: str | Any, *, in_dim: int, out_dim: int, hidden_dim: int | None = None,
                num_layers: int | None = None, dropout: float | None = None, seed: int | None = None,
                heads: int | None = None, input_dropout: float | None = None, activation: str | None = None,
                jk: str | None = None, typed: Any = None, **layer_kwargs: Any) -> BasicGNN:
    """The model ``MODELS[name]``. ``spec`` is its name (then ``hidden_dim`` and ``num_layers``
    are required) or a :class:`~gnn_dist.config.ModelConfig` (``model``, ``hidden``, ``layers``,
    ``dropout``, ``input_dropout``, ``activation``, ``jk``, ``heads``, ``out_heads``, ``attn_dropout``,
    ``sage_init`` (SAGE's layer keyword ``init`` when not ``"pyg"``),
    ``seed``; keyword arguments override it). ``heads`` (GAT only) is left at the model's default
    when None; GAT's ``out_heads`` and ``attn_dropout`` are layer keyword arguments; ``jk`` is
    passed only when not ``"last"``, to a model whose ``jk_modes`` hold it. A typed model
    (``register_model(..., typed=True)``, R-GCN) also takes ``typed``, the rank's
    :class:`~gnn_dist.hetero.TypedPart` (``part.typed``), and the config's ``num_bases`` and
    ``embedding_dim``."""
    if not isinstance(spec, str):
        hidden_dim = spec.hidden if hidden_dim is None else hidden_dim
        num_layers = spec.layers if num_layers is None else num_layers
        dropout = spec.dropout if dropout is None else dropout
        seed = spec.seed if seed is None else seed
        heads = spec.heads if heads is None else heads
        input_dropout = spec.input_dropout if input_dropout is None else input_dropout
        activation = spec.activation if activation is None else activation
        jk = getattr(spec, "jk", "last") if jk is None else jk
        if spec.out_heads is not None:
            layer_kwargs.setdefault("out_heads", spec.out_heads)
        if spec.attn_dropout:
            layer_kwargs.setdefault("attn_dropout", spec.attn_dropout)
        if getattr(spec, "sage_init", "pyg") != "pyg":
            layer_kwargs.setdefault("init", spec.sage_init)
        if getattr(spec, "edge_dim", None):   # resolved against the partition (models.edge_features)
            layer_kwargs.setdefault("edge_dim", spec.edge_dim)
        if getattr(spec, "num_bases", None) is not None:
            layer_kwargs.setdefault("num_bases", spec.num_bases)
        if getattr(spec, "embedding_dim", None) is not None:
            layer_kwargs.setdefault("embedding_dim", spec.embedding_dim)
        spec = spec.model
    name = spec
    model = model_spec(name)
    if model.typed:   # a typed model is built for the rank's typed part (gnn_dist.hetero.TypedPart)
        if typed is None:
            raise ValueError(f"model {name!r} trains typed (heterogeneous) partitions: build it with typed=part.typed")
        layer_kwargs["typed"] = typed
    else:
        layer_kwargs.pop("embedding_dim", None)
    if hidden_dim is None or num_layers is None:
        raise ValueError("build_model needs hidden_dim and num_layers (or a ModelConfig)")
    if heads is not None:
        if "heads" not in model.options:
            raise ValueError(f"heads={heads} does not apply to the {name!r} model (its options: "
                             f"{', '.join(model.options) or 'none'})")
        layer_kwargs["heads"] = heads
    if input_dropout:   # passed only when set: a registered model's own __init__ may not take them
        layer_kwargs["input_dropout"] = input_dropout
    if activation is not None and activation != "relu":
        layer_kwargs["activation"] = activation
    if jk is not None and jk != "last":
        if jk not in model.jk_modes:
            raise ValueError(f"jk={jk!r} does not apply to the {name!r} model (its jk modes: "
                             f"{', '.join(model.jk_modes)})")
        layer_kwargs["jk"] = jk
    return model.model_cls(in_dim, hidden_dim, out_dim, num_layers, dropout=0.5 if dropout is None else dropout,
                        seed=0 if seed is None else seed, **layer_kwargs)
