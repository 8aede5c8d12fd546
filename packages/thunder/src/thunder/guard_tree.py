"""A cache entry's prologue checked in C++: the same reads and checks, as a tree of torch's guard
manager (``torch._C._dynamo.guards``).

The prologue is generated Python. For a transformers model it is several hundred lines (reads of
the module tree, checks of configs, globals, methods and hooks) and costs 30 to 60 µs a call,
a tenth of an eager forward of a small model. Almost every call finds nothing changed.

The tree is built from the prologue trace and one call the Python prologue accepted. Each read
of the trace (an item, an attribute, a global, a closure cell) is an accessor of the tree with
the same semantics, and each check a guard on the value read:
- ``check_is``, ``check_type`` and ``check_value``: identity, type and equality guards;
- the batched checks of ``thunder.guards`` (hooks, methods, builtins, shadowing): the dict
  lookups they make, one guard each;
- the rarer checks: a guard that calls the prologue's own check function.

What the computation reads from outside the arguments (parameters, buffers, numbers from
globals) must be the very objects that call found (an identity guard each): the tree then
returns those objects, and reads only what comes from the arguments again, in a few generated
lines, which also check the metadata of the tensors that are not arguments. It holds the objects
of the state weakly (``_Held``): what the caller dropped dies as in eager.

Whatever the tree cannot say, the Python prologue says. A call the tree rejects runs the
Python prologue, which accepts or raises ``GuardFailure`` as before; a call it accepts rebuilds
the tree from that call, a few times at most (state that changes on every call gives up the
tree). A prologue with a step the tree has no translation for (symbolic sizes, a constraint)
keeps the Python prologue alone. ``THUNDER_VERIFY_GUARD_TREE=1`` runs the Python prologue after
every call the tree accepts and raises if it would have rejected it or read other objects (the
test suite runs so).
"""

from __future__ import annotations

import gc
import os
import re
import sys
import threading
import types
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import torch

from thunder.guards import (
    BuiltinReads,
    Lookups,
    ModulesWithoutHooks,
    NotShadowed,
    StaticClassLookup,
    TensorsMetadata,
    check_builtins,
    check_contiguity,
    check_has_attribute,
    check_is_not,
    check_lacks_generic_attribute,
    check_lacks_item,
    check_lookups,
    check_members,
    check_module_lacks,
    check_no_hooks,
    check_not_shadowed,
    check_strides,
    check_tensors,
    unpack_element,
    unpack_generic_attr,
    unpack_module_attr,
    unpack_query,
    unpack_referent,
    unpack_shape,
)
from thunder_executors.background_compile import import_compile_stack
from thunder_ir import Proxy, Trace, prims
from thunder_ir.codegen import PythonCode
from thunder_ir.prims.prologue import (
    PROLOGUE_MISSES,
    GuardFailure,
    SetInOrder,
    same_value,
    same_value_test,
)

_cpp: Any  # torch's guard manager module (its stubs lag its signatures: used untyped)
try:
    from torch._C._dynamo import guards as _guard_manager

    _cpp = _guard_manager
except ImportError:  # a torch without the guard manager: the Python prologue alone
    _cpp = None

__all__ = ["BUILD_AFTER", "REBUILDS", "GuardTree", "build_guard_tree", "with_guard_tree"]

# Builds of one entry's tree: the first, and rebuilds after calls the tree rejected and the
# Python prologue accepted (a parameter replaced for good, a global rebound, a dict written on
# every call).
REBUILDS = 8
# The tree is built from the second call the Python prologue accepts; the n-th rebuild waits for
# BUILD_AFTER << n such calls.
BUILD_AFTER = 2

_VERIFY_ENV = "THUNDER_VERIFY_GUARD_TREE"

_HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")


def _all_empty(dicts: tuple[Any, ...]) -> bool:
    return not any(dicts)


class _Untranslatable(Exception):
    """A step of the prologue the tree has no guard for: the entry keeps the Python prologue."""


class GuardTree:
    """The built tree: ``inputs(args, kwargs)`` returns the computation's inputs when every guard
    holds, else None."""

    def __init__(
        self,
        root: Any,
        consts: tuple[Any, ...],
        post: list[tuple[Callable[..., bool], tuple[Any, ...]]],
        extract: Callable[[tuple[Any, ...], dict[str, Any]], tuple[Any, ...]],
        held: _Held,
        size: int,
        versioned: dict[str, tuple[Any, ...]],
    ) -> None:
        self._check = root.check
        self.root = root
        self.consts = consts
        self.post = post
        self.extract = extract
        self.held = held
        self.size = size
        self.versioned = versioned
        held.tree = weakref.ref(self)

    def _reject(self, _object_died: Any) -> None:
        """An object whose identity a guard checks died: its id may be reused, never a hit."""
        self._check = _rejects

    def changed_dict(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...] | None:
        """The path of the dict whose version guard rejects this call, if one does."""
        try:
            result = self.root.check_verbose((args, kwargs, self.consts))
            parts = result.verbose_code_parts
        except Exception:
            return None
        return next((self.versioned[p] for p in parts if p in self.versioned), None)

    def inputs(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...] | None:
        try:
            if not self._check((args, kwargs, self.consts)):
                return None
            for check, values in self.post:
                if not check(*values):
                    return None
            return self.extract(args, kwargs)
        except Exception:  # a guard applied to a value of another type: the prologue decides
            return None


def _rejects(_inputs: Any) -> bool:
    return False


