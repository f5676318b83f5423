"""The ``gnn-dist`` command: its parser and verb table (:mod:`.command`), the verbs that start
ranks (:mod:`.launch_verbs`, :mod:`.world`, :mod:`.elastic`) and the supervisor of their torchrun
agent (:mod:`.launch`), the memory planner's verb (:mod:`.plan`) and the training-run report
(:mod:`.run_report`).

Torch-free: ``partition``, ``convert``, ``inspect`` and ``datasets`` (whose work is
:mod:`partitioners`') run on machines without torch; ``train`` and ``predict`` hand over to
``torchrun`` in a child process; ``plan`` imports :mod:`gnn_dist` when it runs.
"""
