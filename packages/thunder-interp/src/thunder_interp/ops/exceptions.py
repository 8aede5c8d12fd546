"""Raising, handling and re-raising exceptions; ``with``; exception groups (``except*``)."""

from __future__ import annotations

from typing import Any

from thunder_interp._bytecode import Instruction
from thunder_interp._frame import NULL, Frame, own_blocks
from thunder_interp._registry import PY_VERSION, CompileContext, Op, register_opcode
from thunder_interp._runtime import BLOCK_FINALLY, chain_context, lookup_special


def _make_exception(f: Frame, value: Any, what: str) -> BaseException:
    if isinstance(value, type) and issubclass(value, BaseException):
        inst = f.rt.call(value, (), None, f)
        if not isinstance(inst, BaseException):
            raise TypeError(
                f"calling {value!r} should have returned an instance of BaseException, not {type(inst).__name__}"
            )
        return inst
    if isinstance(value, BaseException):
        return value
    raise TypeError(what)


@register_opcode("RAISE_VARARGS")
def raise_varargs(ins: Instruction, ctx: CompileContext) -> Op:
    n = ins.arg
    index = ins.index

    def op(f: Frame) -> int:
        st = f.stack
        if n == 0:
            exc = f.rt.topmost_handled()
            if exc is None:
                raise RuntimeError("No active exception to reraise")
            return f.rt.unwind(f, exc, index, chain=False)
        cause: Any = NULL
        if n == 2:
            cause = st.pop()
        exc = _make_exception(f, st.pop(), "exceptions must derive from BaseException")
        if cause is not NULL:
            if cause is None:
                exc.__cause__ = None
            else:
                exc.__cause__ = _make_exception(
                    f, cause, "exception causes must derive from BaseException"
                )
        chain_context(exc, f.rt.topmost_handled())
        raise exc

    return op


@register_opcode("RERAISE")
def reraise(ins: Instruction, ctx: CompileContext) -> Op:
    index = ins.index
    oparg = ins.arg
    if PY_VERSION >= (3, 11):

        def op(f: Frame) -> int:
            st = f.stack
            exc = st.pop()
            if oparg:
                lasti = st[-oparg]
                if isinstance(lasti, int):
                    f.lasti = lasti
            return f.rt.unwind(f, exc, index, chain=False)

        return op

    def op_310(f: Frame) -> int:
        st = f.stack
        st.pop()  # type
        exc = st.pop()
        st.pop()  # traceback
        return f.rt.unwind(f, exc, index, chain=False)

    return op_310


@register_opcode("PUSH_EXC_INFO", min_version=(3, 11))
def push_exc_info(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)

    def op(f: Frame) -> int:
        st = f.stack
        exc = st[-1]
        item = f.rt.exc_item
        st[-1] = item.value
        st.append(exc)
        item.value = exc
        return nxt

    return op


