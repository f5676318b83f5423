"""A model's per-rank rows (a typed run's learnable node rows, :mod:`gnn_dist.distributed.per_rank`)
in checkpoints and model files: each row saved by its id, whichever rank held it, and restored
onto any cut of the same graph (any number of ranks).

Saving gathers every rank's rows of a parameter on rank 0 (a collective), ordered by id:
``{name: {"ids": int64 [n], "values": [n, ...]}}`` (and, for the optimizer, its per-row state
of the same shape: Adam's moments, and its step count). Loading gives each rank its own rows by
id; a row the saved table lacks is refused naming the parameter. The rest of the state (the
shared weights, every other optimizer entry) is saved as before, without the per-rank entries.
Memory: rank 0 holds one parameter's table (and its state) at a time while saving.
"""

from __future__ import annotations

from typing import Any

import torch

from ..distributed import gather_rows, get_rank
from ..distributed.per_rank import is_per_rank, row_ids

__all__ = ["per_rank_parameters", "shared_state", "gather_state_rows", "local_state", "gather_optimizer_rows",
           "shared_optimizer_state", "restore_optimizer_rows", "pack_tables", "unpack_tables", "IDS_SUFFIX"]


def per_rank_parameters(model: torch.nn.Module) -> dict[str, torch.nn.Parameter]:
    """The model's per-rank parameters by state-dict name (empty for most models)."""
    return {name: p for name, p in model.named_parameters() if is_per_rank(p)}


def shared_state(state: dict[str, Any], model: torch.nn.Module) -> dict[str, Any]:
    """``state`` (a state dict of ``model``) without its per-rank entries."""
    rows = per_rank_parameters(model)
    return {k: v for k, v in state.items() if k not in rows}


def _gather_table(ids: torch.Tensor, values: dict[str, torch.Tensor]) -> dict[str, torch.Tensor] | None:
    """Every rank's rows ``values`` (same row count as ``ids``) on rank 0, ordered by id."""
    got_ids = gather_rows(ids.contiguous())
    got = {k: gather_rows(v.detach().contiguous()) for k, v in values.items()}
    if got_ids is None:
        return None
    all_ids = torch.cat([t.cpu() for t in got_ids])
    order = torch.argsort(all_ids)
    return {"ids": all_ids[order], **{k: torch.cat([t.cpu() for t in parts])[order] for k, parts in got.items()}}


def gather_state_rows(state: dict[str, Any], model: torch.nn.Module) -> dict[str, dict[str, torch.Tensor]] | None:
    """The per-rank entries of ``state`` (a state dict of ``model``, e.g. the best epoch's weights)
    as whole tables on rank 0: ``{name: {"ids", "values"}}``; None on the other ranks. A collective
    (no-op, ``{}``, for a model without per-rank parameters)."""
    out: dict[str, dict[str, torch.Tensor]] = {}
    for name, p in per_rank_parameters(model).items():
        table = _gather_table(row_ids(p), {"values": state[name]})
        if table is not None:
            out[name] = table
    return out if get_rank() == 0 else None


def _pick(table: dict[str, torch.Tensor], ids: torch.Tensor, name: str, where: str) -> torch.Tensor:
    """The positions of ``ids`` in a saved table's ids; one line when some are missing."""
    saved = table["ids"]
    pos = torch.searchsorted(saved, ids).clamp(max=max(saved.numel() - 1, 0))
    if ids.numel() and (saved.numel() == 0 or not torch.equal(saved[pos], ids)):
        missing = int((saved[pos] != ids).sum()) if saved.numel() else ids.numel()
        raise ValueError(f"{where}: the saved rows of {name} lack {missing} of this rank's {ids.numel()} rows "
                         f"(saved for another graph)")
    return pos


def local_state(state: dict[str, Any], tables: dict[str, dict[str, torch.Tensor]] | None,
                model: torch.nn.Module, where: str) -> dict[str, Any]:
    """A saved shared ``state`` completed with this rank's rows of each per-rank parameter, picked
    by id from ``tables`` (:func:`gather_state_rows`'s)."""
    rows = per_rank_parameters(model)
    if not rows:
        return state
    tables = tables or {}
    out = dict(state)
    for name, p in rows.items():
        if name not in tables:
            raise ValueError(f"{where}: no saved rows of {name} (the state was saved by another model)")
        out[name] = tables[name]["values"][_pick(tables[name], row_ids(p), name, where)]
    return out


