"""Calls and function creation."""

from __future__ import annotations

from types import CellType, CodeType, FunctionType, MethodType
from typing import TYPE_CHECKING, Any

from thunder_interp._bytecode import Instruction
from thunder_interp._frame import NULL, Frame
from thunder_interp._registry import (
    GOES_ON,
    NOT_COMPILED,
    PY_VERSION,
    SKIPPABLE_OPCODES,
    CompileContext,
    Op,
    block_template,
    register_opcode,
)
from thunder_interp._runtime import InternalLookaside
from thunder_interp._slots import PLAIN, iterable_arg
from thunder_interp.ops._common import function_str

if TYPE_CHECKING:
    from thunder_interp._blocks import BlockBuilder

_BUILTIN = type(len)


def call_positional(f: Frame, fn: Any, args: list[Any]) -> Any:
    """Call ``fn(*args)`` from interpreted code (the fast paths of CALL, for generated blocks)."""
    rt = f.rt
    t = type(fn)
    if t is FunctionType:
        if fn not in rt.lookasides:
            return rt.call_function(fn, args, None)
    elif t is MethodType:
        func = fn.__func__
        if type(func) is FunctionType and func not in rt.lookasides and fn not in rt.lookasides:
            args.insert(0, fn.__self__)
            return rt.call_function(func, args, None)
    elif t is _BUILTIN:
        la = rt.lookasides.get(fn)
        if la is None:
            if rt.plain_opaque:
                return fn(*args)
        elif type(la) is InternalLookaside:
            if len(args) == 1:
                if rt.plain_opaque and fn in rt.fast_builtins and type(args[0]) in PLAIN:
                    return fn(*args)
                if la.unary is not None:
                    return la.unary(rt, args[0])
            return la.impl(rt, f, tuple(args), {})
    elif t is type and fn not in rt.lookasides:
        return rt.instantiate(fn, args, None, f)
    return rt.call(fn, args, None, f)


def call_at_site(f: Frame, fn: Any, args: list[Any], site: list[Any]) -> Any:
    """A call from a call site of a generated block that the site did not enter directly: a
    Python function (or method of one) without a lookaside is called through
    ``Runtime.call_from_site``, which lets the site remember it; anything else as
    :func:`call_positional` calls it."""
    rt = f.rt
    t = type(fn)
    if t is FunctionType:
        if fn not in rt.lookasides:
            return rt.call_from_site(fn, args, site)
    elif t is MethodType:
        func = fn.__func__
        if type(func) is FunctionType and func not in rt.lookasides and fn not in rt.lookasides:
            args.insert(0, fn.__self__)
            return rt.call_from_site(func, args, site)
    return call_positional(f, fn, args)


def call_null_first(f: Frame, a: Any, b: Any, args: list[Any]) -> Any:
    """CALL with the 3.10-3.12 layout ``[NULL|method, callable|self, *args]``."""
    if a is NULL:
        return call_positional(f, b, args)
    args.insert(0, b)
    return call_positional(f, a, args)


def call_self_second(f: Frame, a: Any, b: Any, args: list[Any]) -> Any:
    """CALL with the 3.13 layout ``[callable, self|NULL, *args]``."""
    if b is not NULL:
        args.insert(0, b)
    return call_positional(f, a, args)


def _split_kwargs(args: list[Any], kwnames: tuple[str, ...]) -> dict[str, Any]:
    n = len(kwnames)
    values = args[len(args) - n :]
    del args[len(args) - n :]
    return dict(zip(kwnames, values))


