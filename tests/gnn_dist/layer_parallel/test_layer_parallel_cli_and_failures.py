"""``gnn_dist.train --parallel layer`` end to end: per-stage figures in the metrics file, the
saved model is the full model; a stalled neighbouring stage ends the survivor with one line
naming the transfer."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lp_utils import make_graph, write
from mp_utils import launch_ranks
from train_helpers import STALL_TIMEOUT_S, free_port, launch_env, stalled_job_message, train_until_rank_one_stalls

pytestmark = pytest.mark.filterwarnings("ignore:Unable to enable fault handler:UserWarning")


def argv(data: str, *extra: str) -> list[str]:
    return ["--data", data, "--model", "gcnii", "--layers", "4", "--hidden", "8", "--lr", "0.05", "--log-every", "0",
            "--parallel", "layer", "--stages", "2", "--chunks", "2", *extra]


def train_main(rank: int, world_size: int, data: str, metrics: str, model: str, port: int) -> int:
    from gnn_dist.train import main

    launch_env(rank, world_size, port)
    return main(argv(data, "--epochs", "3", "--metrics", metrics, "--save-model", model))


def test_train_main_writes_stage_figures_and_the_full_model(tmp_path):
    import torch

    from gnn_dist.model_file import load_model_file

    data = write(make_graph(), 1, tmp_path / "parts")
    metrics, model = str(tmp_path / "m.jsonl"), str(tmp_path / "model.pt")
    outcomes = launch_ranks(train_main, 2, data, metrics, model, free_port(), init_group=False, timeout=180)
    assert [o.exitcode for o in outcomes] == [0, 0], [o.describe() for o in outcomes]
    records = [json.loads(line) for line in Path(metrics).read_text().splitlines()][1:]
    assert [r["chunks"] for r in records] == [1, 2, 2]
    for r in records:
        assert [s["stage"] for s in r["stages"]] == [0, 1]
        assert all(s["bytes_sent"] > 0 and s["compute_s"] > 0 and s["bubble_s"] >= 0 for s in r["stages"])
        assert r["stage_bytes"] > 0 and r["halo_bytes"] >= r["stage_bytes"]
    state = load_model_file(model).state_dict
    torch.manual_seed(0)   # the initial weights (--seed 0): stage 1's layers and head must have trained
    from gnn_dist.models import build_model
    init = build_model("gcnii", in_dim=6, hidden_dim=8, out_dim=3, num_layers=4).state_dict()
    for name in ("convs.0.weight1", "convs.3.weight1", "lin_out.weight", "lin_in.weight"):
        assert not torch.equal(state[name], init[name]), name


def train_until_peer_stalls(rank: int, world_size: int, data: str, metrics: str, port: int) -> None:
    train_until_rank_one_stalls(rank, world_size, port, metrics,
                                argv(data, "--epochs", "1000000", "--metrics", metrics, "--timeout",
                                     str(STALL_TIMEOUT_S)))


def test_a_stalled_stage_is_named_with_the_transfer(tmp_path):
    data = write(make_graph(), 1, tmp_path / "parts")
    metrics = str(tmp_path / "metrics.jsonl")
    outcomes = launch_ranks(train_until_peer_stalls, 2, data, metrics, free_port(), init_group=False, timeout=120,
                            grace=5)
    message = stalled_job_message(outcomes)
    assert any(name in message for name in ("stage-to-stage", "all-reduce", "gather of", "broadcast of")), message


def broadcast_while_the_peer_waits_elsewhere(rank: int, world_size: int, done: str) -> float:
    """Both ranks build the stage groups of a 2-stage layer run on a group whose timeout is 3 s;
    rank 0 broadcasts on the pipeline group, rank 1 never joins it and waits (at most 50 s) for
    rank 0 to write ``done``. Returns how long rank 0 waited before the broadcast failed."""
    import time

    import torch
    import torch.distributed as dist

    from gnn_dist.distributed import default_group_timeout
    from gnn_dist.layer_parallel.layout import build_groups, stage_layout

    groups = build_groups(stage_layout("layer", 2, world_size, rank, 1, 4))
    assert default_group_timeout().total_seconds() == 3.0
    if rank == 1:
        deadline = time.monotonic() + 50
        while not os.path.exists(done) and time.monotonic() < deadline:
            time.sleep(0.05)
        return 0.0
    t0 = time.monotonic()
    try:
        with pytest.raises(RuntimeError):
            dist.broadcast(torch.zeros(4), src=1, group=groups.pipeline)
        return time.monotonic() - t0
    finally:
        Path(done).touch()


def test_the_stage_groups_time_out_after_the_jobs_timeout(tmp_path):
    """torch gives a subgroup made without ``timeout=`` its own default (30 minutes on gloo), not
    the default group's: the stage and pipeline groups must carry the job's timeout, so a stalled
    stage ends the survivor after ``--timeout`` (a survivor once waited in the logits' broadcast
    until the harness killed it)."""
    outcomes = launch_ranks(broadcast_while_the_peer_waits_elsewhere, 2, str(tmp_path / "done"), timeout=90,
                            grace=60, pg_timeout=3)
    assert all(o.ok for o in outcomes), [o.describe() for o in outcomes]
    assert 2.5 <= outcomes[0].result < 45, outcomes[0].result
