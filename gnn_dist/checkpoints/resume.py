"""The checks of a checkpoint against the run that resumes it: the same optimizer and model
(:func:`check_fits`, :func:`model_info`), weights, optimizer state and config that fit this
run's (:func:`check_applies`), and the pre-launch check of the checkpoint ``--resume`` names
(:func:`check_resume`), and whether it was trained on this run's data (:func:`check_same_data`:
the same partition, or another cut of the same graph). Each refusal is one
:class:`~gnn_dist.checkpoints.format.CheckpointError` naming the file."""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any

import torch

from partitioners.format.graph_digest import SCHEME_1_FIELD, GraphPrint

from ..config import RESUME_MODES, CheckpointConfig, TrainerConfig
from .files import latest_checkpoint, load_checkpoint
from .format import CheckpointError
from .state import _describe

__all__ = ["model_info", "check_fits", "check_resume", "check_applies", "check_same_data", "DataIdentity"]

_ARCH_FIELDS = ("in_dim", "hidden_dim", "out_dim", "num_layers")
"""Model attributes a checkpoint must agree with (its weights' shapes depend on them)."""
_RUN_FIELDS = ("dropout", "input_dropout", "activation", "seed")
"""Model attributes that may change on resume (with a warning: the run no longer reproduces)."""


def _saved_optim(state: dict[str, Any]) -> dict[str, Any]:
    """The optimizer section of a checkpoint's config."""
    return state["config"].get("trainer", state["config"]).get("optim", {})


def check_fits(state: dict[str, Any], model: torch.nn.Module, optimizer: str, path: str | Path) -> None:
    """Refuse (:class:`~gnn_dist.checkpoints.format.CheckpointError`) a checkpoint written with another
    optimizer or for another model (its class or a size its weights' shapes depend on)."""
    theirs = _saved_optim(state)
    if theirs.get("optimizer") != optimizer:
        raise CheckpointError(f"the checkpoint was written with optimizer={theirs.get('optimizer')!r}, "
                              f"this run uses optimizer={optimizer!r}", path=path)
    info, now = state.get("model_info", {}), model_info(model)
    arch = [k for k in ("class", *_ARCH_FIELDS) if k in info and k in now and info[k] != now[k]]
    if arch:
        diff = ", ".join(f"{k}={info[k]!r} (this run: {now[k]!r})" for k in arch)
        raise CheckpointError(f"the checkpoint was written for another model: {diff}", path=path)


def check_resume(config: CheckpointConfig, model: torch.nn.Module, optimizer: str) -> None:
    """Before any rank starts (``gnn_dist.train --validate``): the checkpoint ``config.resume``
    would continue from fits ``model`` (built on the meta device) and ``optimizer``, as
    :meth:`~.manager.CheckpointManager.resume` checks it in the ranks; nothing when there is none to resume
    (``auto`` on an empty folder).

    Raises:
        CheckpointError: naming the file: unreadable or corrupt, another model or optimizer, or
            ``latest`` finds none.
    """
    want = config.resume
    if want is None:
        return
    if want in RESUME_MODES:
        if config.checkpoint_dir is None:
            return   # the config refuses resume without a folder
        where = latest_checkpoint(config.checkpoint_dir)
        if where is None:
            if want == "latest":
                raise CheckpointError("--resume latest: the folder holds no checkpoint (use --resume auto to "
                                      "start afresh when there is none)", path=config.checkpoint_dir)
            return
    else:
        where = Path(want)
    state = load_checkpoint(where)
    check_fits(state, model, optimizer, where)
    _check_weights(state, model, where)


def _kind(value: Any) -> str:
    """What a config value is, as :func:`check_applies` compares them."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "a bool"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "a dict"
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return "a number"
    return type(value).__name__


_HINT_KINDS = {bool: "a bool", int: "a number", float: "a number", str: "a string", list: "a list", tuple: "a list",
               dict: "a dict", type(None): "None"}


def _hint_kinds(hint: Any) -> set[str] | None:
    """The kinds of value a config field's annotation admits (None: any, or not known here)."""
    if hint in _HINT_KINDS:
        return {_HINT_KINDS[hint]}
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        kinds: set[str] = set()
        for arg in args:
            more = _hint_kinds(arg)
            if more is None:
                return None
            kinds |= more
        return kinds
    if origin is typing.Literal:
        return {_kind(a) for a in args}
    if origin in _HINT_KINDS:
        return {_HINT_KINDS[origin]}
    return None


