"""A torchrun rank that trains as ``python -m gnn_dist.train`` does, then writes what its threads
are to ``METRICS.threads.RANK.json`` (``METRICS``: its ``--metrics`` file): the pools' sizes, OpenMP's wait policy, and how many of its threads
were runnable in each of a few samples taken after training (``test_rank_threads.py``).

    torchrun ... rank_threads_probe.py --metrics METRICS [gnn_dist.train flags...]
"""

from __future__ import annotations

import json
import os
import sys
import time

from gnn_dist import train   # first, as the real entry point: the thread defaults before torch

SAMPLES = 10


def probe() -> dict:
    """This rank's pools and its runnable threads now (the one that samples is one of them)."""
    import numba
    import torch

    from gnn_dist.run_queue import thread_states

    runnable = []
    for _ in range(SAMPLES):
        runnable.append(sum(t.runnable for t in thread_states()))
        time.sleep(0.01)
    return {"torch": torch.get_num_threads(), "interop": torch.get_num_interop_threads(),
            "numba_pool": numba.config.NUMBA_NUM_THREADS, "numba": numba.get_num_threads(),
            "wait_policy": os.environ.get("OMP_WAIT_POLICY"), "threads": len(thread_states()),
            "runnable": runnable}


def main() -> int:
    args = sys.argv[1:]
    code = train.main(args)
    with open(f"{args[args.index('--metrics') + 1]}.threads.{os.environ['RANK']}.json", "w") as f:
        json.dump(probe(), f)
    return code


if __name__ == "__main__":
    from partitioners.process_exit import exit_process

    exit_process(main())   # as gnn_dist.train's own __main__ ends
