"""The CPU dropout kernels (gnn_dist.kernels.dropout_numba) give the torch path's bits: the keep
mask of every (seed, step, layer, original id, feature) and the masked scale, signed zeros,
infinities and NaNs included."""

from __future__ import annotations

import pytest
import torch

from gnn_dist.hashing import GOLDEN, absorb, hash_bits, mix
from gnn_dist.kernels.dropout_numba import keep_mask, masked_scale
from gnn_dist.nn import dropout


def _torch_mask(ids: torch.Tensor, width: int, p: float, seed: int, step, layer: int) -> torch.Tensor:
    """The int64 torch path of hash_dropout's mask (the one CUDA runs)."""
    base = hash_bits(dropout._NODE_DOMAIN, seed, step, layer)
    cols = mix(torch.arange(width, dtype=torch.long) + GOLDEN)
    return dropout._keep(mix(absorb(base, ids).unsqueeze(1) + cols), int(p * (1 << 32)))


@pytest.mark.parametrize("rows,width,p", [(1, 1, 0.5), (97, 7, 0.1), (500, 130, 0.5), (33, 64, 0.9), (0, 8, 0.5)])
def test_the_keep_mask_is_the_torch_paths(rows, width, p):
    g = torch.Generator().manual_seed(rows * 31 + width)
    ids = torch.randint(-2**62, 2**62, (rows,), generator=g)
    for seed, step, layer in [(0, 0, 0), (3, torch.tensor(17), dropout.INPUT_LAYER), (12345, 2**40, 5)]:
        want = _torch_mask(ids, width, p, seed, step, layer)
        base = int(hash_bits(dropout._NODE_DOMAIN, seed, step, layer))
        got = torch.from_numpy(keep_mask(ids.numpy(), base, int(p * (1 << 32)), width))
        assert got.shape == (rows, width) and torch.equal(got, want), (seed, step, layer)


def test_the_masked_scale_is_torchs_product_bit_for_bit():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(200, 37, generator=g)
    x[0, :6] = torch.tensor([float("nan"), -0.0, float("-inf"), float("inf"), -1e-38, 3e38])
    mask = torch.rand(200, 37, generator=g) > 0.5
    mask[0, :6] = torch.tensor([False, False, False, True, False, True])
    for p in (0.1, 0.35, 0.5, 0.6, 0.9):
        scale = 1.0 / (1.0 - p)
        want = x.mul(mask).mul_(scale)
        got = torch.from_numpy(masked_scale(x.numpy(), mask.numpy(), scale))
        assert torch.equal(got.view(torch.int32), want.view(torch.int32)), p


def test_hash_dropout_on_cpu_forward_and_backward_equal_the_torch_path():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(300, 24, generator=g, requires_grad=True)
    ids = torch.randperm(1000, generator=g)[:300]
    y = dropout.hash_dropout(x, 0.4, seed=7, step=torch.tensor(3), layer=1, row_ids=ids)
    mask = _torch_mask(ids, 24, 0.4, 7, torch.tensor(3), 1)
    assert torch.equal(y.detach().view(torch.int32), x.detach().mul(mask).mul_(1 / 0.6).view(torch.int32))
    grad = torch.randn(300, 24, generator=g)
    y.backward(grad)
    assert torch.equal(x.grad.view(torch.int32), grad.mul(mask).mul_(1 / 0.6).view(torch.int32))


def test_relu_and_dropout_in_one_pass_are_the_two_ops_bit_for_bit():
    """relu_hash_dropout (one numba pass each way on CPU) gives torch.relu then hash_dropout's
    output and input gradient, bit for bit: signed zeros, NaNs and infinities in both x and the
    gradient; rows dropped, kept and given in any order; p small and large."""
    g = torch.Generator().manual_seed(2)
    x = torch.randn(257, 41, generator=g)
    x[0, :8] = torch.tensor([float("nan"), -0.0, 0.0, float("-inf"), float("inf"), -1e-38, 1e-45, -3e38])
    ids = torch.randperm(10_000, generator=g)[:257]
    grad = torch.randn(257, 41, generator=g)
    grad[0, :8] = torch.tensor([-0.0, -1.0, -2.0, float("nan"), -0.0, float("inf"), -0.0, 5.0])
    # float32: the numba kernels; float64: the torch ops of other devices
    for dtype, bits, (p, step) in [(torch.float32, torch.int32, (0.1, 0)), (torch.float32, torch.int32, (0.5, torch.tensor(9))),
                                   (torch.float32, torch.int32, (0.9, 2**33)), (torch.float64, torch.int64, (0.5, 4))]:
        a, b = x.to(dtype).clone().requires_grad_(), x.to(dtype).clone().requires_grad_()
        want = dropout.hash_dropout(torch.relu(a), p, seed=5, step=step, layer=2, row_ids=ids)
        got = dropout.relu_hash_dropout(b, p, seed=5, step=step, layer=2, row_ids=ids)
        assert torch.equal(got.detach().view(bits), want.detach().view(bits)), (dtype, p)
        want.backward(grad.to(dtype))
        got.backward(grad.to(dtype))
        assert torch.equal(b.grad.view(bits), a.grad.view(bits)), (dtype, p)
        assert type(got.grad_fn).__name__ == "_ReluDropoutBackward"   # the fused op ran
    for training, p in [(False, 0.5), (True, 0.0)]:   # no dropout: ReLU alone
        y = dropout.relu_hash_dropout(x, p, seed=5, step=0, layer=2, row_ids=ids, training=training)
        assert torch.equal(y.view(torch.int32), torch.relu(x).view(torch.int32))
