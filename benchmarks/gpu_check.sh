#!/usr/bin/env bash
# The GPU checks, as one call on a lent GPU machine (under 8 minutes), from the repository root:
#   bash benchmarks/gpu_check.sh            # figures into $OUT (default benchmarks/results)
# 1. the CUDA paths: every built-in model on the GPU equals the CPU (benchmarks/gpu_check.py);
# 2. the NCCL path: init_distributed on NCCL, load_partition on CUDA and a short training run
#    under torchrun (one GPU: one rank; a random partition, so pymetis need not be there);
# 3. the feature cache's CUDA paths (pinned host tier, non_blocking copies, chunked first layer);
# 4. GPU figures: one-rank GCN step vs PyG GCNConv (sparse CSR adj_t) and the SpMM on sbm-medium;
#    the CUDA kernel backends, torch (cuSPARSE) against triton, unit by unit and in GCN/GAT epochs
#    (issue 6: which one GNN_DIST_KERNELS=auto should take on CUDA), and both backends' models
#    against the CPU.
# The machine has no network: it runs the tree as it is (PYTHONPATH), with the image's torch.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
OUT=${OUT:-benchmarks/results}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))"
timeout 300 python3 benchmarks/gpu_check.py --device cuda --out "$OUT/gpu_check_h200.json"
DATA=$(mktemp -d)/sbm-small-1
timeout 120 python3 -m partitioners.cli partition --dataset sbm-small --parts 1 --method random --out "$DATA" --no-progress
timeout 180 python3 -m torch.distributed.run --standalone --nproc-per-node 1 -m gnn_dist.train --data "$DATA" \
  --backend nccl --model gcn --hidden 64 --epochs 50 --log-every 10 --metrics "$OUT/gpu_check_nccl_metrics.jsonl"
# the feature cache on CUDA: pinned host tier, mmap tier, device tier and the chunked first layer
timeout 180 python3 -m torch.distributed.run --standalone --nproc-per-node 1 -m gnn_dist.train --data "$DATA" \
  --backend nccl --model gcn --hidden 64 --epochs 20 --log-every 10 --feature-storage host \
  --feature-cache-budget 25% --first-layer-chunk-rows 2000 --metrics "$OUT/gpu_check_cache_metrics.jsonl"
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/gnn_dist/cache/test_store.py -k cuda 2>&1 | tail -3 || true
