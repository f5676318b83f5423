"""The max-volume refinement (partitioners.methods.refine_maxvol): it lowers the busiest link,
the largest halo volume one part sends or receives, within the balance bound."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from partitioners import Graph, load_partition_meta
from gnn_dist_cli.command import EXIT_OK, EXIT_USAGE, main
from partitioners.format import verify_partition
from partitioners.methods import assign_parts, refine_max_volume
from partitioners.methods.refine import initial_state
from partitioners.methods.refine_maxvol import _after_move, link_volumes
from partitioners.methods.targets import part_bounds
from partitioners.quality import partition_quality
from partitioners.synthetic import rmat_graph


def busiest(q: dict) -> int:
    return max(q["max_send_volume"], q["max_recv_volume"])


@pytest.fixture(scope="module")
def rmat():
    return rmat_graph(1 << 11, 8 << 11, feature_dim=1, seed=0)


def test_lowers_the_busiest_link_below_metis_within_balance(rmat):
    P = 8
    metis = assign_parts(rmat, P, "metis")
    out = refine_max_volume(rmat, metis, P)
    before, after = partition_quality(rmat, metis, P), partition_quality(rmat, out, P)
    assert busiest(after) < 0.95 * busiest(before)
    assert after["comm_volume"] <= before["comm_volume"]               # default: total not above
    bound = part_bounds(np.ones((1, rmat.num_nodes), np.int64), P, 0.03)[0]
    assert np.all(np.bincount(out, minlength=P) <= bound)


def test_weighted_parts_keep_their_bounds(rmat):
    weights = (2, 1, 1)
    a = assign_parts(rmat, 3, "metis", part_weights=weights)
    out = refine_max_volume(rmat, a, 3, part_weights=weights, max_total_increase=0.03)
    q = partition_quality(rmat, out, 3, part_weights=weights)
    assert q["node_balance"] <= 1.03 + 1e-9
    assert busiest(q) <= busiest(partition_quality(rmat, a, 3))
    assert q["comm_volume"] <= 1.03 * partition_quality(rmat, a, 3)["comm_volume"]


def test_link_volumes_match_the_quality_report(rmat):
    a = assign_parts(rmat, 4, "random", seed=1)
    state = initial_state(rmat, a.copy(), 4, ("nodes",), 0.03, None)
    send, recv = link_volumes(state.cnt, state.part)
    q = partition_quality(rmat, a, 4)
    assert send.tolist() == q["send_per_part"] and recv.tolist() == q["halo_per_part"]


@given(seed=st.integers(0, 2**31), n=st.integers(2, 25), num_parts=st.integers(2, 5))
@settings(max_examples=30, deadline=None)
def test_move_deltas_are_exact(seed: int, n: int, num_parts: int) -> None:
    """The send/receive volumes after every single move equal the brute-force ones."""
    rng = np.random.default_rng(seed)
    m = int(rng.integers(0, 4 * n))
    g = Graph.from_edges(rng.integers(0, n, m), rng.integers(0, n, m), n)
    a = rng.integers(0, num_parts, n).astype(np.int32)
    state = initial_state(g, a.copy(), num_parts, ("nodes",), 0.03, None)
    send, recv = link_volumes(state.cnt, state.part)
    for v in range(n):
        send_b, recv_b = _after_move(state, v, send, recv)
        for b in range(num_parts):
            if b == a[v]:
                continue
            moved = a.copy()
            moved[v] = b
            q = partition_quality(g, moved, num_parts)
            assert send_b[b].tolist() == q["send_per_part"] and recv_b[b].tolist() == q["halo_per_part"]


def cli(capsys, *argv):
    code = main([str(x) for x in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_max_volume_refine_writes_a_valid_folder(capsys, tmp_path):
    code, out, err = cli(capsys, "partition", "--dataset", "sbm-tiny", "--parts", 4, "--refine",
                         "--refine-objective", "max-volume", "--out", tmp_path / "o", "--no-progress", "--json")
    assert code == EXIT_OK, err
    report = json.loads(out)
    assert report["method_params"] == {"balance": ["nodes"], "refine": True, "refine_objective": "max-volume"}
    assert load_partition_meta(tmp_path / "o").method_params["refine_objective"] == "max-volume"
    assert re.search(r"per-part halo volume \(rows per layer\): send max \d+ mean [\d.]+  receive max \d+", err)
    assert verify_partition(tmp_path / "o") == []


def test_cli_refuses_an_objective_without_refine(capsys, tmp_path):
    code, out, err = cli(capsys, "partition", "--dataset", "sbm-tiny", "--parts", 4,
                         "--refine-objective", "max-volume", "--out", tmp_path / "o", "--no-progress")
    assert code == EXIT_USAGE and out == "" and len(err.strip().splitlines()) == 1
    assert "--refine-objective max-volume applies to --refine; add --refine" in err


def test_cli_refuses_an_unknown_objective(capsys, tmp_path):
    code, out, err = cli(capsys, "partition", "--dataset", "sbm-tiny", "--parts", 4, "--refine",
                         "--refine-objective", "maxvol", "--out", tmp_path / "o", "--no-progress")
    assert code == EXIT_USAGE and len(err.strip().splitlines()) == 1
    assert re.search(r"argument --refine-objective: invalid choice: 'maxvol'", err)
