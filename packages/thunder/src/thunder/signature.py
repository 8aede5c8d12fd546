"""The cache key of a call: generated straight-line code over the arguments.

For the structure of the arguments seen when a program is compiled (how many, which keywords, which
nested tuples/lists/dicts), ``make_signature`` generates a function returning a flat tuple: first
the ambient torch state a program depends on: grad mode (``torch.is_grad_enabled()``: it decides
whether the program is compiled through autodiff, and the traced code may branch on it), the
default dtype (the IR reads it at trace time for factories, Python floats and int-to-float
promotion), inference mode, and the autocast state (off, or the devices and dtypes autocast is
enabled for: an entry compiled under ``torch.autocast`` has the autocast transform applied) and
whether autocast's weight cache is on. Then per tensor its shape, dtype, device, requires_grad and
layout (all tensors' in one entry, ``TensorsKey``: found by torch's C++ tensor guard of a recent
key where it accepts the tensors, else read, ``TensorKeys``), and, with two tensors or more, which
of them share memory; per plain value (a number,
string, dtype, device, ``torch.Size``...) its type and (with constant values) its value; per
value-like object (enum members, memory formats, slices and sets of plain values, functions) the
value itself, or the object's identity where its class defines its own equality; per
``torch.Generator`` its device (an input of the computation, not a constant of it); tuple subclasses
item by item; per other object nothing (what the program reads from it is guarded by the prologue).
Every leaf is checked to be of the kind seen at compile time (its exact type; any plain type where
a plain value was): a call whose arguments have another structure or kinds makes the generated code
raise, which sends the call to the slow path. The key never runs the arguments' own Python code
(hashing, equality), so it cannot raise past the lookup. The key's labels say what each entry is,
for the "what changed" warning.
"""

from __future__ import annotations

import collections.abc
import enum
import functools
import math
import sys
import threading
import types
import weakref
from collections.abc import Callable
from typing import Any

import torch

from thunder import tensor_patches
from thunder.errors import JitError
from thunder.guards import torch_tensor_guard
from thunder_ir.codegen import keep_source

__all__ = [
    "PLAIN_TYPES",
    "Same",
    "Signature",
    "TensorKeys",
    "TensorsKey",
    "WeakSame",
    "alias_pattern",
    "attributes_without_torch_function",
    "is_plain",
    "make_signature",
    "plain_alias_pattern",
    "storage_address",
]

# (expression in the generated code, label for the "what changed" warning)
AMBIENT_KEY = (
    ("is_grad_enabled()", "grad mode (torch.is_grad_enabled())"),
    ("get_default_dtype()", "default dtype (torch.get_default_dtype())"),
    ("is_inference_mode_enabled()", "inference mode (torch.is_inference_mode_enabled())"),
    (
        "is_any_autocast_enabled() and autocast_state()",
        "autocast (torch.is_autocast_enabled(device), torch.get_autocast_dtype(device))",
    ),
    (  # whether autocast converts a parameter once per region (also for blocks the program
        # enters without cache_enabled=): its gradient is summed in the autocast dtype or not
        "is_autocast_cache_enabled()",
        "autocast's weight cache (torch.is_autocast_cache_enabled())",
    ),
    (  # (a device context is a torch function mode: without one, one cheap C call)
        "_len_torch_function_stack() and get_default_device()",
        "default device (torch.set_default_device, with torch.device(...))",
    ),
    (  # tracing runs a replaced method (one C call: the version of torch.Tensor's dict)
        tensor_patches.SIGNATURE_EXPR,
        "methods replaced on torch.Tensor (torch.Tensor.name = ...)",
    ),
)
AUTOCAST_DEVICES = ("cpu", "cuda")


def autocast_state() -> tuple[tuple[str, torch.dtype], ...]:
    """The devices autocast is enabled for, each with its dtype (empty when none of
    ``AUTOCAST_DEVICES``)."""
    return tuple(
        (d, torch.get_autocast_dtype(d)) for d in AUTOCAST_DEVICES if torch.is_autocast_enabled(d)
    )


def alias_pattern(*tensors: torch.Tensor) -> tuple[tuple[int, int], ...] | None:
    """Which tensor arguments share memory: None when none do (the common case); otherwise, for
    each, the position of the first one with the same storage and of the first that is the same
    tensor. A program traced for ``f(t, t)`` reads one input where ``f(x, y)`` reads two, and
    writes through one argument show in another only when they share memory."""
    ptrs = list(map(storage_address, tensors))
    if len(set(ptrs)) == len(ptrs):
        return None
    return _sharing(ptrs, tensors)


