"""Arithmetic, comparisons, unary operators and truth tests."""

from __future__ import annotations

import operator
import os
from collections.abc import Callable
from typing import Any

from thunder_interp._bytecode import Instruction
from thunder_interp._frame import Frame
from thunder_interp._registry import PY_VERSION, CompileContext, Op, register_opcode
from thunder_interp._slots import (
    FAST_CONTAINERS,
    PLAIN,
    PLAIN_VALUES,
    binary,
    compare,
    contains,
    truth,
    unary,
)

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

_TEMPLATE_BINARY = """
def make(nxt, P, binary):
    def op(f):
        st = f.stack
        b = st.pop()
        a = st[-1]
        if type(a) in P and type(b) in P:
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
        if type(a) in P and type(b) in P:
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
        for template, key in ((_TEMPLATE_BINARY, sym), (_TEMPLATE_INPLACE, sym + "=")):
            namespace: dict[str, Any] = {}
            exec(compile(template.format(sym=sym), _GENERATED, "exec"), namespace)
            makers[key] = namespace["make"]
    return makers


_MAKERS = _build_makers()


@register_opcode("BINARY_OP", min_version=(3, 11))
def binary_op(ins: Instruction, ctx: CompileContext) -> Op:
    return _MAKERS[ins.argrepr](ctx.next_index(ins), PLAIN, binary)


@register_opcode(*_OPS_310, max_version=(3, 10))
def binary_op_310(ins: Instruction, ctx: CompileContext) -> Op:
    return _MAKERS[_OPS_310[ins.opname]](ctx.next_index(ins), PLAIN, binary)


def _unary(kind: str, native: Callable[[Any], Any]) -> Callable[[Instruction, CompileContext], Op]:
    def factory(ins: Instruction, ctx: CompileContext) -> Op:
        nxt = ctx.next_index(ins)

        def op(f: Frame) -> int:
            st = f.stack
            v = st[-1]
            st[-1] = native(v) if type(v) in PLAIN else unary(f.rt, kind, v)
            return nxt

        return op

    return factory


register_opcode("UNARY_NEGATIVE")(_unary("-", operator.neg))
register_opcode("UNARY_INVERT")(_unary("~", operator.invert))
register_opcode("UNARY_POSITIVE", max_version=(3, 11))(_unary("+", operator.pos))


def _truth_op(negate: bool) -> Callable[[Instruction, CompileContext], Op]:
    def factory(ins: Instruction, ctx: CompileContext) -> Op:
        nxt = ctx.next_index(ins)

        def op(f: Frame) -> int:
            st = f.stack
            v = st[-1]
            result = bool(v) if type(v) in PLAIN else truth(f.rt, v)
            st[-1] = not result if negate else result
            return nxt

        return op

    return factory


register_opcode("UNARY_NOT")(_truth_op(True))
register_opcode("TO_BOOL", min_version=(3, 13))(_truth_op(False))

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


@register_opcode("COMPARE_OP")
def compare_op(ins: Instruction, ctx: CompileContext) -> Op:
    sym = str(ins.argval)
    to_bool = PY_VERSION >= (3, 13) and bool(ins.arg & 16)
    # Hooked: == of instances of Python classes goes through compare, which reports identity.
    plain = PLAIN_VALUES if ctx.hooked and sym in ("==", "!=") else PLAIN
    return _COMPARE[sym](ctx.next_index(ins), to_bool, plain, compare, truth)


@register_opcode("IS_OP")
def is_op(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    invert = bool(ins.arg)

    if ctx.hooked:

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


@register_opcode("CONTAINS_OP")
def contains_op(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    invert = bool(ins.arg)

    def op(f: Frame) -> int:
        st = f.stack
        container = st.pop()
        item = st[-1]
        if type(container) in FAST_CONTAINERS and type(item) in PLAIN:
            st[-1] = (item in container) is not invert
        else:
            st[-1] = contains(f.rt, item, container) is not invert
        return nxt

    return op
