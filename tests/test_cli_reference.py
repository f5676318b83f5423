"""``docs/cli-reference.md`` is what the parsers print: regenerated, it is the same page.

It is every ``--help`` of ``gnn-dist`` and its verbs, ``gnn_dist.train`` and ``gnn_dist.predict``
(``scripts/cli_reference.py``); a flag added, renamed or re-documented in the code without
rerunning the script fails here, naming the command that fixes it. The check runs the script in
a fresh interpreter: the registries (models, schedules) that fill the flags' choices hold only
the built-ins there, not what other tests registered in this one.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "cli_reference.py"


def _script():
    spec = importlib.util.spec_from_file_location("cli_reference", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_is_the_parsers_help():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--check"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    page = (ROOT / "docs" / "cli-reference.md").read_text()
    for command in ("## gnn-dist partition", "## gnn-dist train", "## python -m gnn_dist.train",
                    "## python -m gnn_dist.predict"):
        assert command in page
    assert "--epochs" in page and "--parts" in page


def test_check_mode_reports_drift(tmp_path, monkeypatch):
    module = _script()
    monkeypatch.setattr(module, "render", lambda: "the parsers' page\n")
    monkeypatch.setattr(module, "OUT", tmp_path / "cli-reference.md")
    monkeypatch.setattr(module, "ROOT", tmp_path)
    (tmp_path / "cli-reference.md").write_text("stale\n")
    assert module.main(["--check"]) == 1
    assert module.main([]) == 0 and module.main(["--check"]) == 0
    assert (tmp_path / "cli-reference.md").read_text() == "the parsers' page\n"