_untyped_storage = torch.Tensor.untyped_storage
# Up to this many tensors, the signature tests their storages itself (no call of a function).
_INLINE_STORAGES = 4
_storage_data_ptr = torch._C.StorageBase.data_ptr  # type: ignore[attr-defined]


def plain_alias_pattern(*tensors: torch.Tensor) -> tuple[tuple[int, int], ...] | None:
    """``alias_pattern`` of tensors whose exact types have no ``__torch_function__`` (a tensor, a
    Parameter): their storages' addresses read in one pass of C calls."""
    try:
        if len(set(map(_storage_data_ptr, map(_untyped_storage, tensors)))) == len(tensors):
            return None
        ptrs = list(map(_storage_data_ptr, map(_untyped_storage, tensors)))
    except Exception:  # one without a plain storage (sparse): as alias_pattern reads it
        return alias_pattern(*tensors)
    return _sharing(ptrs, tensors)


def _sharing(ptrs: list[int], tensors: tuple[torch.Tensor, ...]) -> tuple[tuple[int, int], ...]:
    # (first positions by dict: a pattern of hundreds of tensors costs no quadratic search)
    first_storage: dict[int, int] = {}
    first_object: dict[int, int] = {}
    return tuple(
        (first_storage.setdefault(p, i) if p else i, first_object.setdefault(id(t), i))
        for i, (p, t) in enumerate(zip(ptrs, tensors))
    )


def storage_address(t: torch.Tensor) -> int:
    """The address of ``t``'s storage (0 when it has none; the object's id when it has no plain
    storage, e.g. a sparse tensor)."""
    try:
        if torch._C._has_torch_function_unary(t):
            with torch._C.DisableTorchFunctionSubclass():
                return int(t.untyped_storage().data_ptr())
        return int(t.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError, TypeError):
        return -id(t)


def attributes_without_torch_function(t: torch.Tensor, attrs: tuple[str, ...]) -> tuple[Any, ...]:
    """``t``'s attributes read as a plain tensor's: thunder's own inspection of an argument does
    not go through its subclass's ``__torch_function__`` (which may log or refuse the read)."""
    with torch._C.DisableTorchFunctionSubclass():
        return tuple(getattr(t, a) for a in attrs)


# Values keyed by themselves whatever the position held when the program was compiled: exact
# builtin types with C equality and hashing, so a key never runs user code (a position may hold
# an int on one call and a float on the next: the type beside it in the key tells them apart).
PLAIN_TYPES: frozenset[type] = frozenset(
    {
        bool,
        int,
        float,
        complex,
        str,
        bytes,
        type(None),
        torch.dtype,
        torch.device,
        torch.Size,
        range,
        torch.memory_format,
        torch.layout,
        torch.qscheme,
        type(Ellipsis),
        type(NotImplemented),
    }
)
_SYMBOLIC_NUMBERS = frozenset({int, float})
# Plain values two of which may or may not be one object: ``a is b`` can tell.
_IDENTIFIABLE = frozenset({int, float, complex, str, bytes})


def same_objects(*values: Any) -> tuple[int, ...] | None:
    """Which of the values are one object: None when none are (the common case); otherwise, for
    each, the position of the first that is the same object (``a is b`` in the program)."""
    ids = list(map(id, values))
    if len(set(ids)) == len(ids):
        return None
    return tuple(map(ids.index, ids))


# Kept for a program: a different one is a different program (what it calls, or a constant).
_VALUES: tuple[type, ...] = (
    enum.Enum,
    types.ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.BuiltinMethodType,
    functools.partial,
    type,
    *PLAIN_TYPES,
)
_MAX_DEPTH = 32


def is_plain(x: Any) -> bool:
    """Whether ``x`` is a plain value: of a type in ``PLAIN_TYPES``, or a tuple or frozenset of
    plain values."""
    t = type(x)
    if t in PLAIN_TYPES:
        return True
    return (t is tuple or t is frozenset) and all(map(is_plain, x))


def _equality_is_builtin(x: Any) -> bool:
    """Whether comparing and hashing ``x`` runs no Python code of its class and cannot raise."""
    t = type(x)
    if isinstance(t.__eq__, types.FunctionType) or isinstance(t.__hash__, types.FunctionType):
        return False
    try:
        hash(x)
    except Exception:
        return False
    return True


