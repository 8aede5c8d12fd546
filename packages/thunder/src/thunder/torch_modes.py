"""Calls of a jitted callable under a user's ``torch.overrides.TorchFunctionMode`` or
``torch.utils._python_dispatch.TorchDispatchMode``.

A function mode answers every torch call eager makes (``Tensor.add`` for ``x + 1``); the compiled
program makes other calls (``torch.add``, fused kernels) and tracing makes calls of its own, so a
mode that looks at or changes what it is handed would see another program. The call runs
eagerly, with one warning per jitted callable and mode class. The modes thunder models are not
such modes: ``with torch.device(...)``/``torch.set_default_device`` push a ``DeviceContext``,
which the cache key covers as the default device.

A dispatch mode (a logging or counting mode, ``FlopCounterMode``, ``FakeTensorMode``) answers
every aten call: the compiled program makes others (no ``detach`` of a gradient, an ``add_`` to
accumulate it, the prologue's ``_local_scalar_dense``), so such calls run eagerly in the same way.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._device import DeviceContext

__all__ = [
    "dispatch_modes_active",
    "function_modes_active",
    "user_dispatch_mode",
    "user_function_mode",
]

# 0 when no torch function mode is active (a C call: the cached path checks it).
function_modes_active = torch._C._len_torch_function_stack
# 0 when no torch dispatch mode is active, user's or torch's own (infra modes included).
dispatch_modes_active = torch._C._len_torch_dispatch_stack

_MODELED_MODES: tuple[type, ...] = (DeviceContext,)


def user_function_mode() -> Any | None:
    """The innermost active torch function mode thunder does not model, or None."""
    stack = torch.overrides._get_current_function_mode_stack()  # type: ignore[no-untyped-call]
    for mode in reversed(stack):
        if type(mode) not in _MODELED_MODES:
            return mode
    return None


def user_dispatch_mode() -> Any | None:
    """The innermost active torch dispatch mode, or None."""
    stack = torch.utils._python_dispatch._get_current_dispatch_mode_stack()
    return stack[-1] if stack else None
