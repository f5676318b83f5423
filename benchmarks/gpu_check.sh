#!/usr/bin/env bash
# The GPU checks, as one call on a lent GPU machine (under 8 minutes), from the repository root:
#   bash benchmarks/gpu_check.sh            # figures into $OUT (default benchmarks/results)
# 1. the CUDA paths: every built-in model on the GPU equals the CPU, with each CUDA kernel
#    backend, torch (cuSPARSE) and triton (benchmarks/gpu_check.py);
# 2. GPU figures (the same script): one-rank GCN step vs PyG GCNConv (sparse CSR adj_t) on
#    sbm-medium; torch (cuSPARSE) against triton, unit by unit and in GCN/GAT epochs (issue 6:
#    which one GNN_DIST_KERNELS=auto should take on CUDA);
# 3. the NCCL path: init_distributed on NCCL, load_partition on CUDA and short training runs
#    under torchrun (one GPU: one rank; a random partition, so pymetis need not be there), which
#    must train alike (benchmarks/compare_metrics.py):
#    - the feature cache's CUDA paths (pinned host tier, non_blocking copies, chunked first
#      layer) against the plain run;
#    - GAT with the Triton kernels against GAT with cuSPARSE;
# 4. the cache store's and the halo quantiser's CUDA tests (CUDA's torch ops write the CPU
#    kernel's bytes); activation offload (the same gradients, less device memory held) and
#    NCCL runs with --offload-activations --recompute all (as the plain run) and --precision
#    bf16 (as fp32 to bfloat16's rounding).
# Every step runs even when an earlier one failed; the script exits 1 if any failed, and names them.
# The machine has no network: it runs the tree as it is (PYTHONPATH), with the image's torch.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
OUT=${OUT:-benchmarks/results}
mkdir -p "$OUT"
FAILED=()
step() {  # step NAME COMMAND...: run it, note a failure, go on
  local name=$1; shift
  echo "=== $name"
  if ! "$@"; then FAILED+=("$name"); echo "=== $name FAILED"; fi
}
train() {  # train METRICS EPOCHS FLAGS...: one rank under torchrun on NCCL
  local metrics=$1 epochs=$2; shift 2
  timeout 180 python3 -m torch.distributed.run --standalone --nproc-per-node 1 -m gnn_dist.train --data "$DATA" \
    --backend nccl --hidden 64 --epochs "$epochs" --log-every 10 --metrics "$OUT/$metrics" "$@"
}

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))"
python3 -c "import triton; print('triton', triton.__version__)" || true
step "models and kernel backends (gpu_check.py)" \
  timeout 300 python3 benchmarks/gpu_check.py --device cuda --out "$OUT/gpu_check_h200.json"
DATA=$(mktemp -d)/sbm-small-1
step "partition" timeout 120 python3 -m gnn_dist_cli partition --dataset sbm-small --parts 1 --method random \
  --out "$DATA" --no-progress
step "NCCL training, gcn" train gpu_check_nccl_metrics.jsonl 50 --model gcn
step "NCCL training, gcn, feature cache (host tier, 25%, chunked)" train gpu_check_cache_metrics.jsonl 20 \
  --model gcn --feature-storage host --feature-cache-budget 25% --first-layer-chunk-rows 2000
step "feature cache trains like the plain run" python3 benchmarks/compare_metrics.py \
  "$OUT/gpu_check_nccl_metrics.jsonl" "$OUT/gpu_check_cache_metrics.jsonl" --rtol 1e-4
step "NCCL training, gat, cuSPARSE" train gpu_check_gat_torch_metrics.jsonl 10 --model gat --kernels torch
step "NCCL training, gat, Triton" train gpu_check_gat_triton_metrics.jsonl 10 --model gat --kernels triton
step "Triton trains like cuSPARSE" python3 benchmarks/compare_metrics.py \
  "$OUT/gpu_check_gat_torch_metrics.jsonl" "$OUT/gpu_check_gat_triton_metrics.jsonl" --rtol 1e-4
step "cache store CUDA tests" timeout 120 python3 -m pytest -q -p no:cacheprovider tests/gnn_dist/cache/test_store.py -k cuda
step "halo quantiser CUDA tests" timeout 120 python3 -m pytest -q -p no:cacheprovider tests/gnn_dist/test_halo_quantize.py -k cuda
step "activation offload CUDA tests" timeout 120 python3 -m pytest -q -p no:cacheprovider tests/gnn_dist/pipeline/test_offload.py -k cuda
step "NCCL training, gcn, offload + recompute all" train gpu_check_offload_metrics.jsonl 50 --model gcn \
  --offload-activations --recompute all
step "offload and recompute train as the plain run" python3 benchmarks/compare_metrics.py \
  "$OUT/gpu_check_nccl_metrics.jsonl" "$OUT/gpu_check_offload_metrics.jsonl" --rtol 1e-6
step "NCCL training, gcn, bf16" train gpu_check_bf16_metrics.jsonl 50 --model gcn --precision bf16
step "bf16 trains like fp32 (to its rounding)" python3 benchmarks/compare_metrics.py \
  "$OUT/gpu_check_nccl_metrics.jsonl" "$OUT/gpu_check_bf16_metrics.jsonl" --rtol 5e-2
if ((${#FAILED[@]})); then
  printf 'gpu_check: FAILED: %s\n' "${FAILED[@]}"
  exit 1
fi
echo "gpu_check: all steps passed"
