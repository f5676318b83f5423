"""The asynchronous halo exchange: start/wait, wire dtypes, the simulated link, the counters.

One launch per world size runs every multi-rank check (the spawn cost is paid once); the plan
builder is the one of ``test_halo_exchange.py``.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import torch

from mp_utils import run_ranks

from gnn_dist.distributed import LinkModel, LinkSpecError, Transport, parse_wire_dtype
from gnn_dist.distributed.halo import HaloExchanger
from halo_plans import exchanger_for, make_plan


def _check(rank: int, world_size: int) -> dict[str, Any]:
    plans = make_plan(world_size, 40, 150, seed=5)
    plan = plans[rank]
    g = torch.Generator().manual_seed(3)
    x = torch.randn(40, 6, generator=g, dtype=torch.float64)
    inner = torch.from_numpy(plan["inner"])
    h = x.index_select(0, inner)
    out: dict[str, Any] = {"halo_ids": plan["halo"], "inner": plan["inner"]}
    ex = exchanger_for(plan)
    # start/wait equals the differentiable exchange, forward and backward
    handle = ex.start(h, tag=0)
    out["async_halo"] = handle.wait()
    out["sync_halo"] = ex.exchange(h)[ex.num_inner:]
    grad = torch.randn(ex.num_rows, 6, generator=torch.Generator().manual_seed(10 + rank), dtype=torch.float64)
    hr = h.clone().requires_grad_(True)
    ex.exchange(hr).backward(grad)
    out["sync_grad"] = hr.grad
    out["async_grad"] = grad[:ex.num_inner] + ex.start_backward(grad[ex.num_inner:], tag=0).wait()
    own = grad[:ex.num_inner].clone()
    out["into_grad"] = ex.start_backward(grad[ex.num_inner:], tag=0, into=own).wait()
    out["into_kept"] = torch.equal(own, grad[:ex.num_inner])
    # sent_rows_only: the same sums, only at the distinct sent rows (a row several peers read once)
    full = ex.start_backward(grad[ex.num_inner:], tag=0).wait()
    out["sent_rows"] = (ex.sent_rows_on(grad.device), full, ex.send_index,
                        ex.start_backward(grad[ex.num_inner:], tag=0, sent_rows_only=True).wait())
    out["bytes_by_tag"] = dict(ex.bytes_by_tag)
    out["handle_done"] = handle.done and handle.wait() is out["async_halo"]
    # wire dtypes: bytes as sent, values rounded to the wire type, compute dtype kept
    for name in ("fp32", "bf16", "fp16"):
        exw = exchanger_for(plan)
        y = exw.exchange(h.float(), transport=Transport.build(name, None))
        out[f"wire_{name}"] = (y.dtype, y[exw.num_inner:].clone(), exw.last_bytes_sent, exw.num_send)
    # the simulated link: a blocking exchange waits for the whole delay; one waited for after
    # enough compute waits for nothing
    link = Transport.build(None, LinkModel(latency_ms=150.0, gbps=1.0))
    exl = exchanger_for(plan)
    t0 = time.perf_counter()
    exl.exchange(h, transport=link)
    out["sync_wall"] = time.perf_counter() - t0
    out["sync_exposed"] = exl.exposed_comm_s
    out["sync_comm"] = exl.comm_time_s
    exl.reset_stats()
    handle = exl.start(h, transport=link)
    time.sleep(0.3)  # "compute"
    t0 = time.perf_counter()
    handle.wait()
    out["hidden_wait"] = time.perf_counter() - t0
    out["hidden_exposed"] = exl.exposed_comm_s
    out["hidden_comm"] = exl.comm_time_s
    return out


@pytest.mark.parametrize("world_size", [2, 3])
def test_async_exchange(world_size: int) -> None:
    results = run_ranks(_check, world_size, timeout=120)
    for rank, res in enumerate(results):
        torch.testing.assert_close(res["async_halo"], res["sync_halo"], rtol=0, atol=0)
        # the exchange's backward sums the readers' gradients into a copy of the inner rows' own
        # (``into``, left untouched); the readers' sum added afterwards is the same to rounding
        # (a row read by several peers: (g + a) + b against g + (a + b))
        torch.testing.assert_close(res["into_grad"], res["sync_grad"], rtol=0, atol=0)
        torch.testing.assert_close(res["async_grad"], res["sync_grad"], rtol=1e-12, atol=1e-12)
        assert res["into_kept"]
        sent, full, send_index, compact = res["sent_rows"]
        assert torch.equal(sent, torch.unique(send_index))
        torch.testing.assert_close(compact, full[sent], rtol=0, atol=0)
        assert not full.index_fill(0, sent, 0).any()   # nothing outside the sent rows
        if world_size == 3:
            assert sent.numel() < send_index.numel(), "no row read by two peers: the sums are not tested"
        assert res["handle_done"]
        if res["halo_ids"].size or world_size > 1:
            assert set(res["bytes_by_tag"]) <= {0}
        for name, wire in (("fp32", torch.float32), ("bf16", torch.bfloat16), ("fp16", torch.float16)):
            dtype, halo, sent, num_send = res[f"wire_{name}"]
            assert dtype == torch.float32, "compute stays in the input's dtype"
            assert sent == num_send * 6 * torch.finfo(wire).bits // 8, "bytes counted as sent"
            x = torch.randn(40, 6, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
            expect = x[torch.from_numpy(res["halo_ids"])].float().to(wire).float()
            torch.testing.assert_close(halo, expect, rtol=0, atol=0)
        delay = 0.150
        assert res["sync_wall"] >= delay and res["sync_exposed"] >= 0.9 * delay
        assert res["sync_comm"] >= delay
        assert res["hidden_wait"] < 0.1 and res["hidden_exposed"] < 0.1
        assert res["hidden_comm"] >= delay


def test_link_model_parse_and_delay() -> None:
    link = LinkModel.parse("latency_ms=2, gbps=8")
    assert link == LinkModel(latency_ms=2.0, gbps=8.0)
    assert LinkModel.parse("gbps=1,latency_ms=0").latency_ms == 0.0
    assert link.delay_s(10**9) == pytest.approx(0.002 + 1.0)
    assert str(link) == "latency_ms=2,gbps=8"


@pytest.mark.parametrize(("spec", "match"), [
    ("", r"expected 'latency_ms=L,gbps=B', got ''"),
    ("latency_ms=1", r"'latency_ms=1' lacks gbps"),
    ("latency=1,gbps=2", r"'latency=1' in 'latency=1,gbps=2' is not latency_ms=L or gbps=B"),
    ("latency_ms=x,gbps=2", r"latency_ms='x' in 'latency_ms=x,gbps=2' is not a number"),
    ("latency_ms=1,gbps=2,gbps=3", r"gbps is given twice"),
    ("latency_ms=-1,gbps=2", r"latency_ms=-1.0 must be >= 0"),
    ("latency_ms=1,gbps=0", r"gbps=0.0 must be > 0"),
])
def test_link_model_errors(spec: str, match: str) -> None:
    with pytest.raises(LinkSpecError, match=match):
        LinkModel.parse(spec)
    assert issubclass(LinkSpecError, ValueError)


def test_wire_dtype_names() -> None:
    assert parse_wire_dtype("bf16") is torch.bfloat16 and parse_wire_dtype(None) is None
    with pytest.raises(ValueError, match=r"halo_dtype='int3' is not supported; choose from fp32, bf16, fp16, int8, "
                                         r"int4, int2, int1"):
        parse_wire_dtype("int3")
    with pytest.raises(ValueError, match=r"halo_dtype='int8' is not a float dtype; choose from fp32, bf16, fp16"):
        parse_wire_dtype("int8")
    with pytest.raises(ValueError, match=r"halo_dtype=torch.int64 must be a floating-point dtype"):
        parse_wire_dtype(torch.int64)


def test_world_size_one_start_is_empty() -> None:
    ex = HaloExchanger([], [0, 0], [0, 0], 3, world_size=1, rank=0)
    h = torch.ones(3, 2)
    assert ex.start(h).wait().shape == (0, 2)
    assert ex.start_backward(torch.ones(0, 2)).wait().shape == (3, 2)
    with pytest.raises(ValueError, match=r"start_backward expects 0 rows \(num_halo\)"):
        ex.start_backward(torch.ones(1, 2))
