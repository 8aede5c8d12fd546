"""Prologue checks the jit adds beyond the IR's prologue prims (printed as ``thunder_guards``)."""

from __future__ import annotations

import builtins
import contextvars
import itertools
import operator
import types
from collections.abc import Callable, Sequence
from typing import Any

import torch

from thunder_executors.background_compile import is_fx_tracer_patch
from thunder_ir import Symbol
from thunder_ir.codegen import Printer, register_inline
from thunder_ir.prims.prologue import GuardFailure
from thunder_ir.tags import OpTag

__all__ = [
    "HOOK_ATTRIBUTES",
    "NO_CONTEXT_VALUE",
    "BuiltinReads",
    "GenericAbsence",
    "Held",
    "Lookups",
    "ModuleAbsence",
    "ModulesWithoutHooks",
    "NotShadowed",
    "TensorsMetadata",
    "check_builtins",
    "check_contiguity",
    "check_contiguous",
    "check_has_attribute",
    "check_is_not",
    "check_lacks_generic_attribute",
    "check_lacks_item",
    "check_lookups",
    "check_members",
    "check_module_lacks",
    "check_no_hooks",
    "check_no_module_hooks",
    "check_not_shadowed",
    "check_strides",
    "check_tensors",
    "context_var_get",
    "context_var_value",
    "has_context_default",
    "held_object",
    "is_plain_module_member",
    "module_store",
    "torch_tensor_guard",
    "unpack_element",
    "unpack_from_numpy",
    "unpack_generic_attr",
    "unpack_module_attr",
    "unpack_referent",
    "unpack_shape",
]

# nn.Module attributes that ``Module.__call__`` reads to decide whether it takes its fast path.
HOOK_ATTRIBUTES = frozenset(
    {
        "_compiled_call_impl",
        "_backward_hooks",
        "_backward_pre_hooks",
        "_forward_hooks",
        "_forward_pre_hooks",
        "_forward_hooks_with_kwargs",
        "_forward_hooks_always_called",
        "_forward_pre_hooks_with_kwargs",
    }
)


def check_no_module_hooks(module: Any) -> None:
    """Raises GuardFailure when ``module`` has hooks or a ``Module.compile()`` call."""
    d = module.__dict__
    if (
        d["_forward_hooks"]
        or d["_forward_pre_hooks"]
        or d["_backward_hooks"]
        or d["_backward_pre_hooks"]
        or d.get("_compiled_call_impl") is not None
    ):
        raise GuardFailure(f"hooks were registered on the {type(module).__name__} module")


