"""Binding the interpreter to the IR: what the traced program reads, calls and writes.

A :class:`Binder` owns the state of one tracing run. Its callbacks (given to
``thunder_interp.interpret``) turn every value the program reads from outside its arguments into
either a proxy input (tensors; numbers in symbolic mode) or a guard the prologue checks; its
lookasides send torch callables to IR symbols; its opaque-call hook refuses torch ops without an
IR symbol and records mutations of outside containers. Writes to outside state (globals, closure
cells, attributes, container mutations) are recorded for the epilogue and undone when tracing ends,
so tracing itself has no visible effect: every call, the first included, runs the compiled program.
"""

from __future__ import annotations

import builtins
import copy
import functools
import sys
import types
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from thunder.access import ARG, ATTR, CELL, GLOBAL, ITEM, KWARG, ROOT, Access
from thunder.errors import (
    ImpureCallError,
    SharpEdgeError,
    UnsupportedOperationError,
    UnsupportedSideEffectError,
)
from thunder.guards import HOOK_ATTRIBUTES, check_no_module_hooks
from thunder.lookasides import is_torch_callable, jit_lookasides, query_is_allowed
from thunder.opaque import impure_reason
from thunder.options import CACHE_OPTIONS, SHARP_EDGES_OPTIONS, JitOptions
from thunder_interp import Callbacks, interpret
from thunder_ir import FloatProxy, IntegerProxy, NumberProxy, Proxy, Symbol, TensorProxy, Trace
from thunder_ir.devices import Device, to_torch_device
from thunder_ir.dtypes import DType, to_torch_dtype
from thunder_ir.prims.prologue import GuardFailure
from thunder_ir.proxies import CollectionProxy, _BoundTensorMethod
from thunder_ir.pytree import tree_iter
from thunder_ir.tracing import proxy_for_tensor

__all__ = ["Binder", "Guard", "Write", "is_scalar_constant"]

_MISSING: Any = object()
_SCALAR_TYPES = (
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
    type(Ellipsis),
)
_CONTAINER_TYPES = (list, tuple, dict, OrderedDict, set, frozenset)
_CONTAINER_MUTATORS: dict[type, set[str]] = {
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
    },
    dict: {"update", "pop", "popitem", "setdefault", "clear", "__setitem__", "__delitem__"},
    OrderedDict: {
        "update",
        "pop",
        "popitem",
        "setdefault",
        "clear",
        "__setitem__",
        "__delitem__",
        "move_to_end",
    },
    set: {"add", "discard", "remove", "pop", "clear", "update"},
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
_RETURNS_CONTENTS = frozenset({"pop", "popitem", "setdefault"})
# Module globals of libraries: their functions, classes and modules are not rebound by users.
_LIBRARY_PREFIXES = ("torch", "builtins", "thunder", "typing", "collections", "math", "functools")


