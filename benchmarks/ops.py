"""Benchmark: every op of the OpInfo table, and a few nn layers, under thunder.jit against eager.

Cases:

- every op of the OpInfo table (``tests/thunder_ir/opinfos``), as ``lambda *a, **k: ref(*a, **k)``
  where ``ref`` is the torch callable the op mirrors, on its float32 samples (an op without
  float32 takes its first dtype, and its row says which). The largest sample is scaled up: every
  dimension longer than 1 of every tensor grows by one factor, the values tiled (so indices stay
  in range), until the largest input holds about ``--size`` elements; a factor whose shapes torch
  rejects, whose output would be larger than 8 * ``--size`` elements or whose eager call takes
  longer than a few milliseconds gives way to a smaller one, down to the sample itself;
- layers (``nn.*`` rows), in eval mode: ``thunder.models.ConvBlock``, Conv2d + BatchNorm2d + an
  activation, multi-head attention (``nn.MultiheadAttention``, ``F.scaled_dot_product_attention``),
  an MLP (Linear, GELU, Linear), LayerNorm, GroupNorm, Embedding, a TransformerEncoderLayer.

Everything runs under ``torch.no_grad()`` with the default executors of ``thunder.jit``. Per case:
eager's and thunder's steady times (medians of interleaved calls, after warm-up) and the number
of calls of the execution trace (``thunder.last_traces(jfn)[-1]``: its bound symbols but returns
and ``del``) against eager's (top-level torch calls that return tensors, counted by a
``TorchFunctionMode``; under a mode ``nn.TransformerEncoderLayer`` leaves its fused fast path,
so its eager count is the slow path's), which shows the ops thunder decomposes. Thunder's result (and the inputs an
in-place op writes) must equal eager's (``torch.testing.assert_close`` with a loose tolerance;
random ops by their OpInfo's own comparison), or the case is a failure: a benchmark does not time
wrong programs. A case whose scaled sample fails under thunder is retried on the OpInfo's sample
itself, and its row says so.

The per-call overhead is thunder.jit's steady time of a trivial op (``torch.neg``) on a
one-element tensor minus eager's; thunder's prologue checks every tensor it is given, so it is
measured with 1, 2, 4 and 8 tensors passed, and each case is charged the overhead for its own
count of tensor inputs (a layer's parameters and buffers included), interpolated (``ovh``). A case
is *slower than eager beyond the overhead* when ``thunder - ovh > eager * (1 + margin)``
(``--margin``, 5% by default against the noise of a shared machine; 0 is the bare rule); ``adj`` is
``(thunder - ovh) / eager``. Printed: the overhead line, the rows of the slower cases worst ``adj``
first (``--all``: every row), the failures (exceptions are caught per case, never abort the run:
``<stage>: <exception>``, the stage ``sample``, ``eager``, ``thunder``, ``check`` or ``timing``),
and a summary line.

Run: ``python -m benchmarks ops [--ops add,nn.mlp] [--quick] [--all] [--repeat N] [--size N]
[--threads N] [--margin F]``. Times are for one thread by default: on a machine shared with other
work torch's thread pool makes figures of several threads swing wildly.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import math
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

import thunder
from thunder.models import ConvBlock
from thunder_ir.pytree import tree_flatten, tree_map

HERE = Path(__file__).resolve().parent
OPINFO_DIR = HERE.parent / "tests" / "thunder_ir"
if str(HERE) not in sys.path:  # run by file path or imported by a test: _timing is a sibling
    sys.path.insert(0, str(HERE))

from _timing import median_times  # type: ignore[import-not-found]  # noqa: E402

DEFAULT_SIZE = 1 << 16
EAGER_BUDGET_S = 0.004  # a scaled sample whose eager call takes longer is scaled less
OUTPUT_FACTOR = 8  # ... and one whose outputs would hold more than OUTPUT_FACTOR * size elements
# An op meta cannot size (its output shape depends on data) tries a scale eagerly with at most
# this much more memory mapped: torch.combinations of a scaled sample would take the machine's.
TRIAL_MEMORY_BYTES = 2 << 30


# ---------------------------------------------------------------------------------------------
# Cases


@dataclass
class Case:
    """One function to time. ``build()`` gives the eager callable and what thunder.jit compiles
    (for an op, its torch callable and a lambda that calls it; for a layer, the module twice);
    ``inputs(k)`` the arguments at scale factor ``k``; ``scales()`` the factors to try, largest
    first, the last one the unscaled sample. All three are called by ``measure``, which catches
    what they raise."""

    name: str
    build: Callable[[], tuple[Callable[..., Any], Any]]
    inputs: Callable[[int], tuple[tuple[Any, ...], dict[str, Any]]]
    scales: Callable[[], list[int]] = lambda: [1]
    kind: str = "op"
    dtype: torch.dtype = torch.float32
    compare: Callable[[Any, Any], None] | None = None
    atol: float = 1e-3
    rtol: float = 1e-3


def load_opinfos() -> list[Any]:
    """``ALL_OPINFOS`` of ``tests/thunder_ir/opinfos``: benchmarks do not rely on pytest's
    import set-up, so the folder goes on the path while the package loads."""
    if "opinfos" in sys.modules:
        return list(sys.modules["opinfos"].ALL_OPINFOS)
    sys.path.insert(0, str(OPINFO_DIR))
    try:
        return list(importlib.import_module("opinfos").ALL_OPINFOS)
    finally:
        sys.path.remove(str(OPINFO_DIR))


def _tensors(x: Any) -> list[torch.Tensor]:
    return [v for v in tree_flatten(x)[0] if isinstance(v, torch.Tensor)]


def _numel(x: Any) -> int:
    return sum(t.numel() for t in _tensors(x))


def _max_scale(args: Any, size: int) -> int:
    """The largest factor k such that no tensor, each of its dimensions longer than 1 times k,
    holds more than ``size`` elements."""
    k = 0
    for t in _tensors(args):
        grown = sum(1 for d in t.shape if d > 1)
        if grown and t.numel():
            kt = math.floor((size / t.numel()) ** (1 / grown) + 1e-9)
            k = kt if k == 0 else min(k, kt)
    return max(k, 1)


def scale(args: Any, k: int) -> Any:
    """Every tensor with its dimensions longer than 1 grown k times, values tiled."""
    if k == 1:
        return args

    def grow(x: Any) -> Any:
        if not isinstance(x, torch.Tensor) or x.dim() == 0:
            return x
        return x.detach().repeat(*(k if d > 1 else 1 for d in x.shape))

    return tree_map(grow, args)


def _scales(k: int) -> list[int]:
    out = []
    while k > 1:
        out.append(k)
        k //= 2
    return [*out, 1]


def _describe(args: Any) -> str:
    """The first tensor input (``f32[64,1024]``), ``+n`` for the other ones."""
    ts = _tensors(args)
    if not ts:
        return "-"
    dtype = str(ts[0].dtype).removeprefix("torch.")
    short = {"float32": "f32", "float64": "f64", "bfloat16": "bf16", "float16": "f16"}
    text = f"{short.get(dtype, dtype)}{list(ts[0].shape)}".replace(" ", "")
    return text + (f"+{len(ts) - 1}" if len(ts) > 1 else "")


def op_cases(opinfos: Sequence[Any], size: int) -> list[Case]:
    """One case per OpInfo, on its largest float32 sample (scaled up towards ``size``)."""
    cases: list[Case] = []
    seen: set[str] = set()
    for oi in opinfos:
        dtype = torch.float32 if torch.float32 in oi.dtypes else oi.dtypes[0]
        name = oi.name
        if dtype != torch.float32:
            name = f"{name}[{str(dtype).removeprefix('torch.')}]"
        base, n = name, 1
        while name in seen:
            n += 1
            name = f"{base}#{n}"
        seen.add(name)
        cases.append(_op_case(oi, name, dtype, size))
    return cases


def _op_case(oi: Any, name: str, dtype: torch.dtype, size: int) -> Case:
    ref = oi.ref
    state: dict[str, Any] = {}

    def sample() -> tuple[tuple[Any, ...], dict[str, Any]]:
        if "sample" not in state:
            samples = list(oi.sample_inputs(dtype, False))
            if not samples:
                raise RuntimeError(f"no {dtype} samples")
            best = max(samples, key=lambda s: _numel((s.args, s.kwargs)))  # first of the largest
            state["sample"] = (tuple(best.args), dict(best.kwargs))
        return state["sample"]  # type: ignore[no-any-return]

    def inputs(k: int) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return scale(sample(), k)  # type: ignore[no-any-return]

    def build() -> tuple[Callable[..., Any], Any]:
        return ref, lambda *a, **kw: ref(*a, **kw)

    def scales() -> list[int]:
        return _scales(_max_scale(sample(), size))

    case = Case(name, build, inputs, scales, dtype=dtype)
    case.compare = oi.compare
    if dtype in (torch.bfloat16, torch.float16):
        case.atol, case.rtol = 2e-2, 3e-2
    case.atol = max(case.atol, oi.atol or 0.0)
    case.rtol = max(case.rtol, oi.rtol or 0.0)
    return case


def _batch(base: int, size: int) -> int:
    return max(1, round(base * size / DEFAULT_SIZE))


class _ConvBnAct(nn.Sequential):
    def __init__(self, act: nn.Module, cin: int = 16, cout: int = 32) -> None:
        super().__init__(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), act)


class _SelfAttention(nn.Module):
    def __init__(self, dim: int = 64, heads: int = 4) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.attn(x, x, x, need_weights=False)[0]
        return out


class _CausalSdpa(nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def _randomize_bn(module: nn.Module) -> nn.Module:
    """BatchNorm's running statistics made non-trivial, so that eval mode computes something."""
    for m in module.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            assert m.running_mean is not None and m.running_var is not None
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
    return module


