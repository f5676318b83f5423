"""``python -m gnn_dist_cli``: the ``gnn-dist`` command."""

import sys

from .command import main

sys.exit(main())
