"""A counter-based hash of int64 words in torch ops: the random bits of the partition-independent
dropout masks (:mod:`gnn_dist.nn.dropout`) and of the halo quantiser's stochastic rounding
(:mod:`gnn_dist.distributed.quantize`).

Random bits from an RNG stream depend on the order they are drawn in, so on which rank a node is
and what else is there. These are a pure function of their key (seed, step, layer, original id,
feature ...): a splitmix64-style hash. It works in int64 torch ops on any device (int64
multiplication wraps modulo ``2**64``; logical right shifts are emulated with a mask), with no
host synchronisation, and gives equal outputs for equal keys on every device.
"""

from __future__ import annotations

import torch

__all__ = ["IntLike", "GOLDEN", "MUL1", "MUL2", "CHUNK_ELEMENTS", "srl", "mix", "absorb", "hash_bits"]

GOLDEN = 0x9E3779B97F4A7C15 - (1 << 64)
"""The splitmix64 constants, as int64 values (the numba kernels take their uint64 bits)."""
MUL1 = 0xBF58476D1CE4E5B9 - (1 << 64)
MUL2 = 0x94D049BB133111EB - (1 << 64)
CHUNK_ELEMENTS = 1 << 19
"""Elements whose hash is computed at once. Each of the ~12 int64 passes of the hash then
works on 4 MiB temporaries that stay in cache: on a [200k, 128] activation, one thread, this is
~5x faster than 1 << 22, whose 32 MiB temporaries stream through memory (benchmarks/train.py);
much smaller chunks lose to per-op overhead when torch uses several threads."""

IntLike = int | torch.Tensor


def srl(x: torch.Tensor, k: int) -> torch.Tensor:
    """Logical right shift of int64 ``x`` by ``k`` (torch's ``>>`` is arithmetic)."""
    return (x >> k) & ((1 << (64 - k)) - 1)


def mix(z: torch.Tensor) -> torch.Tensor:
    """The splitmix64 finaliser: a bijection of 64-bit words with full avalanche."""
    z = (z ^ srl(z, 30)) * MUL1
    z = (z ^ srl(z, 27)) * MUL2
    return z ^ srl(z, 31)


def absorb(h: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Fold the word(s) ``v`` into the hash state(s) ``h`` (broadcasting)."""
    return mix(h + mix(v + GOLDEN))


def hash_bits(*words: IntLike, device: torch.device | str | None = None) -> torch.Tensor:
    """A 64-bit hash (int64) of a sequence of int64 words or tensors (broadcast together).

    ``hash_bits(a, b, c)`` is ``absorb(absorb(absorb(0, a), b), c)``; equal inputs give equal
    outputs on every device.
    """
    h = torch.zeros((), dtype=torch.long, device=device)
    for w in words:
        h = absorb(h, torch.as_tensor(w, dtype=torch.long, device=h.device))
    return h
