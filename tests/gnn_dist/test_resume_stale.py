"""Checkpoints of ``pipeline="stale"``: a resumed run continues the stale buffers exactly.

On 2 gloo ranks, with dropout on and 3 layers (two halo exchanges per step, the first layer's
halo rows being static), without and with ``stale_smoothing=0.5``: 6 epochs straight against
3 epochs that checkpoint after every epoch (so the saves at epochs 1 and 2 find exchanges still
in flight), then a fresh trainer with other initial weights that resumes and trains 3 more.
Per-epoch losses must be equal (``==``, bit-identical) and so must the final weights. Another
partition of the same graph, or another number of parts, carries the halo rows by id with no
warning (row by row: tests/gnn_dist/test_resume_other_p.py). Then the fallbacks: another
pipeline mode or smoothing, boundary sampling on another cut, or a rank that cannot see its rank
file, start a fresh pipeline with a warning that says why (the stale run's first resumed step is
then synchronous: staleness 0); a truncated rank file fails on every
rank with a ``CheckpointError`` naming it, before anything changes. Single-process tests cover
the state API itself (``EMABuffer``, the empty state of ``sync``/``overlap``), one rank, and a
checkpoint written without pipeline state.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from mp_utils import run_ranks
from train_helpers import gcn_trainer, make_graph

EPOCHS, HALF = 6, 3


def write_parts(out: Path, num_parts: int = 2, seed: int = 0) -> str:
    from partitioners.format.writer import write_partition

    graph = make_graph()
    assignment = np.random.default_rng(seed).integers(0, num_parts, graph.num_nodes)
    write_partition(graph, assignment, num_parts, out, method="test", method_params={}, seed=0)
    return str(out)


class _Warnings(logging.Handler):
    """Collects the trainer's warnings in a rank."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []
        logging.getLogger("gnn_dist").addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def take(self) -> list[str]:
        out, self.messages = self.messages, []
        return out


def _losses(history: list[dict[str, Any]]) -> list[float]:
    return [h["train_loss"] for h in history]


def _params(trainer: Any) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in trainer.model.state_dict().items()}


