"""The state of one tracing run: where each outside object is found (its access path), the
inputs and guards recorded so far, and the shared vocabulary (``Guard``, ``Write``, the value
kinds the binder tells apart)."""

from __future__ import annotations

import builtins
import decimal
import fractions
import functools
import types
from collections import OrderedDict
from collections.abc import Callable, Iterator, Set
from dataclasses import dataclass, field
from typing import Any

import torch

from thunder import logs
from thunder.access import ARG, ATTR, CELL, FROM_NUMPY, GLOBAL, KWARG, QUERY, ROOT, SIZE, Access
from thunder.errors import (
    UnsupportedSideEffectError,
)
from thunder.guards import Held, check_no_module_hooks, held_object
from thunder.lookasides import SymbolicSize, is_library_code
from thunder.options import CACHE_OPTIONS, JitOptions
from thunder_ir import IntegerProxy, Proxy, TensorProxy, Trace
from thunder_ir import constraints as C
from thunder_ir.devices import Device, to_torch_device
from thunder_ir.dtypes import DType, to_torch_dtype
from thunder_ir.prims.prologue import GuardFailure
from thunder_ir.pytree import tree_iter
from thunder_ir.tracectx import get_tracectx
from thunder_ir.tracing import proxy_for_tensor

_MISSING: Any = object()
try:  # numpy's scalars and dtypes are immutable values, as Python's numbers are (torch imports numpy)
    import numpy

    _NUMPY_SCALARS: tuple[type, ...] = (numpy.generic, numpy.dtype)
    NDARRAY: type | None = numpy.ndarray
except ImportError:  # pragma: no cover
    _NUMPY_SCALARS = ()
    NDARRAY = None


def is_ndarray(x: Any) -> bool:
    """Whether ``x`` is a numpy array (exactly: a subclass may answer its own way)."""
    return NDARRAY is not None and type(x) is NDARRAY


_SCALAR_TYPES: tuple[type, ...] = (
    torch.Size,
    type(None),
    bool,
    int,
    float,
    complex,
    str,
    bytes,
    torch.dtype,
    torch.device,
    torch.layout,
    torch.memory_format,
    type(Ellipsis),
    *_NUMPY_SCALARS,
)
_CONTAINER_TYPES = (list, tuple, dict, OrderedDict, set, frozenset)
# (an OrderedDict has these and move_to_end)
_DICT_MUTATORS = frozenset(
    {"update", "pop", "popitem", "setdefault", "clear", "__setitem__", "__delitem__", "__ior__"}
)
_CONTAINER_MUTATORS: dict[type, Set[str]] = {
    list: {
        "append",
        "extend",
        "insert",
        "pop",
        "remove",
        "clear",
        "reverse",
        "sort",
        "__setitem__",
        "__delitem__",
        "__iadd__",
        "__imul__",
    },
    dict: _DICT_MUTATORS,
    OrderedDict: _DICT_MUTATORS | {"move_to_end"},
    # A numpy array: no mutation of it is replayed (none is listed), but C calls that take it
    # (``np.mean(a)``, ``len(a)``) report a content read, which guards its contents
    # (``reads.ReadsMixin._guard_array_contents``).
    **({NDARRAY: set()} if NDARRAY is not None else {}),
    set: {
        "add",
        "discard",
        "remove",
        "pop",
        "clear",
        "update",
        "difference_update",
        "intersection_update",
        "symmetric_difference_update",
        "__ior__",
        "__iand__",
        "__isub__",
        "__ixor__",
    },
}
# Items of outside containers compared by identity when the container is guarded item by item.
_IDENTIFIED_TYPES = (
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    type,
    types.ModuleType,
    functools.partial,
)
_MAX_GUARDED_ITEMS = 256
# Mutations whose outcome depends on the contents (what they return, or whether they raise:
# del c[k], c.remove(v) on a missing item): a content read, so the contents are guarded.
_RETURNS_CONTENTS = frozenset({"pop", "popitem", "setdefault", "remove", "__delitem__"})
# Module globals of libraries: their functions, classes and modules are not rebound by users.
_LIBRARY_PREFIXES = ("torch", "builtins", "thunder", "typing", "collections", "math", "functools")
_THUNDER_PACKAGES = ("thunder_ir", "thunder_interp", "thunder_executors", "thunder_transforms")


