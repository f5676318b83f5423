"""``gnn-dist partition --label-kind auto|class|multilabel|regression``: what the input's labels
hold. Whole-valued float labels are class ids by default; ``--label-kind regression`` keeps them
as float targets, from a ``--labels`` file, an npz's ``y`` or an npy-dir's ``labels.npy`` alike
(the readers get it as ``label_kind=``, as ``read_graph`` does from Python); a kind the labels
cannot be, a graph without labels, or the flag on a catalog dataset is one line, exit code 2."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from corpus.corpus_utils import registry_and_logging_kept
from gnn_dist_cli.command import EXIT_OK, EXIT_USAGE, main
from partitioners.format import load_partition_meta
from partitioners.io import read_graph

N = 40


@pytest.fixture(autouse=True)
def kept_logging():
    with registry_and_logging_kept():
        yield


@pytest.fixture
def files(tmp_path) -> Path:
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, N, 160), rng.integers(0, N, 160)
    whole = (np.arange(N) % 5).astype(np.float64)            # whole numbers: class ids unless told
    np.save(tmp_path / "edges.npy", np.stack([src, dst]))
    np.save(tmp_path / "whole.npy", whole)
    np.save(tmp_path / "zero_one.npy", (rng.random((N, 3)) < 0.5).astype(np.float32))
    np.save(tmp_path / "real.npy", rng.standard_normal((N, 2)))
    np.savez(tmp_path / "g.npz", src=src, dst=dst, y=whole)
    d = tmp_path / "dir"
    d.mkdir()
    np.save(d / "src.npy", src)
    np.save(d / "dst.npy", dst)
    np.save(d / "labels.npy", whole)
    return tmp_path


def partition(tmp_path: Path, *flags: str) -> tuple[int, Path]:
    out = tmp_path / "out"
    code = main(["-q", "partition", *flags, "--parts", "2", "--method", "random", "--out", str(out),
                 "--overwrite", "--no-progress"])
    return code, out


def stored_labels(out: Path) -> np.ndarray:
    """The labels of every node, in the input's order, from the folder's parts."""
    meta = load_partition_meta(out)
    parts = []
    for p in meta.parts:
        ids = np.load(out / f"part-{p.part_id:05d}" / "original_ids.npy")[:p.num_inner]
        parts.append((ids, np.load(out / f"part-{p.part_id:05d}" / "labels.npy")))
    y = np.zeros((N, *parts[0][1].shape[1:]), parts[0][1].dtype)
    for ids, labels in parts:
        y[ids] = labels
    return y


@pytest.mark.parametrize("source", ["--labels", "npz", "npy-dir"])
def test_regression_keeps_whole_valued_floats_as_targets(files, source):
    inputs = {"--labels": ["--input", str(files / "edges.npy"), "--labels", str(files / "whole.npy")],
              "npz": ["--input", str(files / "g.npz")], "npy-dir": ["--input", str(files / "dir")]}[source]
    code, out = partition(files, *inputs)
    assert code == EXIT_OK
    meta = load_partition_meta(out)
    assert (meta.label_kind, meta.num_classes) == ("class", 5)           # auto: class ids
    assert stored_labels(out).dtype == np.int64
    code, out = partition(files, *inputs, "--label-kind", "regression")
    assert code == EXIT_OK
    meta = load_partition_meta(out)
    assert (meta.label_kind, meta.num_classes) == ("regression", 1)
    y = stored_labels(out)
    assert y.dtype == np.float32 and y.shape == (N, 1)
    np.testing.assert_array_equal(y[:, 0], np.load(files / "whole.npy").astype(np.float32))


@pytest.mark.parametrize("labels, kind, stored", [("zero_one.npy", "regression", "regression"),
                                                  ("zero_one.npy", "multilabel", "multilabel"),
                                                  ("whole.npy", "class", "class"),
                                                  ("real.npy", "regression", "regression")])
def test_a_kind_the_labels_can_be_is_what_the_folder_records(files, labels, kind, stored):
    code, out = partition(files, "--input", str(files / "edges.npy"), "--labels", str(files / labels),
                          "--label-kind", kind)
    assert code == EXIT_OK and load_partition_meta(out).label_kind == stored


@pytest.mark.parametrize("name", ["g.npz", "dir"])
def test_read_graph_takes_the_label_kind(files, name):
    assert read_graph(files / name).label_kind == "class"
    g = read_graph(files / name, label_kind="regression")
    assert g.label_kind == "regression" and g.y.shape == (N, 1) and g.num_classes == 1


@pytest.mark.parametrize("flags, message", [
    (["--labels", "zero_one.npy", "--label-kind", "class"],
     "--label-kind class: the labels of {input} are a 0/1 multi-label matrix [N, C] (shape [40, 3]), not class "
     "ids, one per node [N]: use --label-kind multilabel or auto"),
    (["--labels", "whole.npy", "--label-kind", "multilabel"],
     "--label-kind multilabel: the labels of {input} are class ids, one per node [N] (shape [40])"),
    (["--labels", "real.npy", "--label-kind", "multilabel"],
     "a multi-label matrix holds only 0 and 1 (--label-kind multilabel reads the labels as a 0/1 multi-label "
     "matrix [N, C]: give such labels, or --label-kind auto to infer the kind from the values)"),
    (["--label-kind", "regression"], "--label-kind regression: {input} has no labels; add --labels L.npy, or drop "
                                     "--label-kind"),
    (["--label-kind", "ordinal"], "argument --label-kind: invalid choice: 'ordinal'"),
])
def test_labels_that_cannot_be_of_the_kind_are_one_line_and_exit_2(files, capsys, flags, message):
    flags = [str(files / f) if f.endswith(".npy") else f for f in flags]
    code, out = partition(files, "--input", str(files / "edges.npy"), *flags)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "error" in line]
    assert code == EXIT_USAGE and len(lines) == 1 and "Traceback" not in err, err
    assert message.format(input=files / "edges.npy") in lines[0], lines[0]
    assert not out.exists()


def test_the_flag_is_for_an_input_not_a_catalog_dataset(tmp_path, capsys):
    code, out = partition(tmp_path, "--dataset", "sbm-tiny", "--label-kind", "regression")
    err = capsys.readouterr().err
    assert code == EXIT_USAGE and "--label-kind applies to --input only" in err and not out.exists(), err
