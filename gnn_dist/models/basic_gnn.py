"""Multi-layer GNNs that run on one rank's part: halo exchange, conv, ReLU, hash dropout.

Legend: ``I`` inner rows (the part's destinations ``D``), ``S`` = inner + halo source rows.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Protocol

import torch
import torch.nn.functional as F
from torch import nn

from ..nn import Block, DropoutKey, GATConv, GCNConv, GINConv, SAGEConv, hash_dropout
from ..nn.dropout import call_conv

__all__ = ["PartLike", "LayerInput", "Activation", "FullGraph", "BasicGNN", "GCN", "GraphSAGE", "GAT", "GIN",
           "MODELS", "build_model"]


Activation = Callable[[torch.Tensor, Optional[torch.Tensor]], torch.Tensor]
"""``activation(h_rows, rows)``: a hidden layer's ReLU and dropout applied to its output rows
``rows`` (int64 destination ids; None: all ``I`` rows, in order). Row-wise, so a part may
compute a layer's output in pieces (e.g. the rows its peers need first)."""


class PartLike(Protocol):
    """What a model runs on: a block and a differentiable halo exchange.

    Optional hooks the built-in models use when a part (a pipeline mode's view) has them:

    - ``begin_layer(i)``: called before layer ``i``, so the part numbers its exchanges by layer
      even when a layer makes none (a static first layer, see :class:`LayerInput`).
    - ``layer(conv, h_inner, *, dropout_key=None, activation=None) -> [I, F']``: runs one conv
      with its exchange folded in, then ``activation`` (None: the output layer) - the
      ``overlap`` mode; the models then call it instead of ``exchange`` followed by the conv.
    - ``input_layer(conv, x, *, dropout_key=None, activation=None) -> [I, F']``: the same for
      the first layer when its input ``x`` is a :class:`LayerInput`.
    """

    block: Block

    def exchange(self, h_inner: torch.Tensor) -> torch.Tensor:
        """``[I, F]`` inner rows -> ``[S, F]`` inner rows then halo rows (differentiable)."""
        ...


class LayerInput(Protocol):
    """A first-layer input that computes the first conv itself (``gnn_dist.cache.InputFeatures``:
    features served by a tiered store, halo rows fetched once, optionally chunked or
    precomputed). A model given one instead of a tensor calls :meth:`layer` for layer 0."""

    num_rows: int
    """``I``: the part's inner rows."""
    dim: int
    """``F_in``: the feature width."""

    def layer(self, conv: nn.Module, part: PartLike, *, dropout_key: Any = None,
              rows: torch.Tensor | None = None) -> torch.Tensor:
        """``conv``'s output ``[len(rows) or I, F']`` for destination rows ``rows`` (None: all);
        ``part.exchange`` fetches the halo rows if the input does not hold them."""
        ...


class FullGraph:
    """A whole graph on one device as a :class:`PartLike`: no halo, ``exchange`` is the identity.

    ``FullGraph(Block.from_graph(indptr, indices))`` runs a model without any process group.
    """

    def __init__(self, block: Block) -> None:
        if block.num_halo:
            raise ValueError(f"FullGraph needs a block without halo rows, got {block!r}")
        self.block = block

    def exchange(self, h_inner: torch.Tensor) -> torch.Tensor:
        return h_inner

    def __repr__(self) -> str:
        return f"FullGraph({self.block!r})"