def layer_cases(size: int) -> list[Case]:
    """The nn layers, in eval mode; their inputs' batch grows with ``size``."""

    def layer(
        name: str, module: Callable[[], nn.Module], make: Callable[[int], tuple[Any, ...]]
    ) -> Case:
        def build() -> tuple[Callable[..., Any], Any]:
            m = _randomize_bn(module()).eval()
            return m, m

        return Case(name, build, lambda k: (make(_batch(1, size)), {}), kind="layer")

    def image(channels: int, hw: int) -> Callable[[int], tuple[Any, ...]]:
        return lambda b: (torch.randn(2 * b, channels, hw, hw),)

    def seq(dim: int, length: int) -> Callable[[int], tuple[Any, ...]]:
        return lambda b: (torch.randn(4 * b, length, dim),)

    def qkv(b: int) -> tuple[Any, ...]:
        return tuple(torch.randn(4 * b, 4, 64, 32) for _ in range(3))

    return [
        layer("nn.ConvBlock", lambda: ConvBlock(16), image(3, 32)),
        layer("nn.conv_bn_relu", lambda: _ConvBnAct(nn.ReLU()), image(16, 16)),
        layer("nn.conv_bn_hardswish", lambda: _ConvBnAct(nn.Hardswish()), image(16, 16)),
        layer("nn.conv_bn_silu", lambda: _ConvBnAct(nn.SiLU()), image(16, 16)),
        layer(
            "nn.dwconv_bn_relu6",
            lambda: nn.Sequential(
                nn.Conv2d(32, 32, 3, padding=1, groups=32, bias=False),
                nn.BatchNorm2d(32),
                nn.ReLU6(),
            ),
            image(32, 16),
        ),
        layer("nn.MultiheadAttention", _SelfAttention, seq(64, 64)),
        layer("nn.sdpa_causal", _CausalSdpa, qkv),
        layer(
            "nn.mlp",
            lambda: nn.Sequential(nn.Linear(128, 512), nn.GELU(), nn.Linear(512, 128)),
            seq(128, 32),
        ),
        layer("nn.LayerNorm", lambda: nn.LayerNorm(256), seq(256, 64)),
        layer("nn.GroupNorm", lambda: nn.GroupNorm(8, 64), image(64, 16)),
        layer(
            "nn.Embedding",
            lambda: nn.Embedding(1000, 128),
            lambda b: (torch.randint(0, 1000, (16 * b, 32)),),
        ),
        layer(
            "nn.TransformerEncoderLayer",
            lambda: nn.TransformerEncoderLayer(64, 4, 256, batch_first=True),
            seq(64, 64),
        ),
    ]