def is_library_module_name(name: str) -> bool:
    """One of these packages or a module in them (by the top-level name: a user's
    ``torch_helpers`` or ``mathutils`` is not torch's or math's)."""
    top = name.partition(".")[0]
    return top in _LIBRARY_PREFIXES or top in _THUNDER_PACKAGES


def is_value_object(x: Any) -> bool:
    """An immutable object that is its value (a slice of scalars, a Decimal, a Fraction): what
    the program computes from it is guarded by comparing it (``same_value``), not its type."""
    t = type(x)
    if t is slice:
        return all(isinstance(v, _SCALAR_TYPES) for v in (x.start, x.stop, x.step))
    return t is decimal.Decimal or t is fractions.Fraction


def is_scalar_constant(x: Any, depth: int = 0) -> bool:
    """Whether ``x`` is a value the prologue can compare (``same_value``): scalars, value
    objects and small containers of them."""
    if isinstance(x, _SCALAR_TYPES) or is_value_object(x):
        return True
    if depth < 3 and type(x) in (tuple, list, frozenset, set) and len(x) <= 64:
        return all(is_scalar_constant(v, depth + 1) for v in x)
    if depth < 3 and type(x) in (dict, OrderedDict) and len(x) <= 64:
        return all(
            is_scalar_constant(k, 3) and is_scalar_constant(v, depth + 1) for k, v in x.items()
        )
    return False


@dataclass(frozen=True)
class Guard:
    """A fact the trace relied on: ``kind`` is ``tensor`` (metadata), ``value`` (``==``), ``type``,
    ``is`` (identity), ``len`` or ``keys`` (a dict's keys, in order)."""

    access: Access
    kind: str
    expected: Any


@dataclass(frozen=True)
class Write:
    """A write the program made to outside state, replayed by the epilogue on every call.

    ``kind``: ``global`` (``target`` is the global), ``cell`` (the closure cell), ``attr``
    (``target`` is the object, ``name`` the attribute), ``call`` (``target`` is a container,
    ``name`` the mutating method, ``value`` the argument tuple; ``call_kw``: the same with
    ``value`` the (args, kwargs) pair); ``del_global``, ``del_cell`` and
    ``del_attr`` delete what the first three write; ``log`` (``target`` is a logger, ``name``
    its method, ``value`` the (args, kwargs) pair) is a logging call; ``warn`` (``value`` the
    ``WarningReplay``, message and source: ``binding/warning_calls.py``) a warning. ``value`` is a template: proxies,
    constants, ``Access`` objects (outside values) and containers of those.
    """

    kind: str
    target: Access
    name: str
    value: Any


@dataclass(frozen=True)
class ProgramLock:
    """A lock the program takes (a ``threading`` Lock, RLock, Semaphore or BoundedSemaphore; a
    Condition's lock): found at ``access`` when a call starts, of exactly the type ``kind``,
    taken by ``acquire(lock)`` (``acquire(lock, False)``: only if free) and given back by
    ``release(lock)`` (``binding/regions.py``)."""

    access: Access
    kind: type
    acquire: Callable[..., Any]
    release: Callable[..., Any]


class ExternalRef:
    """An outside object in a value template, re-read through its access path."""

    __slots__ = ("access",)

    def __init__(self, access: Access) -> None:
        self.access = access


def _has_hooks(module: torch.nn.Module) -> bool:
    try:
        check_no_module_hooks(module)
    except GuardFailure:
        return True
    return False


def _values(container: Any) -> Any:
    return container.values() if isinstance(container, dict) else container


def _holds_tensors(container: Any) -> bool:
    return any(isinstance(v, torch.Tensor) for v in _values(container))


def _is_backend_flags(obj: Any) -> bool:
    """Whether ``obj`` is a ``torch.backends`` module or a flags object of one."""
    if isinstance(obj, types.ModuleType):
        return obj.__name__.startswith("torch.backends.")
    return type(obj).__module__.startswith("torch.backends.") and not isinstance(obj, type)


def _dotted(root: Access, dotted: str) -> Access:
    access = root
    for part in dotted.split("."):
        access = access.attr(part)
    return access


def _is_reserved(name: str) -> bool:
    return name in ("args", "kwargs", "fn", "prims", "ltorch", "torch", "outs") or hasattr(
        builtins, name
    )


