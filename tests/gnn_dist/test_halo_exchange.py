"""Halo exchange on 2-4 gloo ranks against a single-process reference.

A plan is built by hand from a random node -> part assignment and random edges (the same rules
as the on-disk format: halo rows grouped by owner ascending, then by global id; send lists in
the reader's halo order). Each launch runs every scenario for one world size, so the spawn cost
is paid once per world size.
"""

from __future__ import annotations

import math
import os
import signal
from typing import Any

import numpy as np
import pytest
import torch
import torch.distributed as dist
from torch.autograd.gradcheck import GradcheckError

from halo_plans import exchanger_for, make_plan
from mp_utils import RankFailure, launch_ranks, run_ranks

from gnn_dist.distributed import HaloExchanger, HaloSpecError

# ------------------------------------------------------------------------------------ plans


# ------------------------------------------------------------------- gradcheck helper functions


class _OwnRows(torch.autograd.Function):
    """Replicated ``x [N, F]`` -> this rank's rows ``x[rows]``; the backward sums every rank's
    gradient into the full ``[N, F]``, so each rank gets the gradient of the global function."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        ctx.rows, ctx.num = rows, x.shape[0]
        return x.index_select(0, rows)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        full = grad.new_zeros((ctx.num, *grad.shape[1:]))
        full.index_add_(0, ctx.rows, grad)
        dist.all_reduce(full)
        return full, None


class _GatherReplicated(torch.autograd.Function):
    """``y [R_r, F]`` -> every rank's ``y`` padded to ``R_max`` rows and concatenated (the
    same tensor on all ranks); the backward keeps the rank's own slice (valid because the
    upstream gradient is the same on every rank, as in gradcheck)."""

    @staticmethod
    def forward(ctx: Any, y: torch.Tensor, r_max: int) -> torch.Tensor:
        rank, world = dist.get_rank(), dist.get_world_size()
        padded = y.new_zeros((r_max, *y.shape[1:]))
        padded[: y.shape[0]] = y
        parts = [torch.empty_like(padded) for _ in range(world)]
        dist.all_gather(parts, padded)
        ctx.rank, ctx.rows, ctx.r_max = rank, y.shape[0], r_max
        return torch.cat(parts)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        start = ctx.rank * ctx.r_max
        return grad[start:start + ctx.rows].clone(), None


# ---------------------------------------------------------------------- the per-rank scenarios


def _scenarios(world_size: int) -> list[dict[str, Any]]:
    cases = [dict(name="random", nodes=40, edges=120, seed=11),
             dict(name="dense", nodes=12, edges=200, seed=12)]
    if world_size >= 3:
        cases.append(dict(name="empty+nohalo", nodes=30, edges=90, seed=13, empty=(1,), no_halo=(0,)))
    else:
        cases.append(dict(name="nohalo", nodes=20, edges=60, seed=13, no_halo=(0,)))
    cases.append(dict(name="disconnected", nodes=10, edges=0, seed=14))
    for c in cases:
        c["plans"] = make_plan(world_size, c["nodes"], c["edges"], c["seed"],
                               empty=c.get("empty", ()), no_halo=c.get("no_halo", ()))
    return cases


def _global_tensors(case: dict[str, Any], world_size: int, feat: tuple[int, ...],
                    dtype: torch.dtype) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Global features and one upstream gradient per rank output, small integers (exact in
    float16/bfloat16 and under summation)."""
    g = torch.Generator().manual_seed(case["seed"] * 7 + len(feat))
    x = torch.randint(-8, 9, (case["nodes"], *feat), generator=g).to(dtype)
    grads = []
    for p in range(world_size):
        rows = case["plans"][p]["inner"].size + case["plans"][p]["halo"].size
        grads.append(torch.randint(-4, 5, (rows, *feat), generator=g).to(dtype))
    return x, grads


_DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16)
_FEATS = ((5,), (2, 3), (0,))