def is_scalar_constant(x: Any, depth: int = 0) -> bool:
    """Whether ``x`` is a value the prologue can compare with ``==`` (scalars and small
    containers of them)."""
    if isinstance(x, _SCALAR_TYPES):
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
    ``name`` the mutating method, ``value`` the argument tuple); ``del_global``, ``del_cell`` and
    ``del_attr`` delete what the first three write. ``value`` is a template: proxies,
    constants, ``Access`` objects (outside values) and containers of those.
    """

    kind: str
    target: Access
    name: str
    value: Any


class ExternalRef:
    """An outside object in a value template, re-read through its access path."""

    __slots__ = ("access",)

    def __init__(self, access: Access) -> None:
        self.access = access


class Binder:
    """The state of one tracing run (one cache entry being compiled)."""

    def __init__(self, fn: Any, options: JitOptions, trace: Trace, param_names: tuple[str, ...]):
        self.fn = fn
        self.options = options
        self.trace = trace
        self.param_names = param_names
        self.symbolic = options.cache is CACHE_OPTIONS.SYMBOLIC_VALUES
        # Outside objects the program can reach, by id: (object, access path).
        self.access_of: dict[int, tuple[Any, Access]] = {}
        # When each object's path was taken, as the number of writes made before: the epilogue
        # resolves a path at that point of its replay, so writes made since (an insert before a
        # list item, a ``del``) do not move it to another object.
        self.bound_at: dict[Access, int] = {}
        # Objects taken out of outside containers (``pop``): no path reaches them on later calls.
        self._detached: dict[int, Any] = {}
        # Paths to objects the program itself put into outside containers: written (replayed),
        # never guarded (they do not exist when a call starts).
        self._inserted: set[Access] = set()
        self._snapshots: dict[int, Any] = {}
        # Computation inputs in order: proxy and where it comes from.
        self.inputs: list[tuple[Proxy, Access]] = []
        self.tensor_proxies: dict[int, tuple[Any, TensorProxy]] = {}
        self.guards: dict[Access, Guard] = {}
        self.writes: list[Write] = []
        self.globals_dicts: dict[str, dict[str, Any]] = {}
        self.functions_by_code: dict[types.CodeType, tuple[Any, Access]] = {}
        self.mutated: set[int] = set()
        self._undo: list[Callable[[], None]] = []
        self._snapshotted: set[int] = set()
        # Outside containers whose contents the program read (an item, or the container passed to
        # an opaque call such as len or sum), and the contents of mutated ones as the call found
        # them. A mutated container keeps a type guard only while its contents are never read.
        self._content_read: set[int] = set()
        self._entry_contents: dict[int, Any] = {}
        self._container_at: dict[Access, Any] = {}
        # Objects whose bound methods the program read from outside state (``random.random`` is
        # a method of the random module's hidden generator): calling those is not pure.
        self._outside_owners: dict[int, Any] = {}
        self._module_index: dict[int, Access] | None = None
        self._indexed_modules = 0
        # CPU autocast entered by the program: the stack of its dtypes (None: off) and the
        # (top-level bound symbol index, dtype) where it changes.
        self.autocast_stack: list[torch.dtype | None] = []
        self.autocast_marks: list[tuple[int, torch.dtype | None]] = []
        # torch.backends modules and flag objects read by the program: their canonical paths.
        self._backend_accesses: dict[int, tuple[Any, Access]] = {}
        self._register_root(fn)

    # -- roots ----------------------------------------------------------------------------------

    def _register_root(self, fn: Any) -> None:
        root = Access(ROOT, None)
        self.access_of[id(fn)] = (fn, root)
        if isinstance(fn, types.FunctionType):
            self.functions_by_code[fn.__code__] = (fn, root)
        elif isinstance(fn, types.MethodType):
            self.access_of[id(fn.__self__)] = (fn.__self__, root.attr("__self__"))
            func = fn.__func__
            if isinstance(func, types.FunctionType):
                self.functions_by_code[func.__code__] = (func, root.attr("__func__"))

    def _register_function(self, fn: Any, access: Access) -> None:
        self.access_of.setdefault(id(fn), (fn, access))
        if isinstance(fn, types.FunctionType):
            self.functions_by_code.setdefault(fn.__code__, (fn, access))
        elif isinstance(fn, types.MethodType) and isinstance(fn.__func__, types.FunctionType):
            self.access_of.setdefault(id(fn.__self__), (fn.__self__, access.attr("__self__")))
            self.functions_by_code.setdefault(
                fn.__func__.__code__, (fn.__func__, access.attr("__func__"))
            )

    def bind_arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
        """The arguments the interpreted program receives: tensors (and numbers, in symbolic mode)
        inside tuples, lists and dicts become proxies; other objects are tracked outside values."""
        pargs = tuple(self._bind_leaf(a, Access(ARG, i)) for i, a in enumerate(args))
        pkwargs = {k: self._bind_leaf(v, Access(KWARG, k)) for k, v in kwargs.items()}
        self._bind_defaults(len(args), kwargs, pkwargs)
        return pargs, pkwargs

    def _bind_defaults(self, nargs: int, kwargs: dict[str, Any], pkwargs: dict[str, Any]) -> None:
        """The default values this call uses are outside state (``fn.__defaults__`` can be
        reassigned, a mutable default mutated): guarded like any read; a default holding tensors
        is passed in as the proxies the program sees."""
        fn, root, skip = self.fn, Access(ROOT, None), 0
        if isinstance(fn, types.MethodType):
            fn, root, skip = fn.__func__, root.attr("__func__"), 1
        if not isinstance(fn, types.FunctionType):
            return
        code = fn.__code__
        defaults = fn.__defaults__ or ()
        first = code.co_argcount - len(defaults)
        used: list[tuple[str, Any, Access, bool]] = []
        for i, value in enumerate(defaults):
            name = code.co_varnames[first + i]
            if first + i - skip >= nargs and name not in kwargs:
                positional_only = first + i < code.co_posonlyargcount
                used.append((name, value, root.attr("__defaults__").item(i), positional_only))
        for name, value in (fn.__kwdefaults__ or {}).items():
            if name not in kwargs:
                used.append((name, value, root.attr("__kwdefaults__").item(name), False))
        for name, value, access, positional_only in used:
            seen = self.on_load(value, access)
            if seen is not value:
                if positional_only:
                    raise UnsupportedOperationError(
                        f"a tensor default of the positional-only parameter {name!r}",
                        "pass the tensor as an argument",
                    )
                pkwargs[name] = seen

    def _bind_leaf(self, x: Any, access: Access) -> Any:
        t = type(x)
        if t is tuple:
            return tuple(self._bind_leaf(v, access.item(i)) for i, v in enumerate(x))
        if t is list or t is dict:
            # The program sees a copy holding proxies that stands for the argument: what it
            # does to the copy (append, item stores, returning it) is done to the argument.
            items = enumerate(x) if t is list else x.items()
            bound = [(k, self._bind_leaf(v, access.item(k))) for k, v in items]
            copied = [v for _, v in bound] if t is list else dict(bound)
            self._associate(copied, access)
            self._container_at[access] = copied
            return copied
        if isinstance(x, tuple) and hasattr(t, "_make") and _holds_tensors(x):
            # A namedtuple of tensors: the program sees one of proxies (items and fields alike).
            return t._make(self._bind_leaf(v, access.item(i)) for i, v in enumerate(x))
        if isinstance(x, torch.Tensor):
            return self._tensor_input(x, access, guarded=False)
        if self.symbolic and t in (int, float):
            name = self._name_for(access)
            proxy: NumberProxy = (
                IntegerProxy(name, value=x) if t is int else FloatProxy(name, value=x)
            )
            self.inputs.append((proxy, access))
            return proxy
        if not isinstance(x, _SCALAR_TYPES):
            self._associate(x, access)
        return x

    # -- names and inputs -----------------------------------------------------------------------

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
        known = self.tensor_proxies.get(id(t))
        if known is not None and known[0] is t:
            if guarded and access != self._access_of_input(known[1]):
                # The same tensor reached by a second path (tied weights): check it stays tied.
                self.guards.setdefault(access, Guard(access, "is_input", known[1].name))
            return known[1]
        proxy = proxy_for_tensor(t, self._name_for(access))
        self.tensor_proxies[id(t)] = (t, proxy)
        self.inputs.append((proxy, access))
        if guarded:
            self.guards[access] = Guard(access, "tensor", t)
        return proxy

    def _access_of_input(self, proxy: Proxy) -> Access | None:
        for p, a in self.inputs:
            if p is proxy:
                return a
        return None

    # -- reads ----------------------------------------------------------------------------------

    def on_load(self, value: Any, access: Access, holder: Any = _MISSING) -> Any:
        """A value read from outside state: returns what the program sees, records the guard."""
        if isinstance(value, Proxy):
            return value
        if access.kind == ITEM and access.parent is not None:
            self._note_content_read(access.parent)
        if self.options.sharp_edges is not SHARP_EDGES_OPTIONS.ALLOW:
            self._sharp_edge(access)
        if isinstance(value, torch.Tensor):
            return self._tensor_input(value, access, guarded=True)
        if isinstance(value, _SCALAR_TYPES):
            self.guards.setdefault(access, Guard(access, "value", value))
            return value
        t = type(value)
        self._associate(value, access)
        if t in _CONTAINER_TYPES:
            return self._load_container(value, access)
        if isinstance(value, types.FunctionType):
            self.functions_by_code.setdefault(value.__code__, (value, access))
            if not self._is_library_global(access):
                self.guards.setdefault(access, Guard(access, "is", value))
            return value
        inner = getattr(value, "_thunder_inner_function", None)
        if inner is not None:  # an already jitted function: its code is read through it
            self._register_function(inner(), access.attr("fn"))
        if isinstance(value, (types.MethodType, types.BuiltinMethodType, types.MethodWrapperType)):
            self._guard_callable(value, access, holder)
            return value
        if isinstance(value, (type, types.ModuleType, types.BuiltinFunctionType)):
            if not self._is_library_global(access) and access.kind != ATTR:
                self.guards.setdefault(access, Guard(access, "is", value))
            return value
        self.guards.setdefault(access, Guard(access, "type", t))
        return value

    def _guard_items(self, container: Any, access: Access) -> None:
        """An outside container of objects: the program may iterate it, which no hook sees, so
        its length or keys and which object each item is are guarded (a hook registered on a
        module, a function appended to a global list, recompile)."""
        if len(container) > _MAX_GUARDED_ITEMS or not isinstance(container, (list, tuple, dict)):
            return
        if isinstance(container, dict):
            self.guards[access.attr("<keys>")] = Guard(access, "keys", tuple(container))
            items: Any = container.items()
        else:
            self.guards[access.attr("<len>")] = Guard(access, "len", len(container))
            items = enumerate(container)
        for key, item in items:
            item_access = access.item(key)
            if isinstance(item, _SCALAR_TYPES):
                kind = "value"
            elif isinstance(item, _IDENTIFIED_TYPES):
                kind = "is"
            else:
                kind = "type"
                self._associate(item, item_access)
            self.guards.setdefault(
                item_access, Guard(item_access, kind, type(item) if kind == "type" else item)
            )

    def _guard_callable(self, value: Any, access: Access, holder: Any) -> None:
        """Which function a stored callable is: a builtin (``torch.tanh`` kept in an attribute)
        by identity; a method bound to another object (or stored on the instance) by its object
        and function. A method looked up on its own object's class needs no guard: the object's
        type is guarded."""
        owner = value.__self__
        if owner is None or isinstance(owner, types.ModuleType):
            if not self._is_library_global(access):
                self.guards.setdefault(access, Guard(access, "is", value))
            return
        self._outside_owners.setdefault(id(owner), owner)
        if self._is_library_global(access):
            return
        if owner is holder and access.key not in getattr(holder, "__dict__", {}):
            return  # obj.method: found on the (guarded) type
        self_access = access.attr("__self__")
        self.guards.setdefault(self_access, Guard(self_access, "is", owner))
        self._associate(owner, self_access)  # what the method reads from it is found through it
        if isinstance(value, types.MethodType):
            func_access = access.attr("__func__")
            self.guards.setdefault(func_access, Guard(func_access, "is", value.__func__))
        else:
            name_access = access.attr("__name__")
            self.guards.setdefault(name_access, Guard(name_access, "value", value.__name__))

    def _load_container(self, value: Any, access: Access) -> Any:
        if type(value) in _CONTAINER_MUTATORS:
            self._container_at.setdefault(access, value)
        if is_scalar_constant(value):
            self.guards.setdefault(access, Guard(access, "value", copy.deepcopy(value)))
            return value
        self.guards.setdefault(access, Guard(access, "type", type(value)))
        if not _holds_tensors(value):
            self._guard_items(value, access)
            return value
        # A container of tensors: the program sees a copy holding proxies. The copy stands for the
        # outside container, so its mutations are recorded (and replayed) as the container's.
        copied: Any
        if type(value) in (dict, OrderedDict):
            self.guards[access.attr("<keys>")] = Guard(access, "keys", tuple(value))
            copied = type(value)(
                (k, self.on_load(v, access.item(k)) if isinstance(v, torch.Tensor) else v)
                for k, v in value.items()
            )
        elif type(value) in (tuple, list):
            self.guards[access] = Guard(access, "len", len(value))
            copied = type(value)(
                self.on_load(v, access.item(i)) if isinstance(v, torch.Tensor) else v
                for i, v in enumerate(value)
            )
        else:
            return value  # a set of tensors: hashed by identity, never proxied
        self.access_of[id(copied)] = (copied, access)
        self.bound_at.setdefault(access, len(self.writes))
        self._container_at[access] = copied
        return copied

    def _is_library_global(self, access: Access) -> bool:
        node: Access | None = access
        while node is not None and node.kind == ATTR:
            node = node.parent
        if node is None or node.kind != GLOBAL:
            return False
        module = node.key[0] or ""
        return bool(module.startswith(_LIBRARY_PREFIXES))

    def _sharp_edge(self, access: Access) -> None:
        root = access.root
        if root.kind not in (GLOBAL, CELL) or self._is_library_global(access):
            return
        what = f"reads {access.describe(self.param_names)}, which is not an argument"
        if self.options.sharp_edges is SHARP_EDGES_OPTIONS.ERROR:
            raise SharpEdgeError(f"thunder.jit(sharp_edges='error'): the function {what}")
        warnings.warn(f"thunder.jit: the function {what} (it is guarded)", stacklevel=2)

    def _associate(self, obj: Any, access: Access) -> None:
        """``obj`` is found at ``access`` (the first path the program took to it is kept)."""
        entry = self.access_of.get(id(obj))
        if entry is None or entry[0] is not obj:
            self.access_of[id(obj)] = (obj, access)
            self.bound_at.setdefault(access, len(self.writes))

    def access_for(self, obj: Any) -> Access | None:
        """Where an outside object can be found on later calls, or None (created by the program)."""
        entry = self.access_of.get(id(obj))
        if entry is not None and entry[0] is obj:
            return entry[1]
        if isinstance(obj, torch.nn.Module):
            return self._module_access(obj)
        return self._find_in_outside_containers(obj)

    def _find_in_outside_containers(self, obj: Any) -> Access | None:
        """The path of ``obj`` when it sits in an outside container the program read (reached
        without a hook: iterating, unpacking, ``dict.get``); None when it is in none of them (the
        program created it). What the program found there is then guarded (a content read)."""
        if isinstance(obj, (_SCALAR_TYPES, Proxy)):
            return None
        for access, container in list(self._container_at.items()):
            items = container.items() if isinstance(container, dict) else enumerate(container)
            for key, value in items:
                if value is obj:
                    found = access.item(key)
                    snapshot = self._snapshots.get(id(container))
                    if snapshot is not None and not any(v is obj for v in _values(snapshot)):
                        self._inserted.add(found)  # put there by this call
                    else:
                        self._note_content_read_of(container)
                    self._associate(obj, found)
                    return found
        return None

    def is_inserted(self, access: Access) -> bool:
        """Whether ``access`` goes through an object the program put into outside state."""
        node: Access | None = access
        while node is not None:
            if node in self._inserted:
                return True
            node = node.parent
        return False

    def _refuse_detached(self, obj: Any, what: str) -> None:
        if id(obj) in self._detached and self._detached[id(obj)] is obj:
            raise UnsupportedSideEffectError(
                f"thunder.jit: the function {what} a {type(obj).__name__} it took out of an "
                "outside container (pop); later calls could not find it to replay that. Copy it "
                "first, or mutate it before taking it out"
            )

    def _module_access(self, module: torch.nn.Module) -> Access | None:
        """Submodules reached without a path (iterating a ModuleList): found by their name in
        an outside module, and the containers on the way guarded by length."""
        tracked = [(o, a) for o, a in self.access_of.values() if isinstance(o, torch.nn.Module)]
        if self._module_index is None or len(tracked) != self._indexed_modules:
            index: dict[int, Access] = {}
            for root, root_access in tracked:
                for name, sub in root.named_modules(remove_duplicate=True):
                    if name and id(sub) not in index:
                        index[id(sub)] = _dotted(root_access, name)
            self._module_index = index
            self._indexed_modules = len(tracked)
        access = self._module_index.get(id(module))
        if access is None:
            return None
        node: Access | None = access.parent
        while node is not None:
            parent = self._resolve(node)
            if isinstance(parent, torch.nn.Module):
                modules = node.attr("_modules")
                self.guards.setdefault(modules, Guard(modules, "keys", tuple(parent._modules)))
            if node.kind != ATTR:
                break
            node = node.parent
        self.access_of[id(module)] = (module, access)
        self.guards.setdefault(access, Guard(access, "type", type(module)))
        return access

    def _resolve(self, access: Access) -> Any:
        for obj, a in self.access_of.values():
            if a == access:
                return obj
        if access.kind == ATTR and access.parent is not None:
            parent = self._resolve(access.parent)
            return getattr(parent, access.key, None) if parent is not None else None
        return None

    # -- interpreter callbacks -----------------------------------------------------------------

    def callbacks(self) -> Callbacks:
        return Callbacks(
            load_global=self._cb_load_global,
            load_closure_cell=self._cb_load_cell,
            load_attribute=self._cb_load_attribute,
            store_global=self._cb_store_global,
            store_closure_cell=self._cb_store_cell,
            store_attribute=self._cb_store_attribute,
            store_item=self._cb_store_item,
            load_item=self._cb_load_item,
            delete_global=self._cb_delete_global,
            delete_closure_cell=self._cb_delete_cell,
            delete_attribute=self._cb_delete_attribute,
            delete_item=self._cb_delete_item,
            opaque_call=self._cb_opaque_call,
        )

    def lookasides(self) -> dict[Any, Any]:
        """The lookaside table of this run: the static one, plus calls of already jitted
        functions, which are interpreted into this trace (reentrantly) instead of running their
        own cache."""
        from thunder.jit_function import ThunderFunction

        table = jit_lookasides()

        def call_jitted(jitted: ThunderFunction, *args: Any, **kwargs: Any) -> Any:
            inner = interpret(jitted.fn, lookasides=table, callbacks=self.callbacks())
            return inner(*args, **kwargs)

        table[ThunderFunction.__call__] = call_jitted
        for fn, impl in table.items():
            if isinstance(impl, Symbol):  # a torch callable the IR mirrors: a user-level call
                table[fn] = _returning_torch_types(impl)
        table[_BoundTensorMethod.__call__] = _call_tensor_method
        table[TensorProxy.size] = _tensor_size
        table.update(self._context_lookasides(table))
        return table

    # -- autocast regions and checkpointing ----------------------------------------------------

    def _context_lookasides(self, table: dict[Any, Any]) -> dict[Any, Any]:
        """``torch.autocast`` entered inside the program (as a context manager or decorator)
        records where its region starts and ends (the autocast transform is applied to it after
        tracing); ``torch.utils.checkpoint.checkpoint`` records a checkpointed region."""
        from torch.amp.autocast_mode import autocast as autocast_cls

        out: dict[Any, Any] = {
            torch.is_autocast_enabled: self._is_autocast_enabled,
            torch.get_autocast_dtype: self._get_autocast_dtype,
            torch.utils.checkpoint.checkpoint: functools.partial(self._checkpoint, table),
        }
        legacy = getattr(torch, "is_autocast_cpu_enabled", None)
        if legacy is not None:
            out[legacy] = functools.partial(self._is_autocast_enabled, "cpu")
        classes: list[Any] = [autocast_cls]
        cpu_autocast = getattr(getattr(getattr(torch, "cpu", None), "amp", None), "autocast", None)
        if isinstance(cpu_autocast, type):  # torch.cpu.amp.autocast (deprecated)
            classes.append(cpu_autocast)
        for cls in classes:
            # Constructing one reads ambient state only (part of the cache key): run natively.
            out[cls] = cls
            out[cls.__enter__] = self._autocast_enter
            out[cls.__exit__] = self._autocast_exit
        return out

    def autocast_at_start(self) -> torch.dtype | None:
        """The CPU autocast dtype the program starts under (None: autocast off)."""
        if torch.is_autocast_enabled("cpu"):
            return torch.get_autocast_dtype("cpu")
        return None

    def _autocast_now(self) -> torch.dtype | None:
        return self.autocast_stack[-1] if self.autocast_stack else self.autocast_at_start()

    def _autocast_enter(self, cm: Any) -> Any:
        device = getattr(cm, "device", None)
        enabled = bool(getattr(cm, "_enabled", False))
        if device != "cpu":
            if enabled:
                raise UnsupportedOperationError(
                    f"torch.autocast(device_type={device!r}) inside a jitted function",
                    "only device_type='cpu' autocast regions are supported",
                )
            self.autocast_stack.append(self._autocast_now())  # changes nothing on the CPU
            return cm
        if len(self.trace.scopes) > 1:
            raise UnsupportedOperationError(
                "entering torch.autocast inside a checkpointed region",
                "enter it outside torch.utils.checkpoint.checkpoint, or around the jitted call",
            )
        state = cm.fast_dtype if enabled else None
        self.autocast_stack.append(state)
        self.autocast_marks.append((len(self.trace.bound_symbols), state))
        return cm

    def _autocast_exit(self, cm: Any, *exc_info: Any) -> bool:
        if not self.autocast_stack:
            raise UnsupportedOperationError(
                "torch.autocast.__exit__ without a matching __enter__ inside the jitted function"
            )
        self.autocast_stack.pop()
        if getattr(cm, "device", None) == "cpu":
            if len(self.trace.scopes) > 1:
                raise UnsupportedOperationError(
                    "leaving torch.autocast inside a checkpointed region",
                    "enter and leave it outside torch.utils.checkpoint.checkpoint",
                )
            self.autocast_marks.append((len(self.trace.bound_symbols), self._autocast_now()))
        return False

    def _is_autocast_enabled(self, *args: Any, **kwargs: Any) -> bool:
        device = kwargs.get("device_type", args[0] if args else None)
        if device == "cpu" and self.autocast_stack:
            return self.autocast_stack[-1] is not None
        return bool(torch.is_autocast_enabled(*args, **kwargs))

    def _get_autocast_dtype(self, *args: Any, **kwargs: Any) -> torch.dtype:
        device = kwargs.get("device_type", args[0] if args else None)
        if device == "cpu" and self.autocast_stack and self.autocast_stack[-1] is not None:
            return self.autocast_stack[-1]
        return torch.get_autocast_dtype(*args, **kwargs)

    def autocast_regions(self) -> list[torch.dtype | None] | None:
        """The CPU autocast dtype of each top-level bound symbol of the trace (None: off), or
        None when the program never entered or left autocast itself."""
        if not self.autocast_marks:
            return None
        regions: list[torch.dtype | None] = []
        state = self.autocast_at_start()
        marks = iter(self.autocast_marks)
        mark = next(marks, None)
        for i in range(len(self.trace.bound_symbols)):
            while mark is not None and mark[0] <= i:
                state = mark[1]
                mark = next(marks, None)
            regions.append(state)
        return regions

    def _checkpoint(
        self,
        table: dict[Any, Any],
        function: Any,
        *args: Any,
        use_reentrant: bool | None = None,
        context_fn: Any = None,
        determinism_check: str = "default",
        debug: bool = False,
        early_stop: bool = True,
        **kwargs: Any,
    ) -> Any:
        """``torch.utils.checkpoint.checkpoint`` inside a jitted function: ``function`` is
        interpreted into a checkpointed region (its intermediates are recomputed in the backward
        instead of saved). Random values drawn inside it are saved, not drawn again."""
        from thunder_transforms.checkpoint import checkpoint_symbol

        if use_reentrant is not False:
            raise UnsupportedOperationError(
                f"torch.utils.checkpoint.checkpoint(use_reentrant={use_reentrant!r})",
                "pass use_reentrant=False (the reentrant variant's gradient semantics differ)",
            )
        if context_fn is not None and context_fn is not torch.utils.checkpoint.noop_context_fn:
            raise UnsupportedOperationError(
                "torch.utils.checkpoint.checkpoint(context_fn=...)",
                "custom context functions are not supported",
            )
        kwargs.pop("preserve_rng_state", None)  # random values are saved, so always preserved
        interpreted = interpret(function, lookasides=table, callbacks=self.callbacks())
        name = getattr(function, "__name__", None) or type(function).__name__
        name = name if name.isidentifier() else "region"
        return checkpoint_symbol(interpreted, name=name)(*args, **kwargs)

    def _cb_load_global(self, name: str, value: Any, globs: dict[str, Any], prov: Any) -> Any:
        if name in globs:
            module = globs.get("__name__")
            module = module if isinstance(module, str) else f"<globals {id(globs):x}>"
            self.globals_dicts.setdefault(module, globs)
        else:
            module = "builtins"
            if value is getattr(builtins, name, _MISSING):
                return value  # a builtin: not guarded
            self.globals_dicts.setdefault(module, globs)
        return self.on_load(value, Access(GLOBAL, (module, name)))

    def _cb_load_cell(self, name: str, value: Any, code: types.CodeType, prov: Any) -> Any:
        if name in code.co_cellvars:
            return value  # a cell of this frame: created by this call
        entry = self.functions_by_code.get(code)
        if entry is None:
            return value  # a function created by the program: its cells hold program values
        _fn, fn_access = entry
        index = code.co_freevars.index(name)
        return self.on_load(value, Access(CELL, (index, name), fn_access))

    def _cb_load_attribute(self, obj: Any, name: str, value: Any, prov: Any) -> Any:
        if isinstance(obj, Proxy):
            return torch_value(value, as_size=name == "shape")
        if _is_backend_flags(obj):
            # torch.backends.*: flags users flip at run time (mkldnn.enabled, matmul.allow_tf32)
            access = self._backend_access(obj)
            if access is not None:
                if isinstance(value, (bool, int, float, str)):
                    self.guards.setdefault(
                        access.attr(name), Guard(access.attr(name), "value", value)
                    )
                elif _is_backend_flags(value):
                    self._backend_accesses.setdefault(id(value), (value, access.attr(name)))
            return value
        if isinstance(obj, types.ModuleType) and obj.__name__.startswith(_LIBRARY_PREFIXES):
            return value  # torch.float32, math.pi: library constants
        if name in HOOK_ATTRIBUTES and isinstance(obj, torch.nn.Module):
            hooks = self._module_hooks_access(obj, name, value)
            if hooks is not None:
                return value
        parent = self.access_for(obj)
        if parent is None:
            if isinstance(value, torch.Tensor):
                raise UnsupportedOperationError(
                    f"reading the tensor attribute {name!r} of a {type(obj).__name__}",
                    "the object was not passed in and cannot be found again on later calls",
                )
            return value
        return self.on_load(value, parent.attr(name), holder=obj)

    def _backend_access(self, obj: Any) -> Access | None:
        """Where a ``torch.backends`` module (or a flags object in one) is found on every call:
        its canonical path ``torch.backends.<name>`` (how the program reached it does not
        matter)."""
        entry = self._backend_accesses.get(id(obj))
        if entry is not None and entry[0] is obj:
            return entry[1]
        if not isinstance(obj, types.ModuleType):
            return None
        parent_name, _, leaf = obj.__name__.rpartition(".")
        parent = sys.modules.get(parent_name)
        if parent is None or getattr(parent, leaf, None) is not obj:
            return None
        self.globals_dicts.setdefault(parent_name, vars(parent))
        access = Access(GLOBAL, (parent_name, leaf))
        self._backend_accesses[id(obj)] = (obj, access)
        return access

    def _module_hooks_access(self, module: torch.nn.Module, name: str, value: Any) -> Access | None:
        """Reads of an nn.Module's hook dicts fold into one guard per module while they are
        empty (the common case); otherwise they are guarded like any attribute."""
        if value or _has_hooks(module):
            return None  # guarded like any attribute: by the hooks each dict holds
        access = self.access_for(module)
        if access is None:
            return access
        self.guards.setdefault(access.attr("<hooks>"), Guard(access, "no_hooks", None))
        return access

    def _cb_store_global(self, name: str, value: Any, globs: dict[str, Any]) -> None:
        module = globs.get("__name__")
        module = module if isinstance(module, str) else f"<globals {id(globs):x}>"
        self.globals_dicts.setdefault(module, globs)
        access = Access(GLOBAL, (module, name))
        template = self._template(value, f"global {name}")
        old = globs.get(name, _MISSING)
        self._undo.append(lambda: _restore_item(globs, name, old))
        self.writes.append(Write("global", access, name, template))

    def _cb_store_cell(self, name: str, value: Any, code: types.CodeType) -> None:
        if name in code.co_cellvars:
            return
        entry = self.functions_by_code.get(code)
        if entry is None:
            return
        fn, fn_access = entry
        index = code.co_freevars.index(name)
        cell = fn.__closure__[index]
        template = self._template(value, f"nonlocal {name}")
        old = cell.cell_contents if _cell_is_set(cell) else _MISSING
        self._undo.append(lambda: _restore_cell(cell, old))
        self.writes.append(Write("cell", Access(CELL, (index, name), fn_access), name, template))

    def _cb_store_attribute(self, obj: Any, name: str, value: Any) -> None:
        self._refuse_detached(obj, f"sets the attribute {name!r} of")
        access = self.access_for(obj)
        if access is None:
            return
        if (
            isinstance(obj, torch.nn.Module)
            and isinstance(value, Proxy)
            and (name in obj._buffers or name in obj._parameters)
        ):
            raise UnsupportedSideEffectError(
                f"thunder.jit: assigning a computed tensor to the buffer or parameter {name!r} "
                f"of {type(obj).__name__} is not supported yet; update it in place "
                f"(self.{name}.copy_(new_value))"
            )
        template = self._template(value, f"attribute {name}")
        old = getattr(obj, name, _MISSING)
        self._undo.append(lambda: _restore_attr(obj, name, old))
        self.writes.append(Write("attr", access, name, template))

    def _cb_delete_global(self, name: str, globs: dict[str, Any]) -> None:
        module = globs.get("__name__")
        module = module if isinstance(module, str) else f"<globals {id(globs):x}>"
        self.globals_dicts.setdefault(module, globs)
        old = globs[name]
        self._undo.append(lambda: _restore_item(globs, name, old))
        self.writes.append(Write("del_global", Access(GLOBAL, (module, name)), name, None))

    def _cb_delete_cell(self, name: str, code: types.CodeType) -> None:
        entry = self.functions_by_code.get(code)
        if entry is None or name in code.co_cellvars:
            return
        fn, fn_access = entry
        index = code.co_freevars.index(name)
        cell = fn.__closure__[index]
        old = cell.cell_contents
        self._undo.append(lambda: _restore_cell(cell, old))
        self.writes.append(Write("del_cell", Access(CELL, (index, name), fn_access), name, None))

    def _cb_delete_attribute(self, obj: Any, name: str) -> None:
        self._refuse_detached(obj, f"deletes the attribute {name!r} of")
        access = self.access_for(obj)
        if access is None:
            return
        old = getattr(obj, name, _MISSING)
        self._undo.append(lambda: _restore_attr(obj, name, old))
        self.writes.append(Write("del_attr", access, name, None))

    def _cb_delete_item(self, container: Any, key: Any) -> None:
        if isinstance(container, Proxy):
            return
        if type(container) in _CONTAINER_MUTATORS:
            self._record_mutation(container, "__delitem__", (key,), {})
        elif self.access_for(container) is not None:
            raise UnsupportedSideEffectError(
                f"thunder.jit: cannot replay deleting an item of a {type(container).__name__} "
                "that the function did not create"
            )

    def _cb_store_item(self, container: Any, key: Any, value: Any) -> None:
        if isinstance(container, Proxy):
            return
        if type(container) in _CONTAINER_MUTATORS:
            self._record_mutation(container, "__setitem__", (key, value), {})
        elif self.access_for(container) is not None:
            raise UnsupportedSideEffectError(
                f"thunder.jit: cannot replay item assignment on a {type(container).__name__} "
                "that the function did not create"
            )

    def _cb_load_item(self, container: Any, key: Any, value: Any) -> None:
        if type(container) not in _CONTAINER_MUTATORS:
            if isinstance(container, tuple) and not isinstance(key, slice):
                self._load_immutable_item(container, key, value)
            return
        self._note_content_read_of(container)
        if id(container) in self.mutated:
            return  # the contents the call found are guarded whole (or refused)
        access = self.access_for(container)
        if access is None or isinstance(key, slice) or isinstance(value, (Proxy, torch.Tensor)):
            return
        # An item of an outside container is outside state too: guard it like any other read,
        # so that objects and containers inside it are tracked (their attributes guarded, their
        # mutations replayed).
        item = access.item(key)
        if isinstance(value, _SCALAR_TYPES):
            self.guards.setdefault(item, Guard(item, "value", value))
        else:
            self.on_load(value, item)

    def _load_immutable_item(self, container: tuple[Any, ...], key: Any, value: Any) -> None:
        """An item of an outside tuple (a namedtuple, ``torch.Size``, a tuple holding objects)
        is outside state: guarded like any read (a tuple of scalars is guarded whole)."""
        if isinstance(value, (Proxy, torch.Tensor)):
            return
        access = self.access_for(container)
        if access is None or (access.is_argument_leaf() and type(container) is tuple):
            return  # created by the program, or an argument tuple (the cache key covers it)
        item = access.item(key)
        if isinstance(value, _SCALAR_TYPES):
            self.guards.setdefault(item, Guard(item, "value", value))
        else:
            self.on_load(value, item)

    def _cb_opaque_call(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        owner = getattr(fn, "__self__", None)
        if owner is not None and type(fn) is types.BuiltinMethodType:
            mutators = _CONTAINER_MUTATORS.get(type(owner))
            if mutators is not None and fn.__name__ in mutators:
                self._record_mutation(owner, fn.__name__, args, kwargs)
                if fn.__name__ in _RETURNS_CONTENTS:  # what it returns was in the container
                    self._note_content_read_of(owner)
                if fn.__name__ in ("pop", "popitem") and self.access_for(owner) is not None:
                    result = fn(*args, **kwargs)
                    for x in result if fn.__name__ == "popitem" else (result,):
                        if not isinstance(x, _SCALAR_TYPES):
                            self._detached[id(x)] = x
                    return result
            elif type(owner) in _CONTAINER_MUTATORS:
                self._note_content_read_of(owner)  # list.index, dict.get, ...
        for a in (*args, *kwargs.values()):
            if type(a) in _CONTAINER_MUTATORS:
                self._note_content_read_of(a)
        if not is_torch_callable(fn):
            self._refuse_impure(fn, args)
        if is_torch_callable(fn):
            has_proxy = any(isinstance(a, Proxy) for a in tree_iter((args, kwargs)))
            if has_proxy or not query_is_allowed(fn):
                raise UnsupportedOperationError(_callable_name(fn))
            result = fn(*args, **kwargs)
            if isinstance(result, torch.Tensor):
                raise UnsupportedOperationError(_callable_name(fn), "it creates a tensor")
            return result
        return fn(*args, **kwargs)

    def _is_outside(self, obj: Any) -> bool:
        return id(obj) in self._outside_owners or self.access_for(obj) is not None

    def _refuse_impure(self, fn: Any, args: tuple[Any, ...]) -> None:
        owner = getattr(fn, "__self__", None)
        mutators = _CONTAINER_MUTATORS.get(type(owner)) if owner is not None else None
        if mutators is not None and getattr(fn, "__name__", "") in mutators:
            return  # a recorded (replayed) mutation
        reason: str | None
        if getattr(fn, "__name__", "") == "next" and getattr(fn, "__module__", "") == "builtins":
            if not args or self.access_for(args[0]) is None:
                return  # an iterator the program made in this call
            reason = "next() advances an iterator that lives outside the function"
        else:
            reason = impure_reason(fn, self._is_outside)
        if reason is not None:
            raise ImpureCallError(
                _callable_name(fn),
                f"its result would become a constant of the compiled program ({reason})",
            )

    def _record_mutation(self, container: Any, method: str, args: tuple[Any, ...], kw: Any) -> None:
        self._refuse_detached(container, f"calls {method} on")
        access = self.access_for(container)
        if access is None:
            return  # created by the program
        if kw:
            raise UnsupportedSideEffectError(
                f"thunder.jit: cannot replay {type(container).__name__}.{method} with keywords"
            )
        template = self._template(tuple(args), f"{type(container).__name__}.{method} argument")
        if id(container) not in self._snapshotted:
            self._snapshotted.add(id(container))
            snapshot = copy.copy(container)
            self._snapshots[id(container)] = snapshot
            self._undo.append(lambda: _restore_container(container, snapshot))
            self._entry_contents[id(container)] = (
                copy.deepcopy(snapshot) if is_scalar_constant(snapshot) else _MISSING
            )
        self.mutated.add(id(container))
        if id(container) in self._content_read:
            self._guard_entry_contents(container, access)
        else:
            # Only written so far: its contents change every call, so guard the type alone.
            self.guards.pop(access, None)
            self.guards.pop(access.attr("<keys>"), None)
            self.guards.pop(access.attr("<len>"), None)
            self.guards[access] = Guard(access, "type", type(container))
        self.writes.append(Write("call", access, method, template))

    def _note_content_read(self, access: Access) -> None:
        container = self._container_at.get(access)
        if container is not None:
            self._note_content_read_of(container)

    def _note_content_read_of(self, container: Any) -> None:
        if id(container) in self._content_read:
            return
        self._content_read.add(id(container))
        if id(container) in self.mutated:
            access = self.access_for(container)
            if access is not None:
                self._guard_entry_contents(container, access)

    def _guard_entry_contents(self, container: Any, access: Access) -> None:
        """The program reads a container it also mutates: what it read depends on the contents
        the call found, so those are guarded (each call that changes them recompiles)."""
        entry = self._entry_contents[id(container)]
        if entry is _MISSING:
            raise UnsupportedSideEffectError(
                f"thunder.jit: the function both mutates and reads "
                f"{access.describe(self.param_names)}, whose contents cannot be guarded by value; "
                "pass it as an argument or read it outside the jitted function"
            )
        self.guards.pop(access, None)
        self.guards[access] = Guard(access, "value", entry)

    # -- values of writes and outputs ----------------------------------------------------------

    def _template(self, value: Any, what: str) -> Any:
        """``value`` as something the epilogue can rebuild on every call."""
        if isinstance(value, (Proxy, *_SCALAR_TYPES)):
            return value
        access = self.access_for(value)
        if access is not None:
            return ExternalRef(access)
        t = type(value)
        if t in (tuple, list):
            return t(self._template(v, what) for v in value)
        if t is slice:  # a slice assignment's key
            parts = (value.start, value.stop, value.step)
            return slice(*(self._template(v, what) for v in parts))
        if t is dict:
            return {k: self._template(v, what) for k, v in value.items()}
        raise UnsupportedSideEffectError(
            f"thunder.jit: cannot replay storing a {t.__name__} created by the function into "
            f"{what} on later calls; only tensors, numbers, strings, None, outside objects and "
            "tuples/lists/dicts of those can be written to state outside the function"
        )

    def output_template(self, value: Any) -> Any:
        """The function's return value as a template (the same rules as writes)."""
        if isinstance(value, torch.Tensor) and not isinstance(value, Proxy):
            access = self.access_for(value)
            if access is None:
                raise UnsupportedSideEffectError(
                    "thunder.jit: the function returned a tensor thunder did not trace"
                )
        return self._template(value, "the return value")

    def undo_effects(self) -> None:
        """Restore outside state written while tracing (the epilogue replays it for real)."""
        while self._undo:
            self._undo.pop()()


