"""CALL_INTRINSIC_1 / CALL_INTRINSIC_2 (3.12+) and PRINT_EXPR (their 3.10/3.11 predecessor).

The PEP 695/696 intrinsics (type parameters, ``Generic[...]`` bases, ``type`` aliases, lazy bounds,
constraints and defaults) are CPython's own: each is run by a tiny code object that does nothing
but that intrinsic on its arguments. The objects are then exactly CPython's (``typing.TypeVar``
with ``__infer_variance__``, a bound evaluated only when ``__bound__`` is read, a
``TypeAliasType`` whose ``__value__`` is computed on first use), and CPython's ``caller()`` (the
``__module__`` of a type alias) sees a function carrying the interpreted frame's module.
"""

from __future__ import annotations

import dis
import sys
from collections.abc import Callable
from types import CodeType, FunctionType
from typing import Any

from thunder_interp._bytecode import Instruction
from thunder_interp._errors import UnsupportedOpcodeError
from thunder_interp._frame import Frame
from thunder_interp._registry import CompileContext, Op, register_opcode

__all__ = ["INTRINSIC_1_HANDLERS", "INTRINSIC_2_HANDLERS"]

Intrinsic1 = Callable[[Frame, Any], Any]
Intrinsic2 = Callable[[Frame, Any, Any], Any]

_INTRINSIC_1_NAMES: list[str] = list(getattr(dis, "_intrinsic_1_descs", []))
_INTRINSIC_2_NAMES: list[str] = list(getattr(dis, "_intrinsic_2_descs", []))


# -- CPython's own intrinsics, run natively -------------------------------------------------------


def _native_intrinsic_code(name: str) -> CodeType:
    """``def <name>(a[, b]): return CALL_INTRINSIC_n(a[, b])`` as a code object."""
    two = name in _INTRINSIC_2_NAMES
    op = dis.opmap
    template = _native_intrinsic_code.__code__
    if two:
        index = _INTRINSIC_2_NAMES.index(name)
        body = [op["LOAD_FAST"], 0, op["LOAD_FAST"], 1, op["CALL_INTRINSIC_2"], index]
    else:
        index = _INTRINSIC_1_NAMES.index(name)
        body = [op["LOAD_FAST"], 0, op["CALL_INTRINSIC_1"], index]
    code = bytes([op["RESUME"], 0, *body, op["RETURN_VALUE"], 0])
    return template.replace(
        co_code=code,
        co_argcount=2 if two else 1,
        co_posonlyargcount=0,
        co_kwonlyargcount=0,
        co_nlocals=2 if two else 1,
        co_varnames=("a", "b") if two else ("a",),
        co_cellvars=(),
        co_freevars=(),
        co_consts=(None,),
        co_names=(),
        co_stacksize=2,
        co_flags=0x3,  # CO_OPTIMIZED | CO_NEWLOCALS
        co_name=name.lower(),
        co_qualname=name.lower(),
        co_linetable=b"",
        co_exceptiontable=b"",
    )


def _native_1(name: str) -> Intrinsic1:
    code = _native_intrinsic_code(name)

    def run(f: Frame, value: Any) -> Any:
        return _native_function(code, f)(value)

    return run


def _native_2(name: str) -> Intrinsic2:
    code = _native_intrinsic_code(name)

    def run(f: Frame, first: Any, second: Any) -> Any:
        return _native_function(code, f)(first, second)

    return run


def _native_function(code: CodeType, f: Frame) -> Any:
    fn = FunctionType(code, f.globals)
    # CPython's caller() reads the module of the function running the intrinsic.
    module: Any = f.fn.__module__ if f.fn is not None else f.globals.get("__name__")
    fn.__module__ = module
    return fn


# -- intrinsics the interpreter implements itself ---------------------------------------------------


def _display(value: Any) -> None:
    hook = getattr(sys, "displayhook", None)
    if hook is None:
        raise RuntimeError("lost sys.displayhook")
    hook(value)


def _print(f: Frame, value: Any) -> Any:
    _display(value)
    return None


def _import_star(f: Frame, module: Any) -> Any:
    from thunder_interp.ops.names import import_star

    import_star(f, module)
    return None


