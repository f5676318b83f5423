"""The model file: a trained model's weights and what rebuilding it needs, in one file.

``gnn_dist.train --save-model FILE`` writes one at the end of training (rank 0), ``gnn-dist
predict --model-file FILE`` (:mod:`gnn_dist.predict`) reads it; the format is specified in
``docs/format.md`` (section "Model file"). In short, ``FILE`` is ``torch.save`` of a dict of plain
values and tensors, so ``torch.load(FILE, weights_only=True)`` reads it and runs no code::

    {"format": "gnn-dist-model", "version": 1,
     "header": "<JSON text>",         # model options, in_dim, out_dim, num_classes, label_kind, task, loss,
                                      # task_options, tensors, training
     "sha256": "<hex>",               # of format, version, header and every tensor's bytes
     "state_dict": {name: tensor}}    # the model's parameters and buffers, on CPU

Decisions:

- **One file, its checksum inside.** A model file is copied around alone (to an inference
  machine), so it carries its own sha256 rather than a checksum file beside it. The sha256 is of
  the *contents* (the format, version, the header's bytes, then each tensor's raw bytes in the
  header's order), not of the archive: loading with ``weights_only=True`` runs no code whatever
  the bytes are, a damaged archive fails to load, and any change that still loads changes the
  contents. :func:`load_model_file` refuses a file whose contents do not match.
- **The model section as written, not listed by hand.** The header's ``model`` is
  :func:`gnn_dist.config.to_dict` of the run's :class:`~gnn_dist.config.ModelConfig`, so every
  model option round-trips, including ones added later; a file from another version whose
  options this one does not know is refused by name.
- **Checked when written.** :func:`save_model_file` rebuilds the model from the header (on
  torch's ``meta`` device) and compares its tensors' names and shapes with the weights, so a file
  that could not be loaded back is never written. Writes go to a temp file in the same folder,
  fsynced, then renamed into place. A write the disk refuses keeps the weights: they go to the
  first of the checkpoint folder, the temp folder, the metrics file's folder that takes them,
  and the one-line error says where (:func:`save_trained_model`).
- **Read as untrusted.** :func:`load_model_file` opens a regular file only (a link to
  ``/dev/zero`` or a FIFO is refused, never read), refuses an archive whose records would
  inflate past the file's size, tensors that are not dense CPU tensors backed by their own
  bytes, any entry besides the five (all hashed), a header nested deeper than 64 or stating
  widths the file's weights cannot have; :meth:`ModelFile.build` builds the model on the meta
  device and compares every tensor with the file's before it allocates anything.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .atomic_file import check_output_file, rescued_write
from .checkpoints.node_rows import gather_state_rows, local_state, pack_tables, shared_state, unpack_tables
from .config import ConfigError, ModelConfig, RunConfig, to_dict

__all__ = ["MODEL_FORMAT", "MODEL_VERSION", "ModelFile", "ModelFileError", "save_model_file", "load_model_file",
           "save_trained_model", "check_save_target", "check_output_file"]

MODEL_FORMAT = "gnn-dist-model"
"""The ``format`` entry of every model file."""
MODEL_VERSION = 1
"""The ``version`` entry; a reader refuses other versions."""
_KEYS = ("format", "version", "header", "sha256", "state_dict")
_HEADER_KEYS = ("model", "class", "in_dim", "out_dim", "num_classes", "label_kind", "tensors")


class ModelFileError(ValueError):
    """A model file is missing, unreadable, corrupt, or does not fit the data or this version."""

    def __init__(self, message: str, *, path: str | os.PathLike | None = None) -> None:
        super().__init__(f"{path}: {message}" if path is not None else message)
        self.path = None if path is None else str(path)


@dataclass(frozen=True, slots=True)
class ModelFile:
    """A verified model file: its JSON ``header`` and its ``state_dict`` (CPU tensors)."""

    path: Path
    header: dict[str, Any]
    state_dict: dict[str, torch.Tensor]
    sha256: str
    _task: list[Any] = field(default_factory=list, init=False, repr=False, compare=False)
    """:attr:`task`, once built (the header does not change)."""

    @property
    def model_config(self) -> ModelConfig:
        """The :class:`~gnn_dist.config.ModelConfig` the model was trained with."""
        options = self.header["model"]
        known = {f.name for f in dataclasses.fields(ModelConfig)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ModelFileError(f"model option(s) {', '.join(unknown)} are not known to this version of gnn-dist "
                                 f"(the file was written by a newer one); upgrade gnn-dist", path=self.path)
        try:
            return ModelConfig(**options)
        except ConfigError as exc:
            hint = (" (your own registered model: load its file with --import FILE.py)" if exc.field == "model"
                    else "")
            raise ModelFileError(f"its model section does not make a model here: {exc}{hint}", path=self.path) from None

    @property
    def in_dim(self) -> int:
        return int(self.header["in_dim"])

    @property
    def out_dim(self) -> int:
        return int(self.header["out_dim"])

    @property
    def num_classes(self) -> int:
        return int(self.header["num_classes"])

    @property
    def label_kind(self) -> str:
        """``"class"`` (softmax over classes), ``"multilabel"`` (a sigmoid per label) or
        ``"regression"`` (the outputs are the predicted values)."""
        return str(self.header["label_kind"])

    @property
    def task(self) -> Any:
        """The :class:`~gnn_dist.tasks.Task` the model was trained for: the header's ``task``,
        ``loss`` and ``task_options`` (a file written before they were recorded: its label kind's
        task; without ``task_options``: the task's default options)."""
        if not self._task:
            self._task.append(self._build_task())
        return self._task[0]

    def _build_task(self) -> Any:
        from .config import TaskConfig
        from .tasks import TASKS, task_for_label_kind

        kind = TASKS.get(self.header.get("task", "")) or task_for_label_kind(self.label_kind)
        if kind is None or (kind.predicts_nodes and kind.label_kind != self.label_kind):
            raise ModelFileError(f"its task {self.header.get('task')!r} is not a task of {self.label_kind!r} labels "
                                 f"known to this version", path=self.path)
        options = self.header.get("task_options") or {}
        if not isinstance(options, dict):
            raise ModelFileError(f"its header's task_options is not an object: {options!r}", path=self.path)
        try:
            config = TaskConfig(task=kind.name, **options)
        except TypeError:
            unknown = sorted(set(options) - {f.name for f in dataclasses.fields(TaskConfig)})
            raise ModelFileError(f"task option(s) {', '.join(unknown)} are not known to this version of gnn-dist "
                                 f"(the file was written by a newer one); upgrade gnn-dist", path=self.path) from None
        except ConfigError as exc:
            raise ModelFileError(f"its task_options do not make a task here: {exc}", path=self.path) from None
        loss = self.header.get("loss")
        return kind.from_options(loss if loss in kind.losses else None, config)

    @property
    def is_node_model(self) -> bool:
        """Whether the model predicts nodes (classes, labels, values) rather than scoring pairs of
        them (a link model: its outputs are node embeddings, its ``link_decoder`` scores pairs)."""
        return self.task.predicts_nodes

    def schema(self) -> Any:
        """A typed model's types and relations (:class:`~gnn_dist.hetero.TypedPart` without rows),
        from the header's ``typed`` section; None for a homogeneous model."""
        sec = self.header.get("typed")
        if sec is None:
            return None
        from .hetero.part import TypedPart, section_problem

        why = section_problem(sec)
        if why is not None:
            raise ModelFileError(why, path=self.path)
        return TypedPart.from_section(sec)

    def build(self, device: torch.device | str | None = None, typed: Any = None) -> torch.nn.Module:
        """The model with its task's modules (a link model's ``link_decoder``), with the file's
        weights, in eval mode, on ``device`` (default CPU). A typed model is built for ``typed``
        (a rank's :class:`~gnn_dist.hetero.TypedPart`: its learnable rows are picked from the
        file's by id; None: for no rows, as the checks build it).

        The model is first built on torch's ``meta`` device (no memory) and every tensor's name,
        dtype and shape compared with the file's, so a header whose widths or layers do not match
        the tensors it carries is refused before anything is allocated for it."""
        config, task = self.model_config, self.task
        schema = self.schema()
        try:
            with torch.device("meta"):
                expected = _tensor_table(_shared_weights(_build(config, self.in_dim, self.out_dim, task, schema)))
        except (ValueError, TypeError, RuntimeError) as exc:
            first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            raise ModelFileError(f"its header's model does not build here ({first})", path=self.path) from None
        try:
            shared, tables = unpack_tables(self.state_dict)
        except ValueError as exc:
            raise ModelFileError(f"{exc}: corrupt or modified", path=self.path) from None
        table = _tensor_table(shared)
        if expected != table:
            diff = sorted(k for k in set(expected) | set(table) if expected.get(k) != table.get(k))
            shown = "; ".join(f"{k}: the header's model has {_entry(expected.get(k))}, the file {_entry(table.get(k))}"
                              for k in diff[:3])
            raise ModelFileError(f"its header's model is not the one its tensors are weights of ({shown}"
                                 f"{'; ...' if len(diff) > 3 else ''}): corrupt or modified", path=self.path)
        model = _build(config, self.in_dim, self.out_dim, task, typed if typed is not None else schema)
        try:
            model.load_state_dict(local_state(shared, tables, model, str(self.path)), strict=True)
        except (RuntimeError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0]
            raise ModelFileError(f"its weights do not fit the model its header describes ({first})",
                                 path=self.path) from None
        return model.to(device if device is not None else "cpu").eval()

    def check_fits(self, meta: Any, data: str | os.PathLike) -> None:
        """Refuse (:class:`ModelFileError`) a partition (``meta``, a ``PartitionMeta`` of folder
        ``data``) the model cannot predict on: other feature width, other classes or label kind.
        A folder without labels is fine (prediction needs features only), and a link model's
        folder may have any labels (it predicts none). A typed model predicts on a folder of a
        graph with its node types (names, counts, feature widths) and relations."""
        from .hetero.part import schema_section, training_meta

        mine, theirs = self.header.get("typed"), schema_section(meta)
        if (mine is None) != (theirs is None):
            kind = "typed (heterogeneous)" if mine is not None else "homogeneous"
            raise ModelFileError(f"the model was trained on a {kind} graph, {data} is not one", path=self.path)
        if mine is not None:
            if {k: mine[k] for k in ("node_types", "relations")} != {k: theirs[k] for k in ("node_types", "relations")}:
                raise ModelFileError(f"{data} has other node types or relations than the graph the model was trained "
                                     f"on; predict on a partition of that graph (any number of parts)", path=self.path)
            meta = training_meta(meta)
        if not meta.feature_dim and mine is None:
            raise ModelFileError(f"{data} has no node features to predict from", path=self.path)
        if int(meta.feature_dim) != self.in_dim:
            raise ModelFileError(f"the model takes in_dim={self.in_dim} features per node but {data} has "
                                 f"feature_dim={meta.feature_dim}; predict on data with the features the model "
                                 f"was trained on", path=self.path)
        edge_dim = self.model_config.edge_dim or 0
        if edge_dim and int(meta.edge_feature_dim) != edge_dim:
            raise ModelFileError(f"the model reads edge features of width {edge_dim} but {data} has "
                                 f"edge_feature_dim={meta.edge_feature_dim}; predict on data with the edge features "
                                 f"the model was trained on", path=self.path)
        if meta.label_kind is None or not self.is_node_model:
            return
        if meta.label_kind != self.label_kind or int(meta.num_classes) != self.num_classes:
            raise ModelFileError(f"the model predicts num_classes={self.num_classes} ({self.label_kind} labels) but "
                                 f"{data} has num_classes={meta.num_classes} ({meta.label_kind} labels); predict "
                                 f"on data labelled like the training data", path=self.path)


def _build(config: ModelConfig, in_dim: int, out_dim: int, task: Any, typed: Any = None) -> torch.nn.Module:
    """The model ``config`` describes (a typed one for ``typed``), with ``task``'s own modules
    (None: none)."""
    from .models import build_model

    model = build_model(config, in_dim=in_dim, out_dim=out_dim, typed=typed)
    if task is not None:
        task.add_modules(model)
    return model


def _shared_weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The model's state dict without its per-rank rows (saved as tables by id)."""
    return shared_state(dict(model.state_dict()), model)


def _entry(entry: dict[str, Any] | None) -> str:
    return "no such tensor" if entry is None else f"{entry['dtype']} {entry['shape']}"


def _tensor_bytes(t: torch.Tensor) -> bytes:
    return t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def _digest(version: Any, header_text: str, state: dict[str, torch.Tensor], names: list[str]) -> str:
    h = hashlib.sha256(f"{MODEL_FORMAT}\n{version}\n".encode())
    h.update(header_text.encode())
    for name in names:
        h.update(_tensor_bytes(state[name]))
    return h.hexdigest()


def _tensor_table(state: dict[str, torch.Tensor]) -> dict[str, dict[str, Any]]:
    return {name: {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape)}
            for name, t in sorted(state.items())}


