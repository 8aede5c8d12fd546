"""Python's comparisons of tensors inside containers, as eager makes them, under thunder's backend.

``list.count``, ``in`` on a list, tuple or deque (``operator.contains``, ``__contains__``),
``operator.countOf`` and the builtins ``min``/``max`` compare with ``==`` or ``<`` and take the
truth value of each result (``PyObject_RichCompareBool``, after an identity check): for a tensor
of more than one element that raises, for one element it is a decision on its value. Dynamo
(torch 2.13) makes other results: ``countOf``'s polyfill sums the comparison tensors,
``iter_contains`` ors them (or skips tensor items when the value searched is a constant), and
``min``/``max`` become ``torch.minimum``/``torch.clamp`` (a tensor where eager returns one of the
arguments, or raises). While dynamo traces a frame for thunder's backend (``thunder.jit``'s split
calls, ``thunderfx``), these calls are a graph break instead: Python runs them natively, as in
eager. Other backends keep dynamo's behaviour.
"""

from __future__ import annotations

import operator
from typing import Any

__all__ = ["install"]

_installed = False


def install() -> None:
    """Wraps dynamo's handlers of these calls (once per process)."""
    global _installed
    if _installed:
        return
    _installed = True
    from torch._dynamo import utils
    from torch._dynamo.variables import builtin, functions, lists

    dynamo_iter_contains = utils.iter_contains

    def iter_contains(items: Any, search: Any, tx: Any, check_tensor_identity: bool = False) -> Any:
        items = list(items)
        if (
            not check_tensor_identity  # sets and dict keys: tensors hash by identity
            and _for_thunder(tx)
            and (_holds_tensor(search) or any(map(_holds_tensor, items)))
        ):
            _run_natively("`in` on a container holding tensors")
        return dynamo_iter_contains(items, search, tx, check_tensor_identity)

    utils.iter_contains = iter_contains
    setattr(lists, "iter_contains", iter_contains)  # imported by name there

    polyfilled_call = functions.PolyfilledFunctionVariable.call_function

    def call_function(self: Any, tx: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if self.fn is operator.countOf and _for_thunder(tx) and any(map(_holds_tensor, args)):
            _run_natively("count() of a container holding tensors")
        return polyfilled_call(self, tx, args, kwargs)

    functions.PolyfilledFunctionVariable.call_function = call_function  # type: ignore[method-assign]

    min_max_binary = builtin.BuiltinVariable._call_min_max_binary

    def call_min_max_binary(self: Any, tx: Any, a: Any, b: Any) -> Any:
        both = a is not None and b is not None
        if both and _for_thunder(tx) and (_compares_elementwise(a) or _compares_elementwise(b)):
            _run_natively(f"{self.fn.__name__}() of tensors")
        return min_max_binary(self, tx, a, b)

    builtin.BuiltinVariable._call_min_max_binary = call_min_max_binary  # type: ignore[method-assign]


def _for_thunder(tx: Any) -> bool:
    """Whether the frame ``tx`` traces is compiled for a ``ThunderCompiler`` (through the
    wrappers torch.compile puts around a backend)."""
    from thunder.dynamo.compiler import ThunderCompiler

    backend = getattr(getattr(tx, "output", None), "compiler_fn", None)
    for _ in range(8):
        if backend is None:
            return False
        if isinstance(backend, ThunderCompiler):
            return True
        backend = (
            getattr(backend, "_torchdynamo_orig_backend", None)  # WrapBackendDebug
            or getattr(backend, "compiler_fn", None)  # torch._TorchCompileWrapper
            or getattr(backend, "func", None)  # functools.partial
            or getattr(backend, "__wrapped__", None)
        )
    return False


def _compares_elementwise(vt: Any) -> bool:
    """A tensor (or NumPy array) whose ``==``/``<`` is elementwise: Python numbers dynamo
    holds as tensors (``UnspecializedPythonVariable``, ``.item()``'s ``FakeItemVariable``) are
    not."""
    from torch._dynamo.variables.tensor import FakeItemVariable, UnspecializedPythonVariable

    vt = vt.realize()
    return vt.is_tensor() and not isinstance(vt, (UnspecializedPythonVariable, FakeItemVariable))


def _holds_tensor(vt: Any, depth: int = 0) -> bool:
    """Whether ``vt`` compares elementwise, or is a list or tuple holding such a value."""
    from torch._dynamo.variables.lists import BaseListVariable

    if _compares_elementwise(vt):
        return True
    vt = vt.realize()
    if depth < 4 and isinstance(vt, BaseListVariable):
        return any(_holds_tensor(item, depth + 1) for item in vt.items)
    return False


def _run_natively(what: str) -> None:
    from torch._dynamo.exc import unimplemented

    unimplemented(
        gb_type="thunder: Python comparison of tensors",
        context=what,
        explanation=(
            f"{what} takes the truth value of tensor comparisons (an error for more than one "
            "element); Python runs it as eager does"
        ),
        hints=[],
    )