def gather_optimizer_rows(optimizer: torch.optim.Optimizer, model: torch.nn.Module) -> dict[str, Any] | None:
    """The optimizer's state of each per-rank parameter, row-shaped entries as whole tables by id on
    rank 0 (scalars, such as Adam's step, as saved by rank 0); None on the other ranks."""
    out: dict[str, Any] = {}
    for name, p in per_rank_parameters(model).items():
        st = optimizer.state.get(p, {})
        rowwise = {k: v for k, v in sorted(st.items()) if torch.is_tensor(v) and v.shape == p.shape}
        table = _gather_table(row_ids(p), rowwise)
        if table is not None:
            scalars = {k: v.detach().cpu().clone() if torch.is_tensor(v) else v for k, v in st.items() if k not in rowwise}
            out[name] = {"rows": table, "scalars": scalars}
    return out if get_rank() == 0 else None


def shared_optimizer_state(state: dict[str, Any], optimizer: torch.optim.Optimizer,
                           model: torch.nn.Module) -> dict[str, Any]:
    """``optimizer.state_dict()``'s ``state`` without the per-rank parameters' entries (indexed as
    the optimizer's parameters are)."""
    rows = {id(p) for p in per_rank_parameters(model).values()}
    if not rows:
        return state
    index = [id(p) for group in optimizer.param_groups for p in group["params"]]
    dropped = {i for i, pid in enumerate(index) if pid in rows}
    return {**state, "state": {k: v for k, v in state["state"].items() if int(k) not in dropped}}


def restore_optimizer_rows(optimizer: torch.optim.Optimizer, model: torch.nn.Module,
                           saved: dict[str, Any] | None, where: str) -> None:
    """Put each per-rank parameter's saved optimizer state (its rows, by id) back."""
    for name, p in per_rank_parameters(model).items():
        entry = (saved or {}).get(name)
        if entry is None:
            optimizer.state.pop(p, None)
            continue
        table = entry["rows"]
        pos = _pick(table, row_ids(p), name, where)
        state = {k: v.to(p.device) if torch.is_tensor(v) else v for k, v in entry["scalars"].items()}
        state.update({k: v[pos].to(device=p.device, dtype=p.dtype).clone() for k, v in table.items() if k != "ids"})
        optimizer.state[p] = state


IDS_SUFFIX = ".ids"
"""A packed table's ids entry: ``NAME.ids`` beside ``NAME`` (:func:`pack_tables`)."""


def pack_tables(state: dict[str, torch.Tensor], tables: dict[str, dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """A flat state dict (a model file's): ``state`` and, per table, ``NAME`` its rows and
    ``NAME.ids`` their ids."""
    out = dict(state)
    for name, table in tables.items():
        out[name], out[name + IDS_SUFFIX] = table["values"], table["ids"]
    return out


def unpack_tables(state: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, dict[str, torch.Tensor]]]:
    """:func:`pack_tables` undone: ``(the other entries, {name: {"ids", "values"}})``; an ids
    entry must be int64 ``[n]`` beside a table of ``n`` rows (``ValueError`` otherwise)."""
    names = [k[:-len(IDS_SUFFIX)] for k in state if k.endswith(IDS_SUFFIX) and k[:-len(IDS_SUFFIX)] in state]
    tables = {}
    for name in names:
        ids, values = state[name + IDS_SUFFIX], state[name]
        if ids.dtype != torch.int64 or ids.dim() != 1 or values.dim() < 1 or values.shape[0] != ids.numel() \
                or (ids.numel() > 1 and not bool((ids[1:] > ids[:-1]).all())):
            raise ValueError(f"{name}{IDS_SUFFIX} is not the ascending int64 ids of {name}'s rows")
        tables[name] = {"ids": ids, "values": values}
    skip = set(names) | {n + IDS_SUFFIX for n in names}
    return {k: v for k, v in state.items() if k not in skip}, tables
