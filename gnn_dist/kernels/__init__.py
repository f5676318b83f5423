"""Aggregation kernel backends: SpMM (and its transpose), SDDMM and edge softmax on a CSR.

Legend: ``R`` rows (outputs), ``C`` columns (inputs), ``E`` entries/edges, ``F`` features,
``H`` heads (``F = H * Fh``; head ``k`` owns feature columns ``[k Fh, (k + 1) Fh)``).

Every backend implements the same four raw (non-autograd) operations on a :class:`CSR`:

- ``spmm(csr, values [E, H] | None, x [C, F], row_scale [R] | None, col_scale [C] | None) -> [R, F]``
  (``out[r] = row_scale[r] sum_j values[eid_j] col_scale[col_j] x[col_j]``; the scales come
  together or not at all)
- ``sddmm(csr, a [R, F], b [C, F], heads, chunk_elements) -> [E, H]`` (edge order)
- ``edge_softmax(csr, score [E, H], self_score [R, H] | None) -> (alpha, alpha_self)``
- ``edge_softmax_backward(csr, alpha, alpha_self, grad, grad_self) -> (grad_score, grad_self_score)``

Backends: ``"numba"`` (multi-threaded CPU kernels with prefetched gathers, :mod:`.numba_cpu`) and
``"torch"`` (torch.sparse CSR and gathers: cuSPARSE on CUDA, the fallback on CPU). The choice is
``GNN_DIST_KERNELS`` = ``auto`` (default: numba for CPU tensors when numba imports, else torch),
``torch`` or ``numba``; :func:`use_backend` overrides it in a ``with`` block. CUDA tensors always
take the torch path. The choice is logged once. Autograd lives in :mod:`gnn_dist.nn.sparse`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from typing import Protocol

import torch

from .csr import CSR
from .torch_backend import TorchBackend

__all__ = ["CSR", "KernelBackend", "KernelBackendError", "ENV_VAR", "BACKEND_NAMES", "get_backend",
           "backend_for", "use_backend", "numba_available"]

log = logging.getLogger(__name__)

ENV_VAR = "GNN_DIST_KERNELS"
BACKEND_NAMES = ("auto", "torch", "numba")


class KernelBackendError(ValueError):
    """A kernel backend was asked for by a bad name, or is not available here."""


class KernelBackend(Protocol):
    """What a kernel backend provides (shapes in the module docstring)."""

    name: str

    def spmm(self, csr: CSR, values: torch.Tensor | None, x: torch.Tensor, row_scale: torch.Tensor | None = None,
             col_scale: torch.Tensor | None = None) -> torch.Tensor: ...

    def sddmm(self, csr: CSR, a: torch.Tensor, b: torch.Tensor, heads: int,
              chunk_elements: int) -> torch.Tensor: ...

    def edge_softmax(self, csr: CSR, score: torch.Tensor,
                     self_score: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]: ...

    def edge_softmax_backward(self, csr: CSR, alpha: torch.Tensor, alpha_self: torch.Tensor | None,
                              grad: torch.Tensor, grad_self: torch.Tensor | None
                              ) -> tuple[torch.Tensor, torch.Tensor | None]: ...


_TORCH = TorchBackend()
_state = threading.local()
_lock = threading.Lock()
_numba_backend: KernelBackend | None = None
_numba_error: str | None = None
_logged: set[tuple[str, str]] = set()


def _load_numba() -> KernelBackend | None:
    """The numba backend, or None (with the reason kept) when numba cannot be imported."""
    global _numba_backend, _numba_error
    with _lock:
        if _numba_backend is None and _numba_error is None:
            try:
                from .numba_cpu import NumbaBackend
                _numba_backend = NumbaBackend()
            except ImportError as err:
                _numba_error = f"{type(err).__name__}: {err}"
        return _numba_backend


def numba_available() -> bool:
    """Whether the numba CPU kernels can be used in this process."""
    return _load_numba() is not None


def _requested() -> str:
    override = getattr(_state, "override", None)
    if override is not None:
        return override
    value = os.environ.get(ENV_VAR, "auto").strip().lower() or "auto"
    if value not in BACKEND_NAMES:
        raise KernelBackendError(f"{ENV_VAR}={os.environ.get(ENV_VAR)!r} is not a kernel backend; "
                                 f"use one of {', '.join(BACKEND_NAMES)}")
    return value


def _log_once(requested: str, chosen: str, why: str) -> None:
    if (requested, chosen) not in _logged:
        _logged.add((requested, chosen))
        log.info("aggregation kernels: %s (%s=%s; %s)", chosen, ENV_VAR, requested, why)


def get_backend(name: str | None = None) -> KernelBackend:
    """The CPU backend for ``name`` (default: :func:`use_backend`'s, else ``$GNN_DIST_KERNELS``).

    Raises :class:`KernelBackendError` for an unknown name, or for ``"numba"`` when numba cannot
    be imported (``"auto"`` falls back to torch instead, and logs why).
    """
    requested = _requested() if name is None else name
    if requested not in BACKEND_NAMES:
        raise KernelBackendError(f"kernel backend {requested!r} is unknown; use one of {', '.join(BACKEND_NAMES)}")
    if requested == "torch":
        _log_once(requested, "torch", "forced")
        return _TORCH
    backend = _load_numba()
    if backend is None:
        if requested == "numba":
            raise KernelBackendError(f"{ENV_VAR}=numba but numba cannot be imported ({_numba_error}); "
                                     f"install numba or set {ENV_VAR}=torch")
        _log_once(requested, "torch", f"numba unavailable: {_numba_error}")
        return _TORCH
    _log_once(requested, "numba", "prefetching CPU kernels")
    return backend


def backend_for(t: torch.Tensor) -> KernelBackend:
    """The backend for tensors on ``t``'s device: torch on CUDA/other devices, else :func:`get_backend`."""
    if t.device.type != "cpu":
        return _TORCH
    backend = get_backend()
    if backend.name == "numba" and t.dtype not in (torch.float32, torch.float64):
        return _TORCH  # half/bfloat16: no numba kernel
    return backend


@contextlib.contextmanager
def use_backend(name: str) -> Iterator[KernelBackend]:
    """Use backend ``name`` (``auto``/``torch``/``numba``) in this thread inside the ``with`` block."""
    backend = get_backend(name)
    previous = getattr(_state, "override", None)
    _state.override = name
    try:
        yield backend
    finally:
        _state.override = previous
