#!/usr/bin/env bash
# Your own graph end to end: an edge list with string node names, node features and labels in
# .npy files, a seeded random train/val/test split, 2 parts, training on 2 ranks, and the
# predictions written by the nodes' own names.
#
#   bash examples/own_edge_list.sh [WORK_DIR]      (default: a new temporary folder)
#
# Each step is what you would run on your data; only the first one (making up a graph) is
# specific to this example. Runs in well under a minute on a laptop CPU.
set -euo pipefail
WORK=${1:-$(mktemp -d)}
mkdir -p "$WORK"
cd "$WORK"

# 1. A graph of your own: "user-17<TAB>user-4" lines, features [N, 8] and labels [N] in your own
#    row order, and names.txt: the name of each row (--node-ids aligns the data by it).
python3 - <<'PY'
import numpy as np

rng = np.random.default_rng(0)
n, groups = 300, 3
group = rng.integers(0, groups, n)
names = np.array([f"user-{i}" for i in range(n)])
src, dst = rng.integers(0, n, 3000), rng.integers(0, n, 3000)
keep = (group[src] == group[dst]) | (rng.random(3000) < 0.1)       # mostly within a group
with open("edges.tsv", "w") as f:
    f.write("".join(f"{names[s]}\t{names[d]}\n" for s, d in zip(src[keep], dst[keep])))
features = (np.eye(groups)[group] + rng.normal(0, 1.0, (n, groups))).astype(np.float32)
np.save("features.npy", np.hstack([features, rng.normal(0, 1, (n, 5)).astype(np.float32)]))
np.save("labels.npy", group)
with open("names.txt", "w") as f:                                   # row i of the node data is names[i]
    f.write("".join(f"{name}\n" for name in names))
PY

# 2. Partition it, attaching the node data and making a 60/20/20 split (recorded in partition.json).
gnn-dist partition --input edges.tsv --relabel --symmetrize --node-ids names.txt --features features.npy \
    --labels labels.npy --split 0.6,0.2,0.2 --seed 0 --parts 2 --method metis --out parts
gnn-dist inspect parts --verify

# 3. Train on 2 ranks (gloo on CPU, NCCL on GPUs), keep the model.
gnn-dist train --data parts --model gcn --hidden 16 --epochs 30 --lr 0.05 --eval-every 10 \
    --metrics metrics.jsonl --save-model model.pt

# 4. Predict every node, and name the predictions with the original names.
gnn-dist predict --data parts --model-file model.pt --out preds.npz
python3 - <<'PY'
import numpy as np
from partitioners.format import load_original_names

preds = np.load("preds.npz")
names = load_original_names("parts")
for node, cls in list(zip(names[preds["node_ids"]], preds["predicted"]))[:5]:
    print(f"{node}\t{cls}")
PY
echo "done: $WORK"