class Rebuilt:
    """An object the program built (a dataclass, a ``ModelOutput``, a named tuple, an instance
    of a user class) in a value template: the epilogue rebuilds it on every call.

    An object of a Python class on ``object``, ``dict``, ``OrderedDict`` or ``list`` is
    *restored*: made by the base's ``__new__`` and given the state it had when the program
    returned it (its ``__dict__`` and its items), with none of its class's own code run. Its
    ``__init__`` already ran while tracing, and the epilogue replays what that did to outside
    objects; running it again would do that twice (and a custom ``__setitem__`` would change
    the items twice). Other objects (named tuples, subclasses of other builtins) are rebuilt by
    the copy protocol (``__reduce_ex__``)."""

    __slots__ = ("constants", "func", "parts", "restores")

    def __init__(
        self, func: Any, constants: tuple[Any, ...], parts: tuple[Any, ...], restores: bool = False
    ) -> None:
        self.func = func
        # leading arguments of ``func`` (the class, for __newobj__); (class, base) when restored
        self.constants = constants
        # (args, state, list items, dict items), each a template or None; (state, items) when
        # restored
        self.parts = parts
        self.restores = restores


def rebuild(
    func: Any, constants: Any, args: Any, state: Any, listitems: Any, dictitems: Any
) -> Any:
    """The object ``__reduce_ex__`` described (the epilogue's half of :class:`Rebuilt`)."""
    obj = func(*constants, *args)
    if state is not None:
        setstate = getattr(obj, "__setstate__", None)
        if setstate is not None:
            setstate(state)
        else:
            slots = None
            if type(state) is tuple and len(state) == 2:
                state, slots = state
            if state:
                obj.__dict__.update(state)
            for name, value in (slots or {}).items():
                setattr(obj, name, value)
    if listitems is not None:
        obj.extend(listitems)
    if dictitems is not None:
        for key, value in dictitems:
            obj[key] = value
    return obj


def new_function(
    code: types.CodeType,
    globals_: dict[str, Any],
    name: str,
    qualname: str,
    defaults: tuple[Any, ...] | None,
    kwdefaults: dict[str, Any] | None,
    closure: tuple[Any, ...],
) -> types.FunctionType:
    """A function made as ``def`` (or ``lambda``) makes one (the epilogue's half of a stored
    function's template, see ``WritesMixin._function_template``)."""
    fn = types.FunctionType(code, globals_, name, defaults, closure or None)
    fn.__qualname__ = qualname
    if kwdefaults:
        fn.__kwdefaults__ = kwdefaults
    return fn


# The builtin bases whose instances hold nothing but their __dict__ and their items: an object of
# a Python class on one of these (and without __slots__) is restored from that state alone.
RESTORABLE_BASES = (object, dict, OrderedDict, list)


_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class defined in Python


def _has_slots(cls: type) -> bool:
    """Whether instances of ``cls`` hold slots (``copyreg._slotnames``'s answer, without the
    ``__slotnames__`` it caches on the class: tracing leaves the user's classes as they were,
    ``dir(cls)`` included)."""
    cached = cls.__dict__.get("__slotnames__")
    if cached is not None:
        return bool(cached)
    for c in cls.__mro__:
        slots = c.__dict__.get("__slots__", ())
        names = (slots,) if isinstance(slots, str) else slots
        if any(name not in ("__dict__", "__weakref__") for name in names):
            return True
    return False


def restorable_base(cls: type) -> type | None:
    """The builtin base of ``cls`` when an instance's whole state is its ``__dict__`` and its
    items (see ``Rebuilt``); None for other bases and for classes with ``__slots__``."""
    if _has_slots(cls):
        return None
    base = next(b for b in cls.__mro__ if not b.__flags__ & _HEAPTYPE)
    return base if base in RESTORABLE_BASES else None


def restore(cls: type, base: type, state: dict[str, Any] | None, items: Any) -> Any:
    """An object of ``cls`` with exactly ``state`` and ``items`` (the epilogue's half of a
    restored :class:`Rebuilt`): no method of ``cls`` runs."""
    obj = base.__new__(cls)  # type: ignore[call-overload]
    if state:
        object.__getattribute__(obj, "__dict__").update(state)
    if items:
        if base is list:
            list.extend(obj, items)
        elif base is dict:
            dict.update(obj, items)
        else:  # OrderedDict keeps its order in links of its own
            for key, value in items:
                OrderedDict.__setitem__(obj, key, value)
    return obj


def template_leaves(template: Any) -> Iterator[Any]:
    """The leaves of a value template, looking into rebuilt objects."""
    for leaf in tree_iter(template):
        if isinstance(leaf, Rebuilt):
            yield leaf
            yield from template_leaves(leaf.parts)
        else:
            yield leaf


