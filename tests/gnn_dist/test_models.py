from __future__ import annotations

import copy
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from gnn_dist.models import GAT, GCN, GIN, MODEL_SPECS, MODELS, FullGraph, GraphSAGE, build_model
from gnn_dist.nn import Block
from gnn_dist.nn.part import exchange_then_run


def random_graph(seed: int, n: int = 60, e: int = 300) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, n - 5, (e,), generator=g)   # the last nodes are isolated
    dst = torch.randint(0, n - 5, (e,), generator=g)
    src[:6] = dst[:6]
    order = torch.argsort(dst, stable=True)
    indptr = torch.zeros(n + 1, dtype=torch.long)
    indptr[1:] = torch.cumsum(torch.bincount(dst, minlength=n), 0)
    return indptr, src[order]


class ThreadedParts:
    """P parts run by P threads in lockstep; ``exchange`` gathers halo rows from the other
    threads' inner rows (differentiable, so one backward covers all parts)."""

    def __init__(self, indptr: torch.Tensor, indices: torch.Tensor, owner: torch.Tensor,
                 edge_attr: torch.Tensor | None = None) -> None:
        n = indptr.numel() - 1
        self.num_parts = int(owner.max()) + 1
        self.blocks = [Block.from_graph(indptr, indices, torch.nonzero(owner == p).flatten().flip(0), edge_attr=edge_attr)
                       for p in range(self.num_parts)]
        # position of every node in the concatenation of all parts' inner rows
        order = torch.cat([b.src_original_ids[:b.num_dst] for b in self.blocks])
        self.position = torch.empty(n, dtype=torch.long)
        self.position[order] = torch.arange(n)
        self.slots: list[torch.Tensor | None] = [None] * self.num_parts
        self.barrier = threading.Barrier(self.num_parts, timeout=30)

    def part(self, p: int) -> "ThreadedParts._Part":
        return ThreadedParts._Part(self, p)

    class _Part:
        def __init__(self, owner: "ThreadedParts", p: int) -> None:
            self.owner, self.p, self.block = owner, p, owner.blocks[p]

        def exchange(self, h: torch.Tensor) -> torch.Tensor:
            o, b = self.owner, self.block
            o.slots[self.p] = h
            o.barrier.wait()
            everyone = torch.cat(o.slots)
            halo = everyone[o.position[b.src_original_ids[b.num_dst:]]]
            o.barrier.wait()  # nobody overwrites a slot before all have read it
            return torch.cat([h, halo])

        def run_layer(self, index, conv, h, *, dropout_key=None, activation=None):
            return exchange_then_run(self, conv, h, dropout_key=dropout_key, activation=activation)

    def run(self, models: list[torch.nn.Module], x: torch.Tensor) -> torch.Tensor:
        """Each model replica on its part; outputs scattered back to global row order."""
        def one(p: int) -> torch.Tensor:
            b = self.blocks[p]
            return models[p](self.part(p), x[b.src_original_ids[:b.num_dst]])
        with ThreadPoolExecutor(self.num_parts) as pool:
            outs = [f.result(timeout=60) for f in [pool.submit(one, p) for p in range(self.num_parts)]]
        rows = torch.cat([b.src_original_ids[:b.num_dst] for b in self.blocks])
        return torch.cat(outs)[torch.argsort(rows)]


EDGE_DIM = 2
"""Width of the edge features the blocks carry (read by the models that need them: gine)."""


def edge_attr(indices: torch.Tensor) -> torch.Tensor:
    return torch.randn(indices.numel(), EDGE_DIM, generator=torch.Generator().manual_seed(11))


def make(name: str, in_dim: int = 6, **kw) -> torch.nn.Module:
    torch.manual_seed(0)
    if getattr(MODELS[name], "edge_features", None) == "required":
        kw.setdefault("edge_dim", EDGE_DIM)
    return build_model(name, in_dim=in_dim, hidden_dim=16, out_dim=3, num_layers=3, **kw)


HOMOGENEOUS = sorted(name for name, spec in MODEL_SPECS.items() if not spec.typed)
"""The models of homogeneous graphs (R-GCN's typed runs: tests/gnn_dist/test_rgcn_*.py)."""


@pytest.mark.parametrize("name", HOMOGENEOUS)
def test_forward_shape_and_repr(name):
    indptr, indices = random_graph(0)
    model = make(name)
    out = model(FullGraph(Block.from_graph(indptr, indices, edge_attr=edge_attr(indices))), torch.randn(60, 6))
    assert out.shape == (60, 3)
    assert repr(model) == f"{type(model).__name__}(6, 3, num_layers=3)"
    assert len(model.convs) == 3


