"""Check a run's configuration against its partition's metadata before any rank starts.

``gnn-dist train`` runs ``python -m gnn_dist.train --validate ...`` first, in one process, so a
refused option is one line and exit code 2 instead of a failure inside every rank. The checks
read ``partition.json`` only (no part file, no process group), build the model on torch's
``meta`` device (no memory) and estimate the ranks' peak memory (:mod:`gnn_dist.memory_plan.guard`):
what the ranks would refuse at start, found before they start.
"""

from __future__ import annotations

import logging
import sys

from . import environ
from .config import RunConfig

__all__ = ["validate_run", "check_run", "check_data"]

log = logging.getLogger(__name__)


def check_run(config: RunConfig) -> str:
    """A one-line description of the run when ``config`` fits its partition.

    Raises:
        ValueError: (``PartitionFormatError``, ``KernelBackendError`` ...) naming the folder, field
            or value that does not fit, and the fix.
    """
    import torch

    from partitioners.format import load_partition_meta

    from .kernels import resolve_kernels
    from .memory_plan.guard import check_training_memory, world_ranks
    from .models import build_model

    path = config.data.data
    meta = load_partition_meta(path)
    task = check_data(config, meta)
    resolve_kernels(config.distributed.kernels or environ.kernels())   # as the ranks will
    if config.trainer.memory.offload_activations:
        from .offload import check_offload_device

        check_offload_device("cuda" if torch.cuda.is_available() and config.distributed.backend != "gloo" else "cpu")
    from .models import resolve_edge_dim

    model_config = resolve_edge_dim(config.model, meta.edge_feature_dim, str(path))   # as train.build resolves it
    from .hetero.part import TypedPart, training_meta

    meta = training_meta(meta)   # a typed folder's: the target type's classes, the widest features
    with torch.device("meta"):
        model = build_model(model_config, in_dim=int(meta.feature_dim),
                            out_dim=task.out_dim(int(meta.num_classes), model_config.hidden),
                            typed=TypedPart.schema(meta) if meta.hetero is not None else None)
    _check_precompute(config, model)
    from .checkpoints import check_resume

    check_resume(config.trainer.checkpoint, model, config.trainer.optim.optimizer)   # the checkpoint's model and optimizer
    ranks = world_ranks(meta, config)   # gnn-dist train runs every rank on this machine
    check_training_memory(meta, config, ranks, local_ranks=len(ranks))
    if config.trainer.checkpoint.checkpoint_dir is not None:   # held by another live run: refused (gnn_dist.run_lock)
        from .run_lock import check_free

        check_free(config.trainer.checkpoint.checkpoint_dir, what="--checkpoint-dir", job=environ.elastic_run_id())
    if config.save_model is not None:
        from .model_file import check_output_file

        check_output_file(config.save_model, "--save-model")
    if config.trainer.report.metrics_path is not None:   # as the ranks check it (gnn_dist.metrics.check_metrics_target)
        from .model_file import check_output_file

        check_output_file(config.trainer.report.metrics_path, "--metrics")
    if config.trainer.report.tensorboard is not None:
        from .tensorboard_log import require_tensorboard

        require_tensorboard()
    labels = f"{meta.num_classes} classes" if task.name != "regression" else f"{meta.num_classes} regression targets"
    return (f"{path}: {meta.num_parts} parts, {meta.num_nodes} nodes, {meta.feature_dim} features, "
            f"{labels}; model {config.model.model}, task {task.name} ({task.loss}), "
            f"pipeline {config.trainer.schedule.pipeline}")


def check_data(config: RunConfig, meta: object) -> object:
    """The run's task, when the folder ``meta`` describes has what it trains on: node features,
    and the labels (or pairs) its task needs; what every rank also checks before it loads its part
    (a job started by torchrun directly). Raises ``ValueError`` naming the folder and the fix."""
    path = config.data.data
    from .hetero.part import check_target_type, training_meta

    check_typed_model(config, meta)
    check_target_type(meta, config.data.target_type, str(path))
    meta = training_meta(meta)
    edge_split = getattr(meta, "edge_split", None)
    if getattr(meta, "hetero", None) is not None:
        from .hetero.part import typed_features_problem

        link = edge_split is not None and config.trainer.task.task in ("auto", "link")   # needs no labels
        why = typed_features_problem(meta, config.model.embedding_dim, needs_labels=not link)
        if why is not None:
            raise ValueError(f"{path}: {why}")
    elif not getattr(meta, "feature_dim", 0):
        raise ValueError(f"{path}: the partition has no node features to train on (partition it with features, "
                         f"e.g. gnn-dist partition --features F.npy)")
    task = config.trainer.task.resolve(meta.label_kind, where=str(path), edge_split=edge_split is not None)  # type: ignore[attr-defined]
    task.check_data(meta, path)
    return task


def check_typed_model(config: RunConfig, meta: object) -> None:
    """A typed partition trains with a model registered ``typed=True`` (R-GCN, HGT, hetero-sage), and only it;
    ``--embedding-dim`` applies to typed partitions."""
    from .models import model_spec

    typed_folder = getattr(meta, "hetero", None) is not None
    spec = model_spec(config.model.model)
    path = config.data.data
    if typed_folder and not spec.typed:
        raise ValueError(f"{path}: a typed (heterogeneous) partition: model {spec.name!r} trains homogeneous graphs; "
                         f"use --model rgcn (or hgt, hetero-sage: docs/heterogeneous.md)")
    if not typed_folder and spec.typed:
        raise ValueError(f"{path}: model {spec.name!r} trains typed (heterogeneous) partitions; this one is "
                         f"homogeneous (partition a typed graph: docs/heterogeneous.md)")
    if not typed_folder and config.model.embedding_dim is not None:
        raise ValueError(f"{path}: --embedding-dim applies to typed partitions (learnable rows of the featureless "
                         f"node types); this one is homogeneous")


def _check_precompute(config: RunConfig, model: object) -> None:
    """``--precompute-first-layer on`` needs a first layer whose aggregation is linear and reads
    no parameter (what the ranks refuse at their first step, found here)."""
    if config.trainer.features.precompute_first_layer != "on" or not getattr(model, "accepts_layer_input", False):
        return
    from .cache.input import precomputable

    convs = getattr(model, "convs", None)
    first = convs[0] if convs else None
    if first is not None and not precomputable(first):
        raise ValueError(f"--precompute-first-layer on: the first layer of model {config.model.model!r} "
                         f"({type(first).__name__}) cannot be precomputed (its aggregation is not linear or "
                         f"reads a parameter; GCNConv, SAGEConv and GINConv can); use --precompute-first-layer "
                         f"auto or off")


def validate_run(config: RunConfig, *, quiet: bool = False) -> int:
    """:func:`check_run`, reported: exit code 0 (and the description, unless ``quiet``) or 2 (and
    the error line)."""
    try:
        description = check_run(config)
        if not quiet:
            print(f"configuration OK: {description}", file=sys.stderr)
    except ValueError as exc:
        print(f"gnn_dist.train: error: {exc}", file=sys.stderr)
        return 2
    return 0
