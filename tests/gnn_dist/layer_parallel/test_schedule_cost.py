"""The schedule cost model (``gnn_dist/memory_plan/schedule_cost.py``, ``gnn-dist plan
--schedules``): its formulas on a partition whose halo rows can be counted by hand, its bytes
against what the layer-parallel trainer sends, and against the recorded benchmark figures."""

from __future__ import annotations

import dataclasses
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
from gnn_dist.memory_plan.model import Workload
from gnn_dist.memory_plan.schedule_cost import (ScheduleGraph, ScheduleModel, halo_row_bytes, recommend_schedule,
                                                schedule_costs, shared_parameters, workload_row_bytes)
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


def _hybrid_record(rank, world_size, path):
    return train_layer(rank, world_size, path, "gcn", 0.5, "hybrid", 2, epochs=1)["records"][-1]


def test_the_model_counts_what_the_hybrid_trainer_sends(tmp_path):
    """GCN, hybrid S=2 G=2 on 4 ranks: the first stage's first layer sends the features every epoch
    (no static halo cache in the stages, no gradient back), the other layers 8-wide rows and
    gradients; the boundary 8-wide rows and gradients of all N rows."""
    graph = make_graph()
    folder = write(graph, 2, tmp_path / "two")
    recs = run_ranks(_hybrid_record, 4, folder, timeout=240)
    sizes = sizes_from_meta(load_partition_meta(folder))
    workload = Workload(model="gcn", hidden=8, layers=LAYERS)
    staged = workload_row_bytes(workload, sizes[0], staged=True)
    assert staged == (sizes[0].feature_dim * 4,) + (2 * 8 * 4,) * (LAYERS - 1)
    model = ScheduleModel(LAYERS, 8, params=0, row_bytes=workload_row_bytes(workload, sizes[0]),
                          staged_row_bytes=staged)
    costs = schedule_costs(ScheduleGraph(graph.num_nodes, 1, {2: sum(s.halo for s in sizes)}), model, 4)
    hybrid = {c.name: c for c in costs}["hybrid S=2 G=2"]
    assert sum(r["stage_bytes"] for r in recs) == hybrid.stage_bytes
    assert sum(r["halo_bytes"] - r["stage_bytes"] for r in recs) == hybrid.halo_bytes > 0


def _graph_record(rank, world_size, path, layers, static_halo, wire):
    import gnn_dist
    from gnn_dist.models import build_model

    part = gnn_dist.load_partition(path)
    model = build_model("gcn", in_dim=part.feature_dim, hidden_dim=8, out_dim=part.num_classes, num_layers=layers,
                        dropout=0.5, seed=7)
    trainer = gnn_dist.Trainer(model, part, lr=0.05, log_every=0, static_halo=static_halo, **wire)
    return trainer.fit(1)[-1]


@pytest.mark.parametrize("layers,static_halo,wire,value_bytes,header", [(2, True, {}, 4, 0), (3, False, {}, 4, 0),
                                                                     (3, False, {"halo_dtype": "int8"}, 1, 6)])
def test_the_model_counts_what_the_graph_trainer_sends(tmp_path, layers, static_halo, wire, value_bytes, header):
    """GCN on 2 ranks: layer 0 reads the features (no gradient back; nothing per epoch with the
    static halo), the hidden layers send 8-wide rows and gradients, the output layer (8 -> C
    classes, narrowing) its C-wide mapped rows and gradients (int8: a byte a value and a 6-byte
    header a row): the predicted graph-sync halo bytes are the recorded ones."""
    folder = write(make_graph(), 2, tmp_path / "two")
    recs = run_ranks(_graph_record, 2, folder, layers, static_halo, wire, timeout=120)
    sizes = sizes_from_meta(load_partition_meta(folder))
    workload = Workload(model="gcn", hidden=8, layers=layers, static_halo=static_halo, **wire)
    rows = workload_row_bytes(workload, sizes[0])
    F, C = sizes[0].feature_dim, sizes[0].num_classes
    assert C < 8
    feature = 0 if static_halo else (F + 6 if wire else F * 4)
    assert rows == (feature,) + tuple(2 * (w * value_bytes + header) for w in [8] * (layers - 2) + [C])
    model = ScheduleModel(layers, 8, params=0, row_bytes=rows)
    H = sum(s.halo for s in sizes)
    sync = schedule_costs(ScheduleGraph(sum(s.inner for s in sizes), 1, {2: H}), model, 2)[0]
    assert sum(r["halo_bytes"] for r in recs) == sync.halo_bytes == H * sum(rows) > 0


def test_the_per_layer_rule(tmp_path):
    from gnn_dist.memory_plan.layers import layer_shapes

    gat = layer_shapes("gat", feature_dim=5, hidden=16, classes=3, layers=3, heads=4, out_heads=2, dropout=0.5)
    # the features once (static halo), then the 16-wide concatenation of 4 heads, forward and back
    assert halo_row_bytes(gat, store_fed=True, static_halo=True, wire=4) == (0, 128, 128)
    assert halo_row_bytes(gat, store_fed=True, static_halo=False, wire=2, grad_wire=4) == (20, 96, 96)
    part = sizes_from_meta(load_partition_meta(_path_folder(tmp_path)))[0]   # 2 features
    # GCNII's convs read lin_in's hidden rows (with a gradient): 2 F b every layer; bf16 halves them
    assert workload_row_bytes(Workload(model="gcnii", hidden=16, layers=3, precision="bf16"), part) == (64,) * 3
    # --halo-dtype int8 on graph sync (the features too, without the static halo); the stages send as computed
    sage = Workload(model="sage", hidden=16, layers=2, static_halo=False, halo_dtype="int8")
    # a 6-byte header a quantised row; the output layer (16 -> 2 classes) sends its mapped rows
    assert workload_row_bytes(sage, part) == (2 + 6, 2 * (part.num_classes + 6)) and part.num_classes == 2
    assert workload_row_bytes(dataclasses.replace(sage, pipeline="stale"), part) == (2 + 6, 2 * (16 + 6))
    assert workload_row_bytes(sage, part, staged=True) == (8, 128)
    model = ScheduleModel(2, 16, 100, row_bytes=(0, 32), staged_row_bytes=(8, 128))
    graph_sync, layer = schedule_costs(ScheduleGraph(6, 10, {2: 2}), model, 2)
    assert (graph_sync.halo_bytes, layer.halo_bytes) == (2 * 32, 0)
    hybrid = {c.name: c for c in schedule_costs(ScheduleGraph(6, 10, {2: 2}), model, 4)}["hybrid S=2 G=2"]
    assert hybrid.halo_bytes == 2 * (8 + 128)


def test_gnn_dist_plan_schedules(tmp_path, capsys):
    from gnn_dist_cli.command import main

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
