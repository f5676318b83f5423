"""Checkpoints and ``--resume``: an interrupted run continues exactly as if it never stopped.

The 2-rank test trains through the real entry point (``gnn_dist.train.main``) with dropout on:
6 epochs straight, against 3 epochs, then a resume to 6 in fresh processes. Per-epoch losses and
accuracies must be bit-identical, and so must the final weights and optimizer state. Part 0 has
no training nodes (it still joins every collective). The single-process tests cover the
checkpoint files themselves: atomic writes, the ``latest`` pointer, and the errors that name a
missing, corrupt or mismatched checkpoint.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from partitioners import Graph
from partitioners.format.writer import write_partition
from train_helpers import make_graph, run_train_jobs
from mp_utils import run_ranks

EPOCHS, HALF = 6, 3


def write(graph: Graph, num_parts: int, out: Path) -> str:
    """Training nodes all go to the last part, so part 0 (of 2) has none."""
    rng = np.random.default_rng(num_parts)
    assignment = np.where(graph.train_mask, num_parts - 1, rng.integers(0, num_parts, graph.num_nodes))
    write_partition(graph, assignment, num_parts, out, method="test", method_params={}, seed=0)
    return str(out)


def argv(data: str, epochs: int, ckpt: str, metrics: str, *extra: str) -> list[str]:
    return ["--data", data, "--model", "sage", "--hidden", "8", "--layers", "2", "--epochs", str(epochs),
            "--lr", "0.05", "--dropout", "0.5", "--seed", "5", "--checkpoint-dir", ckpt,
            "--checkpoint-every", "2", "--metrics", metrics, "--log-every", "0", *extra]


def read_metrics(path: str | Path) -> list[dict]:
    """The epoch records (the first record of a metrics file is the run's config)."""
    return [r for r in map(json.loads, Path(path).read_text().splitlines()) if "epoch" in r]


@pytest.fixture(scope="module")
def two_rank_runs(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("resume")
    data = write(make_graph(), 2, root / "parts")
    d = {k: str(root / k) for k in ("straight", "resumed", "empty", "bad")}
    m = {k: str(root / f"{k}.jsonl") for k in d}
    # A checkpoint folder whose latest file is truncated.
    os.makedirs(d["bad"])
    Path(d["bad"], "checkpoint-000002.pt").write_bytes(b"PK\x03\x04 truncated")
    Path(d["bad"], "latest").write_text("checkpoint-000002.pt\n")
    first = run_ranks(run_train_jobs, 2, [argv(data, EPOCHS, d["straight"], m["straight"]),
                                    argv(data, HALF, d["resumed"], m["resumed"])], timeout=120)
    # Fresh processes: resume to EPOCHS; resume from a folder without checkpoints; a corrupt one.
    second = run_ranks(run_train_jobs, 2, [argv(data, EPOCHS, d["resumed"], m["resumed"], "--resume"),
                                     argv(data, 1, d["empty"], m["empty"], "--resume"),
                                     argv(data, EPOCHS, d["bad"], m["bad"], "--resume")], timeout=120)
    return {"dirs": d, "metrics": m, "first": first, "second": second, "data": data}


def test_resume_reproduces_the_uninterrupted_run(two_rank_runs):
    runs = two_rank_runs
    assert runs["first"] == [[None, None]] * 2, runs["first"]
    assert runs["second"][0][0] is None and runs["second"][1][0] is None, runs["second"]
    straight, resumed = read_metrics(runs["metrics"]["straight"]), read_metrics(runs["metrics"]["resumed"])
    assert [r["epoch"] for r in resumed] == list(range(EPOCHS))  # absolute epochs, each once
    keys = ("epoch", "train_loss", "train_acc", "val_acc", "test_acc", "comm_bytes")
    assert [{k: r[k] for k in keys} for r in resumed] == [{k: r[k] for k in keys} for r in straight]
    from gnn_dist.checkpoints import load_checkpoint

    a = load_checkpoint(Path(runs["dirs"]["straight"], f"checkpoint-{EPOCHS:06d}.pt"))
    b = load_checkpoint(Path(runs["dirs"]["resumed"], f"checkpoint-{EPOCHS:06d}.pt"))
    assert a["epoch"] == b["epoch"] == EPOCHS
    assert a["model"]["dropout_step"].item() == EPOCHS  # dropout was on and advanced every epoch
    for key, value in a["model"].items():
        assert torch.equal(b["model"][key], value), key
    for (i, sa), (j, sb) in zip(a["optimizer"]["state"].items(), b["optimizer"]["state"].items()):
        assert i == j and all(torch.equal(sa[k], sb[k]) for k in sa), f"optimizer state {i}"
    assert [h["train_loss"] for h in b["history"]] == [r["train_loss"] for r in straight]
    # The first half checkpointed at epoch 2 and at its last epoch, 3.
    assert Path(runs["dirs"]["resumed"], "checkpoint-000003.pt").is_file()
    assert Path(runs["dirs"]["resumed"], "latest").read_text().strip() == f"checkpoint-{EPOCHS:06d}.pt"


def test_the_loss_depends_on_the_epoch(two_rank_runs):
    """Guards the exactness check: a resume that restarted the dropout masks or the optimizer
    would see other losses, because consecutive epochs differ."""
    losses = [r["train_loss"] for r in read_metrics(two_rank_runs["metrics"]["straight"])]
    assert len(set(losses)) == EPOCHS


def test_resume_without_a_checkpoint_starts_at_zero(two_rank_runs):
    runs = two_rank_runs
    assert runs["second"][0][1] is None and runs["second"][1][1] is None, runs["second"]
    empty = read_metrics(runs["metrics"]["empty"])
    assert [r["epoch"] for r in empty] == [0]
    assert empty[0]["train_loss"] == read_metrics(runs["metrics"]["straight"])[0]["train_loss"]


def test_corrupt_checkpoint_fails_on_every_rank_naming_it(two_rank_runs):
    """A checkpoint without its checksum file (here: not written by gnn-dist) is refused before
    anything is loaded: exit code 2 on every rank, one line on rank 0 naming the file, none on
    rank 1."""
    name = str(Path(two_rank_runs["dirs"]["bad"], "checkpoint-000002.pt"))
    (code0, lines0), (code1, lines1) = two_rank_runs["second"][0][2], two_rank_runs["second"][1][2]
    assert code0 == code1 == 2
    assert len(lines0) == 1 and name in lines0[0] and "has no checksum file checkpoint-000002.pt.sha256" in lines0[0]
    assert lines1 == []


# ---------------------------------------------------------------- one process
@pytest.fixture(scope="module")
def part1(tmp_path_factory):
    import gnn_dist

    return gnn_dist.load_partition(write(make_graph(), 1, tmp_path_factory.mktemp("p1") / "parts"))


def make_trainer(part, ckpt_dir, *, init_seed: int = 0, hidden: int = 8, **config):
    import gnn_dist
    from gnn_dist.models import build_model

    torch.manual_seed(init_seed)
    model = build_model("gcn", in_dim=part.feature_dim, hidden_dim=hidden, out_dim=part.num_classes,
                        num_layers=2, dropout=0.5, seed=3)
    config = {"lr": 0.05, "log_every": 0, "checkpoint_dir": None if ckpt_dir is None else str(ckpt_dir),
              **config}
    return gnn_dist.Trainer(model, part, **config)


def test_trainer_resume_is_exact_and_absolute(part1, tmp_path):
    straight = make_trainer(part1, None)
    ref = [h["train_loss"] for h in straight.fit(4)]
    first = make_trainer(part1, tmp_path, checkpoint_every=100)
    first.fit(2)  # checkpoints after its last epoch
    fresh = make_trainer(part1, tmp_path, init_seed=99)  # other initial weights: the checkpoint's win
    assert fresh.resume() and fresh.epoch == 2
    hist = fresh.fit(2)
    assert [h["epoch"] for h in hist] == [2, 3]
    assert [h["train_loss"] for h in fresh.history] == ref
    for key, value in straight.model.state_dict().items():
        assert torch.equal(fresh.model.state_dict()[key], value), key


def test_checkpoint_every_and_after_the_last_epoch(part1, tmp_path):
    from gnn_dist.checkpoints import latest_checkpoint

    trainer = make_trainer(part1, tmp_path, checkpoint_every=2)
    trainer.fit(5)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "checkpoint-000002.pt", "checkpoint-000002.pt.sha256", "checkpoint-000004.pt", "checkpoint-000004.pt.sha256",
        "checkpoint-000005.pt", "checkpoint-000005.pt.sha256", "latest"]  # no temp files
    assert latest_checkpoint(tmp_path) == tmp_path / "checkpoint-000005.pt"
    from gnn_dist.checkpoints import load_checkpoint   # the pointer and the folder name the newest file
    assert load_checkpoint(tmp_path / "latest")["epoch"] == load_checkpoint(tmp_path)["epoch"] == 5


def test_checkpoint_holds_the_whole_state(part1, tmp_path):
    from gnn_dist.checkpoints import load_checkpoint

    trainer = make_trainer(part1, tmp_path, optimizer="adamw", weight_decay=0.01)
    trainer.fit(1)
    state = load_checkpoint(trainer.save_checkpoint())
    assert state["format"] == "gnn-dist-checkpoint" and state["version"] == 2 and state["epoch"] == 1
    assert state["config"]["optim"] == {"optimizer": "adamw", "lr": 0.05, "weight_decay": 0.01}
    assert state["partition"] == trainer.checkpoints.fingerprint
    assert set(state["rng"]) >= {"python", "numpy", "torch"}
    assert state["optimizer"]["state"], "optimizer moments saved"
    assert state["model_info"] == {"class": "GCN", "in_dim": 5, "hidden_dim": 8, "out_dim": 3, "num_layers": 2,
                                   "dropout": 0.5, "input_dropout": 0.0, "activation": "relu", "seed": 3}
    assert state["selection"] == {"select": "last", "metric": "acc", "best": {k: trainer.history[0][k] for k in
                                                             ("epoch", "train_acc", "val_acc", "test_acc")},
                                  "since_best": 0, "weights": None}


def test_resume_from_a_missing_or_empty_folder_starts_at_zero(part1, tmp_path):
    for folder in (tmp_path / "nothing-here", tmp_path):
        trainer = make_trainer(part1, folder)
        before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
        assert trainer.resume() is False and trainer.epoch == 0
        assert all(torch.equal(v, trainer.model.state_dict()[k]) for k, v in before.items())


def test_latest_falls_back_to_the_highest_checkpoint(part1, tmp_path):
    from gnn_dist.checkpoints import latest_checkpoint

    trainer = make_trainer(part1, tmp_path, checkpoint_every=1)
    trainer.fit(3)
    (tmp_path / "latest").unlink()  # e.g. a crash between the checkpoint and the pointer
    assert latest_checkpoint(tmp_path) == tmp_path / "checkpoint-000003.pt"


def test_missing_and_corrupt_checkpoints_are_named(part1, tmp_path):
    from gnn_dist.checkpoints import CheckpointError, load_checkpoint

    trainer = make_trainer(part1, tmp_path)
    trainer.fit(1)
    good = tmp_path / "checkpoint-000001.pt"
    with pytest.raises(CheckpointError, match=r"checkpoint-000009\.pt: no such checkpoint file"):
        trainer.resume(tmp_path / "checkpoint-000009.pt")
    cut = tmp_path / "checkpoint-000005.pt"   # cut short, with the original's checksum file
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    (tmp_path / "checkpoint-000005.pt.sha256").write_bytes((tmp_path / "checkpoint-000001.pt.sha256").read_bytes())
    with pytest.raises(CheckpointError, match=r"checkpoint-000005\.pt: the checkpoint is \d+ bytes, \d+ were written: "
                                              r"truncated or overwritten"):
        trainer.resume(cut)
    flipped = bytearray(good.read_bytes())
    flipped[len(flipped) // 2] ^= 0x40   # one bit of a weight
    cut.write_bytes(bytes(flipped))
    with pytest.raises(CheckpointError, match=r"checkpoint-000005\.pt: the checkpoint's sha256 \w+\.\.\. is not the "
                                              r"\w+\.\.\. written with it: corrupt"):
        trainer.resume(cut)
    other = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(2)}, other)
    with pytest.raises(CheckpointError, match=r"other\.pt: has no checksum file other\.pt\.sha256"):
        load_checkpoint(other)
    from gnn_dist.checkpoints import parse_checkpoint

    with pytest.raises(CheckpointError, match=r"other\.pt: not a gnn-dist checkpoint"):
        parse_checkpoint(other.read_bytes(), other)
    state = load_checkpoint(good)
    state["version"] = 7
    torch.save(state, tmp_path / "v7.pt")
    with pytest.raises(CheckpointError, match=r"v7\.pt: checkpoint version 7 is not supported"):
        parse_checkpoint((tmp_path / "v7.pt").read_bytes(), tmp_path / "v7.pt")
    (tmp_path / "latest").write_text("checkpoint-000042.pt\n")
    with pytest.raises(CheckpointError, match=r"latest: names checkpoint-000042\.pt, which does not exist"):
        trainer.resume()
    assert trainer.epoch == 1  # a failed resume changes nothing


