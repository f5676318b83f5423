"""The configuration of a training run, defined once.

Nested dataclasses, one per component, each validated once in ``__post_init__`` (a
:class:`ConfigError` names the field, the value and the fix). Everything else is derived from
them: the ``gnn_dist.train`` command line (:mod:`gnn_dist.config_cli` generates a flag per field, with
the field's docstring as its help), ``--config run.toml`` (any field, by section), and the
Python API, whose ``Trainer(model, part, lr=..., pipeline=...)`` keyword arguments are the
fields of :class:`TrainerConfig`'s sections by name, with the same defaults. The resolved
config is logged on rank 0 at start, written as the first record of the metrics file and stored
in checkpoints (:meth:`RunConfig.to_dict`).

.. code-block:: text

    RunConfig
      data: DataConfig                  --data, --no-verify
      model: ModelConfig                --model, --hidden, --layers, --dropout, --input-dropout, --activation,
                                        --heads, --out-heads, --attn-dropout, --seed
      trainer: TrainerConfig
        optim: OptimizerConfig          --optimizer, --lr, --weight-decay
        schedule: ScheduleConfig        --pipeline, --stale-smoothing, --boundary-sample-rate, ...
        features: FeatureConfig         --feature-storage, --feature-cache-budget, ...
        checkpoint: CheckpointConfig    --checkpoint-dir, --checkpoint-every, --resume, ...
        report: ReportConfig            --eval-every, --log-every, --metrics
        selection: SelectionConfig      --select, --patience
        memory: MemoryConfig            --recompute, --precision, --offload-activations
        parallel: ParallelConfig        --parallel, --stages, --chunks, --history-smoothing
        task: TaskConfig                --task, --loss
      distributed: DistributedConfig    --backend, --timeout, --kernels
      epochs                            --epochs
      save_model                        --save-model

The sections live in modules of one concept each: :mod:`.fields` (``flag``, ``ConfigError``,
the value checks), :mod:`.loop` (optimizer, checkpoint, report, selection, task), :mod:`.step`
(schedule, features, memory, parallel), :mod:`.run` (the trainer's sections together, model,
data, distributed, the run). What only a component knows (its registry's names, the rules of
its options) the component registers into :mod:`.registry` when it is imported; this package
imports no component (see :mod:`.registry` for how the built-in ones are found).
"""

from __future__ import annotations

from .fields import ConfigError, flag
from .loop import (OPTIMIZERS, RESUME_MODES, SELECT_MODES, TASK_LOSSES, CheckpointConfig, OptimizerConfig,
                   ReportConfig, SelectionConfig, TaskConfig)
from .run import SECTIONS, DataConfig, DistributedConfig, ModelConfig, RunConfig, TrainerConfig, to_dict
from .step import PARALLEL_MODES, FeatureConfig, MemoryConfig, ParallelConfig, ScheduleConfig

__all__ = ["ConfigError", "OptimizerConfig", "ScheduleConfig", "FeatureConfig", "CheckpointConfig", "ReportConfig",
           "TrainerConfig", "ModelConfig", "DataConfig", "DistributedConfig", "RunConfig", "OPTIMIZERS",
           "RESUME_MODES", "flag", "SelectionConfig", "SELECT_MODES", "MemoryConfig", "ParallelConfig",
           "PARALLEL_MODES", "TaskConfig", "TASK_LOSSES"]

