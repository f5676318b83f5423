"""Exact full-graph inference with a model file: ``gnn-dist predict`` runs this on every rank.

Usage (``gnn-dist predict`` launches it one rank per part, like ``gnn-dist train``)::

    torchrun --nproc-per-node P -m gnn_dist.predict --data DIR --model-file FILE --out preds.npz \\
        [--embeddings [--layer K]]
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

Errors as ``gnn_dist.train``'s: a bad flag is one line and exit code 2; a missing, corrupt or
unfitting model file, a bad folder or ``--out`` path is one line on rank 0 and exit code 2
(``--validate``, which ``gnn-dist predict`` runs before any rank starts, finds them first).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.distributed.elastic.multiprocessing.errors import record

from . import environ
from .model_file import ModelFile, check_output_file, load_model_file

__all__ = ["Predictions", "predict", "check_prediction", "embedding_layer", "build_parser", "main"]

log = logging.getLogger("gnn_dist.predict")

PROG = "gnn_dist.predict"
EXIT_USAGE = 2


@dataclass(frozen=True, slots=True)
class Predictions:
    """The gathered predictions, one row per node, by ascending original id (numpy arrays)."""

    node_ids: np.ndarray
    probabilities: np.ndarray | None
    """None for a regression model (its ``predicted`` are the values)."""
    predicted: np.ndarray
    embeddings: np.ndarray | None = None
    embedding_layer: int | None = None

    def arrays(self) -> dict[str, np.ndarray]:
        """What :meth:`save` writes, by name."""
        probabilities = {} if self.probabilities is None else {"probabilities": self.probabilities}
        out = {"node_ids": self.node_ids, **probabilities, "predicted": self.predicted}
        if self.embeddings is not None:
            out |= {"embeddings": self.embeddings, "embedding_layer": np.int64(self.embedding_layer)}
        return out

    def save(self, path: str | os.PathLike) -> Path:
        """Write :meth:`arrays` as an ``.npz`` at ``path`` exactly (temp file in its folder, fsync,
        rename); returns the path."""
        from .atomic_file import atomic_write

        p = Path(path)
        atomic_write(p, lambda f: np.savez(f, **self.arrays()))
        return p


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


def _load_checked(data: str | os.PathLike, model_file: str | os.PathLike) -> ModelFile:
    from partitioners.format import load_partition_meta

    model = load_model_file(model_file)
    model.check_fits(load_partition_meta(data), data)
    return model


def check_prediction(data: str | os.PathLike, model_file: str | os.PathLike, out: str | os.PathLike, *,
                     embeddings: bool = False, layer: int | None = None) -> str:
    """What ``--validate`` checks, in one process (no part file read): the folder's metadata,
    the model file (read, verified, built, against the folder), the embedding layer, ``out``'s
    folder. Raises ``ValueError`` naming what is wrong; returns a one-line description."""
    from .kernels import resolve_kernels

    model = _load_checked(data, model_file)
    model.build()
    if layer is not None and not embeddings:
        raise ValueError(f"--layer {layer} applies with --embeddings only")
    chosen = embedding_layer(model, layer) if embeddings else None
    check_output_file(out, "--out")
    resolve_kernels(environ.kernels())   # as the ranks will
    c = model.model_config
    return (f"{model_file}: model {c.model} ({c.layers} layers, in_dim {model.in_dim}, {model.out_dim} outputs, "
            f"task {model.task.name}) "
            f"on {data}" + (f"; embeddings of layer {chosen}" if chosen is not None else ""))


def predict(data: str | os.PathLike, model_file: str | os.PathLike, *, embeddings: bool = False,
            layer: int | None = None, device: torch.device | str | None = None,
            verify: bool = True) -> Predictions | None:
    """Run the model of ``model_file`` on the whole graph of partition folder ``data`` (a
    collective: every rank of a job of ``num_parts`` ranks calls it, or one process for a 1-part
    folder); returns the :class:`Predictions` on rank 0, None on the others.

    ``embeddings``: also the output of ``layer`` (default: the last hidden layer). ``device``
    defaults to CPU; ``verify`` checks the part files' sha256 at load. A bad model file or one
    that does not fit ``data`` raises ``ValueError`` on every rank.
    """
    from .cache.input import InputFeatures
    from .distributed import all_gather_json, all_ranks_agree, gather_rows, get_rank
    from .partition import load_partition

    with all_ranks_agree(f"reading the model file {model_file}"):
        mf = _load_checked(data, model_file)
        model = mf.build(device)
        task = mf.task
        chosen = embedding_layer(mf, layer) if embeddings else None
    digests = all_gather_json(mf.sha256)
    if len(set(digests)) > 1:
        raise ValueError(f"the ranks read different model files as {model_file} (sha256 "
                         f"{', '.join(sorted({d[:12] for d in digests}))}): copy the same file to every machine")
    part = load_partition(data, device=device, verify=verify)
    view = _Capture(part, chosen)
    with torch.no_grad():
        x = InputFeatures(part) if getattr(model, "accepts_layer_input", False) else part.x
        logits = model(view, x)
        if chosen is not None and view.output is None:
            raise ValueError(f"--embeddings: the model {type(model).__name__} does not run its layers through "
                             f"part.run_layer, so its layer outputs cannot be read")
        probs, pred = task.predict(logits)   # from the logits, as training's evaluation decides
        ids = part.original_ids[:part.num_inner].to(torch.int64)
        rows = [ids, pred] + ([] if probs is None else [probs.float()]) \
            + ([] if view.output is None else [view.output.float()])
        gathered = [gather_rows(t.contiguous()) for t in rows]
    if get_rank() != 0:
        return None
    arrays = [torch.cat(g).cpu().numpy() for g in gathered]  # type: ignore[arg-type]
    order = np.argsort(arrays[0], kind="stable")
    node_ids, predicted, *rest = (a[order] for a in arrays)
    probabilities = rest.pop(0) if probs is not None else None
    return Predictions(node_ids=node_ids, probabilities=probabilities, predicted=predicted,
                       embeddings=rest[0] if rest else None, embedding_layer=chosen)


class UsageError(ValueError):
    """A bad command line: the message is the one line to print (exit code 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # type: ignore[override]
        raise UsageError(f"{self.prog}: error: {message} (see --help)")


def build_parser() -> argparse.ArgumentParser:
    """The ``gnn_dist.predict`` parser."""
    p = _Parser(prog=PROG, description="Exact full-graph inference with a model file (gnn_dist.train --save-model).")
    p.add_argument("--data", required=True, metavar="DIR", help="partition folder (any number of parts)")
    p.add_argument("--model-file", required=True, metavar="FILE",
                   help="the model file gnn_dist.train --save-model wrote")
    p.add_argument("--out", required=True, metavar="FILE.npz",
                   help="where rank 0 writes node_ids, probabilities (not for regression), predicted (and embeddings); its folder "
                        "must exist")
    p.add_argument("--embeddings", action="store_true",
                   help="also write the output of a layer (default: the last hidden layer) as embeddings")
    p.add_argument("--layer", type=int, metavar="K", default=None,
                   help="with --embeddings: the layer whose output is written, 0-based (the last is the output layer)")
    p.add_argument("--no-verify", dest="verify", action="store_false",
                   help="skip the sha256 check of the part files when loading")
    p.add_argument("--backend", choices=("nccl", "gloo"), default=None,
                   help="process-group backend (default: nccl on GPU, gloo on CPU; gloo computes on CPU)")
    p.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS",
                   help="collective timeout in seconds: a dead or stuck peer ends the job after it (default: 300)")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging, and a traceback with every error")
    p.add_argument("--validate", action="store_true",
                   help="check the model file against the folder's metadata and --out in this process, then exit "
                        "(0, or 2 with the error)")
    return p


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    if args.layer is not None and not args.embeddings:
        raise UsageError(f"{PROG}: error: --layer {args.layer} applies with --embeddings only")
    if not args.timeout > 0:
        raise UsageError(f"{PROG}: error: --timeout {args.timeout}: expected a positive number of seconds")
    return args


