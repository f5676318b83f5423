"""The ``gnn-dist`` command line: ``datasets``, ``partition``, ``inspect`` (and how ``train`` hands over).

Every test but one calls :func:`gnn_dist_cli.command.main` in-process; ``test_console_script_*`` runs
the installed ``gnn-dist`` script once in a fresh interpreter with ``PYTHONPROFILEIMPORTTIME``,
which also proves the partition path never imports torch.
"""

from __future__ import annotations

import errno
import gzip
import json
import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from corpus.corpus_utils import cli_logging_kept
from gnn_dist_cli import command as cli
from gnn_dist_cli.command import EXIT_FAILED, EXIT_OK, EXIT_USAGE, main
from partitioners import load_part, load_partition_meta
from partitioners.catalog import list_datasets
from partitioners.format import npyio

REPORT_KEYS = {"edge_cut", "comm_volume", "halo_per_part", "max_halo_fraction", "mean_halo_fraction",
               "node_balance", "edge_balance", "train_balance", "part_sizes", "empty_parts", "time_s",
               "peak_rss_bytes", "num_parts", "num_nodes", "num_edges", "method", "seed", "out_dir",
               "source", "method_params"}
INSPECT_KEYS = {"path", "ok", "verified", "problems", "meta"}


def run(capsys, *argv) -> tuple[int, str, str]:
    """``main(argv)`` in-process: ``(exit code, stdout, stderr)``."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def partition(capsys, out: Path, *args) -> tuple[int, dict | None, str]:
    """``gnn-dist partition ... --out out --json --no-progress``: ``(code, report or None, stderr)``."""
    code, stdout, err = run(capsys, "partition", *args, "--out", out, "--json", "--no-progress")
    return code, (json.loads(stdout) if stdout else None), err


def stored_edges(out: Path) -> list[tuple[int, int]]:
    """Every edge of a partition folder as ``(src, dst)`` in the input's ids, sorted."""
    edges = []
    for p in range(load_partition_meta(out).num_parts):
        part = load_part(out, p)
        dst = np.repeat(part.original_ids[:part.num_inner], np.diff(part.indptr))
        src = part.original_ids[np.asarray(part.indices)]
        edges += zip(src.tolist(), dst.tolist())
    return sorted(edges)


def check_report_against_files(out: Path, report: dict) -> None:
    """The report's cut/volume/sizes recomputed from the part files themselves."""
    meta = load_partition_meta(out)
    cut = volume = 0
    sizes = []
    for p in range(meta.num_parts):
        part = load_part(out, p)
        cut += int(np.count_nonzero(np.asarray(part.indices) >= part.num_inner))
        volume += part.num_halo
        sizes.append(part.num_inner)
    assert report["edge_cut"] == cut
    assert report["comm_volume"] == volume
    assert report["part_sizes"] == sizes
    assert report["empty_parts"] == sizes.count(0)
    for key in ("edge_cut", "comm_volume", "node_balance", "edge_balance", "train_balance"):
        assert meta.quality[key] == report[key]


@pytest.fixture(autouse=True)
def restore_logging():
    """Undo what ``main`` does to the loggers it configures (their handler and level)."""
    with cli_logging_kept():
        yield


@pytest.fixture(scope="module")
def good_dir(tmp_path_factory) -> Path:
    """A valid 3-part partition of sbm-tiny (shared; tests that damage it copy it first)."""
    out = tmp_path_factory.mktemp("good") / "parts"
    with cli_logging_kept():
        assert main(["partition", "--dataset", "sbm-tiny", "--parts", "3", "--method", "random",
                     "--out", str(out), "--no-progress"]) == EXIT_OK
    return out


@pytest.fixture
def damaged(good_dir, tmp_path) -> Path:
    out = tmp_path / "copy"
    shutil.copytree(good_dir, out)
    return out


