"""Two ranks train the same with the Triton kernels (in Triton's interpreter) as with torch's.

The kernels run on each rank's local block (inner and halo sources, a shuffled destination
order, empty rows): GCN (scaled SpMM, its transpose in backward) and GAT (SDDMM, edge softmax
and its backward, the 2-head weighted SpMM and its transpose) for 2 epochs with dropout on: the
second step's loss follows the first update, the final weights the second (no evaluation pass:
only the losses and the weights are compared; each interpreted step takes seconds).
torch's kernels at P=2 equal one rank (``tests/gnn_dist/test_training_exact.py``), so this ties
the Triton backend to one rank too.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from gnn_dist.kernels import triton_available
from mp_utils import run_ranks
from train_helpers import make_graph

pytestmark = [pytest.mark.skipif(not triton_available(), reason="triton is not importable"),
              pytest.mark.slow]   # started first (tests/conftest.py)


def train_with_each_backend(rank: int, world_size: int, path: str) -> dict:
    os.environ["TRITON_INTERPRET"] = "1"   # before the Triton kernels are imported in this process
    import gnn_dist
    from gnn_dist.models import build_model

    out: dict = {}
    for backend in ("torch", "triton"):
        part = gnn_dist.load_partition(path, kernels=backend)
        assert part.block.backend_for(part.x).name == backend
        for name in ("gcn", "gat"):
            torch.manual_seed(0)
            model = build_model(name, in_dim=part.feature_dim, hidden_dim=8, out_dim=part.num_classes,
                                num_layers=2, dropout=0.5, seed=7, **({"heads": 2} if name == "gat" else {}))
            hist = gnn_dist.Trainer(model, part, lr=0.05, log_every=0, eval_every=0).fit(2)
            out[backend, name] = ([h["train_loss"] for h in hist],
                                  {k: v.detach().clone() for k, v in model.state_dict().items()})
    return out


def test_triton_kernels_train_like_torch_on_two_ranks(tmp_path):
    from partitioners.format.writer import write_partition

    graph = make_graph(60)
    assignment = np.random.default_rng(2).integers(0, 2, graph.num_nodes).astype(np.int32)
    write_partition(graph, assignment, 2, tmp_path / "parts", method="test", method_params={}, seed=0)
    results = run_ranks(train_with_each_backend, 2, str(tmp_path / "parts"), timeout=240)
    for name in ("gcn", "gat"):
        (loss_t, params_t), (loss_x, params_x) = results[0]["torch", name], results[0]["triton", name]
        np.testing.assert_allclose(loss_x, loss_t, rtol=1e-5, atol=1e-6, err_msg=name)
        for key, value in params_t.items():
            torch.testing.assert_close(params_x[key], value, rtol=1e-5, atol=1e-5, msg=f"{name} {key}")
    for r in (0, 1):   # every rank took the same steps
        assert [results[r]["triton", n][0] for n in ("gcn", "gat")] == [results[0]["triton", n][0]
                                                                        for n in ("gcn", "gat")]
