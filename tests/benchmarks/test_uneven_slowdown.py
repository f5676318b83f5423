"""``benchmarks/uneven.py``'s slowed rank: every conv method and activation of the model runs
twice, forward and backward, and the values are unchanged (the losses of a slowed run are the
unslowed run's, bit for bit) — under ``sync`` and ``overlap`` alike, one rank."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from partitioners.format.writer import write_partition
from train_helpers import make_graph

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import uneven  # noqa: E402


def _losses(folder: Path, schedule: str, slow: bool, calls: Counter) -> list[float]:
    import gnn_dist
    from gnn_dist.models import build_model

    part = gnn_dist.load_partition(folder)
    torch.manual_seed(0)
    model = build_model("gcn", in_dim=part.feature_dim, hidden_dim=16, out_dim=part.num_classes, num_layers=3,
                        dropout=0.5, seed=0)
    if slow:
        uneven.slow_down(model, 2)
    for i, conv in enumerate(model.convs):   # count the calls of every (slowed) method
        for name in ("begin", "aggregate", "update"):
            fn = getattr(conv, name)

            def counted(*a, _fn=fn, _key=(i, name), **k):
                calls[_key] += 1
                return _fn(*a, **k)
            setattr(conv, name, counted)
    trainer = gnn_dist.Trainer(model, part, lr=0.01, eval_every=0, log_every=0, pipeline=schedule,
                               precompute_first_layer="off")
    return [h["train_loss"] for h in trainer.fit(3)]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("schedule", ["sync", "overlap"])
def test_the_slowed_model_computes_twice_and_the_same(tmp_path, schedule):
    g = make_graph(80, seed=3)
    write_partition(g, np.zeros(g.num_nodes, dtype=np.int32), 1, tmp_path / "p1", method="test",
                    method_params={}, seed=0)
    plain, slowed = Counter(), Counter()
    assert _losses(tmp_path / "p1", schedule, True, slowed) == _losses(tmp_path / "p1", schedule, False, plain)
    # the counters wrap the slowed methods from outside: each outer call runs the conv's method twice
    assert plain and set(slowed) == set(plain)
    assert all(slowed[k] == plain[k] for k in plain)   # the schedule calls each method as often as unslowed


def test_the_twin_is_really_computed(tmp_path):
    """The wrapped method runs its function ``times`` times per call (forward), and the twin's
    backward runs too (the gradient of the conv's weight is the same, computed alongside)."""
    runs = Counter()

    class Conv(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(3))

        def begin(self, x):
            runs["begin"] += 1
            return "ctx", x * self.w

        def transform(self, x):
            return x

        def aggregate(self, z):
            return z.sum()

        def update(self, acc):
            return acc

    class Model:
        convs = [Conv()]

        def _activation(self, layer, step, ids):
            return lambda h, rows: h

    m = Model()
    uneven.slow_down(m, 3)
    ctx, z = m.convs[0].begin(torch.arange(3.0))
    assert runs["begin"] == 3 and ctx == "ctx"
    m.convs[0].update(m.convs[0].aggregate(z)).backward()
    assert m.convs[0].w.grad.tolist() == [0.0, 1.0, 2.0]   # the output's gradient alone: the twins add zero


def test_the_twin_optimizer_steps_alongside_and_changes_nothing():
    w = torch.nn.Parameter(torch.tensor([1.0, -2.0, 3.0]))
    ref = torch.nn.Parameter(w.detach().clone())
    opt, ref_opt = torch.optim.Adam([w], lr=0.1), torch.optim.Adam([ref], lr=0.1)
    uneven.slow_down_optimizer(opt, 3)
    calls = Counter()
    adam_step = torch.optim.Adam.step

    def counted(self, *a, **k):
        calls["step"] += 1
        return adam_step(self, *a, **k)

    torch.optim.Adam.step = counted
    try:
        for _ in range(3):
            for p, o in ((w, opt), (ref, ref_opt)):
                o.zero_grad()
                (p ** 2).sum().backward()
                o.step()
    finally:
        torch.optim.Adam.step = adam_step
    assert torch.equal(w, ref)                 # the real parameters move as without the twins
    # per step: two twins and the reference (the real step was bound before the count began)
    assert calls["step"] == 3 * (2 + 1)
