"""A layer that is not built in, written against the layer protocol, and a model made of it.

``GraphConv`` (Morris et al., "Weisfeiler and Leman Go Neural", AAAI 2019) sums its neighbours,
``x'_v = W_1 x_v + W_2 sum_{u -> v} x_u + b``. It implements the five methods of
:class:`gnn_dist.nn.DecomposableLayer`, so it gets every schedule (``sync``, ``overlap``,
``stale``), recomputation and the feature cache's chunked and precomputed first layer with no
other file touched. ``register_model`` makes it ``--model graphconv``, with what its layers save
for backward (the memory planner's formula; leave ``saved`` out and the planner uses a
conservative one, with a warning); ``register_adapter`` lets ``--parallel layer`` cut it into
stages. The stock command line loads it with ``--import``. See docs/extending.md.

    gnn-dist partition --dataset sbm-tiny --parts 2 --out parts/tiny-2
    gnn-dist train --import examples/custom_layer.py --data parts/tiny-2 --model graphconv --pipeline overlap
    torchrun --nproc-per-node 2 examples/custom_layer.py --data parts/tiny-2 --model graphconv   # as a script
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from gnn_dist.layer_parallel import StagedBasicGNN, register_adapter
from gnn_dist.models import BasicGNN, register_model
from gnn_dist.models.saved import LayerShape, Terms, activation_terms
from gnn_dist.nn import Block, propagate, spmm


@dataclass(frozen=True, slots=True)
class SumContext:
    map_first: bool       # W_2 was applied to the source rows, before the sum
    x_dst: torch.Tensor   # [D, F_in]: the destinations' own rows (the W_1 term's)


class GraphConv(nn.Module):
    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.in_channels, self.out_channels = in_channels, out_channels
        self.lin_rel = nn.Linear(in_channels, out_channels)                # W_2 and b
        self.lin_root = nn.Linear(in_channels, out_channels, bias=False)   # W_1

    def reset_parameters(self) -> None:
        self.lin_rel.reset_parameters()
        self.lin_root.reset_parameters()

    def forward(self, block: Block, x_src: torch.Tensor) -> torch.Tensor:
        return propagate(self, block, x_src)

    # ---- the layer protocol: begin, transform, aggregate, merge, update
    linear_aggregation = True   # the sum reads no parameter: a first layer can be precomputed

    def begin(self, block, x_first, dropout_key=None, *, raw=False):
        map_first = not raw and self.out_channels < self.in_channels   # sum the narrower rows
        return SumContext(map_first, x_first[:block.num_dst]), self.transform(x_first, None, map_first)

    def transform(self, x, ctx, map_first=None):
        map_first = ctx.map_first if map_first is None else map_first
        return F.linear(x, self.lin_rel.weight) if map_first else x

    def aggregate(self, group, z, ctx, *, whole=False):
        return spmm(group, z)          # the sum over the group's edges

    def merge(self, a, b):
        return a + b

    def update(self, acc, ctx):
        out = acc + self.lin_rel.bias if ctx.map_first else self.lin_rel(acc)
        return out + self.lin_root(ctx.x_dst)

    def __repr__(self) -> str:
        return f"GraphConv({self.in_channels}, {self.out_channels})"


def graphconv_saved(s: LayerShape) -> Terms:
    """What a layer keeps for backward, per inner row (I) and source row (S): its input rows
    ``S w_in`` (both weights' gradients read them; ``x_dst`` is a view), and when it sums first
    the sum ``I w_in`` (``lin_rel``'s input); then the activation's output and dropout mask."""
    map_first = s.w_out < s.w_in
    return Terms(source=s.w_in, inner=0 if map_first else s.w_in) + activation_terms(s)


@register_model("graphconv", saved=graphconv_saved)
class GraphConvNet(BasicGNN):
    def init_conv(self, in_channels: int, out_channels: int, *, last: bool, **kwargs) -> nn.Module:
        return GraphConv(in_channels, out_channels)


register_adapter(GraphConvNet)(StagedBasicGNN)   # --parallel layer: it runs BasicGNN's forward


if __name__ == "__main__":
    from gnn_dist.train import main

    sys.exit(main())
