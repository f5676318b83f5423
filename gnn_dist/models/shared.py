"""What the built-in models share: their argument checks and jumping knowledge.

Jumping knowledge (Xu et al. 2018, "Representation Learning on Graphs with Jumping Knowledge
Networks"; PyG's :class:`~torch_geometric.nn.models.JumpingKnowledge`) combines the
representations :math:`\\mathbf{x}^{(1)}, \\ldots, \\mathbf{x}^{(L)}` of every layer, row by row:

.. math::
    \\mathrm{cat}: \\ \\mathbf{x}_v = \\big[\\mathbf{x}_v^{(1)} \\,\\Vert\\, \\cdots \\,\\Vert\\,
    \\mathbf{x}_v^{(L)}\\big], \\qquad
    \\mathrm{max}: \\ x_{vj} = \\max_{\\ell} x^{(\\ell)}_{vj}

(``last``: :math:`\\mathbf{x}^{(L)}`; PyG's LSTM mode is not provided). Row-wise, so a part
computes it on its inner rows with no exchange.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["JK_MODES", "check_model_args", "check_jk", "check_inner_rows", "jk_width", "jumping_knowledge"]

JK_MODES = ("last", "cat", "max")
"""The jumping-knowledge modes (``jk=``): the last layer's output, or every layer's concatenated
or their element-wise maximum."""


def check_model_args(name: str, *, in_dim: Any, hidden_dim: Any, out_dim: Any, num_layers: Any,
                     dropout: Any, input_dropout: Any = 0.0) -> None:
    """Raise ``ValueError`` (naming the model ``name`` and the argument) unless the widths and the
    number of layers are positive ints and the dropouts probabilities in ``[0, 1)``."""
    for arg, v in (("in_dim", in_dim), ("hidden_dim", hidden_dim), ("out_dim", out_dim),
                   ("num_layers", num_layers)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{name}: {arg} must be a positive int, got {v!r}")
    for arg, v in (("dropout", dropout), ("input_dropout", input_dropout)):
        if not 0.0 <= v < 1.0:
            raise ValueError(f"{name}: {arg} must be in [0, 1), got {v}")


def check_jk(name: str, jk: Any) -> str:
    """``jk`` if it is one of :data:`JK_MODES`, else ``ValueError`` naming the model."""
    if jk not in JK_MODES:
        raise ValueError(f"{name}: jk must be one of {', '.join(JK_MODES)}, got {jk!r}")
    return jk


def check_inner_rows(name: str, x: Any, block: Any, in_dim: int) -> None:
    """Raise ``ValueError`` unless ``x`` is the part's inner rows' features, a tensor
    ``[I, in_dim]`` (the models whose first layer is a linear map of them)."""
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape != (block.num_dst, in_dim):
        shape = list(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"{name}: x must be the inner rows' features [{block.num_dst}, {in_dim}], got {shape}")


def jk_width(jk: str, width: int, num_layers: int) -> int:
    """The width of :func:`jumping_knowledge` of ``num_layers`` representations ``width`` wide."""
    return width * num_layers if jk == "cat" else width


def jumping_knowledge(jk: str, xs: list[torch.Tensor]) -> torch.Tensor:
    """The layers' representations ``xs`` (each ``[I, F]``) combined as ``jk`` says (see the
    module docstring), with PyG's ``JumpingKnowledge`` operations."""
    if jk == "cat":
        return torch.cat(xs, dim=-1)
    if jk == "max":
        return torch.stack(xs, dim=-1).max(dim=-1)[0]
    return xs[-1]
