"""A rank's part of a typed (heterogeneous) partition folder: its rows' types, its typed block,
the per-type features and the target type's labels, as the runtime trains on them.

The union graph carries the whole runtime: one halo exchange per layer over the union's rows
(each needed source row once, whatever its relations), the schedules, the task's masks (the
target type's). What is typed is here: the block's node and edge types
(:class:`~gnn_dist.nn.block_types.BlockTypes`), the static input (each featured type's features
in its rows, zero-padded to the widest type's width) and the learnable rows of the featureless
types (:mod:`.embedding`).

Legend: ``I`` inner rows, ``H`` halo rows, ``I_t`` inner rows of type ``t``, ``F`` the widest
feature width.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from ..nn.block_types import BlockTypes

__all__ = ["TypedPart", "training_meta", "check_target_type", "typed_features_problem", "featureless_problem",
           "schema_section", "section_problem"]


@dataclass(eq=False)
class TypedPart:
    """The typed side of a rank's part (see the module docstring)."""

    type_names: tuple[str, ...]
    relations: tuple[tuple[str, str, str], ...]
    target_type: str
    counts: tuple[int, ...]
    """Nodes of each type in the whole graph."""
    offsets: tuple[int, ...]
    """Each type's first original id (types are contiguous in original ids)."""
    feature_dims: tuple[int, ...]
    """Each type's feature width (0: featureless)."""
    node_type: torch.Tensor
    """int64 ``[I + H]``."""
    inner_rows: tuple[torch.Tensor, ...]
    """Per type, its inner rows (int64 local ids, ascending)."""
    features: dict[int, torch.Tensor]
    """type id -> ``[I_t, F_t]`` (the inner rows of the type, in local order)."""
    original_ids: torch.Tensor
    """int64 ``[I + H]``."""

    @property
    def feature_dim(self) -> int:
        """``F``: the widest type's feature width (0 when no type has features)."""
        return max(self.feature_dims)

    @property
    def featureless(self) -> tuple[int, ...]:
        """The types without features (learnable rows with ``embedding_dim``)."""
        return tuple(t for t, d in enumerate(self.feature_dims) if d == 0)

    def type_local_ids(self, t: int) -> torch.Tensor:
        """int64 ``[I_t]``: the type's own ids (original id - its offset) of its inner rows."""
        return self.original_ids[self.inner_rows[t]] - self.offsets[t]

    def static_input(self, num_inner: int, device: torch.device) -> torch.Tensor:
        """float32 ``[I, F]``: each featured row's features (zero-padded to ``F``), zero rows for
        the featureless types."""
        x = torch.zeros(num_inner, self.feature_dim, dtype=torch.float32, device=device)
        for t, feats in self.features.items():
            x[self.inner_rows[t].to(device), :feats.shape[1]] = feats.to(device=device, dtype=torch.float32)
        return x

    def block_types(self, edge_type: np.ndarray, device: torch.device) -> BlockTypes:
        names = {n: i for i, n in enumerate(self.type_names)}
        rel = torch.tensor([[names[s], names[d]] for s, _, d in self.relations], dtype=torch.long)
        return BlockTypes(self.node_type, torch.from_numpy(np.array(edge_type, dtype=np.int64)), rel,
                          len(self.type_names)).to(device)

    @classmethod
    def load(cls, meta: Any, typed: dict[str, np.ndarray], original_ids: torch.Tensor, num_inner: int) -> "TypedPart":
        """From a part's typed arrays (:attr:`partitioners.format.PartData.typed`), on the CPU: the
        folder's schema (:meth:`from_section`) with this part's rows and features."""
        schema = cls.from_section(meta.hetero)
        node_type = torch.from_numpy(np.array(typed["node_type"], dtype=np.int64))
        inner_type = node_type[:num_inner]
        rows = tuple(torch.nonzero(inner_type == t).flatten() for t in range(len(schema.type_names)))
        feats = {t: torch.from_numpy(np.array(typed[f"features-{name}"]))
                 for t, (name, width) in enumerate(zip(schema.type_names, schema.feature_dims)) if width}
        return replace(schema, node_type=node_type, inner_rows=rows, features=feats, original_ids=original_ids.cpu())

    @classmethod
    def schema(cls, meta: Any) -> "TypedPart":
        """The folder's types and relations with no rows (what a model is built from before any
        part is read: the pre-launch check, a model file)."""
        return cls.from_section(meta.hetero)

    @classmethod
    def from_section(cls, sec: dict[str, Any]) -> "TypedPart":
        """:meth:`schema` of a typed folder's ``hetero`` section (or a model file's ``typed``)."""
        none = torch.zeros(0, dtype=torch.long)
        return cls(type_names=tuple(t["name"] for t in sec["node_types"]),
                   relations=tuple(tuple(r) for r in sec["relations"]), target_type=sec.get("target_type"),
                   counts=tuple(int(t["count"]) for t in sec["node_types"]),
                   offsets=tuple(int(t["offset"]) for t in sec["node_types"]),
                   feature_dims=tuple(int(t.get("feature_dim") or 0) for t in sec["node_types"]),
                   node_type=none, inner_rows=tuple(none for _ in sec["node_types"]), features={}, original_ids=none)

    def union_labels(self, typed: dict[str, np.ndarray], num_inner: int) -> torch.Tensor | None:
        """int64 ``[I]``: the target type's class ids in its rows, 0 elsewhere (masked out)."""
        labels = typed.get(f"labels-{self.target_type}")
        if labels is None:
            return None
        y = torch.zeros(num_inner, dtype=torch.long)
        y[self.inner_rows[self.type_names.index(self.target_type)]] = torch.from_numpy(np.array(labels, dtype=np.int64))
        return y