# ---------------------------------------------------------------------------------------------
# Measurement


@dataclass
class Row:
    name: str
    kind: str
    input: str = "-"
    eager: float = math.nan  # seconds
    thunder: float = math.nan
    calls: int = 0  # bound symbols of the execution trace but returns and dels
    eager_calls: int = 0
    inputs: int = 0  # tensors the prologue reads: tensor arguments, a layer's parameters, buffers
    error: str = ""  # "<stage>: FAIL: <type>: <message>"
    note: str = ""

    @property
    def failed(self) -> bool:
        return bool(self.error)


class RanEagerly(Exception):
    """thunder.jit could not trace the call and ran it eagerly: its figures would be eager's."""


def failure(e: BaseException, width: int = 100) -> str:
    lines = str(e).strip().splitlines()
    text = f"{type(e).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    return text if len(text) <= width else text[: width - 3] + "..."


class _CountCalls(TorchFunctionMode):
    """Counts top-level torch calls that return tensors (not ``dim()``, ``shape``...)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if any(isinstance(v, torch.Tensor) for v in tree_flatten(out)[0]):
            self.count += 1
        return out


def eager_calls(fn: Callable[..., Any], args: Any, kwargs: Any) -> int:
    """Top-level torch calls of one eager call (-1: it cannot run under a TorchFunctionMode).
    A call of its own: torch may compute differently under the mode (``F.l1_loss`` with a
    ``weight`` ignores the weight there), so the checked result never comes from it."""
    counter = _CountCalls()
    ins = _clone((args, kwargs))
    try:
        with counter:
            fn(*ins[0], **ins[1])
    except Exception:
        return -1
    return counter.count


def trace_calls(jfn: Any) -> int:
    """Calls of the execution trace: bound symbols but returns, ``del`` and python plumbing."""
    from thunder_ir.tags import OpTag

    trace = thunder.last_traces(jfn)[-1]
    skip = {OpTag.RETURN, OpTag.DELETE}
    return sum(
        1
        for b in trace.bound_symbols
        if not (skip & set(b.sym.tags)) and not b.sym.id.startswith(("python", "prims."))
    )


def _clone(x: Any) -> Any:
    return tree_map(lambda v: v.detach().clone() if isinstance(v, torch.Tensor) else v, x)


def _check(case: Case, got: Any, expected: Any) -> None:
    """Thunder's outputs and written inputs against eager's (a random op's outputs by its own
    comparison, and not its inputs)."""
    (out_t, ins_t), (out_e, ins_e) = got, expected
    if case.compare is not None:
        case.compare(out_t, out_e)
        return
    out_t, out_e = tree_flatten(out_t)[0], tree_flatten(out_e)[0]
    torch.testing.assert_close(
        out_t, out_e, equal_nan=True, atol=case.atol, rtol=case.rtol, check_dtype=True
    )
    torch.testing.assert_close(
        _tensors(ins_t), _tensors(ins_e), equal_nan=True, atol=case.atol, rtol=case.rtol
    )


def _time_once(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(case: Case, repeat: int, seconds: float, size: int) -> Row:
    """One row: the largest workable scale of the case's inputs, eager's and thunder's steady
    times, the calls, or the first exception that stopped it."""
    row = Row(case.name, case.kind)
    try:
        scales = case.scales()
        fn, target = case.build()
    except Exception as e:
        row.error = f"sample: {failure(e)}"
        return row
    errors: list[str] = []
    i = 0
    while i < len(scales):
        k, last = scales[i], i == len(scales) - 1
        i += 1
        try:
            args, kwargs = case.inputs(k)
        except Exception as e:
            errors.append(f"sample: {failure(e)}")
            continue
        row.input = _describe((args, kwargs))
        fits = True if last else _fits_on_meta(fn, args, kwargs, size)
        if fits is False:
            continue
        try:
            with _memory_capped(None if fits else TRIAL_MEMORY_BYTES):
                ins_e = _clone((args, kwargs))
                out_e = fn(*ins_e[0], **ins_e[1])
                again = _clone((args, kwargs))
                eager_once = _time_once(lambda: fn(*again[0], **again[1]))
        except Exception as e:
            errors.append(f"eager: {failure(e)}")
            continue
        too_big = fits is None and _numel(out_e) > OUTPUT_FACTOR * size
        if not last and (eager_once > EAGER_BUDGET_S or too_big):
            continue
        row.eager_calls = eager_calls(fn, args, kwargs)
        row.inputs = len(_tensors((args, kwargs)))
        if isinstance(target, nn.Module):  # the prologue reads parameters and buffers too
            row.inputs += sum(1 for _ in target.parameters()) + sum(1 for _ in target.buffers())
        try:
            jfn = thunder.jit(target)
            ins_t = _clone((args, kwargs))
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                out_t = jfn(*ins_t[0], **ins_t[1])
            if thunder.compile_stats(jfn).eager_fallbacks:
                notes = [str(w.message) for w in caught if str(w.message).startswith("thunder")]
                raise RanEagerly(notes[0] if notes else "the call ran eagerly")
            row.calls = trace_calls(jfn)
        except Exception as e:
            errors.append(f"thunder: {failure(e)}")
            if last:
                break
            i = len(scales) - 1  # retry on the sample itself
            continue
        try:
            _check(case, (out_t, ins_t), (out_e, ins_e))
        except Exception as e:
            errors.append(f"check: {failure(e)}")
            if last:
                break
            i = len(scales) - 1
            continue
        # Steady times: both on the same inputs (an in-place op writes them for both alike).
        ins = _clone((args, kwargs))

        def eager_fn() -> Any:
            return fn(*ins[0], **ins[1])

        def thunder_fn() -> Any:
            return jfn(*ins[0], **ins[1])

        try:
            for _ in range(2):
                eager_fn()
                thunder_fn()
            per_round = _time_once(eager_fn) + _time_once(thunder_fn)
            n = max(5, min(repeat, int(seconds / max(per_round, 1e-9))))
            row.eager, row.thunder = median_times([eager_fn, thunder_fn], n)
        except Exception as e:
            errors.append(f"timing: {failure(e)}")
            break
        scaled_failures = [e for e in errors if e.startswith(("thunder", "check"))]
        if scaled_failures:  # thunder failed on a scaled sample, not on the sample itself
            row.note = f"unscaled sample; scaled: {scaled_failures[-1]}"
        return row
    row.error = errors[-1] if errors else "no sample fits"
    return row


def _fits_on_meta(fn: Callable[..., Any], args: Any, kwargs: Any, size: int) -> bool | None:
    """Whether the outputs of ``fn`` on these input shapes stay within OUTPUT_FACTOR * size
    elements, asked of torch's meta device (no memory, no compute); None for an op meta cannot
    run (data dependent shapes, shapes torch rejects): the eager call decides, memory capped."""

    def meta(x: Any) -> Any:
        return torch.empty_like(x, device="meta") if isinstance(x, torch.Tensor) else x

    try:
        out = fn(*tree_map(meta, args), **tree_map(meta, kwargs))
    except Exception:
        return None
    return _numel(out) <= OUTPUT_FACTOR * size


@contextlib.contextmanager
def _memory_capped(extra: int | None) -> Any:
    """Runs the block with at most ``extra`` more bytes of address space than the process maps
    now (None: uncapped): an allocation beyond fails with an error instead of the machine
    running out of memory. Where the cap cannot be set, the block is not run (MemoryError)."""
    if extra is None:
        yield
        return
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        with open("/proc/self/statm") as f:
            mapped = int(f.read().split()[0]) * resource.getpagesize()
        cap = mapped + extra if hard == resource.RLIM_INFINITY else min(mapped + extra, hard)
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    except (ImportError, OSError, ValueError) as e:
        raise MemoryError(f"cannot cap this trial's memory ({e})") from e
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


OVERHEAD_INPUTS = (1, 2, 4, 8)


@dataclass
class Overhead:
    """Eager's and thunder.jit's steady seconds of ``torch.neg(a)`` on a one-element tensor ``a``,
    with ``n - 1`` more one-element tensors passed and unused, for n in OVERHEAD_INPUTS: thunder's
    prologue checks every tensor it is given, so its overhead grows with the inputs. (Not
    ``a + 1``: thunder passes the 1 as a ready tensor constant, which makes its add faster than
    eager's and the difference understate the overhead by half.)"""

    eager: dict[int, float]
    thunder: dict[int, float]

    def __call__(self, inputs: int) -> float:
        """The overhead for a call with ``inputs`` tensors: linear between the measured counts,
        extrapolated beyond them by the last slope (0 inputs count as 1)."""
        ns = sorted(self.eager)
        over = {n: self.thunder[n] - self.eager[n] for n in ns}
        inputs = max(inputs, ns[0])
        for lo, hi in zip(ns, ns[1:]):
            if inputs <= hi or hi == ns[-1]:
                return over[lo] + (over[hi] - over[lo]) * (inputs - lo) / (hi - lo)
        return over[ns[0]]


def per_call_overhead(repeat: int, rounds: int = 3) -> Overhead:
    """``rounds`` rounds over the input counts, each a median of ``repeat`` interleaved calls;
    per count, the round of the median difference (a burst of load elsewhere on the machine
    spoils one round, not the figure); the overhead then made non-decreasing in the count."""

    def neg(a: torch.Tensor, *unused: torch.Tensor) -> torch.Tensor:
        return torch.neg(a)

    runners = {}
    for n in OVERHEAD_INPUTS:
        jfn = thunder.jit(neg)
        xs = [torch.randn(1) for _ in range(n)]
        for _ in range(3):
            neg(*xs)
            jfn(*xs)
        runners[n] = (lambda xs=xs: neg(*xs), lambda xs=xs, jfn=jfn: jfn(*xs))
    samples: dict[int, list[tuple[float, float]]] = {n: [] for n in OVERHEAD_INPUTS}
    for _ in range(rounds):
        for n, fns in runners.items():
            eager, jitted = median_times(list(fns), repeat)
            samples[n].append((eager, jitted))
    eager_s, jitted_s, floor = {}, {}, -math.inf
    for n in OVERHEAD_INPUTS:
        e, t = sorted(samples[n], key=lambda s: s[1] - s[0])[len(samples[n]) // 2]
        floor = max(floor, t - e)
        eager_s[n], jitted_s[n] = e, e + floor
    return Overhead(eager_s, jitted_s)


# ---------------------------------------------------------------------------------------------
# Report


def adjusted(row: Row, overhead: Overhead) -> float:
    """``(thunder - overhead) / eager``: above 1, slower than eager beyond the overhead."""
    return (row.thunder - overhead(row.inputs)) / row.eager if row.eager > 0 else math.inf


def is_slower(row: Row, overhead: Overhead, margin: float) -> bool:
    """Slower than eager beyond the per-call overhead (for the row's count of inputs) and a
    margin of eager's time, against the noise of a shared machine."""
    return not row.failed and row.thunder - overhead(row.inputs) > row.eager * (1 + margin)


def print_report(rows: list[Row], overhead: Overhead, margin: float, show_all: bool) -> None:
    e1, t1 = overhead.eager[1], overhead.thunder[1]
    more = ", ".join(f"{n}: {overhead(n) * 1e6:.2f} us" for n in sorted(overhead.eager)[1:])
    print(
        f"per-call overhead: {(t1 - e1) * 1e6:.2f} us (thunder.jit {t1 * 1e6:.2f} us - eager "
        f"{e1 * 1e6:.2f} us, torch.neg on one element); with more tensor inputs: {more}"
    )
    ok = [r for r in rows if not r.failed]
    slower = [r for r in ok if is_slower(r, overhead, margin)]
    shown = sorted(ok if show_all else slower, key=lambda r: -adjusted(r, overhead))
    what = "all cases" if show_all else "slower than eager beyond the per-call overhead"
    print(
        f"{what}, worst first; ovh: the per-call overhead for the case's tensor inputs, adj = "
        f"(thunder - ovh) / eager (slower: adj > {1 + margin:.2f}), calls: execution trace vs eager"
    )
    header = ["op", "input", "eager us", "thunder us", "ratio", "ovh us", "adj", "calls", "check"]
    lines = [
        [
            r.name,
            r.input,
            f"{r.eager * 1e6:.1f}",
            f"{r.thunder * 1e6:.1f}",
            f"{r.thunder / r.eager:.2f}x",
            f"{overhead(r.inputs) * 1e6:.1f}",
            f"{adjusted(r, overhead):.2f}x",
            f"{r.calls} vs {r.eager_calls if r.eager_calls >= 0 else '?'}",
            "ok" + (f" ({r.note})" if r.note else ""),
        ]
        for r in shown
    ]
    widths = [max(len(line[i]) for line in [header, *lines]) for i in range(len(header) - 1)]
    right = {2, 3, 4, 5, 6}

    def fmt(cells: list[str]) -> str:
        out = [
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))
        ]
        return "  ".join(out) + "  " + cells[-1]

    print(fmt(header))
    print("-" * len(fmt(header)))
    for line in lines:
        print(fmt(line))
    if not lines:
        print("(none)")
    failed = [r for r in rows if r.failed]
    if failed:
        print(f"failures ({len(failed)}):")
        for r in failed:
            print(f"  {r.name} {r.input}: {r.error}")
    n_ops = sum(1 for r in ok if r.kind == "op")
    print(
        f"summary: {len(ok)} measured ({n_ops} ops, {len(ok) - n_ops} layers), {len(slower)} "
        f"slower than eager beyond the per-call overhead, {len(failed)} failed"
    )


