"""Entry point: ``torchrun --nproc-per-node P -m gnn_dist.train --data DIR --model gcn ...``.

Also runs as a plain single process (world size 1, no process group) for a one-part folder, and
in-process as ``main([...])``.

- ``--metrics FILE.jsonl``: rank 0 writes one JSON object per epoch (``epoch``, ``train_loss``,
  ``train_acc``/``val_acc``/``test_acc`` (null when not evaluated that epoch), ``epoch_time_s``,
  ``comm_bytes`` = ``halo_bytes`` + ``allreduce_bytes``, ``eval_time_s``, and the halo-exchange
  timings ``compute_time_s``, ``comm_time_s``, ``exposed_comm_s``, ``bytes_per_layer``,
  ``staleness``).
- ``--pipeline {sync,overlap,stale}``, ``--stale-smoothing``, ``--boundary-sample-rate``,
  ``--halo-dtype``, ``--simulate-link``: the halo-exchange schedule and its options (see
  :class:`gnn_dist.trainer.TrainerConfig`).
- ``--feature-storage {device,host,mmap}``, ``--feature-cache-budget``, ``--feature-cache-policy``,
  ``--no-static-halo``, ``--precompute-first-layer``, ``--first-layer-chunk-rows``: where input
  features live and how the first layer reads them (see :mod:`gnn_dist.cache`); the metrics
  gain ``feature_hits``, ``feature_misses``, ``feature_hit_rate``, ``feature_h2d_bytes``.
- ``--kernels {auto,torch,numba,triton}``: the aggregation kernels (sets ``GNN_DIST_KERNELS``;
  see :mod:`gnn_dist.kernels`). ``--keep-checkpoints N`` keeps the newest N checkpoints.
- ``--epochs`` is the total. ``--resume`` continues from the latest checkpoint in
  ``--checkpoint-dir`` (from epoch 0 if there is none) up to it, with absolute epoch numbers;
  the metrics file keeps the lines of the epochs before the checkpoint and gets the rest
  appended, so it reads like one uninterrupted run.
- Errors: bad flags exit with code 2 (argparse). Anything else is logged on every rank that
  raises it and re-raised (non-zero exit); the process group is aborted without waiting on
  peers, and a dead or stuck peer ends the job after ``--timeout`` seconds at most.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

from torch.distributed.elastic.multiprocessing.errors import record

from .cache.policies import POLICIES
from .kernels import BACKEND_NAMES, ENV_VAR as KERNELS_ENV_VAR
from .models import MODELS, build_model

log = logging.getLogger("gnn_dist.train")


def _int_at_least(minimum: int):
    def parse(value: str) -> int:
        try:
            n = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {value!r}") from None
        if n < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {n}")
        return n
    return parse


def _float_arg(ok: Callable[[float], bool], expected: str) -> Callable[[str], float]:
    """An argparse type: a float for which ``ok`` holds, else an error saying ``expected``."""
    def parse(value: str) -> float:
        try:
            x = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {value!r}") from None
        if not ok(x):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {value}")
        return x
    return parse


_positive_float = _float_arg(lambda x: x > 0 and math.isfinite(x), "a positive number")
_dropout = _float_arg(lambda x: 0.0 <= x < 1.0, "a probability in [0, 1)")
_fraction = _float_arg(lambda x: 0.0 < x <= 1.0, "a fraction in (0, 1]")
_smoothing = _float_arg(lambda x: 0.0 <= x < 1.0, "a factor in [0, 1)")


def _link(value: str) -> Any:
    from .distributed.halo import LinkModel, LinkSpecError

    try:
        return LinkModel.parse(value)
    except LinkSpecError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _budget(value: str) -> int | float | str:
    """``--feature-cache-budget``: an int of bytes, a fraction, or a size/percentage string."""
    from .cache.budget import parse_budget

    spec: int | float | str = value
    try:
        spec = int(value)
    except ValueError:
        try:
            spec = float(value)
        except ValueError:
            pass
    try:
        parse_budget(spec, 1 << 62)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return spec


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gnn_dist.train", description="Exact distributed full-graph GNN training.")
    p.add_argument("--data", required=True, help="partition folder (gnn-dist partition --out)")
    p.add_argument("--model", choices=sorted(MODELS), default="gcn")
    p.add_argument("--hidden", type=_int_at_least(1), default=64, help="hidden width (default: 64)")
    p.add_argument("--layers", type=_int_at_least(1), default=2, help="number of layers (default: 2)")
    p.add_argument("--epochs", type=_int_at_least(0), default=100,
                   help="total epochs; with --resume the run continues up to this number (default: 100)")
    p.add_argument("--lr", type=_positive_float, default=0.01, help="learning rate (default: 0.01)")
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--optimizer", default="adam", choices=("adam", "adamw", "sgd"))
    p.add_argument("--dropout", type=_dropout, default=0.5, help="feature dropout (default: 0.5)")
    p.add_argument("--heads", type=_int_at_least(1), default=None, help="GAT attention heads of the hidden layers")
    p.add_argument("--seed", type=int, default=0, help="seed of the initial weights and dropout masks")
    p.add_argument("--eval-every", type=_int_at_least(0), default=1, help="evaluate every K epochs; 0 never")
    p.add_argument("--log-every", type=_int_at_least(0), default=10, help="progress line every K epochs; 0 never")
    p.add_argument("--metrics", default=None,
                   help="JSON-lines file, one object per epoch (rank 0); started afresh unless --resume, "
                        "which keeps the lines of the epochs before the checkpoint")
    p.add_argument("--checkpoint-dir", default=None,
                   help="where rank 0 writes checkpoints (only rank 0 reads them back: no shared filesystem "
                        "needed; with --pipeline stale each rank also writes and reads its own rank file)")
    p.add_argument("--checkpoint-every", type=_int_at_least(1), default=10,
                   help="checkpoint every K epochs and after the last (default: 10)")
    p.add_argument("--keep-checkpoints", type=_int_at_least(1), default=None, metavar="N",
                   help="keep only the newest N checkpoints (default: all)")
    p.add_argument("--resume", action="store_true",
                   help="continue from the latest checkpoint in --checkpoint-dir (from epoch 0 if there is none)")
    p.add_argument("--pipeline", default="sync", choices=("sync", "stale", "overlap"),
                   help="halo-exchange schedule: sync (exact), overlap (exact; boundary rows are computed first and "
                        "travel while the other rows compute) or stale (PipeGCN: previous-epoch halo rows and gradients, "
                        "communication hidden) (default: sync)")
    p.add_argument("--stale-smoothing", type=_smoothing, default=None, metavar="GAMMA",
                   help="with --pipeline stale: moving average of the stale halo features and gradients, "
                        "factor GAMMA in [0, 1), bias-corrected (default: none)")
    p.add_argument("--boundary-sample-rate", type=_fraction, default=1.0, metavar="P",
                   help="boundary sampling (BNS-GCN): send a random fraction P in (0, 1] of the boundary "
                        "rows each epoch, rescaled by 1/P (default: 1, all)")
    p.add_argument("--halo-dtype", default=None, choices=("fp32", "bf16", "fp16"),
                   help="dtype halo rows travel in; compute stays in fp32 (default: as computed)")
    p.add_argument("--simulate-link", type=_link, default=None, metavar="latency_ms=L,gbps=B",
                   help="delay each halo exchange as a link of latency L ms and bandwidth B Gbit/s would")
    p.add_argument("--feature-storage", default="device", choices=("device", "host", "mmap"),
                   help="where input features live: all on the device, or in host memory / read from disk "
                        "with a device cache of the hottest rows (default: device)")
    p.add_argument("--feature-cache-budget", type=_budget, default=None, metavar="SIZE",
                   help="device cache size for --feature-storage host/mmap: bytes, a size (4GB, 512MiB), "
                        "a percentage of the features (25%%) or a fraction (0.25) (default: all rows)")
    p.add_argument("--feature-cache-policy", default="degree", choices=tuple(sorted(POLICIES)),
                   help="which rows the device cache holds: degree (inner and halo rows by their reads per epoch), halo "
                        "(rows sent to most peers first), frequency (counted in the first epoch), none "
                        "(default: degree)")
    p.add_argument("--no-static-halo", dest="static_halo", action="store_false",
                   help="exchange the halo rows' input features every epoch instead of once at start")
    p.add_argument("--precompute-first-layer", action="store_true",
                   help="aggregate the input features of a gcn/sage/gin first layer once and train on that "
                        "(exact)")
    p.add_argument("--first-layer-chunk-rows", type=_int_at_least(0), default=None, metavar="N",
                   help="run the first layer over chunks of N destination rows, fetching each chunk's source "
                        "rows through the feature cache; 0 never chunks (default: chunk when the cache does "
                        "not hold every row)")
    p.add_argument("--no-verify", action="store_true", help="skip the sha256 check of the part files")
    p.add_argument("--timeout", type=_positive_float, default=300.0,
                   help="collective timeout in seconds: a dead or stuck peer ends the job after it (default: 300)")
    p.add_argument("--backend", default=None, choices=("nccl", "gloo"), help="default: nccl on GPU, gloo on CPU")
    p.add_argument("--kernels", default=None, choices=BACKEND_NAMES,
                   help=f"aggregation kernels (sets {KERNELS_ENV_VAR} for this rank): auto (numba on CPU, cuSPARSE "
                        f"on CUDA), torch, numba, or triton (fused Triton kernels on CUDA) "
                        f"(default: ${KERNELS_ENV_VAR}, else auto)")
    return p


def init_logger(rank: int) -> Callable[[], None]:
    """Log to stderr as ``[rankR] message``; INFO on rank 0, warnings only elsewhere.

    Adds one handler to the root logger (replacing one a previous call added) and returns a
    function that restores the root logger as it was, so :func:`main` run in-process (tests, a
    notebook) leaves the host's logging alone.
    """
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"[rank{rank}] %(message)s"))
    handler._gnn_dist_train = True  # type: ignore[attr-defined]
    root.handlers[:] = [h for h in root.handlers if not getattr(h, "_gnn_dist_train", False)] + [handler]
    root.setLevel(logging.INFO if rank == 0 else logging.WARNING)

    def restore() -> None:
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)

    return restore


def _prepare_metrics(path: str, start_epoch: int) -> None:
    """Start the metrics file afresh, or keep only its records of epochs before ``start_epoch``
    (a resumed run re-does the epochs after its checkpoint). Rewritten atomically."""
    kept: list[str] = []
    if start_epoch > 0 and os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut short by a crash
                if isinstance(rec, dict) and isinstance(rec.get("epoch"), int) and rec["epoch"] < start_epoch:
                    kept.append(line if line.endswith("\n") else line + "\n")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"--metrics {path}: the folder {folder} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w") as f:
            f.writelines(kept)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def run(args: argparse.Namespace, device: Any = None) -> dict:
    """Train as ``args`` says inside an initialised process group (or as a single process);
    returns the final metrics (every rank). ``device`` defaults to CPU."""
    import torch

    from .distributed import get_rank
    from .distributed import raise_on_all_ranks
    from .partition import load_partition
    from .trainer import Trainer

    if args.resume and not args.checkpoint_dir:
        raise ValueError("--resume needs --checkpoint-dir")
    rank = get_rank()
    part = load_partition(args.data, device=device, verify=not args.no_verify)
    log.info(f"{part!r}")
    torch.manual_seed(args.seed)
    model = build_model(args.model, in_dim=part.feature_dim, hidden_dim=args.hidden,
                        out_dim=part.num_classes, num_layers=args.layers, dropout=args.dropout,
                        seed=args.seed, heads=args.heads)
    trainer = Trainer(model, part, optimizer=args.optimizer, lr=args.lr, weight_decay=args.weight_decay,
                      eval_every=args.eval_every, checkpoint_dir=args.checkpoint_dir,
                      checkpoint_every=args.checkpoint_every, checkpoint_keep=args.keep_checkpoints,
                      metrics_path=args.metrics,
                      log_every=args.log_every, pipeline=args.pipeline,
                      stale_smoothing=args.stale_smoothing, boundary_sample_rate=args.boundary_sample_rate,
                      halo_dtype=args.halo_dtype, simulate_link=args.simulate_link,
                      feature_storage=args.feature_storage, feature_cache_budget=args.feature_cache_budget,
                      feature_cache_policy=args.feature_cache_policy, static_halo=args.static_halo,
                      precompute_first_layer=args.precompute_first_layer,
                      first_layer_chunk_rows=args.first_layer_chunk_rows)
    if args.resume and not trainer.resume():
        log.info(f"no checkpoint in {args.checkpoint_dir}: starting from epoch 0")
    if args.epochs < trainer.epoch:
        log.warning(f"the checkpoint is at epoch {trainer.epoch}, past --epochs {args.epochs}: nothing to train")
    if args.metrics:
        error: BaseException | None = None
        if rank == 0:
            try:
                _prepare_metrics(args.metrics, trainer.epoch)
            except Exception as exc:  # shared with the peers, then re-raised
                error = exc
        raise_on_all_ranks(error, f"preparing the metrics file {args.metrics}")
    trainer.fit(max(0, args.epochs - trainer.epoch))
    final = trainer.evaluate() if args.eval_every else {}
    final["epochs"] = trainer.epoch
    if rank == 0:
        log.info("final: " + json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in final.items()}))
    return final


@record
def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default: ``sys.argv[1:]``), start the process group, train, end it.

    Any error ends the process group without waiting on peers and is re-raised (non-zero exit;
    under torchrun, ``@record`` writes it to the error file).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.resume and not args.checkpoint_dir:
        parser.error("--resume needs --checkpoint-dir")
    if args.keep_checkpoints is not None and not args.checkpoint_dir:
        parser.error("--keep-checkpoints needs --checkpoint-dir")
    if args.stale_smoothing is not None and args.pipeline != "stale":
        parser.error("--stale-smoothing needs --pipeline stale")
    if args.kernels is not None:
        os.environ[KERNELS_ENV_VAR] = args.kernels   # read by gnn_dist.kernels at each aggregation
    from .distributed import init_distributed
    from .distributed.allocator import tune_allocator

    with init_distributed(backend=args.backend, timeout=args.timeout) as ctx:
        restore_logging = init_logger(ctx.rank)
        try:
            tune_allocator()  # glibc malloc thresholds (logged), before the partition and the steps allocate
            log.info("config: " + json.dumps(vars(args), sort_keys=True, default=str))
            run(args, device=ctx.device)
        except Exception as exc:
            log.error(f"rank {ctx.rank}: {type(exc).__name__}: {exc}")
            raise
        finally:
            restore_logging()
    return 0


if __name__ == "__main__":
    sys.exit(main())
