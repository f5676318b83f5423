"""Entry point: ``torchrun --nproc-per-node P -m gnn_dist.train --data DIR --model gcn ...``.

Also runs as a plain single process (world size 1) for a one-part folder.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Sequence

from torch.distributed.elastic.multiprocessing.errors import record

from .models import MODELS, build_model

log = logging.getLogger("gnn_dist.train")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gnn_dist.train", description="Exact distributed full-graph GNN training.")
    p.add_argument("--data", required=True, help="partition folder (gnn-dist partition --out)")
    p.add_argument("--model", choices=sorted(MODELS), default="gcn")
    p.add_argument("--hidden", type=int, default=64, help="hidden width (default: 64)")
    p.add_argument("--layers", type=int, default=2, help="number of layers (default: 2)")
    p.add_argument("--epochs", type=int, default=100,
                   help="total epochs; with --resume the run continues up to this number")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--optimizer", default="adam", choices=("adam", "adamw", "sgd"))
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--heads", type=int, default=None, help="GAT attention heads of the hidden layers")
    p.add_argument("--seed", type=int, default=0, help="seed of the initial weights and dropout masks")
    p.add_argument("--eval-every", type=int, default=1, help="evaluate every K epochs; 0 never")
    p.add_argument("--log-every", type=int, default=10, help="progress line every K epochs; 0 never")
    p.add_argument("--metrics", default=None, help="JSON-lines file of per-epoch metrics (rank 0)")
    p.add_argument("--checkpoint-dir", default=None, help="where rank 0 writes checkpoints")
    p.add_argument("--checkpoint-every", type=int, default=10)
    p.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in --checkpoint-dir")
    p.add_argument("--no-verify", action="store_true", help="skip the sha256 check of the part files")
    p.add_argument("--timeout", type=float, default=300.0, help="collective timeout in seconds (default: 300)")
    p.add_argument("--backend", default=None, choices=("nccl", "gloo"), help="default: nccl on GPU, gloo on CPU")
    return p


def init_logger(rank: int) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"[rank{rank}] %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO if rank == 0 else logging.WARNING)


def run(args: argparse.Namespace) -> dict:
    """Train as ``args`` says inside an initialised process group; returns the final metrics."""
    import torch

    from .distributed import get_rank
    from .partition import load_partition
    from .trainer import Trainer

    if args.resume and not args.checkpoint_dir:
        raise ValueError("--resume needs --checkpoint-dir")
    part = load_partition(args.data, device=args._device, verify=not args.no_verify)
    log.info(f"{part!r}")
    torch.manual_seed(args.seed)
    model = build_model(args.model, in_dim=part.feature_dim, hidden_dim=args.hidden,
                        out_dim=part.num_classes, num_layers=args.layers, dropout=args.dropout,
                        seed=args.seed, heads=args.heads)
    trainer = Trainer(model, part, optimizer=args.optimizer, lr=args.lr, weight_decay=args.weight_decay,
                      eval_every=args.eval_every, checkpoint_dir=args.checkpoint_dir,
                      checkpoint_every=args.checkpoint_every, metrics_path=args.metrics,
                      log_every=args.log_every)
    if args.resume and not trainer.resume():
        log.info(f"no checkpoint in {args.checkpoint_dir}: starting from epoch 0")
    trainer.fit(max(0, args.epochs - trainer.epoch))
    final = trainer.evaluate() if args.eval_every else {}
    final["epochs"] = trainer.epoch
    if get_rank() == 0:
        log.info("final: " + json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in final.items()}))
    return final


@record
def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from .distributed import init_distributed

    with init_distributed(backend=args.backend, timeout=args.timeout) as ctx:
        init_logger(ctx.rank)
        args._device = ctx.device
        run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
