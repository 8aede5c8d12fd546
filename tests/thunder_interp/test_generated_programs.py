"""Differential tests on generated programs: hypothesis builds small random functions (integer
arithmetic over a few variables, if/elif/else, bounded while loops, for over ranges, break and
continue, a nested function reading the enclosing variables, try/except around divisions that may
divide by zero), renders them to source, and the harness compares ``interpret`` with CPython.

Values are kept small by reducing every assigned value modulo a prime, so big integers appear only
transiently inside one expression. Loops are bounded: ``while`` loops carry a counter, ``for`` loops
run over ``range`` of at most 5.
"""

from __future__ import annotations

from conformance import assert_ok
from hypothesis import given
from hypothesis import strategies as st

PARAMS = ("a", "b", "c")
MODULUS = 20011  # assignments are reduced into [-10005, 10005]
MAX_DEPTH = 3  # statement nesting

small_ints = st.integers(min_value=-12, max_value=40)
argument_ints = st.integers(min_value=-50, max_value=50) | st.sampled_from(
    [0, 1, -1, 2**40, -(3**30)]
)


@st.composite
def expressions(draw, names: tuple[str, ...], depth: int = 3, calls: bool = False) -> str:
    """An integer (or bool) valued expression over ``names``."""
    if depth <= 0 or draw(st.integers(0, 9)) < 2:
        if draw(st.booleans()):
            return draw(st.sampled_from(names))
        value = draw(small_ints)
        return f"({value})" if value < 0 else str(value)
    sub = expressions(names, depth - 1, calls)
    kind = draw(
        st.sampled_from(
            ["arith"] * 5
            + [
                "div",
                "pow",
                "bits",
                "shift",
                "unary",
                "compare",
                "chain",
                "bool",
                "ifexp",
                "builtin",
            ]
            + (["call"] if calls else [])
        )
    )
    left, right = draw(sub), draw(sub)
    if kind == "arith":
        op = draw(st.sampled_from(["+", "-", "*"]))
        return f"({left} {op} {right})"
    if kind == "div":
        op = draw(st.sampled_from(["//", "%"]))
        return f"({left} {op} {right})"
    if kind == "pow":
        return f"({left} ** ({right} % 4))"
    if kind == "bits":
        op = draw(st.sampled_from(["&", "|", "^"]))
        return f"({left} {op} {right})"
    if kind == "shift":
        op = draw(st.sampled_from(["<<", ">>"]))
        return f"({left} {op} ({right} % 9))"
    if kind == "unary":
        op = draw(st.sampled_from(["-", "~", "not ", "+", "abs"]))
        if op == "~":  # ~ on a bool is deprecated since 3.12: make it an int first
            return f"(~({left} + 0))"
        return f"abs({left})" if op == "abs" else f"({op}{left})"
    if kind == "compare":
        op = draw(st.sampled_from(["<", "<=", ">", ">=", "==", "!="]))
        return f"({left} {op} {right})"
    if kind == "chain":
        op1, op2 = draw(st.sampled_from(["<", "<=", "!="])), draw(st.sampled_from(["<", ">", "=="]))
        return f"({left} {op1} {right} {op2} {draw(sub)})"
    if kind == "bool":
        op = draw(st.sampled_from(["and", "or"]))
        return f"({left} {op} {right})"
    if kind == "ifexp":
        return f"({left} if {draw(sub)} else {right})"
    if kind == "builtin":
        fn = draw(st.sampled_from(["min", "max"]))
        return f"{fn}({left}, {right})"
    return f"g({left})"


def _indent(lines: list[str]) -> list[str]:
    return ["    " + line for line in lines]


class _Counter:
    """Fresh names for loop counters and loop variables within one program."""

    def __init__(self) -> None:
        self.n = 0

    def next(self) -> int:
        self.n += 1
        return self.n


@st.composite
def blocks(draw, names: tuple[str, ...], depth: int, in_loop: bool, counter: _Counter) -> list[str]:
    count = draw(st.integers(1, 3 if depth < MAX_DEPTH else 4))
    lines: list[str] = []
    for _ in range(count):
        lines += draw(statements(names, depth, in_loop, counter))
    return lines


