"""Generator and coroutine objects whose frames the interpreter drives.

They behave like CPython's: ``iter``/``next``/``send``/``throw``/``close``, delegation through
``yield from`` (the interpreter's or CPython's), ``StopIteration`` carrying the return value, and
``close`` when collected while suspended.
"""

from __future__ import annotations

import collections.abc
from typing import Any

from thunder_interp._frame import ExcItem, Frame
from thunder_interp._registry import PY_VERSION
from thunder_interp._runtime import chain_context, run_frame

__all__ = ["InterpretedCoroutine", "InterpretedGenerator"]


def _close_iter(yf: Any) -> None:
    close = getattr(yf, "close", None)
    if close is not None:
        close()


class _FrameDriver:
    """Shared machinery of interpreted generators and coroutines."""

    _kind = "generator"

    def __init__(self, frame: Frame) -> None:
        self._frame: Frame | None = frame
        self._running = False
        self._started = False
        self._exc_item = ExcItem(None, None)
        code = frame.code
        self.__name__ = code.co_name
        self.__qualname__ = getattr(code, "co_qualname", code.co_name)
        self._code = code

    # -- the core -----------------------------------------------------------------------------

    def _resume(self, value: Any, exc: BaseException | None) -> Any:
        f = self._frame
        if self._running:
            raise ValueError(f"{self._kind} already executing")
        if f is None:
            if exc is not None:
                raise exc
            if self._kind == "coroutine":
                raise RuntimeError("cannot reuse already awaited coroutine")
            raise StopIteration
        if not self._started and exc is None and value is not None:
            raise TypeError(f"can't send non-None value to a just-started {self._kind}")
        rt = f.rt
        item = self._exc_item
        item.previous = rt.exc_item
        rt.exc_item = item
        self._running = True
        self._started = True
        from thunder_interp._api import _CURRENT_RUNTIME

        token = _CURRENT_RUNTIME.set(rt)
        try:
            if exc is None:
                f.stack.append(value)
                run_frame(f)
            else:
                run_frame(f, exc)
        except BaseException as e:
            self._frame = None
            if isinstance(e, StopIteration) and PY_VERSION < (3, 12):
                new = RuntimeError(f"{self._kind} raised StopIteration")
                new.__cause__ = e
                chain_context(new, e)
                raise new from e
            raise
        finally:
            self._running = False
            rt.exc_item = item.previous
            item.previous = None
            _CURRENT_RUNTIME.reset(token)
        if f.suspended:
            f.suspended = False
            return f.retval
        self._frame = None
        retval = f.retval
        if retval is None:
            raise StopIteration
        raise StopIteration(retval)

    # -- the generator protocol ---------------------------------------------------------------

    def send(self, value: Any) -> Any:
        """Resume with ``value`` as the result of the suspended ``yield``."""
        f = self._frame
        if f is not None and f.yf is not None and not self._running:
            return self._send_delegated(f, value)
        return self._resume(value, None)

    def _send_delegated(self, f: Frame, value: Any) -> Any:
        # The frame re-executes its SEND/YIELD_FROM: just resume it with the value.
        return self._resume(value, None)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        """Raise an exception at the suspended ``yield``."""
        if isinstance(typ, BaseException):
            exc = typ
            if val is not None:
                raise TypeError("instance exception may not have a separate value")
        elif isinstance(typ, type) and issubclass(typ, BaseException):
            if val is None:
                exc = typ()
            elif isinstance(val, typ):
                exc = val
            else:
                exc = typ(*val) if isinstance(val, tuple) else typ(val)
        else:
            raise TypeError(
                "exceptions must be classes or instances deriving from BaseException, not "
                + type(typ).__name__
            )
        if tb is not None:
            exc = exc.with_traceback(tb)
        f = self._frame
        if f is not None and f.yf is not None and self._started:
            return self._throw_delegated(f, exc)
        if f is not None and not self._started:
            # A just-started generator: the exception is raised at its first line and it is over.
            self._frame = None
            raise exc
        return self._resume(None, exc)

    def _throw_delegated(self, f: Frame, exc: BaseException) -> Any:
        yf = f.yf
        if isinstance(exc, GeneratorExit):
            self._running = True
            try:
                _close_iter(yf)
            except BaseException as close_error:
                self._running = False
                return self._throw_into_frame(f, close_error)
            finally:
                self._running = False
            return self._throw_into_frame(f, exc)
        throw = getattr(yf, "throw", None)
        if throw is None:
            return self._throw_into_frame(f, exc)
        self._running = True
        try:
            result = throw(exc)
        except BaseException as delegate_error:
            self._running = False
            return self._delegate_failed(f, delegate_error)
        finally:
            self._running = False
        return result

    def _throw_into_frame(self, f: Frame, exc: BaseException) -> Any:
        f.yf = None
        return self._resume(None, exc)

    def _delegate_failed(self, f: Frame, error: BaseException) -> Any:
        f.yf = None
        if PY_VERSION >= (3, 12):
            # CLEANUP_THROW in the exception table turns StopIteration into the value.
            return self._resume(None, error)
        # 3.10/3.11: pop the subiterator and skip the rest of the delegation loop.
        f.stack.pop()
        f.pc = f.yf_exit
        if isinstance(error, StopIteration):
            return self._resume(error.value, None)
        return self._resume(None, error)

    def close(self) -> Any:
        """Raise ``GeneratorExit`` at the suspended ``yield`` and finish."""
        f = self._frame
        if f is None:
            return None
        if not self._started:
            self._frame = None
            return None
        try:
            self.throw(GeneratorExit)
        except (GeneratorExit, StopIteration) as e:
            if isinstance(e, StopIteration) and PY_VERSION >= (3, 13):
                return e.value
            return None
        raise RuntimeError(f"{self._kind} ignored GeneratorExit")

    def __del__(self) -> None:
        if self._frame is not None and self._started and not self._running:
            self.close()

    # -- introspection ------------------------------------------------------------------------

    @property
    def gi_running(self) -> bool:
        return self._running

    @property
    def gi_code(self) -> Any:
        return self._code

    @property
    def gi_frame(self) -> None:
        return None

    @property
    def gi_yieldfrom(self) -> Any:
        f = self._frame
        return f.yf if f is not None else None

    def __repr__(self) -> str:
        return f"<interpreted {self._kind} object {self.__qualname__} at {id(self):#x}>"


