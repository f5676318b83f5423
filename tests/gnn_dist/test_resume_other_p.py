"""Resume on another number of parts: a checkpoint of a P=4 run continues on P=2 and on P=3
(other cuts of the same graph, same graph fingerprint) with no flag, and the run goes on exactly:
per-epoch losses and final weights equal the uninterrupted P=4 run's (to 1e-5: the sums run in
another order), for the ``sync`` and ``overlap`` schedules, with dropout on. One line says what
the resume did. A ``stale`` run (with smoothing) carries its halo rows by original id: the first
resumed step's halo rows are, row by row, the values saved at the stop (rows the old cut never
sent: their owner's values of that step), with no warning and no synchronous step. What belongs
to the pairs of ranks of the old cut starts afresh, with a warning: adaptive halo widths.
Single-process tests: another graph is refused, naming both graph fingerprints; folders without a
graph fingerprint (written before it existed) keep the old refusal.
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
STALE = {"pipeline": "stale", "stale_smoothing": 0.5}
STALE_STOP = 3
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
    gcn_trainer(part, str(Path(root, "stale")), **STALE).fit(STALE_STOP)
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
    # The P=4 stale checkpoint; on P=3 also the P=2 run's (a min-cut: many rows it never sent).
    out["stale"] = _stale_resume(part, Path(root, "stale"), STALE_STOP, Path(root, f"stale-p{world_size}"), lines)
    if world_size == 3:
        out["stale-p2"] = _stale_resume(part, Path(root, "stale-p2"), STALE_STOP + 2, None, lines)
    adaptive = gcn_trainer(part, None, **ADAPTIVE)
    assert adaptive.resume(checkpoint_path(Path(root, "adaptive"), 3))
    adaptive.fit(3)   # steps 3-5: widths decided afresh at step 5, from the statistics of steps 3-4
    out["adaptive"] = {"lines": lines.lines[:], "pairs": sorted({(s, d) for _, _, s, d in
                                                                 adaptive.pipeline.transport.adaptive.table})}
    return out


def _stale_resume(part: Any, source: Path, epoch: int, ckpt_dir: Path | None, lines: _Lines) -> dict[str, Any]:
    """A stale run resumed from ``source``'s checkpoint of ``epoch`` for 2 epochs (checkpointing
    to ``ckpt_dir``), its first step's exchanges recorded."""
    from gnn_dist.checkpoints import checkpoint_path

    stale = gcn_trainer(part, None if ckpt_dir is None else str(ckpt_dir), init_seed=99, **STALE)
    assert stale.resume(checkpoint_path(source, epoch))
    seen = _record_exchanges(stale.pipeline, part)
    resized = dict(stale.checkpoints.resized or {})
    records = stale.fit(2)
    out = {"staleness": [r["staleness"] for r in records], "losses": [r["train_loss"] for r in records],
           "lines": lines.lines[:], "seen": seen, "resized": resized}
    lines.lines.clear()
    return out


def _record_exchanges(pipeline: Any, part: Any) -> dict[int, dict[str, torch.Tensor]]:
    """Records each layer's exchange of the first step: the inner rows sent and the halo rows read,
    with their original ids."""
    seen: dict[int, dict[str, torch.Tensor]] = {}
    exchange, ids, inner = pipeline.exchange, part.original_ids.cpu(), part.num_inner

    def record(h: torch.Tensor) -> torch.Tensor:
        layer = pipeline._layers.layer
        out = exchange(h)
        if layer not in seen:
            seen[layer] = {"inner_ids": ids[:inner], "inner": h.detach().clone(), "halo_ids": ids[inner:],
                           "halo": out[inner:].detach().clone()}
        return out
    pipeline.exchange = record
    return seen


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


def _saved_halo_values(folder: Path, epoch: int, num_parts: int) -> dict[int, dict[int, torch.Tensor]]:
    """``{layer: {original id: value}}`` of a stale run's rank files: each layer's moving average
    (``m / (1 - gamma ** count)``, the schedule's expression)."""
    from gnn_dist.checkpoints import rank_state_path

    table: dict[int, dict[int, torch.Tensor]] = {}
    for rank in range(num_parts):
        state = torch.load(rank_state_path(folder, epoch, rank, num_parts), weights_only=True)["state"]
        for layer, entry in state["layers"].items():
            f = entry["features"]
            value = f["m"] / (1.0 - f["gamma"] ** f["count"])
            for i, row in zip(state["halo_ids"].tolist(), value):
                table.setdefault(layer, {}).setdefault(i, row)
    return table


@pytest.mark.parametrize("old, new, key, epoch", [(4, 2, "stale", STALE_STOP), (4, 3, "stale", STALE_STOP),
                                                 (2, 3, "stale-p2", STALE_STOP + 2)])
def test_stale_halo_rows_carry_the_saved_values_on_another_cut(runs, old, new, key, epoch):
    """The first resumed step's halo rows, row by row: a row the old cut sent holds its saved
    moving average exactly; a row it never sent holds its owner's value of this step."""
    saved = _saved_halo_values(Path(runs["root"], "ckpt", key), epoch, old)
    assert sorted(saved) == [1, 2]   # layer 0's halo rows are static inputs
    for p in (new,):
        ranks = [r[key] for r in runs[p]]
        restored = fetched = 0
        for layer, rows in saved.items():
            current = {i: row for r in ranks for i, row in zip(r["seen"][layer]["inner_ids"].tolist(),
                                                                r["seen"][layer]["inner"])}
            for rank, r in enumerate(ranks):
                seen = r["seen"][layer]
                for i, row in zip(seen["halo_ids"].tolist(), seen["halo"]):
                    want = rows.get(i)
                    if want is None:
                        fetched += 1
                        assert torch.equal(row, current[i]), f"P={p} rank {rank} layer {layer} row {i}"
                    else:
                        restored += 1
                        assert torch.equal(row, want), f"P={p} rank {rank} layer {layer} row {i}"
        assert restored > 0 and (old < new) <= (fetched > 0), (restored, fetched)
        got = ranks[0]
        assert got["staleness"] == [1, 1] and all(np.isfinite(got["losses"]))
        assert [m for level, m in got["lines"] if level == "WARNING"] == []
        line = [m for _, m in got["lines"] if m.startswith(f"resumed a P={old} run's checkpoint on P={p}")]
        said = f"re-sharded by node id ({restored} halo rows restored, {fetched} never sent on the old cut"
        assert len(line) == 1 and f"with the stale pipeline's state {said}" in line[0], line
        assert got["resized"]["from_world_size"] == old and got["resized"]["pipeline_state"].startswith(said)


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


