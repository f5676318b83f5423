"""The ranks check at load that the parts agree on the halo rows they exchange (issue 33).

A folder whose parts disagree but whose files all match the checksums in ``partition.json``
used to train and exit 0 (only ``gnn-dist inspect --verify`` noticed). Examples: one halo row's
global id changed, one peer's ``send_index`` slice permuted, or rows moved between peers in
``send_offsets``. Now ``load_partition`` refuses such a folder on every rank, before training,
with one line that names the two parts and their files. One 3-rank launch runs every case.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from corpus.corpus_utils import rehash
from mp_utils import run_ranks
from partitioners.format import load_partition_meta
from partitioners.format.verify import verify_partition
from partitioners.format.writer import write_partition
from train_helpers import ErrorLines, make_graph

P = 3


def _part(folder: Path, p: int, name: str) -> Path:
    return folder / f"part-{p:05d}" / name


def _overwrite(folder: Path, p: int, name: str, array: np.ndarray) -> None:
    """Write ``array`` over part ``p``'s ``name`` and re-checksum it in ``partition.json``."""
    np.save(_part(folder, p, name), array)
    rehash(folder, f"part-{p:05d}/{name}")


def _moved_halo_id(folder: Path) -> tuple[int, int]:
    """Change one halo row's global id to another id of the same owner, keeping the reader's rules
    (ascending, grouped by owner). Returns the pair ``(owner, reader)`` that no longer agrees."""
    meta = load_partition_meta(folder)
    starts = meta.part_starts()
    for q in range(P):
        ni = meta.parts[q].num_inner
        gids = np.load(_part(folder, q, "global_ids.npy"))
        hoff = np.load(_part(folder, q, "halo_offsets.npy"))
        for p in range(P):
            lo, hi = ni + int(hoff[p]), ni + int(hoff[p + 1])
            for k in range(lo, hi):
                below = gids[k - 1] + 1 if k > lo else starts[p]
                above = gids[k + 1] if k + 1 < hi else starts[p + 1]
                free = [v for v in range(int(below), int(above)) if v != gids[k]]
                if free:
                    gids[k] = free[0]
                    _overwrite(folder, q, "global_ids.npy", gids)
                    return p, q
    raise AssertionError("no halo row can take another id")


def _peer_with_rows(folder: Path, p: int, at_least: int) -> int:
    off = np.load(_part(folder, p, "send_offsets.npy"))
    return next(q for q in range(P) if off[q + 1] - off[q] >= at_least)


def _permuted_send(folder: Path) -> tuple[int, int]:
    """Reverse part 0's send slice for one peer (same rows, other order)."""
    q = _peer_with_rows(folder, 0, 2)
    send = np.load(_part(folder, 0, "send_index.npy"))
    off = np.load(_part(folder, 0, "send_offsets.npy"))
    send[off[q]:off[q + 1]] = send[off[q]:off[q + 1]][::-1].copy()
    _overwrite(folder, 0, "send_index.npy", send)
    return 0, q


def _moved_send_row(folder: Path) -> tuple[int, int]:
    """Move one row of part 1's send list between its peers 0 and 2 (``send_offsets`` only: the
    counts disagree with the peers' ``halo_offsets``). Returns the pair ``(1, 0)``."""
    off = np.load(_part(folder, 1, "send_offsets.npy"))  # [0, a, a, S]: part 1 sends itself nothing
    off[1:3] += -1 if off[1] > 0 else 1
    _overwrite(folder, 1, "send_offsets.npy", off)
    return 1, 0


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("halo-consistency")
    good = root / "good"
    g = make_graph(num_nodes=60, seed=3)
    write_partition(g, np.random.default_rng(3).integers(0, P, g.num_nodes), P, good,
                    method="test", method_params={}, seed=0)
    out: dict[str, Any] = {"good": str(good)}
    for name, corrupt in (("gids", _moved_halo_id), ("send", _permuted_send), ("count", _moved_send_row)):
        folder = shutil.copytree(good, root / name)
        out[name] = str(folder)
        out[f"{name}_pair"] = corrupt(folder)
    return out


