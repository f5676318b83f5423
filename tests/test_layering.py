"""docs/architecture.md's claims about imports hold: the packages import only the ones before them
(``partitioners`` < ``gnn_dist`` < ``gnn_dist_cli``, the command importing ``gnn_dist`` inside
functions only), and "each layer imports only the ones above it in this table" (the ``gnn_dist/``
table, read from the page): no module of a row imports, at module level or inside a function, a
module of a row below it. The config's one-time load of the built-in components is by name
(``importlib``), not an import, and is not counted."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def table_order() -> dict[str, int]:
    """``{top-level module or package of gnn_dist: its row}`` from the architecture page's table."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    table = text[text.index("Each layer imports only the ones above it in this table."):]
    table = table[:table.index("\n## ")]
    order: dict[str, int] = {}
    for row, line in enumerate(line for line in table.splitlines() if line.startswith("| `")):
        first = line.split("|")[1]
        for name in re.findall(r"`([^`]+)`", first):
            order[name.removesuffix(".py").removesuffix("/")] = row
    return order


def imports_of(path: Path) -> set[str]:
    """The top-level gnn_dist modules ``path`` imports (relative or absolute, anywhere in it)."""
    parts = path.relative_to(ROOT / "gnn_dist").with_suffix("").parts
    package = ["gnn_dist", *parts[:-1]]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            module = package[:len(package) - node.level + 1] + (node.module.split(".") if node.module else [])
        elif node.module and node.module.split(".")[0] == "gnn_dist":
            module = node.module.split(".")
        else:
            continue
        out |= {alias.name for alias in node.names} if len(module) < 2 else {module[1]}
    return out


def test_each_layer_imports_only_the_ones_above_it():
    order = table_order()
    assert {"environ", "config", "models", "trainer", "train", "predict"} <= set(order)
    wrong = []
    for path in sorted((ROOT / "gnn_dist").rglob("*.py")):
        me = path.relative_to(ROOT / "gnn_dist").parts[0].removesuffix(".py")
        if me not in order:
            continue
        for target in imports_of(path) & set(order):
            if order[target] > order[me]:
                wrong.append(f"{path.relative_to(ROOT)} imports {target} (a row below {me})")
    assert not wrong, "\n".join(wrong)


PACKAGES = ("partitioners", "gnn_dist", "gnn_dist_cli")
"""The top-level packages, each importing only the ones before it."""


def package_imports(path: Path) -> list[tuple[str, bool]]:
    """``(top-level package, at module level?)`` of each absolute import in ``path``."""
    tree = ast.parse(path.read_text())
    top_level = {id(node) for node in tree.body}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.append((node.module.split(".")[0], id(node) in top_level))
        elif isinstance(node, ast.Import):
            out += [(alias.name.split(".")[0], id(node) in top_level) for alias in node.names]
    return out


def test_packages_import_only_the_ones_before_them():
    wrong = []
    for rank, package in enumerate(PACKAGES):
        for path in sorted((ROOT / package).rglob("*.py")):
            for target, module_level in package_imports(path):
                if target in PACKAGES[rank + 1:]:
                    wrong.append(f"{path.relative_to(ROOT)} imports {target} (a package after {package})")
                elif package == "gnn_dist_cli" and target == "gnn_dist" and module_level:
                    wrong.append(f"{path.relative_to(ROOT)} imports gnn_dist at module level (the command "
                                 f"imports it inside functions, to stay torch-free at import)")
    assert not wrong, "\n".join(wrong)
