"""The policy for calls the interpreter does not enter (C functions, torch callables without an
IR op): run, record as a mutation, or refuse with a clear error; and the values crossing from the
IR back into user code (torch dtypes, devices, ``torch.Size``)."""

from __future__ import annotations

import _thread
import collections
import contextvars
import copy
import functools
import inspect
import itertools
import logging
import threading
import types
import weakref
from collections.abc import Callable
from typing import Any

import torch

from thunder import tensor_patches
from thunder.access import REFERENT, Access
from thunder.binding.fallback import call_torch_callable, mirrored_call
from thunder.binding.rng import refuse_generator_state, refuse_generators
from thunder.binding.state import (
    _CONTAINER_MUTATORS,
    _HEAPTYPE,
    _MISSING,
    _RETURNS_CONTENTS,
    _SCALAR_TYPES,
    Guard,
    Write,
    torch_value,
)
from thunder.binding.warning_calls import LogReplay, log_site
from thunder.binding.writes import (
    _PARTIAL_ON_FAILURE,
    WritesMixin,
    same_contents,
)
from thunder.errors import (
    ImpureCallError,
    RunsEagerly,
    UnsupportedOperationError,
    UnsupportedSideEffectError,
)
from thunder.lookasides import (
    SymbolicSize,
    check_str_formatting,
    is_torch_callable,
    query_is_allowed,
)
from thunder.opaque import assumed_constant, entropy_reason, impure_reason
from thunder_interp import Callbacks, compares_by_identity, opaque
from thunder_ir import (
    BoundSymbol,
    NumberProxy,
    OpTag,
    Proxy,
    Symbol,
    TensorProxy,
    Trace,
    get_tracectx,
)
from thunder_ir.aliasing import alias_info
from thunder_ir.dtypes import from_torch_dtype
from thunder_ir.proxies import tensor_dir
from thunder_ir.pytree import tree_iter, tree_map

# Layout queries of a tensor the call was given, answered from it (``_InputLayout``).
_LAYOUT_QUERIES = frozenset({"stride", "is_contiguous"})


@opaque
class _InputLayout:
    """``x.stride(...)`` / ``x.is_contiguous(...)`` of a tensor the call was given: eager's answer,
    read from the caller's tensor (no op of a program changes an input's layout: ``resize_``,
    ``as_strided_`` and the like run split or eagerly), guarded by the prologue, so a later call
    with another layout compiles again. A tensor the program computed has no known layout: torch
    answers there (the call runs split)."""

    def __init__(
        self, name: str, tensor: torch.Tensor, access: Access, guards: dict[Access, Guard]
    ) -> None:
        self.name, self.tensor, self.access, self.guards = name, tensor, access, guards

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        answer = getattr(self.tensor, self.name)(*args, **kwargs)  # eager's errors too
        if self.name == "stride":
            strides = tuple(self.tensor.stride())
            key = self.access.attr("<strides>")
            self.guards.setdefault(key, Guard(self.access, "strides", strides))
            return answer
        memory_format = kwargs.get("memory_format", args[0] if args else torch.contiguous_format)
        fmt = str(memory_format).removeprefix("torch.")
        key = self.access.attr(f"<is_contiguous {fmt}>")
        self.guards.setdefault(key, Guard(self.access, "contiguity", (fmt, bool(answer))))
        return answer


# The wrappers of the static table's symbols, made once: a trace's table holds ~1,250 of them,
# and making them anew took most of a small function's first call.
_TORCH_TYPED: dict[tuple[Symbol, Any], Callable[..., Any]] = {}


def torch_typed_call(sym: Symbol, fn: Any = None) -> Callable[..., Any]:
    """``_returning_torch_types(sym, fn)``, the same object for every trace (for the symbols of
    the static lookaside table, which live as long as the process)."""
    key = (sym, fn)
    call = _TORCH_TYPED.get(key)
    if call is None:
        call = _TORCH_TYPED[key] = _returning_torch_types(sym, fn)
    return call


def _returning_torch_types(sym: Symbol, fn: Any = None) -> Callable[..., Any]:
    @functools.wraps(sym)
    def call(*args: Any, **kwargs: Any) -> Any:
        _refuse_torch_function_overrides(fn if fn is not None else sym, args, kwargs)
        if fn is not None:
            _refuse_spread_list(fn, sym, args)
            args, kwargs = _without_stacklevel(fn, args, kwargs)
            _refuse_numbers_only(fn, sym, args, kwargs)
            args, kwargs = _numbers_input_as_tensor(fn, args, kwargs)
        out = sym(*args, **kwargs) if fn is None else mirrored_call(fn, sym, args, kwargs)
        return _written_tensor_itself(out) if isinstance(out, TensorProxy) else torch_value(out)

    return call


# The torch functions whose ``input`` and ``other`` may both be numbers: torch makes ``input`` a
# 0-dim tensor and returns one (``torch.div(7, 2, rounding_mode="trunc")`` is ``tensor(3)``).
_NUMBERS_MADE_TENSORS = frozenset(
    {
        torch.add,
        torch.sub,
        torch.subtract,
        torch.mul,
        torch.multiply,
        torch.div,
        torch.divide,
        torch.true_divide,
        torch.floor_divide,
    }
)