class NumpyScalarKey:
    """A key entry for a numpy scalar (``np.float32(1.5)``, ``np.bool_(True)``): its dtype and
    bytes, so values numpy's ``==`` calls equal but the program tells apart (``-0.0``, NaN
    payloads) are other keys, and a NaN equals itself."""

    __slots__ = ("key", "value")

    def __init__(self, value: Any) -> None:
        self.value = value
        self.key = (value.dtype.str, value.tobytes())

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        return type(other) is NumpyScalarKey and other.key == self.key

    def __repr__(self) -> str:
        return repr(self.value)


def _is_numpy_scalar(x: Any) -> bool:
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(x, numpy.generic) and type(x).__module__ == "numpy"


class Same:
    """A key entry equal only to an entry holding the same object: for an argument keyed by
    value whose own equality cannot be trusted (a class defining ``__eq__``)."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other: object) -> bool:
        return type(other) is Same and other.obj is self.obj

    def __repr__(self) -> str:
        return f"the {type(self.obj).__name__} object at {id(self.obj):#x}"


class WeakSame:
    """A key entry equal only to an entry of the same living object, which it does not keep
    alive: a function or ``functools.partial`` argument made per call (closing over a tensor)
    dies with the caller's last reference, as in eager; a dead one's id reused by another
    object never matches."""

    __slots__ = ("hash", "ref")

    def __init__(self, obj: Any) -> None:
        self.ref = weakref.ref(obj)
        self.hash = id(obj)

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        if type(other) is not WeakSame:
            return False
        obj = self.ref()
        return obj is not None and obj is other.ref()

    def __repr__(self) -> str:
        obj = self.ref()
        return "a dead object" if obj is None else _show(obj)


# Values keyed by their identity, weakly: user callables, often made per call.
_WEAKLY_KEYED = (types.FunctionType, functools.partial)


def _weakly_referable(obj: Any) -> bool:
    try:
        weakref.ref(obj)
    except TypeError:
        return False
    return True


def plain_set_key(s: Any) -> frozenset[Any]:
    """The key of a set of plain values (another set has another structure)."""
    if not all(map(is_plain, s)):
        raise LookupError
    return frozenset(s)


def plain_slice_key(s: slice) -> tuple[Any, Any, Any]:
    """The key of a slice of plain values (another slice has another structure)."""
    parts = (s.start, s.stop, s.step)
    if not all(map(is_plain, parts)):
        raise LookupError
    return parts


class TensorsKey:
    """One entry of the key for the metadata of all the tensor arguments (``values``: the shape,
    dtype, device, requires_grad and layout of each, as ``Signature.tensor_labels`` name them).
    Equal values are one object while it lives (``TensorKeys`` interns them), so the key's hash and
    equality are this object's identity: a lookup costs nothing per tensor."""

    __slots__ = ("__weakref__", "guards", "seen", "values")

    def __init__(self, values: tuple[Any, ...]) -> None:
        self.values = values
        self.seen = 0  # calls that read these values (a guard is made from the third)
        self.guards = 0  # guards made for them (-1: they cannot have one)

    def __repr__(self) -> str:
        return f"TensorsKey{self.values!r}"


def _never(*_tensors: Any) -> bool:
    return False


# How many recent keys' guards a call tries before it reads the metadata; how many guards one
# key gets (one per dispatch state it is met in, inference mode or not; a key pushed out by
# others cycling past this many keeps the Python reads, as fast as before the guards).
_RECENT_KEYS = 8
_GUARDS_PER_KEY = 3


