"""An opcode's behaviour is written in one place: its handler and its block template sit in the
same ``ops`` module, and each opcode table is declared once."""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

import thunder_interp
from thunder_interp import DEFAULT_OPCODE_TABLE
from thunder_interp._registry import BLOCK_TEMPLATES

_PACKAGE = Path(thunder_interp.__file__).parent


def test_every_block_template_sits_next_to_its_opcodes_handler() -> None:
    assert BLOCK_TEMPLATES, "no opcode compiles into blocks"
    misplaced = {
        name: (template.__module__, getattr(DEFAULT_OPCODE_TABLE.get(name), "__module__", None))
        for name, template in BLOCK_TEMPLATES.items()
        if name not in DEFAULT_OPCODE_TABLE
        or template.__module__ != DEFAULT_OPCODE_TABLE[name].__module__
        or not template.__module__.startswith("thunder_interp.ops.")
    }
    assert misplaced == {}


# A string that may name an opcode (of any supported Python): ``NOP``, ``BINARY_ADD``...
_OPCODE_LIKE = re.compile(r"^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$")


def _opcode_tables() -> list[tuple[str, frozenset[str]]]:
    """Every literal dict, set, list or tuple of the package that lists three or more
    opcode-like names, with where it is."""
    tables = []
    for path in sorted(_PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Dict):
                items: list[ast.expr | None] = list(node.keys)
            elif isinstance(node, (ast.Set, ast.List, ast.Tuple)):
                items = list(node.elts)
            else:
                continue
            names = frozenset(
                item.value
                for item in items
                if isinstance(item, ast.Constant)
                and isinstance(item.value, str)
                and len(item.value) > 2
                and _OPCODE_LIKE.match(item.value)
            )
            if len(names) >= 3:
                tables.append((f"{path.relative_to(_PACKAGE)}:{node.lineno}", names))
    return tables


def test_each_opcode_table_is_declared_once() -> None:
    # A table restated elsewhere (the block compiler's own list of the 3.10 binary opcodes, of
    # the conditional jumps, of the no-ops) is one more place to keep in step with the handlers.
    tables = _opcode_tables()
    assert len(tables) >= 3  # the scan finds the tables that exist
    restated = [
        (where_a, where_b)
        for (where_a, a), (where_b, b) in itertools.combinations(tables, 2)
        if a <= b or b <= a
    ]
    assert restated == []