def _call_factory(
    nargs: int, nxt: int, layout: str, kw_from_stack: bool, kw_from_frame: bool
) -> Op:
    """Build a CALL op. ``layout``: "null_first" ([NULL|meth, callable|self, args]),
    "self_second" ([callable, self|NULL, args]) or "plain" ([callable, args])."""

    if layout == "plain":

        def op_plain(f: Frame) -> int:
            st = f.stack
            kwnames = st.pop() if kw_from_stack else ()
            k = len(st) - nargs
            args = st[k:]
            fn = st[k - 1]
            del st[k - 1 :]
            kwargs = _split_kwargs(args, kwnames) if kwnames else None
            st.append(f.rt.call(fn, args, kwargs, f))
            return nxt

        return op_plain

    null_first = layout == "null_first"

    def op(f: Frame) -> int:
        st = f.stack
        if kw_from_stack:
            kwnames = st.pop()
        elif kw_from_frame:
            kwnames = f.kw_names
            f.kw_names = ()
        else:
            kwnames = ()
        k = len(st) - nargs
        args = st[k:]
        a = st[k - 2]
        b = st[k - 1]
        del st[k - 2 :]
        if null_first:
            if a is NULL:
                fn = b
            else:
                fn = a
                args.insert(0, b)
        else:
            fn = a
            if b is not NULL:
                args.insert(0, b)
        if kwnames:
            st.append(f.rt.call(fn, args, _split_kwargs(args, kwnames), f))
            return nxt
        rt = f.rt
        t = type(fn)
        if t is FunctionType:
            if fn not in rt.lookasides:
                st.append(rt.call_function(fn, args, None))
                return nxt
        elif t is MethodType:
            func = fn.__func__
            if type(func) is FunctionType and func not in rt.lookasides and fn not in rt.lookasides:
                args.insert(0, fn.__self__)
                st.append(rt.call_function(func, args, None))
                return nxt
        elif (
            t is _BUILTIN
            and rt.plain_opaque
            and (
                fn not in rt.lookasides
                or (fn in rt.fast_builtins and len(args) == 1 and type(args[0]) in PLAIN)
            )
        ):
            st.append(fn(*args))
            return nxt
        st.append(rt.call(fn, args, None, f))
        return nxt

    return op


@register_opcode("CALL", min_version=(3, 11))
def call(ins: Instruction, ctx: CompileContext) -> Op:
    layout = "null_first" if PY_VERSION < (3, 13) else "self_second"
    return _call_factory(ins.arg, ins.index + 1, layout, False, PY_VERSION < (3, 13))


@register_opcode("CALL_KW", min_version=(3, 13))
def call_kw(ins: Instruction, ctx: CompileContext) -> Op:
    return _call_factory(ins.arg, ins.index + 1, "self_second", True, False)


