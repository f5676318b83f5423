"""Which options layer and hybrid parallelism take, checked once with the config.

Layer parallelism (``parallel`` = ``layer`` or ``hybrid``) runs its own step
(:mod:`.trainer`): the stage-to-stage chunk pipeline replaces the graph-parallel schedules, so
the options of those schedules, of the feature store and of the memory section are refused here
with one line naming the field and the fix (:class:`~gnn_dist.config.ConfigError`), rather than
ignored.
"""

from __future__ import annotations

from typing import Any

from ..config.registry import register_check

__all__ = ["staged_models", "unsupported_option", "model_error"]


def staged_models() -> dict[str, tuple[str, ...]]:
    """``{model name: the jk modes its stage adapter cuts}`` of the registered models with one
    (read from their :class:`~gnn_dist.models.ModelSpec`; the built-in adapters register when
    :mod:`.staged` is imported)."""
    from ..models import MODEL_SPECS
    from . import staged  # noqa: F401  (registers the built-in adapters)

    return {name: spec.stage_jk_modes for name, spec in MODEL_SPECS.items() if spec.stage_adapter is not None}

_DEFAULTS: tuple[tuple[str, str, Any, str], ...] = (   # (section, field, default or the values taken, why)
    ("schedule", "pipeline", "sync", "the stages' halo exchange is synchronous per chunk"),
    ("schedule", "stale_smoothing", None, "use history_smoothing (--history-smoothing) for the historical rows"),
    ("schedule", "boundary_sample_rate", 1.0, "boundary sampling is graph-parallel only"),
    ("schedule", "halo_dtype", None, "rows travel as computed"),
    ("schedule", "halo_grad_dtype", None, "rows travel as computed"),
    ("schedule", "halo_bits", None, "rows travel as computed"),
    ("features", "feature_storage", "device", "the features stay on the device"),
    ("features", "precompute_first_layer", ("auto", "off"), "the first layer runs on stage 0 like the others"),
    ("features", "first_layer_chunk_rows", None, "the chunks are --chunks"),
    ("memory", "recompute", "none", "the chunks already bound what a stage keeps"),
    ("memory", "precision", "fp32", "stages compute in float32"),
    ("memory", "offload_activations", False, "not with layer parallelism"),
)


def unsupported_option(trainer: Any) -> tuple[str, str] | None:
    """``(field, message)`` for the first option of a :class:`~gnn_dist.config.TrainerConfig`
    that layer/hybrid parallelism does not support, or None."""
    mode = trainer.parallel.parallel
    if mode == "graph":
        return None
    for section, name, default, why in _DEFAULTS:
        value = getattr(getattr(trainer, section), name)
        allowed = default if isinstance(default, tuple) else (default,)
        if value not in allowed:
            return name, (f"{value!r} is not supported with parallel={mode!r} ({why}); leave it at {allowed[0]!r} "
                          f"or train with --parallel graph")
    if trainer.task.task == "link":
        return "task", (f"link is not supported with parallel={mode!r} (the last stage computes a node task's "
                        f"loss); train link prediction with --parallel graph")
    if trainer.parallel.history_smoothing is not None and trainer.parallel.chunks == 1:
        return "history_smoothing", (f"{trainer.parallel.history_smoothing} smooths the historical rows of "
                                     f"chunks > 1, but chunks = 1 has none (--chunks K)")
    return None


def model_error(parallel: Any, model: str, layers: int, jk: str = "last") -> tuple[str, str] | None:
    """``(field, message)`` when the model cannot be split into ``parallel.stages`` stages."""
    if parallel.parallel == "graph":
        return None
    staged = staged_models()
    if model not in staged:
        return "model", (f"{model!r} has no stage adapter for parallel={parallel.parallel!r} (register one with "
                         f"gnn_dist.layer_parallel.register_adapter); choose one of {', '.join(staged)}")
    if jk not in staged[model]:
        why = (" (its dropout acts on the concatenation of every layer's rows, which only the last stage "
               "could assemble, from L/S times the stage boundary's rows)" if jk == "cat" else "")
        return "jk", (f"{jk!r} is not cut into stages for the {model!r} model{why}; with "
                      f"parallel={parallel.parallel!r} use --jk {' or '.join(staged[model])}, or train "
                      f"with --parallel graph")
    if layers % parallel.stages:
        return "stages", (f"{parallel.stages} stages do not divide the model's {layers} layers: each stage holds "
                          f"layers / stages consecutive layers (choose --stages among the divisors of {layers})")
    return None


def check_run(run: Any) -> tuple[str, str] | None:
    """:func:`model_error` of a :class:`~gnn_dist.config.RunConfig`'s model and parallel section."""
    return model_error(run.trainer.parallel, run.model.model, run.model.layers, run.model.jk)


# checked with the config (gnn_dist.config.registry); order=1: after the components' own checks
register_check("trainer", unsupported_option, order=1)
register_check("run", check_run)