class TensorKeys:
    """The tensor metadata entry of one signature's keys. ``read`` is generated: it checks each
    tensor's exact type (raising ``LookupError`` as the signature does) and reads the values the
    key holds. A call first tries the guard of the key found last (``last``: torch's C++ tensor
    guard, which checks in one call each tensor's exact type, dispatch keys, dtype, device,
    requires_grad and sizes, and so every value read), then those of the other recent keys
    (``recent``, most recent first), and reads the values only where none holds (``miss``)."""

    __slots__ = ("_lock", "guardable", "interned", "last", "read", "recent", "sized")

    def __init__(
        self, read: Callable[..., tuple[Any, ...]], sized: tuple[bool, ...], types: tuple[type, ...]
    ) -> None:
        self.read = read
        self.sized = sized  # per tensor: whether its sizes are in the key (or its ndim alone)
        # (a subclass may answer its sizes itself: its values are read)
        self.guardable = all(t in _GUARDED_TYPES for t in types)
        self.last: tuple[Callable[..., bool], TensorsKey | None] = (_never, None)
        self.recent: tuple[tuple[Callable[..., bool], TensorsKey], ...] = ()
        self.interned: weakref.WeakValueDictionary[tuple[Any, ...], TensorsKey] = (
            weakref.WeakValueDictionary()
        )
        self._lock = threading.Lock()

    def miss(self, *tensors: torch.Tensor) -> TensorsKey:
        """The key entry of tensors the last key's guard did not accept."""
        recent = self.recent
        for found in recent[1:]:
            if _accepts(found[0], tensors):
                with self._lock:
                    self.recent = (found, *(r for r in self.recent if r is not found))
                    self.last = found
                return found[1]
        values = self.read(*tensors)
        with self._lock:
            key = self.interned.get(values)
            if key is None:
                key = self.interned[values] = TensorsKey(values)
            key.seen += 1
            # A guard for metadata met again (a compiled call's: once it is found, once looked up
            # in the cache as it compiles), not for sizes that change on every call.
            if key.seen >= 3 and 0 <= key.guards < _GUARDS_PER_KEY and self.guardable:
                guard = _tensors_guard(tensors, self.sized)
                if guard is None:
                    key.guards = -1
                else:
                    key.guards += 1
                    self.last = (guard.check, key)
                    self.recent = (self.last, *self.recent)[:_RECENT_KEYS]
        return key


def _accepts(check: Callable[..., bool], tensors: tuple[torch.Tensor, ...]) -> bool:
    try:
        return check(*tensors)
    except Exception:  # (a guard that cannot tell: the values are read)
        return False


def _tensors_guard(tensors: tuple[torch.Tensor, ...], sized: tuple[bool, ...]) -> Any:
    """torch's C++ guard of these tensors' key values (of the types ``_GUARDED_TYPES``), or None
    where it would not imply them: a sparse or nested tensor (sparse layouts share dispatch keys),
    or a torch whose guard does not check what the key holds (``_guard_checks_the_key``)."""
    if not _guard_checks_the_key():
        return None
    if not all(t.layout is torch.strided and not t.is_nested for t in tensors):
        return None
    shapes = [tuple(t.shape) if s else (None,) * t.ndim for t, s in zip(tensors, sized)]
    return torch_tensor_guard(tensors, shapes)


_GUARDED_TYPES = (torch.Tensor, torch.nn.Parameter)
_GUARD_CHECKS_THE_KEY: list[bool] = []


def _guard_checks_the_key() -> bool:
    """Whether torch's tensor guard rejects a tensor that differs in any value of the key from
    the one it was made from: probed once per process (a torch whose guard compares
    ``requires_grad`` only under grad mode, or that lacks the guard, keeps the Python reads)."""
    if not _GUARD_CHECKS_THE_KEY:
        _GUARD_CHECKS_THE_KEY.append(_probe_guard())
    return _GUARD_CHECKS_THE_KEY[0]


def _probe_guard() -> bool:
    try:
        # (tensors of their own device and dtype whatever the defaults, made outside inference
        # mode; the guards compared under no_grad, where requires_grad must still count)
        with torch.inference_mode(False), torch.no_grad():
            made = functools.partial(torch.zeros, device="cpu", dtype=torch.float32)
            guard = torch_tensor_guard([made(2, 3, requires_grad=True)], [(2, 3)])
            if guard is None or not guard.check(made(2, 3, requires_grad=True)):
                return False
            others = (
                made(2, 3),
                torch.zeros(2, 3, device="cpu", dtype=torch.float64, requires_grad=True),
                made(3, 2, requires_grad=True),
                made(2, 3, 1, requires_grad=True),
                torch.zeros(2, 3, device="meta", dtype=torch.float32, requires_grad=True),
                torch.nn.Parameter(made(2, 3)),
                made(2, 3).to_sparse().requires_grad_(),
            )
            return not any(guard.check(t) for t in others)
    except Exception:
        return False


