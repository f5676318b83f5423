"""A model is one registered object: :class:`ModelSpec`, everything the runtime needs to know
about a ``--model`` name (after torchtitan's ``TrainSpec``).

.. code-block:: python

    @register_model("graphconv", saved=my_formula)      # saved= optional
    class GraphConvNet(BasicGNN): ...

Every consumer asks the spec, never a table of names: the config (which models exist, which
``jk`` modes and model options each takes, its own checks), :func:`~gnn_dist.models.build_model`,
the memory planner (what its layers save, its workspace), layer parallelism (its stage adapter,
attached by :func:`gnn_dist.layer_parallel.register_adapter`), the trainer and predict (whether
its first layer takes the feature store's :class:`~gnn_dist.nn.part.LayerInput`), and the model
file (the name). What the model class already says is read from it, not stored twice:
``accepts_layer_input``, ``jk_modes`` and ``edge_features`` are the class's attributes.

A model registered without ``saved`` is planned with :func:`~.saved.generic_saved`, a
conservative bound (one warning per process): never a refusal.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..config.registry import register_choices
from .saved import OutsideFormula, SavedFormula, generic_saved

__all__ = ["ModelSpec", "MODEL_SPECS", "MODELS", "register_model", "model_spec", "spec_of_class"]

log = logging.getLogger(__name__)


@dataclass(kw_only=True, slots=True, eq=False)
class ModelSpec:
    """One registered model (``--model name``)."""

    name: str
    """The ``--model`` name."""
    model_cls: type
    """The builder: ``model_cls(in_dim, hidden_dim, out_dim, num_layers, dropout=, seed=, **options)``
    (a :class:`~gnn_dist.models.BasicGNN` or any module with that signature)."""
    saved: SavedFormula | None = None
    """What one message-passing layer saves for backward (:mod:`.saved`); None: the generic bound."""
    outside: OutsideFormula | None = None
    """What the model keeps outside its message-passing layers (encoders, output maps)."""
    options: tuple[str, ...] = ()
    """The model-specific :class:`~gnn_dist.config.ModelConfig` fields it takes (GAT: ``heads``,
    ``out_heads``, ``attn_dropout``); the config refuses them for every other model."""
    check: Callable[[Any], tuple[str, str] | None] | None = None
    """The model's own check of a :class:`~gnn_dist.config.ModelConfig`: ``(field, message)`` or
    None (GAT: the hidden width a multiple of the heads)."""
    workspace_factor: float = 1.0
    """The busiest backward layer's transient memory in units of its input and output gradients
    (fitted per built-in model, ``benchmarks/memory_plan.py``)."""
    workspace_edge: int = 0
    """float32 values per edge and head that its backward holds transiently (GAT's softmax: 2)."""
    typed: bool = False
    """Trains typed (heterogeneous) partitions, and only them: built with ``typed=`` (the rank's
    :class:`~gnn_dist.hetero.TypedPart`) and ``embedding_dim=`` (R-GCN)."""
    stage_adapter: type | None = field(default=None)
    """The layer-parallel stage adapter (:func:`gnn_dist.layer_parallel.register_adapter` sets it)."""

    @property
    def accepts_layer_input(self) -> bool:
        """The model's first layer takes the feature store's ``LayerInput`` (else ``x`` as a tensor)."""
        return bool(getattr(self.model_cls, "accepts_layer_input", False))

    @property
    def exchanges_mapped_rows(self) -> bool:
        """Its layers that narrow their rows send the mapped rows under ``sync``
        (:func:`gnn_dist.nn.part.exchange_then_run`): what the planner counts as their halo width."""
        return bool(getattr(self.model_cls, "exchanges_mapped_rows", False))

    @property
    def jk_modes(self) -> tuple[str, ...]:
        """The ``jk`` modes the model takes."""
        return tuple(getattr(self.model_cls, "jk_modes", ("last",)))

    @property
    def edge_features(self) -> str | None:
        """``"required"``, ``"optional"`` or None: whether it reads the block's edge features."""
        return getattr(self.model_cls, "edge_features", None)

    @property
    def stage_jk_modes(self) -> tuple[str, ...]:
        """The ``jk`` modes its stage adapter cuts (none without an adapter)."""
        return tuple(self.stage_adapter.jk_modes) if self.stage_adapter is not None else ()

    def saved_formula(self) -> SavedFormula:
        """:attr:`saved`, or the generic bound (warned once per model)."""
        if self.saved is not None:
            return self.saved
        if self.name not in _WARNED:
            _WARNED.add(self.name)
            from .. import environ   # one warning per job: the pre-launch check's and rank 0's

            log.log(logging.WARNING if environ.launch_rank() == 0 else logging.DEBUG, f"memory plan: model {self.name!r} registers no saved-tensor formula (register_model(..., "
                        f"saved=...)); its layers are counted with a conservative generic one")
        return generic_saved


_WARNED: set[str] = set()

MODEL_SPECS: dict[str, ModelSpec] = {}
"""The registered models by ``--model`` name."""
register_choices("model", lambda: tuple(sorted(MODEL_SPECS)))   # --model (gnn_dist.config)


class _ClassView(Mapping[str, type]):
    """``{name: model class}``, read from :data:`MODEL_SPECS` (not a second table)."""

    def __getitem__(self, name: str) -> type:
        return MODEL_SPECS[name].model_cls

    def __iter__(self) -> Iterator[str]:
        return iter(MODEL_SPECS)

    def __len__(self) -> int:
        return len(MODEL_SPECS)


MODELS: Mapping[str, type] = _ClassView()
"""The registered model classes by name (a view of :data:`MODEL_SPECS`)."""

M = TypeVar("M", bound=type)


def register_model(name: str, *, saved: SavedFormula | None = None, outside: OutsideFormula | None = None,
                   options: tuple[str, ...] = (), check: Callable[[Any], tuple[str, str] | None] | None = None,
                   workspace_factor: float = 1.0, workspace_edge: int = 0, typed: bool = False) -> Callable[[M], M]:
    """Class decorator: the class is ``--model name``, with what the runtime needs to know of it
    (the fields of :class:`ModelSpec`)."""
    if not isinstance(name, str) or not name or name != name.strip():
        raise ValueError(f"register_model: the name must be a non-empty string without surrounding spaces, "
                         f"got {name!r}")

    def deco(cls: M) -> M:
        known = MODEL_SPECS.get(name)
        if known is not None and known.model_cls is not cls:
            raise ValueError(f"a model named {name!r} is already registered ({known.model_cls.__qualname__})")
        if known is None:
            MODEL_SPECS[name] = ModelSpec(name=name, model_cls=cls, saved=saved, outside=outside, options=options,
                                          check=check, workspace_factor=workspace_factor,
                                          workspace_edge=workspace_edge, typed=typed)
        return cls
    return deco


def model_spec(name: str) -> ModelSpec:
    """The spec of ``--model name``; ``ValueError`` naming the registered ones."""
    spec = MODEL_SPECS.get(name)
    if spec is None:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(sorted(MODEL_SPECS))} (or register "
                         f"your own with gnn_dist.models.register_model and load it with --import)")
    return spec


def spec_of_class(cls: type) -> ModelSpec | None:
    """The spec whose class is exactly ``cls`` (a subclass registers its own), or None."""
    return next((s for s in MODEL_SPECS.values() if s.model_cls is cls), None)
