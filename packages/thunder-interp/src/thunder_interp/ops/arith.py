"""Arithmetic, comparisons, unary operators and truth tests."""

from __future__ import annotations

import operator
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from thunder_interp._bytecode import Instruction
from thunder_interp._frame import Frame
from thunder_interp._registry import (
    GOES_ON,
    PY_VERSION,
    CompileContext,
    Op,
    block_template,
    register_opcode,
)
from thunder_interp._slots import (
    FAST_CONTAINERS,
    FORMATTING_TEXT,
    MUTABLE_CONTAINERS,
    PLAIN,
    PLAIN_VALUES,
    binary,
    compare,
    contains,
    truth,
    unary,
)

if TYPE_CHECKING:
    from thunder_interp._blocks import BlockBuilder

_BINARY_SYMBOLS: dict[str, str] = {
    "+": "+",
    "&": "&",
    "//": "//",
    "<<": "<<",
    "@": "@",
    "*": "*",
    "%": "%",
    "|": "|",
    "**": "**",
    ">>": ">>",
    "-": "-",
    "/": "/",
    "^": "^",
}

_OPS_310: dict[str, str] = {
    "BINARY_ADD": "+",
    "BINARY_AND": "&",
    "BINARY_FLOOR_DIVIDE": "//",
    "BINARY_LSHIFT": "<<",
    "BINARY_MATRIX_MULTIPLY": "@",
    "BINARY_MULTIPLY": "*",
    "BINARY_MODULO": "%",
    "BINARY_OR": "|",
    "BINARY_POWER": "**",
    "BINARY_RSHIFT": ">>",
    "BINARY_SUBTRACT": "-",
    "BINARY_TRUE_DIVIDE": "/",
    "BINARY_XOR": "^",
    "INPLACE_ADD": "+=",
    "INPLACE_AND": "&=",
    "INPLACE_FLOOR_DIVIDE": "//=",
    "INPLACE_LSHIFT": "<<=",
    "INPLACE_MATRIX_MULTIPLY": "@=",
    "INPLACE_MULTIPLY": "*=",
    "INPLACE_MODULO": "%=",
    "INPLACE_OR": "|=",
    "INPLACE_POWER": "**=",
    "INPLACE_RSHIFT": ">>=",
    "INPLACE_SUBTRACT": "-=",
    "INPLACE_TRUE_DIVIDE": "/=",
    "INPLACE_XOR": "^=",
}

# ``text % values`` formats in C: ``binary`` calls it (an opaque call a caller sees).
_TEXT_TEST = " and type(a) not in FMT_TEXT"

_TEMPLATE_BINARY = """
def make(nxt, P, binary):
    def op(f):
        st = f.stack
        b = st.pop()
        a = st[-1]
        if type(a) in P and type(b) in P{text}:
            st[-1] = a {sym} b
        else:
            st[-1] = binary(f.rt, "{sym}", a, b)
        return nxt
    return op
"""

_TEMPLATE_INPLACE = """
def make(nxt, P, binary):
    def op(f):
        st = f.stack
        b = st.pop()
        a = st[-1]
        if type(a) in P and type(b) in P and type(a) not in MC{text}:
            a {sym}= b
        else:
            a = binary(f.rt, "{sym}=", a, b)
        st[-1] = a
        return nxt
    return op
"""


# Generated ops carry a file name inside the package, so tracebacks and frame walks skip them.
_GENERATED = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "<generated op>"
)


def _build_makers() -> dict[str, Callable[..., Op]]:
    makers: dict[str, Callable[..., Op]] = {}
    for sym in _BINARY_SYMBOLS:
        text = _TEXT_TEST if sym == "%" else ""
        for template, key in ((_TEMPLATE_BINARY, sym), (_TEMPLATE_INPLACE, sym + "=")):
            namespace: dict[str, Any] = {"MC": MUTABLE_CONTAINERS, "FMT_TEXT": FORMATTING_TEXT}
            exec(compile(template.format(sym=sym, text=text), _GENERATED, "exec"), namespace)
            makers[key] = namespace["make"]
    return makers


_MAKERS = _build_makers()


def _binary_symbol(ins: Instruction) -> str:
    """The operator of a binary instruction: ``+``, or ``+=`` for an in-place one."""
    return ins.argrepr if ins.opname == "BINARY_OP" else _OPS_310[ins.opname]


