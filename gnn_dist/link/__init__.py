"""Link prediction on a partitioned graph: the edges to score, their negatives, and the rows they need.

- :mod:`.negatives`: negative destinations drawn by a hash of ``(seed, step, original ids)``, so
  they are the same whatever the number of parts;
- :mod:`.fetch`: the embedding rows of any nodes, fetched from their owners once per step (a
  differentiable, halo-style exchange: gradients travel back to the owners);
- :mod:`.edges`: a part's positive edges of each split (``link_train.npy`` ... of the partition
  folder, written by ``gnn-dist partition --edge-split``) and the folder's original -> new id map;
- :mod:`.score`: the decoder's logits of pairs whose rows live on any rank (one row fetch);
- :mod:`.pairs`: pairs of original ids from a file, scored by the ranks that own their sources
  (``gnn-dist predict --pairs``).

The task itself is :class:`gnn_dist.tasks.LinkPrediction`; the decoders are in
:mod:`gnn_dist.nn.link_decoder`.
"""

from .edges import LinkEdges
from .fetch import RowFetch
from .negatives import negative_destinations

__all__ = ["LinkEdges", "RowFetch", "negative_destinations"]
