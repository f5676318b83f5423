"""What a checkpoint's state holds and the checks of a loaded one: the RNG states
(:func:`rng_state`, :func:`set_rng_state`) and the type of every field a resume reads
(:func:`check_state`, one :class:`~gnn_dist.checkpoints.format.CheckpointError` naming the file
and the field)."""

from __future__ import annotations

import os
import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .format import _RANK_NAME_RE, _SHA256_RE, CheckpointError

__all__ = ["rng_state", "set_rng_state", "check_state"]


def rng_state() -> dict[str, Any]:
    """The RNG states of python, numpy and torch (CPU, and CUDA when present), as tensors and
    ints only (what ``weights_only`` loading accepts)."""
    version, words, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "python": {"version": int(version), "words": torch.tensor(words, dtype=torch.int64),
                   "gauss": None if gauss is None else float(gauss)},
        "numpy": {"kind": str(kind), "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)), "pos": int(pos),
                  "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
        "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore the states :func:`rng_state` returned (CUDA only when both sides have it)."""
    py = state["python"]
    random.setstate((py["version"], tuple(int(w) for w in py["words"].tolist()), py["gauss"]))
    npy = state["numpy"]
    np.random.set_state((npy["kind"], npy["keys"].numpy().astype(np.uint32), npy["pos"], npy["has_gauss"],
                         npy["cached_gaussian"]))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


# ---------------------------------------------------------------- field types
def _describe(value: Any) -> str:
    """``value`` as an error message shows it: its type and a short repr."""
    if isinstance(value, torch.Tensor):
        return f"a tensor of dtype {str(value.dtype).removeprefix('torch.')} and shape {list(value.shape)}"
    text, name = repr(value), type(value).__name__
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name} ({text[:60] + '...' if len(text) > 60 else text})"


