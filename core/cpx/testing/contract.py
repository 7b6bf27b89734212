"""The plugin contract as a check a plugin's own tests can run: which imports reach past the API.

A plugin imports only the public modules; everything else in ``cpx`` is private and may change.
"""

from __future__ import annotations

import ast
from pathlib import Path

PUBLIC_MODULES = frozenset({"cpx", "cpx.dag", "cpx.xds", "cpx.testing", "cpx.testing.strategies"})


def _imported(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def private_imports(package: Path) -> list[str]:
    """``"<file>: <module>"`` for every import of a private cpx module under ``package``."""
    return sorted(
        f"{path.relative_to(package.parent)}: {module}"
        for path in package.rglob("*.py")
        for module in _imported(path)
        if (module == "cpx" or module.startswith("cpx.")) and module not in PUBLIC_MODULES
    )
