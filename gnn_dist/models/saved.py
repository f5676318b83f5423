"""What autograd saves for backward in a training step, per built-in model and layer: a registry
of formulas in the part's sizes (``I`` inner rows, ``S`` source rows, ``E`` edges), each read
off the layers' code and checked against a saved-tensor hook
(``tests/gnn_dist/test_memory_plan.py``).

A layer's terms are element counts ``inner I + source S`` (activations, in the compute dtype),
``mask I`` and ``source_mask S`` (the hash dropout's boolean masks, 1 byte), ``edge E`` (GAT's attention scores,
float32 in every precision) and ``edge_cast E`` (their bfloat16 copy under bf16 only). With recomputation a layer
keeps only its region's input (:mod:`gnn_dist.pipeline.recompute`): ``layers`` the exchanged
rows ``S w_in``, ``all`` the inner rows ``I w_in``, nothing for a first layer fed by the
feature store; the region's own terms come back, one layer at a time, in backward (the planner's
workspace). ``outside`` terms (GCNII's input and output maps, which no region holds) stay in
every mode.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["LayerShape", "Terms", "SAVED", "OUTSIDE", "TENSOR_INPUT", "register_saved", "layer_shapes",
           "activation_terms", "jk_terms"]


@dataclass(frozen=True, slots=True)
class LayerShape:
    """One message-passing layer of a model: its widths and heads."""

    index: int
    w_in: int
    w_out: int
    """Output width (for GAT the heads' concatenation, or ``out_heads x classes`` of the last layer
    before their mean)."""
    heads: int = 1
    last: bool = False
    dropout: bool = True
    """A hidden layer's dropout saves its mask (dropout > 0)."""


@dataclass(frozen=True, slots=True)
class Terms:
    """Element counts: ``inner`` per inner row, ``source`` per source row (compute dtype),
    ``mask`` per inner row and ``source_mask`` per source row (bool), ``edge`` per edge (float32),
    ``edge_cast`` per edge (bf16 runs)."""

    inner: int = 0
    source: int = 0
    edge: int = 0
    mask: int = 0
    edge_cast: int = 0
    source_mask: int = 0

    def __add__(self, other: "Terms") -> "Terms":
        return Terms(self.inner + other.inner, self.source + other.source, self.edge + other.edge,
                     self.mask + other.mask, self.edge_cast + other.edge_cast, self.source_mask + other.source_mask)


SAVED: dict[str, Callable[[LayerShape], Terms]] = {}
"""Model name -> what one of its layers saves with no recomputation."""

OUTSIDE: dict[str, Callable[[int, int, bool], Terms]] = {}
"""Model name -> ``(F, hidden, recomputed) ->`` the terms outside the message-passing layers."""

TENSOR_INPUT: set[str] = set()
"""The models whose first layer is a linear map of the features, which the Trainer passes as a
tensor (no feature store; ``hidden``-wide convs): GCNII, ResGCN, ResGraphSAGE, GINE."""


def register_saved(name: str, outside: Callable[[int, int, bool], Terms] | None = None, *,
                   tensor_input: bool = False
                   ) -> Callable[[Callable[[LayerShape], Terms]], Callable[[LayerShape], Terms]]:
    """Decorator: the saved-tensor formula of model ``name``'s layers (and its outside terms;
    ``tensor_input``: the model is one of :data:`TENSOR_INPUT`)."""
    def deco(fn: Callable[[LayerShape], Terms]) -> Callable[[LayerShape], Terms]:
        SAVED[name] = fn
        if outside is not None:
            OUTSIDE[name] = outside
        if tensor_input:
            TENSOR_INPUT.add(name)
        return fn
    return deco


def activation_terms(s: LayerShape) -> Terms:
    """A hidden layer's nonlinearity keeps its output ``I w_out``, its dropout the boolean mask."""
    return Terms() if s.last else Terms(inner=s.w_out, mask=s.w_out if s.dropout else 0)


@register_saved("gcn")
def _gcn(s: LayerShape) -> Terms:
    """GCNConv aggregates first when ``w_in (1 + input grad) <= 2 w_out`` and keeps the aggregate
    ``I w_in`` for the weight's gradient; otherwise it maps first and keeps the input ``S w_in``
    (the normalised SpMM keeps nothing of its input)."""
    grads_in = 0 if s.index == 0 else 1
    if s.w_in * (1 + grads_in) <= 2 * s.w_out:
        return Terms(inner=s.w_in) + activation_terms(s)
    return Terms(source=s.w_in) + activation_terms(s)


@register_saved("sage")
def _sage(s: LayerShape) -> Terms:
    """SAGEConv keeps its input's inner rows for the root weight, a view that holds the whole
    ``S w_in`` rows alive, and, when it aggregates first (``w_out >= w_in``), the mean ``I w_in``."""
    return Terms(source=s.w_in, inner=0 if s.w_out < s.w_in else s.w_in) + activation_terms(s)


@register_saved("gat")
def _gat(s: LayerShape) -> Terms:
    """GATConv keeps its input ``S w_in`` (the weight's gradient), the mapped rows ``S w_out``
    (the attention-weighted sum), two ``[E, heads]`` float32 score tensors (before and after the
    softmax; bf16 adds the probabilities' bfloat16 copy), and per-destination terms of ``~4 heads``
    values."""
    return Terms(source=s.w_in + s.w_out, inner=4 * s.heads, edge=2 * s.heads, edge_cast=s.heads) + activation_terms(s)


