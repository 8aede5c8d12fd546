"""Interpreter frames and the small runtime records they carry."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import CellType, CodeType, FunctionType
from typing import TYPE_CHECKING, Any

from thunder_interp._bytecode import ExceptionHandler, Instruction
from thunder_interp._registry import Op

if TYPE_CHECKING:
    from thunder_interp._runtime import Runtime

__all__ = ["NULL", "CompiledCode", "ExcItem", "Frame", "new_frame"]


class _Null:
    """The C ``NULL`` of the value stack and of unbound local slots."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<NULL>"


NULL: Any = _Null()


class CompiledCode:
    """A code object compiled for one interpretation mode: ops with their arguments baked in."""

    __slots__ = (
        "argcount",
        "block_builder",
        "call_argcount",
        "fast_argcount",
        "flags",
        "handlers",
        "instructions",
        "is_simple",
        "lines",
        "local_names",
        "native",
        "needs_setup",
        "nlocals",
        "nslots",
        "ops",
        "padding",
        "warmth",
    )

    def __init__(
        self,
        code: CodeType,
        instructions: tuple[Instruction, ...],
        handlers: tuple[ExceptionHandler | None, ...],
        ops: list[Op],
        local_names: tuple[str, ...],
    ) -> None:
        self.instructions = instructions
        self.handlers = handlers
        self.ops = ops
        self.lines = [i.lineno for i in instructions]
        self.local_names = local_names
        self.nlocals = code.co_nlocals
        self.nslots = len(local_names)
        self.flags = code.co_flags
        self.argcount = code.co_argcount
        # A "simple" signature: only positional parameters, no *args/**kwargs/kw-only.
        self.is_simple = code.co_kwonlyargcount == 0 and not (code.co_flags & 0x0C)
        self.padding: list[Any] = [NULL] * (self.nslots - code.co_argcount)
        # Code of the interpreter itself (e.g. methods of interpreted generators) runs natively.
        self.native = False
        # Set while basic blocks are still to be compiled (see _blocks); called once code is warm.
        self.block_builder: Callable[[], None] | None = None
        self.warmth = 0
        # 3.10 creates cells when the frame is set up (3.11+ does it with MAKE_CELL).
        self.needs_setup = sys.version_info < (3, 11) and bool(code.co_cellvars or code.co_freevars)
        # Calls with exactly this many positional arguments (and no keywords) take the fast path
        # (a plain signature, no 3.10 cell setup, not a generator); -1 when none do.
        # Code that is not CO_OPTIMIZED (module code wrapped in a function) needs a names mapping.
        optimized = bool(code.co_flags & 0x1)
        fast = optimized and self.is_simple and not self.needs_setup and not (code.co_flags & 0x2A0)
        self.fast_argcount = code.co_argcount if fast else -1
        # What the fast path of Runtime.call_function compares the argument count with: -1 (no
        # call matches) until the code is warm, so that one test covers cold code too.
        self.call_argcount = -1


class ExcItem:
    """One level of CPython's "currently handled exception" stack (per thread / per generator)."""

    __slots__ = ("previous", "value")

    def __init__(self, value: BaseException | None, previous: ExcItem | None) -> None:
        self.value = value
        self.previous = previous


_HAS_BLOCK_STACK = sys.version_info < (3, 11)


class Frame:
    """The state of one interpreted code object execution.

    The fields every call uses are slots, set by ``new_frame`` (``enter_frame`` inlines it); the
    rest (generators, keyword calls, 3.10's block stack, ``locals()``, the history) keep class
    defaults until a frame sets them, so creating a frame (once per interpreted call) stays cheap.
    It has no ``__init__``, so that ``Frame()`` makes no Python-level call. Its ops are
    ``cc.ops``.
    """

    __slots__ = (
        "__dict__",
        "builtins",
        "cc",
        "code",
        "fn",
        "globals",
        "lv",
        "pc",
        "retval",
        "rt",
        "stack",
    )
    rt: Runtime
    cc: CompiledCode
    code: CodeType
    lv: list[Any]
    stack: list[Any]
    globals: dict[str, Any]
    builtins: dict[str, Any]
    fn: Any  # the FunctionType or None (so typed, mypy would read it as a bound method)
    pc: int
    retval: Any

    # Defaults of the fields few frames set (instance attributes once set).
    names: dict[str, Any] | None = None
    kw_names: tuple[str, ...] = ()
    blocks: list[tuple[int, int, int]] = []  # never mutated: frames with a block stack own one
    suspended = False
    yf: Any = None
    yf_exit = 0
    lasti = 0
    history_line = 0  # the source line last recorded (record_history=True)
    raised_out = False  # left by an exception: ``lasti or pc`` is where (see Runtime.unwind)
    raised_into: Frame | None = None  # then the frame it went to, its caller (see _tracebacks)

    # Before 3.13, the dict ``locals()`` returns in a function (CPython's ``f_locals``); unset
    # until the first call (see _locals.frame_locals).
    locals_cache: dict[str, Any]

    @property
    def lineno(self) -> int:
        """The source line of the instruction being executed."""
        return (
            self.cc.lines[self.pc]
            if 0 <= self.pc < len(self.cc.lines)
            else self.code.co_firstlineno
        )

    def locals_dict(self) -> dict[str, Any]:
        """A snapshot of the frame's local variables (what ``locals()`` returns in a function)."""
        if self.names is not None:
            return self.names
        result: dict[str, Any] = {}
        for name, value in zip(self.cc.local_names, self.lv):
            if value is NULL:
                continue
            if isinstance(value, CellType) and name in self._cell_names():
                try:
                    value = value.cell_contents
                except ValueError:
                    continue
            result[name] = value
        return result

    def _cell_names(self) -> frozenset[str]:
        return frozenset(self.code.co_cellvars) | frozenset(self.code.co_freevars)


def new_frame(
    rt: Runtime,
    cc: CompiledCode,
    code: CodeType,
    lv: list[Any],
    globals_: dict[str, Any],
    builtins: dict[str, Any],
    fn: FunctionType | None,
    names: dict[str, Any] | None = None,
) -> Frame:
    """A frame with every per-call field set (``Runtime.call_function`` inlines this)."""
    f = Frame()
    f.rt = rt
    f.cc = cc
    f.code = code
    f.lv = lv
    f.stack = []
    f.globals = globals_
    f.builtins = builtins
    f.fn = fn
    f.pc = 1
    f.retval = None
    if names is not None:
        f.names = names
    if _HAS_BLOCK_STACK:
        f.blocks = []
    return f
