"""The fast bytecode decoder gives what :mod:`dis` gives.

``_bytecode`` decodes a code object (every function, the first time it is interpreted) with
its own loop over ``co_code``, following dis's algorithm for the running Python on tables taken
from :mod:`dis` once. These tests compare it with the reference decoder built on
``dis.get_instructions``, instruction by instruction, over the code of standard library modules
and of snippets with the instructions that take the less common paths.
"""

from __future__ import annotations

import importlib
import math
import textwrap
import types
from typing import Any

import pytest

from thunder_interp import _bytecode

pytestmark = pytest.mark.skipif(
    _bytecode._TABLES is None, reason="dis lacks the tables of the fast decoder"
)

_MODULES = ["dis", "inspect", "dataclasses", "json.decoder", "asyncio.tasks", "enum", "argparse"]

_SNIPPETS = {
    "extended_arg": "def f():\n"
    + "".join(f"    x{i} = {i}\n" for i in range(300))
    + "    return x299\n",
    "jumps": """
        def f(xs):
            total = 0
            for x in xs:
                if x is None or not x:
                    continue
                while x > 3:
                    x -= 2
                total += x if x % 2 else -x
            return total
    """,
    "strings": """
        def f(a, b):
            return f"{a!r:>{b}} {a!s} {a!a} {b}"
    """,
    "closures": """
        def f(a):
            b = 1
            def g(c):
                nonlocal b
                b += c
                return a + b
            return g
    """,
    "classes": """
        class C(dict):
            def m(self, x):
                return super().m(x) + super().__len__()
    """,
    "generators": """
        def gen(xs):
            yield from xs
            x = yield 1
            return x

        async def coro(aw):
            async with aw as a:
                async for b in a:
                    await b
    """,
    "exceptions": """
        def f(g):
            try:
                g()
            except* ValueError as e:
                raise TypeError from e
            finally:
                g()
    """,
    "match": """
        def f(v):
            match v:
                case [1, *rest] if rest:
                    return rest
                case {"k": str() as s}:
                    return s
                case C(a=1) | None:
                    return 0
            return -1
    """,
    "comparisons": """
        def f(a, b):
            return a < b, a <= b, a == b, a != b, a > b, a >= b, a in b, a is not b
    """,
}


def _codes(code: types.CodeType) -> list[types.CodeType]:
    found = [code]
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found += _codes(const)
    return found


def _module_code(name: str) -> types.CodeType:
    module = importlib.import_module(name)
    assert module.__file__ is not None
    with open(module.__file__, encoding="utf-8") as source:
        return compile(source.read(), module.__file__, "exec")


def _same_value(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return type(a) is type(b) and a == b


def _assert_same_decoding(code: types.CodeType) -> None:
    fast = _bytecode._decode_fast(code)
    reference = _bytecode._decode_dis(code)
    assert fast.handlers == reference.handlers, code
    assert len(fast.instructions) == len(reference.instructions), code
    for ours, theirs in zip(fast.instructions, reference.instructions):
        where = f"{code.co_name} ({code.co_filename}) {theirs!r}"
        assert ours == theirs, where  # index, name, opcode, arg, offset, line, target
        assert _same_value(ours.argval, theirs.argval), where
        assert ours.argrepr == theirs.argrepr, where


@pytest.mark.parametrize("module", _MODULES)
def test_decodes_standard_library_code_as_dis(module: str) -> None:
    for code in _codes(_module_code(module)):
        _assert_same_decoding(code)


@pytest.mark.parametrize("name", sorted(_SNIPPETS))
def test_decodes_snippets_as_dis(name: str) -> None:
    source = textwrap.dedent(_SNIPPETS[name])
    try:
        module = compile(source, f"<{name}>", "exec")
    except SyntaxError:
        pytest.skip("syntax of a later Python")
    for code in _codes(module):
        _assert_same_decoding(code)


@pytest.mark.skipif(_bytecode.PY_VERSION < (3, 11), reason="BINARY_OP is 3.11+")
def test_binary_operators_are_named_without_dis() -> None:
    # Blocks and ops read BINARY_OP's operator from argrepr: decoded at once, not by dis later.
    code = compile("def f(a, b):\n    return a + b, a // b, a @ b\n", "<ops>", "exec")
    function = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    found = [
        ins._argrepr
        for ins in _bytecode._decode_fast(function).instructions
        if ins.opname == "BINARY_OP"
    ]
    assert found == ["+", "//", "@"]