def _run_all(rank: int, world_size: int) -> dict[str, Any]:
    out: dict[str, Any] = {"exchange": {}, "stats": {}, "repr": None}
    for case in _scenarios(world_size):
        plan = case["plans"][rank]
        ex = exchanger_for(plan)
        out["repr"] = repr(ex)
        inner = torch.from_numpy(plan["inner"])
        for dtype in _DTYPES:
            for feat in _FEATS:
                x, grads = _global_tensors(case, world_size, feat, dtype)
                h = x.index_select(0, inner).requires_grad_(True)
                ex.reset_stats()
                y = ex.exchange(h)
                fwd = (ex.last_bytes_sent, ex.last_bytes_received)
                y.backward(grads[rank])
                bwd = (ex.last_bytes_sent, ex.last_bytes_received)
                out["exchange"][(case["name"], str(dtype), feat)] = (y.detach(), h.grad)
                out["stats"][(case["name"], str(dtype), feat)] = {
                    "forward": fwd, "backward": bwd, "total": (ex.bytes_sent, ex.bytes_received),
                    "calls": (ex.num_forward, ex.num_backward)}
        ex.reset_stats()
        out["stats_after_reset"] = ex.stats()
    # a non-contiguous input and a second use of the same exchanger in one graph
    case = _scenarios(world_size)[0]
    plan = case["plans"][rank]
    ex = exchanger_for(plan)
    x, grads = _global_tensors(case, world_size, (4,), torch.float64)
    h = x.index_select(0, torch.from_numpy(plan["inner"])).t().contiguous().t().requires_grad_(True)
    y = ex.exchange(h) + 2 * ex.exchange(h)
    y.backward(grads[rank])
    out["twice"] = (y.detach(), h.grad)
    # gradcheck of the global function X -> [exchange output of every rank]
    if world_size <= 3:
        plans = make_plan(world_size, 9, 30, seed=21)
        ex = exchanger_for(plans[rank])
        rows = torch.from_numpy(plans[rank]["inner"])
        r_max = max(p["inner"].size + p["halo"].size for p in plans)
        x = torch.randn(9, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(3),
                        requires_grad=True)

        def f(x: torch.Tensor) -> torch.Tensor:
            return _GatherReplicated.apply(ex.exchange(_OwnRows.apply(x, rows)), r_max)

        try:
            out["gradcheck"] = torch.autograd.gradcheck(f, (x,), eps=1e-6, atol=1e-8, rtol=1e-6)
        except GradcheckError as exc:  # reported by the parent
            out["gradcheck"] = str(exc)
    # a plan whose halo counts disagree with the peers' send counts
    bad = dict(plan)
    offsets = list(plan["halo_offsets"])
    if rank == 0:
        offsets = offsets[:2] + [o + 1 for o in offsets[2:]]  # one more row from rank 1
    bad["halo_offsets"] = offsets
    try:
        exchanger_for(bad)
        out["mismatch"] = None
    except HaloSpecError as exc:
        out["mismatch"] = str(exc)
    return out


