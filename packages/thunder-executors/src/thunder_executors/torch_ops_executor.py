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

__all__ = ["ATEN_OPS", "KEPT_OPS", "torch_ops_executor"]

# ltorch ops worth keeping whole when torch runs them.
KEPT_OPS = (
    "linear", "matmul", "mm", "bmm", "addmm", "baddbmm", "layer_norm", "group_norm", "rms_norm",
    "scaled_dot_product_attention", "softmax", "log_softmax", "cross_entropy", "nll_loss",
    "embedding", "conv1d", "conv2d", "conv3d", "gelu", "silu", "mean", "roll",
)  # fmt: skip

# Internal ops (no torch name; see thunder_ir.ops.nn_backward) run with aten kernels.
ATEN_OPS = (
    "native_layer_norm", "layer_norm_backward", "gelu_backward", "sdpa_flash",
    "sdpa_flash_backward", "convolution_backward_input", "convolution_backward_weight",
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


def _layer_norm_backward(
    grad_out: Any, a: Any, normalized_shape: Any, mean: Any, rstd: Any, weight: Any, bias: Any
) -> tuple[Any, ...]:
    import torch

    grads = torch.ops.aten.native_layer_norm_backward(
        grad_out,
        a,
        normalized_shape,
        mean,
        rstd,
        weight,
        bias,
        [True, weight is not None, bias is not None],
    )
    return tuple(g for g in grads if g is not None)


def _gelu_backward(grad_out: Any, a: Any, approximate: str = "none") -> Any:
    import torch

    return torch.ops.aten.gelu_backward(grad_out, a, approximate=approximate)


def _sdpa_flash(q: Any, k: Any, v: Any, is_causal: bool, scale: float) -> tuple[Any, Any]:
    import torch

    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(  # type: ignore[no-any-return]
        q, k, v, 0.0, is_causal, scale=scale
    )


def _sdpa_flash_backward(
    grad_out: Any, q: Any, k: Any, v: Any, out: Any, lse: Any, is_causal: bool, scale: float
) -> tuple[Any, Any, Any]:
    import torch

    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(  # type: ignore[no-any-return]
        grad_out, q, k, v, out, lse, 0.0, is_causal, scale=scale
    )


def _convolution_backward(which: int) -> Callable[..., Any]:
    """One gradient of ``aten.convolution_backward`` (0: the input's, 1: the weight's), the
    other masked off as eager's autograd masks a gradient nobody needs."""

    def run(grad_out: Any, a: Any, w: Any, *conv: Any) -> Any:
        import torch

        mask = [which == 0, which == 1, False]
        return torch.ops.aten.convolution_backward(grad_out, a, w, None, *conv, mask)[which]

    run.__name__ = ("convolution_backward_input", "convolution_backward_weight")[which]
    return run


def _on_cpu(q: Any, *args: Any, **kwargs: Any) -> bool:
    return str(q.device.type) == "cpu"


def _aten_ops() -> dict[str, Callable[..., Any]]:
    """Internal ops (no torch name) and the aten kernels that run them: the forwards that save
    what a fused backward needs, and those backwards (see ``thunder_ir.ops.nn_backward``)."""
    import torch

    return {
        "native_layer_norm": torch.ops.aten.native_layer_norm,
        "layer_norm_backward": _layer_norm_backward,
        "gelu_backward": _gelu_backward,
        "sdpa_flash": _sdpa_flash,
        "sdpa_flash_backward": _sdpa_flash_backward,
        "convolution_backward_input": _convolution_backward(0),
        "convolution_backward_weight": _convolution_backward(1),
    }


# Kernels that exist on CPU only (other devices run these ops decomposed).
_CPU_ONLY = frozenset({"sdpa_flash", "sdpa_flash_backward"})


def _register_aten() -> None:
    from thunder_ir import ops

    fns = _aten_ops()
    assert set(fns) == set(ATEN_OPS)
    for name, fn in fns.items():
        sym = Symbol(name, None, module="torch_ops", impl=fn, id=f"torch_ops::{name}")
        checker = _on_cpu if name in _CPU_ONLY else None
        torch_ops_executor.register_implementation(
            ops.ALL_OPS[name], translate=same_arguments(sym), checker=checker
        )


_register()
_register_aten()
