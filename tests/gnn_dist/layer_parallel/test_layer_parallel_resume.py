"""A layer-parallel run resumed from a checkpoint continues exactly as the uninterrupted run
(the stages' history and optimizer states are in the rank files); the checkpoint and the
trained model hold the full model."""

from __future__ import annotations

import numpy as np
import torch

from lp_utils import LAYERS, make_graph, model_of, summary, write
from mp_utils import run_ranks


def train(rank: int, world_size: int, path: str, ckpt: str, epochs: int, resume: bool) -> dict:
    from gnn_dist.config import TrainerConfig
    from gnn_dist.layer_parallel import LayerParallelTrainer, load_stage

    part, layout, groups = load_stage(path, "layer", 2, LAYERS)
    config = TrainerConfig.from_fields(lr=0.05, log_every=0, parallel="layer", stages=2, chunks=3,
                                       history_smoothing=0.3, checkpoint_dir=ckpt, checkpoint_every=2)
    trainer = LayerParallelTrainer(model_of("gcnii", part, 0.5), part, config, layout=layout, groups=groups,
                                   timeout=60)
    if resume:
        assert trainer.resume("latest")
    return summary(trainer, trainer.fit(epochs - trainer.epoch))


def test_resume_continues_the_run(tmp_path):
    path = write(make_graph(), 1, tmp_path / "parts")
    straight = run_ranks(train, 2, path, str(tmp_path / "a"), 5, False, timeout=240)
    run_ranks(train, 2, path, str(tmp_path / "b"), 2, False, timeout=240)
    resumed = run_ranks(train, 2, path, str(tmp_path / "b"), 5, True, timeout=240)
    for r in (0, 1):
        np.testing.assert_array_equal(resumed[r]["loss"], straight[r]["loss"][2:])
        for k, v in straight[r]["params"].items():
            assert torch.equal(resumed[r]["params"][k], v), k
    for k, v in straight[0]["params"].items():   # the ranks hold the same, full model
        assert torch.equal(straight[1]["params"][k], v), k
    saved = torch.load(tmp_path / "a" / "checkpoint-000005.pt", weights_only=True)["model"]
    for k, v in straight[0]["params"].items():
        assert torch.equal(saved[k], v), k
    assert len(list((tmp_path / "a").glob("checkpoint-000005.rank-*-of-00002.pt"))) == 2
