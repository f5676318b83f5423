"""Every kernel of every backend against float64 scatter/dense references: forward and gradients."""

from __future__ import annotations

import pytest
import torch


from gnn_dist.nn.sparse import _SpMM, edge_softmax, sddmm, spmm, spmm_scaled

from kernel_cases import BACKENDS, patch_caches, random_block, ref_sddmm, ref_softmax, ref_spmm

WIDTHS = [1, 7, 128]


@pytest.fixture(params=BACKENDS)
def backend(request, monkeypatch) -> str:
    """A backend name; ``numba-noprefetch``: numba with software prefetching off (the kernels'
    other code path; the default prefetches, which must not change a result); ``numba-blocked``:
    numba with a 1 KiB last-level cache, so every block with two entries a row or more is walked
    in source blocks.

    ``triton`` runs with tiles of 8 entries x 32 features, so the small blocks take the kernels'
    multi-step loops (rows longer than a tile, several feature blocks per row, heads wider than a
    tile); the 300-row block is left out for it (the interpreter runs every program in Python).
    """
    if request.param == "numba-noprefetch":
        from gnn_dist.kernels import numba_cpu
        monkeypatch.setattr(numba_cpu, "PREFETCH_AHEAD", 0)
        return "numba"
    if request.param == "numba-blocked":
        patch_caches(monkeypatch, l2_bytes=1 << 10, l3_bytes=1 << 10)
        return "numba"
    if request.param == "triton":
        if getattr(request.node, "callspec", None) and request.node.callspec.id.startswith("wide-"):
            pytest.skip("the 300-row block is too slow for Triton's interpreter")
        from gnn_dist.kernels import triton_gpu
        monkeypatch.setattr(triton_gpu, "BLOCK_E", 8)
        monkeypatch.setattr(triton_gpu, "MAX_BLOCK_F", 32)
    return request.param


def _close(a: torch.Tensor | None, b: torch.Tensor | None) -> None:
    assert (a is None) == (b is None)
    if a is not None:
        torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("weights", ["none", "edge", "heads"])
def test_spmm(block, backend, width, weights):
    g = torch.Generator().manual_seed(width)
    heads = 1 if weights != "heads" or width == 1 else (7 if width == 7 else 4)
    x = torch.randn(block.num_src, width, dtype=torch.float64, generator=g, requires_grad=True)
    vals = None
    if weights == "edge":
        vals = torch.rand(block.num_edges, dtype=torch.float64, generator=g).requires_grad_()
    elif weights == "heads":
        vals = torch.rand(block.num_edges, heads, dtype=torch.float64, generator=g).requires_grad_()
    up = torch.randn(block.num_dst, width, dtype=torch.float64, generator=g)
    for reduce in ("sum", "mean"):
        block = block.with_kernels(backend)
        out = spmm(block, x, vals, reduce=reduce)
        ref = ref_spmm(block, x, vals)
        if reduce == "mean":
            ref = ref / block.in_count.clamp(min=1).unsqueeze(1)
        _close(out, ref)
        inputs = [x] if vals is None else [x, vals]
        grads = torch.autograd.grad(out, inputs, up)   # backward outside the with: the backend is kept
        ref_grads = torch.autograd.grad(ref, inputs, up)
        for a, b in zip(grads, ref_grads):
            _close(a, b)


def _scales(block, g):
    dst_scale = torch.rand(block.num_dst, dtype=torch.float64, generator=g) + 0.5
    src_scale = torch.rand(block.num_src, dtype=torch.float64, generator=g) + 0.5
    return dst_scale, src_scale


@pytest.mark.parametrize("width", WIDTHS)
def test_spmm_scaled(block, backend, width):
    """``diag(dst_scale) A diag(src_scale) x`` in one pass, and its gradient (the scales swapped)."""
    g = torch.Generator().manual_seed(11)
    x = torch.randn(block.num_src, width, dtype=torch.float64, generator=g, requires_grad=True)
    dst_scale, src_scale = _scales(block, g)
    block = block.with_kernels(backend)
    out = spmm_scaled(block, x, dst_scale, src_scale)
    ref = dst_scale.unsqueeze(1) * ref_spmm(block, x * src_scale.unsqueeze(1), None)
    _close(out, ref)
    up = torch.randn(block.num_dst, width, dtype=torch.float64, generator=g)
    _close(torch.autograd.grad(out, x, up)[0], torch.autograd.grad(ref, x, up)[0])


@pytest.mark.parametrize("heads", [1, 3])
def test_scales_with_edge_values(block, backend, heads):
    """The kernels' general form: per-edge (per-head) values between the two scalings, and the
    values' gradient through the scales."""
    g = torch.Generator().manual_seed(12)
    x = torch.randn(block.num_src, 6, dtype=torch.float64, generator=g, requires_grad=True)
    vals = torch.rand(block.num_edges, heads, dtype=torch.float64, generator=g).requires_grad_()
    dst_scale, src_scale = _scales(block, g)
    block = block.with_kernels(backend)
    kernels = block.backend_for(x)
    out = _SpMM.apply(x, vals, block, kernels, dst_scale, src_scale)
    ref = dst_scale.unsqueeze(1) * ref_spmm(block, x * src_scale.unsqueeze(1), vals)
    _close(out, ref)
    up = torch.randn(block.num_dst, 6, dtype=torch.float64, generator=g)
    for a, b in zip(torch.autograd.grad(out, (x, vals), up), torch.autograd.grad(ref, (x, vals), up)):
        _close(a, b)