def _has_hooks(module: torch.nn.Module) -> bool:
    try:
        check_no_module_hooks.impl(module)  # type: ignore[misc]
    except GuardFailure:
        return True
    return False


def _values(container: Any) -> Any:
    return container.values() if isinstance(container, dict) else container


def torch_value(value: Any, as_size: bool = False) -> Any:
    """An IR value as the torch value user code expects (``x.dtype == torch.float32``,
    ``isinstance(x.shape, torch.Size)``): IR dtypes and devices become torch's, a static shape a
    ``torch.Size``. Everything else (proxies, numbers) is returned as is."""
    if isinstance(value, DType):
        return to_torch_dtype(value)
    if isinstance(value, Device):
        return to_torch_device(value)
    if as_size and type(value) is tuple and all(type(d) is int for d in value):
        return torch.Size(value)
    return value


def _returning_torch_types(sym: Symbol) -> Callable[..., Any]:
    @functools.wraps(sym)
    def call(*args: Any, **kwargs: Any) -> Any:
        out = sym(*args, **kwargs)
        return out if isinstance(out, TensorProxy) else torch_value(out)

    return call


def _tensor_size(t: TensorProxy, dim: Any = None) -> Any:
    return torch_value(t.size(dim), as_size=dim is None)


def _call_tensor_method(method: Any, *args: Any, **kwargs: Any) -> Any:
    out = method(*args, **kwargs)
    if isinstance(out, TensorProxy):
        return out
    name = getattr(method.fn, "name", None)
    return torch_value(out, as_size=name == "size" and not args and not kwargs)


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


