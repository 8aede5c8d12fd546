"""``ThunderModule``: what ``thunder.jit(module)`` returns."""

from __future__ import annotations

import copy
import types
from collections.abc import Iterator, Mapping
from typing import Any

import torch
import torch.nn.modules.module as _module_hooks

from thunder.jit_function import ThunderFunction
from thunder.module_calls import SignedForward, presented_class, routed_method
from thunder.torch_tracers import export_named_modules, is_exporting, under_torch_tracer

__all__ = ["ThunderModule"]


class ThunderModule(torch.nn.Module):
    """An ``nn.Module`` that runs the wrapped module's ``__call__`` (hooks and ``forward``) through
    the jit.

    Parameters and buffers are the original module's (shared, not copied); ``state_dict`` and
    ``load_state_dict`` use the original's names, and so does ``load_state_dict`` of a module
    holding this one (``_load_from_state_dict``); ``train()``/``eval()`` reach the original (its
    ``training`` flags are guarded, so switching recompiles once per mode). Attribute writes and
    in-place buffer updates made by ``forward`` happen on every call, as in eager.

    Copies keep the jit's options, executors and transforms but never the compiled programs
    (they compile again on their first call, with their own ``compile_stats``):
    ``copy.deepcopy``, ``pickle`` and ``torch.save``/``torch.load(..., weights_only=False)``
    copy the module too (its own parameters); ``copy.copy`` wraps the same module (parameters
    shared, as ``copy.copy`` of a module shares them). ``state_dict()`` keys are the original
    module's either way, so ``torch.save(jm.state_dict())`` loads with ``weights_only=True``.

    For tools written for the wrapped module (``thunder/module_calls.py``):
    ``inspect.signature(jm.forward)`` is the wrapped ``forward``'s; the wrapped module's own
    methods reached through ``jm`` (``jm.generate(...)``) run with its calls of itself
    (``self(...)``) going to the compiled program; a transformers ``PreTrainedModel`` wrapped
    presents its class as ``jm.__class__`` (``isinstance(jm, PreTrainedModel)``, as
    ``Trainer.save_model`` asks; ``type(jm)`` stays ``ThunderModule``); ``jm.forward.__func__``
    takes the ThunderModule first (accelerate's mixed precision wraps it and binds the wrapper
    to ``jm``). Lightning's ``Trainer`` takes the LightningModule whose network is jitted, not a
    jitted LightningModule (``thunder.jit`` warns with that advice).
    """

    def __init__(self, model: torch.nn.Module, compiled: ThunderFunction) -> None:
        super().__init__()
        self._model = model
        self._thunder_function = compiled
        self.register_load_state_dict_post_hook(_original_key_names)  # type: ignore[no-untyped-call]

    # ``inspect.signature(jm.forward)`` is the wrapped forward's (Trainer keeps the input
    # columns it names)
    forward = SignedForward()  # type: ignore[assignment]

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        # isinstance() falls back to __class__: a transformers model wrapped stays one to the
        # tools that test for PreTrainedModel (Trainer.save_model writes its config)
        model = self.__dict__.get("_modules", {}).get("_model")
        return (model is not None and presented_class(model)) or type(self)

    def __reduce_ex__(self, protocol: Any) -> Any:
        # pickle refuses a __newobj__ (by that name) whose class is not __class__: the same
        # function, by another name
        reduced = super().__reduce_ex__(protocol)
        if isinstance(reduced, tuple) and getattr(reduced[0], "__name__", "") == "__newobj__":
            return (_new_object, *reduced[1:])
        return reduced

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if under_torch_tracer():  # torch.jit.trace, torch.export, torch.compile: the wrapped module
            return self._model(*args, **kwargs)
        # nn.Module's call path, three Python frames, only where it has something to do: hooks
        # on this module or on all modules, a compiled call (compile()), a torch.jit trace, a
        # forward set on this instance (accelerate's autocast wrapper)
        if (
            self._forward_hooks
            or self._forward_pre_hooks
            or self._backward_hooks
            or self._backward_pre_hooks
            or self._compiled_call_impl is not None
            or _module_hooks._global_forward_hooks
            or _module_hooks._global_forward_pre_hooks
            or _module_hooks._global_backward_hooks
            or _module_hooks._global_backward_pre_hooks
            or torch._C._get_tracing_state()
            or "forward" in self.__dict__
        ):
            return super().__call__(*args, **kwargs)
        return self._thunder_function(*args, **kwargs)

    def __copy__(self) -> ThunderModule:
        # Container dicts copied: a hook or attribute added to one copy is not the other's.
        new = type(self).__new__(type(self))
        new.__dict__.update(
            {k: copy.copy(v) if isinstance(v, (dict, set)) else v for k, v in vars(self).items()}
        )
        new.__dict__["_thunder_function"] = copy.copy(self._thunder_function)
        return new

    def _get_name(self) -> str:
        # repr's name: its own, not the class it presents to isinstance (a transformers model)
        return "ThunderModule"

    def get_model(self) -> torch.nn.Module:
        """The original module."""
        return self._model

    def state_dict(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        return self._model.state_dict(*args, **kwargs)

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False
    ) -> Any:
        return self._model.load_state_dict(state_dict, strict=strict, assign=assign)

    def _load_from_state_dict(
        self,
        state_dict: dict[str, Any],
        prefix: str,
        local_metadata: dict[str, Any],
        strict: bool,
        missing_keys: list[str],
        unexpected_keys: list[str],
        error_msgs: list[str],
    ) -> None:
        # Reached when a module holding this one loads a state dict (a LightningModule whose
        # network was jitted, from its checkpoint): nn.Module.load_state_dict walks ``_modules``,
        # so the wrapped module's entries are looked up under ``<prefix>_model.``, while the
        # keys are the original module's, as ``state_dict()`` writes them. They move there;
        # ``_original_key_names`` gives the keys it reports missing or unexpected their names back.
        inner = prefix + _WRAPPED
        model = self._model
        name = _WRAPPED[:-1]
        # a key under ``<prefix>_model.`` is a path through this module unless the wrapped
        # module has an entry of that name itself
        every_key = name in model._modules or name in model._parameters or name in model._buffers
        for key in [k for k in state_dict if k.startswith(prefix)]:
            if every_key or not key.startswith(inner):
                state_dict[inner + key[len(prefix) :]] = state_dict.pop(key)
        self.__dict__[_LOADING_UNDER] = prefix
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )

    def named_parameters(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, torch.nn.Parameter]]:
        return self._model.named_parameters(prefix, recurse, remove_duplicate)

    def named_buffers(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, torch.Tensor]]:
        return self._model.named_buffers(prefix, recurse, remove_duplicate)

    def named_modules(
        self,
        memo: set[torch.nn.Module] | None = None,
        prefix: str = "",
        remove_duplicate: bool = True,
    ) -> Iterator[tuple[str, torch.nn.Module]]:
        if is_exporting():  # names as named_parameters' (thunder/torch_tracers.py)
            return export_named_modules(self, memo, prefix, remove_duplicate)
        modules: Iterator[tuple[str, torch.nn.Module]] = super().named_modules(
            memo, prefix, remove_duplicate
        )
        return modules

    def _model_member(self, name: str) -> torch.nn.Module | None:
        """The wrapped module, where ``name`` is one of its parameters, buffers or submodules
        and not an attribute of this wrapper: ``jm.name = value`` (``torch.func.functional_call``
        swapping a top-level parameter) sets it there, where the compiled program reads it."""
        model = self.__dict__.get("_modules", {}).get("_model")
        if model is None or name in self.__dict__ or name in self._modules:
            return None
        owns = name in model._parameters or name in model._buffers or name in model._modules
        return model if owns else None  # type: ignore[no-any-return]

    def __setattr__(self, name: str, value: Any) -> None:
        model = self._model_member(name)
        if model is not None:
            setattr(model, name, value)
        else:
            super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        model = self._model_member(name)
        if model is not None:
            delattr(model, name)
        else:
            super().__delattr__(name)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            model = self._modules["_model"]
            found = getattr(model, name)
        # the model's own methods: its calls of itself (generate's) run the compiled program
        if type(found) is types.MethodType and found.__self__ is model and name[:2] != "__":
            return routed_method(self, found)
        return found


def _new_object(cls: type, *args: Any) -> Any:
    return cls.__new__(cls, *args)


_WRAPPED = "_model."  # the wrapped module's path under a ThunderModule
_LOADING_UNDER = "_thunder_loading_under"  # set while an enclosing module's load passes here


def _original_key_names(module: torch.nn.Module, incompatible: Any) -> None:
    """``load_state_dict`` post-hook of every ThunderModule: the keys that a load through an
    enclosing module (``ThunderModule._load_from_state_dict``) reports missing or unexpected
    under ``<prefix>_model.`` get the original module's names back."""
    prefix = module.__dict__.pop(_LOADING_UNDER, None)
    if prefix is None:
        return
    inner = prefix + _WRAPPED
    for keys in (incompatible.missing_keys, incompatible.unexpected_keys):
        keys[:] = [prefix + k[len(inner) :] if k.startswith(inner) else k for k in keys]
