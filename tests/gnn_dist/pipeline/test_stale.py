"""``stale`` (PipeGCN): accuracy on sbm-small against ``sync`` after the same epochs, with and
without smoothing; the moving average's bias correction."""

from __future__ import annotations

import pytest
import torch

from mp_utils import run_ranks
from pipeline_utils import train_model

from gnn_dist.pipeline import EMABuffer

EPOCHS = 30


def _train(rank: int, world_size: int, path: str) -> dict:
    runs = {"sync": {}, "stale": {"pipeline": "stale"},
            "stale+smoothing": {"pipeline": "stale", "stale_smoothing": 0.5}}
    return {name: train_model(path, "gcn", EPOCHS, hidden=32, lr=0.01, dropout=0.5, eval_every=0, **kw)
            for name, kw in runs.items()}


@pytest.fixture(scope="module")
def sbm_small_2(tmp_path_factory) -> str:
    from partitioners import partition_graph
    from partitioners.catalog import load_dataset

    out = tmp_path_factory.mktemp("sbm") / "sbm-small-2"
    partition_graph(load_dataset("sbm-small"), num_parts=2, method="metis", out_dir=out, seed=0)
    return str(out)


def test_stale_accuracy_matches_sync_on_sbm_small(sbm_small_2):
    res = run_ranks(_train, 2, sbm_small_2, timeout=240)
    ref = res[0]["sync"]["final"]["test_acc"]
    assert ref > 0.6, f"sync must learn the task for the comparison to mean anything (test acc {ref})"
    for name in ("stale", "stale+smoothing"):
        got = res[0][name]["final"]["test_acc"]
        assert abs(got - ref) <= 0.015, f"{name}: test accuracy {got:.4f} vs sync {ref:.4f}"
        assert res[0][name]["history"][-1]["staleness"] == 1
        losses = [h["train_loss"] for h in res[0][name]["history"]]
        assert losses != [h["train_loss"] for h in res[0]["sync"]["history"]], "stale really is stale"
    for r in res[1:]:  # the weights stay replicated
        for name in res[0]:
            for k, v in res[0][name]["params"].items():
                assert torch.equal(r[name]["params"][k], v)


def test_ema_bias_correction():
    ema = EMABuffer(0.9)
    assert torch.equal(ema.update(torch.tensor([2.0])), torch.tensor([2.0])), "the first value, unbiased"
    got = ema.update(torch.tensor([4.0]))
    expect = (0.9 * 0.1 * 2.0 + 0.1 * 4.0) / (1 - 0.9 ** 2)
    torch.testing.assert_close(got, torch.tensor([expect]))
    plain = EMABuffer(None)
    plain.update(torch.tensor([1.0]))
    assert torch.equal(plain.update(torch.tensor([5.0])), torch.tensor([5.0]))
    with pytest.raises(ValueError, match=r"stale_smoothing=1.0 must be in \[0, 1\)"):
        EMABuffer(1.0)