def test_resume_refuses_another_model_or_optimizer(part1, tmp_path):
    from gnn_dist.checkpoints import CheckpointError

    make_trainer(part1, tmp_path).fit(1)
    with pytest.raises(CheckpointError, match=r"another model: hidden_dim=8 \(this run: 16\)"):
        make_trainer(part1, tmp_path, hidden=16).resume()
    with pytest.raises(CheckpointError, match=r"optimizer='adam', this run uses optimizer='sgd'"):
        make_trainer(part1, tmp_path, optimizer="sgd").resume()


def test_resume_takes_this_runs_learning_rate(part1, tmp_path, caplog):
    make_trainer(part1, tmp_path).fit(1)
    trainer = make_trainer(part1, tmp_path, lr=0.001)
    with caplog.at_level("WARNING", logger="gnn_dist.trainer"):
        assert trainer.resume()
    assert all(g["lr"] == 0.001 for g in trainer.optimizer.param_groups)
    assert "the checkpoint has lr=0.05, continuing with lr=0.001" in caplog.text


def test_keep_checkpoints_deletes_the_oldest(part1, tmp_path):
    trainer = make_trainer(part1, tmp_path, checkpoint_every=1, checkpoint_keep=2)
    trainer.fit(5)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-000004.pt", "checkpoint-000004.pt.sha256",
                                                          "checkpoint-000005.pt", "checkpoint-000005.pt.sha256",
                                                          "latest"]
    with pytest.raises(ValueError, match=r"checkpoint_keep: 0 is not valid: expected an integer >= 1"):
        make_trainer(part1, tmp_path, checkpoint_keep=0)


