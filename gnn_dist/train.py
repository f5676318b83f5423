"""Entry point: ``torchrun --nproc-per-node P -m gnn_dist.train --data DIR --model gcn ...``.

Also runs as a plain single process (world size 1, no process group) for a one-part folder, and
in-process as ``main([...])``. The flags are generated from :mod:`gnn_dist.config` (``--help``
lists them; ``--config run.toml`` sets any of them, flags override it); ``--validate`` checks the
configuration against the partition's metadata and exits (what ``gnn-dist train`` runs before
it starts torchrun).

- ``--metrics FILE.jsonl``: rank 0 writes the resolved config, then one JSON object per epoch
  (see :mod:`gnn_dist.metrics`). A resumed run keeps the records of the epochs before its
  checkpoint, so the file reads like one uninterrupted run.
- ``--epochs`` is the total; ``--resume [auto|latest|PATH]`` continues from a checkpoint up to it,
  with absolute epoch numbers (``auto``, what ``--resume`` alone means, also starts afresh when
  there is none: right for the first start of an elastic job under ``torchrun --max-restarts``).
- Errors: a bad flag or value is one line and exit code 2. Inside the ranks, an error in the
  user's input (a bad partition or checkpoint, a refused option) is one line on rank 0 and none
  elsewhere, exit code 2; a peer that died or stalled is one line (naming the exchange, its
  layer and the peers) on each rank that saw it, exit code 1; anything else is logged with its
  traceback on every rank that raises it and re-raised (exit 1; the ``record`` decorator writes
  torchrun's error file). ``-v`` adds tracebacks and debug logging. The process group is
  aborted without waiting on peers, and a dead or stuck peer ends the job after ``--timeout``
  seconds at most.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

from . import environ, rank_threads

rank_threads.rank_defaults()   # before torch: the ranks torchrun starts run as gnn-dist train's do

from torch.distributed.elastic.multiprocessing.errors import record  # noqa: E402
from .config import RunConfig
from .config_cli import UsageError, parse_run_config
from .failure_note import leave_failure_note

log = logging.getLogger("gnn_dist.train")

EXIT_USAGE = 2
"""Exit code of a bad command line, config file or input (as ``gnn-dist``'s)."""


ALWAYS = {"always": True}
"""``log.info(..., extra=ALWAYS)``: a line shown with ``--quiet`` too (the final metrics)."""


class _QuietFilter(logging.Filter):
    """``--quiet``: warnings and errors, and the records marked :data:`ALWAYS`."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or getattr(record, "always", False)


def init_logger(rank: int, verbose: bool = False, quiet: bool = False) -> Callable[[], None]:
    """Log to stderr as ``[rankR] message``; INFO (DEBUG with ``verbose``; with ``quiet`` warnings
    and the :data:`ALWAYS` lines) on rank 0, warnings only elsewhere.

    Adds one handler to the root logger (replacing one a previous call added) and returns a
    function that restores the root logger as it was, so :func:`main` run in-process (tests, a
    notebook) leaves the host's logging alone.
    """
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"[rank{rank}] %(message)s"))
    handler._gnn_dist_train = True  # type: ignore[attr-defined]
    if quiet:
        handler.addFilter(_QuietFilter())
    root.handlers[:] = [h for h in root.handlers if not getattr(h, "_gnn_dist_train", False)] + [handler]
    root.setLevel((logging.DEBUG if verbose else logging.INFO) if rank == 0 else logging.WARNING)

    def restore() -> None:
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)

    return restore


def build(config: RunConfig, device: Any = None) -> Any:
    """The run's partition, model and trainer (a collective: every rank builds its own)."""
    import torch

    from .kernels import resolve_kernels
    from .models import build_model
    from .partition import load_partition
    from .trainer import Trainer

    kernels = resolve_kernels(config.distributed.kernels or environ.kernels())
    _check_data(config)
    _check_memory(config)
    if config.trainer.parallel.parallel != "graph":   # layer/hybrid: a stage per rank (gnn_dist.layer_parallel)
        from .layer_parallel import build_trainer

        trainer = build_trainer(config, device, kernels)
        log.info(f"{trainer.part!r}: stage {trainer.layout.stage} of {trainer.layout.stages} "
                 f"(layers {trainer.layout.layers.start}-{trainer.layout.layers.stop - 1})")
        trainer.predicted_peak = _log_memory_plan(trainer.part, config)   # every rank's, in world-rank order
        return trainer
    part = load_partition(config.data.data, device=device, verify=config.data.verify, kernels=kernels)
    log.info(f"{part!r}")
    torch.manual_seed(config.model.seed)
    task = config.trainer.task.resolve(part.meta.label_kind, where=str(part.path),   # its output width
                                       edge_split=getattr(part.meta, "edge_split", None) is not None)
    from .models import resolve_edge_dim

    config.model = resolve_edge_dim(config.model, part.edge_feature_dim, str(part.path))   # --edge-dim: the partition's
    model = build_model(config.model, in_dim=part.feature_dim, out_dim=task.out_dim(part.num_classes, config.model.hidden),
                        typed=part.typed)
    trainer = Trainer(model, part, config.trainer, run_config=config.to_dict())
    trainer.predicted_peak = _log_memory_plan(part, config)
    return trainer


def _log_memory_plan(part: Any, config: RunConfig) -> list[int]:
    """The memory planner's prediction for every rank on this device (rank 0 logs the largest
    rank's components); returns each rank's predicted peak as the measured peak counts it."""
    from partitioners.memory import format_bytes

    from .distributed import get_rank
    from .memory_plan import plan_from_meta

    plan = plan_from_meta(part.meta, config, device=part.device.type)
    if get_rank() == 0:
        largest = plan.largest
        terms = ", ".join(f"{k} {format_bytes(v)}" for k, v in largest.bytes().items())
        where = f"part {largest.part_id}" + (f", stage {largest.stage}" if config.trainer.parallel.parallel != "graph"
                                             else "")
        log.info(f"memory plan: predicted peak per rank {', '.join(format_bytes(r.allocated) for r in plan.ranks)} "
                 f"({part.device.type}; the largest, {where}: {terms})")
    return [r.allocated for r in plan.ranks]


def _check_data(config: RunConfig) -> None:
    """What ``--validate`` checks of the folder's data (features, the task's labels), on every
    rank before any part file is read: a job started by torchrun directly gets the same one line."""
    from partitioners.format import load_partition_meta

    from .validate import check_data

    try:
        meta = load_partition_meta(config.data.data)
    except ValueError:
        return   # load_partition reports it, on every rank
    check_data(config, meta)


def _check_memory(config: RunConfig) -> None:
    """This rank's share of the machine's memory against its estimate, from the metadata, before
    any part file is read; a refusal on one rank is raised on every rank."""
    from partitioners.format import load_partition_meta

    from .distributed import all_ranks_agree, get_rank, get_world_size
    from .memory_plan.guard import check_training_memory, world_ranks

    try:
        meta = load_partition_meta(config.data.data)
    except ValueError:
        return   # load_partition reports it, on every rank
    if len(world_ranks(meta, config)) != get_world_size():
        return   # likewise, before any collective
    with all_ranks_agree("checking the memory estimate"):
        check_training_memory(meta, config, [get_rank()], local_ranks=environ.local_world_size())


def run(config: RunConfig, device: Any = None) -> dict:
    """Train as ``config`` says inside an initialised process group (or as a single process);
    returns the final metrics (every rank). ``device`` defaults to CPU."""
    from .distributed import get_rank
    from .metrics import check_metrics_target
    from .model_file import check_save_target, save_trained_model

    rank_threads.limit_pools()
    if get_rank() == 0:
        log.info(rank_threads.describe())
    trainer = build(config, device)
    check_save_target(config)  # --save-model's folder, before training rather than at its end
    check_metrics_target(config)  # --metrics' folder, likewise
    if config.trainer.checkpoint.resume is not None:
        trainer.resume()
    if config.epochs < trainer.epoch:
        log.warning(f"the checkpoint is at epoch {trainer.epoch}, past --epochs {config.epochs}: nothing to train")
    trainer.fit(max(0, config.epochs - trainer.epoch))
    final = trainer.evaluate() if config.trainer.report.eval_every else {}
    final["epochs"] = trainer.epoch
    selection = trainer.selection
    if selection.keeps_weights and selection.best is not None:   # the accuracies above are that epoch's
        final["selected_epoch"] = selection.best["epoch"]
    if config.trainer.selection.patience is not None:
        final["stopped_early"] = selection.stopped and trainer.epoch < config.epochs
    if get_rank() == 0:
        log.info("final: " + json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in final.items()}),
                 extra=ALWAYS)
    if save_trained_model(config, trainer, final) is not None and get_rank() == 0:
        log.info(f"wrote the model file {config.save_model}")
    return final