def iter_proxies(template: Any) -> Iterator[Proxy]:
    """Every proxy in a value template."""
    for leaf in template_leaves(template):
        if isinstance(leaf, Proxy):
            yield leaf
        elif isinstance(leaf, SymbolicSize):
            yield from (d for d in leaf if isinstance(d, Proxy))


def holds_a_container_twice(template: Any) -> bool:
    """Whether a list, dict, tuple or rebuilt object occurs more than once in ``template``."""
    counts: dict[int, int] = {}
    count_shared(template, counts)
    return any(n > 1 for n in counts.values())


def count_shared(template: Any, counts: dict[int, int]) -> None:
    """How often each list, dict, tuple and rebuilt object occurs in ``template`` (``counts``, by
    id)."""
    t = type(template)
    if t in (list, dict) or t is Rebuilt or (t is tuple and template):
        counts[id(template)] = counts.get(id(template), 0) + 1
        if counts[id(template)] > 1:
            return
    if t is Rebuilt:
        for part in template.parts:
            count_shared(part, counts)
    elif t is dict:
        for v in template.values():
            count_shared(v, counts)
    elif isinstance(template, (tuple, list)):
        for v in template:
            count_shared(v, counts)


def _cell_is_set(cell: types.CellType) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


def torch_value(value: Any, as_size: bool = False) -> Any:
    """An IR value as the torch value user code expects (``x.dtype == torch.float32``,
    ``isinstance(x.shape, torch.Size)``): IR dtypes and devices become torch's, a static shape a
    ``torch.Size``. Everything else (proxies, numbers) is returned as is."""
    if isinstance(value, DType):
        return to_torch_dtype(value)
    if isinstance(value, Device):
        return to_torch_device(value)
    if as_size and type(value) is tuple:
        if all(type(d) is int for d in value):
            return torch.Size(value)
        return SymbolicSize(value)
    return value


@dataclass
class Paths:
    """Where each outside object the program reached is found (its access path)."""

    # Outside objects the program can reach, by id: (object, access path).
    access_of: dict[int, tuple[Any, Access]] = field(default_factory=dict)
    # A container of constants reached again by a second path -> its first path: unguarded
    # (its value is), unless the program writes it (``guard_written_objects_distinct``).
    value_aliases: dict[Access, Access] = field(default_factory=dict)
    # When each object's path was taken, as the number of writes made before: the epilogue
    # resolves a path at that point of its replay, so writes made since (an insert before a
    # list item, a ``del``) do not move it to another object.
    bound_at: dict[Access, int] = field(default_factory=dict)
    # Closure cells of functions from outside, by id: the cell and its access path. Cells,
    # not code objects: the closures one ``def`` makes share their code.
    cells: dict[int, tuple[types.CellType, Access]] = field(default_factory=dict)
    # Cells the program made (a frame's cell variables), by id: its own values, not outside
    # state. Any other cell it reads was made outside it.
    made_cells: dict[int, types.CellType] = field(default_factory=dict)
    globals_dicts: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Objects taken out of outside containers (``pop``): no path reaches them on later calls.
    detached: dict[int, Any] = field(default_factory=dict)
    # torch.backends modules and flag objects read by the program: their canonical paths.
    backend: dict[int, tuple[Any, Access]] = field(default_factory=dict)
    # The modules among them, by id (kept apart: the index below is rebuilt from them, and
    # walking every entry for that made a big model's trace quadratic).
    modules: dict[int, tuple[Any, Access]] = field(default_factory=dict)
    # Submodules of the jitted module by id, indexed lazily (``reads``).
    module_index: dict[int, Access] | None = None
    indexed_modules: int = 0
    # the modules' own dicts (``_modules``, ``_parameters``, ``_buffers``): their module, the name
    store_index: dict[int, tuple[Any, str]] | None = None
    indexed_stores: int = 0
    container_at: dict[Access, Any] = field(default_factory=dict)
    # Objects the prologue holds itself (a module's globals, a class whose names the program
    # listed), by id: (object, the access that reads it on every call).
    held: dict[int, tuple[Any, Access]] = field(default_factory=dict)

    def found_at(self, obj: Any, access: Access) -> None:
        """``obj`` is found at ``access`` (its entry in ``access_of``, and in ``modules``)."""
        self.access_of[id(obj)] = (obj, access)
        if isinstance(obj, torch.nn.Module):
            self.modules[id(obj)] = (obj, access)


