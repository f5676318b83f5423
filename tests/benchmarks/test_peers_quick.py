"""``benchmarks/peers.py`` (issue 35) without DGL or the peers' runs: the patches applied to a
copy of a checkout (a small stand-in tree here; the real checkouts when present), the conversion
of a DGL partition's node map to an assignment, gnn-dist's folder written from it node for node,
and the per-epoch figures of the probe's lines."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import peers_partition as pp  # noqa: E402
import peers_patches as patches  # noqa: E402
import peers_runs as runs  # noqa: E402

CHECKOUTS = {"pipegcn": os.environ.get("PEERS_PIPEGCN", "/tmp/peers/pipegcn"),
             "bnsgcn": os.environ.get("PEERS_BNSGCN", "/tmp/peers/bnsgcn")}


def _stand_in(root: Path) -> Path:
    """The lines of a PipeGCN checkout the patches touch, one file each."""
    files = {
        "main.py": "from helper.parser import *\nimport torch\n",
        "helper/utils.py": "import dgl\ndef load_data(dataset):\n    if dataset == 'reddit':\n        g = 1\n"
                           "    device = 'cuda'\n",
        "helper/parser.py": "p.add_argument('--norm', choices=['layer', 'batch'])\n",
        "helper/feature_buffer.py": "a = torch.zeros(1).pin_memory()\n" * 4 + "b = torch.zeros(1, pin_memory=True)\n",
        "module/model.py": "if norm is None:\n    pass\n",
        "module/layer.py": "fn.copy_src(src='h', out='m')\nfn.copy_src(src='h', out='m')\n",
        "train.py": "fn.copy_src(src='h', out='m')\ntorch.save(x, 'model/' + args.graph_name)\nx.to('cuda')\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_the_patches_change_exactly_their_lines(tmp_path):
    src = _stand_in(tmp_path / "pipegcn")
    lines = patches.prepare_tree(src, tmp_path / "cpu", "pipegcn", "cpu")
    cpu = tmp_path / "cpu"
    assert (cpu / "main.py").read_text().startswith("import peers_probe\n")
    assert "if dataset == 'peers':\n        g = peer_graph()\n    elif dataset == 'reddit':" in \
        (cpu / "helper/utils.py").read_text()
    assert "'cuda'" not in "".join(p.read_text() for p in cpu.rglob("*.py") if not p.name.startswith("peers_"))
    assert "pin_memory" not in (cpu / "helper/feature_buffer.py").read_text().replace("pin_memory=False", "")
    assert "copy_src" not in (cpu / "module/layer.py").read_text() + (cpu / "train.py").read_text()
    assert all((cpu / h).is_file() for h in patches.HELPERS) and len(lines) >= 10
    assert (src / "main.py").read_text() == "from helper.parser import *\nimport torch\n"   # the checkout untouched
    patches.prepare_tree(src, tmp_path / "cuda", "pipegcn", "cuda")
    assert "'cuda'" in (tmp_path / "cuda/train.py").read_text()       # CUDA keeps their devices


def test_a_checkout_the_patches_do_not_fit_is_refused(tmp_path):
    src = _stand_in(tmp_path / "pipegcn")
    (src / "module/layer.py").write_text("fn.copy_u(u='h', out='m')\n")
    with pytest.raises(patches.PatchError, match=r"layer.py: .*copy_src.* found 0 times, the patch expects 2"):
        patches.prepare_tree(src, tmp_path / "cpu", "pipegcn", "cpu")
    with pytest.raises(patches.PatchError, match="no main.py"):
        patches.prepare_tree(tmp_path / "nowhere", tmp_path / "x", "bnsgcn", "cpu")


@pytest.mark.parametrize("peer", sorted(CHECKOUTS))
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_the_patches_fit_the_real_checkouts(tmp_path, peer, device):
    checkout = Path(CHECKOUTS[peer])
    if not (checkout / "main.py").is_file():
        pytest.skip(f"no {peer} checkout at {checkout} (PEERS_{peer.upper()})")
    lines = patches.prepare_tree(checkout, tmp_path / peer, peer, device)
    assert len(lines) >= len(patches.patches_for(peer, device))


def test_dgl_node_map_to_assignment():
    orig = np.array([4, 0, 2, 1, 3])             # new id -> original id
    config = {"node_map": {"_N": [[0, 2], [2, 5]]}}
    assert pp.assignment_from_dgl(config, orig).tolist() == [0, 1, 1, 1, 0]
    with pytest.raises(ValueError, match="contiguous"):
        pp.assignment_from_dgl({"node_map": {"_N": [[0, 2], [3, 5]]}}, orig)
    with pytest.raises(ValueError, match="permutation"):
        pp.assignment_from_dgl(config, np.array([0, 0, 2, 1, 3]))


def test_the_folder_holds_the_assigned_nodes(tmp_path):
    graph = pp.make_graph(600, feature_dim=8, num_classes=3)
    looped = pp.with_self_loops(graph)
    assert looped.indices.size == graph.indices.size + graph.num_nodes     # one loop a node, none before
    assignment = np.random.default_rng(0).integers(0, 3, graph.num_nodes)
    folder = pp.write_gnn_dist_folder(looped, assignment, tmp_path / "parts")
    assert pp.parts_match(folder, assignment) == []
    moved = assignment.copy()
    moved[7] = (moved[7] + 1) % 3
    assert len(pp.parts_match(folder, moved)) == 2
    data = np.load(pp.write_graph_npz(graph, tmp_path / "g.npz"))
    assert data["src"].size == graph.indices.size and int(data["num_nodes"]) == 600


def test_epoch_figures_from_the_probe_lines():
    def line(rank, k, sent):
        return {"rank": rank, "wall": 10.0 + k * (2 if rank else 1), "cpu": 0.5 * k, "wait": 0.1 * k,
                "rss": 100 + k, "sent": sent * k}
    result = {"framework": "pipegcn", "pair": "sync", "ranks": [[line(1, k, 3) for k in range(6)],
                                                                  [line(0, k, 8) for k in range(6)]]}
    got = runs.epoch_figures(result, warmup=2)
    assert got["wall_s"] == pytest.approx(2.0) and got["cpu_s"] == pytest.approx(0.5)
    assert got["wait_s"] == pytest.approx(0.1) and got["halo_bytes"] == pytest.approx(8)   # rank 0's
    assert got["peak_rss_bytes"] == [105, 105]
    result["gnn_dist_halo_bytes"] = [50, 50, 7, 9, 11, 13]
    assert runs.epoch_figures(result, warmup=2)["halo_bytes"] == pytest.approx(10)
    with pytest.raises(ValueError, match="warm-up"):
        runs.epoch_figures(result, warmup=0)
    assert json.dumps(got)


def test_bad_flags_exit_2_with_one_line(tmp_path, capsys):
    import peers

    with pytest.raises(SystemExit) as exit_:
        peers.parse_args(["--pairs", "sync", "--dgl-venv", str(tmp_path)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("peers.py: --pipegcn DIR is required") and "\n" not in err
    (tmp_path / "pipegcn").mkdir()
    (tmp_path / "pipegcn" / "main.py").write_text("")
    with pytest.raises(SystemExit):
        peers.parse_args(["--pairs", "sync", "--pipegcn", str(tmp_path / "pipegcn"), "--dgl-venv", str(tmp_path)])
    assert "no bin/python; build it with" in capsys.readouterr().err


def _run_folder(root: Path, exit_code: int, ranks: int, output: str) -> Path:
    (root / "probe").mkdir(parents=True)
    (root / "output.txt").write_text(output)
    (root / "run.json").write_text(json.dumps({"command": "x", "cwd": "", "exit": exit_code, "run_wall_s": 1.0}))
    for rank in range(ranks):
        (root / "probe" / f"rank-{rank}.jsonl").write_text(
            "".join(json.dumps({"rank": rank, "wall": k, "cpu": k, "wait": 0, "rss": 1, "sent": 0}) + "\n"
                    for k in range(3)))
    return root


def test_a_finished_run_is_collected_from_its_folder(tmp_path):
    recipe = runs.Recipe("accuracy", layers=2, hidden=8, epochs=3, evaluate=True)
    bns = runs.PAIRS["bns-0.1"][1]
    folder = _run_folder(tmp_path / "a", 0, 2, "Epoch 00002 | Accuracy 70.00%\nTest Result | Accuracy 81.25%\n")
    got = runs.collect(folder, recipe, bns, 2)
    assert got["accuracy"] == pytest.approx(0.8125) and len(got["ranks"]) == 2
    ours = runs.PAIRS["bns-0.1"][0]
    folder = _run_folder(tmp_path / "b", 0, 2, "")
    (folder / "metrics.jsonl").write_text(json.dumps({"config": {}}) + "\n" + "".join(
        json.dumps({"epoch": e, "halo_bytes": 10, "test_acc": None if e < 2 else 0.9}) + "\n" for e in range(3)))
    got = runs.collect(folder, recipe, ours, 2)
    assert got["accuracy"] == 0.9 and got["gnn_dist_halo_bytes"] == [10, 10, 10]
    with pytest.raises(RuntimeError, match="failed \\(exit 1, 2 ranks stepped\\)"):
        runs.collect(_run_folder(tmp_path / "c", 1, 2, "boom"), recipe, bns, 2)
    with pytest.raises(RuntimeError, match="1 ranks stepped"):
        runs.collect(_run_folder(tmp_path / "d", 0, 1, ""), recipe, bns, 2)


def test_the_accuracy_model_reaches_both_commands_and_gcn_needs_bns_gcn_pairs(tmp_path, capsys):
    import peers

    with pytest.raises(SystemExit) as exit_:
        peers.parse_args(["--accuracy-model", "gcn", "--accuracy-pairs", "sync", "bns-0.1", "--dgl-venv", str(tmp_path)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err == ("peers.py: --accuracy-model gcn: pipegcn has no GCN (pairs sync); pass --accuracy-pairs "
                   "bns-0.1 bns-1.0")
    setup = runs.Setup(gnn_dist_data=tmp_path, dgl_parts=tmp_path, graph_npz=tmp_path / "g.npz",
                       meta={"n_feat": 4, "n_class": 2, "n_train": 3}, num_parts=2, threads=1, device="cpu",
                       venv_python=tmp_path / "python", trees={})
    recipe = runs.Recipe("accuracy", layers=2, hidden=8, epochs=3, evaluate=True, model="gcn")
    ours, theirs = runs.PAIRS["bns-0.1"]
    cmd = runs.gnn_dist_command(setup, recipe, ours, tmp_path / "m.jsonl")
    assert cmd[cmd.index("--model") + 1] == "gcn"
    assert cmd[cmd.index("--input-dropout") + 1] == "0.5" and "--precompute-first-layer" in cmd   # the peers' --use-pp
    peer = runs.peer_command(setup, recipe, theirs, 1234)
    assert peer[peer.index("--model") + 1] == "gcn" and "--use-pp" in peer
    sage = runs.gnn_dist_command(setup, runs.Recipe("accuracy", 2, 8, 3, True), ours, tmp_path / "m.jsonl")
    assert sage[sage.index("--sage-init") + 1] == "concat" and "--sage-init" not in cmd   # the peers' init