def test_gat_heads():
    model = GAT(6, 16, 3, num_layers=2, heads=4)
    assert (model.convs[0].heads, model.convs[0].out_channels, model.convs[0].concat) == (4, 4, True)
    assert (model.convs[1].heads, model.convs[1].in_channels, model.convs[1].concat) == (1, 16, False)
    with pytest.raises(ValueError, match=r"GAT: hidden_dim = 10 must be a positive multiple of heads = 4"):
        GAT(6, 10, 3, num_layers=2, heads=4)


@pytest.mark.parametrize("name", HOMOGENEOUS)
@pytest.mark.parametrize("num_parts", [2, 3])
def test_parts_with_dropout_equal_one_device(name, num_parts):
    """Training mode, dropout on: P threaded parts give the whole graph's logits and (summed
    over replicas, as the all-reduce does) its weight gradients, for two different splits."""
    indptr, indices = random_graph(1)
    x = torch.randn(60, 6, generator=torch.Generator().manual_seed(2))
    kw = dict(attn_dropout=0.3) if name == "gat" else {}
    reference = make(name, dropout=0.5, seed=7, **kw).train()
    replicas = [copy.deepcopy(reference) for _ in range(num_parts)]
    whole = Block.from_graph(indptr, indices, edge_attr=edge_attr(indices))
    out_ref = reference(FullGraph(whole), x)
    owner = torch.randint(0, num_parts, (60,), generator=torch.Generator().manual_seed(num_parts))
    owner[:num_parts] = torch.arange(num_parts)
    parts = ThreadedParts(indptr, indices, owner, edge_attr(indices))
    assert all(b.num_halo > 0 for b in parts.blocks)
    out = parts.run(replicas, x)
    torch.testing.assert_close(out, out_ref, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(out_ref, reference.eval()(FullGraph(whole), x))
    grad_out = torch.randn(out.shape, generator=torch.Generator().manual_seed(3))
    out_ref.backward(grad_out)
    out.backward(grad_out)
    for (n, p), *reps in zip(reference.named_parameters(), *(r.parameters() for r in replicas)):
        torch.testing.assert_close(sum(r.grad for r in reps), p.grad, atol=1e-5, rtol=1e-5, msg=n)
    assert all(int(r.dropout_step) == 1 for r in replicas)


def test_dropout_step_buffer():
    indptr, indices = random_graph(0)
    part = FullGraph(Block.from_graph(indptr, indices))
    x = torch.randn(60, 6)
    model = GCN(6, 16, 3, num_layers=2, dropout=0.5)
    assert "dropout_step" in model.state_dict() and int(model.dropout_step) == 0
    first = model(part, x)
    state = copy.deepcopy(model.state_dict())
    assert int(state["dropout_step"]) == 1
    second = model(part, x)
    assert not torch.allclose(first, second)      # a new step draws a new mask
    model.eval()
    model(part, x)
    assert int(model.dropout_step) == 2           # eval does not advance the step
    resumed = GCN(6, 16, 3, num_layers=2, dropout=0.5)
    resumed.load_state_dict(state)
    torch.testing.assert_close(resumed(part, x), second)   # resumes with the same masks


def test_input_checks():
    part = FullGraph(Block.from_graph(*random_graph(0)))
    model = GraphSAGE(6, 16, 3, num_layers=2)
    with pytest.raises(ValueError, match=r"GraphSAGE: x has 5 features per row but the model's in_dim is 6"):
        model(part, torch.randn(60, 5))
    with pytest.raises(ValueError, match=r"GraphSAGE: x has 59 rows but the part has 60 inner rows"):
        model(part, torch.randn(59, 6))
    with pytest.raises(ValueError, match=r"GIN: num_layers must be a positive int, got 0"):
        GIN(6, 16, 3, num_layers=0)
    with pytest.raises(ValueError, match=r"GCN: dropout must be in \[0, 1\), got 1.0"):
        GCN(6, 16, 3, num_layers=2, dropout=1.0)
    with pytest.raises(ValueError, match=r"FullGraph needs a block without halo rows"):
        FullGraph(Block.from_graph(*random_graph(0), dst_nodes=torch.arange(30)))


def test_build_model():
    assert isinstance(build_model("gat", in_dim=4, hidden_dim=8, out_dim=2, num_layers=2, heads=2), GAT)
    with pytest.raises(ValueError, match=r"unknown model 'mlp'; choose one of gat, gcn, gcnii, gin, .*resgcn, ressage, rgcn, sage"):
        build_model("mlp", in_dim=4, hidden_dim=8, out_dim=2, num_layers=2)
    with pytest.raises(ValueError, match=r"heads=4 does not apply to the 'gcn' model \(its options: none\)"):
        build_model("gcn", in_dim=4, hidden_dim=8, out_dim=2, num_layers=2, heads=4)