class BasicGNN(nn.Module):
    r"""Base of the built-in models (after PyG's ``BasicGNN``): ``num_layers`` convs in
    :attr:`convs`, built in a loop by :meth:`init_conv`, the only method subclasses override.

    Forward on a part, for each layer ``i``:

    .. code-block:: text

        h_all = part.exchange(h)          # [I, F] -> [S, F]: inner rows then halo rows
        h = conv_i(part.block, h_all)     # [I, F']
        if i < num_layers - 1:  h = hash_dropout(relu(h), dropout, seed, dropout_step, i, original ids)

    ``x`` is the inner rows' features ``[I, F_in]``, or a :class:`LayerInput` (the trainer's
    ``gnn_dist.cache.InputFeatures``), which computes layer 0 itself without a per-step exchange.
    The part's optional hooks (``begin_layer``, ``layer``, ``input_layer``: see
    :class:`PartLike`) replace the exchange-then-conv steps when present.

    Dropout masks are keyed by ``(seed, dropout_step, layer, original node id, feature)``, so P
    ranks equal one device with dropout on. ``dropout_step`` is an int64 buffer (saved in the
    state dict, so a resumed run continues the same masks), incremented after each training-mode
    forward.

    Args:
        in_dim (int): input feature width.
        hidden_dim (int): width of the hidden layers.
        out_dim (int): output width (number of classes).
        num_layers (int): number of convs (>= 1).
        dropout (float, optional): feature dropout after each hidden layer. (default: :obj:`0.5`)
        seed (int, optional): dropout seed. (default: :obj:`0`)
        **layer_kwargs: passed to :meth:`init_conv`.

    Shapes:
        - **input:** ``part`` (a :class:`PartLike`), ``x`` :math:`(I, F_{in})` inner rows
        - **output:** logits :math:`(I, F_{out})`
    """

    accepts_layer_input = True
    """``forward`` takes a :class:`LayerInput` as ``x`` (the Trainer then passes its
    ``InputFeatures``: features through the store, halo rows fetched once)."""

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int, num_layers: int, dropout: float = 0.5,
                 seed: int = 0, **layer_kwargs: Any) -> None:
        super().__init__()
        name = self.__class__.__name__
        for arg, v in (("in_dim", in_dim), ("hidden_dim", hidden_dim), ("out_dim", out_dim),
                       ("num_layers", num_layers)):
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{name}: {arg} must be a positive int, got {v!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"{name}: dropout must be in [0, 1), got {dropout}")
        self.in_dim = in_dim
        self.hidden_dim = hidden_dim
        self.out_dim = out_dim
        self.num_layers = num_layers
        self.dropout = float(dropout)
        self.seed = int(seed)
        self.convs = nn.ModuleList()
        for i in range(num_layers):
            last = i == num_layers - 1
            self.convs.append(self.init_conv(in_dim if i == 0 else hidden_dim, out_dim if last else hidden_dim,
                                             last=last, **layer_kwargs))
        self.register_buffer("dropout_step", torch.zeros((), dtype=torch.long))

    def init_conv(self, in_channels: int, out_channels: int, *, last: bool, **kwargs: Any) -> nn.Module:
        """The conv mapping ``in_channels`` to ``out_channels`` (``last``: the output layer)."""
        raise NotImplementedError

    def reset_parameters(self) -> None:
        """Re-initialise the convs (``dropout_step`` is kept)."""
        for conv in self.convs:
            conv.reset_parameters()

    def forward(self, part: PartLike, x: torch.Tensor | LayerInput) -> torch.Tensor:
        block = part.block
        self._check_input(x, block)
        ids = block.src_original_ids[:block.num_dst]
        step = self.dropout_step
        begin_layer = getattr(part, "begin_layer", None)
        layer = getattr(part, "layer", None)
        h = x
        for i, conv in enumerate(self.convs):
            key = DropoutKey(self.seed, step, i) if getattr(conv, "uses_dropout_key", False) else None
            act = self._activation(i, step, ids) if i < self.num_layers - 1 else None
            if begin_layer is not None:
                begin_layer(i)
            if i == 0 and not isinstance(x, torch.Tensor):
                input_layer = getattr(part, "input_layer", None)
                if input_layer is not None:
                    h = input_layer(conv, x, dropout_key=key, activation=act)
                else:
                    h = x.layer(conv, part, dropout_key=key)
                    h = h if act is None else act(h, None)
                continue
            if layer is not None:
                h = layer(conv, h, dropout_key=key, activation=act)
                continue
            h_all = part.exchange(h)
            h = call_conv(conv, block, h_all, key)
            h = h if act is None else act(h, None)
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

    def _activation(self, layer: int, step: torch.Tensor, ids: torch.Tensor) -> Activation:
        """Hidden layer ``layer``'s ReLU + hash dropout on any subset of its output rows."""
        def act(h: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
            return hash_dropout(F.relu(h), self.dropout, seed=self.seed, step=step, layer=layer,
                                row_ids=ids if rows is None else ids[rows], training=self.training)
        return act

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_dim}, {self.out_dim}, num_layers={self.num_layers})"