SCHEMA_KEYS = ("name", "count", "offset", "feature_dim")
"""What a model file records of each node type (:func:`schema_section`)."""


def schema_section(meta: Any) -> dict[str, Any] | None:
    """What a typed model is built from, as a model file records it: the node types (name, count,
    offset, feature width), the relations and the target type; None for a homogeneous folder."""
    sec = getattr(meta, "hetero", None)
    if sec is None:
        return None
    return {"node_types": [{"name": t["name"], "count": t["count"], "offset": t["offset"],
                            "feature_dim": t.get("feature_dim") or 0} for t in sec["node_types"]],
            "relations": [list(r) for r in sec["relations"]], "target_type": sec.get("target_type")}


def section_problem(sec: Any) -> str | None:
    """Why a model file's ``typed`` section is malformed (None: it is well formed)."""
    ok = isinstance(sec, dict) and isinstance(sec.get("node_types"), list) and isinstance(sec.get("relations"), list)
    types = sec.get("node_types") if ok else []
    ok = ok and 0 < len(types) <= 1 << 16 and all(
        isinstance(t, dict) and isinstance(t.get("name"), str)
        and all(type(t.get(k)) is int and 0 <= t[k] < 1 << 62 for k in SCHEMA_KEYS[1:]) for t in types)
    names = [t["name"] for t in types] if ok else []
    ok = ok and len(set(names)) == len(names) and 0 < len(sec["relations"]) <= 1 << 16 and all(
        isinstance(r, list) and len(r) == 3 and all(isinstance(x, str) for x in r) and r[0] in names
        and r[2] in names for r in sec["relations"])
    return None if ok else "its typed section (node types and relations) is malformed"


def training_meta(meta: Any) -> Any:
    """A typed folder's metadata as training reads it: the target type's classes
    (``label_kind="class"``, ``num_classes``) and the widest feature width (``feature_dim``);
    a homogeneous folder's unchanged."""
    sec = getattr(meta, "hetero", None)
    if sec is None:
        return meta
    target = next((t for t in sec["node_types"] if t["name"] == sec.get("target_type")), None)
    labelled = target is not None and bool(target.get("labelled"))
    width = max(int(t.get("feature_dim") or 0) for t in sec["node_types"])
    dtypes = {t["feature_dtype"] for t in sec["node_types"] if t.get("feature_dim")}
    return replace(meta, feature_dim=width, feature_dtype="float32" if dtypes else None,
                   num_classes=int(sec.get("num_classes", 0)) if labelled else 0,
                   label_kind="class" if labelled else None)


def featureless_problem(bare: list[str], embedding_dim: int | None) -> str | None:
    """Why node types ``bare`` (without features) cannot be trained: no ``embedding_dim`` for
    their learnable rows; None when they have them (or there are none)."""
    if bare and embedding_dim is None:
        return (f"node type(s) {', '.join(bare)} have no features: give them learnable rows with --embedding-dim D "
                f"(e.g. 128), or partition the graph with their features")
    return None


def typed_features_problem(meta: Any, embedding_dim: int | None, needs_labels: bool = True) -> str | None:
    """Why a typed folder cannot be trained as configured (a featureless type without
    ``--embedding-dim``; no labelled target type when the task ``needs_labels``), or None."""
    sec = meta.hetero
    why = featureless_problem([t["name"] for t in sec["node_types"] if not t.get("feature_dim")], embedding_dim)
    if why is not None:
        return why
    if needs_labels and meta.label_kind is None:
        return (f"the target type {sec.get('target_type')!r} has no labels to train on (partition it with its "
                f"labels)")
    return None


def check_target_type(meta: Any, target_type: str | None, path: str) -> None:
    """``--target-type`` names the type the folder was partitioned for (its masks and balance);
    one line otherwise."""
    sec = getattr(meta, "hetero", None)
    if target_type is None:
        return
    if sec is None:
        raise ValueError(f"{path}: --target-type {target_type} applies to a typed (heterogeneous) partition; "
                         f"this folder is homogeneous")
    names = [t["name"] for t in sec["node_types"]]
    if target_type not in names:
        raise ValueError(f"{path}: --target-type {target_type!r} is not a node type of the partition "
                         f"(types: {', '.join(names)})")
    if target_type != sec.get("target_type"):
        raise ValueError(f"{path}: the partition was cut for target type {sec.get('target_type')!r} (its masks "
                         f"and balance); re-partition with --target-type {target_type} to train on it")