@register_opcode("BINARY_OP", min_version=(3, 11))
@register_opcode(*_OPS_310, max_version=(3, 10))
def binary_op(ins: Instruction, ctx: CompileContext) -> Op:
    return _MAKERS[_binary_symbol(ins)](ctx.next_index(ins), PLAIN, binary)


@block_template(
    binary_op, helpers={"binary": binary, "MC": MUTABLE_CONTAINERS, "FMT_TEXT": FORMATTING_TEXT}
)
def binary_op_block(block: BlockBuilder, ins: Instruction) -> int:
    sym = _binary_symbol(ins)
    b = block.pop()
    a = block.pop()
    plain = block.plain_test(a, b)
    if sym.rstrip("=") == "%":  # formatting text in C: ``binary`` calls it (see _TEXT_TEST)
        plain = f"{plain} and type({a}) not in FMT_TEXT"
    if sym.endswith("="):  # in place: ``a`` may change
        t = block.temp()
        block.emit(f"{t} = {a}")
        # ``l += x`` writes into the list: ``binary`` reports it (an opaque call)
        block.emit(f"if {plain} and type({t}) not in MC: {t} {sym} {b}")
        block.emit(f"else: {t} = binary(f.rt, {sym!r}, {t}, {b})")
        block.stack.append(t)
    else:
        block.push_expr(f"({a} {sym} {b} if {plain} else binary(f.rt, {sym!r}, {a}, {b}))")
    return GOES_ON


# Each unary operator: its symbol and its function on plain types (``unary`` computes the others).
_UNARY_OPERATORS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "UNARY_NEGATIVE": ("-", operator.neg),
    "UNARY_INVERT": ("~", operator.invert),
    "UNARY_POSITIVE": ("+", operator.pos),
}


