"""A synthetic heterogeneous graph shaped like ogbn-mag, with a planted signal.

Four node types, ``paper``, ``author``, ``institution``, ``field`` (in that order), and four
relations, ``author-writes-paper``, ``paper-cites-paper``, ``paper-has_topic-field``,
``author-affiliated_with-institution`` (plus their ``rev_*`` reverses with ``add_reverse``).
Only papers have features and labels, as in ogbn-mag. Every node has a class (papers: their
label; authors, institutions and fields: a hidden one, balanced and random); each edge end is
drawn from the other end's class with probability ``p_in`` and uniformly otherwise, so papers of
one class cite each other and share authors and fields more, and a model that reads the typed
neighbourhood beats one that reads the paper features alone (their centroids are blurred by
``feature_noise``). Classes also give the partitioners locality to find. Seeded and
deterministic (same arguments, same bytes). Torch-free.
"""

from __future__ import annotations

import numpy as np

from ..errors import GraphError
from ..synthetic_nodes import random_split
from .graph import HeteroGraph

__all__ = ["mag_graph", "MAG_TYPES", "MAG_RELATIONS"]

MAG_TYPES = ("paper", "author", "institution", "field")
MAG_RELATIONS = (("author", "writes", "paper"), ("paper", "cites", "paper"),
                 ("paper", "has_topic", "field"), ("author", "affiliated_with", "institution"))
_TYPE_SHARE = (0.5, 0.4, 0.04, 0.06)
"""How the nodes split between the types (ogbn-mag: 736k papers, 1.13M authors, 8.7k
institutions, 60k fields; authors are fewer here so that every author writes a few papers)."""
_EDGE_SHARE = {"writes": 0.35, "cites": 0.4, "has_topic": 0.25}
"""How the edges besides the affiliations (one per author) split between the relations."""


def _class_members(cls: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``(order, starts)``: the ids of class c are ``order[starts[c]:starts[c+1]]``."""
    order = np.argsort(cls, kind="stable")
    starts = np.searchsorted(cls[order], np.arange(k + 1))
    return order, starts


def _draw_ends(rng: np.random.Generator, anchor_cls: np.ndarray, cls: np.ndarray, k: int,
               p_in: float) -> np.ndarray:
    """For each anchor (its class ``anchor_cls``), one node of the other type: of the anchor's
    class with probability ``p_in`` (when the class has members), else uniform."""
    n = cls.size
    out = rng.integers(0, n, size=anchor_cls.size)
    order, starts = _class_members(cls, k)
    sizes = np.diff(starts)
    same = (rng.random(anchor_cls.size) < p_in) & (sizes[anchor_cls] > 0)
    pick = rng.random(anchor_cls.size)
    a = anchor_cls[same]
    out[same] = order[starts[a] + np.minimum((pick[same] * sizes[a]).astype(np.int64), sizes[a] - 1)]
    return out


def _unique_pairs(src: np.ndarray, dst: np.ndarray, n_dst: int, *, no_loops: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ``(src, dst)`` pairs, sorted by (src, dst); self-loops dropped when asked."""
    if no_loops:
        keep = src != dst
        src, dst = src[keep], dst[keep]
    keys = np.unique(src * n_dst + dst)
    return keys // n_dst, keys % n_dst


def mag_graph(num_nodes: int, num_edges: int, num_classes: int, feature_dim: int, *, p_in: float = 0.8,
              feature_noise: float = 2.0, train_frac: float = 0.6, val_frac: float = 0.2,
              test_frac: float = 0.2, reverse: bool = True, seed: int = 0, name: str = "") -> HeteroGraph:
    """An ogbn-mag-shaped :class:`HeteroGraph` (module docstring) of about ``num_nodes`` nodes.

    Args:
        num_nodes: nodes of all four types (split 50/40/4/6% between paper, author,
            institution, field; at least ``num_classes`` of each).
        num_edges: edges drawn before the reverses (repeats and self-citations dropped): one
            affiliation per author, the rest 35% writes, 40% cites, 25% has_topic.
        num_classes: classes of the papers (and hidden classes of the other types).
        feature_dim: float32 paper feature columns: the class centroid plus Gaussian noise of
            standard deviation ``feature_noise``.
        p_in: probability that an edge's far end is of the near end's class.
        train_frac, val_frac, test_frac: random split of the papers.
        reverse: add ``rev_*`` of every relation (:meth:`HeteroGraph.add_reverse`).
        seed: the random seed.
    """
    if num_classes < 2 or feature_dim < 1 or not 0.0 <= p_in <= 1.0:
        raise GraphError(f"mag_graph needs num_classes >= 2, feature_dim >= 1 and p_in in [0, 1], got "
                         f"{num_classes}, {feature_dim}, {p_in}")
    counts = [max(num_classes, int(round(num_nodes * s))) for s in _TYPE_SHARE]
    counts[0] += num_nodes - sum(counts)  # papers take the rounding
    if counts[0] < max(3, num_classes):
        raise GraphError(f"mag_graph: num_nodes = {num_nodes} is too small for {num_classes} classes")
    n_pap, n_aut, n_ins, n_fld = counts
    rng = np.random.default_rng([seed, 34])
    k = num_classes
    cls = {t: rng.permutation(np.arange(n, dtype=np.int64) % k) for t, n in zip(MAG_TYPES, counts)}
    rest = max(0, num_edges - n_aut)
    m = {r: int(rest * s) for r, s in _EDGE_SHARE.items()}

    edges = {}
    # writes: a paper's authors, mostly of its class
    pap = rng.integers(0, n_pap, size=m["writes"])
    aut = _draw_ends(rng, cls["paper"][pap], cls["author"], k, p_in)
    src, dst = _unique_pairs(aut, pap, n_pap)
    edges[MAG_RELATIONS[0]] = (src, dst)
    # cites: a paper cites papers mostly of its class
    citing = rng.integers(0, n_pap, size=m["cites"])
    cited = _draw_ends(rng, cls["paper"][citing], cls["paper"], k, p_in)
    edges[MAG_RELATIONS[1]] = _unique_pairs(citing, cited, n_pap, no_loops=True)
    # has_topic: a paper's fields, mostly of its class
    pap = rng.integers(0, n_pap, size=m["has_topic"])
    fld = _draw_ends(rng, cls["paper"][pap], cls["field"], k, p_in)
    edges[MAG_RELATIONS[2]] = _unique_pairs(pap, fld, n_fld)
    # affiliated_with: one institution per author, mostly of its class
    aut = np.arange(n_aut, dtype=np.int64)
    edges[MAG_RELATIONS[3]] = (aut, _draw_ends(rng, cls["author"], cls["institution"], k, p_in))

    centroids = rng.standard_normal((k, feature_dim))
    x = (centroids[cls["paper"]] + feature_noise * rng.standard_normal((n_pap, feature_dim))).astype(np.float32)
    train, val, test = random_split(n_pap, train_frac, val_frac, test_frac, seed)
    g = HeteroGraph(dict(zip(MAG_TYPES, counts)), edges, features={"paper": x},
                    labels={"paper": cls["paper"]}, masks={"paper": {"train": train, "val": val, "test": test}},
                    target_type="paper", num_classes=k, name=name)
    return g.add_reverse() if reverse else g
