"""A layer-parallel checkpoint resumed on another layout: ``layer`` S=2 (2 ranks) continued as
``layer`` S=4 (layers move between ranks) and as ``hybrid`` S=2 x G=2 (another partition of the
same graph), 4 ranks each. The history is placed by original node id: the first resumed step's
historical rows are, row by row, the (smoothed) history saved at the stop, with K=2 chunks and no
warning; with K=1 (exact) the resumed run's losses and weights are the uninterrupted run's (to
1e-5: the optimizer state of each parameter comes from the old rank that trained it). Single
process: the picking by id and parameter, and what is refused or restarted."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from lp_utils import LAYERS, make_graph, model_of, write
from mp_utils import run_ranks
from train_helpers import LogLines

STOP, END, GAMMA = 2, 4, 0.5
LAYOUTS = {"layer S=4": ("layer", 4, 1), "hybrid S=2 G=2": ("hybrid", 2, 2)}
"""The resumed layouts: mode, stages, the folder's parts."""


def _trainer(data: str, mode: str, stages: int, chunks: int, ckpt: str | None) -> Any:
    from gnn_dist.config import TrainerConfig
    from gnn_dist.layer_parallel import LayerParallelTrainer, load_stage

    part, layout, groups = load_stage(data, mode, stages, LAYERS)
    config = TrainerConfig.from_fields(lr=0.05, log_every=0, parallel=mode, stages=stages, chunks=chunks,
                                       history_smoothing=GAMMA if chunks > 1 else None, checkpoint_dir=ckpt, checkpoint_every=STOP)
    return LayerParallelTrainer(model_of("gcnii", part, 0.5), part, config, layout=layout, groups=groups, timeout=60)


def _before(rank: int, world_size: int, data: str, root: str) -> list[float]:
    """``layer`` S=2: K=1 for END epochs (checkpoints at STOP and END), K=2 for STOP epochs."""
    exact = _trainer(data, "layer", 2, 1, str(Path(root, "exact")))
    losses = [h["train_loss"] for h in exact.fit(END)]
    _trainer(data, "layer", 2, 2, str(Path(root, "chunked"))).fit(STOP)
    return losses


def _after(rank: int, world_size: int, data: str, root: str, mode: str, stages: int) -> dict[str, Any]:
    """Fresh trainers of another layout resume the two checkpoints of STOP."""
    from gnn_dist.checkpoints import checkpoint_path

    with LogLines("gnn_dist") as log:
        exact = _trainer(data, mode, stages, 1, None)
        assert exact.resume(checkpoint_path(Path(root, "exact"), STOP))
        losses = [h["train_loss"] for h in exact.fit(END - STOP)]
        chunked = _trainer(data, mode, stages, 2, None)
        assert chunked.resume(checkpoint_path(Path(root, "chunked"), STOP))
        state = chunked.pipeline
        history = {i: b.value.clone() for i, b in state.history.items()}
        first = chunked.fit(1)[0]
    return {"losses": losses, "params": {k: v.clone() for k, v in exact.model.state_dict().items()},
            "ids": chunked.part.original_ids.clone(), "history": history, "chunks": first["chunks"],
            "staleness": first["staleness"], "log": list(zip(log.levels, log.lines))}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("lp-reshard")
    graph = make_graph()
    data = {1: write(graph, 1, root / "one"), 2: write(graph, 2, root / "two")}
    ckpt = str(root / "ckpt")
    out: dict[str, Any] = {"root": Path(ckpt), "straight": run_ranks(_before, 2, data[1], ckpt, timeout=240)[0]}
    for name, (mode, stages, parts) in LAYOUTS.items():
        out[name] = run_ranks(_after, 4, data[parts], ckpt, mode, stages, timeout=240)
    return out


def _saved_history(folder: Path) -> dict[int, dict[int, torch.Tensor]]:
    """``{layer: {original id: value}}`` of the S=2 rank files at STOP (the moving average's
    value, the buffer's expression)."""
    from gnn_dist.checkpoints import rank_state_path

    table: dict[int, dict[int, torch.Tensor]] = {}
    for rank in range(2):
        state = torch.load(rank_state_path(folder, STOP, rank, 2), weights_only=True)["state"]
        assert state["steps"] == STOP and (state["stages"], state["graph_parts"]) == (2, 1)
        for layer, buf in state["history"].items():
            value = buf["m"] / (1.0 - buf["gamma"] ** buf["count"])
            for i, row in zip(state["row_ids"].tolist(), value):
                table.setdefault(int(layer), {})[i] = row
    return table


