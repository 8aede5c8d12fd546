"""How a ``ThunderModule`` looks to tools written for the module it wraps: its ``forward``'s
signature, the wrapped model's own methods calling the compiled program, the class it
presents to ``isinstance`` (a Hugging Face model), and what to do instead for Lightning's
``Trainer``, which takes no wrapper but torch.compile's."""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["SignedForward", "lightning_module_advice", "presented_class", "routed_method"]

_ABSENT = object()
_SLOT = "_compiled_call_impl"  # what Module.__call__ calls instead of itself when set


class _BoundForward:
    """``jm.forward``: runs the compiled program; ``inspect.signature`` gives the wrapped
    forward's parameters."""

    __slots__ = ("_module",)

    def __init__(self, module: Any) -> None:
        self._module = module

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._module._thunder_function(*args, **kwargs)

    @property
    def __signature__(self) -> inspect.Signature:
        return inspect.signature(self._module._model.forward)

    @property
    def __func__(self) -> Callable[..., Any]:
        # what a bound method has: accelerate's mixed precision wraps ``forward.__func__`` and
        # binds the wrapper to the module, and its ``unwrap_model(keep_fp32_wrapper=False)``
        # binds what it unwraps to back to the module; the function takes the ThunderModule first
        def forward(module: Any, /, *args: Any, **kwargs: Any) -> Any:
            return module._thunder_function(*args, **kwargs)

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


def _forward(self: Any, *args: Any, **kwargs: Any) -> Any:
    return self._thunder_function(*args, **kwargs)


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
    """The class a ThunderModule of ``model`` presents as its ``__class__``: the model's own for
    a transformers ``PreTrainedModel`` (its Trainer, pipelines and ``unwrap_model`` decide by
    ``isinstance``, and recognize no wrapper but their own), else None."""
    hf = sys.modules.get("transformers.modeling_utils")
    base = getattr(hf, "PreTrainedModel", None)
    return type(model) if base is not None and isinstance(model, base) else None


def lightning_module_advice(model: torch.nn.Module) -> str | None:
    """For a Lightning ``LightningModule``: why ``Trainer.fit(thunder.jit(model))`` cannot work and
    what works instead (``thunder.jit`` warns with it), else None. The Trainer takes a
    LightningModule or torch.compile's ``OptimizedModule`` (tested by type, then unwrapped through
    its ``_orig_mod`` and ``dynamo_ctx``), and runs ``training_step`` and the other hooks, which
    call the network's layers directly; a jitted LightningModule compiles only its ``forward``."""
    for package in ("lightning.pytorch", "pytorch_lightning"):
        base = getattr(sys.modules.get(package), "LightningModule", None)
        if base is not None and isinstance(model, base):
            return (
                f"thunder.jit({type(model).__name__}): the result runs the LightningModule's "
                "forward compiled, but Lightning's Trainer takes only a LightningModule (or "
                "torch.compile's module) and its training_step calls the layers directly. To "
                "train with thunder, jit the network inside the LightningModule (`self.model = "
                "thunder.jit(self.model)` in __init__ or configure_model) and pass the "
                "LightningModule itself to the Trainer."
            )
    return None
