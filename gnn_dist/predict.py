"""Exact full-graph inference with a model file: ``gnn-dist predict`` runs this on every rank.

Usage (``gnn-dist predict`` launches it one rank per part, like ``gnn-dist train``)::

    torchrun --nproc-per-node P -m gnn_dist.predict --data DIR --model-file FILE --out preds.npz \\
        [--embeddings [--layer K] | --pairs PAIRS]
    python -m gnn_dist.predict --data DIR ...          # a 1-part folder: one process

The model is independent of the partition: a model trained on 4 parts predicts on a folder of
any number of parts (of a graph with the same feature width and classes), and the result is the
same to rounding. Each rank loads its part and the model file, runs the model with the exact
halo exchange (what training's evaluation runs), and rank 0 gathers the inner rows of every rank,
orders them by original node id and writes ``--out`` (``.npz``, temp file + rename):

- ``node_ids`` int64 ``[N]``: the input graph's node ids, ascending;
- ``probabilities`` float32 ``[N, C]``: softmax of the logits (a sigmoid per label for a
  multi-label model; none for a regression model);
- ``predicted`` int64 ``[N]``: the class of the largest logit, as training's evaluation counts it
  (multi-label: uint8 ``[N, C]``, logit > 0, i.e. probability > 0.5; regression: float32
  ``[N, D]``, the predicted values, the model's outputs);
- with ``--embeddings``: ``embeddings`` float32 ``[N, H]``, the output of layer ``K`` (0-based;
  default the last hidden layer, after its activation) and ``embedding_layer`` (K).

A link model (``gnn_dist.train --task link --save-model``) predicts no node classes: its output
rows are node embeddings, which its ``link_decoder`` scores pairs of nodes from.

- Without ``--pairs`` it writes ``node_ids`` and ``embeddings`` float32 ``[N, D]``, the model's
  output (what the decoder scores); ``--embeddings --layer K`` writes layer ``K``'s output
  instead, with ``embedding_layer``.
- ``--pairs PAIRS`` (a text file of two columns of original node ids, or an integer ``.npy`` of
  shape ``[E, 2]`` or ``[2, E]``: :func:`gnn_dist.link.pairs.read_pairs`) writes ``src``, ``dst``
  (int64 ``[E]``, the file's pairs in its order), ``scores`` (float32 ``[E]``, the decoder's
  logits) and ``probabilities`` (float32 ``[E]``, their sigmoid). Rank 0 reads the file, within
  the bounds :mod:`gnn_dist.link.pairs` states, and sends the pairs to the other ranks
  (:func:`~gnn_dist.link.pairs.shared_pairs`); each scores the pairs whose source it owns,
  fetching the destination's row from its owner, in chunks of
  :data:`~gnn_dist.link.pairs.PAIR_CHUNK` pairs; rank 0 gathers the scores in the file's order.

Errors as ``gnn_dist.train``'s: a bad flag is one line and exit code 2; a missing, corrupt or
unfitting model file, a bad folder or ``--out`` path, a pairs file that is missing, unparsable,
of another shape or names an id that is not a node (or ``--pairs`` for a model that is not a link
model) is one line on rank 0 and exit code 2 (``--validate``, which ``gnn-dist predict`` runs
before any rank starts, finds them first: it streams the pairs file, holding one block of it). A
``--out`` the filesystem refuses to write (a full disk, a quota, a read-only mount) is one line
on rank 0 and exit code 1, and leaves no file (nor temporary) behind: the ``.npz`` is written
to a temporary file and renamed (:func:`gnn_dist.atomic_file.atomic_write`).
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import environ, rank_threads

rank_threads.rank_defaults()   # before torch (see gnn_dist.train)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.distributed.elastic.multiprocessing.errors import record  # noqa: E402
from .link.pairs import PAIR_CHUNK, count_pairs, shared_pairs
from .model_file import ModelFile, check_output_file, load_model_file
from .predict_cli import _PAIRS_WITH_EMBEDDINGS, PROG, UsageError, build_parser, parse_args as _parse

__all__ = ["Predictions", "PairScores", "predict", "check_prediction", "embedding_layer", "build_parser", "main"]

log = logging.getLogger("gnn_dist.predict")

EXIT_USAGE = 2


class _NpzOutput:
    """A result :meth:`save` writes as an ``.npz`` of its :meth:`arrays`."""

    __slots__ = ()

    def arrays(self) -> dict[str, np.ndarray]:
        """What :meth:`save` writes, by name."""
        raise NotImplementedError

    def describe(self) -> str:
        """What the file holds, in a few words, for the log."""
        raise NotImplementedError

    def save(self, path: str | os.PathLike) -> Path:
        """Write :meth:`arrays` as an ``.npz`` at ``path`` exactly (temp file in its folder, fsync,
        rename); returns the path."""
        from .atomic_file import atomic_write

        p = Path(path)
        atomic_write(p, lambda f: np.savez(f, **self.arrays()), what="--out ")   # StorageError: nothing written
        return p


@dataclass(frozen=True, slots=True)
class Predictions(_NpzOutput):
    """The gathered predictions, one row per node, by ascending original id (numpy arrays)."""

    node_ids: np.ndarray
    probabilities: np.ndarray | None
    """None for a regression model (its ``predicted`` are the values) and a link model."""
    predicted: np.ndarray | None
    """None for a link model (its rows are node embeddings)."""
    embeddings: np.ndarray | None = None
    embedding_layer: int | None = None
    """The layer of ``embeddings``; None for a link model's output."""
    node_type: str | None = None
    """A typed model's: the type whose nodes these are (the target type), ``node_ids`` their ids
    within it; None for a homogeneous model."""

    def arrays(self) -> dict[str, np.ndarray]:
        out = {"node_ids": self.node_ids} | ({} if self.node_type is None else {"node_type": np.str_(self.node_type)})
        for name in ("probabilities", "predicted", "embeddings"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.embedding_layer is not None:
            out["embedding_layer"] = np.int64(self.embedding_layer)
        return out

    def describe(self) -> str:
        if self.probabilities is not None:
            what = [f"{self.probabilities.shape[1]} classes"]
        else:
            what = [] if self.predicted is None else [f"{self.predicted.shape[1]} values"]
        if self.embeddings is not None:
            layer = "the model's output" if self.embedding_layer is None else f"layer {self.embedding_layer}"
            what.append(f"embeddings of {layer} ({self.embeddings.shape[1]} wide)")
        nodes = f"{len(self.node_ids)} nodes" + ("" if self.node_type is None else f" of type {self.node_type}")
        return ", ".join([nodes, *what])


@dataclass(frozen=True, slots=True)
class PairScores(_NpzOutput):
    """A link model's scores of given pairs of nodes, in the pairs' order (numpy arrays ``[E]``)."""

    src: np.ndarray
    """int64: the pairs' first node, an original id."""
    dst: np.ndarray
    """int64: the pairs' second node, an original id."""
    scores: np.ndarray
    """float32: the decoder's logits."""
    probabilities: np.ndarray
    """float32: their sigmoid, the predicted probability of each edge."""

    def arrays(self) -> dict[str, np.ndarray]:
        return {"src": self.src, "dst": self.dst, "scores": self.scores, "probabilities": self.probabilities}

    def describe(self) -> str:
        return f"{len(self.scores)} pairs scored"


class _Capture:
    """The part as the model sees it, keeping the output of layer ``layer`` (None: none)."""

    def __init__(self, part: Any, layer: int | None) -> None:
        self.part, self.layer = part, layer
        self.block = part.block
        self.output: torch.Tensor | None = None

    def exchange(self, h_inner: torch.Tensor) -> torch.Tensor:
        return self.part.exchange(h_inner)

    def run_layer(self, index: int, conv: torch.nn.Module, h: Any, **kwargs: Any) -> torch.Tensor:
        out = self.part.run_layer(index, conv, h, **kwargs)
        if index == self.layer:
            self.output = out
        return out


def embedding_layer(model_file: ModelFile, layer: int | None) -> int:
    """The layer ``--embeddings`` exports: ``layer``, or the last hidden one (``layers - 2``)."""
    layers = model_file.model_config.layers
    if layer is None:
        if layers < 2:
            raise ValueError(f"--embeddings: the model of {model_file.path} has 1 layer, so no hidden layer; "
                             f"--layer 0 exports its output")
        return layers - 2
    if not 0 <= layer < layers:
        raise ValueError(f"--layer {layer}: the model of {model_file.path} has layers 0 to {layers - 1} "
                         f"(the last is the output layer)")
    return layer


def _load_checked(data: str | os.PathLike, model_file: str | os.PathLike) -> tuple[ModelFile, Any]:
    """The model file, checked against the folder's metadata, and that metadata."""
    from partitioners.format import load_partition_meta

    model = load_model_file(model_file)
    meta = load_partition_meta(data)
    model.check_fits(meta, data)
    return model, meta


def _export_layer(model_file: ModelFile, embeddings: bool, layer: int | None,
                  pairs: str | os.PathLike | None) -> int | None:
    """The layer whose output is written as ``embeddings`` (None: none, or a link model's
    output); refuses (``ValueError``) flags that do not apply to the model."""
    if layer is not None and not embeddings:
        raise ValueError(f"--layer {layer} applies with --embeddings only")
    if pairs is not None:
        if model_file.is_node_model:
            raise ValueError(f"--pairs {pairs}: the model of {model_file.path} has task {model_file.task.name}, "
                             f"which predicts nodes; --pairs scores pairs of nodes with a link model "
                             f"(gnn_dist.train --task link --save-model)")
        if embeddings:
            raise ValueError(_PAIRS_WITH_EMBEDDINGS)
        if model_file.schema() is not None and getattr(model_file.task, "decoder_name", None) == "distmult":
            raise ValueError(f"--pairs {pairs}: the model of {model_file.path} scores triples (head, relation, tail) "
                             f"of a typed graph with DistMult, and --pairs reads pairs without relations; run "
                             f"predict without --pairs for the node embeddings (and the model file's "
                             f"link_decoder.weight for the diagonals)")
        return None
    if not embeddings or (layer is None and not model_file.is_node_model):
        return None
    return embedding_layer(model_file, layer)


def check_prediction(data: str | os.PathLike, model_file: str | os.PathLike, out: str | os.PathLike, *,
                     embeddings: bool = False, layer: int | None = None,
                     pairs: str | os.PathLike | None = None) -> str:
    """What ``--validate`` checks, in one process (no part file read): the folder's metadata,
    the model file (read, verified, built, against the folder), the embedding layer, the pairs
    file (read, its ids checked against the folder's nodes), ``out``'s folder. Raises
    ``ValueError`` naming what is wrong; returns a one-line description."""
    from .kernels import resolve_kernels

    model, meta = _load_checked(data, model_file)
    model.build()
    chosen = _export_layer(model, embeddings, layer, pairs)
    wanted = None if pairs is None else count_pairs(pairs, int(meta.num_nodes))   # streamed: nothing kept
    check_output_file(out, "--out")
    resolve_kernels(environ.kernels())   # as the ranks will
    c = model.model_config
    what = (f"; {wanted} pairs of {pairs}" if wanted is not None
            else f"; embeddings of layer {chosen}" if chosen is not None else "")
    return (f"{model_file}: model {c.model} ({c.layers} layers, in_dim {model.in_dim}, {model.out_dim} outputs, "
            f"task {model.task.name}) on {data}" + what)


def predict(data: str | os.PathLike, model_file: str | os.PathLike, *, embeddings: bool = False,
            layer: int | None = None, pairs: str | os.PathLike | None = None,
            device: torch.device | str | None = None, verify: bool = True,
            chunk: int = PAIR_CHUNK) -> Predictions | PairScores | None:
    """Run the model of ``model_file`` on the whole graph of partition folder ``data`` (a
    collective: every rank of a job of ``num_parts`` ranks calls it, or one process for a 1-part
    folder); returns the :class:`Predictions` (with ``pairs``: the :class:`PairScores`) on rank
    0, None on the others.

    ``embeddings``: also the output of ``layer`` (default: the last hidden layer; a link model's
    embeddings are its output unless ``layer``). ``pairs``: a link model scores the pairs of
    this file (original ids), ``chunk`` pairs at a time. ``device`` defaults to CPU; ``verify``
    checks the part files' sha256 at load. A bad model file, one that does not fit ``data``, or
    a bad pairs file raises ``ValueError`` on every rank.
    """
    from .cache.input import InputFeatures
    from .distributed import all_ranks_agree
    from .partition import load_partition

    with all_ranks_agree(f"reading the model file {model_file}"):
        mf, meta = _load_checked(data, model_file)
        model = mf.build(device)
        chosen = _export_layer(mf, embeddings, layer, pairs)
    wanted = None if pairs is None else shared_pairs(pairs, int(meta.num_nodes))   # rank 0 reads it, once
    _check_same_files(model_file, mf.sha256, pairs, None)   # the pairs are rank 0's on every rank
    part = load_partition(data, device=device, verify=verify)
    if part.typed is not None:   # a typed model's learnable rows: this rank's, picked from the file's by id
        with all_ranks_agree(f"building the model of {model_file} for this rank's rows"):
            model = mf.build(device, typed=part.typed)
    view = _Capture(part, chosen)
    with torch.no_grad():
        x = InputFeatures(part) if getattr(model, "accepts_layer_input", False) else part.x
        logits = model(view, x)
        if chosen is not None and view.output is None:
            raise ValueError(f"--embeddings: the model {type(model).__name__} does not run its layers through "
                             f"part.run_layer, so its layer outputs cannot be read")
        if wanted is not None:
            return _pair_scores(model.link_decoder, logits, part, wanted, verify=verify, chunk=chunk)
        return _node_predictions(mf, logits, view.output, part, chosen)


def _check_same_files(model_file: str | os.PathLike, model_digest: str, pairs: str | os.PathLike | None,
                      wanted: np.ndarray | None) -> None:
    """Refuse, on every rank, ranks that read different model files (or pairs files)."""
    from .distributed import all_gather_json

    pairs_digest = None if wanted is None else hashlib.sha256(wanted.tobytes()).hexdigest()
    got = all_gather_json([model_digest, pairs_digest])
    for i, (name, what) in enumerate(((model_file, "model files"), (pairs, "pairs files"))):
        digests = sorted({g[i][:12] for g in got if g[i] is not None})
        if len(digests) > 1:
            raise ValueError(f"the ranks read different {what} as {name} (sha256 {', '.join(digests)}): "
                             f"copy the same file to every machine")


def _node_predictions(mf: ModelFile, logits: torch.Tensor, layer_output: torch.Tensor | None, part: Any,
                      chosen: int | None) -> Predictions | None:
    """Every rank's rows on rank 0, by ascending original id (None on the others): a node
    model's probabilities and predictions (and a layer's output), a link model's embeddings."""
    if mf.is_node_model:
        probs, pred = mf.task.predict(logits)   # from the logits, as training's evaluation decides
        emb = layer_output
    else:
        probs, pred, emb = None, None, (layer_output if chosen is not None else logits)
    columns = {"probabilities": None if probs is None else probs.float(), "predicted": pred,
               "embeddings": None if emb is None else emb.float()}
    ids = part.original_ids[:part.num_inner].to(torch.int64)
    typed = part.typed if mf.is_node_model else None   # a typed link model: every node, by its union id
    if typed is not None:   # the target type's nodes, by their ids within the type
        t = typed.type_names.index(typed.target_type)
        rows = typed.inner_rows[t].to(ids.device)
        ids = ids[rows] - typed.offsets[t]
        columns = {k: None if v is None else v[rows] for k, v in columns.items()}
    got = _gather_by_id(ids, columns)
    return None if got is None else Predictions(**got, embedding_layer=chosen,
                                                node_type=None if typed is None else typed.target_type)


def _gather_by_id(ids: torch.Tensor, columns: dict[str, torch.Tensor | None]) -> dict[str, Any] | None:
    """``node_ids`` and each column that is not None, every rank's rows gathered on rank 0 and
    ordered by ``ids`` (the rows' original ids); None on the other ranks."""
    from .distributed import gather_rows, get_rank

    names = [k for k, t in columns.items() if t is not None]
    gathered = [gather_rows(t.contiguous()) for t in [ids, *(columns[k] for k in names)]]
    if get_rank() != 0:
        return None
    arrays = [torch.cat(g).cpu().numpy() for g in gathered]  # type: ignore[arg-type]
    order = np.argsort(arrays[0], kind="stable")
    return dict.fromkeys(columns) | dict(zip(["node_ids", *names], (a[order] for a in arrays)))


def _pair_scores(decoder: torch.nn.Module, h: torch.Tensor, part: Any, pairs: np.ndarray, *, verify: bool,
                 chunk: int) -> PairScores | None:
    """The decoder's scores of ``pairs`` (int64 ``[E, 2]`` original ids) from every rank's
    embeddings ``h``, in their order, on rank 0 (None on the others)."""
    from .distributed import gather_rows, get_rank
    from .link.edges import load_node_map
    from .link.pairs import score_owned_pairs

    node_map = load_node_map(part.path, part.meta, verify=verify)
    starts = [int(v) for v in part.meta.part_starts()]
    positions, scores = score_owned_pairs(decoder, h, pairs, node_map, starts, part.num_inner, get_rank(),
                                          chunk=chunk)
    got_positions, got_scores = gather_rows(positions), gather_rows(scores.contiguous())
    if got_positions is None or got_scores is None:
        return None
    where = torch.cat(got_positions).cpu()
    assert where.numel() == len(pairs), "every pair is scored by the owner of its source, once"
    logits = torch.empty(len(pairs), dtype=torch.float32)
    logits[where] = torch.cat(got_scores).cpu()
    return PairScores(src=pairs[:, 0].copy(), dst=pairs[:, 1].copy(), scores=logits.numpy(),
                      probabilities=torch.sigmoid(logits).numpy())


def _validate(args: argparse.Namespace) -> int:
    try:
        line = check_prediction(args.data, args.model_file, args.out, embeddings=args.embeddings, layer=args.layer,
                                pairs=args.pairs)
        print(f"prediction OK: {line}", file=sys.stderr)
    except ValueError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return 0


@record
def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``), start the process group, predict, write ``--out``
    on rank 0, end the group. Exit codes as ``gnn_dist.train.main``'s."""
    from .distributed.parent_watch import watch_launcher
    from .train import run_in_group, usage_error

    watch = watch_launcher()
    rank = environ.launch_rank()
    try:
        args = _parse(argv)
    except UsageError as exc:
        return usage_error(exc, rank)
    if args.validate:
        return _validate(args)

    refused: list[str] = []

    def body(ctx: Any) -> None:
        from .atomic_file import StorageError, all_ranks_write
        from .distributed import all_ranks_agree

        with all_ranks_agree(f"checking --out {args.out}"):
            if ctx.rank == 0:
                check_output_file(args.out, "--out")
        preds = predict(args.data, args.model_file, embeddings=args.embeddings, layer=args.layer, pairs=args.pairs,
                        device=ctx.device, verify=args.verify)
        try:
            with all_ranks_write(f"writing --out {args.out}"):   # a refused write: a StorageError on every rank
                if preds is not None:
                    preds.save(args.out)
                    log.info(f"wrote {args.out}: {preds.describe()}")
        except StorageError as exc:   # the disk, not the input: one line on rank 0, exit code 1, nothing written
            if ctx.rank == 0 or args.verbose:
                log.error(f"error: {exc}", exc_info=exc if args.verbose else None)
            refused.append(str(exc))

    code = run_in_group(body, rank=rank, verbose=args.verbose, backend=args.backend, timeout=args.timeout,
                        watch=watch)
    return 1 if code == 0 and refused else code


if __name__ == "__main__":
    from partitioners.process_exit import exit_process

    exit_process(main())   # without the 1-2 s of interpreter teardown (see the module)