class _Held:
    """What a tree refers to: weakly where the object allows (a guarded identity holds only
    while its object lives: its death rejects every call, as its id may be reused), strongly
    the others (``None``, a tuple, a builtin function: their ids stay theirs). The tree holds
    no tensor, module or batch of a call after the caller dropped it, as eager holds none."""

    __slots__ = ("refs", "strong", "tree")

    def __init__(self) -> None:
        self.refs: dict[int, Callable[[], Any]] = {}
        self.strong: list[Any] = []
        self.tree: Callable[[], GuardTree | None] | None = None

    def died(self, _ref: Any) -> None:
        tree = self.tree() if self.tree is not None else None
        if tree is not None:
            tree._reject(_ref)

    def ref(self, obj: Any) -> Callable[[], Any] | None:
        """A weak reference to ``obj`` watched for its death; None where it cannot have one."""
        found = self.refs.get(id(obj))
        if found is None:
            try:
                found = weakref.ref(obj, self.died)
            except TypeError:
                self.strong.append(obj)
                return None
            self.refs[id(obj)] = found
        return found


def _path(node: _Node) -> tuple[Any, ...]:
    """Where ``node`` is read from (a dict that changes between calls is one at the same path,
    each call's a new one: a request context assigned on every call)."""
    parts: list[Any] = []
    n: _Node | None = node
    while n is not None:
        key = n.key
        if n.parent is not None and n.parent.how == "root" and n.parent.key == 2:
            key = id(n.value)  # a constant: by the object (its position varies between builds)
        try:
            hash(key)
        except TypeError:
            key = id(key)
        parts.append((n.how, key))
        n = n.parent
    return tuple(parts)


def _nth(members: Any, i: int) -> Any:
    """The ``i``-th member of a set (deque, dict) in its iteration order; None past its end
    (its members are guarded: that guard fails)."""
    t = tuple(members)
    return t[i] if i < len(t) else None


def _impl(sym: Any) -> Callable[..., Any]:
    impl = sym.impl
    assert impl is not None, sym.name
    return impl  # type: ignore[no-any-return]


def _passes(impl: Callable[..., Any], *args: Any) -> bool:
    try:
        impl(*args)
    except (GuardFailure, *PROLOGUE_MISSES):
        return False
    return True


_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: instances of other types cannot change class
_IMMUTABLE = (int, float, bool, str, bytes, complex, type(None), type(Ellipsis), torch.dtype)
# Attributes of a function that cannot be assigned.
_READONLY_FUNCTION_ATTRS = frozenset({"__closure__", "__globals__"})


def _numpy_scalar(value: Any) -> bool:
    t = type(value)
    return t.__module__ == "numpy" and t.__name__ != "ndarray" and hasattr(value, "tobytes")


_EQUAL_IS_SAME = frozenset({int, str, bytes, torch.dtype, torch.device, torch.layout, torch.Size})


def _equal_is_same(value: Any) -> bool:
    """Whether ``==`` with ``value``, of a value of its exact type, means ``same_value``: not for
    containers (their items' types go unchecked) or a zero (either sign equals it)."""
    t = type(value)
    if t in _EQUAL_IS_SAME:
        return True
    if t is float:
        return bool(value != 0.0)
    if t is complex:
        return bool(value.real != 0.0 and value.imag != 0.0)
    if t in (tuple, list, frozenset, set, dict, OrderedDict):
        # Empty (the hooks dicts of every module), or of items no other type equals.
        items = [*value.keys(), *value.values()] if isinstance(value, dict) else value
        return all(type(v) in _NO_OTHER_EQUALS or _equal_is_same_item(v) for v in items)
    return False


# Types whose instances equal no instance of another type (a number equals numbers of others).
_NO_OTHER_EQUALS = frozenset({str, bytes, type(None), torch.dtype, torch.device, torch.layout})


def _equal_is_same_item(v: Any) -> bool:
    return type(v) in (tuple, frozenset) and _equal_is_same(v)


def _immutable(value: Any) -> bool:
    if type(value) in _IMMUTABLE:
        return True
    return type(value) in (tuple, frozenset) and all(map(_immutable, value))


def _class_dict(cls: type) -> dict[str, Any]:
    (d,) = gc.get_referents(cls.__dict__)  # the dict behind the mappingproxy
    return d  # type: ignore[no-any-return]


def _data_descriptor(cls: type, name: str) -> bool:
    """Whether a class of ``cls``'s MRO holds ``name`` as a data descriptor (which the ordinary
    lookup prefers to the instance dict)."""
    for c in cls.__mro__:
        if name in vars(c):
            t = type(vars(c)[name])
            return hasattr(t, "__set__") or hasattr(t, "__delete__")
    return False


def _standard_dict(cls: type) -> bool:
    """Whether ``obj.__dict__`` of a ``cls`` object is its instance dict (the descriptor Python
    makes for a class with instance dicts, not one of the class's own)."""
    owner = next((c for c in cls.__mro__ if "__dict__" in vars(c)), None)
    if owner is None:
        return False
    found = vars(owner)["__dict__"]
    return type(found) is types.GetSetDescriptorType and found.__objclass__ is owner


def _instance_dict_writes_seen() -> bool:
    """Whether a dict version guard on an object's ``__dict__`` sees ``obj.name = value``.
    CPython 3.13.0 stores into an object's inline values without telling the dict's watchers
    (python/cpython#125608, fixed in 3.13.1), so such a version never changes."""
    dict_version = getattr(_cpp, "dict_version", None)
    if dict_version is None:  # a torch without the probe: the known broken interpreter
        return sys.version_info[:3] != (3, 13, 0)
    probe = _InstanceDictProbe()
    own = probe.__dict__
    before = dict_version(own)
    probe.value = 1
    setattr(probe, "value", 2)
    return bool(dict_version(own) != before)


class _InstanceDictProbe:
    def __init__(self) -> None:
        self.value = 0


# None until the first tree is built (it needs torch's guard manager).
_INSTANCE_DICT_WRITES_SEEN: bool | None = None


def _instance_dicts_versioned() -> bool:
    global _INSTANCE_DICT_WRITES_SEEN
    if _INSTANCE_DICT_WRITES_SEEN is None:
        _INSTANCE_DICT_WRITES_SEEN = _instance_dict_writes_seen()
    return _INSTANCE_DICT_WRITES_SEEN


