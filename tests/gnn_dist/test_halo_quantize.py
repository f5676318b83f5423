"""Quantised halo messages: the per-row quantiser, the wire codecs, adaptive bit widths, and the
exchange on 3 gloo ranks (rows rounded by their original ids, bytes counted as they travel)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from gnn_dist.distributed.adaptive_bits import AdaptiveBits, AdaptiveBitsSpec, allocate_bits
from gnn_dist.distributed.codec import FixedBits, QuantizedCodec, parse_codec
from gnn_dist.distributed.quantize import BITS, HEADER_BYTES, RowKey, decode_rows, encode_rows, row_bytes
from gnn_dist.distributed.wire import Transport
from halo_plans import exchanger_for, make_plan
from mp_utils import run_ranks


def _rows(n: int = 64, f: int = 37, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, f, generator=g) * torch.rand(n, 1, generator=g) * 10 + torch.randn(n, 1, generator=g)
    x[3] = 1.2345  # a constant row
    x[4] = 0.0
    return x


def _roundtrip(x: torch.Tensor, ids: torch.Tensor, bits: int, key: RowKey) -> torch.Tensor:
    return decode_rows(encode_rows(x, ids, bits, key), bits, tuple(x.shape[1:]), x.dtype)


@pytest.mark.parametrize("bits", BITS)
def test_quantiser_bounds_bytes_and_exact_constant_rows(bits: int) -> None:
    x = _rows()
    ids = torch.arange(x.shape[0]) * 11 + 5
    wire = encode_rows(x, ids, bits, RowKey(1, 2, 3))
    assert wire.dtype == torch.uint8 and wire.shape == (x.shape[0], row_bytes(37, bits))
    assert row_bytes(37, bits) == -(-37 * bits // 8) + HEADER_BYTES
    y = decode_rows(wire, bits, (37,), torch.float32)
    lo, hi = x.aminmax(dim=1)
    step = (hi - lo) / ((1 << bits) - 1)
    # |x^ - x| < s, where s is the step rounded up to bf16 (relative 2**-8 at most)
    assert bool(((y - x).abs() <= step.unsqueeze(1) * (1 + 2 ** -7) + 1e-6).all())
    assert torch.equal(y[3:5], x[3:5]), "constant rows travel exactly"
    assert bool((y.amin(1) >= lo).all()), "nothing below the zero point (the row's min)"


@pytest.mark.parametrize("bits", (8, 2, 1))
def test_stochastic_rounding_is_unbiased(bits: int) -> None:
    """The mean over 512 steps' roundings is within 4.5 standard errors of x for every value
    (the per-value std is at most s/2); and one step's error is not (it is random)."""
    x = _rows(32, 24)
    ids = torch.arange(32)
    n = 512
    acc = torch.zeros_like(x, dtype=torch.float64)
    for step in range(n):
        acc += _roundtrip(x, ids, bits, RowKey(7, step, 0))
    x = x[[i for i in range(32) if i not in (3, 4)]]  # the constant rows are exact
    acc = acc[[i for i in range(32) if i not in (3, 4)]]
    lo, hi = x.aminmax(dim=1)
    s = ((hi - lo) / ((1 << bits) - 1)).unsqueeze(1)
    bias = ((acc / n - x) / s).abs()
    assert float(bias.max()) < 4.5 * 0.5 / n ** 0.5
    one = ((_roundtrip(x, ids[:30], bits, RowKey(7, 0, 0)) - x) / s).abs()
    assert float(one.max()) > 0.2


def test_rounding_is_keyed_by_id_not_by_position() -> None:
    x = _rows(40, 16)
    ids = torch.randperm(1000)[:40]
    key = RowKey(3, 5, 1)
    y = _roundtrip(x, ids, 4, key)
    perm = torch.randperm(40)
    assert torch.equal(_roundtrip(x[perm], ids[perm], 4, key), y[perm]), "a row rounds the same wherever it is"
    assert torch.equal(_roundtrip(x[:7], ids[:7], 4, key), y[:7])
    assert not torch.equal(_roundtrip(x, ids, 4, RowKey(3, 6, 1)), y), "another step rounds differently"
    assert not torch.equal(_roundtrip(x, ids, 4, RowKey(3, 5, 2)), y), "another layer rounds differently"
    assert not torch.equal(_roundtrip(x, ids, 4, RowKey(3, 5, 1, backward=True)), y), "gradients: another domain"
    assert not torch.equal(_roundtrip(x, ids + 1, 4, key), y)


def test_packing_layout() -> None:
    """Values 0..15 of a row with min 0 and max 15 at 4 bits are exact; value k of a byte sits
    at bits [4k, 4k + 4); the header is zero and scale as bfloat16."""
    x = torch.arange(16, dtype=torch.float32).view(1, 16)
    wire = encode_rows(x, torch.tensor([0]), 4, RowKey(0, 0, 0))
    assert wire[0, :8].tolist() == [(2 * k + 1) << 4 | 2 * k for k in range(8)]
    assert wire[0, 8:12].clone().view(torch.float32).tolist() == [0.0]
    assert wire[0, 12:].clone().view(torch.bfloat16).tolist() == [1.0]
    assert torch.equal(decode_rows(wire, 4, (16,), torch.float32), x)
    # trailing dims are flattened; an odd width pads its last byte
    z = torch.arange(6, dtype=torch.float32).view(1, 2, 3)
    w = encode_rows(z, torch.tensor([0]), 2, RowKey(0, 0, 0))
    assert w.shape == (1, 2 + HEADER_BYTES)


