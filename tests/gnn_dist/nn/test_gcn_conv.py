from __future__ import annotations

import logging

import pytest
import torch
import torch_geometric.nn as pyg

from gnn_dist.nn import Block, GCNConv


def test_repr_and_parameters():
    conv = GCNConv(16, 32)
    assert repr(conv) == "GCNConv(16, 32)"
    assert {n for n, _ in conv.named_parameters()} == {n for n, _ in pyg.GCNConv(16, 32).named_parameters()}
    assert GCNConv(16, 32, bias=False).bias is None


def test_four_node_graph_matches_pyg(kit):
    block = Block.from_graph(*kit.four_node())
    x = torch.randn(4, 16)
    conv = GCNConv(16, 32)
    out = conv(block, x)
    assert out.shape == (4, 32)
    kit.assert_matches_pyg(conv, pyg.GCNConv(16, 32), block, x)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_graph_matches_pyg(kit, seed):
    torch.manual_seed(seed)
    block = Block.from_graph(*kit.random_graph(seed))
    assert block.self_loop_mask.any() and (block.in_count == 0).any()
    kit.assert_matches_pyg(GCNConv(8, 5), pyg.GCNConv(8, 5), block, torch.randn(block.num_src, 8))


def test_without_bias_matches_pyg(kit):
    block = Block.from_graph(*kit.random_graph(3))
    kit.assert_matches_pyg(GCNConv(6, 6, bias=False), pyg.GCNConv(6, 6, bias=False), block,
                           torch.randn(block.num_src, 6))


@pytest.mark.parametrize("num_parts", [2, 3])
def test_split_with_halo_equals_whole_graph(kit, num_parts):
    torch.manual_seed(0)
    indptr, indices = kit.random_graph(5)
    kit.assert_split_equals_global(GCNConv(8, 4), indptr, indices, torch.randn(indptr.numel() - 1, 8), num_parts)


def _loop_consistent_weights(indices: torch.Tensor, indptr: torch.Tensor, seed: int) -> torch.Tensor:
    """Random positive weights in CSR order, every self-loop of a node weighing the same (PyG keeps
    one of a node's self-loops, which one depends on the order: with equal weights it does not
    matter)."""
    g = torch.Generator().manual_seed(seed)
    w = torch.rand(indices.numel(), generator=g) + 0.1
    dst = torch.repeat_interleave(torch.arange(indptr.numel() - 1), indptr.diff())
    loop = indices == dst
    w[loop] = 0.5 + dst[loop].float() / 10
    return w


@pytest.mark.parametrize("seed", [0, 1])
def test_weighted_graph_matches_pyg(kit, seed):
    """Edge weights with global weighted degrees: PyG's weighted GCN (``edge_weight=``), self-loops
    replaced by one of the stored weight (1 where none), isolated nodes and duplicates included."""
    torch.manual_seed(seed)
    indptr, indices = kit.random_graph(seed)
    w = _loop_consistent_weights(indices, indptr, seed)
    block = Block.from_graph(indptr, indices, edge_weight=w)
    assert block.weighted_degree is not None and block.self_loop_mask.any()
    x = torch.randn(block.num_src, 8)
    kit.assert_matches_pyg(GCNConv(8, 5), pyg.GCNConv(8, 5), block, x, edge_weight=block.edge_weight)
    conv = GCNConv(8, 5)
    assert not torch.allclose(conv(block, x), conv(Block.from_graph(indptr, indices), x)), "the weights apply"


@pytest.mark.parametrize("num_parts", [2, 3])
@pytest.mark.parametrize("in_dim", [4, 16])  # aggregates first / transforms first
def test_weighted_split_with_halo_equals_whole_graph(kit, num_parts, in_dim):
    torch.manual_seed(0)
    indptr, indices = kit.random_graph(5)
    w = _loop_consistent_weights(indices, indptr, 5)
    kit.assert_split_equals_global(GCNConv(in_dim, 6), indptr, indices, torch.randn(indptr.numel() - 1, in_dim),
                                   num_parts, edge_weight=w)


def test_weighted_block_without_degrees_warns_once_and_ignores_weights(kit, caplog):
    """A folder written before weighted degrees were stored: unweighted GCN, one warning."""
    import dataclasses

    indptr, indices = kit.random_graph(0)
    plain = Block.from_graph(indptr, indices)
    weighted = dataclasses.replace(Block.from_graph(indptr, indices, edge_weight=torch.rand(indices.numel())),
                                   weighted_degree=None)
    conv = GCNConv(4, 4)
    x = torch.randn(plain.num_src, 4)
    with caplog.at_level(logging.WARNING, logger="gnn_dist.nn.gcn_conv"):
        out = conv(weighted, x)
        conv(weighted, x)
    assert sum("ignores the block's edge weights" in r.getMessage() for r in caplog.records) == 1
    torch.testing.assert_close(out, conv(plain, x))