@dataclass
class Inputs:
    """The computation's inputs, and what the program sees in place of the caller's objects."""

    # Computation inputs in order: proxy and where it comes from.
    in_order: list[tuple[Proxy, Access]] = field(default_factory=list)
    # Tensors made inputs, by id: (the tensor, its proxy).
    tensors: dict[int, tuple[Any, TensorProxy]] = field(default_factory=dict)
    # Inputs the program sees as something the binder recorded from them (a sharded
    # parameter seen whole), by the input's name.
    seen_as: dict[str, TensorProxy] = field(default_factory=dict)
    # The Python type of each tensor input that is not a plain torch.Tensor (a Parameter), by
    # its proxy's name: what ``type(p)`` and ``isinstance`` answer for its proxy.
    tensor_types: dict[str, type] = field(default_factory=dict)
    # Tensors with symbolic sizes: the prologue unpacks their sizes and checks the constant
    # ones (0 and 1).
    symbolic_shapes: list[Access] = field(default_factory=list)
    # Symbolic numbers passed as arguments, by proxy name: (the caller's object, its path).
    numbers: dict[str, tuple[Any, Access]] = field(default_factory=dict)
    # Argument lists and dicts the program sees as copies holding proxies, by the id of the
    # caller's object: (the caller's object, the copy).
    argument_copies: dict[int, tuple[Any, Any]] = field(default_factory=dict)
    # Outside containers of tensors -> the copy holding proxies the program sees (one per
    # container, so that reading it twice gives the same object).
    proxied_copies: dict[int, tuple[Any, Any]] = field(default_factory=dict)
    # torch.Generator arguments the cache key covers (by type and device), by id: (the
    # generator, the path it was first found at). Made inputs once the program is traced
    # (``rng.generators_as_inputs``).
    generator_args: dict[int, tuple[Any, Access]] = field(default_factory=dict)


