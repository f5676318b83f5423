#!/usr/bin/env bash
# Train on one machine: one rank per part of the partition folder.
#   launch/single_node.sh DATA_DIR [gnn_dist.train options...]
# NPROC defaults to the folder's num_parts. On GPUs each rank takes the GPU of its LOCAL_RANK.
set -euo pipefail
DATA=${1:?usage: launch/single_node.sh DATA_DIR [train options...]}
shift
NPROC=${NPROC:-$(python3 -c "import json,sys; print(json.load(open(sys.argv[1] + '/partition.json'))['num_parts'])" "$DATA")}
# Each rank keeps its threads within its share (gnn_dist/rank_threads.py: NUMBA_NUM_THREADS, OMP_WAIT_POLICY=PASSIVE).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( $(nproc) / NPROC > 0 ? $(nproc) / NPROC : 1 ))}
# torch's CPU allocator: 2 MiB pages for blocks >= 2 MiB (fewer page faults); with it each rank
# also fixes glibc's malloc thresholds (gnn_dist/distributed/allocator.py). Set it to 0 to opt out.
export THP_MEM_ALLOC_ENABLE=${THP_MEM_ALLOC_ENABLE:-1}
# Every socket on loopback: torchrun --standalone would listen on all interfaces, unauthenticated.
# gnn_dist.distributed.local_run is torchrun with its stores bound to 127.0.0.1 (docs/cli.md, train);
# the ranks' gloo/NCCL listeners go on lo unless you set these yourself.
export GLOO_SOCKET_IFNAME=${GLOO_SOCKET_IFNAME:-lo} NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo}
exec python3 -m gnn_dist.distributed.local_run -- --nnodes=1 --nproc-per-node="$NPROC" \
  --rdzv-backend=gnn-dist-loopback --rdzv-endpoint=127.0.0.1:0 --rdzv-id=gnn-dist-train \
  --local-addr=127.0.0.1 -m gnn_dist.train --data "$DATA" "$@"
