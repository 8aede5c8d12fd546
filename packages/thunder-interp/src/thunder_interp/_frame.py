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

__all__ = ["NULL", "CompiledCode", "ExcItem", "Frame", "new_frame", "own_blocks"]


class _Null:
    """The C ``NULL`` of the value stack and of unbound local slots."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<NULL>"


NULL: Any = _Null()


def _enter_unset(*args: Any) -> Any:  # pragma: no cover - replaced on import of _runtime
    raise AssertionError("thunder_interp._runtime sets DEFAULT_ENTER")


# ``_runtime.enter_frame`` (set by ``_runtime``, which imports this module).
DEFAULT_ENTER: Callable[..., Any] = _enter_unset


class CompiledCode:
    """A code object compiled for one interpretation mode: ops with their arguments baked in."""

    __slots__ = (
        "argcount",
        "block_builder",
        "call_argcount",
        "enter",
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
        # What runs a call that takes the fast path: ``cc.enter(rt, fn, code, cc, args)``, as
        # ``_runtime.enter_frame`` (which ``_runtime`` sets), or the code's compiled entry, which
        # runs its entry block in the same function (see ``_blocks``).
        self.enter: Callable[..., Any] = DEFAULT_ENTER


class ExcItem:
    """One level of CPython's "currently handled exception" stack (per thread / per generator)."""

    __slots__ = ("previous", "value")

    def __init__(self, value: BaseException | None, previous: ExcItem | None) -> None:
        self.value = value
        self.previous = previous


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
        "cc",
        "code",
        "fn",
        "globals",
        "lv",
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
    fn: Any  # the FunctionType or None (so typed, mypy would read it as a bound method)
    retval: Any

    # Defaults of the fields few frames set (instance attributes once set).
    # Where the frame is (the dispatch loop keeps it in a local while it runs: set where a frame
    # stops, by a yield or an exception, and read there).
    pc = 1
    names: dict[str, Any] | None = None
    kw_names: tuple[str, ...] = ()
    # 3.10's block stack; never mutated: a frame that pushes a block owns one (see own_blocks).
    blocks: list[tuple[int, int, int]] = []
    suspended = False
    # A generator suspended at a ``yield`` whose sent value is discarded (a ``yield v``
    # statement, 3.11+): where a send resumes it, the value not pushed (0: at ``pc``, pushed).
    resume_at = 0
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
    def builtins(self) -> dict[str, Any]:
        """The frame's builtins: its function's (every frame has one), read where a global
        lookup misses (a frame field would cost every call the read)."""
        builtins: dict[str, Any] = self.fn.__builtins__
        return builtins

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
    fn: FunctionType,
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
    f.fn = fn
    f.retval = None
    if names is not None:
        f.names = names
    return f


def own_blocks(f: Frame) -> list[tuple[int, int, int]]:
    """3.10: the frame's block stack, made its own when it pushes its first block."""
    blocks = f.blocks
    if blocks is _SHARED_BLOCKS:
        blocks = f.blocks = []
    return blocks


_SHARED_BLOCKS = Frame.blocks
