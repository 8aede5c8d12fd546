"""Reads: every value the traced program takes from outside its arguments becomes a proxy
input (tensors; numbers in symbolic mode) or a guard the prologue checks. Arguments are bound
here too, and containers whose contents the program reads are tracked (a content read)."""

from __future__ import annotations

import builtins
import collections.abc
import contextlib
import copy
import functools
import operator
import sys
import types
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import torch

import thunder_interp
from thunder import logs, tensor_patches
from thunder.access import ARG, ATTR, CELL, ELEMENT, GLOBAL, ITEM, KWARG, QUERY, ROOT, Access
from thunder.binding.locations import is_library_file
from thunder.binding.state import (
    _CONTAINER_MUTATORS,
    _CONTAINER_TYPES,
    _HEAPTYPE,
    _IDENTIFIED_TYPES,
    _MAX_GUARDED_ITEMS,
    _MISSING,
    _SCALAR_TYPES,
    NDARRAY,
    BinderState,
    Guard,
    _dotted,
    _has_hooks,
    _holds_tensors,
    _is_backend_flags,
    _values,
    is_library_module_name,
    is_ndarray,
    is_scalar_constant,
    is_value_object,
    restorable_base,
    restore,
    torch_value,
)
from thunder.errors import (
    RunsEagerly,
    SharpEdgeError,
    UnsupportedOperationError,
    UnsupportedSideEffectError,
)
from thunder.guards import (
    ABSENT_FROM_CLASS,
    HOOK_ATTRIBUTES,
    Held,
    StaticClassLookup,
    class_holding,
    held_object,
)
from thunder.lookasides import LIBRARY_DIRS, SymbolicSize, native_special
from thunder.opaque import advances_natively
from thunder.options import SHARP_EDGES_OPTIONS
from thunder.signature import is_plain
from thunder_interp import compares_by_identity
from thunder_interp._slots import lasts_with_its_module
from thunder_ir import FloatProxy, IntegerProxy, NumberProxy, OpTag, Proxy, TensorProxy
from thunder_ir.prims.prologue import value_snapshot

# Names that ``getattr`` on a class answers from ``type`` itself (data descriptors of the
# metaclass), not from the class's MRO.
_TYPE_DATA_DESCRIPTORS = frozenset(
    name for name, value in vars(type).items() if hasattr(type(value), "__set__")
)
_QUERY_SPECIALS = ("__len__", "__iter__", "__contains__")
_OWN_PACKAGES = frozenset(
    {"thunder", "thunder_ir", "thunder_interp", "thunder_executors", "thunder_transforms"}
)
# What a method replaced on torch.Tensor may be that binds to the tensor as a function does: a
# Python function, or one of torch's C methods (``torch.Tensor.relu = torch.Tensor.sigmoid``).
_METHOD_LIKE = (
    types.FunctionType,
    types.MethodDescriptorType,
    types.WrapperDescriptorType,
)


# Callables implemented in C that are not functions or methods: which one is decided by identity.
_C_CALLABLES = (
    types.MethodDescriptorType,
    types.WrapperDescriptorType,
    types.ClassMethodDescriptorType,
    operator.itemgetter,
    operator.attrgetter,
    operator.methodcaller,
)


def _holds_only_values(container: Any, depth: int = 0) -> bool:
    """A list, tuple or dict of scalars and value objects, to a few levels."""
    if isinstance(container, (dict, types.MappingProxyType)):
        if type(container) is not dict:
            return False
        items: Any = (x for kv in container.items() for x in kv)
    elif type(container) in (list, tuple):
        items = container
    else:
        return False
    return all(
        isinstance(x, _SCALAR_TYPES)
        or is_value_object(x)
        or (depth < _NESTED_ITEMS_DEPTH and _holds_only_values(x, depth + 1))
        for x in items
    )


def _builtin_items(mapping: Any) -> Any:
    """A dict's (or a subclass's) items as its builtin base holds them, running no method of a
    subclass."""
    return (OrderedDict if isinstance(mapping, OrderedDict) else dict).items(mapping)


def _is_bound_builtin(x: Any) -> bool:
    """A C method bound to an object (``lst.append``, ``d.__setitem__``, ``it.__next__``)."""
    if type(x) not in (types.BuiltinMethodType, types.MethodWrapperType):
        return False
    owner = x.__self__
    return owner is not None and not isinstance(owner, types.ModuleType)


def _is_outside_mapping(container: Any) -> bool:
    """A mapping other than the plain containers (those are tracked whole) and modules."""
    return isinstance(container, Mapping) and not isinstance(container, torch.nn.Module)


# What a function's (immutable) type answers for it: other attributes are in its __dict__.
_FUNCTION_TYPE_NAMES = frozenset(n for k in types.FunctionType.__mro__ for n in vars(k))


def native_unchanged(obj: Any, snapshot: Any) -> bool:
    """Whether ``obj`` still holds what its copy ``snapshot`` holds (a numpy array: the same
    bytes, shape and dtype)."""
    if is_ndarray(obj):
        return bool(
            obj.shape == snapshot.shape
            and obj.dtype == snapshot.dtype
            and obj.tobytes() == snapshot.tobytes()
        )
    try:
        return bool(type(obj) is type(snapshot) and obj == snapshot)
    except Exception:  # a comparison that raises: say changed (the call then runs natively)
        return False


def put_back_native(obj: Any, snapshot: Any) -> None:
    """Undo what C code wrote into ``obj`` while tracing (the compiled program does not)."""
    if native_unchanged(obj, snapshot):
        return
    if is_ndarray(obj):
        if obj.shape == snapshot.shape and obj.dtype == snapshot.dtype:
            obj[...] = snapshot
    elif isinstance(obj, (dict, collections.deque)):
        obj.clear()
        obj.update(snapshot) if isinstance(obj, dict) else obj.extend(snapshot)
    elif isinstance(obj, collections.abc.MutableSequence):
        obj[:] = snapshot


def _is_native_collection(value: Any) -> bool:
    """A collection whose len, iteration and ``in`` are C code (a deque, an array, a defaultdict,
    a dict subclass), other than the plain containers (those are tracked), holding only
    scalars: compared whole with ``==`` by the prologue."""
    t = type(value)
    if t in _CONTAINER_TYPES or isinstance(value, (str, bytes, *weakref.ProxyTypes)):
        return False  # (a weakref.proxy has every slot, forwarded to its object)
    if any(isinstance(getattr(t, n, None), types.FunctionType) for n in _QUERY_SPECIALS):
        return False  # Python code answers: interpreted, what it reads is guarded
    if t.__module__ == "numpy":
        return False  # == of arrays is elementwise; arrays are read as tensors (binding.arrays)
    if t is types.MappingProxyType:
        return False  # cannot be copied: its keys and items are guarded (``on_load``)
    if isinstance(value, Mapping):
        items: Any = (x for kv in value.items() for x in kv)
    elif isinstance(value, collections.abc.Collection):
        items = value
    else:
        return False
    # (of any length: compared whole, one test, however many items)
    return all(isinstance(x, _SCALAR_TYPES) for x in items)


def _reads_items_natively(container: Any) -> bool:
    """Whether ``container[k]`` ran no code the binder sees: a C type's ``__getitem__``
    (``collections.deque``, ``array.array``) or a library class's, run natively (``UserList``).
    What it returned is then guarded by its path, as a mapping's item is."""
    if isinstance(container, (torch.Tensor, torch.nn.Module)):
        return False  # read through their own hooks
    getitem = getattr(type(container), "__getitem__", None)
    if isinstance(getitem, types.FunctionType):
        return native_special(getitem)
    return getitem is not None


# How deep ``_guard_items`` follows containers held in containers (each may be iterated).
_NESTED_ITEMS_DEPTH = 3

# Methods of a list that add to it without depending on what it holds.
_ADDING_METHODS = frozenset({"append", "extend"})
_LOADS = frozenset({"LOAD_GLOBAL", "LOAD_ATTR", "LOAD_DEREF", "LOAD_NAME", "LOAD_CLASSDEREF"})


def _loaded_name(access: Access) -> str | None:
    """The name the instruction reading ``access`` loads (a global, an attribute, a cell)."""
    if access.kind == ATTR:
        return str(access.key)
    if access.kind in (GLOBAL, CELL):
        return str(access.key[1])
    return None


def _loaded_to_add_to(access: Access | None = None) -> bool:
    """Whether the instruction the innermost interpreted frame runs loads a value (``access``,
    where given) whose next instruction looks its ``append``/``extend`` up (``LOG.append(v)``,
    ``self.history.append``): the value is taken only to add to it, never to read what it
    holds."""
    running = _running_instructions()
    if running is None:
        return False
    instructions, index = running
    if not 0 <= index < len(instructions) - 1:
        return False
    this, following = instructions[index], instructions[index + 1]
    return (
        this.opname in _LOADS
        and (access is None or this.argval == _loaded_name(access))
        and following.opname in ("LOAD_METHOD", "LOAD_ATTR")
        and following.argval in _ADDING_METHODS
    )


def _running_instructions() -> tuple[Any, int] | None:
    """The instructions of the innermost interpreted frame and the index of the one it runs."""
    from thunder_interp._frames import _user_frames

    for view, _ in _user_frames(sys._getframe(2)):
        frame = getattr(view, "_frame", None)
        if frame is None:
            continue  # the binder's own frames (the hook runs natively)
        return frame.cc.instructions, view._current_index()
    return None


def _loaded_to_read_one_item() -> bool:
    """Whether the value the innermost interpreted frame loads now is indexed by a constant
    next (``f.__globals__["k"]``) or has its ``get`` looked up next (``.get(k)``)."""
    running = _running_instructions()
    if running is None:
        return False
    instructions, index = running
    if not 0 <= index < len(instructions) - 2:
        return False
    following, then = instructions[index + 1], instructions[index + 2]
    if following.opname in ("LOAD_METHOD", "LOAD_ATTR"):
        return bool(following.argval == "get")
    return bool(following.opname == "LOAD_CONST" and then.opname == "BINARY_SUBSCR")


# Per class that lasts (``lasts_with_its_module``); a class made at run time, weakly.
_INTERPRETED_GETATTRIBUTE: dict[type, bool] = {}
_TRANSIENT_INTERPRETED_GETATTRIBUTE: weakref.WeakKeyDictionary[type, bool] = (
    weakref.WeakKeyDictionary()
)


def _interprets_getattribute(cls: type) -> bool:
    """Whether ``obj.name`` of a ``cls`` instance runs the class's own ``__getattribute__``
    interpreted, with nothing native after it (no ``__getattr__`` that runs natively) but
    ``nn.Module.__getattr__``, whose answers are read again by ``getattr`` in the prologue
    (``ReadsMixin._module_getattr_answer``)."""
    known = _INTERPRETED_GETATTRIBUTE.get(cls)
    if known is None:
        known = _TRANSIENT_INTERPRETED_GETATTRIBUTE.get(cls)
        if known is not None:
            return known
        getattribute = _class_lookup(cls, "__getattribute__")
        getattr_ = _class_lookup(cls, "__getattr__")
        known = _interpreted(getattribute) and (
            getattr_ is None or getattr_ is _MODULE_GETATTR or _interpreted(getattr_)
        )
        if not lasts_with_its_module(cls):
            _TRANSIENT_INTERPRETED_GETATTRIBUTE[cls] = known
            return known
        if len(_INTERPRETED_GETATTRIBUTE) > 4096:
            _INTERPRETED_GETATTRIBUTE.clear()
        _INTERPRETED_GETATTRIBUTE[cls] = known
    return known


_MODULE_GETATTR = torch.nn.Module.__getattr__


def _module_getattr_follows(cls: type) -> bool:
    """Whether a miss of the ordinary lookup on a ``cls`` instance goes on to the native
    ``nn.Module.__getattr__`` (the parameter, buffer and submodule dicts)."""
    return _class_lookup(cls, "__getattr__") is _MODULE_GETATTR


def _class_lookup(cls: type, name: str) -> Any:
    return next((vars(k)[name] for k in cls.__mro__ if name in vars(k)), None)


def _interpreted(fn: Any) -> bool:
    return (
        isinstance(fn, types.FunctionType)
        and not native_special(fn)
        and not thunder_interp.is_opaque(fn)
    )


_IMMUTABLETYPE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE: builtins' and C extensions' fixed classes


def _class_may_change(cls: type) -> bool:
    """Whether what ``cls`` holds can be set or replaced at run time (a Python class found by
    its module and name: a flag like ``Distribution._validate_args``, a patched method), so
    that an instance the program made reads outside state through it. Not for fixed builtin
    and C classes, the jit's own classes, tensors' classes (``tensor_patches``), or classes
    made inside a function (the program's own, or reached by a path where they are read)."""
    flags = cls.__flags__
    if not flags & _HEAPTYPE or flags & _IMMUTABLETYPE:
        return False
    module = getattr(cls, "__module__", None)
    qualname = getattr(cls, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<locals>" in qualname:
        return False
    if module.partition(".")[0] in _OWN_PACKAGES or issubclass(cls, torch.Tensor):
        return False
    found: Any = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, "__dict__", {}).get(part, _MISSING)
    return found is cls