@dataclass
class Facts:
    """What the trace relied on: the guards the prologue checks."""

    guards: dict[Access, Guard] = field(default_factory=dict)
    # Builtins the program read, by the module whose globals it looked in first: the
    # module must still lack the name and the builtin must still be the same object.
    builtin_reads: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Methods the program found on classes (on the guarded type of an outside object, through
    # super(), special methods) and the code of outside functions: (holder, name, what
    # getattr(holder, name) gave), checked to stay so (guards.Lookups).
    lookups: dict[tuple[Any, ...], tuple[Any, str, Any]] = field(default_factory=dict)
    # ids of the torch.Generator objects found outside the program (arguments: inputs of the
    # computation; globals and attributes: guarded by identity).
    generators: set[int] = field(default_factory=set)
    # The last generic read (object.__getattribute__) inside a class's own interpreted
    # __getattribute__: (object, value or _MISSING). Its outer read is then not guarded again.
    last_generic: tuple[Any, Any] | None = None
    # Outside containers whose contents the program read (an item, or the container passed to
    # an opaque call such as len or sum). A mutated container keeps a type guard only while
    # its contents are never read.
    content_read: set[int] = field(default_factory=set)
    # Outside lists the program took only to add to them (``LOG.append(v)``): their contents
    # are not guarded unless the program reads them (``reads._loaded_to_add_to``).
    added_only: set[int] = field(default_factory=set)
    # Objects whose bound methods the program read from outside state (``random.random`` is
    # a method of the random module's hidden generator): calling those is not pure.
    outside_owners: dict[int, Any] = field(default_factory=dict)


@dataclass
class Effects:
    """What the program wrote outside (owned by ``writes``): the writes the epilogue replays,
    and what undoes them when tracing ends."""

    writes: list[Write] = field(default_factory=list)
    # Paths the program assigned or deleted in this call (a global, a cell, an attribute).
    written_paths: set[Access] = field(default_factory=set)
    # Paths to objects the program itself put into outside containers: written (replayed),
    # never guarded (they do not exist when a call starts).
    inserted: set[Access] = field(default_factory=set)
    # Containers the program made and put into outside state where no path reaches them.
    escaped: dict[int, Any] = field(default_factory=dict)
    mutated: set[int] = field(default_factory=set)  # ids of outside containers it mutated
    undo: list[Callable[[], None]] = field(default_factory=list)
    snapshots: dict[int, Any] = field(default_factory=dict)
    snapshotted: set[int] = field(default_factory=set)
    # The contents of mutated outside containers as the call found them.
    entry_contents: dict[int, Any] = field(default_factory=dict)
    # Cells of functions the program stored outside or returned, and what they held then.
    stored_cells: list[tuple[Any, tuple[Any, ...]]] = field(default_factory=list)
    rebuilding: set[int] = field(default_factory=set)  # objects being made templates (cycles)
    # Outside objects C code may change without a hook (numpy arrays, a ``Counter``, a
    # ``deque``), by id: (the object, a copy of what the call found). Changed when tracing
    # ends, the program wrote them natively: refused (``WritesMixin.check_native_writes``).
    native_snapshots: dict[int, tuple[Any, Any]] = field(default_factory=dict)
    # Outside numpy arrays, by id: how many times the program took one (a read of its path, an
    # argument) less the reads that only made a tensor of it (``torch.from_numpy``, an input
    # read on every call) or read an attribute. One left over may have met a native operator
    # (``a + 1``, iterating it), which no hook reports: its contents are guarded.
    array_reads: dict[int, int] = field(default_factory=dict)
    # Objects a descriptor's setter run natively changed (``through_setter``), by id: the
    # object, its path and its instance dict before.
    dict_snapshots: dict[int, tuple[Any, Access, dict[str, Any]]] = field(default_factory=dict)
    # The stores of modules (``__dict__``, ``_parameters``, ``_buffers``, ``_modules``, the
    # non-persistent names) an attribute store or deletion run by nn.Module's native hooks may
    # change, by id; what they held first is in ``snapshots``.
    module_stores: dict[int, Any] = field(default_factory=dict)


class BinderState:
    """The bookkeeping every part of the binder shares, one record per concern: ``paths``
    (where outside objects are found), ``inputs``, ``facts`` (what the prologue checks) and
    ``effects`` (what the epilogue replays; written by ``WritesMixin``). ``RegionsMixin`` adds
    ``regions``. When the program returns, ``program.trace_program`` copies what the later
    stages need into a ``TracedProgram``."""

    def __init__(self, fn: Any, options: JitOptions, trace: Trace, param_names: tuple[str, ...]):
        self.fn = fn
        self.options = options
        self.trace = trace
        self.param_names = param_names
        self.symbolic = options.cache is CACHE_OPTIONS.SYMBOLIC_VALUES
        self.paths = Paths()
        self.inputs = Inputs()
        self.facts = Facts()
        self.effects = Effects()
        # Computed tensors the program made leaves of autograd (``requires_grad_()``) while
        # inputs require grad, by name, with the call that did: see ``program._returned_leaf``.
        self.made_leaves: dict[str, str] = {}
        self._register_root(fn)

    def _register_root(self, fn: Any) -> None:
        root = Access(ROOT, None)
        self.paths.found_at(fn, root)
        if isinstance(fn, types.FunctionType):
            self._register_cells(fn, root)
            self._lookup_code(fn)  # ``f.__code__ = ...`` after compiling runs the new code
        elif isinstance(fn, types.MethodType):
            self.paths.found_at(fn.__self__, root.attr("__self__"))
            func = fn.__func__
            if isinstance(func, types.FunctionType):
                self._register_cells(func, root.attr("__func__"))
                self._lookup_code(func)
        elif type(fn).__flags__ & _HEAPTYPE:
            # A module or callable object: ``m.__class__ = Other`` changes what calling it runs.
            self.facts.guards[root.attr("<type>")] = Guard(root, "type", type(fn))

    def _lookup_code(self, func: types.FunctionType) -> None:
        if is_library_code(func.__code__):
            return
        access = self._argument_access(func)
        if access is not None:  # checked where the prologue finds it, not held
            code = access.attr("__code__")
            self.facts.guards.setdefault(code, Guard(code, "is", func.__code__))
        else:
            self.facts.lookups.setdefault((func, "__code__"), (func, "__code__", func.__code__))

    def _keyed_argument(self, access: Access) -> bool:
        """Whether what ``access`` reads is the argument (or an item of argument containers) as
        the call passed it: the cache key covers which function it is (by a weak identity) or
        which method (its function and its object's type), so no identity guard holds it."""
        return access.is_argument_leaf() and not self.is_inserted(access)

    def _argument_access(self, obj: Any) -> Access | None:
        """The path of ``obj`` where it is an argument or an item of argument containers: the
        cache key holds a function there weakly (a callback made per call), so what the
        prologue checks of it (its code, its defaults) is read there, never held: its entries
        die with it."""
        entry = self.paths.access_of.get(id(obj))
        if entry is not None and entry[0] is obj and self._keyed_argument(entry[1]):
            return entry[1]
        return None

    def _register_function(self, fn: Any, access: Access) -> None:
        self.paths.access_of.setdefault(id(fn), (fn, access))
        if isinstance(fn, types.FunctionType):
            self._register_cells(fn, access)
        elif isinstance(fn, types.MethodType) and isinstance(fn.__func__, types.FunctionType):
            self.paths.access_of.setdefault(id(fn.__self__), (fn.__self__, access.attr("__self__")))
            self._register_cells(fn.__func__, access.attr("__func__"))

    def _cb_make_cell(self, cell: types.CellType) -> None:
        self.paths.made_cells[id(cell)] = cell

    def _cell_access(self, cell: types.CellType, name: str, code: types.CodeType) -> Access | None:
        """The path to what ``cell`` holds, or None for a cell the program made. A cell of an
        outside function found without a path (a method looked up on its class, a function a
        builtin called) is held by the prologue itself: the function is pinned (its lookup
        is checked), so its cells are too; only what they hold can change."""
        entry = self.paths.cells.get(id(cell))
        if entry is not None and entry[0] is cell:
            return entry[1]
        if self.paths.made_cells.get(id(cell)) is cell:
            return None
        if is_library_code(code) or logs.is_own_file(code.co_filename):
            # A closure library or thunder code made natively during the call (scan's combine
            # wrapper): its cells hold this call's values.
            return None
        held = (Held(cell, f"closure cell {name}"),)
        access = Access(QUERY, (held_object, held)).attr("cell_contents")
        self.paths.cells[id(cell)] = (cell, access)
        return access

    def _register_cells(self, fn: types.FunctionType, access: Access) -> None:
        """The closure cells of ``fn`` (reached by ``access``): reads of them, also from
        functions the program makes that share them, are reads of outside state."""
        for index, (name, cell) in enumerate(zip(fn.__code__.co_freevars, fn.__closure__ or ())):
            self.paths.cells.setdefault(id(cell), (cell, Access(CELL, (index, name), access)))

    def _name_for(self, access: Access) -> str:
        base = access.short_name(self.param_names)
        names = self.trace.names
        if base not in names and base.isidentifier() and not _is_reserved(base):
            return base
        i = 0
        while f"{base}_{i}" in names:
            i += 1
        return f"{base}_{i}"

    def _tensor_input(self, t: torch.Tensor, access: Access, guarded: bool) -> TensorProxy:
        known = self.inputs.tensors.get(id(t))
        if known is not None and known[0] is t:
            if guarded and access != self._access_of_input(known[1]):
                # The same tensor reached by a second path (tied weights): check it stays tied.
                self.facts.guards.setdefault(access, Guard(access, "is_input", known[1].name))
            return self.inputs.seen_as.get(known[1].name, known[1])
        if access.kind == FROM_NUMPY:
            self._array_read_accounted(access.parent)
        proxy = proxy_for_tensor(t, self._name_for(access))
        self.inputs.tensors[id(t)] = (t, proxy)
        if type(t) is not torch.Tensor:
            self.inputs.tensor_types[proxy.name] = type(t)
        self.inputs.in_order.append((proxy, access))
        unshard = getattr(t, "_thunder_unshard", None)
        if unshard is not None:
            # A shard of a parameter (thunder.distributed.fsdp): the program sees the whole
            # parameter, gathered from the shards by the ops ``unshard`` records.
            if guarded:
                self.facts.guards[access] = Guard(access, "tensor", t)
            # The gather is the program's own read, not the user's: recorded with gradient
            # even where the first read is under no_grad, so that the whole parameter requires
            # grad like the parameter and later no_grad reads of it are detached.
            recording = get_tracectx() or self.trace
            grad_mode, recording.grad_enabled = recording.grad_enabled, True
            try:
                whole: TensorProxy = unshard(proxy)
            finally:
                recording.grad_enabled = grad_mode
            self.inputs.seen_as[proxy.name] = whole
            return whole
        if (self.symbolic and self._has_symbolic_sizes(t, access)) or (
            access in self.options.symbolic_state_tensors and not isinstance(t, torch.nn.Parameter)
        ):
            self.inputs.symbolic_shapes.append(access)
            proxy.shape = tuple(self._symbolic_size(s, access, i) for i, s in enumerate(t.shape))
        if guarded:
            self.facts.guards[access] = Guard(access, "tensor", t)
        return proxy

    def _array_read_accounted(self, access: Access | None) -> None:
        """The numpy array found at ``access`` was made a tensor input (its values read on
        every call): that read of it needs no guard of its contents."""
        for obj, _ in self.effects.native_snapshots.values():
            entry = self.paths.access_of.get(id(obj))
            if entry is not None and entry[0] is obj and entry[1] == access:
                self.effects.array_reads[id(obj)] = self.effects.array_reads.get(id(obj), 0) - 1
                return

    def _has_symbolic_sizes(self, t: torch.Tensor, access: Access) -> bool:
        """Under ``cache="symbolic values"``, the sizes of tensors the caller passes (arguments
        and tensors reached through them, such as a KV cache object's) are symbolic. Parameters
        and module buffers keep static sizes: they are the model, not its input, and static
        weight shapes keep every matmul's shape known (a non-parameter tensor of outside state
        whose sizes changed is symbolic by ``options.symbolic_state_tensors`` instead)."""
        if isinstance(t, torch.nn.Parameter) or access.root.kind not in (ARG, KWARG):
            return False
        if access.kind == ATTR and access.parent is not None:
            return not isinstance(self._resolve_object(access.parent), torch.nn.Module)
        return True

    def _symbolic_size(self, size: int, tensor: Access, dim: int) -> int | IntegerProxy:
        """A size of 0 or 1 stays a constant (the prologue checks it): broadcasting, squeezing
        and empty tensors behave differently there. A larger one becomes an input (the
        prologue unpacks it) constrained to stay above 1."""
        if size < 2:
            return size
        access = Access(SIZE, dim, tensor)
        proxy = IntegerProxy(self._name_for(access), value=size)
        self.inputs.in_order.append((proxy, access))
        self.trace.input_numbers[proxy.name] = proxy
        self.trace.add_constraint(C.Compare(">=", proxy.expr, C.Const(2)))
        return proxy

    def _resolve_object(self, access: Access) -> Any:
        for obj, a in self.paths.access_of.values():
            if a == access:
                return obj
        return None

    def _access_of_input(self, proxy: Proxy) -> Access | None:
        for p, a in self.inputs.in_order:
            if p is proxy:
                return a
        return None

    def _lookup_found(self, holder: Any, name: str, found: Any, key: Any = None) -> None:
        """``getattr(holder, name)`` gave ``found``: checked on every call; the code of a
        function of the user's own modules too (``f.__code__ = ...``, as autoreload does, keeps
        the function object)."""
        self.facts.lookups.setdefault(key or (holder, name), (holder, name, found))
        self._guard_code(getattr(found, "__func__", found))

    def _guard_code(self, func: Any) -> None:
        if type(func) is types.FunctionType and not is_library_code(func.__code__):
            self._lookup_code(func)
            if func.__defaults__ is not None or func.__kwdefaults__ is not None:
                self._guard_defaults(func)

    def _guard_defaults(self, func: types.FunctionType) -> None:
        raise NotImplementedError  # reads.ReadsMixin

    def _associate(self, obj: Any, access: Access) -> None:
        """``obj`` is found at ``access`` (the first path the program took to it is kept)."""
        entry = self.paths.access_of.get(id(obj))
        if entry is None or entry[0] is not obj:
            self.paths.found_at(obj, access)
            self.paths.bound_at.setdefault(access, len(self.effects.writes))

    def is_inserted(self, access: Access) -> bool:
        """Whether ``access`` goes through an object the program put into outside state."""
        node: Access | None = access
        while node is not None:
            if node in self.effects.inserted:
                return True
            node = node.parent
        return False

    def _refuse_detached(self, obj: Any, what: str) -> None:
        if id(obj) in self.paths.detached and self.paths.detached[id(obj)] is obj:
            raise UnsupportedSideEffectError(
                f"thunder.jit: the function {what} a {type(obj).__name__} it took out of an "
                "outside container (pop); later calls could not find it to replay that. Copy it "
                "first, or mutate it before taking it out"
            )

    def _is_library_global(self, access: Access) -> bool:
        node: Access | None = access
        while node is not None and node.kind == ATTR:
            node = node.parent
        if node is None or node.kind != GLOBAL:
            return False
        module = node.key[0] or ""
        return is_library_module_name(module)
