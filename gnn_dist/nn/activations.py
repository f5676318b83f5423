"""The nonlinearities a built-in model may put after its hidden layers, by name (a registry).

``--activation NAME`` (``ModelConfig.activation``, ``BasicGNN(activation=NAME)``) picks one of
:data:`ACTIVATIONS`; :func:`register_activation` adds another, which every entry point then
offers. An activation is applied row by row (a schedule may compute a layer's output rows in
pieces), so it must be elementwise: ``fn(h)[rows] == fn(h[rows])``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from ..config.registry import register_choices

__all__ = ["ACTIVATIONS", "register_activation", "get_activation"]

ActivationFn = Callable[[torch.Tensor], torch.Tensor]

ACTIVATIONS: dict[str, ActivationFn] = {}
"""The registered elementwise nonlinearities by name: ``relu`` (the default), ``elu`` (the GAT
paper's), ``gelu``, ``leaky_relu`` (slope 0.01), then any registered ones."""


def register_activation(name: str, fn: ActivationFn, *, replace: bool = False) -> ActivationFn:
    """Register ``fn`` (elementwise, ``Tensor -> Tensor``) as activation ``name``; another
    function under a taken name is a ``ValueError`` unless ``replace``. Returns ``fn``."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"an activation needs a non-empty name, got {name!r}")
    if not callable(fn):
        raise ValueError(f"activation {name!r}: {fn!r} is not callable")
    if name in ACTIVATIONS and ACTIVATIONS[name] is not fn and not replace:
        raise ValueError(f"an activation named {name!r} is already registered; pass replace=True to replace it")
    ACTIVATIONS[name] = fn
    return fn


def get_activation(name: str) -> ActivationFn:
    """The activation ``name``; a ``ValueError`` listing the names when there is none."""
    try:
        return ACTIVATIONS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown activation {name!r}; choose one of {', '.join(ACTIVATIONS)}") from None


for _name, _fn in (("relu", F.relu), ("elu", F.elu), ("gelu", F.gelu), ("leaky_relu", F.leaky_relu)):
    register_activation(_name, _fn)
register_choices("activation", lambda: tuple(ACTIVATIONS))   # --activation (gnn_dist.config)
