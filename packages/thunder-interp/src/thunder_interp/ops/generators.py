"""Generators and coroutines: yield, yield from / await (SEND), awaitables."""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

from thunder_interp._bytecode import Instruction
from thunder_interp._frame import NULL, Frame, own_blocks
from thunder_interp._generators import AsyncGenValue
from thunder_interp._registry import (
    ENDS_BLOCK,
    GOES_ON,
    NOT_COMPILED,
    PY_VERSION,
    CompileContext,
    Op,
    block_template,
    register_opcode,
)
from thunder_interp._runtime import BLOCK_FINALLY, Runtime, lookup_special
from thunder_interp._slots import call_special, get_iter, is_plain, is_python_level, lookup_type

if TYPE_CHECKING:
    from thunder_interp._blocks import BlockBuilder


@register_opcode("RETURN_GENERATOR", min_version=(3, 11))
def return_generator(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)

    def op(f: Frame) -> int:
        f.pc = nxt
        return 0

    return op


@register_opcode("GEN_START", max_version=(3, 10))
def gen_start(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)

    def op(f: Frame) -> int:
        f.stack.pop()
        return nxt

    return op


def _resume_after(instrs: tuple[Instruction, ...], index: int) -> Instruction | None:
    """3.11+: the RESUME after the yield at ``index``; its argument tells a plain ``yield``
    (below 2) from that of ``yield from``/``await`` (2 and more)."""
    if PY_VERSION < (3, 11) or index + 1 >= len(instrs):
        return None
    following = instrs[index + 1]
    return following if following.opname == "RESUME" else None


def _delegating_yield(instrs: tuple[Instruction, ...], index: int) -> bool:
    """Whether instruction ``index`` is the yield of ``yield from``/``await`` (3.11+)."""
    resume = _resume_after(instrs, index)
    return resume is not None and instrs[index].opname == "YIELD_VALUE" and resume.arg & 3 >= 2


def _delegate_exit(instrs: tuple[Instruction, ...], ins: Instruction) -> int:
    """Where the frame resumes when the delegate's throw fails (for the yield ``ins`` after a
    SEND): 3.11 after the loop; 3.12+ at the yield, whose handler (CLEANUP_THROW) turns
    StopIteration into a value."""
    return instrs[ins.index - 1].target if PY_VERSION < (3, 12) else ins.index


