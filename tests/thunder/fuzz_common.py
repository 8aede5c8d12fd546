"""Shared machinery of the differential fuzz tests (test_fuzz_state, test_fuzz_views,
test_fuzz_aliasing): the example budget, the acceptable refusals, a structural snapshot of any
value (tensors with dtype, shape, strides and values; containers by structure; objects and modules
by their attributes, buffers and parameters), the comparison that names the first differing
path, the per-call check of eager against thunder (:class:`Differential`: outcomes, refusals,
results, gradients) and the common pieces of the standalone reproducers.

Budget: ``THUNDER_FUZZ_EXAMPLES`` (default ``DEFAULT_EXAMPLES``) generated programs per fuzz test.
``THUNDER_FUZZ_STATS=path`` appends one line per refusal to ``path`` (what thunder refused and
why), to see how much of the generated space is compiled rather than refused.
"""

from __future__ import annotations

import linecache
import math
import os
import types
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

import torch
from hypothesis import HealthCheck, settings

from thunder.errors import JitError
from thunder_interp import InterpreterError
from thunder_ir import TracingError

DEFAULT_EXAMPLES = 300


def examples(default: int = DEFAULT_EXAMPLES) -> int:
    """Generated programs per fuzz test: ``THUNDER_FUZZ_EXAMPLES`` or ``default``."""
    return int(os.environ.get("THUNDER_FUZZ_EXAMPLES", default))


def fuzz_settings(default: int = DEFAULT_EXAMPLES, share: float = 1.0) -> settings:
    """Hypothesis settings for one fuzz test that gets ``share`` of the file's budget. Inherits the
    loaded profile (``ci`` derandomizes)."""
    n = max(1, int(examples(default) * share))
    return settings(
        max_examples=n,
        deadline=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.filter_too_much,
            HealthCheck.data_too_large,
        ],
    )


# -- refusals -----------------------------------------------------------------------------------

#: Errors that mean "thunder says it cannot compile this" (acceptable when nothing changed).
#: ``JitError`` covers UnsupportedOperationError, ImpureCallError, UnsupportedSideEffectError and
#: SharpEdgeError; a bare ``InterpreterError`` is the interpreter refusing bytecode it cannot honour.
REFUSALS: tuple[type[BaseException], ...] = (JitError, InterpreterError, TracingError)

REFUSAL_COUNTS: Counter[str] = Counter()


#: Errors that are not ``JitError`` but plainly say "a trace cannot do this" (data-dependent
#: values and shapes, tensor methods the IR lacks). They ought to be ``JitError`` (as plain
#: RuntimeError/TypeError/AttributeError a user's ``except`` clause can catch them); the fuzzers
#: accept them like refusals, so that they do not hide everything else, unless
#: ``THUNDER_FUZZ_STRICT=1``.
SOFT_REFUSAL_PATTERNS = (
    "depends on its data",
    "not known while tracing",
    "TensorProxy",
    "NumberProxy",
    "not supported by the IR",
    "which a trace cannot know",
)


#: A refusal whose message says it is thunder's own bug is a failure, not a refusal.
INTERNAL_ERROR_PATTERNS = ("please report this",)


def is_refusal(exc: BaseException) -> bool:
    if any(p in str(exc) for p in INTERNAL_ERROR_PATTERNS):
        return False
    if isinstance(exc, REFUSALS):
        return True
    if os.environ.get("THUNDER_FUZZ_STRICT") == "1":
        return False
    return any(p in str(exc) for p in SOFT_REFUSAL_PATTERNS)


def record_refusal(test: str, exc: BaseException) -> None:
    first = str(exc).splitlines()[0][:200] if str(exc) else ""
    REFUSAL_COUNTS[f"{test}: {type(exc).__name__}"] += 1
    path = os.environ.get("THUNDER_FUZZ_STATS")
    if path:
        with open(path, "a") as f:
            f.write(f"{test}\t{type(exc).__name__}\t{first}\n")


# -- failures ------------------------------------------------------------------------------------