def _load_cases(rank: int, world_size: int, folders: dict[str, Any]) -> dict[str, Any]:
    """Load each folder in turn on this rank: case -> ("ok", halo ids received == own halo ids)
    or (exception type, message); then train on the moved-id folder through ``main``."""
    import torch
    import torch.distributed as dist

    from gnn_dist import load_partition
    from gnn_dist.train import main

    out: dict[str, Any] = {}
    for case, folder, verify in (("good", "good", True), ("good_noverify", "good", False),
                                 ("gids", "gids", True), ("gids_noverify", "gids", False),
                                 ("send", "send", False), ("send_verify", "send", True),
                                 ("count", "count", False)):
        try:
            part = load_partition(folders[folder], verify=verify)
            gids = part.global_ids.to(torch.float64)
            got = part.exchange(gids[:part.num_inner].unsqueeze(1))[:, 0]
            out[case] = ("ok", bool(torch.equal(got, gids)))
        except Exception as exc:  # noqa: BLE001 - the test asserts on the type and message
            out[case] = (type(exc).__name__, str(exc))
    with ErrorLines("gnn_dist.train") as errors:
        code = main(["--data", folders["gids"], "--model", "gcn", "--hidden", "4", "--epochs", "1",
                     "--log-every", "0"])
    out["train"] = (code, errors.lines)
    t = torch.ones(1)
    dist.all_reduce(t)  # no rank was left in a collective
    out["alive"] = int(t.item())
    return out


@pytest.fixture(scope="module")
def results(folders) -> list[dict[str, Any]]:
    return run_ranks(_load_cases, P, folders, timeout=120, grace=30, pg_timeout=60)


def _refused(results: list[dict[str, Any]], case: str) -> str:
    """Every rank raised the same one-line HaloMismatchError; returns it."""
    kinds = {r[case][0] for r in results}
    messages = {r[case][1] for r in results}
    assert kinds == {"HaloMismatchError"}, [r[case] for r in results]
    assert len(messages) == 1, messages
    message = messages.pop()
    assert "\n" not in message
    return message


def test_a_consistent_folder_loads_and_exchanges_the_right_rows(results, folders):
    assert verify_partition(folders["good"]) == []
    for r in results:
        assert r["good"] == ("ok", True) and r["good_noverify"] == ("ok", True)
        assert r["alive"] == P


@pytest.mark.parametrize("case", ["gids", "gids_noverify"])
def test_a_moved_halo_id_is_refused_on_every_rank(results, folders, case):
    p, q = folders["gids_pair"]
    assert verify_partition(folders["gids"]), "the corruption must be one that --verify finds"
    line = _refused(results, case)
    assert line.startswith(f"{folders['gids']}: the parts disagree on their halo rows")
    assert f"rows part {p} sends to part {q} (part-{p:05d}/send_index.npy)" in line
    assert f"part {q}'s halo rows from part {p} (part-{q:05d}/global_ids.npy" in line
    assert f"gnn-dist inspect {folders['gids']} --verify" in line and "re-partition" in line


def test_a_permuted_send_slice_is_refused_on_every_rank(results, folders):
    p, q = folders["send_pair"]
    line = _refused(results, "send")
    assert f"rows part {p} sends to part {q} (part-{p:05d}/send_index.npy)" in line
    assert f"(part-{q:05d}/global_ids.npy, in halo_offsets.npy order)" in line
    # the reader's value checks (verify=True) find this one first, also on every rank
    for r in results:
        kind, message = r["send_verify"]
        assert kind in ("PartitionFormatError", "ValueError") and "send_index.npy" in message


def test_rows_moved_between_peers_are_refused_naming_the_offsets(results, folders):
    p, _ = folders["count_pair"]
    line = _refused(results, "count")
    assert f"part-{p:05d}/send_offsets.npy" in line and "halo_offsets.npy" in line
    assert f"part {p} sends" in line and "expects" in line


def test_training_on_an_inconsistent_folder_exits_2_with_one_line(results, folders):
    p, q = folders["gids_pair"]
    (code0, lines0), *others = [r["train"] for r in results]
    assert code0 == 2 and all(code == 2 and lines == [] for code, lines in others), [r["train"] for r in results]
    assert len(lines0) == 1 and f"part {p}" in lines0[0] and f"part {q}" in lines0[0], lines0
    assert "disagree on their halo rows" in lines0[0]