def test_keep_checkpoints_leaves_the_later_ones_of_an_earlier_run(part1, tmp_path):
    """Resumed from epoch 2 of a run that went to 5: writing 3 prunes 1 only (4 and 5 stay)."""
    make_trainer(part1, tmp_path, checkpoint_every=1).fit(5)
    trainer = make_trainer(part1, tmp_path, checkpoint_every=1, checkpoint_keep=2)
    assert trainer.resume(tmp_path / "checkpoint-000002.pt")
    trainer.fit(1)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".sha256")) == [
        "checkpoint-000002.pt", "checkpoint-000003.pt", "checkpoint-000004.pt", "checkpoint-000005.pt", "latest"]
    assert (tmp_path / "latest").read_text().strip() == "checkpoint-000003.pt"


def test_prune_deletes_only_this_ranks_files(tmp_path):
    from gnn_dist.checkpoints import prune_checkpoints

    names = [f"checkpoint-00000{e}{suffix}.pt" for e in (1, 2, 3)
             for suffix in ("", ".rank-00000-of-00002", ".rank-00001-of-00002")]
    for name in names + ["latest", "notes.txt"]:
        (tmp_path / name).write_bytes(b"x")
    deleted = prune_checkpoints(tmp_path, {2, 3}, 3, rank=1)
    assert [p.name for p in deleted] == ["checkpoint-000001.rank-00001-of-00002.pt"]
    deleted = prune_checkpoints(tmp_path, {3}, 3, rank=0)
    assert sorted(p.name for p in deleted) == ["checkpoint-000001.pt", "checkpoint-000001.rank-00000-of-00002.pt",
                                               "checkpoint-000002.pt", "checkpoint-000002.rank-00000-of-00002.pt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["checkpoint-000002.rank-00001-of-00002.pt", "checkpoint-000003.pt", "checkpoint-000003.rank-00000-of-00002.pt",
         "checkpoint-000003.rank-00001-of-00002.pt", "latest", "notes.txt"])


