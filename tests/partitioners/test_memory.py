"""The memory estimate of a partitioning run and the ``--max-memory`` guard."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from partitioners import Graph, memory
from partitioners.catalog import dataset_info, list_datasets, load_dataset
from gnn_dist_cli.command import EXIT_OK, EXIT_USAGE, main
from partitioners.memory import (GraphSize, MemoryLimitError, estimate_partition_memory,
                                 format_bytes, guard_memory, parse_size)
from partitioners.methods import METHODS, register_method

GiB = 1 << 30


pytestmark = pytest.mark.usefixtures("clean_registry")


@pytest.mark.parametrize("text, value", [
    ("8GB", 8 * 10**9), ("512MiB", 512 << 20), ("1000000", 10**6), ("1.5G", 1_500_000_000),
    (" 2 gib ", 2 << 30), ("64k", 64_000), ("1TiB", 1 << 40), ("300b", 300), (".5GiB", 1 << 29),
])
def test_parse_size(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["lots", "8XB", "", "GB", "-1GB", "1e9", "0", "0.0001B"])
def test_parse_size_refuses(text):
    with pytest.raises(ValueError, match=r"is not a (positive )?memory size; .*e\.g\. 8GB, 512MiB"):
        parse_size(text)


def test_format_bytes():
    assert [format_bytes(b) for b in (5, 2048, 11 << 20, 1536 << 20, 3 << 40)] == [
        "5 B", "2.0 KiB", "11 MiB", "1.5 GiB", "3072 GiB"]


def test_graph_bytes_are_the_graphs_arrays():
    g = load_dataset("sbm-tiny")
    arrays = [g.indptr, g.indices, g.x, g.y, g.train_mask, g.val_mask, g.test_mask]
    assert GraphSize.of(g).graph_bytes() == sum(a.nbytes for a in arrays)
    w = Graph.from_edges([0, 1], [1, 2], edge_weight=[1.0, 2.0])
    assert GraphSize.of(w).graph_bytes() == w.indptr.nbytes + w.indices.nbytes + w.edge_weight.nbytes


def test_catalog_sizes_match_the_generated_graph():
    g = load_dataset("rmat-tiny")
    given, made = dataset_info("rmat-tiny").sizes(), GraphSize.of(g)
    assert (given.num_nodes, given.feature_bytes, given.label_bytes, given.num_masks) == \
           (made.num_nodes, made.feature_bytes, made.label_bytes, made.num_masks)
    assert abs(given.num_edges - made.num_edges) < 0.05 * made.num_edges


def test_the_estimate_grows_with_the_graph_and_names_its_terms():
    small = GraphSize(num_nodes=10**5, num_edges=10**6, symmetric=True, feature_bytes=256)
    big = GraphSize(num_nodes=10**6, num_edges=10**7, symmetric=True, feature_bytes=256)
    for method in METHODS:
        a, b = (estimate_partition_memory(s, method, 8) for s in (small, big))
        assert b.total > a.total > memory.BASELINE_BYTES
        assert set(a.parts) == {"baseline", "graph", "assignment", method, "quality", "write"}
    metis = estimate_partition_memory(big, "metis", 8)
    assert metis.total > estimate_partition_memory(big, "fennel", 8).total
    assert metis.total == (metis.parts["baseline"] + metis.parts["graph"] + metis.parts["assignment"]
                           + max(metis.parts[k] for k in ("metis", "quality", "write")))
    directed = GraphSize(num_nodes=10**6, num_edges=10**7, feature_bytes=256)  # M = 2E for METIS
    assert estimate_partition_memory(directed, "metis", 8).parts["metis"] > metis.parts["metis"]
    refined = estimate_partition_memory(big, "ldg", 64, refine=True)
    assert refined.parts["refine"] == max(refined.parts.values()) and refined.total > metis.total / 4
    assert estimate_partition_memory(big, "metis", 1).parts["metis"] == 0  # P = 1 runs no method
    assert metis.describe().startswith(f"~{format_bytes(metis.total)} (graph ")


def test_a_method_without_its_own_estimate_gets_the_generic_one():
    register_method("plain", lambda graph, num_parts, *, seed, balance: None, options=())
    size = GraphSize(num_nodes=1000, num_edges=5000)
    assert estimate_partition_memory(size, "plain", 4).parts["plain"] == 8 * (1000 + 5000)


def test_guard_refuses_with_the_estimate_the_limit_and_the_fix():
    size = dataset_info("sbm-large").sizes()
    with pytest.raises(MemoryLimitError) as info:
        guard_memory(size, "metis", 8, refine=False, limit=1 << 30, what="sbm-large")
    msg = str(info.value)
    assert msg.startswith("partitioning sbm-large into 8 parts with metis needs ~")
    assert "more than --max-memory (1.0 GiB); pass a larger --max-memory if the machine has it, " \
           "or use a streaming method: --method fennel needs ~" in msg
    assert isinstance(info.value, ValueError)


def test_the_default_limit_is_the_available_memory(monkeypatch):
    monkeypatch.setattr(memory, "available_memory", lambda: 16 * GiB)
    for info in list_datasets():  # no catalog dataset needs more than a 16 GiB machine
        for method in METHODS:
            estimate, limit = guard_memory(info.sizes(), method, 8, refine=True, limit=None,
                                           what=info.name, log_estimate=False)
            assert limit == 16 * GiB and estimate.total < 8 * GiB, (info.name, method)
    monkeypatch.setattr(memory, "available_memory", lambda: 64 << 20)
    with pytest.raises(MemoryLimitError, match=r"more than the available memory \(the --max-memory "
                                               r"default\) \(64 MiB\)"):
        guard_memory(dataset_info("sbm-tiny").sizes(), "metis", 2, refine=False, limit=None, what="x")


def test_cli_logs_the_estimate_and_partitions_within_the_default(capsys, tmp_path):
    for name in ("sbm-tiny", "rmat-tiny"):
        code = main(["partition", "--dataset", name, "--parts", "4", "--out", str(tmp_path / name),
                     "--no-progress"])
        err = capsys.readouterr().err
        assert code == EXIT_OK, err
        assert "[gnn-dist] memory estimate: ~" in err and "(available memory)" in err


def test_cli_tiny_max_memory_refuses_before_generating(capsys, tmp_path):
    out = tmp_path / "o"
    code = main(["partition", "--dataset", "sbm-medium", "--parts", "4", "--max-memory", "100MB",
                 "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE and not out.exists()
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and "generating" not in err
    assert errors[0].startswith("[gnn-dist] error: partitioning sbm-medium into 4 parts with metis "
                                "needs ~")
    assert "more than --max-memory (95 MiB); pass a larger --max-memory" in errors[0]
    assert "--method fennel needs ~" in errors[0]


def test_cli_tiny_max_memory_refuses_an_input_after_reading(capsys, tmp_path):
    path = tmp_path / "edges.txt"
    path.write_text("".join(f"{i} {(i + 1) % 50}\n" for i in range(50)))
    code = main(["partition", "--input", str(path), "--parts", "2", "--method", "fennel",
                 "--max-memory", "1MiB", "--out", str(tmp_path / "o"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE
    assert f"error: partitioning {path} into 2 parts with fennel needs ~" in err
    assert "more than --max-memory (1.0 MiB); pass a larger --max-memory if the machine has it" in err
    assert "streaming method" not in err  # fennel is the streaming method already
    code = main(["partition", "--input", str(path), "--parts", "2", "--max-memory", "64GB",
                 "--out", str(tmp_path / "o"), "--no-progress"])
    assert code == EXIT_OK and "limit 60 GiB (--max-memory)" in capsys.readouterr().err


MEASURE = textwrap.dedent("""
    import json, sys
    # The high-water mark starts over here: a child's ru_maxrss also holds its parent's RSS at
    # fork (Linux keeps the larger of the old and new address space's at exec), and pytest's
    # parent can be far larger than this run. VmHWM after clear_refs counts this process only.
    open("/proc/self/clear_refs", "w").write("5")
    import numpy as np
    import partitioners.methods, partitioners.format, scipy.sparse, tqdm.auto
    from partitioners import Graph, partition_graph
    from partitioners.memory import estimate_partition_memory
    d, method = sys.argv[1], sys.argv[2]
    meta = json.load(open(d + "/meta.json"))
    g = Graph(**{k: np.load(f"{d}/{k}.npy") for k in meta.pop("arrays")}, **meta)
    partition_graph(g, 4, method, d + "/out-" + method, seed=0)
    hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
    print(json.dumps({"peak": hwm * 1024, "estimate": estimate_partition_memory(g, method, 4).total}))
""")


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux's clear_refs")
@pytest.mark.parametrize("method", ["metis", "fennel"])
def test_the_estimate_bounds_the_real_peak(tmp_path, method):
    """A fresh process that loads sbm-medium's arrays (no generator peak) and partitions them:
    its peak RSS stays under the estimate, and the estimate within 2.5x of it."""
    g = load_dataset("sbm-medium")
    arrays = ("indptr", "indices", "x", "y", "train_mask", "val_mask", "test_mask")
    for k in arrays:
        np.save(tmp_path / f"{k}.npy", getattr(g, k))
    (tmp_path / "meta.json").write_text(json.dumps({"arrays": arrays, "num_classes": g.num_classes,
                                                    "symmetric": True}))
    del g
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", MEASURE, str(tmp_path), method], cwd=root,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["peak"] <= got["estimate"] <= 2.5 * got["peak"], got
