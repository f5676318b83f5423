r"""Deep residual GCN and GraphSAGE: DeepGCN's pre-activation residual blocks ("res+", Li et al.
2020), as PyG's ``DeepGCNLayer(block="res+")`` in its ogbn-proteins example (``DeeperGCN``)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..nn import INPUT_LAYER, DeepGCNLayer, DropoutKey, GCNConv, RowDropout, SAGEConv, get_activation, hash_dropout
from ..nn.part import PartLike
from .saved import resgcn_saved, residual_outside, ressage_saved
from .spec import register_model
from .shared import JK_MODES, check_inner_rows, check_jk, check_model_args, jk_width, jumping_knowledge

__all__ = ["DeepResidualGNN", "ResGCN", "ResGraphSAGE", "NORMS"]

NORMS = ("layer", "none")
"""``norm=``: a LayerNorm in every block, or none."""


def _residual_stream(h: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
    """A hidden block's "activation" as the schedule sees it: none, its output is the residual
    stream, which travels as it is (each reader pre-activates its halo rows itself)."""
    return h


class DeepResidualGNN(nn.Module):
    r"""``Linear(in, hidden)``, then ``num_layers`` graph convolutions of width ``hidden`` in
    :class:`~gnn_dist.nn.DeepGCNLayer` blocks (pre-activation residual, ``res+``), then
    ``Linear(hidden, out)``, as PyG's ``DeeperGCN`` (``examples/ogbn_proteins_deepgcn.py``):

    .. code-block:: text

        h = encoder(x)                                     # [I, hidden]
        h = layers[0].conv(h)                              # the first conv: no skip, no pre-activation
        for l >= 1:   h = h + layers[l].conv(dropout_l(act(layers[l].norm(h))))
        out = lin(dropout_L(act(layers[0].norm(h))))       # the first block's norm closes the stack

    Subclasses give the conv (:meth:`init_conv`). The norm is a ``torch.nn.LayerNorm`` of each
    row (``norm="layer"``), or none: row-local, so a part normalises its rows as one device does.
    A BatchNorm (PyG's other choice) would need the whole graph's statistics, an all-reduce per
    layer in forward and backward; it is not offered.

    Each block's input rows travel as they are (the residual stream) and every rank
    pre-activates its halo rows itself, with the dropout keyed by the rows' original ids: layer
    ``l`` before conv ``l``, :data:`~gnn_dist.nn.INPUT_LAYER` for the input features
    (``input_dropout``), ``num_layers`` before ``lin``. So P ranks equal one device with dropout
    on, under every schedule (``overlap`` included: the blocks implement the layer protocol).

    Jumping knowledge (``jk="cat"`` or ``"max"``): the blocks' outputs
    :math:`\mathbf{h}^{(1)}, \ldots, \mathbf{h}^{(L)}` each go through the closing
    ``act(layers[0].norm(.))``, are combined (:func:`~gnn_dist.models.shared.jumping_knowledge`),
    dropped and mapped by ``lin`` (``Linear(num_layers * hidden, out)`` for ``cat``).

    Args:
        in_dim, hidden_dim, out_dim (int): widths.
        num_layers (int): number of convs (>= 1).
        dropout (float, optional): the dropout before each conv but the first, and before
            ``lin``. (default: :obj:`0.5`)
        seed (int, optional): dropout seed. (default: :obj:`0`)
        input_dropout (float, optional): dropout of the input features before the encoder.
            (default: :obj:`0.`)
        activation (str, optional): a name of :data:`~gnn_dist.nn.ACTIVATIONS`. (default: :obj:`"relu"`)
        norm (str, optional): ``"layer"`` or ``"none"``. (default: :obj:`"layer"`)
        jk (str, optional): ``"last"``, ``"cat"`` or ``"max"``. (default: :obj:`"last"`)

    Shapes:
        - **input:** ``part``, ``x`` :math:`(I, F_{in})` inner rows
        - **output:** logits :math:`(I, F_{out})`

    Modules ``node_encoder``, ``layers`` (each with ``conv`` and ``norm``) and ``lin`` are named
    as in PyG's example, so state dicts load both ways.
    """

    jk_modes = JK_MODES
    """The ``jk`` modes the model takes (``--jk``)."""

    accepts_layer_input = False
    """Its first layer is a linear map of the inner rows: the Trainer passes the features as a tensor."""

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int, num_layers: int, dropout: float = 0.5,
                 seed: int = 0, *, input_dropout: float = 0.0, activation: str = "relu", norm: str = "layer",
                 jk: str = "last") -> None:
        super().__init__()
        name = self.__class__.__name__
        check_model_args(name, in_dim=in_dim, hidden_dim=hidden_dim, out_dim=out_dim, num_layers=num_layers,
                         dropout=dropout, input_dropout=input_dropout)
        if norm not in NORMS:
            raise ValueError(f"{name}: norm must be one of {', '.join(NORMS)}, got {norm!r} (a BatchNorm would "
                             f"need the whole graph's statistics)")
        self.jk = check_jk(name, jk)
        self.in_dim, self.hidden_dim, self.out_dim, self.num_layers = in_dim, hidden_dim, out_dim, num_layers
        self.dropout = float(dropout)
        self.input_dropout = float(input_dropout)
        self.activation = activation
        self.norm = norm
        self._act = get_activation(activation)
        self.seed = int(seed)
        self.node_encoder = nn.Linear(in_dim, hidden_dim)
        self.layers = nn.ModuleList(
            DeepGCNLayer(self.init_conv(hidden_dim, hidden_dim),
                         nn.LayerNorm(hidden_dim, elementwise_affine=True) if norm == "layer" else None,
                         self._act, dropout=dropout)
            for _ in range(num_layers))
        self.lin = nn.Linear(jk_width(jk, hidden_dim, num_layers), out_dim)
        self.register_buffer("dropout_step", torch.zeros((), dtype=torch.long))

    def init_conv(self, in_channels: int, out_channels: int, **kwargs: Any) -> nn.Module:
        """The conv of one block (it must implement the layer protocol)."""
        raise NotImplementedError

    @property
    def convs(self) -> list[nn.Module]:
        """The module each layer runs (``part.run_layer``'s ``conv``): the first block's conv, then
        the blocks (the weights are in :attr:`layers`)."""
        return [layer.conv if i == 0 else layer for i, layer in enumerate(self.layers)]

    def reset_parameters(self) -> None:
        """Re-initialise every weight (``dropout_step`` is kept)."""
        self.node_encoder.reset_parameters()
        for layer in self.layers:
            layer.reset_parameters()
        self.lin.reset_parameters()

    def forward(self, part: PartLike, x: torch.Tensor) -> torch.Tensor:
        block = part.block
        check_inner_rows(self.__class__.__name__, x, block, self.in_dim)
        ids = block.src_original_ids[:block.num_dst]
        step = self.dropout_step.clone()   # this step's value: work recomputed in backward draws the same masks
        if self.training and self.input_dropout > 0:
            x = RowDropout(self.input_dropout, DropoutKey(self.seed, step, INPUT_LAYER))(block, x)
        h = self.node_encoder(x)
        last = self.num_layers - 1
        xs = []
        for i, conv in enumerate(self.convs):
            h = part.run_layer(i, conv, h, dropout_key=DropoutKey(self.seed, step, i),
                               activation=None if i == last else _residual_stream)
            if self.jk != "last":
                xs.append(self._close(h))
        h = jumping_knowledge(self.jk, xs) if xs else self._close(h)
        h = hash_dropout(h, self.dropout, seed=self.seed, step=step, layer=self.num_layers, row_ids=ids,
                         training=self.training)
        out = self.lin(h)
        if self.training:
            with torch.no_grad():
                self.dropout_step += 1
        return out

    def _close(self, h: torch.Tensor) -> torch.Tensor:
        """``act(layers[0].norm(h))``: the stack's closing normalisation (PyG's example's)."""
        norm = self.layers[0].norm
        return self._act(h if norm is None else norm(h))

    def __repr__(self) -> str:
        jk = "" if self.jk == "last" else f", jk={self.jk}"
        return f"{self.__class__.__name__}({self.in_dim}, {self.out_dim}, num_layers={self.num_layers}{jk})"


@register_model("resgcn", saved=resgcn_saved, outside=residual_outside)
class ResGCN(DeepResidualGNN):
    """Deep residual GCN: :class:`~gnn_dist.nn.GCNConv` in ``res+`` blocks (see :class:`DeepResidualGNN`)."""

    def init_conv(self, in_channels: int, out_channels: int, **kwargs: Any) -> nn.Module:
        return GCNConv(in_channels, out_channels, **kwargs)


@register_model("ressage", saved=ressage_saved, outside=residual_outside)
class ResGraphSAGE(DeepResidualGNN):
    """Deep residual GraphSAGE (mean aggregation): :class:`~gnn_dist.nn.SAGEConv` in ``res+``
    blocks (see :class:`DeepResidualGNN`)."""

    def init_conv(self, in_channels: int, out_channels: int, **kwargs: Any) -> nn.Module:
        return SAGEConv(in_channels, out_channels, **kwargs)