def _python_answers(obj: Any, name: str) -> str | None:
    """Which interpreted Python code answers ``obj.name``: the class's own
    ``__getattribute__``, a property's getter or a descriptor's ``__get__`` ("data
    descriptor", "descriptor"), or ``__getattr__`` for a name the generic lookup lacks; None
    where stored data (or native code) answers. The code ran interpreted, its reads guarded;
    the prologue must not run it (and its effects) again to read the answer."""
    cls = type(obj)
    if cls is type or cls is super or isinstance(obj, types.ModuleType):
        return None
    if _interprets_getattribute(cls):
        return "__getattribute__"
    if _class_lookup(cls, "__getattribute__") is not object.__getattribute__:
        return None  # a native __getattribute__ answers
    descr = _class_lookup(cls, name)
    if descr is not None:
        dcls = type(descr)
        if dcls is property:
            return "data descriptor" if _interpreted(descr.fget) else None
        if not _interpreted(_class_lookup(dcls, "__get__")):
            return None
        if _class_lookup(dcls, "__set__") is not None or _class_lookup(dcls, "__delete__"):
            return "data descriptor"
        try:
            own = object.__getattribute__(obj, "__dict__")
        except AttributeError:
            own = None
        return "descriptor" if type(own) is not dict or name not in own else None
    try:
        object.__getattribute__(obj, name)
        return None
    except AttributeError:
        pass
    except Exception:
        return None
    return "__getattr__" if _interpreted(_class_lookup(cls, "__getattr__")) else None


def _class_python_answer(cls: type, name: str) -> tuple[type, str] | None:
    """Which interpreted Python code answers ``cls.name`` of a class (``type.__getattribute__``):
    the class of the MRO searched for it (the metaclass or ``cls``) and the name it is held
    at there (the metaclass's ``__getattribute__`` or ``__getattr__``, a property or
    descriptor's own name); None where stored data or native code answers."""
    meta = type(cls)
    getattribute = _class_lookup(meta, "__getattribute__")
    if _interpreted(getattribute):
        return meta, "__getattribute__"
    if getattribute is not type.__getattribute__:
        return None

    def python_get(descr: Any) -> bool:
        if type(descr) is property:
            return _interpreted(descr.fget)
        return _interpreted(_class_lookup(type(descr), "__get__"))

    meta_descr = class_holding(meta, name)
    if type(meta_descr) is property:  # (comes first: a data descriptor)
        return (meta, name) if _interpreted(meta_descr.fget) else None
    if meta_descr is not ABSENT_FROM_CLASS:
        return None  # another descriptor of the metaclass: run natively
    descr = class_holding(cls, name)
    if descr is not ABSENT_FROM_CLASS:
        # (the interpreter runs a descriptor's ``__get__`` for a class of ``type`` only)
        interpreted = meta is type and type(descr) is not property and python_get(descr)
        return (cls, name) if interpreted else None
    return (meta, "__getattr__") if _interpreted(_class_lookup(meta, "__getattr__")) else None


def _container_store(module: Any) -> str | None:
    """What a module container's entries are known by (the dict whose keys they are, or its
    length), or None for other objects."""
    if isinstance(module, torch.nn.ParameterDict):
        return "_keys"
    if isinstance(module, torch.nn.ParameterList):
        return "_size"  # its entries are attributes "0", "1", ...: parameters or not
    if isinstance(module, (torch.nn.ModuleList, torch.nn.ModuleDict, torch.nn.Sequential)):
        return "_modules"
    return None


def _is_module_namespace(d: dict[str, Any]) -> bool:
    module = sys.modules.get(d.get("__name__"))  # type: ignore[arg-type]
    return module is not None and getattr(module, "__dict__", None) is d


def _is_guardable_key(key: Any) -> bool:
    return type(key) in (str, int, bool) or key is None


