"""What ``benchmarks/peers.py`` changes in PipeGCN's and BNS-GCN's code to run them beside gnn-dist.

The project holds none of their code: the user's checkout (``--pipegcn DIR``, ``--bnsgcn DIR``)
is copied to a temporary folder and these text substitutions are applied to the copy, each one
exactly as many times as stated (a checkout where a pattern is missing or found more often is
refused: the patch was written for other code). Every patch and its reason is listed in
docs/performance.md ("Against PipeGCN and BNS-GCN"). Torch-free, DGL-free.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Patch", "PATCHES", "PatchError", "patches_for", "apply_patches", "prepare_tree"]

HERE = Path(__file__).resolve().parent
HELPERS = ("peers_probe.py", "peers_cpu_shim.py", "peers_dgl.py")
"""The harness' own modules copied beside their ``main.py``."""

PIPEGCN, BNSGCN = "pipegcn", "bnsgcn"


class PatchError(ValueError):
    """A checkout the patches do not fit."""


@dataclass(frozen=True)
class Patch:
    peer: str
    """``pipegcn``, ``bnsgcn`` or ``both``."""
    files: tuple[str, ...]
    """Files of the checkout it edits; a ``*.py`` entry means every Python file."""
    old: str
    new: str
    reason: str
    cpu_only: bool = False
    count: int | None = 1
    """Occurrences per file it must find; None: at least one in all the files together."""


_LOADER = "if dataset == 'peers':\n        g = peer_graph()\n    elif dataset == 'reddit':"

PATCHES: tuple[Patch, ...] = (
    Patch("both", ("main.py",), "from helper.parser import *\n",
          "import peers_probe\nfrom peers_dgl import cpu_mode\nif cpu_mode():\n"
          "    import peers_cpu_shim\nfrom helper.parser import *\n",
          "the probe (per-step time, CPU, run-queue wait, RSS, bytes sent) and, on CPU, the CUDA "
          "stand-ins, in the launcher and in every spawned rank (spawn re-imports main.py)"),
    Patch(PIPEGCN, ("helper/utils.py",), "if dataset == 'reddit':", _LOADER,
          "the benchmark's graph as a dataset named `peers` (their loader knows four public datasets)"),
    Patch(BNSGCN, ("helper/utils.py",), "if args.dataset == 'reddit':",
          _LOADER.replace("dataset ==", "args.dataset =="),
          "the benchmark's graph as a dataset named `peers`"),
    Patch("both", ("helper/utils.py",), "import dgl\n", "import dgl\nfrom peers_dgl import peer_graph\n",
          "the `peers` loader's import"),
    Patch("both", ("helper/parser.py",), "choices=['layer', 'batch']", "choices=['layer', 'batch', 'none']",
          "`--norm none`: gnn-dist's GraphSAGE has no normalisation layer (their model code already "
          "takes `norm=None`)"),
    Patch("both", ("module/model.py",), "if norm is None:", "if norm is None or norm == 'none':",
          "`--norm none` reaches the model as the string in BNS-GCN (PipeGCN maps it to None itself)"),
    Patch(PIPEGCN, ("module/layer.py",), "fn.copy_src(src='h', out='m')", "fn.copy_u(u='h', out='m')",
          "DGL 2 removed `copy_src` (renamed `copy_u` in DGL 0.9)", count=2),
    Patch(PIPEGCN, ("train.py",), "fn.copy_src(src='h', out='m')", "fn.copy_u(u='h', out='m')",
          "DGL 2 removed `copy_src`"),
    Patch(PIPEGCN, ("train.py",), "'model/' + args.graph_name", "'checkpoint/' + args.graph_name",
          "the best model is saved into `model/`, a folder nothing creates (`checkpoint/` is created)"),
    Patch("both", ("*.py",), "'cuda'", "'cpu'",
          "device literals (`device='cuda'`, `.to(torch.device('cuda'))`): the tensors stay on the CPU",
          cpu_only=True, count=None),
    Patch("both", ("*.py",), "pin_memory=True", "pin_memory=False",
          "pinned host buffers need a CUDA device", cpu_only=True, count=None),
    Patch(PIPEGCN, ("helper/feature_buffer.py",), ".pin_memory()", "",
          "pinned host buffers need a CUDA device", cpu_only=True, count=4),
)


def patches_for(peer: str, device: str) -> list[Patch]:
    """The patches of ``peer`` (``pipegcn`` or ``bnsgcn``) on ``device`` (``cpu`` or ``cuda``)."""
    if peer not in (PIPEGCN, BNSGCN):
        raise PatchError(f"unknown peer {peer!r}: pipegcn or bnsgcn")
    return [p for p in PATCHES if p.peer in (peer, "both") and (device == "cpu" or not p.cpu_only)]


def _files(root: Path, pattern: str) -> list[Path]:
    if pattern == "*.py":
        return sorted(root.rglob("*.py"))
    path = root / pattern
    if not path.is_file():
        raise PatchError(f"{path}: missing; is this a checkout of the right project?")
    return [path]


def apply_patches(root: Path, patches: list[Patch]) -> list[str]:
    """Apply ``patches`` to the tree at ``root`` in place; one line per file changed."""
    done = []
    for patch in patches:
        files = _files(root, patch.files[0]) if len(patch.files) == 1 else \
            [f for pat in patch.files for f in _files(root, pat)]
        total = 0
        for path in files:
            text = path.read_text()
            found = text.count(patch.old)
            if patch.count is not None and found != patch.count:
                raise PatchError(f"{path}: {patch.old!r} found {found} times, the patch expects {patch.count} "
                                 f"({patch.reason}); this checkout differs from the one the harness was written for")
            if found:
                path.write_text(text.replace(patch.old, patch.new))
                done.append(f"{path.relative_to(root)}: {patch.old!r} -> {patch.new!r} x{found}")
            total += found
        if patch.count is None and not total:
            raise PatchError(f"{root}: {patch.old!r} found nowhere ({patch.reason})")
    return done


def prepare_tree(checkout: Path, dest: Path, peer: str, device: str) -> list[str]:
    """Copy ``checkout`` to ``dest`` (without ``.git``), patch it for ``device``, add the helpers."""
    if not (Path(checkout) / "main.py").is_file():
        raise PatchError(f"{checkout}: no main.py; pass the root of a {peer} checkout")
    shutil.copytree(checkout, dest, ignore=shutil.ignore_patterns(".git"))
    done = apply_patches(Path(dest), patches_for(peer, device))
    for name in HELPERS:
        shutil.copy2(HERE / name, Path(dest) / name)
    return done
