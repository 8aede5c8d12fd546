"""The policy for calls the interpreter does not enter (C functions, torch callables without an
IR op): run, record as a mutation, or refuse with a clear error; and the values crossing from the
IR back into user code (torch dtypes, devices, ``torch.Size``)."""

from __future__ import annotations

import _thread
import contextvars
import functools
import inspect
import logging
import threading
import types
from collections.abc import Callable
from typing import Any

import torch

from thunder.access import Access
from thunder.binding.fallback import call_torch_callable, mirrored_call
from thunder.binding.rng import refuse_generators
from thunder.binding.state import (
    _CONTAINER_MUTATORS,
    _HEAPTYPE,
    _RETURNS_CONTENTS,
    _SCALAR_TYPES,
    Guard,
    Write,
    torch_value,
)
from thunder.binding.writes import (
    WritesMixin,
)
from thunder.errors import (
    ImpureCallError,
    RunsEagerly,
    UnsupportedOperationError,
    UnsupportedSideEffectError,
)
from thunder.lookasides import check_str_formatting, is_torch_callable, query_is_allowed
from thunder.opaque import impure_reason
from thunder_interp import Callbacks
from thunder_ir import NumberProxy, OpTag, Proxy, Symbol, TensorProxy, get_tracectx
from thunder_ir.proxies import tensor_dir
from thunder_ir.pytree import tree_iter


def _returning_torch_types(sym: Symbol, fn: Any = None) -> Callable[..., Any]:
    @functools.wraps(sym)
    def call(*args: Any, **kwargs: Any) -> Any:
        _refuse_torch_function_overrides(fn if fn is not None else sym, args, kwargs)
        out = sym(*args, **kwargs) if fn is None else mirrored_call(fn, sym, args, kwargs)
        return _written_tensor_itself(out) if isinstance(out, TensorProxy) else torch_value(out)

    return call


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


_UNBOUND_METHODS = (types.MethodDescriptorType, types.WrapperDescriptorType)

# Locks a program may take and release within a call (regions.RegionsMixin._lock_call):
# threading.Lock and RLock (Condition and Semaphore are Python classes built on them).
LOCK_TYPES: frozenset[type] = frozenset({_thread.LockType, type(threading.RLock())})
LOCK_METHODS = frozenset({"acquire", "release", "__enter__", "__exit__"})


class CallsMixin(WritesMixin):
    """Opaque calls and the callbacks given to the interpreter."""

    def _context_var_call(self, var: Any, name: str, args: tuple[Any, ...]) -> Any:
        raise NotImplementedError  # regions.RegionsMixin

    def _lock_call(self, lock: Any, name: str, args: tuple[Any, ...], kwargs: Any) -> Any:
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
        )

    def _cb_opaque_call(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if type(fn) in _UNBOUND_METHODS and args and isinstance(args[0], fn.__objclass__):
            fn, args = fn.__get__(args[0]), args[1:]  # dict.copy(d) is d.copy()
        if fn is type and len(args) == 1 and not kwargs:
            return self._type_of(args[0])
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
                if args[0] in owner and not isinstance(result, torch.Tensor):
                    self._cb_load_global(args[0], result, owner, None)  # globals().get(k)
                return result
            if mutators is not None and fn.__name__ in mutators:
                self._record_mutation(owner, fn.__name__, args, kwargs)
                if fn.__name__ in _RETURNS_CONTENTS:  # what it returns was in the container
                    self._note_content_read_of(owner)
                if fn.__name__ in ("pop", "popitem") and self.access_for(owner) is not None:
                    result = fn(*args, **kwargs)
                    for x in result if fn.__name__ == "popitem" else (result,):
                        if not isinstance(x, _SCALAR_TYPES):
                            self.paths.detached[id(x)] = x
                    return result
            elif type(owner) in _CONTAINER_MUTATORS:
                self._note_content_read_of(owner)  # list.index, dict.get, ...
        for a in (*args, *kwargs.values()):
            if type(a) in _CONTAINER_MUTATORS:
                self._note_content_read_of(a)
        if not is_torch_callable(fn):
            self._refuse_impure(fn, args)
        if is_torch_callable(fn):
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

    def bind_arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
        try:
            return super().bind_arguments(args, kwargs)
        except RunsEagerly as e:  # before the program runs: reported as raised by it
            from thunder.binding.program import ProgramRaised

            raise ProgramRaised(e) from None

    def _tensor_input(self, t: torch.Tensor, access: Access, guarded: bool) -> TensorProxy:
        _refuse_torch_function_subclass(t)
        return super()._tensor_input(t, access, guarded)

    def tensor_attribute_lookasides(self) -> dict[Any, Any]:
        """Attribute reads of tensor proxies the proxy alone cannot answer: the Python attributes
        a caller set on its tensors (``x.scale = 2.0``, ``param.tp_dim = 1``)."""
        return {
            TensorProxy.__getattr__: self._tensor_getattr,
            TensorProxy.__dir__: self._tensor_dir,
        }

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
        of any outside object (present with this value, or absent)."""
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
        cls = type(obj)
        if isinstance(obj, (Proxy, *_SCALAR_TYPES)) or not cls.__flags__ & _HEAPTYPE:
            return cls
        access = self.access_for(obj)
        if access is not None:
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
        value = (tuple(args), dict(kwargs))
        self.effects.writes.append(
            Write("log", access, method, self._template(value, f"{method} argument"))
        )

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
            reason = impure_reason(fn, self._is_outside)
        if reason is not None:
            raise ImpureCallError(
                _callable_name(fn),
                f"its result would become a constant of the compiled program ({reason})",
            )
