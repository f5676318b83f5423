"""A partition family: ``gnn-dist partition --parts 2,4`` writes ``DIR/p2``, ``DIR/p4`` (one read,
one cut per P, one graph fingerprint) and ``DIR/family.json`` last; ``inspect`` lists and
verifies the members; the launcher and the ranks pick the member of their world size and refuse
a world size with no member in one line (exit code 2, before any rank starts)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from gnn_dist_cli.command import main
from partitioners.format import load_partition_meta
from partitioners.format.family import FAMILY_FILE, MissingMemberError, read_family, resolve_member


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _errors(err: str) -> list[str]:
    return [line for line in err.splitlines() if "error" in line]


@pytest.fixture(scope="module")
def family(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("fam") / "family"
    assert main(["partition", "--dataset", "sbm-tiny", "--parts", "4,2", "--out", str(out), "--no-progress",
                 "-q"]) == 0
    logging.getLogger("partitioners").handlers.clear()
    return out


def test_the_family_has_a_member_per_p_with_one_graph_fingerprint(family):
    fam = read_family(family)
    assert fam.parts == [2, 4] and sorted(p.name for p in family.iterdir()) == [FAMILY_FILE, "p2", "p4"]
    metas = {p: load_partition_meta(family / f"p{p}") for p in (2, 4)}
    assert {p: m.num_parts for p, m in metas.items()} == {2: 2, 4: 4}
    assert metas[2].graph_fingerprint == metas[4].graph_fingerprint == fam.graph_fingerprint is not None
    assert json.loads((family / FAMILY_FILE).read_text())["members"] == [
        {"num_parts": 2, "dir": "p2"}, {"num_parts": 4, "dir": "p4"}]


def test_inspect_lists_and_verifies_the_members(family, capsys):
    code, out, err = _run(capsys, "inspect", str(family), "--verify")
    assert code == 0, err
    assert "a partition family of 2 members" in err and "P=2" in err and "P=4" in err and "verify: OK" in err
    code, out, _ = _run(capsys, "inspect", str(family), "--json")
    assert code == 0 and [m["num_parts"] for m in json.loads(out)["members"]] == [2, 4]


def test_inspect_verify_finds_a_member_of_another_graph(family, tmp_path, capsys):
    import shutil

    copy = tmp_path / "fam"
    shutil.copytree(family, copy)
    doc = json.loads((copy / FAMILY_FILE).read_text())
    doc["graph_fingerprint"] = "0" * 64
    (copy / FAMILY_FILE).write_text(json.dumps(doc))
    code, _, err = _run(capsys, "inspect", str(copy), "--verify")
    assert code == 1 and "not a cut of the same graph" in err


def test_a_single_folder_reader_names_the_family(family):
    with pytest.raises(ValueError, match=r"is a partition family .*give one of its members"):
        load_partition_meta(family)


def test_the_ranks_resolve_their_world_size(family, monkeypatch):
    assert resolve_member(str(family), 4) == str(family / "p4")
    assert resolve_member(str(family / "p2"), 4) == str(family / "p2")   # a single folder: unchanged
    with pytest.raises(MissingMemberError, match=r"members P=2,4, none for world size 3; .*--parts 2,3,4"):
        resolve_member(str(family), 3)
    from gnn_dist.config_cli import UsageError, parse_run_config

    monkeypatch.setenv("WORLD_SIZE", "2")
    config, _ = parse_run_config(["--data", str(family)])
    assert config.data.data == str(family / "p2")
    monkeypatch.setenv("WORLD_SIZE", "8")
    with pytest.raises(UsageError) as exc:
        parse_run_config(["--data", str(family)])
    assert "\n" not in str(exc.value) and "none for world size 8" in str(exc.value)
    from gnn_dist.predict import UsageError as PredictUsage, _parse

    monkeypatch.setenv("WORLD_SIZE", "4")
    assert _parse(["--data", str(family), "--model-file", "m.pt", "--out", "o.npz"]).data == str(family / "p4")
    monkeypatch.setenv("WORLD_SIZE", "3")
    with pytest.raises(PredictUsage, match=r"^gnn_dist.predict: error: --data .*none for world size 3"):
        _parse(["--data", str(family), "--model-file", "m.pt", "--out", "o.npz"])


def test_train_refuses_a_world_size_with_no_member_in_one_line(family, capsys):
    code, _, err = _run(capsys, "train", "--data", str(family), "--nproc", "3")
    assert code == 2 and len(_errors(err)) == 1, err
    assert "members P=2,4, none for --nproc 3" in err and "gnn-dist partition --parts 2,3,4" in err


def test_train_picks_the_largest_member_that_fits_the_machine(family, monkeypatch):
    from gnn_dist_cli import world as cli_world

    monkeypatch.setattr(cli_world, "machine_cpus", lambda: 3)
    assert cli_world.one_node_nproc(str(family), None, 1) == 2
    monkeypatch.setattr(cli_world, "machine_cpus", lambda: 64)
    assert cli_world.one_node_nproc(str(family), None, 1) == 4
    assert cli_world.one_node_nproc(str(family), 2, 1) == 2


def test_elastic_world_sizes_need_their_members(family, capsys):
    from gnn_dist_cli.world import elastic_world_sizes

    assert elastic_world_sizes(str(family), (1, 2), 2, 1) == [2, 4]
    code, _, err = _run(capsys, "train", "--data", str(family), "--nnodes", "1:3", "--nproc", "2")
    assert code == 2 and len(_errors(err)) == 1 and "none for --nnodes 1:3 x --nproc 2: world size 6" in err
    code, _, err = _run(capsys, "train", "--data", str(family / "p4"), "--nnodes", "1:2", "--nproc", "2")
    assert code == 2 and "give a partition family" in err
    code, _, err = _run(capsys, "train", "--data", str(family), "--nnodes", "1:2")
    assert code == 2 and "needs --nproc N" in err
    code, _, err = _run(capsys, "train", "--data", str(family), "--rdzv-id", "x")
    assert code == 2 and "--rdzv-id applies to an elastic job; add --nnodes" in err


def test_elastic_rendezvous_stays_on_loopback_unless_told(family):
    import argparse

    from gnn_dist_cli.elastic import elastic_rendezvous

    args = argparse.Namespace(nnodes=(1, 2), nproc=2, rdzv_endpoint=None, rdzv_id=None, rdzv_conf=None)
    assert elastic_rendezvous(args) == ["--nnodes=1:2", "--rdzv-endpoint=127.0.0.1:29400", "--rdzv-id=gnn-dist-train",
                                        "--rdzv-backend=gnn-dist-loopback", "--local-addr=127.0.0.1"]
    args.rdzv_endpoint = "node0.cluster:29500"
    assert "--rdzv-backend=gnn-dist-c10d" in elastic_rendezvous(args)


def test_an_existing_family_is_replaced_only_with_overwrite(family, tmp_path, capsys):
    code, _, err = _run(capsys, "partition", "--dataset", "sbm-tiny", "--parts", "2,4", "--out", str(family))
    assert code == 2 and "already holds a partition family; pass --overwrite" in err
    code, _, err = _run(capsys, "partition", "--dataset", "sbm-tiny", "--parts", "2,4", "--out",
                        str(family / "p2"), "--overwrite")
    assert code == 2 and "is a single partition, not a partition family" in err
    code, _, err = _run(capsys, "partition", "--dataset", "sbm-tiny", "--parts", "2,4", "--part-weights", "1,1",
                        "--out", str(tmp_path / "w"))
    assert code == 2 and "--part-weights gives one weight per part of one cut" in err