def _check_config_kinds(theirs: Any, mine: Any, field: str, path: str | Path) -> None:
    """Every field of the checkpoint's config (``theirs``, :func:`~gnn_dist.config.to_dict`'s
    output) that this version's config dataclass ``mine`` has holds a value its annotation admits
    (a field only the checkpoint has, of another version, is not looked at)."""
    stack = [(field, theirs, mine)]
    while stack:
        where, t, m = stack.pop()
        if not isinstance(t, dict):
            raise CheckpointError(f"field {where} is {_describe(t)}, expected a dict (a config section): the file "
                                  f"was modified (its checksum recomputed) or written by another program", path=path)
        try:
            hints = typing.get_type_hints(type(m))
        except Exception:   # an annotation this process cannot resolve: nothing to compare with
            hints = {}
        for f in dataclasses.fields(m):
            if f.name not in t:
                continue
            value, live = t[f.name], getattr(m, f.name)
            if dataclasses.is_dataclass(live) and dataclasses.is_dataclass(hints.get(f.name)):
                stack.append((f"{where}.{f.name}", value, live))
                continue
            kinds = _hint_kinds(hints.get(f.name))
            if kinds is not None and _kind(value) not in kinds:
                raise CheckpointError(f"field {where}.{f.name} is {_describe(value)}, where this gnn-dist takes "
                                      f"{' or '.join(sorted(kinds))}: the file was modified (its checksum "
                                      f"recomputed) or written by another program", path=path)


def _check_weights(state: dict[str, Any], model: torch.nn.Module, path: str | Path) -> None:
    """The checkpoint's weights (and the model selection's best weights) have this model's
    tensor names and shapes (``model`` may be on the meta device); its per-rank rows are saved
    apart, by id (:mod:`.node_rows`)."""
    from .node_rows import shared_state

    shapes = {k: tuple(v.shape) for k, v in shared_state(model.state_dict(), model).items()}
    for field, weights in (("model", state["model"]), ("selection.weights", (state.get("selection") or {})
                                                                            .get("weights"))):
        if weights is None:
            continue
        extra, lost = sorted(set(weights) - set(shapes)), sorted(set(shapes) - set(weights))
        if extra or lost:
            raise CheckpointError(f"field {field} does not fit this model: "
                                  + "; ".join(x for x in (f"unexpected {', '.join(extra[:4])}" if extra else "",
                                                          f"missing {', '.join(lost[:4])}" if lost else "") if x),
                                  path=path)
        for name, t in weights.items():
            if tuple(t.shape) != shapes[name]:
                raise CheckpointError(f"field {field}.{name} has shape {list(t.shape)}, this model's "
                                      f"{list(shapes[name])}", path=path)


def check_applies(state: dict[str, Any], model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                  config: TrainerConfig, path: str | Path) -> None:
    """Refuse (:class:`~gnn_dist.checkpoints.format.CheckpointError`, one line naming the file and the
    field) a checkpoint (its field types already checked by
    :func:`~gnn_dist.checkpoints.state.check_state`) whose weights, optimizer state, model-selection
    weights or config do not fit this run's ``model``, ``optimizer`` and ``config`` (every saved
    config field this version has must hold a value its annotation admits): checked before
    anything is applied, so a refused resume changes nothing and a bad state never reaches the
    first step."""
    _check_weights(state, model, path)
    params = [p for group in optimizer.param_groups for p in group["params"]]
    groups, mine = state["optimizer"]["param_groups"], optimizer.state_dict()["param_groups"]
    if len(groups) != len(mine) or any(len(g["params"]) != len(m["params"]) for g, m in zip(groups, mine)):
        raise CheckpointError(f"field optimizer.param_groups holds {[len(g['params']) for g in groups]} parameters "
                              f"per group, this optimizer {[len(m['params']) for m in mine]}", path=path)
    order = {p: i for i, p in enumerate(q for g in groups for q in g["params"])}
    for g, (theirs, ours) in enumerate(zip(groups, mine)):
        for key, value in theirs.items():
            if key != "params" and key in ours and value is not None and ours[key] is not None \
                    and _kind(value) != _kind(ours[key]):
                raise CheckpointError(f"field optimizer.param_groups[{g}].{key} is {_describe(value)}, this "
                                      f"optimizer takes {_kind(ours[key])}", path=path)
    for index, entry in state["optimizer"]["state"].items():
        shape = tuple(params[order[index]].shape)
        for key, value in entry.items():
            if isinstance(value, torch.Tensor) and value.dim() and tuple(value.shape) != shape:
                raise CheckpointError(f"field optimizer.state[{index}].{key} has shape {list(value.shape)}, its "
                                      f"parameter {list(shape)}", path=path)
            if isinstance(value, torch.Tensor) and not value.dtype.is_floating_point and key != "step":
                raise CheckpointError(f"field optimizer.state[{index}].{key} is {_describe(value)}, expected "
                                      f"a float tensor", path=path)
    saved = state["config"]
    _check_config_kinds(saved.get("trainer", saved), config, "config" + (".trainer" if "trainer" in saved else ""),
                        path)


