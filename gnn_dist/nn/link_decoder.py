r"""Link decoders: the score of a pair from its endpoints' embeddings (``--decoder``).

- ``dot``: :math:`s(u, v) = \langle h_u, h_v \rangle` (no parameters; GAE's inner-product decoder);
- ``mlp``: :math:`s(u, v) = W_2\, \mathrm{ReLU}(W_1 (h_u \odot h_v) + b_1) + b_2`, the OGB link
  examples' ``LinkPredictor`` (two layers, hidden width the embedding width);
- ``distmult``: :math:`s(h, r, t) = \sum_k h_k\, w_{r,k}\, t_k`, DistMult (Yang et al., 2015):
  a learned diagonal :math:`w_r` per relation (``[R, D]``, initialised to ones: the dot product),
  for link prediction on the relations of a typed graph; on a homogeneous graph it is the one
  relation's weighted inner product. It is *relational*: it takes each pair's relation id.

All are symmetric in :math:`u, v`. A score is a logit: :math:`\sigma(s)` is the predicted
probability of the edge. The decoder is a submodule of the model (``link_decoder``), so its
parameters are broadcast, all-reduced, checkpointed and saved with the encoder's.
"""

from __future__ import annotations

import torch
from torch import nn

from ..config.registry import register_choices

__all__ = ["DotDecoder", "MLPDecoder", "DistMultDecoder", "DECODERS", "build_decoder"]


class DotDecoder(nn.Module):
    """:math:`\\langle h_u, h_v \\rangle` of ``[E, D]`` rows -> ``[E]``."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = int(dim)

    def forward(self, h_src: torch.Tensor, h_dst: torch.Tensor) -> torch.Tensor:
        return (h_src * h_dst).sum(dim=-1)


class MLPDecoder(nn.Module):
    """Two linear layers on :math:`h_u \\odot h_v` ``[E, D]`` -> ``[E]``."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = int(dim)
        self.lin1 = nn.Linear(dim, dim)
        self.lin2 = nn.Linear(dim, 1)

    def forward(self, h_src: torch.Tensor, h_dst: torch.Tensor) -> torch.Tensor:
        return self.lin2(torch.relu(self.lin1(h_src * h_dst))).squeeze(-1)


class DistMultDecoder(nn.Module):
    r""":math:`\sum_k h_k w_{r,k} t_k` of rows ``[E, D]`` (or ``[E, M, D]``) and relation ids
    ``[E]`` -> ``[E]`` (``[E, M]``); ``relations=None`` scores relation 0."""

    relational = True

    def __init__(self, dim: int, num_relations: int = 1) -> None:
        super().__init__()
        self.dim, self.num_relations = int(dim), int(num_relations)
        self.weight = nn.Parameter(torch.ones(self.num_relations, self.dim))
        """``[R, D]``: each relation's diagonal."""

    def forward(self, h_src: torch.Tensor, h_dst: torch.Tensor, relations: torch.Tensor | None = None) -> torch.Tensor:
        w = self.weight[0] if relations is None else self.weight[relations]
        if relations is not None and h_src.dim() == 3:   # [E, M, D]: each pair's M negatives
            w = w.unsqueeze(1)
        return (h_src * w.to(h_src.dtype) * h_dst).sum(dim=-1)


DECODERS: dict[str, type[nn.Module]] = {"dot": DotDecoder, "mlp": MLPDecoder, "distmult": DistMultDecoder}
"""The decoders by ``--decoder`` name."""
register_choices("decoder", lambda: tuple(DECODERS))   # --decoder (gnn_dist.config)


def build_decoder(name: str, dim: int, num_relations: int = 1) -> nn.Module:
    """The decoder ``name`` for embeddings of width ``dim`` (a relational one for
    ``num_relations`` relations)."""
    if name not in DECODERS:
        raise ValueError(f"decoder {name!r} is not one of {', '.join(DECODERS)}")
    cls = DECODERS[name]
    return cls(dim, num_relations) if getattr(cls, "relational", False) else cls(dim)