@register_opcode("YIELD_VALUE")
def yield_value(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    instrs = ctx.instructions
    delegating = _delegating_yield(instrs, ins.index)
    yf_exit = 0
    if delegating and instrs[ins.index - 1].opname == "SEND":
        yf_exit = _delegate_exit(instrs, ins)

    wrap = PY_VERSION < (3, 11) and bool(ctx.code.co_flags & 0x200)

    def op(f: Frame) -> int:
        st = f.stack
        f.retval = st.pop()
        if wrap:
            f.retval = AsyncGenValue(f.retval)
        f.pc = nxt
        f.suspended = True
        if delegating:
            f.yf = st[-1]
            f.yf_exit = yf_exit
        else:
            f.yf = None
        return 0

    return op


@block_template(yield_value)
def yield_value_block(block: BlockBuilder, ins: Instruction) -> int:
    """The yield op's work for a plain ``yield v``, or for that of ``yield from``/``await``
    after its SEND in this block: the frame suspends; the driver resumes it at the next
    instruction. (3.10's yields are left to the op: only 3.11's RESUME tells them apart.)"""
    resume = _resume_after(block.instructions, ins.index)
    delegating = resume is not None and resume.arg & 3 >= 2
    if resume is None or (delegating and block.last_send != ins.index - 1):
        return NOT_COMPILED
    v = block.pop()
    block.flush_stack()
    block.emit(f"f.retval = {v}")
    following = block.next_index(ins)
    block.emit(f"f.pc = {following}")
    block.emit("f.suspended = True")
    if delegating:
        block.emit("f.yf = st[-1]")
        block.emit(f"f.yf_exit = {_delegate_exit(block.instructions, ins)}")
    else:
        block.emit("f.yf = None")
        instrs = block.instructions
        if following < len(instrs) - 1 and instrs[following].opname == "POP_TOP":
            # ``yield v`` as a statement: a send may go on past the POP_TOP of its value (and
            # the jumps after it) without pushing the value (see ``Frame.resume_at``).
            block.emit(f"f.resume_at = {block.resolve_target(following + 1)}")
    block.emit("return 0")
    return ENDS_BLOCK


def _send(receiver: Any, value: Any, rt: Runtime | None = None) -> Any:
    if value is None and hasattr(type(receiver), "__next__"):
        if rt is not None and not is_plain(receiver):
            descr = lookup_type(type(receiver), "__next__")
            if is_python_level(descr):
                return call_special(rt, descr, receiver)  # a Python __next__, interpreted
        return next(receiver)
    return receiver.send(value)


_RANGE_ITERATOR = type(iter(range(0)))
_DONE = object()


class Returned:
    """What a SEND found the delegate returned (``value``), where it yields no value."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _send_or_return(receiver: Any, value: Any, rt: Runtime | None = None) -> Any:
    try:
        return _send(receiver, value, rt)
    except StopIteration as e:
        return Returned(e.value)


def sent(rt: Runtime, receiver: Any, v: Any) -> Any:
    """What sending ``v`` to ``receiver`` (the SEND instruction) gives: the value it yields, or
    a :class:`Returned` holding the value it returns."""
    if v is None and type(receiver) is _RANGE_ITERATOR:
        result = next(receiver, _DONE)
        return Returned(None) if result is _DONE else result
    return _send_or_return(receiver, v, rt)


@register_opcode("SEND", min_version=(3, 11))
def send(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    target = ins.target

    def op(f: Frame) -> int:
        st = f.stack
        v = st.pop()
        result = sent(f.rt, st[-1], v)
        if type(result) is Returned:
            if PY_VERSION >= (3, 12):
                st.append(result.value)
            else:
                st[-1] = result.value
            return target
        st.append(result)
        return nxt

    return op


@block_template(send, helpers={"sent": sent, "RETURNED": Returned})
def send_block(block: BlockBuilder, ins: Instruction) -> int:
    """The SEND op's work, when the yield of ``yield from``/``await`` follows in this block."""
    if not _delegating_yield(block.instructions, ins.index + 1):
        return NOT_COMPILED
    v = block.pop()
    block.flush_stack()
    t = block.temp()
    block.emit(f"{t} = sent(f.rt, st[-1], {v})")
    block.emit(f"if type({t}) is RETURNED:")
    if PY_VERSION >= (3, 12):
        block.emit(f"    st.append({t}.value); return {block.resolve_target(ins.target)}")
    else:
        block.emit(f"    st[-1] = {t}.value; return {block.resolve_target(ins.target)}")
    block.stack.append(t)
    block.last_send = ins.index
    return GOES_ON


@register_opcode("END_SEND", min_version=(3, 12))
def end_send(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)

    def op(f: Frame) -> int:
        del f.stack[-2]
        return nxt

    return op


@register_opcode("YIELD_FROM", max_version=(3, 10))
def yield_from(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    index = ins.index

    def op(f: Frame) -> int:
        st = f.stack
        v = st.pop()
        receiver = st[-1]
        result = _send_or_return(receiver, v, f.rt)
        if type(result) is Returned:
            st[-1] = result.value
            f.yf = None
            return nxt
        f.retval = result
        f.pc = index
        f.suspended = True
        f.yf = receiver
        f.yf_exit = nxt
        return 0

    return op


def _is_coroutine(value: Any) -> bool:
    if isinstance(value, types.CoroutineType):
        return True
    return isinstance(value, types.GeneratorType) and bool(value.gi_code.co_flags & 0x100)


@register_opcode("GET_YIELD_FROM_ITER")
def get_yield_from_iter(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    in_coroutine = bool(ctx.code.co_flags & (0x80 | 0x100))

    def op(f: Frame) -> int:
        st = f.stack
        v = st[-1]
        if isinstance(v, types.CoroutineType):
            if not in_coroutine:
                raise TypeError(
                    "cannot 'yield from' a coroutine object in a non-coroutine generator"
                )
        elif not isinstance(v, types.GeneratorType):
            st[-1] = get_iter(f.rt, v)
        return nxt

    return op


def get_awaitable(value: Any) -> Any:
    """``_PyCoro_GetAwaitableIter``."""
    if _is_coroutine(value):
        return value
    getter = getattr(type(value), "__await__", None)
    if getter is None:
        raise TypeError(f"object {type(value).__name__} can't be used in 'await' expression")
    res = getter(value)
    if _is_coroutine(res):
        raise TypeError("__await__() returned a coroutine")
    if not hasattr(type(res), "__next__"):
        raise TypeError(f"__await__() returned non-iterator of type '{type(res).__name__}'")
    return res


@register_opcode("GET_AWAITABLE")
def get_awaitable_op(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    where = ins.arg

    def op(f: Frame) -> int:
        st = f.stack
        value = st[-1]
        try:
            st[-1] = get_awaitable(value)
            return nxt
        except TypeError:
            if where == 0:
                raise
        kind = "__aenter__" if where == 1 else "__aexit__"
        raise TypeError(
            f"'async with' received an object from {kind} that does not implement __await__: {type(value).__name__}"
        )

    return op


# -- async generators, async for, async with ---------------------------------------------------


@register_opcode("ASYNC_GEN_WRAP", min_version=(3, 11), max_version=(3, 11))
def async_gen_wrap(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)

    def op(f: Frame) -> int:
        st = f.stack
        st[-1] = AsyncGenValue(st[-1])
        return nxt

    return op


@register_opcode("GET_AITER")
def get_aiter(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)

    def op(f: Frame) -> int:
        st = f.stack
        obj = st[-1]
        getter = getattr(type(obj), "__aiter__", None)
        if getter is None:
            raise TypeError(
                f"'async for' requires an object with __aiter__ method, got {type(obj).__name__}"
            )
        it = getter(obj)
        if not hasattr(type(it), "__anext__"):
            raise TypeError(
                "'async for' received an object from __aiter__ that does not implement __anext__: "
                + type(it).__name__
            )
        st[-1] = it
        return nxt

    return op


@register_opcode("GET_ANEXT")
def get_anext(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)

    def op(f: Frame) -> int:
        st = f.stack
        it = st[-1]
        getter = getattr(type(it), "__anext__", None)
        if getter is None:
            raise TypeError(
                f"'async for' requires an iterator with __anext__ method, got {type(it).__name__}"
            )
        awaitable = getter(it)
        try:
            st.append(get_awaitable(awaitable))
            return nxt
        except TypeError:
            pass
        raise TypeError(
            f"'async for' received an invalid object from __anext__: {type(awaitable).__name__}"
        )

    return op


@register_opcode("END_ASYNC_FOR")
def end_async_for(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    index = ins.index
    if PY_VERSION >= (3, 11):

        def op(f: Frame) -> int:
            st = f.stack
            exc = st.pop()
            if isinstance(exc, StopAsyncIteration):
                st.pop()
                return nxt
            return f.rt.unwind(f, exc, index, chain=False)

        return op

    def op_310(f: Frame) -> int:
        st = f.stack
        exc_type = st.pop()
        if isinstance(exc_type, type) and issubclass(exc_type, StopAsyncIteration):
            _, _, level = f.blocks.pop()
            del st[level + 3 :]
            st.pop()
            f.rt.exc_item.value = st.pop()
            st.pop()
            st.pop()  # the async iterator
            return nxt
        exc = st.pop()
        st.pop()
        return f.rt.unwind(f, exc, index, chain=False)

    return op_310


def _enter_async(mgr: Any) -> tuple[Any, Any]:
    enter = lookup_special(mgr, "__aenter__")
    if enter is NULL:
        if PY_VERSION < (3, 11):
            raise AttributeError("__aenter__")
        raise TypeError(
            f"'{type(mgr).__name__}' object does not support the asynchronous context manager protocol"
        )
    exit_ = lookup_special(mgr, "__aexit__")
    if exit_ is NULL:
        if PY_VERSION < (3, 11):
            raise AttributeError("__aexit__")
        if PY_VERSION >= (3, 12):
            raise TypeError(
                f"'{type(mgr).__name__}' object does not support the asynchronous context manager protocol "
                "(missed __aexit__ method)"
            )
        raise TypeError(
            f"'{type(mgr).__name__}' object does not support the asynchronous context manager protocol"
        )
    return enter, exit_


@register_opcode("BEFORE_ASYNC_WITH")
def before_async_with(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)

    def op(f: Frame) -> int:
        st = f.stack
        enter, exit_ = _enter_async(st[-1])
        st[-1] = exit_
        st.append(f.rt.call(enter, (), None, f))
        return nxt

    return op


@register_opcode("SETUP_ASYNC_WITH", max_version=(3, 10))
def setup_async_with(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    target = ins.target

    def op(f: Frame) -> int:
        st = f.stack
        res = st.pop()
        own_blocks(f).append((BLOCK_FINALLY, target, len(st)))
        st.append(res)
        return nxt

    return op