def _callable_name(fn: Any) -> str:
    owner = getattr(fn, "__objclass__", None) or getattr(fn, "__self__", None)
    name = getattr(fn, "__name__", None) or type(fn).__name__
    if isinstance(owner, torch.Tensor) or owner is torch._C.TensorBase:
        return f"torch.Tensor.{name}"
    module = getattr(fn, "__module__", None)
    if module:
        module = module.replace("torch._C._nn", "torch._C._nn").replace(
            "torch._C._VariableFunctions", "torch"
        )
        return f"{module}.{name}"
    return str(name)


def _cell_is_set(cell: types.CellType) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


def _restore_item(d: dict[str, Any], name: str, old: Any) -> None:
    if old is _MISSING:
        d.pop(name, None)
    else:
        d[name] = old


def _restore_cell(cell: types.CellType, old: Any) -> None:
    if old is _MISSING:
        if _cell_is_set(cell):
            del cell.cell_contents
    else:
        cell.cell_contents = old


def _restore_attr(obj: Any, name: str, old: Any) -> None:
    if old is _MISSING:
        if hasattr(obj, name):
            delattr(obj, name)
    else:
        setattr(obj, name, old)


def _restore_container(container: Any, snapshot: Any) -> None:
    if isinstance(container, list):
        container[:] = snapshot
    else:
        container.clear()
        container.update(snapshot)


def iter_proxies(template: Any) -> Iterator[Proxy]:
    """Every proxy in a value template."""
    for leaf in tree_iter(template):
        if isinstance(leaf, Proxy):
            yield leaf


_ = (CollectionProxy, ITEM)
