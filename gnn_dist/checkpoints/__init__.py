"""Training checkpoints, one concept a module:

- :mod:`.format`: the format's constants, the names of its files and :class:`CheckpointError`;
- :mod:`.files`: the folder on disk (the module docstring describes it): writing, finding,
  reading, verifying and parsing the main file and the rank files, retention;
- :mod:`.state`: what a state holds (the RNG states) and the checks of a loaded one
  (:func:`check_state`);
- :mod:`.resume`: the checks of a checkpoint against the run that resumes it;
- :mod:`.manager`: the trainer's :class:`CheckpointManager` (save, retention, resume: collectives)
  and a job's hold on its folder (:func:`hold_checkpoint_dir`).
"""

from .files import (checkpoint_epochs, checkpoint_path, latest_checkpoint, load_checkpoint, load_rank_state,
                    parse_checkpoint, prune_checkpoints, rank_state_path, read_checkpoint, remove_partial_writes,
                    resolve_pointer, save_checkpoint, save_rank_state)
from .format import CHECKPOINT_FORMAT, CHECKPOINT_VERSION, RANK_STATE_FORMAT, REQUIRED_KEYS, CheckpointError
from .manager import CheckpointManager, hold_checkpoint_dir
from .resume import check_applies, check_fits, check_resume, model_info
from .state import rng_state, set_rng_state

__all__ = ["CheckpointError", "CHECKPOINT_FORMAT", "CHECKPOINT_VERSION", "REQUIRED_KEYS", "checkpoint_path",
           "save_checkpoint", "load_checkpoint", "latest_checkpoint", "rng_state", "set_rng_state",
           "RANK_STATE_FORMAT", "rank_state_path", "save_rank_state", "load_rank_state", "checkpoint_epochs",
           "prune_checkpoints", "remove_partial_writes", "resolve_pointer", "read_checkpoint", "parse_checkpoint",
           "CheckpointManager", "hold_checkpoint_dir", "model_info", "check_fits", "check_resume", "check_applies"]