def _reads_an_instance_dict(node: _Node) -> bool:
    """Whether ``node`` is an object's ``__dict__`` (a module's is a dict of its own)."""
    if node.parent is None or type(node.parent.value) is types.ModuleType:
        return False
    return node.how == "instance dict" or (
        node.how in ("attr", "generic") and node.key == "__dict__"
    )


class _Node:
    """A value the prologue reads, with how it was read (``parent``, ``how``, ``key``) and, for
    values read from the arguments, the Python expression that reads it.

    ``pinned``: while the guards above it hold, the value is the object the tree was built from
    (read from a dict whose version is guarded, a tuple item, a constant): checks of its identity
    and of immutable values are implied. Its accessor is made only when a guard needs it."""

    __slots__ = ("expr", "guarded", "how", "key", "manager", "parent", "pinned", "value")

    def __init__(
        self,
        value: Any,
        parent: _Node | None,
        how: str,
        key: Any,
        expr: str | None,
        pinned: bool,
        manager: Any = None,
    ) -> None:
        self.value = value
        self.parent = parent
        self.how = how
        self.key = key
        self.expr = expr  # None: read from outside the arguments
        self.pinned = pinned
        self.manager = manager
        self.guarded: set[Any] = set()


class _Builder:
    def __init__(self, ctx: dict[str, Any], volatile: set[tuple[Any, ...]]) -> None:
        assert _cpp is not None
        # The guard manager imports torch._dynamo on first use: never alongside the compile thread.
        import_compile_stack("torch._dynamo")
        self.ctx = ctx
        self.volatile = volatile  # paths of dicts that changed between calls: not versioned
        self.versioned: dict[str, tuple[Any, ...]] = {}  # a version guard's name -> its path
        self.root = _cpp.RootGuardManager()
        self.consts: list[Any] = []
        self.const_nodes: dict[int, _Node] = {}
        self.consts_node = _Node(
            None, None, "root", 2, None, True, self.root.tuple_getitem_manager(2, "c", None, None)
        )
        self.nodes: dict[str, _Node] = {}
        self.children: dict[tuple[int, str, Any], _Node] = {}
        self.held = _Held()
        # The state objects the generated code reads: by id, its name there.
        self.state_names: dict[int, str] = {}
        self.cached: list[Any] = []  # those without weak references
        self.refs: list[Callable[[], Any]] = []
        self.post: list[tuple[Callable[..., bool], tuple[Any, ...]]] = []
        self.frozen_classes: set[type] = set()
        self.mro_fixed: set[type] = set()
        # The generated reads of what comes from the arguments, in the prologue's order: a local
        # per value, the symbolic sizes, the constraints on them (None when one fails).
        self.lines: list[str] = []
        self.namespace: dict[str, Any] = {"_thunder_generic": object.__getattribute__}
        self.size = 0

    # -- nodes and their accessors ----------------------------------------------------------

    def const(self, value: Any) -> _Node:
        node = self.const_nodes.get(id(value))
        if node is None:
            i = len(self.consts)
            self.consts.append(value)
            node = _Node(value, self.consts_node, "tuple", i, None, True)
            self.const_nodes[id(value)] = node
        return node

    def node_of(self, x: Any) -> _Node:
        if isinstance(x, Proxy):
            node = self.nodes.get(x.name)
            if node is None:
                raise _Untranslatable(f"{x.name} is read before it is unpacked")
            return node
        if isinstance(x, PythonCode):
            if x.text not in self.ctx:
                raise _Untranslatable(x.text)
            return self.const(self.ctx[x.text])
        raise _Untranslatable(repr(x))

    def manager(self, node: _Node) -> Any:
        """The node's guard manager, made with the accessors above it on first use."""
        if node.manager is None:
            assert node.parent is not None
            m = self.manager(node.parent)
            key, source = node.key, f"{node.how}:{node.key!r}"
            how = node.how
            if how == "attr":
                node.manager = m.getattr_manager(key, source, None, None)
            elif how == "generic":
                node.manager = m.generic_getattr_manager(key, source, None, None)
            elif how == "dict":
                node.manager = m.dict_getitem_manager(key, source, None, None)
            elif how == "tuple":
                node.manager = m.tuple_getitem_manager(key, source, None, None)
            elif how == "list":
                node.manager = m.list_getitem_manager(key, source, None, None)
            elif how == "class dict":
                node.manager = m.type_dict_manager(source, None, None)
            elif how == "instance dict":
                node.manager = m.get_generic_dict_manager(source, None, None)
            elif how == "element":  # the i-th member of a set in its iteration order
                node.manager = m.lambda_manager(lambda s, i=key: _nth(s, i), source, None, None)
            elif how == "call":  # the parent is a query of the ambient state, called anew
                node.manager = m.lambda_manager(lambda q, a=key: q(*a), source, None, None)
            else:
                assert how == "item"
                node.manager = m.getitem_manager(key, source, None, None)
        return node.manager

    def child(
        self, parent: _Node, how: str, key: Any, value: Any, expr: str | None, pinned: bool
    ) -> _Node:
        k = (id(parent), how, key)
        node = self.children.get(k)
        if node is None:
            node = _Node(value, parent, how, key, expr, pinned)
            self.children[k] = node
        return node

    def item(self, parent: _Node, key: Any) -> _Node:
        """``parent[key]``. From a dict of the state, its version is guarded and the item is
        pinned; a dict, tuple or list read by its own accessor has its exact type guarded."""
        pv = parent.value
        value = pv[key]
        expr = None
        if parent.expr is not None:
            if type(key) not in (str, int):
                raise _Untranslatable(f"a key {key!r} of an argument")
            expr = f"{parent.expr}[{key!r}]"
        if expr is None and type(pv) in (dict, OrderedDict) and self.version(parent):
            return self.child(parent, "dict", key, value, None, True)
        kinds: dict[type, str] = {dict: "dict", tuple: "tuple", list: "list"}
        how = kinds.get(type(pv), "item")
        if how != "item":
            self.type_is(parent, type(pv))
        pinned = how == "tuple" and parent.pinned
        return self.child(parent, how, key, value, expr, pinned)

    def attr(self, parent: _Node, name: str) -> _Node:
        """``getattr(parent, name)``. On an object of the state whose instance dict holds the
        name (and no class of its type holds a data descriptor of it), the object is frozen
        (type, instance dict and classes guarded) and the value is pinned."""
        pv = parent.value
        if name == "__dict__" and type(pv).__getattribute__ is object.__getattribute__:  # type: ignore[comparison-overlap]
            return self.generic(parent, name)  # the same read, one node
        value = getattr(pv, name)
        if parent.expr is not None:
            return self.child(
                parent, "attr", name, value, f"getattr({parent.expr}, {name!r})", False
            )
        if (
            parent.pinned
            and isinstance(pv, types.FunctionType)
            and type(pv) is types.FunctionType
            and name in _READONLY_FUNCTION_ATTRS
        ):
            return self.child(parent, "attr", name, value, None, True)
        if parent.pinned and self.reads_instance_dict(pv, name, value) and self.freeze(parent):
            return self.child(parent, "attr", name, value, None, True)
        if (
            parent.pinned
            and type(pv) is types.ModuleType
            and self.in_instance_dict(pv, name, value)
            and self.version(self.child(parent, "instance dict", None, pv.__dict__, None, False))
        ):
            self.type_is(parent, types.ModuleType)  # a module's class can be assigned
            return self.child(parent, "attr", name, value, None, True)
        return self.child(parent, "attr", name, value, None, False)

    def generic(self, parent: _Node, name: str) -> _Node:
        pv = parent.value
        value = object.__getattribute__(pv, name)
        if (
            name == "__dict__"
            and parent.expr is None
            and type(value) is dict
            and _standard_dict(type(pv))
            and self.freeze_class(type(pv))
        ):
            self.type_is(parent, type(pv))  # its classes fixed: the instance dict's own accessor
            return self.child(parent, "instance dict", None, value, None, False)
        if parent.expr is not None:
            expr = f"_thunder_generic({parent.expr}, {name!r})"
            return self.child(parent, "generic", name, value, expr, False)
        if parent.pinned and self.in_instance_dict(pv, name, value) and self.freeze(parent):
            return self.child(parent, "generic", name, value, None, True)
        return self.child(parent, "generic", name, value, None, False)

    @staticmethod
    def in_instance_dict(obj: Any, name: str, value: Any) -> bool:
        d = getattr(obj, "__dict__", None)
        return (
            type(d) is dict
            and name in d
            and d[name] is value
            and not _data_descriptor(type(obj), name)
        )

    def reads_instance_dict(self, obj: Any, name: str, value: Any) -> bool:
        cls = type(obj)
        return (
            cls.__getattribute__ is object.__getattribute__  # type: ignore[comparison-overlap]
            and self.in_instance_dict(obj, name, value)
        )

    def dict_of(self, obj: _Node) -> tuple[_Node, bool]:
        """``obj.__dict__``, and whether its version is guarded (the object's attributes are
        then fixed)."""
        node = self.generic(obj, "__dict__")
        return node, self.version(node)

    def freeze(self, obj: _Node) -> bool:
        """Guards what decides an ordinary attribute lookup on ``obj``: its type, its instance
        dict and the dicts of its classes. False where one of the dicts changes on every call."""
        cls = type(obj.value)
        self.type_is(obj, cls)
        return self.dict_of(obj)[1] and self.freeze_class(cls)

    def freeze_class(self, cls: type) -> bool:
        """Guards the dicts of the classes of ``cls``'s MRO and its metaclass's, and the two
        MROs (a base given other ``__bases__`` gives its subclasses new MRO tuples)."""
        for c in (cls, type(cls)):
            if c.__flags__ & _HEAPTYPE and c not in self.mro_fixed:
                self.mro_fixed.add(c)
                mro = self.child(self.const(c), "attr", "__mro__", c.__mro__, None, False)
                self.identity(mro, c.__mro__)
        metaclass: type = type(cls)
        for c in (*cls.__mro__, *metaclass.__mro__):
            if c in self.frozen_classes or not c.__flags__ & _HEAPTYPE:
                continue  # a builtin class cannot change
            table = self.child(self.const(c), "class dict", None, _class_dict(c), None, False)
            if not self.version(table):
                return False
            self.frozen_classes.add(c)
        return True

    # -- guards -----------------------------------------------------------------------------

    def _note(self) -> list[str]:
        self.size += 1
        return [f"guard {self.size}"]

    def version(self, node: _Node) -> bool:
        """Guards the version of a dict of the state: the same dict, unchanged (versions are
        unique). False for a dict that changed on a call the tree was built before."""
        d = node.value
        if not isinstance(d, dict) or node.expr is not None:
            return False
        path = _path(node)
        if path in self.volatile:
            return False
        if _reads_an_instance_dict(node) and not _instance_dicts_versioned():
            return False  # its attribute writes go unseen: the values read are checked instead
        if "version" not in node.guarded:
            node.guarded.add("version")
            # (versions are process-unique: a new dict at a dead one's address has another)
            note = self._note()
            self.versioned[note[0]] = path
            self.manager(node).add_dict_version_guard(d, note, None)
            node.pinned = True
        return True

    def type_is(self, node: _Node, typ: type) -> None:
        if type(node.value) is not typ:
            raise _Untranslatable(f"expected {typ.__name__}")
        if node.pinned and not typ.__flags__ & _HEAPTYPE and typ is not types.ModuleType:
            return  # the same object, of a class it cannot leave
        if ("type", typ) not in node.guarded:
            node.guarded.add(("type", typ))
            self.held.ref(typ)
            self.manager(node).add_type_match_guard(id(typ), self._note(), None)

    def identity(self, node: _Node, obj: Any) -> None:
        if node.value is not obj:
            raise _Untranslatable("the prologue's call read another object")
        if node.pinned:
            return
        if ("id", id(obj)) not in node.guarded:
            node.guarded.add(("id", id(obj)))
            self.held.ref(obj)
            self.manager(node).add_id_match_guard(id(obj), self._note(), None)

    def equals(self, node: _Node, value: Any) -> None:
        if value is None or type(value) is bool:
            self.identity(node, value)
            return
        if type(value) is float and value != value:
            raise _Untranslatable("a NaN is never equal")
        if _numpy_scalar(value) and (value != value or not value):
            raise _Untranslatable("numpy's == takes -0.0 for 0.0 and no NaN for itself")
        if type(value) is SetInOrder:  # a set's items in the traced order
            if not same_value(node.value, value):
                raise _Untranslatable("the prologue's call read another value")
            self.type_is(node, value.kind)
            self.held.strong.append(value)
            self.manager(node).add_lambda_guard(lambda x: same_value(x, value), self._note(), None)
            return
        if type(node.value) is not type(value) or node.value != value:
            raise _Untranslatable("the prologue's call read another value")
        if node.pinned and _immutable(value):
            return
        if type(value) is dict and _immutable(tuple(value.items())) and self.version(node):
            return  # an unchanged dict of immutable values (a mutable value can change in place)
        self.type_is(node, type(value))
        self.held.strong.append(value)  # the prologue's own constant
        if _equal_is_same(value):
            self.manager(node).add_equals_match_guard(value, self._note(), None)
        else:  # `==` takes (1, 2) for (1.0, 2), -0.0 for 0.0: the prologue's own comparison
            self.manager(node).add_lambda_guard(same_value_test(value), self._note(), None)

    def lacks_key(self, node: _Node, key: Any) -> None:
        if key in node.value:
            raise _Untranslatable("the key is there")
        if type(node.value) in (dict, OrderedDict) and self.version(node):
            return
        self.type_is(node, dict)
        self.manager(node).add_dict_contains_guard(False, key, self._note(), None)

    def by_call(
        self, node: _Node, impl: Callable[..., Any], args: tuple[Any, ...], at: int
    ) -> None:
        """The prologue's own check function, called with this node's value at ``args[at]``."""
        before, after = args[:at], args[at + 1 :]

        def check(value: Any) -> bool:
            return _passes(impl, *before, value, *after)

        self.manager(node).add_lambda_guard(check, self._note(), None)

    # -- the prologue's steps ---------------------------------------------------------------

    def build(self, trace: Trace, args: tuple[Any, ...], kwargs: dict[str, Any]) -> GuardTree:
        args_proxy, kwargs_proxy = trace.args
        root = self.root
        self.nodes[args_proxy.name] = _Node(
            args, None, "root", 0, "args", False, root.tuple_getitem_manager(0, "a", None, None)
        )
        self.nodes[kwargs_proxy.name] = _Node(
            kwargs, None, "root", 1, "kwargs", False, root.tuple_getitem_manager(1, "k", None, None)
        )
        returned: tuple[Any, ...] | None = None
        for bsym in trace.bound_symbols:
            if bsym.sym is prims.python_return:
                returned = bsym.args[0]
                break
            self.step(bsym)
        if returned is None:
            raise _Untranslatable("no return")
        return self.finish(returned)

    def step(self, bsym: Any) -> None:
        self.translate(bsym)
        outs = bsym.output if isinstance(bsym.output, tuple) else (bsym.output,)
        for out in outs:
            node = self.nodes.get(out.name) if isinstance(out, Proxy) else None
            if node is not None and node.expr is not None and node.expr != out.name:
                self.lines.append(f"{out.name} = {node.expr}")
                node.expr = out.name  # read once, by its name

    def translate(self, bsym: Any) -> None:
        sym, a = bsym.sym, bsym.args
        out = bsym.output
        if sym is prims.unpack_sequence:
            seq = self.node_of(a[0])
            self.type_is(seq, tuple)
            n = a[1]
            if len(seq.value) != n:
                raise _Untranslatable("another number of arguments")
            self.manager(seq).add_length_check_guard(n, self._note(), None)
            for i, proxy in enumerate(out):
                if proxy is not None:
                    self.nodes[proxy.name] = self.item(seq, i)
        elif sym is prims.unpack_key:
            self.nodes[out.name] = self.item(self.node_of(a[0]), a[1])
        elif sym is prims.unpack_attr:
            self.nodes[out.name] = self.attr(self.node_of(a[0]), a[1])
        elif sym is unpack_generic_attr:
            self.nodes[out.name] = self.generic(self.node_of(a[0]), a[1])
        elif sym is unpack_module_attr:
            self.nodes[out.name] = self.module_member(a)
        elif sym is prims.unpack_global:
            globs, name = self.node_of(a[0]), a[1]
            if type(globs.value) is not dict or name not in globs.value:
                raise _Untranslatable(f"global {name!r} found in the builtins")
            self.nodes[out.name] = self.item(globs, name)
        elif sym is unpack_query:
            query, query_args = a[0], tuple(a[1:])
            self.nodes[out.name] = self.child(
                self.const(query), "call", query_args, query(*query_args), None, False
            )
        elif sym is unpack_element or sym is unpack_referent:
            parent = self.node_of(a[0])
            if parent.expr is not None:
                raise _Untranslatable("a member of an argument")
            if sym is unpack_element:
                node = self.child(parent, "element", a[1], _nth(parent.value, a[1]), None, False)
            else:  # the weakref called anew
                node = self.child(parent, "call", (), parent.value(), None, False)
            self.nodes[out.name] = node
        elif sym is prims.unpack_cell:
            fn, index = self.node_of(a[0]), a[1]
            cells = self.attr(fn, "__closure__")
            cell = self.item(cells, index)
            # (of an argument function: read again on every call, as its other reads)
            expr = None if cell.expr is None else f"{cell.expr}.cell_contents"
            self.nodes[out.name] = self.child(
                cell, "attr", "cell_contents", cell.value.cell_contents, expr, False
            )
        elif sym is prims.check_value:
            self.equals(self.node_of(a[0]), a[1])
        elif sym is prims.check_type:
            self.type_is(self.node_of(a[0]), a[1])
        elif sym is prims.check_is:
            self.check_is(self.node_of(a[0]), a[1])
        elif sym is prims.check_len or sym is prims.check_keys:
            node = self.node_of(a[0])
            # (an OrderedDict's move_to_end reorders it without a new version)
            if type(node.value) is dict and self.version(node):
                pass  # the same keys, in the same order
            elif sym is prims.check_len and type(node.value) in (list, tuple):
                self.type_is(node, type(node.value))  # (its own len, in C)
                self.manager(node).add_length_check_guard(a[1], self._note(), None)
            elif sym is prims.check_keys and type(node.value) is dict:
                self.type_is(node, dict)
                keys = a[1]
                self.held.strong.append(keys)
                self.manager(node).add_lambda_guard(
                    lambda d: tuple(d) == keys  # (an exact dict), self._note(), None
                )
            else:
                self.by_call(node, _impl(sym), a, 0)
        elif sym is check_lacks_item and type(self.node_of(a[0]).value) in (dict, OrderedDict):
            self.lacks_key(self.node_of(a[0]), a[1])
        elif sym is check_is_not:
            node, other = self.node_of(a[0]), self.node_of(a[1])
            if node.expr is not None or other.expr is not None:
                raise _Untranslatable("identity of values read from the arguments")
            self.identity(node, node.value)  # both pinned: they stay two objects
            self.identity(other, other.value)
        elif sym in (
            check_lacks_item,
            check_has_attribute,
            check_strides,
            check_contiguity,
            check_members,
        ):
            self.by_call(self.node_of(a[0]), _impl(sym), a, 0)
        elif sym is check_module_lacks:
            self.module_lacks(a[0], self.node_of(a[1]))
        elif sym is check_lacks_generic_attribute:
            self.lacks_generic(a[0], self.node_of(a[1]))
        elif sym is check_no_hooks:
            self.no_hooks(a[0], [self.node_of(x) for x in a[1:]])
        elif sym is check_lookups:
            self.lookups(a[0])
        elif sym is check_builtins:
            self.builtins(a[0], [self.node_of(x) for x in a[1:]])
        elif sym is check_not_shadowed:
            self.not_shadowed(a[0], [self.node_of(x) for x in a[1:]])
        elif sym is check_tensors:
            self.tensors(a[0], [self.node_of(x) for x in a[1:]])
        elif sym is unpack_shape:
            self.shape(self.node_of(a[0]), a[1], out)
        elif sym is prims.check_constraint:
            code = a[0]
            self.namespace.update(code.names)
            self.lines.append(f"if not ({code.text}): return None")
        else:
            raise _Untranslatable(sym.name)

    def shape(self, tensor: _Node, pattern: tuple[int | None, ...], sizes: tuple[Any, ...]) -> None:
        """The symbolic sizes of a tensor of the arguments, read by the generated code (its
        number of dimensions is in the cache key; its constant sizes are checked there)."""
        if tensor.expr is None:
            raise _Untranslatable("symbolic sizes of a tensor of the state")
        shape = f"{tensor.expr}.shape"
        fixed = [f"{shape}[{i}] != {d}" for i, d in enumerate(pattern) if d is not None]
        self.lines.append(f"if len({shape}) != {len(pattern)}: return None")
        if fixed:
            self.lines.append(f"if {' or '.join(fixed)}: return None")
        names = iter(p.name for p in sizes)
        for i, d in enumerate(pattern):
            if d is None:
                name = next(names)
                self.lines.append(f"{name} = {shape}[{i}]")
                self.nodes[name] = _Node(None, tensor, "size", i, name, False)

    def module_member(self, a: tuple[Any, ...]) -> _Node:
        # The inline form: own[store][name] while the module's own dict does not hold the name.
        if len(a) < 4 or a[2] not in ("_parameters", "_buffers", "_modules") or a[3] is None:
            raise _Untranslatable("a module member read through getattr")
        name, store = a[1], a[2]
        own = self.node_of(a[3])
        self.lacks_key(own, name)
        return self.item(self.item(own, store), name)

    def check_is(self, node: _Node, obj: Any) -> None:
        if isinstance(obj, Proxy):  # ``a is b``, both read: both are the objects of this call
            other = self.node_of(obj)
            if node.expr is not None or other.expr is not None:
                raise _Untranslatable("identity of values read from the arguments")
            self.identity(other, other.value)
            self.identity(node, other.value)
            return
        if isinstance(obj, PythonCode):
            obj = self.node_of(obj).value
        self.identity(node, obj)

    def module_lacks(self, absence: Any, module: _Node) -> None:
        # decided by the module's type and classes, its own dict and its member dicts
        if module.expr is None and module.pinned and self.freeze(module):
            own = self.dict_of(module)[0]
            stores = [
                own.value[s] for s in ("_parameters", "_buffers", "_modules") if s in own.value
            ]
            if all(
                self.version(self.item(own, s))
                for s in ("_parameters", "_buffers", "_modules")
                if s in own.value
            ) and all(type(d) is dict for d in stores):
                return
        self.by_call(module, _impl(check_module_lacks), (absence, module), 1)

    def lacks_generic(self, absence: Any, obj: _Node) -> None:
        if obj.expr is None and obj.pinned and self.freeze(obj):
            return  # the instance dict and the classes, where the lookup looks
        self.by_call(obj, _impl(check_lacks_generic_attribute), (absence, obj), 1)

    def no_hooks(self, checker: ModulesWithoutHooks, modules: list[_Node]) -> None:
        # Hooks: the hook dicts of these same modules are empty now, tested in one call (a hook
        # registered, or put into a dict directly: ``m._forward_hooks[k] = fn``). They are the
        # dicts the module holds: a versioned own dict changes when one is replaced, else each
        # is checked to be the one held. The own dicts also fix ``compile()`` and the methods.
        hook_dicts: list[Any] = []
        for module, methods in zip(modules, checker.methods or [()] * len(modules)):
            own, versioned = self.dict_of(module)
            d = own.value
            if any(d.get(name) for name in _HOOK_DICTS) or d.get("_compiled_call_impl"):
                raise _Untranslatable("a module has hooks")
            if not all(name in d for name in _HOOK_DICTS):
                raise _Untranslatable("a module lacks a hook dict")
            if not versioned:
                if "_compiled_call_impl" in d:
                    self.identity(self.item(own, "_compiled_call_impl"), None)
                for name in ("_compiled_call_impl", *methods):
                    if name not in d:
                        self.lacks_key(own, name)
                for name in _HOOK_DICTS:
                    self.identity(self.item(own, name), d[name])
            self.identity(module, module.value)
            hook_dicts.extend(d[name] for name in _HOOK_DICTS)
        held = self.const(tuple(hook_dicts))
        self.manager(held).add_lambda_guard(_all_empty, self._note(), None)

    def lookups(self, lookups: Lookups) -> None:
        for holder, name, expected in zip(lookups.holders, lookups.names, lookups.expected):
            if isinstance(holder, type) and self.class_attribute(holder, name, expected):
                continue
            if (
                type(holder) is StaticClassLookup
                and getattr(holder, name) is expected
                and self.freeze_class(object.__getattribute__(holder, "cls"))
            ):
                continue  # what the MRO holds at the name: unchanged with its classes' dicts
            self.identity(self.attr(self.const(holder), name), expected)
        for holder, name, expected in lookups.bound:
            found = self.attr(self.const(holder), name)
            self.type_is(found, types.MethodType)
            self.identity(self.attr(found, "__func__"), expected.__func__)
            self.identity(self.attr(found, "__self__"), expected.__self__)

    def class_attribute(self, cls: type, name: str, expected: Any) -> bool:
        """Whether ``getattr(cls, name)`` is ``expected`` as long as the dicts of ``cls``'s
        classes (and its metaclass's) are unchanged: found as itself in the first class that
        holds it (a function, a property, a plain value), with no metaclass descriptor of it."""
        if type(cls).__getattribute__ is not type.__getattribute__:  # type: ignore[comparison-overlap]
            return False
        if _data_descriptor(type(cls), name):
            return False
        owner = next((c for c in cls.__mro__ if name in vars(c)), None)
        if owner is None or vars(owner)[name] is not expected:
            return False
        if type(expected).__flags__ & _HEAPTYPE:
            return False  # a descriptor of a Python class may answer otherwise next time
        self.freeze_class(cls)
        return True

    def builtins(self, reads: BuiltinReads, globals_nodes: list[_Node]) -> None:
        import builtins

        for names, globs in zip(reads.names, globals_nodes):
            for name in names:
                self.lacks_key(globs, name)
        table = self.const(vars(builtins))
        for name, value in reads.used.items():
            self.identity(self.item(table, name), value)
        self.identity(self.item(table, "__name__"), builtins.__name__)

    def not_shadowed(self, shadowing: NotShadowed, objs: list[_Node]) -> None:
        for obj, names in zip(objs, shadowing.names):
            value = object.__getattribute__(obj.value, "__dict__")
            if obj.expr is None:
                own = self.dict_of(obj)[0]
            else:
                expr = f"_thunder_generic({obj.expr}, '__dict__')"
                own = self.child(obj, "generic", "__dict__", value, expr, False)
            for name in names:
                self.lacks_key(own, name)

    def tensors(self, metadata: TensorsMetadata, tensors: list[_Node]) -> None:
        for t in tensors:
            if t.expr is None:
                self.identity(t, t.value)
        # checked by the generated reads: those of the state held weakly, those of the
        # arguments read again
        values = [t.expr or self.state_value(t.value) for t in tensors]
        check = f"_thunder_check{len(self.namespace)}"
        self.namespace[check] = metadata.check
        self.lines.append(f"if not {check}({', '.join(values)}): return None")

    def state_value(self, obj: Any) -> str:
        """The generated code's name for ``obj``, an object of the state the tree returns or
        checks: read from its weak reference once per call (alive while the guards hold: pinned,
        or its death rejects every call), or held where it cannot be referred to weakly."""
        name = self.state_names.get(id(obj))
        if name is None:
            ref = self.held.ref(obj)
            if ref is None:
                name = f"_thunder_cached[{len(self.cached)}]"
                self.cached.append(obj)
            else:
                name = f"_thunder_s{len(self.refs)}"
                self.lines.append(f"{name} = _thunder_r[{len(self.refs)}]()")
                self.refs.append(ref)
            self.state_names[id(obj)] = name
        return name

    def finish(self, returned: tuple[Any, ...]) -> GuardTree:
        parts = []
        for x in returned:
            node = self.node_of(x)
            if node.expr is None:
                self.identity(node, node.value)
                parts.append(self.state_value(node.value))
            else:
                parts.append(node.expr)
        body = ", ".join(parts) + ("," if parts else "")
        values = {n.expr: n.value for n in self.nodes.values() if n.expr is not None}
        lines = [*_unpacked(self.lines, values), f"return ({body})"]
        if self.refs:
            lines.insert(0, "_thunder_r = _thunder_refs")  # a local: read once per call
        source = "def extract(args, kwargs):\n" + "".join(f"    {line}\n" for line in lines)
        namespace = {
            **self.namespace,
            "_thunder_cached": tuple(self.cached),
            "_thunder_refs": tuple(self.refs),
        }
        exec(compile(source, "<thunder guard tree>", "exec"), namespace)
        return GuardTree(
            self.root,
            tuple(self.consts),
            self.post,
            namespace["extract"],
            self.held,
            self.size,
            self.versioned,
        )