class Signature:
    """A generated key function and the labels of its key's entries (those of the tensors'
    metadata, one ``TensorsKey`` entry, in ``tensor_labels``; ``positions`` and
    ``tensor_positions`` order them as the arguments are)."""

    __slots__ = ("fn", "labels", "positions", "source", "tensor_labels", "tensor_positions")

    def __init__(
        self,
        fn: Callable[[tuple[Any, ...], dict[str, Any]], tuple[Any, ...]],
        labels: list[str],
        source: str,
        positions: list[int] | None = None,
        tensor_labels: list[str] | None = None,
        tensor_positions: list[int] | None = None,
    ):
        self.fn = fn
        self.labels = labels
        self.source = source
        self.positions = positions if positions is not None else list(range(len(labels)))
        self.tensor_labels = tensor_labels or []
        self.tensor_positions = tensor_positions or []

    def changes(self, old: tuple[Any, ...], new: tuple[Any, ...]) -> list[tuple[str, Any, Any]]:
        """The entries that differ between two keys of this signature: (label, old, new)."""
        found: list[tuple[int, str, Any, Any]] = []
        for position, label, a, b in zip(self.positions, self.labels, old, new):
            if a is b:
                continue
            if type(a) is TensorsKey and type(b) is TensorsKey:
                found.extend(
                    (p, lb, x, y)
                    for p, lb, x, y in zip(
                        self.tensor_positions, self.tensor_labels, a.values, b.values
                    )
                    if x is not y and x != y
                )
            elif a != b:
                found.append((position, label, a, b))
        found.sort(key=lambda change: change[0])
        return [(lb, a, b) for _, lb, a, b in found]

    def describe_change(self, old: tuple[Any, ...], new: tuple[Any, ...]) -> list[str]:
        """What differs between two keys of this signature, as readable lines."""
        return [f"{label}: {_show(a)} -> {_show(b)}" for label, a, b in self.changes(old, new)]

    def symbolic_values_would_help(self, old: tuple[Any, ...], new: tuple[Any, ...]) -> bool:
        """Whether every difference is one ``cache="symbolic values"`` keeps in one program:
        a tensor's sizes (same number of dimensions) or a Python int/float."""
        found = self.changes(old, new)
        return bool(found) and all(
            (label.endswith(".shape") and len(a) == len(b))
            or (type(a) in (int, float) and type(b) in (int, float))
            for label, a, b in found
        )


def _show(x: Any) -> str:
    if isinstance(x, type):
        return x.__name__
    if isinstance(x, torch.Size):
        return str(tuple(x))
    try:
        return repr(x)
    except Exception:  # an argument's own __repr__: the warning must not fail
        return f"<{type(x).__name__}>"


def _key_text(k: Any) -> str:
    """A dict key as the labels show it (a key's own ``__repr__`` may raise or run long)."""
    if is_plain(k):
        text = repr(k)
        return text if len(text) <= 40 else text[:37] + "..."
    return f"<{type(k).__name__} key>"


