"""R-GCN runs through ``gnn_dist.train`` (what ``gnn-dist train`` runs) on typed folders:

- mistakes known from the flags and the folder are one line and exit code 2 before any rank
  starts (a homogeneous model on a typed folder and the reverse, a featureless type without
  ``--embedding-dim``, ``--target-type`` naming another type, ``--embedding-dim`` on a
  homogeneous folder);
- a checkpointed run resumed in fresh processes continues exactly as the uninterrupted one, also
  on another cut of the same graph with another number of ranks (the learnable rows and their
  Adam moments are saved by id; the checkpoint as a run on a typed folder cut before fingerprint
  scheme 2 wrote it, verified by the folder's scheme-1 digest), with ``--select best-val`` (the
  best epoch's rows too), and on
  the cut ``--repartition-on-resize`` makes from the P=2 folder for 3 ranks (a typed re-cut);
- every schedule and wire format trains it: stale, boundary sampling, compressed halos,
  recomputation.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from gnn_dist.checkpoints import load_checkpoint, save_checkpoint
from gnn_dist.train import main
from partitioners.format import load_partition_meta
from partitioners.format.graph_digest import SCHEME_1_FIELD
from mp_utils import run_ranks
from train_helpers import run_train_jobs

RGCN = ["--model", "rgcn", "--embedding-dim", "8", "--hidden", "8", "--lr", "0.01", "--dropout", "0.5",
        "--seed", "3", "--log-every", "0"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    from partitioners.api import partition_graph
    from partitioners.catalog import load_dataset

    root = tmp_path_factory.mktemp("rgcn_runs")
    mag = load_dataset("mag-tiny")
    for parts in (1, 2, 3):
        partition_graph(mag, parts, "metis", str(root / f"mag{parts}"), seed=0)
    partition_graph(load_dataset("sbm-tiny"), 1, "metis", str(root / "sbm"), seed=0)
    return root


def _one_line(capsys, code: int, pattern: str) -> None:
    err = capsys.readouterr().err.strip()
    lines = [line for line in err.splitlines() if "error" in line]
    assert code == 2 and len(lines) == 1 and re.search(pattern, lines[0]), err


@pytest.mark.parametrize("folder, flags, pattern", [
    ("mag1", ["--model", "gcn"], r"mag1: a typed \(heterogeneous\) partition: model 'gcn' trains homogeneous "
                                 r"graphs; use --model rgcn"),
    ("sbm", ["--model", "rgcn"], r"sbm: model 'rgcn' trains typed \(heterogeneous\) partitions; this one is "
                                 r"homogeneous"),
    ("mag1", ["--model", "rgcn"], r"node type\(s\) author, institution, field have no features: give them "
                                  r"learnable rows with --embedding-dim D"),
    ("mag1", ["--model", "rgcn", "--embedding-dim", "8", "--target-type", "author"],
     r"the partition was cut for target type 'paper'.*re-partition with --target-type author"),
    ("mag1", ["--model", "rgcn", "--embedding-dim", "8", "--target-type", "venue"],
     r"--target-type 'venue' is not a node type of the partition \(types: paper, author, institution, field\)"),
    ("sbm", ["--model", "gcn", "--embedding-dim", "8"], r"--embedding-dim applies to typed partitions"),
    ("mag1", ["--model", "gcn", "--num-bases", "2"], r"--num-bases: 2 applies to models rgcn, not 'gcn'"),
])
def test_mistakes_are_one_line_before_launch(folders, capsys, folder, flags, pattern):
    _one_line(capsys, main(["--data", str(folders / folder), *flags, "--validate"]), pattern)


def test_the_checks_pass_a_good_run(folders):
    assert main(["--data", str(folders / "mag1"), *RGCN, "--num-bases", "2", "--target-type", "paper",
                 "--validate"]) == 0


def losses(path: Path) -> list[float]:
    return [r["train_loss"] for r in map(json.loads, path.read_text().splitlines()) if "epoch" in r and "event" not in r]


def test_resume_is_exact_on_the_same_and_on_another_cut(folders, tmp_path, monkeypatch):
    def job(parts: int, epochs: int, name: str, *extra: str) -> list[str]:
        return ["--data", str(folders / f"mag{parts}"), *RGCN, "--epochs", str(epochs), "--select", "best-val",
                "--checkpoint-dir", str(tmp_path / name), "--checkpoint-every", "3",
                "--metrics", str(tmp_path / f"{name}.jsonl"), *extra]

    assert run_ranks(run_train_jobs, 2, [job(2, 6, "straight"), job(2, 3, "cut")], timeout=240) == [[None, None]] * 2
    for other in ("other", "recut"):
        (tmp_path / other).mkdir()
        for f in (tmp_path / "cut").glob("checkpoint-*"):
            (tmp_path / other / f.name).write_bytes(f.read_bytes())
        (tmp_path / other / "latest").write_text("checkpoint-000003.pt\n")
        (tmp_path / f"{other}.jsonl").write_bytes((tmp_path / "cut.jsonl").read_bytes())
    # "other" resumes a checkpoint as a run on a typed folder cut before fingerprint scheme 2 wrote
    # it (the graph's scheme-1 digest, no scheme): mag3 records that digest, so no flag is needed
    older = load_checkpoint(tmp_path / "other" / "checkpoint-000003.pt")
    del older["graph_fingerprint_scheme"], older[SCHEME_1_FIELD]
    older["graph_fingerprint"] = load_partition_meta(folders / "mag2").scheme_1_graph_fingerprint
    save_checkpoint(tmp_path / "other", 3, older)
    assert run_ranks(run_train_jobs, 2, [job(2, 6, "cut", "--resume")], timeout=240) == [[None]] * 2
    monkeypatch.setenv("WORLD_SIZE", "3")   # as torchrun sets it: --repartition-on-resize cuts mag2 for 3 ranks
    assert run_ranks(run_train_jobs, 3, [job(3, 6, "other", "--resume"),
                                         job(2, 6, "recut", "--resume", "--repartition-on-resize")],
                     timeout=240) == [[None, None]] * 3
    straight = losses(tmp_path / "straight.jsonl")
    assert len(straight) == 6 and straight[3:] != straight[:3]
    for name in ("cut", "other", "recut"):
        got = losses(tmp_path / f"{name}.jsonl")
        assert len(got) == 6 and all(math.isclose(a, b, rel_tol=1e-5) for a, b in zip(got, straight)), (name, got)
    recut = load_partition_meta(tmp_path / "recut" / "partitions" / "p3")   # a typed ldg cut of mag2's graph
    assert (recut.num_parts, recut.method, recut.hetero["relations"]) == \
        (3, "ldg", load_partition_meta(folders / "mag2").hetero["relations"])
    assert recut.graph_fingerprint == load_partition_meta(folders / "mag2").graph_fingerprint
    saved = load_checkpoint(tmp_path / "cut" / "checkpoint-000003.pt")   # a typed run records its scheme
    assert (saved["graph_fingerprint"], saved["graph_fingerprint_scheme"], saved[SCHEME_1_FIELD]) == \
        (recut.graph_fingerprint, 2, recut.scheme_1_graph_fingerprint)
    assert [p.name for p in (tmp_path / "recut" / "partitions").iterdir()] == ["p3"]   # no scratch left


SCHEDULES = {"stale": ["--pipeline", "stale"], "sampled": ["--boundary-sample-rate", "0.5"],
             "int8": ["--halo-dtype", "int8"], "recompute": ["--recompute", "layers"],
             "overlap-bf16": ["--pipeline", "overlap", "--halo-dtype", "bf16"]}


def test_every_schedule_and_wire_format_trains_it(folders, tmp_path):
    jobs = [["--data", str(folders / "mag2"), *RGCN, "--epochs", "8", "--metrics", str(tmp_path / f"{name}.jsonl"),
             *flags] for name, flags in SCHEDULES.items()]
    assert run_ranks(run_train_jobs, 2, jobs, timeout=300) == [[None] * len(jobs)] * 2   # one launch, every job
    for name in SCHEDULES:
        got = losses(tmp_path / f"{name}.jsonl")
        assert len(got) == 8 and all(math.isfinite(v) for v in got) and got[-1] < got[0], (name, got)


def predict_job(rank: int, world_size: int, data: str, model_file: str) -> dict | None:
    from gnn_dist.predict import predict

    got = predict(data, model_file)
    return None if got is None else got.arrays()


def test_a_saved_model_predicts_the_same_on_any_cut(folders, tmp_path):
    """The model file holds the learnable rows by id: predicted on 1 or 3 parts, the target type's
    probabilities are those of the 2-part run, and their test accuracy its final one."""
    import numpy as np
    from partitioners.catalog import load_dataset

    model, metrics = tmp_path / "rgcn.model", tmp_path / "m.jsonl"
    argv = ["--data", str(folders / "mag2"), *RGCN, "--epochs", "6", "--save-model", str(model),
            "--metrics", str(metrics)]
    assert run_ranks(run_train_jobs, 2, [argv], timeout=240) == [[None]] * 2
    one = run_ranks(predict_job, 1, str(folders / "mag1"), str(model), timeout=240)[0]
    three = run_ranks(predict_job, 3, str(folders / "mag3"), str(model), timeout=240)[0]
    mag = load_dataset("mag-tiny")
    assert str(one["node_type"]) == "paper" and list(one["node_ids"]) == list(range(mag.num_nodes_dict["paper"]))
    np.testing.assert_allclose(three["probabilities"], one["probabilities"], rtol=1e-5, atol=1e-6)
    test = mag.masks["paper"]["test"]
    acc = float((one["predicted"][test] == mag.labels["paper"][test]).mean())
    final = [json.loads(line) for line in metrics.read_text().splitlines()][-1]
    assert math.isclose(acc, final["test_acc"], abs_tol=1e-9), (acc, final)
