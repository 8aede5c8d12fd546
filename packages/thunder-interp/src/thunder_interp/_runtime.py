"""The runtime of one interpretation: call dispatch, frames, the dispatch loop, exceptions.

A :class:`Runtime` is created per call of an interpreted function; everything an interpretation
mutates lives in it (or in the frames it creates), so two interpretations never share state.
"""

from __future__ import annotations

import builtins as _builtins
import functools
import linecache
import os
import sys
import weakref
from collections.abc import Callable, Mapping
from types import CellType, CodeType, FrameType, FunctionType, MethodType, TracebackType
from typing import Any

from thunder_interp import _frame as _frame_module
from thunder_interp._bytecode import normalize
from thunder_interp._callbacks import Callbacks
from thunder_interp._errors import UnsupportedOpcodeError, is_uncatchable
from thunder_interp._frame import NULL, CompiledCode, ExcItem, Frame, new_frame
from thunder_interp._history import HistoryEntry
from thunder_interp._opaque import is_opaque_code
from thunder_interp._provenance import Provenance, ProvenanceKind
from thunder_interp._recursion import DepthGuard, register_loop_codes
from thunder_interp._registry import (
    DEFAULT_OPCODE_TABLE,
    PY_VERSION,
    CompileContext,
    Op,
    OpcodeTable,
)
from thunder_interp._slots import WITHOUT_DEL, lookup_type
from thunder_interp._tracebacks import StubCodes, traceback_entry

__all__ = ["CodeCache", "InternalLookaside", "Runtime", "run_frame"]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

CO_OPTIMIZED = 0x1
CO_NEWLOCALS = 0x2
CO_GENERATOR = 0x20
CO_COROUTINE = 0x80
CO_ITERABLE_COROUTINE = 0x100
CO_ASYNC_GENERATOR = 0x200


_OPAQUE_TYPES = frozenset(
    {
        type(len),
        type([].append),
        type(object.__init__),
        type(str.join),
        type((1).__add__),
        type(dict.__dict__["fromkeys"]),
    }
)


_BUILTIN = type(len)
_METHOD_WRAPPER = type((1).__add__)


class InternalLookaside:
    """A lookaside implemented by the interpreter; it sees the calling frame."""

    __slots__ = ("impl", "name", "unary")

    def __init__(
        self,
        name: str,
        impl: Callable[[Runtime, Frame | None, tuple[Any, ...], dict[str, Any]], Any],
    ) -> None:
        self.name = name
        self.impl = impl
        # ``impl`` of one positional argument, ``unary(rt, arg)``, where it has one (``len``):
        # a call site's call of the builtin with one argument makes no argument tuple.
        self.unary: Callable[[Runtime, Any], Any] | None = getattr(impl, "unary", None)


def _local_names(code: CodeType) -> tuple[str, ...]:
    if PY_VERSION >= (3, 11):
        cells = [c for c in code.co_cellvars if c not in code.co_varnames]
        return tuple(code.co_varnames) + tuple(cells) + tuple(code.co_freevars)
    return tuple(code.co_varnames) + tuple(code.co_cellvars) + tuple(code.co_freevars)


def _unsupported_op(opname: str, filename: str, lineno: int) -> Op:
    def op(f: Frame) -> int:
        raise UnsupportedOpcodeError(opname, f.code.co_filename, lineno)

    return op


_RETURNS = frozenset({"RETURN_VALUE", "RETURN_CONST"})
_YIELDS = frozenset({"YIELD_VALUE"})


def _traced(op: Op, index: int, opname: str, argrepr: str, lineno: int) -> Op:
    """``op`` recording its call, line, instruction and return events in the history."""
    returns = opname in _RETURNS
    yields = opname in _YIELDS

    def traced(f: Frame) -> int:
        rt = f.rt
        history = rt.history
        code = f.code
        depth = rt.depth - rt.c_calls - 1
        name = code.co_name
        if f.history_line == 0:
            history.append(
                HistoryEntry(
                    code.co_filename, name, code.co_firstlineno, index, "", "", depth, "call"
                )
            )
        if lineno != f.history_line and lineno > 0:
            f.history_line = lineno
            text = linecache.getline(code.co_filename, lineno).strip()
            history.append(
                HistoryEntry(code.co_filename, name, lineno, index, "", "", depth, "line", text)
            )
        history.append(HistoryEntry(code.co_filename, name, lineno, index, opname, argrepr, depth))
        nxt = op(f)
        if (returns and nxt == 0) or yields:
            value = f.retval
            history.append(
                HistoryEntry(
                    code.co_filename,
                    name,
                    lineno,
                    index,
                    opname,
                    "",
                    depth,
                    "return" if returns else "yield",
                    type(value).__name__,
                )
            )
        return nxt

    return traced


