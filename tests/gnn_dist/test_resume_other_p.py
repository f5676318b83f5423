"""Resume on another number of parts: a checkpoint of a P=4 run continues on P=2 and on P=3
(other cuts of the same graph, same graph fingerprint) with no flag, and the run goes on exactly:
per-epoch losses and final weights equal the uninterrupted P=4 run's (to 1e-5: the sums run in
another order), for the ``sync`` and ``overlap`` schedules, with dropout on. One line says what
the resume did. What belongs to the old cut starts afresh, with a warning: a ``stale`` run's
buffers, adaptive halo widths (decided per pair of ranks). Single-process tests: another graph is refused, naming both graph fingerprints;
folders without a graph fingerprint (written before it existed) keep the old refusal.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from mp_utils import run_ranks
from train_helpers import gcn_trainer, make_graph

EPOCHS, HALF = 12, 6
PIPELINES = ("sync", "overlap")
ADAPTIVE = {"halo_bits": "adaptive:3", "halo_bits_every": 2, "static_halo": False}
"""Adaptive halo widths: decided per pair of ranks, so they cannot follow a checkpoint to another cut."""


def write_parts(out: Path, num_parts: int, method: str = "random", graph: Any = None) -> str:
    from partitioners import partition_graph

    partition_graph(make_graph() if graph is None else graph, num_parts, method, out, seed=num_parts)
    return str(out)


class _Lines(logging.Handler):
    """The INFO-and-above lines of the ``gnn_dist`` loggers in a rank."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[tuple[str, str]] = []
        logger = logging.getLogger("gnn_dist")
        logger.addHandler(self)
        logger.setLevel(logging.INFO)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((record.levelname, record.getMessage()))


def _result(trainer: Any, lines: _Lines) -> dict[str, Any]:
    out = {"losses": [h["train_loss"] for h in trainer.history], "epoch": trainer.epoch,
           "params": {k: v.clone() for k, v in trainer.model.state_dict().items()},
           "optim": trainer.optimizer.state_dict()["state"], "lines": lines.lines[:]}
    lines.lines.clear()
    return out


def _straight(rank: int, world_size: int, data: str, root: str) -> dict[str, Any]:
    """The uninterrupted runs on P=4; they checkpoint at HALF (what a run stopped there would
    leave: the resumes' start) and at the end."""
    import gnn_dist

    lines, part = _Lines(), gnn_dist.load_partition(data)
    out = {}
    for pipeline in PIPELINES:
        trainer = gcn_trainer(part, str(Path(root, pipeline)), checkpoint_every=HALF, pipeline=pipeline)
        trainer.fit(EPOCHS)
        out[pipeline] = _result(trainer, lines)
    gcn_trainer(part, str(Path(root, "stale")), pipeline="stale").fit(2)
    gcn_trainer(part, str(Path(root, "adaptive")), **ADAPTIVE).fit(3)
    return out


