"""What autograd saves for backward in a training step, per layer of a model: the formulas a
model registers with :func:`~gnn_dist.models.register_model` (``saved=``, ``outside=``), in the
part's sizes (``I`` inner rows, ``S`` source rows, ``E`` edges), each read off the layers' code
and checked against a saved-tensor hook (``tests/gnn_dist/test_memory_plan.py``). The memory
planner (:mod:`gnn_dist.memory_plan`) reads them through the model's
:class:`~gnn_dist.models.ModelSpec`; a model registered without one gets :func:`generic_saved`,
a conservative bound, and the planner says so once.

A layer's terms are element counts ``inner I + source S`` (activations, in the compute dtype),
``mask I`` and ``source_mask S`` (the hash dropout's boolean masks, 1 byte), ``edge E`` (GAT's attention scores,
float32 in every precision) and ``edge_cast E`` (their bfloat16 copy under bf16 only). With recomputation a layer
keeps only its region's input (:mod:`gnn_dist.pipeline.recompute`): ``layers`` the exchanged
rows ``S w_in``, ``all`` the inner rows ``I w_in``, nothing for a first layer fed by the
feature store; the region's own terms come back, one layer at a time, in backward (the planner's
workspace). ``outside`` terms (GCNII's input and output maps, which no region holds) stay in
every mode. Torch-free.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["LayerShape", "Terms", "SavedFormula", "OutsideFormula", "activation_terms", "unfused_activation_terms",
           "generic_saved",
           "gcn_saved", "sage_saved", "gat_saved", "gin_saved", "gine_saved", "gine_outside", "gcnii_saved",
           "gcnii_outside", "residual_outside", "resgcn_saved", "ressage_saved", "rgcn_saved",
           "hgt_saved", "hetero_sage_saved"]


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
    activation: str = "relu"
    """The hidden layers' nonlinearity (``--activation``): ReLU and the dropout run as one op
    (:func:`~gnn_dist.nn.relu_hash_dropout`) in the models built on ``BasicGNN``."""
    relations: float = 0.0
    """A typed layer's relation aggregates per inner row (``A / I``: :mod:`gnn_dist.memory_plan.typed`)."""
    relation_sources: float = 0.0
    """A typed layer's relations' source rows per inner row, each relation's block counted alone
    (``B / I``: :meth:`gnn_dist.memory_plan.typed.TypedSizes.relation_source_rows`)."""


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


SavedFormula = Callable[[LayerShape], Terms]
"""What one message-passing layer saves with no recomputation."""

OutsideFormula = Callable[[int, int, bool], Terms]
"""``(F, hidden, recomputed) ->`` the terms outside the message-passing layers."""


def activation_terms(s: LayerShape) -> Terms:
    """A hidden layer's nonlinearity and dropout, as ``BasicGNN``'s models run them: ReLU with
    dropout is one op that keeps a 1-byte code per element ``I w_out`` (counted as a mask);
    otherwise the nonlinearity keeps its output ``I w_out`` and the dropout its boolean mask."""
    if s.last:
        return Terms()
    if s.activation == "relu" and s.dropout:
        return Terms(mask=s.w_out)
    return unfused_activation_terms(s)


def unfused_activation_terms(s: LayerShape) -> Terms:
    """A nonlinearity and a dropout run one after the other: the output ``I w_out`` and the mask."""
    return Terms() if s.last else Terms(inner=s.w_out, mask=s.w_out if s.dropout else 0)


def rgcn_saved(s: LayerShape) -> Terms:
    """R-GCN (:class:`~gnn_dist.nn.RGCNConv`): per destination type its rows and its relations'
    aggregates, concatenated for one product, ``I (1 + A / I) w_in`` in all, and one float32
    scale per edge; plus the activation and dropout."""
    return Terms(inner=round(s.w_in * (1 + s.relations)), edge=1) + activation_terms(s)


def hgt_saved(s: LayerShape) -> Terms:
    """HGT (:class:`~gnn_dist.nn.hgt_conv.HGTConv`): the source rows by type ``S w_in`` (the
    keys' and values' map) and the keys and values ``2 S w_out`` (the SDDMMs and SpMMs); the
    destinations' rows by type ``I w_in`` (the queries' map) and the queries ``I w_out`` (each
    relation's ``W^ATT``), per relation its queries through ``W^ATT`` and its aggregate,
    ``2 (A / I) I w_out``; the message before and after the GELU ``2 I w_out``; with the skip term
    (``w_in = w_out``) the mapped output and the destinations' rows again ``I (w_out + w_in)``;
    the attention ``[E, heads]`` twice (the softmax's output and its per-relation copy) and two
    int64 edge index arrays (``4`` float32 per edge); plus the activation and dropout. Counted
    against a saved-tensor hook on ogbn-mag-shaped parts (``tests/gnn_dist/test_memory_plan_typed.py``)."""
    skip = s.w_in + s.w_out if s.w_in == s.w_out else 0
    inner = s.w_in + 3 * s.w_out + round(2 * s.relations * s.w_out) + skip
    return Terms(source=s.w_in + 2 * s.w_out, inner=inner, edge=2 * s.heads + 4) + activation_terms(s)


