"""Where one gnn-dist rank's epoch goes: ``gnn-dist train ... --import benchmarks/peers_profile.py``.

Rank 0 runs torch's profiler (CPU) over exactly one training step, the one after step
``$PEERS_PROFILE_STEP`` (default 3: numba compiled, caches warm), started and stopped by torch's
global optimizer-step hook, and writes its table of operators by self CPU time to
``$PEERS_PROFILE_OUT`` (default ``peers_profile.txt``). Used by ``benchmarks/peers.py``'s
reading of a pair where gnn-dist is behind (docs/performance.md); no effect without
``PEERS_PROFILE_OUT`` or on other ranks.
"""

from __future__ import annotations

import os

_OUT = os.environ.get("PEERS_PROFILE_OUT")
_state: dict = {"steps": 0, "prof": None}


def _after_step(*_args: object) -> None:
    import torch

    _state["steps"] += 1
    start = int(os.environ.get("PEERS_PROFILE_STEP", "3"))
    if _state["steps"] == start:
        _state["prof"] = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        _state["prof"].__enter__()
    elif _state["steps"] == start + 1 and _state["prof"] is not None:
        prof = _state["prof"]
        prof.__exit__(None, None, None)
        table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30)
        tmp = _OUT + ".tmp"
        with open(tmp, "w") as f:
            f.write(table)
        os.replace(tmp, _OUT)


if _OUT and os.environ.get("RANK", "0") == "0":
    from torch.optim.optimizer import register_optimizer_step_post_hook

    register_optimizer_step_post_hook(_after_step)
