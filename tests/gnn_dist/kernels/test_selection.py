"""Backend choice: GNN_DIST_KERNELS, the override, the fallback when numba or triton is missing,
the choice per device, the logged choice, the numba cache fallback, and the thread count."""

from __future__ import annotations

import logging

import pytest
import torch

import gnn_dist.kernels as kernels
from gnn_dist.kernels import KernelBackendError, backend_for, get_backend, use_backend
from kernel_cases import random_block


def _missing(monkeypatch, optional, package: str) -> None:
    monkeypatch.setattr(optional, "backend", None)
    monkeypatch.setattr(optional, "error", f"ModuleNotFoundError: No module named '{package}'")
    monkeypatch.setattr(kernels, "_logged", set())


@pytest.fixture
def no_numba(monkeypatch):
    """numba as if it could not be imported."""
    _missing(monkeypatch, kernels._NUMBA, "numba")


def test_env_var_chooses(monkeypatch):
    monkeypatch.setenv("GNN_DIST_KERNELS", "torch")
    assert get_backend().name == "torch"
    monkeypatch.setenv("GNN_DIST_KERNELS", "auto")
    assert get_backend().name == ("numba" if kernels.numba_available() else "torch")
    with use_backend("torch"):
        assert get_backend().name == "torch"
    monkeypatch.setenv("GNN_DIST_KERNELS", "cuda-magic")
    with pytest.raises(KernelBackendError, match=r"GNN_DIST_KERNELS='cuda-magic' is not a kernel backend; "
                                                 r"use one of auto, torch, numba, triton"):
        get_backend()
    with pytest.raises(KernelBackendError, match=r"kernel backend 'fast' is unknown"):
        get_backend("fast")


def test_fallback_without_numba(no_numba, monkeypatch, caplog):
    monkeypatch.setenv("GNN_DIST_KERNELS", "auto")
    with caplog.at_level(logging.INFO, logger="gnn_dist.kernels"):
        assert get_backend().name == "torch"
        assert get_backend().name == "torch"
    msgs = [r.getMessage() for r in caplog.records if "aggregation kernels" in r.getMessage()]
    assert len(msgs) == 1 and "numba unavailable: ModuleNotFoundError" in msgs[0]   # logged once
    monkeypatch.setenv("GNN_DIST_KERNELS", "numba")
    with pytest.raises(KernelBackendError, match=r"GNN_DIST_KERNELS=numba but numba cannot be imported "
                                                 r"\(ModuleNotFoundError.*set GNN_DIST_KERNELS=auto"):
        get_backend()
    b = random_block(0)   # the layers' spmm still works through the fallback
    from gnn_dist.nn.sparse import spmm
    monkeypatch.setenv("GNN_DIST_KERNELS", "auto")
    x = torch.randn(b.num_src, 3, dtype=torch.float64)
    expect = torch.zeros(b.num_dst, 3, dtype=torch.float64).index_add(0, b.dst_index, x[b.indices])
    torch.testing.assert_close(spmm(b, x), expect)


def test_triton_per_device(monkeypatch, caplog):
    """``triton`` on CPU tensors: only under Triton's interpreter (the kernels conftest turns it
    on), else the CPU ``auto`` choice, logged once (CUDA tensors: the test below)."""
    triton_gpu = pytest.importorskip("gnn_dist.kernels.triton_gpu")
    assert triton_gpu.INTERPRETED
    with use_backend("triton"):
        assert backend_for(torch.zeros(1)).name == "triton"
        monkeypatch.setattr(triton_gpu.TritonBackend, "interpreted", False)
        with caplog.at_level(logging.INFO, logger="gnn_dist.kernels"):
            monkeypatch.setattr(kernels, "_logged", set())
            assert backend_for(torch.zeros(1)).name == get_backend("auto").name
        assert "Triton kernels take CUDA tensors" in caplog.text
    monkeypatch.setenv("GNN_DIST_KERNELS", "auto")
    assert backend_for(torch.zeros(1, device="meta")).name == "torch"


class _OnCuda:
    """What :func:`backend_for` reads of a tensor (its device and dtype), as if it were on a GPU."""

    device = torch.device("cuda", 0)
    dtype = torch.float32


def test_cuda_tensors_take_cusparse_unless_triton(monkeypatch):
    for name, expected in (("auto", "torch"), ("torch", "torch"), ("numba", "torch")):
        monkeypatch.setenv("GNN_DIST_KERNELS", name)
        assert backend_for(_OnCuda()).name == expected, name
    if kernels.triton_available():
        monkeypatch.setenv("GNN_DIST_KERNELS", "triton")
        assert backend_for(_OnCuda()).name == "triton"


def test_triton_missing(monkeypatch):
    _missing(monkeypatch, kernels._TRITON, "triton")
    assert not kernels.triton_available()
    with pytest.raises(KernelBackendError, match=r"GNN_DIST_KERNELS=triton but triton cannot be imported "
                                                 r"\(ModuleNotFoundError: No module named 'triton'\); install triton"):
        use_backend("triton").__enter__()
    monkeypatch.setenv("GNN_DIST_KERNELS", "triton")
    with pytest.raises(KernelBackendError, match=r"triton cannot be imported"):
        backend_for(torch.zeros(1))
    with pytest.raises(KernelBackendError, match=r"triton cannot be imported"):
        backend_for(_OnCuda())


def test_non_float_dtypes_use_torch():
    pytest.importorskip("numba")
    with use_backend("numba"):
        assert backend_for(torch.zeros(1, dtype=torch.float32)).name == "numba"
        assert backend_for(torch.zeros(1, dtype=torch.bfloat16)).name == "torch"


def test_jit_without_cache_location(monkeypatch, caplog):
    """A read-only install with no writable cache folder still compiles (without a disk cache)."""
    numba_cpu = pytest.importorskip("gnn_dist.kernels.numba_cpu")
    real = numba_cpu.numba.njit
    calls = []

    def njit(*args, **options):
        if args:   # numba's own modules, imported lazily while compiling, decorate with njit(fn)
            return real(*args, **options)
        calls.append(options["cache"])
        if options["cache"]:
            raise RuntimeError("cannot cache function 'f': no locator available for file 'x.py'")
        return real(**options)

    monkeypatch.setattr(numba_cpu.numba, "njit", njit)
    with caplog.at_level(logging.WARNING, logger="gnn_dist.kernels.numba_cpu"):
        f = numba_cpu._jit()(lambda a: a + 1)
    assert f(1) == 2 and calls == [True, False]
    assert "compiled without an on-disk cache" in caplog.text and "NUMBA_CACHE_DIR" in caplog.text


def test_threads_follow_torch():
    numba_cpu = pytest.importorskip("gnn_dist.kernels.numba_cpu")
    import numba
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert numba_cpu._num_threads() == 1 and numba.get_num_threads() == 1
        torch.set_num_threads(10_000)
        assert numba_cpu._num_threads() == numba.config.NUMBA_NUM_THREADS
    finally:
        torch.set_num_threads(before)
        numba_cpu._num_threads()
