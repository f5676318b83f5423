#!/usr/bin/env bash
# A multi-node launch, rehearsed on one machine: two "nodes" (two torchrun agents, one rank each)
# meet at a c10d rendezvous on 127.0.0.1 and train one 2-part folder together, exactly as two
# machines running launch/multi_node.sh would (there RDZV_HOST is the first machine's address).
#
#   bash examples/multi_node_localhost.sh [WORK_DIR]     (default: a new temporary folder)
#
# On real machines: the same folder on both (shared filesystem or a copy), then on each node
#   NNODES=2 NPROC_PER_NODE=1 RDZV_HOST=node0 RDZV_PORT=29400 launch/multi_node.sh parts [flags...]
# and read the SECURITY note in launch/multi_node.sh: the rendezvous store is unauthenticated.
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-$(mktemp -d)}
mkdir -p "$WORK"
cd "$WORK"

gnn-dist partition --dataset sbm-tiny --parts 2 --out parts --overwrite

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export NNODES=2 NPROC_PER_NODE=1 RDZV_HOST=127.0.0.1 RDZV_PORT=$PORT RDZV_ID=gnn-dist-localhost-$$
export GLOO_SOCKET_IFNAME=lo        # this rehearsal stays on loopback; on a cluster: the private interface
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT
for node in 0 1; do
  bash "$HERE/launch/multi_node.sh" parts --epochs 20 --hidden 16 --eval-every 10 \
      --timeout 120 > "node$node.log" 2>&1 &
  pids+=("$!")
done
status=0
for i in 0 1; do
  wait "${pids[$i]}" || { status=$?; echo "node $i failed (exit code $status):"; tail -20 "node$i.log"; }
done
pids=()
[ "$status" -eq 0 ] || exit "$status"
grep -h "final:" node0.log node1.log      # rank 0 runs on whichever node the rendezvous made first
echo "done: $WORK"
