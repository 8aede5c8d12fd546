"""The ``run.py`` of a reproducer folder (``thunder.write_reproducer`` copies this file there).

``python run.py`` builds inputs of the recorded shapes, dtypes and strides (random values, or
the recorded ones in ``inputs.pt``), runs the compiled program's execution trace (``forward.py``,
``backward.py``) and the program as recorded run op by op by eager torch (``eager.py``), compares
their outputs and gradients, times both and prints the versions. Exit status 1 when they differ.
Options: ``--runs N`` (timed calls, default the manifest's), ``--seed S``, ``--no-compare``,
``--rtol``/``--atol`` (the comparison's tolerances; by default ``torch.testing.assert_close``'s
for outputs, looser ones for gradients).
"""

from __future__ import annotations

import argparse
import json
import platform
import runpy
import statistics
import sys
import time
from collections.abc import Callable, Container, Sequence
from pathlib import Path
from typing import Any

import torch

__all__ = ["main", "make_inputs", "versions"]

HERE = Path(__file__).resolve().parent


def _load(file: str, name: str) -> Callable[..., Any]:
    fn: Callable[..., Any] = runpy.run_path(str(HERE / file))[name]
    return fn


def _dtype(text: str) -> torch.dtype:
    dtype = getattr(torch, text.removeprefix("torch."))
    assert isinstance(dtype, torch.dtype), text
    return dtype


def _tensor(spec: dict[str, Any], recorded: dict[str, torch.Tensor]) -> torch.Tensor:
    """A tensor of the recorded metadata: the recorded values where there are some (indices,
    masks), else random ones (integers below ``int_high``: valid indices into the inputs)."""
    dtype, device, shape = _dtype(spec["dtype"]), torch.device(spec["device"]), spec["shape"]
    if spec["name"] in recorded:
        t = recorded[spec["name"]].to(device)
    elif dtype == torch.bool:
        t = torch.rand(shape, device=device) < 0.5
    elif dtype.is_floating_point or dtype.is_complex:
        t = torch.randn(shape, dtype=dtype, device=device)
    else:
        t = torch.randint(0, max(int(spec.get("int_high") or 2), 1), shape, device=device)
        t = t.to(dtype)
    stride = spec.get("stride")
    if stride is not None and tuple(stride) != t.stride():
        storage = sum((s - 1) * st for s, st in zip(shape, stride)) + 1 if t.numel() else 0
        strided = torch.empty(max(storage, 0), dtype=dtype, device=device)
        strided = strided.as_strided(shape, stride)
        strided.copy_(t)
        t = strided
    t = t.requires_grad_(bool(spec["requires_grad"]))
    return _non_leaf(t) if spec.get("leaf", True) is False else t


def _non_leaf(t: torch.Tensor) -> torch.Tensor:
    """A copy of ``t`` (requiring grad) of its strides, computed from it: not a leaf."""
    empty = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
    return empty.copy_(t)