@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_exchange_matches_single_process_reference(world_size: int) -> None:
    results = run_ranks(_run_all, world_size, timeout=120)
    for case in _scenarios(world_size):
        plans = case["plans"]
        for dtype in _DTYPES:
            for feat in _FEATS:
                key = (case["name"], str(dtype), feat)
                x, grads = _global_tensors(case, world_size, feat, torch.float64)
                x.requires_grad_(True)
                loss = sum((x[torch.from_numpy(np.concatenate([p["inner"], p["halo"]]))] * g).sum()
                           for p, g in zip(plans, grads))
                (ref_grad,) = torch.autograd.grad(loss, x) if x.numel() else (torch.zeros_like(x),)
                row_bytes = math.prod(feat) * torch.empty((), dtype=dtype).element_size()
                for rank, res in enumerate(results):
                    y, grad = res["exchange"][key]
                    p = plans[rank]
                    gids = torch.from_numpy(np.concatenate([p["inner"], p["halo"]]))
                    assert y.dtype == dtype and y.shape == (gids.numel(), *feat), key
                    # the forward is a copy: bitwise equal to gathering the global tensor
                    assert torch.equal(y.double(), x.detach()[gids]), (rank, key)
                    # integer-valued data: the backward is exact in every dtype
                    assert grad.dtype == dtype
                    assert torch.equal(grad.double(), ref_grad[torch.from_numpy(p["inner"])]), (rank, key)
                    num_send, num_halo = p["send_index"].size, p["halo"].size
                    stats = res["stats"][key]
                    assert stats["forward"] == (num_send * row_bytes, num_halo * row_bytes)
                    assert stats["backward"] == (num_halo * row_bytes, num_send * row_bytes)
                    assert stats["total"] == ((num_send + num_halo) * row_bytes,) * 2
                    assert stats["calls"] == (1, 1)
    assert all(v == 0 for v in results[0]["stats_after_reset"].values())
    assert results[0]["repr"].startswith(f"HaloExchanger(rank=0, world_size={world_size}")

    # the same exchanger used twice in one graph; non-contiguous input
    case = _scenarios(world_size)[0]
    x, grads = _global_tensors(case, world_size, (4,), torch.float64)
    x.requires_grad_(True)
    gid = [torch.from_numpy(np.concatenate([p["inner"], p["halo"]])) for p in case["plans"]]
    loss = sum((3 * x[i] * g).sum() for i, g in zip(gid, grads))
    (ref,) = torch.autograd.grad(loss, x)
    for rank, res in enumerate(results):
        y, grad = res["twice"]
        assert torch.equal(y, 3 * x.detach()[gid[rank]])
        assert torch.equal(grad, ref[torch.from_numpy(case["plans"][rank]["inner"])])

    if world_size <= 3:
        for res in results:
            assert res["gradcheck"] is True, res["gradcheck"]

    # mismatched lists: every rank raises, naming the pair
    for res in results:
        assert res["mismatch"] is not None
        assert "rank 0 expects" in res["mismatch"] and "from rank 1" in res["mismatch"]


def test_plan_builder_covers_edge_cases() -> None:
    """The hand-built plans really contain the cases the multi-rank test claims to cover."""
    plans = make_plan(3, 30, 90, 13, empty=(1,), no_halo=(0,))
    assert plans[1]["inner"].size == 0 and plans[1]["send_index"].size == 0
    assert plans[1]["halo"].size == 0          # an empty part has no destinations, so no halo
    assert plans[0]["halo"].size == 0 and plans[0]["inner"].size > 0
    assert plans[0]["send_index"].size > 0     # but the others read from part 0
    assert plans[2]["halo"].size > 0
    for p, plan in enumerate(plans):           # no self-sends, offsets consistent
        assert plan["send_offsets"][p + 1] == plan["send_offsets"][p]
        assert plan["halo_offsets"][p + 1] == plan["halo_offsets"][p]
        for q in range(3):
            sent = plan["inner"][plan["send_index"][plan["send_offsets"][q]:plan["send_offsets"][q + 1]]]
            recv = plans[q]["halo"][plans[q]["halo_offsets"][p]:plans[q]["halo_offsets"][p + 1]]
            assert np.array_equal(sent, recv)
    dense = make_plan(3, 12, 200, 12)          # the "dense" case: rows sent to several peers
    assert any(np.unique(p["send_index"], return_counts=True)[1].max(initial=0) >= 2 for p in dense)


# -------------------------------------------------------------------------- failure behaviour


def _raise_on_rank_one(rank: int, world_size: int) -> None:
    plan = make_plan(world_size, 20, 60, seed=5)[rank]
    ex = exchanger_for(plan)
    if rank == 1:
        raise ValueError("rank one fails on purpose")
    h = torch.ones(plan["inner"].size, 3)
    for _ in range(1000):  # the peers block here until rank 1's death is noticed
        ex.exchange(h)


def test_raising_rank_fails_fast_with_its_error() -> None:
    with pytest.raises(RankFailure, match=r"rank 1: raised ValueError: rank one fails on purpose") as info:
        run_ranks(_raise_on_rank_one, 2, timeout=60, grace=10)
    outcomes = info.value.outcomes
    assert "_raise_on_rank_one" in outcomes[1].traceback
    assert isinstance(info.value.__cause__, ValueError)
    # nobody waited for the 60 s timeout: the peer noticed and failed on its own
    assert all(o.killed_by_harness is None for o in outcomes)
    assert outcomes[0].exitcode == 1 and outcomes[0].exc_type is not None


