"""A rank's own part of a partition folder, as torch tensors, with its halo exchange.

Shapes (per rank): ``I`` inner rows (this rank's nodes), ``H`` halo rows (sources owned by other
ranks), ``F`` feature width, ``C`` classes.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from partitioners.format import PartData, PartitionMeta, load_part, load_partition_meta

from .distributed.halo import HaloExchanger
from .hetero.part import TypedPart, training_meta
from .distributed.halo_check import check_halo_agreement, halo_digests
from .distributed import all_gather_json, all_ranks_agree, get_rank, get_world_size, raise_on_all_ranks
from .kernels import Kernels, default_kernels, resolve_kernels
from .nn import DropoutKey
from .nn.block import Block
from .nn.part import Activation, LayerInput, exchange_then_run
from .nn.sparse import prepare

__all__ = ["LocalPartition", "load_partition", "partition_fingerprint"]

log = logging.getLogger(__name__)


@dataclass(eq=False)
class LocalPartition:
    """One rank's part: inner-row data, the local block and the halo exchange.

    ``x`` ``[I, F]``, ``y`` ``[I]`` (class ids) or ``[I, C]`` (multi-label 0/1), masks ``[I]``;
    ``global_ids``/``original_ids`` ``[I + H]``; :attr:`x` (``[I, F]``) is loaded on first use.
    ``exchange(h_inner [I, F]) -> [I + H, F]`` is the
    differentiable halo exchange a model calls before each layer.
    """

    path: Path
    meta: PartitionMeta
    part_id: int
    num_parts: int
    num_inner: int
    num_halo: int
    features: np.ndarray | None
    """The inner rows' features ``[I, F]`` as stored (a read-only ``np.memmap`` of
    ``features.npy``, hotness-ordered); None without features. :attr:`x` is their copy on the
    device, made on first use; a :class:`~gnn_dist.cache.FeatureStore` can serve them instead."""
    hotness: np.ndarray
    """int64 ``[I]``: the inner rows' hotness scores (descending: the row order)."""
    y: torch.Tensor | None
    train_mask: torch.Tensor
    val_mask: torch.Tensor
    test_mask: torch.Tensor
    global_ids: torch.Tensor
    original_ids: torch.Tensor
    block: Block
    exchanger: HaloExchanger
    device: torch.device
    typed: TypedPart | None = None
    """A typed (heterogeneous) part's types, per-type features and rows (:mod:`gnn_dist.hetero`);
    None for a homogeneous one. Its :attr:`meta` is then :func:`~gnn_dist.hetero.training_meta`'s
    view: the target type's classes, the widest feature width."""
    link_pairs: dict[str, torch.Tensor] | None = None
    """The edge split's positive pairs stored in this part, by split (``train``/``val``/``test``):
    int64 ``[2, E_s]`` new global ids, destinations owned by this part (CPU); None without an
    edge split (see :mod:`gnn_dist.link`)."""
    link_relations: dict[str, torch.Tensor] | None = None
    """A typed part's edge split: each pair's relation id, int64 ``[E_s]`` by split (the
    ``link_*_rel.npy`` files); None otherwise."""
    _layer: int | None = field(default=None, init=False, repr=False)
    """The layer :meth:`run_layer` is running (its exchange's tag), or None."""
    maps_before_exchange = True
    """Its exchange is exact: a narrowing layer's mapped rows travel (:func:`~gnn_dist.nn.part.exchange_then_run`)."""

    @functools.cached_property
    def x(self) -> torch.Tensor | None:
        """The inner rows' features ``[I, F]`` on :attr:`device` (copied from :attr:`features`
        on first use, then kept), or None when the partition has none. A typed part's are its
        featured types' rows, zero-padded to the widest (:meth:`~gnn_dist.hetero.TypedPart.static_input`)."""
        if self.typed is not None:
            return self.typed.static_input(self.num_inner, self.device)
        return _tensor(self.features, self.device)

    @property
    def num_classes(self) -> int:
        return int(self.meta.num_classes)

    @property
    def multilabel(self) -> bool:
        return self.meta.label_kind == "multilabel"

    @property
    def global_num_train(self) -> int:
        """Training nodes over all parts (from the metadata: no collective)."""
        return int(sum(p.num_train for p in self.meta.parts))

    @property
    def feature_dim(self) -> int:
        return int(self.meta.feature_dim)

    @property
    def edge_feature_dim(self) -> int:
        """``D_e`` of the part's edge features (:attr:`Block.edge_attr <gnn_dist.nn.Block.edge_attr>`); 0 without."""
        return int(self.meta.edge_feature_dim)

    def exchange(self, h_inner: torch.Tensor) -> torch.Tensor:
        """``[I, F] -> [I + H, F]``: inner rows, then the halo rows fetched from their owners,
        exactly (as they are, at once: evaluation's exchange)."""
        tag, self._layer = self._layer, None
        return self.exchanger.exchange(h_inner, tag=tag)

    def run_layer(self, index: int, conv: torch.nn.Module, h: torch.Tensor | LayerInput, *,
                  dropout_key: DropoutKey | None = None, activation: Activation | None = None) -> torch.Tensor:
        """A layer as ``sync`` runs it, with the exact exchange (see :mod:`gnn_dist.nn.part`); the
        exchange is tagged with the layer's index (a failure names the layer)."""
        self._layer = index
        return exchange_then_run(self, conv, h, dropout_key=dropout_key, activation=activation)

    def __repr__(self) -> str:
        return (f"LocalPartition(part {self.part_id}/{self.num_parts}, inner={self.num_inner}, "
                f"halo={self.num_halo}, edges={self.block.num_edges}, device={self.device})")