def compile_code(
    code: CodeType,
    table: OpcodeTable,
    hooked: bool,
    history: bool,
    hooks: frozenset[str],
    blocks: bool = True,
) -> CompiledCode:
    """Compile ``code`` into ops (one closure per instruction), for an interpretation whose
    hook profile is ``hooks`` (``_callbacks.hook_profile``). ``blocks=False``: ops only, never
    basic blocks (a suspendable interpretation needs every frame's value stack in its frame)."""
    normalized = normalize(code)
    names = _local_names(code)
    ctx = CompileContext(code, normalized.instructions, hooked, names, code.co_nlocals, hooks)
    ops: list[Op] = []
    for instr in normalized.instructions:
        factory = table.get(instr.opname)
        if factory is None:
            op = _unsupported_op(instr.opname, code.co_filename, instr.lineno)
        else:
            op = factory(instr, ctx)
        if history:
            op = _traced(op, instr.index, instr.opname, instr.argrepr, instr.lineno)
        ops.append(op)
    cc = CompiledCode(code, normalized.instructions, normalized.handlers, ops, names)
    if blocks and not history and table is DEFAULT_OPCODE_TABLE:
        cc.block_builder = _block_builder(cc, ctx)
    else:
        cc.call_argcount = cc.fast_argcount
    return cc


def _block_builder(cc: CompiledCode, ctx: CompileContext) -> Callable[[], None]:
    """Compile ``cc``'s basic blocks when called (once the code is warm)."""
    from thunder_interp._blocks import compile_blocks
    from thunder_interp.ops.locals import _always_bound

    instructions = ctx.instructions
    local_names = ctx.local_names
    hooked = ctx.hooked
    hooks = ctx.hooks
    # The builder must not keep the code object alive (the memo is keyed by it, weakly).
    bound = [_always_bound(ctx, i) for i in range(len(local_names))]

    def build() -> None:
        if cc.block_builder is None:
            return
        cc.block_builder = None
        cc.call_argcount = cc.fast_argcount
        compile_blocks(
            instructions, cc.handlers, cc.ops, local_names, hooked, bound.__getitem__, hooks, cc
        )

    return build


def warm_up(cc: CompiledCode) -> None:
    """Count one more use of ``cc``; compile its basic blocks once it is warm."""
    cc.warmth += 1
    if cc.warmth >= WARM_THRESHOLD and cc.block_builder is not None:
        cc.block_builder()


# Uses (calls, or backward jumps) of a code object before its basic blocks are found (their
# source generated; each is compiled once it is hot, see ``_blocks``).
WARM_THRESHOLD = 8


_COMPILED: weakref.WeakKeyDictionary[
    CodeType, dict[tuple[bool, bool, frozenset[str], bool], CompiledCode]
] = weakref.WeakKeyDictionary()


def compile_code_memo(
    code: CodeType,
    table: OpcodeTable,
    hooked: bool,
    history: bool,
    hooks: frozenset[str],
    blocks: bool = True,
) -> CompiledCode:
    """:func:`compile_code`, memoized per code object for the default table (a pure memo: every
    interpreted function and runtime with the same mode and hook profile shares it)."""
    if table is not DEFAULT_OPCODE_TABLE:
        return compile_code(code, table, hooked, history, hooks, blocks)
    per_code = _COMPILED.get(code)
    if per_code is None:
        per_code = _COMPILED[code] = {}
    key = (hooked, history, hooks, blocks)
    cc = per_code.get(key)
    if cc is None:
        cc = per_code[key] = compile_code(code, table, hooked, history, hooks, blocks)
    return cc


def lookaside_codes(table: Mapping[Any, Any]) -> frozenset[CodeType]:
    """The code objects of the Python functions that are keys of ``table`` (of a bound method:
    its function's). A tool builds a table of the same keys for every interpretation (only the
    replacements differ): the last answer is kept, by the keys, as hashing thousands of code
    objects costs milliseconds and comparing the keys microseconds."""
    global _last_codes
    keys = frozenset(table)
    last = _last_codes
    if last is not None and last[0] == keys:
        return last[1]
    codes = set()
    for key in keys:
        fn = key.__func__ if type(key) is MethodType else key
        if type(fn) is FunctionType:
            codes.add(fn.__code__)
    found = frozenset(codes)
    _last_codes = (keys, found)  # (one tuple: another thread sees either)
    return found


# The keys of the last table ``lookaside_codes`` answered for, and its answer (one table's keys
# kept alive until another's replace them).
_last_codes: tuple[frozenset[Any], frozenset[CodeType]] | None = None


_NO_CALLBACKS = Callbacks()

# What ``Runtime.call_function`` finds for a code object it has not seen.
_NO_ENTRY: tuple[Any, Any] = (None, None)


class CodeCache:
    """Compiled code per code object for one table and mode (owned by an interpreted function)."""

    __slots__ = ("blocks", "entries", "history", "hooked", "hooks", "table")

    def __init__(
        self,
        table: OpcodeTable,
        hooked: bool,
        history: bool,
        hooks: frozenset[str],
        blocks: bool = True,
    ) -> None:
        self.table = table
        self.hooked = hooked
        self.history = history
        self.hooks = hooks  # the hook profile (``_callbacks.hook_profile``)
        self.blocks = blocks  # False: ops only (see compile_code)
        self.entries: dict[int, tuple[CodeType, CompiledCode]] = {}

    def get(self, code: CodeType) -> CompiledCode:
        entry = self.entries.get(id(code))
        if entry is not None and entry[0] is code:
            return entry[1]
        cc = compile_code_memo(code, self.table, self.hooked, self.history, self.hooks, self.blocks)
        cc.native = is_opaque_code(code)
        if cc.native:
            cc.fast_argcount = cc.call_argcount = -1
        self.entries[id(code)] = (code, cc)
        return cc


