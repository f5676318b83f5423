"""Mistakes that can be known from the flags, the folder, a checkpoint's header and a model are one
line and exit code 2 before any rank starts (``gnn_dist.train --validate``, what ``gnn-dist
train`` runs first), and the same line inside the ranks when a job is started by torchrun
directly:

- a first layer that cannot be precomputed, with ``--precompute-first-layer on`` (GAT);
- ``--resume`` from a checkpoint of another model (a GCN run resumed as ``--model sage``), or
  another optimizer;
- a folder without node features (the ranks' own check, before they load a part).
"""

from __future__ import annotations

import dataclasses
import re

import pytest

from gnn_dist.train import main
from partitioners import partition_graph
from partitioners.catalog import load_dataset


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("prelaunch")
    graph = load_dataset("sbm-tiny")
    partition_graph(graph, 1, "metis", str(root / "p1"), seed=0)
    partition_graph(dataclasses.replace(graph, x=None), 1, "metis", str(root / "nofeat"), seed=0)
    ckpt = root / "ckpt"
    assert main(["--data", str(root / "p1"), "--model", "gcn", "--hidden", "8", "--epochs", "1", "--checkpoint-dir",
                 str(ckpt), "--checkpoint-every", "1", "-q"]) == 0
    return root


def _one_line(capsys, code: int, pattern: str) -> None:
    err = capsys.readouterr().err.strip()
    lines = [line for line in err.splitlines() if "error" in line]
    assert code == 2 and len(lines) == 1 and re.search(pattern, lines[0]), err


def test_a_first_layer_that_cannot_be_precomputed(folders, capsys):
    code = main(["--data", str(folders / "p1"), "--model", "gat", "--precompute-first-layer", "on", "--validate"])
    _one_line(capsys, code, r"--precompute-first-layer on: the first layer of model 'gat' \(GATConv\) cannot be "
                            r"precomputed .* use --precompute-first-layer auto or off")
    assert main(["--data", str(folders / "p1"), "--model", "gcn", "--precompute-first-layer", "on",
                 "--validate"]) == 0


@pytest.mark.parametrize("flags, pattern", [
    (["--model", "sage"], r"checkpoint-000001\.pt: the checkpoint was written for another model: class='GCN' "
                          r"\(this run: 'GraphSAGE'\)"),
    (["--model", "gcn", "--hidden", "16"], r"another model: hidden_dim=8 \(this run: 16\)"),
    (["--model", "gcn", "--optimizer", "sgd"], r"written with optimizer='adam', this run uses optimizer='sgd'"),
])
def test_a_checkpoint_of_another_model_is_refused_before_launch(folders, capsys, flags, pattern):
    code = main(["--data", str(folders / "p1"), "--hidden", "8", *flags, "--checkpoint-dir", str(folders / "ckpt"),
                 "--resume", "--validate"])
    _one_line(capsys, code, pattern)


def test_the_same_model_resumes(folders, capsys):
    assert main(["--data", str(folders / "p1"), "--model", "gcn", "--hidden", "8", "--checkpoint-dir",
                 str(folders / "ckpt"), "--resume", "--validate"]) == 0


def test_a_folder_without_features_in_the_ranks(folders, capsys):
    """Started without the pre-launch check (as torchrun -m gnn_dist.train does): the rank's one line."""
    code = main(["--data", str(folders / "nofeat"), "--epochs", "1"])
    _one_line(capsys, code, r"nofeat: the partition has no node features to train on \(partition it with features")
    code = main(["--data", str(folders / "nofeat"), "--validate"])
    _one_line(capsys, code, r"no node features")



def test_a_typed_folder_needs_a_typed_model_before_launch(tmp_path, capsys):
    partition_graph(load_dataset("mag-tiny"), 1, "metis", str(tmp_path / "mag"), seed=0)
    code = main(["--data", str(tmp_path / "mag"), "--validate"])
    _one_line(capsys, code, r"mag: a typed \(heterogeneous\) partition: model 'gcn' trains homogeneous graphs; "
                            r"use --model rgcn")