def test_graph_fingerprints_of_different_schemes_are_not_compared():
    """A checkpoint of a typed folder cut before scheme 2 (its state has no scheme: 1) on a typed
    folder cut after: one line saying the fingerprints cannot be compared, not "another graph";
    resumed with a warning under --resume-any-partition."""
    from gnn_dist.checkpoints import CheckpointError
    from gnn_dist.checkpoints.resume import DataIdentity, check_same_data

    saved = DataIdentity.of_state({"partition": "a" * 64, "graph_fingerprint": "b" * 64, "world_size": 4})
    mine = DataIdentity("c" * 64, "d" * 64, 2, 2)
    with pytest.raises(CheckpointError) as err:
        check_same_data(saved, mine, "typed-2", any_partition=False, path="ckpt")
    message = str(err.value)
    assert "\n" not in message and "another graph" not in message and "cannot be compared" in message
    assert "scheme 1" in message and "scheme 2" in message and "--resume-any-partition" in message
    line, same_graph = check_same_data(saved, mine, "typed-2", any_partition=True, path="ckpt")
    assert not same_graph and "resuming it anyway" in line
    assert check_same_data(DataIdentity.of_state({"partition": "a" * 64, "graph_fingerprint": "d" * 64,
                                                  "world_size": 4, "graph_fingerprint_scheme": 2}),
                           mine, "typed-2", any_partition=False, path="ckpt")[1]


_OLD, _NEW, _OTHER = "b" * 64, "d" * 64, "e" * 64
"""A typed graph's scheme-1 digest, its scheme-2 fingerprint, and another graph's scheme-1 digest."""
_SCHEME_1 = "scheme_1_graph_fingerprint"


def _checkpoint(**fields: Any) -> Any:
    from gnn_dist.checkpoints.resume import DataIdentity

    return DataIdentity.of_state({"partition": "a" * 64, "world_size": 4, **fields})


@pytest.mark.parametrize("saved, other, mine", [
    # a checkpoint of a folder cut before scheme 2, on a new folder that records the scheme-1 digest
    ({"graph_fingerprint": _OLD}, {"graph_fingerprint": _OTHER}, (_NEW, 2, _OLD)),
    # a new run's checkpoint (it records its folder's scheme-1 digest) on a folder cut before scheme 2
    ({"graph_fingerprint": _NEW, "graph_fingerprint_scheme": 2, _SCHEME_1: _OLD},
     {"graph_fingerprint": _NEW, "graph_fingerprint_scheme": 2, _SCHEME_1: _OTHER}, (_OLD, 1, None)),
])
def test_fingerprints_of_different_schemes_are_compared_by_scheme_1_when_recorded(saved, other, mine):
    """Equal scheme-1 digests: resumed with no flag, the line saying the graph was verified by the
    older scheme's fingerprint; different ones (``other``): another graph, in one line."""
    from gnn_dist.checkpoints import CheckpointError
    from gnn_dist.checkpoints.resume import DataIdentity, check_same_data

    folder = DataIdentity("c" * 64, mine[0], 2, mine[1], mine[2])
    line, same_graph = check_same_data(_checkpoint(**saved), folder, "typed-2", any_partition=False, path="ckpt")
    assert same_graph and "\n" not in line
    assert f"same graph fingerprint by scheme 1 {_OLD[:16]}... (verified by the older scheme's fingerprint, which " \
           f"does not cover relations or per-type data" in line
    with pytest.raises(CheckpointError) as err:
        check_same_data(_checkpoint(**other), folder, "typed-2", any_partition=False, path="ckpt")
    message = str(err.value)
    assert "\n" not in message and "cannot be compared" not in message
    assert f"written for another graph (graph fingerprint by scheme 1 {_OTHER[:16]}..." in message
    assert f"holds graph fingerprint by scheme 1 {_OLD[:16]}..." in message and "--resume-any-partition" in message


def test_fingerprints_of_one_scheme_are_compared_by_it_alone():
    """Two scheme-2 fingerprints that differ are another graph even when their scheme-1 digests
    agree (the graphs differ in a relation or per-type data); equal ones need no scheme 1."""
    from gnn_dist.checkpoints import CheckpointError
    from gnn_dist.checkpoints.resume import DataIdentity, check_same_data

    saved = _checkpoint(graph_fingerprint=_OTHER, graph_fingerprint_scheme=2, **{_SCHEME_1: _OLD})
    with pytest.raises(CheckpointError, match=rf"written for another graph \(graph fingerprint {_OTHER[:16]}"):
        check_same_data(saved, DataIdentity("c" * 64, _NEW, 2, 2, _OLD), "typed-2", any_partition=False, path="ckpt")
    line, same_graph = check_same_data(saved, DataIdentity("c" * 64, _OTHER, 2, 2, None), "typed-2",
                                       any_partition=False, path="ckpt")
    assert same_graph and "scheme" not in line