class GCN(BasicGNN):
    """Graph convolutional network: :class:`~gnn_dist.nn.GCNConv` layers (see :class:`BasicGNN`)."""

    def init_conv(self, in_channels: int, out_channels: int, *, last: bool, **kwargs: Any) -> nn.Module:
        return GCNConv(in_channels, out_channels, **kwargs)


class GraphSAGE(BasicGNN):
    """GraphSAGE with mean aggregation: :class:`~gnn_dist.nn.SAGEConv` layers (see :class:`BasicGNN`)."""

    def init_conv(self, in_channels: int, out_channels: int, *, last: bool, **kwargs: Any) -> nn.Module:
        return SAGEConv(in_channels, out_channels, **kwargs)


class GAT(BasicGNN):
    """Graph attention network: :class:`~gnn_dist.nn.GATConv` layers (see :class:`BasicGNN`).

    As in PyG's GAT example: hidden layers have ``heads`` heads (default 8) of width
    ``hidden_dim // heads``, concatenated (so ``hidden_dim`` is the total width and must be a
    multiple of ``heads``); the output layer has ``out_heads`` heads (default 1), averaged.
    ``attn_dropout`` (default 0) is the attention-coefficient dropout of every layer, keyed like
    the feature dropout. Other keyword arguments go to every :class:`~gnn_dist.nn.GATConv`.
    """

    def init_conv(self, in_channels: int, out_channels: int, *, last: bool, heads: int = 8, out_heads: int = 1,
                  attn_dropout: float = 0.0, **kwargs: Any) -> nn.Module:
        if last:
            return GATConv(in_channels, out_channels, heads=out_heads, concat=False, dropout=attn_dropout, **kwargs)
        if heads < 1 or out_channels % heads:
            raise ValueError(f"GAT: hidden_dim = {out_channels} must be a positive multiple of heads = {heads} "
                             f"(each of the {heads} heads is hidden_dim // heads wide)")
        return GATConv(in_channels, out_channels // heads, heads=heads, concat=True, dropout=attn_dropout, **kwargs)


class GIN(BasicGNN):
    """Graph isomorphism network: :class:`~gnn_dist.nn.GINConv` layers whose network is
    ``Linear(in, out) - ReLU - Linear(out, out)`` (see :class:`BasicGNN`)."""

    def init_conv(self, in_channels: int, out_channels: int, *, last: bool, **kwargs: Any) -> nn.Module:
        mlp = nn.Sequential(nn.Linear(in_channels, out_channels), nn.ReLU(), nn.Linear(out_channels, out_channels))
        return GINConv(mlp, **kwargs)


MODELS: dict[str, type[BasicGNN]] = {"gcn": GCN, "sage": GraphSAGE, "gat": GAT, "gin": GIN}
"""The built-in models by CLI name."""


def build_model(name: str, *, in_dim: int, hidden_dim: int, out_dim: int, num_layers: int, dropout: float = 0.5,
                seed: int = 0, heads: int | None = None, **layer_kwargs: Any) -> BasicGNN:
    """The model ``MODELS[name]``; ``heads`` (GAT only) is left at the model's default when None."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(sorted(MODELS))}")
    if heads is not None:
        if name != "gat":
            raise ValueError(f"heads={heads} applies to the 'gat' model only, not {name!r}")
        layer_kwargs["heads"] = heads
    return MODELS[name](in_dim, hidden_dim, out_dim, num_layers, dropout=dropout, seed=seed, **layer_kwargs)
