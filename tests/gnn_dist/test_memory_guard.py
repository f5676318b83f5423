"""The training memory guard: the estimate from the metadata, a refusal (one line, exit 2)
before any rank starts when it exceeds --max-memory, and nothing refused by default."""

from __future__ import annotations


import numpy as np
import pytest

from partitioners.format.writer import write_partition
from train_helpers import GNN_DIST, make_graph, run_tree


@pytest.fixture(scope="module")
def parts(tmp_path_factory) -> str:
    graph = make_graph(80, seed=1)
    out = tmp_path_factory.mktemp("mem") / "p2"
    write_partition(graph, np.random.default_rng(0).integers(0, 2, graph.num_nodes).astype(np.int32), 2, out,
                    method="test", method_params={}, seed=0)
    return str(out)


def _config(parts: str, *flags: str):
    from gnn_dist.config_cli import parse_run_config

    return parse_run_config(["--data", parts, *flags])[0]


def test_the_estimate_grows_with_the_model_and_the_storage(parts):
    from partitioners.format import load_partition_meta

    from gnn_dist.memory_plan.guard import RUNTIME_BYTES, estimate_rank_memory

    meta = load_partition_meta(parts)
    small = estimate_rank_memory(meta, 0, _config(parts, "--hidden", "8"))
    wide = estimate_rank_memory(meta, 0, _config(parts, "--hidden", "512", "--layers", "4"))
    gat = estimate_rank_memory(meta, 0, _config(parts, "--hidden", "512", "--layers", "4", "--model", "gat"))
    host = estimate_rank_memory(meta, 0, _config(parts, "--hidden", "8", "--feature-storage", "host"))
    assert small.parts["runtime"] == RUNTIME_BYTES and small.total > RUNTIME_BYTES
    assert wide.parts["activations"] > 30 * small.parts["activations"] and wide.parts["optimizer"] > 0
    assert gat.parts["activations"] > wide.parts["activations"]
    rows = meta.parts[0].num_inner + meta.parts[0].num_halo
    # host storage adds the host copy of every row; both keep the mapped pages of features.npy
    assert host.parts["features"] - small.parts["features"] == rows * meta.feature_dim * 4
    best = estimate_rank_memory(meta, 0, _config(parts, "--hidden", "512", "--layers", "4", "--select", "best-val"))
    assert best.parts["optimizer"] * 16 == wide.parts["optimizer"] * 20, "best-val keeps a copy of the weights"
    heads = estimate_rank_memory(meta, 0, _config(parts, "--hidden", "512", "--layers", "4", "--model", "gat",
                                                  "--out-heads", "4"))
    assert heads.parts["activations"] > gat.parts["activations"], "the output layer's heads"


def test_a_tiny_limit_is_refused_naming_the_estimate(parts):
    from partitioners.format import load_partition_meta
    from partitioners.memory import MemoryLimitError

    from gnn_dist.memory_plan.guard import check_training_memory

    meta = load_partition_meta(parts)
    with pytest.raises(MemoryLimitError, match=r"needs ~\d+(\.\d)? [MG]iB for 2 rank\(s\) on this machine \(the largest, "
                                               r"part \d: ~.* MiB \(runtime 550 MiB, block .*\)\), more than "
                                               r"--max-memory 100MB \(95 MiB\); pass a larger --max-memory"):
        check_training_memory(meta, _config(parts, "--max-memory", "100MB"), [0, 1], local_ranks=2)
    with pytest.raises(MemoryLimitError, match=r"more than their 1/2 share of --max-memory 1GB"):
        check_training_memory(meta, _config(parts, "--max-memory", "1GB", "--hidden", "4096", "--layers", "8"), [1],
                              local_ranks=2)
    assert check_training_memory(meta, _config(parts), [0, 1], local_ranks=2) > 0   # the default: available memory


def test_gnn_dist_train_refuses_before_any_rank_starts(parts):
    res = run_tree([*GNN_DIST, "train", "--data", parts, "--max-memory", "200MB"], timeout=120)
    assert res.returncode == 2, res.stdout[-3000:]
    lines = [line for line in res.stdout.splitlines() if line.strip()]
    assert len(lines) == 1 and "more than --max-memory 200MB" in lines[0], lines
    res = run_tree([*GNN_DIST, "train", "--data", parts, "--max-memory", "lots"], timeout=120)
    assert res.returncode == 2 and "--max-memory: 'lots' is not a memory size" in res.stdout, res.stdout[-2000:]


def test_a_layer_parallel_run_is_estimated_rank_by_rank(parts):
    from partitioners.format import load_partition_meta
    from partitioners.memory import MemoryLimitError

    from gnn_dist.memory_plan.guard import check_training_memory, estimate_rank_memory, world_ranks
    from gnn_dist.memory_plan import plan_from_meta

    meta = load_partition_meta(parts)
    config = _config(parts, "--parallel", "hybrid", "--stages", "2", "--model", "gcnii", "--layers", "4",
                     "--max-memory", "100MB")
    assert world_ranks(meta, config) == [0, 1, 2, 3] and world_ranks(meta, _config(parts)) == [0, 1]
    got = [estimate_rank_memory(meta, r, config) for r in world_ranks(meta, config)]
    assert [(e.part_id, e.stage) for e in got] == [(0, 0), (1, 0), (0, 1), (1, 1)]    # r = s P + g
    assert [e.total for e in got] == [r.total for r in plan_from_meta(meta, config).ranks]
    assert all(e.parts["stage"] > 0 for e in got) and estimate_rank_memory(meta, 0, _config(parts)).stage is None
    with pytest.raises(MemoryLimitError, match=r"for 4 rank\(s\) on this machine \(the largest, part \d, stage \d: "):
        check_training_memory(meta, config, world_ranks(meta, config), local_ranks=4)
