"""A model's trainable parameters as the memory planner counts them: the model built on the meta
device (no memory) for the run's widths, with the task's own modules (link prediction's decoder);
a typed model for a typed part of the run's relations and no rows."""

from __future__ import annotations

import functools
from typing import Any

from ..models.spec import model_spec

__all__ = ["task_of", "count_parameters", "count_typed_parameters"]


@functools.lru_cache(maxsize=16)
def task_of(name: str, decoder: str) -> Any:
    """The :class:`~gnn_dist.tasks.Task` of ``--task name`` (with the options that shape its
    modules), or None for an unresolved ``auto``."""
    from ..config import TaskConfig
    from ..tasks import TASKS

    kind = TASKS.get(name)
    return None if kind is None else kind.from_options(None, TaskConfig(task=name, decoder=decoder))


@functools.lru_cache(maxsize=64)
def count_parameters(model_name: str, in_dim: int, hidden: int, out_dim: int, layers: int, heads: int | None,
                     out_heads: int | None, jk: str = "last", task: str = "auto",
                     decoder: str = "dot") -> tuple[int, tuple[int, ...]]:
    """``(the trainable parameters, each convolution's)`` of a registered model (and of the
    task's own modules: link prediction's decoder), counted on the meta device."""
    import torch

    from ..models import build_model

    kwargs: dict[str, Any] = {}
    if "heads" in model_spec(model_name).options:
        kwargs = {"heads": heads or 8, "out_heads": out_heads or 1}
    with torch.device("meta"):
        model = build_model(model_name, in_dim=in_dim, hidden_dim=hidden, out_dim=out_dim, num_layers=layers,
                            jk=jk, **kwargs)
        owner = task_of(task, decoder)
        if owner is not None:   # the task's own modules (link prediction: its decoder)
            owner.add_modules(model)
    def count(m: Any) -> int:
        return sum(p.numel() for p in m.parameters() if p.requires_grad)
    return count(model), tuple(count(conv) for conv in getattr(model, "convs", []))


@functools.lru_cache(maxsize=64)
def count_typed_parameters(model_name: str, relations: tuple[tuple[int, int], ...], num_types: int, width: int,
                           hidden: int, out_dim: int, layers: int, heads: int | None, num_bases: int | None,
                           jk: str = "last") -> tuple[int, ...]:
    """Each convolution's trainable parameters of a typed model whose first layer reads ``width``
    wide rows, counted on the meta device (built for a typed part of these relations with no rows)."""
    import torch

    from ..hetero.part import TypedPart
    from ..models import build_model

    spec = model_spec(model_name)
    names = [f"t{t}" for t in range(num_types)]
    part = TypedPart.from_section({"node_types": [{"name": n, "count": 0, "offset": 0, "feature_dim": width}
                                                  for n in names],
                                   "relations": [[names[a], f"r{i}", names[b]] for i, (a, b) in enumerate(relations)],
                                   "target_type": names[0]})
    kwargs: dict[str, Any] = {"jk": jk}
    if "heads" in spec.options and heads is not None:
        kwargs["heads"] = heads
    if "num_bases" in spec.options and num_bases is not None:
        kwargs["num_bases"] = num_bases
    with torch.device("meta"):
        model = build_model(model_name, in_dim=width, hidden_dim=hidden, out_dim=out_dim, num_layers=layers,
                            typed=part, **kwargs)
    return tuple(sum(p.numel() for p in conv.parameters() if p.requires_grad) for conv in model.convs)