def _plain(value: Any) -> Any:
    """``value`` as strict JSON values: non-finite floats (an empty mask's NaN accuracy) as None,
    anything else that is not JSON as its string."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return value if value is None or isinstance(value, (bool, int, str)) else str(value)


def save_model_file(path: str | os.PathLike, model: torch.nn.Module, model_config: ModelConfig | dict[str, Any],
                    meta: Any, *, info: dict[str, Any] | None = None, task: Any = None,
                    rescue: Sequence[str | os.PathLike] = (),
                    rows: dict[str, dict[str, torch.Tensor]] | None = None) -> Path:
    """Write ``model``'s weights as a model file at ``path`` (atomically: temp file, fsync, rename).

    ``model_config`` is what builds it again (a :class:`~gnn_dist.config.ModelConfig` or its
    dict), ``meta`` the ``PartitionMeta`` it was trained on (its ``feature_dim``, ``num_classes``
    and ``label_kind`` are recorded), ``info`` any JSON values to keep under ``training``
    (``gnn_dist.train`` records the epochs, final accuracies, the partition's fingerprint and the
    run's whole configuration), ``task`` the :class:`~gnn_dist.tasks.Task` it was trained for
    (recorded as ``task``, ``loss`` and, when it has any, ``task_options``, its
    :meth:`~gnn_dist.tasks.Task.model_options`; default: the label kind's, with its natural loss);
    its modules (a link model's ``link_decoder``) are part of the model.
    Returns the path. Raises :class:`ModelFileError` when the model
    cannot be rebuilt from ``model_config`` with these weights.

    A write the filesystem refuses (full, read-only) raises
    :class:`~gnn_dist.atomic_file.StorageError` and leaves nothing at ``path``; the weights are
    then written to the first folder of ``rescue`` that takes them (same file name, or a
    timestamped one if taken), and the error's one line says where (or why none took them).
    A model with per-rank rows (a typed model's learnable rows) is saved with ``rows``, their
    whole tables by id (:func:`~gnn_dist.checkpoints.node_rows.gather_state_rows`), and its
    header records the types and relations (``typed``).
    """
    from .atomic_file import StorageError, atomic_write

    from .hetero.part import TypedPart, schema_section

    config = model_config if isinstance(model_config, ModelConfig) else ModelConfig(**model_config)
    p = Path(path)
    state = {name: t.detach().to("cpu", copy=True).contiguous() for name, t in _shared_weights(model).items()}
    section = schema_section(meta)
    in_dim = int(getattr(model, "features_in", getattr(model, "in_dim", meta.feature_dim)))
    out_dim = int(getattr(model, "out_dim", meta.num_classes))
    label_kind = meta.label_kind or "class"
    if task is None:
        from .tasks import task_for_label_kind

        kind = task_for_label_kind(label_kind)
        task = kind() if kind is not None else None
    with torch.device("meta"):
        expected = _tensor_table(_shared_weights(_build(config, in_dim, out_dim, task,
                                                        None if section is None else TypedPart.from_section(section))))
    table = _tensor_table(state)
    state = pack_tables(state, rows or {})
    if expected != table:
        diff = sorted(k for k in set(expected) | set(table) if expected.get(k) != table.get(k))
        raise ModelFileError(f"the model's weights are not those of the model {to_dict(config)} describes "
                             f"(they differ in {', '.join(diff[:4])}); pass the ModelConfig that built it", path=p)
    header = {"model": to_dict(config), "class": type(model).__name__, "in_dim": in_dim, "out_dim": out_dim,
              "num_classes": int(meta.num_classes), "label_kind": label_kind, "tensors": table,
              "training": _plain(info or {})} | ({} if section is None else {"typed": section})
    if task is not None:
        header |= {"task": task.name, "loss": task.loss}
        if task.model_options():   # node tasks have none: their headers are as before
            header["task_options"] = task.model_options()
    header["tensors"] = _tensor_table(state)   # with the per-rank rows' tables (by id)
    header_text = json.dumps(header, sort_keys=True, allow_nan=False)
    payload = {"format": MODEL_FORMAT, "version": MODEL_VERSION, "header": header_text,
               "sha256": _digest(MODEL_VERSION, header_text, state, sorted(state)), "state_dict": state}
    try:
        atomic_write(p, lambda f: torch.save(payload, f), what="the model file ")
    except StorageError as exc:
        raise rescued_write(exc, p, lambda f: torch.save(payload, f), rescue, "the model file ") from None
    return p


MAX_LAYERS = 4096
"""Most layers a model file's header may state (the deepest published GNNs have about 1000)."""
_WIDTHS = ("hidden", "heads", "out_heads", "edge_dim")
"""The model options that are widths: each at most the number of weights the file carries."""


def _check_header_sizes(header: dict[str, Any], state: dict[str, torch.Tensor], p: Path) -> None:
    """The sizes the header states, against what the file holds (before anything is built from
    them): a width no tensor could have (more than the file's weights in all), or more layers
    than :data:`MAX_LAYERS`, is refused."""
    elements = sum(t.numel() for t in state.values())
    options = header["model"]
    sizes = {k: header[k] for k in ("in_dim", "out_dim")} | {k: options[k] for k in (*_WIDTHS, "layers")
                                                            if options.get(k) is not None}
    for key, value in sizes.items():
        if type(value) is not int or value < 0:
            raise ModelFileError(f"its header's {key} is {value!r}, not a non-negative integer", path=p)
    if sizes.get("layers", 1) > MAX_LAYERS:
        raise ModelFileError(f"its header states {sizes['layers']} layers, more than {MAX_LAYERS}: corrupt or crafted",
                             path=p)
    for key, value in sizes.items():
        if key != "layers" and value > max(elements, 1):
            raise ModelFileError(f"its header states {key}={value}, but the file holds {elements} weights in all: "
                                 f"corrupt or crafted", path=p)


def load_model_file(path: str | os.PathLike) -> ModelFile:
    """Read and verify a model file: a regular file (never a device or pipe), a ``torch.save``
    archive whose records fit in its size (:func:`~gnn_dist.safe_read.check_torch_archive`),
    ``torch.load(weights_only=True)``, dense CPU tensors only, exactly the entries of the format
    (every one hashed), then its format, version, header (nesting bounded) and the sha256 of its
    contents, and the header's sizes against the tensors present. Raises :class:`ModelFileError`
    naming the file. (:meth:`ModelFile.build` then checks the header's model against the
    tensors' shapes on the meta device before it allocates the model.)"""
    from . import safe_read

    p = Path(path)
    if p.is_dir():
        raise ModelFileError("is a folder, not a model file (gnn_dist.train --save-model FILE writes one)", path=p)
    try:
        f, size = safe_read.open_regular(p, "model file", ModelFileError)
    except FileNotFoundError:
        raise ModelFileError("no such model file (gnn_dist.train --save-model FILE writes one)", path=p) from None
    with f:
        safe_read.check_torch_archive(f, size, "model file", ModelFileError, p)
        try:
            raw = torch.load(f, map_location="cpu", weights_only=True)
        except Exception as exc:
            first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
            raise ModelFileError(f"not a readable model file: damaged, or holding more than tensors and plain "
                                 f"values ({type(exc).__name__}: {first})", path=p) from None
    safe_read.check_loaded(raw, "model file", ModelFileError, p)
    if not isinstance(raw, dict) or raw.get("format") != MODEL_FORMAT:
        raise ModelFileError(f"not a gnn-dist model file (no format {MODEL_FORMAT!r})", path=p)
    if raw.get("version") != MODEL_VERSION:
        raise ModelFileError(f"model file version {raw.get('version')!r}; this gnn-dist reads version {MODEL_VERSION}",
                             path=p)
    extra = sorted(str(k)[:40] for k in raw if k not in _KEYS)
    if extra:   # nothing unhashed rides along
        raise ModelFileError(f"it holds entries a model file has not ({', '.join(extra[:4])}), which its sha256 does "
                             f"not cover: modified or crafted", path=p)
    missing = [k for k in _KEYS if k not in raw]
    state, header_text = raw.get("state_dict"), raw.get("header")
    if missing or not isinstance(header_text, str) or not isinstance(state, dict) \
            or not isinstance(raw["sha256"], str) \
            or not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()):
        raise ModelFileError(f"malformed model file (missing or mistyped {', '.join(missing) or 'header/state_dict'})",
                             path=p)
    claimed = sum(t.numel() * t.element_size() for t in state.values())
    if claimed > size:
        raise ModelFileError(f"its tensors would take {claimed} bytes, more than the file's {size}: views sharing "
                             f"storage, which --save-model never writes", path=p)
    digest = _digest(MODEL_VERSION, header_text, state, sorted(state))   # the writer's order: the header's tensors
    if digest != raw["sha256"]:
        raise ModelFileError(f"the sha256 of its contents, {digest[:12]}..., is not the {str(raw['sha256'])[:12]}... "
                             f"recorded in it: corrupt or modified; write it again with --save-model", path=p)
    if safe_read.json_too_deep(header_text):
        raise ModelFileError(f"its header is nested more than {safe_read.MAX_DEPTH} levels deep: corrupt or crafted",
                             path=p)
    try:
        header = json.loads(header_text)
    except RecursionError:
        raise ModelFileError("its header is nested too deep: corrupt or crafted", path=p) from None
    except ValueError as exc:   # JSONDecodeError, or an integer of more than 4300 digits
        raise ModelFileError(f"its header is not JSON ({str(exc)[:200]})", path=p) from None
    if not isinstance(header, dict) or [k for k in _HEADER_KEYS if k not in header]:
        lacks = [k for k in _HEADER_KEYS if k not in header] if isinstance(header, dict) else list(_HEADER_KEYS)
        raise ModelFileError(f"its header lacks {lacks}", path=p)
    widths = [header[k] for k in ("in_dim", "out_dim", "num_classes")]
    if not (isinstance(header["model"], dict) and all(type(w) is int and w >= 0 for w in widths)
            and header["label_kind"] in ("class", "multilabel", "regression")):
        raise ModelFileError("its header's model, in_dim, out_dim, num_classes or label_kind is malformed", path=p)
    if header["tensors"] != _tensor_table(state):
        raise ModelFileError("its tensors are not the ones its header lists: corrupt or modified", path=p)
    _check_header_sizes(header, state, p)
    return ModelFile(path=p, header=header, state_dict=state, sha256=digest)


def check_save_target(config: RunConfig) -> None:
    """``--save-model``'s path checked on rank 0 (:func:`check_output_file`) before training, so a
    long run does not fail at its end (a collective: a refusal is raised on every rank)."""
    from .distributed import all_ranks_agree, get_rank

    if config.save_model is None:
        return
    with all_ranks_agree(f"checking --save-model {config.save_model}"):
        if get_rank() == 0:
            check_output_file(config.save_model, "--save-model")


def save_trained_model(config: RunConfig, trainer: Any, final: dict[str, Any]) -> Path | None:
    """``--save-model``: rank 0 writes ``trainer.model`` to ``config.save_model`` with the run's
    configuration and final metrics (a collective: a failed write fails every rank). None when
    the run saves no model."""
    from . import __version__
    from .atomic_file import all_ranks_write
    from .distributed import get_rank
    from .partition import partition_fingerprint

    if config.save_model is None:
        return None
    meta = trainer.part.meta
    info = {"epochs": int(trainer.epoch), "final": final, "partition": {
                "fingerprint": partition_fingerprint(meta), "num_parts": int(meta.num_parts), "data": config.data.data},
            "gnn_dist_version": __version__, "run_config": config.to_dict()}
    path = Path(config.save_model)
    metrics = config.trainer.report.metrics_path
    rescue = [d for d in (config.trainer.checkpoint.checkpoint_dir, tempfile.gettempdir(),
                          None if metrics is None else str(Path(metrics).parent or ".")) if d]
    rows = gather_state_rows(dict(trainer.model.state_dict()), trainer.model)   # per-rank rows by id (a collective)
    with all_ranks_write(f"writing the model file {path}"):   # a full disk: one line, exit 1, the weights kept
        if get_rank() == 0:
            save_model_file(path, trainer.model, config.model, meta, info=info, task=getattr(trainer, "task", None),
                            rescue=rescue, rows=rows)
    return path