class _RunsCode:
    """A pickled object whose loading would run code (writes a marker file)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_checkpoint_that_would_run_code_is_refused_before_anything_runs(part1, tmp_path):
    """A checkpoint with a pickled object (and a checksum file that matches it, so only the
    loader stands in the way) plus a ``latest`` naming it: resuming refuses it as not tensors and
    plain values, and the code never runs."""
    import hashlib

    from gnn_dist.checkpoints import CheckpointError

    trainer = make_trainer(part1, tmp_path)
    trainer.fit(1)
    marker = tmp_path / "pwned"
    evil = tmp_path / "checkpoint-000007.pt"
    torch.save({"format": "gnn-dist-checkpoint", "version": 2, "payload": _RunsCode(str(marker))}, evil)
    data = evil.read_bytes()
    (tmp_path / "checkpoint-000007.pt.sha256").write_text(f"{hashlib.sha256(data).hexdigest()}  {len(data)}  {evil.name}\n")
    (tmp_path / "latest").write_text(evil.name + "\n")
    with pytest.raises(CheckpointError, match=r"checkpoint-000007\.pt: not a readable checkpoint: it holds more than "
                                              r"tensors and plain values"):
        make_trainer(part1, tmp_path).resume()
    assert not marker.exists(), "loading the checkpoint ran its code"
