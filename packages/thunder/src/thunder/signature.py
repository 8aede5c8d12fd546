"""The cache key of a call: generated straight-line code over the arguments.

For the structure of the arguments seen when a program is compiled (how many, which keywords, which
nested tuples/lists/dicts), ``make_signature`` generates a function returning a flat tuple: first
the ambient torch state a program depends on: grad mode (``torch.is_grad_enabled()``: it decides
whether the program is compiled through autodiff, and the traced code may branch on it), the
default dtype (the IR reads it at trace time for factories, Python floats and int-to-float
promotion), inference mode, and the autocast state (off, or the devices and dtypes autocast is
enabled for: an entry compiled under ``torch.autocast`` has the autocast transform applied) and
whether autocast's weight cache is on. Then per tensor its shape, dtype, device, requires_grad and
layout, and, with two tensors or more, which of them share memory; per plain value (a number,
string, dtype, device, ``torch.Size``...) its type and (with constant values) its value; per
value-like object (enum members, memory formats, slices and sets of plain values, functions) the
value itself, or the object's identity where its class defines its own equality; tuple subclasses
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
import types
import weakref
from collections.abc import Callable
from typing import Any

import torch

from thunder import tensor_patches
from thunder.errors import JitError
from thunder_ir.codegen import keep_source

__all__ = [
    "PLAIN_TYPES",
    "Same",
    "Signature",
    "WeakSame",
    "alias_pattern",
    "attributes_without_torch_function",
    "is_plain",
    "make_signature",
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
    ptrs = [storage_address(t) for t in tensors]
    if len(set(ptrs)) == len(ptrs):
        return None
    pattern = []
    for i, (p, t) in enumerate(zip(ptrs, tensors)):
        same_object = next(j for j, u in enumerate(tensors) if u is t)
        pattern.append((ptrs.index(p) if p else i, same_object))
    return tuple(pattern)


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


class Signature:
    """A generated key function and the labels of its key's entries."""

    __slots__ = ("fn", "labels", "source")

    def __init__(
        self,
        fn: Callable[[tuple[Any, ...], dict[str, Any]], tuple[Any, ...]],
        labels: list[str],
        source: str,
    ):
        self.fn = fn
        self.labels = labels
        self.source = source

    def changes(self, old: tuple[Any, ...], new: tuple[Any, ...]) -> list[tuple[str, Any, Any]]:
        """The entries that differ between two keys of this signature: (label, old, new)."""
        return [(lb, a, b) for lb, a, b in zip(self.labels, old, new) if a is not b and a != b]

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

    def fresh(self) -> str:
        self.counter += 1
        return f"v{self.counter}"

    def constant(self, value: Any) -> str:
        name = f"K{len(self.constants)}"
        self.constants[name] = value
        return name

    def add(self, expr: str, label: str) -> None:
        self.key.append(expr)
        self.labels.append(label)

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
            self.tensors.append(var)
            # Symbolic sizes: the prologue unpacks and checks the sizes (parameters keep theirs).
            sizes = (
                "ndim" if self.symbolic and not isinstance(value, torch.nn.Parameter) else "shape"
            )
            attrs: tuple[str, ...] = (sizes, "dtype", "device", "requires_grad", "layout")
            if sizes == "ndim":  # (a nested tensor has an ndim, but no sizes to unpack)
                attrs = (*attrs, "is_nested")
            if torch._C._has_torch_function_unary(value):
                # A subclass's __torch_function__ would see (or refuse) thunder's reads.
                read = self.fresh()
                self.body.append(
                    f"  {read} = attributes_without_torch_function({var}, {self.constant(attrs)})"
                )
                for i, attr in enumerate(attrs):
                    self.add(f"{read}[{i}]", f"{label}.{attr}")
            else:
                for attr in attrs:
                    self.add(f"{var}.{attr}", f"{label}.{attr}")
        elif t is functools.partial:
            # Keyed by what it holds, not by which object it is: a partial made per call with
            # the same function and arguments is the same program (the prologue also checks
            # what the call reads from it, as its attributes).
            parts = [self.fresh() for _ in range(3)]
            self.body.append(f"  {', '.join(parts)} = {var}.func, {var}.args, {var}.keywords")
            for name, part in zip(parts, ("func", "args", "keywords"), strict=True):
                self.leaf(name, getattr(value, part), f"{label}.{part}", depth + 1)
        elif isinstance(value, torch.Generator):  # the program draws from this object
            self.add(f"Same({var})", label)
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
        gen.key.append(expr)
        gen.labels.append(label)
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
    if len(gen.tensors) > 1:
        gen.key.append(f"alias_pattern({', '.join(gen.tensors)})")
        gen.labels.append("which tensor arguments share memory")
    if len(gen.scalars) > 1:
        gen.key.append(f"same_objects({', '.join(gen.scalars)})")
        gen.labels.append("which number and string arguments are one object")
    key = ", ".join(gen.key)
    source = (
        "def signature(args, kwargs):\n"
        + "\n".join(gen.body)
        + f"\n  return ({key}{',' if len(gen.key) == 1 else ''})\n"
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
    keep_source(globs["signature"], filename, source)
    return Signature(globs["signature"], gen.labels, source)
