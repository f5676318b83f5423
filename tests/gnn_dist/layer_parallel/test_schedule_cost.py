"""The schedule cost model (``gnn_dist/memory_plan/schedule_cost.py``, ``gnn-dist plan
--schedules``): its formulas on a partition whose halo rows can be counted by hand, its bytes
against what the layer-parallel trainer sends, and against the recorded benchmark figures."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from lp_utils import LAYERS, make_graph, train_layer, write
from mp_utils import run_ranks
from partitioners import Graph
from partitioners.format.writer import write_partition

from gnn_dist.memory_plan import sizes_from_meta
from gnn_dist.memory_plan.schedule_cost import (ScheduleGraph, ScheduleModel, recommend_schedule,
                                                schedule_costs, shared_parameters)
from partitioners.format import load_partition_meta

RESULTS = Path(__file__).resolve().parents[3] / "benchmarks" / "results"


def _path_folder(tmp_path) -> str:
    """The path 0-1-2-3-4-5 cut in the middle, {0, 1, 2} | {3, 4, 5}: one halo row per part."""
    src, dst = np.arange(5), np.arange(1, 6)
    graph = Graph.from_edges(np.concatenate([src, dst]), np.concatenate([dst, src]), 6,
                             features=np.ones((6, 2), np.float32), labels=np.zeros(6, np.int64), num_classes=2)
    write_partition(graph, np.array([0, 0, 0, 1, 1, 1], np.int32), 2, tmp_path / "path", method="test",
                    method_params={}, seed=0)
    return str(tmp_path / "path")


def test_the_formulas_on_a_partition_counted_by_hand(tmp_path):
    sizes = sizes_from_meta(load_partition_meta(_path_folder(tmp_path)))
    assert [(s.inner, s.halo, s.send) for s in sizes] == [(3, 1, 1), (3, 1, 1)]
    graph = ScheduleGraph(nodes=6, edges=sum(s.edges for s in sizes), halo={2: 2})
    model = ScheduleModel(layers=4, hidden=3, params=100, shared_params=10)
    graph_sync, layer = schedule_costs(graph, model, 2, chunks=3)
    # graph: 4 layers x (1 row sent + 1 gradient back) per part x 2 parts x 3 floats x 4 bytes; 2 ranks x 100 weights
    assert (graph_sync.halo_bytes, graph_sync.stage_bytes, graph_sync.allreduce_bytes) == (4 * 4 * 3 * 4, 0, 800)
    # layer S=2: one boundary, 6 rows forward and 6 gradients back; only the 10 shared weights summed, on 2 ranks
    assert (layer.halo_bytes, layer.stage_bytes, layer.allreduce_bytes) == (0, 2 * 6 * 3 * 4, 80)
    assert layer.bubble == pytest.approx(1 / 4) and layer.flags[-2:] == ["--chunks", "3"]
    # 4 ranks: hybrid 2 x 2 keeps the 2-part halo (2 rows) in its 4 layers; layer S=4 three boundaries
    names = {c.name: c for c in schedule_costs(graph, model, 4)}
    assert sorted(names) == ["graph sync P=4", "hybrid S=2 G=2", "layer S=4"]
    hybrid = names["hybrid S=2 G=2"]
    assert (hybrid.halo_bytes, hybrid.stage_bytes, hybrid.allreduce_bytes) == (4 * 4 * 3 * 4, 2 * 6 * 3 * 4,
                                                                              2 * 4 * 90 + 4 * 4 * 10)
    assert names["layer S=4"].stage_bytes == 3 * 2 * 6 * 3 * 4
    assert names["graph sync P=4"].estimated_halo and not hybrid.estimated_halo
    # 3 layers: no stage count of 2 or 4 divides them
    assert [c.name for c in schedule_costs(graph, ScheduleModel(3, 3, 100), 4)] == ["graph sync P=4"]


def test_the_recommendation_follows_the_link():
    graph = ScheduleGraph(nodes=1000, edges=20_000, halo={4: 800})
    model = ScheduleModel(layers=16, hidden=64, params=70_000)
    by_bytes = recommend_schedule(schedule_costs(graph, model, 4))
    assert by_bytes.name == "layer S=4"   # (S-1) N = 3000 rows < L H(4) = 12 800
    fast = schedule_costs(graph, model, 4, link_gbps=1000.0, edge_rate=1e6)
    slow = schedule_costs(graph, model, 4, link_gbps=0.001, edge_rate=1e12)   # the link dominates
    assert recommend_schedule(fast).mode == "graph" and recommend_schedule(slow).name == "layer S=4"
    with pytest.raises(ValueError, match="--link-gbps"):
        schedule_costs(graph, model, 4, link_gbps=0.0)


def _recorded(name: str) -> dict[tuple[str, int], float]:
    """(run, layers) -> MiB per epoch of a benchmark results table."""
    out = {}
    for run, layers, size, unit in re.findall(r"^\| ([^|]+?) \| (\d+) \| ([\d.]+) (MiB|GiB) \|",
                                              (RESULTS / name).read_text(), re.M):
        out[(run, int(layers))] = float(size) * (1024 if unit == "GiB" else 1)
    return out


def test_the_bytes_are_the_recorded_benchmark_bytes():
    """sbm-small, GCNII 16 x 64, P = 4 (benchmarks/layer_parallel.py --quick): the halo rows of its
    METIS partitions at 4 and 2 parts (6249 and 3555, from the folders' partition.json) give the
    recorded bytes to the table's rounding."""
    recorded = _recorded("layer_parallel_cpu2_2026-12-02_quick.md")
    W = 16 * 64 * 64 + (32 * 64 + 64) + (64 * 8 + 8)   # 16 shared-weight GCN2Convs, lin_in, lin_out
    model = ScheduleModel(16, 64, W, shared_parameters("gcnii", feature_dim=32, hidden=64, classes=8, layers=16))
    costs = {c.name: c.bytes / 2**20 for c in schedule_costs(ScheduleGraph(10_000, 172_718, {4: 6249, 2: 3555}),
                                                              model, 4)}
    for run, name in (("graph sync", "graph sync P=4"), ("layer S=4", "layer S=4"), ("hybrid S=2 G=2", "hybrid S=2 G=2")):
        assert costs[name] == pytest.approx(recorded[(run, 16)], abs=0.006), run


def _layer_record(rank, world_size, path):
    return train_layer(rank, world_size, path, "gcnii", 0.5, "layer", 2, epochs=1)["records"][-1]


def test_the_model_counts_what_the_layer_parallel_trainer_sends(tmp_path):
    graph = make_graph()
    folder = write(graph, 1, tmp_path / "one")
    recs = run_ranks(_layer_record, 2, folder, timeout=120)
    sent = sum(r["halo_bytes"] + r["allreduce_bytes"] for r in recs)
    hidden = 8   # lp_utils.model_of
    model = ScheduleModel(LAYERS, hidden, params=0,
                          shared_params=shared_parameters("gcnii", feature_dim=6, hidden=hidden, classes=3,
                                                          layers=LAYERS))
    layer = [c for c in schedule_costs(ScheduleGraph(graph.num_nodes, 1, {2: 0}), model, 2) if c.mode == "layer"]
    assert sum(r["stage_bytes"] for r in recs) == layer[0].stage_bytes
    assert sent == layer[0].bytes


def test_gnn_dist_plan_schedules(tmp_path, capsys):
    from partitioners.cli import main

    folder = _path_folder(tmp_path)
    base = ["plan", "--data", folder, "--model", "gcnii", "--layers", "8", "--hidden", "16", "--schedules"]
    # graph: 8 layers x 2 halo rows x 2 ways x 16 x 4 B + 2 ranks x all 2130 weights; layer: 6 rows x 2 ways + lin_in
    assert main(base + ["--link-gbps", "0.001", "--schedule-chunks", "2"]) == 0
    err = capsys.readouterr().err
    assert "schedules on 2 ranks, 2 chunk(s), a 0.001 Gbit/s link" in err
    assert "recommended: layer S=2; with --chunks 2 later chunks read the previous epoch's rows" in err
    assert main(base + ["--link-gbps", "1000"]) == 0   # compute dominates: the pipeline's bubble costs
    assert "recommended: graph sync P=2" in capsys.readouterr().err
    assert main(base + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)["schedules"]
    assert out["by"] == "bytes" and [c["name"] for c in out["candidates"]] == ["graph sync P=2", "layer S=2"]
    graph_sync, layer = out["candidates"]
    assert (graph_sync["halo_bytes"], layer["stage_bytes"]) == (8 * 2 * 2 * 16 * 4, 2 * 6 * 16 * 4)
    assert out["recommended"] == "layer S=2" and out["exact"] is False
    assert main(["plan", "--data", folder, "--link-gbps", "1"]) != 0
    assert "add --schedules" in capsys.readouterr().err
