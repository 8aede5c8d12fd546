"""A ``ThunderModule`` under PyTorch's own tracers. ``torch.jit.trace`` (and so tensorboard's
``SummaryWriter.add_graph``), ``torch.export.export`` and ``torch.compile`` record what a module
does in torch ops; thunder's compiled program is no such thing (it is Python that calls the
executors' kernels), so under them a ``ThunderModule`` runs the module it wraps, eagerly, and they
trace, export or compile that module: the user's model, with its parameters under the names of
``jm.state_dict()``."""

from __future__ import annotations

from collections.abc import Callable

import torch

__all__ = ["is_exporting", "under_torch_tracer"]


# Bound once: asked on every call of a ThunderModule. (Dynamo and thunder's own tracing know
# these functions by identity, not by name.)
_is_compiling = torch.compiler.is_compiling
_tracing_state = torch._C._get_tracing_state
# torch.export sets it while it traces (torch 2.5 and later: before, export of a ThunderModule
# fails as it does without this module)
is_exporting: Callable[[], bool] = getattr(torch.compiler, "is_exporting", lambda: False)


def under_torch_tracer() -> bool:
    """True while ``torch.jit.trace``, ``torch.export`` or dynamo (``torch.compile``) records the
    call (dynamo folds ``is_compiling()`` to True in the frames it traces). Also True while
    thunder traces a function that calls a ``ThunderModule``: thunder answers ``is_compiling()``
    with True, and the wrapped module's calls are traced into the outer program."""
    return _is_compiling() or _tracing_state() is not None
