from __future__ import annotations

import pytest
import torch

from gnn_dist.nn import DropoutKey, hash_bits, hash_dropout, hash_edge_dropout

M64 = (1 << 64) - 1


def _py_mix(z: int) -> int:
    """splitmix64's finaliser on Python ints (exact 64-bit unsigned arithmetic)."""
    z &= M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def _py_hash(*words: int) -> int:
    h = 0
    for w in words:
        h = _py_mix(h + _py_mix(w + 0x9E3779B97F4A7C15))
    return h


@pytest.mark.parametrize("words", [(0,), (1, 2, 3), (-1, 2**62, -(2**63), 12345678901234)])
def test_hash_wraps_like_unsigned_64_bit_arithmetic(words):
    assert int(hash_bits(*words)) & M64 == _py_hash(*words)
    ids = torch.tensor([5, -7, 2**40])
    got = hash_bits(9, ids)
    assert [int(v) & M64 for v in got] == [_py_hash(9, int(i)) for i in ids]


def test_identity_when_off():
    x = torch.randn(5, 3)
    ids = torch.arange(5)
    assert hash_dropout(x, 0.0, seed=0, step=0, layer=0, row_ids=ids) is x
    assert hash_dropout(x, 0.5, seed=0, step=0, layer=0, row_ids=ids, training=False) is x
    assert torch.equal(hash_dropout(x, 1.0, seed=0, step=0, layer=0, row_ids=ids), torch.zeros(5, 3))


def test_keep_rate_and_scale():
    x = torch.ones(4000, 50)
    out = hash_dropout(x, 0.3, seed=1, step=2, layer=3, row_ids=torch.arange(4000))
    kept = out != 0
    assert abs(kept.float().mean().item() - 0.7) < 0.01
    torch.testing.assert_close(out[kept], torch.full((int(kept.sum()),), 1 / 0.7))
    # no stripes: every feature column and every row block keeps about 1 - p
    assert (kept.float().mean(0) - 0.7).abs().max() < 0.05
    assert (kept.float().view(40, -1).mean(1) - 0.7).abs().max() < 0.05


def test_row_mask_does_not_depend_on_position_or_batch():
    ids = torch.randperm(300) * 1000 + 17
    x = torch.ones(300, 16)
    full = hash_dropout(x, 0.5, seed=3, step=11, layer=1, row_ids=ids)
    pick = torch.randperm(300)[:120]
    part = hash_dropout(x[pick], 0.5, seed=3, step=11, layer=1, row_ids=ids[pick])
    assert torch.equal(part, full[pick])


def test_mask_depends_on_every_key_part():
    x = torch.ones(200, 16)
    ids = torch.arange(200)
    base = hash_dropout(x, 0.5, seed=0, step=0, layer=0, row_ids=ids)
    for kw in (dict(seed=1, step=0, layer=0), dict(seed=0, step=1, layer=0), dict(seed=0, step=0, layer=1)):
        assert not torch.equal(base, hash_dropout(x, 0.5, row_ids=ids, **kw))
    assert not torch.equal(base, hash_dropout(x, 0.5, seed=0, step=0, layer=0, row_ids=ids + 1))
    assert torch.equal(base, hash_dropout(x, 0.5, seed=0, step=torch.tensor(0), layer=0, row_ids=ids))


def test_gradient_is_the_scaled_mask():
    x = torch.randn(50, 8, requires_grad=True)
    out = hash_dropout(x, 0.25, seed=0, step=0, layer=0, row_ids=torch.arange(50))
    out.sum().backward()
    torch.testing.assert_close(x.grad, (out != 0).float() / 0.75)


def test_edge_dropout_is_keyed_by_ids():
    src = torch.randint(0, 50, (3000,))
    dst = torch.randint(0, 50, (3000,))
    values = torch.ones(3000, 4)
    key = DropoutKey(seed=2, step=5, layer=1)
    out = hash_edge_dropout(values, 0.4, key=key, src_ids=src, dst_ids=dst)
    assert abs((out != 0).float().mean().item() - 0.6) < 0.02
    perm = torch.randperm(3000)
    again = hash_edge_dropout(values[perm], 0.4, key=key, src_ids=src[perm], dst_ids=dst[perm])
    assert torch.equal(again, out[perm])
    same_pair = (src == src[0]) & (dst == dst[0])
    assert torch.equal(out[same_pair], out[0].expand(int(same_pair.sum()), 4))
    assert hash_edge_dropout(values, 0.4, key=key, src_ids=src, dst_ids=dst, training=False) is values


def test_bad_arguments():
    x = torch.ones(4, 2)
    with pytest.raises(ValueError, match=r"hash_dropout: dropout probability p must be in \[0, 1\], got 1.5"):
        hash_dropout(x, 1.5, seed=0, step=0, layer=0, row_ids=torch.arange(4))
    with pytest.raises(ValueError, match=r"x must be \[N, F\] with row_ids \[N\], got x \[4, 2\] and row_ids \[3\]"):
        hash_dropout(x, 0.5, seed=0, step=0, layer=0, row_ids=torch.arange(3))
    with pytest.raises(ValueError, match=r"hash_edge_dropout: values must be \[E, H\]"):
        hash_edge_dropout(x, 0.5, key=DropoutKey(0, 0, 0), src_ids=torch.arange(4), dst_ids=torch.arange(3))


def test_chunked_hashing_gives_the_same_masks(monkeypatch):
    from gnn_dist.nn import dropout as dropout_mod
    x = torch.ones(100, 9)
    ids = torch.arange(100) * 3
    src, dst = torch.arange(100), torch.arange(100).flip(0)
    key = DropoutKey(1, 2, 3)
    whole = hash_dropout(x, 0.5, seed=1, step=2, layer=3, row_ids=ids)
    edges = hash_edge_dropout(x, 0.5, key=key, src_ids=src, dst_ids=dst)
    monkeypatch.setattr(dropout_mod, "CHUNK_ELEMENTS", 20)  # several rows per chunk, many chunks
    assert torch.equal(hash_dropout(x, 0.5, seed=1, step=2, layer=3, row_ids=ids), whole)
    assert torch.equal(hash_edge_dropout(x, 0.5, key=key, src_ids=src, dst_ids=dst), edges)