def _requiring_grad_as(v: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """``c`` (a detached copy of ``v``) requiring grad as ``v`` does, a leaf where ``v`` is one
    (autograd refuses a program's writes into a leaf requiring grad, not into others)."""
    c = c.requires_grad_(v.requires_grad)
    return _non_leaf(c) if v.requires_grad and not v.is_leaf else c


def make_inputs(manifest: dict[str, Any], seed: int) -> list[Any]:
    """The computation's inputs, in order."""
    torch.manual_seed(seed)
    file = HERE / "inputs.pt"
    recorded = torch.load(file, weights_only=True) if file.exists() else {}
    return [
        _tensor(s, recorded) if s["kind"] == "tensor" else s["value"] for s in manifest["inputs"]
    ]


def _fresh(values: Sequence[Any]) -> list[Any]:
    """Copies of the inputs (a program may write into them), with their requires_grad."""
    out = []
    for v in values:
        if isinstance(v, torch.Tensor):
            v = _requiring_grad_as(v, v.detach().clone(memory_format=torch.preserve_format))
        out.append(v)
    return out


def _leaves(x: Any) -> list[Any]:
    from thunder_ir.pytree import tree_flatten

    return tree_flatten(x)[0]


# Gradients sum many products, in another order than autograd's: compared more loosely than
# outputs (which use torch.testing.assert_close's tolerances).
_GRADIENT_TOLERANCES = {
    torch.float64: (1e-5, 1e-7),
    torch.float32: (1e-3, 1e-4),
    torch.float16: (1e-2, 1e-3),
    torch.bfloat16: (5e-2, 1e-2),
}


def _compare(
    what: str,
    got: Sequence[Any],
    expected: Sequence[Any],
    tolerances: dict[str, Any],
    gradients: bool = False,
    accurate: Container[int] = (),
) -> list[str]:
    """What differs; ``accurate``: positions judged against a float64 run instead."""
    problems = []
    if len(got) != len(expected):
        return [f"{what}: {len(got)} values, eager gives {len(expected)}"]
    for i, (g, e) in enumerate(zip(got, expected)):
        if i in accurate:
            continue
        if isinstance(e, torch.Tensor) and isinstance(g, torch.Tensor):
            tol = dict(tolerances)
            if gradients and not tol and e.dtype in _GRADIENT_TOLERANCES:
                tol["rtol"], tol["atol"] = _GRADIENT_TOLERANCES[e.dtype]
            try:
                torch.testing.assert_close(g.detach(), e.detach(), equal_nan=True, **tol)
            except AssertionError as err:
                lines = [line.strip() for line in str(err).splitlines() if line.strip()]
                problems.append(f"{what} {i}: {'; '.join(lines[:4])}")
        elif (g is None) != (e is None) or (
            not isinstance(e, torch.Tensor) and e is not None and g != e
        ):
            problems.append(f"{what} {i}: {g!r} where eager gives {e!r}")
    return problems


def _in_double(values: Sequence[Any]) -> list[Any]:
    return [
        _requiring_grad_as(v, v.detach().double())
        if isinstance(v, torch.Tensor) and v.dtype in _GRADIENT_TOLERANCES
        else v
        for v in values
    ]


def _as_accurate_as_eager(
    programs: _Programs,
    inputs: Sequence[Any],
    cotangents: Sequence[Any],
    wanted: Sequence[int],
    got: Sequence[Any],
    expected: Sequence[Any],
) -> set[int]:
    """The positions of the gradients no further (at most twice as far) from the recorded
    program run in float64 than eager's: gradients of a long chain on random inputs differ
    between two summation orders by more than any fixed tolerance, and being as accurate as
    eager is what agreeing with it means there."""
    try:
        exact_inputs = _in_double(_fresh(inputs))
        outs, cts = programs.differentiable(
            programs.reference(exact_inputs), _in_double(cotangents)
        )
        exact = torch.autograd.grad(outs, [exact_inputs[i] for i in wanted], cts, allow_unused=True)
    except Exception:  # the program cannot run in float64: judged by the tolerance alone
        return set()
    accurate = set()
    for k, (g, e, x) in enumerate(zip(got, expected, exact)):
        tensors = isinstance(g, torch.Tensor) and isinstance(e, torch.Tensor) and x is not None
        if tensors and bool((g.double() - x).abs().max() <= 2 * (e.double() - x).abs().max()):
            accurate.add(k)
    return accurate


def _median_seconds(fn: Callable[[], Any], runs: int, device: str) -> float:
    """The median time of ``runs`` calls of ``fn``, after one to warm up."""

    def call() -> float:
        start = time.perf_counter()
        fn()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        return time.perf_counter() - start

    call()
    return statistics.median(call() for _ in range(max(runs, 1)))


def versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "torch": torch.__version__}
    for name in ("thunder", "thunder_ir", "thunder_transforms", "thunder_executors"):
        try:
            module = __import__(f"{name}.__about__", fromlist=["__version__"])
            out[name] = module.__version__
        except ImportError:
            out[name] = "not installed"
    if torch.cuda.is_available():
        out["device"] = torch.cuda.get_device_name()
    return out


class _Programs:
    """The reproducer's programs and how to call them."""

    def __init__(self, manifest: dict[str, Any], seed: int) -> None:
        self.manifest = manifest
        self.seed = seed
        self.forward = _load("forward.py", manifest["forward"])
        self.backward = _load("backward.py", manifest["backward"]) if manifest["backward"] else None
        self.eager = _load("eager.py", manifest["eager"]) if manifest["eager"] else None
        self.flags: list[bool] = manifest["differentiable_outputs"]
        # torch.autograd differentiates the forward as it runs (it writes in place where only
        # autograd does what eager does): the backward is torch's, not backward.py's.
        self.by_torch: bool = manifest.get("backward_by_torch", False)

    def thunder(self, inputs: Sequence[Any]) -> tuple[list[Any], list[Any]]:
        """The forward execution trace as autograd runs it (without grad): its outputs, and
        what it saves for the backward."""
        torch.manual_seed(self.seed + 1)
        if self.by_torch:
            with torch.enable_grad():
                outs = _leaves(self.forward(*inputs))
            return outs, [outs, list(inputs)]
        with torch.no_grad():
            result = self.forward(*inputs)
        if not self.manifest["differentiated"]:
            return _leaves(result), []
        outs, saved = result
        outs = list(outs)
        return outs[: len(outs) - self.manifest["hidden_outputs"]], list(saved)

    def thunder_backward(self, saved: Sequence[Any], cotangents: Sequence[Any]) -> list[Any]:
        assert self.backward is not None
        if self.by_torch:
            outs, inputs = saved
            wanted = [i for i, v in enumerate(inputs) if getattr(v, "requires_grad", False)]
            grads: list[Any] = [None] * len(inputs)
            outs, cotangents = self.differentiable(outs, cotangents)
            if outs:
                found = torch.autograd.grad(
                    outs, [inputs[i] for i in wanted], cotangents, allow_unused=True
                )
                for i, g in zip(wanted, found):
                    grads[i] = g
            return grads
        with torch.no_grad():
            return list(self.backward(*saved, *cotangents))

    def reference(self, inputs: Sequence[Any]) -> list[Any]:
        """The recorded program, op by op, recorded by torch.autograd when differentiated."""
        assert self.eager is not None
        torch.manual_seed(self.seed + 1)
        with torch.set_grad_enabled(self.backward is not None):
            return _leaves(self.eager(*inputs))

    def differentiable(self, outs: Sequence[Any], cotangents: Sequence[Any]) -> tuple[Any, Any]:
        """(outputs, cotangents) of the differentiable outputs that require grad."""
        pairs = zip([o for o, d in zip(outs, self.flags) if d], cotangents)
        kept = [(o, c) for o, c in pairs if getattr(o, "requires_grad", False)]
        return [o for o, _ in kept], [c for _, c in kept]