def _report(exc: BaseException, rank: int, verbose: bool) -> int | None:
    """Log a failure of this rank; returns the exit code, or None for an internal error (logged
    with its traceback on every rank that raised it, to be re-raised).

    The user's input (a ``ValueError``: bad partition, checkpoint or option; a missing file; a
    non-finite loss): one line on rank 0, none elsewhere, exit code 2. A peer that died or
    stalled (:class:`~gnn_dist.distributed.CollectiveError`), or a write the disk refused
    (:class:`~gnn_dist.atomic_file.StorageError`, on rank 0): one line on every rank that saw it
    (rank 0 may be the one that died), exit code 1. ``verbose`` adds the tracebacks."""
    from .atomic_file import StorageError
    from .distributed import CollectiveError

    if isinstance(exc, StorageError):   # a full or read-only disk: nothing half-written, one line, exit 1
        code, shown = 1, rank == 0 or verbose   # every rank raises it (atomic_file.all_ranks_write shares it)
    elif isinstance(exc, (ValueError, FileNotFoundError, FloatingPointError)):
        code, shown = EXIT_USAGE, rank == 0 or verbose
    elif isinstance(exc, CollectiveError):
        code, shown = 1, True
    else:
        log.error(f"rank {rank}: {type(exc).__name__}: {exc}", exc_info=exc)
        return None
    if shown:
        log.error(f"error: {exc}", exc_info=exc if verbose else None)
    leave_failure_note(f"error: {exc}")   # torchrun's summary names the reason, not "To enable traceback"
    return code


