"""The program of a ``thunder.jit`` call that runs split: ``torch.compile`` with thunder's backend,
with dynamo's settings that keep it equal to eager set while dynamo compiles its frames.

Dynamo reads its config while it converts a frame (tracing, building guards, deciding whether
to raise its own failure), never on a call its guards let through. The settings are therefore
applied around dynamo's frame callback, which runs only on a cache miss: a call that hits the
cache pays nothing for them (setting and restoring them around every call cost about 10 us),
and they never leak into the user's own ``torch.compile`` programs, compiled at the same time
or in another thread.
"""

from __future__ import annotations

import contextlib
import unittest.mock
from collections.abc import Callable
from typing import Any

import torch
import torch._dynamo

__all__ = ["compile_split"]

# Dynamo's config while it compiles a split program's frames:
_SPLIT_CONFIG = {
    # Dynamo's own failures run their frame eagerly, never twice.
    "suppress_errors": True,
    # Dynamo's own rewrites (`addcmul_`/`addcdiv_` with `value`, `add_` with a tensor alpha,
    # `_foreach_pow`) read all operands before writing: where they overlap the written
    # tensor eager's kernel gives another result, and fma rounds otherwise.
    "enable_dynamo_decompositions": False,
    # Hooks added to the modules later must reach the call, as in thunder's own programs
    # (dynamo's default leaves them unguarded: a stale result).
    "skip_nnmodule_hook_guards": False,
    # numpy's random functions draw from numpy's generator, natively (dynamo's default draws
    # them from torch's: other numbers, and numpy's state left where it was).
    "use_numpy_random_stream": True,
}


def _outside_random_objects_natively() -> contextlib.AbstractContextManager[Any]:
    """Dynamo takes a ``random.Random`` found outside the frame (a global ``random.Random(0)``)
    as a copy of its state at compile time and answers ``random``, ``randint``, ``randrange``
    and ``uniform`` from that copy on every call: the same numbers each time, the object's
    state never advanced. Told it cannot model the object, dynamo calls its methods natively,
    as eager does (as it does for a subclass of it). (The module's functions, ``random.random``,
    dynamo draws natively already.)"""
    try:
        from torch._dynamo.variables.misc import RandomVariable
    except ImportError:  # (another torch: nothing to turn off)
        return contextlib.nullcontext()
    if not hasattr(RandomVariable, "is_supported_random_obj"):
        return contextlib.nullcontext()
    return unittest.mock.patch.object(
        RandomVariable, "is_supported_random_obj", staticmethod(_not_modelled)
    )


def _not_modelled(value: Any) -> bool:
    return False


def _configured(callback: Any) -> Any:
    """Dynamo's frame callback with ``_SPLIT_CONFIG`` set while it runs."""

    def convert_frame(*args: Any, **kwargs: Any) -> Any:
        with torch._dynamo.config.patch(_SPLIT_CONFIG), _outside_random_objects_natively():
            return callback(*args, **kwargs)

    # How dynamo finds the backend below a callback wrapper (``innermost_backend``).
    convert_frame._torchdynamo_orig_backend = callback  # type: ignore[attr-defined]
    return convert_frame


def compile_split(target: Callable[..., Any], backend: Callable[..., Any]) -> Callable[..., Any]:
    """``torch.compile(target, backend=backend)`` with ``_SPLIT_CONFIG`` set while dynamo
    compiles (the frame callback is not part of torch's public API: where it is missing the
    config is set around every call instead)."""
    context: Any = torch._dynamo.optimize(backend=backend)
    callback = getattr(context, "callback", None)
    if not callable(callback):
        compiled = torch.compile(target, backend=backend)

        def call_configured(*args: Any, **kwargs: Any) -> Any:
            with torch._dynamo.config.patch(_SPLIT_CONFIG), _outside_random_objects_natively():
                return compiled(*args, **kwargs)

        return call_configured
    context.callback = _configured(callback)
    compiled_target: Callable[..., Any] = context(target)
    return compiled_target