_ITEM_READ = re.compile(r"(\w+) = (\w+)\[(\d+)\]\Z")


def _unpacked(lines: list[str], values: dict[str, Any]) -> list[str]:
    """``lines`` with each run of ``x_i = seq[i]`` reading every item of a list or tuple in order
    (the tree guards its exact type) made one unpacking, ``x_0, x_1, ... = seq``: a list of
    hundreds of tensors is read in one step. Where the call's one has another length, the
    unpacking raises and the Python prologue decides the call."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        first = _ITEM_READ.match(lines[i])
        seq = values.get(first.group(2)) if first and first.group(3) == "0" else None
        length = len(seq) if type(seq) in (list, tuple) else 0  # type: ignore[arg-type]
        if first and length > 1:
            names: list[str] = []
            for line in lines[i : i + length]:
                read = _ITEM_READ.match(line)
                if not read or read.group(2) != first.group(2) or read.group(3) != str(len(names)):
                    break
                names.append(read.group(1))
            if len(names) == length:
                out.append(f"{', '.join(names)}, = {first.group(2)}")
                i += len(names)
                continue
        out.append(lines[i])
        i += 1
    return out


def build_guard_tree(
    trace: Trace,
    ctx: dict[str, Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    volatile: set[tuple[Any, ...]] | None = None,
) -> GuardTree | None:
    """The tree of ``trace`` (a prologue trace and its context), from a call its Python form
    accepted; None where a step has no translation or this torch has no guard manager."""
    if _cpp is None:
        return None
    try:
        return _Builder(ctx, volatile or set()).build(trace, args, kwargs)
    except _Untranslatable:
        return None
    except Exception:  # another torch's guard manager (other signatures): the Python prologue
        return None


class _Entry:
    __slots__ = ("accepted", "building", "builds", "hits", "tree", "volatile")

    def __init__(self) -> None:
        self.tree: GuardTree | None = None
        self.hits = 0  # calls the tree accepted
        self.accepted = 0  # calls the Python prologue accepted
        self.builds = 0
        self.volatile: set[tuple[Any, ...]] = set()  # paths of dicts that change between calls
        # Held by the call that builds the tree: calls on other threads meanwhile do not build
        # one too (each build would count against REBUILDS).
        self.building = threading.Lock()


def with_guard_tree(
    prologue: Callable[..., Any], trace: Trace, ctx: dict[str, Any]
) -> Callable[..., Any]:
    """``prologue`` (the Python prologue of ``trace``) behind its guard tree: the tree decides
    the calls it accepts, the Python prologue the others.

    The tree is built from the second call the prologue accepts (the guard manager's first use
    imports ``torch._dynamo``, about a second: a program run once does not pay it). After a call
    the tree rejected and the prologue accepted, a dict whose version changed is read item by
    item from then on, and the tree is rebuilt; further rebuilds come after 2, 4, 8... such calls,
    so state that changes on every call costs a few rebuilds in all."""
    if _cpp is None or os.environ.get("THUNDER_GUARD_TREE", "1") == "0":
        return prologue
    state = _Entry()
    verify = os.environ.get(_VERIFY_ENV) == "1"
    after = int(os.environ.get("THUNDER_GUARD_TREE_AFTER", BUILD_AFTER))

    def run(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        tree = state.tree
        if tree is not None:
            inputs = tree.inputs(args, kwargs)
            if inputs is not None:
                state.hits += 1
                if verify:
                    _verify(prologue, args, kwargs, inputs)
                return inputs
        inputs = prologue(args, kwargs)  # GuardFailure: not this entry
        if tree is not state.tree:  # another thread built one meanwhile: it rejected nothing
            return inputs
        state.accepted += 1
        if state.builds < REBUILDS:
            if state.accepted >= after << state.builds and state.building.acquire(blocking=False):
                try:
                    if state.accepted >= after << state.builds:  # (not built meanwhile)
                        _rebuild(state, tree, trace, ctx, args, kwargs)
                finally:
                    state.building.release()
        elif tree is not None:
            state.tree = None  # rebuilt enough and still wrong: the Python prologue alone
        return inputs

    run.__thunder_source__ = getattr(prologue, "__thunder_source__", None)  # type: ignore[attr-defined]
    run.guard_tree = state  # type: ignore[attr-defined]
    return run


def _rebuild(
    state: _Entry,
    old: GuardTree | None,
    trace: Trace,
    ctx: dict[str, Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> None:
    if old is not None:
        changed = old.changed_dict(args, kwargs)
        if changed is not None:
            state.volatile.add(changed)
    state.builds += 1
    state.tree = build_guard_tree(trace, ctx, args, kwargs, state.volatile)
    state.accepted = 0  # (after: calls on other threads while it was built count for nothing)
    if state.tree is None:
        state.builds = REBUILDS  # a step without translation: not tried again


def _verify(
    prologue: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    inputs: tuple[Any, ...],
) -> None:
    try:
        expected = prologue(args, kwargs)
    except GuardFailure as e:
        raise AssertionError(f"the guard tree accepted a call the prologue rejects: {e}") from e
    if len(expected) != len(inputs) or not all(map(_same_input, expected, inputs)):
        raise AssertionError("the guard tree returned other inputs than the prologue")


def _same_input(a: Any, b: Any) -> bool:
    """The same object, or the same number (a size above 256 is a new int at each read)."""
    if a is b:
        return True
    if type(a) is not type(b) or type(a) not in (int, float, complex):
        return False
    return bool(a == b or (a != a and b != b))