def _holds_tensor(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is a tensor, or a tuple, list, dict or object of a Python class (its
    ``__dict__``) holding one, a few levels deep (a cache holding a list of layers holding
    tensors)."""
    if isinstance(value, torch.Tensor):
        return True
    if depth >= 4:
        return False
    t = type(value)
    if t in (tuple, list):
        return any(_holds_tensor(v, depth + 1) for v in value)
    if t is dict:
        return any(_holds_tensor(v, depth + 1) for v in value.values())
    if (
        t.__flags__ & _HEAPTYPE
        and t.__dictoffset__
        and not isinstance(value, (type, torch.nn.Module))
    ):
        try:
            state = object.__getattribute__(value, "__dict__")
        except AttributeError:
            return False
        return type(state) is dict and any(_holds_tensor(v, depth + 1) for v in state.values())
    return False


def _at_entry(access: Access) -> bool:
    """Whether ``access`` finds what the call found (no step of it reads a value the program
    stored itself, ``G = G + [k]``): the prologue checks only those."""
    step: Access | None = access
    while step is not None:
        if step.version:
            return False
        step = step.parent
    return True


def _is_tensor_default(value: Any) -> bool:
    """A default value the program sees as proxies (``_cb_load_defaults``), not as a constant."""
    if isinstance(value, torch.Tensor):
        return True
    return type(value) in (list, tuple, dict) and _holds_tensors_nested(value)


def _holds_tensors_nested(container: Any, depth: int = 0) -> bool:
    """Whether a list, tuple or dict holds tensors, itself or in the plain containers it holds
    (an optimizer's ``param_groups``: dicts holding lists of parameters), so that the program's
    copy of it holds proxies all the way down."""
    for v in container.values() if isinstance(container, dict) else container:
        if isinstance(v, torch.Tensor):
            return True
        if depth < 3 and type(v) in (list, tuple, dict) and _holds_tensors_nested(v, depth + 1):
            return True
    return False


def _is_library_source(filename: str) -> bool:
    """Whether code of ``filename`` is torch's, thunder's, an installed library's or the
    standard library's. Code without a file (``exec``, a notebook cell) is the program's."""
    if filename.startswith(("<frozen ", "<eval_with_key")):
        return True
    if filename.startswith("<"):
        return False
    return is_library_file(filename) or filename.startswith(LIBRARY_DIRS)


def _program_code_running() -> bool:
    """Whether the innermost frame running outside thunder is the program's own code."""
    found = thunder_interp.running_line(logs.is_own_file)
    return found is not None and not _is_library_source(found[0])


def _is_users_module(module: types.ModuleType) -> bool:
    """A module of the program's own (not torch's, thunder's, a library's): its globals change
    as the program runs (a flag set, a global defined later)."""
    name = getattr(module, "__name__", "")
    if not isinstance(name, str) or is_library_module_name(name):
        return False
    # (from its globals: a module's own ``__getattr__`` would answer a missing ``__file__``)
    ns = getattr(module, "__dict__", None)
    file = ns.get("__file__") if type(ns) is dict else None
    return not _is_library_source(file if isinstance(file, str) else "<no file>")


def _lists_names_itself(obj: Any) -> bool:
    """Whether ``dir(obj)`` runs a ``__dir__`` of its class's own (not object's, type's or
    nn.Module's, whose names come from the dicts ``guard_names_of`` guards)."""
    method = getattr(type(obj), "__dir__", None)
    return method not in (object.__dir__, type.__dir__, torch.nn.Module.__dir__)


class ReadsMixin(BinderState):
    """Outside reads and argument binding."""

    def access_for(self, obj: Any) -> Access | None:
        """Where an outside object can be found on later calls, or None (created by the program)."""
        entry = self.paths.access_of.get(id(obj))
        if entry is not None and entry[0] is obj:
            return entry[1]
        if isinstance(obj, torch.nn.Module):
            return self._module_access(obj)
        if type(obj) is dict:
            access = self._module_store_access(obj)
            if access is not None:
                return access
        return self._find_in_outside_containers(obj)

    def _module_store_access(self, d: dict[str, Any]) -> Access | None:
        """A module's ``_modules`` (``_parameters``, ``_buffers``) reached without a path (a
        ModuleList's loop iterates it, the iterator is part of a split's state): found as the
        attribute of its module, itself found as ``_module_access`` finds it."""
        tracked = self.paths.modules
        if self.paths.store_index is None or len(tracked) != self.paths.indexed_stores:
            index: dict[int, tuple[Any, str]] = {}
            for root, _ in list(tracked.values()):
                for sub in root.modules():
                    for store in ("_modules", "_parameters", "_buffers"):
                        held = sub.__dict__.get(store)
                        if type(held) is dict:
                            index.setdefault(id(held), (sub, store))
            self.paths.store_index = index
            self.paths.indexed_stores = len(tracked)
        found = self.paths.store_index.get(id(d))
        if found is None or getattr(found[0], "__dict__", {}).get(found[1]) is not d:
            return None
        module, store = found
        module_access = self.access_for(module)
        return None if module_access is None else module_access.attr(store)

    def _find_in_outside_containers(self, obj: Any) -> Access | None:
        """The path of ``obj`` when it sits in an outside container the program read (reached
        without a hook: iterating, unpacking, ``dict.get``); None when it is in none of them (the
        program created it). What the program found there is then guarded (a content read)."""
        if isinstance(obj, (_SCALAR_TYPES, Proxy)):
            return None
        for access, container in list(self.paths.container_at.items()):
            if isinstance(container, (set, frozenset)):
                continue  # an item of a set has no path
            items = container.items() if isinstance(container, dict) else enumerate(container)
            for key, value in items:
                if value is obj:
                    found = access.item(key)
                    snapshot = self.effects.snapshots.get(id(container))
                    if snapshot is not None and not any(v is obj for v in _values(snapshot)):
                        self.effects.inserted.add(found)  # put there by this call
                    else:
                        self._note_content_read_of(container)
                    self._associate(obj, found)
                    return found
        return None

    def _module_access(self, module: torch.nn.Module) -> Access | None:
        """Submodules reached without a path (iterating a ModuleList): found by their name in
        an outside module, and the containers on the way guarded by length."""
        tracked = self.paths.modules
        if self.paths.module_index is None or len(tracked) != self.paths.indexed_modules:
            index: dict[int, Access] = {}
            for root, root_access in list(tracked.values()):
                for name, sub in root.named_modules(remove_duplicate=True):
                    if name and id(sub) not in index:
                        index[id(sub)] = _dotted(root_access, name)
            self.paths.module_index = index
            self.paths.indexed_modules = len(tracked)
        access = self.paths.module_index.get(id(module))
        if access is None:
            return None
        node: Access | None = access.parent
        while node is not None:
            parent = self._resolve(node)
            if isinstance(parent, torch.nn.Module):
                modules = node.attr("_modules")
                self.facts.guards.setdefault(
                    modules, Guard(modules, "keys", tuple(self.as_found(parent._modules)))
                )
            if node.kind != ATTR:
                break
            node = node.parent
        self.paths.found_at(module, access)
        self.facts.guards.setdefault(access, Guard(access, "type", type(module)))
        return access

    def _resolve(self, access: Access) -> Any:
        for obj, a in self.paths.access_of.values():
            if a == access:
                return obj
        if access.kind == ATTR and access.parent is not None:
            parent = self._resolve(access.parent)
            return getattr(parent, access.key, None) if parent is not None else None
        return None

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
            with self.constant_reads():
                seen = self.on_load(value, access)
            if seen is not value:
                if positional_only:
                    raise UnsupportedOperationError(
                        f"a tensor default of the positional-only parameter {name!r}",
                        "pass the tensor as an argument",
                    )
                pkwargs[name] = seen

    def _guard_defaults(self, func: types.FunctionType) -> None:
        """The default values of an outside function the program calls, which the interpreter
        binds without a read the binder sees: ``__defaults__`` replaced or a mutable default
        changed compiles again. Guarded whole, whether or not this call uses them; those
        holding tensors are bound where a call binds them (``_cb_load_defaults``)."""
        root = self._argument_access(func)
        if root is not None:  # guarded where the call passes it, not held (_argument_access)
            if root.attr("__defaults__") in self.facts.guards:
                return
            self._guard_defaults_at(root.attr("__defaults__"), func.__defaults__)
            self._guard_defaults_at(root.attr("__kwdefaults__"), func.__kwdefaults__)
        else:
            key = (func, "__defaults__")
            if key in self.facts.lookups:
                return
            self.facts.lookups[key] = (func, "__defaults__", func.__defaults__)
            self.facts.lookups[(func, "__kwdefaults__")] = (
                func,
                "__kwdefaults__",
                func.__kwdefaults__,
            )
            root = Access(QUERY, (held_object, (Held(func, f"function {func.__qualname__}"),)))
        items = [
            (root.attr("__defaults__").item(i), v) for i, v in enumerate(func.__defaults__ or ())
        ]
        items += [
            (root.attr("__kwdefaults__").item(k), v) for k, v in (func.__kwdefaults__ or {}).items()
        ]
        for access, value in items:
            if _is_tensor_default(value):
                continue
            with self.constant_reads():
                self.on_load(value, access)

    def _guard_defaults_at(
        self, access: Access, defaults: tuple[Any, ...] | dict[str, Any] | None
    ) -> None:
        """A function's ``__defaults__`` or ``__kwdefaults__`` found at ``access``: its type
        and length or keys (its items are guarded where they are read)."""
        guards = self.facts.guards
        guards[access] = Guard(access, "type", type(defaults))
        if type(defaults) is tuple:
            guards[access.attr("<len>")] = Guard(access, "len", len(defaults))
        elif defaults is not None:
            guards[access.attr("<keys>")] = Guard(access, "keys", tuple(defaults))

    def _cb_load_defaults(
        self, fn: types.FunctionType
    ) -> tuple[tuple[Any, ...] | None, dict[str, Any] | None] | None:
        """A call of ``fn`` binds its defaults: a tensor among them (or in a list, tuple or dict
        default) is outside state the program reads, an input of the computation as any other
        (its values data, not constants baked in). Found through the function, pinned by the
        prologue (as its closure cells are)."""
        defaults, kwdefaults = fn.__defaults__, fn.__kwdefaults__
        values = [*(defaults or ()), *(kwdefaults or {}).values()]
        if not any(_is_tensor_default(v) for v in values) or fn is self._jitted_function():
            return None  # (the jitted function's own: bind_arguments passes them in)
        self._guard_defaults(fn)
        root = self._argument_access(fn) or Access(
            QUERY, (held_object, (Held(fn, f"function {fn.__qualname__}"),))
        )

        def bound(value: Any, access: Access) -> Any:
            return self.on_load(value, access) if _is_tensor_default(value) else value

        if defaults is not None:
            defaults = tuple(
                bound(v, root.attr("__defaults__").item(i)) for i, v in enumerate(defaults)
            )
        if kwdefaults is not None:
            kwdefaults = {
                k: bound(v, root.attr("__kwdefaults__").item(k)) for k, v in kwdefaults.items()
            }
        return defaults, kwdefaults

    def _jitted_function(self) -> Any:
        fn = self.fn
        return fn.__func__ if isinstance(fn, types.MethodType) else fn

    def _bind_leaf(
        self, x: Any, access: Access, guarded: bool = False, keyed: bool | None = None
    ) -> Any:
        """What the program sees for the argument ``x`` found at ``access``. ``guarded``: the
        cache key does not cover it (inside an object argument), so the prologue checks its
        tensors' metadata. ``keyed``: whether the cache key covers its structure (its exact
        type, length or keys); by default where it covers the tensors' metadata."""
        keyed = not guarded if keyed is None else keyed
        t = type(x)
        if t is tuple:
            bound_tuple = tuple(
                self._bind_leaf(v, access.item(i), guarded, keyed) for i, v in enumerate(x)
            )
            return self._unkeyed_structure(x, self._stand_in(x, bound_tuple, access), access, keyed)
        if t is list or t is dict:
            earlier = self._bound_argument_container(x, access)
            if earlier is not None:
                return earlier
            # The program sees a copy holding proxies that stands for the argument: what it
            # does to the copy (append, item stores, returning it) is done to the argument.
            # Without tensors in it (nothing to proxy) the program sees the argument itself, so
            # it also sees what it does to the argument through another path (a global).
            items = enumerate(x) if t is list else x.items()
            bound = [(k, self._bind_leaf(v, access.item(k), guarded, keyed)) for k, v in items]
            values = x.values() if t is dict else x
            same = all(b is v for (_, b), v in zip(bound, values))
            seen = x if same else ([v for _, v in bound] if t is list else dict(bound))
            if seen is not x:
                self.inputs.argument_copies[id(x)] = (x, seen)
            self._associate(seen, access)
            self.paths.container_at[access] = seen
            return self._unkeyed_structure(x, seen, access, keyed)
        if isinstance(x, tuple) and hasattr(t, "_make") and _holds_tensors(x):
            # A namedtuple of tensors: the program sees one of proxies (items and fields alike).
            bound = t._make(
                self._bind_leaf(v, access.item(i), guarded, keyed) for i, v in enumerate(x)
            )
            return self._unkeyed_structure(x, self._stand_in(x, bound, access), access, keyed)
        if isinstance(x, torch.Tensor):
            return self._tensor_input(x, access, guarded=guarded)
        if isinstance(x, torch.Generator):
            self.facts.generators.add(id(x))
            if keyed and not guarded:  # keyed by type and device: an input (once traced)
                self.inputs.generator_args.setdefault(id(x), (x, access))
            else:  # the key does not cover it: which object it is
                self._pin_identity(access, x)
        if isinstance(x, (set, frozenset)) and not is_plain(frozenset(x)):
            return self._bind_set_of_objects(x, access)
        if id(x) in self.inputs.argument_copies:  # (an object with a stand-in, bound twice)
            earlier = self._bound_argument_container(x, access)
            if earlier is not None:
                return earlier
        stand_in = self._bind_object(x, access, keyed)
        if stand_in is not None:
            return self._unkeyed_structure(x, stand_in, access, keyed)
        if self.symbolic and t in (int, float):
            name = self._name_for(access)
            proxy: NumberProxy = (
                IntegerProxy(name, value=x) if t is int else FloatProxy(name, value=x)
            )
            self.inputs.in_order.append((proxy, access))
            self.inputs.numbers[proxy.name] = (x, access)
            self.trace.input_numbers[proxy.name] = proxy
            return proxy
        if t is NDARRAY:
            self._took_array(x)
        if not isinstance(x, _SCALAR_TYPES):
            first = self.paths.access_of.get(id(x))
            if first is not None and first[0] is x and first[1] != access:
                # One object passed twice: its reads are guarded where it was first bound.
                self.facts.guards.setdefault(access, Guard(access, "same_as", first[1]))
            self._associate(x, access)
            if _is_bound_builtin(x):
                # ``run(x, got.append)``: as the method reached through its object, which is
                # read at ``cb.__self__`` (its writes replayed, its reads guarded).
                name_access = access.attr("__name__")
                self.facts.guards.setdefault(name_access, Guard(name_access, "value", x.__name__))
                self.on_load(x.__self__, access.attr("__self__"))
            elif isinstance(x, types.MethodType):
                # A bound method (``run(s.apply, x)``): what it reads from its object is found
                # through it, so the prologue checks those reads (``s.k``) on every call. As an
                # argument it is keyed by its function and its object's type: its object, as
                # an object argument, is not held (a per-call object's method takes one program).
                self_access = access.attr("__self__")
                if not self._keyed_argument(access):
                    self.facts.guards.setdefault(self_access, Guard(self_access, "is", x.__self__))
                self._associate(x.__self__, self_access)
        if isinstance(x, types.FunctionType):
            self._guard_code(x)  # (once its path is known)
            self._register_cells(x, access)
        return x

    def _bound_argument_container(self, x: Any, access: Access) -> Any:
        """What the program already sees for the list, dict or object ``x`` bound at another
        argument path (``f(d, d)``, ``f(l, [l])``): the same object, that path guarded to lead to
        it (a second copy would hide the writes through one path from reads through the
        other)."""
        copied = self.inputs.argument_copies.get(id(x))
        seen = copied[1] if copied is not None and copied[0] is x else x
        first = self.paths.access_of.get(id(seen))
        if first is None or first[0] is not seen or first[1] == access:
            return None
        self.facts.guards.setdefault(access, Guard(access, "same_as", first[1]))
        return seen

    def guard_written_objects_distinct(self) -> None:
        """Objects the program wrote (item or attribute stores, ``append``...) are distinct
        from the other objects of their type it reached by another path, where either path
        starts at an argument (``f(a, b)`` writing ``a`` and reading ``b``; an argument that is
        also a global or ``self.cache``): a call where they are one object compiles again. (One
        object reached by two paths is guarded ``same_as`` where it is read.) Nothing for a
        program that writes no outside object."""
        written = {
            w.target
            for w in self.effects.writes
            if w.kind in ("attr", "del_attr", "call", "call_kw")
        }
        if not written:
            return
        for at, first in self.paths.value_aliases.items():
            if first in written or at in written:
                self.facts.guards[at] = Guard(at, "same_as", first)
        # The caller's object where the program sees a copy of it (an argument list's copy
        # holding proxies): one caller's object reached by two paths is no pair to tell apart.
        originals = {id(c): o for o, c in self.inputs.proxied_copies.values()}
        found = [
            (originals.get(id(obj), obj), at)
            for obj, at in self.paths.access_of.values()
            if not isinstance(obj, (torch.Tensor, *_SCALAR_TYPES)) and _at_entry(at)
        ]
        for obj, at in found:
            if at not in written:
                continue
            from_argument = at.root.kind in (ARG, KWARG)
            for other, other_at in found:
                if (
                    other is not obj
                    and type(other) is type(obj)
                    and other_at != at
                    and (from_argument or other_at.root.kind in (ARG, KWARG))
                ):
                    self._guard_identity(other_at, at, False)

    def _bind_set_of_objects(self, x: Any, access: Access) -> Any:
        """A set argument holding objects (a set of numbers is keyed by value): the prologue
        checks it holds the same objects in the same order, and each is found by its position
        in that order, so what the program reads from them is guarded like any read."""
        if any(isinstance(v, torch.Tensor) for v in x):
            raise UnsupportedSideEffectError(
                f"thunder.jit: the argument {access.describe(self.param_names)} is a "
                f"{type(x).__name__} holding tensors, which the program would see as the "
                "caller's tensors, not as inputs; pass a tuple or list instead"
            )
        self.facts.guards.setdefault(access.attr("<members>"), Guard(access, "members", tuple(x)))
        self._associate(x, access)
        for i, v in enumerate(x):
            if not isinstance(v, _SCALAR_TYPES):
                self._associate(v, Access(ELEMENT, i, access))
        return x

    def _stand_in(self, x: tuple[Any, ...], bound: tuple[Any, ...], access: Access) -> Any:
        """``bound``, the tuple the program sees for the argument ``x``: where it holds proxies,
        known as ``x``'s stand-in, so reading it again is not a read of new outside state."""
        if any(b is not v for b, v in zip(bound, x)):
            self.inputs.argument_copies[id(x)] = (x, bound)
            self._associate(bound, access)
            return bound
        return x

    def _unkeyed_structure(self, x: Any, seen: Any, access: Access, keyed: bool) -> Any:
        """``seen``, what the program sees for ``x``. A stand-in (holding proxies) of a container
        or object whose structure the cache key does not cover (inside an object argument):
        reading the stand-in is no read the prologue checks, so the exact type, the length or
        keys, and the items that are not proxies (iterated natively, as ``sum(o.items)``) are
        guarded here, as the key would for an argument (reading the tensors by position alone
        takes a longer list, or a dict with more keys, for the one traced). Without proxies the
        program reads ``x`` itself, guarded where it is read (``on_load``)."""
        if keyed or seen is x:
            return seen
        guards = self.facts.guards
        guards.setdefault(access, Guard(access, "type", type(x)))
        if isinstance(x, dict):
            guards.setdefault(access.attr("<keys>"), Guard(access, "keys", tuple(x)))
            items = _builtin_items(x)
            self._guard_unbound_items(items, (v for _, v in _builtin_items(seen)), access)
        elif isinstance(x, tuple):  # (a namedtuple's class fixes its length)
            if type(x) is tuple:
                guards.setdefault(access.attr("<len>"), Guard(access, "len", len(x)))
            self._guard_unbound_items(enumerate(x), seen, access)
        elif isinstance(x, list):
            guards.setdefault(access.attr("<len>"), Guard(access, "len", len(x)))
            self._guard_unbound_items(enumerate(list.__iter__(x)), list.__iter__(seen), access)
        return seen

    def _guard_unbound_items(self, items: Any, bound: Any, access: Access) -> None:
        """The items of an unkeyed container the binder left as they are (a number, a string,
        an object without tensors): guarded as a read of each by its key is."""
        for (key, value), seen in zip(items, bound):
            if seen is value:
                self._guard_item(access, key, value)

    def _guard_attribute_names(self, seen_state: dict[str, Any], access: Access) -> None:
        """The stand-in's ``__dict__`` read as a dict (``vars(o)``, ``len(o.__dict__)``): the
        cache key holds only the object's type, so which attributes it had is guarded."""
        copies = self.inputs.argument_copies.values()
        original = next((o for o, c in copies if c is seen_state), None)
        if original is None or access.attr("<keys>") in self.facts.guards:
            return
        self.facts.guards.setdefault(access, Guard(access, "type", dict))
        self.facts.guards[access.attr("<keys>")] = Guard(access, "keys", tuple(original))
        # (its values may be taken natively too: ``sum(vars(o).values())``)
        now = [seen_state.get(k, _MISSING) for k in original]
        self._guard_unbound_items(original.items(), now, access)

    def _bind_object(self, x: Any, access: Access, keyed: bool = True) -> Any:
        """An argument object of a Python class whose state is its ``__dict__`` and items (a
        ``ModelOutput``, a dataclass: encoder outputs handed back to ``forward`` by
        ``generate()``) holding tensors: the program sees a stand-in of the same class holding
        proxies, made without running its code. Reads of its items through C (``dict(self.
        items())``) would otherwise hand the program the caller's tensors. What the program does
        to the stand-in is done to the argument (as for a list or dict argument); the tensors
        are checked by the prologue (the cache key holds only the object's type). None for
        other objects."""
        t = type(x)
        if not t.__flags__ & _HEAPTYPE or isinstance(x, (type, torch.Tensor, torch.nn.Module)):
            return None
        base = restorable_base(t)
        if base is None or not t.__dictoffset__:
            return None
        state: dict[str, Any] = object.__getattribute__(x, "__dict__")
        items: list[tuple[Any, Any]] = []
        if base is list:
            items = list(enumerate(list.__iter__(x)))
        elif base is not object:
            items = list(base.items(x))  # type: ignore[attr-defined]
        values = [*state.values(), *(v for _, v in items)]
        if not any(_holds_tensor(v) for v in values):
            return None
        # The key covers the items of a keyed list or mapping argument, never the attributes.
        new_state = {k: self._bind_leaf(v, access.attr(k), True, False) for k, v in state.items()}
        new_items = [(k, self._bind_leaf(v, access.item(k), True, keyed)) for k, v in items]
        seen = restore(t, base, new_state, [v for _, v in new_items] if base is list else new_items)
        self.inputs.argument_copies[id(x)] = (x, seen)
        self._associate(seen, access)
        # ``vars(o)`` / ``o.__dict__`` of the stand-in stands for the argument's own dict
        seen_state = object.__getattribute__(seen, "__dict__")
        self.inputs.argument_copies[id(state)] = (state, seen_state)
        self._associate(seen_state, access.attr("__dict__"))
        return seen

    def on_load(self, value: Any, access: Access, holder: Any = _MISSING) -> Any:
        """A value read from outside state: returns what the program sees, records the guard."""
        if isinstance(value, Proxy):
            return value
        seen = self.inputs.argument_copies.get(id(value))
        if seen is not None and seen[0] is value:
            # An argument's list or dict reached again from outside (it is also a global): the
            # program sees the one copy it already has, and this path must lead to the argument.
            arg_access = self.paths.access_of[id(seen[1])][1]
            self.facts.guards.setdefault(access, Guard(access, "same_as", arg_access))
            return seen[1]
        known = self.paths.access_of.get(id(value))
        if known is not None and known[0] is value and self._is_copy(value):
            # The stand-in of an argument's list or dict, its contents bound already; read by a
            # second path (``a[-1]`` after ``a[0]``), the path must lead to the same item.
            if known[1] != access:
                self.facts.guards.setdefault(access, Guard(access, "same_as", known[1]))
            if known[1].kind == ATTR and known[1].key == "__dict__":
                self._guard_attribute_names(value, known[1])
            return value
        if id(value) in self.facts.added_only and not _loaded_to_add_to(access):
            self._note_content_read_of(value)  # taken again, to read: what it held is guarded
        if self._set_by_program(value, access):
            return value  # what the program itself put there: nothing to guard
        if self._changed_natively(value) and id(value) not in self.inputs.proxied_copies:
            known = self.paths.access_of.get(id(value))
            if known is not None and known[0] is value:
                # A module's store changed by nn.Module's native hooks: its entry contents are
                # guarded where it was read before (read first now, by the entry snapshot).
                if known[1] != access:
                    self.facts.guards.setdefault(access, Guard(access, "same_as", known[1]))
                return value
        if access.kind == ITEM and access.parent is not None:
            self._note_content_read(access.parent)
        if self.options.sharp_edges is not SHARP_EDGES_OPTIONS.ALLOW:
            self._sharp_edge(access)
        if isinstance(value, torch.Tensor):
            return self._tensor_input(value, access, guarded=True)
        if isinstance(value, _SCALAR_TYPES):
            if (
                isinstance(value, (int, float))
                and type(value) in (int, float)  # (bool stays a constant)
                and not self.reading_constants
                and (access in self.options.symbolic_reads or self._symbolic_from_start(access))
            ):
                return self._number_read(value, access)
            self.facts.guards.setdefault(access, Guard(access, "value", value))
            return value
        if is_value_object(value):
            self.facts.guards.setdefault(access, Guard(access, "value", value))
            return value
        if isinstance(value, torch.Generator):
            # The program draws from this object: another one at this path recompiles (an
            # argument's, read through its container, is an input: keyed by type and device).
            if not self._is_generator_argument(value, access):
                self._pin_identity(access, value)
            self.facts.generators.add(id(value))
            return value
        t = type(value)
        if advances_natively(t):
            # Tracing would take items (or a file's lines) from it that eager takes on each
            # call, and the program would hold them as constants.
            raise UnsupportedSideEffectError(
                f"thunder.jit: the function takes {access.describe(self.param_names)}, an "
                f"iterator (a {t.__name__}) made outside it: advancing it changes state "
                "outside the function on every call, which a compiled program cannot replay; "
                "pass its items in as arguments"
            )
        first = self.paths.access_of.get(id(value))
        # Reached before by another path (a config every layer holds, a tied module): what the
        # program reads from it is guarded at that first path, so this one must lead to the same
        # object.
        if t is types.CodeType:
            # Immutable: pinned by identity and left without a path, so what the program reads
            # from it (the arguments inspect.signature reads) is a constant with no guard.
            self._pin_identity(access, value)
            return value
        aliased = first[1] if first is not None and first[0] is value else None
        if aliased == access:
            aliased = None
        self._associate(value, access)
        if _is_native_collection(value):
            # A deque, an array, a defaultdict: its len, iteration and ``in`` run in C with no
            # read the binder sees, so the contents the call found are guarded whole.
            self.facts.guards.setdefault(access, Guard(access, "value", copy.copy(value)))
            self._snapshot_native(value)
            return value
        if t is NDARRAY:
            self._took_array(value)  # (its contents are guarded where they are read)
        if t is dict and _is_module_namespace(value):
            # A module's globals (``f.__globals__``, ``m.__dict__``, one kept in an attribute):
            # pinned by identity. Taken to be looked into natively (``k in f.__globals__``),
            # its names are guarded; taken to read one name (``f.__globals__["k"]``,
            # ``.get(k)``), that name is guarded as a global read is. (Library code, such as
            # inspect.signature reading ``f.__globals__``, reads names: guard_namespace_names
            # leaves it.)
            self.facts.guards.setdefault(access, Guard(access, "is", value))
            if not _loaded_to_read_one_item():
                self.guard_namespace_names(value)
            return value
        if t in _CONTAINER_TYPES and aliased is not None:
            if is_scalar_constant(value):
                self.paths.value_aliases.setdefault(access, aliased)
            else:
                self.facts.guards.setdefault(access, Guard(access, "same_as", aliased))
        if t is list and self._taken_to_add_to(value, access):
            return value
        if t in _CONTAINER_TYPES:
            return self._load_container(value, access)
        if isinstance(value, types.FunctionType):
            self._guard_code(value)
            self._register_cells(value, access)
            if not self._is_library_global(access) and not self._keyed_argument(access):
                self.facts.guards.setdefault(access, Guard(access, "is", value))
            return value
        # (on the type: an object's own __getattr__ may raise anything for a name it lacks)
        inner = getattr(type(value), "_thunder_inner_function", None)
        if inner is not None:  # an already jitted function: its code is read through it
            self._register_function(inner(value), access.attr("fn"))
        if isinstance(value, (types.MethodType, types.BuiltinMethodType, types.MethodWrapperType)):
            self._guard_callable(value, access, holder)
            return value
        if isinstance(value, (type, types.ModuleType, types.BuiltinFunctionType, *_C_CALLABLES)):
            # (a C callable's type says nothing of what it does: itemgetter(0) or (1),
            # torch.Tensor.mean or .sum)
            if not self._is_library_global(access):
                self._pin_identity(access, value)
            return value
        if t is types.MappingProxyType and aliased is None:
            # A class's ``__dict__`` (``vars(type(obj))``): iterating it, ``in`` and ``len`` run
            # natively, so its names and what each is are guarded (a method added or replaced
            # recompiles).
            self.facts.guards.setdefault(access, Guard(access, "type", t))
            self._guard_items(value, access)
            return value
        if aliased is not None:
            self.facts.guards.setdefault(access, Guard(access, "same_as", aliased))
        else:
            self.facts.guards.setdefault(access, Guard(access, "type", t))
            if type(value) is collections.deque:
                self._guard_members(value, access)  # of objects: iterated natively
            store = _container_store(value)
            if store is not None:
                # Its len, iteration, ``in`` and truth run natively (no read the binder sees)
                # and depend on these alone: an entry added or removed recompiles.
                at, what = access.attr(store), getattr(value, store)
                kind = "value" if store == "_size" else "keys"
                self.facts.guards.setdefault(
                    at, Guard(at, kind, what if kind == "value" else tuple(what))
                )
        return value

    # Set while reads are guarded whose value the program takes natively, not from on_load
    # (``f.__globals__[k]``, a default): a number read there stays a constant.
    reading_constants = False

    @contextlib.contextmanager
    def constant_reads(self) -> Any:
        self.reading_constants, before = True, self.reading_constants
        try:
            yield
        finally:
            self.reading_constants = before

    def _symbolic_from_start(self, access: Access) -> bool:
        """Under ``cache="symbolic values"``, a number the program's own code reads from the
        program's state (a module's attribute, a global or closure cell of its modules, their
        items) is symbolic from the first call; torch's and libraries' reads (``self.eps`` in
        ``nn.LayerNorm``), the ambient state's and arguments' are not."""
        if not self.symbolic or access.is_argument_leaf() or self.is_inserted(access):
            return False
        if access.root.kind not in (ROOT, GLOBAL, CELL, ARG, KWARG):
            return False
        return not self._is_library_global(access) and _program_code_running()

    def _number_read(self, value: int | float, access: Access) -> NumberProxy:
        """An int or float read from outside state that changed between calls (a step counter):
        an input the prologue reads on every call, of the same type, not a constant."""
        for proxy, at in self.inputs.in_order:
            if at == access and isinstance(proxy, NumberProxy):
                return proxy
        self.facts.guards.setdefault(access, Guard(access, "type", type(value)))
        name = self._name_for(access)
        number: NumberProxy = (
            IntegerProxy(name, value=value) if type(value) is int else FloatProxy(name, value=value)
        )
        self.inputs.in_order.append((number, access))
        self.inputs.numbers[number.name] = (value, access)
        self.trace.input_numbers[number.name] = number
        return number

    def _holds_number_reads(self, value: Any, access: Access, depth: int = 0) -> bool:
        """Whether a dict or list of scalars holds numbers read as inputs (``_number_read``),
        itself or in a container it holds, a tuple's too (then it is copied as well, so that the
        program reaches the copy holding the proxies; a tuple's own numbers stay constants)."""
        reads = self.options.symbolic_reads
        if not (reads or self.symbolic) or type(value) not in (dict, list, tuple):
            return False
        items = value.items() if type(value) is dict else enumerate(value)
        return any(
            (
                type(v) in (int, float)
                and type(value) is not tuple
                and (access.item(k) in reads or self._symbolic_from_start(access.item(k)))
            )
            or (depth < 3 and self._holds_number_reads(v, access.item(k), depth + 1))
            for k, v in items
        )

    def _taken_to_add_to(self, value: list[Any], access: Access) -> bool:
        """``LOG.append(v)`` on an outside list read for the first time: the append is a write
        the epilogue replays, and what the list holds is not guarded (it grows on every call),
        only its type; a later read of it guards what it held (``on_load``)."""
        if access in self.facts.guards or id(value) in self.inputs.proxied_copies:
            return False  # read before in this call: guarded (or seen as a copy) already
        if _loaded_name(access) is None or not _loaded_to_add_to(access):
            return False
        self.facts.added_only.add(id(value))
        self.paths.container_at.setdefault(access, value)
        at = access.attr("<list>")
        self.facts.guards.setdefault(at, Guard(access, "type", list))
        return True

    def _is_copy(self, value: Any) -> bool:
        """Whether ``value`` is the stand-in holding proxies of an argument's list or dict."""
        return any(copy is value for _, copy in self.inputs.argument_copies.values())

    def _guard_items(self, container: Any, access: Access, depth: int = 0) -> None:
        """An outside container of objects: the program may iterate it, which no hook sees, so
        its length or keys and which object each item is are guarded (a hook registered on a
        module, a function appended to a global list, recompile). A container in it (a list of
        groups of callbacks) may be iterated in turn: guarded the same way, a few levels deep."""
        mappings = (dict, types.MappingProxyType)
        if (
            len(container) > _MAX_GUARDED_ITEMS
            and _holds_only_values(container)
            and not self._holds_changed(container)
        ):
            # a long list or dict of numbers (class weights, a vocabulary): compared whole, one
            # test rather than a guard per item (a larger one of objects is guarded item by item)
            self.facts.guards[access.attr("<value>")] = Guard(
                access, "value", value_snapshot(container)
            )
            return
        if isinstance(container, (set, frozenset, collections.deque)):
            self._guard_members(container, access)
            return
        if not isinstance(container, (list, tuple, *mappings)):
            return
        if isinstance(container, mappings):
            found = tuple(self.as_found(container))
            self.facts.guards[access.attr("<keys>")] = Guard(access, "keys", found)
            self._associate_keys(container, access)
            items: Any = container.items()
        else:
            self.facts.guards[access.attr("<len>")] = Guard(access, "len", len(container))
            items = enumerate(container)
        for key, item in items:
            item_access = access.item(key)
            if (
                self._set_by_program(item, item_access)
                or self._changed_natively(item)
                or self._replaced_since_entry(container, key, item)
            ):
                # What the program put there, or a module's store it changed (met again in the
                # module's ``__dict__``: its entry contents are guarded where it was first read).
                continue
            if (
                type(item) in _CONTAINER_TYPES
                and depth < _NESTED_ITEMS_DEPTH
                and not _holds_tensors(item)
            ):
                self._associate(item, item_access)
                self._load_container(item, item_access, depth + 1)
                continue
            if isinstance(item, _SCALAR_TYPES) or is_value_object(item):
                kind = "value"
            elif isinstance(item, _IDENTIFIED_TYPES):
                kind = "is"
                self._track_iterable_callable(item, item_access)
            elif isinstance(item, torch.Generator):
                # drawn from, reached by iteration too (``for g in gens``): which object it is
                self.facts.generators.add(id(item))
                if self._is_generator_argument(item, item_access):
                    continue  # an input (keyed by type and device)
                kind = "is"
            elif isinstance(item, (*_C_CALLABLES, types.CodeType)):
                kind = "is"  # its type says nothing of what it does (itemgetter(0) or (1))
            else:
                kind = "type"
                self._associate(item, item_access)
            self.facts.guards.setdefault(
                item_access, Guard(item_access, kind, type(item) if kind == "type" else item)
            )

    def _is_generator_argument(self, value: Any, access: Access) -> bool:
        """Whether ``value`` is the generator argument bound at ``access`` (made an input)."""
        found = self.inputs.generator_args.get(id(value))
        return found is not None and found[0] is value and found[1] == access

    def _pin_identity(self, access: Access, value: Any) -> None:
        """Guards which object is at ``access``; a weaker guard set there before (the "type"
        guard of an item of a container read whole, ``GL`` before ``GL[0]``) is replaced."""
        guard = self.facts.guards.get(access)
        if guard is None or guard.kind == "type":
            self.facts.guards[access] = Guard(access, "is", value)

    def _associate_keys(self, mapping: Any, access: Access) -> None:
        """The keys of a dict whose keys are guarded: an object among them (iterated natively)
        is found by its position in their order."""
        for i, k in enumerate(mapping):
            if self._found_by_position(k):
                self._associate(k, Access(ELEMENT, i, access))

    def _guard_members(self, container: Any, access: Access) -> None:
        """A set (or deque) of objects, iterated natively: the same objects in the same order,
        each found by its position in that order, so what the program reads from them is
        guarded and what it writes to them replayed."""
        members = tuple(container)
        self.facts.guards[access.attr("<members>")] = Guard(access, "members", members)
        for i, v in enumerate(members):
            if self._found_by_position(v):
                self._associate(v, Access(ELEMENT, i, access))

    def _found_by_position(self, v: Any) -> bool:
        """Whether a member of a set (a key of a dict) is found by its position: an object
        with state, not a value, a class or function (pinned by identity where read), a tensor
        or a module with a path of its own."""
        if isinstance(v, (*_SCALAR_TYPES, *_IDENTIFIED_TYPES, torch.Tensor)):
            return False
        return not isinstance(v, torch.nn.Module) or self._module_access(v) is None

    def _track_iterable_callable(self, item: Any, access: Access) -> None:
        """A function, bound method or partial in an outside container: the program may reach
        it by iterating (``for f in self.callbacks``, the hook dicts ``nn.Module.__call__``
        runs), which no read reports. What calling it reads is tracked as when it is read by
        index or attribute: its code and defaults, its cells, the object a method is bound to
        (its attributes read and written by path), what a partial holds."""
        if isinstance(item, types.FunctionType):
            self._guard_code(item)
            self._register_cells(item, access)
        elif isinstance(item, types.MethodType):
            self._guard_callable(item, access, _MISSING)
        elif not isinstance(item, functools.partial):
            return  # a class, a module, a builtin: pinned by identity, nothing read through it
        self._associate(item, access)

    def _guard_callable(self, value: Any, access: Access, holder: Any) -> None:
        """Which function a stored callable is: a builtin (``torch.tanh`` kept in an attribute)
        by identity; a method bound to another object (or stored on the instance) by its object
        and function. A method looked up on its own object's class needs no guard: the object's
        type is guarded."""
        owner = value.__self__
        if owner is None or isinstance(owner, types.ModuleType):
            if not self._is_library_global(access):
                self.facts.guards.setdefault(access, Guard(access, "is", value))
            return
        self.facts.outside_owners.setdefault(id(owner), owner)
        if self._is_library_global(access):
            return
        if owner is holder and access.key not in getattr(holder, "__dict__", {}):
            # obj.method: found on the (guarded) type, whose methods can still be replaced.
            cls, func = type(holder), getattr(value, "__func__", None)
            if func is None:
                return  # a builtin type's method (list.append): builtin types are immutable
            if getattr(cls, access.key, None) is func:
                self._lookup_found(cls, access.key, func)
                if access.parent is not None and type(getattr(holder, "__dict__", None)) is dict:
                    # ... and is not shadowed later by an attribute of the object itself
                    shadow = access.parent.attr(f"<own {access.key}>")
                    self.facts.guards.setdefault(
                        shadow, Guard(access.parent, "not_shadowed", access.key)
                    )
                return
        self_access = access.attr("__self__")
        # An argument's method: keyed by its function and its object's type (see _bind_leaf).
        keyed = isinstance(value, types.MethodType) and self._keyed_argument(access)
        if not keyed:
            self.facts.guards.setdefault(self_access, Guard(self_access, "is", owner))
        self._associate(owner, self_access)  # what the method reads from it is found through it
        if isinstance(value, types.MethodType):
            func_access = access.attr("__func__")
            if not keyed:
                self.facts.guards.setdefault(func_access, Guard(func_access, "is", value.__func__))
            self._guard_code(value.__func__)  # its ``__code__`` and defaults, as a function's
            if isinstance(value.__func__, types.FunctionType):
                self._register_cells(value.__func__, func_access)
        else:
            name_access = access.attr("__name__")
            self.facts.guards.setdefault(name_access, Guard(name_access, "value", value.__name__))

    def _set_by_program(self, value: Any, access: Access) -> bool:
        """Whether the program, earlier in this call, wrote what is read now: a path it assigned
        (or one below it), an object it stored, or a container it mutated. Guards state what a
        call starts with; these values did not exist then."""
        if self._path_written(access):
            return True
        known = self.paths.access_of.get(id(value))
        if known is None or known[0] is not value:
            return False
        if self.is_inserted(known[1]):
            return True
        if id(value) in self.effects.mutated:
            # A container the program mutates, read again by another path (an argument that is
            # also a global): its contents are guarded where it was first found; this path must
            # lead to the same object.
            if known[1] != access:
                self.facts.guards.setdefault(access, Guard(access, "same_as", known[1]))
            return True
        return False

    def _path_written(self, access: Access) -> bool:
        """Whether the program assigned or deleted ``access`` (or a path above it) earlier in
        this call, itself or through a setter run natively (``WritesMixin._through_setter``)."""
        node: Access | None = access
        while node is not None:
            if node in self.effects.written_paths:
                return True
            if node.kind == ATTR and node.parent is not None and self._item_of_own_dict_set(node):
                self.effects.written_paths.add(node)
                return True
            if node.kind == ATTR and node.parent is not None and self.effects.dict_snapshots:
                for obj, at, before in self.effects.dict_snapshots.values():
                    if at == node.parent:
                        now = object.__getattribute__(obj, "__dict__")
                        if before.get(node.key, _MISSING) is not now.get(node.key, _MISSING):
                            self.effects.written_paths.add(node)
                            return True
            node = node.parent
        return False

    def _item_of_own_dict_set(self, node: Access) -> bool:
        """Whether the program stored ``obj.name`` as an item of ``obj.__dict__`` (a
        cached_property fills its cache so)."""
        assert node.parent is not None
        own = self.paths.container_at.get(node.parent.attr("__dict__"))
        if own is None or id(own) not in self.effects.mutated:
            return False
        before = self.effects.snapshots.get(id(own))
        return before is not None and before.get(node.key, _MISSING) is not own.get(
            node.key, _MISSING
        )

    def _changed_natively(self, value: Any) -> bool:
        """Whether ``value`` is a store (an object's instance dict, a module's other stores)
        that a native ``__setattr__`` or ``__delattr__`` may have changed in this call
        (``WritesMixin._snapshot_attribute_stores``) and now holds other than what the call
        found."""
        store = self.effects.module_stores.get(id(value))
        before = self.effects.snapshots.get(id(value))
        if store is None or store is not value or before is None:
            return False
        if isinstance(store, set):
            return bool(store != before)
        return list(before) != list(store) or any(before[k] is not v for k, v in store.items())

    def _replaced_since_entry(self, container: Any, key: Any, item: Any) -> bool:
        """Whether ``item``, at ``key`` of an attribute store, is not what the call found there
        (a native ``__setattr__`` put it there)."""
        if self.effects.module_stores.get(id(container)) is not container:
            return False
        before = self.effects.snapshots.get(id(container))
        return isinstance(before, dict) and before.get(key, _MISSING) is not item

    def _sync_copy(self, original: dict[Any, Any], copied: dict[Any, Any]) -> None:
        """The copy holding proxies of a module's store after nn.Module's native hooks changed
        the store itself (``del self.b``, ``self.b = t``): the same entries, the caller's tensors
        as their proxies."""
        items = [(k, self._as_seen(v)) for k, v in original.items()]
        copied.clear()
        copied.update(items)

    def _as_seen(self, value: Any) -> Any:
        """A caller's tensor already bound as an input: its proxy; anything else as it is."""
        bound = self.inputs.tensors.get(id(value))
        return bound[1] if bound is not None and bound[0] is value else value

    def _holds_changed(self, value: Any, depth: int = 0) -> bool:
        """Whether a container holds, a few levels down, one the program changed earlier in
        this call: a guard of its whole value would state what the call made, not what it found
        (its items are guarded one by one instead, the changed one where it was first read)."""
        if not self.effects.mutated and not self.effects.module_stores:
            return False
        items = value.values() if isinstance(value, dict) else value
        for v in items if isinstance(value, _CONTAINER_TYPES) else ():
            copied = self.inputs.proxied_copies.get(id(v))
            if type(v) in _CONTAINER_TYPES and (
                id(v) in self.effects.mutated
                or (copied is not None and id(copied[1]) in self.effects.mutated)
                or self._changed_natively(v)
                or (depth < _NESTED_ITEMS_DEPTH and self._holds_changed(v, depth + 1))
            ):
                return True
        return False

    def as_found(self, container: Any) -> Any:
        """What an outside container held when the call found it: the program may have
        changed it since."""
        if id(container) in self.effects.mutated or id(container) in self.effects.module_stores:
            return self.effects.snapshots.get(id(container), container)
        return container

    def _load_container(self, value: Any, access: Access, depth: int = 0) -> Any:
        if type(value) in _CONTAINER_MUTATORS:
            self.paths.container_at.setdefault(access, value)
        known = self.inputs.proxied_copies.get(id(value))
        if known is not None and known[0] is value:
            # Read again: the program sees the one copy it has (the container itself may hold
            # only proxies now, put there by the program: ``WritesMixin._mirror_on_original``).
            if self._changed_natively(value):
                self._sync_copy(value, known[1])
            return known[1]
        number_reads = self._holds_number_reads(value, access)
        found = self.as_found(value)
        if (
            is_scalar_constant(value)
            and is_scalar_constant(found)
            and not number_reads
            and not self._holds_changed(value)
        ):
            self.facts.guards.setdefault(access, Guard(access, "value", value_snapshot(found)))
            return value
        self.facts.guards.setdefault(access, Guard(access, "type", type(value)))
        if not _holds_tensors_nested(value) and not number_reads:
            self._guard_items(value, access, depth)
            return value
        # A container of tensors (or of numbers read as inputs): the program sees a copy holding
        # proxies. The copy stands for the outside container, so its mutations are recorded (and
        # replayed) as the container's.
        copied: Any
        if type(value) in (dict, OrderedDict):
            found = tuple(self.as_found(value))
            self.facts.guards[access.attr("<keys>")] = Guard(access, "keys", found)
            self._associate_keys(value, access)
            # Every item is loaded (guarded), not only the tensors: the entry contents are then
            # fully guarded, as a program that both reads and mutates the container needs.
            copied = type(value)(
                (
                    k,
                    self._as_seen(v)
                    if self._replaced_since_entry(value, k, v)
                    else self.on_load(v, access.item(k)),
                )
                for k, v in value.items()
            )
        elif type(value) in (tuple, list):
            self.facts.guards[access.attr("<len>")] = Guard(access, "len", len(value))
            copied = type(value)(self.on_load(v, access.item(i)) for i, v in enumerate(value))
        else:
            return value  # a set of tensors: hashed by identity, never proxied
        self.inputs.proxied_copies[id(value)] = (value, copied)
        self.paths.access_of[id(copied)] = (copied, access)
        self.paths.bound_at.setdefault(access, len(self.effects.writes))
        self.paths.container_at[access] = copied
        return copied

    def _sharp_edge(self, access: Access) -> None:
        root = access.root
        if root.kind not in (GLOBAL, CELL) or self._is_library_global(access):
            return
        what = f"reads {access.describe(self.param_names)}, which is not an argument"
        if self.options.sharp_edges is SHARP_EDGES_OPTIONS.ERROR:
            raise SharpEdgeError(f"thunder.jit(sharp_edges='error'): the function {what}")
        warnings.warn(f"thunder.jit: the function {what} (it is guarded)", stacklevel=2)

    def _cb_load_global(self, name: str, value: Any, globs: dict[str, Any], prov: Any) -> Any:
        module = globs.get("__name__")
        module = module if isinstance(module, str) else f"<globals {id(globs):x}>"
        if name in globs:
            self.paths.globals_dicts.setdefault(module, globs)
        else:
            if value is getattr(builtins, name, _MISSING):
                # A builtin: it stays the program's as long as the module does not define the
                # name and the builtin is the same (checked for all of them at once).
                self.paths.globals_dicts.setdefault(module, globs)
                self.facts.builtin_reads.setdefault(module, {})[name] = value
                return value
            module = "builtins"
            self.paths.globals_dicts.setdefault(module, globs)
        return self.on_load(value, Access(GLOBAL, (module, name)))

    def _cb_load_cell(
        self, name: str, value: Any, code: types.CodeType, prov: Any, cell: types.CellType
    ) -> Any:
        access = self._cell_access(cell, name, code)
        if access is None:
            return value  # a cell made by this call: it holds program values
        return self.on_load(value, access)

    def _computed_without_grad(self, t: Proxy) -> bool:
        raise NotImplementedError  # regions.RegionsMixin

    def tensor_type(self, t: TensorProxy) -> type:
        raise NotImplementedError  # calls.CallsMixin

    def callbacks(self) -> thunder_interp.Callbacks:
        raise NotImplementedError  # calls.CallsMixin

    run_lookasides: dict[Any, Any]  # binder.Binder.lookasides

    def _cb_load_generic_attribute(self, obj: Any, name: str, value: Any, prov: Any) -> Any:
        """``object.__getattribute__(obj, name)``: for an object whose class has its own
        ``__getattribute__`` (a transformers config), the lookup that method makes, guarded as
        such; the prologue makes it again without running the method."""
        if not _interprets_getattribute(type(obj)):
            return self._cb_load_attribute(obj, name, value, prov)
        self.facts.last_generic = (obj, value)
        parent = self.access_for(obj)
        if parent is None or isinstance(value, Proxy):
            return value
        return self.on_load(value, parent.generic(name), holder=obj)

    def _cb_generic_attribute_missing(self, obj: Any, name: str) -> None:
        if not _interprets_getattribute(type(obj)):
            self._cb_attribute_missing(obj, name)
            return
        self.facts.last_generic = (obj, _MISSING)
        access = self.access_for(obj)
        if access is None or self._set_by_program(obj, access):
            return
        if self._path_written(access.attr(name)):
            return
        key = access.attr(f"<generic lacks {name}>")
        self.facts.guards.setdefault(key, Guard(access, "lacks_generic", (type(obj), name)))

    def _answered_by_generic(self, obj: Any, value: Any) -> bool:
        """Whether ``obj.<name>`` gave what the last generic read inside the class's own
        interpreted ``__getattribute__`` gave (``return super().__getattribute__(key)``): that
        read, and the reads that chose its key, are guarded; the outer read is not again."""
        last, self.facts.last_generic = self.facts.last_generic, None
        return (
            last is not None
            and last[0] is obj
            and last[1] is value
            and _interprets_getattribute(type(obj))
        )

    def _module_getattr_answer(self, obj: Any, name: str, value: Any) -> Any:
        """Where ``obj.<name>`` was answered by ``nn.Module.__getattr__`` (native) after the
        class's own interpreted ``__getattribute__`` missed, the value loaded: the answer came
        from dicts no callback saw, so it is read like any attribute (``getattr`` in the
        prologue, which makes the same lookup) and guarded there. Otherwise ``_MISSING``."""
        last = self.facts.last_generic
        if (
            last is None
            or last[0] is not obj
            or last[1] is not _MISSING
            or not _module_getattr_follows(type(obj))
            or not _interprets_getattribute(type(obj))
        ):
            return _MISSING
        self.facts.last_generic = None
        parent = self.access_for(obj)
        return value if parent is None else self.on_load(value, parent.attr(name), holder=obj)

    def _cb_load_attribute(self, obj: Any, name: str, value: Any, prov: Any) -> Any:
        if isinstance(obj, Proxy):
            if isinstance(obj, TensorProxy):
                replaced = tensor_patches.patches()
                if replaced and name in replaced:
                    return self._replaced_tensor_attribute(obj, name, replaced[name], value)
            if name == "requires_grad" and value and self._computed_without_grad(obj):
                return False
            if name == "__class__" and isinstance(obj, TensorProxy):
                return self.tensor_type(obj)
            if name == "__class__" and isinstance(obj, NumberProxy):
                return obj.python_type  # eager's int / float / bool / complex, as ``type()``
            return torch_value(value, as_size=name == "shape")
        if name == "__class__" and isinstance(obj, SymbolicSize):
            return torch.Size
        if self.facts.last_generic is not None:
            answer = self._module_getattr_answer(obj, name, value)
            if answer is not _MISSING:
                return answer
            if self._answered_by_generic(obj, value):
                return value
        if is_ndarray(obj) and id(obj) in self.effects.array_reads:
            self.effects.array_reads[id(obj)] -= 1  # ``a.shape``: that read used the attribute
        if type(obj) is super:
            self._guard_super_lookup(obj, name)
        if _is_backend_flags(obj):
            # torch.backends.*: flags users flip at run time (mkldnn.enabled, matmul.allow_tf32)
            access = self._backend_access(obj)
            if access is not None:
                if isinstance(value, (bool, int, float, str)):
                    self.facts.guards.setdefault(
                        access.attr(name), Guard(access.attr(name), "value", value)
                    )
                elif _is_backend_flags(value):
                    self.paths.backend.setdefault(id(value), (value, access.attr(name)))
            return value
        if isinstance(obj, types.ModuleType) and is_library_module_name(obj.__name__):
            # torch.tanh, F.relu, math.pi: no path or proxy, but checked to be the same object
            # (a function of torch patched after compiling)
            self._lookup_found(obj, name, value)
            return value
        if name in HOOK_ATTRIBUTES and isinstance(obj, torch.nn.Module):
            hooks = self._module_hooks_access(obj, name, value)
            if hooks is not None:
                return value
        parent = self.access_for(obj)
        if parent is None and isinstance(obj, types.ModuleType) and _is_users_module(obj):
            # A module reached without a path (``import m`` inside the function): the prologue
            # holds it, and what is read from it is guarded as from any module.
            parent = self._held_access(obj, f"module {obj.__name__}")
        if parent is None:
            if type(value) is dict and self._is_namespace(value):
                if not _loaded_to_read_one_item():
                    self.guard_namespace_names(value)  # a frame's ``f_globals``
                return value
            if isinstance(obj, type):
                # ``Cls.name`` of a class reached without a path (a library's, through its
                # module): read from where the prologue holds the class, as from any path.
                parent = self._outside_class_access(obj)
            else:
                seen = self._class_answer(obj, name, value)
                if seen is not _MISSING:
                    return seen
        if parent is None:
            if isinstance(value, torch.Tensor):
                raise UnsupportedOperationError(
                    f"reading the tensor attribute {name!r} of a {type(obj).__name__}",
                    "the object was not passed in and cannot be found again on later calls",
                )
            return value
        if type(obj) is functools.partial and name in ("args", "keywords"):
            return self._load_partial_arguments(value, parent.attr(name))
        if isinstance(value, Proxy) or not isinstance(value, torch.Tensor):
            if isinstance(obj, type):
                class_answer = _class_python_answer(obj, name)
                if class_answer is not None:
                    self._guard_class_python_answer(obj, name, class_answer)
                    return value
            elif type(obj) is types.ModuleType and self._module_python_answer(obj, name):
                return value
            answered_by = _python_answers(obj, name)
            if answered_by is not None:
                self._guard_python_answer(obj, name, parent, answered_by)
                return value
        return self.on_load(value, parent.attr(name), holder=obj)

    def _guard_class_python_answer(self, cls: type, name: str, answer: tuple[type, str]) -> None:
        """``cls.name`` was answered by interpreted code (``_class_python_answer``), whose reads
        are guarded: guarded instead of its answer is that the same code answers, without
        running it again (the metaclass's ``__getattr__``, a descriptor's ``__get__``)."""
        holder, looked_up = answer
        self._guard_class_holds(holder, looked_up, class_holding(holder, looked_up))
        meta = type(cls)
        if looked_up == "__getattribute__":
            return
        self._guard_class_holds(meta, "__getattribute__", class_holding(meta, "__getattribute__"))
        if holder is meta and looked_up == name:
            return  # a property of the metaclass: found first
        self._guard_class_holds(meta, name, ABSENT_FROM_CLASS)  # no metaclass descriptor
        if looked_up == "__getattr__":  # still found nowhere the lookup looks
            self._guard_class_holds(cls, name, ABSENT_FROM_CLASS)

    def _module_python_answer(self, module: types.ModuleType, name: str) -> bool:
        """``module.name`` answered by the module's interpreted ``__getattr__`` (PEP 562), for a
        name its globals lack: its reads are guarded; guarded instead of its answer is that the
        globals still lack the name and hold the same function (the prologue does not run it,
        and its effects, again)."""
        ns = getattr(module, "__dict__", None)
        if type(ns) is not dict or name in ns or not _interpreted(ns.get("__getattr__")):
            return False
        module_name = ns.get("__name__")
        if any(
            w.kind == GLOBAL and w.key == (module_name, name) for w in self.effects.written_paths
        ):
            return False
        at = self._held_access(ns, f"globals of {module_name}")
        getattr_ = at.item("__getattr__")
        self.facts.guards.setdefault(getattr_, Guard(getattr_, "is", ns["__getattr__"]))
        self.namespace_lacks(ns, name)
        return True

    def _outside_class_access(self, cls: type) -> Access | None:
        """Where a class the program did not make is found on later calls: its own path, or
        one the prologue holds (a library's class, reached through its module with no path);
        None for a class whose contents cannot change (``_class_may_change``)."""
        access = self.access_for(cls)
        if access is not None:
            return access
        if not _class_may_change(cls):
            return None
        return self._held_access(cls, f"class {cls.__qualname__}")

    def _class_answer(self, obj: Any, name: str, value: Any) -> Any:
        """``obj.name`` of an object with no path (one the program made: ``Sampler().greedy``,
        ``self._validate_args`` in a distribution's ``__init__``) answered by its class: the
        class is outside state, so the answer is guarded there, once per class and name
        however many instances read it. A value stored on the class is read and guarded as
        ``type(obj).name``; a descriptor (a method, a property) is checked to be still what the
        class holds. Returns what the program sees, or ``_MISSING`` where the instance itself
        answered (its own dict, a native ``__getattr__``: the program's state)."""
        cls = type(obj)
        if cls is super or isinstance(obj, types.ModuleType):
            return _MISSING
        cls_access = self._outside_class_access(cls)
        if cls_access is None:
            return _MISSING
        answered_by = _python_answers(obj, name)
        if answered_by is not None:
            self._guard_python_answer(obj, name, None, answered_by)
            return value
        found = class_holding(cls, name)
        if found is ABSENT_FROM_CLASS:
            return _MISSING
        kind = type(found)
        is_data = _class_lookup(kind, "__set__") is not None or _class_lookup(kind, "__delete__")
        if not is_data:
            try:
                own = object.__getattribute__(obj, "__dict__")
            except AttributeError:
                own = None
            if type(own) is dict and name in own:
                return _MISSING
        if (
            _class_lookup(kind, "__get__") is None
            and class_holding(type(cls), name) is ABSENT_FROM_CLASS
        ):
            # a plain value: ``getattr(cls, name)`` in the prologue finds it as the instance did
            return self.on_load(value, cls_access.attr(name), holder=cls)
        self._guard_class_holds(cls, name, found)
        return value

    def _guard_class_holds(self, cls: type, name: str, found: Any) -> None:
        """The MRO of ``cls`` still holds ``found`` at ``name`` (``ABSENT_FROM_CLASS``: still
        none of its classes holds it), checked as ``getattr(cls, name)`` where that gives the
        object itself (a function, a property), else without running ``__get__``."""
        if (
            found is not ABSENT_FROM_CLASS
            and not type(found).__flags__ & _HEAPTYPE
            and class_holding(type(cls), name) is ABSENT_FROM_CLASS
            and getattr(cls, name, _MISSING) is found
        ):
            self._lookup_found(cls, name, found)
            return
        self._lookup_found(StaticClassLookup(cls), name, found, key=(cls, name, "static"))

    def _guard_python_answer(
        self, obj: Any, name: str, access: Access | None, answered_by: str
    ) -> None:
        """``obj.name`` was answered by interpreted Python code (``_python_answers``), whose
        reads are guarded: guarded instead of its answer is that the same code answers (the
        class still holds it; an instance attribute does not shadow a non-data descriptor; the
        name ``__getattr__`` answered is still nowhere the generic lookup looks)."""
        cls = type(obj)
        static = StaticClassLookup(cls)
        looked_up = answered_by if answered_by.startswith("__") else name
        found = _class_lookup(cls, looked_up)
        self._lookup_found(static, looked_up, found, key=(cls, looked_up, "static"))
        if answered_by == "__getattr__":
            self._lookup_found(
                static, "__getattribute__", object.__getattribute__, key=(cls, "<ga>", "static")
            )
            if access is None:
                # an object the program made: what it holds is the program's; its class still
                # lacks the name
                self._guard_class_holds(cls, name, class_holding(cls, name))
            elif not self._path_written(access.attr(name)):
                key = access.attr(f"<generic lacks {name}>")
                self.facts.guards.setdefault(key, Guard(access, "lacks_generic", (cls, name)))
        elif (
            access is not None
            and answered_by == "descriptor"
            and type(getattr(obj, "__dict__", None)) is dict
        ):
            shadow = access.attr(f"<own {name}>")
            self.facts.guards.setdefault(shadow, Guard(access, "not_shadowed", name))

    def _cb_descriptor_get(self, obj: Any, name: str, descr: Any) -> None:
        """``obj.name`` runs the ``__get__`` of ``descr``, found on ``type(obj)``: the
        descriptor is outside state its code may read and write (a counter, a cache), found on
        later calls in the dict of the class of the MRO that holds it."""
        if self.access_for(descr) is not None:
            return
        access = self.access_for(obj)
        cls = type(obj)
        index = next((i for i, k in enumerate(cls.__mro__) if name in vars(k)), None)
        if access is None or index is None:
            return
        at = access.attr("__class__").attr("__mro__").item(index).attr("__dict__").item(name)
        self._associate(descr, at)

    def _load_partial_arguments(self, value: Any, access: Access) -> Any:
        """What a partial binds (its ``args`` tuple, its ``keywords`` dict) is unpacked
        natively into the call: each item is read as if by index. A list it binds is then an
        outside list with a path (what the call appends to it is replayed on every call), not
        part of one value of the whole tuple, which the call's own appends would change."""
        if type(value) is tuple:
            self.facts.guards.setdefault(access, Guard(access, "type", tuple))
            self.facts.guards.setdefault(access.attr("<len>"), Guard(access, "len", len(value)))
            seen: Any = tuple(self.on_load(v, access.item(i)) for i, v in enumerate(value))
            same = all(a is b for a, b in zip(seen, value))
        elif type(value) is dict and all(type(k) is str for k in value):
            self.facts.guards.setdefault(access, Guard(access, "type", dict))
            self.facts.guards.setdefault(access.attr("<keys>"), Guard(access, "keys", tuple(value)))
            seen = {k: self.on_load(v, access.item(k)) for k, v in value.items()}
            same = all(seen[k] is v for k, v in value.items())
        else:
            return self.on_load(value, access)
        self._associate(value, access)
        return value if same else seen

    def _replaced_tensor_attribute(self, t: TensorProxy, name: str, new: Any, value: Any) -> Any:
        """``t.name`` where ``torch.Tensor.name`` was replaced (the cache key holds the state of
        the replacements): what eager's tensor finds, a function bound to the proxy, so that the
        interpreter runs it. ``value``: the proxy's own answer, where eager's type defines the
        attribute itself (a subclass's own method)."""
        owner = next((c for c in self.tensor_type(t).__mro__ if name in vars(c)), None)
        if owner is not torch.Tensor and new is not tensor_patches.MISSING:
            return value
        if new is tensor_patches.MISSING:
            found = getattr(self.tensor_type(t), name, tensor_patches.MISSING)
            if found is tensor_patches.MISSING:
                raise AttributeError(f"'Tensor' object has no attribute '{name}'")
            new = found
        if isinstance(new, staticmethod):
            return new.__func__
        if isinstance(new, classmethod):
            return types.MethodType(new.__func__, self.tensor_type(t))
        if isinstance(new, _METHOD_LIKE):
            return types.MethodType(new, t)
        if type(new) is property and type(new.fget) is types.FunctionType:
            fget = thunder_interp.interpret(
                new.fget,
                lookasides=self.run_lookasides,
                callbacks=self.callbacks(),
                native_special=native_special,
            )
            return fget(t)
        if hasattr(type(new), "__get__"):
            # another descriptor: its code would run natively on the proxy
            raise RunsEagerly(
                f"reads torch.Tensor.{name}, replaced by a {type(new).__name__} the program "
                "cannot trace"
            )
        return new  # a plain value set on the class

    def _cb_special_lookup(self, cls: type, name: str, found: Any) -> Any:
        """The interpreter found the special method ``name`` on ``cls`` (``x[k]``, ``len(x)``,
        calling an instance): it must still be found there on later calls. For a proxy of a
        tensor, the method replaced on ``torch.Tensor`` (``torch.Tensor.__add__ = ...``) is
        what it finds instead."""
        if issubclass(cls, TensorProxy):
            replaced = tensor_patches.patches()
            if replaced and name in replaced:
                return self._replaced_tensor_dunder(name, replaced[name])
        if (cls, name) in self.facts.lookups or name in _TYPE_DATA_DESCRIPTORS:
            return None
        if cls.__module__.partition(".")[0] in _OWN_PACKAGES:
            return None  # proxies and the jit's own classes
        expected = found.__func__ if type(found) is staticmethod else found
        try:
            if type(found) is classmethod:
                expected = found.__get__(None, cls)
            elif getattr(cls, name, None) is not expected:
                return None  # a descriptor making a new object per lookup: nothing to compare
        except Exception:  # a descriptor's own __get__ failed: nothing to compare either
            return None
        self._lookup_found(cls, name, expected)
        return None

    @staticmethod
    def _replaced_tensor_dunder(name: str, new: Any) -> Any:
        """What ``_PyType_Lookup`` finds for ``name`` on a tensor whose class had it replaced."""
        if new is tensor_patches.MISSING:
            found = getattr(torch.Tensor, name, tensor_patches.MISSING)
            if found is tensor_patches.MISSING:
                raise RunsEagerly(f"uses torch.Tensor.{name}, deleted from torch.Tensor")
            new = found
        if isinstance(new, (staticmethod, classmethod, *_METHOD_LIKE)) or not hasattr(
            type(new), "__get__"
        ):
            return new
        raise RunsEagerly(
            f"uses torch.Tensor.{name}, replaced by a {type(new).__name__} the program cannot trace"
        )

    def _guard_super_lookup(self, sup: Any, name: str) -> None:
        """``super().name``: found along the MRO after ``__thisclass__``, where a patched (or
        newly defined) method would be found instead."""
        this, start = sup.__thisclass__, sup.__self_class__
        if start is None or name == "__class__":
            return
        holder = super(this, start)
        try:
            expected = getattr(holder, name)
        except AttributeError:
            return  # the program's own lookup raised too
        self._lookup_found(holder, name, expected, key=(this, start, name))

    def _cb_attribute_missing(self, obj: Any, name: str) -> None:
        """``getattr(obj, name, default)`` / ``hasattr`` found nothing: the program relied on the
        attribute's absence (setting it later recompiles)."""
        if isinstance(obj, types.ModuleType):
            self._module_lacks(obj, name)
            return
        if isinstance(obj, Proxy):
            return
        # The generic lookup's miss is guarded; one nn.Module.__getattr__ (native) then made in
        # the module's dicts is guarded below, as hasattr.
        if (
            self.facts.last_generic is not None
            and self._answered_by_generic(obj, _MISSING)
            and not _module_getattr_follows(type(obj))
        ):
            return
        access = self.access_for(obj)
        if access is None and isinstance(obj, type):
            access = self._outside_class_access(obj)
        if access is None:
            # An object the program made: its class still lacks the name.
            cls = type(obj)
            if self._outside_class_access(cls) is not None:
                self._guard_class_holds(cls, name, class_holding(cls, name))
            return
        if self._set_by_program(obj, access):
            return
        if self._path_written(access.attr(name)):
            return  # deleted by the program (or never there before it set it)
        if isinstance(obj, type):
            class_answer = _class_python_answer(obj, name)
            if class_answer is not None:
                self._guard_class_python_answer(obj, name, class_answer)
                return
        if _python_answers(obj, name) == "__getattr__":
            # Its interpreted ``__getattr__`` raised: the prologue checks the same code
            # answers, without running it (and its effects) again.
            self._guard_python_answer(obj, name, access, "__getattr__")
            return
        if type(obj) is types.FunctionType and name not in _FUNCTION_TYPE_NAMES:
            # A function's attribute that its (immutable) type lacks lives in its __dict__ or
            # nowhere: checked there, without raising AttributeError (``__wrapped__``, which
            # inspect.signature looks for).
            own = access.attr("__dict__")
            self.facts.guards.setdefault(
                own.attr(f"<lacks {name!r}>"), Guard(own, "lacks_item", name)
            )
            return
        key = access.attr(f"<has {name}>")
        self.facts.guards.setdefault(key, Guard(access, "has_attr", (name, False)))

    def _module_lacks(self, module: types.ModuleType, name: str) -> None:
        """``hasattr(module, name)`` false (``getattr(module, name, default)``) for a module of
        the program's own: it lacks the name on later calls (a global defined later
        recompiles). Libraries' modules are not guarded so (their names are fixed)."""
        ns = getattr(module, "__dict__", None)
        module_name = getattr(module, "__name__", "")
        if type(ns) is not dict or not _is_users_module(module):
            return
        if any(
            w.kind == GLOBAL and w.key == (module_name, name) for w in self.effects.written_paths
        ):
            return  # deleted by the program (or never there before it set it)
        if type(module) is types.ModuleType and self._module_python_answer(module, name):
            return  # its interpreted ``__getattr__`` raised
        if "__getattr__" in ns:  # a module ``__getattr__`` (PEP 562) decides: asked again
            at = self._held_access(module, f"module {module_name}")
            self.facts.guards.setdefault(
                at.attr(f"<has {name}>"), Guard(at, "has_attr", (name, False))
            )
            return
        self.namespace_lacks(ns, name)

    def namespace_lacks(self, ns: dict[str, Any], name: str) -> None:
        """A module's globals ``ns`` lacked ``name`` (``vars(m).get(name)`` gave nothing): it
        lacks it on later calls, unless the program itself deleted it."""
        module_name = ns.get("__name__")
        if any(
            w.kind == GLOBAL and w.key == (module_name, name) for w in self.effects.written_paths
        ):
            return  # deleted by the program (or never there before it set it)
        label = (
            f"globals of {module_name}" if isinstance(module_name, str) else "a module's globals"
        )
        at = self._held_access(ns, label)
        self.facts.guards.setdefault(at.attr(f"<lacks {name!r}>"), Guard(at, "lacks_item", name))

    def _written_tensor(self, t: TensorProxy) -> TensorProxy:
        """The tensor an in-place op's result ``t`` is (its first argument's, recursively)."""
        results = {}
        for b in self.trace.bound_symbols:
            if b.has_tag(OpTag.IN_PLACE) and isinstance(b.output, TensorProxy) and b.args:
                first = b.args[0]
                if isinstance(first, TensorProxy) and b.output is not first:
                    results[b.output.name] = first
        while t.name in results:
            t = results[t.name]
        return t

    def _cb_compare_identity(self, a: Any, b: Any, same: bool) -> bool | None:
        """``a is b`` between objects found outside the program (arguments, globals,
        attributes): the answer is guarded, as the program's path may depend on it (a sentinel
        passed as an argument, one object passed as two). Plain values are keyed by value and
        which of them are one object (``signature.same_objects``); tensors' identities are in
        the key (``alias_pattern``) or pinned. Two symbolic numbers passed as arguments answer
        as the caller's objects do (returned), guarded by their paths."""
        if isinstance(a, NumberProxy) and isinstance(b, NumberProxy):
            origin_a = self.inputs.numbers.get(a.name)
            origin_b = self.inputs.numbers.get(b.name)
            if origin_a is None or origin_b is None:
                return None
            same = origin_a[0] is origin_b[0]
            self._guard_identity(origin_a[1], origin_b[1], same)
            return same
        if isinstance(a, TensorProxy) and isinstance(b, TensorProxy) and a is not b:
            # An in-place op returns its tensor (``x.add_(1) is x``, ``y += 1`` keeps ``y``):
            # the trace gives its result a name of its own, the same tensor in eager.
            wa, wb = self._written_tensor(a), self._written_tensor(b)
            if wa is not wb:
                self._guard_distinct_inputs(wa, wb)
            return wa is wb
        real = a if isinstance(b, TensorProxy) else b if isinstance(a, TensorProxy) else None
        if isinstance(real, torch.Tensor) and not isinstance(real, Proxy):
            # A caller's tensor reached another way (a weakref.ref to a parameter, as RNN
            # modules keep them) against a proxy: the same object when it is that tensor's proxy.
            made = self.inputs.tensors.get(id(real))
            proxy = b if real is a else a
            return made is not None and made[0] is real and made[1] is proxy
        if isinstance(a, (Proxy, torch.Tensor, *_SCALAR_TYPES)) or isinstance(
            b, (Proxy, torch.Tensor, *_SCALAR_TYPES)
        ):
            return None
        at_a, at_b = self.access_for(a), self.access_for(b)
        if at_a is not None and at_b is not None:
            self._guard_identity(at_a, at_b, same)
        return None  # else made by the program: not any outside object on a later call

    def _guard_distinct_inputs(self, a: TensorProxy, b: TensorProxy) -> None:
        """Two input proxies answered ``is`` as different tensors: the key's alias pattern
        covers only tensors found in the arguments' containers; one read from outside state
        (``s.last is x``) may be the other tensor on a later call, so that is guarded."""
        at_a, at_b = self._access_of_input(a), self._access_of_input(b)
        if at_a is None or at_b is None:
            return  # computed by the program: a new tensor on every call
        if self._tensor_keyed(at_a) and self._tensor_keyed(at_b):
            return
        self._guard_identity(at_a, at_b, False)

    def _tensor_keyed(self, access: Access) -> bool:
        """Whether the input tensor at ``access`` is in the cache key (an argument's, not one
        inside an object argument or read from outside state, which the prologue checks)."""
        guard = self.facts.guards.get(access)
        return access.root.kind in (ARG, KWARG) and (guard is None or guard.kind != "tensor")

    def _cb_identity_used(self, obj: Any, container: Any = None) -> None:
        """A native result depended on which object ``obj`` is (``obj in a_set``,
        ``d.get(obj)``, ``id(obj)``; its class compares by identity): an outside ``obj`` is
        pinned at its path, so another object there recompiles (the container's contents are
        guarded as it is read)."""
        if isinstance(obj, TensorProxy):
            self._tensor_identity_used(obj, container)
            return
        if isinstance(obj, (Proxy, torch.Tensor, *_SCALAR_TYPES)) or not compares_by_identity(obj):
            return
        at = self.access_for(obj)
        if at is None:
            return  # made by the program: the same on every call
        guard = self.facts.guards.get(at)
        if guard is None or guard.kind not in ("is", "same_as"):
            self.facts.guards[at] = Guard(at, "is", obj)

    def _tensor_identity_used(self, t: TensorProxy, container: Any = None) -> None:
        """``id(t)``, ``hash(t)``, ``t`` looked for in a ``container`` from outside (a key, a set
        member), for a proxy standing for the caller's tensor: eager's answer is that tensor's
        identity, which a trace cannot hold (it has the proxy's), so the call runs eagerly. A
        tensor the program computed is a new object on every call in eager too, and a
        container the program made holds the proxies it put there."""
        access = self._access_of_input(self._written_tensor(t))
        if access is None:
            return
        if container is not None and self.access_for(container) is None:
            return
        if container is None and not _program_code_running():
            return  # a library's ``id(t)`` keys its own memo (``copy.deepcopy``)
        raise RunsEagerly(
            f"uses which tensor {access.describe(self.param_names)} is (id(), hash(), a dict key "
            "or set member), which the compiled program cannot tell from one call to the next"
        )

    def _guard_identity(self, at_a: Access, at_b: Access, same: bool) -> None:
        if at_a == at_b:
            return
        if same:
            self.facts.guards.setdefault(at_b, Guard(at_b, "same_as", at_a))
        else:
            key = at_b.attr(f"<is not {at_a.describe(self.param_names)}>")
            self.facts.guards.setdefault(key, Guard(at_b, "distinct_from", at_a))

    def _backend_access(self, obj: Any) -> Access | None:
        """Where a ``torch.backends`` module (or a flags object in one) is found on every call:
        its canonical path ``torch.backends.<name>`` (how the program reached it does not
        matter)."""
        entry = self.paths.backend.get(id(obj))
        if entry is not None and entry[0] is obj:
            return entry[1]
        if not isinstance(obj, types.ModuleType):
            return None
        parent_name, _, leaf = obj.__name__.rpartition(".")
        parent = sys.modules.get(parent_name)
        if parent is None or getattr(parent, leaf, None) is not obj:
            return None
        self.paths.globals_dicts.setdefault(parent_name, vars(parent))
        access = Access(GLOBAL, (parent_name, leaf))
        self.paths.backend[id(obj)] = (obj, access)
        return access

    def _module_hooks_access(self, module: torch.nn.Module, name: str, value: Any) -> Access | None:
        """Reads of an nn.Module's hook dicts fold into one guard per module while they are
        empty (the common case); otherwise they are guarded like any attribute."""
        if value or _has_hooks(module):
            return None  # guarded like any attribute: by the hooks each dict holds
        access = self.access_for(module)
        if access is None:
            return access
        self.facts.guards.setdefault(access.attr("<hooks>"), Guard(access, "no_hooks", None))
        # Found again on later calls: a hook the program registers is a recorded write into it
        # (replayed by the epilogue, undone after tracing), not a store into a dict of its own.
        self.paths.access_of.setdefault(id(value), (value, access.attr(name)))
        return access

    def _is_namespace(self, container: Any) -> bool:
        """A module's globals (``globals()``): its items are the module's globals."""
        return type(container) is dict and (
            _is_module_namespace(container)
            or any(g is container for g in self.paths.globals_dicts.values())
        )

    def _cb_load_item(self, container: Any, key: Any, value: Any) -> None:
        if compares_by_identity(key) or isinstance(key, TensorProxy):
            self._cb_identity_used(key, container)  # ``registry[obj]``: which object it is decides
        if type(key) is str and self._is_namespace(container):
            if not isinstance(value, (Proxy, torch.Tensor)):
                with self.constant_reads():
                    self._cb_load_global(key, value, container, None)  # globals()[k] reads k
            return
        if is_ndarray(container):
            self._note_content_read_of(container)  # an item, or a view: the contents guarded
            return
        if type(container) not in _CONTAINER_MUTATORS:
            if isinstance(container, tuple) and not isinstance(key, slice):
                self._load_immutable_item(container, key, value)
            elif _is_outside_mapping(container) or _reads_items_natively(container):
                self._load_mapping_item(container, key, value)
            return
        self._note_content_read_of(container)
        if id(container) in self.effects.mutated:
            return  # the contents the call found are guarded whole (or refused)
        access = self.access_for(container)
        if access is None or isinstance(key, slice) or isinstance(value, (Proxy, torch.Tensor)):
            return
        self._guard_item(access, key, value)

    def _guard_item(self, access: Access, key: Any, value: Any) -> None:
        """An item of an outside container is outside state too: guard it like any other read,
        so that objects and containers inside it are tracked (their attributes guarded, their
        mutations replayed)."""
        item = access.item(key)
        if (
            access.kind == ATTR
            and access.key == "__dict__"
            and access.parent is not None
            and type(key) is str
            and self._path_written(access.parent.attr(key))
        ):
            return  # obj.__dict__[k] is obj.k, which the program set
        if isinstance(value, _SCALAR_TYPES) or is_value_object(value):
            self.facts.guards.setdefault(item, Guard(item, "value", value))
        else:
            self.on_load(value, item)

    def _load_mapping_item(self, container: Any, key: Any, value: Any) -> None:
        """``m[key]`` of a mapping that is not a plain container (``os.environ``, a library's
        registry): the item is guarded by its path (the prologue reads ``m[key]`` again)."""
        access = self.access_for(container)
        if access is None or not _is_guardable_key(key) or isinstance(value, (Proxy, torch.Tensor)):
            return
        self._guard_item(access, key, value)

    def _cb_load_item_missing(self, container: Any, key: Any) -> None:
        """``m[key]`` raised: the program relied on the key's absence (``os.environ.get(k, d)``
        with ``k`` unset). Guarded for outside mappings, so setting the key recompiles."""
        if compares_by_identity(key) or isinstance(key, TensorProxy):
            self._cb_identity_used(key, container)
        if not isinstance(container, (dict, Mapping)) or not _is_guardable_key(key):
            return
        access = self.access_for(container)
        if access is None or id(container) in self.effects.mutated:
            return
        guard_key = access.attr(f"<lacks {key!r}>")
        self.facts.guards.setdefault(guard_key, Guard(access, "lacks_item", key))

    def _load_immutable_item(self, container: tuple[Any, ...], key: Any, value: Any) -> None:
        """An item of an outside tuple (a namedtuple, ``torch.Size``, a tuple holding objects)
        is outside state: guarded like any read (a tuple of scalars is guarded whole)."""
        if isinstance(value, (Proxy, torch.Tensor)):
            return
        access = self.access_for(container)
        if access is None or (access.is_argument_leaf() and type(container) is tuple):
            return  # created by the program, or an argument tuple (the cache key covers it)
        item = access.item(key)
        if isinstance(value, _SCALAR_TYPES) or is_value_object(value):
            self.facts.guards.setdefault(item, Guard(item, "value", value))
        else:
            self.on_load(value, item)

    # Names read natively: ``"k" in globals()``, ``vars(module).get(k)``, ``dir(obj)``. C code
    # answers them from an object's dicts with no read the binder sees, so the names those
    # dicts hold are guarded (a global defined or deleted later, an attribute added, recompile).

    def _held_access(self, obj: Any, label: str) -> Access:
        """A path to ``obj`` the prologue holds itself (a module's globals, a class: objects
        that live as long as their module)."""
        entry = self.paths.held.get(id(obj))
        if entry is not None and entry[0] is obj:
            return entry[1]
        access = Access(QUERY, (held_object, (Held(obj, label),)))
        self.paths.held[id(obj)] = (obj, access)
        return access

    def guard_namespace_names(self, ns: dict[str, Any]) -> None:
        """The program took a module's globals as a dict (``globals()``, ``vars(module)``,
        ``module.__dict__``): ``in``, ``len``, iteration and ``.get`` of a missing name run
        natively on it, so the names it holds are guarded. (Each value is guarded where the
        program reads it.) Reads made inside library code, which looks names up (``typing``
        resolving an annotation), keep to the names they read."""
        if not _program_code_running():
            return
        module = ns.get("__name__")
        label = f"globals of {module}" if isinstance(module, str) else "a module's globals"
        if any(w.kind == GLOBAL and w.key[0] == module for w in self.effects.written_paths):
            raise UnsupportedSideEffectError(
                f"thunder.jit: the function reads the names of the {label} after setting "
                "some of them; read them before, or outside the jitted function"
            )
        access = self._held_access(ns, label)
        self.facts.guards.setdefault(access.attr("<keys>"), Guard(access, "keys", tuple(ns)))

    def guard_namespace_values(self, ns: dict[str, Any]) -> None:
        """``globals().items()``, ``.values()``, ``dict(vars(module))``: every value of the
        module's globals is read natively, so each is guarded as a global read is."""
        if not _program_code_running():
            return
        self.guard_namespace_names(ns)
        for name, value in list(ns.items()):
            if _holds_tensor(value):
                raise UnsupportedOperationError(
                    f"reading the values of a module's globals natively ({name!r} holds a tensor)",
                    "the program would hold this call's tensors; read them by name",
                )
            with self.constant_reads():
                self._cb_load_global(name, value, ns, None)

    def guard_names_of(self, obj: Any) -> None:
        """``dir(obj)``: the names in ``obj``'s dicts and its classes' (an attribute added or
        deleted later recompiles). An object the program made has the names it gave it; its
        classes' names are outside state still."""
        if isinstance(obj, Proxy) or not _program_code_running():
            return
        if isinstance(obj, types.ModuleType):
            ns = getattr(obj, "__dict__", None)
            if type(ns) is dict and "__dir__" not in ns:
                self.guard_namespace_names(ns)
                return
        if _lists_names_itself(obj):
            raise UnsupportedOperationError(
                f"dir() of a {type(obj).__name__}, whose __dir__ is its own",
                "the names it lists cannot be guarded",
            )
        access = self.access_for(obj)
        if access is not None:
            self._guard_own_names(obj, access)
        classes: tuple[type, ...] = type(obj).__mro__  # (a class's: its metaclass's)
        if isinstance(obj, type):
            classes = obj.__mro__ + classes
        for cls in classes:
            if cls.__module__ == "builtins":
                continue  # (immutable)
            at = self._held_access(cls, f"class {cls.__qualname__}").attr("__dict__")
            self.facts.guards.setdefault(at.attr("<keys>"), Guard(at, "keys", tuple(vars(cls))))

    def _guard_own_names(self, obj: Any, access: Access) -> None:
        """The names ``dir`` finds on an outside object itself: its ``__dict__``'s, and an
        nn.Module's parameters, buffers and submodules (``nn.Module.__dir__`` lists them)."""
        own = getattr(obj, "__dict__", None) if not isinstance(obj, type) else None
        if type(own) is dict:
            at = access.attr("__dict__")
            found = tuple(self.as_found(own))
            self.facts.guards.setdefault(at.attr("<keys>"), Guard(at, "keys", found))
        if isinstance(obj, torch.nn.Module):
            for store in ("_parameters", "_buffers", "_modules"):
                at, members = access.attr(store), self.as_found(getattr(obj, store))
                self.facts.guards.setdefault(at.attr("<keys>"), Guard(at, "keys", tuple(members)))

    def _note_content_read(self, access: Access) -> None:
        container = self.paths.container_at.get(access)
        if container is not None:
            self._note_content_read_of(container)

    def _note_content_read_of(self, container: Any) -> None:
        if id(container) in self.facts.content_read:
            return
        self.facts.content_read.add(id(container))
        if is_ndarray(container):
            self._guard_array_contents(container)
            return
        if id(container) in self.effects.mutated:
            access = self.access_for(container)
            if access is not None:
                self._guard_entry_contents(container, access)

    def _snapshot_native(self, obj: Any) -> None:
        """A copy of an outside object that C code can change without a hook (a numpy array, a
        ``Counter``), taken when the program first reaches it: what the call found, compared
        when tracing ends (``WritesMixin.check_native_writes``) and put back."""
        if id(obj) not in self.effects.native_snapshots:
            snapshot = copy.copy(obj)
            self.effects.native_snapshots[id(obj)] = (obj, snapshot)
            self.effects.undo.append(lambda: put_back_native(obj, snapshot))

    def _took_array(self, array: Any) -> None:
        self._snapshot_native(array)
        self.effects.array_reads[id(array)] = self.effects.array_reads.get(id(array), 0) + 1

    def guard_arrays_read_natively(self) -> None:
        """Where tracing ends: the outside arrays the program took more often than it made
        tensors of them or read their attributes may have met native code no hook reports
        (``a + 1``, ``for v in a``, ``a > 0``): their contents are guarded."""
        for obj, _ in list(self.effects.native_snapshots.values()):
            if is_ndarray(obj) and self.effects.array_reads.get(id(obj), 0) > 0:
                self._note_content_read_of(obj)

    def _guard_array_contents(self, array: Any) -> None:
        """A C function read an outside numpy array (``np.mean(a)``, ``a[i]``, a view of it):
        its result is a constant of the trace, so the contents the call found are guarded
        (``a.data``, a memoryview: equal shape and values; and the dtype). A call that finds
        other values recompiles. Contents that never compare equal (NaN, a dtype with no
        buffer format) are refused: the call runs natively."""
        access = self.access_for(array)
        if access is None or self.is_inserted(access):
            return  # made by the program: its values are fixed by what the trace guards
        known = self.effects.native_snapshots.get(id(array))
        entry = known[1] if known is not None and known[0] is array else array.copy()
        try:
            comparable = bool(entry.data == entry.copy().data)
        except (ValueError, TypeError, NotImplementedError):
            comparable = False
        if not comparable:
            raise UnsupportedOperationError(
                f"a read of the numpy array {access.describe(self.param_names)}",
                "its contents cannot be guarded by value (a NaN, or a dtype without a buffer "
                "format); pass it in as a tensor",
            )
        at_data, at_dtype = access.attr("data"), access.attr("dtype")
        self.facts.guards.setdefault(at_dtype, Guard(at_dtype, "value", entry.dtype))
        self.facts.guards.setdefault(at_data, Guard(at_data, "value", entry.data))

    def _guard_entry_contents(self, container: Any, access: Access) -> None:
        """The program reads a container it also mutates: what it read depends on the contents
        the call found, so those are guarded (each call that changes them recompiles)."""
        known = self.inputs.proxied_copies.values()
        if any(copy is container for _, copy in known):
            return  # a copy holding proxies: its items were each guarded when it was loaded
        if any(copy is container for _, copy in self.inputs.argument_copies.values()):
            return  # an argument's copy: what it held is in the cache key
        if self.is_inserted(access):
            return  # the program made it in this call: what it holds is the program's own
        entry = self.effects.entry_contents[id(container)]
        if entry is _MISSING:
            raise UnsupportedSideEffectError(
                f"thunder.jit: the function both mutates and reads "
                f"{access.describe(self.param_names)}, whose contents cannot be guarded by value; "
                "pass it as an argument or read it outside the jitted function"
            )
        self.facts.guards.pop(access, None)
        self.facts.guards[access] = Guard(access, "value", entry)
