"""What the docs name is there after a plain ``import thunder``: every ``thunder.x.y`` the READMEs
and DESIGN.md name resolves (submodules load on first use), ``import thunder`` imports none of
the optional dependencies, and ``help(thunder.jit)`` lists every option."""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import thunder
from thunder.options import KNOWN_COMPILE_OPTIONS

ROOT = Path(__file__).resolve().parents[2]
DOCS = [
    ROOT / "README.md",
    ROOT / "packages" / "thunder" / "README.md",
    ROOT / "docs" / "DESIGN.md",
]
# Imported by thunder only where they are used (recipes, executors, tools of other projects).
OPTIONAL = ["transformers", "accelerate", "bitsandbytes", "triton", "nvfuser", "tensorboard"]


def _named_in_docs() -> list[str]:
    names: set[str] = set()
    for doc in DOCS:
        names |= set(re.findall(r"\bthunder(?:\.[A-Za-z_]\w*)+", doc.read_text()))
    return sorted(names)


def _fresh_python(code: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_every_name_the_docs_give_resolves_after_import_thunder() -> None:
    names = _named_in_docs()
    assert "thunder.distributed.ddp" in names and "thunder.recipes.Quantize" in names
    code = f"""
import functools, json, sys
import thunder
optional = {OPTIONAL!r}
at_import = [m for m in optional if m in sys.modules]
missing = []
for name in {names!r}:
    try:
        functools.reduce(getattr, name.split(".")[1:], thunder)
    except AttributeError as e:
        missing.append(f"{{name}}: {{e}}")
after = [m for m in optional if m in sys.modules]
print(json.dumps({{"missing": missing, "at_import": at_import, "after": after}}))
"""
    result = _fresh_python(code)
    assert result == {"missing": [], "at_import": [], "after": []}


def test_jit_of_ddp_after_a_bare_import() -> None:
    # the README's line, in a process that imported nothing but thunder
    code = """
import json, sys
import thunder
fn = thunder.distributed.ddp
print(json.dumps({"ok": callable(fn), "in_dir": "distributed" in dir(thunder)}))
"""
    assert _fresh_python(code) == {"ok": True, "in_dir": True}


def test_unknown_attributes_and_private_names_still_raise() -> None:
    with pytest.raises(AttributeError, match="no attribute 'no_such_thing'"):
        _ = thunder.no_such_thing  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        _ = thunder._private_helper_that_is_not_there  # type: ignore[attr-defined]
    assert not hasattr(thunder, "nonexistent_module")
    assert thunder.models.GPT is not None  # type: ignore[attr-defined]
    assert {"distributed", "models", "recipes", "jit"} <= set(dir(thunder))


def _jit_options() -> set[str]:
    keyword_only = {
        name
        for name, p in inspect.signature(thunder.jit).parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    }
    return keyword_only | set(KNOWN_COMPILE_OPTIONS)


def test_help_of_jit_lists_every_option() -> None:
    doc = thunder.jit.__doc__ or ""
    options = _jit_options()
    assert {"cache", "executors", "recompile_limit", "reshape_inplace"} <= options
    missing = sorted(o for o in options if not re.search(rf"\b{o}\b", doc))
    assert missing == [], f"thunder.jit's docstring does not name {missing}"
    for cache in thunder.CACHE_OPTIONS:
        assert f'"{cache.value}"' in doc
    for edge in thunder.SHARP_EDGES_OPTIONS:
        assert f'"{edge.value}"' in doc


def test_the_options_the_readmes_list_are_the_jits() -> None:
    # the keywords of thunder.jit(...) in the READMEs exist; the package README names them all
    options = _jit_options()
    listed: set[str] = set()
    for doc in DOCS[:2]:
        for call in re.findall(r"thunder\.jit\(([^)]*)\)", doc.read_text()):
            listed |= set(re.findall(r"(\w+)=", call))
    assert {"cache", "executors", "lookasides"} <= listed
    assert sorted(listed - options) == []
    reference = DOCS[1].read_text()
    assert [
        o for o in sorted(options) if f"`{o}`" not in reference and f"{o}=" not in reference
    ] == []
