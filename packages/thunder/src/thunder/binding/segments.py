"""Thunder's own segments of a call split at a function run natively (``THUNDER_OWN_SEGMENTS=0``
switches them off).

A call that reaches a function run natively (``thunder.run_natively``, ``torch.compiler.disable``)
is traced in a suspendable interpretation; at the call of the native function's wrapper the
interpretation stops (``thunder_interp.suspend``) and the trace so far is the first segment: its
return value is the call to make (the function and its arguments) and the frames' state (their
local slots and value stacks), as a template the epilogue rebuilds on every call. The native
function runs on real values, then the continuation: a program of its own (its own cache,
prologue and autograd node) whose arguments are the native call's result and the frames' state,
traced by resuming the frames (``SuspendableFunction.resume``) with the bound arguments in their
slots. Its guards run after the native call, so what the native function changed decides what
follows. A later native call suspends the continuation again.

What the state cannot carry exactly refuses the segments (``SegmentRefused``; the call runs split
by torch.compile): a frame's cell a closure holds, a closure cell the call made, iterators other
than over a list, tuple or range, an object met twice inside the state, a ``with`` block around
the call, a generator's frame, a frame in an except clause (``SuspensionRefused``).
"""

from __future__ import annotations

import dataclasses
import gc
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

from thunder.errors import RunsNatively
from thunder_interp import (
    UNBOUND,
    Suspended,
    SuspendedFrame,
    Suspension,
    SuspensionRefused,
    suspend,
)
from thunder_ir import Proxy

__all__ = [
    "DONE",
    "Continuation",
    "SegmentHead",
    "SegmentRefused",
    "Segmented",
    "Shape",
    "run_segment",
    "suspend_at_native_call",
]

DONE = -1
"""The first item of a segment's return value where the call ended: the second is its value."""


class SegmentRefused(Exception):
    """The call cannot run as thunder's own segments (``reason``): it runs split by
    torch.compile, as without them. Raised before any segment ran."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def suspend_at_native_call(*args: Any, **kwargs: Any) -> Any:
    """The lookaside of ``set_eval_frame`` in a segment's trace: the wrapper of a function run
    natively calls it first; the interpretation stops there (the wrapper's frame is dropped:
    the wrapper is the native call). Where it cannot stop, the call runs split as before."""
    try:
        suspend(_NATIVE_CALL, args, kwargs)
    except SuspensionRefused as e:
        raise RunsNatively(
            "calls a function marked torch.compiler.disable (torch._dynamo.disable, "
            f"thunder.run_natively), where its call cannot be a segment's end ({e.reason})"
        ) from None


_NATIVE_CALL = object()  # what suspend is told: the callable is the wrapper (its frame)

_ITERATOR_TYPES = {type(iter([])): list, type(iter(())): tuple, type(iter(range(0))): range}
# A plain dict's iterators (a ModuleList's or ModuleDict's loop: over its ``_modules``), by the
# view each iterates
_DICT_ITERATOR_TYPES: dict[type, Any] = {
    type(iter({}.keys())): dict.keys,
    type(iter({}.values())): dict.values,
    type(iter({}.items())): dict.items,
}


@dataclasses.dataclass(frozen=True)
class _Iter:
    """An iterator of the state: over the sequence in state value ``value`` (or the constant
    ``constant``, a range), at ``index``."""

    value: int | None
    index: int
    constant: Any = None


@dataclasses.dataclass(frozen=True)
class _DictIter:
    """An iterator over a view of the dict in state value ``value``, ``index`` items in, made
    when the dict had ``keys`` (the shape's: a resume over other keys is CPython's error)."""

    value: int
    view: Any  # dict.keys, dict.values or dict.items
    index: int
    keys: tuple[Any, ...]


@dataclasses.dataclass(frozen=True)
class _Cell:
    """A frame's own cell, made again for each resume, holding what ``content`` marks (None:
    empty)."""

    content: Any


@dataclasses.dataclass(frozen=True)
class _Value:
    """A slot whose object is the state value ``value`` (its index among the values)."""

    value: int


@dataclasses.dataclass(frozen=True)
class _Const:
    """An object of the state kept by the shape, the same on every resume: a function (one whose
    closure or defaults hold traced values is refused), a class, a C module's function, a
    closure cell made before the call."""

    obj: Any

    def __eq__(self, other: object) -> bool:
        return type(other) is _Const and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


@dataclasses.dataclass(frozen=True)
class _Method:
    """A bound method of the state: function and object are state values."""

    function: Any  # a _Const or a _Value
    obj: int


@dataclasses.dataclass(eq=False)
class Shape:
    """The frames of a suspension, each slot naming where its object comes from (``_Value``,
    ``_Iter``, ``None`` for unbound), and the continuation's jitted function."""

    frames: tuple[SuspendedFrame, ...]
    count: int  # how many state values
    key: tuple[Any, ...]
    native: Any  # the function run natively (its wrapper)
    jitted: Any = None  # the continuation's ThunderFunction (made by the runner)


