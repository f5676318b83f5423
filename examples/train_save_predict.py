"""Train a model, save it, and use it: predictions and node embeddings for every node.

The same steps as shell commands::

    gnn-dist partition --dataset sbm-tiny --parts 1 --out runs/tsp/train-1
    python -m gnn_dist.train --data runs/tsp/train-1 --epochs 30 --save-model runs/tsp/model.pt
    gnn-dist partition --dataset sbm-tiny --parts 2 --out runs/tsp/predict-2
    gnn-dist predict --data runs/tsp/predict-2 --model-file runs/tsp/model.pt --out runs/tsp/preds.npz --embeddings

and in one go, from Python::

    python examples/train_save_predict.py --out runs/tsp                     # predicts on 2 parts (2 ranks)
    python examples/train_save_predict.py --out runs/tsp --predict-parts 1   # all in this process

The model file does not depend on the partition: it is trained on one part here and predicts on
``--predict-parts`` parts (through ``gnn-dist predict``, one rank per part; in this process for
one part). ``preds.npz`` is keyed by the dataset's node ids, so the labels and masks of the
generated graph line up with it row by row; the accuracy computed from the predictions is the
training run's final evaluation. See docs/cli.md (``gnn-dist predict``) and docs/format.md
("Model file").
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

DATASET = "sbm-tiny"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="Train, save and predict on a tiny built-in dataset.")
    p.add_argument("--out", default="runs/train-save-predict", help="folder for the partitions, model and predictions")
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--predict-parts", type=int, default=2, help="parts of the folder predicted on")
    return p


def partition(parts: int, out: Path) -> str:
    from gnn_dist_cli.command import main as gnn_dist_cli

    if not (out / "partition.json").exists():
        assert gnn_dist_cli(["partition", "--dataset", DATASET, "--parts", str(parts), "--out", str(out),
                             "--no-progress"]) == 0
    return str(out)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the steps; returns what they measured (accuracies, shapes, the files written)."""
    args = build_parser().parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model, metrics, preds = out / "model.pt", out / "metrics.jsonl", out / "preds.npz"

    # 1-2. Train on one part, in this process, and save the model file at the end.
    from gnn_dist.train import main as train

    train_data = partition(1, out / "train-1")
    assert train(["--data", train_data, "--epochs", str(args.epochs), "--hidden", str(args.hidden),
                  "--log-every", "0", "--metrics", str(metrics), "--save-model", str(model)]) == 0
    final = json.loads(metrics.read_text().splitlines()[-1])   # the last epoch's evaluation

    # 3. Predict every node, with embeddings: on P parts through gnn-dist predict (P ranks), or here.
    flags = ["--model-file", str(model), "--out", str(preds), "--embeddings"]
    if args.predict_parts == 1:
        from gnn_dist.predict import main as predict

        assert predict(["--data", train_data, *flags]) == 0
    else:
        from gnn_dist_cli.command import main as gnn_dist_cli

        data = partition(args.predict_parts, out / f"predict-{args.predict_parts}")
        assert gnn_dist_cli(["predict", "--data", data, *flags]) == 0

    # 4. Use them: rows are the dataset's node ids, so its labels and masks line up.
    from partitioners.catalog import load_dataset

    graph = load_dataset(DATASET)
    with np.load(preds) as p:
        node_ids, predicted, embeddings = p["node_ids"], p["predicted"], p["embeddings"]
    assert (node_ids == np.arange(graph.num_nodes)).all()
    test_acc = float((predicted[graph.test_mask] == graph.y[graph.test_mask]).mean())
    np.save(out / "embeddings.npy", embeddings)   # e.g. for clustering or a downstream model
    print(f"test accuracy from the predictions {test_acc:.4f} (training's evaluation: {final['test_acc']:.4f}); "
          f"embeddings {embeddings.shape} in {out / 'embeddings.npy'}")
    return {"test_acc": test_acc, "training_test_acc": final["test_acc"], "embeddings_shape": embeddings.shape,
            "model": model, "predictions": preds}


if __name__ == "__main__":
    main()