def _validate(args: argparse.Namespace) -> int:
    try:
        line = check_prediction(args.data, args.model_file, args.out, embeddings=args.embeddings, layer=args.layer)
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
    from .train import run_in_group

    watch = watch_launcher()
    rank = environ.launch_rank()
    try:
        args = _parse(argv)
    except UsageError as exc:
        if rank == 0:
            print(exc, file=sys.stderr)
        return EXIT_USAGE
    if args.validate:
        return _validate(args)

    def body(ctx: Any) -> None:
        from .distributed import all_ranks_agree

        with all_ranks_agree(f"checking --out {args.out}"):
            if ctx.rank == 0:
                check_output_file(args.out, "--out")
        preds = predict(args.data, args.model_file, embeddings=args.embeddings, layer=args.layer,
                        device=ctx.device, verify=args.verify)
        with all_ranks_agree(f"writing {args.out}"):
            if preds is not None:
                preds.save(args.out)
                width = preds.predicted.shape[1] if preds.probabilities is None else preds.probabilities.shape[1]
                log.info(f"wrote {args.out}: {len(preds.node_ids)} nodes, {width} "
                         f"{'values' if preds.probabilities is None else 'classes'}"
                         + (f", embeddings of layer {preds.embedding_layer} ({preds.embeddings.shape[1]} wide)"
                            if preds.embeddings is not None else ""))

    return run_in_group(body, rank=rank, verbose=args.verbose, backend=args.backend, timeout=args.timeout,
                        watch=watch)


if __name__ == "__main__":
    sys.exit(main())
