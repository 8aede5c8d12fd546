"""Generators and coroutines whose frames the interpreter drives.

An interpreted generator is a *real* CPython generator (``types.GeneratorType``) whose body is a
small driver loop: each time it is resumed it runs the interpreted frame until the frame yields,
returns or raises, and forwards whatever was sent or thrown into it. CPython's own generator
machinery therefore provides ``iter``/``next``/``send``/``throw``/``close``, ``gi_running``,
"already executing" errors, finalization (``close`` when collected) and the ``StopIteration``
-> ``RuntimeError`` conversion. Coroutines are real coroutines built the same way (the driver
``await``s a one-shot awaitable to suspend).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncGenerator, Coroutine, Generator
from types import FunctionType
from typing import Any

from thunder_interp._frame import ExcItem, Frame
from thunder_interp._recursion import register_loop_codes
from thunder_interp._registry import PY_VERSION
from thunder_interp._runtime import resume_after_exception, run_frame

__all__ = ["AsyncGenValue", "make_async_generator", "make_coroutine", "make_generator"]


def _close_iter(yf: Any) -> None:
    close = getattr(yf, "close", None)
    if close is not None:
        close()


def _run(f: Frame, item: ExcItem, value: Any, exc: BaseException | None) -> bool:
    """Resume ``f`` (sending ``value`` or throwing ``exc``); True if it suspended again."""
    from thunder_interp._api import _CURRENT_RUNTIME

    rt = f.rt
    item.previous = rt.exc_item
    rt.exc_item = item
    token = _CURRENT_RUNTIME.set(rt)
    resume_at = f.resume_at
    f.resume_at = 0
    try:
        if exc is None:
            if resume_at:
                f.pc = resume_at  # the value is discarded
            else:
                f.stack.append(value)
            run_frame(f)
        else:
            run_frame(f, exc)
    finally:
        rt.exc_item = item.previous
        item.previous = None
        _CURRENT_RUNTIME.reset(token)
    if f.suspended:
        f.suspended = False
        return True
    return False


def _resume(f: Frame, item: ExcItem, value: Any, exc: BaseException | None) -> bool:
    """Like :func:`_run`, delegating a thrown exception to the sub-iterator of ``yield from``."""
    if exc is None or f.yf is None:
        return _run(f, item, value, exc)
    yf = f.yf
    if isinstance(exc, GeneratorExit):
        try:
            _close_iter(yf)
        except BaseException as close_error:
            exc = close_error
        return _throw_here(f, item, exc)
    throw = getattr(yf, "throw", None)
    if throw is None:
        return _throw_here(f, item, exc)
    try:
        f.retval = throw(exc)
        return True
    except BaseException as delegate_error:
        error = delegate_error
    f.yf = None
    if PY_VERSION >= (3, 12):
        # Raised at the yield: CLEANUP_THROW turns StopIteration into the value of `yield from`.
        f.pc = f.yf_exit
        return _run(f, item, None, error)
    # 3.10/3.11: pop the sub-iterator and skip the rest of the delegation loop.
    f.stack.pop()
    f.pc = f.yf_exit
    if isinstance(error, StopIteration):
        return _run(f, item, error.value, None)
    if PY_VERSION == (3, 11):
        # Raised at the loop's last jump, which the try around `yield from`/`await` still covers.
        f.pc = f.yf_exit - 1
    return _run(f, item, None, error)


def _throw_here(f: Frame, item: ExcItem, exc: BaseException) -> bool:
    """Raise ``exc`` in the delegating frame itself (CPython's ``throw_here``)."""
    f.yf = None
    if PY_VERSION >= (3, 12):
        f.pc = f.yf_exit  # at the yield, as CPython does: its handler is CLEANUP_THROW
    return _run(f, item, None, exc)


def _drive(f: Frame) -> Generator[Any, Any, Any]:
    from thunder_interp._api import _CURRENT_RUNTIME

    item = ExcItem(None, None)
    value: Any = None
    exc: BaseException | None = None
    rt = f.rt
    stack = f.stack
    ops = f.cc.ops
    while True:
        if exc is None:
            # The common case, inlined: resume with a value.
            previous = rt.exc_item
            item.previous = previous
            rt.exc_item = item
            token = _CURRENT_RUNTIME.set(rt) if _CURRENT_RUNTIME.get() is not rt else None
            # run_frame(f), inline (this runs once per item the generator produces).
            depth = rt.depth
            try:
                if depth >= rt.depth_limit:
                    guard = rt.guard
                    assert guard is not None
                    guard.deeper(depth, sys._getframe())
                rt.depth = depth + 1
                pc = f.resume_at
                if pc:  # past the POP_TOP of a discarded value (see Frame.resume_at)
                    f.resume_at = 0
                else:
                    stack.append(value)
                    pc = f.pc
                error: BaseException | None = None
                try:
                    while pc:
                        pc = ops[pc](f)
                except BaseException as e:
                    error = e  # handled below, outside this handler
                if error is not None:
                    resume_after_exception(f, error, pc)
            finally:
                rt.depth = depth
                if depth < rt.depth_floor:
                    guard = rt.guard
                    assert guard is not None
                    guard.shallower(depth)
                rt.exc_item = previous
                item.previous = None
                if token is not None:
                    _CURRENT_RUNTIME.reset(token)
            if not f.suspended:
                return f.retval
            f.suspended = False
        elif not _resume(f, item, value, exc):
            return f.retval
        try:
            value = yield f.retval
            exc = None
        except BaseException as e:
            value = None
            exc = e


register_loop_codes(_drive.__code__)


class _Suspend:
    """An awaitable that suspends the awaiting coroutine once, yielding ``value``."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __await__(self) -> Generator[Any, Any, Any]:
        return (yield self.value)


async def _drive_coroutine(f: Frame) -> Any:
    item = ExcItem(None, None)
    value: Any = None
    exc: BaseException | None = None
    while True:
        if not _resume(f, item, value, exc):
            return f.retval
        try:
            value = await _Suspend(f.retval)
            exc = None
        except BaseException as e:
            value = None
            exc = e


class AsyncGenValue:
    """A value yielded by ``yield`` in an async generator (as opposed to one passed up by ``await``)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


async def _drive_async_generator(f: Frame) -> AsyncGenerator[Any, Any]:
    item = ExcItem(None, None)
    value: Any = None
    exc: BaseException | None = None
    while True:
        if not _resume(f, item, value, exc):
            return
        result = f.retval
        try:
            if type(result) is AsyncGenValue:
                value = yield result.value
            else:
                value = await _Suspend(result)
            exc = None
        except BaseException as e:
            value = None
            exc = e


def _name(f: Frame) -> tuple[str, str]:
    if f.fn is not None:
        return f.fn.__name__, f.fn.__qualname__
    code = f.code
    return code.co_name, getattr(code, "co_qualname", code.co_name)


# ``types.coroutine`` marks generator code CO_ITERABLE_COROUTINE; the driver must carry the flag.
_drive_iterable_coroutine = FunctionType(
    _drive.__code__.replace(co_flags=_drive.__code__.co_flags | 0x100), _drive.__globals__
)


def make_generator(f: Frame) -> Generator[Any, Any, Any]:
    """A generator object running the interpreted generator frame ``f``."""
    gen: Any = _drive_iterable_coroutine(f) if f.code.co_flags & 0x100 else _drive(f)
    gen.__name__, gen.__qualname__ = _name(f)
    result: Generator[Any, Any, Any] = gen
    return result


def make_coroutine(f: Frame) -> Coroutine[Any, Any, Any]:
    """A coroutine object running the interpreted coroutine frame ``f``."""
    coro = _drive_coroutine(f)
    coro.__name__, coro.__qualname__ = _name(f)  # type: ignore[attr-defined]
    return coro


def make_async_generator(f: Frame) -> AsyncGenerator[Any, Any]:
    """An async generator object running the interpreted async generator frame ``f``."""
    agen = _drive_async_generator(f)
    agen.__name__, agen.__qualname__ = _name(f)  # type: ignore[attr-defined]
    return agen