def test_gradient_sized_rows_keep_their_scale() -> None:
    """bf16 zero points and scales keep float32's exponent range: 1e-30 gradients survive."""
    x = _rows(8, 16) * 1e-30
    y = _roundtrip(x, torch.arange(8), 8, RowKey(0, 0, 0, backward=True))
    assert bool(((y - x).abs() <= (x.amax(1) - x.amin(1)).unsqueeze(1) / 255 * 1.01).all())
    assert bool((y != 0).any())


def test_codec_per_peer_widths_round_trip() -> None:
    class Widths:
        observes = True

        def __init__(self) -> None:
            self.seen: list[tuple[int, int, int]] = []

        def bits(self, layer: int, src: int, dst: int, backward: bool) -> int:
            return {0: 8, 1: 1, 2: 4}[dst] if src == 0 else 2

        def observe(self, layer: int, dst: int, backward: bool, range_sq: torch.Tensor, values: int) -> None:
            self.seen.append((layer, dst, values))

        def describe(self) -> str:
            return "test"

    widths = Widths()
    codec = QuantizedCodec("test", widths)
    x = _rows(10, 5)
    ids = torch.arange(10)
    counts = [0, 4, 6]
    key = RowKey(0, 0, 2)
    buf, splits = codec.encode(x, counts, lambda: ids, key, rank=0)
    assert splits == [0, 4 * row_bytes(5, 1), 6 * row_bytes(5, 4)] and buf.numel() == sum(splits)
    assert widths.seen == [(2, 1, 20), (2, 2, 30)]
    # rank 0 receiving what it sent (as if from peers 1 and 2, which send in 2 bits)
    _, rsplits, layout = codec.receive_buffer(x, counts, key, rank=0)
    assert layout == [8, 2, 2] and rsplits == [0, 4 * row_bytes(5, 2), 6 * row_bytes(5, 2)]
    out = codec.decode(buf, counts, [8, 1, 4], (5,), torch.float32)
    assert torch.equal(out[:4], _roundtrip(x[:4], ids[:4], 1, key))
    assert torch.equal(out[4:], _roundtrip(x[4:], ids[4:], 4, key))


def test_allocation_respects_the_budget_and_favours_wide_rows() -> None:
    stats = {(0, False, 0, 1): (1e6, 1000), (0, False, 1, 0): (1.0, 1000), (1, True, 0, 1): (50.0, 500)}
    for budget in (1, 2, 3, 4.5, 8):
        bits = allocate_bits(stats, budget)
        used = sum(bits[g] * stats[g][1] for g in stats) / sum(n for _, n in stats.values())
        assert used <= budget + 1e-9
        assert bits[(0, False, 0, 1)] >= bits[(0, False, 1, 0)], "same size, more variance: no fewer bits"

        def variance(widths):
            return sum(stats[g][0] / ((1 << widths[g]) - 1) ** 2 for g in stats)
        uniform = max(b for b in BITS if b <= budget)
        assert variance(bits) <= variance({g: uniform for g in stats}), "no worse than one width for all"
    assert set(allocate_bits(stats, 8).values()) == {8}
    assert set(allocate_bits(stats, 1).values()) == {1}
    assert allocate_bits(stats, 4.5)[(0, False, 0, 1)] == 8 and allocate_bits(stats, 3)[(0, False, 0, 1)] == 4


def test_specs_and_names() -> None:
    assert AdaptiveBitsSpec.parse("adaptive:3", 5) == AdaptiveBitsSpec(3.0, 5)
    for bad in ("adaptive", "adaptive:0.5", "fixed:3", "adaptive:9"):
        with pytest.raises(ValueError, match="halo_bits"):
            AdaptiveBitsSpec.parse(bad)
    assert AdaptiveBits(AdaptiveBitsSpec(3.0)).initial == 2
    t = Transport.build("int4", None, halo_grad_dtype="fp16")
    assert t.rows.name == "int4" and t.grads.name == "fp16" and not t.exact and t.wire_dtype is None
    t = Transport.build("bf16", None)
    assert t.grads is t.rows and t.wire_dtype == torch.bfloat16
    assert parse_codec("int2").widths == FixedBits(2)


# ---------------------------------------------------------------- the exchange on 3 ranks

def _features(num_nodes: int, f: int) -> torch.Tensor:
    return _rows(num_nodes, f, seed=42)


