"""Graph isomorphism convolution with edge features, equal to PyG's ``GINEConv``."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .block import Block
from .decomposable import check_first
from .dropout import DropoutKey
from .gin_conv import GINConv, _GINContext

__all__ = ["GINEConv"]


class GINEConv(GINConv):
    r"""The modified graph isomorphism operator with edge features from the `"Strategies for
    Pre-training Graph Neural Networks" <https://arxiv.org/abs/1905.12265>`_ paper

    .. math::
        \mathbf{x}^{\prime}_v = h_{\mathbf{\Theta}} \left( (1 + \epsilon) \cdot \mathbf{x}_v +
        \sum_{u \to v} \mathrm{ReLU} ( \mathbf{x}_u + \mathbf{\Theta}_e \mathbf{e}_{uv} ) \right)

    :math:`\mathbf{e}_{uv}` is the edge's row of the block's
    :attr:`~gnn_dist.nn.Block.edge_attr`; with ``edge_dim`` it is first mapped to the input width
    by ``lin`` (:math:`\mathbf{\Theta}_e`, a linear map with bias, as PyG's), without it the edge
    features must already be as wide as the input rows. The sum runs over the destination's
    in-edges as stored (self-loops and duplicates included, each with its own features). The
    messages are an ``[E, F_in]`` tensor (the ReLU is per edge, so no sparse product can take
    its place): memory like PyG's, not like :class:`~gnn_dist.nn.GINConv`'s.

    Args:
        nn (torch.nn.Module): the network :math:`h_{\mathbf{\Theta}}`, mapping ``[D, F_in]`` to
            ``[D, F_out]`` (e.g. an MLP).
        eps (float, optional): initial :math:`\epsilon`. (default: :obj:`0.`)
        train_eps (bool, optional): learn :math:`\epsilon`. (default: :obj:`False`)
        edge_dim (int, optional): width :math:`D_e` of the edge features, mapped to ``F_in`` by
            ``lin``; ``F_in`` is read from ``nn`` (its ``in_features``, or its first module's
            for a ``Sequential``), as PyG does. (default: :obj:`None`: no map)

    Shapes:
        - **input:** block with ``S`` sources, ``D`` destinations and ``edge_attr``
          :math:`(E, D_e)`, source features ``x_src`` :math:`(S, F_{in})`
        - **output:** destination features :math:`(D, F_{out})`

    ``nn.*``, ``eps`` and ``lin.weight``/``lin.bias`` are named as in PyG. The layer protocol's
    ``transform`` (the identity), ``merge`` (a sum) and ``update`` are
    :class:`~gnn_dist.nn.GINConv`'s; the aggregation is this layer's.
    """

    def __init__(self, nn: torch.nn.Module, eps: float = 0.0, train_eps: bool = False,
                 edge_dim: int | None = None) -> None:
        if edge_dim is not None and (isinstance(edge_dim, bool) or not isinstance(edge_dim, int) or edge_dim < 1):
            raise ValueError(f"GINEConv: edge_dim must be a positive int or None, got {edge_dim!r}")
        super().__init__(nn, eps, train_eps)
        self.edge_dim = edge_dim
        self.lin: torch.nn.Linear | None = None
        if edge_dim is not None:   # PyG's order: the network's parameters first, then the edge map's
            self.lin = torch.nn.Linear(edge_dim, _in_channels(nn))

    def reset_parameters(self) -> None:
        super().reset_parameters()
        if getattr(self, "lin", None) is not None:
            self.lin.reset_parameters()

    # ---------------------------------------------------------------- the layer protocol
    linear_aggregation = False
    """The messages pass through a ReLU with the edge features: no aggregation of the raw rows
    ahead of time (the first layer's precomputation)."""

    def begin(self, block: Block, x_first: torch.Tensor, dropout_key: DropoutKey | None = None, *,
              raw: bool = False) -> tuple[_GINContext, torch.Tensor]:
        """The context is the destinations' rows ``[D, F]`` (the ``(1 + eps)`` term's); the
        network's first map is never applied before the sum (the messages' ReLU comes between)."""
        check_first(block, x_first, None, self)
        if raw:
            raise ValueError(f"{type(self).__name__} cannot aggregate its raw input rows ahead of time: each message is "
                             f"ReLU(x_u + edge term)")
        return _GINContext(block.dst_rows(x_first), map_first=False), x_first

    def aggregate(self, group: Block, z: torch.Tensor, ctx: _GINContext, *, whole: bool = False) -> torch.Tensor:
        """``sum over the group's edges u -> v of ReLU(z_u + lin(e_uv))``, ``[D, F]``."""
        edge = self._edge_term(group, z)
        msg = F.relu(z[group.indices] + edge.to(z.dtype))                         # [E, F]
        return torch.zeros(group.num_dst, z.shape[1], dtype=msg.dtype, device=z.device).index_add_(
            0, group.dst_index, msg)

    def _edge_term(self, group: Block, z: torch.Tensor) -> torch.Tensor:
        attr = group.edge_attr
        if attr is None:
            raise ValueError(f"{type(self).__name__}: the block has no edge_attr; GINEConv reads edge features (partition a "
                             f"graph with edge features: npz edge_attr, npy-dir edge_attr.npy, OGB edge-feat)")
        if self.lin is not None:
            if attr.shape[1] != self.edge_dim:
                raise ValueError(f"{type(self).__name__}: edge_dim={self.edge_dim} but the block's edge_attr has "
                                 f"{attr.shape[1]} columns")
            return self.lin(attr)
        if attr.shape[1] != z.shape[1]:
            raise ValueError(f"{type(self).__name__}: the edge features have {attr.shape[1]} columns but the node rows have "
                             f"{z.shape[1]}; set edge_dim={attr.shape[1]} to map them to the rows' width")
        return attr

    def __repr__(self) -> str:
        edge = f", edge_dim={self.edge_dim}" if self.edge_dim is not None else ""
        return f"{self.__class__.__name__}(nn={self.nn}{edge})"


def _in_channels(module: torch.nn.Module) -> int:
    """The input width of ``module`` (its first module's, for a ``Sequential``), as PyG's GINEConv reads it."""
    first = module[0] if isinstance(module, torch.nn.Sequential) else module
    for attr in ("in_features", "in_channels"):
        width = getattr(first, attr, None)
        if isinstance(width, int) and width > 0:
            return width
    raise ValueError(f"GINEConv: cannot tell the input width of nn={module!r} (no in_features/in_channels); "
                     f"give nn a Linear first")
