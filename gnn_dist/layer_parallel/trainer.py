"""The layer-parallel trainer: :class:`~gnn_dist.trainer.Trainer`'s loop with a stage's step.

Every rank holds the whole model (a few MB at most) but trains only its stage's parameters
(:func:`~.staged.split_stage_parameters`): their gradients are all-reduced within the stage's
graph group, those of a shared stem (GCNII's ``lin_in``) over every rank; the optimizer skips the
parameters without a gradient, so each rank's Adam state is its stage's. The loss is computed on
the last stage (:meth:`~gnn_dist.tasks.Task.train_loss`: its share of the global mean) and summed over all
ranks. Evaluation is the exact forward through the stages; the last stage's logits are
broadcast to the stages of its part, so every rank evaluates on its part's rows (the metrics'
sums count each row once per stage, which leaves the accuracies, ratios of sums, exact). Before
a checkpoint, a model selection and the end of ``fit``, each stage's weights are broadcast to
every rank (:meth:`sync_weights`), so the model is the ordinary full model.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from ..config import TrainerConfig
from ..distributed import Transport, all_gather_json, all_reduce_grads, all_reduce_sum, is_distributed
from ..distributed.collectives import named_collective
from ..distributed.keepalive import keep_alive
from ..metrics import StepStats
from ..trainer import Trainer
from .engine import StageEngine
from .layout import StageGroups, StageLayout
from .staged import split_stage_parameters, staged_model
from .state import StageCheckpoints, StageState, stage_mode
from .transport import StageLink

__all__ = ["LayerParallelTrainer", "LayerStepStats"]


@dataclass(slots=True)
class LayerStepStats(StepStats):
    """A layer-parallel step: ``halo_bytes`` counts the halo rows within the stage and the rows
    and gradients sent to the neighbouring stages (``stage_bytes`` of them); ``stages`` has
    one record per stage: ``compute_s`` and ``bubble_s`` (the slowest of its ranks; the bubble is
    the time waiting for the neighbouring stages) and ``bytes_sent`` (its ranks' halo, stage and
    all-reduce bytes)."""

    stage_bytes: int = 0
    chunks: int = 1
    stages: list[dict[str, Any]] = field(default_factory=list)


class LayerParallelTrainer(Trainer):
    """Train ``model`` as stage ``layout.stage`` over the part ``part`` (loaded with the stage's
    graph group, ``groups.graph``). ``timeout``: the stage-to-stage transfers' (the run's
    collective timeout)."""

    def __init__(self, model: nn.Module, part: Any, config: TrainerConfig, *, layout: StageLayout,
                 groups: StageGroups, timeout: float = 300.0, run_config: dict[str, Any] | None = None) -> None:
        if int(getattr(model, "num_layers", 0)) != layout.num_layers:
            raise ValueError(f"the model has {getattr(model, 'num_layers', None)} layers, the stage layout "
                             f"{layout.num_layers}")
        p = config.parallel
        self.layout, self.groups = layout, groups
        self.adapter = staged_model(model, part.original_ids[:part.num_inner], part.block)
        link = config.schedule.simulate_link
        self.link = StageLink(layout.rank, timeout, link)
        self.engine = StageEngine(self.adapter, part, layout, self.link, chunks=p.chunks, seed=int(model.seed),
                                  transport=Transport.build(None, link), chunk_by=p.chunk_by)
        self.mode = stage_mode(p.parallel, p.stages, p.chunks, p.chunk_by)
        S = layout.stages
        self._stage_params = [split_stage_parameters(self.adapter, layout.layers_of(s), s == 0, s == S - 1)[0]
                              for s in range(S)]
        self.owned, self.shared = split_stage_parameters(self.adapter, layout.layers, layout.first, layout.last)
        super().__init__(model, part, config, run_config=run_config)
        if self.task.name == "link":   # --task auto on a partition with an edge split and no labels
            raise ValueError(f"{part.path}: link prediction is graph-parallel only (the last stage computes a node "
                             f"task's loss); train with --parallel graph")
        self.inputs = None   # the stem reads part.x; the first layer's halo rows travel in the step
        self.checkpoints = StageCheckpoints(config.checkpoint, part, mode=self.mode, world_size=layout.world_size,
                                            smoothing=p.history_smoothing)
        self.pipeline.optimizer = self.optimizer

    def new_pipeline(self) -> StageState:
        """A fresh stage state (its first step has one chunk: no history yet)."""
        p, lay = self.config.parallel, self.layout
        mine = {id(q) for q in self.owned + self.shared}
        return StageState(self.mode, self.engine.historical_layers, p.history_smoothing, p.chunks, self.part.device,
                          optimizer=getattr(self, "optimizer", None), row_ids=self.part.original_ids,
                          trained=[j for j, q in enumerate(self.model.parameters()) if id(q) in mine],
                          layout=(lay.stages, lay.graph_parts))

    # ------------------------------------------------------------------ one step
    def _stage_loss(self, logits: torch.Tensor) -> torch.Tensor:
        return self.task.train_loss(logits.float(), self.part, self.epoch)

    def _all_reduce_grads(self) -> int:
        """The stage's gradients within its graph group, a shared stem's over every rank; the
        bytes this rank sent."""
        sent = 0
        for params, group in ((self.owned, self.groups.graph), (self.shared, None)):
            all_reduce_grads(params, group=group)
            if is_distributed(group):
                sent += sum(q.numel() * q.element_size() for q in params if q.requires_grad)
        return sent

    def train_step(self) -> LayerStepStats:
        """One optimizer step of every stage (a collective of every rank)."""
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        state = self.pipeline
        chunks = state.step_chunks
        with self.part.exchanger.recording() as comm:
            local, fig = self.engine.train_step(self.part.x, self.model.dropout_step.clone(), state.history, chunks,
                                                self._stage_loss)
            grad_bytes = self._all_reduce_grads()
            total = torch.tensor([local], dtype=torch.float64, device=self.part.device)
            all_reduce_sum(total)
            value = float(total.item())
            self._check_finite_loss(value)
            self.optimizer.step()
        with torch.no_grad():
            self.model.dropout_step += 1
        state.steps += 1
        step_s = time.perf_counter() - t0
        compute = step_s - fig.bubble_s - comm.exposed_comm_s
        sent = comm.bytes_sent + fig.stage_bytes
        mine = [self.layout.stage, compute, fig.bubble_s, sent + grad_bytes]
        stages: dict[int, dict[str, Any]] = {}
        for s, c, b, n in all_gather_json(mine, what="gather of the stages' figures"):
            rec = stages.setdefault(s, {"stage": s, "compute_s": 0.0, "bubble_s": 0.0, "bytes_sent": 0})
            rec["compute_s"], rec["bubble_s"] = max(rec["compute_s"], c), max(rec["bubble_s"], b)
            rec["bytes_sent"] += n
        return LayerStepStats(train_loss=value, halo_bytes=sent, allreduce_bytes=grad_bytes, compute_time_s=compute,
                              comm_time_s=comm.comm_time_s, exposed_comm_s=comm.exposed_comm_s + fig.bubble_s,
                              bytes_per_layer=comm.bytes_per_layer(self.layout.num_layers),
                              staleness=int(chunks > 1), stage_bytes=fig.stage_bytes, chunks=chunks,
                              stages=[stages[s] for s in sorted(stages)])

    # ------------------------------------------------------------------ evaluation
    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """The exact forward through the stages, then the metrics on every rank's part (see the
        module docstring); with a model selection that keeps weights, the weights are synced."""
        self.model.eval()
        logits = self._share_logits(self.engine.forward_exact(self.part.x, self.model.dropout_step.clone()))
        out = self._eval_metrics(logits)
        if self.selection.keeps_weights:
            self.sync_weights()
        return out

    def _share_logits(self, logits: torch.Tensor | None) -> torch.Tensor:
        lay = self.layout
        if lay.stages == 1:
            assert logits is not None
            return logits
        if logits is None:
            logits = torch.empty((self.part.num_inner, int(self.model.out_dim)), dtype=torch.float32,
                                 device=self.part.device)
        buf = logits.contiguous()
        with named_collective("broadcast of the logits from the last stage", self.groups.pipeline):
            dist.broadcast(buf, src=lay.rank_of(lay.stages - 1), group=self.groups.pipeline)
        keep_alive(buf)
        return buf

    # ------------------------------------------------------------------ the full model
    def sync_weights(self) -> None:
        """Broadcast each stage's parameters from its first rank to every rank (a collective)."""
        if not is_distributed():
            return
        for s, params in enumerate(self._stage_params):
            if not params:
                continue
            flat = torch.cat([q.detach().reshape(-1) for q in params])
            with named_collective(f"broadcast of stage {s}'s weights"):
                dist.broadcast(flat, src=self.layout.rank_of(s, 0))
            keep_alive(flat)
            if s != self.layout.stage:
                offset = 0
                with torch.no_grad():
                    for q in params:
                        q.copy_(flat[offset:offset + q.numel()].view_as(q))
                        offset += q.numel()

    def fit(self, epochs: int) -> list[dict[str, Any]]:
        out = super().fit(epochs)
        self.sync_weights()
        return out

    def save_checkpoint(self) -> Any:
        self.sync_weights()
        return super().save_checkpoint()

    def resume(self, path: Any = None) -> bool:
        resumed = super().resume(path)
        state = self.pipeline
        state.optimizer = self.optimizer
        if resumed and state.pending_optimizer is not None:
            self.optimizer.load_state_dict(state.pending_optimizer)
            state.pending_optimizer = None
            for group in self.optimizer.param_groups:
                group["lr"], group["weight_decay"] = self.config.optim.lr, self.config.optim.weight_decay
        return resumed

