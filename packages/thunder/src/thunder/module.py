"""``ThunderModule``: what ``thunder.jit(module)`` returns."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import torch
import torch.nn.modules.module as _module_hooks

from thunder.jit_function import ThunderFunction

__all__ = ["ThunderModule"]


class ThunderModule(torch.nn.Module):
    """An ``nn.Module`` that runs the wrapped module's ``__call__`` (hooks and ``forward``) through
    the jit.

    Parameters and buffers are the original module's (shared, not copied); ``state_dict`` and
    ``load_state_dict`` use the original's names; ``train()``/``eval()`` reach the original (its
    ``training`` flags are guarded, so switching recompiles once per mode). Attribute writes and
    in-place buffer updates made by ``forward`` happen on every call, as in eager.
    """

    def __init__(self, model: torch.nn.Module, compiled: ThunderFunction) -> None:
        super().__init__()
        self._model = model
        self._thunder_function = compiled

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self._thunder_function(*args, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # nn.Module's call path, three Python frames, only where it has something to do: hooks
        # on this module or on all modules, a compiled call (compile()), a torch.jit trace
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
        ):
            return super().__call__(*args, **kwargs)
        return self._thunder_function(*args, **kwargs)

    def get_model(self) -> torch.nn.Module:
        """The original module."""
        return self._model

    def state_dict(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        return self._model.state_dict(*args, **kwargs)

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False
    ) -> Any:
        return self._model.load_state_dict(state_dict, strict=strict, assign=assign)

    def named_parameters(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, torch.nn.Parameter]]:
        return self._model.named_parameters(prefix, recurse, remove_duplicate)

    def named_buffers(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, torch.Tensor]]:
        return self._model.named_buffers(prefix, recurse, remove_duplicate)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["_model"], name)