def test_weighted_gcn_norm_is_pygs(kit):
    from torch_geometric.nn.conv.gcn_conv import gcn_norm as pyg_gcn_norm

    from gnn_dist.nn import gcn_norm

    indptr, indices = kit.random_graph(4)
    w = _loop_consistent_weights(indices, indptr, 4).double()
    block = Block.from_graph(indptr, indices, edge_weight=w)
    edge_norm, self_norm = gcn_norm(block, torch.float64)
    ei, ew = pyg_gcn_norm(block.edge_index, w, block.num_src, add_self_loops=True)
    loops = ei[0] == ei[1]
    self_ref = torch.zeros(block.num_src, dtype=torch.float64).index_put_((ei[0][loops],), ew[loops])
    torch.testing.assert_close(self_norm, self_ref[:block.num_dst])
    kept = ~block.self_loop_mask
    torch.testing.assert_close(edge_norm[kept], ew[~loops])
    assert bool((edge_norm[block.self_loop_mask] == 0).all())


def test_bad_shapes(kit):
    block = Block.from_graph(*kit.four_node())
    conv = GCNConv(16, 32)
    with pytest.raises(ValueError, match=r"GCNConv\(16, 32\): x_src has 8 features per row but in_channels = 16"):
        conv(block, torch.randn(4, 8))
    with pytest.raises(ValueError, match=r"x_src has 3 rows but the block has num_src = 4"):
        conv(block, torch.randn(3, 16))
    with pytest.raises(ValueError, match=r"x_src must be a 2-D tensor"):
        conv(block, torch.randn(4))