@register_saved("gin")
def _gin(s: LayerShape) -> Terms:
    """GINConv keeps the sum ``I w_in`` (its MLP's first map's input) and the MLP's hidden rows
    ``I w_out`` (their activation and second map); when the first map narrows the rows
    (``w_out < w_in``) it runs before the sum, which keeps its input ``S w_in`` instead of the sum."""
    if s.w_out < s.w_in:
        return Terms(source=s.w_in, inner=s.w_out) + activation_terms(s)
    return Terms(inner=s.w_in + s.w_out) + activation_terms(s)


def _gine_outside(feature_dim: int, hidden: int, recomputed: bool) -> Terms:
    """GINE's node encoder keeps its input ``I F`` (no region holds it)."""
    return Terms(inner=feature_dim)


@register_saved("gine", outside=_gine_outside, tensor_input=True)
def _gine(s: LayerShape) -> Terms:
    """GINEConv (``hidden``-wide, after the encoder) keeps GIN's terms and its messages
    ``ReLU(x_u + lin(e_uv))``, ``E w_in`` (counted at float32 in every precision: an over-estimate
    under bf16); the first layer also the block's two int64 edge index arrays (``4`` float32 per
    edge; the edge features are resident)."""
    return Terms(inner=s.w_in + s.w_out, edge=s.w_in + (4 if s.index == 0 else 0)) + activation_terms(s)


def _gcnii_outside(feature_dim: int, hidden: int, recomputed: bool) -> Terms:
    """GCNII's input map keeps its input ``I F``, its activation ``x_0`` ``I h`` and the first
    conv's dropout mask; the output map keeps its input ``I h``; recomputed, the last conv's
    activation and the output map's dropout mask stay outside the regions too."""
    return Terms(inner=feature_dim + (3 if recomputed else 2) * hidden, mask=(2 if recomputed else 1) * hidden)


@register_saved("gcnii", outside=_gcnii_outside, tensor_input=True)
def _gcnii(s: LayerShape) -> Terms:
    """GCN2Conv keeps the identity map's input ``I h``, then the activation's output ``I h`` and
    the next dropout's mask (its SpMM keeps nothing of its input)."""
    return Terms(inner=2 * s.w_out, mask=s.w_out if s.dropout else 0)


def _residual_outside(feature_dim: int, hidden: int, recomputed: bool) -> Terms:
    """ResGCN's and ResGraphSAGE's encoder keeps its input ``I F``; the closing LayerNorm its input
    ``I h``, the activation its output ``I h``, the dropout its mask, the output map its input
    ``I h`` (the same recomputed: no region holds them)."""
    return Terms(inner=feature_dim + 3 * hidden, mask=hidden)


def _residual_block(conv: Callable[[LayerShape], Terms], s: LayerShape) -> Terms:
    """The first layer is the plain conv of the encoder's output (an input with a gradient);
    each later ``res+`` block pre-activates its source rows: the LayerNorm keeps its input
    ``S h``, the activation its output ``S h``, the dropout its mask ``S h``; then the conv's
    own terms (the skip connection's sum keeps nothing)."""
    plain = conv(LayerShape(index=1, w_in=s.w_in, w_out=s.w_out, last=True))
    if s.index == 0:
        return plain
    return plain + Terms(source=2 * s.w_in, source_mask=s.w_in if s.dropout else 0)


@register_saved("resgcn", outside=_residual_outside, tensor_input=True)
def _resgcn(s: LayerShape) -> Terms:
    """GCN's terms of a ``hidden``-wide conv whose input has a gradient (see :func:`_residual_block`)."""
    return _residual_block(_gcn, s)


@register_saved("ressage", outside=_residual_outside, tensor_input=True)
def _ressage(s: LayerShape) -> Terms:
    """SAGE's terms of a ``hidden``-wide conv (see :func:`_residual_block`)."""
    return _residual_block(_sage, s)


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
    if model in TENSOR_INPUT:
        return Terms(inner=2 * hidden * (layers - 1) + wide + argmax, mask=wide if dropout > 0 else 0)
    return Terms(inner=hidden + wide + argmax)


def layer_shapes(model: str, *, feature_dim: int, hidden: int, classes: int, layers: int, heads: int | None,
                 out_heads: int | None, dropout: float, jk: str = "last") -> list[LayerShape]:
    """The message-passing layers of a built-in model (those of :data:`TENSOR_INPUT`: ``layers``
    convs of width ``hidden``; with jumping knowledge every conv is a hidden one)."""
    drop = dropout > 0
    if model in TENSOR_INPUT:
        return [LayerShape(index=i, w_in=hidden, w_out=hidden, dropout=drop) for i in range(layers)]
    widths = [feature_dim] + [hidden] * (layers - 1) + [classes if jk == "last" else hidden]
    out = []
    for i in range(layers):
        last = i == layers - 1 and jk == "last"
        k = 1 if model != "gat" else (out_heads or 1) if last else (heads or 8)
        w_out = widths[i + 1] * (k if model == "gat" and last else 1)
        out.append(LayerShape(index=i, w_in=widths[i], w_out=w_out, heads=k, last=last, dropout=drop))
    return out
