"""GCNII (deep GCN, initial residual + identity mapping): P ranks train exactly what one rank
trains (sync and overlap, dropout on, a weighted graph), and 16 layers stay trainable."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gnn_dist.models import GCNII, build_model
from mp_utils import run_ranks
from test_weighted_gcn import weighted_graph, write

EPOCHS = 4


def train(rank: int, world_size: int, path: str, layers: int) -> dict:
    import gnn_dist

    part = gnn_dist.load_partition(path)
    out = {}
    for pipeline in ("sync", "overlap"):
        torch.manual_seed(0)
        model = build_model("gcnii", in_dim=part.feature_dim, hidden_dim=16, out_dim=part.num_classes,
                            num_layers=layers, dropout=0.3, seed=2)
        trainer = gnn_dist.Trainer(model, part, lr=0.02, log_every=0, pipeline=pipeline)
        out[pipeline] = [h["train_loss"] for h in trainer.fit(EPOCHS)]
        out[f"{pipeline}-weights"] = {k: v.clone() for k, v in model.state_dict().items()}
    return out


def test_p_ranks_equal_one_rank(tmp_path):
    graph = weighted_graph(1)
    one = train(0, 1, write(graph, 1, tmp_path / "p1"), 4)
    assert one["sync"][-1] < one["sync"][0]
    for res in run_ranks(train, 2, write(graph, 2, tmp_path / "p2"), 4, timeout=240):
        for pipeline in ("sync", "overlap"):
            np.testing.assert_allclose(res[pipeline], one[pipeline], rtol=1e-5, atol=1e-6, err_msg=pipeline)
            for k, v in one[f"{pipeline}-weights"].items():
                torch.testing.assert_close(res[f"{pipeline}-weights"][k], v, rtol=1e-5, atol=1e-5)


def test_sixteen_layers_train(tmp_path):
    res = train(0, 1, write(weighted_graph(2), 1, tmp_path / "p1"), 16)
    assert all(np.isfinite(res["sync"])) and res["sync"][-1] < res["sync"][0]


def test_model_interface():
    model = build_model("gcnii", in_dim=5, hidden_dim=8, out_dim=3, num_layers=3, dropout=0.0)
    assert isinstance(model, GCNII) and len(model.convs) == 3 and not model.accepts_layer_input
    assert [round(c.beta, 6) for c in model.convs] == [round(float(np.log(0.5 / (i + 1) + 1)), 6) for i in range(3)]
    with pytest.raises(ValueError, match="num_layers must be a positive int"):
        GCNII(5, 8, 3, 0)
