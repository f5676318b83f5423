"""HGT and hetero-sage run from the CLI on a typed partition (mag-tiny, 2 parts): the pre-launch
checks (the memory plan of their layers, HGT's hidden width a multiple of its heads) and a
training run each, under a schedule other than the exact ones' tests."""

from __future__ import annotations

import math

import pytest

from gnn_dist.train import main
from mp_utils import run_ranks
from test_rgcn_runs import _one_line, losses
from train_helpers import run_train_jobs

COMMON = ["--embedding-dim", "8", "--hidden", "8", "--lr", "0.01", "--dropout", "0.5", "--seed", "3",
          "--log-every", "0"]


@pytest.fixture(scope="module")
def mag2(tmp_path_factory):
    from partitioners.api import partition_graph
    from partitioners.catalog import load_dataset

    path = tmp_path_factory.mktemp("hetero_runs") / "mag2"
    partition_graph(load_dataset("mag-tiny"), 2, "metis", str(path), seed=0)
    return path


def test_the_checks(mag2, capsys):
    assert main(["--data", str(mag2), "--model", "hgt", "--heads", "2", *COMMON, "--validate"]) == 0
    assert main(["--data", str(mag2), "--model", "hetero-sage", *COMMON, "--validate"]) == 0
    capsys.readouterr()
    _one_line(capsys, main(["--data", str(mag2), "--model", "hgt", "--heads", "3", *COMMON, "--validate"]),
              r"--hidden: 8 is the width of an hgt layer, split among its heads: it must be a multiple of heads = 3")
    _one_line(capsys, main(["--data", str(mag2), "--model", "hetero-sage", "--heads", "2", *COMMON, "--validate"]),
              r"--heads: 2 applies to models gat, hgt, not 'hetero-sage'")


def test_both_train_from_the_cli(mag2, tmp_path):
    jobs = [["--data", str(mag2), "--model", "hgt", "--heads", "2", *COMMON, "--epochs", "6", "--pipeline", "stale",
             "--metrics", str(tmp_path / "hgt.jsonl")],
            ["--data", str(mag2), "--model", "hetero-sage", *COMMON, "--epochs", "6", "--pipeline", "overlap",
             "--metrics", str(tmp_path / "sage.jsonl")]]
    assert run_ranks(run_train_jobs, 2, jobs, timeout=240) == [[None, None]] * 2
    for name in ("hgt", "sage"):
        got = losses(tmp_path / f"{name}.jsonl")
        assert len(got) == 6 and all(math.isfinite(v) for v in got) and got[-1] < got[0], (name, got)