# ---------------------------------------------------------------------------------- datasets
def test_datasets_lists_the_catalog_on_stderr(capsys):
    code, out, err = run(capsys, "datasets")
    assert code == EXIT_OK and out == ""
    for d in list_datasets():
        line = next(ln for ln in err.splitlines() if f" {d.name} " in ln + " ")
        assert f"{d.num_nodes:,}" in line and f"{d.num_edges:,}" in line


def test_datasets_says_what_the_labels_are(capsys):
    """Classes for class ids, targets for a regression dataset (its num_classes is the target width)."""
    code, _, err = run(capsys, "datasets")
    assert code == EXIT_OK and re.search(r"  dim +labels  description", err.splitlines()[0]), err
    words = {"class": "classes", "regression": "targets", "multilabel": "multi-label"}
    for d in list_datasets():
        line = next(ln for ln in err.splitlines() if f"] {d.name} " in ln)
        assert f"  {d.num_classes} {words[d.label_kind]}  " in line, line
    assert any(d.label_kind == "regression" for d in list_datasets())   # sbm-regression: "4 targets"


def test_datasets_json(capsys):
    code, out, _ = run(capsys, "datasets", "--json")
    assert code == EXIT_OK
    got = json.loads(out)
    assert [d["name"] for d in got] == [d.name for d in list_datasets()]
    tiny = next(d for d in got if d["name"] == "sbm-tiny")
    assert tiny["num_nodes"] == 1000 and tiny["feature_dim"] == 16 and tiny["num_classes"] == 4


# --------------------------------------------------------------------------------- partition
@pytest.mark.parametrize("method", ["metis", "random", "ldg", "fennel"])
def test_each_method_with_refine_and_balance_then_inspect(capsys, tmp_path, method):
    out = tmp_path / "parts"
    code, report, err = partition(capsys, out, "--dataset", "sbm-tiny", "--parts", "3", "--method",
                                  method, "--refine", "--balance", "nodes,edges,train", "--seed", "1")
    assert code == EXIT_OK, err
    assert REPORT_KEYS <= set(report)
    got = (report["num_parts"], report["num_nodes"], report["method"], report["seed"])
    assert got == (3, 1000, method, 1)
    assert set(report["time_s"]) == {"read", "partition", "quality", "write"}
    assert report["peak_rss_bytes"] > 0
    check_report_against_files(out, report)
    meta = load_partition_meta(out)
    assert meta.method == method and meta.seed == 1
    assert meta.method_params == {"balance": ["nodes", "edges", "train"], "refine": True}
    for text in (f"edge cut: {report['edge_cut']}", f"communication volume (halo rows per exchange): "
                 f"{report['comm_volume']}", "halo fraction: max", "balance (max/mean): nodes",
                 "time: read", "peak RSS:"):
        assert text in err

    code, stdout, err = run(capsys, "inspect", out, "--verify")
    assert code == EXIT_OK and stdout == ""
    assert "verify: OK" in err and f"edge cut: {report['edge_cut']}" in err
    code, stdout, _ = run(capsys, "inspect", out, "--verify", "--json")
    got = json.loads(stdout)
    assert code == EXIT_OK and set(got) == INSPECT_KEYS
    assert got["ok"] is True and got["verified"] is True and got["problems"] == []
    assert got["meta"]["num_parts"] == 3 and got["meta"]["quality"]["edge_cut"] == report["edge_cut"]


def test_one_part(capsys, tmp_path):
    out = tmp_path / "one"
    code, report, err = partition(capsys, out, "--dataset", "sbm-tiny", "--parts", "1")
    assert code == EXIT_OK, err
    assert report["part_sizes"] == [1000] and report["edge_cut"] == 0 and report["comm_volume"] == 0
    check_report_against_files(out, report)
    assert run(capsys, "inspect", out, "--verify")[0] == EXIT_OK


def test_more_parts_than_nodes_of_a_dataset_fails_before_generating(capsys, tmp_path):
    code, out, err = run(capsys, "partition", "--dataset", "sbm-tiny", "--parts", "1001",
                         "--out", tmp_path / "x")
    assert code == EXIT_USAGE and out == ""
    assert "--parts 1001 is more than the 1000 nodes of dataset sbm-tiny" in err
    assert "generating" not in err and not (tmp_path / "x").exists()