def partition_fingerprint(meta: PartitionMeta) -> str:
    """Hex sha256 of a partition folder's manifest: the number of parts and every file's path
    and sha256 as ``partition.json`` lists them (top-level files, then each part's). Two folders
    with the same fingerprint hold the same parts, data, halo rows and row orders; it reads no data."""
    manifest = {"num_parts": int(meta.num_parts),
                "files": sorted((e.path, e.sha256) for e in meta.files.values()),
                "parts": [sorted((e.path, e.sha256) for e in pm.files.values()) for pm in meta.parts]}
    return hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()


def _check_same_partition(path: Path, meta: PartitionMeta, group: dist.ProcessGroup | None) -> None:
    """Every rank loads the same partition (a collective): a rank on a copy whose data differ
    (even re-checksummed) would train another graph silently. Refuses on every rank, naming the
    ranks and their folders."""
    mine = [partition_fingerprint(meta), str(path)]
    everyone = all_gather_json(mine, group)
    if any(fp != everyone[0][0] for fp, _ in everyone):
        groups: dict[str, list[str]] = {}
        for r, (fp, where) in enumerate(everyone):
            groups.setdefault(fp, []).append(f"rank {r} ({where})")
        listed = "; ".join(f"{', '.join(ranks)}: fingerprint {fp[:12]}..." for fp, ranks in groups.items())
        raise ValueError(f"the ranks loaded different partitions: {listed}. Every rank must read the same "
                         f"partition folder (copy it whole, and check with gnn-dist inspect --verify)")


def _tensor(a: np.ndarray | None, device: torch.device, dtype: torch.dtype | None = None) -> torch.Tensor | None:
    if a is None:
        return None
    t = torch.from_numpy(np.array(a))  # copy out of the read-only mmap
    return t.to(device=device, dtype=dtype) if dtype is not None else t.to(device)


def _build_block(data: PartData, num_inner: int, num_halo: int, device: torch.device, kernels: Kernels) -> Block:
    """The part's local block: destinations its ``num_inner`` rows, sources inner + halo rows,
    with its kernel structures (the transposed CSR of the backward) built at load time."""
    block = Block.from_csr(
        indptr=torch.from_numpy(np.array(data.indptr)),
        indices=torch.from_numpy(np.array(data.indices)).long(),
        num_src=num_inner + num_halo,
        in_degree=torch.from_numpy(np.array(data.in_degree)),
        out_degree=torch.from_numpy(np.array(data.out_degree)),
        self_loops=torch.from_numpy(np.array(data.self_loops)),
        src_original_ids=torch.from_numpy(np.array(data.original_ids)),
        edge_weight=None if data.edge_weight is None else torch.from_numpy(np.array(data.edge_weight)),
        weighted_degree=None if data.weighted_degree is None else torch.from_numpy(np.array(data.weighted_degree)),
        edge_attr=None if data.edge_attr is None else torch.from_numpy(np.array(data.edge_attr)),
        kernels=kernels,
    ).to(device)
    return prepare(block)