def _backward_nodes(out: torch.Tensor) -> set[str]:
    """Names of the autograd nodes ``out`` depends on."""
    names, stack, seen = set(), [out.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        names.add(type(node).__name__)
        stack.extend(next_fn for next_fn, _ in node.next_functions)
    return names


# (in, out, x needs grad, grad mode on) -> aggregate first? (fewer SpMM columns, ties aggregate first)
ORDERS = [
    (16, 32, True, True, True),     # 16 x 2 <= 32 x 2
    (32, 16, True, True, False),    # 32 x 2 > 16 x 2
    (32, 16, False, True, True),    # first layer: 32 x 1 <= 16 x 2, no backward SpMM at all
    (40, 16, False, True, False),   # 40 x 1 > 16 x 2
    (16, 16, True, True, True),     # tie
    (32, 16, False, False, False),  # inference: 32 > 16
    (16, 32, False, False, True),
]


@pytest.mark.parametrize("in_ch,out_ch,x_grad,grad_mode,agg_first", ORDERS)
@pytest.mark.parametrize("bias", [True, False])
def test_both_orders_match_pyg(kit, in_ch, out_ch, x_grad, grad_mode, agg_first, bias):
    torch.manual_seed(0)
    block = Block.from_graph(*kit.random_graph(4))
    assert int(block.self_loops.max()) >= 2      # duplicate self-loops: the self term subtracts them
    ours, ref = GCNConv(in_ch, out_ch, bias=bias), pyg.GCNConv(in_ch, out_ch, bias=bias)
    ours.load_state_dict(ref.state_dict())
    x = torch.randn(block.num_src, in_ch)
    x1, x2 = x.clone().requires_grad_(x_grad), x.clone().requires_grad_(x_grad)
    with torch.set_grad_enabled(grad_mode):
        assert ours.aggregates_first(x1) is agg_first
        out1 = ours(block, x1)
        out2 = ref(x2, block.edge_index)
    torch.testing.assert_close(out1, out2, atol=1e-5, rtol=1e-5)
    if not grad_mode:
        assert out1.grad_fn is None
        return
    # aggregating first, a first layer's backward is GEMMs only
    assert ("_SpMMBackward" in _backward_nodes(out1)) is (x_grad or not agg_first)
    kit.backward_all(out1)
    kit.backward_all(out2)
    if x_grad:
        torch.testing.assert_close(x1.grad, x2.grad, atol=1e-5, rtol=1e-5)
    ref_params = dict(ref.named_parameters())
    for name, p in ours.named_parameters():
        torch.testing.assert_close(p.grad, ref_params[name].grad, atol=1e-5, rtol=1e-5, msg=name)


def test_graph_without_self_loops_matches_pyg(kit):
    src = torch.tensor([0, 1, 1, 2, 3, 3, 4])
    dst = torch.tensor([1, 0, 2, 3, 0, 4, 0])
    block = Block.from_graph(*kit.csr(src, dst, 6))     # node 5 isolated
    assert not block.self_loop_mask.any()
    kit.assert_matches_pyg(GCNConv(3, 7), pyg.GCNConv(3, 7), block, torch.randn(6, 3))   # aggregates first
    kit.assert_matches_pyg(GCNConv(7, 3), pyg.GCNConv(7, 3), block, torch.randn(6, 7))   # projects first


@pytest.mark.parametrize("num_parts", [2, 3])
def test_split_with_halo_aggregating_first_equals_whole_graph(kit, num_parts):
    torch.manual_seed(1)
    indptr, indices = kit.random_graph(6)
    conv = GCNConv(4, 8)
    assert conv.aggregates_first(torch.zeros(1, 4, requires_grad=True))
    kit.assert_split_equals_global(conv, indptr, indices, torch.randn(indptr.numel() - 1, 4), num_parts)


def test_gcn_norm_is_unchanged(kit):
    """``gcn_norm`` (used by the pipelined path) still gives PyG's per-edge weights and self weights."""
    from gnn_dist.nn import gcn_norm
    block = Block.from_graph(*kit.random_graph(2))
    edge_norm, self_norm = gcn_norm(block, torch.float64)
    deg = (block.in_degree - block.self_loops + 1).double()
    expect = (deg[block.indices] * deg[block.dst_index]).rsqrt().masked_fill(block.self_loop_mask, 0.0)
    torch.testing.assert_close(edge_norm, expect)
    torch.testing.assert_close(self_norm, 1 / deg[:block.num_dst])


# ---------------------------------------------------------------- GCNII's layer
@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
def test_gcn2_matches_pyg(kit, shared, weighted):
    from gnn_dist.nn import GCN2Conv

    torch.manual_seed(0)
    indptr, indices = kit.random_graph(3)
    w = _loop_consistent_weights(indices, indptr, 3) if weighted else None
    block = Block.from_graph(indptr, indices, edge_weight=w)
    ours = GCN2Conv(6, alpha=0.2, theta=0.5, layer=3, shared_weights=shared)
    ref = pyg.GCN2Conv(6, alpha=0.2, theta=0.5, layer=3, shared_weights=shared)
    ours.load_state_dict(ref.state_dict())
    x0 = torch.randn(block.num_src, 6)
    x1 = torch.randn(block.num_src, 6).requires_grad_()
    x2 = x1.detach().clone().requires_grad_()
    out1 = ours(block, x1, x0)
    out2 = ref(x2, x0, block.edge_index, **({"edge_weight": block.edge_weight} if weighted else {}))
    torch.testing.assert_close(out1, out2, atol=1e-5, rtol=1e-5)
    kit.backward_all(out1)
    kit.backward_all(out2)
    torch.testing.assert_close(x1.grad, x2.grad, atol=1e-5, rtol=1e-5)
    refp = dict(ref.named_parameters())
    for name, p in ours.named_parameters():
        torch.testing.assert_close(p.grad, refp[name].grad, atol=1e-5, rtol=1e-5, msg=name)


@pytest.mark.parametrize("num_parts", [2, 3])
def test_gcn2_split_with_halo_equals_whole_graph(kit, num_parts):
    """Bound to the destinations' x_0, the layer is a one-input layer that runs per part."""
    from gnn_dist.nn import GCN2Conv, is_decomposable

    torch.manual_seed(0)
    indptr, indices = kit.random_graph(5)
    n = indptr.numel() - 1
    x0 = torch.randn(n, 8)
    conv = GCN2Conv(8, alpha=0.1, theta=0.5, layer=2)
    assert is_decomposable(conv.bind(x0))

    def call(c, b, xs):
        return c.bind(x0[b.src_original_ids[:b.num_dst]])(b, xs)
    kit.assert_split_equals_global(conv, indptr, indices, torch.randn(n, 8), num_parts, call=call)


def test_gcn2_errors(kit):
    from gnn_dist.nn import GCN2Conv

    with pytest.raises(ValueError, match="must be given together"):
        GCN2Conv(4, 0.1, theta=0.5)
    block = Block.from_graph(*kit.four_node())
    with pytest.raises(ValueError, match=r"x_0 must be \[>= 4 destinations, 4\]"):
        GCN2Conv(4, 0.1)(block, torch.randn(4, 4), torch.randn(3, 4))



def test_gcn2_bound_to_a_block_reads_x0_by_destination(kit):
    """Bound with its block, the layer runs on a sub-block of any of its destinations, in any
    order (the overlap schedule's boundary chunks), and reads those rows of x_0."""
    from gnn_dist.nn import GCN2Conv

    torch.manual_seed(1)
    indptr, indices = kit.random_graph(6)
    block = Block.from_graph(indptr, indices)
    x, x0 = torch.randn(block.num_src, 4), torch.randn(block.num_dst, 4)
    conv = GCN2Conv(4, alpha=0.3)
    whole = conv(block, x, x0)
    bound = conv.bind(x0, block)
    for rows in (torch.tensor([7, 2, 30, 5]), torch.randperm(block.num_dst)):
        sub, src = block.sub_block(rows)
        torch.testing.assert_close(bound(sub, x[src]), whole[rows])