class InterpretedGenerator(_FrameDriver, collections.abc.Generator[Any, Any, Any]):
    """A generator created by interpreted code; its frame runs in the interpreter."""

    _kind = "generator"

    def __iter__(self) -> InterpretedGenerator:
        return self

    def __next__(self) -> Any:
        return self.send(None)


class _AwaitIterator(collections.abc.Iterator[Any]):
    __slots__ = ("_coro",)

    def __init__(self, coro: InterpretedCoroutine) -> None:
        self._coro = coro

    def __iter__(self) -> _AwaitIterator:
        return self

    def __next__(self) -> Any:
        return self._coro.send(None)

    def send(self, value: Any) -> Any:
        return self._coro.send(value)

    def throw(self, *args: Any) -> Any:
        return self._coro.throw(*args)

    def close(self) -> Any:
        return self._coro.close()


class InterpretedCoroutine(_FrameDriver, collections.abc.Coroutine[Any, Any, Any]):
    """A coroutine created by interpreted code (``async def``), driven by ``send``."""

    _kind = "coroutine"

    def __await__(self) -> _AwaitIterator:
        return _AwaitIterator(self)

    @property
    def cr_running(self) -> bool:
        return self._running

    @property
    def cr_code(self) -> Any:
        return self._code

    @property
    def cr_frame(self) -> None:
        return None

    @property
    def cr_await(self) -> Any:
        f = self._frame
        return f.yf if f is not None else None