def _stopiteration_error(f: Frame, exc: Any) -> Any:
    flags = f.code.co_flags
    msg = None
    if isinstance(exc, StopIteration):
        msg = "generator raised StopIteration"
        if flags & 0x200:
            msg = "async generator raised StopIteration"
        elif flags & 0x80:
            msg = "coroutine raised StopIteration"
    elif flags & 0x200 and isinstance(exc, StopAsyncIteration):
        msg = "async generator raised StopAsyncIteration"
    if msg is None:
        return exc
    error = RuntimeError(msg)
    error.__cause__ = exc
    error.__context__ = exc
    return error


def _async_gen_wrap(f: Frame, value: Any) -> Any:
    from thunder_interp._generators import AsyncGenValue

    return AsyncGenValue(value)


def _prep_reraise_star(f: Frame, orig: Any, excs: Any) -> Any:
    from thunder_interp.ops.exceptions import prep_reraise_star

    return prep_reraise_star(orig, excs)


def _set_function_type_params(f: Frame, fn: Any, type_params: Any) -> Any:
    fn.__type_params__ = type_params
    return fn


# PEP 695 (3.12) and PEP 696 (3.13, defaults) intrinsics.
_NATIVE_1 = [
    "INTRINSIC_TYPEVAR",
    "INTRINSIC_PARAMSPEC",
    "INTRINSIC_TYPEVARTUPLE",
    "INTRINSIC_SUBSCRIPT_GENERIC",
    "INTRINSIC_TYPEALIAS",
]
_NATIVE_2 = [
    "INTRINSIC_TYPEVAR_WITH_BOUND",
    "INTRINSIC_TYPEVAR_WITH_CONSTRAINTS",
    "INTRINSIC_SET_TYPEPARAM_DEFAULT",
]

INTRINSIC_1_HANDLERS: dict[str, Intrinsic1] = {
    "INTRINSIC_PRINT": _print,
    "INTRINSIC_IMPORT_STAR": _import_star,
    "INTRINSIC_STOPITERATION_ERROR": _stopiteration_error,
    "INTRINSIC_ASYNC_GEN_WRAP": _async_gen_wrap,
    "INTRINSIC_UNARY_POSITIVE": lambda f, value: +value,
    "INTRINSIC_LIST_TO_TUPLE": lambda f, value: tuple(value),
    **{name: _native_1(name) for name in _NATIVE_1 if name in _INTRINSIC_1_NAMES},
}
"""CALL_INTRINSIC_1 handlers by intrinsic name (those of the running Python)."""

INTRINSIC_2_HANDLERS: dict[str, Intrinsic2] = {
    "INTRINSIC_PREP_RERAISE_STAR": _prep_reraise_star,
    "INTRINSIC_SET_FUNCTION_TYPE_PARAMS": _set_function_type_params,
    **{name: _native_2(name) for name in _NATIVE_2 if name in _INTRINSIC_2_NAMES},
}
"""CALL_INTRINSIC_2 handlers by intrinsic name (those of the running Python)."""


def _unsupported_intrinsic(opname: str, name: str, ins: Instruction) -> Callable[..., Any]:
    def raise_unsupported(f: Frame, *args: Any) -> Any:
        raise UnsupportedOpcodeError(f"{opname} ({name})", f.code.co_filename, ins.lineno)

    return raise_unsupported


@register_opcode("CALL_INTRINSIC_1", min_version=(3, 12))
def call_intrinsic_1(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    name = _INTRINSIC_1_NAMES[ins.arg]
    impl = INTRINSIC_1_HANDLERS.get(name) or _unsupported_intrinsic(ins.opname, name, ins)

    def op(f: Frame) -> int:
        st = f.stack
        st[-1] = impl(f, st[-1])
        return nxt

    return op


@register_opcode("CALL_INTRINSIC_2", min_version=(3, 12))
def call_intrinsic_2(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    name = _INTRINSIC_2_NAMES[ins.arg]
    impl = INTRINSIC_2_HANDLERS.get(name) or _unsupported_intrinsic(ins.opname, name, ins)

    def op(f: Frame) -> int:
        st = f.stack
        second = st.pop()
        st[-1] = impl(f, st[-1], second)
        return nxt

    return op


@register_opcode("PRINT_EXPR", max_version=(3, 11))
def print_expr(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)

    def op(f: Frame) -> int:
        _display(f.stack.pop())
        return nxt

    return op