def _no_meta(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("prologue checks are bound directly, not traced")


def _prologue_symbol(impl: Any, *, check: bool = True) -> Symbol:
    """A prologue step printed as ``thunder_guards.<name>`` (a check is never removed by DCE)."""
    tags = (OpTag.PROLOGUE, OpTag.DONT_DCE) if check else (OpTag.PROLOGUE,)
    name = impl.__name__.lstrip("_")
    return Symbol(name, _no_meta, module="thunder_guards", is_prim=True, tags=tags, impl=impl)


_HOOK_DICTS = operator.itemgetter(
    "_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks"
)


class ModulesWithoutHooks:
    """The check that no module of the program has hooks or a ``Module.compile()`` call, run
    for every module on every call (hundreds in a large model), so its loops run in C.

    The hook dicts are tested on every call (four truth tests per module): a hook can be put
    into one without torch's API (``m._forward_hooks[k] = fn``, a new dict assigned, hooks
    copied from another module), which no counter of registered hooks sees."""

    def __init__(self, methods: Sequence[Sequence[str]] = ()) -> None:
        # Per module (in the order checked), the methods the program found on its class
        # (forward, _call_impl): the module may not hold one in its own __dict__ (``m.forward =
        # other`` after compiling). Another module may hold its own (a forward set before).
        self.methods = tuple(tuple(names) for names in methods)
        positions: dict[str, list[int]] = {}
        for i, names in enumerate(self.methods):
            for name in names:
                positions.setdefault(name, []).append(i)
        # Each name with the getter of the dicts of the modules it applies to (one C call).
        self._by_name = [
            (name, operator.itemgetter(*where), where) for name, where in positions.items()
        ]

    def check(self, *modules: Any) -> None:
        dicts = tuple(map(_own_dict, modules))
        if any(map(dict.__contains__, dicts, itertools.repeat("_compiled_call_impl"))):
            for module in modules:  # usually None again (after pickling); the exact test
                check_no_module_hooks(module)
        for name, pick, where in self._by_name:
            chosen = pick(dicts) if len(where) > 1 else (pick(dicts),)
            if any(map(dict.__contains__, chosen, itertools.repeat(name))):
                owner = next(modules[i] for i in where if name in dicts[i])
                raise GuardFailure(f"{name!r} is now set on the {type(owner).__name__} itself")
        if any(map(any, map(_HOOK_DICTS, dicts))):
            for module in modules:
                check_no_module_hooks(module)


_own_dict = operator.attrgetter("__dict__")  # vars(), without its argument checks
_keys_disjoint: Callable[[Any, Any], bool] = type({}.keys()).isdisjoint


def _check_no_hooks(checker: ModulesWithoutHooks, *modules: Any) -> None:
    checker.check(*modules)


# The same check of many modules in one call.
check_no_hooks = _prologue_symbol(_check_no_hooks)


def _check_has_attribute(obj: Any, name: str, expected: bool) -> None:
    if hasattr(obj, name) is not expected:
        raise GuardFailure(
            f"expected the attribute {name!r} to be {'set' if expected else 'unset'}"
        )


# hasattr(obj, name) / getattr(obj, name, default) in the program: whether the attribute exists.
check_has_attribute = _prologue_symbol(_check_has_attribute)


class ModuleAbsence:
    """``hasattr(module, name)`` is False, decided from dicts: ``hasattr`` on a module raises
    and catches two AttributeErrors (the ordinary lookup's, then ``nn.Module.__getattr__``'s), a
    few microseconds a call. For a module of ``cls`` (whose lookup is the ordinary one, then
    ``nn.Module.__getattr__``): the name is in no class of the MRO, not in the instance dict and
    not in the parameter, buffer or submodule dicts. Anything else takes ``hasattr``."""

    def __init__(self, cls: type, name: str) -> None:
        self.cls = cls
        self.name = name
        self.mro = cls.__mro__
        self.class_dicts = tuple(vars(k) for k in self.mro)

    @staticmethod
    def applies_to(obj: Any) -> bool:
        cls = type(obj)
        return (
            isinstance(obj, torch.nn.Module)
            and cls.__getattribute__ is _OBJECT_GETATTRIBUTE  # type: ignore[comparison-overlap]
            and cls.__getattr__ is _MODULE_GETATTR
        )

    def lacks(self, obj: Any) -> bool:
        cls, name = self.cls, self.name
        if (
            type(obj) is cls
            and cls.__mro__ is self.mro
            and cls.__getattr__ is _MODULE_GETATTR  # type: ignore[attr-defined]
            and cls.__getattribute__ is _OBJECT_GETATTRIBUTE  # type: ignore[comparison-overlap]
            and not any(map(operator.contains, self.class_dicts, itertools.repeat(name)))
        ):
            d = obj.__dict__  # then nn.Module.__getattr__'s own tests
            return not (
                name in d
                or ("_parameters" in d and name in d["_parameters"])
                or ("_buffers" in d and name in d["_buffers"])
                or ("_modules" in d and name in d["_modules"])
            )
        return not hasattr(obj, name)


_MODULE_GETATTR = torch.nn.Module.__getattr__
_OBJECT_GETATTRIBUTE = object.__getattribute__


def _unpack_element(s: Any, i: int) -> Any:
    return tuple(s)[i]


# The i-th element of a set argument in its iteration order (its members are checked first).
unpack_element = _prologue_symbol(_unpack_element)


def _unpack_referent(ref: Any) -> Any:
    target = ref()
    if target is None:
        raise GuardFailure("expected the object of a weakref, which is gone")
    return target


# The object a weakref.ref refers to (``ref()``).
unpack_referent = _prologue_symbol(_unpack_referent)


def _check_members(s: Any, members: tuple[Any, ...]) -> None:
    if len(s) != len(members) or any(a is not b for a, b in zip(s, members)):
        raise GuardFailure("expected the same objects in the set, in the same order")


# A set argument holding objects: the same objects, iterated in the same order.
check_members = _prologue_symbol(_check_members)


def _check_strides(x: Any, strides: tuple[int, ...]) -> None:
    if x.stride() != strides:
        raise GuardFailure(f"expected the strides {strides}, got {x.stride()}")


# An input laid out as when a view of it inside a fusion region was checked as eager runs it.
check_strides = _prologue_symbol(_check_strides)


def _check_contiguity(x: Any, memory_format: str, expected: bool) -> None:
    if x.is_contiguous(memory_format=getattr(torch, memory_format)) is not expected:
        raise GuardFailure(f"expected is_contiguous(memory_format={memory_format}) {expected}")


# ``x.is_contiguous(memory_format=...)`` of an input, answered while tracing: the same answer.
check_contiguity = _prologue_symbol(_check_contiguity)


class Held:
    """An outside object the prologue holds itself, for an object the program reached without a
    path (a closure cell or the defaults of a method looked up on its class, whose function is
    pinned by that lookup): ``held_object(h)`` is it on every call."""

    __slots__ = ("label", "value")

    def __init__(self, value: Any, label: str) -> None:
        self.value = value
        self.label = label

    def __repr__(self) -> str:
        return f"<{self.label}>"

    def __deepcopy__(self, memo: Any) -> Held:
        return self  # the object the copies' programs share


def held_object(held: Held) -> Any:
    return held.value


class _NoContextValue:
    """What ``context_var_value`` answers for a variable the calling context holds no value of."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<no context value>"

    def __reduce__(self) -> str:
        return "NO_CONTEXT_VALUE"

    def __deepcopy__(self, memo: Any) -> _NoContextValue:
        return self


NO_CONTEXT_VALUE = _NoContextValue()


def context_var_value(held: Held) -> Any:
    """The value the held ``contextvars.ContextVar`` has in the calling context, or
    ``NO_CONTEXT_VALUE`` (then ``get`` answers a default): asked on every call, so a call made
    in a context holding another value takes another program."""
    return held.value.get(NO_CONTEXT_VALUE)


def context_var_get(held: Held) -> Any:
    """``var.get()`` of the held ``contextvars.ContextVar``, one made with a default: its value
    in the calling context, else that default."""
    return held.value.get()


def has_context_default(var: contextvars.ContextVar[Any]) -> bool:
    """Whether ``var`` was made with a default (fixed for its life)."""
    try:
        contextvars.Context().run(var.get)  # (an empty context: no value, only a default)
    except LookupError:
        return False
    return True


def _check_contiguous(x: Any) -> None:
    if not x.is_contiguous():
        raise GuardFailure(f"expected a contiguous tensor, got the strides {x.stride()}")


# An input laid out contiguous, as when the execution trace chose its convolutions' layouts.
check_contiguous = _prologue_symbol(_check_contiguous)


def _check_is_not(x: Any, other: Any) -> None:
    if x is other:
        raise GuardFailure("expected two different objects, got one")


# ``a is b`` false in the program, for two objects found outside it.
check_is_not = _prologue_symbol(_check_is_not)


def _check_module_lacks(absence: ModuleAbsence, module: Any) -> None:
    if not absence.lacks(module):
        raise GuardFailure(f"expected the attribute {absence.name!r} to be unset")


# hasattr(module, name) false in the program, checked without raising.
check_module_lacks = _prologue_symbol(_check_module_lacks)


def _check_lacks_item(container: Any, key: Any) -> None:
    if key in container:
        raise GuardFailure(f"expected no item {key!r}")


# ``m[key]`` raised in the program (``os.environ.get(k, default)``): the key is still absent.
check_lacks_item = _prologue_symbol(_check_lacks_item)


class BuiltinReads:
    """The builtins a program read, per module whose globals were looked in first: each module
    still lacks those names and each builtin is the same object (a module that later defines
    ``max``, or a patched ``builtins.max``, recompiles). One call checks them all."""

    def __init__(self, reads: Sequence[tuple[str, dict[str, Any]]]) -> None:
        self.modules = tuple(module for module, _ in reads)
        self.names = tuple(frozenset(names) for _, names in reads)
        used = {name: value for _, names in reads for name, value in names.items()}
        self.used = used  # name -> the builtin the program called
        self._get = operator.itemgetter(*used, "__name__")  # a tuple even for one name
        self._expected = (*used.values(), builtins.__name__)

    def check(self, *globals_dicts: dict[str, Any]) -> None:
        if not all(map(_keys_disjoint, map(dict.keys, globals_dicts), self.names)):
            for module, names, globs in zip(self.modules, self.names, globals_dicts):
                if not globs.keys().isdisjoint(names):
                    defined = sorted(set(names) & globs.keys())
                    raise GuardFailure(f"{module} now defines {', '.join(defined)}")
        if any(map(operator.is_not, self._get(vars(builtins)), self._expected)):
            raise GuardFailure("a builtin the program calls was replaced")


def _check_builtins(reads: BuiltinReads, *globals_dicts: dict[str, Any]) -> None:
    reads.check(*globals_dicts)


check_builtins = _prologue_symbol(_check_builtins)


class PatchedByFxTracer(GuardFailure):
    """A method lookup met torch.fx's tracer's stand-ins for ``nn.Module.__call__`` or
    ``__getattr__``, in place for the whole process while a compile on another thread traces:
    nothing of the program changed, and the call is tried again once the tracer is done."""


class RewrappedByTorch(GuardFailure):
    """A function or method of torch's was replaced by a wrapper of the one the program was
    traced with: torch does so once, for the whole process, on a lazy import of its internals
    (``import torch._dynamo`` wraps ``torch.manual_seed``, which a fake run while tracing
    triggers; a first ``torch.compile`` wraps ``torch.jit.trace``), possibly on another thread.
    Nothing of the program changed: the call is traced again."""


def _belongs_to_torch(holder: Any) -> bool:
    name = holder.__name__ if isinstance(holder, types.ModuleType) else None
    if name is None and isinstance(holder, type):
        name = holder.__module__
    return isinstance(name, str) and (name == "torch" or name.startswith("torch."))


def _wraps(found: Any, expected: Any) -> bool:
    for _ in range(8):  # a chain of functools.wraps wrappers
        found = getattr(found, "__wrapped__", None)
        if found is None:
            return False
        if found is expected:
            return True
    return False


ABSENT_FROM_CLASS: Any = object()  # what StaticClassLookup finds for a name no class holds


def class_holding(cls: type, name: str) -> Any:
    """What the MRO of ``cls`` holds at ``name``, or ``ABSENT_FROM_CLASS`` (a stored None is
    found as None)."""
    return next((vars(k)[name] for k in cls.__mro__ if name in vars(k)), ABSENT_FROM_CLASS)


class StaticClassLookup:
    """A holder for ``Lookups``: ``getattr(holder, name)`` is what the MRO of ``cls`` holds at
    ``name`` (the descriptor itself), without running a Python ``__get__``
    (``ABSENT_FROM_CLASS`` where no class holds it)."""

    __slots__ = ("cls",)

    def __init__(self, cls: type) -> None:
        self.cls = cls

    def __getattribute__(self, name: str) -> Any:
        return class_holding(object.__getattribute__(self, "cls"), name)

    def __repr__(self) -> str:
        return f"<class {object.__getattribute__(self, 'cls').__qualname__}>"


class Lookups:
    """What the program ran that an identity or type guard does not pin down, checked to be
    unchanged: the methods it looked up on classes (``self.forward``, ``self.helper(x)``,
    ``super().forward(x)``, ``x[k]``'s ``__getitem__``) and the code of the functions it called
    from outside (``f.__code__``). A guarded type is the same class object and a guarded function
    the same function object, but a method can be replaced on the class and a function's code
    reassigned after compiling; the program would then run the old code.

    Each lookup is ``getattr(holder, name)`` with ``holder`` a class, a ``super(cls, start)``
    object (which looks along ``start``'s MRO on every read) or a function; a classmethod found
    on a class is a new bound method each time, so it is compared by its function."""

    def __init__(self, lookups: Sequence[tuple[Any, str, Any]]) -> None:
        plain = [(h, n, e) for h, n, e in lookups if type(e) is not types.MethodType]
        self.holders = tuple(h for h, _, _ in plain)
        self.names = tuple(n for _, n, _ in plain)
        self.expected = tuple(e for _, _, e in plain)
        self.bound = tuple((h, n, e) for h, n, e in lookups if type(e) is types.MethodType)

    def check(self) -> None:
        if any(map(operator.is_not, map(getattr, self.holders, self.names), self.expected)):
            for holder, name, expected in zip(self.holders, self.names, self.expected):
                found = getattr(holder, name, None)
                if found is expected:
                    continue
                if is_fx_tracer_patch(found) or is_fx_tracer_patch(expected):
                    raise PatchedByFxTracer(
                        f"{name!r} of {holder!r} is torch.fx's tracer's while it traces"
                    )
                if _belongs_to_torch(holder) and _wraps(found, expected):
                    raise RewrappedByTorch(f"{name!r} of {holder!r} was wrapped by torch")
                raise GuardFailure(f"{name!r} of {holder!r} was replaced")
        for holder, name, expected in self.bound:
            found = getattr(holder, name, None)
            if (
                type(found) is not types.MethodType
                or found.__func__ is not expected.__func__
                or found.__self__ is not expected.__self__
            ):
                raise GuardFailure(f"{name!r} of {holder!r} was replaced")


def _check_lookups(lookups: Lookups) -> None:
    lookups.check()


check_lookups = _prologue_symbol(_check_lookups)


class NotShadowed:
    """Which objects (other than modules, which ``ModulesWithoutHooks`` checks) must not hold
    which method names in their own ``__dict__``: a method found on an object's class, shadowed
    by ``obj.get = other`` after compiling. A few objects per program, so a plain loop."""

    def __init__(self, names: Sequence[Sequence[str]]) -> None:
        self.names = tuple(tuple(n) for n in names)

    def check(self, *objs: Any) -> None:
        for obj, names in zip(objs, self.names):
            # read generically: vars() would run a class's own __getattribute__ (a Python call
            # per object for library configs)
            if not object.__getattribute__(obj, "__dict__").keys().isdisjoint(names):
                raise GuardFailure(f"a method of the {type(obj).__name__} is now set on it")


def _check_not_shadowed(shadowing: NotShadowed, *objs: Any) -> None:
    shadowing.check(*objs)


# The methods the program found on objects' classes are not shadowed by attributes of the objects
# (``m.forward = other`` after compiling).
check_not_shadowed = _prologue_symbol(_check_not_shadowed)


# -- reading a module's parameters, buffers and submodules --------------------------------------


def is_plain_module_member(module: Any, name: str) -> bool:
    """Whether ``module.<name>`` is answered by ``nn.Module.__getattr__`` from the parameter,
    buffer or submodule dicts: the type neither customizes attribute lookup nor defines ``name``,
    and the instance dict does not hold it. The prologue then reads the dicts directly."""
    if not ModuleAbsence.applies_to(module):  # the ordinary lookup, then Module.__getattr__
        return False
    if any(name in vars(c) for c in type(module).__mro__):
        return False
    d = module.__dict__
    if name in d:
        return False
    return any(name in d.get(store, ()) for store in ("_parameters", "_buffers", "_modules"))


def _unpack_module_attr(
    module: Any, name: str, store: str | None = None, own: dict[str, Any] | None = None
) -> Any:
    # nn.Module.__getattr__'s own order, without the failed ordinary lookup before it; anything
    # unusual (the name now in the instance dict, a module without the dicts) takes getattr.
    # (``store``, the dict the name was in when the prologue was built, and ``own``, the
    # module's __dict__ read before, are for the inline form.)
    d = module.__dict__
    if name not in d:
        try:
            members = d["_parameters"]
            if name in members:
                return members[name]
            members = d["_buffers"]
            if name in members:
                return members[name]
            members = d["_modules"]
            if name in members:
                return members[name]
        except KeyError:
            pass
    try:
        return getattr(module, name)
    except AttributeError:
        raise GuardFailure(f"missing attribute {name!r}") from None


unpack_module_attr = _prologue_symbol(_unpack_module_attr, check=False)

MODULE_STORES = ("_parameters", "_buffers", "_modules")


def module_store(module: Any, name: str) -> str | None:
    """Which of the module's parameter, buffer and submodule dicts holds ``name`` (the first,
    in ``nn.Module.__getattr__``'s order)."""
    d = module.__dict__
    return next((s for s in MODULE_STORES if name in d.get(s, ())), None)


def _inline_unpack_module_attr(bsym: Any, p: Printer) -> str | None:
    """``x = m.__dict__['_modules']['name']`` while the instance dict does not shadow it; any
    other case through the function (a store that lacks the name raises KeyError: a miss)."""
    module, name, *rest = bsym.args
    store = rest[0] if rest else None
    if store not in MODULE_STORES:
        return None
    m, n = p.value(module), p.value(name)
    d = p.value(rest[1]) if len(rest) > 1 and rest[1] is not None else f"{m}.__dict__"
    call = f"{p.symbol(bsym.sym)}({m}, {n})"
    return f"{bsym.output.name} = {d}[{store!r}][{n}] if {n} not in {d} else {call}"


register_inline(unpack_module_attr, _inline_unpack_module_attr)


# -- the generic lookup a class's own __getattribute__ makes -------------------------------------


def _unpack_generic_attr(obj: Any, name: str) -> Any:
    try:
        return object.__getattribute__(obj, name)
    except AttributeError:
        raise GuardFailure(f"missing attribute {name!r}") from None


# ``object.__getattribute__(obj, name)``: what ``super().__getattribute__(name)`` in the class's
# own ``__getattribute__`` found (not ``obj.name``, which would run that method again).
unpack_generic_attr = _prologue_symbol(_unpack_generic_attr, check=False)


def _inline_unpack_generic_attr(bsym: Any, p: Printer) -> str:
    obj, name = bsym.args
    return f"{bsym.output.name} = object.__getattribute__({p.value(obj)}, {p.value(name)})"


register_inline(unpack_generic_attr, _inline_unpack_generic_attr)


class GenericAbsence:
    """Where the generic lookup of some names looks, for an object of one class: the object's
    own ``__dict__`` and the ``__dict__`` of each class of its MRO (live views, so a class that
    gains a name later is seen). All the names one object lacks are checked in one call."""

    def __init__(self, cls: type, names: Sequence[str]) -> None:
        self.names = tuple(names)
        self._names = frozenset(names)
        self.class_keys = tuple(vars(k).keys() for k in cls.__mro__)  # live views

    def check(self, obj: Any) -> None:
        names = self._names
        try:
            own = object.__getattribute__(obj, "__dict__")
        except AttributeError:  # __slots__ only: slots are descriptors of the classes
            own = {}
        if not own.keys().isdisjoint(names) or not all(
            map(_keys_disjoint, self.class_keys, itertools.repeat(names))
        ):
            raise GuardFailure(f"expected none of the attributes {', '.join(names)}")


def _check_lacks_generic_attribute(absence: GenericAbsence, obj: Any) -> None:
    absence.check(obj)


# ``object.__getattribute__(obj, name)`` raised AttributeError in the class's own
# ``__getattribute__`` (``hasattr(config, 'x')`` false): still nowhere the lookup looks, found
# without raising.
check_lacks_generic_attribute = _prologue_symbol(_check_lacks_generic_attribute)


# -- symbolic sizes (cache="symbolic values") -----------------------------------------------------


def _unpack_shape(tensor: Any, pattern: tuple[int | None, ...]) -> tuple[int, ...]:
    shape = getattr(tensor, "shape", None)
    if shape is None or len(shape) != len(pattern):
        raise GuardFailure(f"expected {len(pattern)} dimensions, got {_shape_text(shape)}")
    for s, p in zip(shape, pattern):
        if p is not None and s != p:
            raise GuardFailure(
                f"expected the shape {_shape_text(pattern)}, got {_shape_text(shape)}"
            )
    return tuple(s for s, p in zip(shape, pattern) if p is None)


def _shape_text(shape: Any) -> str:
    if shape is None:
        return "no tensor"
    return "[" + ", ".join("*" if s is None else str(s) for s in shape) + "]"


# The symbolic sizes of a tensor (``pattern``: the constant sizes, None where symbolic).
unpack_shape = _prologue_symbol(_unpack_shape)


def _inline_unpack_shape(bsym: Any, p: Printer) -> str:
    tensor, pattern = bsym.args
    names = iter(o.name for o in bsym.output)
    targets = ", ".join("_" if d is not None else next(names) for d in pattern)
    x = p.value(tensor)
    fixed = [f"{x}.shape[{i}] == {d}" for i, d in enumerate(pattern) if d is not None]
    if not fixed:
        return f"({targets},) = {x}.shape"
    return (
        f"({targets},) = {x}.shape if {' and '.join(fixed)} else "
        f"{p.symbol(bsym.sym)}({x}, {pattern!r})"
    )


register_inline(unpack_shape, _inline_unpack_shape)


# -- the metadata of the tensors that are not arguments ------------------------------------------


class TensorsMetadata:
    """The expected metadata of the tensors a prologue reads besides the arguments (parameters,
    buffers, tensors in globals): shape, dtype, device and requires_grad, as the trace relied on.
    ``check(*tensors)`` tests them all in one call, with torch's C++ tensor guard where torch
    has one; it also requires the same tensor type and dispatch keys (a plain tensor where a
    Parameter was, or a call under ``inference_mode``, recompiles). Strides are not checked: the
    computation does not depend on them."""

    def __init__(
        self,
        names: Sequence[str],
        tensors: Sequence[torch.Tensor],
        shapes: Sequence[tuple[int | None, ...]] | None = None,
    ) -> None:
        self.names = tuple(names)
        # The sizes checked: None for a symbolic size (unpacked and constrained elsewhere).
        shapes = shapes if shapes is not None else [tuple(t.shape) for t in tensors]
        self.expected = tuple(
            (shape, t.dtype, t.device, t.requires_grad) for shape, t in zip(shapes, tensors)
        )
        fast = torch_tensor_guard(tensors, shapes)
        self.check = fast.check if fast is not None else self._matches

    def _matches(self, *tensors: Any) -> bool:
        return self.first_mismatch(tensors) is None

    def first_mismatch(self, tensors: Sequence[Any]) -> str | None:
        """What differs, for the first tensor whose metadata is not the expected one."""
        for name, t, (shape, dtype, device, requires_grad) in zip(
            self.names, tensors, self.expected
        ):
            if (
                not isinstance(t, torch.Tensor)
                or len(t.shape) != len(shape)
                or any(e is not None and s != e for s, e in zip(t.shape, shape))
                or t.dtype is not dtype
                or t.requires_grad is not requires_grad
                or t.device != device
            ):
                got = (
                    f"{t.device} {t.dtype}{_shape_text(tuple(t.shape))} "
                    f"requires_grad={t.requires_grad}"
                    if isinstance(t, torch.Tensor)
                    else type(t).__name__
                )
                return (
                    f"tensor metadata of {name} changed: expected {device} {dtype}"
                    f"{_shape_text(shape)} requires_grad={requires_grad}, got {got}"
                )
        return None

    def only_sizes_differ(self, tensors: Sequence[Any]) -> bool:
        """Whether the tensors differ from the expected ones in their sizes only."""
        return all(
            isinstance(t, torch.Tensor)
            and len(t.shape) == len(shape)
            and t.dtype is dtype
            and t.device == device
            and t.requires_grad is requires_grad
            for t, (shape, dtype, device, requires_grad) in zip(tensors, self.expected)
        )

    def resized(self, tensors: Sequence[Any]) -> tuple[str, ...]:
        """The names of the tensors that differ from the expected ones in their sizes alone."""
        return tuple(
            name
            for name, t, (shape, dtype, device, requires_grad) in zip(
                self.names, tensors, self.expected
            )
            if isinstance(t, torch.Tensor)
            and len(t.shape) == len(shape)
            and any(e is not None and s != e for s, e in zip(t.shape, shape))
            and t.dtype is dtype
            and t.device == device
            and t.requires_grad is requires_grad
        )


def torch_tensor_guard(
    tensors: Sequence[torch.Tensor], shapes: Sequence[tuple[int | None, ...]]
) -> Any:
    """torch's own guard for these tensors (sizes checked where not None, strides not), or
    None where this torch has none."""
    try:
        from torch._C._dynamo import guards

        make: Any = guards.TensorGuards  # its stub types the per-tensor lists as flat
        return make(
            *tensors,
            dynamic_dims_sizes=[list(shape) for shape in shapes],
            dynamic_dims_strides=[[None] * t.ndim for t in tensors],
        )
    except Exception:  # a torch without it, or with another signature
        return None


def _check_tensors(metadata: TensorsMetadata, *tensors: Any) -> None:
    if metadata.check(*tensors):
        return
    what = metadata.first_mismatch(tensors)
    raise GuardFailure(
        what
        or "a tensor's type or dispatch keys changed (a Parameter replaced by a tensor, or the "
        "call runs under inference_mode where the program was compiled outside it)",
        sizes_only=what is not None and metadata.only_sizes_differ(tensors),
        resized=metadata.resized(tensors),
    )


check_tensors = _prologue_symbol(_check_tensors)


def _unpack_from_numpy(array: Any) -> torch.Tensor:
    try:
        return torch.from_numpy(array)
    except TypeError as e:  # no longer an array, or of a dtype torch has not
        raise GuardFailure(str(e)) from None


# The tensor sharing an outside numpy array's memory (torch.from_numpy in the program).
unpack_from_numpy = _prologue_symbol(_unpack_from_numpy, check=False)


def _unpack_query(query: Any, *args: Any) -> Any:
    return query(*args)


# What a query of the ambient torch state answers for this call
# (``torch._C._len_torch_dispatch_stack()``; see binding.regions).
unpack_query = _prologue_symbol(_unpack_query, check=False)
