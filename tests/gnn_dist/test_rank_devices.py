"""A cluster whose devices differ: ``--max-memory 40G,20G,20G`` checks each rank against its own
limit (the guard, before the launch and at each rank's start) and ``gnn-dist plan
--device-memory 40G,20G,20G`` fits every rank to its own device; a refusal names the rank."""

from __future__ import annotations

import dataclasses
import json
import sys

import numpy as np
import pytest

from partitioners.format.writer import write_partition
from train_helpers import make_graph, run_tree


@pytest.fixture(scope="module")
def parts(tmp_path_factory) -> str:
    graph = make_graph(80, seed=1)
    out = tmp_path_factory.mktemp("ranks") / "p2"
    assignment = (np.arange(graph.num_nodes) >= 50).astype(np.int32)   # part 0 holds 50 nodes, part 1 30
    write_partition(graph, assignment, 2, out, method="test", method_params={}, seed=0)
    return str(out)


def _config(parts: str, *flags: str):
    from gnn_dist.config_cli import parse_run_config

    return parse_run_config(["--data", parts, *flags])[0]


def _estimates(parts: str, *flags: str) -> list[int]:
    from partitioners.format import load_partition_meta

    from gnn_dist.memory_plan.guard import estimate_rank_memory

    meta = load_partition_meta(parts)
    return [estimate_rank_memory(meta, r, _config(parts, *flags)).total for r in range(2)]


def test_each_rank_is_checked_against_its_own_limit(parts):
    from partitioners.format import load_partition_meta
    from partitioners.memory import MemoryLimitError

    from gnn_dist.memory_plan.guard import check_training_memory

    meta = load_partition_meta(parts)
    e0, e1 = _estimates(parts)
    assert e0 > e1, "part 0 is the larger"
    fits = _config(parts, "--max-memory", f"{e0},{e1}")   # each rank's estimate exactly
    assert check_training_memory(meta, fits, [0, 1], local_ranks=2) == e0 + e1
    # one size for the machine: e0 + e1 shared by two ranks would be enough too; per rank, swapped, it is not
    swapped = _config(parts, "--max-memory", f"{e1},{e0}")
    with pytest.raises(MemoryLimitError, match=r"rank 0 \(part 0\) needs ~.* \(runtime 550 MiB, .*\), more than "
                                               rf"its own --max-memory .* \(size 1 of {e1},{e0}\); give its part less"):
        check_training_memory(meta, swapped, [0, 1], local_ranks=2)
    assert check_training_memory(meta, swapped, [1], local_ranks=2) == e1, "rank 1's own check at its start"
    with pytest.raises(MemoryLimitError, match=r"rank 1 \(part 1\) needs .* \(size 2 of"):
        check_training_memory(meta, _config(parts, "--max-memory", f"{e0},{e1 - 1}"), [1], local_ranks=2)
    with pytest.raises(MemoryLimitError, match=r"--max-memory 8G,8G,8G gives 3 sizes for the 2 ranks of .*; give "
                                               r"one size per rank"):
        check_training_memory(meta, _config(parts, "--max-memory", "8G,8G,8G"), [0], local_ranks=2)


def test_a_layer_parallel_run_lists_a_size_per_world_rank(parts):
    from partitioners.format import load_partition_meta
    from partitioners.memory import MemoryLimitError

    from gnn_dist.memory_plan.guard import check_training_memory

    meta = load_partition_meta(parts)
    flags = ("--parallel", "hybrid", "--stages", "2", "--model", "gcnii", "--layers", "4")
    assert check_training_memory(meta, _config(parts, *flags, "--max-memory", "8G,8G,8G,8G"), [0, 1, 2, 3],
                                 local_ranks=4) > 0
    with pytest.raises(MemoryLimitError, match=r"rank 3 \(part 1, stage 1\) needs .* \(size 4 of 8G,8G,8G,500MB\)"):
        check_training_memory(meta, _config(parts, *flags, "--max-memory", "8G,8G,8G,500MB"), [0, 1, 2, 3],
                              local_ranks=4)


def test_gnn_dist_train_names_the_rank_before_any_starts(parts):
    res = run_tree([sys.executable, "-m", "gnn_dist_cli", "train", "--data", parts, "--max-memory", "8G,200MB"],
                   timeout=120)
    lines = [line for line in res.stdout.splitlines() if line.strip()]
    assert res.returncode == 2 and len(lines) == 1, res.stdout[-3000:]
    assert "rank 1 (part 1) needs" in lines[0] and "its own --max-memory 191 MiB (size 2 of 8G,200MB)" in lines[0]


