"""Every code block of ``README.md`` and ``docs/*.md`` marked runnable runs as written.

A block is marked in its fence's info string: ```` ```python runnable ```` or ```` ```bash
runnable ````, optionally with ``ranks=N`` on a Python block (it then runs on N ranks, each
with the environment torchrun gives a rank: what ``torchrun --nproc-per-node N script.py``
would run). The runnable blocks of one file run in order in one fresh working folder, so a
block may use what an earlier one wrote (a partition folder); each must exit 0. Python blocks
run in a fresh interpreter (``ranks=N``: on the harness ranks of ``tests/mp_utils.py``), bash
blocks under ``bash -euo pipefail`` with ``gnn-dist`` on the PATH.

Also: every Python block of ``README.md`` is marked runnable (its snippets are the first code a
user copies), and a fence's options are only the known ones.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from mp_utils import run_ranks
from train_helpers import free_port, launch_env

ROOT = Path(__file__).resolve().parents[1]
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([A-Za-z0-9_+-]*)([^\n]*)\n(.*?)^```[ \t]*$", re.M | re.S)
LANGUAGES = ("python", "bash")
BLOCK_TIMEOUT_S = 180


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    language: str
    runnable: bool
    ranks: int | None
    code: str

    def where(self) -> str:
        return f"{_name(self.path)}:{self.line}"


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _block(path: Path, text: str, match: re.Match) -> Block:
    line = text.count("\n", 0, match.start()) + 1
    words = match.group(2).split()
    runnable = "runnable" in words
    ranks = None
    for word in words:
        if word == "runnable":
            continue
        key, _, value = word.partition("=")
        if key != "ranks" or not value.isdigit() or int(value) < 1:
            raise AssertionError(f"{_name(path)}:{line}: unknown fence option {word!r} "
                                 f"(known: runnable, ranks=N)")
        ranks = int(value)
    if runnable and match.group(1) not in LANGUAGES:
        raise AssertionError(f"{_name(path)}:{line}: a runnable block must be one of {LANGUAGES}")
    if ranks is not None and (not runnable or match.group(1) != "python"):
        raise AssertionError(f"{_name(path)}:{line}: ranks=N is for runnable python blocks")
    return Block(path, line, match.group(1), runnable, ranks, match.group(3))


def blocks(path: Path) -> list[Block]:
    text = path.read_text()
    return [_block(path, text, m) for m in FENCE.finditer(text)]


def _env() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    return env


def _exec_on_rank(rank: int, world_size: int, code: str, cwd: str, port: int, where: str) -> None:
    launch_env(rank, world_size, port)
    os.chdir(cwd)
    exec(compile(code, where, "exec"), {"__name__": "__main__"})


def run_block(block: Block, cwd: Path) -> None:
    if block.ranks is not None:
        run_ranks(_exec_on_rank, block.ranks, block.code, str(cwd), free_port(), block.where(),
                  init_group=False, timeout=BLOCK_TIMEOUT_S)
        return
    cmd = ([sys.executable, "-c", block.code] if block.language == "python"
           else ["bash", "-euo", "pipefail", "-c", block.code])
    proc = subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S)
    assert proc.returncode == 0, (f"{block.where()} exited {proc.returncode}:\n{block.code}\n"
                                  f"--- stdout ---\n{proc.stdout[-3000:]}\n--- stderr ---\n{proc.stderr[-3000:]}")


RUNNABLE = [p for p in FILES if any(b.runnable for b in blocks(p))]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("path", RUNNABLE, ids=[str(p.relative_to(ROOT)) for p in RUNNABLE])
def test_runnable_blocks_run_as_written(path, tmp_path):
    for block in blocks(path):
        if block.runnable:
            run_block(block, tmp_path)


def test_every_python_block_of_the_readme_is_runnable():
    python = [b for b in blocks(ROOT / "README.md") if b.language == "python"]
    assert python, "README.md has Python snippets"
    assert [b.where() for b in python if not b.runnable] == []


def test_fence_options_are_checked(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("```python runnable rank=2\nprint(1)\n```\n")
    with pytest.raises(AssertionError, match="unknown fence option 'rank=2'"):
        blocks(doc)
    doc.write_text("```bash ranks=2\nls\n```\n")
    with pytest.raises(AssertionError, match="ranks=N is for runnable python blocks"):
        blocks(doc)
    doc.write_text("```python runnable ranks=2\nprint(1)\n```\n```text\nnot code\n```\n")
    assert [(b.runnable, b.ranks, b.code) for b in blocks(doc)] == [(True, 2, "print(1)\n"), (False, None, "not code\n")]
