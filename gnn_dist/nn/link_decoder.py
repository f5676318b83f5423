r"""Link decoders: the score of a pair from its endpoints' embeddings (``--decoder``).

- ``dot``: :math:`s(u, v) = \langle h_u, h_v \rangle` (no parameters; GAE's inner-product decoder);
- ``mlp``: :math:`s(u, v) = W_2\, \mathrm{ReLU}(W_1 (h_u \odot h_v) + b_1) + b_2`, the OGB link
  examples' ``LinkPredictor`` (two layers, hidden width the embedding width).

Both are symmetric in :math:`u, v`. A score is a logit: :math:`\sigma(s)` is the predicted
probability of the edge. The decoder is a submodule of the model (``link_decoder``), so its
parameters are broadcast, all-reduced, checkpointed and saved with the encoder's.
"""

from __future__ import annotations

import torch
from torch import nn

from ..config.registry import register_choices

__all__ = ["DotDecoder", "MLPDecoder", "DECODERS", "build_decoder"]


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


DECODERS: dict[str, type[nn.Module]] = {"dot": DotDecoder, "mlp": MLPDecoder}
"""The decoders by ``--decoder`` name."""
register_choices("decoder", lambda: tuple(DECODERS))   # --decoder (gnn_dist.config)


def build_decoder(name: str, dim: int) -> nn.Module:
    """The decoder ``name`` for embeddings of width ``dim``."""
    if name not in DECODERS:
        raise ValueError(f"decoder {name!r} is not one of {', '.join(DECODERS)}")
    return DECODERS[name](dim)
