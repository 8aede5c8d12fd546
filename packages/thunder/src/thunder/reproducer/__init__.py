"""``thunder.write_reproducer``: a folder that reproduces a compiled program away from the code
that built it, to attach to a bug report.

The folder holds the traces of each stage (``traces/``: readable Python, as the passes left them),
the execution traces as programs that run on their own (``forward.py``, ``backward.py``; see
``thunder_ir.standalone``), the program as recorded run op by op by eager torch (``eager.py``:
the reference), ``manifest.json`` (the inputs' metadata, the versions) and ``run.py``, which
builds inputs of the recorded shapes, dtypes and strides, runs and times both programs and
compares their outputs and gradients (``python run.py``; exit status 1 when they differ).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch

from thunder.reproducer import script
from thunder_ir import NumberProxy, Proxy, TensorProxy, Trace
from thunder_ir.standalone import StandaloneError, standalone_python
from thunder_transforms.autodiff import backward_run_by_torch
from thunder_transforms.autodiff.chain import ChainedFunction

__all__ = ["program_inputs", "program_name", "reference_trace", "write_reproducer"]

# Integer and bool inputs recorded up to this many bytes: indices and masks that random values
# would make invalid (floats are always random).
_RECORDED_BYTES = 64 << 20


def write_reproducer(
    jfn: Any,
    folder: str | Path,
    *,
    args: tuple[Any, ...] | None = None,
    kwargs: dict[str, Any] | None = None,
    runs: int = 10,
    compile_regions: bool = True,
) -> Path:
    """Writes a reproducer of the last program ``jfn`` (a ``thunder.jit`` result) compiled into
    ``folder`` (created; the files of an earlier reproducer there replaced) and returns it.

    Args:
        args, kwargs: a call the program serves (optional): the strides of its tensors, and the
            values of its integer and bool tensors (indices, masks) are recorded. Without them
            tensors are contiguous and integers random below the smallest dimension of the
            floating-point inputs.
        runs: how many timed calls ``run.py`` makes by default.
        compile_regions: whether ``forward.py`` compiles fusion regions as thunder did
            (``torch.compile``), or runs their torch calls.
    """
    from thunder import compile_stats

    stats = compile_stats(jfn)
    entry = stats.last_program
    if entry is None or not stats.last_traces:
        raise ValueError("write_reproducer: nothing compiled yet; call the jitted function first")
    notes: list[str] = []
    forward = stats.last_traces[-1]
    backward = stats.last_backward_traces[-1] if stats.last_backward_traces else None
    values = None if args is None and kwargs is None else program_inputs(stats, args, kwargs)
    files: dict[str, str] = {}  # everything is made before anything is written
    for part, trace in (("forward", forward), ("backward", backward)):
        if trace is not None:
            try:
                text = standalone_python(trace, compile_regions=compile_regions)
            except StandaloneError as e:
                raise StandaloneError(f"write_reproducer: {e}") from e
            files[f"{part}.py"] = _HEADER + text
    eager_name = None
    reference = reference_trace(stats.last_traces)
    first_part = _chained_first_part(entry.computation)
    if first_part is not None:
        # Its last traces are those of the part taking the program's inputs: that part, and
        # eager's run of it, are reproduced.
        reference = first_part
        notes.append(
            "the program runs as a chain of autograd nodes (it returns an intermediate other "
            "outputs are computed from: thunder_transforms.autodiff.chain); this reproduces its "
            "first part (its outputs, then the values the rest reads)"
        )
    try:
        eager = _eager_program(reference)
        files["eager.py"] = _HEADER + standalone_python(eager)
        eager_name = eager.fn_name
    except Exception as e:  # no reference: run.py still runs and times thunder's program
        notes.append(f"no eager reference: {type(e).__name__}: {e}")

    out = Path(folder)
    # What an earlier reproducer in this folder wrote goes: run.py would read it.
    for stale in (*(out / "traces").glob("*.py"), *(out / n for n in _OPTIONAL_FILES)):
        stale.unlink(missing_ok=True)
    (out / "traces").mkdir(parents=True, exist_ok=True)
    _write_stage_traces(out / "traces", stats)
    for name, text in files.items():
        (out / name).write_text(text)
    recorded = _recorded_values(forward, values)
    if recorded:
        torch.save(recorded, out / "inputs.pt")
    computation = _differentiable(entry.computation)
    by_torch = backward is not None and backward_run_by_torch(backward)
    differentiable_outputs = list(getattr(computation, "differentiable_outputs", ()))
    cotangents = _cotangent_specs(forward, backward)
    if by_torch:  # torch.autograd differentiates the forward's outputs as it runs them
        differentiable_outputs, cotangents = _outputs_autograd_differentiates(forward)
    manifest = {
        "name": program_name(jfn),
        "forward": forward.fn_name,
        "backward": backward.fn_name if backward is not None else None,
        "eager": eager_name,
        "differentiated": backward is not None,
        "backward_by_torch": by_torch,
        "differentiable_outputs": differentiable_outputs,
        "hidden_outputs": getattr(computation, "hidden_outputs", 0),
        "inputs": _input_specs(forward, values),
        "cotangents": cotangents,
        "runs": runs,
        "versions": script.versions(),
        "notes": notes,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    shutil.copyfile(script.__file__, out / "run.py")
    (out / "README.md").write_text(_readme(manifest, stats))
    return out


def program_name(jfn: Any) -> str:
    """The name of what ``jfn`` (a ``thunder.jit`` result) compiles: its function or module."""
    fn = getattr(getattr(jfn, "_thunder_function", jfn), "fn", jfn)
    return getattr(fn, "__qualname__", None) or type(fn).__name__


# Files a reproducer writes only for some programs.
_OPTIONAL_FILES = ("backward.py", "eager.py", "inputs.pt")

_HEADER = "# Generated by thunder.write_reproducer: runs on its own (see README.md).\n"


def reference_trace(traces: list[Trace]) -> Trace:
    """The program as recorded, before autodiff split it and executors took it (after autocast
    and clean-up passes): the last trace of ``traces`` (``thunder.last_traces``) that is
    neither an execution trace nor a pass of autodiff."""
    from thunder_executors import ExecutionTrace

    plain = [
        t
        for t in traces
        if not isinstance(t, ExecutionTrace)
        and not any(r.name.startswith("autodiff") for r in t.history)
    ]
    return plain[-1] if plain else traces[0]


def _eager_program(trace: Trace) -> Trace:
    """``trace`` run by eager torch alone: high-level ops whole, the rest one torch call per
    prim, no fusion."""
    from thunder_executors import transform_for_execution

    eager = transform_for_execution(trace, ("torch_ops", "torch"))
    return eager.replace(fn_name="eager")


def _write_stage_traces(folder: Path, stats: Any) -> None:
    groups = {
        "computation": stats.last_traces,
        "backward": stats.last_backward_traces,
        "prologue": stats.last_prologue_traces,
    }
    for group, traces in groups.items():
        for i, trace in enumerate(traces):
            stage = trace.history[-1].name if trace.history else "recorded"
            name = f"{group}_{i:02d}_{stage.replace(' ', '_')}.py"
            (folder / name).write_text(trace.python())
    if stats.last_epilogue_source:
        (folder / "epilogue.py").write_text(stats.last_epilogue_source)


def _chained_first_part(computation: Any) -> Trace | None:
    """For a program run as a chain of autograd nodes, the program of its innermost first part
    (the part taking the program's inputs, compiled last); else None."""
    fn, part = computation, None
    while fn is not None:
        if isinstance(fn, ChainedFunction):
            part = fn.first_trace
        fn = getattr(fn, "__wrapped__", None)
    return part


def _differentiable(computation: Any) -> Any:
    """The autodiff runner behind an entry's computation (under its wrappers), or None."""
    fn = computation
    while fn is not None and not hasattr(fn, "differentiable_outputs"):
        fn = getattr(fn, "__wrapped__", None)
    return fn


def program_inputs(
    stats: Any, args: tuple[Any, ...] | None, kwargs: dict[str, Any] | None
) -> list[Any]:
    """The inputs of the last compiled program of ``stats`` (a ``CompileStats``) for the call
    ``args, kwargs``: what its prologue unpacks, checked to be of the metadata it was compiled
    for (the cache key, not the prologue, checks that); a ValueError otherwise."""
    from thunder.prologue import GuardFailure
    from thunder_ir.dtypes import to_torch_dtype

    entry, forward = stats.last_program, stats.last_traces[-1]
    try:
        values: list[Any] | None = list(entry.prologue(tuple(args or ()), dict(kwargs or {})))
    except GuardFailure:
        values = None

    def fits(p: Any, v: Any) -> bool:
        if not isinstance(p, TensorProxy):
            return True
        return (
            isinstance(v, torch.Tensor)
            and v.dtype == to_torch_dtype(p.dtype)
            and v.ndim == len(p.shape)
            and all(not isinstance(d, int) or d == n for d, n in zip(p.shape, v.shape))
        )

    if (
        values is None
        or len(values) != len(forward.args)
        or not all(map(fits, forward.args, values))
    ):
        raise ValueError(
            "the last compiled program does not serve this call (other tensor shapes or "
            "dtypes, or a failed guard); pass the inputs of a call it ran"
        )
    return values


def _int_high(forward: Trace) -> int:
    """Random integer inputs stay below every dimension of the floating-point inputs, so they
    are valid indices into them (token ids into an embedding, positions into a table)."""
    dims = [
        int(d)
        for a in forward.args
        if isinstance(a, TensorProxy) and a.dtype.kind == "float"
        for d in a.shape
        if isinstance(d, int) and d > 1
    ]
    return min(dims, default=2)


def _input_specs(forward: Trace, values: list[Any] | None) -> list[dict[str, Any]]:
    high = _int_high(forward)
    specs = []
    for i, a in enumerate(forward.args):
        value = values[i] if values is not None else None
        if isinstance(a, TensorProxy):
            spec = _tensor_spec(a)
            spec["int_high"] = high
            if isinstance(value, torch.Tensor):
                spec["stride"] = list(value.stride())
                # The value's, as the call finds it: a proxy written in place may say what
                # the write made it (``x.add_(y)`` with y requiring grad).
                spec["requires_grad"] = value.requires_grad
                if value.requires_grad and not value.is_leaf:
                    spec["leaf"] = False  # autograd lets a program write into it
            specs.append(spec)
        else:
            known = value if values is not None else _traced_value(a)
            specs.append({"name": _name(a), "kind": "number", "value": known})
    return specs


def _tensor_spec(p: TensorProxy) -> dict[str, Any]:
    from thunder_ir.dtypes import to_torch_dtype

    return {
        "name": p.name,
        "kind": "tensor",
        "shape": [int(_traced_value(d)) for d in p.shape],
        "stride": None,
        "dtype": str(to_torch_dtype(p.dtype)),
        "device": str(p.device),
        "requires_grad": p.requires_grad,
    }


def _cotangent_specs(forward: Trace, backward: Trace | None) -> list[dict[str, Any]]:
    """The backward's last arguments: one cotangent per differentiable output."""
    if backward is None:
        return []
    ret = forward.return_value
    saved = len(ret[1]) if isinstance(ret, tuple) and len(ret) == 2 else 0
    specs = []
    for a in backward.args[saved:]:
        if isinstance(a, TensorProxy):
            spec = _tensor_spec(a)
            spec["requires_grad"] = False
            specs.append(spec)
    return specs


def _outputs_autograd_differentiates(
    forward: Trace,
) -> tuple[list[bool], list[dict[str, Any]]]:
    """For a forward torch.autograd differentiates: whether each of its (flat) outputs may have
    a gradient (a floating tensor), and a cotangent spec for each that may."""
    from thunder_ir.dtypes import to_torch_dtype
    from thunder_ir.pytree import tree_flatten

    flags, specs = [], []
    for o in tree_flatten(forward.return_value)[0]:
        dtype = to_torch_dtype(o.dtype) if isinstance(o, TensorProxy) else None
        floating = dtype is not None and (dtype.is_floating_point or dtype.is_complex)
        flags.append(floating)
        if floating:
            spec = _tensor_spec(o)
            spec["requires_grad"] = False
            specs.append(spec)
    return flags, specs


def _recorded_values(forward: Trace, values: list[Any] | None) -> dict[str, torch.Tensor]:
    if values is None:
        return {}
    out: dict[str, torch.Tensor] = {}
    size = 0
    for a, v in zip(forward.args, values):
        if isinstance(v, torch.Tensor) and not (v.dtype.is_floating_point or v.dtype.is_complex):
            size += v.numel() * v.element_size()
            if size > _RECORDED_BYTES:
                break
            out[_name(a)] = v.detach().cpu().clone()
    return out


def _traced_value(x: Any) -> Any:
    """A number's value on the traced call (a symbolic size or number: its proxy's value)."""
    if isinstance(x, NumberProxy):
        return x.value
    return x


def _name(a: Any) -> str:
    return a.name if isinstance(a, Proxy) else str(a)


def _readme(manifest: dict[str, Any], stats: Any) -> str:
    lines = [
        f"# Reproducer of `{manifest['name']}`",
        "",
        "Written by `thunder.write_reproducer`. Run `python run.py` (options: `--runs N`,",
        "`--seed S`, `--no-compare`): it builds inputs of the recorded shapes, dtypes and strides,",
        "runs the execution traces below and the recorded program op by op in eager torch,",
        "compares outputs and gradients, and times both. Exit status 1: they differ.",
        "",
        "- `forward.py`: the execution trace (what thunder ran), a program on its own",
    ]
    if manifest["backward"]:
        lines.append("- `backward.py`: the backward execution trace (what `loss.backward()` ran)")
    if manifest["eager"]:
        lines.append("- `eager.py`: the recorded program, one eager torch call per op (reference)")
    lines += [
        "- `traces/`: the trace after each stage (computation, backward, prologue: the guards)",
        "- `manifest.json`: the inputs' metadata, the versions it was written with",
        "",
        "Compile stats when written:",
        "",
        "```",
        repr(stats),
        "```",
    ]
    if manifest["notes"]:
        lines += ["", "Notes:", *(f"- {n}" for n in manifest["notes"])]
    return "\n".join(lines) + "\n"