class _Fields:
    """Type checks of a checkpoint's fields; each refusal is one :class:`CheckpointError` naming
    the file and the field (``optimizer.state[3].exp_avg``)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def bad(self, field: str, value: Any, expected: str) -> CheckpointError:
        return CheckpointError(f"field {field} is {_describe(value)}, expected {expected}: the file was modified "
                               f"(its checksum recomputed) or written by another program", path=self.path)

    def integer(self, field: str, value: Any, *, minimum: int | None = 0, maximum: int | None = None) -> int:
        if type(value) is not int or (minimum is not None and value < minimum) \
                or (maximum is not None and value > maximum):
            bounds = (f" >= {minimum}" if minimum is not None else "") + (f" and <= {maximum}" if maximum is not None
                                                                           else "")
            raise self.bad(field, value, f"an integer{bounds}")
        return value

    def number(self, field: str, value: Any, *, optional: bool = False) -> None:
        if not (_is_number(value) or (optional and value is None)):
            raise self.bad(field, value, "a number" + (" or None" if optional else ""))

    def string(self, field: str, value: Any, *, optional: bool = False) -> None:
        if not (isinstance(value, str) or (optional and value is None)):
            raise self.bad(field, value, "a string" + (" or None" if optional else ""))

    def mapping(self, field: str, value: Any, *, optional: bool = False) -> dict[Any, Any] | None:
        if optional and value is None:
            return None
        if not isinstance(value, dict):
            raise self.bad(field, value, "a dict" + (" or None" if optional else ""))
        return value

    def sequence(self, field: str, value: Any, *, length: int | None = None) -> list[Any]:
        if not isinstance(value, (list, tuple)) or (length is not None and len(value) != length):
            raise self.bad(field, value, "a list" + (f" of {length} items" if length is not None else ""))
        return list(value)

    def tensor(self, field: str, value: Any, dtype: torch.dtype | None = None, *, dim: int | None = None,
               numel: int | None = None) -> torch.Tensor:
        if not isinstance(value, torch.Tensor) or (dtype is not None and value.dtype != dtype) \
                or (dim is not None and value.dim() != dim) or (numel is not None and value.numel() != numel):
            want = "a tensor" + (f" of dtype {str(dtype).removeprefix('torch.')}" if dtype is not None else "")
            want += (f" with {dim} dimension(s)" if dim is not None else "")
            want += (f" of {numel} elements" if numel is not None else "")
            raise self.bad(field, value, want)
        return value

    def tensors(self, field: str, value: Any, *, optional: bool = False) -> None:
        """A state dict: names to tensors."""
        if optional and value is None:
            return
        if not isinstance(value, dict):
            raise self.bad(field, value, "a state dict (names to tensors)" + (" or None" if optional else ""))
        for k, v in value.items():
            if not isinstance(k, str):
                raise self.bad(f"{field} key", k, "a parameter name")
            self.tensor(f"{field}.{k}", v)

    def plain(self, field: str, value: Any) -> None:
        """JSON values only (what a config section holds)."""
        stack = [(field, value)]
        while stack:
            where, item = stack.pop()
            if isinstance(item, dict):
                for k, v in item.items():
                    if not isinstance(k, str):
                        raise self.bad(f"{where} key", k, "a name")
                    stack.append((f"{where}.{k}", v))
            elif isinstance(item, (list, tuple)):
                stack.extend((f"{where}[{i}]", v) for i, v in enumerate(item))
            elif not (item is None or isinstance(item, (bool, int, float, str))):
                raise self.bad(where, item, "a plain value (a number, string, bool, None, list or dict)")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_WORD = 1 << 32


def _check_rng(c: _Fields, rng: Any) -> None:
    c.mapping("rng", rng)
    py = c.mapping("rng.python", rng.get("python"))
    assert py is not None
    c.integer("rng.python.version", py.get("version"), minimum=None)
    words = c.tensor("rng.python.words", py.get("words"), torch.int64, dim=1, numel=625)
    if bool((words[:624] < 0).any()) or bool((words[:624] >= _WORD).any()) or not 0 <= int(words[624]) <= 624:
        raise c.bad("rng.python.words", words, "625 words of Python's Mersenne Twister (624 in [0, 2^32), then an "
                                               "index in [0, 624])")
    c.number("rng.python.gauss", py.get("gauss"), optional=True)
    npy = c.mapping("rng.numpy", rng.get("numpy"))
    assert npy is not None
    if npy.get("kind") != "MT19937":
        raise c.bad("rng.numpy.kind", npy.get("kind"), "'MT19937'")
    keys = c.tensor("rng.numpy.keys", npy.get("keys"), torch.int64, dim=1, numel=624)
    if bool((keys < 0).any()) or bool((keys >= _WORD).any()):
        raise c.bad("rng.numpy.keys", keys, "624 words in [0, 2^32)")
    c.integer("rng.numpy.pos", npy.get("pos"), maximum=624)
    c.integer("rng.numpy.has_gauss", npy.get("has_gauss"), maximum=1)
    c.number("rng.numpy.cached_gaussian", npy.get("cached_gaussian"))
    c.tensor("rng.torch", rng.get("torch"), torch.uint8, dim=1, numel=torch.get_rng_state().numel())
    if "cuda" in rng:
        for i, t in enumerate(c.sequence("rng.cuda", rng["cuda"])):
            c.tensor(f"rng.cuda[{i}]", t, torch.uint8, dim=1)


def _check_optimizer(c: _Fields, opt: Any) -> None:
    c.mapping("optimizer", opt)
    groups = c.sequence("optimizer.param_groups", opt.get("param_groups"))
    params: set[int] = set()
    for g, group in enumerate(groups):
        c.mapping(f"optimizer.param_groups[{g}]", group)
        for i, p in enumerate(c.sequence(f"optimizer.param_groups[{g}].params", group.get("params"))):
            params.add(c.integer(f"optimizer.param_groups[{g}].params[{i}]", p))
        for key, value in group.items():
            where = f"optimizer.param_groups[{g}].{key}"
            if not isinstance(key, str):
                raise c.bad(f"optimizer.param_groups[{g}] key", key, "an option name")
            if key == "params" or value is None or isinstance(value, (bool, int, float, str)):
                continue
            if isinstance(value, torch.Tensor) and value.numel() == 1:
                continue
            if isinstance(value, (list, tuple)) and all(_is_number(v) for v in value):
                continue
            raise c.bad(where, value, "a number, bool, string, None or a list of numbers")
    state = c.mapping("optimizer.state", opt.get("state"))
    assert state is not None
    for index, entry in state.items():
        if type(index) is not int or index not in params:
            raise c.bad("optimizer.state key", index, f"the index of a parameter of the param_groups "
                                                       f"(0 to {max(params, default=-1)})")
        c.mapping(f"optimizer.state[{index}]", entry)
        for key, value in entry.items():
            if not (isinstance(value, torch.Tensor) or value is None or isinstance(value, (bool, int, float))):
                raise c.bad(f"optimizer.state[{index}].{key}", value, "a tensor or a number")


_METRIC = re.compile(r"^(train|val|test)_\w+$|^\w+(_s|_bytes|_loss)$")
"""History keys that are numbers (or None): losses, accuracies and other metrics, times, bytes."""


def _check_history(c: _Fields, history: Any) -> None:
    """A list of epoch records: dicts of plain values, their ``epoch`` an integer and every
    metric, time and byte count (:data:`_METRIC`) a number, None or a list of numbers."""
    for i, record in enumerate(c.sequence("history", history)):
        c.mapping(f"history[{i}]", record)
        c.integer(f"history[{i}].epoch", record.get("epoch"))
        for key, value in record.items():
            if not isinstance(key, str):
                raise c.bad(f"history[{i}] key", key, "a metric name")
            if _METRIC.match(key):
                if not (value is None or _is_number(value) or (isinstance(value, (list, tuple)) and all(
                        v is None or _is_number(v) for v in value))):
                    raise c.bad(f"history[{i}].{key}", value, "a number, None or a list of numbers (one a rank)")
            else:
                c.plain(f"history[{i}].{key}", value)


def _check_selection(c: _Fields, selection: Any) -> None:
    if c.mapping("selection", selection, optional=True) is None:
        return
    c.string("selection.select", selection.get("select"), optional=True)
    c.string("selection.metric", selection.get("metric", "acc"))
    best = c.mapping("selection.best", selection.get("best"), optional=True)
    for key, value in (best or {}).items():
        c.number(f"selection.best.{key}", value, optional=True)
    c.integer("selection.since_best", selection.get("since_best", 0))
    c.tensors("selection.weights", selection.get("weights"), optional=True)


def _check_pipeline_state(c: _Fields, info: Any) -> None:
    if c.mapping("pipeline_state", info, optional=True) is None:
        return
    c.string("pipeline_state.mode", info.get("mode"))
    c.number("pipeline_state.smoothing", info.get("smoothing"), optional=True)
    num_parts = c.integer("pipeline_state.num_parts", info.get("num_parts"), minimum=1)
    c.string("pipeline_state.partition", info.get("partition"), optional=True)
    files = info.get("rank_files")
    if files is None:
        return
    for r, entry in enumerate(c.sequence("pipeline_state.rank_files", files, length=num_parts)):
        c.mapping(f"pipeline_state.rank_files[{r}]", entry)
        name = entry.get("name")
        m = _RANK_NAME_RE.match(name) if isinstance(name, str) else None
        if m is None or (int(m.group(2)), int(m.group(3))) != (r, num_parts):
            raise c.bad(f"pipeline_state.rank_files[{r}].name", name,
                        f"the name of rank {r}'s file (checkpoint-EEEEEE.rank-{r:05d}-of-{num_parts:05d}.pt)")
        c.integer(f"pipeline_state.rank_files[{r}].size", entry.get("size"))
        digest = entry.get("sha256")
        if not isinstance(digest, str) or not _SHA256_RE.match(digest):
            raise c.bad(f"pipeline_state.rank_files[{r}].sha256", digest, "a sha256 (64 hex digits)")


def _check_halo_widths(c: _Fields, widths: Any) -> None:
    if c.mapping("halo_widths", widths, optional=True) is None:
        return
    c.number("halo_widths.budget", widths.get("budget"))
    c.integer("halo_widths.every", widths.get("every"))
    kinds = (int, bool, int, int, int)
    for i, row in enumerate(c.sequence("halo_widths.table", widths.get("table"))):
        if not isinstance(row, (list, tuple)) or len(row) != 5 or not all(type(v) is k for v, k in zip(row, kinds)):
            raise c.bad(f"halo_widths.table[{i}]", row, "[layer, backward, src, dst, bits] (integers, a bool)")
    for r, rows in enumerate(c.sequence("halo_widths.stats", widths.get("stats"))):
        for i, row in enumerate(c.sequence(f"halo_widths.stats[{r}]", rows)):
            if not isinstance(row, (list, tuple)) or len(row) != 5 or type(row[0]) is not int \
                    or type(row[1]) is not bool or type(row[2]) is not int or not _is_number(row[3]) \
                    or type(row[4]) is not int:
                raise c.bad(f"halo_widths.stats[{r}][{i}]", row, "[layer, backward, dst, cost, count]")


def check_state(state: dict[str, Any], path: str | os.PathLike) -> None:
    """Refuse (one :class:`CheckpointError` naming the file and the field) a checkpoint whose
    fields do not have the types gnn-dist writes: the epoch, the weights (a state dict), the
    optimizer state, the RNG states (:func:`set_rng_state` restores them as they are), the config
    (JSON values; its ``optim`` section's optimizer, lr and weight_decay), the model info, the
    history (dicts of numbers), the model selection's state, the pipeline state (its rank files'
    names, sizes and checksums) and the adaptive halo widths. Its checksum only proves the file is
    the one its ``.sha256`` describes: whoever rewrote the one can rewrite the other, so a resume
    checks the contents before it applies any (the checks against this run's model and optimizer
    are :class:`~gnn_dist.checkpoints.manager.CheckpointManager`'s)."""
    c = _Fields(Path(path))
    c.integer("epoch", state.get("epoch"))
    c.tensors("model", state.get("model"))
    _check_optimizer(c, state.get("optimizer"))
    _check_rng(c, state.get("rng"))
    config = c.mapping("config", state.get("config"))
    assert config is not None
    c.plain("config", config)
    section = "config.trainer" if "trainer" in config else "config"
    trainer = c.mapping(section, config.get("trainer", config))
    assert trainer is not None
    optim = c.mapping(f"{section}.optim", trainer.get("optim", {}))
    assert optim is not None
    c.string(f"{section}.optim.optimizer", optim.get("optimizer", ""))
    for key in ("lr", "weight_decay"):
        c.number(f"{section}.optim.{key}", optim.get(key), optional=True)
    for key, value in (c.mapping("model_info", state.get("model_info", {})) or {}).items():
        if not isinstance(value, (int, float, str)):
            raise c.bad(f"model_info.{key}", value, "a number or a string")
    if "world_size" in state:
        c.integer("world_size", state["world_size"], minimum=1)
    if "partition" in state:
        c.string("partition", state["partition"], optional=True)
    if "graph_fingerprint" in state:
        c.string("graph_fingerprint", state["graph_fingerprint"], optional=True)
    if "graph_fingerprint_scheme" in state:
        c.integer("graph_fingerprint_scheme", state["graph_fingerprint_scheme"], minimum=1)
    if "scheme_1_graph_fingerprint" in state:
        c.string("scheme_1_graph_fingerprint", state["scheme_1_graph_fingerprint"], optional=True)
    _check_history(c, state.get("history", []))
    _check_selection(c, state.get("selection"))
    _check_pipeline_state(c, state.get("pipeline_state"))
    _check_halo_widths(c, state.get("halo_widths"))
