#!/usr/bin/env bash
# The main job: set up, partition the built-in sbm-small graph into 2 parts with METIS, and
# train a 2-layer GCN on it with torchrun (2 ranks; gloo on CPU, NCCL when GPUs are there).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export THP_MEM_ALLOC_ENABLE=${THP_MEM_ALLOC_ENABLE:-1}  # huge-page CPU tensors (see launch/single_node.sh)
OUT=${OUT:-runs/sbm-small-p2}
gnn-dist partition --dataset sbm-small --parts 2 --method metis --out "$OUT" --overwrite --no-progress
gnn-dist train --data "$OUT" --nproc 2 --model gcn --hidden 64 --layers 2 --epochs 100 \
  --lr 0.01 --dropout 0.5 --seed 0 --metrics "$OUT.metrics.jsonl"