def lookup_special(obj: Any, name: str) -> Any:
    """``_PyObject_LookupSpecial``: look ``name`` up on the type and bind it; NULL if missing."""
    attr = lookup_type(type(obj), name)
    if attr is NULL:
        return NULL
    get = getattr(type(attr), "__get__", None)
    if get is not None:
        return get(attr, obj, type(obj))
    return attr


def _is_interpreter_frame(frame: FrameType) -> bool:
    return frame.f_code.co_filename.startswith(_PACKAGE_DIR)


def strip_interpreter_frames(tb: TracebackType | None) -> TracebackType | None:
    """Drop the interpreter's own frames from the head of a traceback."""
    while tb is not None and _is_interpreter_frame(tb.tb_frame):
        tb = tb.tb_next
    return tb


def chain_context(exc: BaseException, handled: BaseException | None) -> None:
    """Implicit exception chaining as ``_PyErr_SetObject`` does it."""
    if handled is None or handled is exc:
        return
    node = handled
    while True:
        ctx = node.__context__
        if ctx is None:
            break
        if ctx is exc:
            node.__context__ = None
            break
        node = ctx
    exc.__context__ = handled


class Runtime:
    """Per-call state of an interpretation."""

    # Slots: the dispatch loop and generated blocks read its fields on every call.
    __slots__ = (
        "__weakref__",
        "_binders",
        "_stub_codes",
        "attribute_records",
        "c_calls",
        "callbacks",
        "cb_delete_attr",
        "cb_delete_cell",
        "cb_delete_global",
        "cb_delete_item",
        "cb_descriptor_get",
        "cb_exception_handled",
        "cb_identity",
        "cb_identity_used",
        "cb_load_attr",
        "cb_load_attr_missing",
        "cb_load_cell",
        "cb_load_const",
        "cb_load_defaults",
        "cb_load_generic_attr",
        "cb_load_generic_attr_missing",
        "cb_load_global",
        "cb_load_item",
        "cb_load_item_missing",
        "cb_make_cell",
        "cb_opaque",
        "cb_store_attr",
        "cb_store_cell",
        "cb_store_global",
        "cb_store_item",
        "cb_write_failed",
        "code_entries",
        "codes",
        "depth",
        "depth_floor",
        "depth_limit",
        "exc_item",
        "fast_builtins",
        "global_records",
        "guard",
        "history",
        "iter_sources",
        "lookaside_codes",
        "lookasides",
        "native_special",
        "native_special_cache",
        "plain_opaque",
        "prov",
        "record_history",
        "token",
        "unwound",
    )

    def __init__(
        self,
        codes: CodeCache,
        lookasides: Mapping[Any, Any],
        callbacks: Callbacks | None,
        provenance: bool,
        record_history: bool,
        codes_with_lookasides: frozenset[CodeType] | None = None,
    ) -> None:
        self.codes = codes
        self.code_entries = codes.entries
        self.lookasides = lookasides
        # The code objects of the Python functions (and methods) the lookasides are for: a call
        # site may skip the lookaside test for functions with any other code.
        self.lookaside_codes = (
            lookaside_codes(lookasides) if codes_with_lookasides is None else codes_with_lookasides
        )
        self.callbacks = callbacks
        cb = callbacks if callbacks is not None else _NO_CALLBACKS
        self.cb_load_global = cb.load_global
        self.cb_load_cell = cb.load_closure_cell
        self.cb_load_const = cb.load_constant
        self.cb_load_attr = cb.load_attribute
        self.cb_load_attr_missing = cb.load_attribute_missing
        self.cb_load_generic_attr = cb.load_generic_attribute or cb.load_attribute
        self.cb_load_generic_attr_missing = (
            cb.load_generic_attribute_missing or cb.load_attribute_missing
        )
        self.cb_load_item_missing = cb.load_item_missing
        self.cb_store_global = cb.store_global
        self.cb_store_cell = cb.store_closure_cell
        self.cb_make_cell = cb.make_cell
        self.cb_load_defaults = cb.load_defaults
        self.cb_store_attr = cb.store_attribute
        self.cb_store_item = cb.store_item
        self.cb_load_item = cb.load_item
        self.cb_delete_global = cb.delete_global
        self.cb_delete_cell = cb.delete_closure_cell
        self.cb_delete_attr = cb.delete_attribute
        self.cb_delete_item = cb.delete_item
        self.cb_opaque = cb.opaque_call
        self.cb_exception_handled = cb.exception_handled
        self.cb_write_failed = cb.write_failed
        self.cb_identity = cb.compare_identity
        self.cb_identity_used = cb.identity_used
        self.cb_descriptor_get = cb.descriptor_get
        self.prov: dict[int, tuple[Any, Provenance]] | None = {} if provenance else None
        self.global_records: dict[tuple[str, str | None], Provenance] = {}
        # Records of attributes of recorded values, by (id of the parent record, name): records
        # are immutable, and the parents live in ``prov``.
        self.attribute_records: dict[tuple[int, str], Provenance] = {}
        # Iterators over recorded lists/tuples: id -> [iterator, provenance of the sequence, k].
        self.iter_sources: dict[int, list[Any]] = {}
        # Opaque calls need no bookkeeping: CALL may call builtins directly.
        self.plain_opaque = cb.opaque_call is None and not provenance
        # Which Python special methods run natively where CPython calls them implicitly.
        self.native_special: Callable[[FunctionType], bool] | None = None
        self.native_special_cache: dict[CodeType, bool] = {}
        # Builtins with a slot lookaside that may run natively on one plain argument.
        self.fast_builtins: frozenset[Any] = frozenset()
        self.history: list[HistoryEntry] = []
        self.record_history = record_history
        # Interpreted frames running; the dispatch loop consults ``guard`` (set by the entry
        # point) when the depth reaches ``depth_limit`` or drops below ``depth_floor``.
        self.depth = 0
        self.depth_limit = 1 << 62
        self.depth_floor = -1
        self.guard: DepthGuard | None = None
        self.c_calls = 0  # levels of ``depth`` that are C calls (3.10/3.11), not frames
        # An exception a re-raise found no handler for in its frame (see :meth:`unwind`).
        self.unwound: BaseException | None = None
        self.exc_item = ExcItem(sys.exc_info()[1], None)
        # Identifies this interpretation to generated blocks (see ``_blocks``): a site that
        # holds it did what it needs to do once per interpretation.
        self.token = object()
        self._stub_codes: StubCodes = {}
        # id(fn) -> (fn, its binder, the defaults of fn it was made for)
        self._binders: dict[int, tuple[FunctionType, FunctionType, Any, Any]] = {}

    # ------------------------------------------------------------------------------------------
    # provenance

    def provenance_of(self, value: Any) -> Provenance | None:
        table = self.prov
        if table is None:
            return None
        entry = table.get(id(value))
        if entry is not None and entry[0] is value:
            return entry[1]
        return None

    def attribute_record(self, parent: Provenance, name: str) -> Provenance:
        """The record of attribute ``name`` of a value recorded as ``parent``."""
        key = (id(parent), name)
        prov = self.attribute_records.get(key)
        if prov is None:
            prov = self.attribute_records[key] = Provenance(
                ProvenanceKind.ATTRIBUTE, name=name, parent=parent
            )
        return prov

    def record(self, value: Any, prov: Provenance) -> None:
        table = self.prov
        if table is not None:
            key = id(value)
            entry = table.get(key)
            if entry is None or entry[0] is not value:
                table[key] = (value, prov)

    # ------------------------------------------------------------------------------------------
    # exceptions

    def topmost_handled(self) -> BaseException | None:
        item: ExcItem | None = self.exc_item
        while item is not None:
            if item.value is not None:
                return item.value
            item = item.previous
        return None

    def traceback_for(self, f: Frame, exc: BaseException, pc: int) -> TracebackType | None:
        """``exc``'s traceback with an entry for ``f`` (user file and line) on top."""
        tb = strip_interpreter_frames(exc.__traceback__)
        lines = f.cc.lines
        lineno = lines[pc] if 0 <= pc < len(lines) else f.code.co_firstlineno
        try:
            return traceback_entry(self._stub_codes, f, tb, lineno)
        except Exception:  # pragma: no cover - defensive
            return exc.__traceback__

    def write_failed(self, token: Any) -> None:
        """The store or deletion whose hook returned ``token`` raised: nothing was written."""
        if token is not None and self.cb_write_failed is not None:
            self.cb_write_failed(token)

    def unwind(self, f: Frame, exc: BaseException, pc: int, chain: bool = True) -> int:
        """Route ``exc`` (raised at instruction ``pc`` of ``f``) to a handler, or re-raise it.

        ``chain=False`` for re-raises (``RERAISE``, bare ``raise``): CPython neither chains them
        nor adds a traceback entry.
        """
        if chain:
            # CPython's "error:" label: the frame is added to the traceback.
            exc.__traceback__ = self.traceback_for(f, exc, pc)
        if is_uncatchable(exc):
            f.pc = pc
            f.raised_out = True
            if not chain:
                self.unwound = exc
            raise exc
        if self.cb_exception_handled is not None and _has_handler(f, pc):
            self.cb_exception_handled(exc)
        if chain and exc.__context__ is None:
            chain_context(exc, self.topmost_handled())
        if PY_VERSION >= (3, 11):
            handler = f.cc.handlers[pc]
            if handler is not None:
                stack = f.stack
                del stack[handler.depth :]
                if handler.lasti:
                    stack.append(f.lasti or pc)
                f.lasti = 0
                stack.append(exc)
                return handler.target
        else:
            target = self._unwind_blocks(f, exc)
            if target:
                f.lasti = 0
                return target
        f.pc = pc
        f.raised_out = True
        if not chain:
            # Raised from inside an op: the dispatch loop must let it through, not unwind again.
            self.unwound = exc
        raise exc

    def _unwind_blocks(self, f: Frame, exc: BaseException) -> int:
        """3.10: pop the block stack until a SETUP_FINALLY block takes the exception."""
        blocks = f.blocks
        stack = f.stack
        while blocks:
            kind, handler, level = blocks.pop()
            if kind == BLOCK_EXCEPT_HANDLER:
                del stack[level + 3 :]
                stack.pop()  # type
                value = stack.pop()
                stack.pop()  # traceback
                self.exc_item.value = value
                continue
            del stack[level:]
            if kind == BLOCK_FINALLY:
                blocks.append((BLOCK_EXCEPT_HANDLER, -1, len(stack)))
                prev = self.exc_item.value
                stack.append(prev.__traceback__ if prev is not None else None)
                stack.append(prev)
                stack.append(type(prev) if prev is not None else None)
                self.exc_item.value = exc
                stack.append(exc.__traceback__)
                stack.append(exc)
                stack.append(type(exc))
                return handler
        return 0

    # ------------------------------------------------------------------------------------------
    # calls

    def call(self, fn: Any, args: Any, kwargs: dict[str, Any] | None, caller: Frame | None) -> Any:
        """Call ``fn`` the way interpreted code does: lookasides, then interpret or call opaquely."""
        try:
            la = self.lookasides.get(fn)
        except TypeError:
            la = None
        if la is not None:
            if type(la) is InternalLookaside:
                return la.impl(self, caller, tuple(args), kwargs or {})
            return la(*args, **kwargs) if kwargs else la(*args)
        t = type(fn)
        if t is FunctionType:
            return self.call_function(fn, args, kwargs)
        if t in _OPAQUE_TYPES:
            if t is _METHOD_WRAPPER or (
                t is _BUILTIN and kwargs and type(getattr(fn, "__self__", None)) is list
            ):
                # A bound slot (``super().__getattribute__``) or ``lst.sort(key=...)``: the
                # lookaside of the unbound one.
                owner = fn.__objclass__ if t is _METHOD_WRAPPER else list
                la = self.lookasides.get(owner.__dict__.get(fn.__name__))
                if type(la) is InternalLookaside:
                    return la.impl(self, caller, (fn.__self__, *args), kwargs or {})
            return self.opaque_call(fn, args, kwargs)
        if t is MethodType:
            return self.call(fn.__func__, (fn.__self__, *args), kwargs, caller)
        if t is functools.partial:
            func, bound, keywords = fn.func, fn.args, fn.keywords
            hook = self.cb_load_attr
            if hook is not None:  # what it holds is read as its attributes (they can change)
                func = hook(fn, "func", func, None)
                bound = hook(fn, "args", bound, None)
                keywords = hook(fn, "keywords", keywords, None)
            kw = {**keywords, **kwargs} if kwargs else keywords
            return self.call(func, (*bound, *args), kw, caller)
        if isinstance(fn, type):
            return self.instantiate(fn, args, kwargs, caller)
        if t is staticmethod:
            return self.call(fn.__func__, args, kwargs, caller)
        dunder_call = lookup_type(t, "__call__")
        if type(dunder_call) is FunctionType:
            if _COUNTS_C_CALLS:
                return self.counted_c_call(self.call, dunder_call, (fn, *args), kwargs, caller)
            return self.call(dunder_call, (fn, *args), kwargs, caller)
        # A C type whose calls run Python code of their arguments (``operator.attrgetter``):
        # the lookaside of its ``__call__`` answers for its instances.
        try:
            la = self.lookasides.get(dunder_call)
        except TypeError:  # an unhashable one (pybind11's ``instancemethod``: a ScriptMethod's)
            la = None
        if type(la) is InternalLookaside:
            return la.impl(self, caller, (fn, *args), kwargs or {})
        return self.opaque_call(fn, args, kwargs)

    def counted_c_call(
        self,
        method: Callable[[Any, Any, dict[str, Any] | None, Frame | None], Any],
        fn: Any,
        args: Any,
        kwargs: dict[str, Any] | None,
        caller: Frame | None,
    ) -> Any:
        """``method(fn, args, kwargs, caller)`` counted as one level of recursion, as 3.10 and 3.11
        count the C call of an object that is not a function (an instance's ``__call__``, a
        Python class). (No ``*args`` call: 3.11+ runs those on the C stack.)"""
        depth = self.depth
        if depth >= self.depth_limit:
            guard = self.guard
            assert guard is not None
            guard.deeper(depth, sys._getframe(), " while calling a Python object")
        self.depth = depth + 1
        self.c_calls += 1
        try:
            return method(fn, args, kwargs, caller)
        finally:
            self.depth = depth
            self.c_calls -= 1
            if depth < self.depth_floor:
                guard = self.guard
                assert guard is not None
                guard.shallower(depth)

    def opaque_call(self, fn: Any, args: Any, kwargs: dict[str, Any] | None) -> Any:
        cb = self.cb_opaque
        if cb is not None:
            result = cb(fn, tuple(args), dict(kwargs) if kwargs else {})
        elif kwargs:
            result = fn(*args, **kwargs)
        else:
            result = fn(*args)
        table = self.prov
        if table is not None:
            entry = table.get(id(result))
            if entry is None or entry[0] is not result:
                name = (
                    getattr(fn, "__qualname__", None)
                    or getattr(fn, "__name__", None)
                    or type(fn).__name__
                )
                prov = Provenance(ProvenanceKind.OPAQUE_CALL, function=str(name))
                table[id(result)] = (result, prov)
        return result

    def instantiate(
        self, cls: type, args: Any, kwargs: dict[str, Any] | None, caller: Frame | None
    ) -> Any:
        meta = type(cls)
        if meta is not type:
            meta_call = lookup_type(meta, "__call__")
            if type(meta_call) is FunctionType:
                if _COUNTS_C_CALLS:
                    return self.counted_c_call(self.call, meta_call, (cls, *args), kwargs, caller)
                return self.call(meta_call, (cls, *args), kwargs, caller)
        klass: Any = cls
        new: Any = klass.__new__
        init: Any = klass.__init__
        if type(init) is not FunctionType:
            if type(new) is not FunctionType:
                if issubclass(cls, type):
                    args = namespace_with_module(caller, tuple(args), 2)
                return self.opaque_call(cls, args, kwargs)
        elif new is object.__new__ and not kwargs and init not in self.lookasides:
            return self._construct_plain(cls, init, args)
        return self.construct(cls, args, kwargs, caller)

    def _construct_plain(self, cls: Any, init: FunctionType, args: Any) -> Any:
        """``_construct`` for a class made by ``type`` with ``object.__new__`` and a Python
        ``__init__`` (no lookaside for it), called with positional arguments."""
        obj = object.__new__(cls) if cls in WITHOUT_DEL else self._new_object(cls)
        if type(args) is list:
            args.insert(0, obj)
        else:
            args = [obj, *args]
        code = init.__code__
        entry = self.code_entries.get(id(code), _NO_ENTRY)
        warm = entry[0] is code and len(args) == entry[1].call_argcount
        if _COUNTS_C_CALLS:  # counted as one more level, as ``counted_c_call`` does
            depth = self.depth
            if depth >= self.depth_limit:
                guard = self.guard
                assert guard is not None
                guard.deeper(depth, sys._getframe(), " while calling a Python object")
            self.depth = depth + 1
            self.c_calls += 1
            try:
                if warm:
                    result = entry[1].enter(self, init, code, entry[1], args)
                else:
                    result = self.call_function(init, args, None)
            finally:
                self.depth = depth
                self.c_calls -= 1
                if depth < self.depth_floor:
                    self._shallower(depth)
        elif warm:
            result = entry[1].enter(self, init, code, entry[1], args)
        else:
            result = self.call_function(init, args, None)
        if result is not None:
            raise TypeError(f"__init__() should return None, not '{type(result).__name__}'")
        return obj

    def _new_object(self, cls: Any) -> Any:
        """``object.__new__(cls)``; an opaque call (seen by the ``opaque_call`` hook) where the
        class has a ``__del__``: the object's death is an effect of the program."""
        if lookup_type(cls, "__del__") is NULL:
            return object.__new__(cls)
        return self.opaque_call(object.__new__, (cls,), None)

    def construct(
        self, cls: Any, args: Any, kwargs: dict[str, Any] | None, caller: Frame | None
    ) -> Any:
        """``type.__call__(cls, *args, **kwargs)``."""
        if _COUNTS_C_CALLS:
            return self.counted_c_call(self._construct, cls, args, kwargs, caller)
        return self._construct(cls, args, kwargs, caller)

    def _construct(
        self, cls: Any, args: Any, kwargs: dict[str, Any] | None, caller: Frame | None
    ) -> Any:
        """``type.__call__`` for a class whose ``__new__`` or ``__init__`` is Python code."""
        new: Any = cls.__new__
        init: Any = cls.__init__
        if type(new) is FunctionType:
            obj = self.call(new, (cls, *args), kwargs, caller)
        elif new is object.__new__:
            obj = self._new_object(cls)
        else:
            new_args = (
                namespace_with_module(caller, tuple(args), 2) if new is type.__new__ else args
            )
            obj = new(cls, *new_args, **kwargs) if kwargs else new(cls, *new_args)
        if not isinstance(obj, cls):
            return obj
        if type(obj) is not cls:
            init = lookup_type(type(obj), "__init__")
        if type(init) is FunctionType:
            if init in self.lookasides:
                result = self.call(init, (obj, *args), kwargs, caller)
            else:
                result = self.call_function(init, [obj, *args], kwargs)
        else:
            result = init(obj, *args, **kwargs) if kwargs else init(obj, *args)
        if result is not None:
            raise TypeError(f"__init__() should return None, not '{type(result).__name__}'")
        return obj

    def _binder(self, fn: FunctionType) -> FunctionType:
        defaults, kwdefaults = fn.__defaults__, fn.__kwdefaults__
        entry = self._binders.get(id(fn))
        if entry is not None and entry[0] is fn and entry[2] is defaults and entry[3] is kwdefaults:
            return entry[1]
        bound_defaults, bound_kwdefaults = defaults, kwdefaults
        hook = self.cb_load_defaults
        if hook is not None and (defaults or kwdefaults):
            seen = hook(fn)
            if seen is not None:
                bound_defaults, bound_kwdefaults = seen
        binder = FunctionType(_binder_code(fn.__code__), {}, fn.__name__, bound_defaults, None)
        binder.__kwdefaults__ = bound_kwdefaults
        binder.__qualname__ = fn.__qualname__
        self._binders[id(fn)] = (fn, binder, defaults, kwdefaults)
        return binder

    def make_frame(self, fn: FunctionType, args: Any, kwargs: dict[str, Any] | None) -> Frame:
        code = fn.__code__
        cc = self.codes.get(code)
        if not kwargs and cc.is_simple and len(args) == cc.argcount:
            lv = [*args, *cc.padding]
        else:
            values = self._binder(fn)(*args, **kwargs) if kwargs else self._binder(fn)(*args)
            lv = [*values, *([NULL] * (cc.nslots - len(values)))]
        names = None if code.co_flags & CO_OPTIMIZED else _unoptimized_names(code, fn.__globals__)
        f = new_frame(self, cc, code, lv, fn.__globals__, fn, names)
        if PY_VERSION < (3, 11) and (code.co_cellvars or code.co_freevars):
            _setup_cells_310(f, fn)
        return f

    def call_function(self, fn: FunctionType, args: Any, kwargs: dict[str, Any] | None) -> Any:
        """Interpret a call of the Python function ``fn`` (the hot path of every call).

        A list ``args`` is taken over (it becomes the frame's local slots): pass a temporary.
        """
        code = fn.__code__
        entry = self.code_entries.get(id(code), _NO_ENTRY)
        cc = entry[1]
        # One test for the fast path: known code, warm, positional arguments that fill exactly
        # the parameters of a plain signature (see CompiledCode.call_argcount).
        if entry[0] is not code or kwargs or len(args) != cc.call_argcount:
            return self._call_function_general(fn, args, kwargs)
        return cc.enter(self, fn, code, cc, args if type(args) is list else [*args])

    def call_from_site(self, fn: FunctionType, args: list[Any], site: list[Any]) -> Any:
        """``call_function(fn, args, None)`` from a call site of a generated block (``fn`` has no
        lookaside). The site then enters later functions with the same code straight through
        ``enter_frame`` (see ``_blocks``): ``site[0]`` becomes ``(code, lookaside_codes, cc)``
        unless a lookaside may be for a function with this code."""
        code = fn.__code__
        entry = self.code_entries.get(id(code), _NO_ENTRY)
        cc = entry[1]
        if entry[0] is not code or len(args) != cc.call_argcount:
            return self._call_function_general(fn, args, None)
        codes = self.lookaside_codes
        if code not in codes:
            site[0] = (code, codes, cc)
        return cc.enter(self, fn, code, cc, args)

    def _shallower(self, depth: int) -> None:
        guard = self.guard
        assert guard is not None
        guard.shallower(depth)

    def _call_function_general(
        self, fn: FunctionType, args: Any, kwargs: dict[str, Any] | None
    ) -> Any:
        cc = self.codes.get(fn.__code__)
        if cc.block_builder is not None:
            warm_up(cc)
        if cc.native:
            return fn(*args, **kwargs) if kwargs else fn(*args)
        f = self.make_frame(fn, args, kwargs)
        flags = cc.flags
        if flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR):
            return self.make_generator(f, flags)
        run_frame(f)
        return f.retval

    def make_generator(self, f: Frame, flags: int) -> Any:
        from thunder_interp._generators import make_async_generator, make_coroutine, make_generator

        if PY_VERSION >= (3, 11):
            # Run the preamble (MAKE_CELL, COPY_FREE_VARS) up to RETURN_GENERATOR.
            run_frame(f)
        if flags & CO_COROUTINE:
            return make_coroutine(f)
        if flags & CO_ASYNC_GENERATOR:
            return make_async_generator(f)
        return make_generator(f)

    def run_class_body(self, fn: FunctionType, namespace: Any) -> Any:
        code = fn.__code__
        cc = self.codes.get(code)
        lv = [NULL] * cc.nslots
        f = new_frame(self, cc, code, lv, fn.__globals__, fn, namespace)
        if PY_VERSION < (3, 11) and (code.co_cellvars or code.co_freevars):
            _setup_cells_310(f, fn)
        run_frame(f)
        return f.retval