@pytest.mark.parametrize("layout", LAYOUTS)
def test_first_resumed_step_reads_the_saved_history_by_id(runs, layout):
    saved = _saved_history(runs["root"] / "chunked")
    assert sorted(saved) == list(range(1, LAYERS))   # every layer but the first keeps a history
    mode, stages, parts = LAYOUTS[layout]
    for rank, got in enumerate(runs[layout]):
        stage = rank // parts
        layers = [i for i in range(stage * LAYERS // stages, (stage + 1) * LAYERS // stages) if i > 0]
        assert sorted(got["history"]) == layers, f"rank {rank}"
        for i, value in got["history"].items():
            assert value.shape[0] == got["ids"].numel() > 0
            for row_id, row in zip(got["ids"].tolist(), value):
                assert torch.equal(row, saved[i][row_id]), f"rank {rank} layer {i} row {row_id}"
        assert (got["chunks"], got["staleness"]) == (2, 1), f"rank {rank}: the first resumed step"
        assert [m for level, m in got["log"] if level == "WARNING"] == [], f"rank {rank}"
    lines = [m for _, m in runs[layout][0]["log"] if "re-sharded" in m]
    assert len(lines) == 2 and all(" re-sharded by node id from 2 stage(s) x 1 part(s) (" in m for m in lines), lines
    assert "checkpoint-000002.pt at epoch 2" in lines[1] and f"{mode}(stages={stages},chunks=2)" in lines[1]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_exact_run_continues_on_another_layout(runs, layout):
    straight = runs["straight"]
    assert len(set(straight)) == END   # the check can see a difference
    saved = torch.load(runs["root"] / "exact" / f"checkpoint-{END:06d}.pt", weights_only=True)["model"]
    for rank, got in enumerate(runs[layout]):
        np.testing.assert_allclose(got["losses"], straight[STOP:], rtol=1e-5, atol=1e-6, err_msg=f"rank {rank}")
        for k, v in saved.items():
            torch.testing.assert_close(got["params"][k], v, rtol=1e-5, atol=1e-5, msg=lambda m, k=k: f"{k}: {m}")


def _state(ids: list[int], rows: list[float], *, trained: list[int], opt: dict[int, float], steps: int = 3,
           layers: tuple[int, ...] = (1,), stages: int = 2) -> dict[str, Any]:
    m = torch.tensor(rows).view(-1, 1)
    return {"steps": steps, "row_ids": torch.tensor(ids), "stages": stages, "graph_parts": 1, "trained": trained,
            "history": {str(i): {"gamma": 0.5, "count": steps, "m": m + i} for i in layers},
            "optimizer": {"state": {j: {"exp_avg": torch.tensor([v])} for j, v in opt.items()},
                          "param_groups": [{"params": [0, 1, 2, 3]}]}}


def test_saved_rows_and_optimizer_state_are_picked_by_id_and_parameter():
    """Each layer's rows by original id (the first saved copy), rows no old rank saved flagged;
    each trained parameter's optimizer state from the first old rank that trained it (none if
    that rank had none); a state without row ids is named, disagreeing states refused."""
    from gnn_dist.layer_parallel.reshard import collect
    from gnn_dist.pipeline.stale_reshard import NoRowIds

    old = [_state([7, 2], [70.0, 20.0], trained=[0, 3], opt={3: 30.0}, layers=(1, 2)),
           _state([5, 7], [50.0, 71.0], trained=[1, 2, 3], opt={1: 11.0, 2: 12.0, 3: 31.0}, layers=(3,))]
    got = collect(old, [1, 3], torch.tensor([5, 9, 7, 2]), trained=[0, 2, 3])
    assert (got.steps, got.stages, got.graph_parts) == (3, 2, 1) and sorted(got.layers) == [1, 3]
    assert got.layers[1].m.view(-1).tolist() == [0.0, 0.0, 71.0, 21.0]
    assert got.layers[1].found.tolist() == [False, False, True, True]
    assert got.layers[3].m.view(-1).tolist() == [53.0, 0.0, 74.0, 0.0]
    assert {j: float(s["exp_avg"]) for j, s in got.optimizer["state"].items()} == {2: 12.0, 3: 30.0}
    assert got.optimizer["param_groups"] == [{"params": [0, 1, 2, 3]}]
    with pytest.raises(NoRowIds, match="no original ids of their rows"):
        collect([{"steps": 3, "history": {}}], [1], torch.tensor([1]), [])
    with pytest.raises(ValueError, match="different steps"):
        collect([old[0], {**old[1], "steps": 4}], [1], torch.tensor([1]), [])
    with pytest.raises(ValueError, match="different layouts"):
        collect([old[0], {**old[1], "stages": 3}], [1], torch.tensor([1]), [])


def test_rows_no_old_rank_saved_restart_the_history():
    """A rank whose layers lack saved rows counts them; the history then restarts (one exact
    one-chunk step first), and the resume line says so."""
    from gnn_dist.layer_parallel.state import StageState

    state = StageState("layer(stages=1,chunks=2)", [1, 2], GAMMA, 2, torch.device("cpu"), row_ids=torch.tensor([7, 2]),
                       trained=[0], layout=(1, 1))
    counts = state.load_other_cut(iter([_state([7, 2], [70.0, 20.0], trained=[0], opt={0: 1.0})]))
    assert counts == {"restored": 2, "missing": 2, "params": 1, "from_stages": 2, "from_graph_parts": 1}
    assert state.steps == 3 and state.step_chunks == 2
    assert torch.equal(state.history[1].value.view(-1), torch.tensor([71.0, 21.0]) / (1 - GAMMA ** 3))
    line = StageState.describe_other_cut([counts])
    assert "2 history rows restored" in line and "2 rows had no saved value: the history restarts" in line
    state.restart_history()
    assert state.step_chunks == 1 and all(b.value is None for b in state.history.values())


def test_a_checkpoint_of_another_mode_or_smoothing_is_not_restored():
    """What the manager compares: the mode (a layer-parallel one, any stages and chunks), the
    smoothing, and for another partition a verified same graph; and which resumes re-shard."""
    from gnn_dist.layer_parallel.state import StageCheckpoints, mode_stages, stage_mode

    assert mode_stages(stage_mode("hybrid", 3, 4, "graph")) == 3 and mode_stages("stale") is None
    mgr = StageCheckpoints.__new__(StageCheckpoints)
    mgr.mode, mgr.smoothing, mgr.fingerprint = stage_mode("layer", 4, 2, "hash"), GAMMA, "abc"
    mgr.part = type("P", (), {"num_parts": 4})()
    saved = {"mode": "layer(stages=2,chunks=1)", "smoothing": GAMMA, "partition": "abc", "num_parts": 2,
             "rank_files": [{}, {}]}
    assert mgr._mismatch(None, saved, False) is None and mgr._reshards(saved)
    assert not mgr._reshards({**saved, "mode": "layer(stages=4,chunks=1)", "num_parts": 4})
    assert mgr._mismatch(None, {**saved, "mode": "stale"}, False).startswith("the checkpoint was written with "
                                                                              "pipeline='stale'")
    assert "history_smoothing=None" in mgr._mismatch(None, {**saved, "smoothing": None}, False)
    assert mgr._mismatch(None, {**saved, "partition": "other"}, False) == \
        "the checkpoint was written for another partition"
    assert mgr._mismatch(None, {**saved, "partition": "other"}, True) is None


def test_fresh_fallback_warning_names_the_history(caplog):
    from gnn_dist.layer_parallel.state import StageCheckpoints

    mgr = StageCheckpoints.__new__(StageCheckpoints)
    with caplog.at_level(logging.WARNING, logger="gnn_dist"):
        mgr._warn_fresh(None, Path("ck.pt"), {}, "the checkpoint holds no pipeline state")
    assert caplog.messages == ["ck.pt: the checkpoint holds no pipeline state; the layer-parallel history and the "
                               "later stages' optimizer state are not restored (the history starts afresh: the "
                               "first resumed step runs with one chunk), so the resumed run will not reproduce "
                               "the uninterrupted one"]