class _Generator:
    """Generates the key function. Each leaf is checked to be of the kind the program was
    compiled for (its exact type, or a plain value where one was): the prologue and the program
    rely on what the key covers for that kind (a tensor's metadata, a tuple's items), so a call
    whose argument changed kind gets a structure of its own, never a key that merely fits."""

    def __init__(self, symbolic: bool) -> None:
        self.symbolic = symbolic
        self.body: list[str] = []
        self.key: list[str] = []
        self.labels: list[str] = []
        self.counter = 0
        self.tensors: list[str] = []
        self.scalars: list[str] = []
        self.constants: dict[str, Any] = {}
        # The order of the key's entries as the arguments are (the tensors' metadata is one).
        self.positions: list[int] = []
        # Of the tensors' metadata: the generated reads, their labels and positions, and per
        # tensor whether its sizes (not only its ndim) are in the key, and its type.
        self.tensor_read: list[str] = []
        self.tensor_exprs: list[str] = []
        self.tensor_labels: list[str] = []
        self.tensor_positions: list[int] = []
        self.tensor_sized: list[bool] = []
        self.tensor_types: list[type] = []
        self.tensors_at = -1  # the index of the tensors' entry in the key

    def fresh(self) -> str:
        self.counter += 1
        return f"v{self.counter}"

    def constant(self, value: Any) -> str:
        name = f"K{len(self.constants)}"
        self.constants[name] = value
        return name

    def add(self, expr: str, label: str) -> None:
        self.positions.append(len(self.positions) + len(self.tensor_positions))
        self.key.append(expr)
        self.labels.append(label)

    def add_tensor(self, var: str, value: torch.Tensor, label: str, attrs: tuple[str, ...]) -> None:
        """A tensor's metadata, read by ``TensorKeys.read`` (one entry of the key for all)."""
        if self.tensors_at < 0:
            self.tensors_at = len(self.key)
            self.positions.append(len(self.positions) + len(self.tensor_positions))
            self.key.append("_tensors_key")
            self.labels.append("tensor metadata")
        self.tensors.append(var)
        self.tensor_types.append(type(value))
        self.tensor_sized.append(attrs[0] == "shape")
        self.tensor_read.append(
            f"  if type({var}) is not {self.constant(type(value))}: raise LookupError"
        )
        if torch._C._has_torch_function_unary(value):
            # A subclass's __torch_function__ would see (or refuse) thunder's reads.
            read = self.fresh()
            self.tensor_read.append(
                f"  {read} = attributes_without_torch_function({var}, {self.constant(attrs)})"
            )
            exprs = [f"{read}[{i}]" for i in range(len(attrs))]
        else:
            exprs = [f"{var}.{attr}" for attr in attrs]
        for expr, attr in zip(exprs, attrs):
            self.tensor_positions.append(len(self.positions) + len(self.tensor_positions))
            self.tensor_exprs.append(expr)
            self.tensor_labels.append(f"{label}.{attr}")

    def exact_type(self, var: str, value: Any) -> None:
        self.body.append(f"  if type({var}) is not {self.constant(type(value))}: raise LookupError")

    def leaf(self, var: str, value: Any, label: str, depth: int) -> None:
        t = type(value)
        if depth > _MAX_DEPTH:
            raise JitError(
                f"thunder.jit: the argument {label.split('[')[0]} holds containers nested deeper "
                f"than {_MAX_DEPTH} levels (or a container that holds itself), which the cache "
                "key cannot cover; pass what the function reads from it instead"
            )
        if t in PLAIN_TYPES and not (self.symbolic and t in _SYMBOLIC_NUMBERS):
            allowed = "PLAIN_TYPES"
        elif t in _SYMBOLIC_NUMBERS:  # symbolic: the prologue unpacks the number
            allowed = "SYMBOLIC_NUMBERS"
        else:
            allowed = ""
        if allowed:
            t_var = self.fresh()
            self.body.append(f"  {t_var} = type({var})")
            self.body.append(f"  if {t_var} not in {allowed}: raise LookupError")
            self.add(t_var, f"type of {label}")
            if allowed == "PLAIN_TYPES":
                self.add(var, label)
                if t in (int, float):  # 0.0 == -0.0 (and hash alike), but 1 / -0.0 is -inf
                    self.add(f"{self.constant(math.copysign)}(1.0, {var})", f"sign of {label}")
            if t in _IDENTIFIABLE and not (self.symbolic and t in _SYMBOLIC_NUMBERS):
                self.scalars.append(var)  # symbolic numbers: ``is`` is guarded where it is used
            return
        if not isinstance(value, torch.Tensor):  # (a tensor's type: checked with its metadata)
            self.exact_type(var, value)
        if _is_numpy_scalar(value):
            # An immutable value the program may use as a constant (``x * s``, ``if s:``) with no
            # read the prologue sees: keyed by value, as a plain number is.
            self.add(f"NumpyScalarKey({var})", label)
        elif t is slice:  # unhashable before Python 3.12
            if all(map(is_plain, (value.start, value.stop, value.step))):
                self.add(f"plain_slice_key({var})", label)
            else:
                self.add(f"Same({var})", label)
        elif t is set or t is frozenset:
            # A set of objects: the prologue checks its members (and reads them by position).
            if is_plain(frozenset(value)):
                self.add(f"plain_set_key({var})", label)
            else:
                self.body.append(f"  if is_plain(frozenset({var})): raise LookupError")
        elif isinstance(value, (tuple, list)):
            names = [self.fresh() for _ in value]
            if names:
                self.body.append(f"  {', '.join(names)}, = {var}")
            else:
                self.body.append(f"  if {var}: raise LookupError")
            for i, (name, v) in enumerate(zip(names, value)):
                self.leaf(name, v, f"{label}[{i}]", depth + 1)
        elif t is dict:
            keys = tuple(value)
            # The keys are the structure: compared, not hashed, so no key is kept or repr'd.
            self.body.append(f"  if tuple({var}) != {self.constant(keys)}: raise LookupError")
            for k, v in value.items():
                name = self.fresh()
                self.body.append(f"  {name} = {var}[{self.constant(k)}]")
                self.leaf(name, v, f"{label}[{_key_text(k)}]", depth + 1)
        elif isinstance(value, torch.Tensor):
            # Symbolic sizes: the prologue unpacks and checks the sizes (parameters keep theirs).
            sizes = (
                "ndim" if self.symbolic and not isinstance(value, torch.nn.Parameter) else "shape"
            )
            attrs: tuple[str, ...] = (sizes, "dtype", "device", "requires_grad", "layout")
            if sizes == "ndim":  # (a nested tensor has an ndim, but no sizes to unpack)
                attrs = (*attrs, "is_nested")
            self.add_tensor(var, value, label, attrs)
        elif t is functools.partial:
            # Keyed by what it holds, not by which object it is: a partial made per call with
            # the same function and arguments is the same program (the prologue also checks
            # what the call reads from it, as its attributes).
            parts = [self.fresh() for _ in range(3)]
            self.body.append(f"  {', '.join(parts)} = {var}.func, {var}.args, {var}.keywords")
            for name, part in zip(parts, ("func", "args", "keywords"), strict=True):
                self.leaf(name, getattr(value, part), f"{label}.{part}", depth + 1)
        elif isinstance(value, torch.Generator):
            # An input the program draws from (its exact type checked above): any generator of
            # this device takes the same program (the prologue pins one it cannot pass in).
            self.add(f"{var}.device", f"device of {label}")
        elif (
            isinstance(value, _WEAKLY_KEYED)
            and _weakly_referable(value)
            and type(value).__eq__ is object.__eq__  # type: ignore[comparison-overlap]
        ):
            self.add(f"WeakSame({var})", label)
        elif (
            t is types.MethodType
            and type(value.__func__) is types.FunctionType
            and not isinstance(value.__self__, torch.Tensor)
        ):
            # A bound method (``obj.method``, a new object on every read): its function by
            # identity and its object by type, as an object argument is keyed (the prologue
            # guards what the program reads from the object). A per-call object's method is
            # then kept by nothing and takes the same program.
            func = self.fresh()
            self.body.append(f"  {func} = {var}.__func__")
            self.exact_type(func, value.__func__)
            self.add(func, f"{label}.__func__")
            self.add(f"type({var}.__self__)", f"type({label}.__self__)")
        elif isinstance(value, _VALUES):
            # The program calls it, or reads it as a constant: another one is another program.
            self.add(var if _equality_is_builtin(value) else f"Same({var})", label)
        elif isinstance(value, (int, float, complex, str, bytes)):
            # A subclass of a builtin scalar (numpy's float64): a constant of the program.
            self.add(var if _equality_is_builtin(value) else f"Same({var})", label)
        elif isinstance(value, collections.abc.Mapping):
            # A dict subclass or another mapping (a BatchEncoding, a Counter): ``"k" in batch``
            # and ``len(batch)`` read its keys without a read the prologue sees.
            keys = tuple(value)
            self.body.append(f"  if tuple({var}) != {self.constant(keys)}: raise LookupError")
            for k in keys:
                name = self.fresh()
                self.body.append(f"  {name} = {var}[{self.constant(k)}]")
                self.leaf(name, value[k], f"{label}[{_key_text(k)}]", depth + 1)
        elif isinstance(value, (collections.abc.Set, collections.abc.MappingView)) or (
            isinstance(value, collections.abc.Sequence) and not isinstance(value, range)
        ):
            # A deque, an array, a set subclass, ``d.values()``: as a tuple of its items
            items = tuple(value)  # type: ignore[arg-type]
            names = [self.fresh() for _ in items]
            if names:
                self.body.append(f"  {', '.join(names)}, = tuple({var})")
            else:  # an empty one: another length is another structure
                self.body.append(f"  if len({var}): raise LookupError")
            for i, (name, v) in enumerate(zip(names, items)):
                self.leaf(name, v, f"{label}[{i}]", depth + 1)
        # Any other object: its exact type; what the program reads from it, the prologue checks.