def hetero_sage_saved(s: LayerShape) -> Terms:
    """Per-relation SAGE (:class:`~gnn_dist.nn.hetero_conv.HeteroConv`): each relation's conv runs
    on its block's rows gathered from the layer's input, ``B w_in`` over the relations (``B /
    I``: :attr:`LayerShape.relation_sources`; its root term and, mapping first, its map keep
    them); each relation's output ``(A / I) I w_out`` (the sum per destination keeps it) and, when
    it aggregates first (``w_out >= w_in``), its mean ``(A / I) I w_in``; the layer's own input
    rows are not kept. Plus the activation and dropout. Counted against a saved-tensor hook on
    ogbn-mag-shaped parts (``tests/gnn_dist/test_memory_plan_typed.py``)."""
    mean = s.w_in if s.w_out >= s.w_in else 0
    inner = round(s.relation_sources * s.w_in + s.relations * (s.w_out + mean))
    return Terms(inner=inner) + activation_terms(s)


def generic_saved(s: LayerShape) -> Terms:
    """A bound for a layer whose formula is not known: its input rows ``S w_in`` (a weight's
    gradient), a transformed copy of them ``S max(w_in, w_out)`` (a map before the sum), the
    destinations' aggregate and output ``I (w_in + w_out)``, plus the activation and dropout.
    Every built-in layer without per-edge tensors keeps less (a test checks GCN, SAGE and GIN),
    so the planner errs on the safe side; per-edge state (attention scores) is not in it."""
    return Terms(source=s.w_in + max(s.w_in, s.w_out), inner=s.w_in + s.w_out) + unfused_activation_terms(s)


def gcn_saved(s: LayerShape) -> Terms:
    """GCNConv aggregates first when ``w_in (1 + input grad) <= 2 w_out`` and keeps the aggregate
    ``I w_in`` for the weight's gradient; otherwise it maps first and keeps the input ``S w_in``
    (the normalised SpMM keeps nothing of its input)."""
    grads_in = 0 if s.index == 0 else 1
    if s.w_in * (1 + grads_in) <= 2 * s.w_out:
        return Terms(inner=s.w_in) + activation_terms(s)
    return Terms(source=s.w_in) + activation_terms(s)


def sage_saved(s: LayerShape) -> Terms:
    """SAGEConv keeps its input's inner rows for the root weight, a view that holds the whole
    ``S w_in`` rows alive, and, when it aggregates first (``w_out >= w_in``), the mean ``I w_in``."""
    return Terms(source=s.w_in, inner=0 if s.w_out < s.w_in else s.w_in) + activation_terms(s)


def gat_saved(s: LayerShape) -> Terms:
    """GATConv keeps its input ``S w_in`` (the weight's gradient), the mapped rows ``S w_out``
    (the attention-weighted sum), two ``[E, heads]`` float32 score tensors (before and after the
    softmax; bf16 adds the probabilities' bfloat16 copy), and per-destination terms of ``~4 heads``
    values."""
    return Terms(source=s.w_in + s.w_out, inner=4 * s.heads, edge=2 * s.heads, edge_cast=s.heads) + activation_terms(s)


def gin_saved(s: LayerShape) -> Terms:
    """GINConv keeps the sum ``I w_in`` (its MLP's first map's input) and the MLP's hidden rows
    ``I w_out`` (their activation and second map); when the first map narrows the rows
    (``w_out < w_in``) it runs before the sum, which keeps its input ``S w_in`` instead of the sum."""
    if s.w_out < s.w_in:
        return Terms(source=s.w_in, inner=s.w_out) + activation_terms(s)
    return Terms(inner=s.w_in + s.w_out) + activation_terms(s)


def gine_outside(feature_dim: int, hidden: int, recomputed: bool) -> Terms:
    """GINE's node encoder keeps its input ``I F`` (no region holds it)."""
    return Terms(inner=feature_dim)


def gine_saved(s: LayerShape) -> Terms:
    """GINEConv (``hidden``-wide, after the encoder) keeps GIN's terms and its messages
    ``ReLU(x_u + lin(e_uv))``, ``E w_in`` (counted at float32 in every precision: an over-estimate
    under bf16); the first layer also the block's two int64 edge index arrays (``4`` float32 per
    edge; the edge features are resident)."""
    return Terms(inner=s.w_in + s.w_out, edge=s.w_in + (4 if s.index == 0 else 0)) + activation_terms(s)


def gcnii_outside(feature_dim: int, hidden: int, recomputed: bool) -> Terms:
    """GCNII's input map keeps its input ``I F``, its activation ``x_0`` ``I h`` and the first
    conv's dropout mask; the output map keeps its input ``I h``; recomputed, the last conv's
    activation and the output map's dropout mask stay outside the regions too."""
    return Terms(inner=feature_dim + (3 if recomputed else 2) * hidden, mask=(2 if recomputed else 1) * hidden)


def gcnii_saved(s: LayerShape) -> Terms:
    """GCN2Conv keeps the identity map's input ``I h``, then the activation's output ``I h`` and
    the next dropout's mask (its SpMM keeps nothing of its input)."""
    return Terms(inner=2 * s.w_out, mask=s.w_out if s.dropout else 0)


def residual_outside(feature_dim: int, hidden: int, recomputed: bool) -> Terms:
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


def resgcn_saved(s: LayerShape) -> Terms:
    """GCN's terms of a ``hidden``-wide conv whose input has a gradient (see :func:`_residual_block`)."""
    return _residual_block(gcn_saved, s)


def ressage_saved(s: LayerShape) -> Terms:
    """SAGE's terms of a ``hidden``-wide conv (see :func:`_residual_block`)."""
    return _residual_block(sage_saved, s)