def usage_error(exc: UsageError, rank: int) -> int:
    """A command line the parser refused: its message on rank 0 (every rank parsed the same
    line), the reason left for torchrun's summary on every rank; exit code 2. What ``main`` and
    ``gnn_dist.predict.main`` return for it."""
    if rank == 0:
        print(exc, file=sys.stderr)
    leave_failure_note(str(exc))
    return EXIT_USAGE


@record
def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default: ``sys.argv[1:]``), start the process group, train, end it."""
    # Keep first: under torchrun, this rank exits when its launcher (the agent) is gone, instead
    # of training on as an orphan (see gnn_dist/distributed/parent_watch.py).
    from .distributed.parent_watch import watch_launcher
    watch = watch_launcher()
    rank = environ.launch_rank()
    try:
        config, options = parse_run_config(argv)
    except UsageError as exc:
        return usage_error(exc, rank)
    if options.validate:
        from .validate import validate_run

        return validate_run(config, quiet=options.quiet)
    from .distributed.allocator import tune_allocator

    def body(ctx: Any) -> None:
        tune_allocator()  # glibc malloc thresholds (logged), before the partition and the steps allocate
        log.debug("config: " + json.dumps(config.to_dict(), sort_keys=True))   # -v; the metrics file has it too
        from .checkpoints import hold_checkpoint_dir
        with hold_checkpoint_dir(config.trainer.checkpoint):   # rank 0 locks --checkpoint-dir for the job, or all fail
            if options.resize_cut is not None:   # --repartition-on-resize: rank 0 cuts under the lock, the others wait
                _make_cut(options.resize_cut, ctx.rank, config.distributed.timeout)
            run(config, device=ctx.device)

    return run_in_group(body, rank=rank, verbose=options.verbose, quiet=options.quiet,
                        backend=config.distributed.backend, timeout=config.distributed.timeout, watch=watch)


def _make_cut(cut: Any, rank: int, timeout_s: float) -> None:
    """:meth:`gnn_dist.resize_cut.ResizeCut.make`; a rank that waited for rank 0's cut in vain
    fails as a stalled peer does (one line on every rank that saw it, exit code 1)."""
    from .distributed import CollectiveError

    try:
        cut.make(rank, timeout_s)
    except TimeoutError as exc:
        raise CollectiveError(str(exc)) from None


def run_in_group(body: Callable[[Any], None], *, rank: int, verbose: bool = False, quiet: bool = False,
                 backend: str | None = None, timeout: float = 300.0, watch: Any = None) -> int:
    """Log as :func:`init_logger` says, start the process group, run ``body(ctx)`` (``ctx``: the
    :class:`~gnn_dist.distributed.DistContext`), end the group; returns 0, or the exit code of a
    failure as :func:`_report` decides (the group is then aborted without waiting on peers); an
    internal error is re-raised. ``watch``: the launcher watch (a rank whose collective broke
    because an orphaned peer exited ends the orphan's way). What ``main`` and
    ``gnn_dist.predict.main`` run."""
    from .distributed import init_distributed

    restore_logging = init_logger(rank, verbose, quiet)
    try:
        with init_distributed(backend=backend, timeout=timeout) as ctx:
            try:
                body(ctx)
            except Exception as exc:
                if watch is not None:  # a peer that exited as an orphan broke this collective
                    watch.exit_if_gone()
                code = _report(exc, ctx.rank, verbose)
                if code is None:
                    raise
                ctx.close(clean=False)
                return code
    finally:
        restore_logging()
    return 0


if __name__ == "__main__":
    from partitioners.process_exit import exit_process

    exit_process(main())   # without the 1-2 s of interpreter teardown (see the module)