class Segmented:
    """The shapes of one jitted function's suspensions, each given a number once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._numbers: dict[tuple[Any, ...], int] = {}
        self.shapes: list[Shape] = []

    def number(self, shape: Shape) -> int:
        with self._lock:
            n = self._numbers.get(shape.key)
            if n is None:
                n = self._numbers[shape.key] = len(self.shapes)
                self.shapes.append(shape)
            return n


class SegmentHead:
    """The first segment of ``fn``: what a segment's trace interprets from the call's start."""

    def __init__(self, fn: Any, segmented: Segmented) -> None:
        self.fn = fn
        self.segmented = segmented

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # An eager run of the first segment: nothing ran yet, torch.compile runs the call.
        raise SegmentRefused("its first segment was not compiled")


class Continuation:
    """The rest of a suspended call, from the frames of ``shape``: called with the native call's
    result and the state values. Run natively (an eager run of the segment), the frames are
    resumed by the interpreter as Python runs them, later native calls included."""

    def __init__(self, shape: Shape, segmented: Segmented) -> None:
        self.shape = shape
        self.segmented = segmented

    def suspension(
        self, values: tuple[Any, ...], cells: list[types.CellType] | None = None
    ) -> Suspension:
        return Suspension(_frames_with(self.shape, values, cells), None, (), {})

    def __call__(self, value: Any, *values: Any) -> Any:
        import thunder_interp

        interpreted = thunder_interp.interpret(self.shape.frames[0].function, suspendable=True)
        return (DONE, interpreted.resume(self.suspension(values), value))

    def resume_raising(self, error: BaseException, values: tuple[Any, ...]) -> Any:
        """The native call raised ``error``: the frames' handlers see it, as Python runs them."""
        import thunder_interp

        interpreted = thunder_interp.interpret(self.shape.frames[0].function, suspendable=True)
        return interpreted.resume(self.suspension(values), exception=error)


def _frames_with(
    shape: Shape, values: tuple[Any, ...], cells: list[types.CellType] | None = None
) -> tuple[SuspendedFrame, ...]:
    """The frames of ``shape`` with ``values`` in their slots (the cells made appended to
    ``cells``)."""
    if cells is None:
        cells = []

    def slot(marker: Any) -> Any:
        if marker is None:
            return UNBOUND
        if type(marker) is _Value:
            return values[marker.value]
        if type(marker) is _Const:
            return marker.obj
        if type(marker) is _Method:
            return types.MethodType(slot(marker.function), values[marker.obj])
        if type(marker) is _Cell:
            content = marker.content
            cell = types.CellType() if content is None else types.CellType(slot(content))
            cells.append(cell)
            return cell
        if type(marker) is _DictIter:
            return _dict_iterator(values[marker.value], marker)
        it = iter(marker.constant if marker.value is None else values[marker.value])
        if marker.index:
            it.__setstate__(marker.index)
        return it

    return tuple(
        dataclasses.replace(f, locals=tuple(map(slot, f.locals)), stack=tuple(map(slot, f.stack)))
        for f in shape.frames
    )


def _dict_iterator(d: dict[Any, Any], marker: _DictIter) -> Any:
    """The iterator ``marker`` marks, over ``d`` as the native call left it: its items read now,
    as CPython's iterator reads them; where the call added or removed keys, one that raises
    CPython's error at its next item."""
    if tuple(d) != marker.keys:
        changed = "size" if len(d) != len(marker.keys) else "keys"
        return _raising_iterator(RuntimeError(f"dictionary changed {changed} during iteration"))
    it = iter(marker.view(d))
    for _ in range(marker.index):
        next(it)
    return it


_EXHAUSTED = _Const(iter(()))  # (one: the shape's key names it)


def _raising_iterator(error: Exception) -> Any:
    raise error
    yield  # (a generator: raises at its first item)


