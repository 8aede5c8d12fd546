"""How a ``ThunderModule`` looks to tools written for the module it wraps: its ``forward``'s
signature, the wrapped model's own methods calling the compiled program, the class it
presents to ``isinstance`` (a Hugging Face model), and what to do instead for Lightning's
``Trainer``, which takes no wrapper but torch.compile's."""

from __future__ import annotations

import functools
import inspect
import sys
import types
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.modules.module as _module_globals

from thunder.jit_function import ThunderFunction
from thunder_transforms.autodiff.runner import hide_from_dynamo

__all__ = [
    "SignedForward",
    "call_without_global_module_hooks",
    "lightning_module_advice",
    "presented_class",
    "routed_method",
    "run_compiled",
]

_ABSENT = object()
_SLOT = "_compiled_call_impl"  # what Module.__call__ calls instead of itself when set


class _BoundForward:
    """``jm.forward``: the wrapped module's ``forward`` compiled, as ``model.forward(x)`` runs it
    (none of the module's own hooks); called by nn.Module's call of the wrapper (hooks on
    ``jm``), the whole call of the module. ``inspect.signature`` gives the wrapped forward's
    parameters."""

    __slots__ = ("_module",)

    def __init__(self, module: Any) -> None:
        self._module = module

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        caller = sys._getframe(1)
        if caller.f_code in _CALL_IMPL_CODES and caller.f_locals.get("self") is self._module:
            return run_compiled(self._module, args, kwargs)
        return _run_forward_only(self._module, args, kwargs)

    hide_from_dynamo(__call__, "thunder.jit runs its own compiled program")  # (its caller's frame)

    @property
    def __signature__(self) -> inspect.Signature:
        return inspect.signature(self._module._model.forward)

    @property
    def __func__(self) -> Callable[..., Any]:
        # what a bound method has: accelerate's mixed precision wraps ``forward.__func__`` and
        # binds the wrapper to the module, and its ``unwrap_model(keep_fp32_wrapper=False)``
        # binds what it unwraps to back to the module; the function takes the ThunderModule first
        def forward(module: Any, /, *args: Any, **kwargs: Any) -> Any:
            return run_compiled(module, args, kwargs)

        try:
            signature = self.__signature__
        except (TypeError, ValueError):  # a forward without a signature: (module, *args, **kwargs)
            return forward
        first = inspect.Parameter("module", inspect.Parameter.POSITIONAL_ONLY)
        if all(p.name != first.name for p in signature.parameters.values()):
            forward.__signature__ = signature.replace(  # type: ignore[attr-defined]
                parameters=[first, *signature.parameters.values()]
            )
        return forward

    @property
    def __name__(self) -> str:
        return "forward"

    @property
    def __code__(self) -> Any:  # torch.export reads it: where the program comes from
        return getattr(self._module._model.forward, "__code__", _forward.__code__)

    def __repr__(self) -> str:
        return f"<thunder forward of {type(self._module._model).__name__}>"


class SignedForward:
    """``ThunderModule.forward``, a non-data descriptor: no ``__wrapped__`` (unwrapping tools
    would reach the eager forward), and ``jm.forward = f`` still sets an instance's own."""

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        return _forward if obj is None else _BoundForward(obj)

    hide_from_dynamo(__get__, "thunder.jit runs its own compiled program")


def _forward(self: Any, *args: Any, **kwargs: Any) -> Any:
    return run_compiled(self, args, kwargs)


# The global module hooks nn.Module's call runs (``register_module_forward_hook`` and the
# others). A ThunderModule stands in for its module, which fires them inside the compiled
# program: where the wrapper takes nn.Module's call path (hooks of its own), they are hidden
# from the wrapper's part of it, so each fires once per module, as in eager.
_GLOBAL_CALL_HOOKS = (
    "_global_forward_pre_hooks",
    "_global_forward_hooks",
    "_global_backward_pre_hooks",
    "_global_backward_hooks",
)


class _HiddenHooks(OrderedDict):  # type: ignore[type-arg]
    """Stands in for a global hook dict while hidden: empty to nn.Module's call, while a hook
    registered or removed meanwhile (its handle keeps this dict) is registered or removed in the
    real one. Lives as long as the real one, so a handle given out meanwhile still removes."""

    def __init__(self, real: dict[int, Any]) -> None:
        super().__init__()
        self.real = real

    def __setitem__(self, key: int, value: Any) -> None:
        self.real[key] = value

    def __delitem__(self, key: int) -> None:
        del self.real[key]

    def __contains__(self, key: object) -> bool:
        return key in self.real


_stand_ins: dict[str, _HiddenHooks] = {}


def _hooks_hidden() -> bool:
    return isinstance(_module_globals._global_forward_hooks, _HiddenHooks)


def _hide_global_hooks() -> None:
    for name in _GLOBAL_CALL_HOOKS:
        real = getattr(_module_globals, name)
        stand_in = _stand_ins.get(name)
        if stand_in is None or stand_in.real is not real:
            stand_in = _stand_ins[name] = _HiddenHooks(real)
        setattr(_module_globals, name, stand_in)


def _show_global_hooks() -> None:
    for name in _GLOBAL_CALL_HOOKS:
        setattr(_module_globals, name, _stand_ins[name].real)


