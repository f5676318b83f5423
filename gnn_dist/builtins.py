"""The built-in components, imported once: every module that registers what the configuration
asks of it (:mod:`gnn_dist.config.registry`: the choices of a field, the checks of a section).

The config imports no component (it sits below them all, docs/architecture.md); a component
registers its names and rules when its module is imported. This module is that import for the
built-in ones, at the top of the layers: the config imports it by name the first time one of its
registries is read (``gnn_dist.config.registry.BUILTINS``: the ``gnn_dist.train`` parser's
choices, any section's validation), so every entry point and a config built from Python alone
see the same components. A new built-in component that registers into the config is one line
here; a user's own components come through ``--import`` (or their own import) the same way.
"""

from __future__ import annotations

import gnn_dist.cache.input  # noqa: F401          the feature options' checks
import gnn_dist.cache.policies  # noqa: F401       --feature-cache-policy
import gnn_dist.cache.store  # noqa: F401          --feature-storage
import gnn_dist.distributed.codec  # noqa: F401    --halo-dtype, --halo-grad-dtype
import gnn_dist.distributed.options  # noqa: F401  --halo-bits, --simulate-link
import gnn_dist.kernels  # noqa: F401              --kernels
import gnn_dist.layer_parallel.chunks  # noqa: F401   --chunk-by
import gnn_dist.layer_parallel.options  # noqa: F401  what layer parallelism refuses
import gnn_dist.models.options  # noqa: F401       --jk; the models' options, edge features, own checks
import gnn_dist.models.spec  # noqa: F401          --model (the package registers the built-in models)
import gnn_dist.nn.activations  # noqa: F401       --activation
import gnn_dist.nn.link_decoder  # noqa: F401      --decoder
import gnn_dist.pipeline.recompute  # noqa: F401   --recompute; recompute vs the schedule
import gnn_dist.pipeline.registry  # noqa: F401    --pipeline (the package registers the built-in schedules)
import gnn_dist.precision  # noqa: F401            --precision
import gnn_dist.tasks  # noqa: F401                --task; a loss of the task, TaskConfig.resolve

__all__: list[str] = []