def _killed_mid_job(rank: int, world_size: int) -> int:
    plan = make_plan(world_size, 30, 90, seed=6)[rank]
    ex = exchanger_for(plan)
    h = torch.ones(plan["inner"].size, 4, requires_grad=True)
    for step in range(10**6):
        if rank == world_size - 1 and step == 5:
            os.kill(os.getpid(), signal.SIGKILL)
        ex.exchange(h).sum().backward()
    return 0


def test_killed_rank_makes_survivors_exit_nonzero_without_hanging() -> None:
    outcomes = launch_ranks(_killed_mid_job, 3, timeout=40, grace=20, pg_timeout=15)
    assert outcomes[2].exitcode == -signal.SIGKILL
    assert "SIGKILL" in outcomes[2].describe()
    for o in outcomes[:2]:
        # each survivor detected the dead peer and exited non-zero by itself (not killed by the
        # harness, not by the group timeout: gloo reports the closed connection)
        assert o.killed_by_harness is None, o.describe()
        assert o.exitcode == 1 and o.exc_type is not None, o.describe()


# ------------------------------------------------------------------- single-process behaviour


def test_world_size_one_is_identity() -> None:
    ex = HaloExchanger(torch.empty(0, dtype=torch.int64), [0, 0], [0, 0], 3)
    h = torch.randn(3, 2, requires_grad=True)
    assert ex.exchange(h) is h
    assert ex.num_rows == 3 and ex.bytes_sent == 0
    with pytest.raises(ValueError, match=r"expects 3 rows \(num_inner\), got a tensor of shape \(4, 2\)"):
        ex.exchange(torch.randn(4, 2))


@pytest.mark.parametrize(("kwargs", "match"), [
    (dict(send_index=[0], send_offsets=[0, 1], halo_offsets=[0, 0], num_inner=2),
     r"rank 0 sends 1 and receives 0 rows to/from itself"),
    (dict(send_index=[], send_offsets=[0, 0, 0], halo_offsets=[0, 0], num_inner=2),
     r"send_offsets has 3 entries but the world size is 1"),
    (dict(send_index=[], send_offsets=[1, 0], halo_offsets=[0, 0], num_inner=2),
     r"send_offsets\[0\] = 1; offsets must start at 0"),
    (dict(send_index=[], send_offsets=[0, 0], halo_offsets=[0, 2], num_inner=2),
     r"rank 0 sends 0 and receives 2 rows to/from itself"),
    (dict(send_index=[], send_offsets=[0, 0], halo_offsets=[0.5, 0], num_inner=2),
     r"halo_offsets must be a 1-D sequence of integers"),
    (dict(send_index=[], send_offsets=[0, 0], halo_offsets=[0, 0], num_inner=-1),
     r"num_inner must be a non-negative int, got -1"),
    (dict(send_index=[[0]], send_offsets=[0, 0], halo_offsets=[0, 0], num_inner=2),
     r"send_index must be 1-D, got shape \(1, 1\)"),
    (dict(send_index=[0.0], send_offsets=[0, 0], halo_offsets=[0, 0], num_inner=2),
     r"send_index must hold integer row ids, got dtype torch.float64"),
    (dict(send_index=[0, 5], send_offsets=[0, 0], halo_offsets=[0, 0], num_inner=2),
     r"send_index\[1\] = 5 is not an inner row: it must be in \[0, num_inner=2\)"),
    (dict(send_index=[0], send_offsets=[0, 0], halo_offsets=[0, 0], num_inner=2),
     r"send_offsets\[-1\] = 0 but send_index has 1 entries"),
    (dict(send_index=[], send_offsets=[0, 0, 0], halo_offsets=[0, 0, 0], num_inner=2, world_size=2),
     r"world_size=2 needs an initialised process group"),
    (dict(send_index=[], send_offsets=[0, 0], halo_offsets=[0, 0], num_inner=2, rank=1),
     r"rank=1 is out of range for world_size=1"),
])
def test_bad_plans_are_rejected(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(HaloSpecError, match=match):
        HaloExchanger(**kwargs)


def test_decreasing_offsets_are_rejected() -> None:
    with pytest.raises(HaloSpecError, match=r"send_offsets decreases at 0: send_offsets\[0\] = 0 > "
                                            r"send_offsets\[1\] = -1"):
        HaloExchanger([], [0, -1], [0, 0], 2)