# ---------------------------------------------------------------------------------------------
# Main


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--ops", default="", help="comma-separated case names (default: all)")
    parser.add_argument(
        "--repeat",
        type=int,
        default=0,
        help="timed calls per case, at most (default 500, --quick 100)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="fewer timed calls per case (about a third of the time)",
    )
    parser.add_argument(
        "--size", type=int, default=DEFAULT_SIZE, help="elements of an op's largest input"
    )
    parser.add_argument("--all", action="store_true", help="print every row")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's choice)")
    parser.add_argument(
        "--margin",
        type=float,
        default=0.05,
        help="slower: thunder - overhead > eager * (1 + margin)",
    )
    options = parser.parse_args(argv)
    if not options.repeat:
        options.repeat = 100 if options.quick else 500
    return options


def all_cases(size: int) -> list[Case]:
    return [*op_cases(load_opinfos(), size), *layer_cases(size)]


def select(cases: list[Case], names: str) -> list[Case]:
    wanted = [n for n in names.split(",") if n]
    if not wanted:
        return cases
    known = {c.name for c in cases}
    unknown = sorted(set(wanted) - known)
    if unknown:
        sys.exit(f"unknown op(s) {unknown}; known: {', '.join(sorted(known))}")
    return [c for c in cases if c.name in wanted]