def test_more_parts_than_nodes_of_an_input_file(capsys, tmp_path):
    path = tmp_path / "tri.txt"
    path.write_text("0 1\n1 2\n2 0\n")
    code, _, err = run(capsys, "partition", "--input", path, "--parts", "5", "--out", tmp_path / "x")
    assert code == EXIT_USAGE
    assert f"--parts 5 is more than the 3 nodes of {path}" in err


def test_empty_parts_are_reported(capsys, caplog, tmp_path):
    path = tmp_path / "two_triangles.txt"
    path.write_text("0 1\n1 2\n2 0\n3 4\n4 5\n5 3\n")
    out = tmp_path / "parts"
    with caplog.at_level(logging.INFO):
        code, report, err = partition(capsys, out, "--input", path, "--symmetrize", "--parts", "5",
                                      "--method", "ldg")
    assert code == EXIT_OK, err
    empty = [p for p, s in enumerate(report["part_sizes"]) if s == 0]
    assert report["empty_parts"] == len(empty) >= 1  # LDG fills 3 parts of 2 nodes here
    check_report_against_files(out, report)
    assert f"empty parts: {len(empty)} (parts {empty})" in err
    assert any(r.levelno == logging.WARNING and f"{len(empty)} of 5 parts are empty" in r.getMessage()
               for r in caplog.records)
    code, _, err = run(capsys, "inspect", out, "--verify")
    assert code == EXIT_OK and f"empty parts: {len(empty)}" in err and "verify: OK" in err


# ------------------------------------------------------------------------------ input files
SRC = np.array([0, 1, 2, 3, 4, 5, 6, 7, 0, 2])
DST = np.array([1, 2, 3, 4, 5, 6, 7, 0, 4, 6])  # a directed 8-cycle with two chords: no reciprocal edge


def write_input(tmp_path: Path, fmt: str) -> Path:
    """The graph SRC -> DST in format ``fmt``."""
    if fmt == "edgelist":
        path = tmp_path / "g.csv"
        path.write_text("# src,dst\n" + "".join(f"{s},{d}\n" for s, d in zip(SRC, DST)))
    elif fmt == "npz":
        path = tmp_path / "g.npz"
        rng = np.random.default_rng(0)
        np.savez(path, src=SRC, dst=DST, x=rng.random((8, 3), dtype=np.float32),
                 y=np.arange(8) % 2, train_mask=np.arange(8) < 4)
    elif fmt == "npy":
        path = tmp_path / "g.npy"
        np.save(path, np.stack([SRC, DST]))
    elif fmt == "scipy":
        path = tmp_path / "adj.npz"
        sp.save_npz(path, sp.csr_matrix((np.ones(SRC.size), (SRC, DST)), shape=(8, 8)))
    else:
        path = tmp_path / "ogbn-toy"
        (path / "raw").mkdir(parents=True)
        with gzip.open(path / "raw" / "edge.csv.gz", "wt") as f:
            f.write("".join(f"{s},{d}\n" for s, d in zip(SRC, DST)))
        (path / "raw" / "num-node-list.csv").write_text("8\n")
    return path


@pytest.mark.parametrize("symmetrize", [False, True], ids=["as-is", "symmetrize"])
@pytest.mark.parametrize("fmt", ["edgelist", "npz", "npy", "scipy", "ogb"])
def test_input_each_format(capsys, tmp_path, fmt, symmetrize):
    path = write_input(tmp_path, fmt)
    out = tmp_path / "parts"
    flags = ["--symmetrize"] if symmetrize else []
    code, report, err = partition(capsys, out, "--input", path, "--input-format", fmt, "--parts", "2",
                                  "--method", "random", *flags)
    assert code == EXIT_OK, err
    edges = list(zip(SRC.tolist(), DST.tolist()))
    if symmetrize:
        edges += [(d, s) for s, d in edges]
    assert stored_edges(out) == sorted(edges)
    meta = load_partition_meta(out)
    assert (meta.num_nodes, meta.num_edges, meta.directed) == (8, len(edges), not symmetrize)
    assert meta.raw["symmetrized"] is symmetrize
    assert meta.feature_dim == (3 if fmt == "npz" else 0)
    assert report["source"] == str(path)
    check_report_against_files(out, report)
    assert run(capsys, "inspect", out, "--verify")[0] == EXIT_OK