@register_opcode("UNARY_NEGATIVE", "UNARY_INVERT")
@register_opcode("UNARY_POSITIVE", max_version=(3, 11))
def unary_op(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    symbol, native = _UNARY_OPERATORS[ins.opname]

    def op(f: Frame) -> int:
        st = f.stack
        v = st[-1]
        st[-1] = native(v) if type(v) in PLAIN else unary(f.rt, symbol, v)
        return nxt

    return op


@block_template(unary_op, helpers={"unary": unary})
def unary_op_block(block: BlockBuilder, ins: Instruction) -> int:
    symbol = _UNARY_OPERATORS[ins.opname][0]
    v = block.pop()
    block.push_expr(f"({symbol}{v} if type({v}) in P else unary(f.rt, {symbol!r}, {v}))")
    return GOES_ON


@register_opcode("UNARY_NOT")
@register_opcode("TO_BOOL", min_version=(3, 13))
def truth_op(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    negate = ins.opname == "UNARY_NOT"

    def op(f: Frame) -> int:
        st = f.stack
        v = st[-1]
        result = bool(v) if type(v) in PLAIN else truth(f.rt, v)
        st[-1] = not result if negate else result
        return nxt

    return op


@block_template(truth_op, helpers={"truth": truth})
def truth_op_block(block: BlockBuilder, ins: Instruction) -> int:
    v = block.pop()
    if ins.opname == "UNARY_NOT":
        block.push_expr(f"(not {v} if type({v}) in P else not truth(f.rt, {v}))")
    else:
        block.push_expr(f"(bool({v}) if type({v}) in P else truth(f.rt, {v}))")
    return GOES_ON


_COMPARE_TEMPLATE = """
def make(nxt, to_bool, P, compare, truth):
    if to_bool:
        def op_bool(f):
            st = f.stack
            b = st.pop()
            a = st[-1]
            if type(a) in P and type(b) in P:
                r = a {sym} b
            else:
                r = compare(f.rt, "{sym}", a, b)
            st[-1] = r if r is True or r is False else truth(f.rt, r)
            return nxt
        return op_bool
    def op(f):
        st = f.stack
        b = st.pop()
        a = st[-1]
        if type(a) in P and type(b) in P:
            st[-1] = a {sym} b
        else:
            st[-1] = compare(f.rt, "{sym}", a, b)
        return nxt
    return op
"""


def _build_compare() -> dict[str, Callable[..., Op]]:
    result: dict[str, Callable[..., Op]] = {}
    for sym in ("<", "<=", "==", "!=", ">", ">="):
        namespace: dict[str, Any] = {}
        exec(compile(_COMPARE_TEMPLATE.format(sym=sym), _GENERATED, "exec"), namespace)
        result[sym] = namespace["make"]
    return result


_COMPARE = _build_compare()


def _converts_to_bool(ins: Instruction) -> bool:
    """3.13: COMPARE_OP's result feeds a jump, and is made a bool first."""
    return PY_VERSION >= (3, 13) and bool(ins.arg & 16)


def _reports_identity(sym: str, hooked: bool) -> bool:
    """Hooked: == of instances of Python classes goes through compare, which reports identity
    (plain means ``PLAIN_VALUES`` then, not ``PLAIN``)."""
    return hooked and sym in ("==", "!=")


@register_opcode("COMPARE_OP")
def compare_op(ins: Instruction, ctx: CompileContext) -> Op:
    sym = str(ins.argval)
    plain = PLAIN_VALUES if _reports_identity(sym, ctx.hooked) else PLAIN
    return _COMPARE[sym](ctx.next_index(ins), _converts_to_bool(ins), plain, compare, truth)


class ComparedValues(NamedTuple):
    """A comparison a block just computed, which a conditional jump on its result may fuse
    with (``ops.control.pop_jump_block``)."""

    result: str
    left: str
    symbol: str
    right: str
    instruction: int  # the index of the COMPARE_OP
    first_line: int  # its lines in the block's body: ``body[first_line:end_line]``
    end_line: int


@block_template(compare_op, helpers={"compare": compare, "truth": truth})
def compare_op_block(block: BlockBuilder, ins: Instruction) -> int:
    b = block.pop()
    a = block.pop()
    sym = str(ins.argval)
    test = block.plain_test(a, b, types="PV" if _reports_identity(sym, block.hooked) else "P")
    first_line = len(block.body)
    t = block.push_expr(f"({a} {sym} {b} if {test} else compare(f.rt, {sym!r}, {a}, {b}))")
    if _converts_to_bool(ins):
        block.emit(f"if {t} is not True and {t} is not False: {t} = truth(f.rt, {t})")
    block.last_compare = ComparedValues(t, a, sym, b, ins.index, first_line, len(block.body))
    return GOES_ON


@register_opcode("IS_OP")
def is_op(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    invert = bool(ins.arg)

    if ctx.hooked and "compare_identity" in ctx.hooks:

        def op_hooked(f: Frame) -> int:
            st = f.stack
            b = st.pop()
            st[-1] = identical(f.rt, st[-1], b) is not invert
            return nxt

        return op_hooked

    def op(f: Frame) -> int:
        st = f.stack
        b = st.pop()
        st[-1] = (st[-1] is b) is not invert
        return nxt

    return op


def identical(rt: Any, a: Any, b: Any) -> bool:
    """``a is b``, reported to the ``compare_identity`` hook unless an operand is None (the
    hook may answer for values that stand for others: a binder's proxies)."""
    same = a is b
    hook = rt.cb_identity
    if hook is not None and a is not None and b is not None:
        answer = hook(a, b, same)
        if answer is not None:
            return bool(answer)
    return same


@block_template(is_op, helpers={"identical": identical})
def is_op_block(block: BlockBuilder, ins: Instruction) -> int:
    b = block.pop()
    a = block.pop()
    if block.hooked and "compare_identity" in block.hooks:
        block.push_expr(f"(identical(f.rt, {a}, {b}) is not {bool(ins.arg)})")
    else:
        block.push_expr(f"{a} is {'not ' if ins.arg else ''}{b}")
    return GOES_ON


@register_opcode("CONTAINS_OP")
def contains_op(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    invert = bool(ins.arg)
    # Hooked: an instance of a Python class may be in a set by identity, which is reported.
    plain = PLAIN_VALUES if "identity_used" in ctx.hooks else PLAIN

    def op(f: Frame) -> int:
        st = f.stack
        container = st.pop()
        item = st[-1]
        if type(container) in FAST_CONTAINERS and type(item) in plain:
            st[-1] = (item in container) is not invert
        else:
            st[-1] = contains(f.rt, item, container) is not invert
        return nxt

    return op


@block_template(contains_op, helpers={"FC": FAST_CONTAINERS, "contains": contains})
def contains_op_block(block: BlockBuilder, ins: Instruction) -> int:
    container = block.pop()
    item = block.pop()
    plain = "PV" if "identity_used" in block.hooks else "P"
    block.push_expr(
        f"({item} in {container} if type({container}) in FC and type({item}) in {plain}"
        f" else contains(f.rt, {item}, {container})){' is False' if ins.arg else ''}"
    )
    return GOES_ON