BLOCK_FINALLY = 1
BLOCK_EXCEPT_HANDLER = 2


def _has_handler(f: Frame, pc: int) -> bool:
    """Whether an exception raised at ``pc`` of ``f`` enters one of the frame's handlers."""
    if PY_VERSION >= (3, 11):
        return f.cc.handlers[pc] is not None
    return any(kind != BLOCK_EXCEPT_HANDLER for kind, _, _ in f.blocks)


# 3.10 and 3.11 count C calls of objects that are not functions in the recursion depth too.
_COUNTS_C_CALLS = PY_VERSION < (3, 12)


def namespace_with_module(caller: Frame | None, args: tuple[Any, ...], index: int) -> Any:
    """The arguments of a class creation by ``type`` (``args[index]`` is the namespace), with the
    ``__module__`` that CPython takes from the calling frame: the interpreted caller's globals,
    not those of the interpreter's frame that makes the call."""
    if caller is None or len(args) != index + 1:
        return args
    namespace = args[index]
    if not isinstance(namespace, dict) or "__module__" in namespace:
        return args
    module = caller.globals.get("__name__")
    if module is None:
        return args
    return (*args[:index], {**namespace, "__module__": module})


def _unoptimized_names(code: CodeType, globals_: dict[str, Any]) -> dict[str, Any]:
    """The locals of a function whose code is not CO_OPTIMIZED (module, class body or exec code
    wrapped in a function): its globals, as in CPython (3.10: a new dict for CO_NEWLOCALS code)."""
    if PY_VERSION < (3, 11) and code.co_flags & CO_NEWLOCALS:
        return {}
    return globals_


