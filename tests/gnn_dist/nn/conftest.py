"""Graphs and comparisons shared by the layer tests (exposed as the ``kit`` fixture)."""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch

from gnn_dist.nn import Block

ATOL = 1e-5
RTOL = 1e-5


class Kit:
    """Helpers: graphs in CSR by destination, blocks of a split graph, comparisons with PyG."""

    @staticmethod
    def csr(src: torch.Tensor, dst: torch.Tensor, num_nodes: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Edges ``src[i] -> dst[i]`` as ``(indptr, indices)`` by destination (stable order)."""
        order = torch.argsort(dst, stable=True)
        indptr = torch.zeros(num_nodes + 1, dtype=torch.long)
        indptr[1:] = torch.cumsum(torch.bincount(dst, minlength=num_nodes), 0)
        return indptr, src[order].long()

    @staticmethod
    def four_node() -> tuple[torch.Tensor, torch.Tensor]:
        """PyG's hand-written test graph: node 0 linked both ways with nodes 1, 2, 3."""
        src = torch.tensor([0, 0, 0, 1, 2, 3])
        dst = torch.tensor([1, 2, 3, 0, 0, 0])
        return Kit.csr(src, dst, 4)

    @staticmethod
    def random_graph(seed: int, num_nodes: int = 40, num_edges: int = 160) -> tuple[torch.Tensor, torch.Tensor]:
        """A directed graph with isolated nodes (the last fifth), self-loops and duplicate edges."""
        g = torch.Generator().manual_seed(seed)
        active = num_nodes - num_nodes // 5
        src = torch.randint(0, active, (num_edges,), generator=g)
        dst = torch.randint(0, active, (num_edges,), generator=g)
        src[:8] = dst[:8]                              # self-loops, some repeated below
        src = torch.cat([src, src[:3], src[20:30]])    # duplicate edges and duplicate self-loops
        dst = torch.cat([dst, dst[:3], dst[20:30]])
        return Kit.csr(src, dst, num_nodes)

    @staticmethod
    def split(indptr: torch.Tensor, indices: torch.Tensor, num_parts: int, seed: int,
              edge_weight: torch.Tensor | None = None) -> list[Block]:
        """Blocks of a random assignment of the nodes to ``num_parts`` parts (global degrees)."""
        n = indptr.numel() - 1
        g = torch.Generator().manual_seed(seed)
        owner = torch.randint(0, num_parts, (n,), generator=g)
        owner[:num_parts] = torch.arange(num_parts)    # no empty part
        perm = torch.randperm(n, generator=g)          # inner rows in a shuffled order
        return [Block.from_graph(indptr, indices, perm[owner[perm] == p], edge_weight=edge_weight)
                for p in range(num_parts)]

    @staticmethod
    def backward_all(out: torch.Tensor, seed: int = 1) -> None:
        g = torch.Generator().manual_seed(seed)
        out.backward(torch.randn(out.shape, generator=g))

    @staticmethod
    def assert_matches_pyg(ours: torch.nn.Module, ref: torch.nn.Module, block: Block, x: torch.Tensor,
                           **ref_kwargs: Any) -> None:
        """Same weights: equal outputs, input gradients and weight gradients."""
        ours.load_state_dict(ref.state_dict())
        x1 = x.clone().requires_grad_()
        x2 = x.clone().requires_grad_()
        out1 = ours(block, x1)
        out2 = ref(x2, block.edge_index, **ref_kwargs)
        torch.testing.assert_close(out1, out2, atol=ATOL, rtol=RTOL)
        Kit.backward_all(out1)
        Kit.backward_all(out2)
        torch.testing.assert_close(x1.grad, x2.grad, atol=ATOL, rtol=RTOL)
        ref_params = dict(ref.named_parameters())
        for name, p in ours.named_parameters():
            torch.testing.assert_close(p.grad, ref_params[name].grad, atol=ATOL, rtol=RTOL, msg=name)

    @staticmethod
    def assert_split_equals_global(conv: torch.nn.Module, indptr: torch.Tensor, indices: torch.Tensor,
                                   x: torch.Tensor, num_parts: int, seed: int = 0,
                                   call: Callable[..., torch.Tensor] | None = None,
                                   edge_weight: torch.Tensor | None = None) -> None:
        """Each part's block with its x_src rows from the global x: outputs and gradients equal
        the whole-graph block's (the gather from global x stands in for the halo exchange)."""
        call = call or (lambda c, b, xs: c(b, xs))
        whole = Block.from_graph(indptr, indices, edge_weight=edge_weight)
        xg = x.clone().requires_grad_()
        out_g = call(conv, whole, xg)
        Kit.backward_all(out_g)
        grads_g = {n: p.grad.clone() for n, p in conv.named_parameters()}
        conv.zero_grad()
        xp = x.clone().requires_grad_()
        out_p = torch.zeros_like(out_g)
        blocks = Kit.split(indptr, indices, num_parts, seed, edge_weight)
        assert sum(b.num_halo for b in blocks) > 0, "the test split should have halo rows"
        for b in blocks:
            out_p = out_p.index_put((b.src_original_ids[:b.num_dst],), call(conv, b, xp[b.src_original_ids]))
        torch.testing.assert_close(out_p, out_g, atol=ATOL, rtol=RTOL)
        Kit.backward_all(out_p)
        torch.testing.assert_close(xp.grad, xg.grad, atol=ATOL, rtol=RTOL)
        for n, p in conv.named_parameters():
            torch.testing.assert_close(p.grad, grads_g[n], atol=ATOL, rtol=RTOL, msg=n)


@pytest.fixture
def kit() -> type[Kit]:
    return Kit
