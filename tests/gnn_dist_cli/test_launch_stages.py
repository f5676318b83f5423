"""`gnn-dist train` launches parts x stages ranks: the stages come from the flags, or from a
`--config` file's `[trainer.parallel]` table (flags override it)."""

from __future__ import annotations

import pytest

from gnn_dist_cli.launch_verbs import _stages


def test_graph_parallel_runs_one_stage():
    assert _stages([]) == 1
    assert _stages(["--stages", "4"]) == 1            # --stages without layer/hybrid: graph parallel
    assert _stages(["--parallel", "graph", "--stages", "4"]) == 1


@pytest.mark.parametrize("rest", [["--parallel", "layer", "--stages", "4"], ["--parallel=hybrid", "--stages=4"]])
def test_the_flags_give_the_stages(rest):
    assert _stages(rest) == 4


def test_a_config_file_gives_the_stages_and_flags_override_it(tmp_path):
    run = tmp_path / "run.toml"
    run.write_text('[trainer.parallel]\nparallel = "layer"\nstages = 2\n')
    assert _stages(["--config", str(run)]) == 2
    assert _stages([f"--config={run}", "--stages", "4"]) == 4
    assert _stages(["--config", str(run), "--parallel", "graph"]) == 1


@pytest.mark.parametrize("text", ["not toml [", '[trainer]\nparallel = "layer"\n', '[trainer.parallel]\nstages = "x"\n'])
def test_a_file_it_cannot_read_leaves_one_stage(tmp_path, text):
    run = tmp_path / "run.toml"
    run.write_text(text)
    assert _stages(["--config", str(run)]) == 1     # gnn_dist.train's own parser names the problem
    assert _stages(["--config", str(tmp_path / "missing.toml")]) == 1