def _check_exchange(rank: int, world_size: int) -> dict[str, Any]:
    plan = make_plan(world_size, 120, 500, seed=3)[rank]
    ids_global = torch.from_numpy(np.concatenate([plan["inner"], plan["halo"]])).long()
    original = ids_global * 7 + 1  # original ids differ from the positions
    ex = exchanger_for(plan, row_ids=original)
    x = _features(120, 9)
    h_inner = x[ids_global[:ex.num_inner]].clone().requires_grad_(True)
    out: dict[str, Any] = {}
    for name in ("int8", "int2"):
        bits = int(name[3:])
        transport = Transport.build(name, None, halo_grad_dtype="int4" if name == "int8" else None, seed=9)
        transport.begin_step(4)
        with ex.recording() as stats:
            full = ex.exchange(h_inner, tag=1, transport=transport)
            g = torch.randn(full.shape, generator=torch.Generator().manual_seed(rank))
            full.backward(g)
        halo_ids = original[ex.num_inner:]
        expected = _roundtrip(x[ids_global[ex.num_inner:]], halo_ids, bits, RowKey(9, 4, 1))
        out[f"{name}_rows_exact"] = bool(torch.equal(full[ex.num_inner:].detach(), expected))
        out[f"{name}_inner_untouched"] = bool(torch.equal(full[:ex.num_inner].detach(), h_inner.detach()))
        out[f"{name}_sent"] = stats.bytes_sent
        out[f"{name}_expected_sent"] = ex.num_send * row_bytes(9, bits) + ex.num_halo * row_bytes(
            9, 4 if name == "int8" else bits)
        out[f"{name}_grad_ok"] = bool(torch.isfinite(h_inner.grad).all())
        h_inner.grad = None
    # adaptive widths: every rank decides the same table from the gathered statistics
    transport = Transport.build(None, None, halo_bits=AdaptiveBitsSpec(3.0, every=1), seed=1)
    for step in range(3):
        transport.begin_step(step)
        ex.exchange(h_inner * (1 + 9 * rank), tag=0, transport=transport).sum().backward()
    out["table"] = sorted((list(k), v) for k, v in transport.adaptive.table.items())
    return out


def test_quantised_exchange_on_three_ranks() -> None:
    results = run_ranks(_check_exchange, 3, timeout=120)
    for res in results:
        for name in ("int8", "int2"):
            assert res[f"{name}_rows_exact"], "halo rows are the owner's rows rounded by their original ids"
            assert res[f"{name}_inner_untouched"] and res[f"{name}_grad_ok"]
            assert res[f"{name}_sent"] == res[f"{name}_expected_sent"], "bytes counted are the wire's"
    tables = [res["table"] for res in results]
    assert tables[0] == tables[1] == tables[2] and tables[0], "the ranks agree on the widths"
    widths = {tuple(k): v for k, v in tables[0]}
    rows_from = {src: [v for (layer, backward, s, _), v in widths.items() if not backward and s == src]
                 for src in range(3)}
    # rank 2 sends rows 19x wider than rank 0's (361x the variance): never fewer bits
    assert min(rows_from[2]) >= max(rows_from[0]) and max(rows_from[2]) > min(rows_from[0]), widths
    assert {v for (_, backward, _, _), v in widths.items() if backward} == {1}, "constant gradients: 1 bit"


@pytest.mark.parametrize("bits", BITS)
def test_the_cpu_kernel_writes_the_torch_paths_bytes(bits: int) -> None:
    """The numba kernel (CPU) and the torch ops (every device) give the same bytes and values;
    a row holding NaN or inf arrives as NaN on both."""
    from gnn_dist.distributed.quantize import decode_rows_torch, encode_rows_torch

    x = _rows(70, 29)
    x[10, 4], x[11, 0] = float("nan"), float("inf")
    ids = torch.arange(70) * 13
    key = RowKey(5, 6, 7, backward=True)
    kernel, torch_ops = encode_rows(x, ids, bits, key), encode_rows_torch(x, ids, bits, key)
    finite = [i for i in range(70) if i not in (10, 11)]
    assert torch.equal(kernel[finite], torch_ops[finite])
    a, b = decode_rows(kernel, bits, (29,), torch.float32), decode_rows_torch(torch_ops, bits, (29,), torch.float32)
    assert torch.equal(a[finite], b[finite])
    assert bool(a[10:12].isnan().all()) and bool(b[10:12].isnan().all())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (benchmarks/gpu_check.sh runs it)")
@pytest.mark.parametrize("bits", BITS)
def test_cuda_rows_get_the_cpu_bytes(bits: int) -> None:
    """On CUDA the torch ops write the bytes the CPU kernel writes, and decode to the same rows."""
    x = _rows(300, 77)
    ids = torch.arange(300) * 5
    key = RowKey(2, 3, 4)
    cpu = encode_rows(x, ids, bits, key)
    gpu = encode_rows(x.cuda(), ids.cuda(), bits, key)
    assert gpu.is_cuda and torch.equal(gpu.cpu(), cpu)
    assert torch.equal(decode_rows(gpu, bits, (77,), torch.float32).cpu(), decode_rows(cpu, bits, (77,), torch.float32))