@st.composite
def statements(
    draw, names: tuple[str, ...], depth: int, in_loop: bool, counter: _Counter
) -> list[str]:
    expr = expressions(names, 3, calls=True)
    simple = ["assign", "assign", "augassign", "append", "print"]
    compound = ["if", "while", "for", "try"] if depth > 0 else []
    jumps = ["break", "continue"] if in_loop else []
    kind = draw(st.sampled_from(simple + compound * 2 + jumps + ["return"]))
    target = draw(st.sampled_from(PARAMS))
    if kind == "assign":
        return [f"{target} = ({draw(expr)}) % {MODULUS} - {MODULUS // 2}"]
    if kind == "augassign":
        op = draw(st.sampled_from(["+=", "-=", "*=", "^=", "|=", "&=", "//=", "%="]))
        return [f"{target} {op} {draw(expr)}", f"{target} = {target} % {MODULUS} - {MODULUS // 2}"]
    if kind == "append":
        return [f"out.append({draw(expr)})"]
    if kind == "print":
        return [f"print({draw(expr)}, {draw(st.sampled_from(names))})"]
    if kind == "return":
        return [f"if {draw(expr)}:", "    return ('early', a, b, c, out)"]
    if kind in ("break", "continue"):
        return [f"if {draw(expr)}:", f"    {kind}"]
    body = lambda names=names, in_loop=in_loop: blocks(names, depth - 1, in_loop, counter)  # noqa: E731
    if kind == "if":
        lines = [f"if {draw(expr)}:", *_indent(draw(body()))]
        for _ in range(draw(st.integers(0, 2))):
            lines += [f"elif {draw(expr)}:", *_indent(draw(body()))]
        if draw(st.booleans()):
            lines += ["else:", *_indent(draw(body()))]
        return lines
    if kind == "while":
        n = counter.next()
        limit = draw(st.integers(1, 5))
        lines = [
            f"w{n} = 0",
            f"while ({draw(expr)}) and w{n} < {limit}:",
            f"    w{n} += 1",
            *_indent(draw(body(in_loop=True))),
        ]
        if draw(st.booleans()):
            lines += ["else:", "    out.append('while-else')"]
        return lines
    if kind == "for":
        n = counter.next()
        loop_names = (*names, f"i{n}")
        lines = [
            f"for i{n} in range({draw(expr)} % 6):",
            *_indent(draw(body(names=loop_names, in_loop=True))),
        ]
        if draw(st.booleans()):
            lines += ["else:", f"    out.append(('for-else', {n}))"]
        return lines
    # try/except around divisions by values that may be zero
    left, right = draw(expr), draw(expressions(names, 1))
    op = draw(st.sampled_from(["//", "%", "/"]))
    lines = [
        "try:",
        f"    {target} = int({left} {op} {right}) % {MODULUS}",
        *_indent(draw(body())),
        "except ZeroDivisionError as e:",
        "    out.append(('zde', str(e)))",
    ]
    if draw(st.booleans()):
        lines += ["else:", "    out.append('no error')"]
    if draw(st.booleans()):
        lines += ["finally:", f"    out.append(('finally', {target}))"]
    return lines


@st.composite
def programs(draw) -> str:
    counter = _Counter()
    helper = draw(expressions(("x", *PARAMS), 2))
    body = draw(blocks(PARAMS, MAX_DEPTH, False, counter))
    lines = [
        "def f(a, b, c):",
        "    out = []",
        "    def g(x):",
        f"        return ({helper}) % {MODULUS}",
        *_indent(body),
        "    return a, b, c, out",
    ]
    return "\n".join(lines) + "\n"


@st.composite
def expression_programs(draw) -> str:
    return f"def f(a, b, c):\n    return {draw(expressions(PARAMS, 4))}\n"


@given(source=expression_programs(), args=st.tuples(argument_ints, argument_ints, argument_ints))
def test_generated_expressions(source, args):
    assert_ok(source, *args, _name="generated expression")


@given(source=programs(), args=st.tuples(argument_ints, argument_ints, argument_ints))
def test_generated_programs(source, args):
    assert_ok(source, *args, _name="generated program")
