"""The memory planner: each training rank's predicted peak per component, from the partition's
sizes and the run's settings, and the cheapest settings that fit a device.

- :mod:`.sizes`: a part's counts (:class:`PartSizes`) from a folder's metadata or a size spec
  with a halo model; :mod:`.typed`: a typed part's types and relations, and the published typed
  graphs' specs (ogbn-mag);
- :mod:`.saved`: what each built-in model's layers keep for backward (a registry);
- :mod:`.model`: the components' formulas (:func:`plan_rank`);
- :mod:`.task`: the ``task`` component (link prediction's pairs and evaluation; node tasks 0);
- :mod:`.stages`: a layer/hybrid-parallel stage rank's share and its ``stage`` component;
- :mod:`.search`: the candidate settings, cheapest first, and the first that fits;
- :mod:`.plan`, :mod:`.render`: a whole run's plan, as JSON and as a table.

It is *the* memory model: ``--max-memory``'s guard (:mod:`gnn_dist.memory_plan.guard`) and the
start-of-training log use it; ``gnn-dist plan`` prints it.
"""

from .model import COMPONENTS, CUDA_CONTEXT_BYTES, RUNTIME_BYTES, Component, RankPlan, Workload, plan_rank
from .plan import MemoryPlan, plan_from_meta, plan_memory, scaled_parts
from .render import render_plan
from .search import LADDER, Recommendation, candidates, recommend
from .sizes import HALO_MODELS, SPEC_EDGE_SPLIT, PartSizes, sizes_from_meta, sizes_from_spec
from .typed import TYPED_SPECS, typed_sizes_from_spec

__all__ = ["COMPONENTS", "CUDA_CONTEXT_BYTES", "RUNTIME_BYTES", "Component", "RankPlan", "Workload", "plan_rank",
           "MemoryPlan", "plan_from_meta", "plan_memory", "scaled_parts", "render_plan", "LADDER",
           "Recommendation", "candidates", "recommend", "HALO_MODELS", "SPEC_EDGE_SPLIT", "PartSizes",
           "sizes_from_meta", "sizes_from_spec", "TYPED_SPECS", "typed_sizes_from_spec"]
