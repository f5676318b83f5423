"""Every code block of ``README.md`` and ``docs/*.md`` marked runnable runs as written.

A block is marked in its fence's info string: ```` ```python runnable ```` or ```` ```bash
runnable ````, optionally with ``ranks=N`` on a Python block (it then runs on N ranks, each
with the environment torchrun gives a rank: what ``torchrun --nproc-per-node N script.py``
would run), and ``inputs=NAME`` on a block that reads a user's own files (the README's
``edges.tsv.gz``, ``x.npy``, ``y.npy``): the test writes the sample set NAME of
:data:`SAMPLE_INPUTS` into the working folder before the block, as a user would have them. The
runnable blocks of one file run in order in one fresh working folder, so a block may use what an
earlier one wrote (a partition folder, an npy-dir) and must not clash with it (an output folder
written twice fails without ``--overwrite``, as it would for the user); each must exit 0. Python
blocks run in a fresh interpreter (``ranks=N``: on the harness ranks of ``tests/mp_utils.py``),
bash blocks under ``bash -euo pipefail`` with ``gnn-dist`` on the PATH (the tree's: ``python -m
gnn_dist_cli``; an installed console script may be an older install's). A block that needs a
download (a published dataset) or a GPU, or trains for minutes, is left unmarked.

Also: every Python block of ``README.md`` is marked runnable (its snippets are the first code a
user copies), so is every bash block that partitions or converts the README's own edge list,
and a fence's options are only the known ones.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from mp_utils import run_ranks
from train_helpers import command_dir, free_port, launch_env

pytestmark = pytest.mark.slow   # started first (tests/conftest.py): one test runs a whole file's blocks

ROOT = Path(__file__).resolve().parents[1]
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([A-Za-z0-9_+-]*)([^\n]*)\n(.*?)^```[ \t]*$", re.M | re.S)
LANGUAGES = ("python", "bash")
BLOCK_TIMEOUT_S = 180


def _edge_list_inputs(folder: Path) -> None:
    """A user's own graph as the README's partition lines read it: ``edges.tsv.gz`` (one
    ``src<TAB>dst`` line per edge, integer ids), ``x.npy`` (float32 features) and ``y.npy``
    (int class ids), rows in node-id order; 2,000 nodes of a small SBM, so it trains too."""
    import gzip

    from partitioners.synthetic import sbm_graph

    g = sbm_graph(num_nodes=2000, num_classes=4, feature_dim=16, community_size=250, seed=0)
    src, dst = g.edges()
    with gzip.open(folder / "edges.tsv.gz", "wt") as f:
        f.write("".join(f"{s}\t{d}\n" for s, d in zip(src.tolist(), dst.tolist())))
    np.save(folder / "x.npy", g.x)
    np.save(folder / "y.npy", g.y)


SAMPLE_INPUTS = {"edge-list": _edge_list_inputs}
"""``inputs=NAME`` -> the function that writes the sample set NAME into a folder."""


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    language: str
    runnable: bool
    ranks: int | None
    code: str
    inputs: str | None = None

    def where(self) -> str:
        return f"{_name(self.path)}:{self.line}"


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _block(path: Path, text: str, match: re.Match) -> Block:
    line = text.count("\n", 0, match.start()) + 1
    words = match.group(2).split()
    runnable = "runnable" in words
    ranks = inputs = None
    for word in words:
        if word == "runnable":
            continue
        key, _, value = word.partition("=")
        if key == "inputs" and value in SAMPLE_INPUTS:
            inputs = value
            continue
        if key != "ranks" or not value.isdigit() or int(value) < 1:
            raise AssertionError(f"{_name(path)}:{line}: unknown fence option {word!r} "
                                 f"(known: runnable, ranks=N, inputs={'|'.join(SAMPLE_INPUTS)})")
        ranks = int(value)
    if runnable and match.group(1) not in LANGUAGES:
        raise AssertionError(f"{_name(path)}:{line}: a runnable block must be one of {LANGUAGES}")
    if ranks is not None and (not runnable or match.group(1) != "python"):
        raise AssertionError(f"{_name(path)}:{line}: ranks=N is for runnable python blocks")
    if inputs is not None and not runnable:
        raise AssertionError(f"{_name(path)}:{line}: inputs=NAME is for runnable blocks")
    return Block(path, line, match.group(1), runnable, ranks, match.group(3), inputs)


def blocks(path: Path) -> list[Block]:
    text = path.read_text()
    return [_block(path, text, m) for m in FENCE.finditer(text)]


def _env() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    env["PATH"] = os.pathsep.join([command_dir(), str(Path(sys.executable).parent), env.get("PATH", "")])
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    return env


def _exec_on_rank(rank: int, world_size: int, code: str, cwd: str, port: int, where: str) -> None:
    launch_env(rank, world_size, port)
    os.chdir(cwd)
    exec(compile(code, where, "exec"), {"__name__": "__main__"})


def run_block(block: Block, cwd: Path, written: set[str] | None = None) -> None:
    """Run ``block`` in ``cwd``; first write its sample inputs unless ``written`` says they are there."""
    if block.inputs is not None and block.inputs not in (written if written is not None else set()):
        SAMPLE_INPUTS[block.inputs](cwd)
        if written is not None:
            written.add(block.inputs)
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
    written: set[str] = set()
    for block in blocks(path):  # in order, in one folder: as a user runs them from a fresh clone
        if block.runnable:
            run_block(block, tmp_path, written)


def test_every_python_block_of_the_readme_is_runnable():
    python = [b for b in blocks(ROOT / "README.md") if b.language == "python"]
    assert python, "README.md has Python snippets"
    assert [b.where() for b in python if not b.runnable] == []


def test_the_readme_partition_and_convert_lines_are_runnable():
    """The README's lines on the user's own edge list (in memory and out of core) run in order."""
    own = [b for b in blocks(ROOT / "README.md") if b.language == "bash" and "edges.tsv.gz" in b.code]
    assert own, "README.md partitions an edge list of the user's own"
    assert [b.where() for b in own if not (b.runnable and b.inputs == "edge-list")] == []
    assert any("gnn-dist convert" in b.code for b in own)


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
    doc.write_text("```bash inputs=edge-list\nls\n```\n")
    with pytest.raises(AssertionError, match="inputs=NAME is for runnable blocks"):
        blocks(doc)
    doc.write_text("```bash runnable inputs=nothing\nls\n```\n")
    with pytest.raises(AssertionError, match="unknown fence option 'inputs=nothing'"):
        blocks(doc)


def test_sample_inputs_are_written_once_before_the_first_block_that_needs_them(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("```bash runnable inputs=edge-list\nrm x.npy\n```\n"
                   "```bash runnable inputs=edge-list\ntest ! -e x.npy && test -s edges.tsv.gz\n```\n")
    work = tmp_path / "work"
    work.mkdir()
    written: set[str] = set()
    for block in blocks(doc):
        run_block(block, work, written)
    assert written == {"edge-list"} and np.load(work / "y.npy").shape == (2000,)
