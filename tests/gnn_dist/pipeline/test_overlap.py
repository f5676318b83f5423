"""``overlap`` is exact: losses, accuracies and weights equal ``sync``'s for every built-in model
(dropout off and on, GAT with attention dropout), P in {2, 3}; the split block is a partition of
the edges; a layer without a split form falls back to exchange-then-compute."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mp_utils import run_ranks
from pipeline_utils import small_graph, write_parts

MODELS = ("gcn", "sage", "gat", "gin")
EPOCHS = 3


def _train(rank: int, world_size: int, path: str, dropouts: tuple[float, ...]) -> dict:
    import gnn_dist
    from gnn_dist.models import build_model

    part = gnn_dist.load_partition(path)
    out = {}
    for dropout in dropouts:
        for name in MODELS if dropout == 0.0 else ("sage", "gat"):  # feature and attention dropout
            for mode in ("sync", "overlap"):
                torch.manual_seed(0)
                kw = {"heads": 2, "attn_dropout": 0.3 if dropout else 0.0} if name == "gat" else {}
                model = build_model(name, in_dim=part.feature_dim, hidden_dim=8, out_dim=part.num_classes,
                                    num_layers=3 if name == "sage" else 2, dropout=dropout, seed=7, **kw)
                trainer = gnn_dist.Trainer(model, part, lr=0.05, weight_decay=5e-4, log_every=0, pipeline=mode)
                # one forward/backward at the initial weights: outputs and local gradients
                model.train()
                logits = model(trainer.pipeline.begin_step(0), part.x)
                (trainer._loss_sum(logits) / part.global_num_train).backward()
                with torch.no_grad():
                    model.dropout_step.zero_()
                step = {"logits": logits.detach(), "grads": {k: p.grad.clone() for k, p in model.named_parameters()}}
                model.zero_grad(set_to_none=True)
                hist = trainer.fit(EPOCHS)
                out[(dropout, name, mode)] = {
                    "loss": [h["train_loss"] for h in hist],
                    "acc": [(h["train_acc"], h["val_acc"], h["test_acc"]) for h in hist],
                    "bytes": [h["bytes_per_layer"] for h in hist], "step": step,
                    "params": {k: v.detach().clone() for k, v in model.state_dict().items()}}
    return out


@pytest.mark.parametrize("num_parts", [2, 3])
def test_overlap_equals_sync(tmp_path, num_parts):
    path = write_parts(small_graph(), num_parts, tmp_path / "parts")
    dropouts = (0.0, 0.5) if num_parts == 2 else (0.0,)  # (keeps the file's runtime down)
    results = run_ranks(_train, num_parts, path, dropouts, timeout=240)
    for res in results:
        for dropout in dropouts:
            for name in MODELS if dropout == 0.0 else ("sage", "gat"):
                ref, got = res[(dropout, name, "sync")], res[(dropout, name, "overlap")]
                msg = f"{name} dropout={dropout}"
                torch.testing.assert_close(got["step"]["logits"], ref["step"]["logits"], rtol=1e-6, atol=1e-6)
                for k, v in ref["step"]["grads"].items():
                    torch.testing.assert_close(got["step"]["grads"][k], v, rtol=1e-6, atol=1e-6,
                                               msg=lambda m, k=k: f"{msg} grad {k}: {m}")
                np.testing.assert_allclose(got["loss"], ref["loss"], rtol=1e-6, atol=1e-6, err_msg=msg)
                assert got["acc"] == ref["acc"], msg
                assert got["bytes"] == ref["bytes"], msg
                for k, v in ref["params"].items():  # after 3 Adam steps: reassociated sums, amplified
                    torch.testing.assert_close(got["params"][k], v, rtol=1e-5, atol=1e-6,
                                               msg=lambda m, k=k: f"{msg} {k}: {m}")


def test_split_block_partitions_the_edges():
    from gnn_dist.nn import Block
    from gnn_dist.pipeline import split_block

    g = small_graph()
    indptr, indices = g.indptr, g.indices
    dst_nodes = np.flatnonzero(np.random.default_rng(0).random(g.num_nodes) < 0.5)
    block = Block.from_graph(indptr, indices, dst_nodes)
    sb = split_block(block)
    assert split_block(block) is sb, "cached on the block"
    edges = torch.cat([sb.inner_edges, sb.halo_edges]).sort().values
    assert torch.equal(edges, torch.arange(block.num_edges))
    assert torch.equal(sb.inner.indices, block.indices[sb.inner_edges])
    assert torch.equal(sb.halo.indices + block.num_dst, block.indices[sb.halo_edges])
    assert int(sb.inner.indices.max()) < block.num_dst and sb.halo.num_src == block.num_halo
    assert torch.equal(sb.inner.dst_index, block.dst_index[sb.inner_edges])
    assert torch.equal(sb.halo.dst_index, block.dst_index[sb.halo_edges])


def test_unknown_layer_falls_back(caplog):
    from gnn_dist.distributed.halo import HaloExchanger
    from gnn_dist.nn import Block
    from gnn_dist.pipeline import OverlapPipeline

    block = Block.from_graph(torch.tensor([0, 1, 2]), torch.tensor([1, 0]))
    ex = HaloExchanger([], [0, 0], [0, 0], 2, world_size=1, rank=0)
    pipe = OverlapPipeline(block, ex).begin_step(0)

    class Twice(torch.nn.Module):
        def forward(self, block, x_src):
            return 2 * x_src[:block.num_dst]

    x = torch.ones(2, 3)
    assert torch.equal(pipe.layer(Twice(), x), 2 * x)