def main(argv: Sequence[str] | None = None) -> int:
    manifest = json.loads((HERE / "manifest.json").read_text())
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=manifest.get("runs", 10))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-compare", action="store_true")
    parser.add_argument("--rtol", type=float, help="relative tolerance (default: torch's)")
    parser.add_argument("--atol", type=float, help="absolute tolerance (default: torch's)")
    opts = parser.parse_args(argv)
    tolerances: dict[str, Any] = {}
    if opts.rtol is not None or opts.atol is not None:
        tolerances = {"rtol": opts.rtol or 0.0, "atol": opts.atol or 0.0}
    print(f"reproducer of {manifest['name']}")
    print(f"  recorded with {json.dumps(manifest['versions'])}")
    print(f"  running with  {json.dumps(versions())}")

    programs = _Programs(manifest, opts.seed)
    inputs = make_inputs(manifest, opts.seed)
    device = next((str(t.device) for t in inputs if isinstance(t, torch.Tensor)), "cpu")
    torch.manual_seed(opts.seed + 2)
    cotangents = [_tensor(s, {}) for s in manifest["cotangents"]]

    start = time.perf_counter()
    outs, saved = programs.thunder(_fresh(inputs))  # the first call: regions compile here
    first_call = time.perf_counter() - start
    problems: list[str] = []
    if programs.eager is not None and not opts.no_compare:
        ref_inputs = _fresh(inputs)
        ref = programs.reference(ref_inputs)
        problems += _compare("output", outs, ref, tolerances)
        if programs.backward is not None and not problems:
            grads = programs.thunder_backward(saved, cotangents)
            wanted = [i for i, v in enumerate(ref_inputs) if getattr(v, "requires_grad", False)]
            ref_outs, ref_cts = programs.differentiable(ref, cotangents)
            expected = torch.autograd.grad(
                ref_outs, [ref_inputs[i] for i in wanted], ref_cts, allow_unused=True
            )
            got = [grads[i] for i in wanted]
            found = _compare("gradient of input", got, expected, tolerances, True)
            if found and not tolerances:
                accurate = _as_accurate_as_eager(
                    programs, inputs, cotangents, wanted, got, expected
                )
                found = _compare("gradient of input", got, expected, tolerances, True, accurate)
            problems += found

    def run_thunder() -> None:
        # (autograd records writes into the inputs: each call on copies, as eager's)
        _, saved = programs.thunder(_fresh(inputs) if programs.by_torch else inputs)
        if programs.backward is not None:
            programs.thunder_backward(saved, cotangents)

    def run_eager() -> None:
        values = [
            _requiring_grad_as(v, v.detach()) if isinstance(v, torch.Tensor) else v for v in inputs
        ]
        ref_outs, ref_cts = programs.differentiable(programs.reference(values), cotangents)
        if programs.backward is not None and ref_outs:
            torch.autograd.backward(ref_outs, ref_cts)

    part = "forward + backward" if programs.backward is not None else "forward"
    print(f"\nthunder's first call (fusion regions compile in it): {first_call * 1e3:.2f} ms")
    print(f"{part} on {device}, median of {opts.runs} calls:")
    rows = [("thunder (the execution traces)", run_thunder)]
    if programs.eager is not None:
        rows.append(("eager torch (the recorded program, op by op)", run_eager))
    for label, fn in rows:
        print(f"  {label:48s} {_median_seconds(fn, opts.runs, device) * 1e3:9.3f} ms")
    if problems:
        print("\nMISMATCH: thunder's results differ from eager's:")
        for p in problems:
            print(f"  {p}")
        return 1
    if programs.eager is None or opts.no_compare:
        print("\nRAN (not compared with eager)")
    else:
        print("\nOK: thunder's results agree with eager's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