def _resumed(rank: int, world_size: int, data: str, root: str) -> dict[str, Any]:
    """Fresh trainers (other initial weights) on another cut resume the P=4 checkpoint of HALF."""
    import gnn_dist
    from gnn_dist.checkpoints import checkpoint_path

    lines, part = _Lines(), gnn_dist.load_partition(data)
    out = {}
    for pipeline in PIPELINES:
        trainer = gcn_trainer(part, None, init_seed=99, pipeline=pipeline)
        lines.lines.clear()
        assert trainer.resume(checkpoint_path(Path(root, pipeline), HALF)) and trainer.epoch == HALF
        resumed_lines = lines.lines[:]
        trainer.fit(EPOCHS - HALF)
        out[pipeline] = {**_result(trainer, lines), "resume_lines": resumed_lines}
    stale = gcn_trainer(part, None, pipeline="stale")
    assert stale.resume(checkpoint_path(Path(root, "stale"), 2))
    out["stale"] = {"staleness": stale.fit(1)[0]["staleness"], "lines": lines.lines[:]}
    lines.lines.clear()
    adaptive = gcn_trainer(part, None, **ADAPTIVE)
    assert adaptive.resume(checkpoint_path(Path(root, "adaptive"), 3))
    adaptive.fit(3)   # steps 3-5: widths decided afresh at step 5, from the statistics of steps 3-4
    out["adaptive"] = {"lines": lines.lines[:], "pairs": sorted({(s, d) for _, _, s, d in
                                                                 adaptive.pipeline.transport.adaptive.table})}
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("resume-other-p")
    data = {4: write_parts(root / "p4", 4), 2: write_parts(root / "p2", 2, "metis"), 3: write_parts(root / "p3", 3)}
    ckpt = str(root / "ckpt")
    out = {"data": data, "root": root, 4: run_ranks(_straight, 4, data[4], ckpt, timeout=150)}
    for p in (2, 3):
        out[p] = run_ranks(_resumed, p, data[p], ckpt, timeout=150)
    return out


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.allclose(a.double(), b.double(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("num_parts", [2, 3])
@pytest.mark.parametrize("pipeline", PIPELINES)
def test_resume_on_another_p_continues_exactly(runs, num_parts, pipeline):
    straight = runs[4][0][pipeline]
    assert len(set(straight["losses"])) == EPOCHS   # the check can see a difference
    for rank, r in enumerate(runs[num_parts]):
        got = r[pipeline]
        assert got["epoch"] == EPOCHS and len(got["losses"]) == EPOCHS
        np.testing.assert_allclose(got["losses"], straight["losses"], rtol=1e-5, atol=1e-6, err_msg=f"rank {rank}")
        for k, v in straight["params"].items():
            assert _close(got["params"][k], v), f"rank {rank}: weight {k}"
        for i, state in straight["optim"].items():
            assert all(_close(got["optim"][i][k], v) for k, v in state.items()), f"rank {rank}: optimizer state {i}"
        assert [m for level, m in got["lines"] + got["resume_lines"] if level == "WARNING"] == []


def test_one_line_says_what_the_resume_did(runs):
    graph_fp = json.loads(Path(runs["data"][2], "partition.json").read_text())["graph_fingerprint"]
    for p in (2, 3):
        lines = [m for _, m in runs[p][0]["sync"]["resume_lines"] if "checkpoint" in m]
        assert len(lines) == 1, lines
        assert lines[0].startswith(f"resumed a P=4 run's checkpoint on P={p} ({runs['data'][p]}), same graph "
                                   f"fingerprint {graph_fp[:16]}...: ")
        assert "checkpoint-000006.pt at epoch 6" in lines[0]


def test_stale_buffers_start_fresh_on_another_cut(runs):
    """The stale schedule's buffers (halo rows, halo-gradient sums) belong to the old cut: it
    resumes the weights with no flag, restarts its buffers with a warning, and its first resumed
    step is synchronous."""
    for p in (2, 3):
        got = runs[p][0]["stale"]
        assert got["staleness"] == 0
        warnings = [m for level, m in got["lines"] if level == "WARNING"]
        assert len(warnings) == 1 and f"written with num_parts=4, this run has num_parts={p}" in warnings[0]
        assert "first resumed step is synchronous" in warnings[0]
        assert any(m.startswith(f"resumed a P=4 run's checkpoint on P={p}") for _, m in got["lines"])


def test_adaptive_halo_widths_start_afresh_on_another_cut(runs):
    for p in (2, 3):
        got = runs[p][0]["adaptive"]
        warnings = [m for level, m in got["lines"] if level == "WARNING"]
        assert len(warnings) == 1, warnings
        assert "adaptive halo widths were decided per pair of ranks of another partition" in warnings[0]
        assert got["pairs"] and all(s < p and d < p for s, d in got["pairs"]), got["pairs"]


# ---------------------------------------------------------------- one process
def test_another_graph_is_refused_naming_both(runs, tmp_path):
    import gnn_dist
    from gnn_dist.checkpoints import CheckpointError, checkpoint_path

    other = make_graph(seed=1)
    part = gnn_dist.load_partition(write_parts(tmp_path / "other", 1, graph=other))
    mine = part.meta.graph_fingerprint
    theirs = json.loads(Path(runs["data"][4], "partition.json").read_text())["graph_fingerprint"]
    assert mine != theirs
    with pytest.raises(CheckpointError) as err:
        gcn_trainer(part, None).resume(checkpoint_path(Path(runs["root"], "ckpt", "sync"), HALF))
    message = str(err.value)
    assert "\n" not in message and "written for another graph" in message
    assert theirs[:16] in message and mine[:16] in message and "4 parts" in message
    assert "--resume-any-partition" in message


def _strip_graph_fingerprint(folder: str) -> None:
    path = Path(folder, "partition.json")
    raw = json.loads(path.read_text())
    del raw["graph_fingerprint"]
    path.write_text(json.dumps(raw))


def test_folders_without_a_graph_fingerprint_keep_the_old_refusal(tmp_path, caplog):
    """Folders written before the field existed: another partition is refused without the flag,
    resumed with a warning with it, as before."""
    import gnn_dist
    from gnn_dist.checkpoints import CheckpointError

    graph = make_graph()
    old = write_parts(tmp_path / "old", 1, graph=graph)
    _strip_graph_fingerprint(old)
    trainer = gcn_trainer(gnn_dist.load_partition(old), str(tmp_path / "ckpt"))
    trainer.fit(1)
    new = write_parts(tmp_path / "new", 1, graph=make_graph(seed=1))   # another folder, also without the field
    _strip_graph_fingerprint(new)
    part = gnn_dist.load_partition(new)
    with pytest.raises(CheckpointError, match=r"written for another partition \(fingerprint .* pass "
                                              r"--resume-any-partition"):
        gcn_trainer(part, None).resume(str(tmp_path / "ckpt"))
    with caplog.at_level("WARNING", logger="gnn_dist"):
        assert gcn_trainer(part, None, resume_any_partition=True).resume(str(tmp_path / "ckpt"))
    assert "resuming it anyway (--resume-any-partition)" in caplog.text
