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

Backends, by name, and what each runs on CPU and on CUDA tensors:

- ``auto`` (default): CPU: numba when it imports (float32/64), else torch. CUDA: torch
  (cuSPARSE) until a GPU measurement chooses (``benchmarks/gpu_check.sh`` times both).
- ``torch``: torch.sparse CSR and gathers on both (:mod:`.torch_backend`).
- ``numba``: CPU: multi-threaded kernels with prefetched gathers (:mod:`.numba_cpu`). CUDA: torch.
- ``triton``: CUDA: fused Triton kernels (:mod:`.triton_gpu`). CPU: the ``auto`` choice, or
  the Triton kernels in Triton's interpreter when ``TRITON_INTERPRET=1`` (how they are tested).

The name comes from ``GNN_DIST_KERNELS`` (default ``auto``); :func:`use_backend` overrides it in
a ``with`` block. Asking for ``numba`` or ``triton`` for tensors it would run on (numba: CPU;
triton: CUDA, or CPU under the interpreter) when it cannot be imported is an error that says
why; ``auto`` falls back to torch instead. Each choice is logged once. Half and bfloat16
CPU tensors take torch (no numba kernel). Autograd lives in :mod:`gnn_dist.nn.sparse`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterator
from typing import Protocol

import torch

from .csr import CSR
from .torch_backend import TorchBackend

__all__ = ["CSR", "KernelBackend", "KernelBackendError", "ENV_VAR", "BACKEND_NAMES", "get_backend",
           "backend_for", "use_backend", "numba_available", "triton_available"]

log = logging.getLogger(__name__)

ENV_VAR = "GNN_DIST_KERNELS"
BACKEND_NAMES = ("auto", "torch", "numba", "triton")


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
_logged: set[tuple[str, str]] = set()


class _OptionalBackend:
    """A backend whose module needs an optional package: imported on first use, once; when the
    import fails, the reason is kept for the error or the log line."""

    def __init__(self, name: str, load: Callable[[], KernelBackend]) -> None:
        self.name = name
        self._load = load
        self._lock = threading.Lock()
        self.backend: KernelBackend | None = None
        self.error: str | None = None

    def get(self) -> KernelBackend | None:
        with self._lock:
            if self.backend is None and self.error is None:
                try:
                    self.backend = self._load()
                except ImportError as err:
                    self.error = f"{type(err).__name__}: {err}"
            return self.backend

    def require(self) -> KernelBackend:
        """The backend, or :class:`KernelBackendError` naming the import error."""
        backend = self.get()
        if backend is None:
            raise KernelBackendError(f"{ENV_VAR}={self.name} but {self.name} cannot be imported ({self.error}); "
                                     f"install {self.name} or set {ENV_VAR}=auto")
        return backend


def _numba_backend() -> KernelBackend:
    from .numba_cpu import NumbaBackend
    return NumbaBackend()


def _triton_backend() -> KernelBackend:
    from .triton_gpu import TritonBackend
    return TritonBackend()


_NUMBA = _OptionalBackend("numba", _numba_backend)
_TRITON = _OptionalBackend("triton", _triton_backend)


def numba_available() -> bool:
    """Whether the numba CPU kernels can be used in this process."""
    return _NUMBA.get() is not None


def triton_available() -> bool:
    """Whether the Triton kernels can be used in this process (on CUDA tensors, or on CPU tensors
    under Triton's interpreter)."""
    return _TRITON.get() is not None


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
    """The backend for ``name`` (default: :func:`use_backend`'s, else ``$GNN_DIST_KERNELS``);
    ``auto`` is the CPU choice (numba, else torch).

    Raises :class:`KernelBackendError` for an unknown name, or for ``"numba"``/``"triton"`` when
    that package cannot be imported (``"auto"`` falls back to torch instead, and logs why).
    """
    requested = _requested() if name is None else name
    if requested not in BACKEND_NAMES:
        raise KernelBackendError(f"kernel backend {requested!r} is unknown; use one of {', '.join(BACKEND_NAMES)}")
    if requested == "torch":
        _log_once(requested, "torch", "forced")
        return _TORCH
    if requested == "triton":
        backend = _TRITON.require()
        _log_once(requested, "triton", "fused Triton kernels")
        return backend
    if requested == "numba":
        backend = _NUMBA.require()
        _log_once(requested, "numba", "prefetching CPU kernels")
        return backend
    backend, why = _auto_cpu()
    _log_once(requested, backend.name, why)
    return backend


def _auto_cpu() -> tuple[KernelBackend, str]:
    """``auto``'s CPU backend (numba, else torch) and why."""
    backend = _NUMBA.get()
    if backend is None:
        return _TORCH, f"numba unavailable: {_NUMBA.error}"
    return backend, "prefetching CPU kernels"


def backend_for(t: torch.Tensor) -> KernelBackend:
    """The backend for tensors on ``t``'s device and of its dtype (see the module docstring)."""
    requested = _requested()
    if t.device.type == "cuda":
        if requested == "triton":
            return get_backend("triton")
        why = {"auto": "auto's CUDA choice until a GPU measurement decides (benchmarks/gpu_check.sh)",
               "numba": "numba runs CPU tensors only"}.get(requested, "forced")
        _log_once(requested, "torch (cuSPARSE) for CUDA tensors", why)
        return _TORCH
    if t.device.type != "cpu":
        return _TORCH
    if requested == "triton":
        triton_backend = _TRITON.require()
        if getattr(triton_backend, "interpreted", False):
            _log_once(requested, "triton", "fused Triton kernels, in Triton's interpreter")
            return triton_backend
        backend, why = _auto_cpu()
        _log_once(requested, f"{backend.name} for CPU tensors",
                  f"Triton kernels take CUDA tensors (CPU ones only under TRITON_INTERPRET=1); {why}")
    else:
        backend = get_backend(requested)
    if backend.name == "numba" and t.dtype not in (torch.float32, torch.float64):
        return _TORCH  # half/bfloat16: no numba kernel
    return backend


@contextlib.contextmanager
def use_backend(name: str) -> Iterator[KernelBackend]:
    """Use backend ``name`` (``auto``/``torch``/``numba``/``triton``) in this thread inside the ``with`` block."""
    backend = get_backend(name)
    previous = getattr(_state, "override", None)
    _state.override = name
    try:
        yield backend
    finally:
        _state.override = previous