def _setup_cells_310(f: Frame, fn: FunctionType) -> None:
    code = f.code
    nlocals = code.co_nlocals
    lv = f.lv
    argnames = code.co_varnames[
        : code.co_argcount
        + code.co_kwonlyargcount
        + bool(code.co_flags & 4)
        + bool(code.co_flags & 8)
    ]
    made = f.rt.cb_make_cell
    for i, name in enumerate(code.co_cellvars):
        if name in argnames:
            j = code.co_varnames.index(name)
            lv[nlocals + i] = CellType(lv[j])
            lv[j] = NULL
        else:
            lv[nlocals + i] = CellType()
        if made is not None:
            made(lv[nlocals + i])
    base = nlocals + len(code.co_cellvars)
    for i, cell in enumerate(fn.__closure__ or ()):
        lv[base + i] = cell


def _binder_code(code: CodeType) -> CodeType:
    return _binder_code_cached(code)


@functools.lru_cache(maxsize=1024)
def _binder_code_cached(code: CodeType) -> CodeType:
    nargs = code.co_argcount
    nkw = code.co_kwonlyargcount
    varargs = bool(code.co_flags & 4)
    varkw = bool(code.co_flags & 8)
    total = nargs + nkw + varargs + varkw
    names = [n if n.isidentifier() else f"_p{i}" for i, n in enumerate(code.co_varnames[:total])]
    params: list[str] = []
    for i in range(nargs):
        params.append(names[i])
        if i + 1 == code.co_posonlyargcount:
            params.append("/")
    pos = nargs
    if varargs:
        params.append("*" + names[nargs + nkw])
    elif nkw:
        params.append("*")
    params.extend(names[pos : pos + nkw])
    if varkw:
        params.append("**" + names[nargs + nkw + varargs])
    body = ", ".join(names) + ("," if len(names) == 1 else "")
    source = f"def binder({', '.join(params)}):\n    return ({body})\n"
    module = compile(source, code.co_filename, "exec")
    for const in module.co_consts:
        if isinstance(const, CodeType):
            binder = const.replace(co_name=code.co_name)
            if PY_VERSION >= (3, 11):
                binder = binder.replace(co_qualname=code.co_qualname)
            return binder
    raise AssertionError("unreachable")  # pragma: no cover


