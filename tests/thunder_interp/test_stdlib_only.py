"""thunder_interp imports nothing but the standard library (and itself)."""

from __future__ import annotations

import ast
import pathlib
import sys

import thunder_interp

PACKAGE_DIR = pathlib.Path(thunder_interp.__file__).parent


def _imported_modules(path: pathlib.Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def test_every_import_is_stdlib_or_thunder_interp() -> None:
    files = sorted(PACKAGE_DIR.rglob("*.py"))
    assert files
    offenders = []
    for path in files:
        for name in _imported_modules(path):
            top = name.split(".")[0]
            if top == "thunder_interp" or top in sys.stdlib_module_names or top == "__future__":
                continue
            offenders.append(f"{path.relative_to(PACKAGE_DIR)}: {name}")
    assert offenders == []


def test_package_declares_no_dependencies() -> None:
    pyproject = PACKAGE_DIR.parents[1] / "pyproject.toml"
    text = pyproject.read_text()
    assert "dependencies = []" in text
