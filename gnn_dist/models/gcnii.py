"""GCNII: a deep GCN with initial residual and identity mapping (Chen et al., 2020), as PyG's example."""

from __future__ import annotations

import torch
from torch import nn

from ..nn import INPUT_LAYER, DropoutKey, GCN2Conv, get_activation, hash_dropout
from ..nn.part import Activation, PartLike
from .saved import gcnii_outside, gcnii_saved
from .spec import register_model
from .shared import check_inner_rows, check_model_args

__all__ = ["GCNII"]


@register_model("gcnii", saved=gcnii_saved, outside=gcnii_outside, workspace_factor=1.1)
class GCNII(nn.Module):
    r"""``Linear(in, hidden) - act``, then ``num_layers`` :class:`~gnn_dist.nn.GCN2Conv` layers of
    width ``hidden`` (layer :math:`\ell` with :math:`\beta_\ell = \log(\theta / \ell + 1)`), each
    followed by the activation, then ``Linear(hidden, out)``; hash dropout before every linear map
    and every conv (PyG's ``gcn2_cora`` example; stable at 16-64 layers, where GCN is not).

    Per conv ``i`` the model hands ``part.run_layer(i, conv_i.bind(x_0, block), h, ...)`` the bound layer,
    ``x_0`` being the first linear map's output at this rank's rows: the initial representation
    never travels, only the layers' inputs do, as for every built-in model. Dropout masks are keyed
    like :class:`~gnn_dist.models.BasicGNN`'s (layer :data:`~gnn_dist.nn.INPUT_LAYER` before the
    first linear map, ``i`` before conv ``i``, ``num_layers`` before the last), so P ranks equal one
    device with dropout on.

    Args:
        in_dim, hidden_dim, out_dim (int): widths.
        num_layers (int): number of GCN2Conv layers (>= 1).
        dropout (float, optional): dropout before each linear map and conv. (default: :obj:`0.5`)
        seed (int, optional): dropout seed. (default: :obj:`0`)
        activation (str, optional): after the first linear map and each conv. (default: :obj:`"relu"`)
        alpha (float, optional): the initial residual's strength. (default: :obj:`0.1`)
        theta (float, optional): the identity mapping's :math:`\theta`. (default: :obj:`0.5`)
        shared_weights (bool, optional): one weight per conv for both terms. (default: :obj:`True`)

    Shapes:
        - **input:** ``part``, ``x`` :math:`(I, F_{in})` inner rows
        - **output:** logits :math:`(I, F_{out})`
    """

    accepts_layer_input = False
    """Its first layer is a linear map of the inner rows: the Trainer passes the features as a tensor."""

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int, num_layers: int, dropout: float = 0.5,
                 seed: int = 0, *, input_dropout: float = 0.0, activation: str = "relu", alpha: float = 0.1,
                 theta: float = 0.5, shared_weights: bool = True) -> None:
        super().__init__()
        check_model_args("GCNII", in_dim=in_dim, hidden_dim=hidden_dim, out_dim=out_dim, num_layers=num_layers,
                         dropout=dropout)
        if input_dropout:
            raise ValueError("GCNII: input_dropout is its dropout (before the first linear map); leave it at 0")
        self.in_dim, self.hidden_dim, self.out_dim, self.num_layers = in_dim, hidden_dim, out_dim, num_layers
        self.dropout = float(dropout)
        self.activation = activation
        self._act = get_activation(activation)
        self.seed = int(seed)
        self.lin_in = nn.Linear(in_dim, hidden_dim)
        self.convs = nn.ModuleList(GCN2Conv(hidden_dim, alpha, theta, layer=i + 1, shared_weights=shared_weights)
                                   for i in range(num_layers))
        self.lin_out = nn.Linear(hidden_dim, out_dim)
        self.register_buffer("dropout_step", torch.zeros((), dtype=torch.long))

    def reset_parameters(self) -> None:
        self.lin_in.reset_parameters()
        self.lin_out.reset_parameters()
        for conv in self.convs:
            conv.reset_parameters()

    def forward(self, part: PartLike, x: torch.Tensor) -> torch.Tensor:
        block = part.block
        check_inner_rows("GCNII", x, block, self.in_dim)
        ids = block.src_original_ids[:block.num_dst]
        step = self.dropout_step.clone()   # this step's value: work recomputed in backward draws the same masks

        def drop(h: torch.Tensor, layer: int, rows: torch.Tensor | None = None) -> torch.Tensor:
            return hash_dropout(h, self.dropout, seed=self.seed, step=step, layer=layer,
                                row_ids=ids if rows is None else ids[rows], training=self.training)

        def act_then_drop(layer: int) -> Activation:
            # the dropout before the next conv is part of this conv's activation, so a schedule
            # that sends a layer's boundary rows early (overlap) sends them dropped
            return lambda h, rows: drop(self._act(h), layer, rows)
        x_0 = self._act(self.lin_in(drop(x, INPUT_LAYER)))
        h = drop(x_0, 0)
        last = self.num_layers - 1
        for i, conv in enumerate(self.convs):
            h = part.run_layer(i, conv.bind(x_0, block), h, dropout_key=DropoutKey(self.seed, step, i),
                               activation=None if i == last else act_then_drop(i + 1))
        out = self.lin_out(drop(self._act(h), self.num_layers))
        if self.training:
            with torch.no_grad():
                self.dropout_step += 1
        return out

    def __repr__(self) -> str:
        return f"GCNII({self.in_dim}, {self.out_dim}, num_layers={self.num_layers})"

