"""Where a compiled program's run time goes, per fusion region and per kind of op, measured with
``torch.profiler``. The execution traces are compiled once more with each statement inside a
``record_function`` of its callee's name (``torchcompile.fusion0``, ``torch_ops.linear``); the
program's own callables are untouched."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from thunder_ir import TensorProxy, Trace
from thunder_ir.dtypes import to_torch_dtype
from thunder_ir.pytree import tree_flatten
from thunder_transforms.autodiff import backward_run_by_torch

__all__ = ["RegionTime", "profile_program"]

_PREFIX = "thunder:"
_CALLEE = re.compile(r"^(?:[\w, ()]+ = )?([A-Za-z_][\w.]*)\(")


@dataclass(frozen=True)
class RegionTime:
    """One region or kind of op: its calls and time per run of the program (milliseconds)."""

    phase: str
    label: str
    calls: float
    cpu_ms: float
    device_ms: float


def _labeled(trace: Trace, phase: str) -> Callable[..., Any]:
    """``trace``'s function with each top-level statement that calls something inside a
    ``record_function`` named after the callee."""
    source, ctx = trace._source(subsymbol_depth=0)
    out = []
    for line in source.splitlines():
        body = line[2:]
        match = _CALLEE.match(body) if line.startswith("  ") and body[:1] != " " else None
        if match is None or body.rstrip().endswith(":"):
            out.append(line)
            continue
        callee = match[1]
        head, _, rest = callee.partition(".")
        if head not in ctx and head != "torch":  # a method of a value: t3.reshape
            callee = f"Tensor.{rest}"
        out.append(f"  with _thunder_rf({f'{_PREFIX}{phase}:{callee}'!r}):")
        out.append("  " + line)
    globs: dict[str, Any] = {
        "__builtins__": __builtins__,
        **ctx,
        "torch": torch,
        "_thunder_rf": torch.profiler.record_function,
    }
    exec(compile("\n".join(out) + "\n", f"<thunder profiled {trace.fn_name}>", "exec"), globs)
    fn: Callable[..., Any] = globs[trace.fn_name]
    return fn


def _cotangents(forward: Trace, backward: Trace) -> list[torch.Tensor]:
    ret = forward.return_value
    saved = len(ret[1]) if isinstance(ret, tuple) and len(ret) == 2 else 0
    return [
        torch.ones(
            [int(getattr(d, "value", d)) for d in a.shape],
            dtype=to_torch_dtype(a.dtype),
            device=str(a.device),
        )
        for a in backward.args[saved:]
        if isinstance(a, TensorProxy)
    ]


def profile_program(
    stats: Any, args: tuple[Any, ...], kwargs: dict[str, Any], *, runs: int = 3
) -> list[RegionTime]:
    """Runs the last compiled program of ``stats`` (a ``CompileStats``) on the call ``args,
    kwargs`` once to warm up, then ``runs`` times under the profiler (the forward, and the
    backward with cotangents of ones): the time of each region and kind of op per run, and
    each phase's whole (label ``total``)."""
    from thunder.reproducer import program_inputs

    inputs = program_inputs(stats, args, kwargs)
    forward_trace = stats.last_traces[-1]
    backward_trace = stats.last_backward_traces[-1] if stats.last_backward_traces else None
    forward = _labeled(forward_trace, "forward")
    backward = _labeled(backward_trace, "backward") if backward_trace is not None else None
    cotangents = _cotangents(forward_trace, backward_trace) if backward_trace is not None else []
    if backward_trace is not None and backward_run_by_torch(backward_trace):
        # torch.autograd differentiates the forward as it runs: its backward is torch's.
        return _profile_rows(_run_by_torch(forward, inputs), runs)

    def run() -> None:
        with torch.no_grad():
            with torch.profiler.record_function(f"{_PREFIX}forward:total"):
                result = forward(*inputs)
            if backward is not None:
                _, saved = result
                with torch.profiler.record_function(f"{_PREFIX}backward:total"):
                    backward(*saved, *cotangents)

    return _profile_rows(run, runs)


def _run_by_torch(forward: Callable[..., Any], inputs: list[Any]) -> Callable[[], None]:
    """A call of a forward torch.autograd differentiates, and its backward (cotangents of
    ones), on copies of the inputs (autograd records its writes into them)."""

    def run() -> None:
        values = [_copy(v) if isinstance(v, torch.Tensor) else v for v in inputs]
        with torch.enable_grad():
            with torch.profiler.record_function(f"{_PREFIX}forward:total"):
                outs = [o for o in tree_flatten(forward(*values))[0] if _has_grad(o)]
            if outs:
                with torch.profiler.record_function(f"{_PREFIX}backward:total"):
                    torch.autograd.backward(outs, [torch.ones_like(o) for o in outs])

    return run


def _copy(v: torch.Tensor) -> torch.Tensor:
    """A copy requiring grad as ``v`` does, not a leaf where ``v`` is none (autograd lets a
    program write into it then)."""
    c = v.detach().clone().requires_grad_(v.requires_grad)
    return c.clone() if v.requires_grad and not v.is_leaf else c


def _has_grad(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.requires_grad and x.grad_fn is not None


def _profile_rows(run: Callable[[], None], runs: int) -> list[RegionTime]:
    run()
    activities = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(runs):
            run()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    rows = []
    for event in prof.key_averages():
        if not event.key.startswith(_PREFIX):
            continue
        phase, _, label = event.key.removeprefix(_PREFIX).partition(":")
        device_us = getattr(event, "device_time_total", None)
        if device_us is None:
            device_us = getattr(event, "cuda_time_total", 0.0)
        rows.append(
            RegionTime(
                phase,
                label,
                event.count / runs,
                event.cpu_time_total / runs / 1e3,
                float(device_us or 0.0) / runs / 1e3,
            )
        )
    rows.sort(key=lambda r: (r.phase != "forward", r.label != "total", -r.cpu_ms))
    return rows