def enter_frame(
    rt: Runtime, fn: FunctionType, code: CodeType, cc: CompiledCode, args: list[Any]
) -> Any:
    """Run a call of ``fn`` whose positional ``args`` fill its parameters exactly (``cc`` is its
    warm compiled ``code``): the frame and the dispatch loop inline, as this runs on every call.
    ``args`` is taken over as the frame's local slots."""
    f = Frame()
    f.rt = rt
    f.cc = cc
    f.code = code
    ops = cc.ops
    if cc.padding:
        args.extend(cc.padding)
    f.lv = args
    f.stack = []
    f.globals = fn.__globals__
    f.fn = fn  # (``f.builtins``, the function's, are read when needed)
    # (``retval`` stays unset: only a return, which sets it, ends the loop; ``pc`` and 3.10's
    # ``blocks`` keep their class defaults until set.)
    pc = 1
    depth = rt.depth
    if depth >= rt.depth_limit:
        guard = rt.guard
        assert guard is not None
        guard.deeper(depth, sys._getframe())  # raises RecursionError where CPython would
    rt.depth = depth + 1
    try:
        while pc:
            pc = ops[pc](f)
    except BaseException as e:
        exc = e  # handled below, outside this handler (no implicit exception chaining)
    else:
        rt.depth = depth
        if depth < rt.depth_floor:
            rt._shallower(depth)
        return f.retval
    try:
        resume_after_exception(f, exc, pc)
    finally:
        rt.depth = depth
        if depth < rt.depth_floor:
            rt._shallower(depth)
    return f.retval


