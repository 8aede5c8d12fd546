"""The docs say what the code does, where a test can tell: the files they name exist, the
binder's modules are all listed, and the default executors they quote are the code's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import thunder

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "docs" / "DESIGN.md", ROOT / "README.md", *sorted(ROOT.glob("packages/*/README.md"))]
SOURCES = sorted(ROOT.glob("packages/*/src/**/*.py"))
# Files of other projects that DESIGN.md names as examples to follow.
OTHER_PROJECTS_FILES = {"lax.py", "symbolic.py"}


def _project_files() -> list[str]:
    skip = (".git", ".venv", ".venvs", "__pycache__", "node_modules")
    return [
        p.relative_to(ROOT).as_posix()
        for p in ROOT.rglob("*")
        if p.is_file() and not any(part in skip for part in p.parts)
    ]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_named_files_exist(doc: Path) -> None:
    files = _project_files()
    missing = []
    for match in re.finditer(r"`([\w./-]+\.(?:py|toml|md|txt|cfg))(?::[\w.]+)?`", doc.read_text()):
        path = match.group(1)
        if path in OTHER_PROJECTS_FILES:
            continue
        if not any(f == path or f.endswith("/" + path) for f in files):
            missing.append(path)
    assert not missing, f"{doc.name} names files that do not exist: {missing}"


def test_every_binder_module_is_described() -> None:
    design = (ROOT / "docs" / "DESIGN.md").read_text()
    readme = (ROOT / "packages" / "thunder" / "README.md").read_text()
    modules = sorted(
        p.stem
        for p in (ROOT / "packages/thunder/src/thunder/binding").glob("*.py")
        if p.stem != "__init__"
    )
    assert modules
    assert [m for m in modules if f"binding/{m}.py" not in design] == []
    assert [m for m in modules if f"`{m}`" not in readme] == []


def _quoted_defaults(text: str) -> list[tuple[str, ...]]:
    """Every ``DEFAULT_EXECUTORS`` followed closely by a tuple of quoted names."""
    found = []
    for match in re.finditer(r"DEFAULT_EXECUTORS\W{0,12}[=:]\W{0,8}\(([^)]*)\)", text):
        found.append(tuple(re.findall(r"[\"']([\w]+)[\"']", match.group(1))))
    return found


def test_quoted_default_executors_are_the_code_ones() -> None:
    quoted = []
    for path in [*DOCS, *SOURCES]:
        quoted += [(path.name, q) for q in _quoted_defaults(path.read_text())]
    assert quoted, "the docs quote DEFAULT_EXECUTORS somewhere"
    wrong = [(name, q) for name, q in quoted if q != tuple(thunder.DEFAULT_EXECUTORS)]
    assert wrong == []


def test_executor_docstrings_say_whether_they_are_default() -> None:
    """A module docstring that opens with 'The "name" executor' and says whether it is in the
    default list says it truly."""
    checked = 0
    for path in sorted(ROOT.glob("packages/thunder-executors/src/thunder_executors/*.py")):
        text = path.read_text()
        opening = re.match(r'"""The "(\w+)" executor', text)
        doc_end = text.find('"""', 3)
        if opening is None or doc_end < 0:
            continue
        name, doc = opening.group(1), " ".join(text[:doc_end].split())
        if re.search(r"not (?:in|part of) the default executor", doc):
            assert name not in thunder.DEFAULT_EXECUTORS, path.name
            checked += 1
        elif re.search(r"(?:in|part of) the default executor", doc):
            assert name in thunder.DEFAULT_EXECUTORS, path.name
            checked += 1
    assert checked, "no executor docstring says whether it is a default one"