def run(cases: list[Case], options: argparse.Namespace) -> list[Row]:
    """Measures the per-call overhead and every case, and prints the report. Torch's thread
    count and random state are restored afterwards (a test may call this)."""
    threads = torch.get_num_threads()
    try:
        with torch.random.fork_rng(devices=[]):
            if options.threads:
                torch.set_num_threads(options.threads)
            torch.manual_seed(0)
            return _run(cases, options)
    finally:
        torch.set_num_threads(threads)


def _run(cases: list[Case], options: argparse.Namespace) -> list[Row]:
    seconds = 0.15 if options.quick else 0.5  # of timed calls per case, at most
    print(
        f"ops and layers, thunder.jit (default executors) against eager under no_grad; torch "
        f"{torch.__version__}, {torch.get_num_threads()} threads, Python "
        f"{sys.version.split()[0]}; medians of up to {options.repeat} interleaved calls, inputs "
        f"of about {options.size} elements"
    )
    rows = []
    start = time.perf_counter()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        overhead = per_call_overhead(max(options.repeat * 20, 200))
        for n, case in enumerate(cases, 1):
            if n % 100 == 0:
                elapsed = time.perf_counter() - start
                print(f"  {n}/{len(cases)} ({elapsed:.0f} s)", file=sys.stderr, flush=True)
            rows.append(measure(case, options.repeat, seconds, options.size))
    print_report(rows, overhead, options.margin, options.all)
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    options = parse_args(argv)
    cases = select(all_cases(options.size), options.ops)
    run(cases, options)


if __name__ == "__main__":
    main()
