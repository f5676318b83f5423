"""Activation offload (``offload_activations``): refused with one line where the ranks train on
the CPU; on CUDA (``benchmarks/gpu_check.sh``) the same losses and gradients bit for bit with less
device memory at the end of the forward."""

from __future__ import annotations

import copy

import pytest
import torch

from pipeline_utils import small_graph, write_parts


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_parts(small_graph(num_nodes=120, num_edges=600), 1, tmp_path_factory.mktemp("offload") / "p1")


def test_offload_is_refused_on_cpu_before_the_ranks_start_and_by_the_trainer(folder):
    import gnn_dist
    from gnn_dist.config_cli import parse_run_config
    from gnn_dist.models import build_model
    from gnn_dist.validate import check_run

    if torch.cuda.is_available():
        pytest.skip("the ranks would train on CUDA here")
    with pytest.raises(ValueError, match=r"^offload_activations: the ranks train on cpu, .*--recompute"):
        check_run(parse_run_config(["--data", folder, "--offload-activations"])[0])
    part = gnn_dist.load_partition(folder)
    model = build_model("gcn", in_dim=part.feature_dim, hidden_dim=8, out_dim=part.num_classes, num_layers=2)
    with pytest.raises(ValueError, match=r"^offload_activations: the ranks train on cpu"):
        gnn_dist.Trainer(model, part, offload_activations=True)


def test_offload_leaves_cpu_tensors_where_they_are():
    from gnn_dist.offload import ActivationOffload

    x = torch.randn(600, 600, requires_grad=True)
    with ActivationOffload(min_bytes=0) as off:
        y = (x * x).sum()
    y.backward()
    assert off.offloaded_bytes == 0 and torch.equal(x.grad, 2 * x)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (benchmarks/gpu_check.sh runs it)")
@pytest.mark.parametrize("recompute", ["none", "all"])
def test_cuda_offload_equals_the_plain_run_with_less_device_memory(recompute):
    from gnn_dist.models import build_model
    from gnn_dist.nn import Block
    from gnn_dist.nn.part import FullGraph
    from gnn_dist.offload import ActivationOffload
    from gnn_dist.pipeline.recompute import with_recompute

    dev = torch.device("cuda")
    g = torch.Generator().manual_seed(0)
    n, e = 20000, 200000
    src, dst = torch.randint(0, n, (e,), generator=g), torch.randint(0, n, (e,), generator=g)
    order = torch.argsort(dst * n + src)
    indptr = torch.zeros(n + 1, dtype=torch.long)
    indptr[1:] = torch.bincount(dst, minlength=n).cumsum(0)
    block = Block.from_graph(indptr, src[order]).to(dev)
    x = torch.randn(n, 64, generator=g).to(dev)
    torch.manual_seed(0)
    base = build_model("gcn", in_dim=64, hidden_dim=256, out_dim=8, num_layers=4, dropout=0.5, seed=1).to(dev)
    results = {}
    for offload in (False, True):
        model = copy.deepcopy(base).train()
        torch.cuda.synchronize()
        ctx = ActivationOffload() if offload else torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t)
        with ctx:
            out = model(with_recompute(FullGraph(block), recompute), x)
        torch.cuda.synchronize()
        held = torch.cuda.memory_allocated(dev)
        out.square().mean().backward()
        torch.cuda.synchronize()
        results[offload] = (held, [p.grad.clone() for p in model.parameters()],
                            getattr(ctx, "offloaded_bytes", 0))
        del out, model
    assert results[True][2] > 0
    assert results[True][0] < results[False][0]
    assert all(torch.equal(a, b) for a, b in zip(results[True][1], results[False][1]))
