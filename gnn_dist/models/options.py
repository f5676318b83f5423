"""Which model options each registered model takes, checked once with the config.

The model section (:class:`~gnn_dist.config.ModelConfig`) checks its values; what depends on
the model chosen is asked of its :class:`~.spec.ModelSpec` here, registered into the config's
checks (:mod:`gnn_dist.config.registry`): the ``jk`` modes it takes, its model-specific options
(GAT's ``heads``, ``out_heads``, ``attn_dropout``, SAGE's ``sage_init``), whether it reads edge features
(``edge_dim``) and its own check. The choices of ``--model`` (the registered names) are
registered by :mod:`.spec`, those of ``--jk`` here.
"""

from __future__ import annotations

from typing import Any

from ..config.fields import ConfigError, int_at_least
from ..config.registry import register_check, register_choices
from ..nn.sage_conv import SAGE_INITS
from .shared import JK_MODES
from .spec import MODEL_SPECS, ModelSpec

__all__ = ["check_jk", "check_model_options", "check_edge_dim"]


def check_jk(model: Any) -> None:
    """``jk`` (and ``out_heads``, which a ``jk`` other than ``last`` replaces) against the model's
    :attr:`~.spec.ModelSpec.jk_modes`."""
    if model.jk == "last":
        return
    spec = MODEL_SPECS[model.model]
    if model.jk not in spec.jk_modes:
        takes = sorted(name for name, s in MODEL_SPECS.items() if model.jk in s.jk_modes)
        raise ConfigError("jk", f"{model.jk!r} applies to models {', '.join(takes)}, not {model.model!r}; "
                                f"leave it at 'last'")
    if model.out_heads is not None:
        raise ConfigError("out_heads", f"{model.out_heads} is the output layer's heads, which jk = "
                                       f"{model.jk!r} replaces by a linear map; leave it unset")


def check_model_options(model: Any) -> tuple[str, str] | None:
    """The model-specific options set only for a model that takes them, ``edge_dim``
    (:func:`check_edge_dim`), then the model's own check (:attr:`~.spec.ModelSpec.check`)."""
    spec = MODEL_SPECS[model.model]
    for name, value, unset in (("heads", model.heads, None), ("out_heads", model.out_heads, None),
                               ("attn_dropout", model.attn_dropout, 0), ("num_bases", model.num_bases, None),
                               ("sage_init", model.sage_init, "pyg")):
        if value != unset and name not in spec.options:
            takes = sorted(n for n, s in MODEL_SPECS.items() if name in s.options)
            raise ConfigError(name, f"{value} applies to models {', '.join(takes) or 'none'}, not {model.model!r}")
    check_edge_dim(spec, model.edge_dim)
    return spec.check(model) if spec.check is not None else None


def check_edge_dim(spec: ModelSpec, edge_dim: int | None) -> None:
    """``edge_dim`` None, or >= 0 for a model that reads edge features (its spec's
    ``edge_features``: ``"required"`` refuses 0, ``"optional"`` takes it)."""
    int_at_least("edge_dim", edge_dim, 0, optional=True)
    if edge_dim is None:
        return
    reads = spec.edge_features
    if reads is None:
        takes = sorted(name for name, s in MODEL_SPECS.items() if s.edge_features)
        raise ConfigError("edge_dim", f"{edge_dim} applies to models {', '.join(takes)}, not {spec.name!r}")
    if reads == "required" and edge_dim == 0:
        raise ConfigError("edge_dim", f"0, but model {spec.name!r} reads edge features; leave it unset (the "
                                      f"partition's)")


register_choices("jk", lambda: JK_MODES)
register_choices("sage_init", lambda: SAGE_INITS)
register_check("model.jk", check_jk)
register_check("model", check_model_options)
