"""``ThunderModule``: what ``thunder.jit(module)`` returns."""

from __future__ import annotations

import copy
import types
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch

from thunder.jit_function import ThunderFunction
from thunder.module_calls import (
    SignedForward,
    call_without_global_module_hooks,
    presented_class,
    routed_method,
    run_compiled,
)
from thunder.torch_tracers import under_torch_tracer

__all__ = ["ThunderModule"]


class ThunderModule(torch.nn.Module):
    """An ``nn.Module`` that runs the wrapped module's ``__call__`` (hooks and ``forward``) through
    the jit.

    It acts as the wrapped module (``_model``) in ``nn.Module``'s API: it holds the same
    containers (``_parameters``, ``_buffers``, ``_modules``, the state-dict hooks), not copies,
    so ``named_modules()``, ``named_parameters()``, ``state_dict()``, ``get_buffer`` and the
    rest give the original's names, also for a module holding this one; ``register_buffer``,
    ``add_module``, ``register_parameter``, ``jm.attr = value`` and ``del jm.attr`` (any name
    but the wrapper's own: its nn.Module state and call hooks, a ``forward`` set on it) and the
    state-dict hooks registered on ``jm`` act on the original, where its ``forward``
    sees them; ``training`` is the original's flag; ``train()``, ``apply()``, ``to()`` and the
    others that walk the module run the original's (its class's overrides too), and ``jm[0]``,
    ``len(jm)``, ``iter(jm)`` those of a container (``nn.Sequential``). The original's
    ``training`` flags are guarded, so switching recompiles once per mode. Attribute writes and
    in-place buffer updates made by ``forward`` happen on every call, as in eager. Forward and
    backward hooks registered on ``jm`` run around the compiled program; the global module
    hooks (``register_module_forward_hook``) fire for the wrapped modules, inside it, never for
    this wrapper, as eager fires them once per module.

    Copies keep the jit's options, executors and transforms but never the compiled programs
    (they compile again on their first call, with their own ``compile_stats``):
    ``copy.deepcopy``, ``pickle`` and ``torch.save``/``torch.load(..., weights_only=False)``
    copy the module too (its own parameters); ``copy.copy`` wraps a shallow copy of the module
    (its parameters, buffers and submodules shared, its attributes and ``training`` its own, as
    eager's ``copy.copy`` of a module). ``state_dict()`` keys are the original module's either
    way, so ``torch.save(jm.state_dict())`` loads with ``weights_only=True``.

    For tools written for the wrapped module (``thunder/module_calls.py``):
    ``inspect.signature(jm.forward)`` is the wrapped ``forward``'s, and ``jm.forward(x)`` runs
    it compiled as ``model.forward(x)`` does (without the module's own hooks); the wrapped
    module's own methods reached through ``jm`` (``jm.generate(...)``) run with its calls of
    itself (``self(...)``) going to the compiled program; ``jm.__class__`` is the wrapped
    module's class (``isinstance(jm, nn.Linear)`` in an init loop, ``isinstance(jm,
    PreTrainedModel)`` in ``Trainer.save_model``; ``type(jm)`` stays ``ThunderModule``; a
    LightningModule's excepted), and ``jm.__class__ = C`` sets it (parametrize);
    ``jm.forward.__func__`` (the whole call) takes the ThunderModule first (accelerate's mixed precision wraps it and binds the wrapper
    to ``jm``). Lightning's ``Trainer`` takes the LightningModule whose network is jitted, not a
    jitted LightningModule (``thunder.jit`` warns with that advice).
    """

    _model: torch.nn.Module
    _thunder_function: ThunderFunction

    def __init__(self, model: torch.nn.Module, compiled: ThunderFunction) -> None:
        super().__init__()
        # a plain attribute, not a child: the children are the model's own (shared below)
        self.__dict__["_model"] = model
        self.__dict__["_thunder_function"] = compiled  # its own (a jitted model has one too)
        _share_model_state(self)

    # ``inspect.signature(jm.forward)`` is the wrapped forward's (Trainer keeps the input
    # columns it names)
    forward = SignedForward()  # type: ignore[assignment]

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        # isinstance() falls back to __class__: the wrapped module's class, so the walks that
        # pick layers by class (init loops, PreTrainedModel tests in Trainer.save_model) take it
        model = self.__dict__.get("_model")
        return (model is not None and presented_class(model)) or type(self)

    @__class__.setter
    def __class__(self, cls: type) -> None:
        # ``jm.__class__ = C`` is ``model.__class__ = C``: parametrize (and fully_shard) derive a
        # class from the one presented and set it, and the model's forward must run under it
        model = self.__dict__.get("_model")
        if model is None or issubclass(cls, ThunderModule):
            object.__dict__["__class__"].__set__(self, cls)
        else:
            model.__class__ = cls

    @property  # type: ignore[override]
    def training(self) -> bool:
        """The wrapped module's flag (``m.eval()`` shows here, ``jm.training = False`` sets it)."""
        model = self.__dict__.get("_model")
        return True if model is None else bool(model.training)

    @training.setter
    def training(self, mode: bool) -> None:
        model = self.__dict__.get("_model")
        if model is not None:  # None while nn.Module.__init__ sets its default
            model.training = mode

    def __reduce_ex__(self, protocol: Any) -> Any:
        # pickle refuses a __newobj__ (by that name) whose class is not __class__: the same
        # function, by another name
        reduced = super().__reduce_ex__(protocol)
        if isinstance(reduced, tuple) and getattr(reduced[0], "__name__", "") == "__newobj__":
            return (_new_object, *reduced[1:])
        return reduced

    def __setstate__(self, state: dict[str, Any]) -> None:
        # unpickled or deep-copied: the containers are its (copied) model's again, whatever
        # the model's class does when it is copied
        self.__dict__.update(state)
        _share_model_state(self)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if under_torch_tracer():  # torch.jit.trace, torch.export, torch.compile: the wrapped module
            return self._model(*args, **kwargs)
        # nn.Module's call path, three Python frames, only where it has something to do: hooks
        # on this module, a compiled call (compile()), a forward set on this instance
        # (accelerate's autocast wrapper). The global module hooks fire for the wrapped module
        # inside the program, not for this wrapper (eager fires them once).
        if (
            self._compiled_call_impl is not None
            or self._forward_hooks
            or self._forward_pre_hooks
            or self._backward_hooks
            or self._backward_pre_hooks
            or "forward" in self.__dict__
        ):
            return call_without_global_module_hooks(super().__call__, args, kwargs)
        return run_compiled(self, args, kwargs)

    def __copy__(self) -> ThunderModule:
        # Wraps a shallow copy of the module, as eager's copy.copy of it: its own attributes and
        # top-level ``training`` (``cp.scale = 5``, ``cp.eval()`` leave the original as it is),
        # its parameter, buffer and submodule dicts the original's. This wrapper's own hook
        # dicts are copied: a hook on one copy is not the other's.
        new = type(self).__new__(type(self))
        own = {k: v for k, v in vars(self).items() if k not in _MODEL_CONTAINERS}
        new.__dict__.update(
            {k: copy.copy(v) if isinstance(v, (dict, set)) else v for k, v in own.items()}
        )
        model = copy.copy(self._model)
        compiled = self._thunder_function
        new.__dict__["_model"] = model
        new.__dict__["_thunder_function"] = ThunderFunction(
            model, compiled.options, compiled.executors, compiled.transforms
        )
        _share_model_state(new)
        return new

    def __repr__(self) -> str:
        model = repr(self._model).replace("\n", "\n  ")
        return f"ThunderModule(\n  (_model): {model}\n)"

    def _get_name(self) -> str:
        # repr's name: its own, not the class it presents to isinstance (a transformers model)
        return "ThunderModule"

    def get_model(self) -> torch.nn.Module:
        """The original module."""
        return self._model

    # -- what walks the module: the original's, as its class defines it ---------------------

    def state_dict(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        return self._model.state_dict(*args, **kwargs)

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False
    ) -> Any:
        return self._model.load_state_dict(state_dict, strict=strict, assign=assign)

    def _save_to_state_dict(self, destination: Any, prefix: str, keep_vars: bool) -> None:
        self._model._save_to_state_dict(destination, prefix, keep_vars)

    def _load_from_state_dict(self, *args: Any, **kwargs: Any) -> None:
        # Reached when a module holding this one loads a state dict (a LightningModule whose
        # network was jitted, from its checkpoint): nn.Module.load_state_dict calls it, then
        # walks ``_modules`` (the wrapped module's children)
        self._model._load_from_state_dict(*args, **kwargs)

    def named_parameters(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, torch.nn.Parameter]]:
        return self._model.named_parameters(prefix, recurse, remove_duplicate)

    def named_buffers(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, torch.Tensor]]:
        return self._model.named_buffers(prefix, recurse, remove_duplicate)

    def train(self, mode: bool = True) -> ThunderModule:
        self._model.train(mode)
        return self

    def apply(self, fn: Callable[[torch.nn.Module], None]) -> ThunderModule:  # type: ignore[override]
        self._model.apply(fn)  # fn sees the original module, as it sees the children
        return self

    def _apply(self, fn: Callable[..., Any], recurse: bool = True) -> ThunderModule:
        self._model._apply(fn, recurse)  # type: ignore[no-untyped-call]  # the class's own (RNNs')
        return self

    # -- a container's protocol (nn.Sequential, nn.ModuleList, nn.ModuleDict) -----------------

    def _container(self) -> Any:
        return self._model  # what the protocol asks is the original's to answer

    def __getitem__(self, key: Any) -> Any:
        return self._container()[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self._container()[key] = value

    def __delitem__(self, key: Any) -> None:
        del self._container()[key]

    def __len__(self) -> int:
        return len(self._container())

    def __iter__(self) -> Iterator[Any]:
        return iter(self._container())

    def __contains__(self, item: Any) -> bool:
        return item in self._container()

    def __bool__(self) -> bool:
        # bool() asks __bool__ before __len__: a module without a length stays true, an empty
        # container is false, as the original
        return bool(self._model)

    # -- attributes: those of the original module are its own --------------------------------

    def _model_attribute(self, name: str) -> torch.nn.Module | None:
        """The wrapped module, where ``name`` is not one of this wrapper's own attributes (its
        ``nn.Module`` state, its call hooks, a ``forward`` set on it, its class's): ``jm.name =
        value`` and ``del jm.name`` act on the module as ``model.name = value`` would (an
        attribute, a class default overridden, a property's setter, a parameter, buffer or
        submodule), where ``forward`` sees them."""
        model: torch.nn.Module | None = self.__dict__.get("_model")
        if (
            model is None
            or name in self.__dict__
            or hasattr(type(self), name)
            or name in _ABOUT_OWN_FORWARD
        ):
            return None
        return model

    def __setattr__(self, name: str, value: Any) -> None:
        model = self._model_attribute(name)
        if model is not None:
            setattr(model, name, value)
        else:
            super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        model = self._model_attribute(name)
        if model is not None:
            delattr(model, name)
        else:
            super().__delattr__(name)

    def __getattr__(self, name: str) -> Any:
        if name == "__deepcopy__":  # the model's class's (parametrize's) would copy the model only
            raise AttributeError(name)
        try:
            return super().__getattr__(name)
        except AttributeError:
            model = self.__dict__.get("_model")
            if model is None:  # not yet unpickled
                raise
            found = getattr(model, name)
        # the model's own methods: its calls of itself (generate's) run the compiled program
        if type(found) is types.MethodType and found.__self__ is model and name[:2] != "__":
            return routed_method(self, found)
        return found


# Set on the wrapper by tools beside the ``forward`` they set on it, and read back from its
# ``__dict__`` (accelerate's ``unwrap_model(keep_fp32_wrapper=False)``): the wrapper's own.
_ABOUT_OWN_FORWARD = frozenset({"_original_forward"})

# The wrapped module's containers, which its ThunderModule holds too (the same objects): what
# nn.Module's methods read and write through them is the original's. Its call hooks are not
# among them: those registered on the wrapper run around the compiled program.
_MODEL_CONTAINERS = (
    "_parameters",
    "_buffers",
    "_non_persistent_buffers_set",
    "_modules",
    "_state_dict_hooks",
    "_state_dict_pre_hooks",
    "_load_state_dict_pre_hooks",
    "_load_state_dict_post_hooks",
)


def _share_model_state(jm: ThunderModule) -> None:
    model_state = jm.__dict__["_model"].__dict__
    for name in _MODEL_CONTAINERS:
        if name in model_state:  # absent only while a cycle through jm is being unpickled
            jm.__dict__[name] = model_state[name]


def _new_object(cls: type, *args: Any) -> Any:
    return cls.__new__(cls, *args)
