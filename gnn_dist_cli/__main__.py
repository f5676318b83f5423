"""``python -m gnn_dist_cli``: the ``gnn-dist`` command."""

from .command import console_main

console_main()   # without the interpreter's teardown (see partitioners/process_exit.py)
