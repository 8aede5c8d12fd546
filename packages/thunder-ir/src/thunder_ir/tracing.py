"""Recording a trace from a Python function written with torch-language ops, given example inputs.

This is the IR's own entry point (tests, hand-built traces, the demo); the jit records through
the interpreter instead."""

from __future__ import annotations

import functools
import os
import sys
import types
from collections.abc import Callable
from typing import Any

import torch

from thunder_ir import prims
from thunder_ir.devices import to_device
from thunder_ir.dtypes import from_torch_dtype
from thunder_ir.errors import UnsupportedInTracingError
from thunder_ir.proxies import Proxy, TensorProxy
from thunder_ir.pytree import tree_flatten, tree_unflatten
from thunder_ir.trace import Trace
from thunder_ir.tracectx import tracectx

__all__ = ["caller_location", "proxy_for_tensor", "trace_function"]


def proxy_for_tensor(t: torch.Tensor, name: str | None = None) -> TensorProxy:
    """The proxy standing for ``t`` while tracing: a dense (strided) tensor of its shape, dtype
    and device. Other layouts (sparse, mkldnn) are refused: the ops' decompositions and the
    trace's metadata describe dense tensors."""
    if t.layout is not torch.strided:
        what = f"{name} " if name else ""
        raise UnsupportedInTracingError(
            f"the tensor {what}has layout {t.layout} (shape {tuple(t.shape)}); only dense "
            "(strided) tensors are traced. Convert it with .to_dense() before the jitted function"
        )
    return TensorProxy(
        name,
        shape=tuple(t.shape),
        dtype=from_torch_dtype(t.dtype),
        device=to_device(t.device),
        requires_grad=t.requires_grad,
    )


def trace_function(
    fn: Callable[..., Any], *args: Any, fn_name: str = "computation", **kwargs: Any
) -> Trace:
    """Records ``fn(*args, **kwargs)``: tensors (also inside lists, tuples and dicts) become the
    trace's inputs, in order; every other value is a constant of the trace."""
    trace = Trace(fn_name)
    trace.locate = caller_location
    with tracectx(trace):
        leaves, spec = tree_flatten((args, kwargs))
        inputs: list[Proxy] = []
        proxied = []
        for leaf in leaves:
            if isinstance(leaf, torch.Tensor):
                p = proxy_for_tensor(leaf)
                inputs.append(p)
                proxied.append(p)
            else:
                proxied.append(leaf)
        pargs, pkwargs = tree_unflatten(proxied, spec)
        result = fn(*pargs, **pkwargs)
        prims.python_return(result)
    return trace.replace(args=inputs)


def caller_location() -> str | None:
    """The ``file:line`` of the innermost Python frame running now outside thunder_ir and torch
    (the user's line, for a function recorded as plain Python; see ``Trace.locate``)."""
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not _is_library_file(filename):
            return f"{filename}:{frame.f_lineno}"
        frame = frame.f_back
    return None


@functools.cache
def _library_dirs() -> tuple[str, ...]:
    here = os.path.dirname(os.path.abspath(__file__))
    return (here + os.sep, os.path.dirname(os.path.abspath(torch.__file__)) + os.sep)


@functools.lru_cache(maxsize=4096)
def _is_library_file(filename: str) -> bool:
    return filename.startswith("<") or os.path.abspath(filename).startswith(_library_dirs())