def run_frame(f: Frame, exc: BaseException | None = None) -> None:
    """Run ``f`` from ``f.pc`` until it returns, yields, or raises (``exc``: thrown in first)."""
    rt = f.rt
    depth = rt.depth
    if depth >= rt.depth_limit:
        guard = rt.guard
        assert guard is not None
        guard.deeper(depth, sys._getframe())  # raises RecursionError where CPython would
    rt.depth = depth + 1
    try:
        ops = f.cc.ops
        pc = f.pc
        if exc is not None:
            pc = rt.unwind(f, exc, pc)
        while True:
            try:
                while pc:
                    pc = ops[pc](f)
                return
            except BaseException as e:
                if e is rt.unwound:
                    rt.unwound = None
                    raise
                owners = getattr(ops[pc], "block_owners", None)
                if owners is not None:
                    pc = _block_fault_index(e, ops[pc], owners, pc)
                pc = rt.unwind(f, e, pc)
    finally:
        rt.depth = depth
        if depth < rt.depth_floor:
            guard = rt.guard
            assert guard is not None
            guard.shallower(depth)


def resume_after_exception(f: Frame, exc: BaseException, pc: int) -> None:
    """Go on running ``f`` after ``exc`` was raised at instruction ``pc`` (by its handler, or
    re-raise it); the caller keeps the depth count."""
    rt = f.rt
    ops = f.cc.ops
    while True:
        if exc is rt.unwound:
            rt.unwound = None
            raise exc
        owners = getattr(ops[pc], "block_owners", None)
        if owners is not None:
            pc = _block_fault_index(exc, ops[pc], owners, pc)
        pc = rt.unwind(f, exc, pc)
        try:
            while pc:
                pc = ops[pc](f)
            return
        except BaseException as e:
            exc = e


register_loop_codes(run_frame.__code__, enter_frame.__code__, resume_after_exception.__code__)
_frame_module.DEFAULT_ENTER = enter_frame


def _block_fault_index(exc: BaseException, op: Any, owners: dict[int, int], default: int) -> int:
    from thunder_interp._blocks import block_fault_index

    return block_fault_index(exc, op, owners, default)


_ = _builtins