@register_opcode("KW_NAMES", min_version=(3, 11), max_version=(3, 12))
def kw_names(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    names = ctx.code.co_consts[ins.arg]

    def op(f: Frame) -> int:
        f.kw_names = names
        return nxt

    return op


@register_opcode("CALL_FUNCTION", max_version=(3, 10))
def call_function(ins: Instruction, ctx: CompileContext) -> Op:
    return _call_factory(ins.arg, ins.index + 1, "plain", False, False)


@register_opcode("CALL_FUNCTION_KW", max_version=(3, 10))
def call_function_kw(ins: Instruction, ctx: CompileContext) -> Op:
    return _call_factory(ins.arg, ins.index + 1, "plain", True, False)


@register_opcode("CALL_METHOD", max_version=(3, 10))
def call_method(ins: Instruction, ctx: CompileContext) -> Op:
    return _call_factory(ins.arg, ins.index + 1, "null_first", False, False)


@block_template(
    call,
    call_function,
    call_method,
    helpers={
        "call_null_first": call_null_first,
        "call_self_second": call_self_second,
        "call_at_site": call_at_site,
        "call_positional": call_positional,
        "FT": FunctionType,
        "MT": MethodType,
        "BT": _BUILTIN,
    },
)
def call_block(block: BlockBuilder, ins: Instruction) -> int:
    """A call with positional arguments only."""
    if _after_kw_names(block.instructions, ins):
        return NOT_COMPILED
    args = block.pop_values(ins.arg)
    arglist = f"[{', '.join(args)}]"
    if ins.opname == "CALL_FUNCTION":
        fn = block.pop()
    else:
        # A method or a plain callable: known here when this block pushed the NULL.
        b = block.pop()
        a = block.pop()
        if PY_VERSION >= (3, 13):  # [callable, self|NULL, *args]
            if b != "NULL":
                block.push_expr(f"call_self_second(f, {a}, {b}, {arglist})")
                return GOES_ON
            fn = a
        else:  # [NULL|method, callable|self, *args]
            if a != "NULL":
                block.push_expr(f"call_null_first(f, {a}, {b}, {arglist})")
                return GOES_ON
            fn = b
    block.stack.append(_call_at_site(block, fn, args))
    return GOES_ON


def _after_kw_names(instructions: tuple[Instruction, ...], ins: Instruction) -> bool:
    """3.11-3.12: whether KW_NAMES gave ``ins`` keyword arguments."""
    k = ins.index - 1
    while k > 0 and instructions[k].opname in SKIPPABLE_OPCODES:
        k -= 1
    return instructions[k].opname == "KW_NAMES"


def _call_at_site(block: BlockBuilder, fn: str, args: list[str]) -> str:
    """The lines calling ``fn(*args)`` at a call site; returns the name of the result.

    A Python function without a lookaside is interpreted directly (the common case): the site
    remembers the last one, so the next call of it skips finding its code."""
    arglist = f"[{', '.join(args)}]"
    t = block.temp()
    code, codes, cc, kind = block.temp(), block.temp(), block.temp(), block.temp()
    site = block.const([(NULL, NULL, NULL)])
    block.emit(f"{code}, {codes}, {cc} = {site}[0]")
    block.emit(f"{kind} = type({fn})")  # (read once: each branch below tests it)
    with_self = f"[{fn}.__self__, {arglist[1:]}"
    # The site remembers (code, the lookaside table's codes, compiled code) of its last
    # callee: a function with that code, which no lookaside can be for, is entered
    # directly. It holds no function, no lookaside and no caller state.
    block.emit(
        f"if {kind} is FT and {fn}.__code__ is {code} and {codes} is LC: "
        f"{t} = {cc}.enter(rt, {fn}, {code}, {cc}, {arglist})"
    )
    block.emit(
        f"elif {kind} is MT and type({fn}.__func__) is FT"
        f" and {fn}.__func__.__code__ is {code} and {codes} is LC:"
        f" {t} = {cc}.enter(rt, {fn}.__func__, {code}, {cc}, {with_self})"
    )
    # A builtin with no lookaside, or a slot builtin on one plain argument: an opaque call,
    # made here where it needs no provenance (its lookaside would make the same call).
    native = f"{fn} not in rt.lookasides"
    if len(args) == 1:
        native = f"({native} or ({fn} in rt.fast_builtins and type({args[0]}) in P))"
    values = f"({', '.join(args)}{',' if len(args) == 1 else ''})"
    if block.plain_opaque:
        block.emit(f"elif {kind} is BT and {native}: {t} = {fn}({', '.join(args)})")
    elif not block.provenance:  # the opaque_call hook makes the call
        block.emit(f"elif {kind} is BT and {native}: {t} = rt.cb_opaque({fn}, {values}, {{}})")
    else:  # which records the result's provenance
        block.emit(f"elif {kind} is BT and {native}: {t} = rt.opaque_call({fn}, {values}, None)")
    # Another builtin (its lookaside: ``len`` of an instance of a Python class).
    block.emit(f"elif {kind} is BT: {t} = call_positional(f, {fn}, {arglist})")
    # A class (of metaclass type) with no lookaside: instantiated.
    block.emit(
        f"elif {kind} is type and {fn} not in rt.lookasides: {t} = rt.instantiate({fn}, {arglist}, None, f)"
    )
    # Anything else (a function the site does not know yet): call_at_site.
    block.emit(f"else: {t} = call_at_site(f, {fn}, {arglist}, {site})")
    return t


@register_opcode("CALL_FUNCTION_EX")
def call_function_ex(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    has_kwargs = bool(ins.arg & 1)

    def op(f: Frame) -> int:
        st = f.stack
        kwargs = st.pop() if has_kwargs else None
        callargs = st.pop()
        if PY_VERSION >= (3, 13):
            st.pop()
            fn = st.pop()
        elif PY_VERSION >= (3, 11):
            fn = st.pop()
            st.pop()
        else:
            fn = st.pop()
        if type(callargs) is not tuple:
            t = type(callargs)
            if not hasattr(t, "__iter__") and not hasattr(t, "__getitem__"):
                raise TypeError(
                    f"{function_str(fn)} argument after * must be an iterable, not {t.__name__}"
                )
            callargs = tuple(iterable_arg(f.rt, callargs))
        if kwargs is not None and type(kwargs) is not dict:
            if not hasattr(type(kwargs), "keys"):
                raise TypeError(
                    f"{function_str(fn)} argument after ** must be a mapping, not {type(kwargs).__name__}"
                )
            kwargs = {k: kwargs[k] for k in kwargs.keys()}  # noqa: SIM118
        st.append(f.rt.call(fn, callargs, kwargs or None, f))
        return nxt

    return op


def _op_codes(*factories: Any) -> frozenset[CodeType]:
    """The code objects of the ops (closures named ``op*``) that ``factories`` make."""
    return frozenset(
        const
        for factory in factories
        for const in factory.__code__.co_consts
        if isinstance(const, CodeType) and const.co_name.startswith("op")
    )


# The ops that run a call instruction (the CALL family and CALL_FUNCTION_EX): they pop the
# callable and the arguments before the call, so the frame's stack then holds what lies below.
# A suspension (``_suspend``) is at a call one of them made.
CALL_OP_CODES = _op_codes(_call_factory, call_function_ex)
CALL_OPNAMES = frozenset(
    {"CALL", "CALL_KW", "CALL_FUNCTION", "CALL_FUNCTION_KW", "CALL_METHOD", "CALL_FUNCTION_EX"}
)


def _annotations(value: Any) -> dict[str, Any]:
    if isinstance(value, tuple):
        return dict(zip(value[::2], value[1::2]))
    return dict(value)


@register_opcode("MAKE_FUNCTION")
def make_function(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    flags = ins.arg if PY_VERSION < (3, 13) else 0

    def op(f: Frame) -> int:
        st = f.stack
        qualname = st.pop() if PY_VERSION < (3, 11) else None
        code = st.pop()
        closure = st.pop() if flags & 8 else None
        annotations = st.pop() if flags & 4 else None
        kwdefaults = st.pop() if flags & 2 else None
        defaults = st.pop() if flags & 1 else None
        if closure is None and code.co_freevars:
            # 3.13: SET_FUNCTION_ATTRIBUTE sets the real closure right after.
            closure = tuple(CellType() for _ in code.co_freevars)
        fn = FunctionType(code, f.globals, code.co_name, defaults, closure)
        if qualname is not None:
            fn.__qualname__ = qualname
        if kwdefaults is not None:
            fn.__kwdefaults__ = kwdefaults
        if annotations is not None:
            fn.__annotations__ = _annotations(annotations)
        st.append(fn)
        return nxt

    return op


@register_opcode("SET_FUNCTION_ATTRIBUTE", min_version=(3, 13))
def set_function_attribute(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    which = ins.arg

    def op(f: Frame) -> int:
        st = f.stack
        fn = st.pop()
        value = st.pop()
        if which == 1:
            fn.__defaults__ = value
        elif which == 2:
            fn.__kwdefaults__ = value
        elif which == 4:
            fn.__annotations__ = _annotations(value)
        elif which == 8:
            new = FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, value)
            new.__kwdefaults__ = fn.__kwdefaults__
            new.__qualname__ = fn.__qualname__
            fn = new
        st.append(fn)
        return nxt

    return op
