"""``gnn-dist partition --parts 2,4,8``: a partition family, the graph read once and cut once per
``P`` (``partitioners/format/family.py`` describes the folder); and ``gnn-dist inspect`` of one.
Torch-free."""

from __future__ import annotations

import argparse
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .cli_args import UsageError

__all__ = ["check_family_out", "describe_family", "split_parts", "write_family"]

log = logging.getLogger("partitioners.cli")


def split_parts(args: argparse.Namespace) -> None:
    """``args.parts`` (the list ``--parts`` gave) -> ``args.family``: the sorted distinct part
    counts when there are several (a family), else None; ``args.parts``: the one count, or the
    largest (what the checks before the read are made against)."""
    parts = sorted(set(args.parts))
    args.family = parts if len(parts) > 1 else None
    args.parts = parts[-1]


def check_family_out(out: str, overwrite: bool) -> None:
    """The family folder ``out`` may be written: missing or empty, or a family (with ``--overwrite``)."""
    from .format.family import FAMILY_FILE, is_family
    from .format.layout import META_FILE

    root = Path(out)
    if not root.exists() and not root.is_symlink():
        return
    if not root.is_dir() or root.is_symlink():
        raise FileExistsError(f"--out {out} exists and is not a folder (or is a symlink); choose another output folder")
    if not any(root.iterdir()):
        return
    if is_family(root):
        if not overwrite:
            raise FileExistsError(f"--out {out} already holds a partition family; pass --overwrite to replace it")
        return
    what = "a single partition" if (root / META_FILE).is_file() else f"a non-empty folder without {FAMILY_FILE}"
    raise FileExistsError(f"--out {out} is {what}, not a partition family; refusing to replace it even with "
                          f"--overwrite: choose another output folder for --parts with several counts")


def write_family(args: argparse.Namespace, cut: Callable[[Path], dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Cut the graph once per ``args.family`` count (``cut(out_dir)`` with ``args.parts`` set),
    into ``--out``/pP, then write ``family.json`` last (atomically); a replaced family is not one
    while it is rewritten (its ``family.json`` goes first), and its members not cut again are
    removed. Returns P -> that cut's quality report."""
    from .format import load_partition_meta
    from .format.family import FAMILY_FILE, is_family, member_dir_name, read_family, write_family_json

    root = Path(args.out)
    old = read_family(root) if is_family(root) else None
    root.mkdir(parents=True, exist_ok=True)
    if old is not None:
        (root / FAMILY_FILE).unlink()
    reports: dict[int, dict[str, Any]] = {}
    for p in args.family:
        args.parts = p
        log.info(f"P={p}: cutting into {root / member_dir_name(p)}")
        reports[p] = cut(root / member_dir_name(p))
    for p in old.parts if old is not None else ():
        if p not in reports and (old.member_path(p) / "partition.json").is_file():
            shutil.rmtree(old.member_path(p))
    fingerprints = {p: load_partition_meta(root / member_dir_name(p)).graph_fingerprint for p in args.family}
    write_family_json(root, fingerprints)
    log.info(f"wrote the partition family {root} (P={','.join(map(str, args.family))}, graph fingerprint "
             f"{str(next(iter(fingerprints.values())))[:16]}...)")
    return reports


def describe_family(path: str, verify: bool) -> tuple[dict[str, Any], list[str]]:
    """``gnn-dist inspect`` of a family: ``(summary, problems)``; the summary lists the members
    (P, folder, nodes, edges, method, edge cut), ``verify`` checks every member in full and that
    each has the family's graph fingerprint."""
    from .format import load_partition_meta, verify_partition
    from .format.family import read_family

    family = read_family(path)
    members, problems = [], []
    for p in family.parts:
        where = family.member_path(p)
        try:
            meta = load_partition_meta(where)
        except ValueError as exc:
            problems.append(str(exc))
            continue
        if meta.num_parts != p:
            problems.append(f"{where}: has num_parts={meta.num_parts}, family.json lists it as P={p}")
        if meta.graph_fingerprint != family.graph_fingerprint:
            problems.append(f"{where}: graph fingerprint {str(meta.graph_fingerprint)[:16]}... differs from the "
                            f"family's {str(family.graph_fingerprint)[:16]}...: not a cut of the same graph")
        if verify:
            problems += verify_partition(where, check_hashes=True)
        quality = meta.raw.get("quality") or {}
        members.append({"num_parts": p, "dir": str(where), "num_nodes": meta.num_nodes, "num_edges": meta.num_edges,
                        "method": meta.raw.get("method"), "edge_cut": quality.get("edge_cut")})
    return {"path": path, "graph_fingerprint": family.graph_fingerprint, "members": members}, problems


def family_lines(summary: dict[str, Any]) -> list[str]:
    """The lines ``gnn-dist inspect`` prints for a family."""
    members = summary["members"]
    lines = [f"{summary['path']}: a partition family of {len(members)} members, graph fingerprint "
             f"{str(summary['graph_fingerprint'])[:16]}..."]
    for m in members:
        cut = "" if m["edge_cut"] is None else f", edge cut {m['edge_cut']:,}"
        lines.append(f"  P={m['num_parts']:<4} {m['dir']}: {m['num_nodes']:,} nodes, {m['num_edges']:,} edges, "
                     f"{m['method']}{cut}")
    return lines