def _numbers_input_as_tensor(
    fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The call of ``fn`` with a number ``input`` made the 0-dim tensor torch makes of it, where
    ``other`` is a number too (the op on two numbers would compute a number)."""
    if fn not in _NUMBERS_MADE_TENSORS:
        return args, kwargs
    from thunder_ir import ops as ltorch
    from thunder_ir.ops._helpers import is_number

    a = args[0] if args else kwargs.get("input")
    b = args[1] if len(args) > 1 else kwargs.get("other")
    if not (is_number(a) and is_number(b)):
        return args, kwargs
    made = ltorch.tensor(a)
    if args:
        return (made, *args[1:]), kwargs
    return args, {**kwargs, "input": made}


def _refuse_numbers_only(
    fn: Any, sym: Symbol, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    """``torch.exp(7)``, ``torch.remainder(5, 3)``: an elementwise torch function given numbers
    and no tensor. The op computes a number; eager's argument parser raises TypeError for all
    but the few taking two numbers (``_NUMBERS_MADE_TENSORS``). Which it does depends only on
    the arguments' types, so torch is asked with this call's values, and its error is raised."""
    if fn in _NUMBERS_MADE_TENSORS or OpTag.ELEMENTWISE not in getattr(sym, "tags", ()):
        return
    if _is_tensor_method(fn) or any(isinstance(a, TensorProxy) for a in tree_iter((args, kwargs))):
        return

    def concrete(a: Any) -> Any:
        return a.value if isinstance(a, NumberProxy) else a

    try:
        fn(*tree_map(concrete, args), **tree_map(concrete, kwargs))
    except TypeError as e:
        raise TypeError(*e.args) from None


def _refuse_spread_list(fn: Any, sym: Symbol, args: tuple[Any, ...]) -> None:
    """``torch.reshape(x, 6, 4)``: one op serves ``torch.f`` and ``Tensor.f`` and takes the sizes
    spread (``x.reshape(6, 4)``), which torch's argument parser allows only where the list is the
    sole positional argument (a method's, or a factory's): the function form raises eager's
    TypeError."""
    if len(args) <= 2 or not _spreads_a_list_after_tensor(sym) or _is_tensor_method(fn):
        return
    if not all(isinstance(a, (int, NumberProxy)) for a in args[1:]):
        return  # not sizes: einsum's operands (``einsum("ij,jk", a, b)``), which it takes spread
    name = getattr(fn, "__name__", None)
    most = _most_positional_arguments(name) if isinstance(name, str) else None
    if most is not None and len(args) > most:
        raise TypeError(f"{name}() takes {most} positional arguments but {len(args)} were given")


@functools.cache
def _spreads_a_list_after_tensor(sym: Symbol) -> bool:
    """Whether the op's decomposition is ``f(a, *sizes)`` (reshape, permute, tile...)."""
    if sym.meta is None:
        return False
    try:
        params = list(inspect.signature(inspect.unwrap(sym.meta)).parameters.values())
    except (TypeError, ValueError):
        return False
    return (
        len(params) >= 2
        and params[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
        and params[1].kind is inspect.Parameter.VAR_POSITIONAL
    )


def _is_tensor_method(fn: Any) -> bool:
    return getattr(fn, "__objclass__", None) is torch._C.TensorBase or isinstance(
        getattr(fn, "__self__", None), torch.Tensor
    )


@functools.cache
def _most_positional_arguments(name: str) -> int | None:
    """The most arguments any aten schema of ``name`` takes by position; None if it has none."""
    try:
        schemas = torch._C._jit_get_schemas_for_operator(f"aten::{name}")
    except RuntimeError:
        return None
    counts = [sum(not a.kwarg_only for a in s.arguments) for s in schemas]
    return max(counts, default=None)


def _without_stacklevel(
    fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``F.softmax(x, 0, torch.float64)``: the third slot of F.softmax, log_softmax and softmin is
    ``_stacklevel``, which eager ignores, where the op (also ``torch.softmax(x, dim, dtype)``)
    takes a dtype there. The call without it, the arguments after it passed by name."""
    if not inspect.isfunction(fn):
        return args, kwargs
    names = list(inspect.signature(fn).parameters)
    if "_stacklevel" not in names:
        return args, kwargs
    inspect.signature(fn).bind(*args, **kwargs)  # eager's TypeError where the call does not bind
    at = names.index("_stacklevel")
    if len(args) <= at and "_stacklevel" not in kwargs:
        return args, kwargs
    after = dict(zip(names[at + 1 :], args[at + 1 :], strict=False))
    rest = {k: v for k, v in kwargs.items() if k != "_stacklevel"}
    return args[:at], {**rest, **after}


def _written_tensor_itself(out: TensorProxy) -> TensorProxy:
    """An in-place op returns the tensor it wrote, also without grad (``p.zero_()`` under
    ``torch.no_grad()``, ``nn.init.zeros_(p)``): that tensor, which keeps its own flag, not the
    ``stop_gradient`` of it a no-grad region records for what ops compute."""
    trace = get_tracectx()
    if trace is None or trace.grad_enabled or out.requires_grad:
        return out
    if len(trace.scopes[-1]) < 2:
        return out
    written, stop = trace.scopes[-1][-2:]  # the write, then its stop_gradient
    if (
        stop.output is not out
        or not stop.has_tag(OpTag.STOPS_GRADIENT)
        or not written.has_tag(OpTag.IN_PLACE)
        or not isinstance(written.output, TensorProxy)
        or not stop.args
        or stop.args[0] is not written.output
    ):
        return out
    return written.output


def _refuse_torch_function_overrides(fn: Any, args: Any, kwargs: Any) -> None:
    """An argument other than a tensor with a ``__torch_function__`` of its own answers the
    torch call itself in eager (``torch.overrides``): the call runs eagerly."""
    for a in tree_iter((args, kwargs)):
        if isinstance(a, (Proxy, torch.Tensor, torch.overrides.TorchFunctionMode, *_SCALAR_TYPES)):
            continue  # (a mode is pushed and popped by torch calls, not answering them)
        if getattr(type(a), "__torch_function__", None) is not None:
            raise RunsEagerly(
                f"passes a {type(a).__qualname__}, whose __torch_function__ answers the call, "
                f"to {_callable_name(fn)}"
            )


def _refuse_torch_function_subclass(t: torch.Tensor) -> None:
    """A tensor subclass with a ``__torch_function__`` of its own (or torch.Tensor's, which
    makes every result of a torch call an instance of the subclass) decides what the program's
    torch calls return: the call runs eagerly. Parameters (``__torch_function__`` disabled) are
    plain tensors to torch calls."""
    cls = type(t)
    if cls is torch.Tensor:
        return
    handler = getattr(cls, "__torch_function__", None)
    if getattr(handler, "__func__", handler) is torch._C._disabled_torch_function_impl:
        return
    raise RunsEagerly(
        f"takes a tensor of the subclass {cls.__qualname__}, whose __torch_function__ decides "
        "what torch calls on it return"
    )


def _refuse_unmodeled_tensor(t: torch.Tensor) -> None:
    """A tensor the IR has no proxy for (a nested tensor; a dtype such as uint16 or complex32):
    the call runs eagerly."""
    if t.is_nested:
        raise RunsEagerly("reads a nested tensor, which thunder does not compile")
    try:
        from_torch_dtype(t.dtype)
    except TypeError:
        raise RunsEagerly(
            f"reads a tensor of dtype {t.dtype}, which thunder does not support"
        ) from None


# C callables that call a function they are given on the values they are given.
_TAKE_A_KEY = (map, filter, sorted, min, max, itertools.groupby)


def _is_numpy_callable(fn: Any, owner: Any) -> bool:
    """Whether ``fn`` is numpy's: a function, ufunc or scalar type of numpy, or a method of a
    numpy array or scalar."""
    for obj in (fn, owner):
        if obj is None:
            continue
        if isinstance(obj, types.ModuleType):
            module: Any = obj.__name__
        elif isinstance(obj, type):
            module = obj.__module__
        else:
            module = getattr(obj, "__module__", None)
            if not isinstance(module, str) or obj is owner:
                module = type(obj).__module__
        if isinstance(module, str) and module.split(".")[0] == "numpy":
            return True
    return False


def _numbers_fixed(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """``args`` and ``kwargs`` with each number proxy (also in a list, tuple or dict) as its
    value, for numpy, which takes any other object as an element of an object array
    (``np.asarray([x.item(), 2])``) or fails on it (``np.sqrt``): the value is fixed for the
    program (a data check where it was read from data, a guard where it is an input), as
    ``float(x.item())`` is, and numpy computes eager's result with its own types."""

    def holds(x: Any, depth: int = 0) -> bool:
        if isinstance(x, NumberProxy):
            return True
        if depth > 32:  # (a list holding itself)
            return False
        if type(x) in (tuple, list):
            return any(holds(v, depth + 1) for v in x)
        return type(x) is dict and any(holds(v, depth + 1) for v in x.values())

    def fixed(x: Any) -> Any:
        if isinstance(x, NumberProxy):
            return x.fixed_value()
        if type(x) in (tuple, list) and any(map(holds, x)):
            return type(x)(map(fixed, x))
        if type(x) is dict and any(map(holds, x.values())):
            return {k: fixed(v) for k, v in x.items()}
        return x

    if any(map(holds, args)) or any(map(holds, kwargs.values())):
        return tuple(map(fixed, args)), {k: fixed(v) for k, v in kwargs.items()}
    return args, kwargs


def _tensor_size(t: TensorProxy, dim: Any = None) -> Any:
    return torch_value(t.size(dim), as_size=dim is None)


def _logger_method(fn: Any, first: Any) -> bool:
    """Whether ``fn(first, ...)`` calls a C method found on a logger's class (an lru_cache'd
    ``warning_once`` that a library set on ``logging.Logger``)."""
    if not isinstance(first, logging.Logger) or isinstance(fn, types.FunctionType):
        return False
    return any(v is fn for c in type(first).__mro__ for v in vars(c).values())


def _call_tensor_method(method: Any, *args: Any, **kwargs: Any) -> Any:
    name = getattr(method.fn, "name", None)
    refuse_generators(f"torch.Tensor.{name}", args, kwargs)
    torch_method = getattr(torch.Tensor, name, None) if isinstance(name, str) else None
    if torch_method is None:
        out = method(*args, **kwargs)
    else:  # an option the op refuses runs as torch's own method (the torch fallback)
        out = mirrored_call(torch_method, method.fn, (method.tensor, *args), kwargs)
    if isinstance(out, TensorProxy):
        return _written_tensor_itself(out)
    name = getattr(method.fn, "name", None)
    return torch_value(out, as_size=name == "size" and not args and not kwargs)


def _is_variable_function(fn: Any) -> bool:
    """Whether ``fn`` is one of torch's C functions as torch's own Python code reaches them
    (``torch._VF.unique_dim`` in ``torch.unique``), which name no module."""
    name = getattr(fn, "__name__", None)
    return (
        type(fn) is types.BuiltinFunctionType
        and getattr(fn, "__self__", None) is None  # (not object.__new__, which it also has)
        and isinstance(name, str)
        and not name.startswith("__")
        and getattr(torch._C._VariableFunctions, name, None) is fn
    )


def _refuse_cached_call(fn: Any) -> None:
    """A call of a ``functools.lru_cache`` function (not marked constant by its library): on
    each eager call its cache decides whether the function runs, with its effects, or the call
    only counts a hit. A compiled program would bake one answer, and torch.compile ignores the
    cache (the function would run on every call): the call runs eagerly."""
    cached = getattr(fn, "__func__", fn)  # (a cached method, bound)
    if type(cached) is not functools._lru_cache_wrapper or assumed_constant(cached):
        return
    name = getattr(cached, "__qualname__", None) or _callable_name(fn)
    raise RunsEagerly(
        f"calls {name}, a functools.lru_cache function: on every call its cache decides whether "
        "it runs (with its effects) or answers from the cache, which neither a compiled program "
        "nor torch.compile (it ignores the cache) does"
    )


def _callable_name(fn: Any) -> str:
    owner = getattr(fn, "__objclass__", None) or getattr(fn, "__self__", None)
    name = getattr(fn, "__name__", None) or type(fn).__name__
    if _is_variable_function(fn):
        return f"torch._VF.{name}"  # (torch.unique's torch._VF.unique_dim)
    if isinstance(owner, torch.Tensor) or owner is torch._C.TensorBase:
        return f"torch.Tensor.{name}"
    module = getattr(fn, "__module__", None)
    if module:
        module = module.replace("torch._C._nn", "torch._C._nn").replace(
            "torch._C._VariableFunctions", "torch"
        )
        return f"{module}.{name}"
    return str(name)


# How a tensor the program computed relates to its inference_mode blocks (``InferenceRegions``).
_MADE = "made"  # an inference tensor: computed in a block
_MAYBE = "maybe"  # perhaps one: a view of a tensor from outside the block, or a reshape of it


# Autograd attributes of a tensor the call was given that are known at call time (guarded).
_AUTOGRAD_FACTS = frozenset({"is_leaf", "_is_view", "_base", "grad_fn"})


class InferenceRegions:
    """The ``torch.inference_mode`` blocks the program enters (outside the caller's inference
    mode) and which tensors they make: a block's ops are those its trace records between its
    ``__enter__`` and ``__exit__``. An op's result is an inference tensor, but for an in-place
    op's, a view's and a ``stop_gradient``'s: those are what their input is (a view of a normal
    tensor stays normal), a reshape's perhaps (it may be a view)."""

    def __init__(self) -> None:
        self.open: list[tuple[Trace, int] | None] = []  # per block: its trace and first op
        self.made: dict[str, str] = {}  # tensor name -> _MADE or _MAYBE, for closed blocks
        self.watched: set[int] = set()  # ids of the traces whose later ops are watched

    def enter(self, trace: Trace | None) -> None:
        """A block entered; ``trace`` None where it makes no inference tensors."""
        self.open.append(None if trace is None else (trace, len(trace.bound_symbols)))

    def leave(self) -> Trace | None:
        """A block left: the trace it made inference tensors in, or None."""
        block = self.open.pop() if self.open else None
        if block is None:
            return None
        self.made.update(self._made_by(*block))
        return block[0]

    def watching(self, trace: Trace) -> bool:
        """Whether ``trace``'s later ops are watched already (and from now on)."""
        seen = id(trace) in self.watched
        self.watched.add(id(trace))
        return seen

    def status(self, name: str) -> str | None:
        """_MADE, _MAYBE, or None where the tensor ``name`` is not an inference tensor."""
        for block in self.open:
            if block is not None:
                found = self._made_by(*block).get(name)
                if found is not None:
                    return found
        return self.made.get(name)

    def _made_by(self, trace: Trace, first: int) -> dict[str, str]:
        made = dict(self.made)
        for b in trace.bound_symbols[first:]:
            outs = [o.name for o in b.flat_proxy_outs if isinstance(o, TensorProxy)]
            source = next((a for a in b.flat_proxy_args if isinstance(a, TensorProxy)), None)
            inherited = made.get(source.name) if source is not None else None
            if (
                b.has_tag(OpTag.IN_PLACE)
                or b.has_tag(OpTag.VIEW)
                or b.has_tag(OpTag.STOPS_GRADIENT)
            ):
                status = inherited
            elif b.has_tag(OpTag.MAY_RETURN_VIEW):
                status = inherited or _MAYBE
            else:
                status = _MADE
            if status is not None:
                made.update(dict.fromkeys(outs, status))
        return made


_UNBOUND_METHODS = (types.MethodDescriptorType, types.WrapperDescriptorType)
# The operator methods a proxy answers as torch's tensor does.
_PROXY_DUNDERS = frozenset(
    n for n, v in vars(TensorProxy).items() if n in vars(torch._C.TensorBase) and callable(v)
)

# Methods of the C containers whose result depends on which objects their arguments are (for
# objects compared by identity).
_ITEM_LOOKUPS = frozenset(
    {"get", "pop", "setdefault", "count", "index", "remove", "discard", "__contains__",
     "__getitem__", "__delitem__"}
)  # fmt: skip
_LOOKUP_OWNERS = (dict, set, frozenset, list, tuple, collections.deque)


def _looks_up_items(fn: Any) -> bool:
    return (
        type(fn) in (types.BuiltinMethodType, types.MethodWrapperType)
        and isinstance(getattr(fn, "__self__", None), _LOOKUP_OWNERS)
        and fn.__name__ in _ITEM_LOOKUPS
    )


# Locks a program may take and release within a call (regions.RegionsMixin._lock_call):
# threading.Lock and RLock (a Condition is a Python class over one; a Semaphore's methods are
# lookasides of regions.RegionsMixin).
LOCK_TYPES: frozenset[type] = frozenset({_thread.LockType, type(threading.RLock())})
LOCK_METHODS = frozenset({"acquire", "release", "__enter__", "__exit__"})


class CallsMixin(WritesMixin):
    """Opaque calls and the callbacks given to the interpreter."""

    def _context_var_call(self, var: Any, name: str, args: tuple[Any, ...]) -> Any:
        raise NotImplementedError  # regions.RegionsMixin

    def _lock_call(
        self,
        lock: Any,
        name: str,
        args: tuple[Any, ...],
        kwargs: Any,
        native: Callable[..., Any] | None = None,
    ) -> Any:
        raise NotImplementedError  # regions.RegionsMixin

    def _context_setting(self, cm: Any, name: str, default: Any) -> Any:
        raise NotImplementedError  # regions.RegionsMixin

    def _is_inference_mode_enabled(self) -> bool:
        raise NotImplementedError  # regions.RegionsMixin

    def _inference_mode_enter(self, cm: Any) -> None:
        raise NotImplementedError  # regions.RegionsMixin

    def _inference_mode_exit(self, cm: Any, *exc_info: Any) -> None:
        raise NotImplementedError  # regions.RegionsMixin

    def _grad_mode(self) -> bool:
        raise NotImplementedError  # regions.RegionsMixin

    def callbacks(self) -> Callbacks:
        return Callbacks(
            load_global=self._cb_load_global,
            load_closure_cell=self._cb_load_cell,
            load_attribute=self._cb_load_attribute,
            load_attribute_missing=self._cb_attribute_missing,
            load_generic_attribute=self._cb_load_generic_attribute,
            load_generic_attribute_missing=self._cb_generic_attribute_missing,
            store_global=self._cb_store_global,
            store_closure_cell=self._cb_store_cell,
            make_cell=self._cb_make_cell,
            load_defaults=self._cb_load_defaults,
            store_attribute=self._cb_store_attribute,
            store_item=self._cb_store_item,
            load_item=self._cb_load_item,
            load_item_missing=self._cb_load_item_missing,
            delete_global=self._cb_delete_global,
            delete_closure_cell=self._cb_delete_cell,
            delete_attribute=self._cb_delete_attribute,
            delete_item=self._cb_delete_item,
            opaque_call=self._cb_opaque_call,
            special_lookup=self._cb_special_lookup,
            compare_identity=self._cb_compare_identity,
            identity_used=self._cb_identity_used,
            descriptor_get=self._cb_descriptor_get,
            write_failed=self.write_failed,
        )

    def _cb_opaque_call(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if type(fn) in _UNBOUND_METHODS and args and isinstance(args[0], TensorProxy):
            # torch's own operator method called on a proxy (kept by a replacement of it:
            # ``orig = torch.Tensor.__add__``): the proxy's operator, as eager's C method
            name = fn.__name__
            if fn.__objclass__ is torch._C.TensorBase and name in _PROXY_DUNDERS:
                return getattr(TensorProxy, name)(*args, **kwargs)
            if fn is torch.Tensor.item:  # a read of data, as ``x.item()`` records it
                return args[0].item(*args[1:], **kwargs)
        if type(fn) in _UNBOUND_METHODS and args and isinstance(args[0], fn.__objclass__):
            fn, args = fn.__get__(args[0]), args[1:]  # dict.copy(d) is d.copy()
        if fn is type and len(args) == 1 and not kwargs:
            return self._type_of(args[0])
        if isinstance(fn, weakref.ReferenceType) and not args and not kwargs:
            return self._referent(fn)
        looks_up = _looks_up_items(fn)
        if fn is id or fn is hash or looks_up:  # ``id(obj)``, ``d.get(obj)``
            # an item lookup compares only its first argument (``d.get(k, default)``: the key)
            for a in args[:1] if looks_up else args:
                if compares_by_identity(a):
                    self._cb_identity_used(a)
                elif isinstance(a, TensorProxy):  # (``d.get(t)``: looked for in ``d``)
                    looked_in = fn.__self__ if looks_up else None
                    self._cb_identity_used(a, looked_in)
        owner = getattr(fn, "__self__", None)
        if type(owner) is str:
            check_str_formatting(getattr(fn, "__name__", ""), args, kwargs)
        if type(owner) is contextvars.ContextVar and not kwargs:
            return self._context_var_call(owner, fn.__name__, args)
        if type(owner) in LOCK_TYPES and fn.__name__ in LOCK_METHODS:
            return self._lock_call(owner, fn.__name__, args, kwargs)
        if isinstance(owner, logging.Logger):
            return self._logging_call(owner, getattr(fn, "__name__", ""), args, kwargs)
        if args and _logger_method(fn, args[0]):  # transformers' warning_once (an lru_cache)
            name = next(n for c in type(args[0]).__mro__ for n, v in vars(c).items() if v is fn)
            return self._logging_call(args[0], name, args[1:], kwargs)
        # (``d.__setitem__`` of a dict is a method-wrapper, ``d.update`` a builtin method)
        if owner is not None and type(fn) in (types.BuiltinMethodType, types.MethodWrapperType):
            mutators = _CONTAINER_MUTATORS.get(type(owner))
            if fn.__name__ == "get" and args and type(args[0]) is str and self._is_namespace(owner):
                result = fn(*args, **kwargs)
                if args[0] not in owner:
                    self.namespace_lacks(owner, args[0])
                elif not isinstance(result, torch.Tensor):
                    with self.constant_reads():  # (the program takes ``result`` as it is)
                        self._cb_load_global(args[0], result, owner, None)  # globals().get(k)
                return result
            if mutators is not None and fn.__name__ in mutators:
                return self._mutating_call(owner, fn, args, kwargs)
            elif type(owner) in _CONTAINER_MUTATORS:
                self._note_content_read_of(owner)  # list.index, dict.get, ...
        for a in (*args, *kwargs.values()):
            if type(a) in _CONTAINER_MUTATORS:
                self._note_content_read_of(a)
        if _is_numpy_callable(fn, owner):
            args, kwargs = _numbers_fixed(args, kwargs)
        if any(fn is f for f in _TAKE_A_KEY) and any(a is type for a in (*args, *kwargs.values())):
            # ``type`` handed to C code as a key (``groupby(data, type)`` in statistics): the
            # type eager's value has, not the proxy's class
            args = tuple(self._type_of if a is type else a for a in args)
            kwargs = {k: self._type_of if v is type else v for k, v in kwargs.items()}
        if isinstance(owner, torch.Generator):
            refuse_generator_state(getattr(fn, "__name__", ""))
        torch_callable = is_torch_callable(fn) or _is_variable_function(fn)
        if not torch_callable:
            self._refuse_impure(fn, args)
        if torch_callable:
            _refuse_torch_function_overrides(fn, args, kwargs)
            has_proxy = any(isinstance(a, Proxy) for a in tree_iter((args, kwargs)))
            if has_proxy or not query_is_allowed(fn):
                return call_torch_callable(
                    fn, args, kwargs, has_proxy=has_proxy, display_name=_callable_name(fn)
                )
            result = fn(*args, **kwargs)
            if isinstance(result, torch.Tensor):
                raise UnsupportedOperationError(_callable_name(fn), "it creates a tensor")
            return result
        return fn(*args, **kwargs)

    def _mutating_call(self, owner: Any, fn: Any, args: tuple[Any, ...], kwargs: Any) -> Any:
        """``owner.method(*args, **kwargs)`` of a container's mutator: recorded for the epilogue
        to replay, unless it raises."""
        name = fn.__name__
        recorded = self._recorded(self._record_mutation, owner, name, args, kwargs, container=owner)
        if name in _RETURNS_CONTENTS:  # what it returns was in the container
            self._note_content_read_of(owner)
        for a in (*args, *kwargs.values()):
            if type(a) in _CONTAINER_MUTATORS:
                self._note_content_read_of(a)
        partial = recorded is not None and name in _PARTIAL_ON_FAILURE
        before = copy.copy(owner) if partial else _MISSING
        try:
            result = fn(*args, **kwargs)
        except BaseException:
            if recorded is None:
                raise
            if partial and not same_contents(before, owner):
                kind = type(owner).__name__
                raise RunsEagerly(
                    f"calls {kind}.{name}, which raised after changing the {kind} part way: a "
                    "compiled program cannot replay that"
                ) from None
            self.write_failed(recorded)
            raise
        if name in ("pop", "popitem") and self.access_for(owner) is not None:
            for x in result if name == "popitem" else (result,):
                if not isinstance(x, _SCALAR_TYPES):
                    self.paths.detached[id(x)] = x
        return result

    def _referent(self, ref: weakref.ReferenceType[Any]) -> Any:
        """``ref()`` of an outside weakref: the object is found through the ref on later calls
        (``parent()``), so what the program reads from it is guarded and its writes replayed."""
        target = ref()
        at = self.access_for(ref)
        if at is None or target is None or isinstance(target, (torch.Tensor, *_SCALAR_TYPES)):
            return target  # (a weakref to a parameter: the tensor is matched by identity)
        return self.on_load(target, Access(REFERENT, None, at))

    def bind_arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
        try:
            return super().bind_arguments(args, kwargs)
        except RunsEagerly as e:  # before the program runs: reported as raised by it
            from thunder.binding.program import ProgramRaised

            raise ProgramRaised(e) from None

    def _tensor_input(self, t: torch.Tensor, access: Access, guarded: bool) -> TensorProxy:
        _refuse_torch_function_subclass(t)
        _refuse_unmodeled_tensor(t)
        return super()._tensor_input(t, access, guarded)

    def tensor_attribute_lookasides(self) -> dict[Any, Any]:
        """Attribute reads of tensor proxies the proxy alone cannot answer: the Python attributes
        a caller set on its tensors (``x.scale = 2.0``, ``param.tp_dim = 1``), and whether a
        tensor is an inference tensor (made in a ``torch.inference_mode`` block)."""
        from torch.autograd.grad_mode import inference_mode

        return {
            TensorProxy.__getattr__: self._tensor_getattr,
            TensorProxy.__dir__: self._tensor_dir,
            inference_mode.__enter__: self._entering_inference_mode,
            inference_mode.__exit__: self._leaving_inference_mode,
            TensorProxy.is_inference: self._is_inference,
            tensor_patches.original("is_inference"): self._is_inference,
            torch.is_inference: self._is_inference,
        }

    # -- inference tensors ----------------------------------------------------------------------
    # What a ``torch.inference_mode`` block the program enters computes are inference tensors in
    # eager. The IR has no such tensors: the program's answers about them are eager's, and where
    # one reaches the caller (returned, stored outside) the call runs eagerly.

    @functools.cached_property
    def inference_regions(self) -> InferenceRegions:
        return InferenceRegions()

    def _entering_inference_mode(self, cm: Any) -> None:
        enabled = bool(self._context_setting(cm, "mode", True))
        makes_inference_tensors = enabled and not self._is_inference_mode_enabled()
        trace = get_tracectx() or self.trace
        self._inference_mode_enter(cm)
        self.inference_regions.enter(trace if makes_inference_tensors else None)

    def _leaving_inference_mode(self, cm: Any, *exc_info: Any) -> None:
        self._inference_mode_exit(cm, *exc_info)
        trace = self.inference_regions.leave()
        if trace is not None:
            self._watch_inference_tensors(trace)

    def _watch_inference_tensors(self, trace: Trace) -> None:
        """After a block made inference tensors: an op recording gradients that reads one raises
        in eager where it saves it for backward (``y * w``), not where it does not (``y + w``).
        Which ops save what is torch's: the call runs eagerly at any such op."""
        if self.inference_regions.watching(trace):
            return
        previous = trace.record_hook
        binder = weakref.ref(self)  # the trace outlives the call's binder (and its tensors)

        def refuse_in_autograd(bsym: BoundSymbol) -> None:
            if previous is not None:
                previous(bsym)
            tensors = [p for p in bsym.flat_proxy_args if isinstance(p, TensorProxy)]
            recording = binder()
            if recording is None or not any(p.requires_grad for p in tensors):
                return
            if not recording._grad_mode() or recording._is_inference_mode_enabled():
                return
            status = recording.inference_regions.status
            made = next((p for p in tensors if status(p.name)), None)
            if made is not None:
                raise RunsEagerly(
                    f"computes with {made.name}, an inference tensor made under "
                    "torch.inference_mode, where gradients are recorded (eager refuses to save "
                    "inference tensors for backward)"
                )

        trace.record_hook = refuse_in_autograd

    def _is_inference(self, t: Any) -> bool:
        """``t.is_inference()``: for a tensor the program computed, whether eager's was made
        under inference mode (a block of the program's, or the caller's); a view of a tensor
        read from outside state is what that tensor is (its dispatch keys are guarded; an
        argument's are not: the call runs eagerly)."""
        if not isinstance(t, TensorProxy):
            return bool(torch.Tensor.is_inference(t))
        made = self.inference_regions.status(t.name)
        if made is _MAYBE:
            raise RunsEagerly(
                f"asks whether {t.name}, which may be a view of a tensor made outside "
                "torch.inference_mode, is an inference tensor"
            )
        if made is _MADE:
            return True
        viewed = self._input_viewed_by(t)
        if viewed is not None:
            real, access = viewed
            if access.is_argument_leaf():
                raise RunsEagerly(
                    "asks whether an argument (or a view of one) is an inference tensor, which "
                    "the compiled program's cache does not tell apart"
                )
            return real.is_inference()
        return torch.is_inference_mode_enabled()  # the caller's: every tensor computed is one

    def _input_viewed_by(self, t: TensorProxy) -> tuple[torch.Tensor, Access] | None:
        """The caller's tensor ``t`` is, or may share memory with (a view, an in-place result)."""
        found = self._input_tensor(t)
        if found is not None:
            return found
        trace = get_tracectx() or self.trace
        groups = alias_info(trace.bound_symbols)
        root = groups.root(t.name)
        for real, proxy in self.inputs.tensors.values():
            if groups.root(proxy.name) == root:
                access = self._access_of_input(proxy)
                return None if access is None else (real, access)
        return None

    def refuse_inference_tensor(self, value: Any, what: str) -> None:
        """Eager's ``value`` is an inference tensor the program made (or may be one): reaching
        the caller as ``what``, it must be one, which the compiled program cannot make."""
        if isinstance(value, TensorProxy) and self.inference_regions.status(value.name):
            raise RunsEagerly(
                f"passes a tensor made under torch.inference_mode to the caller ({what}), an "
                "inference tensor thunder does not make"
            )

    def _tensor_dir(self, t: TensorProxy) -> list[str]:
        """``dir(t)``: torch's names for the tensor's type, with a caller's tensor's own
        attributes (its ``__dict__``, read as outside state)."""
        # (a computed tensor has none: setting one, or writing into its __dict__, runs split)
        own: Any = self._tensor_getattr(t, "__dict__") if self._input_tensor(t) else {}
        if own:
            self._note_content_read_of(own)
        return tensor_dir(t, self.tensor_type(t), list(own))

    def _tensor_getattr(self, t: TensorProxy, name: str) -> Any:
        """``t.name`` where the proxy has no such attribute: for a tensor passed in, what eager
        finds on that tensor, read from outside state and guarded by its path like an attribute
        of any outside object (present with this value, or absent). An input's autograd facts
        (``is_leaf``, ``_is_view()``, ...) are guarded values (``_input_autograd_fact``)."""
        if name in _AUTOGRAD_FACTS:
            answered, value = self._input_autograd_fact(t, name)
            if answered:
                return value
        if name in _LAYOUT_QUERIES:
            found = self._input_tensor(t)
            if found is not None:
                return _InputLayout(name, *found, self.facts.guards)
        try:
            return TensorProxy.__getattr__(t, name)
        except AttributeError:
            if name.startswith("__") and name != "__dict__":
                raise  # protocol probes (torch's own): no attribute a program sets
            found = self._input_tensor(t)
            if found is None:
                return self._computed_tensor_attribute(name)
            real, access = found
            if name == "__dict__" or name in real.__dict__:
                return self.on_load(getattr(real, name), access.attr(name), holder=real)
            try:
                on_class = inspect.getattr_static(type(real), name)
            except AttributeError:
                key = access.attr(f"<has {name}>")
                self.facts.guards.setdefault(key, Guard(access, "has_attr", (name, False)))
                missing = f"'{type(real).__name__}' object has no attribute '{name}'"
                raise AttributeError(missing) from None
            if isinstance(on_class, _SCALAR_TYPES):  # a subclass's constant (Parameter._is_param)
                return self.on_load(on_class, access.attr(name), holder=real)
            from thunder_ir.ops.fallback import TorchRunsItError

            # A method or property of a tensor subclass would run on the caller's tensor.
            raise TorchRunsItError(
                f"{type(real).__qualname__}.{name}", "an attribute of a tensor subclass"
            ) from None

    def _input_autograd_fact(self, t: TensorProxy, name: str) -> tuple[bool, Any]:
        raise NotImplementedError  # regions.RegionsMixin

    @staticmethod
    def _computed_tensor_attribute(name: str) -> Any:
        """``t.name`` of a tensor the program computed: it has no attributes of its own (setting
        one runs the call split); its ``__dict__`` (empty, but one eager's writes go into)
        is torch's."""
        if name == "__dict__":
            from thunder_ir.ops.fallback import TorchRunsItError

            raise TorchRunsItError("torch.Tensor.__dict__", "a computed tensor's own attributes")
        raise AttributeError(f"'Tensor' object has no attribute '{name}'")

    def _input_tensor(self, t: TensorProxy) -> tuple[torch.Tensor, Access] | None:
        """The caller's tensor ``t`` stands for (an in-place op's result is its tensor) and its
        path, or None for a tensor the program computed."""
        t = self._written_tensor(t)
        for real, proxy in self.inputs.tensors.values():
            if proxy is t or self.inputs.seen_as.get(proxy.name) is t:  # (or seen whole)
                access = self._access_of_input(proxy)
                return None if access is None else (real, access)
        return None

    def tensor_type(self, t: TensorProxy) -> type:
        """The Python type eager's tensor has for the proxy ``t``: an input's own (a Parameter),
        else ``torch.Tensor`` (what an op computes)."""
        return self.inputs.tensor_types.get(t.name, torch.Tensor)

    def _type_of(self, obj: Any) -> type:
        """``type(obj)``: found at ``obj.__class__`` for an outside object, so what the program
        reads from the class (``type(self).helper(self)``) is guarded like an attribute."""
        if isinstance(obj, TensorProxy):
            return self.tensor_type(obj)
        if isinstance(obj, NumberProxy):
            return obj.python_type  # eager's int / float / bool / complex
        if isinstance(obj, SymbolicSize):
            return torch.Size
        cls = type(obj)
        if isinstance(obj, (Proxy, *_SCALAR_TYPES)) or not cls.__flags__ & _HEAPTYPE:
            return cls
        access = self.access_for(obj)
        # (not where ``__class__`` presents another class: a ThunderModule's is its module's)
        if access is not None and getattr(obj, "__class__", None) is cls:
            self._associate(cls, access.attr("__class__"))
        return cls

    def _requires_grad_(self, t: TensorProxy, requires_grad: bool = True) -> TensorProxy:
        """``t.requires_grad_(flag)``. Where ``t`` has the flag already, nothing happens (the
        IR's ``set_requires_grad``). ``True`` on a tensor the program computed without grad makes
        it a leaf in eager, so that what follows is recorded (transformers' gradient
        checkpointing asks this of the input embeddings, for frozen ones): here nothing changes,
        and every gradient is eager's (a parameter's gradient does not depend on the flag of a
        value before it); only that tensor's own flag stays False, and where the caller sees it
        the call runs split (``program._returned_leaf``). On an input it would change
        the caller's tensor, and ``False`` on a tensor that requires grad raises in eager for a
        computed one: both refused."""
        if bool(requires_grad) == t.requires_grad:
            return t
        is_input = any(p is t for _, p in self.inputs.tensors.values())
        if requires_grad and not is_input:
            recording = torch.is_grad_enabled() and (get_tracectx() or self.trace).grad_enabled
            if recording and not any(p.requires_grad for _, p in self.inputs.tensors.values()):
                # Nothing the program takes requires grad: its results would not either, where
                # eager's computed from this tensor do. Torch makes the leaf (split there).
                from thunder_ir.ops.fallback import TorchRunsItError

                raise TorchRunsItError(
                    "torch.Tensor.requires_grad_", "it makes a computed tensor a leaf of autograd"
                )
            if recording:
                # Torch makes the leaf where the caller can see it (``program._returned_leaf``).
                self.made_leaves[t.name] = "torch.Tensor.requires_grad_"
            return t
        raise UnsupportedOperationError(
            "Tensor.requires_grad_",
            "it would change the flag of a tensor passed in (state of the caller)"
            if is_input
            else "it un-flags a computed tensor that requires grad, which eager refuses too; "
            "use .detach()",
        )

    def _logging_call(
        self, logger: Any, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        """``logger.warning(...)`` and the other logging methods: output, replayed by the
        epilogue on every call with the call's values (a logged tensor is the computed one),
        as eager logs on every call; not run while tracing. (Interpreting the logging module
        would meet its locks and clock, which are refused as impure.)"""
        access = self.access_for(logger)
        if access is None:
            raise UnsupportedSideEffectError(
                f"thunder.jit: cannot replay {type(logger).__name__}.{method} on a logger the "
                "function made itself; log through a logger defined outside it "
                "(logging.getLogger(__name__) at module level)"
            )
        kwargs = dict(kwargs)
        stacklevel = kwargs.pop("stacklevel", 1)
        if type(stacklevel) is not int:
            kwargs["stacklevel"] = stacklevel  # logging's own error or reading, on each call
            stacklevel = 1
        # (the record's file, line and function are those of the user's call, as in eager)
        site, outside = log_site(stacklevel)
        value = (
            self._template((tuple(args), kwargs), f"{method} argument"),
            LogReplay(method, site, outside),
        )
        self.effects.writes.append(Write("log", access, method, value))

    def _is_outside(self, obj: Any) -> bool:
        return id(obj) in self.facts.outside_owners or self.access_for(obj) is not None

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
            _refuse_cached_call(fn)
            entropy = entropy_reason(fn, args)
            if entropy is not None:
                raise RunsEagerly(f"calls {_callable_name(fn)}: {entropy}")
            reason = impure_reason(fn, self._is_outside)
        if reason is not None:
            raise ImpureCallError(
                _callable_name(fn),
                f"its result would become a constant of the compiled program ({reason})",
            )