def test_the_search_fits_every_rank_to_its_own_device():
    from gnn_dist.memory_plan import Workload, plan_rank, recommend, sizes_from_spec

    big = sizes_from_spec(nodes=2_000_000, edges=30_000_000, feature_dim=128, num_classes=40, num_parts=2)
    small = dataclasses.replace(big, part_id=1, inner=big.inner // 2, halo=big.halo // 2, edges=big.edges // 2)
    base = Workload(model="gcn", hidden=256, layers=3, device="cuda")
    t0, t1 = (plan_rank(s, base).total for s in (big, small))
    assert t0 > t1
    own = recommend([big, small], base, (t0, t1))
    assert own.fits and own.name == "as configured" and own.largest.part_id == 0 and own.limit == t0
    swapped = recommend([big, small], base, (t1, t0))   # part 0 on the small device: it binds
    assert swapped.name != "as configured" and swapped.largest.part_id == 0 and swapped.limit == t1
    assert recommend([big, small], base, t0).name == "as configured", "one size for both: the largest fits"
    with pytest.raises(ValueError, match="3 device sizes for 2 ranks"):
        recommend([big, small], base, (t0, t0, t0))


def _plan(capsys, *argv):
    from gnn_dist_cli.command import main

    code = main(["plan", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_gnn_dist_plan_checks_each_rank_against_its_own_device(capsys, parts):
    e0, e1 = _estimates(parts)
    code, _, err = _plan(capsys, "--data", parts, "--device", "cpu", "--device-memory", f"{e0},{e1}")
    assert code == 0 and "fits each rank's own device (" in err and "tightest: rank" in err, err
    code, out, err = _plan(capsys, "--data", parts, "--device", "cpu", "--device-memory", f"{e1 // 2},{e0}", "--json")
    rec = json.loads(out)["recommendation"]
    assert code == 0 and rec["fits"] is False and rec["binding"]["part"] == 0 and rec["device_memory"] == [e1 // 2, e0]
    code, _, err = _plan(capsys, "--data", parts, "--device", "cpu", "--device-memory", f"{e1 // 2},{e0}")
    assert "nothing fits each rank's own device" in err and "on rank 0 (part 0, device" in err, err


def test_gnn_dist_plan_reads_the_devices_the_parts_were_sized_for(capsys, tmp_path):
    """A folder cut by ``partition --device-memory`` records the sizes; ``plan --data`` checks each
    rank against its own without the flag (the flag still overrides them)."""
    from gnn_dist_cli.command import main

    out = tmp_path / "p2"
    assert main(["partition", "--dataset", "sbm-tiny", "--parts", "2", "--device-memory", "4G,2G", "--out", str(out),
                 "--no-progress"]) == 0
    capsys.readouterr()
    code, out_json, err = _plan(capsys, "--data", str(out), "--device", "cpu", "--json")
    rec = json.loads(out_json)["recommendation"]
    assert code == 0 and rec["device_memory"] == [4 * 10**9, 2 * 10**9], rec
    assert "recorded in" in err and "by partition --device-memory" in err, err
    code, out_json, _ = _plan(capsys, "--data", str(out), "--device", "cpu", "--device-memory", "8G", "--json")
    assert code == 0 and json.loads(out_json)["recommendation"]["device_memory"] == 8 * 10**9


@pytest.mark.parametrize("argv, message", [
    (["--device-memory", "8G,8G,8G"], "plan: --device-memory 8G,8G,8G gives 3 sizes for the 2 ranks of"),
    (["--device-memory", "8G,lots"], "--device-memory: 'lots' is not a memory size"),
])
def test_gnn_dist_plan_refuses_a_wrong_device_list_in_one_line(capsys, parts, argv, message):
    code, _, err = _plan(capsys, "--data", parts, *argv)
    assert code == 2 and message in err and len([x for x in err.splitlines() if "error" in x]) == 1, err


def test_a_device_per_rank_needs_a_folder(capsys):
    code, _, err = _plan(capsys, "--nodes", "10", "--edges", "5", "--feature-dim", "3", "--classes", "2", "--parts",
                         "2", "--device-memory", "8G,4G")
    assert code == 2 and "gives a device per rank, which needs --data DIR" in err, err