def _resume_runs(rank: int, world_size: int, data: str, other_data: str, root: str) -> dict[str, Any]:
    import gnn_dist
    from gnn_dist.checkpoints import CheckpointError, checkpoint_path, rank_state_path

    warnings = _Warnings()
    part = gnn_dist.load_partition(data)
    out: dict[str, Any] = {"num_halo": part.num_halo,
                           "num_sent": int(torch.unique(part.exchanger.send_index).numel())}
    for name, smoothing in (("plain", None), ("smoothed", 0.5)):
        cfg = {"pipeline": "stale", "stale_smoothing": smoothing}
        d = str(Path(root, name))
        straight = gcn_trainer(part, None, **cfg)
        straight.fit(EPOCHS)
        first = gcn_trainer(part, d, checkpoint_every=1, **cfg)
        first.fit(HALF)
        resumed = gcn_trainer(part, d, init_seed=99, **cfg)
        assert resumed.resume() and resumed.epoch == HALF
        resumed.fit(EPOCHS - HALF)
        rank_file = rank_state_path(d, HALF, rank, world_size)
        saved = torch.load(rank_file, weights_only=True)["state"]
        out[name] = {"straight": _losses(straight.history), "resumed": _losses(resumed.history),
                     "staleness": [h["staleness"] for h in resumed.history[HALF:]],
                     "straight_params": _params(straight), "resumed_params": _params(resumed),
                     "rank_file_bytes": rank_file.stat().st_size,
                     "shapes": {layer: (tuple(s["features"]["m"].shape), tuple(s["grads"]["m"].shape))
                                for layer, s in saved["layers"].items()},
                     "warnings": warnings.take()}
    plain = str(Path(root, "plain"))
    # Another mode, another smoothing: a fresh pipeline with a warning that says why.
    falls = {}
    for key, cfg in (("sync", {"pipeline": "sync"}), ("smoothing", {"pipeline": "stale", "stale_smoothing": 0.5})):
        trainer = gcn_trainer(part, None, **cfg)  # writes nothing
        assert trainer.resume(checkpoint_path(plain, EPOCHS))
        trainer.fit(1)
        falls[key] = {"warnings": warnings.take(), "staleness": trainer.history[-1]["staleness"]}
    # Another partition of the same graph into as many parts: the same graph fingerprint, so it
    # resumes with no flag, its halo rows placed by id; with boundary sampling they cannot be.
    other_part = gnn_dist.load_partition(other_data)
    for key, cfg in (("partition", {}), ("sampled", {"boundary_sample_rate": 0.5})):
        trainer = gcn_trainer(other_part, None, pipeline="stale", **cfg)
        assert trainer.resume(checkpoint_path(plain, EPOCHS))
        falls[key] = {"warnings": warnings.take(), "staleness": trainer.fit(1)[0]["staleness"]}
    # A stale run resuming from a sync checkpoint.
    sync_dir = str(Path(root, "sync"))
    gcn_trainer(part, sync_dir, pipeline="sync").fit(1)
    rank_files = sorted(p.name for p in Path(sync_dir).iterdir() if ".rank-" in p.name)
    trainer = gcn_trainer(part, None, pipeline="stale")
    assert trainer.resume(checkpoint_path(sync_dir, 1))
    trainer.fit(1)
    falls["from_sync"] = {"warnings": warnings.take(), "staleness": trainer.history[-1]["staleness"],
                          "rank_files": rank_files}
    # Rank 1 cannot see its file of epoch 2: every rank falls back.
    if rank == 1:
        rank_state_path(plain, 2, rank, world_size).unlink()
    trainer = gcn_trainer(part, None, pipeline="stale")
    assert trainer.resume(checkpoint_path(plain, 2)) and trainer.epoch == 2
    trainer.fit(1)
    falls["missing"] = {"warnings": warnings.take(), "staleness": trainer.history[-1]["staleness"],
                        "loss": trainer.history[-1]["train_loss"]}
    out["fallbacks"] = falls
    # Rank 1's file of epoch 1 is truncated: a CheckpointError naming it on rank 1, on every rank.
    if rank == 1:
        bad = rank_state_path(plain, 1, rank, world_size)
        bad.write_bytes(bad.read_bytes()[: bad.stat().st_size // 2])
    trainer = gcn_trainer(part, None, pipeline="stale")
    before = _params(trainer)
    try:
        trainer.resume(checkpoint_path(plain, 1))
        out["truncated"] = None
    except (CheckpointError, ValueError) as exc:
        out["truncated"] = (type(exc).__name__, str(exc), trainer.epoch,
                            all(torch.equal(v, trainer.model.state_dict()[k]) for k, v in before.items()))
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("resume-stale")
    data, other = write_parts(root / "parts"), write_parts(root / "other", seed=1)
    res = run_ranks(_resume_runs, 2, data, other, str(root / "ckpt"), timeout=120)
    return {"ranks": res, "root": root}


@pytest.mark.parametrize("name", ["plain", "smoothed"])
def test_stale_resume_is_bit_identical(runs, name):
    for rank, r in enumerate(runs["ranks"]):
        got = r[name]
        assert got["resumed"] == got["straight"], f"rank {rank}: losses differ"
        assert len(set(got["straight"])) == EPOCHS  # the check can see a difference
        assert got["staleness"] == [1] * (EPOCHS - HALF), "the first resumed step is stale, not synchronous"
        for k, v in got["straight_params"].items():
            assert torch.equal(got["resumed_params"][k], v), f"rank {rank}: {k}"
        assert got["warnings"] == []
    assert runs["ranks"][0][name]["straight"] == runs["ranks"][1][name]["straight"]


def test_rank_files_hold_the_halo_rows_and_the_sent_rows(runs):
    for rank, r in enumerate(runs["ranks"]):
        # Layers 1 and 2 exchange (width 8); layer 0's halo rows are static inputs.
        assert r["plain"]["shapes"] == {1: ((r["num_halo"], 8), (r["num_sent"], 8)),
                                        2: ((r["num_halo"], 8), (r["num_sent"], 8))}
        payload = 2 * (r["num_halo"] + r["num_sent"]) * 8 * 4
        assert payload < r["plain"]["rank_file_bytes"] < payload + 8192, r["plain"]["rank_file_bytes"]
    names = sorted(p.name for p in Path(runs["root"], "ckpt", "smoothed").iterdir())
    expected = [f"checkpoint-{e:06d}{suffix}" for e in (1, 2, 3, 6)
                for suffix in (".pt", ".pt.sha256", ".rank-00000-of-00002.pt", ".rank-00001-of-00002.pt")]
    assert names == sorted(expected + ["latest"])  # no temp files


def test_another_mode_or_smoothing_falls_back_with_a_warning(runs):
    for r in runs["ranks"]:
        f = r["fallbacks"]
        assert any("written with pipeline='stale', this run uses 'sync'" in w for w in f["sync"]["warnings"])
        assert any("written with stale_smoothing=None, this run has stale_smoothing=0.5" in w
                   and "first resumed step is synchronous" in w for w in f["smoothing"]["warnings"])
        assert f["smoothing"]["staleness"] == 0
        assert any("written with pipeline='sync', this run uses 'stale'" in w for w in f["from_sync"]["warnings"])
        assert f["from_sync"]["staleness"] == 0
        assert f["from_sync"]["rank_files"] == []  # sync keeps no state


def test_another_partition_or_number_of_parts_carries_the_state(runs, caplog):
    import gnn_dist

    for r in runs["ranks"]:
        f = r["fallbacks"]
        assert f["partition"] == {"warnings": [], "staleness": 1}
        assert f["sampled"]["staleness"] == 0
        assert any("with boundary sampling each rank's halo rows are its own sample" in w
                   and "first resumed step is synchronous" in w for w in f["sampled"]["warnings"]), f["sampled"]
    # One process resumes the 2-rank checkpoint: no halo rows, nothing to warn about.
    part = gnn_dist.load_partition(write_parts(runs["root"] / "p1", num_parts=1))
    trainer = gcn_trainer(part, None, pipeline="stale")   # the same graph: no flag needed
    with caplog.at_level("INFO", logger="gnn_dist"):
        assert trainer.resume(runs["root"] / "ckpt" / "plain" / f"checkpoint-{EPOCHS:06d}.pt")
    assert "WARNING" not in caplog.text
    assert "re-sharded by node id (0 halo rows restored, 0 never sent" in caplog.text
    assert trainer.epoch == EPOCHS and np.isfinite(trainer.fit(1)[0]["train_loss"])


def test_a_rank_without_its_file_makes_every_rank_fall_back(runs):
    for r in runs["ranks"]:
        f = r["fallbacks"]["missing"]
        assert any("rank(s) 1 cannot see their rank file (checkpoint-000002.rank-00001-of-00002.pt) in" in w
                   for w in f["warnings"]), f["warnings"]
        assert f["staleness"] == 0
        # Guards the exactness check: without the buffers the same epoch has another loss.
        assert f["loss"] != r["plain"]["straight"][2]


def test_truncated_rank_file_fails_on_every_rank_naming_it(runs):
    name = str(Path(runs["root"], "ckpt", "plain", "checkpoint-000001.rank-00001-of-00002.pt"))
    (kind0, msg0, epoch0, same0), (kind1, msg1, epoch1, same1) = (r["truncated"] for r in runs["ranks"])
    assert kind1 == "CheckpointError" and msg1.startswith(name) and "truncated" in msg1
    assert kind0 == "ValueError" and "failed on rank 1" in msg0 and name in msg0
    assert epoch0 == epoch1 == 0 and same0 and same1, "a failed resume changes nothing"


# ---------------------------------------------------------------- one process
def test_ema_buffer_state_round_trip():
    from gnn_dist.pipeline import EMABuffer

    a = EMABuffer(0.5)
    for v in (1.0, 3.0, -2.0):
        a.update(torch.tensor([v, 2 * v]))
    b = EMABuffer(0.5)
    b.load_state_dict(a.state_dict())
    assert b.count == 3 and torch.equal(b.value, a.value)
    x = torch.tensor([0.3, 0.7])
    assert torch.equal(a.update(x), b.update(x))
    with pytest.raises(ValueError, match=r"gamma=0.5, this one gamma=0.0"):
        EMABuffer(None).load_state_dict(a.state_dict())


def test_stateless_modes_have_an_empty_state(tmp_path):
    import gnn_dist
    from gnn_dist.config import ScheduleConfig
    from gnn_dist.pipeline import build_schedule

    part = gnn_dist.load_partition(write_parts(tmp_path / "p1", num_parts=1))
    for mode in ("sync", "overlap"):
        pipeline = build_schedule(ScheduleConfig(pipeline=mode), part)
        assert pipeline.state_dict() == {}
        pipeline.load_state_dict({})
        with pytest.raises(ValueError, match=rf"pipeline='{mode}' keeps no state between steps"):
            pipeline.load_state_dict({"steps": 1})


def test_single_rank_stale_resume(tmp_path):
    """One rank: no halo, but the step count (the reported staleness) is restored."""
    import gnn_dist

    part = gnn_dist.load_partition(write_parts(tmp_path / "p1", num_parts=1))
    straight = gcn_trainer(part, None, pipeline="stale")
    straight.fit(4)
    gcn_trainer(part, str(tmp_path / "ck"), pipeline="stale").fit(2)
    resumed = gcn_trainer(part, str(tmp_path / "ck"), pipeline="stale", init_seed=5)
    assert resumed.resume()
    resumed.fit(2)
    assert [(h["train_loss"], h["staleness"]) for h in resumed.history] == \
        [(h["train_loss"], h["staleness"]) for h in straight.history]
    rank_file = tmp_path / "ck" / "checkpoint-000002.rank-00000-of-00001.pt"
    data = bytearray(rank_file.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, other bytes
    rank_file.write_bytes(bytes(data))
    from gnn_dist.checkpoints import CheckpointError

    with pytest.raises(CheckpointError, match=r"rank-00000-of-00001\.pt: the rank file's sha256 .* is not the .* "
                                              r"written with it: corrupt"):
        gcn_trainer(part, None, pipeline="stale").resume(tmp_path / "ck" / "checkpoint-000002.pt")


def test_a_checkpoint_without_pipeline_state_falls_back(tmp_path, caplog):
    """A checkpoint written before pipeline states were saved (no ``pipeline_state`` key)."""
    import gnn_dist

    part = gnn_dist.load_partition(write_parts(tmp_path / "p1", num_parts=1))
    gcn_trainer(part, str(tmp_path / "ck"), pipeline="stale").fit(1)
    from gnn_dist.checkpoints import load_checkpoint, save_checkpoint

    state = load_checkpoint(tmp_path / "ck" / "checkpoint-000001.pt")
    del state["pipeline_state"]
    save_checkpoint(tmp_path / "ck", 1, state)
    trainer = gcn_trainer(part, str(tmp_path / "ck"), pipeline="stale")
    with caplog.at_level("WARNING", logger="gnn_dist"):
        assert trainer.resume()
    assert "checkpoint-000001.pt: the checkpoint holds no pipeline state; the pipeline state is not restored" \
        in caplog.text
    assert trainer.fit(1)[0]["staleness"] == 0


def test_malformed_states_are_named():
    from gnn_dist.pipeline import EMABuffer

    with pytest.raises(ValueError, match=r"malformed moving-average state \(count='3', m of type NoneType\)"):
        EMABuffer(None).load_state_dict({"gamma": 0.0, "count": "3", "m": None})
    with pytest.raises(ValueError, match=r"malformed moving-average state \(count=0, m of type Tensor\)"):
        EMABuffer(None).load_state_dict({"gamma": 0.0, "count": 0, "m": torch.zeros(2)})


def test_stale_state_that_does_not_fit_is_named(tmp_path):
    import gnn_dist
    from gnn_dist.config import ScheduleConfig
    from gnn_dist.pipeline import build_schedule

    part = gnn_dist.load_partition(write_parts(tmp_path / "p1", num_parts=1))
    stale = build_schedule(ScheduleConfig(pipeline="stale"), part)
    with pytest.raises(ValueError, match=r"malformed stale pipeline state \(steps=-1, layers of type dict\)"):
        stale.load_state_dict({"steps": -1, "layers": {}})
    bad = {"steps": 2, "layers": {1: {"features": {"gamma": 0.0, "count": 1, "m": torch.zeros(5, 3)},
                                      "grads": {"gamma": 0.0, "count": 0, "m": None}}}}
    with pytest.raises(ValueError, match=r"layer 1 features: saved buffer of shape \(5, 3\) does not fit "
                                         r"this rank's 0 rows"):
        stale.load_state_dict(bad)


def test_rank_file_errors_name_the_file(tmp_path):
    import hashlib

    from gnn_dist.checkpoints import CheckpointError, load_rank_state, save_rank_state

    entry = save_rank_state(tmp_path, 2, 0, 1, {"steps": 2, "layers": {}})
    with pytest.raises(CheckpointError, match=r"rank-00000-of-00001\.pt: not the rank file this checkpoint "
                                              r"expects \(holds"):
        load_rank_state(tmp_path, entry, epoch=3, rank=0, num_parts=1)
    garbage = tmp_path / "checkpoint-000004.rank-00000-of-00001.pt"
    garbage.write_bytes(b"not a torch file")
    forged = {"name": garbage.name, "size": garbage.stat().st_size,
              "sha256": hashlib.sha256(garbage.read_bytes()).hexdigest()}
    with pytest.raises(CheckpointError, match=r"rank-00000-of-00001\.pt: not a readable rank file"):
        load_rank_state(tmp_path, forged, epoch=4, rank=0, num_parts=1)
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(CheckpointError, match=r"a-file/sub: cannot create the checkpoint folder"):
        save_rank_state(blocker / "sub", 1, 0, 1, {})


def test_prune_deletes_an_earlier_runs_rank_files_on_rank_0(tmp_path):
    from gnn_dist.checkpoints import prune_checkpoints

    for name in ("checkpoint-000001.rank-00003-of-00004.pt", "checkpoint-000001.rank-00001-of-00002.pt",
                 "checkpoint-000002.rank-00003-of-00004.pt"):
        (tmp_path / name).write_bytes(b"x")
    deleted = prune_checkpoints(tmp_path, {2}, 2, rank=0, num_parts=2)
    assert [p.name for p in deleted] == ["checkpoint-000001.rank-00003-of-00004.pt"]


def test_saved_halo_rows_are_picked_by_id():
    """Another cut's halo rows from the old ranks' states: by original id, the first saved copy,
    rows no old rank read flagged (not found); a state without ids is named."""
    from gnn_dist.pipeline.stale_reshard import NoRowIds, collect

    def state(ids: list[int], rows: list[float], count: int = 2) -> dict[str, Any]:
        m = torch.tensor(rows).view(-1, 1)
        return {"steps": 3, "halo_ids": torch.tensor(ids), "layers": {1: {"features": {"gamma": 0.5, "count": count,
                                                                                      "m": m}}}}
    steps, carried = collect([state([7, 2], [70.0, 20.0]), state([5, 7], [50.0, 71.0])], torch.tensor([5, 9, 7, 2]))
    got = carried[1]
    assert steps == 3 and (got.gamma, got.count) == (0.5, 2)
    assert got.m.view(-1).tolist() == [50.0, 0.0, 70.0, 20.0] and got.found.tolist() == [True, False, True, True]
    with pytest.raises(NoRowIds, match="no original ids of their halo rows"):
        collect([{"steps": 3, "layers": {}}], torch.tensor([1]))
    with pytest.raises(ValueError, match="moving averages disagree"):
        collect([state([1], [1.0]), state([2], [2.0], count=1)], torch.tensor([1]))