class Mismatch(AssertionError):
    """Eager and thunder disagree (the message holds the program and a reproducer)."""

    def __init__(self, headline: str, details: str, program: Any = None) -> None:
        super().__init__(f"{headline}\n\n{details}")
        self.headline = headline
        self.program = program


def report(test: str, mismatch: Mismatch) -> None:
    """Fail the test, or with ``THUNDER_FUZZ_COLLECT=path`` append the failure to ``path`` and go
    on (to survey many distinct failures in one run instead of stopping at the first).

    ``THUNDER_FUZZ_ONLY=text`` ignores failures whose headline lacks ``text`` (and
    ``THUNDER_FUZZ_SKIP=text1|text2`` those that contain one of them): hypothesis then shrinks
    one class of failure to a minimal program."""
    only = os.environ.get("THUNDER_FUZZ_ONLY")
    if only and only not in str(mismatch):
        return
    skip = os.environ.get("THUNDER_FUZZ_SKIP")
    if skip and any(s and s in str(mismatch) for s in skip.split("|")):
        return
    path = os.environ.get("THUNDER_FUZZ_COLLECT")
    if not path:
        import pytest

        pytest.fail(str(mismatch), pytrace=False)
    with open(path, "a") as f:
        f.write(f"\n=== {test} :: {mismatch.headline}\n{mismatch}\n")
        if mismatch.program is not None:
            f.write(f"--- program ---\n{mismatch.program!r}\n")


# -- running generated source -------------------------------------------------------------------

_counter = [0]


def exec_source(source: str, tag: str) -> dict[str, Any]:
    """Exec ``source`` into a fresh module namespace (registered with linecache so tracebacks
    and thunder's ``file:line`` locations show the generated lines)."""
    _counter[0] += 1
    filename = f"<{tag}_{_counter[0]}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    module = types.ModuleType(f"{tag}_{_counter[0]}")
    module.__file__ = filename
    code = compile(source, filename, "exec")
    exec(code, module.__dict__)
    return module.__dict__


