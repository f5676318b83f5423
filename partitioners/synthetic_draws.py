"""How the synthetic generators draw: seeded random streams, fixed blocks of edge draws, and the
clean symmetric CSR those draws become.

Every array of :mod:`partitioners.synthetic` and :mod:`partitioners.synthetic_rmat` comes from
``np.random.Generator(PCG64(SeedSequence(seed, spawn_key=...)))`` with one fixed stream per
purpose (the first ``spawn_key`` entry: labels, edges, features, ...) and, for the edges, one per
block of ``2**16`` draws, so a result never depends on how many draws are vectorised at once.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from .graph_csr import csr_from_keys

_BLOCK_EDGES = 1 << 16
"""Edge draws per independent random stream (fixed, so ``chunk_edges`` never changes a result)."""

# stream purposes (the first spawn_key entry)
_LABELS, _EDGES, _FEATURES, _SPLIT, _PERM, _CENTROIDS, _DEGREES, _COMMUNITIES, _TARGETS, _MULTILABELS = range(10)


def _rng(seed: int, *key: int) -> np.random.Generator:
    """The generator of stream ``key`` under ``seed`` (PCG64 seeded by a keyed SeedSequence)."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=key)))


def _blocks(num_draws: int) -> Iterator[tuple[int, int, int]]:
    """``(block_index, start, stop)`` of the fixed random-stream blocks over ``[0, num_draws)``."""
    for b in range(-(-num_draws // _BLOCK_EDGES)):
        yield b, b * _BLOCK_EDGES, min(num_draws, (b + 1) * _BLOCK_EDGES)


def _draw_blocks(num_draws: int, chunk_edges: int) -> Iterator[list[tuple[int, int, int]]]:
    """Group the fixed random-stream blocks into chunks of about ``chunk_edges`` draws.

    Yields lists of ``(block_index, start, stop)`` over ``[0, num_draws)``.
    """
    per_chunk = max(1, chunk_edges // _BLOCK_EDGES)
    chunk: list[tuple[int, int, int]] = []
    for block in _blocks(num_draws):
        chunk.append(block)
        if len(chunk) == per_chunk:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _clean_csr(keys: np.ndarray, num_keys: int, num_nodes: int, self_loops_removed: int,
               ) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """CSR by destination of the symmetric closure of the drawn edges, repeats dropped.

    The first ``num_keys`` entries of the int64 buffer ``keys`` (consumed) are the drawn edges as
    ``dst * N + src``, self-loops already dropped; with room for as many more after them, the
    reverses go there instead of into a second array. Returns ``indptr`` (int64 ``[N+1]``),
    ``indices`` (int32/int64 ``[E]``) and the preprocessing report: the arrays and counts of
    ``Graph.from_edges(src, dst, N, symmetrize=True, remove_self_loops=True,
    remove_duplicates=True)`` on the same draws, built by the same core (see
    :func:`partitioners.graph_csr.csr_from_keys`) without materialising ``src`` and ``dst``.
    """
    report = {"self_loops_removed": int(self_loops_removed)}
    indptr, indices, _, report = csr_from_keys(keys, num_nodes, num_keys=num_keys,
                                               symmetrize=True, remove_duplicates=True,
                                               report=report)
    return indptr, indices, report
