"""Parts sized to their devices: ``part_weights`` / ``--part-weights`` (partitioners.methods.targets).

With weights 2,1,1 part 0 targets half of the balance criterion and parts 1 and 2 a quarter
each; every part must end within the balance tolerance (imbalance 0.03) of its own target.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from partitioners import load_partition_meta
from partitioners.api import partition_graph
from gnn_dist_cli.command import EXIT_OK, EXIT_USAGE, main
from partitioners.format import verify_partition
from partitioners.methods import assign_parts, refine_volume
from partitioners.methods.random_parts import weighted_deal
from partitioners.methods.targets import check_part_weights, part_bounds
from partitioners.quality import partition_quality
from partitioners.synthetic import rmat_graph

WEIGHTS = (2, 1, 1)
TOL = 0.03


@pytest.fixture(scope="module")
def graph():
    return rmat_graph(1 << 11, 8 << 11, feature_dim=4, seed=0)


def assert_sized(graph, assignment, criterion: str = "nodes") -> None:
    """Every part within the tolerance of its share of the criterion (nodes: 1 each; edges: the
    in-degree, docs/cli.md's --balance), 2:1:1: the balance bound caps each part at
    ``max((1 + imbalance) * target, ceil(target))``, so the lightest is at least what the
    others leave."""
    w = (np.ones(graph.num_nodes, np.int64) if criterion == "nodes"
         else np.diff(graph.indptr).astype(np.int64))
    load = np.bincount(assignment, weights=w, minlength=len(WEIGHTS))
    target = load.sum() * np.array(WEIGHTS) / sum(WEIGHTS)
    bound = part_bounds(w[None], len(WEIGHTS), TOL, check_part_weights(WEIGHTS, 3))[0]
    assert np.all(load <= bound + 1e-9), (load, bound)
    assert np.all(load >= target - (bound - target).sum()), (load, target)


@pytest.mark.parametrize("method", ["metis", "ldg", "fennel", "random"])
def test_methods_size_parts_to_their_weights(graph, method):
    a = assign_parts(graph, 3, method, seed=1, part_weights=WEIGHTS)
    assert_sized(graph, a, "nodes")
    assert np.bincount(a, minlength=3)[0] > 1.8 * np.bincount(a, minlength=3)[1:].max()


@pytest.mark.parametrize("method", ["metis", "ldg", "random"])
def test_edge_balance_is_weighted_too(graph, method):
    a = assign_parts(graph, 3, method, seed=0, balance=("edges",), part_weights=WEIGHTS)
    assert_sized(graph, a, "edges")


def test_refine_keeps_the_weighted_bounds_and_lowers_the_volume(graph):
    a = assign_parts(graph, 3, "ldg", seed=0, part_weights=WEIGHTS)
    r = refine_volume(graph, a, 3, part_weights=WEIGHTS)
    assert_sized(graph, r, "nodes")
    assert partition_quality(graph, r, 3)["comm_volume"] < partition_quality(graph, a, 3)["comm_volume"]


def test_multi_criteria_metis_rebalances_to_the_weighted_bounds(graph):
    g = graph
    g.train_mask = np.random.default_rng(0).random(g.num_nodes) < 0.2
    try:
        a = assign_parts(g, 3, "metis", balance=("nodes", "train"), part_weights=WEIGHTS)
        q = partition_quality(g, a, 3, part_weights=WEIGHTS)
    finally:
        g.train_mask = None
    assert q["node_balance"] <= 1 + TOL + 1e-9 and q["train_balance"] <= 1 + TOL + 0.01
    assert q["part_weights"] == [0.5, 0.25, 0.25]


def test_weighted_deal_gives_each_part_its_share():
    deal = weighted_deal(1001, (0.5, 0.3, 0.2))
    assert np.bincount(deal).tolist() == [501, 300, 200]
    assert np.abs(np.cumsum(deal == 0)[99::100] / np.arange(100, 1001, 100) - 0.5).max() < 0.02


def test_equal_weights_change_nothing(graph):
    for method in ("metis", "ldg", "random"):
        plain = assign_parts(graph, 3, method, seed=2)
        with_none = assign_parts(graph, 3, method, seed=2, part_weights=None)
        assert np.array_equal(plain, with_none)
    a = assign_parts(graph, 3, "metis", seed=2)
    assert np.array_equal(assign_parts(graph, 3, "metis", seed=2, part_weights=(1, 1, 1)), a)


@pytest.mark.parametrize("bad, pattern", [
    ((2, 1), r"part_weights has 2 value\(s\) for 3 parts"),
    ((2, 0, 1), r"part_weights: 0 is not a positive number"),
    ((2, -1, 1), r"part_weights: -1 is not a positive number"),
    (("2", "x", "1"), r"part_weights: 'x' is not a number"),
    ((2, float("nan"), 1), r"part_weights: nan is not a positive number"),
])
def test_api_refuses_bad_weights(graph, tmp_path, bad, pattern):
    with pytest.raises(ValueError, match=pattern):
        partition_graph(graph, 3, "random", tmp_path / "out", part_weights=bad)
    assert not (tmp_path / "out").exists()


def test_a_method_registered_without_the_option_is_refused(graph, clean_registry):
    from partitioners.methods import register_method

    register_method("zeros", lambda g, p, *, seed, balance: np.zeros(g.num_nodes, np.int32), options=())
    with pytest.raises(ValueError, match=r"partition method 'zeros' does not take part_weights"):
        assign_parts(graph, 3, "zeros", part_weights=WEIGHTS)


def test_folder_records_the_weights_and_verifies(graph, tmp_path):
    report = partition_graph(graph, 3, "metis", tmp_path / "w", part_weights=WEIGHTS)
    meta = load_partition_meta(tmp_path / "w")
    assert meta.method_params == {"balance": ["nodes"], "refine": False, "part_weights": [0.5, 0.25, 0.25]}
    assert meta.part_weights == (0.5, 0.25, 0.25)
    assert meta.quality["part_weights"] == [0.5, 0.25, 0.25] and report["part_weights"] == [0.5, 0.25, 0.25]
    sizes = [pm.num_inner for pm in meta.parts]
    assert report["node_balance"] == pytest.approx(max(s / (graph.num_nodes * f)
                                                       for s, f in zip(sizes, meta.part_weights)))
    assert verify_partition(tmp_path / "w") == []


def test_a_folder_without_weights_reads_as_equal_parts_and_records_nothing_new(graph, tmp_path):
    partition_graph(graph, 4, "random", tmp_path / "e")
    meta = load_partition_meta(tmp_path / "e")
    assert meta.method_params == {"balance": ["nodes"], "refine": False}
    assert meta.part_weights == (0.25,) * 4 and "part_weights" not in meta.quality


def cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("value, pattern", [
    ("2,1", r"--part-weights 2,1 gives 2 weight\(s\) for --parts 3; give one per part"),
    ("2,x,1", r"argument --part-weights: 'x' in '2,x,1' is not a number"),
    ("2,0,1", r"argument --part-weights: '0' in '2,0,1' is not a positive number"),
    ("2,-1,1", r"argument --part-weights: '-1' in '2,-1,1' is not a positive number"),
    ("2,,1", r"argument --part-weights: '' in '2,,1' is not a number"),
])
def test_cli_refuses_bad_weights_in_one_line(capsys, tmp_path, value, pattern):
    code, out, err = cli(capsys, "partition", "--dataset", "sbm-tiny", "--parts", 3,
                         f"--part-weights={value}", "--out", tmp_path / "o", "--no-progress")
    assert code == EXIT_USAGE and out == ""
    assert len(err.strip().splitlines()) == 1 and re.search(pattern, err), err
    assert not (tmp_path / "o").exists()


def test_cli_partitions_with_weights(capsys, tmp_path):
    code, out, err = cli(capsys, "partition", "--dataset", "sbm-tiny", "--parts", 3, "--part-weights", "2,1,1",
                         "--method", "fennel", "--out", tmp_path / "o", "--no-progress", "--json")
    assert code == EXIT_OK, err
    report = json.loads(out)
    assert report["method_params"]["part_weights"] == [0.5, 0.25, 0.25]
    sizes = report["part_sizes"]
    assert 0.5 * (1 - 2 * TOL) <= sizes[0] / sum(sizes) <= 0.5 * (1 + TOL)
    assert report["node_balance"] <= 1 + TOL + 1e-9
    assert "part weights (target fractions; balances are against them): 0.5 0.25 0.25" in err
    assert verify_partition(tmp_path / "o") == []


def test_cli_device_memory_sizes_the_parts_like_the_weights(capsys, tmp_path):
    """``--device-memory 40G,20G,20G`` cuts what ``--part-weights 2,1,1`` cuts: the same folder."""
    folders = {}
    for flag, value in (("--device-memory", "40G,20GB,20000MB"), ("--part-weights", "2,1,1")):
        out = tmp_path / flag.strip("-")
        code, _, err = cli(capsys, "partition", "--dataset", "sbm-tiny", "--parts", 3, flag, value,
                           "--out", out, "--no-progress")
        assert code == EXIT_OK, err
        folders[flag] = json.loads((out / "partition.json").read_text())
    assert folders["--device-memory"]["method_params"]["part_weights"] == [0.5, 0.25, 0.25]
    assert folders["--device-memory"]["parts"] == folders["--part-weights"]["parts"]
    # the sizes themselves are recorded for the planner; weights alone record none
    assert folders["--device-memory"]["method_params"]["device_memory"] == [40 * 10**9, 20 * 10**9, 20000 * 10**6]
    assert "device_memory" not in folders["--part-weights"]["method_params"]
    assert load_partition_meta(tmp_path / "device-memory").device_memory == (40 * 10**9, 20 * 10**9, 20000 * 10**6)
    assert load_partition_meta(tmp_path / "part-weights").device_memory is None


@pytest.mark.parametrize("bad", [[1, 2], [1, 0, 2], [1, True, 2], [1.5, 2, 3], "40G"])
def test_a_hostile_device_memory_record_is_one_line(capsys, tmp_path, bad):
    out = tmp_path / "o"
    assert cli(capsys, "partition", "--dataset", "sbm-tiny", "--parts", 3, "--out", out, "--no-progress")[0] == EXIT_OK
    meta = json.loads((out / "partition.json").read_text())
    meta["method_params"]["device_memory"] = bad
    (out / "partition.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"field method_params.device_memory must list num_parts = 3 positive byte"):
        load_partition_meta(out)


@pytest.mark.parametrize("argv, pattern", [
    (["--parts", 3, "--device-memory", "40G,20G"], r"--device-memory gives 2 size\(s\) for --parts 3; give one per part"),
    (["--parts", 3, "--device-memory", "40G,2x,20G"], r"argument --device-memory: '2x' is not a memory size; .*"
                                                       r"\(in '40G,2x,20G': one size per rank"),
    (["--parts", 2, "--device-memory", "4G,2G", "--part-weights", "2,1"],
     r"--part-weights and --device-memory exclude each other"),
    (["--parts", "2,4", "--device-memory", "4G,2G"], r"--device-memory gives one size per part of one cut"),
])
def test_cli_refuses_bad_device_memory_in_one_line(capsys, tmp_path, argv, pattern):
    code, out, err = cli(capsys, "partition", "--dataset", "sbm-tiny", *argv, "--out", tmp_path / "o", "--no-progress")
    assert code == EXIT_USAGE and out == ""
    assert len(err.strip().splitlines()) == 1 and re.search(pattern, err), err
    assert not (tmp_path / "o").exists()
