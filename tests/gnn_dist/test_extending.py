"""docs/extending.md's worked layer and schedule, which are not built in, train on 2 ranks.

- ``GraphConv`` (examples/custom_layer.py, the layer protocol): under ``sync``, ``overlap`` (equal
  to ``sync`` to 1e-6: the protocol's split over inner and halo sources), ``stale``, with
  ``--feature-storage mmap`` and a chunked first layer, and precomputed; 2 ranks equal 1 rank.
- ``warmup-stale`` (examples/custom_schedule.py, the schedule registry): its warm-up epochs are
  ``sync``'s bit for bit, the rest ``stale``'s, and it resumes from a checkpoint exactly.
- The page shows the examples' own code, and the command line accepts both by name.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import torch

from mp_utils import run_ranks
from train_helpers import make_graph

REPO = Path(__file__).resolve().parents[2]
EPOCHS = 8


def load(name: str) -> ModuleType:
    """``examples/<name>.py`` as a module (importing it registers its model or schedule)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def write(num_parts: int, out: Path) -> str:
    from partitioners.format.writer import write_partition

    graph = make_graph(90, seed=3)
    assignment = np.random.default_rng(num_parts + 4).integers(0, num_parts, graph.num_nodes).astype(np.int32)
    write_partition(graph, assignment, num_parts, out, method="test", method_params={}, seed=0)
    return str(out)


RUNS = {
    "sync": ("graphconv", {}),
    "overlap": ("graphconv", {"pipeline": "overlap"}),
    "stale": ("graphconv", {"pipeline": "stale"}),
    "mmap": ("graphconv", {"feature_storage": "mmap", "feature_cache_budget": "50%", "first_layer_chunk_rows": 20}),
    "precompute": ("graphconv", {"precompute_first_layer": True}),
    "gcn-sync": ("gcn", {}),
    "gcn-stale": ("gcn", {"pipeline": "stale"}),
    "gcn-warmup": ("gcn", {"pipeline": "warmup-stale"}),
}


def train(rank: int, world_size: int, path: str, ckpt: str) -> dict:
    import gnn_dist
    from gnn_dist.models import build_model

    load("custom_layer"), load("custom_schedule")
    part = gnn_dist.load_partition(path)
    out = {}

    def trainer(model_name: str, options: dict, **extra) -> gnn_dist.Trainer:
        torch.manual_seed(0)
        model = build_model(model_name, in_dim=part.feature_dim, hidden_dim=16, out_dim=part.num_classes,
                            num_layers=3, dropout=0.5, seed=2)
        return gnn_dist.Trainer(model, part, lr=0.02, log_every=0, eval_every=0, **options, **extra)

    for name, (model_name, options) in RUNS.items():
        t = trainer(model_name, options)
        t.fit(EPOCHS)
        out[name] = {"loss": [h["train_loss"] for h in t.history], "staleness": [h["staleness"] for h in t.history],
                     "params": {k: v.clone() for k, v in t.model.state_dict().items()}}
    if world_size > 1:  # warmup-stale resumes exactly, its stale buffers restored (a stateful schedule)
        first = trainer("gcn", {"pipeline": "warmup-stale"}, checkpoint_dir=ckpt, checkpoint_every=100)
        first.fit(EPOCHS - 2)
        resumed = trainer("gcn", {"pipeline": "warmup-stale"}, checkpoint_dir=ckpt)
        assert resumed.resume()
        resumed.fit(2)
        out["resumed"] = [h["train_loss"] for h in resumed.history]
    return out


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("extending")
    two = run_ranks(train, 2, write(2, root / "p2"), str(root / "ckpt"), timeout=300)
    one = run_ranks(train, 1, write(1, root / "p1"), str(root / "ckpt1"), timeout=300)
    return {"two": two, "one": one[0]}


def _close(a: dict, b: dict, tol: float) -> None:
    np.testing.assert_allclose(a["loss"], b["loss"], rtol=tol, atol=tol)
    for k, v in b["params"].items():
        torch.testing.assert_close(a["params"][k], v, rtol=tol, atol=tol, msg=k)


def test_the_worked_layer_trains_under_every_schedule_and_storage(results):
    for rank, res in enumerate(results["two"]):
        sync = res["sync"]
        assert sync["loss"][-1] < sync["loss"][0], "it learns"
        _close(res["overlap"], sync, 1e-6)    # overlap splits its aggregation by source: exact
        _close(res["mmap"], sync, 1e-6)       # the chunked first layer through the feature cache
        _close(res["precompute"], sync, 1e-6)
        stale = res["stale"]["loss"]
        assert np.isfinite(stale).all() and stale != sync["loss"] and stale[0] == sync["loss"][0]
        for other in results["two"][1:]:
            assert other["sync"]["loss"] == sync["loss"], f"rank {rank}"


def test_two_ranks_equal_one_rank_for_the_worked_layer(results):
    _close(results["two"][0]["sync"], results["one"]["sync"], 1e-5)


def test_the_worked_schedule_is_sync_then_stale_exactly(results):
    warm = load("custom_schedule").WARMUP_EPOCHS
    for res in results["two"]:
        loss, sync, stale = res["gcn-warmup"]["loss"], res["gcn-sync"]["loss"], res["gcn-stale"]["loss"]
        assert loss[:warm] == sync[:warm], "the warm-up epochs are sync's, bit for bit"
        assert loss[warm:] != sync[warm:] and np.isfinite(loss).all()
        assert res["gcn-warmup"]["staleness"] == [0] * (warm + 1) + [1] * (EPOCHS - warm - 1)
        assert stale != sync
        assert res["resumed"] == loss, "a resumed warmup-stale run reproduces the uninterrupted one"


def test_the_page_shows_the_examples_code():
    text = (REPO / "docs" / "extending.md").read_text()
    for example in ("custom_layer", "custom_schedule"):
        marker = f"<!-- example: examples/{example}.py -->"
        assert marker in text, marker
        block = re.search(re.escape(marker) + r"\n```python\n(.*?)```", text, re.S).group(1)
        source = (REPO / "examples" / f"{example}.py").read_text()
        assert block.strip() in source, f"docs/extending.md's {example} block is not examples/{example}.py's code"


@pytest.fixture
def registered():
    """The examples registered in this process, and the registries as they were afterwards."""
    from gnn_dist.models import MODEL_SPECS
    from gnn_dist.pipeline import SCHEDULES

    saved = dict(MODEL_SPECS), dict(SCHEDULES)
    load("custom_layer"), load("custom_schedule")
    yield
    MODEL_SPECS.clear(), MODEL_SPECS.update(saved[0])
    SCHEDULES.clear(), SCHEDULES.update(saved[1])
    for name in ("custom_layer", "custom_schedule"):
        sys.modules.pop(name, None)


def test_the_command_line_takes_them_by_name(registered):
    from gnn_dist.config_cli import flag_names, parse_run_config

    config, _ = parse_run_config(["--data", "d", "--model", "graphconv", "--pipeline", "warmup-stale"])
    assert (config.model.model, config.trainer.schedule.pipeline) == ("graphconv", "warmup-stale")
    assert "--pipeline" in flag_names()