@dataclasses.dataclass(frozen=True, slots=True)
class DataIdentity:
    """What a checkpoint records of the data it was trained on, and what a resume compares:
    the partition folder's fingerprint (its files), the graph fingerprint (the graph by original
    node ids, the same for every cut; None for folders written before it existed), the number
    of parts, how the graph fingerprint was computed (``graph_fingerprint_scheme``: 2 for typed
    folders whose fingerprint covers relations and per-type data, 1 otherwise) and a scheme-2
    typed folder's scheme-1 digest of its graph (``scheme_1_graph_fingerprint``, None without)."""

    partition: str | None
    graph: str | None
    num_parts: int | None
    scheme: int = 1
    scheme_1: str | None = None

    @classmethod
    def of_state(cls, state: dict[str, Any]) -> "DataIdentity":
        return cls(state.get("partition"), state.get("graph_fingerprint"), state.get("world_size"),
                   state.get("graph_fingerprint_scheme", 1), state.get(SCHEME_1_FIELD))

    @property
    def graph_print(self) -> GraphPrint:
        return GraphPrint(self.graph, self.scheme, self.scheme_1)


def check_same_data(saved: DataIdentity, mine: DataIdentity, where: str, *, any_partition: bool,
                    path: str | Path) -> tuple[str, bool] | None:
    """Whether a checkpoint trained on ``saved`` may resume on ``mine`` (the partition folder
    ``where``): None for the same partition; ``(line, True)``, the line saying what the resume
    does, for another cut of the same graph (equal graph fingerprints: the weights, optimizer and
    every replicated state apply as they are, so the run continues exactly). Fingerprints of
    different schemes (a typed folder cut before scheme 2 and one cut after) are compared by
    scheme 1 when the newer side records its scheme-1 digest, and the line says the graph was
    verified by the older scheme, which does not cover relations or per-type data. Raises
    :class:`~gnn_dist.checkpoints.format.CheckpointError` (one line naming both) for another
    graph, for fingerprints of different schemes that cannot be compared (the newer side has no
    scheme-1 digest), or another partition when either side has no graph fingerprint, unless
    ``any_partition``: then ``(warning, False)``."""
    if saved.partition == mine.partition:
        return None
    both = saved.graph is not None and mine.graph is not None
    common = saved.graph_print.compare(mine.graph_print) if both else None
    by = f" by scheme {common[0]}" if common is not None and saved.scheme != mine.scheme else ""
    if common is not None and common[1] == common[2]:
        note = by and (f" (verified by the older scheme's fingerprint, which does not cover relations or per-type "
                       f"data: the checkpoint's is of scheme {saved.scheme}, this folder's of scheme {mine.scheme})")
        return (f"resumed a P={saved.num_parts} run's checkpoint on P={mine.num_parts} ({where}), same graph "
                f"fingerprint{by} {common[2][:16]}...{note}", True)
    if common is not None:
        what = (f"the checkpoint was written for another graph (graph fingerprint{by} {common[1][:16]}..., "
                f"{saved.num_parts} parts); this run's {where} holds graph fingerprint{by} {common[2][:16]}... "
                f"({mine.num_parts} parts)")
    elif both:
        what = (f"the checkpoint's graph fingerprint {saved.graph[:16]}... ({saved.num_parts} parts) is of scheme "
                f"{saved.scheme} and this run's {where} holds one of scheme {mine.scheme} ({mine.num_parts} parts): "
                f"typed folders cut before scheme 2 have a fingerprint that does not cover relations and per-type "
                f"data, so the two cannot be compared and the graph is not verified")
    else:
        what = (f"the checkpoint was written for another partition (fingerprint {str(saved.partition)[:16]}..., "
                f"{saved.num_parts} parts); this run's {where} has fingerprint {str(mine.partition)[:16]}... "
                f"({mine.num_parts} parts)")
    if not any_partition:
        raise CheckpointError(what + "; if it is the same graph partitioned again, pass --resume-any-partition "
                                     "(resume_any_partition=True)", path=path)
    return f"{path}: {what}; resuming it anyway (--resume-any-partition)", False


def model_info(model: torch.nn.Module) -> dict[str, Any]:
    """The model's class and the size/seed/dropout/activation attributes it has (BasicGNN's), for
    checkpoints."""
    info: dict[str, Any] = {"class": type(model).__name__}
    for name in (*_ARCH_FIELDS, *_RUN_FIELDS):
        value = getattr(model, name, None)
        if isinstance(value, (int, float, str)) and not isinstance(value, bool):
            info[name] = value
    return info
