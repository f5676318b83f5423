"""Write the command-line reference, ``docs/cli-reference.md``, from the parsers themselves.

Usage::

    python scripts/cli_reference.py            # rewrite docs/cli-reference.md
    python scripts/cli_reference.py --check    # exit 1 when the file differs from the parsers

The page is every ``--help`` of ``gnn-dist`` (each verb), ``python -m gnn_dist.train`` and
``python -m gnn_dist.predict``, formatted at a fixed width, so that it cannot drift from the
code: ``tests/test_cli_reference.py`` fails when it does. The narrative (what each flag means
in depth, exit codes, examples) is ``docs/cli.md``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "cli-reference.md"
WIDTH = 100


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _help(parser: argparse.ArgumentParser) -> str:
    text = parser.format_help().rstrip()
    return "\n".join(line.rstrip() for line in text.splitlines())


def render() -> str:
    """The page's text (deterministic: fixed width, the parsers' order)."""
    os.environ["COLUMNS"] = str(WIDTH)   # argparse reads the width from COLUMNS
    sys.path.insert(0, str(ROOT))
    from gnn_dist import predict
    from gnn_dist.config_cli import build_parser as train_parser
    from gnn_dist_cli.command import build_parser as cli_parser

    cli = cli_parser()
    sections = [("gnn-dist", cli)]
    sections += [(f"gnn-dist {name}", sub) for name, sub in _subparsers(cli).items()]
    sections += [("python -m gnn_dist.train", train_parser()), ("python -m gnn_dist.predict", predict.build_parser())]
    lines = ["# Command-line reference", "",
             "Generated from the parsers by `python scripts/cli_reference.py`; do not edit by hand",
             "(`tests/test_cli_reference.py` fails when this page and the code differ). What the flags",
             "mean in depth, the exit codes and examples: [cli.md](cli.md).", ""]
    lines += [f"- [`{title}`](#{_anchor(title)})" for title, _ in sections]
    for title, parser in sections:
        lines += ["", f"## {title}", "", "```text", _help(parser), "```"]
    return "\n".join(lines) + "\n"


def _anchor(title: str) -> str:
    return "".join(c for c in title.lower().replace(" ", "-") if c.isalnum() or c in "-_")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="write docs/cli-reference.md from the parsers")
    p.add_argument("--check", action="store_true", help="exit 1 when the file differs from the parsers")
    args = p.parse_args(argv)
    text = render()
    if args.check:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT.relative_to(ROOT)} is out of date: run python scripts/cli_reference.py", file=sys.stderr)
            return 1
        return 0
    tmp = OUT.with_suffix(".md.tmp")
    tmp.write_text(text)
    os.replace(tmp, OUT)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
