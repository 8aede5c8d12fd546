"""The "torch_ops" executor: high-level torch-language ops run as the torch function they mirror.

The torch executor runs prims, so a composite such as ``ltorch.layer_norm`` runs as its
decomposition (a dozen calls). Where torch has a good kernel for the whole op (linear, attention,
normalizations, softmax, losses, convolutions), this executor keeps the op and calls that kernel:
``t5 = torch_ops.layer_norm(t0, (128,), t1, t2)``. The torch function is derived from the op's
declared torch names (the ``torch.nn.functional`` one first), never written here.

It is not in the default executor list: the OpInfo consistency suite runs ops through their
decompositions, which is what it checks. Put it before "torch" to keep these ops whole.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from thunder_executors.executor import OperatorExecutor, register_executor, same_arguments
from thunder_ir import Symbol

__all__ = ["KEPT_OPS", "torch_ops_executor"]

# ltorch ops worth keeping whole when torch runs them.
KEPT_OPS = (
    "linear", "matmul", "mm", "bmm", "addmm", "baddbmm", "layer_norm", "group_norm", "rms_norm",
    "scaled_dot_product_attention", "softmax", "log_softmax", "cross_entropy", "nll_loss",
    "embedding", "conv1d", "conv2d", "conv3d", "gelu", "silu",
)  # fmt: skip

torch_ops_executor = OperatorExecutor("torch_ops")
register_executor(torch_ops_executor)


def _torch_function(op: Symbol) -> Callable[..., Any] | None:
    from thunder_ir.ops import resolve_torch_name

    names = sorted(op.torch_names, key=lambda n: not n.startswith("torch.nn.functional."))
    for name in names:
        if name.startswith("torch.Tensor."):
            continue
        fn = resolve_torch_name(name)
        if callable(fn):
            return fn  # type: ignore[no-any-return]
    return None


def _register() -> None:
    from thunder_ir import ops

    for name in KEPT_OPS:
        op = ops.ALL_OPS.get(name)
        fn = None if op is None else _torch_function(op)
        if op is None or fn is None:
            continue
        sym = Symbol(name, None, module="torch_ops", impl=fn, id=f"torch_ops::{name}")
        torch_ops_executor.register_implementation(op, translate=same_arguments(sym))


_register()
