"""Traceback entries for interpreted frames.

A traceback entry needs a real frame object, and an interpreted frame has none. Each entry gets
a stub frame (a never-started generator's: it runs nothing and has no ``f_back``) whose code has
the name, file, first line and qualified name of the user's code, and whose globals are the
frame's. Its ``f_trace`` holds a :class:`FrameLink` to the interpreted frame, so that
``tb.tb_frame`` read by interpreted code shows that frame itself (``_frames``): its real code,
locals, line and caller, as CPython's traceback does.
"""

from __future__ import annotations

from types import CodeType, FunctionType, TracebackType
from typing import Any

from thunder_interp._frame import Frame
from thunder_interp._registry import PY_VERSION

__all__ = ["FrameLink", "StubCodes", "traceback_entry"]

# Code -> the function whose generator's frame is its stub (keyed by id: hashing a code object
# hashes its contents).
StubCodes = dict[int, tuple[CodeType, FunctionType]]


class FrameLink:
    """The interpreted frame a stub frame stands for. No real frame is kept: those of the
    interpreter hold the exception (a reference cycle that would keep frames' locals alive)."""

    __slots__ = ("frame",)

    def __init__(self, frame: Frame) -> None:
        self.frame = frame

    def __call__(self, *args: Any) -> None:
        """As a trace function (never called: the stub never runs), it traces nothing."""
        return None


def _make_stub_code() -> CodeType:
    module = compile("def stub():\n    yield\n", "<thunder_interp stub>", "exec")
    for const in module.co_consts:
        if isinstance(const, CodeType):
            return const
    raise AssertionError("unreachable")  # pragma: no cover


_STUB_CODE = _make_stub_code()


def _stub_function(codes: StubCodes, code: CodeType, globals_: dict[str, Any]) -> FunctionType:
    entry = codes.get(id(code))
    if entry is not None and entry[0] is code:
        if entry[1].__globals__ is globals_:
            return entry[1]
        stub = entry[1].__code__
    else:
        stub = _STUB_CODE.replace(
            co_name=code.co_name, co_filename=code.co_filename, co_firstlineno=code.co_firstlineno
        )
        if PY_VERSION >= (3, 11):
            stub = stub.replace(co_qualname=code.co_qualname)
    fn = FunctionType(stub, globals_)
    codes[id(code)] = (code, fn)
    return fn


def traceback_entry(
    codes: StubCodes, f: Frame, tb: TracebackType | None, lineno: int
) -> TracebackType:
    """A traceback entry for ``f`` at line ``lineno`` on top of ``tb``."""
    if tb is not None:
        below = tb.tb_frame.f_trace
        # The frame that raised out into ``f`` was called by it (its ``f_back``); not so for an
        # exception kept and raised again elsewhere: its frame did not raise out.
        if type(below) is FrameLink:
            callee = below.frame
            if callee.raised_out and callee.raised_into is None and callee is not f:
                callee.raised_into = f
    stub = _stub_function(codes, f.code, f.globals)().gi_frame
    stub.f_trace = FrameLink(f)
    return TracebackType(tb, stub, -1, lineno)
