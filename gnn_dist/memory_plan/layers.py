"""A model's message-passing layers as the planner sees them (their widths and heads) and what
jumping knowledge keeps besides them, read from the model's
:class:`~gnn_dist.models.ModelSpec` (the per-layer formulas are the model's own,
:mod:`gnn_dist.models.saved`)."""

from __future__ import annotations

from ..models.saved import LayerShape, Terms
from ..models.spec import ModelSpec, model_spec

__all__ = ["tensor_input", "encoded", "layer_shapes", "jk_terms"]


def tensor_input(model: str) -> bool:
    """The model takes its features as a tensor (no feature store): its class's
    ``accepts_layer_input`` is False (GCNII, ResGCN, ResGraphSAGE, GINE)."""
    return not model_spec(model).accepts_layer_input


def encoded(spec: ModelSpec) -> bool:
    """Every conv is ``hidden`` wide: the model takes a tensor and maps it first (an encoder,
    counted in its ``outside`` terms: GCNII, ResGCN, ResGraphSAGE, GINE)."""
    return not spec.accepts_layer_input and spec.outside is not None


def jk_terms(model: str, *, hidden: int, layers: int, jk: str, dropout: float) -> Terms:
    """What jumping knowledge (``jk`` cat or max) keeps besides the layers' terms: the output
    map's input ``I h L`` (cat) or ``I h``, max's int64 argmax ``I h`` (2 float32 values an
    element; under bf16 an under-estimate); a residual model closes every block's output
    (LayerNorm input and activation output, ``2 I h`` each beyond the last's) and drops the
    concatenation (its mask). The last conv's own activation is in its :class:`LayerShape`."""
    if jk == "last":
        return Terms()
    wide = (layers - 1) * hidden if jk == "cat" else 0
    argmax = 2 * hidden if jk == "max" else 0
    if encoded(model_spec(model)):
        return Terms(inner=2 * hidden * (layers - 1) + wide + argmax, mask=wide if dropout > 0 else 0)
    return Terms(inner=hidden + wide + argmax)


def layer_shapes(model: str, *, feature_dim: int, hidden: int, classes: int, layers: int, heads: int | None,
                 out_heads: int | None, dropout: float, jk: str = "last", activation: str = "relu") -> list[LayerShape]:
    """The message-passing layers of a registered model (an :func:`encoded` one: ``layers``
    convs of width ``hidden``; with jumping knowledge every conv is a hidden one; a model taking
    ``heads``, GAT: its hidden layers' heads concatenated, its last layer's ``out_heads`` before
    their mean)."""
    spec = model_spec(model)
    drop = dropout > 0
    if encoded(spec):
        return [LayerShape(index=i, w_in=hidden, w_out=hidden, dropout=drop, activation=activation)
                for i in range(layers)]
    widths = [feature_dim] + [hidden] * (layers - 1) + [classes if jk == "last" else hidden]
    attention = "heads" in spec.options
    out = []
    for i in range(layers):
        last = i == layers - 1 and jk == "last"
        k = 1 if not attention else (out_heads or 1) if last else (heads or 8)
        w_out = widths[i + 1] * (k if attention and last else 1)
        out.append(LayerShape(index=i, w_in=widths[i], w_out=w_out, heads=k, last=last, dropout=drop,
                              activation=activation))
    return out
