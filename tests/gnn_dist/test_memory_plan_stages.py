"""The memory planner of layer / hybrid parallel runs (``gnn_dist/memory_plan/stages.py``): a stage
rank holds its layers' activations and its share of the optimizer, the boundary and history terms
appear only where they should, and graph-parallel predictions are unchanged. Formula tests on
synthetic sizes (no training; the measured figures: ``benchmarks/memory_plan.py --stages``)."""

from __future__ import annotations

import dataclasses
import json

import pytest

SPEC = {"nodes": 2_000_000, "edges": 30_000_000, "feature_dim": 128, "num_classes": 40, "num_parts": 4}


def _sizes():
    from gnn_dist.memory_plan import sizes_from_spec

    return sizes_from_spec(**SPEC)


def _gcnii(**kw):
    from gnn_dist.memory_plan import Workload

    return Workload(model="gcnii", hidden=64, layers=16, **kw)


@pytest.mark.parametrize("workload,total", [
    ({"model": "gcnii", "layers": 16}, 7626897520),
    ({"model": "gcn", "hidden": 256, "layers": 3}, 7616393303),
    ({"model": "gat", "hidden": 256, "layers": 3, "heads": 4, "device": "cuda"}, 10470677021),
])
def test_graph_parallel_predictions_are_unchanged(workload, total):
    from gnn_dist.memory_plan import Workload, plan_rank

    w = Workload(**workload)
    plan = plan_rank(_sizes(), w)
    kernels = 18 * _sizes().edges if plan.device == "cpu" else 0   # the CPU kernels' CSR copies, counted since
    # less the activation's output ReLU + dropout (one op since, in the models built on BasicGNN) no longer keep
    fused = 4 * _sizes().inner * w.hidden * (w.layers - 1) if w.model != "gcnii" else 0
    assert plan.total == total + kernels - fused and plan.components["stage"].device == 0 and plan.stage == 0


def test_a_stage_holds_its_layers_activations_and_its_share_of_the_optimizer():
    from gnn_dist.memory_plan import plan_rank

    s = _sizes()
    whole = plan_rank(s, _gcnii())
    stages = [plan_rank(s, _gcnii(parallel="layer", stages=2), stage) for stage in (0, 1)]
    act = [p.components["activations"].device for p in stages]
    assert all(a < whole.components["activations"].device for a in act)
    outside = sum(act) - whole.components["activations"].device   # the stem's terms, on both stages
    assert 0 < outside < min(act)
    for p in stages:
        assert whole.components["optimizer"].device / 3 < p.components["optimizer"].device \
            < whole.components["optimizer"].device
        assert p.components["stage"].device > 0
        for name in ("runtime", "block", "features", "halo"):
            assert p.components[name] == whole.components[name]
    # the logits' workspace only on the last stage
    assert stages[1].components["workspace"].device - stages[0].components["workspace"].device == \
        2 * s.inner * s.num_classes * 4


def test_the_second_copy_of_the_history_and_the_chunk_blocks_appear_only_with_chunks():
    from gnn_dist.memory_plan import plan_rank

    s = _sizes()
    for stage, historical in ((0, 7), (1, 8)):
        one = plan_rank(s, _gcnii(parallel="layer", stages=2, chunks=1), stage).components["stage"].device
        four = plan_rank(s, _gcnii(parallel="layer", stages=2, chunks=4), stage).components["stage"].device
        assert four - one == historical * s.rows * 64 * 4 + 32 * s.edges + 8 * 4 * s.rows
    # chunks change nothing of a graph-parallel run
    assert plan_rank(s, _gcnii(chunks=4)).total == plan_rank(s, _gcnii()).total


def test_the_plan_has_a_rank_per_stage_and_part_in_world_order():
    from gnn_dist.memory_plan import plan_memory, render_plan, sizes_from_spec

    one = sizes_from_spec(**{**SPEC, "num_parts": 2})
    sizes = [one, dataclasses.replace(one, part_id=1)]
    plan = plan_memory(sizes, _gcnii(parallel="hybrid", stages=2), device_memory=1 << 40)
    assert [(r.stage, r.part_id) for r in plan.ranks] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    out = json.loads(json.dumps(plan.to_json()))
    assert [r["stage"] for r in out["ranks"]] == [0, 0, 1, 1] and "stage" in out["components"]
    assert out["recommendation"]["fits"]
    lines = render_plan(plan)
    assert "2 stages (hybrid" in lines[0] and any("stage 1" in line for line in lines)
    graph = plan_memory(sizes, _gcnii()).to_json()
    assert len(graph["ranks"]) == 2 and "stage" not in graph["ranks"][0]


def test_the_workload_reads_the_parallel_settings(tmp_path):
    from gnn_dist.config_cli import parse_run_config
    from gnn_dist.memory_plan import Workload

    config = parse_run_config(["--data", str(tmp_path), "--parallel", "layer", "--stages", "2", "--chunks", "4",
                               "--model", "gcnii", "--layers", "16"])[0]
    w = Workload.from_config(config)
    assert (w.parallel, w.stages, w.chunks) == ("layer", 2, 4)
    assert Workload.from_config(parse_run_config(["--data", str(tmp_path)])[0]).parallel == "graph"
