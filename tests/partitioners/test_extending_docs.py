"""``docs/extending.md`` runs: every Python block marked ``<!-- runnable -->`` is executed, in
order, in one namespace, in an empty temporary folder, so the page cannot drift from the code.

The blocks register methods; the registry is restored afterwards so other tests see the
built-in methods only.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from partitioners.methods import registry

DOC = Path(__file__).resolve().parents[2] / "docs" / "extending.md"
_BLOCK = re.compile(r"^<!-- runnable -->\n```python\n(.*?)^```", re.S | re.M)


def runnable_blocks(text: str) -> list[tuple[int, str]]:
    """``(first line number, code)`` of each marked block, in document order."""
    return [(text[:m.start(1)].count("\n") + 1, m.group(1)) for m in _BLOCK.finditer(text)]


def run_blocks(blocks: list[tuple[int, str]]) -> dict:
    """Execute ``blocks`` in order in one fresh namespace, compiled with the doc's name and line
    numbers (so a failure points into the page); returns the namespace."""
    namespace: dict = {"__name__": "extending_md"}
    for line, code in blocks:
        exec(compile("\n" * (line - 1) + code, str(DOC), "exec"), namespace)
    return namespace


def test_the_doc_marks_its_examples():
    text = DOC.read_text()
    blocks = runnable_blocks(text)
    assert len(blocks) >= 4, "docs/extending.md lost its runnable examples"
    markers = [line for line in text.splitlines() if line.strip() == "<!-- runnable -->"]
    assert len(markers) == len(blocks), "a <!-- runnable --> marker is not right before a ```python fence"
    assert text.startswith("# Extending gnn-dist\n") and "\n## A new partition method\n" in text


def test_the_examples_run(tmp_path, monkeypatch, clean_registry):
    monkeypatch.chdir(tmp_path)
    run_blocks(runnable_blocks(DOC.read_text()))
    assert "bfs-chunks" in registry.method_names()
    assert (tmp_path / "parts" / "bfs-4-cli" / "partition.json").is_file()


def test_the_example_method_refuses_what_it_cannot_balance(tmp_path, monkeypatch, clean_registry):
    from partitioners.catalog import load_dataset
    from partitioners.methods import assign_parts

    monkeypatch.chdir(tmp_path)
    run_blocks(runnable_blocks(DOC.read_text())[:1])  # the registration only
    with pytest.raises(ValueError, match=r"method 'bfs-chunks' balances nodes only, not \['edges'\]"):
        assign_parts(load_dataset("sbm-tiny"), 4, "bfs-chunks", balance="edges")