def call_without_global_module_hooks(
    call: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """``call(*args, **kwargs)`` (a ThunderModule's ``nn.Module.__call__``) with the global
    module hooks hidden but for the compiled program's run (``run_compiled``)."""
    if _hooks_hidden():  # called by a hook of another wrapper: already hidden
        return call(*args, **kwargs)
    _hide_global_hooks()
    try:
        return call(*args, **kwargs)
    finally:
        _show_global_hooks()


def run_compiled(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A ThunderModule's compiled program, with the global module hooks in place (its call may
    have hidden them): they fire for the wrapped modules."""
    return _with_global_hooks(module._thunder_function, args, kwargs)


def _with_global_hooks(program: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if not _hooks_hidden():
        return program(*args, **kwargs)
    _show_global_hooks()
    try:
        return program(*args, **kwargs)
    finally:
        _hide_global_hooks()


# Where nn.Module's call calls ``forward``: ``_call_impl``, or its ``inner`` where there are hooks
_CALL_IMPL_CODES = frozenset(
    (
        torch.nn.Module._call_impl.__code__,
        *(
            c
            for c in torch.nn.Module._call_impl.__code__.co_consts
            if isinstance(c, types.CodeType)
        ),
    )
)

# Per ThunderModule, the program of its module's ``forward`` alone (``jm.forward(x)`` where the
# module's call would run hooks of its own); weak: a copy of the wrapper compiles its own.
_forward_programs: weakref.WeakKeyDictionary[Any, ThunderFunction] = weakref.WeakKeyDictionary()


def _has_call_of_its_own(model: torch.nn.Module) -> bool:
    """Whether ``model(x)`` runs more than ``model.forward(x)``: hooks on it or on all modules,
    a ``Module.compile()``."""
    d = model.__dict__
    if any(d.get(name) for name in _OWN_CALL_HOOKS) or d.get(_SLOT) is not None:
        return True
    for name in _GLOBAL_CALL_HOOKS:
        hooks = getattr(_module_globals, name)
        if hooks.real if isinstance(hooks, _HiddenHooks) else hooks:
            return True
    return False


_OWN_CALL_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")


def _run_forward_only(jm: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``jm.forward(...)``: ``model.forward(...)`` compiled. Where the module's call runs only
    its forward (no hooks: nearly always), that is the module's own program."""
    model = jm._model
    if not _has_call_of_its_own(model):
        return run_compiled(jm, args, kwargs)
    program = _forward_programs.get(jm)
    if program is None:

        def forward(*args: Any, **kwargs: Any) -> Any:
            return model.forward(*args, **kwargs)

        compiled = jm._thunder_function
        program = _forward_programs[jm] = ThunderFunction(
            forward, compiled.options, compiled.executors, compiled.transforms
        )
    return _with_global_hooks(program, args, kwargs)


class _Router:
    """Set as the wrapped module's ``_compiled_call_impl`` while one of its methods runs: its
    calls of itself run the ThunderModule. Cleared during that call, so the program's guards
    see the module as it is and tracing never comes back here."""

    __slots__ = ("jm", "previous")

    def __init__(self, jm: Any, previous: Any) -> None:
        self.jm = jm
        self.previous = previous

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        d = self.jm._model.__dict__
        _restore(d, self.previous)
        try:
            return self.jm(*args, **kwargs)
        finally:
            d[_SLOT] = self


def _restore(d: dict[str, Any], previous: Any) -> None:
    if previous is _ABSENT:
        d.pop(_SLOT, None)
    else:
        d[_SLOT] = previous


def routed_method(jm: Any, method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` (bound to ``jm``'s wrapped module) such that the module's calls of itself
    during it (``self(...)``, as ``generate`` makes) run ``jm``'s compiled program. The module
    is as before once it returns or raises."""

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        d = jm._model.__dict__
        previous = d.get(_SLOT, _ABSENT)
        if isinstance(previous, _Router):  # a method called inside another: already routed
            return method(*args, **kwargs)
        d[_SLOT] = _Router(jm, previous)
        try:
            return method(*args, **kwargs)
        finally:
            _restore(d, previous)

    return call


def presented_class(model: torch.nn.Module) -> type | None:
    """The class a ThunderModule of ``model`` presents as its ``__class__``: the model's own
    (``isinstance(jm, nn.Linear)`` holds where the model is one, as the walks that initialize or
    swap layers by class test; transformers' Trainer, pipelines and ``unwrap_model`` decide by
    ``isinstance`` too, and recognize no wrapper but their own). None for a Lightning
    ``LightningModule``: its Trainer must refuse the wrapper (``lightning_module_advice``)."""
    cls = type(model)
    # by the class's bases, not sys.modules: the jit traces this where a traced function reads
    # ``jm.__class__``, and guards what it read
    for base in cls.__mro__:
        if base.__name__ == "LightningModule" and base.__module__.startswith(_LIGHTNING):
            return None
    return cls


_LIGHTNING = ("lightning.pytorch", "pytorch_lightning")


def _lightning_module_class(model: torch.nn.Module) -> type | None:
    for package in _LIGHTNING:
        base = getattr(sys.modules.get(package), "LightningModule", None)
        if base is not None and isinstance(model, base):
            return base  # type: ignore[no-any-return]
    return None


def lightning_module_advice(model: torch.nn.Module) -> str | None:
    """For a Lightning ``LightningModule``: why ``Trainer.fit(thunder.jit(model))`` cannot work and
    what works instead (``thunder.jit`` warns with it), else None. The Trainer takes a
    LightningModule or torch.compile's ``OptimizedModule`` (tested by type, then unwrapped through
    its ``_orig_mod`` and ``dynamo_ctx``), and runs ``training_step`` and the other hooks, which
    call the network's layers directly; a jitted LightningModule compiles only its ``forward``."""
    if _lightning_module_class(model) is not None:
        return (
            f"thunder.jit({type(model).__name__}): the result runs the LightningModule's "
            "forward compiled, but Lightning's Trainer takes only a LightningModule (or "
            "torch.compile's module) and its training_step calls the layers directly. To "
            "train with thunder, jit the network inside the LightningModule (`self.model = "
            "thunder.jit(self.model)` in __init__ or configure_model) and pass the "
            "LightningModule itself to the Trainer."
        )
    return None
