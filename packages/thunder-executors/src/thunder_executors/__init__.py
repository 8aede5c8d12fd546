"""thunder_executors: run Thunder IR traces.

``transform_for_execution(trace, executors=("torch",))`` assigns every bound symbol of a trace to
an executor and returns an execution trace whose ``python_callable()`` runs it. Executors:

- ``torch``: every prim as one eager torch call (always available; the last resort).
- ``torch_ops``: high-level ops (linear, attention, layer_norm...) kept whole, run by torch.
- ``torchcompile``: fusion regions compiled by ``torch.compile`` (inductor).
- ``triton``: hand-written Triton kernels (cross-entropy, softmax) when triton is importable.
- ``nvfuser``: fusion regions as nvFuser fusion definitions when nvfuser and CUDA are present.

Importing this package never requires triton or nvFuser; ``get_available_executors()`` and
``executor_availability()`` say which executors can run here and why the others cannot.
"""

from thunder_executors import nvfuser_executor as _nvfuser_executor  # noqa: F401  (registers "nvfuser")
from thunder_executors import torch_executor as _torch_executor  # noqa: F401  (registers "torch")
from thunder_executors import torch_ops_executor as _torch_ops_executor  # noqa: F401  (registers "torch_ops")
from thunder_executors import torchcompile as _torchcompile  # noqa: F401  (registers "torchcompile")
from thunder_executors import triton_executor as _triton_executor  # noqa: F401  (registers "triton")
from thunder_executors.__about__ import __version__
from thunder_executors.assignment import (
    ExecutionTrace,
    recommended_executors,
    transform_for_execution,
)
from thunder_executors.executor import (
    Executor,
    FusionExecutor,
    OperatorExecutor,
    executor_availability,
    get_all_executors,
    get_available_executors,
    get_executor,
    register_executor,
)

__all__ = [
    "ExecutionTrace",
    "Executor",
    "FusionExecutor",
    "OperatorExecutor",
    "__version__",
    "executor_availability",
    "get_all_executors",
    "get_available_executors",
    "get_executor",
    "recommended_executors",
    "register_executor",
    "transform_for_execution",
]