def _dict_iter_marker(obj: Any, view: Any, value_of: Callable[[Any], int]) -> Any:
    """The marker of a dict iterator of the state (``obj``), or a refusal where it cannot be
    made again."""
    try:
        obj.__reduce__()  # (raises where the dict changed size since it was made)
    except RuntimeError as e:
        raise RunsNatively(f"holds an iterator over a dict that changed ({e})") from None
    dicts = [r for r in gc.get_referents(obj) if type(r) is dict]
    if not dicts:  # exhausted: it holds nothing and yields nothing
        return _EXHAUSTED
    d = dicts[0]
    return _DictIter(value_of(d), view, len(d) - obj.__length_hint__(), tuple(d))


def run_segment(
    segment: Any,
    interpreted: Any,
    make_cell: Any,
    made_here: Callable[[Any], bool],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    """Trace ``segment`` (a ``SegmentHead`` or ``Continuation``) with ``interpreted`` (a
    suspendable interpretation under the binder's lookasides): ``(DONE, value)`` where the call
    ended, else ``(shape number, the native call's args, its kwargs, state values)``."""
    try:
        if isinstance(segment, SegmentHead):
            value = interpreted(*args, **kwargs)
        else:
            cells: list[types.CellType] = []
            suspension = segment.suspension(args[1:], cells)
            for cell in cells:  # the frames' own cells: the program's, as when it made them
                make_cell(cell)
            value = interpreted.resume(suspension, args[0])
    except Suspended as stopped:
        return _suspended(segment.segmented, stopped.suspension, made_here)
    return (DONE, value)


def _suspended(
    segmented: Segmented, suspension: Suspension, made_here: Callable[[Any], bool]
) -> tuple[Any, ...]:
    frames = suspension.frames
    wrapper = frames[-1]
    if suspension.callable is not _NATIVE_CALL or not getattr(
        wrapper.function, "_torchdynamo_disable", False
    ):
        raise RunsNatively("calls a function run natively through a wrapper thunder does not know")
    names = wrapper.local_names
    call_args = wrapper.locals[names.index("args")]
    call_kwargs = wrapper.locals[names.index("kwargs")]
    if type(call_args) is not tuple or type(call_kwargs) is not dict:
        raise RunsNatively("calls a function run natively through a wrapper thunder does not know")
    frames = frames[:-1]
    if not frames:
        raise RunsNatively("the jitted function itself runs natively")
    values: list[Any] = []
    index_of: dict[int, int] = {}
    key: list[Any] = []

    def marker(obj: Any) -> Any:
        if obj is UNBOUND:
            return None
        view = _DICT_ITERATOR_TYPES.get(type(obj))
        if view is not None:
            return _dict_iter_marker(obj, view, value_of)
        kind = _ITERATOR_TYPES.get(type(obj))
        if kind is not None:
            reduced = obj.__reduce__()
            seq = reduced[1][0] if len(reduced[1]) else ()
            index = reduced[2] if len(reduced) > 2 else 0
            if type(seq) is not kind:
                raise RunsNatively(
                    f"holds an iterator over a {type(seq).__name__} at the native call"
                )
            if kind is range:
                return _Iter(None, index, seq)
            return _Iter(value_of(seq), index)
        if type(obj) is types.FunctionType and not _holds_traced_values(obj):
            return _Const(obj)
        if isinstance(obj, type) or (
            type(obj) is types.BuiltinFunctionType
            and (obj.__self__ is None or type(obj.__self__) is types.ModuleType)
        ):
            return _Const(obj)  # a class, a function of a C module: immutable
        if getattr(obj, "__name__", None) in ("__exit__", "__aexit__"):
            # A with block around the native call: its manager's state (grad mode, autocast)
            # held while tracing, not while the native function runs.
            raise RunsNatively("calls the function run natively inside a with block")
        if type(obj) is types.MethodType and type(obj.__func__) is types.FunctionType:
            return _Method(marker(obj.__func__), value_of(obj.__self__))
        return _Value(value_of(obj))

    def cell_marker(cell: Any) -> Any:
        if cell is UNBOUND:
            return None
        if not isinstance(cell, types.CellType) or id(cell) in shared:
            raise RunsNatively("a closure shares a cell of a frame at the native call")
        try:
            contents = cell.cell_contents
        except ValueError:
            return _Cell(None)
        return _Cell(marker(contents))

    def value_of(obj: Any) -> int:
        n = index_of.get(id(obj))
        if n is None:
            n = index_of[id(obj)] = len(values)
            values.append(obj)
        return n

    # (the frames' own cells looked up at once: each lookup walks every object of the process)
    shared = _shared_cells(
        [v for f in frames for v, own in zip(f.locals, _own_cell_slots(f)) if own]
    )
    shaped: list[SuspendedFrame] = []
    for f in frames:
        code = f.code
        first_free = len(f.local_names) - len(code.co_freevars)
        is_cell = _own_cell_slots(f)
        slots = []
        for i, (v, cell) in enumerate(zip(f.locals, is_cell)):
            if i >= first_free:
                # A closure cell of the frame's function (pinned: its code and globals are the
                # shape's): the same cell on every call, what it holds guarded by the
                # continuation; one this call made would be another cell on the next call.
                if not isinstance(v, types.CellType) or made_here(v):
                    raise RunsNatively(f"{code.co_name} reads a closure cell the call made")
                slots.append(_Const(v))
            else:
                slots.append(cell_marker(v) if cell else marker(v))
        locals_ = tuple(slots)
        stack = tuple(marker(v) for v in f.stack)
        shaped.append(dataclasses.replace(f, locals=locals_, stack=stack))
        key.append((code, id(f.function.__globals__), f.offset))
        key.append((locals_, stack, f.blocks))
    # An object met twice inside the state would be two objects in the continuation.
    _refuse_shared_parts(values)
    native = wrapper.function
    if _holds_traced_values(native):
        raise RunsNatively("the function run natively holds values the program computed")
    key.append(_Const(native))
    shape = Shape(tuple(shaped), len(values), tuple(key), native)
    number = segmented.number(shape)
    return (number, call_args, call_kwargs, tuple(values))


def _holds_traced_values(fn: Any, depth: int = 0) -> bool:
    """Whether ``fn``'s closure or defaults hold a traced value (a function the program made
    around one), looking into the functions its closure holds."""
    parts = [*(fn.__defaults__ or ()), *(fn.__kwdefaults__ or {}).values()]
    for cell in fn.__closure__ or ():
        try:
            parts.append(cell.cell_contents)
        except ValueError:
            continue
    return any(_traced(part, depth) for part in parts)


def _traced(part: Any, depth: int) -> bool:
    if isinstance(part, Proxy):
        return True
    if depth >= 3:
        return not isinstance(part, _SCALARS)
    if type(part) is types.FunctionType:
        return _holds_traced_values(part, depth + 1)
    if type(part) in (list, tuple, set, frozenset):
        return any(_traced(p, depth + 1) for p in part)
    if type(part) is dict:
        return any(_traced(p, depth + 1) for p in part.values())
    return False


def _own_cell_slots(f: SuspendedFrame) -> list[bool]:
    """Per local slot of ``f``, whether it is one of the frame's own cells (a cell variable, not
    a closure cell of its function)."""
    code = f.code
    names = f.local_names
    first_free = len(names) - len(code.co_freevars)
    if sys.version_info >= (3, 11):
        cellvars = set(code.co_cellvars)
        return [name in cellvars and i < first_free for i, name in enumerate(names)]
    return [code.co_nlocals <= i < first_free for i in range(len(names))]


def _shared_cells(cells: list[Any]) -> set[int]:
    """The ids of those of ``cells`` (made before the native call) that a closure or a generator
    holds: made again for the continuation, they would no longer be the holder's. One walk of
    the process's objects for all of them (``gc.get_referrers`` walks every object)."""
    cells = [c for c in cells if isinstance(c, types.CellType)]
    if not cells:
        return set()
    ids = {id(c) for c in cells}
    shared: set[int] = set()
    tuples: list[tuple[Any, ...]] = []
    for holder in gc.get_referrers(*cells):
        if isinstance(holder, (types.GeneratorType, types.CoroutineType)):
            shared.update(id(r) for r in gc.get_referents(holder) if id(r) in ids)
        elif type(holder) is tuple:
            tuples.append(holder)
    if tuples:
        closures = {id(t) for t in tuples}
        for fn in gc.get_referrers(*tuples):
            closure = fn.__closure__ if type(fn) is types.FunctionType else None
            if closure is not None and id(closure) in closures:
                shared.update(id(c) for c in closure if id(c) in ids)
    return shared


_SCALARS = (int, float, complex, bool, str, bytes, type(None))


def _refuse_shared_parts(values: list[Any]) -> None:
    seen: set[int] = {id(v) for v in values}
    for v in values:
        _walk(v, seen)


def _walk(obj: Any, seen: set[int]) -> None:
    t = type(obj)
    if t not in (list, tuple, dict, set):
        return
    items = obj.values() if t is dict else obj
    for item in items:
        if isinstance(item, _SCALARS):
            continue
        if type(item) in (list, dict, set) or (type(item) is tuple and item):
            if id(item) in seen:
                raise RunsNatively("holds an object twice in its state at the native call")
            seen.add(id(item))
            _walk(item, seen)