def test_input_format_is_inferred_from_the_name(capsys, tmp_path):
    path = write_input(tmp_path, "edgelist")
    code, report, err = partition(capsys, tmp_path / "parts", "--input", path, "--parts", "2")
    assert code == EXIT_OK, err
    assert report["num_edges"] == SRC.size


def test_remove_options_are_applied(capsys, tmp_path):
    path = tmp_path / "g.txt"
    path.write_text("0 1\n0 1\n1 1\n1 2\n")
    code, report, err = partition(capsys, tmp_path / "parts", "--input", path, "--parts", "2",
                                  "--remove-self-loops", "--remove-duplicates")
    assert code == EXIT_OK, err
    assert stored_edges(tmp_path / "parts") == [(0, 1), (1, 2)]
    assert "self_loops_removed 1" in err and "duplicates_removed 1" in err


# -------------------------------------------------------------------------------- bad input
def test_the_preprocessing_line_says_who_cleaned_the_graph(capsys, tmp_path):
    code, report, err = partition(capsys, tmp_path / "p", "--dataset", "sbm-tiny", "--parts", "2")
    assert code == EXIT_OK
    line = next(l for l in err.splitlines() if "preprocessing" in l)
    assert "by the generator's cleaning" in line and "symmetrize_added" in line, line
    edges = tmp_path / "e.tsv"
    edges.write_text("0\t1\n1\t1\n2\t0\n")
    code, _, err = partition(capsys, tmp_path / "q", "--input", edges, "--parts", "2", "--remove-self-loops")
    assert code == EXIT_OK and "preprocessing, by --symmetrize/--remove-* and the reader: self_loops_removed 1" in err


def test_unknown_dataset(capsys, tmp_path):
    code, out, err = run(capsys, "partition", "--dataset", "nope", "--parts", "2", "--out", tmp_path / "x")
    assert code == EXIT_USAGE and out == ""
    assert "unknown dataset 'nope'; choose one of: sbm-tiny" in err


def test_missing_input_file(capsys, tmp_path):
    missing = tmp_path / "missing.txt"
    code, _, err = run(capsys, "partition", "--input", missing, "--parts", "2", "--out", tmp_path / "x")
    assert code == EXIT_USAGE
    assert f"--input {missing}: no such file or directory" in err