@register_opcode("POP_EXCEPT")
def pop_except(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    if PY_VERSION >= (3, 11):

        def op(f: Frame) -> int:
            f.rt.exc_item.value = f.stack.pop()
            return nxt

        return op

    def op_310(f: Frame) -> int:
        f.blocks.pop()
        st = f.stack
        st.pop()  # type
        value = st.pop()
        st.pop()  # traceback
        f.rt.exc_item.value = value
        return nxt

    return op_310


def _check_except_type(right: Any) -> None:
    items = right if isinstance(right, tuple) else (right,)
    for item in items:
        if not (isinstance(item, type) and issubclass(item, BaseException)):
            raise TypeError(
                "catching classes that do not inherit from BaseException is not allowed"
            )


@register_opcode("CHECK_EXC_MATCH", min_version=(3, 11))
def check_exc_match(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)

    def op(f: Frame) -> int:
        st = f.stack
        right = st.pop()
        _check_except_type(right)
        st.append(isinstance(st[-1], right))
        return nxt

    return op


@register_opcode("JUMP_IF_NOT_EXC_MATCH", max_version=(3, 10))
def jump_if_not_exc_match(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    target = ins.target

    def op(f: Frame) -> int:
        st = f.stack
        right = st.pop()
        left = st.pop()
        _check_except_type(right)
        if isinstance(left, BaseException):
            left = type(left)
        if isinstance(left, type) and issubclass(left, right):
            return nxt
        return target

    return op


def _check_except_star_type(right: Any) -> None:
    _check_except_type(right)
    items = right if isinstance(right, tuple) else (right,)
    for item in items:
        if issubclass(item, BaseExceptionGroup):  # type: ignore[name-defined]  # noqa: F821
            raise TypeError(
                "catching ExceptionGroup with except* is not allowed. Use except instead."
            )


def _exception_group_match(exc: Any, match_type: Any) -> tuple[Any, Any]:
    if exc is None:
        return None, None
    if isinstance(exc, match_type):
        if isinstance(exc, BaseExceptionGroup):  # type: ignore[name-defined]  # noqa: F821
            return exc, None
        wrapped = BaseExceptionGroup("", [exc])  # type: ignore[name-defined]  # noqa: F821
        wrapped.__traceback__ = exc.__traceback__
        return wrapped, None
    if isinstance(exc, BaseExceptionGroup):  # type: ignore[name-defined]  # noqa: F821
        match, rest = exc.split(match_type)
        return match, rest
    return None, exc


@register_opcode("CHECK_EG_MATCH", min_version=(3, 11))
def check_eg_match(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)

    def op(f: Frame) -> int:
        st = f.stack
        match_type = st.pop()
        exc = st.pop()
        _check_except_star_type(match_type)
        match, rest = _exception_group_match(exc, match_type)
        if match is not None:
            f.rt.exc_item.value = match
        st.append(rest)
        st.append(match)
        return nxt

    return op


def _same_metadata(a: BaseException, b: BaseException) -> bool:
    return (
        getattr(a, "__notes__", None) is getattr(b, "__notes__", None)
        and a.__traceback__ is b.__traceback__
        and a.__cause__ is b.__cause__
        and a.__context__ is b.__context__
    )


def _leaf_ids(exc: BaseException, out: set[int]) -> None:
    if isinstance(exc, BaseExceptionGroup):  # type: ignore[name-defined]  # noqa: F821
        for e in exc.exceptions:
            _leaf_ids(e, out)
    else:
        out.add(id(exc))


def _projection(orig: BaseException, keep: list[BaseException]) -> Any:
    if not keep:
        return None
    leaves: set[int] = set()
    for e in keep:
        _leaf_ids(e, leaves)

    def is_kept_leaf(e: BaseException) -> bool:
        return not isinstance(e, BaseExceptionGroup) and id(e) in leaves  # type: ignore[name-defined]  # noqa: F821

    match, _ = orig.split(is_kept_leaf)  # type: ignore[attr-defined]
    return match


def prep_reraise_star(orig: Any, excs: list[Any]) -> Any:
    """``_PyExc_PrepReraiseStar``: the exception an ``except*`` block finally raises."""
    if not excs:
        return None
    if not isinstance(orig, BaseExceptionGroup):  # type: ignore[name-defined]  # noqa: F821
        return excs[0]
    raised: list[BaseException] = []
    reraised: list[BaseException] = []
    for e in excs:
        if e is None:
            continue
        (reraised if _same_metadata(e, orig) else raised).append(e)
    reraised_eg = _projection(orig, reraised)
    if not raised:
        return reraised_eg
    if reraised_eg is not None:
        raised.append(reraised_eg)
    if len(raised) > 1:
        return ExceptionGroup("", raised)  # type: ignore[name-defined]  # noqa: F821
    return raised[0]


@register_opcode("PREP_RERAISE_STAR", min_version=(3, 11), max_version=(3, 11))
def prep_reraise_star_op(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)

    def op(f: Frame) -> int:
        st = f.stack
        excs = st.pop()
        orig = st.pop()
        st.append(prep_reraise_star(orig, excs))
        return nxt

    return op


@register_opcode("LOAD_ASSERTION_ERROR")
def load_assertion_error(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)

    def op(f: Frame) -> int:
        f.stack.append(AssertionError)
        return nxt

    return op


def _enter_context(f: Frame, mgr: Any) -> tuple[Any, Any]:
    enter = lookup_special(mgr, "__enter__")
    if enter is NULL:
        if PY_VERSION < (3, 11):
            raise AttributeError("__enter__")
        raise TypeError(
            f"'{type(mgr).__name__}' object does not support the context manager protocol"
        )
    exit_ = lookup_special(mgr, "__exit__")
    if exit_ is NULL:
        if PY_VERSION < (3, 11):
            raise AttributeError("__exit__")
        if PY_VERSION >= (3, 12):
            raise TypeError(
                f"'{type(mgr).__name__}' object does not support the context manager protocol "
                "(missed __exit__ method)"
            )
        raise TypeError(
            f"'{type(mgr).__name__}' object does not support the context manager protocol"
        )
    return enter, exit_


@register_opcode("BEFORE_WITH", min_version=(3, 11))
def before_with(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)

    def op(f: Frame) -> int:
        st = f.stack
        enter, exit_ = _enter_context(f, st[-1])
        st[-1] = exit_
        st.append(f.rt.call(enter, (), None, f))
        return nxt

    return op


@register_opcode("SETUP_WITH", max_version=(3, 10))
def setup_with(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    target = ins.target

    def op(f: Frame) -> int:
        st = f.stack
        enter, exit_ = _enter_context(f, st[-1])
        st[-1] = exit_
        res = f.rt.call(enter, (), None, f)
        own_blocks(f).append((BLOCK_FINALLY, target, len(st)))
        st.append(res)
        return nxt

    return op


@register_opcode("WITH_EXCEPT_START")
def with_except_start(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    if PY_VERSION >= (3, 11):

        def op(f: Frame) -> int:
            st = f.stack
            val = st[-1]
            exit_ = st[-4]
            st.append(f.rt.call(exit_, (type(val), val, val.__traceback__), None, f))
            return nxt

        return op

    def op_310(f: Frame) -> int:
        st = f.stack
        exit_ = st[-7]
        val = st[-2]
        st.append(f.rt.call(exit_, (st[-1], val, st[-3]), None, f))
        return nxt

    return op_310


@register_opcode("SETUP_FINALLY", max_version=(3, 10))
def setup_finally(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    target = ins.target

    def op(f: Frame) -> int:
        own_blocks(f).append((BLOCK_FINALLY, target, len(f.stack)))
        return nxt

    return op


@register_opcode("POP_BLOCK", max_version=(3, 10))
def pop_block(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)

    def op(f: Frame) -> int:
        f.blocks.pop()
        return nxt

    return op


@register_opcode("CLEANUP_THROW", min_version=(3, 12))
def cleanup_throw(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    index = ins.index

    def op(f: Frame) -> int:
        st = f.stack
        exc = st.pop()
        if isinstance(exc, StopIteration):
            del st[-2:]
            st.append(None)
            st.append(exc.value)
            return nxt
        return f.rt.unwind(f, exc, index, chain=False)

    return op