def load_partition(path: str | Path, rank: int | None = None, device: torch.device | str | None = None,
                   *, verify: bool = True, group: dist.ProcessGroup | None = None,
                   kernels: str | Kernels | None = None) -> LocalPartition:
    """Load the part of ``path`` that belongs to ``rank`` (default: this process's rank).

    Only that part's files are read (memory-mapped, checksums verified unless ``verify=False``).
    The world size must equal the folder's ``num_parts``; this is checked before any collective.
    ``kernels`` (a name or :class:`~gnn_dist.kernels.Kernels`; default: the process's,
    :func:`~gnn_dist.kernels.default_kernels`) are the part's aggregation kernels, held by its
    block. Then the ranks compare the folder's fingerprint (:func:`partition_fingerprint`) and refuse to
    start when they read different partitions; after loading, they compare digests of the halo rows
    each pair of parts exchanges (:mod:`~gnn_dist.distributed.halo_check`) and refuse parts that
    disagree (a ``HaloMismatchError`` on every rank naming the two parts and their files).
    A part that fails to load (missing or corrupt file: a ``PartitionFormatError`` naming it)
    fails the load on every rank (see :func:`~gnn_dist.distributed.all_ranks_agree`) before the halo exchange is
    set up with the peers, so no rank waits for a peer that has already given up.
    """
    path = Path(path)
    meta: PartitionMeta | None = None
    error: BaseException | None = None
    try:
        meta = load_partition_meta(path)
    except Exception as exc:  # shared with the peers below (after the world-size check), then re-raised
        error = exc
    cur_rank, world_size = get_rank(group), get_world_size(group)
    if meta is not None and world_size != meta.num_parts:  # before any collective: a clear error, no hang
        raise ValueError(f"{path}: the partition has num_parts={meta.num_parts} but the job runs "
                         f"world_size={world_size} ranks; launch with --nproc-per-node "
                         f"{meta.num_parts} or re-partition with --parts {world_size}")
    raise_on_all_ranks(error, f"reading {path / 'partition.json'}", group)  # one rank's bad copy fails them all
    assert meta is not None
    _check_same_partition(path, meta, group)
    rank = cur_rank if rank is None else int(rank)
    if not 0 <= rank < meta.num_parts:
        raise ValueError(f"rank {rank} is out of range for a partition of {meta.num_parts} parts")
    device = torch.device(device) if device is not None else torch.device("cpu")
    num_inner = int(meta.parts[rank].num_inner)
    num_halo = int(meta.parts[rank].num_halo)
    with all_ranks_agree(f"loading {path}", group):
        data = load_part(path, rank, mmap=True, verify=verify)
        block = _build_block(data, num_inner, num_halo, device,
                             default_kernels() if kernels is None else resolve_kernels(kernels))
        original_ids = _tensor(data.original_ids, device)
        # check=False: the counts are compared with the peers below, with the ids (one gather)
        exchanger = HaloExchanger(
            torch.from_numpy(np.array(data.send_index)).to(device),
            [int(v) for v in data.send_offsets], [int(v) for v in data.halo_offsets], num_inner,
            group=group, world_size=meta.num_parts, rank=rank, row_ids=original_ids, check=False)
        digests = halo_digests(data.global_ids, exchanger.send_index.numpy(), exchanger.send_offsets,
                               exchanger.halo_offsets, num_inner)
    check_halo_agreement(path, digests, group)  # the parts agree on what they exchange (else fail on all)

    def mask(a: np.ndarray | None) -> torch.Tensor:
        return _tensor(a, device) if a is not None else torch.zeros(num_inner, dtype=torch.bool, device=device)

    labels = data.labels
    y = None
    if labels is not None:
        y = _tensor(labels, device, torch.float32 if labels.ndim == 2 else torch.long)
    part = LocalPartition(
        path=path, meta=meta, part_id=rank, num_parts=meta.num_parts, num_inner=num_inner,
        num_halo=num_halo, features=data.features, hotness=np.asarray(data.hotness), y=y,
        train_mask=mask(data.train_mask), val_mask=mask(data.val_mask), test_mask=mask(data.test_mask),
        global_ids=_tensor(data.global_ids, device), original_ids=original_ids,
        block=block, exchanger=exchanger, device=device, link_pairs=_link_pairs(data))
    if data.typed is not None:
        _attach_typed(part, data)
    _warm_up_kernels(block)
    log.debug("loaded %r", part)
    return part


def _attach_typed(part: LocalPartition, data: PartData) -> None:
    """A typed part: its types on the block, the target type's labels, the training view of the meta."""
    typed = TypedPart.load(part.meta, data.typed, part.original_ids, part.num_inner)
    part.typed = typed
    part.block.types = typed.block_types(data.typed["edge_type"], part.device)
    labels = typed.union_labels(data.typed, part.num_inner)
    part.y = None if labels is None else labels.to(part.device)
    part.meta = training_meta(part.meta)
    if "link_train_rel" in data.typed:   # a typed edge split: the triples' relations
        part.link_relations = {s: torch.from_numpy(np.array(data.typed[f"link_{s}_rel"], dtype=np.int64))
                               for s in ("train", "val", "test")}


def _link_pairs(data: PartData) -> dict[str, torch.Tensor] | None:
    """The part's edge-split pairs by split (``link_train.npy`` ...), or None without a split."""
    pairs = {s: getattr(data, f"link_{s}", None) for s in ("train", "val", "test")}
    if all(p is None for p in pairs.values()):
        return None
    return {s: torch.from_numpy(np.array(p, dtype=np.int64)).reshape(2, -1) for s, p in pairs.items()}


def _warm_up_kernels(block: Block) -> None:
    """Choose the block's kernel backend for its device and run one aggregation of a 1-wide input,
    at load: numba's import and its first load of a cached kernel (1-3 s together, the kernels
    themselves are compiled once and cached on disk) then happen here, not in the first training
    step, so the first epoch's time is the step's own. The result is discarded."""
    from .nn.sparse import spmm

    with torch.no_grad():
        spmm(block, torch.zeros(block.num_src, 1, dtype=torch.float32, device=block.device))