def test_malformed_edge_list_names_file_and_line(capsys, tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("# a comment\n0 1\n1 2\n2 x\n")
    code, _, err = run(capsys, "partition", "--input", path, "--parts", "2", "--out", tmp_path / "x")
    assert code == EXIT_USAGE
    assert f"{path}, line 4" in err and "'x'" in err
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("value, message", [
    ("nodes,foo", "argument --balance: unknown criterion 'foo' in 'nodes,foo'; "
                  "choose from nodes, edges, train"),
    (",", "argument --balance: ',' names no criterion"),
])
def test_bad_balance(capsys, tmp_path, value, message):
    code, _, err = run(capsys, "partition", "--dataset", "sbm-tiny", "--parts", "2",
                       f"--balance={value}", "--out", tmp_path / "x")
    assert code == EXIT_USAGE and message in err


def test_train_balance_needs_a_train_mask(capsys, tmp_path):
    path = write_input(tmp_path, "edgelist")
    code, _, err = run(capsys, "partition", "--input", path, "--parts", "2", "--balance", "train",
                       "--out", tmp_path / "x", "--no-progress")
    assert code == EXIT_USAGE and "--balance train needs training nodes" in err
    assert "add --train-mask M.npy or --split 0.6,0.2,0.2" in err


@pytest.mark.parametrize("argv, message", [
    (["--parts", "0"], "argument --parts: must be at least 1, got 0"),
    (["--parts", "two"], "argument --parts: expected a positive integer, got 'two'"),
    (["--parts", "2", "--seed", "-1"], "argument --seed: must be at least 0, got -1"),
    (["--parts", "2", "--method", "kmeans"], "argument --method: invalid choice: 'kmeans'"),
    (["--parts", "2", "--input-format", "npz"], "--input-format npz applies to --input only"),
    (["--parts", "2", "--bogus"], "unrecognized arguments: --bogus"),
])
def test_bad_flags(capsys, tmp_path, argv, message):
    code, out, err = run(capsys, "partition", "--dataset", "sbm-tiny", "--out", tmp_path / "x", *argv)
    assert code == EXIT_USAGE and out == ""
    assert message in err


def test_existing_output_needs_overwrite(capsys, tmp_path, good_dir):
    out = tmp_path / "parts"
    shutil.copytree(good_dir, out)
    before = (out / "partition.json").read_bytes()
    code, _, err = run(capsys, "partition", "--dataset", "sbm-tiny", "--parts", "2", "--out", out)
    assert code == EXIT_USAGE
    assert "already holds a partition" in err and "--overwrite" in err
    assert "generating" not in err  # refused before the graph was built
    assert (out / "partition.json").read_bytes() == before

    code, report, err = partition(capsys, out, "--dataset", "sbm-tiny", "--parts", "2", "--overwrite")
    assert code == EXIT_OK, err
    assert load_partition_meta(out).num_parts == 2


def test_non_partition_folder_is_never_replaced(capsys, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    code, _, err = run(capsys, "partition", "--dataset", "sbm-tiny", "--parts", "2", "--out", out,
                       "--overwrite")
    assert code == EXIT_USAGE and "without partition.json" in err
    assert (out / "notes.txt").read_text() == "keep me"


# ----------------------------------------------------------------------------------- inspect
@pytest.mark.parametrize("name", ["part-00001/features.npy", "part-00002/indices.npy"])
def test_verify_names_a_file_with_a_flipped_byte(capsys, damaged, name):
    path = damaged / name
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01
    path.write_bytes(bytes(data))

    assert run(capsys, "inspect", damaged)[0] == EXIT_OK  # without --verify only partition.json is read
    code, out, err = run(capsys, "inspect", damaged, "--verify")
    assert code == EXIT_FAILED and out == ""
    assert f"problem(s); the first: {path}: sha256 mismatch" in err
    assert f"error: {path}: sha256 mismatch" in err
    code, out, _ = run(capsys, "inspect", damaged, "--verify", "--json")
    got = json.loads(out)
    assert code == EXIT_FAILED and got["ok"] is False and got["problems"][0].startswith(f"{path}: sha256")


def test_inspect_refuses_another_format_version(capsys, damaged):
    meta_path = damaged / "partition.json"
    meta = json.loads(meta_path.read_text())
    meta["version"] = 2
    meta_path.write_text(json.dumps(meta))
    for flags in ([], ["--verify"]):
        code, out, err = run(capsys, "inspect", damaged, *flags)
        assert code == EXIT_FAILED and out == ""
        assert f"{meta_path}: unknown format version 2: this reader supports version 1 only" in err
    code, out, _ = run(capsys, "inspect", damaged, "--json")
    got = json.loads(out)
    assert code == EXIT_FAILED and got["ok"] is False and got["meta"] is None
    assert "unknown format version 2" in got["problems"][0]


def test_inspect_missing_folder(capsys, tmp_path):
    code, _, err = run(capsys, "inspect", tmp_path / "nothing")
    assert code == EXIT_FAILED and f"{tmp_path / 'nothing'}: no such partition folder" in err


def test_inspect_shows_ids_shapes_and_checksums(capsys, good_dir):
    meta = load_partition_meta(good_dir)
    code, out, err = run(capsys, "inspect", good_dir, "-v")  # -v after the verb
    assert code == EXIT_OK and out == ""
    assert f"{good_dir}: gnn-dist-partition version 1" in err
    for pm in meta.parts:
        lo, hi = pm.global_id_range
        assert f"part {pm.part_id}: inner {pm.num_inner}  halo {pm.num_halo}" in err
        assert f"global ids [{lo}, {hi})" in err
        entry = pm.files["indptr.npy"]
        assert f"{entry.path}: int64[{pm.num_inner + 1}]  {entry.size} B  sha256 {entry.sha256[:16]}" in err
    code, _, err_plain = run(capsys, "-v", "inspect", good_dir)  # -v before the verb
    assert code == EXIT_OK and err_plain == err


# ----------------------------------------------------------------------------- crash safety
def crash_on_call(monkeypatch, exc: BaseException, at: int = 6) -> None:
    """Make the writer's ``at``-th array save raise ``exc`` (earlier files are really written)."""
    real = npyio.save_array
    calls = {"n": 0}

    def save_array(root, rel_path, arr):
        calls["n"] += 1
        if calls["n"] == at:
            raise exc
        return real(root, rel_path, arr)

    monkeypatch.setattr(npyio, "save_array", save_array)


def test_crash_while_writing_leaves_no_partition(capsys, monkeypatch, tmp_path):
    crash_on_call(monkeypatch, OSError(errno.ENOSPC, "No space left on device"))
    out = tmp_path / "parts"
    code, report, err = partition(capsys, out, "--dataset", "sbm-tiny", "--parts", "2")
    assert code == EXIT_FAILED and report is None
    assert "No space left on device" in err
    assert not (out / "partition.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no half-written folder or temp folder


def test_crash_while_overwriting_keeps_the_old_partition(capsys, monkeypatch, tmp_path, good_dir):
    out = tmp_path / "parts"
    shutil.copytree(good_dir, out)
    before = (out / "partition.json").read_bytes()
    crash_on_call(monkeypatch, RuntimeError("boom"))
    code, _, err = run(capsys, "partition", "--dataset", "sbm-tiny", "--parts", "2", "--out", out,
                       "--overwrite", "--no-progress")
    assert code == EXIT_FAILED
    assert "internal error" in err and "RuntimeError: boom" in err  # with its traceback
    assert (out / "partition.json").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["parts"]
    monkeypatch.undo()
    assert run(capsys, "inspect", out, "--verify")[0] == EXIT_OK


# ------------------------------------------------------------------------- output channels
def test_progress_bars_and_logs_on_stderr_json_alone_on_stdout(capsys, tmp_path, monkeypatch):
    code, out, err = run(capsys, "partition", "--dataset", "sbm-tiny", "--parts", "2", "--out", tmp_path / "r")
    assert code == EXIT_OK and "%" not in err and "\r" not in err   # not a terminal: no bars in a log
    monkeypatch.setattr(cli, "_stderr_is_terminal", lambda: True)
    code, out, err = run(capsys, "partition", "--dataset", "sbm-tiny", "--parts", "2", "--method",
                         "ldg", "--out", tmp_path / "p", "--json")
    assert code == EXIT_OK
    assert json.loads(out)["num_parts"] == 2
    for bar in ("read: 100%", "ldg: 100%", "write parts: 100%"):
        assert bar in err
    code, out, err = run(capsys, "partition", "--dataset", "sbm-tiny", "--parts", "2", "--out",
                         tmp_path / "q", "--no-progress")
    assert code == EXIT_OK and out == ""
    assert "100%" not in err and "edge cut:" in err


def test_help_exits_zero(capsys):
    code, out, _ = run(capsys, "partition", "--help")
    assert code == EXIT_OK and "--input-format" in out


# ------------------------------------------------------------------------------------- train
def _fake_launcher(monkeypatch, code: int = 0) -> list:
    """Replace the agent supervisor; returns the list of its ``(cmd, env, verbose)`` calls."""
    from gnn_dist_cli import launch

    calls = []
    monkeypatch.setattr(launch, "run_torchrun",
                        lambda cmd, env, verbose=False: calls.append((cmd, env, verbose)) or code)
    return calls


def test_train_runs_torchrun_with_the_folder_part_count(capsys, monkeypatch, good_dir):
    monkeypatch.delenv("THP_MEM_ALLOC_ENABLE", raising=False)
    calls = _fake_launcher(monkeypatch, 7)
    code, out, err = run(capsys, "train", "--data", good_dir, "--model", "sage", "--epochs", "3")
    assert code == 7 and out == ""  # torchrun's exit code
    (cmd, env, verbose), = calls
    assert cmd == [sys.executable, "-m", "gnn_dist.distributed.local_run", "--validate", "--watch-pid", str(os.getpid()),
                   "--summarize", "--", "--nnodes=1", "--nproc-per-node=3", "--max-restarts=0",
                   "--rdzv-backend=gnn-dist-loopback", "--rdzv-endpoint=127.0.0.1:0",
                   "--rdzv-id=gnn-dist-train", "--local-addr=127.0.0.1",
                   "-m", "gnn_dist.train", "--data", str(good_dir), "--model", "sage", "--epochs", "3"]
    assert not verbose
    assert "OMP_NUM_THREADS" in env and env["NUMBA_NUM_THREADS"] == env["OMP_NUM_THREADS"]  # one pool's size
    assert env["OMP_WAIT_POLICY"] == "PASSIVE"   # idle pool threads sleep (gnn_dist.rank_threads)
    assert env["THP_MEM_ALLOC_ENABLE"] == "1"  # torch's huge-page CPU allocations for the ranks


def test_version(capsys):
    from partitioners import __version__

    assert main(["--version"]) == 0 and capsys.readouterr().out == f"gnn-dist {__version__}\n"


@pytest.mark.parametrize("where", ["before", "after"])
def test_verbose_and_quiet_reach_the_ranks(capsys, monkeypatch, good_dir, where):
    calls = _fake_launcher(monkeypatch)

    def argv(flag: str, verb: str = "train") -> list:
        return [flag, verb, "--data", good_dir] if where == "before" else [verb, "--data", good_dir, flag]

    for flag, passed in (("-v", "--verbose"), ("-q", "--quiet")):
        assert run(capsys, *argv(flag))[0] == EXIT_OK
        assert calls[-1][0][-1] == passed, calls[-1][0]   # gnn_dist.train's own flag, last
    assert run(capsys, *argv("-q", "predict"), "--model-file", "m.pt", "--out", "p.npz")[0] == EXIT_OK
    assert "--quiet" not in calls[-1][0]   # gnn_dist.predict has no --quiet
    assert run(capsys, "-q", "train", "--data", good_dir, "-v")[0] == EXIT_USAGE
    code, _, err = run(capsys, "-q", "datasets")
    assert code == EXIT_OK and err == ""   # quiet: warnings and errors only


def test_train_verbose_shows_torchruns_own_report(capsys, monkeypatch, good_dir):
    calls = _fake_launcher(monkeypatch)
    assert run(capsys, "-v", "train", "--data", good_dir)[0] == EXIT_OK
    assert run(capsys, "train", "--data", good_dir, "-v")[0] == EXIT_OK
    for cmd, _, verbose in calls:
        assert verbose and "--summarize" not in cmd


@pytest.mark.parametrize("user", ["0", "1"])
def test_train_keeps_the_users_huge_page_and_thread_settings(capsys, monkeypatch, good_dir, user):
    monkeypatch.setenv("THP_MEM_ALLOC_ENABLE", user)
    monkeypatch.setenv("OMP_NUM_THREADS", "5")
    calls = _fake_launcher(monkeypatch)
    assert run(capsys, "train", "--data", good_dir)[0] == EXIT_OK
    ((_, env, _),) = calls
    assert env["THP_MEM_ALLOC_ENABLE"] == user and env["OMP_NUM_THREADS"] == "5"
    assert env["NUMBA_NUM_THREADS"] == "5"   # numba's pool follows the user's torch threads


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the loopback interface is named lo on Linux")
def test_train_puts_the_ranks_sockets_on_loopback_unless_the_user_chose(capsys, monkeypatch, good_dir):
    monkeypatch.delenv("GLOO_SOCKET_IFNAME", raising=False)
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "ib0")
    calls = _fake_launcher(monkeypatch)
    assert run(capsys, "train", "--data", good_dir)[0] == EXIT_OK
    ((_, env, _),) = calls
    assert env["GLOO_SOCKET_IFNAME"] == "lo" and env["NCCL_SOCKET_IFNAME"] == "ib0"


def test_train_refuses_a_bad_folder_or_rank_count(capsys, monkeypatch, tmp_path, good_dir):
    from gnn_dist_cli import launch

    monkeypatch.setattr(launch, "run_torchrun", lambda *a, **k: pytest.fail("torchrun must not start"))
    code, _, err = run(capsys, "train", "--data", tmp_path / "none")
    assert code == EXIT_FAILED and "no such partition folder" in err
    code, _, err = run(capsys, "train", "--data", good_dir, "--nproc", "2")
    assert code == EXIT_USAGE and f"--nproc 2 differs from the 3 parts of {good_dir}" in err


# ---------------------------------------------------------------------------- console script
def test_console_script_runs_without_importing_torch(tmp_path):
    """The ``gnn-dist`` entry point that pyproject.toml names, run as its console script runs it
    (a fresh interpreter importing the function), from the tree under test: an installed script
    may be an older install's."""
    import tomllib

    root = Path(__file__).resolve().parents[2]
    target = tomllib.loads((root / "pyproject.toml").read_text())["project"]["scripts"]["gnn-dist"]
    module, func = target.split(":")
    script = [sys.executable, "-c", f"import sys; from {module} import {func}; sys.argv[0] = 'gnn-dist'; "
                                    f"sys.exit({func}())"]
    out = tmp_path / "parts"
    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1")
    proc = subprocess.run([*script, "partition", "--dataset", "sbm-tiny", "--parts", "2",
                           "--method", "random", "--out", str(out), "--json", "--no-progress"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == EXIT_OK, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["num_parts"] == 2  # stdout holds the JSON report only
    imported = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:") and line.count("|") == 2}
    assert {"numpy", "gnn_dist_cli.command", "partitioners.api"} <= imported  # the profile is real
    torch_like = sorted(m for m in imported if m == "torch" or m.startswith("torch."))
    assert torch_like == [], f"the partition path imported {torch_like}"
    assert (out / "partition.json").is_file()


@pytest.mark.parametrize("argv, pattern", [
    (["partition", "--dataset", "sbm-tiny", "--part", "2", "--out", "x"],
     r"^gnn-dist partition: error: unrecognized arguments: --part 2 \(did you mean: --part -> --parts\?\) \(see "
     r"gnn-dist partition --help\)$"),
    (["partition", "--parts", "2", "--out", "x"],
     r"^gnn-dist partition: error: one of the arguments --dataset --input is required"),
    (["inspect", "x", "--verifyy"], r"^gnn-dist inspect: error: unrecognized arguments: --verifyy \(did you mean: "
                                    r"--verifyy -> --verify\?\)"),
])
def test_usage_errors_are_one_line_naming_the_nearest_flag(capsys, tmp_path, argv, pattern):
    code, out, err = run(capsys, *argv)
    assert code == EXIT_USAGE and out == "" and len(err.strip().splitlines()) == 1 and re.search(pattern, err.strip())
    assert not (tmp_path / "x").exists() and not Path("x").exists()