def quiet_call(fn: Any, *args: Any, **kwargs: Any) -> tuple[str, Any]:
    """``("ok", result)`` or ``("raise", exception)``; warnings (recompile limit) silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return "ok", fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - the exception is the observed result
            return "raise", e


# -- snapshots ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TensorSnap:
    dtype: torch.dtype
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    storage_offset: int
    values: torch.Tensor  # a contiguous clone
    requires_grad: bool

    def __repr__(self) -> str:
        vals = self.values.tolist() if self.values.numel() <= 16 else f"<{self.values.numel()}>"
        return (
            f"tensor({vals}, dtype={self.dtype}, shape={self.shape}, stride={self.stride}, "
            f"offset={self.storage_offset})"
        )


@dataclass(frozen=True)
class ObjSnap:
    kind: str
    fields: tuple[tuple[str, Any], ...]

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.fields)
        return f"{self.kind}({inner})"


def snapshot(value: Any, _depth: int = 0) -> Any:
    """A deep, detached structural copy of ``value`` that :func:`diff` compares."""
    if _depth > 12:
        return "<too deep>"
    if isinstance(value, torch.Tensor):
        v = value.detach()
        return TensorSnap(
            v.dtype,
            tuple(v.shape),
            tuple(v.stride()),
            v.storage_offset(),
            v.clone().contiguous(),
            value.requires_grad,
        )
    if isinstance(value, torch.Size):
        return ObjSnap("Size", tuple((str(i), int(s)) for i, s in enumerate(value)))
    if isinstance(value, (bool, int, float, complex, str, bytes, type(None))):
        return value
    if isinstance(value, tuple):
        return ("tuple", tuple(snapshot(v, _depth + 1) for v in value))
    if isinstance(value, list):
        return ("list", tuple(snapshot(v, _depth + 1) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((k, snapshot(v, _depth + 1)) for k, v in value.items()))
    if isinstance(value, (set, frozenset)):
        return (type(value).__name__, frozenset(value))
    if isinstance(value, torch.nn.Module):
        items: list[tuple[str, Any]] = [("training", value.training)]
        items += [(f"buffer:{k}", snapshot(b, _depth + 1)) for k, b in value.named_buffers()]
        items += [(f"param:{k}", snapshot(p, _depth + 1)) for k, p in value.named_parameters()]
        items += [
            (f"attr:{k}", snapshot(v, _depth + 1))
            for k, v in sorted(vars(value).items())
            if not k.startswith("_") and k != "training"
        ]
        return ObjSnap(type(value).__name__, tuple(items))
    if isinstance(value, (types.FunctionType, types.ModuleType, type)):
        return f"<{type(value).__name__} {getattr(value, '__name__', '?')}>"
    if hasattr(value, "__dict__"):
        return ObjSnap(
            type(value).__name__,
            tuple((k, snapshot(v, _depth + 1)) for k, v in sorted(vars(value).items())),
        )
    return f"<{type(value).__name__}>"


def _close(a: float, b: float) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-6)


def diff(
    expected: Any, actual: Any, path: str = "", *, strides: bool = True, out: list | None = None
) -> list[str]:
    """The differences between two snapshots (empty when they match): types exactly, numbers
    with a tight tolerance, tensors by dtype, shape, values (and strides when ``strides``)."""
    out = [] if out is None else out
    if len(out) > 8:
        return out
    if type(expected) is not type(actual):
        out.append(
            f"{path or '<value>'}: type {type(expected).__name__} != "
            f"{type(actual).__name__} (eager {expected!r}, thunder {actual!r})"
        )
        return out
    if isinstance(expected, TensorSnap):
        if (expected.dtype, expected.shape) != (actual.dtype, actual.shape):
            out.append(f"{path}: eager {expected!r} != thunder {actual!r}")
            return out
        if strides and (expected.stride, expected.storage_offset) != (
            actual.stride,
            actual.storage_offset,
        ):
            out.append(f"{path}: strides eager {expected!r} != thunder {actual!r}")
            return out
        if expected.requires_grad != actual.requires_grad:
            out.append(f"{path}: requires_grad eager {expected!r} != thunder {actual!r}")
        e, a = expected.values, actual.values
        if e.dtype.is_floating_point or e.dtype.is_complex:
            ok = torch.allclose(e, a, rtol=1e-5, atol=1e-6, equal_nan=True)
        else:
            ok = torch.equal(e, a)
        if not ok:
            out.append(f"{path}: values eager {expected!r} != thunder {actual!r}")
        return out
    if isinstance(expected, ObjSnap):
        if expected.kind != actual.kind or [k for k, _ in expected.fields] != [
            k for k, _ in actual.fields
        ]:
            out.append(f"{path}: eager {expected!r} != thunder {actual!r}")
            return out
        for (k, e), (_, a) in zip(expected.fields, actual.fields, strict=True):
            diff(e, a, f"{path}.{k}", strides=strides, out=out)
        return out
    if isinstance(expected, tuple) and len(expected) == 2 and isinstance(expected[0], str):
        kind, items = expected
        if kind in ("list", "tuple"):
            if actual[0] != kind or len(items) != len(actual[1]):
                out.append(f"{path}: eager {_short(expected)} != thunder {_short(actual)}")
                return out
            for i, (e, a) in enumerate(zip(items, actual[1], strict=True)):
                diff(e, a, f"{path}[{i}]", strides=strides, out=out)
            return out
        if kind == "dict":
            if actual[0] != kind or [k for k, _ in items] != [k for k, _ in actual[1]]:
                out.append(f"{path}: eager {_short(expected)} != thunder {_short(actual)}")
                return out
            for (k, e), (_, a) in zip(items, actual[1], strict=True):
                diff(e, a, f"{path}[{k!r}]", strides=strides, out=out)
            return out
    if isinstance(expected, float) or isinstance(expected, complex):
        if not _close(expected, actual):
            out.append(f"{path}: eager {expected!r} != thunder {actual!r}")
        return out
    if expected != actual:
        out.append(f"{path}: eager {_short(expected)} != thunder {_short(actual)}")
    return out


def _short(v: Any) -> str:
    s = repr(v)
    return s if len(s) < 400 else s[:400] + "..."


def describe_exc(e: BaseException) -> str:
    msg = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {msg[:300]}"


@dataclass
class Outcome:
    """What one call did: its result (or exception) and the state afterwards."""

    kind: str  # "ok" | "raise"
    value: Any  # snapshot of the result, or the exception
    state: Any  # snapshot of everything observable

    def summary(self) -> str:
        if self.kind == "raise":
            return f"raised {describe_exc(self.value)}"
        return f"returned {_short(self.value)}"


@dataclass
class Log:
    """Per-example log lines printed on failure (the call sequence as it happened)."""

    lines: list[str] = field(default_factory=list)

    def add(self, line: str) -> None:
        self.lines.append(line)

    def __str__(self) -> str:
        return "\n".join(self.lines)


# -- comparing eager and thunder ----------------------------------------------------------------


def check_example(test: str, run: Callable[[Any], None], program: Any) -> None:
    """Run one generated example; a :class:`Mismatch` goes to :func:`report`."""
    try:
        run(program)
    except Mismatch as m:
        report(test, m)


def output_grad(out: object, w: torch.Tensor) -> torch.Tensor | None:
    """d(sum of every output that requires grad)/dw (None when no output does)."""
    outs = out if isinstance(out, tuple) else (out,)
    parts = [o.sum() for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
    if not parts:
        return None
    (g,) = torch.autograd.grad(sum(parts), [w], allow_unused=True)
    return g


class Differential:
    """The checks of one example's calls, eager against thunder. ``program`` has ``source`` and
    ``reproducer()``; a failure raises :class:`Mismatch` with the generated source, the call log
    (``log``) and the reproducer."""

    def __init__(self, test: str, program: Any) -> None:
        self.test = test
        self.program = program
        self.log = Log()

    def fail(self, msg: str) -> NoReturn:
        raise Mismatch(
            msg,
            f"--- generated source ---\n{self.program.source}\n--- calls ---\n{self.log}\n"
            f"--- reproducer ---\n{self.program.reproducer()}",
            self.program,
        )

    def fail_on(self, differences: list[str], headline: str) -> None:
        """Fail with ``headline`` and the ``differences`` when there are any."""
        if differences:
            self.fail(f"{headline}:\n  " + "\n  ".join(differences))

    def outcomes(
        self,
        i: int,
        eager: tuple[str, Any],
        thunder: tuple[str, Any],
        changes: Callable[[], list[str]],
        changed: str,
    ) -> str | None:
        """Log call ``i``'s two outcomes (``quiet_call`` pairs) and check that they agree: both
        returned, or both raised the same exception type. A thunder refusal (where eager did not
        raise the same) is acceptable when ``changes()`` finds nothing changed (else it fails as
        "thunder refused ... {changed}"); it is recorded and ends the example: returns None.
        Otherwise returns the common kind, "ok" or "raise"."""
        kind_e, res_e = eager
        kind_j, res_j = thunder
        self.log.add(f"    eager:   {kind_e} {describe_exc(res_e) if kind_e == 'raise' else ''}")
        self.log.add(f"    thunder: {kind_j} {describe_exc(res_j) if kind_j == 'raise' else ''}")
        if (
            kind_j == "raise"
            and is_refusal(res_j)
            and not (kind_e == "raise" and type(res_e) is type(res_j))
        ):
            self.fail_on(changes(), f"call {i}: thunder refused ({describe_exc(res_j)}) {changed}")
            record_refusal(self.test, res_j)
            return None
        if kind_e != kind_j:
            what_e = describe_exc(res_e) if kind_e == "raise" else "returned"
            what_j = describe_exc(res_j) if kind_j == "raise" else "returned"
            self.fail(f"call {i}: eager {what_e} but thunder {what_j}")
        if kind_e == "raise" and type(res_e) is not type(res_j):
            self.fail(
                f"call {i}: exception type differs: eager {describe_exc(res_e)}, "
                f"thunder {describe_exc(res_j)}"
            )
        return kind_e

    def call(
        self,
        i: int,
        f: Callable[..., Any],
        jf: Callable[..., Any],
        args_e: list,
        args_j: list,
        written: Any,
        path: str,
    ) -> tuple[str | None, Any, Any]:
        """Call ``f(*args_e)`` and ``jf(*args_j)`` and check the outcomes (:meth:`outcomes`; a
        refusal must leave ``written``, thunder's side, as it was). Returns the common kind (None
        after a refusal) and both results (or exceptions)."""
        before = snapshot(written)
        eager = quiet_call(f, *args_e)
        thunder = quiet_call(jf, *args_j)
        kind = self.outcomes(
            i, eager, thunder, lambda: diff(before, snapshot(written), path), "after writing"
        )
        return kind, eager[1], thunder[1]

    def results(self, i: int, res_e: Any, res_j: Any, *, strides: bool = True) -> None:
        """Call ``i`` returned the same on both sides."""
        d = diff(snapshot(res_e), snapshot(res_j), "result", strides=strides)
        self.fail_on(d, f"call {i}: results differ")

    def grads(
        self,
        i: int,
        grad_fn: Callable[..., Any],
        eager: tuple,
        thunder: tuple,
        path: str = "w.grad",
        what: str = "gradients",
    ) -> None:
        """``grad_fn(*eager)`` and ``grad_fn(*thunder)`` (backward through the results) agree:
        both raise the same exception type, or both give the same gradients."""
        kg_e, g_e = quiet_call(grad_fn, *eager)
        kg_j, g_j = quiet_call(grad_fn, *thunder)
        if kg_e != kg_j or (kg_e == "raise" and type(g_e) is not type(g_j)):
            self.fail(f"call {i}: backward: eager {kg_e} {g_e!r}, thunder {kg_j} {g_j!r}")
        if kg_e == "ok":
            d = diff(snapshot(g_e), snapshot(g_j), path, strides=False)
            self.fail_on(d, f"call {i}: {what} differ")


# -- reproducers --------------------------------------------------------------------------------

REPRO_TITLE = "# standalone reproducer: .venv/bin/python repro.py\n"


def repro_jit_function(helpers: str, source: str, cache: str | None) -> str:
    """The start of a reproducer that defines ``helpers`` and ``f`` (``source``) and
    ``jf = thunder.jit(f)`` (with ``cache`` when given)."""
    kw = (f", cache={cache!r}" if cache else "") + ", reshape_inplace='warn'"
    return f"{REPRO_TITLE}import torch, thunder\n{helpers}\n{source}\njf = thunder.jit(f{kw})\n"


def repro_loader(source: str) -> str:
    """The start of a reproducer that can exec ``source`` as a fresh module: ``load(tag)``."""
    return f"""{REPRO_TITLE}import linecache, types, warnings
import torch, thunder

SRC = {source!r}

def load(tag):
    linecache.cache[tag] = (len(SRC), None, SRC.splitlines(True), tag)
    m = types.ModuleType(tag); exec(compile(SRC, tag, "exec"), m.__dict__); return m.__dict__
"""


def exec_helpers(source: str) -> dict[str, Any]:
    """The namespace of helper ``source`` that the tests and their reproducers share."""
    ns: dict[str, Any] = {}
    exec(source, ns)
    return ns


def try_line(line: str, env: dict[str, Any]) -> dict[str, Any] | None:
    """``env`` after running ``line`` (with ``torch``) on a copy of it; None when it raises (the
    line does not fit the sample values: the generator leaves it out)."""
    trial = dict(env)
    try:
        exec(line, {"torch": torch}, trial)
    except Exception:  # noqa: BLE001 - invalid for the sample values
        return None
    return trial
