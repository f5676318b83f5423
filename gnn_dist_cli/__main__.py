"""``python -m gnn_dist_cli``: the ``gnn-dist`` command."""

from partitioners.process_exit import exit_process

from .command import main

exit_process(main())   # without the interpreter's teardown (see partitioners/process_exit.py)
