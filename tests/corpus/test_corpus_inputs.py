"""A corpus of bad inputs to ``gnn-dist partition``: each is refused with exit code 2
(``EXIT_USAGE``: bad usage or input, ``docs/cli.md``), one error line naming the file (and
line), the field or the value, no partition folder written, and never an internal error."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from corpus_utils import error_lines, run_cli, small_graph
from partitioners import GraphError, partition_graph
from gnn_dist_cli.command import EXIT_USAGE
from partitioners.io import read_graph


def text(content: str, name: str = "edges.txt") -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        path = tmp / name
        path.write_text(content)
        return path
    return make


def npz(name: str = "graph.npz", **arrays: object) -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        path = tmp / name
        np.savez(path, **arrays)
        return path
    return make


def features_with(value: float) -> np.ndarray:
    x = np.zeros((5, 2), np.float32)
    x[3, 1] = value
    return x


RING = {"src": np.array([0, 1, 2, 3, 4]), "dst": np.array([1, 2, 3, 4, 0])}

# (id, input maker, extra flags, regex of the error line after "error: <path>")
INPUT_CASES = [
    ("nan-features", npz(**RING, x=features_with(np.nan)), [], r": features\[3, 1\] = nan is not finite"),
    ("inf-features", npz(**RING, x=features_with(np.inf)), [], r": features\[3, 1\] = inf is not finite"),
    ("npz-id-over-num-nodes", npz(src=np.array([0, 1, 7]), dst=np.array([1, 2, 0]), num_nodes=5), [],
     r": src\[2\] = 7 is out of range: num_nodes is 5, ids must be in \[0, 5\)"),
    ("npz-negative-id", npz(src=np.array([0, 1, 2]), dst=np.array([1, -4, 0])), [],
     r": dst\[1\] = -4 is negative; node ids must be in \[0, 3\)"),
    ("npz-float-ids", npz(src=np.array([0.0, 1.5]), dst=np.array([1.0, 0.0])), [],
     r": src must hold integer node ids, got dtype float64"),
    ("npz-no-edges", npz(x=np.zeros((3, 2))), [], r": no edges: expected arrays 'src' and 'dst', or 'edge_index'"),
    ("npz-edge-index-shape", npz(edge_index=np.zeros((3, 4), np.int64)), [],
     r": 'edge_index' must have shape \[2, E\], got \(3, 4\)"),
    ("npz-negative-label", npz(**RING, y=np.array([0, 1, -1, 0, 1])), [],
     r": labels\[2\] = -1 is negative; class ids must be in \[0, 2\)"),
    ("npz-short-mask", npz(**RING, train_mask=np.ones(3, bool)), [],
     r": train_mask has shape \(3,\) but the graph has 5 nodes"),
    ("npz-num-nodes-disagrees", npz(**RING, num_nodes=np.array([2, 3])), [],
     r": 'num_nodes' must be one integer, got int64 array of shape \(2,\)"),
    ("edgelist-negative-id", text("0 1\n-1 2\n"), [],
     r", line 2: source id -1 is negative; node ids must be >= 0: '-1 2'"),
    ("edgelist-not-an-integer", text("0 1\n1 2\n2 x\n"), [],
     r", line 3: field 2 \('x'\) is not an integer: '2 x'"),
    ("edgelist-one-field", text("0\n1\n"), [], r", line 1: an edge line needs 2 fields \(src dst\), found 1"),
    ("edgelist-only-comments", text("# nothing\n% here\n"), [], r": no edges found"),
    ("parts-over-nodes", npz(**RING), ["--parts", "9"],
     r"--parts 9 is more than the 5 nodes of .*graph\.npz; use at most 5 parts"),
]


@pytest.mark.parametrize("make, flags, pattern", [c[1:] for c in INPUT_CASES], ids=[c[0] for c in INPUT_CASES])
def test_bad_input_is_refused_and_named(capsys, tmp_path, make, flags, pattern):
    path = make(tmp_path)
    out = tmp_path / "out"
    argv = ["partition", "--input", path, "--out", out, "--no-progress", *(flags or ["--parts", "2"])]
    code, stdout, err = run_cli(capsys, *argv)
    assert "internal error" not in err and "Traceback" not in err
    assert code == EXIT_USAGE and stdout == ""
    lines = error_lines(err)
    assert len(lines) == 1, err
    assert lines[0].startswith("[gnn-dist] error: ") and str(path) in lines[0]
    assert re.search(pattern, lines[0]), lines[0]
    assert not out.exists()


def test_the_reader_raises_graph_errors_naming_the_file(tmp_path):
    path = npz(**RING, x=features_with(np.nan))(tmp_path)
    with pytest.raises(GraphError, match=rf"^{path}: features\[3, 1\] = nan is not finite"):
        read_graph(path)


@pytest.mark.parametrize("argv, pattern", [
    (["--dataset", "sbm-huge", "--parts", "2"], r"unknown dataset 'sbm-huge'; choose one of: sbm-tiny"),
    (["--dataset", "sbm-tiny", "--parts", "5000"],
     r"--parts 5000 is more than the 1000 nodes of dataset sbm-tiny; use at most 1000 parts"),
    (["--input", "no/such/file.txt", "--parts", "2"], r"--input no/such/file\.txt: no such file or directory"),
    (["--dataset", "sbm-tiny", "--parts", "2", "--input-format", "npz"],
     r"--input-format npz applies to --input only"),
])
def test_bad_request_is_refused_before_reading(capsys, tmp_path, argv, pattern):
    code, _, err = run_cli(capsys, "partition", *argv, "--out", tmp_path / "o", "--no-progress")
    assert code == EXIT_USAGE
    lines = error_lines(err)
    assert len(lines) == 1 and re.search(pattern, lines[0]), err
    assert "reading" not in err  # refused before any reading or generating


@pytest.mark.parametrize("argv", [["--parts", "0"], ["--parts", "x"], ["--method", "magic"],
                                  ["--balance", "nodes,weight"], ["--seed", "-1"],
                                  ["--max-memory", "lots"]])
def test_bad_flag_value_is_a_usage_error(capsys, tmp_path, argv):
    base = {"--parts": "2"}
    flags = dict(base, **dict(zip(argv[::2], argv[1::2])))
    code, out, err = run_cli(capsys, "partition", "--dataset", "sbm-tiny", "--out", tmp_path / "o",
                             *[x for kv in flags.items() for x in kv])
    assert code == EXIT_USAGE and out == ""
    assert f"argument {argv[0]}" in err.splitlines()[-1]


def test_parts_over_nodes_through_the_api(tmp_path):
    with pytest.raises(ValueError, match=r"num_parts=13 exceeds num_nodes=12; use at most 12 parts"):
        partition_graph(small_graph(), 13, "random", tmp_path / "o")
    assert not (tmp_path / "o").exists()


def test_an_empty_part_is_written_with_a_warning(capsys, tmp_path):
    """A method may leave a part empty: the folder is valid and the CLI warns (exit code 0)."""
    from partitioners import load_part, verify_partition
    from gnn_dist_cli.command import EXIT_OK
    from partitioners.methods import register_method

    register_method("skip-one", lambda graph, num_parts, *, seed, balance:
                    np.where(np.arange(graph.num_nodes) % 2 == 0, 0, 2), options=())
    out = tmp_path / "o"
    code, _, err = run_cli(capsys, "partition", "--dataset", "sbm-tiny", "--parts", "3",
                           "--method", "skip-one", "--out", out, "--no-progress")
    assert code == EXIT_OK
    assert "empty parts: 1 (parts [1])" in err
    assert "warning: 1 of 3 parts are empty: their ranks will hold no nodes" in err
    assert load_part(out, 1).num_inner == 0 and verify_partition(out) == []