@pytest.mark.parametrize("width,heads", [(1, None), (7, None), (128, None), (7, 7), (128, 4)])
def test_sddmm(block, backend, width, heads):
    g = torch.Generator().manual_seed(3)
    a = torch.randn(block.num_dst, width, dtype=torch.float64, generator=g, requires_grad=True)
    b = torch.randn(block.num_src, width, dtype=torch.float64, generator=g, requires_grad=True)
    block = block.with_kernels(backend)
    out = sddmm(block, a, b, heads=heads)
    ref = ref_sddmm(block, a, b, heads or 1)
    ref = ref[:, 0] if heads is None else ref
    _close(out, ref)
    up = torch.randn(out.shape, dtype=torch.float64, generator=g)
    for x, y in zip(torch.autograd.grad(out, (a, b), up), torch.autograd.grad(ref, (a, b), up)):
        _close(x, y)


@pytest.mark.parametrize("heads", [None, 1, 3])
@pytest.mark.parametrize("with_self", [True, False])
def test_edge_softmax(block, backend, heads, with_self):
    g = torch.Generator().manual_seed(5)
    shape = (block.num_edges,) if heads is None else (block.num_edges, heads)
    score = torch.randn(shape, dtype=torch.float64, generator=g) * 3
    score = score.masked_fill((block.self_loop_mask if heads is None else block.self_loop_mask.unsqueeze(1)),
                              float("-inf")).requires_grad_()   # GAT's replaced self-loops
    self_score = None
    if with_self:
        self_score = torch.randn((block.num_dst,) + shape[1:], dtype=torch.float64, generator=g).requires_grad_()
    block = block.with_kernels(backend)
    alpha, alpha_self = edge_softmax(block, score, self_score)
    s2 = score if heads is not None else score.unsqueeze(1)
    ss2 = None if self_score is None else (self_score if heads is not None else self_score.unsqueeze(1))
    ref, ref_self = ref_softmax(block, s2, ss2)
    if heads is None:
        ref, ref_self = ref[:, 0], None if ref_self is None else ref_self[:, 0]
    _close(alpha, ref)
    _close(alpha_self, ref_self)
    up = torch.randn(alpha.shape, dtype=torch.float64, generator=g)
    outs, refs = [alpha], [ref]
    ups = [up]
    if with_self:
        outs.append(alpha_self)
        refs.append(ref_self)
        ups.append(torch.randn(alpha_self.shape, dtype=torch.float64, generator=g))
    inputs = [score] + ([self_score] if with_self else [])
    if block.num_edges == 0 and not with_self:
        return
    if not any(r.requires_grad for r in refs):   # only -inf scores: weights are constant 0
        got = torch.autograd.grad(outs, inputs, ups, allow_unused=True)
        assert all(x is None or not bool(x.any()) for x in got)
        return
    got = torch.autograd.grad(outs, inputs, ups, allow_unused=True)
    want = torch.autograd.grad(refs, inputs, ups, allow_unused=True)
    for x, y in zip(got, want):
        _close(torch.nan_to_num(x), torch.nan_to_num(y))


def test_float32_matches_float64(block, backend):
    g = torch.Generator().manual_seed(9)
    x = torch.randn(block.num_src, 33, dtype=torch.float64, generator=g)
    vals = torch.rand(block.num_edges, 3, dtype=torch.float64, generator=g)
    block = block.with_kernels(backend)
    out32 = spmm(block, x.float(), vals.float())
    torch.testing.assert_close(out32, ref_spmm(block, x, vals).float(), atol=1e-5, rtol=1e-5)


def test_errors():
    block = random_block(0)
    x = torch.randn(block.num_src, 6)
    with pytest.raises(ValueError, match=r"spmm: edge_values has 4 heads but x_src has 6 features"):
        spmm(block, x, torch.ones(block.num_edges, 4))
    with pytest.raises(ValueError, match=r"spmm: edge_values has shape \[1, 2, 3\]"):
        spmm(block, x, torch.ones(1, 2, 3))
    with pytest.raises(ValueError, match=r"sddmm: heads = 4 must be >= 1 and divide the width 6"):
        sddmm(block, torch.randn(block.num_dst, 6), x, heads=4)
    with pytest.raises(ValueError, match=r"sddmm: a_dst has 1 rows and b_src"):
        sddmm(block, torch.randn(1, 6), x)
    with pytest.raises(ValueError, match=r"sddmm: a_dst and b_src must be 2-D with the same width"):
        sddmm(block, torch.randn(block.num_dst, 5), x)
    with pytest.raises(ValueError, match=r"edge_softmax: score has shape \[2, 2, 2\]"):
        edge_softmax(block, torch.randn(2, 2, 2))
    with pytest.raises(ValueError, match=r"spmm_scaled: dst_scale has shape \[3\], dtype torch.float32 and "
                                         r"requires_grad=False; expected a constant \[\d+\] of torch.float32"):
        spmm_scaled(block, x, torch.ones(3), torch.ones(block.num_src))
    with pytest.raises(ValueError, match=r"spmm_scaled: src_scale .* requires_grad=True"):
        spmm_scaled(block, x, torch.ones(block.num_dst), torch.ones(block.num_src, requires_grad=True))
    with pytest.raises(ValueError, match=r"spmm_scaled: x_src must be a floating-point tensor"):
        spmm_scaled(block, x.long(), torch.ones(block.num_dst), torch.ones(block.num_src))
    with pytest.raises(ValueError, match=r"edge_softmax: self_score has shape \[1\]"):
        edge_softmax(block, torch.randn(block.num_edges), torch.randn(1))