def make_signature(
    args: tuple[Any, ...], kwargs: dict[str, Any], symbolic: bool, param_names: tuple[str, ...]
) -> Signature:
    """The key function for calls structured like ``(args, kwargs)``."""
    gen = _Generator(symbolic)
    # Ambient torch state that the traced program reads or that decides how it is compiled. Grad
    # mode decides whether the program goes through autodiff and the program may branch on it;
    # the IR reads the default dtype while tracing; autocast changes the dtypes ops compute in.
    # A few C calls (about 0.2 us); autocast_state() runs only while some autocast is enabled.
    for expr, label in AMBIENT_KEY:
        gen.add(expr, label)
    names = [f"a{i}" for i in range(len(args))]
    if names:
        gen.body.append(f"  {', '.join(names)}, = args")
    else:
        gen.body.append("  if args: raise LookupError")
    for i, (name, value) in enumerate(zip(names, args)):
        label = param_names[i] if i < len(param_names) else f"args[{i}]"
        gen.leaf(name, value, label, 0)
    if kwargs:
        # Their order is the structure too: the program may iterate ``**kwargs``.
        gen.body.append(f"  if tuple(kwargs) != {gen.constant(tuple(kwargs))}: raise LookupError")
        for k, value in kwargs.items():
            name = gen.fresh()
            gen.body.append(f"  {name} = kwargs[{k!r}]")
            gen.leaf(name, value, k, 0)
    else:
        gen.body.append("  if kwargs: raise LookupError")
    tensors = ", ".join(gen.tensors)
    if gen.tensors:
        # The tensors' metadata: from the guard of a recent key where it holds (one C call),
        # else read (TensorKeys.miss). Their types are checked there, before the aliasing.
        gen.body.append("  _tensor_check, _tensors_key = TENSOR_KEYS.last")
        gen.body.append("  try:")
        gen.body.append(f"    _tensors_found = _tensor_check({tensors})")
        gen.body.append("  except Exception:  # (a guard that cannot tell: the values are read)")
        gen.body.append("    _tensors_found = False")
        gen.body.append(f"  if not _tensors_found: _tensors_key = TENSOR_KEYS.miss({tensors})")
    if len(gen.tensors) > 1:
        pattern = f"alias_pattern({tensors})"
        if all(t in _GUARDED_TYPES for t in gen.tensor_types):
            pattern = f"plain_{pattern}"
            if len(gen.tensors) <= _INLINE_STORAGES:  # (the common case, without a call)
                ptrs = [f"_p{i}" for i in range(len(gen.tensors))]
                same = " or ".join(f"{p} == {q}" for i, p in enumerate(ptrs) for q in ptrs[i + 1 :])
                gen.body.append("  try:")
                for p, t in zip(ptrs, gen.tensors):
                    gen.body.append(f"    {p} = _storage_data_ptr(_untyped_storage({t}))")
                gen.body.append(f"    _shared = {same}")
                gen.body.append("  except Exception:  # (no plain storage: as alias_pattern reads)")
                gen.body.append("    _shared = True")
                pattern = f"({pattern} if _shared else None)"
        gen.add(pattern, "which tensor arguments share memory")
    if len(gen.scalars) > 1:
        gen.add(
            f"same_objects({', '.join(gen.scalars)})",
            "which number and string arguments are one object",
        )
    assert len(gen.positions) == len(gen.key) == len(gen.labels)
    key = ", ".join(gen.key)
    source = (
        "def signature(args, kwargs):\n"
        + "\n".join(gen.body)
        + f"\n  return ({key}{',' if len(gen.key) == 1 else ''})\n"
    )
    if gen.tensors:
        source += (
            f"\ndef read_tensors({tensors}):\n"
            + "".join(f"{line}\n" for line in gen.tensor_read)
            + f"  return ({', '.join(gen.tensor_exprs)},)\n"
        )
    filename = f"<thunder signature {id(gen):x}>"
    globs: dict[str, Any] = {
        "__builtins__": __builtins__,
        "is_grad_enabled": torch.is_grad_enabled,
        "get_default_dtype": torch.get_default_dtype,
        "is_inference_mode_enabled": torch.is_inference_mode_enabled,
        "is_any_autocast_enabled": torch._C._is_any_autocast_enabled,
        "autocast_state": autocast_state,
        "is_autocast_cache_enabled": torch.is_autocast_cache_enabled,
        "_len_torch_function_stack": torch._C._len_torch_function_stack,
        "get_default_device": torch.get_default_device,
        **tensor_patches.SIGNATURE_GLOBALS,
        "alias_pattern": alias_pattern,
        "plain_alias_pattern": plain_alias_pattern,
        "_storage_data_ptr": _storage_data_ptr,
        "_untyped_storage": _untyped_storage,
        "attributes_without_torch_function": attributes_without_torch_function,
        "same_objects": same_objects,
        "PLAIN_TYPES": PLAIN_TYPES,
        "SYMBOLIC_NUMBERS": _SYMBOLIC_NUMBERS,
        "Same": Same,
        "WeakSame": WeakSame,
        "NumpyScalarKey": NumpyScalarKey,
        "plain_set_key": plain_set_key,
        "is_plain": is_plain,
        "plain_slice_key": plain_slice_key,
        **gen.constants,
    }
    exec(compile(source, filename, "exec"), globs)
    if gen.tensors:
        globs["TENSOR_KEYS"] = TensorKeys(
            globs["read_tensors"], tuple(gen.tensor_sized), tuple(gen.tensor_types)
        )
    keep_source(globs["signature"], filename, source)
    return Signature(
        globs["signature"],
        gen.labels,
        source,
        gen.positions,
        gen.tensor_labels,
        gen.tensor_positions,
    )
