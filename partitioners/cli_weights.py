"""``gnn-dist partition``'s part sizes: ``--part-weights 2,1,1`` or ``--device-memory 40G,20G,20G``
(the weights in proportion to each rank's device memory), one value per part, exclusive.

Torch-free; the weights are checked against ``--parts`` before the graph is read, and a family
of cuts (``--parts 2,4``) is refused: the weights belong to one cut.
"""

from __future__ import annotations

import argparse

from .cli_args import UsageError, memory_list, weight_list

__all__ = ["add_weight_arguments", "resolve_part_weights"]


def add_weight_arguments(p: argparse.ArgumentParser) -> None:
    """Add ``--part-weights`` and ``--device-memory`` to the ``partition`` parser ``p``."""
    p.add_argument("--part-weights", type=weight_list, default=None, metavar="W,W,...",
                   help="size the parts to their devices: one positive weight per part (e.g. 2,1,1 gives part 0 "
                        "half of every --balance criterion); recorded in partition.json (default: equal parts)")
    p.add_argument("--device-memory", type=memory_list, default=None, metavar="SIZE,SIZE,...",
                   help="size the parts to their devices' memory: one size per part (e.g. 40G,20G,20G: part 0 "
                        "gets half), the --part-weights in proportion to them; excludes --part-weights")


def _flag(args: argparse.Namespace) -> tuple[str, str, int]:
    """The flag that gave the weights (with its value, for ``--part-weights``), what it gives, and
    how many."""
    if args.device_memory is not None:
        return "--device-memory", "size", len(args.device_memory)
    return f"--part-weights {','.join(f'{w:g}' for w in args.part_weights)}", "weight", len(args.part_weights)


def resolve_part_weights(args: argparse.Namespace, parts: list[int]) -> None:
    """Check the weights against ``parts`` (``--parts`` as given) and set ``args.part_weights``
    from ``--device-memory``; UsageError (exit 2) naming the flag and the fix."""
    if args.device_memory is not None and args.part_weights is not None:
        raise UsageError("--part-weights and --device-memory exclude each other: give one (--device-memory "
                         "sets the weights in proportion to the sizes)")
    if args.part_weights is None and args.device_memory is None:
        return
    flag, noun, given = _flag(args)
    counts = sorted(set(parts))
    if len(counts) > 1:
        raise UsageError(f"{flag.split()[0]} gives one {noun} per part of one cut; it does not apply to the family "
                         f"--parts {','.join(map(str, counts))}: partition each P on its own instead")
    if given != counts[0]:
        raise UsageError(f"{flag} gives {given} {noun}(s) for --parts {counts[0]}; give one per part")
    if args.device_memory is not None:
        args.part_weights = tuple(float(b) for b in args.device_memory)
