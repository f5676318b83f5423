"""A halo-exchange schedule that is not built in: ``warmup-stale``, exact first, stale later.

Stale halo rows (PipeGCN) hide the communication, but early in training, when the weights move
fast, last epoch's rows are furthest from this epoch's. This schedule runs the first
``WARMUP_EPOCHS`` steps synchronously (exact), then switches to ``stale``. It is one class,
registered with ``register_schedule``; the trainer, ``--pipeline`` and checkpoints find it by
name. See docs/extending.md.

    gnn-dist partition --dataset sbm-tiny --parts 2 --out parts/tiny-2
    gnn-dist train --import examples/custom_schedule.py --data parts/tiny-2 --pipeline warmup-stale
    torchrun --nproc-per-node 2 examples/custom_schedule.py --data parts/tiny-2 --pipeline warmup-stale   # as a script
"""

from __future__ import annotations

import sys
from typing import Any

from gnn_dist.pipeline import StalePipeline, SyncPipeline, register_schedule

WARMUP_EPOCHS = 5


@register_schedule("warmup-stale")
class WarmupStalePipeline:
    stateful = True   # after the warm-up the stale buffers are state: checkpoints keep them per rank
    recompute_modes = ("none", "layers")   # both of its views exchange before each layer (--recompute layers)

    def __init__(self, block, exchanger, options=None, *, subset_fn=None, transport=None) -> None:
        kw: dict[str, Any] = {"subset_fn": subset_fn} | ({} if transport is None else {"transport": transport})
        self.sync = SyncPipeline(block, exchanger, options, **kw)
        self.stale = StalePipeline(block, exchanger, options, **kw)
        self._current: Any = self.sync

    def begin_step(self, epoch: int) -> Any:
        self._current = self.sync if epoch < WARMUP_EPOCHS else self.stale
        return self._current.begin_step(epoch)   # the view the model runs on

    def staleness(self) -> int:
        return self._current.staleness()

    def flush(self) -> None:
        self.stale.flush()

    def state_dict(self) -> dict[str, Any]:
        return self.stale.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.stale.load_state_dict(state)


if __name__ == "__main__":
    from gnn_dist.train import main

    sys.exit(main())
