"""Human-readable lines of a quality report and of a partition folder's metadata: what
``gnn-dist partition`` and ``gnn-dist inspect`` log. Torch-free.
"""

from __future__ import annotations

import json
from typing import Any

from .format import PartitionMeta
from .format.layout import ORIGINAL_NAMES_FILE

__all__ = ["describe_lines", "labels_text", "report_lines"]


_LABEL_WORDS = {"class": "classes", "multilabel": "multi-label", "regression": "targets"}
"""A label kind -> what its ``num_classes`` counts, in listings (``8 classes``, ``4 targets``)."""


def labels_text(num_classes: int, label_kind: str | None) -> str:
    """``8 classes``, ``112 multi-label``, ``4 targets``, or ``none`` without labels."""
    if label_kind is None:
        return "none"
    return f"{num_classes} {_LABEL_WORDS.get(label_kind, label_kind)}"


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def report_lines(report: dict[str, Any]) -> list[str]:
    """Human lines of a quality report (``partition_graph``'s, or a ``partition.json``).

    A recorded report is only read, never trusted: a value of the wrong type is left out.
    """
    q = report.get("quality", report)
    head = (f"parts: {report.get('num_parts')}  nodes: {report.get('num_nodes')}  "
            f"edges: {report.get('num_edges')}  method: {report.get('method')}")
    needed = ("edge_cut", "comm_volume", "max_halo_fraction", "mean_halo_fraction",
              "node_balance", "edge_balance", "train_balance")
    if not isinstance(q, dict) or not all(_number(q.get(k)) for k in needed):
        return [head, "no complete quality report recorded"]
    lines = [
        head,
        f"edge cut: {q['edge_cut']}  communication volume (halo rows per exchange): {q['comm_volume']}",
        f"halo fraction: max {q['max_halo_fraction']:.4f}  mean {q['mean_halo_fraction']:.4f}",
        f"balance (max/mean): nodes {q['node_balance']:.3f}  edges {q['edge_balance']:.3f}"
        f"  train {q['train_balance']:.3f}",
    ]
    if all(_number(q.get(k)) for k in ("max_send_volume", "mean_send_volume", "max_recv_volume",
                                       "mean_recv_volume")):
        lines.append(f"per-part halo volume (rows per layer): send max {q['max_send_volume']} "
                     f"mean {q['mean_send_volume']:.1f}  receive max {q['max_recv_volume']} "
                     f"mean {q['mean_recv_volume']:.1f}")
    weights = q.get("part_weights")
    if isinstance(weights, list) and weights and all(_number(w) for w in weights):
        lines.append("part weights (target fractions; balances are against them): "
                     + " ".join(f"{w:.4g}" for w in weights))
    sizes = q.get("part_sizes")
    sizes = sizes if isinstance(sizes, list) and all(_number(v) for v in sizes) else []
    if sizes:
        lines.append(f"part sizes: min {min(sizes)}  max {max(sizes)}")
    if _number(q.get("empty_parts")) and q["empty_parts"]:
        empty = [p for p, s in enumerate(sizes) if s == 0]
        lines.append(f"empty parts: {q['empty_parts']} (parts {empty})")
    times = q.get("time_s")
    times = {k: v for k, v in times.items() if _number(v)} if isinstance(times, dict) else {}
    if times:
        lines.append("time: " + "  ".join(f"{k} {v:.2f}s" for k, v in times.items())
                     + f"  (total {sum(times.values()):.2f}s)")
    if _number(q.get("peak_rss_bytes")) and q["peak_rss_bytes"]:
        lines.append(f"peak RSS: {q['peak_rss_bytes'] / 2**20:.0f} MiB")
    return lines


def describe_lines(meta: PartitionMeta, verbose: bool = False) -> list[str]:
    """Human lines describing a partition folder's ``partition.json`` (``gnn-dist inspect``);
    ``verbose`` adds one line per array file."""
    raw = meta.raw
    created = raw.get("created_by")
    created = created if isinstance(created, dict) else {}
    kind = "directed" if meta.directed else "undirected"
    if raw.get("symmetrized"):
        kind += " (symmetrized)"
    features = f"dim {meta.feature_dim} {meta.feature_dtype}" if meta.feature_dim else "none"
    labels = labels_text(meta.num_classes, meta.label_kind)
    entries = list(meta.files.values()) + [e for pm in meta.parts for e in pm.files.values()]
    lines = [
        f"{meta.path}: {raw.get('format')} version {meta.version} (written by "
        f"{created.get('tool', '?')} {created.get('version', '?')}), name {meta.name or '-'}",
        f"graph: {meta.num_nodes} nodes, {meta.num_edges} edges, {kind}, "
        f"{'weighted' if meta.weighted else 'unweighted'}; features {features}; labels {labels}"
        + (f"; edge features dim {meta.edge_feature_dim}" if meta.edge_feature_dim else ""),
        f"method: {meta.method} {json.dumps(meta.method_params, sort_keys=True)}, seed {meta.seed}",
        f"files: {len(entries)} arrays, {sum(e.size for e in entries) / 2**20:.2f} MiB "
        f"(sizes and sha256 recorded in partition.json)",
    ]
    if meta.graph_fingerprint is not None:
        lines.insert(3, f"graph fingerprint: {meta.graph_fingerprint} (scheme {meta.graph_fingerprint_scheme}; "
                        f"by original node ids: the same for every partition of this graph)")
    if meta.scheme_1_graph_fingerprint is not None:
        lines.insert(4, f"graph fingerprint by scheme 1: {meta.scheme_1_graph_fingerprint} (what a typed folder of "
                        f"this graph cut before scheme 2 records; without relations and per-type data)")
    if meta.split is not None:
        lines.insert(3, f"split: {json.dumps(meta.split, sort_keys=True)}")
    if meta.edge_split is not None:
        es = meta.edge_split
        counts = "  ".join(f"{k} {es['counts'][k]}" for k in ("train", "val", "test"))
        lines.insert(3, f"edge split: {counts} pairs (fractions {','.join(map(str, es['fractions']))}, "
                        f"seed {es['seed']}); {es['removed_edges']} val/test edges removed from the graph")
    if ORIGINAL_NAMES_FILE in meta.files:
        names = meta.files[ORIGINAL_NAMES_FILE]
        kind = "strings" if names.dtype.startswith("str") else names.dtype
        lines.insert(3, f"node names: {ORIGINAL_NAMES_FILE} ({kind}; the input's ids were relabelled)")
    for pm in meta.parts:
        lo, hi = pm.global_id_range
        lines.append(f"part {pm.part_id}: inner {pm.num_inner}  halo {pm.num_halo}  edges "
                     f"{pm.num_local_edges}  global ids [{lo}, {hi})  train {pm.num_train}")
    if verbose:
        for e in entries:
            lines.append(f"  {e.path}: {e.dtype}{list(e.shape)}  {e.size} B  sha256 {e.sha256[:16]}...")
    return lines + report_lines(raw)
