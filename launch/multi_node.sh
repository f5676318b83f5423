#!/usr/bin/env bash
# Train across machines with torchrun's c10d rendezvous. Run the same command on every node:
#   NNODES=2 NPROC_PER_NODE=4 RDZV_HOST=node0 launch/multi_node.sh DATA_DIR [train options...]
# The world size (NNODES * NPROC_PER_NODE) must equal the folder's num_parts, and DATA_DIR must
# be readable on every node (a shared filesystem, or a copy of the same folder: each rank only
# reads partition.json and its own part-XXXXX/).
#
# SECURITY: the rendezvous store (a torch TCPStore on RDZV_HOST:RDZV_PORT) and the ranks' gloo/NCCL
# sockets listen on the network, on every interface, with no authentication: anyone who can reach
# them can join or disturb the job. Run this only on a trusted, isolated network (a cluster's
# private fabric, a VPN, or a firewall that admits only the job's nodes). GLOO_SOCKET_IFNAME /
# NCCL_SOCKET_IFNAME choose the interface the ranks use (e.g. the private one). On one machine
# use `gnn-dist train` or launch/single_node.sh instead: everything there listens on 127.0.0.1.
set -euo pipefail
DATA=${1:?usage: launch/multi_node.sh DATA_DIR [train options...]}
shift
: "${NNODES:?set NNODES}" "${NPROC_PER_NODE:?set NPROC_PER_NODE}" "${RDZV_HOST:?set RDZV_HOST (node running the rendezvous)}"
RDZV_PORT=${RDZV_PORT:-29400}
RDZV_ID=${RDZV_ID:-gnn-dist-$(basename "$DATA")}
# torch's CPU allocator: 2 MiB pages for blocks >= 2 MiB (fewer page faults); with it each rank
# also fixes glibc's malloc thresholds (gnn_dist/distributed/allocator.py). Set it to 0 to opt out.
export THP_MEM_ALLOC_ENABLE=${THP_MEM_ALLOC_ENABLE:-1}
# gnn_dist.distributed.local_run is torchrun (its arguments after --, unchanged) with the rendezvous
# backend gnn-dist-c10d: torchrun's c10d, plus every round's store address published, so that with
# NNODES=MIN:MAX a node may also join a running job (torch's c10d publishes it in the first round only).
exec python3 -m gnn_dist.distributed.local_run -- --nnodes "$NNODES" --nproc-per-node "$NPROC_PER_NODE" \
  --rdzv-backend gnn-dist-c10d --rdzv-endpoint "$RDZV_HOST:$RDZV_PORT" --rdzv-id "$RDZV_ID" \
  -m gnn_dist.train --data "$DATA" "$@"
